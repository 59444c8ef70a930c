// Several simulations in one process: two Runtimes (different meshes and programs, each with its own observer
// and op cost sink) run on two threads at once and give exactly what they give one after the other.
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "mesh/mesh.h"
#include "ops/cost.h"
#include "ops/ops.h"
#include "sim/runtime.h"

namespace spmdsim {
namespace {

constexpr size_t kRounds = 200;

class EventLog : public RuntimeObserver {
 public:
  void OnCollective(const CollectiveEvent& e) override {  // never concurrent with itself within one Run
    std::string perm;
    for (const auto& [src, dst] : e.permutation) perm += fmt::format(" {}>{}", src, dst);
    events.push_back(fmt::format("{} {} {}B {}{}", CollectiveName(e.op), fmt::join(e.axes, ","),
                                 e.input_bytes_per_device, e.sequence, perm));
  }
  void OnDeviceFinish(int64_t position, bool failed) override {
    std::lock_guard lock(mu);
    ++finished;
  }
  std::vector<std::string> events;
  std::mutex mu;
  int finished = 0;
};

struct Outcome {
  std::vector<Array> out;
  std::vector<std::string> events;
  std::vector<std::string> costs;  // per device, then per op
  int finished = 0;
};

std::string Describe(const OpCost& c) {
  return fmt::format("{} {} {} {} {}", c.op, c.flops, c.transcendentals, c.bytes_read, c.bytes_written);
}

// Program A on {x: 4, y: 2}: matmuls, psum, all_gather and a ring ppermute, many rounds.
Outcome RunA() {
  EventLog log;
  OpCostTally tally;
  Runtime runtime(Mesh::Iota({4, 2}, {"x", "y"}),
                  RuntimeOptions{.num_threads = 2, .observer = &log, .op_cost_sink = &tally});
  Outcome o;
  o.out.resize(8);
  runtime.Run([&](DeviceContext& d) {
    Array x = Array::Full({4, 8}, DType::kF32, 0.5 + static_cast<double>(d.position()));
    const Array w = Array::Iota({8, 8}, DType::kF32);
    for (size_t round = 0; round < kRounds; ++round) {
      Array h = Tanh(MatMul(x, w));
      h = d.Psum(h, "x");
      h = d.AllGather(h, "y", 0, /*tiled=*/true);
      h = Slice(h, {0, 0}, {4, 8});
      x = d.Ppermute(Mul(h, Array::Scalar<float>(1e-3f)), "x", {{0, 1}, {1, 2}, {2, 3}, {3, 0}});
    }
    o.out[d.position()] = x;
  });
  o.events = log.events;
  o.finished = log.finished;
  for (int64_t p = 0; p < 8; ++p) o.costs.push_back(Describe(tally.TotalFor(p)));
  for (const auto& [name, cost] : tally.ByOp()) o.costs.push_back(Describe(cost));
  return o;
}

// Program B on {z: 6}: exp, reductions, pmax, psum_scatter, all_to_all and a reversing ppermute.
Outcome RunB() {
  EventLog log;
  OpCostTally tally;
  Runtime runtime(Mesh::Iota({6}, {"z"}),
                  RuntimeOptions{.num_threads = 2, .observer = &log, .op_cost_sink = &tally});
  Outcome o;
  o.out.resize(6);
  runtime.Run([&](DeviceContext& d) {
    Array v = Array::Full({6, 3}, DType::kF64, static_cast<double>(d.position()) / 7);
    for (size_t round = 0; round < kRounds; ++round) {
      Array e = Exp(Mul(v, Array::Scalar<double>(0.25)));
      e = d.AllToAll(e, "z", 0, 0, /*tiled=*/true);
      Array m = d.Pmax(Sum(e, {1}), "z");
      Array s = d.PsumScatter(e, "z", 0, /*tiled=*/true);
      v = Sub(Concatenate({s, s, s, s, s, s}, 0), BroadcastTo(ReduceMax(m, {0}), {6, 3}));
      v = d.Ppermute(v, "z", {{0, 5}, {1, 4}, {2, 3}, {3, 2}, {4, 1}, {5, 0}});
    }
    o.out[d.position()] = v;
  });
  o.events = log.events;
  o.finished = log.finished;
  for (int64_t p = 0; p < 6; ++p) o.costs.push_back(Describe(tally.TotalFor(p)));
  for (const auto& [name, cost] : tally.ByOp()) o.costs.push_back(Describe(cost));
  return o;
}

void ExpectSame(const Outcome& got, const Outcome& want) {
  ASSERT_EQ(got.out.size(), want.out.size());
  for (size_t p = 0; p < want.out.size(); ++p) {
    EXPECT_TRUE(got.out[p].BitwiseEquals(want.out[p])) << "position " << p << ": " << got.out[p].ToString()
                                                       << " vs " << want.out[p].ToString();
  }
  EXPECT_EQ(got.events, want.events);
  EXPECT_EQ(got.costs, want.costs);
  EXPECT_EQ(got.finished, want.finished);
}

TEST(ConcurrentRuns, TwoRuntimesOnTwoThreadsGiveExactlyTheSerialResults) {
  const Outcome a = RunA();
  const Outcome b = RunB();
  ASSERT_EQ(a.events.size(), kRounds * 3);
  ASSERT_EQ(b.events.size(), kRounds * 4);
  EXPECT_EQ(a.events[2], "ppermute x 128B 2 0>1 1>2 2>3 3>0");
  for (int trial = 0; trial < 3; ++trial) {
    Outcome ca, cb;
    std::thread ta([&] { ca = RunA(); });
    std::thread tb([&] { cb = RunB(); });
    ta.join();
    tb.join();
    ExpectSame(ca, a);
    ExpectSame(cb, b);
  }
}

}  // namespace
}  // namespace spmdsim
