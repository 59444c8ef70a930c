#include "model/plan.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <numeric>
#include <optional>
#include <thread>

#include <fmt/format.h>
#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>

#include "common/error.h"
#include "mesh/mesh_utils.h"
#include "model/accounting.h"
#include "model/step.h"

namespace spmdsim {
namespace {

std::vector<int64_t> Divisors(int64_t n) {
  std::vector<int64_t> out;
  for (int64_t i = 1; i <= n; ++i)
    if (n % i == 0) out.push_back(i);
  return out;
}

// One parallel layout before placement and memory options.
struct Layout {
  int64_t tensor = 1, pipeline = 1, context = 1, data = 1, expert = 1, micro_batch = 1;
  PipelineSchedule schedule = PipelineSchedule::k1F1B;
  int64_t virtual_stages = 1;
};

// One candidate: a layout and the order of its mesh axes.
struct Candidate {
  Layout layout;
  std::vector<std::pair<std::string, int64_t>> axes;
};

// The memory options tried for a layout, cheapest in time first; the first that fits is evaluated (recompute
// and ZeRO only ever add time in the model, so a costlier option that also fits is never faster... except that
// ZeRO-1 and 0 trade an all-reduce for a reduce-scatter + all-gather: both are kept in the order).
std::vector<std::pair<Recompute, int>> MemoryOptions(const PlanOptions& o, bool sharded_data) {
  const std::vector<std::pair<Recompute, int>> order = {
      {Recompute::kNone, 0},      {Recompute::kNone, 1},      {Recompute::kSelective, 0}, {Recompute::kSelective, 1},
      {Recompute::kNone, 3},      {Recompute::kSelective, 3}, {Recompute::kFull, 0},      {Recompute::kFull, 1},
      {Recompute::kFull, 3}};
  std::vector<std::pair<Recompute, int>> out;
  for (const auto& [r, z] : order) {
    if (std::find(o.recomputes.begin(), o.recomputes.end(), r) == o.recomputes.end()) continue;
    if (std::find(o.zero_stages.begin(), o.zero_stages.end(), z) == o.zero_stages.end()) continue;
    if (!sharded_data && z != 0) continue;  // nothing to shard over
    out.emplace_back(r, z);
  }
  return out;
}

ModelConfig Configure(const ModelConfig& model, const Layout& l, Recompute recompute, int zero) {
  ModelConfig c = model;
  c.micro_batch = l.micro_batch;
  c.recompute = recompute;
  ModelParallelism& p = c.parallel;
  p = {};
  if (l.data > 1) {
    p.data_axes = l.expert > 1 ? std::vector<std::string>{"data", "expert"} : std::vector<std::string>{"data"};
    if (l.data / l.expert == 1) p.data_axes = {"expert"};
  }
  if (l.expert > 1) p.expert_axes = {"expert"};
  p.zero_stage = zero;
  if (l.tensor > 1) {
    p.tensor_axes = {"tensor"};
    p.sequence_parallel = true;
  }
  if (l.context > 1) p.context_axes = {"context"};
  if (l.pipeline > 1) {
    p.pipeline_axes = {"pipe"};
    p.schedule = l.schedule;
    p.virtual_stages = l.virtual_stages;
  }
  return c;
}

std::vector<std::pair<std::string, int64_t>> AxesOf(const Layout& l) {
  std::vector<std::pair<std::string, int64_t>> axes;
  if (l.data / l.expert > 1) axes.emplace_back("data", l.data / l.expert);
  if (l.expert > 1) axes.emplace_back("expert", l.expert);
  if (l.pipeline > 1) axes.emplace_back("pipe", l.pipeline);
  if (l.context > 1) axes.emplace_back("context", l.context);
  if (l.tensor > 1) axes.emplace_back("tensor", l.tensor);
  if (axes.empty()) axes.emplace_back("data", 1);
  return axes;
}

std::vector<Layout> Layouts(const ModelConfig& m, const Topology& topology, int64_t global_batch,
                            const PlanOptions& o) {
  const int64_t devices = topology.num_devices();
  const int64_t host = topology.platform() == Platform::kGpu ? topology.gpus_per_host() : 16;
  std::vector<Layout> out;
  for (int64_t t : Divisors(devices)) {
    if (t > host || m.heads % t != 0) continue;
    for (int64_t p : Divisors(devices / t)) {
      if (m.layers % p != 0) continue;
      for (int64_t c = 1; c <= o.max_context && (devices / (t * p)) % c == 0; c *= 2) {
        if (c > 1 && m.seq % (2 * c) != 0) continue;
        const int64_t d = devices / (t * p * c);
        std::vector<int64_t> experts{1};
        if (m.moe.experts > 0) experts = Divisors(std::gcd(d, m.moe.experts));
        for (int64_t e : experts) {
          for (int64_t mb : o.micro_batches) {
            if (global_batch % (mb * d) != 0) continue;
            const int64_t micro_batches = global_batch / (mb * d);
            Layout l{t, p, c, d, e, mb};
            out.push_back(l);  // 1F1B (or no pipeline)
            if (p == 1 || micro_batches % p != 0) continue;
            for (int64_t v : o.virtual_stages) {
              if (v < 2 || m.layers % (p * v) != 0) continue;
              l.schedule = PipelineSchedule::kInterleaved1F1B;
              l.virtual_stages = v;
              out.push_back(l);
            }
          }
        }
      }
    }
  }
  return out;
}

std::vector<Candidate> Candidates(const std::vector<Layout>& layouts, const PlanOptions& o) {
  std::vector<Candidate> out;
  for (const Layout& l : layouts) {
    std::vector<std::pair<std::string, int64_t>> axes = AxesOf(l);
    if (!o.search_placement) {
      out.push_back({l, axes});
      continue;
    }
    std::sort(axes.begin(), axes.end());
    do {
      out.push_back({l, axes});
    } while (std::next_permutation(axes.begin(), axes.end()));
  }
  return out;
}

struct Outcome {
  enum class Kind { kInvalid, kOverMemory, kEvaluated } kind = Kind::kInvalid;
  std::string reason;
  std::optional<PlanEntry> entry;
};

std::string ReasonOf(const std::string& message) {
  // "model 'x': heads = 96 is not divisible by ..." -> "heads = 96 is not divisible by": the first words.
  std::string text = message;
  const size_t colon = text.find("': ");
  if (colon != std::string::npos) text = text.substr(colon + 3);
  const size_t cut = text.find_first_of(",;(");
  if (cut != std::string::npos) text = text.substr(0, cut);
  while (!text.empty() && text.back() == ' ') text.pop_back();
  return text;
}

// The mesh of every distinct axis order among the candidates (many layouts share one: they differ in micro-batch,
// schedule or virtual stages), built once each; null where the topology has no placement for it.
using MeshCache = std::map<std::vector<std::pair<std::string, int64_t>>, std::shared_ptr<const Mesh>>;

MeshCache BuildMeshes(const std::shared_ptr<const Topology>& topology, const std::vector<Candidate>& candidates) {
  MeshCache meshes;
  for (const Candidate& c : candidates) meshes.emplace(c.axes, nullptr);
  std::vector<MeshCache::iterator> slots;
  for (auto it = meshes.begin(); it != meshes.end(); ++it) slots.push_back(it);
  tbb::parallel_for(size_t{0}, slots.size(), [&](size_t i) {
    try {
      slots[i]->second = std::make_shared<const Mesh>(MakeDeviceMesh(topology, slots[i]->first));
    } catch (const Error&) {
      // no placement: stays null
    }
  });
  return meshes;
}

Outcome Evaluate(const ModelConfig& model, const std::shared_ptr<const Mesh>& mesh, const Candidate& cand,
                 const PlanOptions& o) {
  Outcome out;
  if (mesh == nullptr) {
    out.reason = "no placement of the mesh on the topology";
    return out;
  }
  const bool sharded = cand.layout.data * cand.layout.context > 1;
  for (const auto& [recompute, zero] : MemoryOptions(o, sharded)) {
    std::optional<ValidatedModel> valid;
    try {
      valid.emplace(ValidateModel(Configure(model, cand.layout, recompute, zero), mesh));
    } catch (const Error& e) {
      out.reason = ReasonOf(e.message());
      return out;
    }
    const ModelAccounting a = AccountModel(*valid);
    if (!a.fits()) continue;
    PlanEntry entry{valid->config(), cand.axes, PredictModelStep(*valid), a.peak_bytes, mesh};
    out.kind = Outcome::Kind::kEvaluated;
    out.entry = std::move(entry);
    return out;
  }
  out.kind = Outcome::Kind::kOverMemory;
  out.reason = "over the device memory with every recompute / ZeRO option";
  return out;
}

}  // namespace

std::string PlanEntry::Describe() const {
  const ModelParallelism& p = config.parallel;
  std::string out;
  for (const auto& [axis, size] : mesh_axes) {
    if (!out.empty()) out += " x ";
    out += fmt::format("{} {}", axis, size);
  }
  if (!p.pipeline_axes.empty()) {
    out += p.schedule == PipelineSchedule::kInterleaved1F1B ? fmt::format(" (interleaved {})", p.virtual_stages)
                                                              : " (1f1b)";
  }
  if (p.sequence_parallel) out += " + sp";
  out += fmt::format(", mb {}, recompute {}, zero {}", config.micro_batch, RecomputeName(config.recompute),
                     p.zero_stage);
  return out;
}

PlanResult PlanModel(const ModelConfig& model, std::shared_ptr<const Topology> topology, const PlanOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  if (topology == nullptr) Throw(ErrorCode::kInvalidArgument, "plan: no topology");
  if (options.global_batch < 0) Throw(ErrorCode::kInvalidArgument, "plan: global batch must be >= 1, got {}", options.global_batch);
  if (options.top < 1) Throw(ErrorCode::kInvalidArgument, "plan: --top must be >= 1, got {}", options.top);
  if (options.threads < 0) Throw(ErrorCode::kInvalidArgument, "plan: threads must be >= 0, got {}", options.threads);
  ModelConfig base = model;
  if (options.global_batch > 0) base.global_batch = options.global_batch;
  PlanResult result;
  result.devices = topology->num_devices();
  const std::vector<Candidate> candidates = Candidates(Layouts(base, *topology, base.global_batch, options), options);
  result.enumerated = static_cast<int64_t>(candidates.size());
  std::vector<Outcome> outcomes(candidates.size());
  std::atomic<int64_t> done{0};
  std::mutex progress_mutex;
  const int threads = options.threads > 0 ? options.threads : std::max(1u, std::thread::hardware_concurrency());
  tbb::task_arena arena(threads);
  arena.execute([&] {
    const MeshCache meshes = BuildMeshes(topology, candidates);
    tbb::parallel_for(size_t{0}, candidates.size(), [&](size_t i) {
      outcomes[i] = Evaluate(base, meshes.at(candidates[i].axes), candidates[i], options);
      const int64_t n = ++done;
      if (options.progress) {
        std::lock_guard<std::mutex> lock(progress_mutex);
        options.progress(n, result.enumerated);
      }
    });
  });
  std::vector<size_t> order;
  for (size_t i = 0; i < outcomes.size(); ++i) {
    switch (outcomes[i].kind) {
      case Outcome::Kind::kInvalid:
        ++result.invalid;
        ++result.rejected_because[outcomes[i].reason];
        break;
      case Outcome::Kind::kOverMemory:
        ++result.over_memory;
        ++result.rejected_because[outcomes[i].reason];
        break;
      case Outcome::Kind::kEvaluated:
        ++result.evaluated;
        order.push_back(i);
        result.points.push_back({outcomes[i].entry->step.step_seconds, outcomes[i].entry->peak_bytes,
                                 outcomes[i].entry->Describe()});
        break;
    }
  }
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return outcomes[a].entry->step.step_seconds < outcomes[b].entry->step.step_seconds;
  });
  // Placements that come out the same (e.g. axis orders inside one host) are listed once: the first.
  std::vector<std::string> listed;
  for (size_t k = 0; k < order.size() && static_cast<int64_t>(result.best.size()) < options.top; ++k) {
    PlanEntry& e = *outcomes[order[k]].entry;
    std::vector<std::pair<std::string, int64_t>> axes = e.mesh_axes;
    std::sort(axes.begin(), axes.end());
    PlanEntry sorted{e.config, axes, {}, 0, nullptr};
    const std::string key = fmt::format("{} {:.17g}", sorted.Describe(), e.step.step_seconds);
    if (std::find(listed.begin(), listed.end(), key) != listed.end()) {
      ++result.equivalent_placements;
      continue;
    }
    listed.push_back(key);
    result.best.push_back(std::move(e));
  }
  result.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

}  // namespace spmdsim
