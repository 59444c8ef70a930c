#include "shardmap/sharded_array.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <utility>

#include <fmt/format.h>

#include "common/error.h"
#include "common/shape.h"
#include "common/strings.h"
#include "sim/array_builder.h"

namespace spmdsim {

namespace {

std::vector<int64_t> BoxShape(std::span<const IndexRange> box) {
  std::vector<int64_t> shape;
  for (const IndexRange& r : box) shape.push_back(r.size());
  return shape;
}

// The block `index` of `global` as a new array.
Array CutBlock(const Array& global, std::span<const IndexRange> index) {
  ArrayBuilder block(global.dtype(), BoxShape(index), {.abstract = global.is_abstract()});
  if (!global.is_abstract() && block.size() > 0) {
    CopyBlockOut(static_cast<const std::byte*>(global.raw_data()), global.shape(), index,
                 static_cast<size_t>(DTypeSize(global.dtype())), static_cast<std::byte*>(block.mutable_data()));
  }
  return std::move(block).Freeze();
}

// Intersection of two boxes; false when empty.
bool Intersect(std::span<const IndexRange> a, std::span<const IndexRange> b, std::vector<IndexRange>* out) {
  out->resize(a.size());
  for (size_t d = 0; d < a.size(); ++d) {
    (*out)[d] = {std::max(a[d].start, b[d].start), std::min(a[d].stop, b[d].stop)};
    if ((*out)[d].stop <= (*out)[d].start) return false;
  }
  return true;
}

// Copies the region `region` (global coordinates) from `src` (holding box src_box) into dst (box dst_box).
void CopyRegion(const Array& src, std::span<const IndexRange> src_box, std::span<const IndexRange> region,
                std::byte* dst, std::span<const IndexRange> dst_box, DType dtype) {
  // Per shard and per device: no heap allocation below rank 9.
  const size_t rank = region.size();
  DimVector src_strides(rank), dst_strides(rank), shape(rank);
  for (size_t d = rank; d-- > 0;) {
    src_strides[d] = d + 1 < rank ? src_strides[d + 1] * src.shape()[d + 1] : 1;
    dst_strides[d] = d + 1 < rank ? dst_strides[d + 1] * dst_box[d + 1].size() : 1;
  }
  int64_t src_offset = 0, dst_offset = 0;
  for (size_t d = 0; d < rank; ++d) {
    shape[d] = region[d].size();
    src_offset += (region[d].start - src_box[d].start) * src_strides[d];
    dst_offset += (region[d].start - dst_box[d].start) * dst_strides[d];
  }
  const auto view = [](const DimVector& v) { return std::span<const int64_t>(v.data(), v.size()); };
  StridedCopy(src.raw_data(), src_offset, view(src_strides), dst, dst_offset, view(dst_strides), view(shape),
              DTypeSize(dtype));
}

int64_t Volume(std::span<const IndexRange> box) {
  int64_t v = 1;
  for (const IndexRange& r : box) v *= r.size();
  return v;
}

}  // namespace

ShardedArray ShardedArray::DevicePut(const Array& global, const NamedSharding& sharding, Runtime* runtime) {
  if (!global.valid()) Throw(ErrorCode::kInvalidArgument, "DevicePut of an empty Array handle");
  // Layout checks the shape.
  return DevicePut(global, std::make_shared<const NamedSharding>(sharding),
                   std::make_shared<const ShardingLayout>(sharding.Layout(global.shape())), runtime);
}

ShardedArray ShardedArray::DevicePut(const Array& global, std::shared_ptr<const NamedSharding> sharding,
                                     std::shared_ptr<const ShardingLayout> layout_ptr, Runtime* runtime) {
  if (!global.valid()) Throw(ErrorCode::kInvalidArgument, "DevicePut of an empty Array handle");
  ShardedArray out;
  out.dtype_ = global.dtype();
  out.sharding_ = std::move(sharding);
  out.layout_ = std::move(layout_ptr);
  const ShardingLayout& layout = *out.layout_;
  out.shards_.resize(layout.shards.size());
  if (runtime != nullptr) {
    if (!(runtime->mesh() == out.sharding_->mesh())) {
      Throw(ErrorCode::kInvalidArgument, "DevicePut: the runtime's mesh {} is not the sharding's mesh {}",
            runtime->mesh().ToString(), out.sharding_->mesh().ToString());
    }
    runtime->Run([&](DeviceContext& d) {
      out.shards_[d.position()] = CutBlock(global, layout.shards[d.position()].index);
    });
    return out;
  }
  for (int64_t s = 0; s < layout.num_shards; ++s) {
    const std::vector<int64_t>& holders = layout.positions_of_shard[s];
    Array block = CutBlock(global, layout.shards[holders[0]].index);
    for (int64_t p : holders) out.shards_[p] = block;
  }
  return out;
}

ShardedArray ShardedArray::FromShards(std::vector<int64_t> global_shape, DType dtype, const NamedSharding& sharding,
                                      std::vector<Array> shards) {
  return FromShards(dtype, std::make_shared<const NamedSharding>(sharding),
                    std::make_shared<const ShardingLayout>(sharding.Layout(global_shape)), std::move(shards));
}

ShardedArray ShardedArray::FromShards(DType dtype, std::shared_ptr<const NamedSharding> sharding,
                                      std::shared_ptr<const ShardingLayout> layout, std::vector<Array> shards) {
  if (static_cast<int64_t>(shards.size()) != sharding->num_devices()) {
    Throw(ErrorCode::kInvalidArgument, "FromShards: {} shards given for a mesh of {} devices", shards.size(),
          sharding->num_devices());
  }
  for (size_t p = 0; p < shards.size(); ++p) {
    const Array& a = shards[p];
    if (!a.valid() || a.dtype() != dtype || a.shape() != layout->shard_shape) {
      Throw(ErrorCode::kInvalidArgument, "FromShards: the shard of position {} is {}, expected {}", p,
            a.valid() ? a.ShapeString() : std::string("an empty handle"),
            spmdsim::ShapeString(dtype, layout->shard_shape));
    }
  }
  ShardedArray out;
  out.dtype_ = dtype;
  out.sharding_ = std::move(sharding);
  out.layout_ = std::move(layout);
  out.shards_ = std::move(shards);
  return out;
}

std::vector<AddressableShard> ShardedArray::AllShards() const {
  std::vector<AddressableShard> out;
  for (const DeviceShard& s : layout_->shards) {
    out.push_back({s.device, s.position, s.index, s.replica_id, shards_[s.position]});
  }
  return out;
}

std::vector<AddressableShard> ShardedArray::AddressableShards(int process_index) const {
  std::vector<AddressableShard> out;
  for (const DeviceShard& s : layout_->shards) {
    if (s.process_index == process_index)
      out.push_back({s.device, s.position, s.index, s.replica_id, shards_[s.position]});
  }
  return out;
}

Array ShardedArray::Gather(const GatherOptions& options) const {
  if (!valid()) Throw(ErrorCode::kFailedPrecondition, "Gather of an empty ShardedArray");
  if (is_abstract()) return Array::Abstract(shape(), dtype_);
  const size_t element = static_cast<size_t>(DTypeSize(dtype_));
  ArrayBuilder global(dtype_, shape());
  std::byte* dst = static_cast<std::byte*>(global.mutable_data());
  for (int64_t s = 0; s < layout_->num_shards; ++s) {
    const std::vector<int64_t>& holders = layout_->positions_of_shard[s];
    const Array& first = shards_[holders[0]];
    if (options.check_replicas) {
      for (size_t r = 1; r < holders.size(); ++r) {
        const Array& other = shards_[holders[r]];
        if (!other.SharesBufferWith(first) && !other.BitwiseEquals(first)) {
          Throw(ErrorCode::kInvalidArgument,
                "replicas of block {} differ: device {} (position {}) holds {} but device {} (position {}) holds {}",
                IndexToString(layout_->shards[holders[0]].index, shape()), layout_->shards[holders[0]].device,
                holders[0], first.ToString(), layout_->shards[holders[r]].device, holders[r], other.ToString());
        }
      }
    }
    if (first.size() == 0) continue;
    CopyBlockIn(static_cast<const std::byte*>(first.raw_data()), shape(), layout_->shards[holders[0]].index, element,
                dst);
  }
  return std::move(global).Freeze();
}

std::string ShardedArray::ToString() const {
  if (!valid()) return "ShardedArray()";
  return fmt::format("ShardedArray({}, {})", spmdsim::ShapeString(dtype_, shape()), sharding_->ToString());
}

std::string ReshardReport::ToString() const {
  std::string out = fmt::format("reshard moved {} bytes", total_bytes_moved);
  for (size_t p = 0; p < bytes_received.size(); ++p) {
    if (bytes_sent[p] == 0 && bytes_received[p] == 0) continue;
    out += fmt::format("\n  position {}: sent {} B, received {} B, local {} B", p, bytes_sent[p], bytes_received[p],
                       bytes_local[p]);
  }
  return out;
}

namespace {

void CheckSameDevices(const Mesh& src_mesh, const Mesh& dst_mesh) {
  std::vector<int> a = src_mesh.device_ids(), b = dst_mesh.device_ids();
  std::sort(a.begin(), a.end());
  std::sort(b.begin(), b.end());
  if (a != b) {
    Throw(ErrorCode::kInvalidArgument,
          "Reshard between meshes over different devices: {} and {} (both must hold the same device ids)",
          src_mesh.ToString(), dst_mesh.ToString());
  }
}

// A piece of a destination block and the source position it comes from (in the source mesh).
struct Piece {
  int64_t src_position;
  std::vector<IndexRange> region;
};

// For each destination position, the pieces it needs and the source position each comes from: the piece of its
// own old block locally, any other from one holder of that old block, round-robin over the holders by
// destination position. Counts the bytes in `r`.
std::vector<std::vector<Piece>> PlanReshard(const ShardedArray& x, const Mesh& dst_mesh, const ShardingLayout& dst,
                                            ReshardReport& r) {
  const Mesh& src_mesh = x.sharding().mesh();
  const ShardingLayout& src = x.layout();
  const int64_t element = DTypeSize(x.dtype());
  const int64_t n = dst_mesh.size();
  std::vector<std::vector<Piece>> plan(n);
  for (int64_t q = 0; q < n; ++q) {
    const DeviceShard& want = dst.shards[q];
    const int64_t q_in_src = src_mesh.PositionOfDevice(want.device);
    const int64_t q_src_shard = src.shards[q_in_src].shard_id;
    std::vector<IndexRange> region;
    for (int64_t s = 0; s < src.num_shards; ++s) {
      const std::vector<int64_t>& holders = src.positions_of_shard[s];
      if (!Intersect(src.shards[holders[0]].index, want.index, &region)) continue;
      const int64_t bytes = Volume(region) * element;
      int64_t from;
      if (s == q_src_shard) {
        from = q_in_src;
        r.bytes_local[q] += bytes;
      } else {
        from = holders[static_cast<size_t>(q) % holders.size()];
        const int64_t from_dst = dst_mesh.PositionOfDevice(src_mesh.DeviceAt(from));
        r.bytes_sent[from_dst] += bytes;
        r.bytes_received[q] += bytes;
        r.total_bytes_moved += bytes;
      }
      plan[q].push_back({from, region});
    }
  }
  return plan;
}

// The destination blocks from their pieces: on the runtime's devices (each charged to its device), or as host
// arrays built once per distinct block.
std::vector<Array> AssembleBlocks(const ShardedArray& x, const std::vector<std::vector<Piece>>& plan,
                                  const Mesh& dst_mesh, const ShardingLayout& dst, Runtime* runtime) {
  const ShardingLayout& src = x.layout();
  auto build = [&](int64_t q) {
    ArrayBuilder block(x.dtype(), dst.shard_shape, {.abstract = x.is_abstract()});
    if (!x.is_abstract() && block.size() > 0) {
      std::byte* out = static_cast<std::byte*>(block.mutable_data());
      for (const Piece& piece : plan[q]) {
        CopyRegion(x.shard(piece.src_position), src.shards[piece.src_position].index, piece.region, out,
                   dst.shards[q].index, x.dtype());
      }
    }
    return std::move(block).Freeze();
  };
  std::vector<Array> shards(dst_mesh.size());
  if (runtime != nullptr) {
    if (!(runtime->mesh() == dst_mesh)) {
      Throw(ErrorCode::kInvalidArgument, "Reshard: the runtime's mesh {} is not the target's mesh {}",
            runtime->mesh().ToString(), dst_mesh.ToString());
    }
    runtime->Run([&](DeviceContext& d) { shards[d.position()] = build(d.position()); });
    return shards;
  }
  for (int64_t s = 0; s < dst.num_shards; ++s) {
    const std::vector<int64_t>& holders = dst.positions_of_shard[s];
    Array block = build(holders[0]);
    for (int64_t q : holders) shards[q] = block;
  }
  return shards;
}

}  // namespace

ShardedArray Reshard(const ShardedArray& x, const NamedSharding& target, ReshardReport* report, Runtime* runtime) {
  return Reshard(x, std::make_shared<const NamedSharding>(target), nullptr, report, runtime);
}

ShardedArray Reshard(const ShardedArray& x, std::shared_ptr<const NamedSharding> target,
                     std::shared_ptr<const ShardingLayout> dst, ReshardReport* report, Runtime* runtime) {
  if (!x.valid()) Throw(ErrorCode::kInvalidArgument, "Reshard of an empty ShardedArray");
  const Mesh& src_mesh = x.sharding().mesh();
  const Mesh& dst_mesh = target->mesh();
  const int64_t n = dst_mesh.size();
  CheckSameDevices(src_mesh, dst_mesh);
  if (dst == nullptr) target->CheckShape(x.shape());
  ReshardReport local_report;
  ReshardReport& r = report != nullptr ? *report : local_report;
  r = ReshardReport{};
  r.bytes_sent.assign(n, 0);
  r.bytes_received.assign(n, 0);
  r.bytes_local.assign(n, 0);
  if (src_mesh == dst_mesh && x.sharding().spec().Normalized(x.rank()) == target->spec().Normalized(x.rank())) {
    for (int64_t p = 0; p < n; ++p) r.bytes_local[p] = x.shard(p).nbytes();
    return x;
  }
  if (dst == nullptr) dst = std::make_shared<const ShardingLayout>(target->Layout(x.shape()));
  const std::vector<std::vector<Piece>> plan = PlanReshard(x, dst_mesh, *dst, r);
  std::vector<Array> shards = AssembleBlocks(x, plan, dst_mesh, *dst, runtime);
  return ShardedArray::FromShards(x.dtype(), std::move(target), std::move(dst), std::move(shards));
}

}  // namespace spmdsim
