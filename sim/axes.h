// Axes and PermutationPairs: how a collective names the mesh axes it runs over and, for ppermute, who sends to
// whom (sim/device_context.h).
//
// Example: Psum(x, "x"), Psum(x, {"x", "y"}) (the first name major), Ppermute(x, "x", {{0, 1}, {1, 0}}).
//
// Thread safety: values; const members may be called from any thread.
#ifndef SPMDSIM_SIM_AXES_H_
#define SPMDSIM_SIM_AXES_H_

#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace spmdsim {

// A tuple of mesh axis names: Psum(x, "x"), Psum(x, {"x", "y"}), Psum(x, names_vector).
class Axes {
 public:
  Axes(const char* name) : names_{std::string(name)} {}          // NOLINT: implicit by design
  Axes(std::string_view name) : names_{std::string(name)} {}     // NOLINT
  Axes(const std::string& name) : names_{name} {}                // NOLINT
  Axes(std::initializer_list<std::string_view> names) : names_(names.begin(), names.end()) {}  // NOLINT
  Axes(std::vector<std::string> names) : names_(std::move(names)) {}                           // NOLINT
  Axes(std::span<const std::string> names) : names_(names.begin(), names.end()) {}             // NOLINT
  const std::vector<std::string>& names() const { return names_; }

 private:
  std::vector<std::string> names_;
};

// ppermute's (source, destination) pairs of in-group indices.
using PermutationPairs = std::vector<std::pair<int64_t, int64_t>>;

}  // namespace spmdsim

#endif  // SPMDSIM_SIM_AXES_H_
