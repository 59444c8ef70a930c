// Contraction kernels: dot (general dimension numbers) and convolution (dim_labels, windows, dilations,
// feature and batch groups).
//
// Floating-point contractions accumulate in float (double when an operand or the result is f64) and round to
// the result type once, as XLA's CPU backend does for 16-bit types (it upcasts them); the order of the sums is
// Eigen's GEMM for dot (XLA CPU's library too, blocked differently) and the window order for convolution, so
// results agree with XLA to the rounding of a sum of k products, not bitwise. Integer contractions are exact
// (wrapping in the result type).
#include <Eigen/Core>
#include <algorithm>
#include <cstring>
#include <numeric>

#include "common/shape.h"
#include "hlo/internal/element_ops.h"
#include "hlo/internal/kernels.h"
#include "hlo/internal/types.h"

namespace spmdsim::hlo::internal {
namespace {

// Every element of `v` as C (float, double or int64), permuted so that the dimensions in `order` come first in
// that order (row-major in the new order).
template <typename C>
std::vector<C> Gathered(const Value& v, const std::vector<int64_t>& order) {
  std::vector<int64_t> dims, strides;
  const std::vector<int64_t> vs = RowMajorStrides(v.dims());
  for (int64_t d : order) {
    dims.push_back(v.dims()[d]);
    strides.push_back(vs[d]);
  }
  std::vector<C> out(static_cast<size_t>(v.size()));
  VisitType(v.dtype(), [&](auto t) {
    using T = decltype(t);
    const T* src = v.data<T>();
    std::vector<int64_t> idx(dims.size(), 0);
    int64_t at = 0;
    for (int64_t i = 0; i < v.size(); ++i) {
      if constexpr (kIsFloat<C>) {
        out[i] = static_cast<C>(Widen(src[at]));
      } else {
        out[i] = Convert<C, T>(src[at]);
      }
      for (size_t d = dims.size(); d-- > 0;) {
        at += strides[d];
        if (++idx[d] < dims[d]) break;
        at -= strides[d] * dims[d];
        idx[d] = 0;
      }
    }
  });
  return out;
}

template <typename C>
Value Store(const Shape& shape, const std::vector<C>& values) {
  ValueBuilder out(shape.dtype, shape.dims);
  VisitType(shape.dtype, [&](auto t) {
    using T = decltype(t);
    T* o = out.data<T>();
    for (size_t i = 0; i < values.size(); ++i) o[i] = Convert<T, C>(values[i]);
  });
  return std::move(out).Finish();
}

std::vector<int64_t> FreeDims(int rank, const std::vector<int64_t>& batch, const std::vector<int64_t>& contracting) {
  std::vector<int64_t> free;
  for (int64_t d = 0; d < rank; ++d) {
    if (std::find(batch.begin(), batch.end(), d) == batch.end() &&
        std::find(contracting.begin(), contracting.end(), d) == contracting.end()) {
      free.push_back(d);
    }
  }
  return free;
}

int64_t Product(const Value& v, const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= v.dims()[d];
  return n;
}

template <typename C>
Value DotAs(const Instruction& ins, const Value& l, const Value& r) {
  const DotDims& d = ins.attrs().dot;
  const std::vector<int64_t> lf = FreeDims(l.rank(), d.lhs_batch, d.lhs_contracting);
  const std::vector<int64_t> rf = FreeDims(r.rank(), d.rhs_batch, d.rhs_contracting);
  std::vector<int64_t> lo = d.lhs_batch, ro = d.rhs_batch;
  lo.insert(lo.end(), lf.begin(), lf.end());
  lo.insert(lo.end(), d.lhs_contracting.begin(), d.lhs_contracting.end());
  ro.insert(ro.end(), d.rhs_contracting.begin(), d.rhs_contracting.end());
  ro.insert(ro.end(), rf.begin(), rf.end());
  const std::vector<C> a = Gathered<C>(l, lo), b = Gathered<C>(r, ro);
  const int64_t batch = Product(l, d.lhs_batch), m = Product(l, lf), k = Product(l, d.lhs_contracting);
  const int64_t n = Product(r, rf);
  std::vector<C> out(static_cast<size_t>(batch * m * n), C(0));
  using RowMajor = Eigen::Matrix<C, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  for (int64_t i = 0; i < batch && m * n > 0; ++i) {
    Eigen::Map<const RowMajor> am(a.data() + i * m * k, m, k);
    Eigen::Map<const RowMajor> bm(b.data() + i * k * n, k, n);
    Eigen::Map<RowMajor> om(out.data() + i * m * n, m, n);
    if (k > 0) om.noalias() = am * bm;
  }
  return Store(ins.shape(), out);
}

bool AnyF64(const Instruction& ins) {
  for (const Instruction* o : ins.operands()) {
    if (o->shape().dtype == DType::kF64) return true;
  }
  return ins.shape().dtype == DType::kF64;
}

bool AllIntegral(const Instruction& ins) {
  for (const Instruction* o : ins.operands()) {
    if (IsFloating(o->shape().dtype)) return false;
  }
  return !IsFloating(ins.shape().dtype);
}

// The per-dimension strides and sizes of a convolution's operands, resolved from dim_labels.
struct ConvGeometry {
  std::vector<int64_t> xs, ks, os;  // row-major strides of input, kernel, output
  int64_t groups_in = 1;            // kernel input features (per feature group)
  int64_t out_per_fgroup = 1, out_per_bgroup = 1, batch_per_bgroup = 1;
};

template <typename C>
C ConvOutputElement(const Instruction& ins, const ConvGeometry& g, const std::vector<C>& x, const std::vector<C>& k,
                    const std::vector<int64_t>& x_dims, const std::vector<int64_t>& k_dims,
                    const std::vector<int64_t>& out_idx) {
  const ConvDims& c = ins.attrs().conv;
  const auto& w = ins.attrs().window;
  const int64_t f = out_idx[c.output_feature];
  const int64_t fg = f / g.out_per_fgroup, bg = f / g.out_per_bgroup;
  const int64_t b = bg * g.batch_per_bgroup + out_idx[c.output_batch];
  const size_t spatial = c.input_spatial.size();
  std::vector<int64_t> kpos(spatial, 0);
  C acc = C(0);
  while (true) {
    int64_t x_at = b * g.xs[c.input_batch], k_at = f * g.ks[c.kernel_output_feature];
    bool inside = true;
    for (size_t s = 0; s < spatial && inside; ++s) {
      const int64_t pos = out_idx[c.output_spatial[s]] * w[s].stride + kpos[s] * w[s].rhs_dilation - w[s].pad_low;
      if (pos < 0 || pos % w[s].lhs_dilation != 0 || pos / w[s].lhs_dilation >= x_dims[c.input_spatial[s]]) {
        inside = false;
      }
      x_at += (pos / w[s].lhs_dilation) * g.xs[c.input_spatial[s]];
      const int64_t kk = w[s].reversal ? k_dims[c.kernel_spatial[s]] - 1 - kpos[s] : kpos[s];
      k_at += kk * g.ks[c.kernel_spatial[s]];
    }
    if (inside) {
      for (int64_t i = 0; i < g.groups_in; ++i) {
        acc += x[x_at + (fg * g.groups_in + i) * g.xs[c.input_feature]] * k[k_at + i * g.ks[c.kernel_input_feature]];
      }
    }
    size_t s = spatial;
    while (s-- > 0) {
      if (++kpos[s] < k_dims[c.kernel_spatial[s]]) break;
      kpos[s] = 0;
    }
    if (s == static_cast<size_t>(-1)) break;
  }
  return acc;
}

template <typename C>
Value ConvolutionAs(const Instruction& ins, const Value& xv, const Value& kv) {
  const ConvDims& c = ins.attrs().conv;
  std::vector<int64_t> all(static_cast<size_t>(xv.rank()));
  std::iota(all.begin(), all.end(), 0);
  const std::vector<C> x = Gathered<C>(xv, all), k = Gathered<C>(kv, all);
  const std::vector<int64_t>& out_dims = ins.shape().dims;
  ConvGeometry g{RowMajorStrides(xv.dims()), RowMajorStrides(kv.dims()), RowMajorStrides(out_dims)};
  g.groups_in = kv.dims()[c.kernel_input_feature];
  const int64_t kout = kv.dims()[c.kernel_output_feature];
  g.out_per_fgroup = kout / ins.attrs().feature_group_count;
  g.out_per_bgroup = kout / ins.attrs().batch_group_count;
  g.batch_per_bgroup = xv.dims()[c.input_batch] / ins.attrs().batch_group_count;
  std::vector<C> out(static_cast<size_t>(NumElements(out_dims)));
  std::vector<int64_t> idx(out_dims.size(), 0);
  for (size_t i = 0; i < out.size(); ++i) {
    out[i] = ConvOutputElement<C>(ins, g, x, k, xv.dims(), kv.dims(), idx);
    for (size_t d = out_dims.size(); d-- > 0;) {
      if (++idx[d] < out_dims[d]) break;
      idx[d] = 0;
    }
  }
  return Store(ins.shape(), out);
}

}  // namespace

Value EvalDot(const Instruction& ins, Operands v) {
  if (ins.opcode() == Opcode::kDot) {
    if (AllIntegral(ins)) return DotAs<uint64_t>(ins, *v[0], *v[1]);
    return AnyF64(ins) ? DotAs<double>(ins, *v[0], *v[1]) : DotAs<float>(ins, *v[0], *v[1]);
  }
  if (ins.opcode() == Opcode::kConvolution) {
    if (AllIntegral(ins)) return ConvolutionAs<uint64_t>(ins, *v[0], *v[1]);
    return AnyF64(ins) ? ConvolutionAs<double>(ins, *v[0], *v[1]) : ConvolutionAs<float>(ins, *v[0], *v[1]);
  }
  return Value();
}

}  // namespace spmdsim::hlo::internal
