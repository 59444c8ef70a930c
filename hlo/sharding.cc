#include "hlo/sharding.h"

#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "common/error.h"
#include "common/shape.h"

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

namespace {

std::vector<int64_t> Extent(const Block& b) {
  std::vector<int64_t> e;
  for (size_t d = 0; d < b.begin.size(); ++d) e.push_back(b.end[d] - b.begin[d]);
  return e;
}

int64_t OffsetOf(const std::vector<int64_t>& index, const std::vector<int64_t>& strides) {
  int64_t o = 0;
  for (size_t d = 0; d < index.size(); ++d) o += index[d] * strides[d];
  return o;
}

}  // namespace

Value ShardOf(const Value& global, const Sharding& sharding, int64_t device, const std::vector<int64_t>& local) {
  const Block b = BlockOf(sharding, global.dims(), device);
  const std::vector<int64_t> extent = Extent(b);
  for (size_t d = 0; d < extent.size(); ++d) {
    if (extent[d] > local[d]) {
      Throw(ErrorCode::kInvalidArgument, "device {}'s block of a [{}] array under {} is [{}]; the parameter is [{}]",
            device, fmt::join(global.dims(), ","), sharding.ToString(), fmt::join(extent, ","), fmt::join(local, ","));
    }
  }
  ValueBuilder out(global.dtype(), local, /*zeroed=*/true);
  if (NumElements(extent) > 0) {
    StridedCopy(global.raw(), OffsetOf(b.begin, RowMajorStrides(global.dims())), RowMajorStrides(global.dims()),
                out.raw(), 0, RowMajorStrides(local), extent, DTypeSize(global.dtype()));
  }
  return std::move(out).Finish();
}

Value Assemble(const std::vector<const Value*>& per_device, const Sharding& sharding,
               const std::vector<int64_t>& global_dims) {
  const DType dtype = per_device[0]->dtype();
  ValueBuilder out(dtype, global_dims, /*zeroed=*/true);
  const std::vector<int64_t> gs = RowMajorStrides(global_dims);
  std::vector<std::vector<int64_t>> done;
  for (size_t d = 0; d < per_device.size(); ++d) {
    const Block b = BlockOf(sharding, global_dims, static_cast<int64_t>(d));
    if (std::find(done.begin(), done.end(), b.begin) != done.end()) continue;
    done.push_back(b.begin);
    const std::vector<int64_t> extent = Extent(b);
    if (NumElements(extent) == 0) continue;
    StridedCopy(per_device[d]->raw(), 0, RowMajorStrides(per_device[d]->dims()), out.raw(),
                OffsetOf(b.begin, gs), gs, extent, DTypeSize(dtype));
  }
  return std::move(out).Finish();
}

}  // namespace spmdsim::hlo
