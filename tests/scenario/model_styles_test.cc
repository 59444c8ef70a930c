// A model workload written with MaxText's or NeMo's keys (docs/model-styles.md): the same ModelConfig, mesh and
// predicted step as its role-based twin, and errors at the style key.
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/error.h"
#include "model/step.h"
#include "common/user_text.h"
#include "scenario/report.h"
#include "scenario/scenario.h"
#include "tests/scenario/parse_error.h"

namespace spmdsim {
namespace {

using ::spmdsim::testing_scenario::ErrorOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::string ScenarioPath(const std::string& name) { return std::string(SPMDSIM_SOURCE_DIR) + "/scenarios/" + name; }

const ValidatedModel& Model(const Scenario& s) { return std::get<ValidatedModel>(s.workloads.at(0).config); }

void ExpectSameStep(const std::string& roles_file, const std::string& style_file) {
  const Scenario roles = LoadScenario(ScenarioPath(roles_file));
  const Scenario style = LoadScenario(ScenarioPath(style_file));
  const ModelConfig& a = Model(roles).config();
  const ModelConfig& b = Model(style).config();
  EXPECT_EQ(a.parallel.data_axes, b.parallel.data_axes);
  EXPECT_EQ(a.parallel.tensor_axes, b.parallel.tensor_axes);
  EXPECT_EQ(a.parallel.context_axes, b.parallel.context_axes);
  EXPECT_EQ(a.parallel.pipeline_axes, b.parallel.pipeline_axes);
  EXPECT_EQ(a.parallel.expert_axes, b.parallel.expert_axes);
  EXPECT_EQ(a.parallel.zero_stage, b.parallel.zero_stage);
  EXPECT_EQ(a.parallel.sequence_parallel, b.parallel.sequence_parallel);
  EXPECT_EQ(a.parallel.schedule, b.parallel.schedule);
  EXPECT_EQ(a.parallel.virtual_stages, b.parallel.virtual_stages);
  EXPECT_EQ(a.global_batch, b.global_batch);
  EXPECT_EQ(a.micro_batch, b.micro_batch);
  EXPECT_EQ(a.recompute, b.recompute);
  EXPECT_EQ(roles.mesh.mesh.axis_names(), style.mesh.mesh.axis_names());
  EXPECT_EQ(roles.mesh.mesh.device_ids(), style.mesh.mesh.device_ids());
  const ModelStepTimes ta = PredictModelStep(Model(roles)), tb = PredictModelStep(Model(style));
  EXPECT_EQ(ta.step_seconds, tb.step_seconds);  // the same step, to the bit
  EXPECT_EQ(ta.mfu, tb.mfu);
  EXPECT_EQ(ta.exposed_comm_seconds, tb.exposed_comm_seconds);
  EXPECT_EQ(ta.bubble_seconds, tb.bubble_seconds);
}

TEST(ModelStyles, MaxTextScenarioPredictsTheRoleBasedStep) {
  ExpectSameStep("llama3-8b-tpu-v5p-64.yaml", "llama3-8b-tpu-v5p-64-maxtext.yaml");
  const Scenario s = LoadScenario(ScenarioPath("llama3-8b-tpu-v5p-64-maxtext.yaml"));
  EXPECT_EQ(s.topology.topology->accelerator_type(), "v5p-128");
  EXPECT_THAT(s.mesh.description, HasSubstr("from MaxText's parallelism of workloads[0]: fsdp=64"));
}

TEST(ModelStyles, NemoScenarioPredictsTheRoleBasedStep) {
  ExpectSameStep("llama3-8b-dgx-h100-16.yaml", "llama3-8b-dgx-h100-16-nemo.yaml");
  const Scenario s = LoadScenario(ScenarioPath("llama3-8b-dgx-h100-16-nemo.yaml"));
  EXPECT_THAT(s.mesh.mesh.axis_names(), ElementsAre("pipe", "data", "tensor"));  // Megatron: tensor fastest
}

const std::string kV5p = "topology: {preset: \"tpu-v5p:4x4x4\"}\nworkloads:\n  - kind: model\n    heads: 16\n";

TEST(ModelStyles, MaxTextFillsItsPlaceholdersAndMapsItsAxes) {
  // ici_fsdp_parallelism defaults to -1: it takes the 64 / 4 devices the tensor axis leaves.
  const Scenario s = ParseScenario(kV5p + "    ici_tensor_parallelism: 4\n    per_device_batch_size: 2\n"
                                          "    remat_policy: minimal\n", "t.yaml");
  const ModelConfig& c = Model(s).config();
  EXPECT_THAT(s.mesh.mesh.axis_names(), ElementsAre("fsdp", "tensor"));
  EXPECT_THAT(s.mesh.mesh.shape(), ElementsAre(16, 4));
  EXPECT_THAT(c.parallel.data_axes, ElementsAre("fsdp"));
  EXPECT_EQ(c.parallel.zero_stage, 3);
  EXPECT_THAT(c.parallel.tensor_axes, ElementsAre("tensor"));
  EXPECT_EQ(c.global_batch, 128);  // 2 per device x 64 devices
  EXPECT_EQ(c.micro_batch, 8);     // 128 / 16 data ranks
  EXPECT_EQ(c.recompute, Recompute::kSelective);
  // MaxText's default remat_policy is full; gradient accumulation splits the batch into micro-batches.
  const Scenario g = ParseScenario(kV5p +
                                       "    ici_data_parallelism: 64\n    ici_fsdp_parallelism: 1\n"
                                       "    per_device_batch_size: 1\n    gradient_accumulation_steps: 4\n",
                                   "t.yaml");
  const ModelConfig& gc = Model(g).config();
  EXPECT_EQ(gc.recompute, Recompute::kFull);
  EXPECT_EQ(gc.parallel.zero_stage, 0);
  EXPECT_THAT(gc.parallel.data_axes, ElementsAre("data"));
  EXPECT_EQ(gc.global_batch, 256);  // 1 x 64 devices x 4 accumulation steps
  EXPECT_EQ(gc.micro_batch, 1);     // 256 / (64 data ranks x 4 steps)
  // Two slices: dcn_data_parallelism (-1 by default) takes them, create_hybrid_device_mesh builds the mesh.
  const Scenario two = ParseScenario("topology: {preset: \"tpu-v5p:2x2x2\", slices: 2}\nworkloads:\n  - kind: model\n"
                                     "    heads: 16\n    per_device_batch_size: 1\n    remat_policy: none\n", "t.yaml");
  EXPECT_THAT(two.mesh.mesh.axis_names(), ElementsAre("data", "fsdp"));
  EXPECT_THAT(two.mesh.mesh.shape(), ElementsAre(2, 8));
  EXPECT_THAT(two.mesh.description, HasSubstr("create_hybrid_device_mesh"));
  EXPECT_THAT(Model(two).config().parallel.data_axes, ElementsAre("data", "fsdp"));
}

TEST(ModelStyles, MaxTextLogicalAxisRulesGiveTheRoles) {
  const std::string rules = R"y(topology: {preset: "tpu-v5p:4x4x4"}
mesh: {axes: {data: 4, fsdp: 4, tensor: 4}}
rules:
  logical_axis_rules: [[activation_batch, [data, fsdp]], [heads, tensor], [embed, fsdp], [activation_length, null]]
workloads:
  - kind: model
    heads: 16
    ici_data_parallelism: 4
    ici_fsdp_parallelism: 4
    ici_tensor_parallelism: 4
    per_device_batch_size: 1
    remat_policy: full
)y";
  for (const std::string& form : {std::string("    logical_axis_rules: scenario\n"),
                                  std::string("    logical_axis_rules: [[activation_batch, [data, fsdp]], [heads, "
                                              "tensor], [embed, fsdp]]\n")}) {
    const Scenario s = ParseScenario(rules + form, "t.yaml");
    const ModelConfig& c = Model(s).config();
    EXPECT_THAT(c.parallel.data_axes, ElementsAre("data", "fsdp"));
    EXPECT_EQ(c.parallel.zero_stage, 3);
    EXPECT_THAT(c.parallel.tensor_axes, ElementsAre("tensor"));
    EXPECT_TRUE(c.parallel.context_axes.empty());
  }
  // Heads kept whole: the tensor axis would repeat work; the rules say so at their line.
  EXPECT_THAT(ErrorOf(rules + "    logical_axis_rules: [[activation_batch, [data, fsdp]], [embed, fsdp]]\n"),
              HasSubstr("t.yaml:13:25: workloads[0].logical_axis_rules: mesh axis 'tensor' (size 4) is in no rule for "
                        "activation_batch, heads, activation_length or layers"));
}

TEST(ModelStyles, NemoSizesMapOntoMegatronsRoles) {
  const Scenario s = ParseScenario(R"y(topology: {preset: "dgx-h100:4"}
workloads:
  - kind: model
    heads: 16
    layers: 8
    moe: {experts: 4, top_k: 2}
    tensor_model_parallel_size: 2
    pipeline_model_parallel_size: 2
    context_parallel_size: 2
    expert_model_parallel_size: 2
    global_batch_size: 32
    micro_batch_size: 2
    activations_checkpoint_granularity: full
)y", "t.yaml");
  const ModelConfig& c = Model(s).config();
  EXPECT_THAT(s.mesh.mesh.axis_names(), ElementsAre("pipe", "data", "expert", "context", "tensor"));
  EXPECT_THAT(s.mesh.mesh.shape(), ElementsAre(2, 2, 2, 2, 2));
  EXPECT_THAT(c.parallel.data_axes, ElementsAre("data", "expert"));
  EXPECT_THAT(c.parallel.expert_axes, ElementsAre("expert"));
  EXPECT_THAT(c.parallel.context_axes, ElementsAre("context"));
  EXPECT_EQ(c.parallel.schedule, PipelineSchedule::k1F1B);
  EXPECT_EQ(c.parallel.zero_stage, 0);
  EXPECT_FALSE(c.parallel.sequence_parallel);
  EXPECT_EQ(c.global_batch, 32);
  EXPECT_EQ(c.micro_batch, 2);
  EXPECT_EQ(c.recompute, Recompute::kFull);
}

const std::string kH100 = "topology: {preset: \"dgx-h100:2\"}\nworkloads:\n  - kind: model\n    heads: 16\n";

TEST(ModelStyles, ErrorsPointAtTheStyleKey) {
  EXPECT_THAT(ErrorOf(kH100 + "    tensor_model_parallel_size: 8\n    ici_fsdp_parallelism: 2\n"),
              HasSubstr("t.yaml:5:33: workloads[0].tensor_model_parallel_size: NeMo's tensor_model_parallel_size with "
                        "MaxText's ici_fsdp_parallelism: write the parallelism in one style"));
  EXPECT_THAT(ErrorOf(kH100 + "    tensor_model_parallel_size: 8\n    parallel: {tensor_axes: [tensor]}\n"),
              HasSubstr("workloads[0].parallel: the workload is written in NeMo's keys, where the *_parallel_size "
                        "keys says this"));
  EXPECT_THAT(ErrorOf(kH100 + "    tensor_model_parallel_size: 3\n"),
              HasSubstr("tensor x pipeline x context parallel sizes = 3 x 1 x 1 = 3 do not divide the 16 devices"));
  EXPECT_THAT(ErrorOf(kH100 + "    expert_model_parallel_size: 2\n    global_batch_size: 32\n"),
              HasSubstr("t.yaml:5:33: workloads[0].expert_model_parallel_size: model 'model': expert_axes need "
                        "moe.experts > 0"));
  EXPECT_THAT(ErrorOf(kH100 + "    ici_tensor_parallelism: 4\n    ici_fsdp_parallelism: 1\n"),
              HasSubstr("the ici_*_parallelism keys multiply to 4, but the number of devices of one host (dgx-h100:2) "
                        "is 8"));
  EXPECT_THAT(ErrorOf(kH100 + "    ici_tensor_parallelism: -1\n"), HasSubstr("two ici axes are -1 (fsdp and tensor)"));
  EXPECT_THAT(ErrorOf(kH100 + "    ici_fsdp_parallelism: 8\n    per_device_batch_size: 1\n"
                      "    remat_policy: save_qkv_prj\n"),
              HasSubstr("workloads[0].remat_policy: 'save_qkv_prj' recomputes part of the projections or of the MLP, "
                        "which the model's recompute options (none, selective, full) cannot express"));
  EXPECT_THAT(ErrorOf(kH100 + "    ici_fsdp_parallelism: 8\n    per_device_batch_size: 0.3\n"),
              HasSubstr("0.3 x 16 devices x 1 accumulation steps = 4.8 sequences, not a whole number"));
  EXPECT_THAT(ErrorOf(kH100 + "    ici_autoregressive_parallelism: 8\n    ici_fsdp_parallelism: 1\n"),
              HasSubstr("the autoregressive axis shards decoding"));
  // With a mesh: the style's axes must be in it.
  EXPECT_THAT(ErrorOf("topology: {preset: \"dgx-h100:2\"}\nmesh: {axes: {data: 2, model: 8}}\nworkloads:\n"
                      "  - kind: model\n    heads: 16\n    tensor_model_parallel_size: 8\n"),
              HasSubstr("workloads[0].tensor_model_parallel_size: NeMo's parallelism asks for a mesh axis 'tensor' of "
                        "size 8; the scenario's mesh has ('data': 2, 'model': 8)"));
  // Neither a mesh nor a style: the mesh is required, as before.
  EXPECT_THAT(ErrorOf("topology: {preset: \"dgx-h100:2\"}\nworkloads:\n  - kind: model\n"),
              HasSubstr("mesh: missing required key"));
}


// The model's own fields under MaxText's and NeMo 2.0 / Megatron-Core's names (scenario/internal/model_styles.h
// kModelKeyNames): the same ModelConfig as spmdsim's keys.
const std::string kLlamaRoles = R"y(topology: {preset: "dgx-h100:2"}
mesh: {axes: {data: 2, tensor: 8}}
workloads:
  - kind: model
    name: llama
    vocab: 128256
    d_model: 4096
    layers: 4
    heads: 32
    kv_heads: 8
    head_dim: 128
    d_ff: 14336
    seq: 8192
    activation: swiglu
    norm: rmsnorm
    recompute: selective
    global_batch: 16
    parallel: {data_axes: [data], tensor_axes: [tensor]}
)y";

