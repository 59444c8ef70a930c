// Sorting kernels: sort (variadic, stable, with its comparator) and top-k (the topk opcode and XLA CPU's TopK
// custom call: values in descending total order, -0 below +0, ties to the lower index, as XLA's runtime does).
#include <algorithm>
#include <cstring>
#include <numeric>

#include "common/shape.h"
#include "hlo/internal/element_ops.h"
#include "hlo/internal/kernels.h"
#include "hlo/internal/types.h"

namespace spmdsim::hlo::internal {
namespace {

Value Sort(const Instruction& ins, Operands v, KernelContext& context) {
  const int64_t n = static_cast<int64_t>(v.size());
  const std::vector<int64_t>& dims = v[0]->dims();
  const int64_t d = ins.attrs().dimensions[0];
  const std::vector<int64_t> strides = RowMajorStrides(dims);
  const int64_t len = dims[d], step = strides[d];
  std::vector<ValueBuilder> outs;
  for (int64_t k = 0; k < n; ++k) outs.emplace_back(v[k]->dtype(), dims);
  ScalarFunction less(*ins.to_apply(), context);
  std::vector<uint64_t> params(static_cast<size_t>(2 * n)), result(1);
  std::vector<int64_t> order(static_cast<size_t>(len));
  const int64_t total = v[0]->size();
  for (int64_t base = 0; base < total; ++base) {
    if ((base / step) % len != 0) continue;  // not the first element of a slice along d
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
      for (int64_t k = 0; k < n; ++k) {
        params[2 * k] = ElementBits(*v[k], base + a * step);
        params[2 * k + 1] = ElementBits(*v[k], base + b * step);
      }
      less(params, result);
      return (result[0] & 1) != 0;
    });
    for (int64_t k = 0; k < n; ++k) {
      const int64_t size = DTypeSize(v[k]->dtype());
      const char* src = static_cast<const char*>(v[k]->raw());
      char* dst = static_cast<char*>(outs[k].raw());
      for (int64_t i = 0; i < len; ++i) {
        std::memcpy(dst + (base + i * step) * size, src + (base + order[i] * step) * size, static_cast<size_t>(size));
      }
    }
  }
  std::vector<Value> values;
  for (auto& b : outs) values.push_back(std::move(b).Finish());
  return n == 1 ? values[0] : Value::Tuple(std::move(values));
}

Value TopK(const Instruction& ins, const Value& x) {
  const Shape& vs = ins.shape().tuple[0];
  const int64_t k = vs.dims.back(), len = x.dims().back();
  const int64_t batches = len == 0 ? 0 : x.size() / len;
  ValueBuilder values(vs.dtype, vs.dims);
  ValueBuilder indices(DType::kI32, vs.dims);
  std::vector<int32_t> order(static_cast<size_t>(len));
  VisitType(x.dtype(), [&](auto t) {
    using T = decltype(t);
    const T* src = x.data<T>();
    T* ov = values.data<T>();
    int32_t* oi = indices.data<int32_t>();
    for (int64_t b = 0; b < batches; ++b) {
      const T* row = src + b * len;
      std::iota(order.begin(), order.end(), 0);
      std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int32_t i, int32_t j) {
        if constexpr (kIsFloat<T>) {
          const auto a = TotalOrderKey(row[i]), c = TotalOrderKey(row[j]);
          return a == c ? i < j : a > c;
        } else {
          return row[i] == row[j] ? i < j : row[i] > row[j];
        }
      });
      for (int64_t i = 0; i < k; ++i) {
        ov[b * k + i] = row[order[i]];
        oi[b * k + i] = order[i];
      }
    }
  });
  return Value::Tuple({std::move(values).Finish(), std::move(indices).Finish()});
}

}  // namespace

Value EvalSort(const Instruction& ins, Operands v, KernelContext& context) {
  if (ins.opcode() == Opcode::kSort) return Sort(ins, v, context);
  if (ins.opcode() == Opcode::kTopK) return TopK(ins, *v[0]);
  if (ins.opcode() == Opcode::kCustomCall && ins.attrs().custom_call_target == "TopK") return TopK(ins, *v[0]);
  return Value();
}

}  // namespace spmdsim::hlo::internal
