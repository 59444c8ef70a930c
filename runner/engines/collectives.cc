// collectives: an nccl-tests-like sweep (nccl-tests src/common.cu: warmup iterations, timed iterations, a data
// check; doc/PERFORMANCE.md: algbw and busbw), run on the Runtime and predicted by the cost model.
//
// Data check, like nccl-tests' (each rank's buffer is a known function of rank and index, so a wrong peer, a
// wrong offset or a wrong reduction shows): element i of the device at mesh position p holds
//   v(p, i) = ((7 p + 3 i) mod 17) - 8          (small integers: every sum is exact in float32)
// and every result is compared with the value the op must give from the group's members (in-group order).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>

#include <fmt/format.h>

#include "common/error.h"
#include "ops/elementwise.h"
#include "runner/engines/recorder.h"
#include "runner/workloads.h"
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

std::string HumanSize(int64_t bytes) {
  if (bytes >= (int64_t{1} << 30) && bytes % (int64_t{1} << 30) == 0) return fmt::format("{}GiB", bytes >> 30);
  if (bytes >= (int64_t{1} << 20) && bytes % (int64_t{1} << 20) == 0) return fmt::format("{}MiB", bytes >> 20);
  if (bytes >= 1024 && bytes % 1024 == 0) return fmt::format("{}KiB", bytes >> 10);
  return fmt::format("{}B", bytes);
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

}  // namespace

