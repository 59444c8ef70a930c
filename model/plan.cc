#include "model/plan.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <exception>
#include <functional>
#include <mutex>
#include <numeric>
#include <optional>
#include <thread>
#include <vector>

#include <fmt/format.h>

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

// How L layers go to p stages of v chunks, as Megatron-Core allows (PipelineLayerLayout): evenly; else with the
// embedding and the loss counted as a layer each (account_for_embedding / account_for_loss, Llama 3 405B); else
// (1F1B) the middle stages ceil(L / p) each and the first and last stages, which hold the embedding and the loss,
// the rest (decoder first / last pipeline num layers). nullopt: none fits.
struct StageSplit {
  int64_t first = -1, last = -1;
  bool accounted = false;
};
std::optional<StageSplit> SplitLayers(int64_t layers, int64_t p, int64_t v) {
  if (layers % (p * v) == 0) return StageSplit{};
  if (p > 1 && (layers + 2) % (p * v) == 0) return StageSplit{-1, -1, true};
  if (p < 2 || v > 1) return std::nullopt;
  if (p == 2) return StageSplit{(layers + 1) / 2, layers / 2, false};
  const int64_t middle = (layers + p - 1) / p, rest = layers - (p - 2) * middle;
  if (rest < 0) return std::nullopt;
  return StageSplit{rest - rest / 2, rest / 2, false};
}

// One parallel layout before placement and memory options.
struct Layout {
  int64_t tensor = 1, pipeline = 1, context = 1, data = 1, expert = 1, micro_batch = 1;
  PipelineSchedule schedule = PipelineSchedule::k1F1B;
  int64_t virtual_stages = 1;
  StageSplit split{};
  // Experts also over the tensor ranks (expert tensor parallelism 1): the expert degree is `expert` (data
  // ranks) x `tensor`.
  bool experts_over_tensor = false;
};

// One candidate: a layout and the order of its mesh axes.
struct Candidate {
  Layout layout;
  std::vector<std::pair<std::string, int64_t>> axes;
};