void ExpectSameModel(const ModelConfig& a, const ModelConfig& b) {
  EXPECT_EQ(a.name, b.name);
  EXPECT_EQ(a.vocab, b.vocab);
  EXPECT_EQ(a.d_model, b.d_model);
  EXPECT_EQ(a.layers, b.layers);
  EXPECT_EQ(a.heads, b.heads);
  EXPECT_EQ(a.kv_heads, b.kv_heads);
  EXPECT_EQ(a.head_dim, b.head_dim);
  EXPECT_EQ(a.d_ff, b.d_ff);
  EXPECT_EQ(a.seq, b.seq);
  EXPECT_EQ(a.activation, b.activation);
  EXPECT_EQ(a.recompute, b.recompute);
  EXPECT_EQ(a.global_batch, b.global_batch);
}

TEST(ModelKeys, MaxTextAndNemoNamesGiveTheSameModel) {
  const Scenario roles = ParseScenario(kLlamaRoles, "t.yaml");
  const Scenario maxtext = ParseScenario(R"y(topology: {preset: "dgx-h100:2"}
mesh: {axes: {data: 2, tensor: 8}}
workloads:
  - kind: model
    model_name: llama
    vocab_size: 128256
    base_emb_dim: 4096
    base_num_decoder_layers: 4
    base_num_query_heads: 32
    base_num_kv_heads: 8
    head_dim: 128
    base_mlp_dim: 14336
    max_target_length: 8192
    mlp_activations: [silu, linear]
    norm: rmsnorm
    recompute: selective
    global_batch: 16
    parallel: {data_axes: [data], tensor_axes: [tensor]}
)y", "t.yaml");
  const Scenario nemo = ParseScenario(R"y(topology: {preset: "dgx-h100:2"}
mesh: {axes: {data: 2, tensor: 8}}
workloads:
  - kind: model
    name: llama
    vocab_size: 128256
    hidden_size: 4096
    num_layers: 4
    num_attention_heads: 32
    num_query_groups: 8
    kv_channels: 128
    ffn_hidden_size: 14336
    seq_length: 8192
    activation: swiglu
    norm: rmsnorm
    recompute_granularity: selective
    global_batch: 16
    parallel: {data_axes: [data], tensor_axes: [tensor]}
)y", "t.yaml");
  ExpectSameModel(Model(roles).config(), Model(maxtext).config());
  ExpectSameModel(Model(roles).config(), Model(nemo).config());
  EXPECT_EQ(roles.workloads[0].model_keys, ModelKeyFamily::kSpmdsim);
  EXPECT_EQ(maxtext.workloads[0].model_keys, ModelKeyFamily::kMaxText);
  EXPECT_EQ(nemo.workloads[0].model_keys, ModelKeyFamily::kNemo);
  EXPECT_EQ(maxtext.workloads[0].name, "llama");  // model_name names the workload
}

