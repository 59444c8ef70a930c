#include "sim/runtime.h"

#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <fstream>
#include <iterator>
#include <mutex>
#include <set>
#include <stdexcept>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/strings.h"
#include "sim/internal/fiber_stack.h"

namespace spmdsim {
namespace {

using ::testing::HasSubstr;
using namespace std::chrono_literals;

RuntimeOptions Workers(int n) {
  RuntimeOptions o;
  o.num_threads = n;
  return o;
}

// --- Scheduling, for every worker count and several device counts -------------------------------------------

class RuntimeScheduling : public ::testing::TestWithParam<std::tuple<int, int64_t>> {
 protected:
  int workers() const { return std::get<0>(GetParam()); }
  int64_t devices() const { return std::get<1>(GetParam()); }
};

TEST_P(RuntimeScheduling, RunsTheFunctionOnceOnEveryDevice) {
  Runtime runtime(Mesh::Iota({devices()}, {"x"}), Workers(workers()));
  EXPECT_EQ(runtime.num_workers(), std::min<int64_t>(workers(), devices()));
  std::vector<std::atomic<int>> calls(devices());
  runtime.Run([&](DeviceContext& d) { ++calls[d.position()]; });
  for (auto& c : calls) EXPECT_EQ(c.load(), 1);
}

TEST_P(RuntimeScheduling, BarrierReleasesAllDevicesTogether) {
  Runtime runtime(Mesh::Iota({devices()}, {"x"}), Workers(workers()));
  constexpr int kRounds = 20;
  std::atomic<int64_t> arrived{0};
  std::atomic<int> violations{0};
  runtime.Run([&](DeviceContext& d) {
    for (int r = 1; r <= kRounds; ++r) {
      arrived.fetch_add(1);
      d.Barrier();
      // Nobody leaves round r before everyone arrived at it, nor before the others left round r-1.
      int64_t seen = arrived.load();
      if (seen < r * devices() || seen > (r + 1) * devices()) ++violations;
      d.Barrier();
    }
  });
  EXPECT_EQ(violations.load(), 0);
  EXPECT_EQ(arrived.load(), kRounds * devices());
}

TEST_P(RuntimeScheduling, WritesBeforeABarrierAreVisibleAfterIt) {
  Runtime runtime(Mesh::Iota({devices()}, {"x"}), Workers(workers()));
  std::vector<int64_t> slots(devices(), -1);  // plain memory: the barrier must order it
  std::atomic<int> wrong{0};
  runtime.Run([&](DeviceContext& d) {
    for (int64_t r = 0; r < 5; ++r) {
      slots[d.position()] = r * 1000 + d.position();
      d.Barrier();
      int64_t next = (d.position() + 1) % devices();
      if (slots[next] != r * 1000 + next) ++wrong;
      d.Barrier();
    }
  });
  EXPECT_EQ(wrong.load(), 0);
}

TEST_P(RuntimeScheduling, RunCanBeCalledAgainAndReusesTheDevices) {
  Runtime runtime(Mesh::Iota({devices()}, {"x"}), Workers(workers()));
  for (int i = 0; i < 3; ++i) {
    std::atomic<int64_t> sum{0};
    runtime.Run([&](DeviceContext& d) {
      d.Barrier();
      sum += d.position();
    });
    EXPECT_EQ(sum.load(), devices() * (devices() - 1) / 2);
  }
}

TEST_P(RuntimeScheduling, AThrowingDeviceReleasesTheWaitingOnesAndRunRethrowsWithItsPosition) {
  Runtime runtime(Mesh::Iota({devices()}, {"x"}), Workers(workers()));
  const int64_t bad = devices() / 2;
  std::atomic<int> unwound{0};
  struct Guard {
    std::atomic<int>* counter;
    ~Guard() { ++*counter; }
  };
  try {
    runtime.Run([&](DeviceContext& d) {
      Guard guard{&unwound};
      d.Barrier();
      if (d.position() == bad) throw std::out_of_range("index 9 past the end");
      d.Barrier();
      d.Barrier();
    });
    FAIL() << "no error";
  } catch (const DeviceError& e) {
    EXPECT_EQ(e.position(), bad);
    EXPECT_EQ(e.device_id(), bad);
    EXPECT_EQ(e.code(), ErrorCode::kAborted);
    EXPECT_THAT(e.message(), HasSubstr(fmt::format("device {} (position {}, coords ({},)) failed: index 9 past the end",
                                                   bad, bad, bad)));
    EXPECT_THROW(e.RethrowNested(), std::out_of_range);  // the original type is reachable
  }
  EXPECT_EQ(unwound.load(), devices());  // every device's stack was unwound (destructors ran)
  // The runtime is usable again.
  std::atomic<int> ran{0};
  runtime.Run([&](DeviceContext& d) {
    d.Barrier();
    ++ran;
  });
  EXPECT_EQ(ran.load(), devices());
}

INSTANTIATE_TEST_SUITE_P(WorkersAndDevices, RuntimeScheduling,
                         ::testing::Combine(::testing::Values(1, 2, 4), ::testing::Values(1, 2, 3, 8, 64)),
                         [](const auto& param_info) {
                           return fmt::format("w{}_n{}", std::get<0>(param_info.param),
                                              std::get<1>(param_info.param));
                         });

TEST(Runtime, Runs4096DevicesThroughBarriers) {
  Runtime runtime(Mesh::Iota({64, 64}, {"x", "y"}));
  std::atomic<int64_t> passes{0};
  runtime.Run([&](DeviceContext& d) {
    for (int r = 0; r < 3; ++r) {
      d.Barrier();
      ++passes;
    }
  });
  EXPECT_EQ(passes.load(), 3 * 4096);
}

// A Runtime per workload (scenario runs, Python calls) reuses the stacks the previous one released when the shape
// matches: same mapping, same guard pages, the old contents dropped; another shape maps anew.
TEST(StackPool, AReleasedPoolIsTakenByTheNextMapOfTheSameShape) {
  using internal::StackPool;
  const size_t usable = 48 * 1024;  // a shape no other test uses
  char* first = nullptr;
  bool guarded = false;
  {
    StackPool a;
    a.Map(3, usable);
    first = static_cast<char*>(a.StackAt(0).base);
    guarded = a.guarded();
    first[a.stride() - 64] = 42;  // near the top of stack 0, as a fiber would leave it
  }
  StackPool b;
  b.Map(3, usable);
  EXPECT_EQ(b.StackAt(0).base, first);
  EXPECT_EQ(b.guarded(), guarded);
  EXPECT_EQ(first[b.stride() - 64], 0) << "a spare's pages are dropped";
  if (!b.guarded()) {
    EXPECT_EQ(std::memcmp(b.canary_base(), &internal::kStackCanary, sizeof(uint64_t)), 0);
  }
  StackPool c;
  c.Map(5, usable);
  EXPECT_NE(c.StackAt(0).base, first);
  EXPECT_EQ(c.count(), 5);
}

TEST(Runtime, MoreWorkersThanDevicesAreNotUsed) {
  Runtime runtime(Mesh::Iota({3}, {"x"}), Workers(8));
  EXPECT_EQ(runtime.num_workers(), 3);
}

TEST(Runtime, DefaultWorkerCountIsTheNumberOfCores) {
  Runtime runtime(Mesh::Iota({4096}, {"x"}));
  EXPECT_EQ(runtime.num_workers(), static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
}

TEST(Runtime, DevicesSeeTheirPlaceInTheMesh) {
  // Mesh {x:2, y:3} over ids in reverse order: position p holds device 5 - p.
  Mesh mesh(DeviceArray({2, 3}, {5, 4, 3, 2, 1, 0}), {"x", "y"}, std::make_shared<const Topology>(Topology::Cpu(6)));
  Runtime runtime(mesh, Workers(2));
  std::vector<std::string> seen(6);
  runtime.Run([&](DeviceContext& d) {
    seen[d.position()] = fmt::format("{}:{}:{},{}", d.position(), d.device_id(), d.coords()[0], d.coords()[1]);
    EXPECT_EQ(d.mesh().size(), 6);
    EXPECT_EQ(d.num_devices(), 6);
  });
  EXPECT_EQ(seen[0], "0:5:0,0");
  EXPECT_EQ(seen[4], "4:1:1,1");
}

TEST(Runtime, OptionsAreValidated) {
  Mesh mesh = Mesh::Iota({2}, {"x"});
  RuntimeOptions o;
  o.num_threads = -1;
  EXPECT_THROW(Runtime(mesh, o), Error);
  o = {};
  o.fiber_stack_bytes = 1024;
  EXPECT_THROW(Runtime(mesh, o), Error);
  o = {};
  o.device_memory_bytes = -5;
  EXPECT_THROW(Runtime(mesh, o), Error);
  o = {};
  o.collective_timeout = 0ms;
  EXPECT_THROW(Runtime(mesh, o), Error);
  EXPECT_THROW(Runtime(Mesh(), {}), Error);
}

TEST(Runtime, RunInsideADeviceIsAnError) {
  Runtime runtime(Mesh::Iota({2}, {"x"}), Workers(1));
  try {
    runtime.Run([&](DeviceContext&) { runtime.Run([](DeviceContext&) {}); });
    FAIL() << "no error";
  } catch (const DeviceError& e) {
    EXPECT_EQ(e.code(), ErrorCode::kFailedPrecondition);
    EXPECT_THAT(e.message(), HasSubstr("Runtime::Run called from inside a virtual device"));
  }
}

TEST(Runtime, ADeviceErrorKeepsTheCodeAndKindOfAnSpmdsimError) {
  Runtime runtime(Mesh::Iota({4}, {"x"}), Workers(2));
  try {
    runtime.Run([](DeviceContext& d) {
      if (d.position() == 1) ThrowKind(ErrorCode::kInvalidArgument, ErrorKind::kValueError, "bad shape");
      d.Barrier();
    });
    FAIL() << "no error";
  } catch (const DeviceError& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_EQ(e.kind(), ErrorKind::kValueError);
    EXPECT_EQ(e.position(), 1);
    EXPECT_THAT(e.message(), HasSubstr("failed: ValueError: bad shape"));
  }
}

TEST(Runtime, WithSeveralFailingDevicesTheLowestPositionIsReported) {
  Runtime runtime(Mesh::Iota({8}, {"x"}), Workers(2));
  try {
    runtime.Run([](DeviceContext& d) {
      if (d.position() >= 5) throw std::runtime_error(fmt::format("failure on {}", d.position()));
      d.Barrier();
    });
    FAIL() << "no error";
  } catch (const DeviceError& e) {
    EXPECT_EQ(e.position(), 5);
  }
}

// --- SPMD violations ---------------------------------------------------------------------------------------

TEST(Runtime, DevicesCallingDifferentCollectivesAreNamedWithWhatEachCalled) {
  Runtime runtime(Mesh::Iota({4}, {"x"}), Workers(2));
  try {
    runtime.Run([](DeviceContext& d) {
      Array x = Array::Zeros({4}, DType::kF32);
      if (d.position() == 2) {
        d.AllGather(x, "x");
      } else {
        d.Psum(x, "x");
      }
    });
    FAIL() << "no error";
  } catch (const DeviceError&) {
    FAIL() << "expected a collective error, not a device error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_THAT(e.message(), HasSubstr("devices called different collectives"));
    EXPECT_THAT(e.message(), HasSubstr("positions 0-1, 3 called psum(float32[4], axes=('x',))"));
    EXPECT_THAT(e.message(), HasSubstr("position 2 called all_gather(float32[4], axes=('x',), axis=0, tiled=False)"));
  }
}

TEST(Runtime, DevicesCallingACollectiveWithDifferentShapesAreAnError) {
  for (int workers : {1, 2}) {
    Runtime runtime(Mesh::Iota({2, 2}, {"x", "y"}), Workers(workers));
    try {
      runtime.Run([](DeviceContext& d) {
        Array x = Array::Zeros({d.position() == 3 ? 8 : 4}, DType::kF32);
        d.Psum(x, "y");
      });
      FAIL() << "no error";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
      EXPECT_THAT(e.message(), HasSubstr("positions 0-2 called psum(float32[4], axes=('y',))"));
      EXPECT_THAT(e.message(), HasSubstr("position 3 called psum(float32[8], axes=('y',))"));
    }
  }
}

TEST(Runtime, DevicesCallingACollectiveOverDifferentAxesAreAnError) {
  Runtime runtime(Mesh::Iota({2, 2}, {"x", "y"}), Workers(2));
  try {
    runtime.Run([](DeviceContext& d) {
      Array x = Array::Zeros({2}, DType::kI32);
      d.AllGather(x, d.position() == 0 ? Axes({"x", "y"}) : Axes({"y", "x"}), 0, true);
    });
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_THAT(e.message(), HasSubstr("position 0 called all_gather(int32[2], axes=('x', 'y'), axis=0, tiled=True)"));
    EXPECT_THAT(e.message(),
                HasSubstr("positions 1-3 called all_gather(int32[2], axes=('y', 'x'), axis=0, tiled=True)"));
  }
}

TEST(Runtime, ADeviceThatReturnsWhileOthersWaitIsReported) {
  for (int workers : {1, 2, 4}) {
    Runtime runtime(Mesh::Iota({4}, {"x"}), Workers(workers));
    try {
      runtime.Run([](DeviceContext& d) {
        if (d.position() == 1) return;
        d.Barrier();
      });
      FAIL() << "no error";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kFailedPrecondition);
      EXPECT_THAT(e.message(), HasSubstr("position 1 returned; positions 0, 2-3 wait at barrier()"));
    }
  }
}

TEST(Runtime, ADeviceThatNeverArrivesHitsTheDeadlineAndRunReturns) {
  for (int workers : {1, 2}) {
    SCOPED_TRACE(workers);
    RuntimeOptions o = Workers(workers);
    o.collective_timeout = 200ms;
    Runtime runtime(Mesh::Iota({4}, {"x"}), o);
    std::atomic<bool> release{false};
    auto start = std::chrono::steady_clock::now();
    try {
      runtime.Run([&](DeviceContext& d) {
        if (d.position() == 3) {
          while (!release.load()) std::this_thread::sleep_for(1ms);  // stuck (its worker is busy)
        }
        d.Barrier();
      });
      FAIL() << "no error";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kDeadlineExceeded);
      EXPECT_THAT(e.message(), HasSubstr("within the timeout of 200 ms: position 3 never arrived (still running)"));
      EXPECT_THAT(e.message(), HasSubstr("wait at barrier"));
    }
    EXPECT_LT(std::chrono::steady_clock::now() - start, 10s);
    release = true;  // the device reaches its barrier, is unwound, and the runtime can run again
    std::atomic<int> ran{0};
    runtime.Run([&](DeviceContext& d) {
      d.Barrier();
      ++ran;
    });
    EXPECT_EQ(ran.load(), 4);
  }
}

#if !defined(SPMDSIM_ASAN) && !defined(SPMDSIM_TSAN)  // the sanitizers report stack overflows themselves
// Recursion the compiler cannot turn into a loop: each frame keeps 1 KiB alive across the call.
__attribute__((noinline)) int Recurse(int depth) {
  volatile char frame[1024];
  frame[0] = static_cast<char>(depth);
  if (depth == 0) return frame[0];
  return Recurse(depth - 1) + frame[0];
}

TEST(RuntimeDeathTest, ADeviceThatOverflowsItsStackIsNamedBeforeTheProcessEnds) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        RuntimeOptions o = Workers(2);
        o.fiber_stack_bytes = 32 * 1024;
        Runtime runtime(Mesh::Iota({4}, {"x"}), o);
        runtime.Run([](DeviceContext& d) {
          d.Barrier();
          if (d.position() == 2) Recurse(1000);  // ~1 MiB of frames
          d.Barrier();
        });
      },
      "the virtual device at position 2 overflowed its 32 KiB fiber stack .*raise RuntimeOptions::fiber_stack_bytes");
}

