#include "common/error.h"

#include <cstdio>
#include <ostream>
#include <cstdlib>

namespace spmdsim {

std::string_view ErrorCodeName(ErrorCode code) {
  switch (code) {
    case ErrorCode::kInvalidArgument: return "INVALID_ARGUMENT";
    case ErrorCode::kNotFound: return "NOT_FOUND";
    case ErrorCode::kOutOfRange: return "OUT_OF_RANGE";
    case ErrorCode::kFailedPrecondition: return "FAILED_PRECONDITION";
    case ErrorCode::kResourceExhausted: return "RESOURCE_EXHAUSTED";
    case ErrorCode::kDeadlineExceeded: return "DEADLINE_EXCEEDED";
    case ErrorCode::kUnimplemented: return "UNIMPLEMENTED";
    case ErrorCode::kAborted: return "ABORTED";
    case ErrorCode::kInternal: return "INTERNAL";
  }
  return "UNKNOWN";
}

std::string_view ErrorKindName(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::kNone: return "";
    case ErrorKind::kValueError: return "ValueError";
    case ErrorKind::kTypeError: return "TypeError";
    case ErrorKind::kKeyError: return "KeyError";
    case ErrorKind::kIndexError: return "IndexError";
    case ErrorKind::kAssertionError: return "AssertionError";
    case ErrorKind::kNameError: return "NameError";
    case ErrorKind::kNotImplementedError: return "NotImplementedError";
    case ErrorKind::kSyntaxError: return "SyntaxError";
    case ErrorKind::kRuntimeError: return "RuntimeError";
    case ErrorKind::kReError: return "re.error";
    case ErrorKind::kDuplicateSpecError: return "DuplicateSpecError";
    case ErrorKind::kIndivisibleError: return "IndivisibleError";
    case ErrorKind::kScenarioError: return "ScenarioError";
  }
  return "";
}

std::ostream& operator<<(std::ostream& os, ErrorKind kind) {
  return os << (kind == ErrorKind::kNone ? std::string_view("none") : ErrorKindName(kind));
}

Error::Error(ErrorCode code, std::string message, ErrorKind kind)
    : std::runtime_error(fmt::format("{}: {}", kind == ErrorKind::kNone ? ErrorCodeName(code) : ErrorKindName(kind),
                                     message)),
      code_(code),
      kind_(kind),
      message_(std::move(message)) {}

namespace internal {
void CheckFailed(const char* file, int line, const char* condition, const std::string& message) {
  std::fprintf(stderr, "%s:%d: internal check failed: %s%s%s\n", file, line, condition,
               message.empty() ? "" : ": ", message.c_str());
  std::fflush(stderr);
  std::abort();
}
}  // namespace internal

}  // namespace spmdsim
