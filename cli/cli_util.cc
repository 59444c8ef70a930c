#include "cli/cli_util.h"

#include <exception>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/error.h"
#include "common/error_context.h"
#include "common/strings.h"
#include "common/user_text.h"
#include "mesh/mesh_utils.h"

namespace spmdsim::cli {

Mesh BuildCliMesh(std::string_view mesh, std::string_view topology, int slices, std::string_view dcn) {
  auto axes = ParseNamedSizes(mesh, "--mesh");
  if (topology.empty()) {
    if (!dcn.empty() || slices != 1) {
      Throw(ErrorCode::kInvalidArgument, "--dcn and --slices need --topology (a TPU preset such as tpu-v4:2x2x4)");
    }
    int64_t devices = 1;
    std::vector<int64_t> shape;
    std::vector<std::string> names;
    for (const auto& [name, size] : axes) {
      if (__builtin_mul_overflow(devices, size, &devices) || devices > kMaxIotaDevices) {
        Throw(ErrorCode::kInvalidArgument,
              "--mesh '{}': more than {} devices; without --topology spmdsim numbers at most 2^20 devices", mesh,
              kMaxIotaDevices);
      }
      names.push_back(name);
      shape.push_back(size);
    }
    return Mesh::Iota(std::move(shape), std::move(names));
  }
  auto parsed = std::make_shared<const Topology>(Topology::Parse(topology, slices));
  std::vector<std::pair<std::string, int64_t>> dcn_axes;
  if (!dcn.empty()) dcn_axes = ParseNamedSizes(dcn, "--dcn");
  return MakeDeviceMesh(parsed, axes, dcn_axes);
}

std::optional<std::string> NonUtf8Argument(int argc, const char* const* argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg(argv[i]);
    if (std::optional<size_t> bad = FindInvalidUtf8(arg)) {
      return fmt::format("argument {} {}: byte 0x{:02x} at offset {} is not UTF-8", i, QuoteForError(arg),
                         static_cast<unsigned char>(arg[*bad]), *bad);
    }
  }
  return std::nullopt;
}

CLI::Validator IntIn(int64_t lo, int64_t hi) {
  return CLI::Validator(
      [lo, hi](std::string& text) -> std::string {
        try {
          ParseIntIn(text, "", lo, hi);
        } catch (const Error& e) {
          return e.message().substr(2);  // without the empty `what` and its ": "
        }
        return "";
      },
      DescribeIntRange(lo, hi));
}

nlohmann::json EntryJson(const PartitionSpec::Entry& e) {
  if (e.is_unconstrained()) return "UNCONSTRAINED";
  if (!e.has_axes()) return nullptr;
  if (!e.is_tuple()) return e.axes()[0];
  return e.axes();
}

nlohmann::json SpecJson(const PartitionSpec& spec) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& e : spec.entries()) out.push_back(EntryJson(e));
  return out;
}

void RethrowWithAxisHint(const Error& error) {
  const std::string hint = UnknownAxisHint(error);
  if (hint.empty()) throw;
  RethrowWithContext(error, error.message() + hint);
}

}  // namespace spmdsim::cli