// Leaves fewer free memory mappings than the stacks' guard pages need (vm.max_map_count minus the mappings the
// process has, minus StackPool's margin of 8192): one region whose every other page is PROT_NONE.
void UseUpTheMappingBudget() {
  std::ifstream max_in("/proc/sys/vm/max_map_count");
  int64_t max_count = 65530;
  max_in >> max_count;
  std::ifstream maps("/proc/self/maps");
  const int64_t now = std::count(std::istreambuf_iterator<char>(maps), std::istreambuf_iterator<char>(), '\n');
  const int64_t pairs = (max_count - now - 8192) / 2 + 16;
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  char* region = static_cast<char*>(mmap(nullptr, 2 * page * static_cast<size_t>(pairs), PROT_READ | PROT_WRITE,
                                         MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0));
  if (region == MAP_FAILED) return;
  for (int64_t i = 0; i < pairs; ++i) mprotect(region + 2 * page * static_cast<size_t>(i), page, PROT_NONE);
}

// Recursion whose frames are written through (a dense overflow, as from deep recursion of small frames), down
// to the first frame below `floor`.
__attribute__((noinline)) int RecurseDenselyBelow(uintptr_t floor) {
  volatile char frame[512];
  for (char& c : const_cast<char(&)[512]>(frame)) c = 1;
  if (reinterpret_cast<uintptr_t>(&frame[0]) < floor) return frame[0];
  return RecurseDenselyBelow(floor) + frame[7];
}

