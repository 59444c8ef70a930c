// collectives: an nccl-tests-like sweep (nccl-tests src/common.cu: warmup iterations, timed iterations, a data
// check; doc/PERFORMANCE.md: algbw and busbw), run on the Runtime and predicted by the cost model.
//
// Data check, like nccl-tests' (each rank's buffer is a known function of rank and index, so a wrong peer, a
// wrong offset or a wrong reduction shows): element i of the device at mesh position p holds
//   v(p, i) = ((7 p + 3 i) mod 17) - 8          (small integers: every sum is exact in float32)
// and every result is compared with the value the op must give from the group's members (in-group order).
//
// Abstract mode moves no data and every device makes the same calls, so the sweep runs no device at all
// (AbstractSweep): each row's collective is checked and shaped once (sim/abstract_collective.h), the cost
// recorder is told what the runtime would tell it, in the same order, and one device's memory account stands
// for all of them. So a pod-scale sweep needs no fiber stack per device (docs/workloads.md).
#include <algorithm>
#include <cstring>
#include <atomic>
#include <chrono>
#include <cmath>

#include <fmt/format.h>

#include "common/error.h"
#include "common/host_memory.h"
#include "common/strings.h"
#include "ops/elementwise.h"
#include "sim/abstract_collective.h"
#include "sim/memory.h"
#include "sim/multiprocess.h"
#include "sim/runtime.h"
#include "sim/runtime_options.h"
#include "workloads/internal/recorder.h"
#include "workloads/workloads.h"

