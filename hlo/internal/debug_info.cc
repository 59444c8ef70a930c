// The debug information XLA prints between the module header and the computations (xla/hlo/parser/hlo_parser.cc
// ParseStackFrameIndex), in this order, each a keyword on its own line and numbered entries:
//   FileNames       1 "/work/step.py"
//   FunctionNames   1 "main"
//   FileLocations   1 {file_name_id=1 function_name_id=1 line=287 end_line=287 column=14 end_column=14}
//   StackFrames     1 {file_location_id=1 parent_frame_id=1}        (parent_frame_id: the parent's id + 1; 1: none)
// Entries are numbered 1, 2, ... in order (the numbers written are not checked, as XLA does not); every id must
// name an entry of its section, and a frame's parent must come before it (so that the chain ends).
#include <algorithm>
#include <map>
#include <string>

#include "common/user_text.h"
#include "hlo/internal/scanner.h"

namespace spmdsim::hlo::internal {
namespace {

struct Field {
  int64_t value = 0;
  size_t at = 0;
};

bool NextIsEntry(Scanner& s) {
  s.SkipSpace();
  return s.Peek() >= '0' && s.Peek() <= '9';
}

void ExpectKeyword(Scanner& s, std::string_view keyword) {
  const size_t at = s.pos();
  if (s.TryName() != keyword) {
    s.set_pos(at);
    s.Fail(fmt::format("expected the debug information's {} section, found {}", keyword, s.Found()));
  }
}

std::vector<std::string> ReadNames(Scanner& s, std::string_view section) {
  std::vector<std::string> names;
  while (NextIsEntry(s)) {
    s.Int(fmt::format("a {} entry number", section));
    names.push_back(s.QuotedString(fmt::format("a {} entry", section)));
    if (names.size() > (size_t{1} << 24)) s.Fail(fmt::format("too many {} entries", section));
  }
  return names;
}

// "{key=n key=n ...}" with exactly the keys of `required` (and of `optional`).
std::map<std::string, Field, std::less<>> ReadFields(Scanner& s, std::initializer_list<std::string_view> required,
                                                     std::initializer_list<std::string_view> optional) {
  std::map<std::string, Field, std::less<>> fields;
  s.SkipSpace();
  const size_t open = s.pos();
  s.Expect('{', "to open a debug information entry");
  while (!s.TryConsume('}')) {
    const size_t at = s.pos();
    const std::string_view key = s.Name("a field name");
    const bool known = std::find(required.begin(), required.end(), key) != required.end() ||
                       std::find(optional.begin(), optional.end(), key) != optional.end();
    if (!known) s.FailAt(at, fmt::format("unknown field {} in a debug information entry", QuoteForError(key)));
    s.Expect('=', fmt::format("after {}", key));
    s.SkipSpace();
    Field f{0, s.pos()};
    f.value = s.Int(key);
    if (!fields.emplace(std::string(key), f).second) s.FailAt(at, fmt::format("{} is given twice", key));
    s.TryConsume(',');
  }
  for (std::string_view key : required) {
    if (fields.find(key) == fields.end()) s.FailAt(open, fmt::format("the entry has no {}", key));
  }
  return fields;
}

// The 1-based id `f` must name one of `count` entries of `section`.
void ExpectId(Scanner& s, const Field& f, std::string_view what, size_t count, std::string_view section) {
  if (f.value < 1 || f.value > static_cast<int64_t>(count)) {
    s.FailAt(f.at, fmt::format("{} {} names no {} entry (there are {})", what, f.value, section, count));
  }
}

}  // namespace

std::vector<StackFrame> ReadDebugInfo(Scanner& s) {
  s.SkipSpace();
  const size_t start = s.pos();
  if (s.TryName() != "FileNames") {
    s.set_pos(start);
    return {};
  }
  const std::vector<std::string> files = ReadNames(s, "FileNames");
  ExpectKeyword(s, "FunctionNames");
  const std::vector<std::string> functions = ReadNames(s, "FunctionNames");
  ExpectKeyword(s, "FileLocations");
  std::vector<StackFrame> locations;
  while (NextIsEntry(s)) {
    s.Int("a FileLocations entry number");
    const auto f = ReadFields(s, {"file_name_id", "function_name_id", "line"}, {"end_line", "column", "end_column"});
    ExpectId(s, f.at("file_name_id"), "file_name_id", files.size(), "FileNames");
    ExpectId(s, f.at("function_name_id"), "function_name_id", functions.size(), "FunctionNames");
    StackFrame& l = locations.emplace_back();
    l.file = files[static_cast<size_t>(f.at("file_name_id").value - 1)];
    l.function = functions[static_cast<size_t>(f.at("function_name_id").value - 1)];
    l.line = f.at("line").value;
    auto get = [&](std::string_view key) { const auto it = f.find(key); return it == f.end() ? 0 : it->second.value; };
    l.end_line = get("end_line");
    l.column = get("column");
    l.end_column = get("end_column");
    if (locations.size() > (size_t{1} << 24)) s.Fail("too many FileLocations entries");
  }
  ExpectKeyword(s, "StackFrames");
  std::vector<StackFrame> frames;
  while (NextIsEntry(s)) {
    s.Int("a StackFrames entry number");
    const auto f = ReadFields(s, {"file_location_id", "parent_frame_id"}, {});
    ExpectId(s, f.at("file_location_id"), "file_location_id", locations.size(), "FileLocations");
    const Field& parent = f.at("parent_frame_id");
    const int64_t id = static_cast<int64_t>(frames.size()) + 1;
    if (parent.value < 1 || parent.value > id) {
      s.FailAt(parent.at, fmt::format("parent_frame_id {} of frame {} must be from 1 (no parent) to {} (a frame "
                                      "before it, plus one)", parent.value, id, id));
    }
    StackFrame& frame = frames.emplace_back(locations[static_cast<size_t>(f.at("file_location_id").value - 1)]);
    frame.parent_id = parent.value - 1;
    if (frames.size() > (size_t{1} << 24)) s.Fail("too many StackFrames entries");
  }
  return frames;
}

}  // namespace spmdsim::hlo::internal
