#include "hlo/ir.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace spmdsim::hlo {

std::string Sharding::ToString() const {
  switch (kind) {
    case Kind::kReplicated: return "{replicated}";
    case Kind::kManual: return "{manual}";
    case Kind::kUnknown: return "{unknown}";
    case Kind::kMaximal: return fmt::format("{{maximal device={}}}", maximal_device);
    case Kind::kTuple: {
      std::vector<std::string> parts;
      for (const Sharding& t : tuple) parts.push_back(t.ToString());
      return fmt::format("{{{}}}", fmt::join(parts, ", "));
    }
    case Kind::kTiled: {
      std::string s = fmt::format("{{devices=[{}]{}", fmt::join(tile_dims, ","), fmt::join(tile_devices, ","));
      if (subgroup_dims == 1) s += " last_tile_dim_replicate";
      if (subgroup_dims > 1) s += fmt::format(" ({} subgroup dims)", subgroup_dims);
      return s + "}";
    }
  }
  return "{?}";
}

bool Instruction::is_root() const { return parent_ != nullptr && parent_->root() == this; }

std::string Instruction::Where() const {
  const Module* m = parent_ != nullptr ? parent_->module() : nullptr;
  return m != nullptr ? m->Where(location_) : fmt::format("<text>:{}:{}", location_.line, location_.column);
}

const Computation* Module::FindComputation(std::string_view name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : it->second;
}

std::string Module::Where(TextLocation location) const {
  return fmt::format("{}:{}:{}", file_, location.line, location.column);
}

int64_t Module::instruction_count() const {
  int64_t n = 0;
  for (const auto& c : computations_) n += c->is_async_wrapped() ? 0 : c->instruction_count();
  return n;
}

const StackFrame* Module::stack_frame(int64_t id) const {
  if (id < 1 || id > stack_frame_count()) return nullptr;
  return &stack_frames_[static_cast<size_t>(id - 1)];
}

const Instruction* AsyncWrapped(const Instruction& async_op) {
  const Opcode op = async_op.opcode();
  if (op != Opcode::kAsyncStart && op != Opcode::kAsyncUpdate && op != Opcode::kAsyncDone) return nullptr;
  if (async_op.called().empty()) return nullptr;
  return async_op.called()[0]->root();
}

}  // namespace spmdsim::hlo
