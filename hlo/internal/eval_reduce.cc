// Reduction kernels: reduce (variadic), reduce-window (variadic), select-and-scatter, map.
//
// reduce folds each output's elements in row-major order of the input, starting from the init value:
// acc = f(acc, x). reduce-window folds each window's positions in row-major order, skipping padding (as XLA's
// elemental emitter does; the init value is the reduction's identity in every program JAX emits).
#include <algorithm>
#include <cstring>

#include "common/shape.h"
#include "hlo/internal/element_ops.h"
#include "hlo/internal/kernels.h"
#include "hlo/internal/types.h"

namespace spmdsim::hlo::internal {
namespace {

void StoreBits(ValueBuilder& b, DType dtype, int64_t i, uint64_t bits) {
  const int64_t size = DTypeSize(dtype);
  std::memcpy(static_cast<char*>(b.raw()) + i * size, &bits, static_cast<size_t>(size));
}

// Walks the input in row-major order and tracks the offset of the output element each input element reduces
// into.
class OutputWalker {
 public:
  OutputWalker(const std::vector<int64_t>& in_dims, const std::vector<int64_t>& reduced)
      : dims_(in_dims), idx_(in_dims.size(), 0), stride_(in_dims.size(), 0) {
    std::vector<int64_t> out_dims, keep;
    for (size_t d = 0; d < in_dims.size(); ++d) {
      if (std::find(reduced.begin(), reduced.end(), static_cast<int64_t>(d)) == reduced.end()) {
        keep.push_back(static_cast<int64_t>(d));
        out_dims.push_back(in_dims[d]);
      }
    }
    const std::vector<int64_t> os = RowMajorStrides(out_dims);
    for (size_t k = 0; k < keep.size(); ++k) stride_[keep[k]] = os[k];
  }
  int64_t offset() const { return at_; }
  void Advance() {
    for (size_t d = dims_.size(); d-- > 0;) {
      at_ += stride_[d];
      if (++idx_[d] < dims_[d]) return;
      at_ -= stride_[d] * dims_[d];
      idx_[d] = 0;
    }
  }

