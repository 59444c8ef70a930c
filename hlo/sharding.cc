#include "hlo/sharding.h"

#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "common/error.h"

namespace spmdsim::hlo {

Block BlockOf(const Sharding& s, const std::vector<int64_t>& dims, int64_t device) {
  Block b;
  b.begin.assign(dims.size(), 0);
  b.end = dims;
  if (s.kind != Sharding::Kind::kTiled) return b;
  const int data_dims = static_cast<int>(s.tile_dims.size()) - s.subgroup_dims;
  if (data_dims != static_cast<int>(dims.size())) {
    Throw(ErrorCode::kInvalidArgument, "sharding {} tiles {} dimensions; the array [{}] has {}", s.ToString(),
          data_dims, fmt::join(dims, ","), dims.size());
  }
  const auto it = std::find(s.tile_devices.begin(), s.tile_devices.end(), device);
  if (it == s.tile_devices.end()) {
    Throw(ErrorCode::kInvalidArgument, "device {} is not in the tile assignment of sharding {}", device, s.ToString());
  }
  int64_t k = it - s.tile_devices.begin();
  std::vector<int64_t> coord(s.tile_dims.size());
  for (size_t d = s.tile_dims.size(); d-- > 0;) {
    coord[d] = k % s.tile_dims[d];
    k /= s.tile_dims[d];
  }
  for (int d = 0; d < data_dims; ++d) {
    const int64_t per = (dims[d] + s.tile_dims[d] - 1) / s.tile_dims[d];
    b.begin[d] = std::min(coord[d] * per, dims[d]);
    b.end[d] = std::min(b.begin[d] + per, dims[d]);
  }
  return b;
}

std::vector<int64_t> GlobalDims(const Sharding& s, const std::vector<int64_t>& local) {
  if (s.kind != Sharding::Kind::kTiled) return local;
  std::vector<int64_t> global = local;
  const size_t data_dims = s.tile_dims.size() - static_cast<size_t>(s.subgroup_dims);
  for (size_t d = 0; d < data_dims && d < global.size(); ++d) global[d] *= s.tile_dims[d];
  return global;
}

Sharding ElementSharding(const std::optional<Sharding>& sharding, int64_t i, int64_t count) {
  if (!sharding.has_value()) return Sharding{};
  if (sharding->kind == Sharding::Kind::kTuple) {
    if (static_cast<int64_t>(sharding->tuple.size()) != count) {
      Throw(ErrorCode::kInvalidArgument, "tuple sharding {} has {} elements; the value has {}", sharding->ToString(),
            sharding->tuple.size(), count);
    }
    return sharding->tuple[i];
  }
  return *sharding;
}

}  // namespace spmdsim::hlo
