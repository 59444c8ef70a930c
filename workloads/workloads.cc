// Small helpers of workloads/workloads.h; the engines are in workloads/internal/.
#include "workloads/workloads.h"

#include <algorithm>

#include "common/error.h"

namespace spmdsim {

std::string_view StepKindName(StepKind kind) {
  return kind == StepKind::kCollective ? "collective" : "compute";
}

std::vector<int64_t> SweepSizes(int64_t min_bytes, int64_t max_bytes, int64_t factor) {
  if (min_bytes <= 0 || max_bytes < min_bytes || factor < 2) {
    Throw(ErrorCode::kInvalidArgument,
          "collectives sizes: need 0 < min <= max and factor >= 2, got min {}, max {}, factor {}", min_bytes,
          max_bytes, factor);
  }
  std::vector<int64_t> sizes;
  for (int64_t s = min_bytes; s <= max_bytes; s *= factor) {
    sizes.push_back(s);
    if (s > max_bytes / factor) break;
  }
  return sizes;
}

}  // namespace spmdsim