// Written back in the family it was read in (what `plan --write` does), and read again: the same model.
TEST(ModelKeys, AModelIsWrittenBackInItsFamilyAndReadsTheSame) {
  const ModelConfig c = Model(ParseScenario(kLlamaRoles, "t.yaml")).config();
  const std::vector<std::pair<std::string, int64_t>> axes = {{"data", 2}, {"tensor", 8}};
  for (const ModelKeyFamily family : {ModelKeyFamily::kSpmdsim, ModelKeyFamily::kMaxText, ModelKeyFamily::kNemo}) {
    const std::string text = ModelScenarioYaml("back", "", "dgx-h100:2", axes, c, "", false, family);
    const Scenario back = ParseScenario(text, "back.yaml");
    ExpectSameModel(c, Model(back).config());
    EXPECT_EQ(back.workloads[0].model_keys, family) << text;
    const char* d_model = family == ModelKeyFamily::kMaxText ? "base_emb_dim: 4096"
                          : family == ModelKeyFamily::kNemo  ? "hidden_size: 4096"
                                                             : "d_model: 4096";
    EXPECT_THAT(text, HasSubstr(d_model));
  }
  ModelConfig none = c;
  none.recompute = Recompute::kNone;
  none.activation = Activation::kGelu;
  const std::string nemo = ModelScenarioYaml("back", "", "dgx-h100:2", axes, none, "", false, ModelKeyFamily::kNemo);
  EXPECT_THAT(nemo, HasSubstr("recompute_granularity: ~"));
  EXPECT_EQ(Model(ParseScenario(nemo, "b.yaml")).config().recompute, Recompute::kNone);
  const std::string maxtext =
      ModelScenarioYaml("back", "", "dgx-h100:2", axes, none, "", false, ModelKeyFamily::kMaxText);
  EXPECT_THAT(maxtext, HasSubstr("mlp_activations: [gelu]"));
  EXPECT_EQ(Model(ParseScenario(maxtext, "b.yaml")).config().activation, Activation::kGelu);
}

