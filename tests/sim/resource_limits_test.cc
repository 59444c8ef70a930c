// Host resources that run out end in Error(kResourceExhausted), never in std::bad_alloc or an abort: fiber
// stacks that cannot be mapped, and host buffers larger than the host or than an address-space limit. The
// limits are set in a forked child (setrlimit(RLIMIT_AS), as `prlimit --as` does), which reports through its
// exit code.
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <fstream>
#include <functional>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/host_memory.h"
#include "common/strings.h"
#include "mesh/mesh.h"
#include "sim/runtime.h"

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SPMDSIM_LIMITS_TEST_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define SPMDSIM_LIMITS_TEST_SANITIZED 1
#endif
#endif

namespace spmdsim {
namespace {

using ::testing::HasSubstr;

int64_t MappedBytesNow() {
  std::ifstream statm("/proc/self/statm");
  int64_t pages = 0;
  statm >> pages;
  return pages * sysconf(_SC_PAGESIZE);
}

// Runs `body` in a forked child whose address space may grow by `extra_bytes` beyond what it maps now; returns
// the child's exit code (128 + the signal when it was killed).
int InChildWithAddressSpaceLimit(int64_t extra_bytes, const std::function<int()>& body) {
  const pid_t pid = fork();
  if (pid == 0) {  // child: no gtest assertions, only the exit code
    const rlim_t limit = static_cast<rlim_t>(MappedBytesNow() + extra_bytes);
    rlimit rl{limit, limit};
    if (setrlimit(RLIMIT_AS, &rl) != 0) _exit(90);
    int code = 91;
    try {
      code = body();
    } catch (...) {
      code = 92;
    }
    _exit(code);
  }
  int status = 0;
  if (pid < 0 || waitpid(pid, &status, 0) != pid) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

TEST(ResourceLimits, FiberStacksThatCannotBeMappedAreResourceExhaustedNamingTheDevicesAndTheBytes) {
#if defined(SPMDSIM_LIMITS_TEST_SANITIZED)
  GTEST_SKIP() << "sanitizers reserve terabytes of address space";
#endif
  // 8192 devices need ~557 MB of stacks (64 KiB + a guard page each); the child may map 256 MiB more.
  const int code = InChildWithAddressSpaceLimit(256 * kMiB, [] {
    try {
      Runtime runtime(Mesh::Iota({8192}, {"x"}), RuntimeOptions{.num_threads = 1});
      runtime.Run([](DeviceContext&) {});
      return 1;  // ran: the limit did not bite
    } catch (const Error& e) {
      const std::string m = e.message();
      if (e.code() != ErrorCode::kResourceExhausted) return 2;
      if (m.find("fiber stacks of 8192 virtual devices") == std::string::npos) return 3;
      if (m.find(std::to_string(8192 * (65536 + sysconf(_SC_PAGESIZE))) + " bytes") == std::string::npos) return 4;
      if (m.find("address-space limit (ulimit -v)") == std::string::npos) return 5;
      return 0;
    }
  });
  EXPECT_EQ(code, 0) << "1: no error; 2: another code; 3, 4, 5: the message lacks the devices, the bytes or the "
                        "limit; 92: another exception; >128: killed by a signal";
}

// 65,536 devices with the 1 MiB stacks the engines give them (64 GiB of address space) under a 1 GiB limit: the
// Runtime's constructor refuses them citing the limit, before mapping anything (the mapped address space has
// not grown by the stacks) and before building a device.
TEST(ResourceLimits, SixtyFiveThousandDevicesBeyondTheAddressSpaceLimitAreRefusedUpFront) {
#if defined(SPMDSIM_LIMITS_TEST_SANITIZED)
  GTEST_SKIP() << "sanitizers reserve terabytes of address space";
#endif
  const int code = InChildWithAddressSpaceLimit(kGiB, [] {
    const int64_t before = MappedBytesNow();
    try {
      Runtime runtime(Mesh::Iota({65536}, {"x"}), RuntimeOptions{.num_threads = 1, .fiber_stack_bytes = kMiB});
      return 1;
    } catch (const Error& e) {
      const std::string m = e.message();
      if (e.code() != ErrorCode::kResourceExhausted) return 2;
      if (m.find("cannot map the fiber stacks of 65536 virtual devices: they need 64.25GiB") == std::string::npos)
        return 3;
      if (m.find("the process's address-space limit (ulimit -v) of") == std::string::npos) return 4;
      if (m.find("mapping") != std::string::npos) return 5;  // no mmap was tried
      return MappedBytesNow() - before < 64 * kMiB ? 0 : 6;
    }
  });
  EXPECT_EQ(code, 0) << "1: no error; 2: another code; 3, 4: the message lacks the devices or the limit; 5: it "
                        "failed in mmap; 6: something large was mapped; 92: another exception";
}

// A host-memory check (an array a real run is about to build) honours the address-space limit: refused citing the
// limit although the host has the memory.
TEST(ResourceLimits, TheHostMemoryCheckCitesTheAddressSpaceLimit) {
#if defined(SPMDSIM_LIMITS_TEST_SANITIZED)
  GTEST_SKIP() << "sanitizers reserve terabytes of address space";
#endif
  if (HostMemoryAvailableBytes() < 512 * kMiB) GTEST_SKIP() << "the host itself has less than 512 MiB available";
  const int code = InChildWithAddressSpaceLimit(64 * kMiB, [] {
    if (!AddressSpaceLimitBytes() || AddressSpaceLeftBytes() > 64 * kMiB) return 3;
    try {
      CheckFitsHostMemory("array 'x' (float32 (134217728,))", 512 * kMiB);
      return 1;
    } catch (const Error& e) {
      const bool cited = e.message().find("needs 536870912 bytes (512.00MiB) of host memory; the process's "
                                          "address-space limit (ulimit -v) of") != std::string::npos;
      return e.code() == ErrorCode::kResourceExhausted && cited ? 0 : 2;
    }
  });
  EXPECT_EQ(code, 0) << "1: no error; 2: another error or message; 3: the limit is not seen";
}

TEST(ResourceLimits, AHostArrayLargerThanPhysicalMemoryIsResourceExhaustedBeforeAllocating) {
  try {
    Array::Zeros({int64_t{1} << 40}, DType::kF32);  // 4 TiB
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kResourceExhausted);
    EXPECT_THAT(e.message(), HasSubstr("host memory: allocating an array of 4.00TiB needs 4398046511104 bytes"));
  }
}

TEST(ResourceLimits, AHostArrayBeyondAnAddressSpaceLimitIsResourceExhaustedNotBadAlloc) {
#if defined(SPMDSIM_LIMITS_TEST_SANITIZED)
  GTEST_SKIP() << "sanitizers reserve terabytes of address space";
#endif
  const int code = InChildWithAddressSpaceLimit(64 * kMiB, [] {
    try {
      Array::Zeros({128 * kMiB}, DType::kF32);  // 512 MiB
      return 1;
    } catch (const Error& e) {
      const bool named = e.message().find("host memory: allocating an array of 512.00MiB") != std::string::npos;
      const bool cited = e.message().find("address-space limit (ulimit -v) of") != std::string::npos;
      return e.code() == ErrorCode::kResourceExhausted && named && cited ? 0 : 2;
    }
  });
  EXPECT_EQ(code, 0) << "1: no error; 2: another error; 92: another exception (std::bad_alloc)";
}

}  // namespace
}  // namespace spmdsim
