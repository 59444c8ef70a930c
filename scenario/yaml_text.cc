#include "scenario/yaml_text.h"

#include <cctype>
#include <optional>

#include "common/error.h"
#include "common/strings.h"
#include "common/user_text.h"

namespace spmdsim::scenario {

int SecondYamlDocumentLine(std::string_view text) {
  int line = 0;
  bool content_seen = false;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t end = text.find('\n', pos);
    std::string_view l = text.substr(pos, end == std::string_view::npos ? std::string_view::npos : end - pos);
    ++line;
    const bool marker = l.substr(0, 3) == "---" && (l.size() == 3 || std::isspace(static_cast<unsigned char>(l[3])));
    if (marker && content_seen) return line;
    std::string_view t = Trim(l);
    if (marker || (!t.empty() && t[0] != '#' && t[0] != '%')) content_seen = true;
    if (end == std::string_view::npos) break;
    pos = end + 1;
  }
  return 0;
}

TextPosition LeadingFlowEntry(std::string_view text) {
  int line = 0;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t end = text.find('\n', pos);
    std::string_view l = text.substr(pos, end == std::string_view::npos ? std::string_view::npos : end - pos);
    ++line;
    size_t start = 0;
    if (l.substr(0, 3) == "---" && (l.size() == 3 || std::isspace(static_cast<unsigned char>(l[3])))) start = 3;
    if (start == 0 && !l.empty() && l[0] == '%') start = l.size();  // a directive
    while (start < l.size() && std::isspace(static_cast<unsigned char>(l[start]))) ++start;
    if (start < l.size() && l[start] != '#') {
      if (l[start] == ',') return {line, static_cast<int>(start) + 1};
      return {0, 0};
    }
    if (end == std::string_view::npos) break;
    pos = end + 1;
  }
  return {0, 0};
}

void CheckYamlText(std::string_view text, const std::string& file, std::string_view what, std::string_view kind) {
  if (std::optional<size_t> bad = FindInvalidUtf8(text)) {
    TextPosition p = PositionOf(text, *bad);
    ThrowKind(ErrorCode::kInvalidArgument, std::string(kind), "{}:{}:{}: byte 0x{:02x} is not UTF-8; {} is UTF-8 text",
              file, p.line, p.column, static_cast<unsigned char>(text[*bad]), what);
  }
  if (int line = SecondYamlDocumentLine(text); line > 0) {
    ThrowKind(ErrorCode::kInvalidArgument, std::string(kind),
              "{}:{}:1: a second YAML document starts here; {} holds one document (remove the '---' and what "
              "follows, or put it in its own file)",
              file, line, what);
  }
  // yaml-cpp 0.7 never returns (and grows without bound) on a document whose first token is a flow entry.
  if (TextPosition p = LeadingFlowEntry(text); p.line > 0) {
    ThrowKind(ErrorCode::kInvalidArgument, std::string(kind),
              "{}:{}:{}: ',' cannot start a document (it separates the entries of a [...] or {{...}} collection); "
              "{} starts with a key such as 'name:'",
              file, p.line, p.column, what);
  }
}

}  // namespace spmdsim::scenario