WorkloadResult RunCollectives(const WorkloadContext& context, const CollectivesConfig& config) {
  const Mesh& mesh = context.mesh;
  if (config.iterations < 1 || config.warmup < 0) {
    Throw(ErrorCode::kInvalidArgument, "collectives '{}': iterations must be >= 1 and warmup >= 0, got {} and {}",
          config.name, config.iterations, config.warmup);
  }
  if (config.ops.empty() || config.sizes.empty()) {
    Throw(ErrorCode::kInvalidArgument, "collectives '{}': needs at least one op and one size", config.name);
  }
  std::vector<std::vector<std::string>> axes_list = config.axes;
  if (axes_list.empty()) {
    for (const std::string& a : mesh.axis_names()) axes_list.push_back({a});
  }
  for (const auto& axes : axes_list) mesh.ValidateAxes(axes, fmt::format("axes of collectives '{}'", config.name));
  std::vector<std::string> ops;
  for (const std::string& op : config.ops) ops.push_back(JaxName(op));
  for (int64_t s : config.sizes) {
    if (s <= 0) Throw(ErrorCode::kInvalidArgument, "collectives '{}': size {} must be > 0 bytes", config.name, s);
  }

  WorkloadResult result;
  result.name = config.name;
  result.kind = "collectives";
  result.abstract = context.abstract;
  internal::CostRecorder recorder(context, mesh);
  RuntimeOptions options = context.runtime;
  // Eigen's GEMM keeps its blocking buffers on the stack (up to EIGEN_STACK_ALLOCATION_LIMIT, 128 KiB): a
  // [128,256] x [256,128] matmul overflows the runtime's default 256 KiB fiber stack. Only touched pages are
  // resident, so a larger reservation costs address space, not memory.
  options.fiber_stack_bytes = std::max<size_t>(options.fiber_stack_bytes, internal::kMinFiberStackBytes);
  options.observer = &recorder;
  Runtime runtime(mesh, options);
  const int64_t esize = DTypeSize(config.dtype);
  const bool check = config.check && !context.abstract;
  const double tolerance_rel = IsFloating(config.dtype) && esize == 2 ? 1.0 / 64 : 1e-6;

  ScopedOpCostSink sink(&recorder);
  const double start = recorder.WallNow();
  for (const std::string& op : ops) {
    for (const auto& axes : axes_list) {
      const int64_t n = mesh.AxesSize(axes);
      const std::vector<std::vector<int64_t>> groups = mesh.PositionGroups(axes);
      std::vector<int64_t> group_of(static_cast<size_t>(mesh.size())), index_of(static_cast<size_t>(mesh.size()));
      for (size_t g = 0; g < groups.size(); ++g) {
        for (size_t k = 0; k < groups[g].size(); ++k) {
          group_of[groups[g][k]] = static_cast<int64_t>(g);
          index_of[groups[g][k]] = static_cast<int64_t>(k);
        }
      }
      PermutationPairs pairs;
      std::vector<std::pair<int, int>> cost_pairs;
      for (int64_t i = 0; i < n; ++i) {
        const int64_t dst = (((i + config.ppermute_shift) % n) + n) % n;
        pairs.emplace_back(i, dst);
        cost_pairs.emplace_back(static_cast<int>(i), static_cast<int>(dst));
      }
      for (int64_t size : config.sizes) {
        // Input elements per device from S (nccl-tests' convention, see CollectivesConfig::sizes).
        int64_t count = op == "all_gather" ? size / (n * esize) * n : size / esize;
        count = std::max<int64_t>(n, count / n * n);
        const int64_t in_count = op == "all_gather" ? count / n : count;
        const int64_t bytes = op == "all_gather" ? in_count * n * esize : in_count * esize;
        SweepRow row;
        row.op = op;
        row.axes = axes;
        row.group_size = n;
        row.bytes = bytes;
        row.count = in_count;
        row.dtype = config.dtype;
        row.iterations = config.iterations;
        const int step = recorder.AddStep(fmt::format("{} {} over ({})", op, HumanSize(bytes), fmt::join(axes, ",")),
                                          op, StepKind::kCollective, axes);
        std::vector<double> max_error(static_cast<size_t>(mesh.size()), 0.0);
        std::vector<char> ok(static_cast<size_t>(mesh.size()), 1);
        double measured = 0;
        for (int pass = 0; pass < 2; ++pass) {
          const bool timed = pass == 1;
          const int iterations = timed ? config.iterations : config.warmup;
          if (iterations == 0) continue;
          recorder.set_charging(timed);
          runtime.Run([&](DeviceContext& d) {
            const int64_t p = d.position();
            Array in;
            if (context.abstract) {
              in = Array::Abstract({in_count}, config.dtype);
            } else {
              std::vector<double> v(static_cast<size_t>(in_count));
              for (int64_t i = 0; i < in_count; ++i) v[i] = Value(p, i);
              in = Array::FromVector<double>(v, {in_count});
              if (config.dtype != DType::kF64) in = Cast(in, config.dtype);
            }
            d.Barrier();
            const auto t0 = std::chrono::steady_clock::now();
            Array out;
            for (int it = 0; it < iterations; ++it) {
              recorder.BeginStep(p, step, config.dtype);
              if (op == "psum") out = d.Psum(in, axes);
              else if (op == "pmean") out = d.Pmean(in, axes);
              else if (op == "pmax") out = d.Pmax(in, axes);
              else if (op == "pmin") out = d.Pmin(in, axes);
              else if (op == "all_gather") out = d.AllGather(in, axes, 0, true);
              else if (op == "psum_scatter") out = d.PsumScatter(in, axes, 0, true);
              else if (op == "all_to_all") out = d.AllToAll(in, axes, 0, 0, true);
              else {
                recorder.SetPermutation(p, cost_pairs);
                out = d.Ppermute(in, axes, pairs);
              }
              recorder.EndStep(p);
            }
            d.Barrier();
            if (timed && p == 0) {
              measured = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / iterations;
            }
            if (timed && check) {
              const std::vector<double> got = out.ToDoubles();
              const std::vector<int64_t>& members = groups[group_of[p]];
              double worst = 0;
              bool good = true;
              for (size_t j = 0; j < got.size(); ++j) {
                const double want = Expected(op, members, index_of[p], in_count, config.ppermute_shift,
                                             static_cast<int64_t>(j));
                const double err = std::abs(got[j] - want);
                worst = std::max(worst, err);
                if (!(err <= tolerance_rel * std::abs(want))) good = false;
              }
              max_error[p] = worst;
              ok[p] = good;
            }
          });
          recorder.RethrowIfFailed();
        }
        row.measured_seconds = measured;
        row.check_passed = std::all_of(ok.begin(), ok.end(), [](char c) { return c != 0; });
        row.max_abs_error = *std::max_element(max_error.begin(), max_error.end());
        result.sweep.push_back(std::move(row));
      }
    }
  }
  result.wall_seconds = recorder.WallNow() - start;
  recorder.Finish(&result);
  // Rows and steps are in the same order (every row ran its timed iterations).
  SPMDSIM_CHECK(result.steps.size() == result.sweep.size(), "{} steps for {} rows", result.steps.size(),
                result.sweep.size());
  double per_iteration_total = 0;
  NumericCheck& c = result.check;
  c.performed = check;
  c.compared = "every device's result vs the host reference (nccl-tests-style data check)";
  c.rtol = tolerance_rel;
  for (size_t i = 0; i < result.sweep.size(); ++i) {
    SweepRow& row = result.sweep[i];
    const StepResult& step = result.steps[i];
    row.predicted_seconds = step.predicted_seconds;
    row.algorithm = step.algorithm;
    const double factor = BusBandwidthFactor(ParseCollectiveOp(row.op), static_cast<int>(row.group_size));
    if (row.predicted_seconds > 0) row.predicted_algbw = static_cast<double>(row.bytes) / row.predicted_seconds;
    row.predicted_busbw = row.predicted_algbw * factor;
    if (row.measured_seconds > 0) row.measured_algbw = static_cast<double>(row.bytes) / row.measured_seconds;
    row.measured_busbw = row.measured_algbw * factor;
    per_iteration_total += row.predicted_seconds;
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
  // A sweep's totals are per iteration of every row (the rows are independent measurements, not one
  // program), so every total is the sum over steps of one call's figures — the same basis as
  // predicted_seconds (recorder.Finish summed them over all timed iterations).
  WorkloadTotals& totals = result.totals;
  const double wait_seconds = totals.wait_seconds;
  totals = WorkloadTotals{};
  totals.wait_seconds = wait_seconds;
  for (const StepResult& step : result.steps) {
    totals.compute_seconds += step.compute_seconds;
    totals.communication_seconds += step.communication_seconds;
    for (const auto& [axis, v] : step.communication_seconds_by_axis) totals.communication_seconds_by_axis[axis] += v;
    for (const auto& [link, v] : step.bytes_by_link) totals.bytes_by_link[link] += v;
    totals.flops += step.flops;
  }
  totals.predicted_seconds = per_iteration_total;
  result.memory = internal::MemoryOf(runtime, mesh);
  return result;
}

}  // namespace spmdsim