// Without guard pages (more stacks than the mapping budget allows guard pages for) the worker checks a canary
// word below each stack when its device switches out, and names the device as the guard page's report does.
TEST(RuntimeDeathTest, ADeviceThatOverflowsAStackWithoutAGuardPageIsNamedByItsCanary) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        UseUpTheMappingBudget();
        RuntimeOptions o = Workers(2);
        o.fiber_stack_bytes = 32 * 1024;
        Runtime runtime(Mesh::Iota({4}, {"x"}), o);
        runtime.Run([](DeviceContext& d) {
          d.Barrier();
          // 33 KiB below a frame near the top of the 32 KiB stack: past the stack into the 4 KiB canary page
          // below it, and no further. (Further is the top of position 1's stack: its frames, which the other
          // worker may be resuming, would be overwritten and it would crash first, with a SIGSEGV.)
          char top = 0;
          if (d.position() == 2) RecurseDenselyBelow(reinterpret_cast<uintptr_t>(&top) - 33 * 1024);
          d.Barrier();
        });
      },
      ::testing::KilledBySignal(SIGABRT),  // the canary's abort, not a guard page's SIGSEGV
      "the virtual device at position 2 overflowed its 32 KiB fiber stack .*raise RuntimeOptions::fiber_stack_bytes");
}
#endif

