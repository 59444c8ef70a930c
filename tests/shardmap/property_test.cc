// Systematic property test in the manner of JAX's ShardMapSystematicTest (tests/shard_map_test.py: fun_specs,
// sample_shmap, shmap_reference): random functions on random meshes with random in/out specs, checked against a
// host reference that slices the global inputs per mesh index with its own indexer (JAX's make_indexer), applies
// the function, and writes the result blocks into the global outputs. Fixed seeds.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "shardmap/shard_map.h"
#include "tests/shardmap/local_ops.h"

#ifndef MUTATE
#define MUTATE 0
#endif
namespace spmdsim {
namespace {

struct FunSpec {
  std::string name;
  int num_inputs;
  std::function<std::vector<Array>(const std::vector<Array>&)> fun;
  // Which input ranks it accepts (nullptr: any).
  std::function<bool(const std::vector<std::vector<int64_t>>&)> valid;
  bool intersect_reps;  // out_rep = intersection of the inputs' unmentioned axes (dot), else per input
};

const std::vector<FunSpec>& Funs() {
  static const std::vector<FunSpec> funs = {
      {"id", 1, [](const std::vector<Array>& x) { return std::vector<Array>{x[0]}; }, nullptr, false},
      {"flip", 2, [](const std::vector<Array>& x) { return std::vector<Array>{x[1], x[0]}; }, nullptr, false},
      {"transpose", 1, [](const std::vector<Array>& x) { return std::vector<Array>{testops::Transpose(x[0])}; },
       nullptr, false},
      {"ravel", 1, [](const std::vector<Array>& x) { return std::vector<Array>{testops::Ravel(x[0])}; }, nullptr,
       false},
      {"dot", 2, [](const std::vector<Array>& x) { return std::vector<Array>{testops::Matmul(x[0], x[1])}; },
       [](const std::vector<std::vector<int64_t>>& s) {
         return s[0].size() == 2 && s[1].size() == 2 && s[0][1] == s[1][0];
       },
       true},
      {"relu", 1,
       [](const std::vector<Array>& x) {
         return std::vector<Array>{testops::Map(x[0], [](double v) { return std::max(v + 1, 0.0) - 1; })};
       },
       nullptr, false},
  };
  return funs;
}

// JAX's input_shapes: permutations of (1, 2, 3) of length 1..3 with distinct entries.
std::vector<std::vector<int64_t>> InputShapes() {
  std::vector<std::vector<int64_t>> out;
  for (int k = 1; k <= 3; ++k) {
    std::vector<int64_t> v = {1, 2, 3};
    do {
      std::vector<int64_t> s(v.begin(), v.begin() + k);
      if (std::find(out.begin(), out.end(), s) == out.end()) out.push_back(s);
    } while (std::next_permutation(v.begin(), v.end()));
  }
  return out;
}

const std::vector<std::vector<int64_t>> kMeshShapes = {{1}, {1, 1}, {1, 2}, {2, 2}, {2, 4}, {4, 2}, {2, 2, 2}};
const std::vector<std::string> kAxisNames = {"i", "j", "k"};

// A random spec of `rank` entries over a random subset of `allowed` (each axis to a random dimension; within a
// dimension in a random order, so tuples need not follow the mesh order).
PartitionSpec RandomSpec(std::mt19937& rng, const std::vector<std::string>& required,
                         const std::vector<std::string>& optional, int rank) {
  std::vector<std::string> subset = required;
  for (const auto& a : optional)
    if (rng() % 2) subset.push_back(a);
  std::shuffle(subset.begin(), subset.end(), rng);
  std::vector<std::vector<std::string>> dims(rank);
  for (const auto& a : subset) dims[rng() % rank].push_back(a);
  std::vector<PartitionSpec::Entry> entries;
  for (auto& d : dims) entries.push_back(d.empty() ? PartitionSpec::Entry::None() : PartitionSpec::Entry::Axes(d));
  return PartitionSpec(std::move(entries));
}

int64_t Partitions(const Mesh& mesh, const PartitionSpec::Entry& e) {
  int64_t n = 1;
  for (const auto& a : e.axes()) n *= mesh.AxisSize(a);
  return n;
}

// JAX's make_indexer: the box of the block at mesh coordinates `idx`.
std::vector<std::pair<int64_t, int64_t>> Box(const Mesh& mesh, const PartitionSpec& spec,
                                             const std::vector<int64_t>& shape, const std::vector<int64_t>& idx) {
  std::vector<std::pair<int64_t, int64_t>> box;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (static_cast<int>(d) >= spec.size() || !spec[d].has_axes()) {
      box.push_back({0, shape[d]});
      continue;
    }
    const auto& el = spec[d].axes();
    const int64_t size = shape[d] / Partitions(mesh, spec[d]);
    int64_t start = 0;
    for (size_t i = 0; i < el.size(); ++i) {
      int64_t later = 1;
      for (size_t m = i + 1; m < el.size(); ++m) later *= mesh.AxisSize(el[m]);
      start += idx[mesh.AxisIndex(el[i])] * later;
    }
    box.push_back({start * size, (start + 1) * size});
  }
  return box;
}

// Visits every element of a box in row-major order: fn(flat index in the global array, flat index in the box).
void ForBox(const std::vector<int64_t>& shape, const std::vector<std::pair<int64_t, int64_t>>& box,
            const std::function<void(int64_t, int64_t)>& fn) {
  const size_t r = shape.size();
  int64_t count = 1;
  for (auto& b : box) count *= b.second - b.first;
  std::vector<int64_t> i(r, 0);
  for (int64_t k = 0; k < count; ++k) {
    int64_t rest = k, flat = 0;
    for (int d = static_cast<int>(r) - 1; d >= 0; --d) {
      int64_t len = box[d].second - box[d].first;
      i[d] = rest % len + box[d].first;
      rest /= len;
    }
    for (size_t d = 0; d < r; ++d) flat = flat * shape[d] + i[d];
    fn(flat, k);
  }
}

struct Case {
  const FunSpec* fun;
  std::vector<int64_t> mesh_shape;
  std::vector<PartitionSpec> in_specs;
  std::vector<PartitionSpec> out_specs;
  std::vector<std::vector<int64_t>> global_in;
  std::string ToString() const {
    std::string s = fun->name + " mesh=" + ShapeToString(mesh_shape) + " in=";
    for (size_t k = 0; k < in_specs.size(); ++k) s += in_specs[k].ToString() + ShapeToString(global_in[k]) + " ";
    s += "out=";
    for (const auto& o : out_specs) s += o.ToString() + " ";
    return s;
  }
};

Case Sample(std::mt19937& rng) {
  const auto& funs = Funs();
  static const std::vector<std::vector<int64_t>> shapes = InputShapes();
  Case c;
  c.fun = &funs[rng() % funs.size()];
  c.mesh_shape = kMeshShapes[rng() % kMeshShapes.size()];
  Mesh mesh = Mesh::Iota(c.mesh_shape,
                         std::vector<std::string>(kAxisNames.begin(), kAxisNames.begin() + c.mesh_shape.size()));
  std::vector<std::vector<int64_t>> body_in;
  do {
    body_in.clear();
    for (int k = 0; k < c.fun->num_inputs; ++k) body_in.push_back(shapes[rng() % shapes.size()]);
  } while (c.fun->valid && !c.fun->valid(body_in));
  // In specs and the global shapes they dilate to; each input's unmentioned axes.
  std::vector<std::vector<std::string>> reps;
  for (const auto& b : body_in) {
    PartitionSpec spec = RandomSpec(rng, {}, mesh.axis_names(), static_cast<int>(b.size()));
    std::vector<int64_t> g = b;
    std::vector<std::string> named = spec.FlatAxes(), rep;
    for (size_t d = 0; d < g.size(); ++d) g[d] *= Partitions(mesh, spec[d]);
    for (const auto& a : mesh.axis_names())
      if (std::find(named.begin(), named.end(), a) == named.end()) rep.push_back(a);
    c.in_specs.push_back(spec);
    c.global_in.push_back(g);
    reps.push_back(rep);
  }
  // Body outputs, from the function on zero blocks.
  std::vector<Array> zeros;
  for (const auto& b : body_in) zeros.push_back(Array::Zeros(b, DType::kF32));
  std::vector<Array> body_out = c.fun->fun(zeros);
  for (size_t o = 0; o < body_out.size(); ++o) {
    std::vector<std::string> rep;
    if (c.fun->intersect_reps) {
      for (const auto& a : reps[0])
        if (std::find(reps[1].begin(), reps[1].end(), a) != reps[1].end()) rep.push_back(a);
    } else {
      rep = reps[c.fun->name == "flip" ? 1 - o : o];
    }
    // The out spec must name every axis the output may vary over (those not in rep); others are optional.
    std::vector<std::string> required, optional;
    for (const auto& a : mesh.axis_names())
      (std::find(rep.begin(), rep.end(), a) == rep.end() ? required : optional).push_back(a);
    c.out_specs.push_back(RandomSpec(rng, required, optional, body_out[o].rank()));
  }
  return c;
}

// JAX's shmap_reference, on the host.
std::vector<std::vector<double>> Reference(const Case& c, const Mesh& mesh, const std::vector<Array>& args,
                                           std::vector<std::vector<int64_t>>* out_shapes) {
  std::vector<std::vector<double>> outs;
  std::vector<std::vector<double>> in_values;
  for (const Array& a : args) in_values.push_back(a.ToDoubles());
  for (int64_t p = 0; p < mesh.size(); ++p) {
    std::vector<int64_t> idx = mesh.CoordsOfPosition(p);
    std::vector<Array> blocks;
    for (size_t k = 0; k < args.size(); ++k) {
      auto box = Box(mesh, c.in_specs[k], c.global_in[k], idx);
      std::vector<int64_t> bshape;
      for (auto& b : box) bshape.push_back(b.second - b.first);
      std::vector<double> v(NumElements(bshape));
      ForBox(c.global_in[k], box, [&](int64_t g, int64_t l) { v[l] = in_values[k][g]; });
      blocks.push_back(testops::FromDoubles(DType::kF32, v, bshape, 0));
    }
    std::vector<Array> res = c.fun->fun(blocks);
    if (outs.empty()) {
      for (size_t o = 0; o < res.size(); ++o) {
        std::vector<int64_t> shape = res[o].shape();
        for (int d = 0; d < c.out_specs[o].size(); ++d) shape[d] *= Partitions(mesh, c.out_specs[o][d]);
        out_shapes->push_back(shape);
        outs.emplace_back(NumElements(shape), 0.0);
      }
    }
    for (size_t o = 0; o < res.size(); ++o) {
      std::vector<double> v = res[o].ToDoubles();
      ForBox((*out_shapes)[o], Box(mesh, c.out_specs[o], (*out_shapes)[o], idx),
             [&](int64_t g, int64_t l) { outs[o][g] = v[l]; });
    }
  }
  return outs;
}

class ShardMapSystematic : public ::testing::TestWithParam<uint32_t> {};

TEST_P(ShardMapSystematic, MatchesTheHostReference) {
  std::mt19937 rng(GetParam());
  std::map<std::vector<int64_t>, std::unique_ptr<Runtime>> runtimes;
  for (int trial = 0; trial < 60; ++trial) {
    Case c = Sample(rng);
    Mesh mesh = Mesh::Iota(c.mesh_shape,
                           std::vector<std::string>(kAxisNames.begin(), kAxisNames.begin() + c.mesh_shape.size()));
    auto& runtime = runtimes[c.mesh_shape];
    if (!runtime) runtime = std::make_unique<Runtime>(mesh, RuntimeOptions{.num_threads = 2});
    std::vector<Array> args;
    for (const auto& g : c.global_in) {
      // JAX's args: arange(size).reshape(shape) / size.
      const int64_t n = NumElements(g);
      std::vector<double> v(n);
      for (int64_t i = 0; i < n; ++i) v[i] = static_cast<double>(i) / static_cast<double>(n);
      args.push_back(testops::FromDoubles(DType::kF32, v, g, 0));
    }
    std::vector<InSpec> in_specs(c.in_specs.begin(), c.in_specs.end());
    ShardMapOptions options;
    options.runtime = runtime.get();
    options.name = c.fun->name;
    const FunSpec* fun = c.fun;
    auto f = ShardMap([fun](DeviceContext&, std::span<const Array> b) { return fun->fun({b.begin(), b.end()}); }, mesh,
                      in_specs, c.out_specs, options);
    std::vector<ShardMapArg> call_args(args.begin(), args.end());
    std::vector<Array> got;
    try {
      got = f(call_args);
    } catch (const Error& e) {
      ADD_FAILURE() << c.ToString() << ": " << e.what();
      continue;
    }
    std::vector<std::vector<int64_t>> shapes;
    std::vector<std::vector<double>> want = Reference(c, mesh, args, &shapes);
    ASSERT_EQ(got.size(), want.size()) << c.ToString();
    for (size_t o = 0; o < want.size(); ++o) {
      EXPECT_EQ(got[o].shape(), shapes[o]) << c.ToString();
      std::vector<double> g = got[o].ToDoubles();
      ASSERT_EQ(g.size(), want[o].size()) << c.ToString();
      for (size_t i = 0; i < g.size(); ++i) EXPECT_NEAR(g[i], want[o][i] + MUTATE, 1e-5) << c.ToString() << " at " << i;
    }
    // Identity-like functions also equal the function applied to the unsharded input when the specs agree.
    if ((c.fun->name == "id" || c.fun->name == "relu") && c.in_specs[0] == c.out_specs[0]) {
      std::vector<double> whole = c.fun->fun({args[0]})[0].ToDoubles();
      EXPECT_EQ(got[0].ToDoubles(), whole) << c.ToString();
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Seeds, ShardMapSystematic, ::testing::Values(0u, 1u, 2u, 3u, 4u));

}  // namespace
}  // namespace spmdsim
