#include "cost/timeline.h"

#include <random>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/error.h"

namespace spmdsim {
namespace {

using ::testing::DoubleNear;
using ::testing::HasSubstr;
using Op = TimelineOp;

constexpr double kMs = 1e-3;

std::string ErrorOf(StepTimeline& t) {
  try {
    t.Run();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(StepTimeline, HeaderExampleOverlapsTheCollectiveWithTheSecondCompute) {
  StepTimeline t(2, 0.0);
  const int32_t g = t.AddGroup({0, 1});
  for (int64_t p = 0; p < 2; ++p) {
    t.SetProgram(p, {Op::Compute(kMs, 0), Op::Start(7, g, 2 * kMs, 1), Op::Compute(kMs, 0), Op::Wait(7, 1),
                     Op::Compute(kMs, 0)});
  }
  const std::vector<DeviceTimes> times = t.Run();
  for (const DeviceTimes& d : times) {
    EXPECT_DOUBLE_EQ(d.end, 4 * kMs);
    EXPECT_DOUBLE_EQ(d.compute, 3 * kMs);
    EXPECT_DOUBLE_EQ(d.exposed_comm, 1 * kMs);
    EXPECT_DOUBLE_EQ(d.comm, 2 * kMs);
    EXPECT_DOUBLE_EQ(d.comm_by_category[1], 2 * kMs);
    EXPECT_DOUBLE_EQ(d.exposed_by_category[1], 1 * kMs);
  }
}

// The header example with its intervals recorded: when each op ran on its stream, and the compute stream's waits.
TEST(StepTimeline, RecordsWhenEachOpRan) {
  StepTimeline t(2, 0.0);
  const int32_t g = t.AddGroup({0, 1});
  for (int64_t p = 0; p < 2; ++p) {
    t.SetProgram(p, {Op::Compute(kMs, 0), Op::Start(7, g, 2 * kMs, 1), Op::Compute(kMs, 0), Op::Wait(7, 1),
                     Op::Compute(kMs, 0), Op::Send(1 - p, 3, kMs, 2), Op::Recv(1 - p, 3, 2)});
  }
  std::vector<std::vector<OpInterval>> intervals;
  const std::vector<DeviceTimes> times = t.Run(&intervals);
  ASSERT_EQ(intervals.size(), 2u);
  for (const std::vector<OpInterval>& ops : intervals) {
    ASSERT_EQ(ops.size(), 7u);
    const std::vector<std::pair<double, double>> want = {
        {0, 1}, {1, 3}, {1, 2}, {2, 3}, {3, 4}, {4, 5}, {4, 5}};  // ms: compute, collective, compute, exposed
                                                                   // wait, compute, send, receive wait
    for (size_t i = 0; i < want.size(); ++i) {
      EXPECT_NEAR(ops[i].start, want[i].first * kMs, 1e-15) << "op " << i;
      EXPECT_NEAR(ops[i].end, want[i].second * kMs, 1e-15) << "op " << i;
    }
  }
  // The same times as without recording.
  StepTimeline u(2, 0.0);
  const int32_t h = u.AddGroup({0, 1});
  for (int64_t p = 0; p < 2; ++p) {
    u.SetProgram(p, {Op::Compute(kMs, 0), Op::Start(7, h, 2 * kMs, 1), Op::Compute(kMs, 0), Op::Wait(7, 1),
                     Op::Compute(kMs, 0), Op::Send(1 - p, 3, kMs, 2), Op::Recv(1 - p, 3, 2)});
  }
  const std::vector<DeviceTimes> plain = u.Run();
  for (size_t p = 0; p < 2; ++p) {
    EXPECT_EQ(times[p].end, plain[p].end);
    EXPECT_EQ(times[p].pipeline_wait, plain[p].pipeline_wait);
    EXPECT_DOUBLE_EQ(times[p].pipeline_wait, kMs);
  }
}

TEST(StepTimeline, ACollectiveStartsAtTheLatestMemberAndWhenEveryStreamIsFree) {
  StepTimeline t(2, 0.0);
  const int32_t g = t.AddGroup({0, 1});
  // Device 1 arrives 3 ms late; device 0's stream is busy until 1.5 ms with an earlier collective of its own.
  const int32_t solo = t.AddGroup({0});
  t.SetProgram(0, {Op::Start(1, solo, 1.5 * kMs, 0), Op::Start(2, g, kMs, 0), Op::Wait(2, 0)});
  t.SetProgram(1, {Op::Compute(3 * kMs, 0), Op::Start(2, g, kMs, 0), Op::Wait(2, 0)});
  const std::vector<DeviceTimes> times = t.Run();
  EXPECT_DOUBLE_EQ(times[0].end, 4 * kMs);
  EXPECT_DOUBLE_EQ(times[1].end, 4 * kMs);
  EXPECT_DOUBLE_EQ(times[0].exposed_comm, 4 * kMs);  // waited for the late member, then the collective
  EXPECT_DOUBLE_EQ(times[1].exposed_comm, 1 * kMs);
}

TEST(StepTimeline, ARecvWaitsForTheSendAndCountsAsPipelineWait) {
  StepTimeline t(2, 0.0);
  t.SetProgram(0, {Op::Compute(2 * kMs, 0), Op::Send(1, 42, 0.5 * kMs, 2)});
  t.SetProgram(1, {Op::Recv(0, 42, 2), Op::Compute(kMs, 0)});
  const std::vector<DeviceTimes> times = t.Run();
  EXPECT_DOUBLE_EQ(times[1].pipeline_wait, 2.5 * kMs);
  EXPECT_DOUBLE_EQ(times[1].end, 3.5 * kMs);
  EXPECT_DOUBLE_EQ(times[0].end, 2.5 * kMs);  // the send's stream
}

TEST(StepTimeline, ComputeSlowsWhileCommunicationIsInFlight) {
  StepTimeline t(1, 0.25);
  const int32_t g = t.AddGroup({0});
  // 1 ms collective overlapping a 2 ms compute: the first ms runs at 0.75 (0.75 ms of work), the rest at full
  // speed (1.25 ms): 2.25 ms.
  t.SetProgram(0, {Op::Start(1, g, kMs, 1), Op::Compute(2 * kMs, 0), Op::Wait(1, 1)});
  const std::vector<DeviceTimes> times = t.Run();
  EXPECT_NEAR(times[0].end, 2.25 * kMs, 1e-12);
  EXPECT_NEAR(times[0].compute, 2.25 * kMs, 1e-12);
  EXPECT_DOUBLE_EQ(times[0].exposed_comm, 0);
}

// Overlap never makes a step slower than running everything one after the other, nor faster than the busier of
// compute and communication (the bound), for random programs without slowdown.
TEST(StepTimeline, OverlapLiesBetweenTheMaximumAndTheSerialSum) {
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> seconds(0.1, 2.0);
  for (int trial = 0; trial < 200; ++trial) {
    StepTimeline t(4, 0.0);
    const int32_t all = t.AddGroup({0, 1, 2, 3});
    std::vector<Op> ops;
    double compute = 0, comm = 0;
    int open = 0;
    for (int i = 0; i < 12; ++i) {
      const double c = seconds(rng);
      ops.push_back(Op::Compute(c, 0));
      compute += c;
      if (rng() % 2 == 0) {
        const double s = seconds(rng);
        ops.push_back(Op::Start(i, all, s, 1, static_cast<uint8_t>(rng() % 2)));
        comm += s;
        ++open;
        if (rng() % 2 == 0) ops.push_back(Op::Wait(i, 1));
        else ops.push_back(Op::Compute(0, 0)), ops.push_back(Op::Wait(i, 1));
      }
    }
    for (int64_t p = 0; p < 4; ++p) t.SetProgram(p, ops);
    const std::vector<DeviceTimes> times = t.Run();
    EXPECT_LE(times[0].end, compute + comm + 1e-12) << "trial " << trial;
    EXPECT_GE(times[0].end, std::max(compute, comm) - 1e-12) << "trial " << trial;
    EXPECT_NEAR(times[0].end, times[0].compute + times[0].exposed_comm, 1e-9) << "trial " << trial;
  }
}

TEST(StepTimeline, ProgramsThatCannotFinishAreNamed) {
  {
    StepTimeline t(2, 0.0);
    const int32_t a = t.AddGroup({0, 1});
    const int32_t b = t.AddGroup({1, 0});
    t.SetProgram(0, {Op::Start(1, a, kMs, 0), Op::Start(2, b, kMs, 0)});
    t.SetProgram(1, {Op::Start(1, b, kMs, 0), Op::Start(2, a, kMs, 0)});
    EXPECT_THAT(ErrorOf(t), HasSubstr("cannot finish: device 0 at op 0 waits for collective #0 on group 0 (1 of 2"));
  }
  {
    StepTimeline t(2, 0.0);
    t.SetProgram(1, {Op::Recv(0, 5, 0)});
    EXPECT_THAT(ErrorOf(t), HasSubstr("device 1 at op 0 waits to receive tag 5 from device 0"));
  }
  {
    StepTimeline t(1, 0.0);
    t.SetProgram(0, {Op::Wait(3, 0)});
    EXPECT_THAT(ErrorOf(t), HasSubstr("waits on handle 3, which it never started"));
  }
  {
    StepTimeline t(2, 0.0);
    const int32_t g = t.AddGroup({0, 1});
    t.SetProgram(0, {Op::Start(1, g, kMs, 0)});
    t.SetProgram(1, {Op::Start(1, g, 2 * kMs, 0)});
    EXPECT_THAT(ErrorOf(t), HasSubstr("another member with"));
  }
  EXPECT_THROW(StepTimeline(0, 0.0), Error);
  EXPECT_THROW(StepTimeline(1, 1.0), Error);
  StepTimeline t(2, 0.0);
  EXPECT_THROW(t.AddGroup({0, 0}), Error);
  EXPECT_THROW(t.AddGroup({2}), Error);
}

// An op with its own duration under communication (its waves on the SMs left) progresses at seconds / that
// duration while a collective runs, at its p2p figure while only sends run, and at full speed otherwise.
TEST(StepTimeline, OpsCarryTheirDurationsUnderCommunication) {
  StepTimeline t(1, 0.0);
  const int32_t g = t.AddGroup({0});
  // 2 ms of compute that would take 4 ms beside a collective; a 1 ms collective starts with it.
  t.SetProgram(0, {Op::Start(1, g, kMs, 0), Op::Compute(2 * kMs, 0, 4 * kMs, 3 * kMs, 0), Op::Wait(1, 0)});
  std::vector<DeviceTimes> d = t.Run();
  // The first ms at half speed (0.5 ms of work), the remaining 1.5 ms alone: 2.5 ms.
  EXPECT_NEAR(d[0].end, 2.5 * kMs, 1e-12);
  StepTimeline sends(2, 0.0);
  sends.SetProgram(0, {Op::Send(1, 7, 2 * kMs, 0), Op::Compute(2 * kMs, 0, 4 * kMs, 3 * kMs, 0)});
  sends.SetProgram(1, {Op::Recv(0, 7, 0)});
  d = sends.Run();
  // Beside the 2 ms send at 2/3 speed (4/3 ms of work), then the remaining 2/3 ms alone.
  EXPECT_NEAR(d[0].end, 8.0 / 3 * kMs, 1e-12);
}

// The host launches each op in order and runs ahead; a device op starts no earlier than its launch.
TEST(StepTimeline, TheHostLaunchesOpsInOrder) {
  StepTimeline t(1, 0.0);
  // Ten 1 us kernels each launched in 10 us: the device waits for the host, 100 us in all.
  std::vector<TimelineOp> ops;
  for (int i = 0; i < 10; ++i) ops.push_back(Op::Compute(1e-6, 0, -1, -1, 10e-6));
  t.SetProgram(0, ops);
  std::vector<DeviceTimes> d = t.Run();
  EXPECT_NEAR(d[0].end, 101e-6, 1e-12);
  EXPECT_NEAR(d[0].host_wait, 91e-6, 1e-12);
  // A long kernel lets the host run ahead: the next short ones are already launched.
  StepTimeline ahead(1, 0.0);
  ahead.SetProgram(0, {Op::Compute(1e-3, 0, -1, -1, 10e-6), Op::Compute(1e-6, 0, -1, -1, 10e-6),
                       Op::Compute(1e-6, 0, -1, -1, 10e-6)});
  d = ahead.Run();
  EXPECT_NEAR(d[0].end, 10e-6 + 1e-3 + 2e-6, 1e-12);
}

}  // namespace
}  // namespace spmdsim
