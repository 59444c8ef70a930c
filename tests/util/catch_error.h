// Test helper: runs f, which must throw spmdsim::Error, and returns the error so a test can inspect its code,
// kind and message. Records a test failure when nothing (or something else) is thrown.
//
// Example:
//   Error e = CatchError([&] { PartitionSpec::Parse("P(('x', ('y',)))"); });
//   EXPECT_EQ(e.kind(), "ValueError");
#ifndef SPMDSIM_TESTS_UTIL_CATCH_ERROR_H_
#define SPMDSIM_TESTS_UTIL_CATCH_ERROR_H_

#include <gtest/gtest.h>

#include "common/error.h"

namespace spmdsim {

template <typename F>
Error CatchError(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e;
  }
  ADD_FAILURE() << "no spmdsim::Error thrown";
  return Error(ErrorCode::kInternal, "none");
}

}  // namespace spmdsim

#endif  // SPMDSIM_TESTS_UTIL_CATCH_ERROR_H_
