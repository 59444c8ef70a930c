#include "scenario/dump.h"
#include "scenario/arrays.h"

#include <cctype>
#include <filesystem>
#include <fstream>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "common/host_memory.h"
#include "partition/named_sharding.h"
#include "scenario/npy.h"
#include "scenario/scenario.h"
#include "sim/array_builder.h"

namespace spmdsim {
namespace {

namespace fs = std::filesystem;

std::string SafeName(const std::string& name) {
  std::string out;
  for (char c : name)
    out.push_back(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.' ? c : '_');
  return out.empty() ? "_" : out;
}

fs::path MakeFolder(const fs::path& folder) {
  std::error_code ec;
  fs::create_directories(folder, ec);
  if (ec) Throw(ErrorCode::kInvalidArgument, "cannot create '{}': {}", folder.string(), ec.message());
  return folder;
}

void WriteIndex(const fs::path& folder, const std::vector<int64_t>& shape, DType dtype, const NamedSharding& sharding,
                const ShardingLayout& layout) {
  nlohmann::json index = {{"shape", shape}, {"dtype", DTypeName(dtype)}, {"spec", sharding.spec().ToString()}};
  nlohmann::json shards = nlohmann::json::array();
  for (int64_t sid = 0; sid < layout.num_shards; ++sid) {
    nlohmann::json ranges = nlohmann::json::array();
    for (const IndexRange& r : layout.shards[layout.positions_of_shard[sid][0]].index)
      ranges.push_back({r.start, r.stop});
    shards.push_back({{"file", fmt::format("{}.npy", sid)}, {"index", ranges}});
  }
  index["shards"] = std::move(shards);
  const fs::path path = folder / "index.json";
  std::ofstream out(path, std::ios::trunc);
  out << index.dump(1) << "\n";
  if (!out) Throw(ErrorCode::kInvalidArgument, "failed writing '{}'", path.string());
}

// A whole array: one file, or (over kGatherArrayBytes) its blocks under `spec` on `mesh`, cut here.
void DumpWhole(const fs::path& folder, const std::string& name, const Array& a, const Mesh& mesh,
               const PartitionSpec& spec) {
  if (ArrayBytes(a.shape(), DTypeSize(a.dtype())) <= kGatherArrayBytes) {
    WriteNpy((folder / (SafeName(name) + ".npy")).string(), ToNpy(a));
    return;
  }
  const fs::path dir = MakeFolder(folder / (SafeName(name) + ".shards"));
  NamedSharding sharding(mesh, spec);
  const ShardingLayout layout = sharding.Layout(a.shape());
  WriteIndex(dir, a.shape(), a.dtype(), sharding, layout);
  for (int64_t sid = 0; sid < layout.num_shards; ++sid) {
    ArrayBuilder block(a.dtype(), layout.shard_shape);
    if (block.size() > 0)
      CopyBlockOut(static_cast<const std::byte*>(a.raw_data()), a.shape(),
                   layout.shards[layout.positions_of_shard[sid][0]].index, static_cast<size_t>(DTypeSize(a.dtype())),
                   static_cast<std::byte*>(block.mutable_data()));
    WriteNpy((dir / fmt::format("{}.npy", sid)).string(), ToNpy(std::move(block).Freeze()));
  }
}

// This rank's blocks of a sharded array (the others are abstract stand-ins), and rank 0 the index.
void DumpSharded(const fs::path& folder, const std::string& name, const ShardedArray& a, int rank) {
  const fs::path dir = MakeFolder(folder / (SafeName(name) + ".shards"));
  const ShardingLayout& layout = a.layout();
  if (rank == 0) WriteIndex(dir, a.shape(), a.dtype(), a.sharding(), layout);
  for (int64_t sid = 0; sid < layout.num_shards; ++sid) {
    const Array& block = a.shard(layout.positions_of_shard[sid][0]);
    if (block.is_abstract()) continue;  // another rank's
    WriteNpy((dir / fmt::format("{}.npy", sid)).string(), ToNpy(block));
  }
}

PartitionSpec LayoutOf(const WorkloadResult& r, const std::string& name) {
  for (const auto& [value, spec] : r.layouts)
    if (value == name) return spec;
  return PartitionSpec();  // no layout recorded: P() (one block)
}

}  // namespace

void DumpWorkload(const std::string& dir, const WorkloadResult& r, const Mesh& mesh, int rank) {
  const struct {
    const char* sub;
    const std::vector<std::pair<std::string, Array>>* whole;
    const std::vector<std::pair<std::string, ShardedArray>>* sharded;
  } kinds[] = {{"inputs", &r.inputs, &r.sharded_inputs}, {"outputs", &r.outputs, &r.sharded_outputs}};
  for (const auto& kind : kinds) {
    const fs::path folder = MakeFolder(fs::path(dir) / SafeName(r.name) / kind.sub);
    if (rank == 0) {
      for (const auto& [name, array] : *kind.whole) DumpWhole(folder, name, array, mesh, LayoutOf(r, name));
    }
    for (const auto& [name, array] : *kind.sharded) DumpSharded(folder, name, array, rank);
  }
}

}  // namespace spmdsim
