#include "hlo/compiled_for.h"

#include <string>

namespace spmdsim::hlo {
namespace {

bool HasTpuLayout(const Shape& s) {
  if (s.IsTuple()) {
    for (const Shape& e : s.tuple) {
      if (HasTpuLayout(e)) return true;
    }
    return false;
  }
  return !s.tiles.empty() || s.memory_space != 0;
}

bool Contains(const std::string& text, std::string_view what) { return text.find(what) != std::string::npos; }

CompiledFor Of(const Instruction& ins) {
  if (HasTpuLayout(ins.shape())) return CompiledFor::kTpu;
  const std::string& target = ins.attrs().custom_call_target;
  if (target == "AllocateBuffer" || target == "AsyncCollectiveStart" || target == "AsyncCollectiveDone" ||
      target == "PrepareAsyncCallStart" || target == "SliceId" || target == "ConcatBitcast") {
    return CompiledFor::kTpu;
  }
  if (!ins.attrs().gpu_fusion_kind.empty() || target.starts_with("__cublas") || target.starts_with("__cudnn") ||
      target.starts_with("__triton")) {
    return CompiledFor::kGpu;
  }
  for (const auto& [key, value] : ins.attrs().raw) {
    if (key == "backend_config") {
      if (Contains(value, "\"collective_backend_config\"") || Contains(value, "\"fusion_backend_config\"") ||
          Contains(value, "\"operation_queue_id\"")) {
        return CompiledFor::kGpu;
      }
      if (Contains(value, "\"outer_dimension_partitions\"") || Contains(value, "__ynn_fusion") ||
          Contains(value, "__onednn")) {
        return CompiledFor::kCpu;
      }
    }
  }
  return CompiledFor::kUnknown;
}

}  // namespace

std::string_view CompiledForName(CompiledFor c) {
  switch (c) {
    case CompiledFor::kUnknown: return "unknown";
    case CompiledFor::kCpu: return "cpu";
    case CompiledFor::kTpu: return "tpu";
    case CompiledFor::kGpu: return "gpu";
  }
  return "unknown";
}

CompiledFor CompiledForOf(const Module& module) {
  CompiledFor seen = CompiledFor::kUnknown;
  for (int64_t c = 0; c < module.computation_count(); ++c) {
    const Computation& comp = *module.computation(c);
    for (int64_t i = 0; i < comp.instruction_count(); ++i) {
      const CompiledFor f = Of(*comp.instruction(i));
      if (f == CompiledFor::kTpu || f == CompiledFor::kGpu) return f;  // only they print what they print
      if (f == CompiledFor::kCpu) seen = f;
    }
  }
  return seen;
}

}  // namespace spmdsim::hlo
