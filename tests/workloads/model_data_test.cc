// The model workload run with data (docs/model.md, "Running with data"): the loss and every weight gradient of
// each parallel layout equal the same model on one device.
#include <memory>
#include <set>

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/error.h"
#include "mesh/mesh_utils.h"
#include "mesh/topology.h"
#include "workloads/workloads.h"

namespace spmdsim {
namespace {

using ::testing::HasSubstr;

// A mesh over cpu:N, N the product of the axes' sizes.
Mesh Cpu(const std::vector<std::pair<std::string, int64_t>>& axes) {
  int64_t n = 1;
  for (const auto& [_, size] : axes) n *= size;
  return MakeDeviceMesh(std::make_shared<const Topology>(Topology::Parse(fmt::format("cpu:{}", n))), axes);
}

// A small Llama-like model: GQA, swiglu, rmsnorm.
ModelConfig Small() {
  ModelConfig c;
  c.name = "small";
  c.vocab = 64;
  c.d_model = 32;
  c.layers = 2;
  c.heads = 4;
  c.kv_heads = 2;
  c.d_ff = 64;
  c.activation = Activation::kSwiglu;
  c.norm = Norm::kRmsNorm;
  c.seq = 8;
  c.global_batch = 4;
  c.micro_batch = 1;
  c.seed = 7;
  return c;
}

WorkloadResult RunStep(const ModelConfig& c, const Mesh& mesh) {
  WorkloadContext ctx;
  ctx.mesh = mesh;
  return RunModel(ctx, c);
}

void ExpectChecked(const WorkloadResult& r, size_t values) {
  EXPECT_TRUE(r.check.performed) << r.check.compared;
  EXPECT_TRUE(r.check.passed) << r.check.compared;
  for (const CheckedValue& v : r.check.values) EXPECT_TRUE(v.passed) << v.worst;
  EXPECT_EQ(r.check.values.size(), values);
  ASSERT_TRUE(r.model_step.has_value());  // the prediction is still there
  EXPECT_EQ(r.totals.predicted_seconds, r.model_step->step_seconds);
}

// loss + embed + head + final norm + layers x (norm1, wq, wk, wv, wo, norm2, w1, w2 [, w3] [, 2 biases]).
size_t Values(const ModelConfig& c) {
  size_t per_layer = 8 + (c.activation == Activation::kSwiglu ? 1 : 0) + (c.norm == Norm::kLayerNorm ? 2 : 0);
  return 1 + 1 + (c.tied_embeddings ? 0 : 1) + (c.norm == Norm::kLayerNorm ? 2 : 1) + c.layers * per_layer;
}

TEST(ModelData, OneDeviceEqualsItself) {
  ModelConfig c = Small();
  c.micro_batch = c.global_batch;  // one micro-batch, as the reference: the same arithmetic in the same order
  WorkloadResult r = RunStep(c, Cpu({{"data", 1}}));
  ExpectChecked(r, Values(c));
  EXPECT_EQ(r.check.max_abs_error, 0);
}

TEST(ModelData, DataParallelGradientsEqualOneDevice) {
  ModelConfig c = Small();
  c.parallel.data_axes = {"data"};
  ExpectChecked(RunStep(c, Cpu({{"data", 4}})), Values(c));
}

TEST(ModelData, GradientAccumulationEqualsOneDevice) {
  ModelConfig c = Small();  // 4 micro-batches of 1 sequence
  ExpectChecked(RunStep(c, Cpu({{"data", 1}})), Values(c));
}

TEST(ModelData, TensorParallelGradientsEqualOneDevice) {
  ModelConfig c = Small();
  c.parallel.tensor_axes = {"tensor"};
  ExpectChecked(RunStep(c, Cpu({{"tensor", 2}})), Values(c));
}

TEST(ModelData, SequenceParallelGradientsEqualOneDevice) {
  ModelConfig c = Small();
  c.parallel.tensor_axes = {"tensor"};
  c.parallel.sequence_parallel = true;
  ExpectChecked(RunStep(c, Cpu({{"tensor", 2}})), Values(c));
}

TEST(ModelData, PipelineGradientsEqualOneDevice) {
  ModelConfig c = Small();
  c.parallel.pipeline_axes = {"pipe"};
  ExpectChecked(RunStep(c, Cpu({{"pipe", 2}})), Values(c));
}

TEST(ModelData, GptLikeLayoutsEqualOneDevice) {
  ModelConfig c = Small();
  c.activation = Activation::kGelu;
  c.norm = Norm::kLayerNorm;
  c.kv_heads = 0;
  c.tied_embeddings = true;
  c.layers = 4;
  c.global_batch = 8;
  c.parallel = {.data_axes = {"data"}, .zero_stage = 3, .tensor_axes = {"tensor"}, .sequence_parallel = true,
                .pipeline_axes = {"pipe"}};
  ExpectChecked(RunStep(c, Cpu({{"data", 2}, {"pipe", 2}, {"tensor", 2}})), Values(c));
}

}  // namespace
}  // namespace spmdsim
