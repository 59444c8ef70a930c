// A model workload written with MaxText's or NeMo's keys (docs/model-styles.md): the same ModelConfig, mesh and
// predicted step as its role-based twin, and errors at the style key.
#include <string>
#include <variant>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/error.h"
#include "model/step.h"
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

}  // namespace
}  // namespace spmdsim
