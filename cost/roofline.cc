#include "cost/roofline.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "common/error.h"

namespace spmdsim {

Roofline::Roofline(const Topology& topology, RooflineOptions options)
    : topology_name_(topology.ToString()),
      peak_flops_(topology.peak_flops()),
      memory_bandwidth_Bps_(topology.memory_bandwidth_Bps()),
      options_(options) {
  if (!(options_.compute_efficiency > 0 && options_.compute_efficiency <= 1)) {
    Throw(ErrorCode::kInvalidArgument, "compute_efficiency must be in (0, 1], got {}", options_.compute_efficiency);
  }
  if (!(options_.memory_efficiency > 0 && options_.memory_efficiency <= 1)) {
    Throw(ErrorCode::kInvalidArgument, "memory_efficiency must be in (0, 1], got {}", options_.memory_efficiency);
  }
}

LocalOpCost Roofline::Cost(double flops, double bytes, DType dtype, double speed_factor) const {
  if (!(flops >= 0) || !std::isfinite(flops)) {
    Throw(ErrorCode::kInvalidArgument, "local op: FLOPs must be a finite number >= 0, got {}", flops);
  }
  if (!(bytes >= 0) || !std::isfinite(bytes)) {
    Throw(ErrorCode::kInvalidArgument, "local op: bytes must be a finite number >= 0, got {}", bytes);
  }
  if (!(speed_factor > 0) || !std::isfinite(speed_factor)) {
    Throw(ErrorCode::kInvalidArgument, "speed factor must be > 0 (1 = nominal, 0.5 = half speed), got {}",
          speed_factor);
  }
  LocalOpCost cost;
  if (flops > 0) {
    auto it = peak_flops_.find(dtype);
    if (it == peak_flops_.end()) {
      std::vector<std::string_view> known;
      for (const auto& [known_dtype, _] : peak_flops_) known.push_back(DTypeShortName(known_dtype));
      Throw(ErrorCode::kNotFound, "{} has no peak FLOP/s for dtype '{}'; it has: {}", topology_name_,
            DTypeShortName(dtype),
            fmt::join(known, ", "));
    }
    cost.compute_seconds = flops / (it->second * options_.compute_efficiency);
  }
  cost.memory_seconds = bytes / (memory_bandwidth_Bps_ * options_.memory_efficiency);
  cost.compute_bound = cost.compute_seconds >= cost.memory_seconds;
  cost.seconds = std::max(cost.compute_seconds, cost.memory_seconds) / speed_factor;
  return cost;
}

}  // namespace spmdsim