TEST(Runtime, ManyDevicesComputingInTurnOnOneWorkerAreNotATimeout) {
  // Two workers, four devices each. The first worker's devices compute 120 ms each before the barrier (480 ms
  // in turn) while the second worker's devices wait at it; the timeout is 300 ms. Every device arrives in
  // time; only a Run where no device makes progress for the timeout is stuck (seen under ThreadSanitizer,
  // where a large scenario's devices took longer than 60 s in turn).
  RuntimeOptions o = Workers(2);
  o.collective_timeout = 300ms;
  Runtime runtime(Mesh::Iota({8}, {"x"}), o);
  std::atomic<int> passed{0};
  runtime.Run([&](DeviceContext& d) {
    if (d.position() < 4) std::this_thread::sleep_for(120ms);
    d.Barrier();
    ++passed;
  });
  EXPECT_EQ(passed.load(), 8);
}

TEST(Runtime, TheDeadlineTellsDevicesThatWaitFromDevicesTheirWorkerHasNotResumedYet) {
  // One worker: after the first barrier it resumes position 0 (which waits at the second barrier), then
  // position 1, which never arrives; positions 2-3 passed the first barrier but their worker is stuck in 1.
  RuntimeOptions o = Workers(1);
  o.collective_timeout = 200ms;
  Runtime runtime(Mesh::Iota({4}, {"x"}), o);
  std::atomic<bool> release{false};
  try {
    runtime.Run([&](DeviceContext& d) {
      d.Barrier();
      if (d.position() == 1) {
        while (!release.load()) std::this_thread::sleep_for(1ms);
      }
      d.Barrier();
    });
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kDeadlineExceeded);
    EXPECT_THAT(e.message(), HasSubstr("position 1 never arrived (still running); position 0 wait at barrier"));
    EXPECT_THAT(e.message(), HasSubstr("positions 2-3 passed the last collective and wait for their worker thread"));
    EXPECT_THAT(e.message(), ::testing::Not(HasSubstr("; ;")));
  }
  release = true;
}

