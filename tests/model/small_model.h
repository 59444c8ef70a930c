// The small Llama-style model the model-step and plan tests share (2048 wide, 8 layers, GQA 16/4).
#ifndef SPMDSIM_TESTS_WORKLOADS_SMALL_MODEL_H_
#define SPMDSIM_TESTS_WORKLOADS_SMALL_MODEL_H_

#include "model/model.h"

namespace spmdsim::testing_model {

inline ModelConfig SmallModel() {
  ModelConfig c = LlamaModel(2048, 8, 16, 4, 5632, 2048);
  c.name = "small";
  c.global_batch = 32;
  return c;
}

}  // namespace spmdsim::testing_model

#endif  // SPMDSIM_TESTS_WORKLOADS_SMALL_MODEL_H_