const std::string kModelHead = "topology: {preset: \"dgx-h100:2\"}\nmesh: {axes: {data: 16}}\nworkloads:\n"
                               "  - kind: model\n    parallel: {data_axes: [data]}\n    global_batch: 16\n";

TEST(ModelKeys, TwoNamesOrTwoFamiliesAreErrorsAtTheKey) {
  EXPECT_THAT(ErrorOf(kModelHead + "    d_model: 1024\n    hidden_size: 1024\n"),
              HasSubstr("t.yaml:8:18: workloads[0].hidden_size: 'd_model' and 'hidden_size' both set the model's "
                        "d_model: give one of them"));
  EXPECT_THAT(ErrorOf(kModelHead + "    base_emb_dim: 1024\n    num_layers: 4\n"),
              HasSubstr("workloads[0].num_layers: MaxText's 'base_emb_dim' with NeMo's 'num_layers': write the model "
                        "in one family's keys"));
  EXPECT_THAT(ErrorOf(kModelHead + "    mlp_activations: [gelu, linear]\n"),
              HasSubstr("MaxText's mlp_activations [gelu, linear] has no counterpart"));
  EXPECT_THAT(ErrorOf(kModelHead + "    recompute_granularity: block\n"),
              HasSubstr("workloads[0].recompute_granularity"));
  // A model error at the field's MaxText / NeMo name.
  EXPECT_THAT(ErrorOf(kModelHead + "    num_attention_heads: 6\n    hidden_size: 1024\n"),
              HasSubstr("t.yaml:7:26: workloads[0].num_attention_heads"));
}