TEST(Runtime, ADeviceThatNeverComesBackBlocksTheNextRunWithAClearError) {
  RuntimeOptions o = Workers(2);
  o.collective_timeout = 100ms;
  Runtime runtime(Mesh::Iota({2}, {"x"}), o);
  std::atomic<bool> release{false};
  EXPECT_THROW(runtime.Run([&](DeviceContext& d) {
    if (d.position() == 0) {
      while (!release.load()) std::this_thread::sleep_for(1ms);
    }
    d.Barrier();
  }),
               Error);
  try {
    runtime.Run([](DeviceContext&) {});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kFailedPrecondition);
    EXPECT_THAT(e.message(), HasSubstr("previous Run is still running (positions 0)"));
  }
  release = true;
}

TEST(Runtime, LongComputationWithoutWaitersIsNotATimeout) {
  RuntimeOptions o = Workers(2);
  o.collective_timeout = 50ms;
  Runtime runtime(Mesh::Iota({2}, {"x"}), o);
  runtime.Run([](DeviceContext& d) {
    std::this_thread::sleep_for(150ms);  // every device busy: nobody waits, so no deadline
    d.Barrier();
  });
}

// --- Memory -------------------------------------------------------------------------------------------------

TEST(Runtime, DeviceMemoryDefaultsToTheTopologyAndCanBeOverridden) {
  Runtime from_topology(Mesh::Iota({2}, {"x"}));
  EXPECT_EQ(from_topology.memory_stats(0).capacity_bytes, Mesh::Iota({2}, {"x"}).topology()->memory_bytes());
  Mesh bare(DeviceArray({2}, {0, 1}), {"x"});
  EXPECT_EQ(Runtime(bare).memory_stats(1).capacity_bytes, kDefaultDeviceMemoryBytes);
  RuntimeOptions o;
  o.device_memory_bytes = 4096;
  EXPECT_EQ(Runtime(bare, o).memory_stats(0).capacity_bytes, 4096);
  EXPECT_THROW(from_topology.memory_stats(2), Error);
}