// The memory options tried for a layout, by recompute level (none, selective, full: recompute only ever adds
// time for a given layout), each with ZeRO 0, 1 and 3. Evaluate predicts every ZeRO stage that fits at the first
// level where one fits and keeps the fastest: ZeRO-3's per-layer gathers and reduce-scatters overlap the compute,
// where ZeRO-0/1 reduce at the end of the step, so ZeRO-3 can be the fastest (Llama-3-8B at seq 8192 on 64 v5p
// chips: 1.08 s against ZeRO-1's 1.11 s).
std::vector<std::pair<Recompute, int>> MemoryOptions(const PlanOptions& o, bool sharded_data) {
  std::vector<std::pair<Recompute, int>> out;
  for (const Recompute r : {Recompute::kNone, Recompute::kSelective, Recompute::kFull}) {
    for (const int z : {0, 1, 3}) {
      if (std::find(o.recomputes.begin(), o.recomputes.end(), r) == o.recomputes.end()) continue;
      if (std::find(o.zero_stages.begin(), o.zero_stages.end(), z) == o.zero_stages.end()) continue;
      if (!sharded_data && z != 0) continue;  // nothing to shard over
      out.emplace_back(r, z);
    }
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
  if (l.experts_over_tensor) p.expert_axes.push_back("tensor");
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
    p.first_stage_layers = l.split.first;
    p.last_stage_layers = l.split.last;
    p.embedding_in_split = p.loss_in_split = l.split.accounted;
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

// The expert layouts of a MoE model on d data ranks (tensor degree t): experts over e data ranks for every e
// dividing both, and, with t > 1, over e data ranks x the t tensor ranks.
std::vector<std::pair<int64_t, bool>> ExpertLayouts(const ModelConfig& m, int64_t d, int64_t t) {
  std::vector<std::pair<int64_t, bool>> out{{1, false}};
  if (m.moe.experts == 0) return out;
  out.clear();
  for (int64_t e : Divisors(std::gcd(d, m.moe.experts))) {
    out.emplace_back(e, false);
    if (t > 1 && m.moe.experts % (e * t) == 0) out.emplace_back(e, true);
  }
  return out;
}

// The micro-batch sizes and schedules of one set of degrees.
void AddSchedules(const ModelConfig& m, int64_t global_batch, const PlanOptions& o, Layout l,
                  std::vector<Layout>* out) {
  for (int64_t mb : o.micro_batches) {
    if (global_batch % (mb * l.data) != 0) continue;
    const int64_t micro_batches = global_batch / (mb * l.data);
    l.micro_batch = mb;
    l.schedule = PipelineSchedule::k1F1B;
    l.virtual_stages = 1;
    if (const std::optional<StageSplit> split = SplitLayers(m.layers, l.pipeline, 1)) {
      l.split = *split;
      out->push_back(l);  // 1F1B (or no pipeline)
    }
    if (l.pipeline == 1 || micro_batches % l.pipeline != 0) continue;
    for (int64_t v : o.virtual_stages) {
      const std::optional<StageSplit> split = SplitLayers(m.layers, l.pipeline, v);
      if (v < 2 || !split) continue;
      l.schedule = PipelineSchedule::kInterleaved1F1B;
      l.virtual_stages = v;
      l.split = *split;
      out->push_back(l);
    }
  }
}

std::vector<Layout> Layouts(const ModelConfig& m, const Topology& topology, int64_t global_batch,
                            const PlanOptions& o) {
  const int64_t devices = topology.num_devices();
  const int64_t host = topology.platform() == Platform::kGpu ? topology.gpus_per_host() : 16;
  std::vector<Layout> out;
  for (int64_t t : Divisors(devices)) {
    if (t > host || m.heads % t != 0) continue;
    for (int64_t p : Divisors(devices / t)) {
      if (!SplitLayers(m.layers, p, 1) && !SplitLayers(m.layers, p, 2)) continue;
      for (int64_t c = 1; c <= o.max_context && (devices / (t * p)) % c == 0; c *= 2) {
        if (c > 1 && m.seq % (2 * c) != 0) continue;
        const int64_t d = devices / (t * p * c);
        for (const auto& [e, over_tensor] : ExpertLayouts(m, d, t)) {
          Layout l{.tensor = t, .pipeline = p, .context = c, .data = d, .expert = e};
          l.experts_over_tensor = over_tensor;
          AddSchedules(m, global_batch, o, l, &out);
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

// A placed mesh, and whether it needed allow_split_physical_axes.
struct PlacedMesh {
  std::shared_ptr<const Mesh> mesh;  // null: no placement
  bool split = false;
};

// The mesh of every distinct axis order among the candidates (many layouts share one: they differ in micro-batch,
// schedule or virtual stages), built once each; null where the topology has no placement for it. On TPUs an order
// that does not fit the torus with whole physical axes is tried with allow_split_physical_axes, as JAX's
// create_device_mesh allows (GPU and CPU meshes are reshaped device lists: the flag changes nothing there).
using MeshCache = std::map<std::vector<std::pair<std::string, int64_t>>, PlacedMesh>;

// Runs fn(i) for every i in [0, n) on at most `threads` threads (the caller's among them), each pulling the next
// index from one counter; rethrows the first exception any call threw once all have stopped. Plain std::threads,
// not oneTBB: their creation and join order every hand-over (the candidates in, the outcomes out) where
// ThreadSanitizer sees it, and Debian's libtbb is not instrumented (docs/plan.md, "Threads").
void ParallelFor(size_t n, int threads, const std::function<void(size_t)>& fn) {
  std::atomic<size_t> next{0};
  std::exception_ptr error;
  std::mutex error_mutex;
  auto work = [&] {
    for (size_t i = next++; i < n; i = next++) {
      try {
        fn(i);
      } catch (...) {
        std::lock_guard<std::mutex> lock(error_mutex);
        if (!error) error = std::current_exception();
        next = n;  // the others stop at their next index
      }
    }
  };
  {
    std::vector<std::jthread> helpers;
    const size_t extra = std::min(n, static_cast<size_t>(std::max(1, threads))) - (n > 0 ? 1 : 0);
    for (size_t t = 0; t < extra; ++t) helpers.emplace_back(work);
    work();
  }  // joins the helpers
  if (error) std::rethrow_exception(error);
}

MeshCache BuildMeshes(const std::shared_ptr<const Topology>& topology, const std::vector<Candidate>& candidates,
                      int threads) {
  MeshCache meshes;
  for (const Candidate& c : candidates) meshes.emplace(c.axes, PlacedMesh{});
  std::vector<MeshCache::iterator> slots;
  for (auto it = meshes.begin(); it != meshes.end(); ++it) slots.push_back(it);
  const bool tpu = topology->platform() == Platform::kTpu;
  ParallelFor(slots.size(), threads, [&](size_t i) {
    for (const bool split : {false, true}) {
      if (split && !tpu) break;
      try {
        MeshOptions options;
        options.allow_split_physical_axes = split;
        slots[i]->second = {std::make_shared<const Mesh>(MakeDeviceMesh(topology, slots[i]->first, {}, options)),
                            split};
        return;
      } catch (const Error&) {
        // no placement this way
      }
    }
  });
  return meshes;
}

Outcome Evaluate(const ModelConfig& model, const PlacedMesh& placed, const Candidate& cand, const PlanOptions& o) {
  Outcome out;
  const std::shared_ptr<const Mesh>& mesh = placed.mesh;
  if (mesh == nullptr) {
    out.reason = "no placement of the mesh on the topology";
    return out;
  }
  const bool sharded = cand.layout.data * cand.layout.context > 1;
  std::optional<Recompute> level;  // the recompute level of the first option that fits
  for (const auto& [recompute, zero] : MemoryOptions(o, sharded)) {
    if (level && recompute != *level) break;
    std::optional<ValidatedModel> valid;
    try {
      valid.emplace(ValidateModel(Configure(model, cand.layout, recompute, zero), mesh));
    } catch (const Error& e) {
      out.reason = ReasonOf(e.message());
      return out;
    }
    ModelAccounting accounting = AccountModel(*valid);
    if (accounting.peak_bytes > accounting.capacity_bytes * (1 - o.memory_headroom)) continue;
    level = recompute;
    ModelStepTimes step = PredictModelStep(*valid, {.calibration = o.calibration});
    PlanEntry entry{.model = std::move(*valid), .mesh_axes = cand.axes, .accounting = std::move(accounting),
                    .step = std::move(step), .split_physical_axes = placed.split};
    if (!out.entry || PlanRanksBefore(entry, *out.entry)) out.entry = std::move(entry);
  }
  if (out.entry) {
    out.kind = Outcome::Kind::kEvaluated;
    return out;
  }
  out.kind = Outcome::Kind::kOverMemory;
  out.reason = o.memory_headroom > 0
                   ? fmt::format("over {:g}% of the device memory (the headroom keeps {:g}% free) with every "
                                 "recompute / ZeRO option", 100 * (1 - o.memory_headroom), 100 * o.memory_headroom)
                   : "over the device memory with every recompute / ZeRO option";
  return out;
}

// "data 8 x tensor 2 (1f1b) + sp, mb 1, recompute none, zero 1": the configuration and its mesh axes in order.
std::string DescribeConfiguration(const ModelConfig& config, const std::vector<std::pair<std::string, int64_t>>& axes,
                                  bool split_physical_axes) {
  const ModelParallelism& p = config.parallel;
  std::string out;
  for (const auto& [axis, size] : axes) {
    if (!out.empty()) out += " x ";
    out += fmt::format("{} {}", axis, size);
  }
  if (!p.pipeline_axes.empty()) {
    out += p.schedule == PipelineSchedule::kInterleaved1F1B ? fmt::format(" (interleaved {}", p.virtual_stages)
                                                              : " (1f1b";
    if (p.embedding_in_split || p.loss_in_split) out += ", embedding and loss as layers";
    if (p.first_stage_layers >= 0) out += fmt::format(", first stage {} layers", p.first_stage_layers);
    if (p.last_stage_layers >= 0) out += fmt::format(", last stage {} layers", p.last_stage_layers);
    out += ")";
  }
  if (config.experts_over_tensor()) out += " + experts over tensor";
  if (p.sequence_parallel) out += " + sp";
  if (split_physical_axes) out += " (split physical axes)";
  out += fmt::format(", mb {}, recompute {}, zero {}", config.micro_batch, RecomputeName(config.recompute),
                     p.zero_stage);
  return out;
}

}  // namespace

bool PlanRanksBefore(const PlanEntry& a, const PlanEntry& b) {
  if (a.step.step_seconds != b.step.step_seconds) return a.step.step_seconds < b.step.step_seconds;
  return a.peak_bytes() < b.peak_bytes();
}

std::string PlanEntry::Describe() const { return DescribeConfiguration(config(), mesh_axes, split_physical_axes); }

PlanResult PlanModel(const ModelConfig& model, std::shared_ptr<const Topology> topology, const PlanOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  if (topology == nullptr) Throw(ErrorCode::kInvalidArgument, "plan: no topology");
  if (options.global_batch < 0)
    Throw(ErrorCode::kInvalidArgument, "plan: global batch must be >= 1, got {}", options.global_batch);
  if (options.top < 1) Throw(ErrorCode::kInvalidArgument, "plan: --top must be >= 1, got {}", options.top);
  if (options.threads < 0) Throw(ErrorCode::kInvalidArgument, "plan: threads must be >= 0, got {}", options.threads);
  if (!(options.memory_headroom >= 0 && options.memory_headroom < 1))
    Throw(ErrorCode::kInvalidArgument, "plan: the memory headroom must be in [0, 1) (a fraction: 0.1 keeps 10% free), "
          "got {}", options.memory_headroom);
  ModelConfig base = model;
  if (options.global_batch > 0) base.global_batch = options.global_batch;
  PlanResult result;
  result.devices = topology->num_devices();
  result.topology = fmt::format("{}, {}", topology->ToString(), topology->ChipCountText());
  result.memory_headroom = options.memory_headroom;
  result.capacity_bytes = static_cast<double>(topology->memory_bytes());
  const std::vector<Candidate> candidates = Candidates(Layouts(base, *topology, base.global_batch, options), options);
  result.enumerated = static_cast<int64_t>(candidates.size());
  std::vector<Outcome> outcomes(candidates.size());
  std::atomic<int64_t> done{0};
  std::mutex progress_mutex;
  const int threads = options.threads > 0 ? options.threads : std::max(1u, std::thread::hardware_concurrency());
  const MeshCache meshes = BuildMeshes(topology, candidates, threads);
  ParallelFor(candidates.size(), threads, [&](size_t i) {
    outcomes[i] = Evaluate(base, meshes.at(candidates[i].axes), candidates[i], options);
    const int64_t n = ++done;
    if (options.progress) {
      std::lock_guard<std::mutex> lock(progress_mutex);
      options.progress(n, result.enumerated);
    }
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
        if (outcomes[i].entry->split_physical_axes) ++result.split_placements;
        order.push_back(i);
        result.points.push_back({outcomes[i].entry->step.step_seconds, outcomes[i].entry->peak_bytes(),
                                 outcomes[i].entry->Describe()});
        break;
    }
  }
  // Stable: exact ties in step and memory stay in enumeration order.
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return PlanRanksBefore(*outcomes[a].entry, *outcomes[b].entry); });
  // Placements that come out the same (e.g. axis orders inside one host) are listed once: the first.
  std::vector<std::string> listed;
  for (size_t k = 0; k < order.size() && static_cast<int64_t>(result.best.size()) < options.top; ++k) {
    PlanEntry& e = *outcomes[order[k]].entry;
    std::vector<std::pair<std::string, int64_t>> axes = e.mesh_axes;
    std::sort(axes.begin(), axes.end());
    const std::string key =
        fmt::format("{} {:.17g}", DescribeConfiguration(e.config(), axes, e.split_physical_axes), e.step.step_seconds);
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
