#include "scenario/yaml_text.h"

#include <algorithm>
#include <cctype>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

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

namespace {

// One line of the text: its indentation (leading spaces) and what follows.
struct YamlLine {
  int number = 0;          // 1-based
  std::string_view whole;  // without the newline
  int indent = 0;          // leading spaces (a tab ends the count)
  std::string_view content;
  bool has_content() const { return !content.empty() && content[0] != '#'; }
};

std::vector<YamlLine> LinesOf(std::string_view text) {
  std::vector<YamlLine> lines;
  size_t pos = 0;
  for (int number = 1; pos <= text.size(); ++number) {
    const size_t end = text.find('\n', pos);
    YamlLine l;
    l.number = number;
    l.whole = text.substr(pos, end == std::string_view::npos ? std::string_view::npos : end - pos);
    if (!l.whole.empty() && l.whole.back() == '\r') l.whole.remove_suffix(1);
    while (l.indent < static_cast<int>(l.whole.size()) && l.whole[static_cast<size_t>(l.indent)] == ' ') ++l.indent;
    l.content = Trim(l.whole);
    lines.push_back(l);
    if (end == std::string_view::npos) break;
    pos = end + 1;
  }
  return lines;
}

// The key a line starts ("preset" of "preset: cpu:8", "kind" of "- kind: model"), abbreviated, or its text.
std::string KeyOf(std::string_view content) {
  while (content.substr(0, 2) == "- ") content = Trim(content.substr(2));
  const size_t colon = content.find(": ");
  std::string_view key = colon != std::string_view::npos ? content.substr(0, colon)
                         : !content.empty() && content.back() == ':' ? content.substr(0, content.size() - 1)
                                                                      : content;
  return QuoteForError(Trim(key));
}

// The value after "key: " on a line ("" when the key opens a nested block or the rest is a comment).
std::string_view ValueAfterKey(std::string_view content) {
  while (content.substr(0, 2) == "- ") content = Trim(content.substr(2));
  const size_t colon = content.find(": ");
  if (colon == std::string_view::npos) return {};
  std::string_view value = Trim(content.substr(colon + 2));
  return !value.empty() && value[0] == '#' ? std::string_view() : value;
}

// The first line up to `last` with a tab in its indentation, and the tab's column.
std::optional<TextPosition> TabInIndentation(const std::vector<YamlLine>& lines, int last) {
  for (const YamlLine& l : lines) {
    if (l.number > last) break;
    if (!l.has_content()) continue;
    const size_t lead = l.whole.find_first_not_of(" \t");
    const size_t tab = l.whole.find('\t');
    if (tab != std::string_view::npos && tab < lead) return TextPosition{l.number, static_cast<int>(tab) + 1};
  }
  return std::nullopt;
}

// The depths a line after `lines[index]` could take, nearest first: "4 spaces (beside 'preset', line 2)".
std::vector<std::string> OpenDepths(const std::vector<YamlLine>& lines, size_t index) {
  std::vector<std::string> out;
  std::vector<int> seen;
  int limit = 1 << 30;
  for (size_t i = index + 1; i-- > 0 && limit > 0;) {
    const YamlLine& l = lines[i];
    if (!l.has_content() || l.indent >= limit) continue;
    limit = l.indent;
    int key_column = l.indent;
    std::string_view rest = l.content;
    std::vector<std::pair<int, std::string>> depths;
    while (rest.substr(0, 2) == "- ") {
      depths.emplace_back(key_column, fmt::format("a new '- ' item, as on line {}", l.number));
      key_column += 2;
      rest = Trim(rest.substr(2));
    }
    const bool key = rest.find(": ") != std::string_view::npos || (!rest.empty() && rest.back() == ':');
    if (key || depths.empty())
      depths.emplace_back(key_column, fmt::format("beside {}, line {}", KeyOf(rest), l.number));
    for (auto it = depths.rbegin(); it != depths.rend(); ++it) {
      if (std::find(seen.begin(), seen.end(), it->first) != seen.end()) continue;
      seen.push_back(it->first);
      out.push_back(fmt::format("{} space{} ({})", it->first, it->first == 1 ? "" : "s", it->second));
    }
  }
  return out;
}

std::string JoinAlternatives(const std::vector<std::string>& parts) {
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (i > 0) out += i + 1 == parts.size() ? " or " : ", ";
    out += parts[i];
  }
  return out;
}

// The content line before line `number` (its index), if any.
std::optional<size_t> PreviousContentLine(const std::vector<YamlLine>& lines, int number) {
  for (size_t i = static_cast<size_t>(std::max(number - 1, 0)); i-- > 0;)
    if (lines[i].has_content()) return i;
  return std::nullopt;
}

}  // namespace

YamlSyntaxError ExplainYamlSyntaxError(std::string_view text, TextPosition position, std::string_view parser_message) {
  const std::vector<YamlLine> lines = LinesOf(text);
  if (std::optional<TextPosition> tab = TabInIndentation(lines, position.line)) {
    return {*tab, fmt::format("a tab indents line {}; YAML indents with spaces only (replace the tab with spaces)",
                              tab->line)};
  }
  const bool in_text = position.line >= 1 && position.line <= static_cast<int>(lines.size());
  const std::optional<size_t> previous = in_text ? PreviousContentLine(lines, position.line) : std::nullopt;
  if (in_text && previous &&
      (parser_message == "end of map not found" || parser_message == "end of sequence not found")) {
    const YamlLine& l = lines[static_cast<size_t>(position.line - 1)];
    return {{l.number, l.indent + 1},
            fmt::format("line {} is indented {} space{}, a depth that no key above it has: indent it {}", l.number,
                        l.indent, l.indent == 1 ? "" : "s", JoinAlternatives(OpenDepths(lines, *previous)))};
  }
  if (in_text && parser_message == "illegal map value") {
    const YamlLine& l = lines[static_cast<size_t>(position.line - 1)];
    const YamlLine* p = previous ? &lines[*previous] : nullptr;
    if (p != nullptr && l.indent > p->indent && !ValueAfterKey(p->content).empty()) {
      return {{l.number, l.indent + 1},
              fmt::format("line {} is indented deeper than line {}, whose key {} already has a value on its line; a "
                          "key holds a value or nested keys, not both: indent line {} as line {} ({} space{}) to put "
                          "it beside {}",
                          l.number, p->number, KeyOf(p->content), l.number, p->number, p->indent,
                          p->indent == 1 ? "" : "s", KeyOf(p->content))};
    }
    if (!ValueAfterKey(ValueAfterKey(l.content)).empty()) {
      return {position, fmt::format("line {} holds a second 'key: value' after a key: put the nested key on a line of "
                                    "its own, or quote the value", l.number)};
    }
  }
  if (parser_message == "end of sequence flow not found" || parser_message == "end of map flow not found") {
    const bool list = parser_message == "end of sequence flow not found";
    return {position, fmt::format("a {} opened above is not closed before this point: add the '{}'",
                                  list ? "[ ... ] list" : "{ ... } mapping", list ? ']' : '}')};
  }
  return {position, std::string(parser_message)};
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