TEST(Runtime, ArraysKeptAfterRunStayChargedToTheirDevice) {
  RuntimeOptions o = Workers(2);
  o.device_memory_bytes = kMiB;
  Runtime runtime(Mesh::Iota({4}, {"x"}), o);
  std::vector<Array> kept(4);
  runtime.Run([&](DeviceContext& d) {
    Array temp = Array::Zeros({1024}, DType::kF32);  // 4 KiB, released on return
    kept[d.position()] = Array::Zeros({256 * (d.position() + 1)}, DType::kF32);
    EXPECT_EQ(d.memory_stats().in_use_bytes, 4096 + 1024 * (d.position() + 1));
  });
  for (int p = 0; p < 4; ++p) {
    EXPECT_EQ(kept[p].charged_position(), p);
    EXPECT_EQ(runtime.memory_stats(p).in_use_bytes, 1024 * (p + 1));
    EXPECT_EQ(runtime.memory_stats(p).peak_bytes, 4096 + 1024 * (p + 1));
  }
  runtime.ResetPeakMemory();
  EXPECT_EQ(runtime.memory_stats(3).peak_bytes, 4096);
  kept.clear();
  EXPECT_EQ(runtime.memory_stats(3).in_use_bytes, 0);
}

TEST(Runtime, RunningOutOfDeviceMemoryIsAResourceExhaustedErrorNamingTheDevice) {
  RuntimeOptions o = Workers(2);
  o.device_memory_bytes = kMiB;
  Runtime runtime(Mesh::Iota({4}, {"x"}), o);
  try {
    runtime.Run([](DeviceContext& d) {
      Array small = Array::Zeros({1024}, DType::kF32);
      if (d.position() == 2) Array big = Array::Zeros({512 * 1024}, DType::kF32);  // 2 MiB
      d.Barrier();
    });
    FAIL() << "no error";
  } catch (const DeviceError& e) {
    EXPECT_EQ(e.code(), ErrorCode::kResourceExhausted);
    EXPECT_EQ(e.position(), 2);
    EXPECT_THAT(e.message(), HasSubstr("Out of memory while trying to allocate 2.00MiB (2097152 bytes) on device 2 "
                                       "(position 2): 4.00KiB in use of capacity 1.00MiB (1048576 bytes)"));
  }
  for (int p = 0; p < 4; ++p) EXPECT_EQ(runtime.memory_stats(p).in_use_bytes, 0);
}

