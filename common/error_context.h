// Rethrowing an error with context: where it happened in front of its message, nothing of the original lost.
//
// Example:
//   try {
//     ValidateSpec(spec, mesh, shape);
//   } catch (const Error& e) {
//     RethrowWithContext(e, fmt::format("--array '{}': {}", name, e.message()));
//   }
// throws an Error with e's code and kind and the new message; the original (a SpecError with its problems, a
// DeviceError with its device) is nested in it: std::rethrow_if_nested(thrown) rethrows it.
#ifndef SPMDSIM_COMMON_ERROR_CONTEXT_H_
#define SPMDSIM_COMMON_ERROR_CONTEXT_H_

#include <exception>
#include <string>
#include <utility>

#include "common/error.h"

namespace spmdsim {

// REQUIRES: called inside the handler that caught `error` (the original is std::current_exception()).
// `kind` replaces the error's kind when given (not kNone).
[[noreturn]] inline void RethrowWithContext(const Error& error, std::string message,
                                            ErrorKind kind = ErrorKind::kNone) {
  std::throw_with_nested(Error(error.code(), std::move(message), kind == ErrorKind::kNone ? error.kind() : kind));
}

}  // namespace spmdsim

#endif  // SPMDSIM_COMMON_ERROR_CONTEXT_H_
