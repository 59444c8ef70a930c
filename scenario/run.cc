#include "scenario/run.h"
#include "scenario/arrays.h"

#include <type_traits>
#include <variant>

#include <fmt/format.h>

#include "common/error.h"
#include "common/error_context.h"
#include "sim/multiprocess.h"
#include "sim/runtime_options.h"

namespace spmdsim {
namespace {

// The engine of each Config type.
struct Dispatch {
  const Scenario& scenario;
  const ScenarioWorkload& workload;
  const WorkloadContext& context;

  WorkloadResult operator()(const CollectivesConfig& c) const { return RunCollectives(context, c); }
  WorkloadResult operator()(const ShardMapConfig& config) const {
    ShardMapConfig c = config;
    // Across ranks, an input is made block by block (each rank its own devices' blocks, docs/multiprocess.md);
    // in one process whole.
    const bool across_ranks = context.runtime.process_group != nullptr && context.runtime.process_group->size() > 1;
    for (const ShardMapInputRef& ref : workload.shard_map_inputs) {
      const ScenarioArray& a = scenario.array(ref.array);
      ProgramInput in{ref.array, {}, ref.spec};
      if (across_ranks || context.abstract) {
        in.value = Array::Abstract(a.shape, a.dtype);
        in.make_blocks = [&a](const std::vector<std::vector<IndexRange>>& blocks) {
          return MakeScenarioArrayBlocks(a, blocks);
        };
      } else {
        in.value = MakeScenarioArray(a, false);
      }
      c.inputs.push_back(std::move(in));
    }
    return RunShardMapProgram(context, c);
  }
  WorkloadResult operator()(const MlpConfig& c) const { return RunMlp(context, c); }
  WorkloadResult operator()(const TransformerBlockConfig& c) const { return RunTransformerBlock(context, c); }
  WorkloadResult operator()(const PartitionConfig& c) const { return RunPartition(context, c); }
  WorkloadResult operator()(const ValidatedModel& m) const { return RunModel(context, m); }
  WorkloadResult operator()(const HloConfig& c) const { return RunHlo(context, c); }
};

}  // namespace

WorkloadContext ScenarioWorkloadContext(const Scenario& scenario, const ScenarioRunOptions& options) {
  WorkloadContext ctx;
  ctx.mesh = scenario.mesh.mesh;
  ctx.runtime.num_threads = options.num_threads;
  ctx.runtime.process_group = options.process_group;
  ctx.runtime.fiber_stack_bytes = kEigenFiberStackBytes;  // Eigen's GEMM (sim/runtime_options.h)
  ctx.abstract = options.abstract;
  ctx.cost.roofline = scenario.topology.efficiency;
  for (const auto& [id, factor] : scenario.topology.stragglers) ctx.cost.speed_factors[id] = factor;
  if (scenario.topology.calibration) ctx.cost.model_calibration = scenario.topology.calibration->figures;
  ctx.record_trace = options.record_trace;
  ctx.keep_arrays = options.keep_arrays;
  return ctx;
}

WorkloadResult RunScenarioWorkload(const Scenario& scenario, const ScenarioWorkload& workload,
                                   const WorkloadContext& context) {
  try {
    return std::visit(Dispatch{scenario, workload, context}, workload.config);
  } catch (const Error& e) {
    // Say which workload (and where in the file) rejected its configuration.
    RethrowWithContext(e, fmt::format("{}: workload '{}' ({}): {}", workload.location.ToString(), workload.name,
                                      WorkloadKindName(workload.kind), e.message()));
  }
}

std::vector<WorkloadResult> RunScenario(const Scenario& scenario, const ScenarioRunOptions& options,
                                        const WorkloadStart& on_start, const WorkloadDone& on_done) {
  WorkloadContext context = ScenarioWorkloadContext(scenario, options);
  std::vector<WorkloadResult> results;
  results.reserve(scenario.workloads.size());
  for (size_t i = 0; i < scenario.workloads.size(); ++i) {
    if (on_start) on_start(i, scenario.workloads[i]);
    results.push_back(RunScenarioWorkload(scenario, scenario.workloads[i], context));
    if (on_done) on_done(i, results.back());
  }
  return results;
}

}  // namespace spmdsim
