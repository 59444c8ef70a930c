#include "ops/cost.h"

#include <vector>

#include <gtest/gtest.h>

#include "mesh/mesh.h"
#include "ops/ops.h"
#include "sim/runtime.h"

namespace spmdsim {
namespace {

// Runs fn on the one device of a Runtime whose op cost sink is `sink`.
template <typename F>
void OnOneDevice(OpCostSink* sink, F fn) {
  Runtime runtime(Mesh::Iota({1}, {"x"}), RuntimeOptions{.num_threads = 1, .op_cost_sink = sink});
  runtime.Run([&](DeviceContext&) { fn(); });
}

TEST(OpCost, HeaderExampleCostsAnAbstractMatMulWithoutComputing) {
  OpCostTally tally;
  Runtime runtime(Mesh::Iota({1}, {"x"}), RuntimeOptions{.op_cost_sink = &tally});
  runtime.Run([](DeviceContext&) {
    MatMul(Array::Abstract({128, 256}, DType::kBF16), Array::Abstract({256, 64}, DType::kBF16));
  });
  OpCost total = tally.Total();
  EXPECT_EQ(total.flops, 2 * 128 * 256 * 64);
  EXPECT_EQ(total.bytes_read, (128 * 256 + 256 * 64) * 2);
  EXPECT_EQ(total.bytes_written, 128 * 64 * 2);
  EXPECT_EQ(tally.num_records(), 1);
  EXPECT_EQ(tally.ByOp().count("dot_general"), 1u);
  EXPECT_EQ(tally.TotalFor(0).flops, total.flops);
}

TEST(OpCost, OpsOnHostThreadsOrInARuntimeWithoutASinkChargeNothingAndEachRuntimeChargesItsOwn) {
  OpCostTally a, b;
  Add(Array::Zeros({4}, DType::kF32), Array::Zeros({4}, DType::kF32));  // host thread: no sink
  OnOneDevice(nullptr, [] { Exp(Array::Zeros({4}, DType::kF32)); });
  OnOneDevice(&a, [] { Exp(Array::Zeros({4}, DType::kF32)); });
  OnOneDevice(&b, [] {
    Exp(Array::Zeros({4}, DType::kF32));
    Exp(Array::Zeros({4}, DType::kF32));
  });
  EXPECT_EQ(a.num_records(), 1);
  EXPECT_EQ(b.num_records(), 2);
}

TEST(OpCost, ConventionsPerOpKind) {
  OpCostTally tally;
  Runtime runtime(Mesh::Iota({1}, {"x"}), RuntimeOptions{.num_threads = 1, .op_cost_sink = &tally});
  const Array x = Array::Abstract({10, 20}, DType::kF32);
  const Array b = Array::Abstract({20}, DType::kF32);
  auto last = [&](auto&& f) {
    tally.Clear();
    runtime.Run([&](DeviceContext&) { f(); });
    return tally.Total();
  };
  OpCost add = last([&] { Add(x, b); });
  EXPECT_EQ(add.flops, 200);
  EXPECT_EQ(add.transcendentals, 0);
  EXPECT_EQ(add.bytes_read, 800 + 80);
  EXPECT_EQ(add.bytes_written, 800);
  OpCost exp = last([&] { Exp(x); });
  EXPECT_EQ(exp.flops, 200);
  EXPECT_EQ(exp.transcendentals, 200);
  OpCost sum = last([&] { Sum(x, {1}); });
  EXPECT_EQ(sum.flops, 200);
  EXPECT_EQ(sum.bytes_written, 40);
  OpCost tr = last([&] { Transpose(x); });
  EXPECT_EQ(tr.flops, 0);
  EXPECT_EQ(tr.bytes_read, 800);
  EXPECT_EQ(tr.bytes_written, 800);
  OpCost rs = last([&] { Reshape(x, {200}); });
  EXPECT_EQ(rs.bytes_read + rs.bytes_written + rs.flops, 0);
  OpCost cast = last([&] { Cast(x, DType::kBF16); });
  EXPECT_EQ(cast.bytes_written, 400);
  OpCost bmm = last([&] { Einsum("bhqd,bhkd->bhqk", Array::Abstract({2, 4, 8, 16}, DType::kF32),
                                 Array::Abstract({2, 4, 8, 16}, DType::kF32)); });
  EXPECT_EQ(bmm.flops, 2 * (2 * 4) * 8 * 8 * 16);
}

TEST(OpCost, RecordsTheDevicePositionInsideRuntimeRunAndChargesResultsToTheDevice) {
  OpCostTally tally;
  Runtime runtime(Mesh::Iota({4}, {"x"}), RuntimeOptions{.num_threads = 2, .op_cost_sink = &tally});
  std::vector<int64_t> charged(4), in_use(4);
  {
    runtime.Run([&](DeviceContext& d) {
      int64_t rows = d.position() + 1;
      Array a = Array::Abstract({rows, 8}, DType::kF32);
      int64_t before = d.memory_stats().in_use_bytes;
      Array c = MatMul(a, Array::Abstract({8, 4}, DType::kF32));
      in_use[d.position()] = d.memory_stats().in_use_bytes - before;
      charged[d.position()] = c.charged_position();
    });
  }
  for (int64_t p = 0; p < 4; ++p) {
    EXPECT_EQ(tally.TotalFor(p).flops, 2 * (p + 1) * 8 * 4) << p;
    EXPECT_EQ(charged[p], p);
    EXPECT_GE(in_use[p], (p + 1) * 4 * 4);  // the result (and the abstract rhs) are charged to the device
  }
}

}  // namespace
}  // namespace spmdsim
