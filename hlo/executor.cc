#include "hlo/executor.h"

#include <algorithm>
#include <map>
#include <memory>

#include <fmt/format.h>

#include "common/error.h"
#include "hlo/groups.h"
#include "sim/group_exchange.h"
#include "sim/runtime_options.h"

namespace spmdsim::hlo {
namespace {

// The groups of every collective of the module, built once on the calling thread and shared by the devices.
struct CollectivePlan {
  std::map<const Instruction*, std::unique_ptr<spmdsim::DeviceGroups>> groups;
  std::map<const Instruction*, std::unique_ptr<spmdsim::PermutePairs>> pairs;
};

CollectivePlan PlanCollectives(const Module& m) {
  CollectivePlan plan;
  const int64_t n = m.replica_count() * m.num_partitions();
  for (int64_t c = 0; c < m.computation_count(); ++c) {
    const Computation& comp = *m.computation(c);
    for (int64_t i = 0; i < comp.instruction_count(); ++i) {
      const Instruction* ins = comp.instruction(i);
      const Opcode op = ins->opcode();
      if (op == Opcode::kCollectivePermute || op == Opcode::kCollectivePermuteStart) {
        plan.pairs[ins] = std::make_unique<spmdsim::PermutePairs>(n,
                                                                  PairsOf(*ins, m.replica_count(), m.num_partitions()));
      } else if (IsCollective(op) && !IsAsyncCollectiveDone(op)) {
        plan.groups[ins] = std::make_unique<spmdsim::DeviceGroups>(n, GroupsOf(*ins, m.replica_count(),
                                                                               m.num_partitions()));
      }
    }
  }
  return plan;
}

class ExchangePeer : public CollectivePeer {
 public:
  ExchangePeer(const CollectivePlan& plan, GroupExchange& exchange, DeviceContext& d)
      : plan_(plan), exchange_(exchange), d_(d) {}
  std::vector<Array> Exchange(const Instruction& c, const Array& mine, int64_t* rank) override {
    const spmdsim::DeviceGroups& groups = *plan_.groups.at(&c);
    *rank = groups.RankOf(d_.position());
    return exchange_.Exchange(d_, mine, groups);
  }
  Array Permute(const Instruction& c, const Array& mine) override {
    Array got = exchange_.Permute(d_, mine, *plan_.pairs.at(&c));
    return got.valid() ? d_.Hold(got) : got;
  }

 private:
  const CollectivePlan& plan_;
  GroupExchange& exchange_;
  DeviceContext& d_;
};

}  // namespace

std::vector<DeviceRun> Execute(const SupportedModule& supported, const Mesh& mesh,
                               const std::function<std::vector<Value>(int64_t position)>& arguments,
                               const ExecuteOptions& options) {
  if (!supported.with_data()) {
    Throw(ErrorCode::kFailedPrecondition, "module {} was checked for abstract use only; running it with data needs "
          "SupportedModule::Use::kWithData", supported.module().name());
  }
  supported.CheckDeviceCount(mesh.size(), "the mesh");
  const Module& module = supported.module();
  const int64_t n = supported.device_count();
  const std::shared_ptr<const InterpreterPlan> plan = InterpreterPlan::Build(module);
  const CollectivePlan collectives = PlanCollectives(module);
  RuntimeOptions runtime_options = options.runtime;
  runtime_options.fiber_stack_bytes = std::max(runtime_options.fiber_stack_bytes, kEigenFiberStackBytes);
  Runtime runtime(mesh, runtime_options);
  GroupExchange exchange(runtime);
  std::vector<DeviceRun> runs(static_cast<size_t>(n));
  runtime.Run([&](DeviceContext& d) {
    const int64_t p = d.position();
    ExchangePeer peer(collectives, exchange, d);
    Interpreter interpreter(module, plan, DeviceIds{p / module.num_partitions(), p % module.num_partitions()}, &peer,
                            options.interpreter);
    runs[p].output = interpreter.Run(arguments(p));
  });
  for (int64_t p = 0; p < n; ++p) runs[p].memory = runtime.memory_stats(p);
  return runs;
}

}  // namespace spmdsim::hlo
