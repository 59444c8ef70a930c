// OpCost and OpCostSink: the seam through which local ops (ops/, above sim/) report what they would cost on a
// real device. The sink belongs to one Runtime (RuntimeOptions::op_cost_sink): an op run by a device's code is
// charged to the sink of that device's Runtime, tagged with the device's position; an op run outside any
// device function (a host thread) is charged to no sink. So several simulations in one process each see only
// their own ops. The conventions of what an op costs are in ops/cost.h.
//
// Thread safety: Record is called concurrently from every worker thread of the Runtime (each call from the
// code of one device); implementations must be thread-safe (ops/cost.h's OpCostTally is). An exception thrown
// by Record propagates into the device's code as if the op had thrown it.
#ifndef SPMDSIM_SIM_OP_COST_H_
#define SPMDSIM_SIM_OP_COST_H_

#include <cstdint>
#include <string_view>

namespace spmdsim {

struct OpCost {
  // The op's name as lax spells it ("add", "dot_general", "reduce_sum"); static storage (a literal).
  std::string_view op;
  int64_t flops = 0;            // floating-point (or integer) arithmetic operations
  int64_t transcendentals = 0;  // exp, log, tanh, sqrt, rsqrt, pow, erf evaluations
  int64_t bytes_read = 0;
  int64_t bytes_written = 0;
  // A contraction's dimensions (dot_general: flops == 2 * batch * m * n * k), so that a compute model can price
  // its tile and wave quantisation (cost/compute_model.h); all 0 for every other op. Not summed by +=: a sum of
  // ops is not one contraction.
  int64_t batch = 0, m = 0, n = 0, k = 0;

  OpCost& operator+=(const OpCost& other) {
    flops += other.flops;
    transcendentals += other.transcendentals;
    bytes_read += other.bytes_read;
    bytes_written += other.bytes_written;
    return *this;
  }
};

// Receives the cost of every op the devices of one Runtime run. `device_position`: the position of the
// virtual device whose code ran the op (sim/runtime.h).
class OpCostSink {
 public:
  virtual ~OpCostSink() = default;
  virtual void Record(int64_t device_position, const OpCost& cost) = 0;
};

}  // namespace spmdsim

#endif  // SPMDSIM_SIM_OP_COST_H_
