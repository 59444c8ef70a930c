#include "sim/memory.h"

#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/error.h"

namespace spmdsim::internal {
namespace {

using ::testing::HasSubstr;

TEST(DeviceMemory, TracksCurrentAndPeakBytes) {
  DeviceMemory m(0, 0, 1000);
  m.Charge(600);
  m.Charge(300);
  m.Release(600);
  EXPECT_EQ(m.stats().in_use_bytes, 300);
  EXPECT_EQ(m.stats().peak_bytes, 900);
  EXPECT_EQ(m.stats().capacity_bytes, 1000);
  m.ResetPeak();
  EXPECT_EQ(m.stats().peak_bytes, 300);
}

TEST(DeviceMemory, ExceedingCapacityThrowsResourceExhaustedAndChargesNothing) {
  DeviceMemory m(3, 11, 1000);
  m.Charge(600);
  try {
    m.Charge(600);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kResourceExhausted);
    EXPECT_EQ(e.message(),
              "Out of memory while trying to allocate 600B (600 bytes) on device 11 (position 3): 600B in use of "
              "capacity 1000B (1000 bytes), 400B free");
  }
  EXPECT_EQ(m.stats().in_use_bytes, 600);
  m.Charge(400);  // exactly full is fine
  EXPECT_EQ(m.stats().in_use_bytes, 1000);
}

TEST(DeviceMemory, ConcurrentChargesNeverExceedCapacity) {
  DeviceMemory m(0, 0, 1000);
  std::atomic<int> refused{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 1000; ++i) {
        try {
          m.Charge(7);
        } catch (const Error&) {
          ++refused;
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  // 4000 charges of 7 bytes; 142 fit in 1000 bytes.
  EXPECT_EQ(m.stats().in_use_bytes, 142 * 7);
  EXPECT_EQ(refused.load(), 4000 - 142);
  EXPECT_EQ(m.stats().peak_bytes, 142 * 7);
}

}  // namespace
}  // namespace spmdsim::internal
