// Collectives on DeviceContext against a straightforward reference (slices and concatenations written from
// the jax.lax docstrings), JAX's worked numbers, dtype rules, errors, determinism and memory accounting.
#include "sim/device_context.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <numeric>
#include <random>
#include <set>
#include <stdexcept>
#include <thread>

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/strings.h"
#include "sim/internal/collective_call.h"
#include "sim/runtime.h"

namespace spmdsim {
namespace {

using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;

// --- A tiny reference N-d array of float32 values held as float ---------------------------------------------

struct Nd {
  std::vector<int64_t> shape;
  std::vector<float> v;

  int64_t Size() const { return NumElements(shape); }
  std::vector<int64_t> Strides() const {
    std::vector<int64_t> s(shape.size(), 1);
    for (int i = static_cast<int>(shape.size()) - 2; i >= 0; --i) s[i] = s[i + 1] * shape[i + 1];
    return s;
  }
  std::vector<int64_t> Unravel(int64_t flat) const {
    std::vector<int64_t> idx(shape.size());
    for (int i = static_cast<int>(shape.size()) - 1; i >= 0; --i) {
      idx[i] = flat % shape[i];
      flat /= shape[i];
    }
    return idx;
  }
  float At(const std::vector<int64_t>& idx) const {
    auto s = Strides();
    int64_t off = 0;
    for (size_t i = 0; i < idx.size(); ++i) off += idx[i] * s[i];
    return v[off];
  }
};

Nd FromArray(const Array& a) { return {a.shape(), std::vector<float>(a.data<float>().begin(), a.data<float>().end())}; }

// x[..., start:start+len (at axis), ...]
Nd Slice(const Nd& x, int axis, int64_t start, int64_t len) {
  Nd out{x.shape, {}};
  out.shape[axis] = len;
  for (int64_t f = 0; f < out.Size(); ++f) {
    auto idx = out.Unravel(f);
    idx[axis] += start;
    out.v.push_back(x.At(idx));
  }
  return out;
}

// numpy.concatenate(parts, axis)
Nd Concat(const std::vector<Nd>& parts, int axis) {
  Nd out{parts[0].shape, {}};
  out.shape[axis] = 0;
  for (const Nd& p : parts) out.shape[axis] += p.shape[axis];
  for (int64_t f = 0; f < out.Size(); ++f) {
    auto idx = out.Unravel(f);
    size_t k = 0;
    while (idx[axis] >= parts[k].shape[axis]) idx[axis] -= parts[k++].shape[axis];
    out.v.push_back(parts[k].At(idx));
  }
  return out;
}

Nd ExpandDims(Nd x, int axis) {
  x.shape.insert(x.shape.begin() + axis, 1);
  return x;
}
Nd Squeeze(Nd x, int axis) {
  EXPECT_EQ(x.shape[axis], 1);
  x.shape.erase(x.shape.begin() + axis);
  return x;
}

using Reducer = std::function<float(float, float)>;
Nd Reduce(const std::vector<Nd>& members, const Reducer& op) {
  Nd out = members[0];
  for (size_t k = 1; k < members.size(); ++k)
    for (size_t i = 0; i < out.v.size(); ++i) out.v[i] = op(out.v[i], members[k].v[i]);
  return out;
}
const Reducer kAdd = [](float a, float b) { return a + b; };

// all_gather: the members' values concatenated (tiled) or stacked on a new axis (untiled) along `axis`.
Nd RefAllGather(std::vector<Nd> members, int axis, bool tiled) {
  if (!tiled)
    for (auto& x : members) x = ExpandDims(x, axis);
  return Concat(members, axis);
}

// psum_scatter: block m along `dim` of the members' in-order sum (untiled: that axis, of size n, squeezed).
Nd RefPsumScatter(const std::vector<Nd>& members, int64_t m, int dim, bool tiled) {
  const int64_t n = static_cast<int64_t>(members.size());
  Nd s = Reduce(members, kAdd);
  const int64_t c = s.shape[dim] / n;
  Nd block = Slice(s, dim, m * c, c);
  return tiled ? block : Squeeze(block, dim);
}

// all_to_all for receiver m: block m along split axis a of every member, concatenated along concat axis b in
// member order. Untiled (jax.lax.all_to_all): a size-1 dimension for the group is inserted, the blocks are
// exchanged, and the split axis is squeezed.
Nd RefAllToAll(std::vector<Nd> members, int64_t m, int a, int b, bool tiled) {
  const int64_t n = static_cast<int64_t>(members.size());
  int split = a, concat = b;
  if (!tiled) {
    for (auto& x : members) {
      if (a < b) {
        x = ExpandDims(x, b + 1);
      } else if (a > b) {
        x = ExpandDims(x, b);
      }
    }
    if (a < b) concat = b + 1;
    if (a > b) split = a + 1;
  }
  const int64_t c = members[0].shape[split] / n;
  std::vector<Nd> chunks;
  for (const Nd& x : members) chunks.push_back(Slice(x, split, m * c, c));
  Nd out = Concat(chunks, concat);
  return (!tiled && a != b) ? Squeeze(out, split) : out;
}

// --- Running a collective on every device ---------------------------------------------------------------------

using DeviceFn = std::function<Array(DeviceContext&)>;

std::vector<Array> RunOnAll(Runtime& runtime, const DeviceFn& fn) {
  std::vector<Array> out(runtime.num_devices());
  runtime.Run([&](DeviceContext& d) { out[d.position()] = fn(d); });
  return out;
}

std::vector<Array> RunOnAll(const Mesh& mesh, int workers, const DeviceFn& fn) {
  RuntimeOptions options;
  options.num_threads = workers;
  Runtime runtime(mesh, options);
  return RunOnAll(runtime, fn);
}

Array RandomInput(std::mt19937& rng, const std::vector<int64_t>& shape) {
  std::uniform_int_distribution<int> dist(-50, 50);
  std::vector<float> v(NumElements(shape));
  for (auto& x : v) x = static_cast<float>(dist(rng)) * 0.37f;  // not exactly representable: sums round
  return Array::FromVector(v, shape);
}

class Collectives : public ::testing::TestWithParam<int> {
 protected:
  int workers() const { return GetParam(); }
};

// Results larger than the caches, computed in chunks split among the workers: every
// element must still be the in-order sum (bitwise), including the elements of a tail shorter than a chunk.
TEST_P(Collectives, APsumLargerThanTheCachesIsTheInOrderSumBitwise) {
  const int64_t n = 4;
  const int64_t elements = 8 * kMiB / 4 + 3;  // 8 MiB and a tail: 40 MiB of inputs and output in all
  RuntimeOptions options;
  options.num_threads = workers();
  Runtime runtime(Mesh::Iota({n}, {"x"}), options);
  std::vector<std::vector<float>> values(n, std::vector<float>(elements));
  for (int64_t d = 0; d < n; ++d) {
    for (int64_t i = 0; i < elements; ++i) {
      // Large and small magnitudes mixed, so that another order of additions gives other bits.
      values[d][i] = (d % 2 == 0 ? 1.0e7f : 0.37f) * static_cast<float>((i * 7 + d * 13) % 101 - 50);
    }
  }
  std::vector<Array> sums(n), maxes(n);
  runtime.Run([&](DeviceContext& d) {
    Array x = Array::FromVector(values[d.position()], {elements});
    sums[d.position()] = d.Psum(x, "x");
    maxes[d.position()] = d.Pmax(x, "x");
  });
  int64_t wrong = 0;
  const float* sum = sums[3].data<float>().data();
  const float* max = maxes[3].data<float>().data();
  for (int64_t i = 0; i < elements; ++i) {
    float expect = values[0][i];
    float expect_max = values[0][i];
    for (int64_t d = 1; d < n; ++d) {
      expect += values[d][i];
      expect_max = std::max(expect_max, values[d][i]);
    }
    if (std::memcmp(&expect, &sum[i], 4) != 0 || expect_max != max[i]) ++wrong;
  }
  EXPECT_EQ(wrong, 0);
  EXPECT_EQ(sums[0].data<float>().data(), sum);  // one buffer for the group
}

// --- JAX's worked numbers (jax/_src/lax/parallel.py docstrings, tests/shard_map_test.py) ----------------------

TEST_P(Collectives, PsumPmaxPmeanMatchJaxWorkedNumbersOnAFourByTwoMesh) {
  // arange(8.) with P(('x','y')): device (i, j) holds [2i + j].
  Mesh mesh = Mesh::Iota({4, 2}, {"x", "y"});
  auto value = [](DeviceContext& d) { return Array::Scalar<float>(static_cast<float>(d.position())); };
  auto psum_y = RunOnAll(mesh, workers(), [&](DeviceContext& d) { return d.Psum(value(d), "y"); });
  auto psum_x = RunOnAll(mesh, workers(), [&](DeviceContext& d) { return d.Psum(value(d), "x"); });
  auto pmax_x = RunOnAll(mesh, workers(), [&](DeviceContext& d) { return d.Pmax(value(d), "x"); });
  auto pmean = RunOnAll(mesh, workers(), [&](DeviceContext& d) { return d.Pmean(value(d), {"x", "y"}); });
  for (int i = 0; i < 4; ++i) {
    for (int j = 0; j < 2; ++j) {
      int p = 2 * i + j;
      EXPECT_EQ(psum_y[p].data<float>()[0], std::vector<float>({1, 5, 9, 13})[i]);
      EXPECT_EQ(psum_x[p].data<float>()[0], std::vector<float>({12, 16})[j]);
      EXPECT_EQ(pmax_x[p].data<float>()[0], std::vector<float>({6, 7})[j]);
      EXPECT_EQ(pmean[p].data<float>()[0], 3.5f);
    }
  }
}

TEST_P(Collectives, PsumAndTiledAllToAllMatchJaxWorkedNumbersOnFourDevices) {
  const std::vector<float> x = {3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9, 7, 1, 2};
  Mesh mesh = Mesh::Iota({4}, {"i"});
  auto block = [&](DeviceContext& d) {
    return Array::FromVector(std::vector<float>(x.begin() + 4 * d.position(), x.begin() + 4 * d.position() + 4), {4});
  };
  auto psum = RunOnAll(mesh, workers(), [&](DeviceContext& d) { return d.Psum(block(d), "i"); });
  auto a2a = RunOnAll(mesh, workers(), [&](DeviceContext& d) { return d.AllToAll(block(d), "i", 0, 0, true); });
  EXPECT_THAT(psum[2].data<float>(), ElementsAre(22, 20, 12, 17));
  std::vector<float> gathered;
  for (const Array& a : a2a) gathered.insert(gathered.end(), a.data<float>().begin(), a.data<float>().end());
  EXPECT_THAT(gathered, ElementsAre(3, 5, 5, 9, 1, 9, 3, 7, 4, 2, 5, 1, 1, 6, 8, 2));
}

TEST_P(Collectives, PsumScatterMatchesTheJaxDocstring) {
  // 4 devices holding the rows of arange(16).reshape(4, 4): untiled psum_scatter gives 24, 28, 32, 36.
  Mesh mesh = Mesh::Iota({4}, {"i"});
  auto out = RunOnAll(mesh, workers(), [](DeviceContext& d) {
    std::vector<int32_t> row = {0, 1, 2, 3};
    for (auto& v : row) v += static_cast<int32_t>(4 * d.position());
    return d.PsumScatter(Array::FromVector(row, {4}), "i");
  });
  for (int k = 0; k < 4; ++k) {
    EXPECT_EQ(out[k].ShapeString(), "int32[]");
    EXPECT_EQ(out[k].data<int32_t>()[0], 24 + 4 * k);
  }
}

TEST_P(Collectives, AllGatherOfScalarsStacksThemInGroupOrder) {
  Mesh mesh = Mesh::Iota({4, 2}, {"x", "y"});
  auto out = RunOnAll(mesh, workers(), [](DeviceContext& d) {
    return d.AllGather(Array::Scalar<int32_t>(static_cast<int32_t>(d.position())), {"y", "x"});
  });
  for (const Array& a : out) EXPECT_THAT(a.data<int32_t>(), ElementsAre(0, 2, 4, 6, 1, 3, 5, 7));  // y major
}

TEST_P(Collectives, AxisIndexAndAxisSizeFollowTheTupleOrder) {
  Mesh mesh = Mesh::Iota({4, 2}, {"x", "y"});
  auto out = RunOnAll(mesh, workers(), [](DeviceContext& d) {
    EXPECT_EQ(d.AxisSize({"x", "y"}), 8);
    EXPECT_EQ(d.AxisSize("y"), 2);
    EXPECT_EQ(d.AxisSize(std::vector<std::string>{}), 1);
    return Array::FromVector<int32_t>({d.AxisIndex({"x", "y"}), d.AxisIndex({"y", "x"}), d.AxisIndex("x")}, {3});
  });
  for (int64_t p = 0; p < 8; ++p) {
    int x = static_cast<int>(p / 2), y = static_cast<int>(p % 2);
    EXPECT_THAT(out[p].data<int32_t>(), ElementsAre(p, 4 * y + x, x));
  }
}

// --- Every collective against the reference, over meshes and tuples of axes ------------------------------------

struct MeshCase {
  std::vector<int64_t> shape;
  std::vector<std::string> names;
};

std::vector<std::vector<std::string>> AxisTuples(const std::vector<std::string>& names) {
  // Every non-empty ordered selection of distinct axes.
  std::vector<std::vector<std::string>> out;
  std::function<void(std::vector<std::string>&, std::vector<bool>&)> rec = [&](auto& cur, auto& used) {
    if (!cur.empty()) out.push_back(cur);
    for (size_t i = 0; i < names.size(); ++i) {
      if (used[i]) continue;
      used[i] = true;
      cur.push_back(names[i]);
      rec(cur, used);
      cur.pop_back();
      used[i] = false;
    }
  };
  std::vector<std::string> cur;
  std::vector<bool> used(names.size(), false);
  rec(cur, used);
  return out;
}

// Every collective over every tuple of axes whose groups have at most `max_group` devices, on inputs of rank at
// most `max_rank` (large meshes keep the references small). The results of positions p with p % check_every == 0
// and of the last position are compared with the reference (every device computes; a sample is checked).
void CheckAgainstReference(const MeshCase& mc, int workers, uint32_t seed,
                           int64_t max_group = std::numeric_limits<int64_t>::max(), int max_rank = 3,
                           int64_t check_every = 1) {
  Mesh mesh = Mesh::Iota(mc.shape, mc.names);
  RuntimeOptions options;
  options.num_threads = workers;
  Runtime runtime(mesh, options);
  std::mt19937 rng(seed);
  for (const auto& axes : AxisTuples(mc.names)) {
    SCOPED_TRACE(fmt::format("mesh {} axes ({})", mesh.ToString(), fmt::join(axes, ",")));
    const auto groups = mesh.PositionGroups(axes);
    const int64_t n = static_cast<int64_t>(groups[0].size());
    if (n > max_group) continue;
    // Random shape of rank 1..3 whose dimensions are multiples of n (so every op is valid on it).
    // Large groups get small shapes: rank <= 2 and dimensions == n.
    std::uniform_int_distribution<int> rank_dist(1, std::min(max_rank, n >= 6 ? 2 : 3)),
        dim_dist(1, n >= 16 ? 1 : (n >= 6 ? 2 : 3));
    std::vector<int64_t> shape;
    const int rank = rank_dist(rng);
    for (int i = 0; i < rank; ++i) shape.push_back(n * dim_dist(rng));
    std::vector<Array> inputs;
    std::vector<Nd> ref_in;
    for (int64_t p = 0; p < mesh.size(); ++p) {
      inputs.push_back(RandomInput(rng, shape));
      ref_in.push_back(FromArray(inputs.back()));
    }
    std::uniform_int_distribution<int> axis_dist(0, rank - 1);
    const int a = axis_dist(rng), b = axis_dist(rng);
    const int gather_axis = std::uniform_int_distribution<int>(0, rank)(rng);
    PermutationPairs perm;
    for (int64_t k = 0; k + 1 < n; k += 2) perm.push_back({k, (k + 3) % n});  // some receive nothing
    {
      std::set<int64_t> dsts;
      PermutationPairs unique;
      for (auto pr : perm)
        if (dsts.insert(pr.second).second) unique.push_back(pr);
      perm = unique;
    }
    // ppermute over axes out of mesh order is an error in JAX; use the sorted tuple for it.
    std::vector<std::string> sorted_axes = axes;
    std::sort(sorted_axes.begin(), sorted_axes.end(),
              [&](const auto& l, const auto& r) { return mesh.AxisIndex(l) < mesh.AxisIndex(r); });
    const auto perm_groups = mesh.PositionGroups(sorted_axes);

    struct Op {
      std::string name;
      DeviceFn fn;
      std::function<Nd(int64_t position)> reference;
    };
    auto index_groups = [](const std::vector<std::vector<int64_t>>& gs) {
      std::map<int64_t, std::pair<size_t, int64_t>> where;  // position -> (group, in-group index)
      for (size_t g = 0; g < gs.size(); ++g)
        for (size_t k = 0; k < gs[g].size(); ++k) where[gs[g][k]] = {g, static_cast<int64_t>(k)};
      return where;
    };
    const auto where = index_groups(groups), perm_where = index_groups(perm_groups);
    auto members_of = [&](const std::vector<std::vector<int64_t>>& gs, int64_t p, int64_t* index) {
      const auto& w = (&gs == &groups ? where : perm_where).at(p);
      *index = w.second;
      std::vector<Nd> ms;
      for (int64_t q : gs[w.first]) ms.push_back(ref_in[q]);
      return ms;
    };
    std::vector<Op> ops;
    ops.push_back({"psum", [&](DeviceContext& d) { return d.Psum(inputs[d.position()], axes); },
                   [&](int64_t p) {
                     int64_t m;
                     return Reduce(members_of(groups, p, &m), kAdd);
                   }});
    ops.push_back({"pmax", [&](DeviceContext& d) { return d.Pmax(inputs[d.position()], axes); },
                   [&](int64_t p) {
                     int64_t m;
                     return Reduce(members_of(groups, p, &m), [](float x, float y) { return std::max(x, y); });
                   }});
    ops.push_back({"pmin", [&](DeviceContext& d) { return d.Pmin(inputs[d.position()], axes); },
                   [&](int64_t p) {
                     int64_t m;
                     return Reduce(members_of(groups, p, &m), [](float x, float y) { return std::min(x, y); });
                   }});
    ops.push_back({"pmean", [&](DeviceContext& d) { return d.Pmean(inputs[d.position()], axes); },
                   [&](int64_t p) {
                     int64_t m;
                     Nd s = Reduce(members_of(groups, p, &m), kAdd);
                     for (auto& v : s.v) v = v / static_cast<float>(n);
                     return s;
                   }});
    for (bool tiled : {false, true}) {
      const int ga = tiled ? std::min(gather_axis, rank - 1) : gather_axis;
      ops.push_back({fmt::format("all_gather(axis={}, tiled={})", ga, tiled),
                     [&, ga, tiled](DeviceContext& d) { return d.AllGather(inputs[d.position()], axes, ga, tiled); },
                     [&, ga, tiled](int64_t p) {
                       int64_t m;
                       return RefAllGather(members_of(groups, p, &m), ga, tiled);
                     }});
      ops.push_back({fmt::format("psum_scatter(dim={}, tiled={})", a, tiled),
                     [&, tiled](DeviceContext& d) {
                       Array x = inputs[d.position()];
                       if (!tiled) {  // untiled needs shape[a] == n
                         Nd r = Slice(FromArray(x), a, 0, n);
                         x = Array::FromVector(r.v, r.shape);
                       }
                       return d.PsumScatter(x, axes, a, tiled);
                     },
                     [&, tiled](int64_t p) {
                       int64_t m;
                       auto ms = members_of(groups, p, &m);
                       if (!tiled)
                         for (auto& x : ms) x = Slice(x, a, 0, n);
                       return RefPsumScatter(ms, m, a, tiled);
                     }});
      ops.push_back({fmt::format("all_to_all(split={}, concat={}, tiled={})", a, b, tiled),
                     [&, tiled](DeviceContext& d) {
                       Array x = inputs[d.position()];
                       if (!tiled) {
                         Nd r = Slice(FromArray(x), a, 0, n);
                         x = Array::FromVector(r.v, r.shape);
                       }
                       return d.AllToAll(x, axes, a, b, tiled);
                     },
                     [&, tiled](int64_t p) {
                       int64_t m;
                       auto ms = members_of(groups, p, &m);
                       if (!tiled)
                         for (auto& x : ms) x = Slice(x, a, 0, n);
                       return RefAllToAll(ms, m, a, b, tiled);
                     }});
    }
    ops.push_back({"ppermute", [&](DeviceContext& d) { return d.Ppermute(inputs[d.position()], sorted_axes, perm); },
                   [&](int64_t p) {
                     int64_t m;
                     auto ms = members_of(perm_groups, p, &m);
                     for (auto [src, dst] : perm)
                       if (dst == m) return ms[src];
                     Nd zeros = ref_in[p];
                     for (auto& v : zeros.v) v = 0;
                     return zeros;
                   }});
    for (const Op& op : ops) {
      SCOPED_TRACE(op.name);
      auto out = RunOnAll(runtime, op.fn);
      for (int64_t p = 0; p < mesh.size(); ++p) {
        if (p % check_every != 0 && p != mesh.size() - 1) continue;
        Nd expected = op.reference(p);
        ASSERT_EQ(out[p].shape(), expected.shape) << "position " << p;
        ASSERT_EQ(out[p].dtype(), DType::kF32);
        // Bitwise: the reference adds in in-group order too.
        ASSERT_THAT(out[p].data<float>(), ElementsAreArray(expected.v)) << "position " << p;
      }
    }
  }
}

TEST_P(Collectives, MatchTheReferenceOnOneDimensionalMeshes) {
  // 1-9 cover every way ReduceRange folds members (up to four per pass), 64 many passes.
  for (int64_t n : {1, 2, 3, 4, 5, 6, 7, 8, 9, 64})
    CheckAgainstReference({{n}, {"x"}}, workers(), 100 + static_cast<uint32_t>(n));
}

TEST_P(Collectives, MatchTheReferenceOnFourThousandNinetySixDevices) {
  // A 64x64 mesh: every collective over x and over y (groups of 64) on 64-element inputs; the tuples over
  // both axes (one group of 4096) are left out to keep the references small (tests/sim/scale_test.cc runs
  // a psum and an all_gather over them). Every 61st position (a prime: every group, every in-group index
  // residue) and the last are checked.
  CheckAgainstReference({{64, 64}, {"x", "y"}}, workers(), 4096, /*max_group=*/64, /*max_rank=*/1,
                        /*check_every=*/61);
}

TEST_P(Collectives, MatchTheReferenceOnTwoAndThreeDimensionalMeshesForEveryTupleOfAxes) {
  CheckAgainstReference({{2, 4}, {"x", "y"}}, workers(), 7);
  CheckAgainstReference({{4, 2}, {"data", "model"}}, workers(), 8);
  CheckAgainstReference({{2, 3, 2}, {"a", "b", "c"}}, workers(), 9);
}

// --- The copying kernels (all_to_all, all_gather) and psum_scatter on every layout ------------------------------
// The kernels merge dimensions into the longest contiguous runs they can and copy runs of one element with a
// typed loop, so every (split, concat) pair, tiled or not, every element size (1, 2, 4, 8 bytes, and runs of
// 16 and of other sizes), 1-axis and 2-axis groups (in both orders: groups of non-contiguous positions) are
// checked against the references above.

struct GroupCase {
  std::vector<int64_t> mesh_shape;
  std::vector<std::string> mesh_names;
  std::vector<std::string> axes;
};

const std::vector<GroupCase>& GroupCases() {
  static const auto* cases = new std::vector<GroupCase>{
      {{4}, {"x"}, {"x"}},
      {{3}, {"x"}, {"x"}},
      {{2, 3}, {"x", "y"}, {"x", "y"}},
      {{2, 3}, {"x", "y"}, {"y", "x"}},
      {{2, 3}, {"x", "y"}, {"x"}},
  };
  return *cases;
}

// Small integers, exact in every dtype and in sums of a few of them; 0/1 for bool.
Nd SmallIntegers(std::mt19937& rng, const std::vector<int64_t>& shape, DType dtype) {
  const bool is_bool = dtype == DType::kBool;
  std::uniform_int_distribution<int> dist(is_bool ? 0 : -8, is_bool ? 1 : 8);
  Nd x{shape, std::vector<float>(NumElements(shape))};
  for (auto& v : x.v) v = static_cast<float>(dist(rng));
  return x;
}

Array ToArray(const Nd& x, DType dtype) {
  switch (dtype) {
    case DType::kF32: return Array::FromVector(x.v, x.shape);
    case DType::kF64: return Array::FromVector(std::vector<double>(x.v.begin(), x.v.end()), x.shape);
    case DType::kI32: return Array::FromVector(std::vector<int32_t>(x.v.begin(), x.v.end()), x.shape);
    case DType::kI64: return Array::FromVector(std::vector<int64_t>(x.v.begin(), x.v.end()), x.shape);
    case DType::kBF16: {
      std::vector<bfloat16> v;
      for (float f : x.v) v.push_back(ToBFloat16(f));
      return Array::FromVector(v, x.shape);
    }
    case DType::kF16: {
      std::vector<float16> v;
      for (float f : x.v) v.push_back(ToFloat16(f));
      return Array::FromVector(v, x.shape);
    }
    case DType::kBool: {
      std::vector<bool> v;
      for (float f : x.v) v.push_back(f != 0);
      return Array::FromVector(v, x.shape);
    }
    default: break;  // not an array dtype
  }
  return Array();
}

using GroupReference = std::function<Nd(const std::vector<Nd>& members, int64_t m)>;

// Runs `fn` on every device with its input and compares each result with `reference` of its group.
void CheckCollective(Runtime& runtime, const std::vector<std::string>& axes, const std::vector<Nd>& in, DType dtype,
                     const std::function<Array(DeviceContext&, const Array&)>& fn, const GroupReference& reference) {
  std::vector<Array> inputs;
  for (const Nd& x : in) inputs.push_back(ToArray(x, dtype));
  auto out = RunOnAll(runtime, [&](DeviceContext& d) { return fn(d, inputs[d.position()]); });
  for (const auto& group : runtime.mesh().PositionGroups(axes)) {
    std::vector<Nd> members;
    for (int64_t q : group) members.push_back(in[q]);
    for (size_t m = 0; m < group.size(); ++m) {
      const Nd expected = reference(members, static_cast<int64_t>(m));
      const Array& got = out[group[m]];
      ASSERT_EQ(got.shape(), expected.shape) << "position " << group[m];
      // Compared as doubles for every dtype (float -> double is exact; bool sums are int32): the first
      // difference, not two vectors of up to 80000 elements.
      const std::vector<double> values = got.ToDoubles();
      const auto [g, e] = std::mismatch(values.begin(), values.end(), expected.v.begin());
      ASSERT_TRUE(g == values.end()) << "position " << group[m] << ": element " << (g - values.begin()) << " is "
                                     << *g << ", expected " << *e;
    }
  }
}

TEST_P(Collectives, CopyingKernelsMatchTheReferenceForEveryLayoutDtypeAndGroup) {
  std::mt19937 rng(42);
  for (const GroupCase& gc : GroupCases()) {
    RuntimeOptions options;
    options.num_threads = workers();
    Runtime runtime(Mesh::Iota(gc.mesh_shape, gc.mesh_names), options);
    const int64_t n = runtime.mesh().AxesSize(gc.axes);
    for (DType dtype : {DType::kF32, DType::kBF16, DType::kBool, DType::kF64}) {
      // Trailing dimensions of 4 and 2 make runs of 16 bytes (4 x float32, 2 x float64) and 8 bytes; 3 and 5
      // make runs no typed loop handles.
      for (const std::vector<int64_t>& base : {std::vector<int64_t>{3, 2, 4}, std::vector<int64_t>{5, 1, 3}}) {
        for (int rank = 1; rank <= 3; ++rank) {
          SCOPED_TRACE(fmt::format("axes ({}) of {}; {} base {} rank {}", fmt::join(gc.axes, ","),
                                   runtime.mesh().ToString(), DTypeName(dtype), fmt::join(base, "x"), rank));
          const std::vector<int64_t> shape(base.begin(), base.begin() + rank);
          auto inputs = [&](std::vector<int64_t> s) {
            std::vector<Nd> in;
            for (int64_t p = 0; p < runtime.num_devices(); ++p) in.push_back(SmallIntegers(rng, s, dtype));
            return in;
          };
          for (bool tiled : {false, true}) {
            for (int a = 0; a < rank; ++a) {
              std::vector<int64_t> s = shape;
              s[a] = tiled ? n * shape[a] : n;
              for (int b = 0; b < rank; ++b) {
                SCOPED_TRACE(fmt::format("all_to_all(split={}, concat={}, tiled={})", a, b, tiled));
                CheckCollective(
                    runtime, gc.axes, inputs(s), dtype,
                    [&](DeviceContext& d, const Array& x) { return d.AllToAll(x, gc.axes, a, b, tiled); },
                    [&](const std::vector<Nd>& ms, int64_t m) { return RefAllToAll(ms, m, a, b, tiled); });
              }
              if (dtype == DType::kBF16 || dtype == DType::kF64) continue;  // sums: float32 and bool (as int32)
              SCOPED_TRACE(fmt::format("psum_scatter(dim={}, tiled={})", a, tiled));
              CheckCollective(
                  runtime, gc.axes, inputs(s), dtype,
                  [&](DeviceContext& d, const Array& x) { return d.PsumScatter(x, gc.axes, a, tiled); },
                  [&](const std::vector<Nd>& ms, int64_t m) { return RefPsumScatter(ms, m, a, tiled); });
            }
            for (int axis = 0; axis < (tiled ? rank : rank + 1); ++axis) {
              SCOPED_TRACE(fmt::format("all_gather(axis={}, tiled={})", axis, tiled));
              CheckCollective(
                  runtime, gc.axes, inputs(shape), dtype,
                  [&](DeviceContext& d, const Array& x) { return d.AllGather(x, gc.axes, axis, tiled); },
                  [&](const std::vector<Nd>& ms, int64_t) { return RefAllGather(ms, axis, tiled); });
            }
          }
        }
      }
    }
  }
}

// Results of rank 9 and more (the call keeps up to 8 dimensions inline and moves them to the heap beyond).
TEST_P(Collectives, HighRankResultsMatchTheReference) {
  std::mt19937 rng(9);
  RuntimeOptions options;
  options.num_threads = workers();
  Runtime runtime(Mesh::Iota({2}, {"x"}), options);
  const std::vector<std::string> axes = {"x"};
  auto inputs = [&](const std::vector<int64_t>& shape) {
    std::vector<Nd> in;
    for (int64_t p = 0; p < runtime.num_devices(); ++p) in.push_back(SmallIntegers(rng, shape, DType::kF32));
    return in;
  };
  const std::vector<int64_t> rank8 = {2, 1, 3, 1, 1, 2, 1, 3};
  for (int axis : {0, 4, 8}) {  // untiled all_gather: rank 8 -> 9
    SCOPED_TRACE(fmt::format("all_gather axis={}", axis));
    CheckCollective(
        runtime, axes, inputs(rank8), DType::kF32,
        [&](DeviceContext& d, const Array& x) { return d.AllGather(x, axes, axis, false); },
        [&](const std::vector<Nd>& ms, int64_t) { return RefAllGather(ms, axis, false); });
  }
  std::vector<int64_t> rank9 = rank8;
  rank9.insert(rank9.begin() + 3, 2);
  for (int dim : {0, 3, 8}) {  // untiled psum_scatter: rank 9 -> 8
    std::vector<int64_t> shape = rank9;
    shape[dim] = 2;
    SCOPED_TRACE(fmt::format("psum_scatter dim={}", dim));
    CheckCollective(
        runtime, axes, inputs(shape), DType::kF32,
        [&](DeviceContext& d, const Array& x) { return d.PsumScatter(x, axes, dim, false); },
        [&](const std::vector<Nd>& ms, int64_t m) { return RefPsumScatter(ms, m, dim, false); });
  }
  for (auto [split, concat] : {std::pair{3, 8}, std::pair{8, 0}, std::pair{0, 3}}) {  // rank 9 <-> rank 9
    const int a = split, b = concat;  // lambdas capture variables, not structured bindings (clang < 16)
    std::vector<int64_t> shape = rank9;
    shape[a] = 2;
    for (bool tiled : {false, true}) {
      SCOPED_TRACE(fmt::format("all_to_all split={} concat={} tiled={}", a, b, tiled));
      CheckCollective(
          runtime, axes, inputs(shape), DType::kF32,
          [&](DeviceContext& d, const Array& x) { return d.AllToAll(x, axes, a, b, tiled); },
          [&](const std::vector<Nd>& ms, int64_t m) { return RefAllToAll(ms, m, a, b, tiled); });
    }
  }
}

// Outputs above the runtime's 64 KiB threshold are computed by every worker (units split among them): flat
// and strided all_to_all, all_gather with short rows (several row-range units per group), psum_scatter with
// rows longer than a reduction chunk and rows of a few elements; float32 values whose sums depend on the
// order of the additions, compared bitwise with the in-order reference.
TEST_P(Collectives, LargeCopiesAndScattersMatchTheReferenceBitwise) {
  std::mt19937 rng(7);
  for (const GroupCase& gc : {GroupCase{{4}, {"x"}, {"x"}}, GroupCase{{2, 2}, {"x", "y"}, {"y", "x"}}}) {
    RuntimeOptions options;
    options.num_threads = workers();
    Runtime runtime(Mesh::Iota(gc.mesh_shape, gc.mesh_names), options);
    const int64_t n = 4;
    auto inputs = [&](const std::vector<int64_t>& shape) {
      std::vector<Nd> in;
      for (int64_t p = 0; p < runtime.num_devices(); ++p) in.push_back(FromArray(RandomInput(rng, shape)));
      return in;
    };
    struct AllToAllCase {
      std::vector<int64_t> shape;
      int a, b;
      bool tiled;
    };
    for (const AllToAllCase& c : std::vector<AllToAllCase>{{{n * 6000}, 0, 0, true},
                                                           {{8, n * 1500}, 1, 0, true},
                                                           {{n * 1000, 6}, 0, 1, true},
                                                           {{5000, n}, 1, 1, false},
                                                           {{n, 3000}, 0, 1, false},
                                                           {{3000, n}, 1, 0, false}}) {
      SCOPED_TRACE(fmt::format("{}: all_to_all [{}] split={} concat={} tiled={}", runtime.mesh().ToString(),
                               fmt::join(c.shape, ","), c.a, c.b, c.tiled));
      CheckCollective(
          runtime, gc.axes, inputs(c.shape), DType::kF32,
          [&](DeviceContext& d, const Array& x) { return d.AllToAll(x, gc.axes, c.a, c.b, c.tiled); },
          [&](const std::vector<Nd>& ms, int64_t m) { return RefAllToAll(ms, m, c.a, c.b, c.tiled); });
    }
    struct AxisCase {
      std::vector<int64_t> shape;
      int axis;
      bool tiled;
    };
    for (const AxisCase& c : std::vector<AxisCase>{{{20000}, 1, false}, {{30000, 2}, 1, true}, {{3000, 7}, 0, true}}) {
      SCOPED_TRACE(fmt::format("{}: all_gather [{}] axis={} tiled={}", runtime.mesh().ToString(),
                               fmt::join(c.shape, ","), c.axis, c.tiled));
      CheckCollective(
          runtime, gc.axes, inputs(c.shape), DType::kF32,
          [&](DeviceContext& d, const Array& x) { return d.AllGather(x, gc.axes, c.axis, c.tiled); },
          [&](const std::vector<Nd>& ms, int64_t) { return RefAllGather(ms, c.axis, c.tiled); });
    }
    for (const AxisCase& c :
         std::vector<AxisCase>{{{n * 20000}, 0, true}, {{5000, n}, 1, false}, {{3000, n * 5}, 1, true}}) {
      SCOPED_TRACE(fmt::format("{}: psum_scatter [{}] dim={} tiled={}", runtime.mesh().ToString(),
                               fmt::join(c.shape, ","), c.axis, c.tiled));
      CheckCollective(
          runtime, gc.axes, inputs(c.shape), DType::kF32,
          [&](DeviceContext& d, const Array& x) { return d.PsumScatter(x, gc.axes, c.axis, c.tiled); },
          [&](const std::vector<Nd>& ms, int64_t m) { return RefPsumScatter(ms, m, c.axis, c.tiled); });
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Workers, Collectives, ::testing::Values(1, 2, 4),
                         [](const auto& param_info) { return fmt::format("w{}", param_info.param); });

TEST(Collectives, Run4096DevicesWithAPsumAndAnAllGatherOverATwoAxisMesh) {
  Mesh mesh = Mesh::Iota({64, 64}, {"x", "y"});
  auto out = RunOnAll(mesh, 0, [](DeviceContext& d) {
    Array x = Array::Scalar<int32_t>(static_cast<int32_t>(d.position()));
    Array row_sum = d.Psum(x, "y");                    // sum of 64x .. 64x+63
    Array gathered = d.AllGather(row_sum, "x");        // the 64 row sums, in x order
    return gathered;
  });
  for (int64_t p : {int64_t{0}, int64_t{777}, int64_t{4095}}) {
    auto v = out[p].data<int32_t>();
    ASSERT_EQ(v.size(), 64u);
    for (int x = 0; x < 64; ++x) EXPECT_EQ(v[x], 64 * 64 * x + 63 * 64 / 2);
  }
  EXPECT_TRUE(out[0].SharesBufferWith(out[64 * 63]));  // group y=0 of all_gather over x: one buffer
  EXPECT_FALSE(out[0].SharesBufferWith(out[1]));
}

// --- Determinism ------------------------------------------------------------------------------------------------

TEST(Collectives, FloatSumsAreBitwiseIdenticalForEveryWorkerCountAndFollowTheGroupOrder) {
  // 8 devices x 32768 floats (128 KiB each: the workers split the sum) with magnitudes 1e8 .. 1e-3 so that
  // the order of the additions changes the result.
  Mesh mesh = Mesh::Iota({8}, {"x"});
  const int64_t kElements = 32768;
  auto input = [&](int64_t p) {
    std::mt19937 rng(static_cast<uint32_t>(p));
    std::uniform_real_distribution<float> dist(-1, 1);
    std::vector<float> v(kElements);
    for (auto& x : v) x = dist(rng) * std::pow(10.0f, static_cast<float>((p * 3) % 12) - 3);
    return v;
  };
  std::vector<float> expected(kElements, 0);
  std::vector<float> other_order(kElements, 0);
  for (int64_t p = 0; p < 8; ++p) {
    auto v = input(p);
    for (int64_t i = 0; i < kElements; ++i) expected[i] = p == 0 ? v[i] : expected[i] + v[i];
  }
  for (int64_t p = 7; p >= 0; --p) {
    auto v = input(p);
    for (int64_t i = 0; i < kElements; ++i) other_order[i] = p == 7 ? v[i] : other_order[i] + v[i];
  }
  ASSERT_NE(expected, other_order) << "the inputs do not make the order matter";
  for (int workers : {1, 2, 4}) {
    auto out = RunOnAll(mesh, workers, [&](DeviceContext& d) {
      return d.Psum(Array::FromVector(input(d.position()), {kElements}), "x");
    });
    for (const Array& a : out) ASSERT_THAT(a.data<float>(), ElementsAreArray(expected)) << workers << " workers";
  }
}

// --- Dtypes ----------------------------------------------------------------------------------------------------

TEST(Collectives, PsumOfBoolsCountsThemAsInt32) {
  auto out = RunOnAll(Mesh::Iota({4}, {"x"}), 2, [](DeviceContext& d) {
    return d.Psum(Array::FromVector(std::vector<bool>{true, d.position() % 2 == 0, false}, {3}), "x");
  });
  EXPECT_EQ(out[0].dtype(), DType::kI32);
  EXPECT_THAT(out[3].data<int32_t>(), ElementsAre(4, 2, 0));
}

TEST(Collectives, PmeanDividesTrulySoIntegersBecomeFloating) {
  auto out = RunOnAll(Mesh::Iota({4}, {"x"}), 2, [](DeviceContext& d) {
    Array i32 = Array::Scalar<int32_t>(static_cast<int32_t>(d.position()));  // 0+1+2+3 = 6 -> 1.5
    Array i64 = Array::Scalar<int64_t>(d.position());
    Array b = Array::FromVector(std::vector<bool>{d.position() == 0}, {1});
    return Array::FromVector<double>({d.Pmean(i32, "x").data<float>()[0], d.Pmean(i64, "x").data<double>()[0],
                                      d.Pmean(b, "x").data<float>()[0]},
                                     {3});
  });
  EXPECT_THAT(out[1].data<double>(), ElementsAre(1.5, 1.5, 0.25));
}

TEST(Collectives, IntegerPsumStaysIntegerAndWrapsOnOverflow) {
  auto out = RunOnAll(Mesh::Iota({2}, {"x"}), 2, [](DeviceContext& d) {
    return d.Psum(Array::Scalar<int32_t>(std::numeric_limits<int32_t>::max()), "x");
  });
  EXPECT_EQ(out[0].dtype(), DType::kI32);
  EXPECT_EQ(out[0].data<int32_t>()[0], -2);  // 2 * (2^31 - 1) mod 2^32
}

TEST(Collectives, Bfloat16SumsRoundAfterEveryAdditionInGroupOrder) {
  // 256 + 1 = 257 is not a bfloat16 (8 significant bits): it rounds to 256, every time.
  auto out = RunOnAll(Mesh::Iota({4}, {"x"}), 2, [](DeviceContext& d) {
    float v = d.position() == 0 ? 256.0f : 1.0f;
    return d.Psum(Array::FromVector<bfloat16>({ToBFloat16(v)}, {1}), "x");
  });
  EXPECT_EQ(out[0].dtype(), DType::kBF16);
  EXPECT_EQ(ToFloat(out[0].data<bfloat16>()[0]), 256.0f);  // exact math would give 259
  auto half = RunOnAll(Mesh::Iota({2}, {"x"}), 1, [](DeviceContext& d) {
    return d.Pmean(Array::FromVector<float16>({ToFloat16(d.position() == 0 ? 1.0f : 2.0f)}, {1}), "x");
  });
  EXPECT_EQ(ToFloat(half[0].data<float16>()[0]), 1.5f);
}

TEST(Collectives, PmaxAndPminPropagateNanAndWorkOnBools) {
  auto out = RunOnAll(Mesh::Iota({3}, {"x"}), 2, [](DeviceContext& d) {
    float v = d.position() == 1 ? std::numeric_limits<float>::quiet_NaN() : static_cast<float>(d.position());
    Array f = Array::FromVector<float>({v, static_cast<float>(d.position())}, {2});
    Array mx = d.Pmax(f, "x");
    Array mn = d.Pmin(f, "x");
    Array b = Array::FromVector(std::vector<bool>{d.position() == 2}, {1});
    Array any = d.Pmax(b, "x");
    Array all = d.Pmin(b, "x");
    return Array::FromVector<float>({mx.data<float>()[0], mx.data<float>()[1], mn.data<float>()[1],
                                     static_cast<float>(any.data<bool>()[0]), static_cast<float>(all.data<bool>()[0])},
                                    {5});
  });
  auto v = out[0].data<float>();
  EXPECT_TRUE(std::isnan(v[0]));
  EXPECT_EQ(v[1], 2.0f);
  EXPECT_EQ(v[2], 0.0f);
  EXPECT_EQ(v[3], 1.0f);
  EXPECT_EQ(v[4], 0.0f);
}

TEST(Collectives, EmptyAxesReturnTheInputAsJaxDoes) {
  auto out = RunOnAll(Mesh::Iota({2}, {"x"}), 1, [](DeviceContext& d) {
    Array x = Array::FromVector(std::vector<bool>{true}, {1});
    Array s = d.Psum(x, std::vector<std::string>{});
    EXPECT_TRUE(s.SharesBufferWith(x));
    EXPECT_EQ(s.dtype(), DType::kBool);  // no int32 conversion either
    return d.AllGather(Array::Scalar<float>(1), std::vector<std::string>{});
  });
  EXPECT_EQ(out[0].rank(), 0);
}

// --- Errors (JAX's wording and exception names) -------------------------------------------------------------

// Runs fn on a 2x2 mesh and returns the DeviceError it must produce.
DeviceError ExpectDeviceError(const std::function<void(DeviceContext&)>& fn) {
  Runtime runtime(Mesh::Iota({2, 2}, {"x", "y"}));
  try {
    runtime.Run(fn);
  } catch (const DeviceError& e) {
    return e;
  }
  ADD_FAILURE() << "no DeviceError";
  return DeviceError(ErrorCode::kInternal, "", ErrorKind::kNone, -1, -1, nullptr);
}

TEST(CollectiveErrors, AnUnboundAxisIsJaxsNameError) {
  DeviceError e = ExpectDeviceError([](DeviceContext& d) { d.Psum(Array::Scalar<float>(1), "z"); });
  EXPECT_EQ(e.code(), ErrorCode::kNotFound);
  EXPECT_EQ(e.kind(), ErrorKind::kNameError);
  EXPECT_THAT(e.message(),
              HasSubstr("Found an unbound axis name: z. To fix this, please call psum under `jax.shard_map`."));
  DeviceError e2 = ExpectDeviceError([](DeviceContext& d) { d.AxisIndex({"x", "w"}); });
  EXPECT_THAT(e2.message(), HasSubstr("Found an unbound axis name: w. To fix this, please call axis_index"));
}

TEST(CollectiveErrors, AnAxisNamedTwiceIsAnError) {
  DeviceError e = ExpectDeviceError([](DeviceContext& d) { d.Psum(Array::Scalar<float>(1), {"x", "x"}); });
  EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
}

TEST(CollectiveErrors, AllGatherAxisOutOfBounds) {
  DeviceError e =
      ExpectDeviceError([](DeviceContext& d) { d.AllGather(Array::Zeros({2, 2}, DType::kF32), "x", 3, false); });
  EXPECT_EQ(e.kind(), ErrorKind::kValueError);
  EXPECT_THAT(e.message(), HasSubstr("axis 3 is out of bounds for array of dimension 3"));
  DeviceError t =
      ExpectDeviceError([](DeviceContext& d) { d.AllGather(Array::Zeros({2, 2}, DType::kF32), "x", -3, true); });
  EXPECT_THAT(t.message(), HasSubstr("axis -3 is out of bounds for array of dimension 2"));
}

TEST(CollectiveErrors, PsumScatterSizesFollowJax) {
  DeviceError untiled =
      ExpectDeviceError([](DeviceContext& d) { d.PsumScatter(Array::Zeros({3}, DType::kF32), "x", 0, false); });
  EXPECT_THAT(untiled.message(), HasSubstr("reduce_scatter operand scatter dimension size 3 must match shard count 2"));
  DeviceError tiled =
      ExpectDeviceError([](DeviceContext& d) { d.PsumScatter(Array::Zeros({2, 3}, DType::kF32), "y", 1, true); });
  EXPECT_THAT(tiled.message(), HasSubstr("tiled reduce_scatter operand scatter dimension size 3 must be divisible "
                                         "by shard_count 2"));
}

TEST(CollectiveErrors, AllToAllSizesFollowJax) {
  DeviceError tiled = ExpectDeviceError(
      [](DeviceContext& d) { d.AllToAll(Array::Zeros({3, 4}, DType::kF32), {"x", "y"}, 0, 1, true); });
  EXPECT_THAT(tiled.message(), HasSubstr("The size of all_to_all split_axis (3) has to be divisible by the size of "
                                         "the named axis ('x', 'y') (4)"));
  DeviceError tiled2 =
      ExpectDeviceError([](DeviceContext& d) { d.AllToAll(Array::Zeros({3}, DType::kF32), "x", 0, 0, true); });
  EXPECT_THAT(tiled2.message(), HasSubstr("The size of all_to_all split_axis (3) has to be divisible by the size of "
                                          "the named axis x (2)"));
  DeviceError untiled =
      ExpectDeviceError([](DeviceContext& d) { d.AllToAll(Array::Zeros({3}, DType::kF32), "x", 0, 0, false); });
  EXPECT_THAT(untiled.message(), HasSubstr("all_to_all requires the size of the mapped axis axis_name to equal "
                                           "x.shape[split_axis], but they are 2 and 3 respectively."));
}

TEST(CollectiveErrors, PpermuteSourcesAndDestinationsMustBeUnique) {
  DeviceError e = ExpectDeviceError(
      [](DeviceContext& d) { d.Ppermute(Array::Scalar<float>(1), {"x", "y"}, {{0, 1}, {0, 2}}); });
  EXPECT_EQ(e.kind(), ErrorKind::kValueError);
  EXPECT_THAT(e.message(), HasSubstr("ppermute sources and destinations must be unique, got ((0, 1), (0, 2))."));
  // Uniqueness is checked modulo the group size, as JAX does: 3 and 1 are the same destination on 2 devices.
  DeviceError mod =
      ExpectDeviceError([](DeviceContext& d) { d.Ppermute(Array::Scalar<float>(1), "x", {{0, 3}, {1, 1}}); });
  EXPECT_EQ(mod.kind(), ErrorKind::kValueError);
  EXPECT_THAT(mod.message(), HasSubstr("got ((0, 3), (1, 1))."));
}

// JAX indexes the group tuple with each index: -n..-1 count from the end, anything else is Python's IndexError.
TEST(CollectiveErrors, PpermuteIndexOutsideTheGroupIsJaxsIndexError) {
  for (int64_t bad : {2, 3, -3}) {
    DeviceError e =
        ExpectDeviceError([bad](DeviceContext& d) { d.Ppermute(Array::Scalar<float>(1), "x", {{0, bad}}); });
    EXPECT_EQ(e.kind(), ErrorKind::kIndexError) << bad;
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_THAT(e.message(), HasSubstr("tuple index out of range"));
    EXPECT_THAT(e.message(), HasSubstr(fmt::format("uses index {} in a group of 2 devices", bad)));
  }
  Runtime runtime(Mesh::Iota({2, 2}, {"x", "y"}));
  std::vector<Array> out(4);
  runtime.Run([&](DeviceContext& d) {
    out[d.position()] =
        d.Ppermute(Array::Scalar<int32_t>(static_cast<int32_t>(d.position())), "x", {{-2, -1}, {-1, 0}});
  });
  // Along x (stride 2): index 0 sends to 1 and 1 to 0.
  for (int64_t p = 0; p < 4; ++p) EXPECT_EQ(out[p].data<int32_t>()[0], (p + 2) % 4) << p;
}

// More than 32 pairs are checked with bitmaps rather than by comparing pairs: the same verdicts and message.
TEST(CollectiveErrors, PpermuteWithManyPairsChecksUniquenessModuloTheGroupSize) {
  const int64_t n = 40;
  Runtime runtime(Mesh::Iota({n}, {"x"}));
  auto run = [&](const PermutationPairs& perm) {
    std::vector<Array> out(n);
    runtime.Run([&](DeviceContext& d) {
      out[d.position()] = d.Ppermute(Array::Scalar<int32_t>(static_cast<int32_t>(d.position())), "x", perm);
    });
    return out;
  };
  PermutationPairs shift;  // i -> i + 1, written with negative indices (counted from the end) for half of them
  for (int64_t i = 0; i < n; ++i) {
    shift.push_back(i % 2 == 0 ? std::pair{i - n, (i + 1) % n} : std::pair{i, (i + 1) % n - n});
  }
  auto out = run(shift);
  for (int64_t p = 0; p < n; ++p) EXPECT_EQ(out[p].data<int32_t>()[0], (p + n - 1) % n) << p;

  PermutationPairs clash = shift;
  clash[35].second = 3 - n;  // index 3 counted from the end, the destination of pair 2
  try {
    run(clash);
    ADD_FAILURE() << "no error";
  } catch (const DeviceError& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kValueError);
    EXPECT_THAT(e.message(), HasSubstr("ppermute sources and destinations must be unique, got ((-40, 1), (1, -38), "));
    EXPECT_THAT(e.message(), HasSubstr("(35, -37), "));
  }
  PermutationPairs outside = shift;
  outside[35].second = 36 + n;  // unique modulo n, but no index of the group
  try {
    run(outside);
    ADD_FAILURE() << "no error";
  } catch (const DeviceError& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kIndexError);
  }
  PermutationPairs too_many = shift;
  too_many.push_back({0, 0});
  EXPECT_THROW(run(too_many), DeviceError);
}

TEST(CollectiveErrors, PpermuteOverAxesOutOfMeshOrderIsJaxsRuntimeError) {
  DeviceError e =
      ExpectDeviceError([](DeviceContext& d) { d.Ppermute(Array::Scalar<float>(1), {"y", "x"}, {{0, 1}}); });
  EXPECT_EQ(e.kind(), ErrorKind::kRuntimeError);
  EXPECT_THAT(e.message(), HasSubstr("Make sure that the axis_name passed to jax.lax.ppermute is in the same order"));
}

// JAX compares the group's devices with their sorted order, not the axis names: an axis of size 1 may stand
// anywhere in the tuple.
TEST(Collectives, PpermuteOverAxesOutOfMeshOrderIsValidWhenTheGroupIsInMeshOrder) {
  Runtime runtime(Mesh::Iota({2, 1, 2}, {"x", "one", "y"}));
  std::vector<Array> first(4), last(4);
  runtime.Run([&](DeviceContext& d) {
    const Array x = Array::Scalar<int32_t>(static_cast<int32_t>(d.position()));
    first[d.position()] = d.Ppermute(x, {"one", "x", "y"}, {{0, 1}, {1, 2}, {2, 3}, {3, 0}});
    last[d.position()] = d.Ppermute(x, {"x", "y", "one"}, {{0, 1}, {1, 2}, {2, 3}, {3, 0}});
  });
  for (int64_t p = 0; p < 4; ++p) {
    EXPECT_EQ(first[p].data<int32_t>()[0], (p + 3) % 4) << p;
    EXPECT_EQ(last[p].data<int32_t>()[0], (p + 3) % 4) << p;
  }
  try {
    runtime.Run([&](DeviceContext& d) { d.Ppermute(Array::Scalar<float>(1), {"y", "one", "x"}, {{0, 1}}); });
    ADD_FAILURE() << "no error";
  } catch (const DeviceError& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kRuntimeError);
  }
}

TEST(CollectiveErrors, UsingAnotherDevicesContextIsAnError) {
  Runtime runtime(Mesh::Iota({2}, {"x"}), {});
  DeviceContext* first = nullptr;
  std::atomic<bool> ready{false};
  try {
    runtime.Run([&](DeviceContext& d) {
      if (d.position() == 0) {
        first = &d;
        ready = true;
      }
      d.Barrier();
      if (d.position() == 1) first->Barrier();
      d.Barrier();
    });
    FAIL() << "no error";
  } catch (const DeviceError& e) {
    EXPECT_EQ(e.position(), 1);
    EXPECT_THAT(e.message(), HasSubstr("barrier called on the DeviceContext of position 0 outside that device's"));
  }
}

// --- Memory and sharing -------------------------------------------------------------------------------------

TEST(Collectives, APsumResultIsOneBufferPerGroupChargedToEveryDevice) {
  RuntimeOptions options;
  options.num_threads = 2;
  Runtime runtime(Mesh::Iota({4, 2}, {"x", "y"}), options);
  std::vector<Array> out(8);
  runtime.Run([&](DeviceContext& d) { out[d.position()] = d.Psum(Array::Zeros({1000}, DType::kF32), "x"); });
  EXPECT_TRUE(out[0].SharesBufferWith(out[2]));   // group [0,2,4,6]
  EXPECT_FALSE(out[0].SharesBufferWith(out[1]));  // group [1,3,5,7]
  for (int p = 0; p < 8; ++p) {
    EXPECT_EQ(out[p].charged_position(), p);
    EXPECT_EQ(runtime.memory_stats(p).in_use_bytes, 4000);
    EXPECT_EQ(runtime.memory_stats(p).peak_bytes, 8000);  // input and output at once
  }
}

TEST(Collectives, PpermuteMovesNoBytesTheReceiverSharesTheSendersBuffer) {
  Runtime runtime(Mesh::Iota({4}, {"x"}), {});
  std::vector<Array> in(4), out(4);
  runtime.Run([&](DeviceContext& d) {
    in[d.position()] = Array::Full({16}, DType::kF32, static_cast<double>(d.position()));
    out[d.position()] = d.Ppermute(in[d.position()], "x", {{0, 1}, {1, 2}, {2, 3}});
  });
  EXPECT_TRUE(out[1].SharesBufferWith(in[0]));
  EXPECT_TRUE(out[3].SharesBufferWith(in[2]));
  EXPECT_THAT(out[0].ToDoubles(), ::testing::Each(0.0));  // nobody sends to 0: zeros
  EXPECT_THAT(out[2].ToDoubles(), ::testing::Each(1.0));
  EXPECT_EQ(runtime.memory_stats(1).in_use_bytes, 2 * 64);
}

TEST(Collectives, AbstractArraysGetShapesAndChargesButNoElements) {
  RuntimeOptions options;
  options.device_memory_bytes = kGiB;
  Runtime runtime(Mesh::Iota({4, 2}, {"x", "y"}), options);
  std::vector<Array> gathered(8), scattered(8), summed(8);
  runtime.Run([&](DeviceContext& d) {
    Array x = Array::Abstract({64, 1024, 1024}, DType::kBF16);  // 128 MiB, never allocated
    summed[d.position()] = d.Psum(x, "y");
    gathered[d.position()] = d.AllGather(x, "x", 0, true);
    scattered[d.position()] = d.PsumScatter(x, {"x", "y"}, 0, true);
  });
  EXPECT_TRUE(summed[0].is_abstract());
  EXPECT_EQ(summed[0].ShapeString(), "bfloat16[64,1024,1024]");
  EXPECT_EQ(gathered[5].ShapeString(), "bfloat16[256,1024,1024]");
  EXPECT_EQ(scattered[5].ShapeString(), "bfloat16[8,1024,1024]");
  EXPECT_EQ(runtime.memory_stats(5).in_use_bytes, (128 + 512 + 16) * kMiB);
}

TEST(Collectives, AnOutputThatDoesNotFitIsResourceExhaustedOnTheLowestPositionForAnyWorkerCount) {
  // Every device is over capacity: each one's charge fails in the same step, and the device named is the lowest
  // position however the workers were scheduled (the runtime resumes every device of a step before aborting).
  for (int workers : {1, 2, 4}) {
    for (int attempt = 0; attempt < 10; ++attempt) {
      RuntimeOptions options;
      options.device_memory_bytes = 3 * kMiB;
      options.num_threads = workers;
      Runtime runtime(Mesh::Iota({4}, {"x"}), options);
      try {
        runtime.Run([&](DeviceContext& d) {
          Array x = Array::Abstract({256 * 1024}, DType::kF32);  // 1 MiB
          // The last block arrives late, so the other workers are asleep in their back-off when the barrier
          // completes and the last block's devices fail first.
          if (d.position() == 3 && attempt % 2 == 1) std::this_thread::sleep_for(std::chrono::milliseconds(3));
          d.AllGather(x, "x");                                   // 4 MiB more: over 3 MiB
        });
        FAIL() << "no error";
      } catch (const DeviceError& e) {
        ASSERT_EQ(e.position(), 0) << "workers " << workers << ", attempt " << attempt << ": " << e.what();
        EXPECT_EQ(e.code(), ErrorCode::kResourceExhausted);
        EXPECT_THAT(e.message(), HasSubstr("device 0 (position 0"));
        EXPECT_THAT(e.message(), HasSubstr("Out of memory while trying to allocate 4.00MiB"));
      }
    }
  }
}

TEST(Collectives, DevicesThatThrowInTheSameStepAreReportedByTheLowestPosition) {
  // Devices 1-7 throw right after the first barrier, device 3 before it; the error is device 3's (earliest step),
  // and in the next scenario every device throws in its first step: position 0 is named, for any worker count.
  for (int workers : {1, 2, 4}) {
    for (int attempt = 0; attempt < 10; ++attempt) {
      RuntimeOptions options;
      options.num_threads = workers;
      Runtime runtime(Mesh::Iota({8}, {"x"}), options);
      try {
        runtime.Run([&](DeviceContext& d) {
          if (d.position() == 7 && attempt % 2 == 1) std::this_thread::sleep_for(std::chrono::milliseconds(3));
          if (d.position() == 3) throw std::runtime_error("early");
          d.Barrier();
          if (d.position() >= 1) throw std::runtime_error("late");
        });
        FAIL() << "no error";
      } catch (const DeviceError& e) {
        ASSERT_EQ(e.position(), 3) << "workers " << workers << ": " << e.what();
        EXPECT_THAT(e.message(), HasSubstr("early"));
      }
      try {
        runtime.Run([](DeviceContext& d) { throw std::runtime_error(fmt::format("first step {}", d.position())); });
        FAIL() << "no error";
      } catch (const DeviceError& e) {
        ASSERT_EQ(e.position(), 0) << "workers " << workers << ": " << e.what();
      }
    }
  }
}

TEST(Collectives, ADeviceOutOfHostMemoryIsResourceExhausted) {
  // std::bad_alloc in a device (e.g. under an address-space limit) is named as such, not as a generic abort.
  Runtime runtime(Mesh::Iota({4}, {"x"}), RuntimeOptions{.num_threads = 2});
  try {
    runtime.Run([](DeviceContext& d) {
      d.Barrier();
      if (d.position() == 2) throw std::bad_alloc();
    });
    FAIL() << "no error";
  } catch (const DeviceError& e) {
    EXPECT_EQ(e.code(), ErrorCode::kResourceExhausted);
    EXPECT_EQ(e.position(), 2);
    EXPECT_THAT(e.message(), HasSubstr("the host ran out of memory (std::bad_alloc)"));
  }
}

TEST(CurrentDevice, IsTheRunningDevicesContextAndNullOnHostThreads) {
  EXPECT_EQ(CurrentDevice(), nullptr);
  Runtime runtime(Mesh::Iota({4}, {"x"}),
                  RuntimeOptions{.num_threads = 2, .collective_timeout = std::chrono::seconds(7)});
  std::vector<int> ok(4), host_thread_null(4);
  runtime.Run([&](DeviceContext& d) {
    ok[d.position()] = CurrentDevice() == &d;
    d.Barrier();
    ok[d.position()] &= CurrentDevice() == &d && CurrentDevice()->runtime_options().collective_timeout ==
                                                     std::chrono::seconds(7);
    std::thread([&] { host_thread_null[d.position()] = CurrentDevice() == nullptr; }).join();
  });
  EXPECT_EQ(ok, (std::vector<int>{1, 1, 1, 1}));
  EXPECT_EQ(host_thread_null, (std::vector<int>{1, 1, 1, 1}));
  EXPECT_EQ(CurrentDevice(), nullptr);
}

}  // namespace
}  // namespace spmdsim
