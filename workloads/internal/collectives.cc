// collectives: an nccl-tests-like sweep (nccl-tests src/common.cu: warmup iterations, timed iterations, a data
// check; doc/PERFORMANCE.md: algbw and busbw), run on the Runtime and predicted by the cost model.
//
// Data check, like nccl-tests' (each rank's buffer is a known function of rank and index, so a wrong peer, a
// wrong offset or a wrong reduction shows): element i of the device at mesh position p holds
//   v(p, i) = ((7 p + 3 i) mod 17) - 8          (small integers: every sum is exact in float32)
// and every result is compared with the value the op must give from the group's members (in-group order).
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
#include "sim/multiprocess.h"
#include "workloads/internal/recorder.h"
#include "workloads/workloads.h"
#include "sim/runtime.h"

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

SweepPlan PlanSweep(const CollectivesConfig& config, const Mesh& mesh) {
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

// One call of the row's collective on one device.
Array CallOnce(DeviceContext& d, const Row& row, const Array& in) {
  const std::string& op = row.op;
  const std::vector<std::string>& axes = row.axes;
  if (op == "psum") return d.Psum(in, axes);
  if (op == "pmean") return d.Pmean(in, axes);
  if (op == "pmax") return d.Pmax(in, axes);
  if (op == "pmin") return d.Pmin(in, axes);
  if (op == "all_gather") return d.AllGather(in, axes, 0, true);
  if (op == "psum_scatter") return d.PsumScatter(in, axes, 0, true);
  if (op == "all_to_all") return d.AllToAll(in, axes, 0, 0, true);
  return d.Ppermute(in, axes, row.pairs);
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
        out = CallOnce(d, row, in);
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

}  // namespace

WorkloadResult RunCollectives(const WorkloadContext& context, const CollectivesConfig& config) {
  const Mesh& mesh = context.mesh;
  const SweepPlan plan = PlanSweep(config, mesh);

  WorkloadResult result;
  result.name = config.name;
  result.kind = "collectives";
  result.abstract = context.abstract;
  WorkloadContext forced = context;
  if (config.algorithm != Algorithm::kAuto) forced.cost.collectives.algorithm = config.algorithm;
  if (config.protocol != Protocol::kAuto) forced.cost.collectives.protocol = config.protocol;
  internal::CostRecorder recorder(forced, mesh);
  RuntimeOptions options = context.runtime;
  // Eigen's GEMM keeps its blocking buffers on the stack (up to EIGEN_STACK_ALLOCATION_LIMIT, 128 KiB): a
  // [128,256] x [256,128] matmul overflows the runtime's default fiber stack (RuntimeOptions::fiber_stack_bytes).
  // Only touched pages are resident, so a larger reservation costs address space, not memory.
  options.fiber_stack_bytes = std::max<size_t>(options.fiber_stack_bytes, internal::kMinFiberStackBytes);
  options.observer = &recorder;
  options.op_cost_sink = &recorder;
  Runtime runtime(mesh, options);
  const bool check = config.check && !context.abstract;
  const double tolerance_rel = IsFloating(config.dtype) && DTypeSize(config.dtype) == 2 ? 1.0 / 64 : 1e-6;

  const double start = recorder.WallNow();
  for (const std::string& op : plan.ops) {
    for (const auto& axes : plan.axes_list) {
      const Groups groups = GroupsAlong(mesh, axes);
      for (int64_t size : config.sizes) {
        Row row = MakeRow(op, axes, groups, size, config);
        if (!context.abstract) CheckRowFitsHost(row, mesh, config);
        row.step = recorder.AddStep(fmt::format("{} {} over ({})", op, ExactBytes(row.bytes), fmt::join(axes, ",")),
                                    op, StepKind::kCollective, axes);
        const RowRun run = RunRow(row, context, config, check, tolerance_rel, runtime, recorder);
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
  result.wall_seconds = recorder.WallNow() - start;
  recorder.Finish(&result);
  FillRows(check, tolerance_rel, &result);
  SumTotalsPerIteration(&result);
  result.memory = internal::MemoryOf(runtime, mesh);
  return result;
}

}  // namespace spmdsim