namespace spmdsim {

namespace {

double Value(int64_t position, int64_t i) { return static_cast<double>((7 * position + 3 * i) % 17) - 8.0; }

std::string JaxName(std::string_view given) {
  const CollectiveOp op = ParseCollectiveOp(given);
  switch (op) {
    case CollectiveOp::kAllReduce:
      return given == "pmean" || given == "pmax" || given == "pmin" ? std::string(given) : "psum";
    case CollectiveOp::kAllGather: return "all_gather";
    case CollectiveOp::kReduceScatter: return "psum_scatter";
    case CollectiveOp::kAllToAll: return "all_to_all";
    case CollectiveOp::kPermute: return "ppermute";
  }
  return std::string(given);
}

// Expected output element `j` of the device with in-group index `r` of `members`.
double Expected(const std::string& op, const std::vector<int64_t>& members, int64_t r, int64_t count, int shift,
                int64_t j) {
  const int64_t n = static_cast<int64_t>(members.size());
  if (op == "psum" || op == "pmean" || op == "pmax" || op == "pmin") {
    double acc = op == "pmax" ? -INFINITY : op == "pmin" ? INFINITY : 0.0;
    for (int64_t m : members) {
      const double v = Value(m, j);
      acc = op == "pmax" ? std::max(acc, v) : op == "pmin" ? std::min(acc, v) : acc + v;
    }
    return op == "pmean" ? acc / static_cast<double>(n) : acc;
  }
  if (op == "all_gather") return Value(members[j / count], j % count);
  const int64_t chunk = count / n;
  if (op == "psum_scatter") {
    double acc = 0;
    for (int64_t m : members) acc += Value(m, r * chunk + j);
    return acc;
  }
  if (op == "all_to_all") return Value(members[j / chunk], r * chunk + j % chunk);
  const int64_t src = (((r - shift) % n) + n) % n;  // ppermute
  return Value(members[src], j);
}

// The sweep's ops (JAX names) and groups of axes, validated.
struct SweepPlan {
  std::vector<std::string> ops;
  std::vector<std::vector<std::string>> axes_list;
};

// An abstract sweep prices every timed iteration of every row for every device (the cost recorder keeps each
// device's clock, ~130 ns per device-iteration): at most this many device-iterations, about 9 s of one core
// (docs/workloads.md, measured).
constexpr int64_t kAbstractDeviceIterations = int64_t{1} << 26;

// Refuses an abstract sweep whose work exceeds kAbstractDeviceIterations, naming the iterations that would fit.
void CheckAbstractWork(const CollectivesConfig& config, const Mesh& mesh, int64_t rows) {
  const int64_t per_iteration = rows * mesh.size();
  if (per_iteration * static_cast<int64_t>(config.iterations) <= kAbstractDeviceIterations) return;
  const int64_t most = kAbstractDeviceIterations / per_iteration;
  if (most >= 1) {
    Throw(ErrorCode::kInvalidArgument,
          "collectives '{}': iterations must be in [1, {}] for an abstract sweep of {} rows on {} devices (it prices "
          "every iteration of every row for every device, at most {} in all); got {}",
          config.name, most, rows, mesh.size(), kAbstractDeviceIterations, config.iterations);
  }
  Throw(ErrorCode::kInvalidArgument,
        "collectives '{}': an abstract sweep of {} rows on {} devices prices {} device-iterations at 1 iteration, "
        "over the {} it allows: sweep fewer ops, axes or sizes at once",
        config.name, rows, mesh.size(), per_iteration, kAbstractDeviceIterations);
}

SweepPlan PlanSweep(const CollectivesConfig& config, const Mesh& mesh, bool abstract) {
  if (config.iterations < 1 || config.warmup < 0) {
    Throw(ErrorCode::kInvalidArgument, "collectives '{}': iterations must be >= 1 and warmup >= 0, got {} and {}",
          config.name, config.iterations, config.warmup);
  }
  if (config.ops.empty() || config.sizes.empty()) {
    Throw(ErrorCode::kInvalidArgument, "collectives '{}': needs at least one op and one size", config.name);
  }
  SweepPlan plan;
  plan.axes_list = config.axes;
  if (plan.axes_list.empty()) {
    for (const std::string& a : mesh.axis_names()) plan.axes_list.push_back({a});
  }
  for (const auto& axes : plan.axes_list) {
    mesh.ValidateAxes(axes, fmt::format("axes of collectives '{}'", config.name));
  }
  for (const std::string& op : config.ops) plan.ops.push_back(JaxName(op));
  for (int64_t s : config.sizes) {
    if (s <= 0) Throw(ErrorCode::kInvalidArgument, "collectives '{}': size {} must be > 0 bytes", config.name, s);
  }
  const int64_t rows = static_cast<int64_t>(plan.ops.size() * plan.axes_list.size() * config.sizes.size());
  if (abstract) CheckAbstractWork(config, mesh, rows);
  return plan;
}

// The groups along one set of axes, and each mesh position's group and index in it.
struct Groups {
  std::vector<std::vector<int64_t>> members;  // Mesh::PositionGroups order
  std::vector<int64_t> group_of, index_of;    // per mesh position
  int64_t size = 1;                           // devices per group
};

Groups GroupsAlong(const Mesh& mesh, const std::vector<std::string>& axes) {
  Groups g;
  g.size = mesh.AxesSize(axes);
  g.members = mesh.PositionGroups(axes);
  g.group_of.resize(static_cast<size_t>(mesh.size()));
  g.index_of.resize(static_cast<size_t>(mesh.size()));
  for (size_t i = 0; i < g.members.size(); ++i) {
    for (size_t k = 0; k < g.members[i].size(); ++k) {
      g.group_of[g.members[i][k]] = static_cast<int64_t>(i);
      g.index_of[g.members[i][k]] = static_cast<int64_t>(k);
    }
  }
  return g;
}

// One row of the sweep as the devices run it.
struct Row {
  std::string op;
  std::vector<std::string> axes;
  const Groups* groups = nullptr;
  PermutationPairs pairs;  // ppermute: in-group index i -> i + shift
  int64_t in_count = 0;    // input elements per device
  int64_t bytes = 0;       // nccl-tests' S
  int step = 0;            // the recorder's step
};

Row MakeRow(const std::string& op, const std::vector<std::string>& axes, const Groups& groups, int64_t size,
            const CollectivesConfig& config) {
  const int64_t n = groups.size;
  const int64_t esize = DTypeSize(config.dtype);
  Row row;
  row.op = op;
  row.axes = axes;
  row.groups = &groups;
  for (int64_t i = 0; i < n; ++i) row.pairs.emplace_back(i, (((i + config.ppermute_shift) % n) + n) % n);
  // Input elements per device from S (nccl-tests' convention, see CollectivesConfig::sizes).
  int64_t count = op == "all_gather" ? size / (n * esize) * n : size / esize;
  count = std::max<int64_t>(n, count / n * n);
  row.in_count = op == "all_gather" ? count / n : count;
  row.bytes = op == "all_gather" ? row.in_count * n * esize : row.in_count * esize;
  return row;
}

// A real row holds, per device, its input as doubles and as dtype and its output (all_gather's is n times
// larger): refuse it before allocating when that exceeds the host's memory.
void CheckRowFitsHost(const Row& row, const Mesh& mesh, const CollectivesConfig& config) {
  const int64_t esize = DTypeSize(config.dtype);
  const int64_t out_bytes = row.op == "all_gather" ? row.bytes : row.in_count * esize;
  const double global = static_cast<double>(mesh.size()) *
                        static_cast<double>(row.in_count * 8 + row.in_count * esize + out_bytes);
  CheckFitsHostMemory(fmt::format("collectives '{}': {} of {} bytes per device on {} devices", config.name, row.op,
                                  row.bytes, mesh.size()),
                      global < 9e18 ? static_cast<int64_t>(global) : -1);
}

// Element i of the device at `position`: Value(position, i) (abstract: shape and dtype only).
Array InputOf(int64_t position, int64_t count, DType dtype, bool abstract) {
  if (abstract) return Array::Abstract({count}, dtype);
  std::vector<double> v(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) v[i] = Value(position, i);
  Array in = Array::FromVector<double>(v, {count});
  return dtype != DType::kF64 ? Cast(in, dtype) : in;
}

// The row's collective as every device calls it: tiled, along (and, all_to_all, concatenated on) axis 0.
CollectiveRequest RequestOf(const Row& row) {
  CollectiveRequest r{.axes = row.axes, .tiled = true};
  const std::string& op = row.op;
  if (op == "psum") r.op = CollectiveKind::kPsum;
  if (op == "pmean") r.op = CollectiveKind::kPmean;
  if (op == "pmax") r.op = CollectiveKind::kPmax;
  if (op == "pmin") r.op = CollectiveKind::kPmin;
  if (op == "all_gather") r.op = CollectiveKind::kAllGather;
  if (op == "psum_scatter") r.op = CollectiveKind::kPsumScatter;
  if (op == "all_to_all") r.op = CollectiveKind::kAllToAll;
  if (op == "ppermute") {
    r.op = CollectiveKind::kPpermute;
    r.tiled = false;
    r.perm = row.pairs;
  }
  return r;
}

// One call of the row's collective on one device.
Array CallOnce(DeviceContext& d, const Row& row, const CollectiveRequest& r, const Array& in) {
  const std::vector<std::string>& axes = r.axes;
  switch (r.op) {
    case CollectiveKind::kPsum: return d.Psum(in, axes);
    case CollectiveKind::kPmean: return d.Pmean(in, axes);
    case CollectiveKind::kPmax: return d.Pmax(in, axes);
    case CollectiveKind::kPmin: return d.Pmin(in, axes);
    case CollectiveKind::kAllGather: return d.AllGather(in, axes, static_cast<int>(r.axis), r.tiled);
    case CollectiveKind::kPsumScatter: return d.PsumScatter(in, axes, static_cast<int>(r.axis), r.tiled);
    case CollectiveKind::kAllToAll:
      return d.AllToAll(in, axes, static_cast<int>(r.axis), static_cast<int>(r.concat_axis), r.tiled);
    case CollectiveKind::kPpermute: return d.Ppermute(in, axes, r.perm);
    case CollectiveKind::kBarrier: break;
  }
  SPMDSIM_CHECK(false, "collectives sweep row of op {}", row.op);
  return in;
}

// The largest error of one device's result against Expected, and whether every element is within tolerance.
struct DeviceCheck {
  double max_error = 0;
  bool ok = true;
};

DeviceCheck CheckDevice(const Row& row, int64_t position, const Array& out, int shift, double tolerance_rel) {
  const std::vector<double> got = out.ToDoubles();
  const std::vector<int64_t>& members = row.groups->members[row.groups->group_of[position]];
  const int64_t r = row.groups->index_of[position];
  DeviceCheck c;
  for (size_t j = 0; j < got.size(); ++j) {
    const double want = Expected(row.op, members, r, row.in_count, shift, static_cast<int64_t>(j));
    const double err = std::abs(got[j] - want);
    c.max_error = std::max(c.max_error, err);
    if (!(err <= tolerance_rel * std::abs(want))) c.ok = false;
  }
  return c;
}

// What running one row gives: wall seconds per timed iteration (device 0) and the data check.
struct RowRun {
  double measured_seconds = 0;
  bool check_passed = true;
  double max_abs_error = 0;
};

// Runs the row's untimed warmup iterations, then its timed ones (charged to the clocks and checked).
RowRun RunRow(const Row& row, const WorkloadContext& context, const CollectivesConfig& config, bool check,
              double tolerance_rel, Runtime& runtime, internal::CostRecorder& recorder) {
  const int64_t devices = context.mesh.size();
  const CollectiveRequest request = RequestOf(row);
  std::vector<double> max_error(static_cast<size_t>(devices), 0.0);
  std::vector<char> ok(static_cast<size_t>(devices), 1);
  RowRun run;
  for (int pass = 0; pass < 2; ++pass) {
    const bool timed = pass == 1;
    const int iterations = timed ? config.iterations : config.warmup;
    if (iterations == 0) continue;
    recorder.set_charging(timed);
    runtime.Run([&](DeviceContext& d) {
      const int64_t p = d.position();
      const Array in = InputOf(p, row.in_count, config.dtype, context.abstract);
      d.Barrier();
      const auto t0 = std::chrono::steady_clock::now();
      Array out;
      for (int it = 0; it < iterations; ++it) {
        recorder.BeginStep(p, row.step, config.dtype);
        out = CallOnce(d, row, request, in);
        recorder.EndStep(p);
      }
      d.Barrier();
      if (timed && p == 0) {
        run.measured_seconds =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / iterations;
      }
      if (timed && check) {
        const DeviceCheck c = CheckDevice(row, p, out, config.ppermute_shift, tolerance_rel);
        max_error[p] = c.max_error;
        ok[p] = c.ok;
      }
    });
    recorder.RethrowIfFailed();
  }
  run.check_passed = std::all_of(ok.begin(), ok.end(), [](char c) { return c != 0; });
  run.max_abs_error = *std::max_element(max_error.begin(), max_error.end());
  const std::shared_ptr<ProcessGroup>& group = runtime.options().process_group;
  if (check && group != nullptr && group->size() > 1) {
    // Each rank checked its own devices (the others kept their defaults): merge, so every rank reports all.
    std::string mine(sizeof(double) + 1, '\0');
    std::memcpy(mine.data(), &run.max_abs_error, sizeof(double));
    mine[sizeof(double)] = run.check_passed ? 1 : 0;
    for (const std::string& theirs : group->AllGatherBytes(mine)) {
      SPMDSIM_CHECK(theirs.size() == mine.size(), "a rank's check record has {} bytes", theirs.size());
      double error = 0;
      std::memcpy(&error, theirs.data(), sizeof(double));
      run.max_abs_error = std::max(run.max_abs_error, error);
      run.check_passed = run.check_passed && theirs[sizeof(double)] != 0;
    }
  }
  return run;
}

// Abstract mode: a sweep without devices. Every device would make the same calls on abstract arrays, so one
// AbstractCollective per row stands for every device's call (its checks and errors, its result's bytes, its
// event), one DeviceMemory for every device's account, and the cost recorder is told exactly what the runtime
// would tell it (each device's BeginStep/EndStep around each iteration, one OnCollective per iteration, the
// Run's end), so the predictions are those of a run on the Runtime. Errors are reported as the runtime reports
// them: the device at position 0 failed (every device fails alike).
class AbstractSweep {
 public:
  AbstractSweep(const Mesh& mesh, const CollectivesConfig& config, const RuntimeOptions& options,
                internal::CostRecorder& recorder)
      : mesh_(mesh),
        config_(config),
        recorder_(recorder),
        memory_(0, mesh.DeviceAt(0), DeviceMemoryCapacity(mesh, options)) {}

