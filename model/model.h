// The decoder-only LM training step, all of it: include this to use the model library (docs/model.md).
//   model/config.h      ModelConfig, ValidateModel -> ValidatedModel (checked once, trusted downstream)
//   model/accounting.h  AccountModel: parameters, FLOPs, memory per device by category and stage
//   model/pipeline.h    Megatron's pipeline schedules: PipelineOrder, InFlightChunks, PipelineBubbleFraction
//   model/stack.h       the software stacks (Megatron / TE, PyTorch FSDP eager, MaxText) and their figures
//   model/step.h        PredictModelStep: the simulated step on compute and communication streams
// and, separately, model/layer_ops.h (LayerOps: the ops of each layer, which the step prices and the data run
// executes), model/plan.h (PlanModel, the configuration search) and model/validation.h (the published rows the
// step is checked against).
#ifndef SPMDSIM_MODEL_MODEL_H_
#define SPMDSIM_MODEL_MODEL_H_

#include "model/accounting.h"
#include "model/config.h"
#include "model/pipeline.h"
#include "model/stack.h"
#include "model/step.h"

#endif  // SPMDSIM_MODEL_MODEL_H_
