// The cost seam of ops/: every op reports what it would cost on a real device -- floating-point operations,
// transcendental evaluations, bytes read and bytes written -- to the OpCostSink of the Runtime whose device
// runs it (RuntimeOptions::op_cost_sink, sim/op_cost.h), tagged with that device's position. An op run outside
// any device function (on a host thread) is charged to no sink. The workload engines give their Runtime a
// sink and charge local compute from it; with abstract inputs (Array::Abstract) the ops do no arithmetic at
// all, so a program can be costed without being run.
//
// Conventions (those of XLA's HloCostAnalysis, xla/service/hlo_cost_analysis.cc, simplified):
//  - elementwise: 1 flop per output element per arithmetic step; exp/log/tanh/sqrt/rsqrt/pow/erf count as
//    1 flop + 1 transcendental each (docs/ops.md has the table per op);
//  - contractions (MatMul, Dot, DotGeneral, Einsum): 2 flops per multiply-add, i.e.
//    2 * batch * M * N * K;
//  - reductions: 1 flop per input element;
//  - data movement (Reshape, Transpose, Slice, Concatenate, Pad, BroadcastTo, Flip, Cast): 0 flops;
//  - bytes_read: the sum of the operands' nbytes (each operand counted once, at its own dtype);
//    bytes_written: the result's nbytes. A Reshape reads and writes nothing (it shares the buffer).
//  - composite ops (Einsum, MatMul with broadcast batch dimensions) report their constituents, each under
//    its own name.
//
// Example:
//   OpCostTally tally;
//   Runtime runtime(Mesh::Iota({1}, {"x"}), RuntimeOptions{.op_cost_sink = &tally});
//   runtime.Run([](DeviceContext&) {
//     MatMul(Array::Abstract({128, 256}, DType::kBF16), Array::Abstract({256, 64}, DType::kBF16)); });
//   tally.Total().flops == 2 * 128 * 256 * 64;   // 4194304
//   tally.Total().bytes_read == (128 * 256 + 256 * 64) * 2;  tally.Total().bytes_written == 128 * 64 * 2
//
// Thread safety: a sink's Record is called concurrently from every worker thread of its Runtime; OpCostTally
// is thread-safe. Runtimes with different sinks may run at the same time in one process.
#ifndef SPMDSIM_OPS_COST_H_
#define SPMDSIM_OPS_COST_H_

#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "common/thread_annotations.h"
#include "sim/op_cost.h"

namespace spmdsim {

// A sink that adds up costs per device position and per op name. Thread-safe.
class OpCostTally : public OpCostSink {
 public:
  void Record(int64_t device_position, const OpCost& cost) override;
  OpCost Total() const;                                // every device, every op (op name: "total")
  OpCost TotalFor(int64_t device_position) const;      // one device
  std::map<std::string, OpCost> ByOp() const;          // every device, per op name
  int64_t num_records() const;
  void Clear();

 private:
  mutable Mutex mu_;
  std::map<int64_t, OpCost> by_device_ SPMDSIM_GUARDED_BY(mu_);
  std::map<std::string, OpCost, std::less<>> by_op_ SPMDSIM_GUARDED_BY(mu_);
  int64_t num_records_ SPMDSIM_GUARDED_BY(mu_) = 0;
};

}  // namespace spmdsim

#endif  // SPMDSIM_OPS_COST_H_