 private:
  std::vector<int64_t> dims_, idx_, stride_;
  int64_t at_ = 0;
};

// One input, a reducer that is op(param 0, param 1): a typed loop.
Value ReduceSimple(const Instruction& ins, const Value& x, const Value& init, Opcode op) {
  ValueBuilder out(ins.shape().dtype, ins.shape().dims);
  VisitType(x.dtype(), [&](auto t) {
    using T = decltype(t);
    T* o = out.data<T>();
    const T* a = x.data<T>();
    std::fill(o, o + out.size(), init.data<T>()[0]);
    OutputWalker walk(x.dims(), ins.attrs().dimensions);
    DispatchBinary<T>(op, [&](auto f) {
      for (int64_t i = 0; i < x.size(); ++i, walk.Advance()) o[walk.offset()] = f(o[walk.offset()], a[i]);
    });
  });
  return std::move(out).Finish();
}

Value Reduce(const Instruction& ins, Operands v, KernelContext& context) {
  const int64_t n = static_cast<int64_t>(v.size()) / 2;
  ScalarFunction f(*ins.to_apply(), context);
  if (n == 1 && f.simple_binary().has_value()) return ReduceSimple(ins, *v[0], *v[1], *f.simple_binary());
  const std::vector<int64_t>& out_dims = ins.shape().IsTuple() ? ins.shape().tuple[0].dims : ins.shape().dims;
  int64_t out_size = 1;
  for (int64_t d : out_dims) out_size *= d;
  // Accumulators: n per output element.
  std::vector<uint64_t> acc(static_cast<size_t>(out_size * n)), params(static_cast<size_t>(2 * n)), result(n);
  for (int64_t o = 0; o < out_size; ++o) {
    for (int64_t k = 0; k < n; ++k) acc[o * n + k] = ElementBits(*v[n + k], 0);
  }
  OutputWalker walk(v[0]->dims(), ins.attrs().dimensions);
  for (int64_t i = 0; i < v[0]->size(); ++i, walk.Advance()) {
    const int64_t o = walk.offset();
    for (int64_t k = 0; k < n; ++k) {
      params[k] = acc[o * n + k];
      params[n + k] = ElementBits(*v[k], i);
    }
    f(params, result);
    for (int64_t k = 0; k < n; ++k) acc[o * n + k] = result[k];
  }
  std::vector<Value> outs;
  for (int64_t k = 0; k < n; ++k) {
    const DType t = v[n + k]->dtype();
    ValueBuilder b(t, out_dims);
    for (int64_t o = 0; o < out_size; ++o) StoreBits(b, t, o, acc[o * n + k]);
    outs.push_back(std::move(b).Finish());
  }
  return n == 1 ? outs[0] : Value::Tuple(std::move(outs));
}

// Calls visit(input_offset) for every position of output element `out_idx`'s window that falls on an input
// element (not on padding or between dilated elements), in row-major order of the window.
template <typename F>
void ForEachWindowElement(const std::vector<WindowDim>& w, const std::vector<int64_t>& in_dims,
                          const std::vector<int64_t>& in_strides, const std::vector<int64_t>& out_idx, F visit) {
  const size_t rank = w.size();
  std::vector<int64_t> k(rank, 0);
  int64_t total = 1;
  for (const WindowDim& d : w) total *= d.size;
  for (int64_t step = 0; step < total; ++step) {
    int64_t offset = 0;
    bool inside = true;
    for (size_t d = 0; d < rank && inside; ++d) {
      const int64_t pos = out_idx[d] * w[d].stride + k[d] * w[d].rhs_dilation - w[d].pad_low;
      if (pos < 0 || pos % w[d].lhs_dilation != 0 || pos / w[d].lhs_dilation >= in_dims[d]) inside = false;
      offset += (pos / std::max<int64_t>(w[d].lhs_dilation, 1)) * in_strides[d];
    }
    if (inside) visit(offset);
    for (size_t d = rank; d-- > 0;) {
      if (++k[d] < w[d].size) break;
      k[d] = 0;
    }
  }
}

// Advances a row-major index over `dims`; false after the last.
bool Next(std::vector<int64_t>& idx, const std::vector<int64_t>& dims) {
  for (size_t d = dims.size(); d-- > 0;) {
    if (++idx[d] < dims[d]) return true;
    idx[d] = 0;
  }
  return false;
}

Value ReduceWindow(const Instruction& ins, Operands v, KernelContext& context) {
  const int64_t n = static_cast<int64_t>(v.size()) / 2;
  const std::vector<int64_t>& out_dims = ins.shape().IsTuple() ? ins.shape().tuple[0].dims : ins.shape().dims;
  const std::vector<int64_t> in_strides = RowMajorStrides(v[0]->dims());
  ScalarFunction f(*ins.to_apply(), context);
  std::vector<ValueBuilder> outs;
  for (int64_t k = 0; k < n; ++k) outs.emplace_back(v[n + k]->dtype(), out_dims);
  std::vector<uint64_t> params(static_cast<size_t>(2 * n)), result(n);
  std::vector<int64_t> idx(out_dims.size(), 0);
  int64_t o = 0;
  if (outs[0].size() > 0) {
    do {
      for (int64_t k = 0; k < n; ++k) params[k] = ElementBits(*v[n + k], 0);
      ForEachWindowElement(ins.attrs().window, v[0]->dims(), in_strides, idx, [&](int64_t at) {
        for (int64_t k = 0; k < n; ++k) params[n + k] = ElementBits(*v[k], at);
        f(params, result);
        for (int64_t k = 0; k < n; ++k) params[k] = result[k];
      });
      for (int64_t k = 0; k < n; ++k) StoreBits(outs[k], v[n + k]->dtype(), o, params[k]);
      ++o;
    } while (Next(idx, out_dims));
  }
  std::vector<Value> values;
  for (auto& b : outs) values.push_back(std::move(b).Finish());
  return n == 1 ? values[0] : Value::Tuple(std::move(values));
}

Value SelectAndScatter(const Instruction& ins, Operands v, KernelContext& context) {
  const Value& x = *v[0];
  const Value& source = *v[1];
  const DType t = x.dtype();
  ScalarFunction select(*ins.select(), context);
  ScalarFunction scatter(*ins.to_apply(), context);
  std::vector<uint64_t> out(static_cast<size_t>(x.size()), ElementBits(*v[2], 0));
  const std::vector<int64_t> in_strides = RowMajorStrides(x.dims());
  std::vector<int64_t> idx(source.dims().size(), 0);
  std::vector<uint64_t> p(2), r(1);
  int64_t s = 0;
  if (source.size() > 0) {
    do {
      int64_t chosen = -1;
      ForEachWindowElement(ins.attrs().window, x.dims(), in_strides, idx, [&](int64_t at) {
        if (chosen < 0) {
          chosen = at;
          return;
        }
        p[0] = ElementBits(x, chosen);
        p[1] = ElementBits(x, at);
        select(p, r);
        if ((r[0] & 1) == 0) chosen = at;
      });
      if (chosen >= 0) {
        p[0] = out[chosen];
        p[1] = ElementBits(source, s);
        scatter(p, r);
        out[chosen] = r[0];
      }
      ++s;
    } while (Next(idx, source.dims()));
  }
  ValueBuilder b(t, x.dims());
  for (int64_t i = 0; i < x.size(); ++i) StoreBits(b, t, i, out[i]);
  return std::move(b).Finish();
}

Value Map(const Instruction& ins, Operands v, KernelContext& context) {
  ScalarFunction f(*ins.to_apply(), context);
  const DType t = ins.shape().dtype;
  ValueBuilder b(t, ins.shape().dims);
  std::vector<uint64_t> params(v.size()), r(1);
  for (int64_t i = 0; i < b.size(); ++i) {
    for (size_t k = 0; k < v.size(); ++k) params[k] = ElementBits(*v[k], i);
    f(params, r);
    StoreBits(b, t, i, r[0]);
  }
  return std::move(b).Finish();
}

}  // namespace

Value EvalReduce(const Instruction& ins, Operands v, KernelContext& context) {
  switch (ins.opcode()) {
    case Opcode::kReduce: return Reduce(ins, v, context);
    case Opcode::kReduceWindow: return ReduceWindow(ins, v, context);
    case Opcode::kSelectAndScatter: return SelectAndScatter(ins, v, context);
    case Opcode::kMap: return Map(ins, v, context);
    default: return Value();
  }
}

}  // namespace spmdsim::hlo::internal