  RowRun Run(const Row& row) {
    std::exception_ptr invalid;  // thrown by every device after it made its input
    std::unique_ptr<AbstractCollective> call;
    try {
      call = std::make_unique<AbstractCollective>(mesh_, RequestOf(row), config_.dtype,
                                                  std::vector<int64_t>{row.in_count});
    } catch (const Error&) {
      invalid = std::current_exception();
    }
    RowRun run;
    for (int pass = 0; pass < 2; ++pass) {
      const bool timed = pass == 1;
      const int iterations = timed ? config_.iterations : config_.warmup;
      if (iterations == 0) continue;
      recorder_.set_charging(timed);
      ChargeRun(row, call.get(), invalid, iterations);
      if (!timed) continue;
      const auto t0 = std::chrono::steady_clock::now();
      Record(row, *call, iterations);
      run.measured_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / iterations;
    }
    return run;
  }

  MemoryResult Memory() const {
    const MemoryStats stats = memory_.stats();
    return internal::MemoryOfPeaks(mesh_, std::vector<int64_t>(static_cast<size_t>(mesh_.size()), stats.peak_bytes),
                                   stats.capacity_bytes);
  }

 private:
  // One Run's charges on every device: its input, then each iteration's result while the last one is still held.
  void ChargeRun(const Row& row, const AbstractCollective* call, const std::exception_ptr& invalid, int iterations) {
    try {
      const int64_t in = row.in_count * DTypeSize(config_.dtype);
      memory_.Charge(in);
      if (invalid) std::rethrow_exception(invalid);
      const int64_t out = call->identity() ? 0 : call->result_bytes();  // over no axes: the input itself
      for (int it = 0; it < std::min(iterations, 2); ++it) memory_.Charge(out);
      memory_.Release(in + std::min(iterations, 2) * out);
    } catch (...) {
      throw DeviceError::FromDevice(mesh_, 0, std::current_exception());
    }
  }

