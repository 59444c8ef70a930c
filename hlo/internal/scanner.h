// Scanner: a cursor over HLO text that knows where it is (file:line:col) and fails with one-line errors.
// Internal to hlo/ (the parser and the attribute readers).
#ifndef SPMDSIM_HLO_INTERNAL_SCANNER_H_
#define SPMDSIM_HLO_INTERNAL_SCANNER_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "hlo/ir.h"

namespace spmdsim::hlo::internal {

// Deepest nesting the parser follows (tuple shapes, literal braces, attribute braces): beyond it the text is
// refused, so hostile input cannot exhaust the stack.
inline constexpr int kMaxNesting = 64;
// Largest rank of an array shape.
inline constexpr int kMaxRank = 32;

// The text being parsed, its file name and where its lines start (for locations in O(log lines)).
struct Source {
  Source(std::string_view text, std::string file);
  std::string_view text;
  std::string file;
  std::vector<size_t> line_starts;
};

class Scanner {
 public:
  // The scanner covers [begin, end) of the source's text (a sub-range for attribute values, so that locations
  // stay those of the file).
  Scanner(const Source& source, size_t begin, size_t end)
      : text_(source.text), source_(&source), pos_(begin), end_(end) {}
  explicit Scanner(const Source& source) : Scanner(source, 0, source.text.size()) {}
  const Source& source() const { return *source_; }

  size_t pos() const { return pos_; }
  void set_pos(size_t pos) { pos_ = pos; }
  bool AtEnd() const { return pos_ >= end_; }
  char Peek() const { return pos_ < end_ ? text_[pos_] : '\0'; }
  char PeekAt(size_t ahead) const { return pos_ + ahead < end_ ? text_[pos_ + ahead] : '\0'; }
  std::string_view text() const { return text_; }
  std::string_view Rest() const { return text_.substr(pos_, end_ - pos_); }

  // Skips blanks, line breaks and /* ... */ comments.
  void SkipSpace();
  // Skips blanks and comments but not line breaks.
  void SkipBlanks();
  // After SkipSpace: consumes `c` and returns true when it is next.
  bool TryConsume(char c);
  bool TryConsume(std::string_view word);  // a literal token (e.g. "->")
  // Consumes `c` (after SkipSpace) or fails "expected 'c' <context>, found ...".
  void Expect(char c, std::string_view context);
  // A name or keyword: [A-Za-z0-9_.\-$]+ with an optional leading '%'. Fails when there is none.
  std::string_view Name(std::string_view what);
  // The same, or empty (nothing consumed) when none is next.
  std::string_view TryName();
  // A decimal integer (optional '-'), checked against int64. Fails with `what` when there is none.
  int64_t Int(std::string_view what);
  // A quoted string with C escapes (\n \t \' \" \\ \xNN \NNN ...); returns its unescaped value as valid UTF-8
  // (ValidUtf8).
  std::string QuotedString(std::string_view what);
  // A balanced value: a quoted string, or a run up to the next ',' / blank / line break at depth 0, where
  // (), [] and {} nest. Returns the text range [begin, end) (empty when a ',' or a line break is next).
  std::pair<size_t, size_t> RawValue(std::string_view what);

  // Where `offset` is, as TextLocation.
  TextLocation LocationOf(size_t offset) const;
  // "file:line:col" of `offset`.
  std::string Where(size_t offset) const;
  // Throws Error(kInvalidArgument) "file:line:col: message" at the current position (or `offset`).
  [[noreturn]] void Fail(const std::string& message) const { FailAt(pos_, message); }
  [[noreturn]] void FailAt(size_t offset, const std::string& message) const;
  // What is at the cursor, quoted, for "found ..." in messages ("end of text" at the end).
  std::string Found() const;

 private:
  std::string_view text_;
  const Source* source_;
  size_t pos_;
  size_t end_;
};

// `text` with every byte that does not start a valid UTF-8 sequence replaced by U+FFFD, so that every string the
// parser keeps can go into JSON and Python (a module's op_name may hold any bytes).
// Example: ValidUtf8("a\xffb") == "a\xef\xbf\xbdb";  ValidUtf8("caf\xc3\xa9") is unchanged.
std::string ValidUtf8(std::string_view text);

// The typed attribute readers (attributes.cc). Each parses the value text of one attribute in [begin, end) of
// the module text and fails at the offending column.
std::vector<int64_t> ReadIntList(Scanner& s, std::string_view what);  // {1,2,3} or {}
std::vector<SliceDim> ReadSlice(Scanner& s);
std::vector<PadDim> ReadPadding(Scanner& s);
std::vector<WindowDim> ReadWindow(Scanner& s);
ConvDims ReadDimLabels(Scanner& s, int* rank);
ReplicaGroups ReadReplicaGroups(Scanner& s);
std::vector<std::pair<int64_t, int64_t>> ReadPairs(Scanner& s);
Sharding ReadSharding(Scanner& s, int depth);
// metadata={op_name="..." stack_frame_id=N ...}: the items spmdsim keeps, into `a`.
void ReadMetadata(Scanner& s, Attributes* a);
// frontend_attributes={key="value",...} (a value may also be braced text, as the module header's are).
std::map<std::string, std::string> ReadFrontendAttributes(Scanner& s);
std::vector<OutputOperandAlias> ReadOutputOperandAliasing(Scanner& s);  // {{0}: (1, {}), ...}
std::vector<InputOutputAlias> ReadInputOutputAliases(Scanner& s);       // { {0}: (0, {}, may-alias), ... }
// backend_config's value (a JSON object, or a quoted string holding one) into a->backend_config and the fields it
// types (backend_config.cc). Text that is not JSON is kept as text; a known_trip_count that is not an integer
// from 0 to 2^50 fails at its column.
void ReadBackendConfig(Scanner& s, Attributes* a);
ComparisonDirection ReadDirection(Scanner& s);
ComparisonType ReadComparisonType(Scanner& s);
bool ReadBool(Scanner& s, std::string_view what);

// The FileNames / FunctionNames / FileLocations / StackFrames sections after the header (debug_info.cc), as the
// stack frames they define (frame i + 1 at [i]); none when the text has no FileNames next.
std::vector<StackFrame> ReadDebugInfo(Scanner& s);

// Shapes (parser.cc): "f32[2,3]{1,0}", "(f32[], s32[2])", "token[]".
Shape ReadShape(Scanner& s, int depth);
// A constant's literal for `shape` (literal.cc): "0", "{1, 2}", "{ {1,2}, {3,4} }", "true", "-inf", "{...}".
Literal ReadLiteral(Scanner& s, const Shape& shape);

}  // namespace spmdsim::hlo::internal

#endif  // SPMDSIM_HLO_INTERNAL_SCANNER_H_
