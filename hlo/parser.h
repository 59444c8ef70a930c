// Reading XLA's HLO text into a verified Module (hlo/ir.h).
//
// Accepted: what `jax.jit(f).lower(*args).compile().as_text()` prints for XLA's CPU, TPU (libtpu) and GPU compilers,
// the `*.before_optimizations.txt` and `*.after_optimizations.txt` files of `XLA_FLAGS=--xla_dump_to=DIR`, and
// hand-written modules in the same syntax: the `HloModule name, key=value, ...` header (input_output_alias and
// frontend_attributes read), the FileNames / FunctionNames / FileLocations / StackFrames debug information (read:
// Module::stack_frame), computations (`[ENTRY] %name (params) -> shape { ... }` with an optional
// `, execution_thread="..."` trailer, callees before callers, as XLA prints them), and instructions
// `[ROOT] %name = shape opcode(operands), attr=value, ...`. Shapes keep their whole layout (tiles, memory space;
// hlo/shape.h). Operands may carry their shapes (`f32[2]{0} %x`, the older form); `/* ... */` comments (XLA's
// `/*index=5*/`) are skipped anywhere. XLA's async shorthand `X-start(...)` / `X-update` / `X-done` of an X that
// has no opcode of that name (`reduce-scatter-start`, `slice-start`, `call-start`) is read as XLA's parser reads
// it: an async-start / -update / -done calling a computation made here, whose root is X with X's attributes
// (AsyncWrapped, hlo/ir.h). Strings are unescaped (C escapes) and made valid UTF-8.
//
// Errors: one Error(kInvalidArgument) whose message starts with "file:line:col: " and says what was expected
// or what is wrong with the value there (an unknown opcode, an operand that is not defined above its use, a
// shape that does not match its operands, ...). The verifier (hlo/verify.h) runs as part of ParseModule.
// Never a crash, a hang or an unbounded allocation: nesting is capped (hlo/internal/scanner.h), constants,
// device lists and shapes are bounded before they are materialised.
//
// Example:
//   std::unique_ptr<Module> m = ParseModule(text, "jit_f.txt");
//   ParseModule("HloModule m\nENTRY e { ROOT x = f32[] foo() }", "m.txt")
//     // throws "m.txt:2:27: unknown opcode 'foo'; ..."
//
// Thread safety: pure functions.
#ifndef SPMDSIM_HLO_PARSER_H_
#define SPMDSIM_HLO_PARSER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "common/strings.h"
#include "hlo/ir.h"

namespace spmdsim::hlo {

// The largest HLO text file spmdsim reads (a module with its large constants printed): 1 GiB.
inline constexpr int64_t kMaxHloFileBytes = kGiB;

// Parses and verifies `text`; `file` names it in messages.
std::unique_ptr<Module> ParseModule(std::string_view text, std::string file = "<text>");
// Parses without verifying (for tests of the verifier itself).
std::unique_ptr<Module> ParseModuleUnverified(std::string_view text, std::string file = "<text>");
// Reads `path` (a regular file of at most kMaxHloFileBytes, common/file.h) and parses it.
std::unique_ptr<Module> LoadModule(const std::string& path);
// One shape as XLA prints it, with its layout: ParseShape("bf16[8,128]{1,0:T(8,128)(2,1)S(1)}"). Throws like
// ParseModule (the column is within `text`).
Shape ParseShape(std::string_view text);

}  // namespace spmdsim::hlo

#endif  // SPMDSIM_HLO_PARSER_H_
