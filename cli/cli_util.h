// Helpers shared by the spmdsim subcommands: building a mesh from --mesh/--topology/--slices/--dcn, and
// printing a PartitionSpec as JSON.
#ifndef SPMDSIM_CLI_CLI_UTIL_H_
#define SPMDSIM_CLI_CLI_UTIL_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "mesh/mesh.h"
#include "partition/partition_spec.h"

namespace spmdsim::cli {

// Without a topology, meshes are numbered row-major on one CPU host; above this many devices that is refused
// (a typo such as --mesh x=10000000 would otherwise allocate gigabytes).
inline constexpr int64_t kMaxIotaDevices = int64_t{1} << 20;

// The mesh as `spmdsim mesh` builds it: MakeDeviceMesh (JAX's create_device_mesh, or create_hybrid_device_mesh
// with `dcn`) on the topology; with an empty `topology`, ids 0..N-1 row-major on a CPU host.
// `mesh` is "a=4,b=2"; `dcn` the same axes' DCN sizes (or empty). Throws Error naming the flag at fault.
Mesh BuildCliMesh(std::string_view mesh, std::string_view topology = "", int slices = 1, std::string_view dcn = "");

// A CLI11 check for an integer flag in [lo, hi] whose message says the range in words:
// "--slices: 0 is out of range; expected a positive integer (at most 2147483647)", instead of
// CLI::PositiveNumber's "Value 0 not in range 0.000000 to 1797693134862315...". It also refuses what an `int`
// flag cannot hold (no wrap-around).
CLI::Validator IntIn(int64_t lo, int64_t hi);

// The usage error for the first command-line argument that is not UTF-8 ("argument 3 'b\xff=data': byte 0xff
// at offset 1 is not UTF-8"), or nullopt. Names, specs and paths end up in JSON, which must be UTF-8.
std::optional<std::string> NonUtf8Argument(int argc, const char* const* argv);

// In a catch handler of `error`: rethrows it with a did-you-mean for the unknown mesh axes of the SpecError it is
// or holds nested (UnknownAxisHint, partition/partition_spec.h), keeping its code and kind; rethrows it unchanged
// when there is none.
[[noreturn]] void RethrowWithAxisHint(const Error& error);

// One spec entry: null (None), "axis", ["a", "b"] (a tuple), or "UNCONSTRAINED".
nlohmann::json EntryJson(const PartitionSpec::Entry& entry);
// One EntryJson per dimension.
nlohmann::json SpecJson(const PartitionSpec& spec);

}  // namespace spmdsim::cli

#endif  // SPMDSIM_CLI_CLI_UTIL_H_
