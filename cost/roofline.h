// Local compute time of one device: the roofline model.
//
//   time = max(flops / (peak_flops[dtype] * compute_efficiency),
//              bytes / (memory_bandwidth * memory_efficiency)) / speed_factor
//
// (Williams, Waterman, Patterson, "Roofline", CACM 2009; the scaling book's T = max(T_math, T_comms) for one
// chip.) Peak FLOP/s per dtype and HBM bandwidth come from the topology preset (mesh/topology.h), per
// device. speed_factor < 1 models a straggler (0.5: the device runs at half speed).
//
// Example: tpu-v4 (275e12 bf16 FLOP/s, 1.2e12 B/s HBM), a bf16 matmul [1024,1024] x [1024,1024]:
//   flops = 2 * 1024^3 = 2.147e9, bytes = 3 * 1024^2 * 2 = 6.29e6
//   compute 7.81 us, memory 5.24 us -> 7.81 us, compute-bound (arithmetic intensity 341 FLOP/B).
#ifndef SPMDSIM_COST_ROOFLINE_H_
#define SPMDSIM_COST_ROOFLINE_H_

#include <map>
#include <string>
#include <string_view>

#include "mesh/topology.h"

namespace spmdsim {

struct RooflineOptions {
  double compute_efficiency = 1.0;  // fraction of peak FLOP/s reached (MFU-like), in (0, 1]
  double memory_efficiency = 1.0;   // fraction of peak HBM bandwidth reached, in (0, 1]
};

struct LocalOpCost {
  double seconds = 0;
  double compute_seconds = 0;  // flops / effective peak (before the speed factor)
  double memory_seconds = 0;   // bytes / effective bandwidth (before the speed factor)
  bool compute_bound = false;  // compute_seconds >= memory_seconds
};

class Roofline {
 public:
  // Copies the figures it needs from `topology`. Throws Error(kInvalidArgument) for an efficiency
  // outside (0, 1].
  explicit Roofline(const Topology& topology, RooflineOptions options = {});

  // REQUIRES: flops >= 0, bytes >= 0 (finite), speed_factor > 0; dtype one of the topology's peak_flops
  // keys when flops > 0. Throws Error(kInvalidArgument) for a bad number and Error(kNotFound) for an
  // unknown dtype, listing the dtypes the topology has.
  LocalOpCost Cost(double flops, double bytes, DType dtype, double speed_factor = 1.0) const;

  const RooflineOptions& options() const { return options_; }

 private:
  std::string topology_name_;
  std::map<DType, double> peak_flops_;
  double memory_bandwidth_Bps_;
  RooflineOptions options_;
};

}  // namespace spmdsim

#endif  // SPMDSIM_COST_ROOFLINE_H_