TEST(Runtime, HoldChargesAReplicatedHostArrayOncePerDeviceWithoutCopying) {
  Runtime runtime(Mesh::Iota({8}, {"x"}), Workers(2));
  Array host = Array::Iota({1000}, DType::kF32);
  std::vector<Array> held(8);
  runtime.Run([&](DeviceContext& d) { held[d.position()] = d.Hold(host); });
  for (int p = 0; p < 8; ++p) {
    EXPECT_TRUE(held[p].SharesBufferWith(host));
    EXPECT_EQ(runtime.memory_stats(p).in_use_bytes, 4000);
  }
}

// --- Observer -----------------------------------------------------------------------------------------------

class RecordingObserver : public RuntimeObserver {
 public:
  void OnRunStart(int64_t n) override { runs_started = n; }
  void OnRunEnd(bool ok) override { run_ok = ok; }
  void OnDeviceStart(int64_t p) override {
    std::lock_guard lock(mu);
    started.insert(p);
  }
  void OnDeviceFinish(int64_t p, bool failed) override {
    std::lock_guard lock(mu);
    finished.insert(p);
    if (failed) ++failures;
  }
  void OnCollective(const CollectiveEvent& e) override {
    std::string perm;
    for (const auto& [src, dst] : e.permutation) perm += fmt::format(" {}>{}", src, dst);
    events.push_back(fmt::format("{} {} g{}x{} {}B->{}B {} seq{} first[{}]{}", CollectiveName(e.op),
                                 fmt::join(e.axes, ","), e.num_groups, e.group_size, e.input_bytes_per_device,
                                 e.output_bytes_per_device, DTypeName(e.dtype), e.sequence,
                                 e.groups.empty() ? "" : fmt::format("{}", fmt::join(e.groups[0], ",")), perm));
  }
  std::mutex mu;
  int64_t runs_started = 0;
  bool run_ok = false;
  std::set<int64_t> started, finished;
  int failures = 0;
  std::vector<std::string> events;  // OnCollective never runs concurrently with anything
};

TEST(Runtime, TheObserverSeesDevicesAndEveryCollectiveOnce) {
  RecordingObserver observer;
  RuntimeOptions o = Workers(2);
  o.observer = &observer;
  Runtime runtime(Mesh::Iota({4, 2}, {"x", "y"}), o);
  runtime.Run([](DeviceContext& d) {
    Array x = Array::Zeros({16}, DType::kBF16);
    d.Psum(x, "x");
    d.AllGather(x, {"y", "x"}, 0, true);
    d.Barrier();
  });
  EXPECT_EQ(observer.runs_started, 8);
  EXPECT_TRUE(observer.run_ok);
  EXPECT_EQ(observer.started.size(), 8u);
  EXPECT_EQ(observer.finished.size(), 8u);
  EXPECT_EQ(observer.failures, 0);
  ASSERT_EQ(observer.events.size(), 3u);
  EXPECT_EQ(observer.events[0], "psum x g2x4 32B->32B bfloat16 seq0 first[0,2,4,6]");
  EXPECT_EQ(observer.events[1], "all_gather y,x g1x8 32B->256B bfloat16 seq1 first[0,2,4,6,1,3,5,7]");
  EXPECT_EQ(observer.events[2], "barrier  g1x1 0B->0B float32 seq2 first[]");
}

TEST(Runtime, APpermuteEventCarriesItsPairsAsInGroupIndices) {
  RecordingObserver observer;
  RuntimeOptions o = Workers(2);
  o.observer = &observer;
  Runtime runtime(Mesh::Iota({4, 2}, {"x", "y"}), o);
  runtime.Run([](DeviceContext& d) {
    d.Ppermute(Array::Zeros({2}, DType::kF32), "x", {{0, 1}, {1, -1}, {3, 0}});  // -1 is index 3
  });
  ASSERT_EQ(observer.events.size(), 1u);
  EXPECT_EQ(observer.events[0], "ppermute x g2x4 8B->8B float32 seq0 first[0,2,4,6] 0>1 1>3 3>0");
}

}  // namespace
}  // namespace spmdsim
