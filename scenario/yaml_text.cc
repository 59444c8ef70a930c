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
  int line = 1, depth = 0;
  bool line_start = true;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '\n') {
      ++line;
      line_start = true;
      continue;
    }
    if (line_start && (c == ' ' || c == '\t')) continue;
    if (line_start && c == '-' && text.substr(i, 3) == "---") {  // a document marker, then content
      i += 2;
      continue;
    }
    const size_t column = i - (text.rfind('\n', i) == std::string_view::npos ? 0 : text.rfind('\n', i) + 1);
    if (line_start && c == ',' && depth == 0) return {line, static_cast<int>(column) + 1};
    line_start = false;
    if (c == '#' && (i == 0 || text[i - 1] == ' ' || text[i - 1] == '\t')) {  // a comment: skip to the line end
      while (i + 1 < text.size() && text[i + 1] != '\n') ++i;
    } else if (c == '"' || c == '\'') {  // a quoted scalar (newlines inside it are counted)
      for (++i; i < text.size() && text[i] != c; ++i) {
        if (c == '"' && text[i] == '\\') ++i;
        else if (text[i] == '\n') ++line;
      }
    } else if (c == '[' || c == '{') {
      ++depth;
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return {0, 0};
}

void CheckYamlText(std::string_view text, const std::string& file, std::string_view what, ErrorKind kind) {
  if (std::optional<size_t> bad = FindInvalidUtf8(text)) {
    TextPosition p = PositionOf(text, *bad);
    ThrowKind(ErrorCode::kInvalidArgument, kind, "{}:{}:{}: byte 0x{:02x} is not UTF-8; {} is UTF-8 text",
              file, p.line, p.column, static_cast<unsigned char>(text[*bad]), what);
  }
  if (int line = SecondYamlDocumentLine(text); line > 0) {
    ThrowKind(ErrorCode::kInvalidArgument, kind,
              "{}:{}:1: a second YAML document starts here; {} holds one document (remove the '---' and what "
              "follows, or put it in its own file)",
              file, line, what);
  }
  // yaml-cpp 0.7 never returns (and grows without bound) on a flow entry ',' that starts a line outside [...] / {...}.
  if (TextPosition p = LeadingFlowEntry(text); p.line > 0) {
    ThrowKind(ErrorCode::kInvalidArgument, kind,
              "{}:{}:{}: ',' cannot start a line outside a [...] or {{...}} collection (it separates their entries); "
              "in {} a line starts with a key ('name:') or a list item ('- ')",
              file, p.line, p.column, what);
  }
}

}  // namespace spmdsim::scenario