// Before: `num_layers` was an unknown key with "did you mean 'mtp_layers'?", and the list of valid keys was cut
// (at the 1000-character error line) before NeMo's keys. After: num_layers is NeMo's name of layers, and the list
// names every family's model keys within one line, pointing at the parallelism keys' list.
TEST(ModelKeys, TheValidKeyListNamesEveryFamilyWithinOneLine) {
  EXPECT_EQ(Model(ParseScenario(kModelHead + "    num_layers: 3\n", "t.yaml")).config().layers, 3);
  const std::string e = ErrorOf(kModelHead + "    num_layer: 3\n");
  EXPECT_THAT(e, HasSubstr("unknown key 'num_layer', did you mean 'num_layers'?"));
  EXPECT_THAT(e, HasSubstr("; MaxText's model keys: model_name, vocab_size, base_emb_dim"));
  EXPECT_THAT(e, HasSubstr("; NeMo's: vocab_size, hidden_size, num_layers, num_attention_heads, num_query_groups, "
                           "kv_channels, ffn_hidden_size, seq_length, recompute_granularity; their parallelism keys: "
                           "docs/model-styles.md"));
  EXPECT_LE(e.size() + 100, kMaxErrorLineChars) << e;  // room for a longer path
  EXPECT_THAT(ErrorOf(kModelHead + "    tensor_model_paralel_size: 2\n"),
              HasSubstr("did you mean 'tensor_model_parallel_size'?"));
}

