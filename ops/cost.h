// The cost seam of ops/: every op reports what it would cost on a real device -- floating-point operations,
// transcendental evaluations, bytes read and bytes written -- to an optional, process-wide OpCostSink, tagged
// with the position of the virtual device whose code called it. The cost model (cost/) installs a sink
// around Runtime::Run and charges local compute from it; with abstract inputs (Array::Abstract) the ops do no
// arithmetic at all, so a program can be costed without being run.
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
//   { ScopedOpCostSink scope(&tally);
//     MatMul(Array::Abstract({128, 256}, DType::kBF16), Array::Abstract({256, 64}, DType::kBF16)); }
//   tally.Total().flops == 2 * 128 * 256 * 64;   // 4194304
//   tally.Total().bytes_read == (128 * 256 + 256 * 64) * 2;  tally.Total().bytes_written == 128 * 64 * 2
//
// Thread safety: the installed sink is one process-wide pointer (an atomic), read by every thread that runs
// an op; install it before Runtime::Run starts the devices and remove it after Run returns (the scope's
// constructor and destructor are not synchronised with ops running concurrently on other threads).
// A sink's Record is called concurrently from every worker thread; OpCostTally is thread-safe.
#ifndef SPMDSIM_OPS_COST_H_
#define SPMDSIM_OPS_COST_H_

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <string_view>

namespace spmdsim {

struct OpCost {
  // The op's name as lax spells it ("add", "dot_general", "reduce_sum"); static storage (a literal).
  std::string_view op;
  int64_t flops = 0;            // floating-point (or integer) arithmetic operations
  int64_t transcendentals = 0;  // exp, log, tanh, sqrt, rsqrt, pow, erf evaluations
  int64_t bytes_read = 0;
  int64_t bytes_written = 0;

  OpCost& operator+=(const OpCost& other);
};

// Receives the cost of every op. `device_position` is the position of the virtual device whose code ran
// the op (sim/runtime.h), or -1 on a host thread.
class OpCostSink {
 public:
  virtual ~OpCostSink() = default;
  virtual void Record(int64_t device_position, const OpCost& cost) = 0;
};

// Installs `sink` process-wide for its lifetime and restores the previous one afterwards (nullptr: none).
class ScopedOpCostSink {
 public:
  explicit ScopedOpCostSink(OpCostSink* sink);
  ~ScopedOpCostSink();
  ScopedOpCostSink(const ScopedOpCostSink&) = delete;
  ScopedOpCostSink& operator=(const ScopedOpCostSink&) = delete;

 private:
  OpCostSink* previous_;
};

// The installed sink, or nullptr.
OpCostSink* CurrentOpCostSink();

// A sink that adds up costs per device position and per op name. Thread-safe.
class OpCostTally : public OpCostSink {
 public:
  void Record(int64_t device_position, const OpCost& cost) override;
  OpCost Total() const;                                // every device, every op (op name: "total")
  OpCost TotalFor(int64_t device_position) const;      // one device (-1: host threads)
  std::map<std::string, OpCost> ByOp() const;          // every device, per op name
  int64_t num_records() const;
  void Clear();

 private:
  mutable std::mutex mu_;
  std::map<int64_t, OpCost> by_device_;
  std::map<std::string, OpCost, std::less<>> by_op_;
  int64_t num_records_ = 0;
};

}  // namespace spmdsim

#endif  // SPMDSIM_OPS_COST_H_
