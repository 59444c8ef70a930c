// `kind: hlo` items of a scenario file (docs/scenarios.md) onto HloConfig (workloads/hlo_workload.h):
//
//   - kind: hlo
//     file: jit_step.txt                 # compiled.as_text() or an --xla_dump_to file, relative to the scenario
//     inputs: random                     # zeros | ones | iota | random, for every parameter, or one per parameter:
//     # inputs: [random, {init: random, seed: 7, scale: 0.02}, {npy: tokens.npy}, zeros]
//     device_assignment: [0, 1, 2, 3]    # logical device -> device id (default: the mesh's devices in order)
//     expected: [{output: 0, npy: loss.npy}]
//     rtol: 1e-5
//     atol: 1e-6
//     overlap_collectives: false         # true: price the collectives as XLA's async ones on a TPU / GPU
//     narrow_types: true                 # bf16 values XLA CPU widened to f32 priced in bf16 (default: not on CPUs)
//
// The module is read and verified here, so that its errors (file:line:col in the HLO file) come when the
// scenario is loaded.
#include <filesystem>

#include <fmt/format.h>

#include "common/error.h"
#include "hlo/parser.h"
#include "scenario/internal/scenario_parsers.h"
#include "scenario/npy.h"

namespace spmdsim {
namespace {

std::string Resolve(const Scenario& s, const std::string& file) {
  std::filesystem::path p(file);
  if (p.is_relative()) p = std::filesystem::path(s.path).parent_path() / p;
  return p.lexically_normal().string();
}

// An .npy file's array as raw bytes, dtype and shape.
void ReadNpyInto(const YamlContext& ctx, const YAML::Node& node, const std::string& key, const std::string& path,
                 DType* dtype, std::vector<int64_t>* shape, std::vector<uint8_t>* bytes) {
  try {
    NpyArray a = ReadNpy(path);
    *dtype = a.dtype;
    *shape = a.shape;
    *bytes = std::move(a.data);
  } catch (const Error& e) {
    ctx.Rethrow(node, key, e);
  }
}

const std::vector<std::string>& InitNames() {
  static const std::vector<std::string> names = {"zeros", "ones", "iota", "random"};
  return names;
}

HloInput::Kind KindOf(const std::string& name) {
  if (name == "zeros") return HloInput::Kind::kZeros;
  if (name == "ones") return HloInput::Kind::kOnes;
  if (name == "iota") return HloInput::Kind::kIota;
  return HloInput::Kind::kRandom;
}

HloInput ParseInput(const YamlContext& ctx, const YAML::Node& node, const std::string& key, const Scenario& s,
                    int64_t index) {
  HloInput in;
  in.seed = static_cast<uint64_t>(index);
  if (node.IsScalar()) {
    in.kind = KindOf(ctx.Choice(node, key, InitNames()));
    return in;
  }
  YamlMap m(ctx, node, key, {"init", "seed", "scale", "npy"});
  if (m.Has("npy")) {
    if (m.Has("init")) ctx.Fail(m.Get("init"), m.Key("init"), "give either init: or npy:, not both");
    in.kind = HloInput::Kind::kData;
    ReadNpyInto(ctx, m.Get("npy"), m.Key("npy"), Resolve(s, ctx.String(m.Get("npy"), m.Key("npy"))), &in.dtype,
                &in.shape, &in.bytes);
    return in;
  }
  if (m.Has("init")) in.kind = KindOf(ctx.Choice(m.Get("init"), m.Key("init"), InitNames()));
  if (m.Has("seed")) in.seed = static_cast<uint64_t>(m.Int("seed", 0));
  if (m.Has("scale")) in.scale = ctx.NumberIn(m.Get("scale"), m.Key("scale"), 0, 1e30);
  return in;
}

void ParseInputs(const YamlContext& ctx, const YamlMap& m, const Scenario& s, HloConfig* c) {
  const YAML::Node node = m.Get("inputs");
  const int64_t params = c->module->entry()->parameter_count();
  if (node.IsScalar()) {
    HloInput one = ParseInput(ctx, node, m.Key("inputs"), s, 0);
    for (int64_t i = 0; i < params; ++i) {
      c->inputs.push_back(one);
      c->inputs.back().seed = static_cast<uint64_t>(i);
    }
    return;
  }
  ctx.RequireSequence(node, m.Key("inputs"));
  if (static_cast<int64_t>(node.size()) != params) {
    ctx.Fail(node, m.Key("inputs"), fmt::format("{} inputs; %{} of {} has {} parameters", node.size(),
                                                c->module->entry()->name(), c->module->file(), params));
  }
  for (size_t i = 0; i < node.size(); ++i) {
    c->inputs.push_back(
        ParseInput(ctx, node[i], fmt::format("{}[{}]", m.Key("inputs"), i), s, static_cast<int64_t>(i)));
  }
}

void ParseExpected(const YamlContext& ctx, const YamlMap& m, const Scenario& s, HloConfig* c) {
  const YAML::Node node = m.Get("expected");
  ctx.RequireSequence(node, m.Key("expected"));
  for (size_t i = 0; i < node.size(); ++i) {
    const std::string key = fmt::format("{}[{}]", m.Key("expected"), i);
    YamlMap e(ctx, node[i], key, {"output", "npy"});
    HloExpected x;
    x.output = e.Int("output", 0);
    ReadNpyInto(ctx, e.Need("npy"), e.Key("npy"), Resolve(s, ctx.String(e.Get("npy"), e.Key("npy"))), &x.dtype,
                &x.shape, &x.bytes);
    c->expected.push_back(std::move(x));
  }
}

}  // namespace

HloConfig ParseHloWorkload(const YamlContext& ctx, const YamlMap& m, const Scenario& s) {
  HloConfig c;
  const YAML::Node file = m.Need("file");
  const std::string path = Resolve(s, ctx.String(file, m.Key("file")));
  try {
    c.module = hlo::LoadModule(path);
  } catch (const Error& e) {
    ctx.Rethrow(file, m.Key("file"), e);
  }
  if (m.Has("inputs")) ParseInputs(ctx, m, s, &c);
  if (m.Has("device_assignment")) {
    for (int64_t id : ctx.IntList(m.Get("device_assignment"), m.Key("device_assignment"))) {
      if (id < 0 || id >= s.mesh.mesh.topology()->num_devices()) {
        ctx.Fail(m.Get("device_assignment"), m.Key("device_assignment"),
                 fmt::format("device id {} is not a device of the topology (0..{})", id,
                             s.mesh.mesh.topology()->num_devices() - 1));
      }
      c.device_assignment.push_back(static_cast<int>(id));
    }
  }
  if (m.Has("expected")) ParseExpected(ctx, m, s, &c);
  c.overlap_collectives = m.Bool("overlap_collectives", false);
  if (m.Has("narrow_types")) c.narrow_types = m.Bool("narrow_types", true);
  if (m.Has("rtol")) c.rtol = ctx.NumberIn(m.Get("rtol"), m.Key("rtol"), 0, 1e30);
  if (m.Has("atol")) c.atol = ctx.NumberIn(m.Get("atol"), m.Key("atol"), 0, 1e30);
  if (m.Has("model_flops_per_step")) {
    c.model_flops_per_step = ctx.NumberIn(m.Get("model_flops_per_step"), m.Key("model_flops_per_step"), 0, 1e30);
  }
  if (m.Has("tokens_per_step")) {
    c.tokens_per_step = ctx.NumberIn(m.Get("tokens_per_step"), m.Key("tokens_per_step"), 0, 1e30);
  }
  c.max_while_iterations = m.Int("max_while_iterations", c.max_while_iterations);
  if (c.max_while_iterations < 1) {
    ctx.Fail(m.Get("max_while_iterations"), m.Key("max_while_iterations"), "must be a positive number of iterations");
  }
  if (m.Has("max_while_seconds")) {
    c.max_while_seconds = ctx.NumberIn(m.Get("max_while_seconds"), m.Key("max_while_seconds"), 1e-3, 1e9);
  }
  return c;
}

}  // namespace spmdsim
