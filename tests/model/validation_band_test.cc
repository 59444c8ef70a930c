#include "model/validation_band.h"

#include <algorithm>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "mesh/mesh_utils.h"
#include "mesh/topology.h"
#include "model/model.h"
#include "model/validation.h"
#include "tests/model/small_model.h"

namespace spmdsim {
namespace {

using ::testing::HasSubstr;

std::string ClassOf(ModelConfig c, const std::string& topology,
                    const std::vector<std::pair<std::string, int64_t>>& axes) {
  return ClassifyModelRun(
             ValidateModel(std::move(c), MakeDeviceMesh(std::make_shared<const Topology>(Topology::Parse(topology)),
                                                        axes)))
      .Key();
}

TEST(ValidationBand, ClassifiesHardwareStackAndParallelism) {
  ModelConfig tp = testing_model::SmallModel();
  tp.parallel = {.data_axes = {"data"}, .tensor_axes = {"tensor"}};
  EXPECT_EQ(ClassOf(tp, "dgx-h100:1", {{"data", 2}, {"tensor", 4}}), "H100 x megatron x TP/PP/CP");
  EXPECT_EQ(ClassOf(tp, "dgx-a100:1", {{"data", 2}, {"tensor", 4}}), "A100 x megatron x TP/PP/CP");

  ModelConfig fsdp = testing_model::SmallModel();
  fsdp.stack = SoftwareStack::kPytorchFsdp;
  fsdp.parallel = {.data_axes = {"data"}, .zero_stage = 3};
  EXPECT_EQ(ClassOf(fsdp, "dgx-h100:1", {{"data", 8}}), "H100 x pytorch-fsdp x FSDP/ZeRO-3");
  // ZeRO-3 with tensor parallelism beside it (MaxText's v5e 128B) stays FSDP; the auto stack on a TPU is maxtext.
  ModelConfig fsdp_tp = testing_model::SmallModel();
  fsdp_tp.parallel = {.data_axes = {"data"}, .zero_stage = 3, .tensor_axes = {"tensor"}};
  EXPECT_EQ(ClassOf(fsdp_tp, "tpu-v5e:4x4", {{"data", 4}, {"tensor", 4}}), "TPU v5e x maxtext x FSDP/ZeRO-3");
  // A pipeline makes it model-parallel even under ZeRO-3 (Llama 3 405B).
  fsdp_tp.parallel.pipeline_axes = {"pipe"};
  EXPECT_EQ(ClassOf(fsdp_tp, "tpu-v5e:4x4", {{"data", 1}, {"pipe", 4}, {"tensor", 4}}),
            "TPU v5e x maxtext x TP/PP/CP");

  ModelConfig data = testing_model::SmallModel();
  data.parallel = {.data_axes = {"data"}, .zero_stage = 1};
  EXPECT_EQ(ClassOf(data, "dgx-h200:1", {{"data", 8}}), "H200 x megatron x data-only");

  ModelConfig moe = testing_model::SmallModel();
  moe.moe.experts = 8;
  moe.parallel = {.data_axes = {"data"}, .expert_axes = {"data"}};
  EXPECT_EQ(ClassOf(moe, "dgx-h100:1", {{"data", 8}}), "H100 x megatron x MoE/EP");
}

TEST(ValidationBand, BandIsTheMinMaxAndMeanOfItsClassRows) {
  const std::vector<ValidationBand> bands = ComputeValidationBands(
      {{"b", 0.09, true}, {"a", 0.01, false}, {"b", -0.04, true}, {"b", 0.01, false}});
  ASSERT_EQ(bands.size(), 2u);
  EXPECT_EQ(bands[0].class_key, "a");
  EXPECT_EQ(bands[0].rows, 1);
  EXPECT_EQ(bands[0].enforced_rows, 0);
  EXPECT_EQ(bands[1].class_key, "b");
  EXPECT_EQ(bands[1].rows, 3);
  EXPECT_EQ(bands[1].enforced_rows, 2);
  EXPECT_DOUBLE_EQ(bands[1].min_gap, -0.04);
  EXPECT_DOUBLE_EQ(bands[1].max_gap, 0.09);
  EXPECT_NEAR(bands[1].mean_gap, 0.02, 1e-12);
}

TEST(ValidationBand, TextGivesTheRangeTheRowsAndTheEnforcedOnes) {
  ValidationBand b{"H100 x megatron x TP/PP/CP", 12, 9, -0.041, 0.089, 0.01};
  EXPECT_EQ(ValidationBandText(b), "validated: -4%..+9% on 12 H100 x megatron x TP/PP/CP runs (9 enforced)");
  b = {"TPU v5e x maxtext x FSDP/ZeRO-3", 1, 0, 0.002, 0.002, 0.002};
  EXPECT_EQ(ValidationBandText(b), "validated: +0%..+0% on 1 TPU v5e x maxtext x FSDP/ZeRO-3 run (none enforced)");
}

TEST(ValidationBand, ClassWithoutPublishedRunsSaysItIsNotValidated) {
  const ValidationBand b = FindValidationBand({"B200", "pytorch-fsdp", "data-only"});
  EXPECT_FALSE(b.validated());
  EXPECT_EQ(b.rows, 0);
  EXPECT_EQ(ValidationBandText(b), "not validated: no published run of class B200 x pytorch-fsdp x data-only");
}

TEST(ValidationBand, CheckedInBandsCoverThePublishedFamilies) {
  const ValidationBand korthikanti = FindValidationBand({"A100", "megatron", "TP/PP/CP"});
  EXPECT_EQ(korthikanti.rows, 8);  // Korthikanti et al. Table 5: 4 models x 2 recompute settings, all enforced
  EXPECT_EQ(korthikanti.enforced_rows, 8);
  const ValidationBand deepseek = FindValidationBand({"H100", "megatron", "MoE/EP"});
  EXPECT_EQ(deepseek.rows, 2);  // DeepSeek-V3, shown but not enforced
  EXPECT_EQ(deepseek.enforced_rows, 0);
  for (const ValidationBand& b : CheckedInValidationBands()) {
    EXPECT_GT(b.rows, 0) << b.class_key;
    EXPECT_LE(b.min_gap, b.mean_gap) << b.class_key;
    EXPECT_LE(b.mean_gap, b.max_gap) << b.class_key;
  }
}

// The step carries its band: what the reports print.
TEST(ValidationBand, PredictedStepCarriesTheBandOfItsClass) {
  ModelConfig c = testing_model::SmallModel();
  c.parallel = {.data_axes = {"data"}, .tensor_axes = {"tensor"}};
  const ModelStepTimes t = PredictModelStep(
      ValidateModel(c, MakeDeviceMesh(std::make_shared<const Topology>(Topology::Parse("dgx-h100:1")),
                                      {{"data", 2}, {"tensor", 4}})));
  EXPECT_EQ(t.validation.class_key, "H100 x megatron x TP/PP/CP");
  EXPECT_TRUE(t.validation.validated());
}

// model/validation_bands.inc is what `model_validation --bands` prints from the rows of docs/model-validation.md:
// a change to the model that moves a row's gap must regenerate it.
TEST(ValidationBand, CheckedInTableIsTheOneTheRowsGive) {
  std::ifstream file(std::string(SPMDSIM_SOURCE_DIR) + "/model/validation_bands.inc");
  ASSERT_TRUE(file.good());
  std::stringstream text;
  text << file.rdbuf();
  EXPECT_EQ(text.str(), FormatValidationBandsInc(ComputeModelValidationBands()))
      << "regenerate it: build/dev/bench/model/model_validation --bands > model/validation_bands.inc";
  EXPECT_EQ(FormatValidationBandsInc(CheckedInValidationBands()), text.str());
}

}  // namespace
}  // namespace spmdsim