// Before: a Llama-shaped model without `activation:` silently computed GELU. After: the report lists the fields
// the file left to their defaults.
TEST(ModelKeys, TheReportListsTheDefaultsApplied) {
  const Scenario s = ParseScenario(kModelHead + "    d_model: 1024\n    heads: 16\n    kv_heads: 4\n"
                                   "    norm: rmsnorm\n", "t.yaml");
  const std::vector<std::string>& d = s.workloads[0].model_defaults;
  EXPECT_THAT(d, ::testing::Contains("activation: gelu"));
  EXPECT_THAT(d, ::testing::Contains("layers: 8"));
  EXPECT_THAT(d, ::testing::Not(::testing::Contains(HasSubstr("norm:"))));
  EXPECT_THAT(d, ::testing::Not(::testing::Contains(HasSubstr("d_model:"))));
  EXPECT_THAT(DefaultsNote(d), HasSubstr("note: defaults applied (not in the file): vocab: 32000, layers: 8"));
  const Scenario nemo = ParseScenario(kModelHead + "    hidden_size: 1024\n", "t.yaml");
  EXPECT_THAT(nemo.workloads[0].model_defaults, ::testing::Contains("num_layers: 8"));
  EXPECT_THAT(nemo.workloads[0].model_defaults, ::testing::Contains("recompute_granularity: null"));
}

}  // namespace
}  // namespace spmdsim