  // What the runtime's observer calls would record for the row's timed iterations.
  void Record(const Row& row, const AbstractCollective& call, int iterations) {
    const int64_t devices = mesh_.size();
    CollectiveEvent event = call.identity() ? CollectiveEvent{} : call.event();
    for (int it = 0; it < iterations; ++it) {
      for (int64_t p = 0; p < devices; ++p) recorder_.BeginStep(p, row.step, config_.dtype);
      if (!call.identity()) {
        event.sequence = static_cast<uint64_t>(it) + 1;  // after the Run's first barrier
        recorder_.OnCollective(event);
      }
      for (int64_t p = 0; p < devices; ++p) recorder_.EndStep(p);
    }
    recorder_.OnRunEnd(true);
    recorder_.RethrowIfFailed();
  }

  const Mesh& mesh_;
  const CollectivesConfig& config_;
  internal::CostRecorder& recorder_;
  internal::DeviceMemory memory_;  // every device's account: they all hold the same arrays
};

// Copies each step's prediction onto its row (rows and steps are in the same order), with bandwidths, and
// gathers the rows' data checks into result->check.
void FillRows(bool check, double tolerance_rel, WorkloadResult* result) {
  SPMDSIM_CHECK(result->steps.size() == result->sweep.size(), "{} steps for {} rows", result->steps.size(),
                result->sweep.size());
  NumericCheck& c = result->check;
  c.performed = check;
  c.compared = "every device's result vs the host reference (nccl-tests-style data check)";
  c.rtol = tolerance_rel;
  for (size_t i = 0; i < result->sweep.size(); ++i) {
    SweepRow& row = result->sweep[i];
    const StepResult& step = result->steps[i];
    row.predicted_seconds = step.predicted_seconds;
    row.algorithm = step.algorithm;
    row.protocol = step.protocol;
    const double factor = BusBandwidthFactor(ParseCollectiveOp(row.op), static_cast<int>(row.group_size));
    if (row.predicted_seconds > 0) row.predicted_algbw = static_cast<double>(row.bytes) / row.predicted_seconds;
    row.predicted_busbw = row.predicted_algbw * factor;
    if (row.measured_seconds > 0) row.measured_algbw = static_cast<double>(row.bytes) / row.measured_seconds;
    row.measured_busbw = row.measured_algbw * factor;
    if (check) {
      CheckedValue v;
      v.name = step.name;
      v.passed = row.check_passed;
      v.max_abs_error = row.max_abs_error;
      c.passed = c.passed && v.passed;
      c.max_abs_error = std::max(c.max_abs_error, v.max_abs_error);
      c.values.push_back(std::move(v));
    }
  }
}

// A sweep's totals are per iteration of every row (the rows are independent measurements, not one program), so
// every total is the sum over steps of one call's figures — the same basis as predicted_seconds
// (recorder.Finish summed them over all timed iterations).
void SumTotalsPerIteration(WorkloadResult* result) {
  WorkloadTotals& totals = result->totals;
  const double wait_seconds = totals.wait_seconds;
  totals = WorkloadTotals{};
  totals.wait_seconds = wait_seconds;
  for (const StepResult& step : result->steps) {
    totals.compute_seconds += step.compute_seconds;
    totals.communication_seconds += step.communication_seconds;
    for (const auto& [axis, v] : step.communication_seconds_by_axis) totals.communication_seconds_by_axis[axis] += v;
    for (const auto& [link, v] : step.bytes_by_link) totals.bytes_by_link[link] += v;
    totals.flops += step.flops;
  }
  for (const SweepRow& row : result->sweep) totals.predicted_seconds += row.predicted_seconds;
}

// Runs every row with `run_row(row)` (the Runtime's RunRow or the AbstractSweep's Run), in the sweep's order.
template <typename RunRowFn>
void SweepRows(const SweepPlan& plan, const Mesh& mesh, const CollectivesConfig& config, bool abstract,
               internal::CostRecorder& recorder, WorkloadResult& result, RunRowFn&& run_row) {
  for (const std::string& op : plan.ops) {
    for (const auto& axes : plan.axes_list) {
      const Groups groups = GroupsAlong(mesh, axes);
      for (int64_t size : config.sizes) {
        Row row = MakeRow(op, axes, groups, size, config);
        if (!abstract) CheckRowFitsHost(row, mesh, config);
        row.step = recorder.AddStep(fmt::format("{} {} over ({})", op, ExactBytes(row.bytes), fmt::join(axes, ",")),
                                    op, StepKind::kCollective, axes);
        const RowRun run = run_row(row);
        SweepRow& out = result.sweep.emplace_back();
        out.op = op;
        out.axes = axes;
        out.group_size = groups.size;
        out.bytes = row.bytes;
        out.count = row.in_count;
        out.dtype = config.dtype;
        out.iterations = config.iterations;
        out.measured_seconds = run.measured_seconds;
        out.check_passed = run.check_passed;
        out.max_abs_error = run.max_abs_error;
      }
    }
  }
}

}  // namespace

WorkloadResult RunCollectives(const WorkloadContext& context, const CollectivesConfig& config) {
  const Mesh& mesh = context.mesh;
  const SweepPlan plan = PlanSweep(config, mesh, context.abstract);

  WorkloadResult result;
  result.name = config.name;
  result.kind = WorkloadKind::kCollectives;
  result.abstract = context.abstract;
  WorkloadContext forced = context;
  if (config.algorithm != Algorithm::kAuto) forced.cost.collectives.algorithm = config.algorithm;
  if (config.protocol != Protocol::kAuto) forced.cost.collectives.protocol = config.protocol;
  // Abstract: every rank prices every device by itself (nothing is exchanged), as one process would.
  if (context.abstract) forced.runtime.process_group = nullptr;
  internal::CostRecorder recorder(forced, mesh);
  const bool check = config.check && !context.abstract;
  const double tolerance_rel = IsFloating(config.dtype) && DTypeSize(config.dtype) == 2 ? 1.0 / 64 : 1e-6;
  const double start = recorder.WallNow();
  if (context.abstract) {
    ValidateRuntimeOptions(mesh, context.runtime);
    AbstractSweep sweep(mesh, config, context.runtime, recorder);
    SweepRows(plan, mesh, config, true, recorder, result, [&](const Row& row) { return sweep.Run(row); });
    result.memory = sweep.Memory();
  } else {
    RuntimeOptions options = context.runtime;
    options.fiber_stack_bytes = std::max(options.fiber_stack_bytes, kEigenFiberStackBytes);
    options.observer = &recorder;
    options.op_cost_sink = &recorder;
    Runtime runtime(mesh, options);
    SweepRows(plan, mesh, config, false, recorder, result, [&](const Row& row) {
      return RunRow(row, context, config, check, tolerance_rel, runtime, recorder);
    });
    result.memory = internal::MemoryOf(runtime, mesh);
  }
  result.wall_seconds = recorder.WallNow() - start;
  recorder.Finish(&result);
  FillRows(check, tolerance_rel, &result);
  SumTotalsPerIteration(&result);
  return result;
}

}  // namespace spmdsim
