// Errors spmdsim reports to its users.
//
// Three kinds of failure, three mechanisms (docs/architecture.md, "Errors"):
//  - Bad user input (a spec, a mesh, a scenario file) throws spmdsim::Error: a typed error whose code a caller
//    can inspect (auto-correction looks at it and repairs the input), whose `kind` names the error the peer
//    library raises (JAX's ValueError, DuplicateSpecError, NotImplementedError, ...: a closed ErrorKind), and
//    whose message says what is wrong and what would be valid. The code decides the CLI's exit code and the
//    kind (else the code) Python's exception class, each in one place (ExitCodeFor, python/errors.cc).
//  - A broken internal invariant aborts with file and line (SPMDSIM_CHECK).
//  - An exception thrown by user code on a virtual device is captured by the runtime, every other device is
//    released, and it is rethrown to the caller wrapped in a DeviceError with the device's id (sim/).
//
// Example:
//   try { mesh.AxisSize("tp"); }
//   catch (const spmdsim::Error& e) {
//     if (e.code() == spmdsim::ErrorCode::kNotFound) ...;   // e.what(): "mesh has no axis 'tp'; axes are ..."
//   }
#ifndef SPMDSIM_COMMON_ERROR_H_
#define SPMDSIM_COMMON_ERROR_H_

#include <iosfwd>
#include <stdexcept>
#include <string>
#include <string_view>

#include <fmt/format.h>

namespace spmdsim {

// What went wrong, in the vocabulary of absl::StatusCode / XLA's error codes.
enum class ErrorCode {
  kInvalidArgument,     // the input is malformed or inconsistent (most user errors)
  kNotFound,            // a named thing (axis, preset, parameter, rule) does not exist
  kOutOfRange,          // an index or size outside what is valid
  kFailedPrecondition,  // the call is valid but not in this state (e.g. a collective outside a device)
  kResourceExhausted,   // a virtual device ran out of memory (XLA's RESOURCE_EXHAUSTED)
  kDeadlineExceeded,    // devices did not arrive at a collective within the timeout
  kUnimplemented,       // the peer library does not support it either (JAX's NotImplementedError)
  kAborted,             // a device failed and the others were released
  kInternal,            // a bug in spmdsim; please report it
};

std::string_view ErrorCodeName(ErrorCode code);

// The exception class the peer library (JAX, eformer, Flax, T5X, numpy, Python's re) raises for the same mistake,
// a closed set: control flow may compare kinds, never message text. kNone: the peer has no class of its own
// (or there is no peer); Python then picks the class from the ErrorCode (python/errors.cc).
enum class ErrorKind {
  kNone,
  kValueError,
  kTypeError,
  kKeyError,
  kIndexError,
  kAssertionError,
  kNameError,
  kNotImplementedError,
  kSyntaxError,
  kRuntimeError,
  kReError,              // Python's re.error (a regular expression Python would reject)
  kDuplicateSpecError,   // JAX: a mesh axis named twice in a PartitionSpec (an Exception, not a ValueError)
  kIndivisibleError,     // a dimension its spec's mesh axes do not divide (a ValueError)
  kScenarioError,        // a problem in a scenario file, located file:line:col (a ValueError)
};

// The Python name: "ValueError", "re.error", "DuplicateSpecError", ...; "" for kNone.
std::string_view ErrorKindName(ErrorKind kind);
// Writes ErrorKindName (GoogleTest prints kinds with it), "none" for kNone.
std::ostream& operator<<(std::ostream& os, ErrorKind kind);

class Error : public std::runtime_error {
 public:
  // `kind` is the peer's exception class where one exists (ErrorKind::kValueError, ...).
  Error(ErrorCode code, std::string message, ErrorKind kind = ErrorKind::kNone);

  ErrorCode code() const noexcept { return code_; }
  ErrorKind kind() const noexcept { return kind_; }
  // The message without the code prefix (what() is "<kind or code>: <message>").
  const std::string& message() const noexcept { return message_; }

 private:
  ErrorCode code_;
  ErrorKind kind_;
  std::string message_;
};

// Throws Error(code, fmt::format(format, args...)).
template <typename... Args>
[[noreturn]] void Throw(ErrorCode code, fmt::format_string<Args...> format, Args&&... args) {
  throw Error(code, fmt::format(format, std::forward<Args>(args)...));
}
// Same, with the peer's exception name.
template <typename... Args>
[[noreturn]] void ThrowKind(ErrorCode code, ErrorKind kind, fmt::format_string<Args...> format, Args&&... args) {
  throw Error(code, fmt::format(format, std::forward<Args>(args)...), kind);
}

namespace internal {
[[noreturn]] void CheckFailed(const char* file, int line, const char* condition, const std::string& message);
}  // namespace internal

}  // namespace spmdsim

// Aborts with file and line when an internal invariant is broken. Not for user input: use Throw.
#define SPMDSIM_CHECK(condition, ...)                                                         \
  do {                                                                                        \
    if (!(condition)) [[unlikely]]                                                            \
      ::spmdsim::internal::CheckFailed(__FILE__, __LINE__, #condition, ::fmt::format("" __VA_ARGS__)); \
  } while (0)

#endif  // SPMDSIM_COMMON_ERROR_H_
