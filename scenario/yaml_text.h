// Checks on a YAML file's text before it is parsed: UTF-8 throughout, one document only, and not starting with a
// line with a flow entry ',' outside a flow collection (on which yaml-cpp 0.7 can loop forever).
//
// yaml-cpp accepts bytes that are not UTF-8 (and the JSON report written later would fail on them) and
// YAML::Load silently ignores everything after a second document's "---". Every YAML file spmdsim reads
// (scenarios, `spmdsim analyze --file`) goes through CheckYamlText first.
//
// Thread-safe (no state). Errors: Error(kInvalidArgument) of the given kind, with file:line:col.
#ifndef SPMDSIM_SCENARIO_YAML_TEXT_H_
#define SPMDSIM_SCENARIO_YAML_TEXT_H_

#include <string>
#include <string_view>

#include "common/error.h"
#include "common/user_text.h"

namespace spmdsim::scenario {

// Throws at the first byte that is not UTF-8 ("FILE:L:C: byte 0xff is not UTF-8; <what> is UTF-8 text") or at
// a second document's start marker ("FILE:L:1: a second YAML document starts here; <what> holds one
// document ..."). `what` names the kind of file ("a scenario file"); `kind` is the error's kind.
void CheckYamlText(std::string_view text, const std::string& file, std::string_view what, ErrorKind kind);

// The 1-based line and column of the first ',' that starts a line (after indentation or a "---") outside every
// [...] / {...} collection and quoted scalar, or {0, 0}. yaml-cpp 0.7 loops forever, allocating, on some such
// documents (found by fuzzing); CheckYamlText refuses them all.
TextPosition LeadingFlowEntry(std::string_view text);

// yaml-cpp's syntax error at `position` (1-based) with its message `parser_message`, said as a plain sentence
// where the cause is a common slip: a tab in a line's indentation ("a tab indents line 3; YAML indents with
// spaces only"), a line indented to no open level (a dedent: "line 4 is indented 3 spaces, which lines up with
// no key above it ..."), a key nested under a key that already has a value, an unclosed [ or {. The position
// moves to the tab when one is the cause. Other messages are kept as yaml-cpp words them.
struct YamlSyntaxError {
  TextPosition position;
  std::string message;  // without the location: "a tab indents line 2; ..."
};
YamlSyntaxError ExplainYamlSyntaxError(std::string_view text, TextPosition position, std::string_view parser_message);

// The 1-based line of the second document's start marker ("---" at column 0; a marker that opens the first
// document does not count), or 0 when there is none.
int SecondYamlDocumentLine(std::string_view text);

}  // namespace spmdsim::scenario

#endif  // SPMDSIM_SCENARIO_YAML_TEXT_H_
