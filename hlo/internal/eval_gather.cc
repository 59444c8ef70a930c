// Indexing kernels: gather and scatter with XLA's dimension numbers (batching dimensions included).
//
// gather clamps each start index so that the slice fits in the operand. scatter visits the scatter indices in
// row-major order and, for each, its update window in row-major order (XLA's scatter expander's loop); a window
// that does not fit in the operand at its start index is skipped whole.
#include <algorithm>
#include <cstring>

#include "common/shape.h"
#include "hlo/internal/kernels.h"
#include "hlo/internal/types.h"

namespace spmdsim::hlo::internal {
namespace {

bool Contains(const std::vector<int64_t>& v, int64_t x) { return std::find(v.begin(), v.end(), x) != v.end(); }

bool Next(std::vector<int64_t>& idx, const std::vector<int64_t>& dims) {
  for (size_t d = dims.size(); d-- > 0;) {
    if (++idx[d] < dims[d]) return true;
    idx[d] = 0;
  }
  return false;
}

// Reads the index vector at batch position `batch` (the indices' dimensions without index_vector_dim) into
// `start` (operand coordinates, dimensions not indexed left 0), plus the batching dimensions.
void StartIndex(const Value& indices, int64_t ivd, const std::vector<int64_t>& batch,
                const std::vector<int64_t>& index_map, const std::vector<int64_t>& operand_batching,
                const std::vector<int64_t>& indices_batching, std::vector<int64_t>* start) {
  std::fill(start->begin(), start->end(), 0);
  const std::vector<int64_t> is = RowMajorStrides(indices.dims());
  int64_t base = 0;
  for (size_t d = 0, b = 0; d < indices.dims().size(); ++d) {
    if (static_cast<int64_t>(d) == ivd) continue;
    base += batch[b++] * is[d];
  }
  VisitType(indices.dtype(), [&](auto t) {
    using T = decltype(t);
    const T* idx = indices.data<T>();
    const int64_t step = ivd < indices.rank() ? is[ivd] : 0;
    for (size_t k = 0; k < index_map.size(); ++k) {
      if constexpr (kIsFloat<T>) {
        (*start)[index_map[k]] = static_cast<int64_t>(static_cast<double>(Widen(idx[base + k * step])));
      } else {
        (*start)[index_map[k]] = static_cast<int64_t>(idx[base + k * step]);
      }
    }
  });
  for (size_t i = 0; i < operand_batching.size(); ++i) {
    const int64_t d = indices_batching[i];
    (*start)[operand_batching[i]] = batch[d - (ivd < d ? 1 : 0)];
  }
}

Value Gather(const Instruction& ins, const Value& x, const Value& indices) {
  const GatherDims& g = ins.attrs().gather;
  const Shape& s = ins.shape();
  ValueBuilder out(s.dtype, s.dims);
  const int64_t size = DTypeSize(x.dtype());
  const std::vector<int64_t> xs = RowMajorStrides(x.dims());
  std::vector<int64_t> collapsed = g.collapsed_slice_dims;
  collapsed.insert(collapsed.end(), g.operand_batching_dims.begin(), g.operand_batching_dims.end());
  std::vector<int64_t> window_dims;  // operand dimensions the offset dimensions walk, in order
  for (int d = 0; d < x.rank(); ++d) {
    if (!Contains(collapsed, d)) window_dims.push_back(d);
  }
  std::vector<int64_t> idx(s.dims.size(), 0), batch, start(x.dims().size());
  const char* src = static_cast<const char*>(x.raw());
  char* dst = static_cast<char*>(out.raw());
  int64_t o = 0;
  if (out.size() == 0) return std::move(out).Finish();
  do {
    batch.clear();
    for (size_t d = 0; d < s.dims.size(); ++d) {
      if (!Contains(g.offset_dims, static_cast<int64_t>(d))) batch.push_back(idx[d]);
    }
    StartIndex(indices, g.index_vector_dim, batch, g.start_index_map, g.operand_batching_dims,
               g.start_indices_batching_dims, &start);
    int64_t at = 0;
    for (int d = 0; d < x.rank(); ++d) at += std::clamp<int64_t>(start[d], 0, x.dims()[d] - g.slice_sizes[d]) * xs[d];
    for (size_t j = 0; j < g.offset_dims.size(); ++j) at += idx[g.offset_dims[j]] * xs[window_dims[j]];
    std::memcpy(dst + o * size, src + at * size, static_cast<size_t>(size));
    ++o;
  } while (Next(idx, s.dims));
  return std::move(out).Finish();
}

// The scatter's geometry: update dimensions split into scatter (batch) and window dimensions.
struct ScatterGeometry {
  std::vector<int64_t> scatter_dims, batch_sizes, window_sizes, window_to_operand;
  std::vector<int64_t> window_extent;  // per operand dimension: the window's size (1 where inserted)
};

ScatterGeometry Geometry(const ScatterDims& s, const Value& x, const Value& upd) {
  ScatterGeometry geo;
  std::vector<int64_t> inserted = s.inserted_window_dims;
  inserted.insert(inserted.end(), s.input_batching_dims.begin(), s.input_batching_dims.end());
  for (int d = 0; d < upd.rank(); ++d) {
    if (Contains(s.update_window_dims, d)) {
      geo.window_sizes.push_back(upd.dims()[d]);
    } else {
      geo.scatter_dims.push_back(d);
      geo.batch_sizes.push_back(upd.dims()[d]);
    }
  }
  geo.window_extent.assign(x.dims().size(), 1);
  for (int d = 0, w = 0; d < x.rank(); ++d) {
    if (Contains(inserted, d)) continue;
    geo.window_to_operand.push_back(d);
    geo.window_extent[d] = geo.window_sizes[w++];
  }
  return geo;
}

Value Scatter(const Instruction& ins, Operands v, KernelContext& context) {
  const int64_t n = (static_cast<int64_t>(v.size()) - 1) / 2;
  const Value& indices = *v[n];
  const ScatterDims& s = ins.attrs().scatter;
  const Value& x = *v[0];
  const ScatterGeometry geo = Geometry(s, x, *v[n + 1]);
  std::vector<ValueBuilder> outs;
  for (int64_t k = 0; k < n; ++k) {
    outs.emplace_back(v[k]->dtype(), v[k]->dims());
    std::memcpy(outs[k].raw(), v[k]->raw(), static_cast<size_t>(v[k]->nbytes()));
  }
  ScalarFunction f(*ins.to_apply(), context);
  const std::vector<int64_t> xs = RowMajorStrides(x.dims()), us = RowMajorStrides(v[n + 1]->dims());
  std::vector<int64_t> batch(geo.batch_sizes.size(), 0), start(x.dims().size());
  std::vector<uint64_t> params(static_cast<size_t>(2 * n)), result(n);
  const bool any_update = NumElements(v[n + 1]->dims()) > 0;
  do {
    if (!any_update) break;
    StartIndex(indices, s.index_vector_dim, batch, s.scatter_dims_to_operand_dims, s.input_batching_dims,
               s.scatter_indices_batching_dims, &start);
    bool fits = true;
    int64_t base = 0, ubase = 0;
    for (int d = 0; d < x.rank(); ++d) {
      fits = fits && start[d] >= 0 && start[d] <= x.dims()[d] - geo.window_extent[d];
      base += start[d] * xs[d];
    }
    for (size_t b = 0; b < batch.size(); ++b) ubase += batch[b] * us[geo.scatter_dims[b]];
    if (fits) {
      std::vector<int64_t> w(geo.window_sizes.size(), 0);
      do {
        int64_t at = base, uat = ubase;
        for (size_t j = 0; j < w.size(); ++j) {
          at += w[j] * xs[geo.window_to_operand[j]];
          uat += w[j] * us[s.update_window_dims[j]];
        }
        for (int64_t k = 0; k < n; ++k) {
          const int64_t size = DTypeSize(v[k]->dtype());
          params[k] = params[n + k] = 0;
          std::memcpy(&params[k], static_cast<char*>(outs[k].raw()) + at * size, static_cast<size_t>(size));
          std::memcpy(&params[n + k], static_cast<const char*>(v[n + 1 + k]->raw()) + uat * size,
                      static_cast<size_t>(size));
        }
        f(params, result);
        for (int64_t k = 0; k < n; ++k) {
          const int64_t size = DTypeSize(v[k]->dtype());
          std::memcpy(static_cast<char*>(outs[k].raw()) + at * size, &result[k], static_cast<size_t>(size));
        }
      } while (Next(w, geo.window_sizes));
    }
  } while (Next(batch, geo.batch_sizes));
  std::vector<Value> values;
  for (auto& b : outs) values.push_back(std::move(b).Finish());
  return n == 1 ? values[0] : Value::Tuple(std::move(values));
}

}  // namespace

Value EvalGather(const Instruction& ins, Operands v, KernelContext& context) {
  if (ins.opcode() == Opcode::kGather) return Gather(ins, *v[0], *v[1]);
  if (ins.opcode() == Opcode::kScatter) return Scatter(ins, v, context);
  return Value();
}

}  // namespace spmdsim::hlo::internal
