// Helpers shared by the interpreter's kernels (hlo/internal/kernels.h).
#include "hlo/internal/kernels.h"

#include <cstring>

#include "hlo/internal/element_ops.h"
#include "hlo/internal/types.h"

namespace spmdsim::hlo::internal {

Value NewArray(DType dtype, const std::vector<int64_t>& dims, bool zeroed) {
  return ValueBuilder(dtype, dims, zeroed).Finish();
}

Value NewArray(const Shape& shape, bool zeroed) { return NewArray(shape.dtype, shape.dims, zeroed); }

int64_t ScalarAsInt64(const Value& value) {
  return VisitType(value.dtype(), [&](auto t) -> int64_t {
    using T = decltype(t);
    if constexpr (kIsFloat<T>) {
      return static_cast<int64_t>(static_cast<double>(Widen(value.data<T>()[0])));
    } else {
      return static_cast<int64_t>(value.data<T>()[0]);
    }
  });
}

std::vector<double> ToDoubles(const Value& x) {
  std::vector<double> out(static_cast<size_t>(x.size()));
  VisitType(x.dtype(), [&](auto t) {
    using T = decltype(t);
    const T* d = x.data<T>();
    for (int64_t i = 0; i < x.size(); ++i) out[i] = static_cast<double>(Widen(d[i]));
  });
  return out;
}

ScalarFunction::ScalarFunction(const Computation& c, KernelContext& context)
    : c_(c), context_(context), program_(context.ScalarProgramOf(c)) {
  if (program_ != nullptr) {
    registers_.resize(static_cast<size_t>(program_->num_registers()));
    num_results_ = program_->num_results();
  } else if (c.root()->shape().IsTuple()) {
    num_results_ = static_cast<int64_t>(c.root()->shape().tuple.size());
  }
}

std::optional<Opcode> ScalarFunction::simple_binary() const {
  return program_ != nullptr ? program_->simple_binary() : std::nullopt;
}

void ScalarFunction::operator()(std::span<const uint64_t> params, std::span<uint64_t> results) {
  if (program_ != nullptr) {
    program_->Run(params, registers_, results);
    return;
  }
  std::vector<Value> args;
  for (int64_t i = 0; i < c_.parameter_count(); ++i) {
    const DType t = c_.parameter(i)->shape().dtype;
    ValueBuilder b(t, {});
    std::memcpy(b.raw(), &params[i], static_cast<size_t>(DTypeSize(t)));
    args.push_back(std::move(b).Finish());
  }
  Value out = context_.Call(c_, args);
  if (out.is_tuple()) {
    for (size_t i = 0; i < out.elements().size(); ++i) results[i] = ElementBits(out.element(i), 0);
  } else {
    results[0] = ElementBits(out, 0);
  }
}

}  // namespace spmdsim::hlo::internal

namespace spmdsim::hlo {

Value ValueFromDoubles(DType dtype, const std::vector<int64_t>& dims, std::span<const double> values) {
  ValueBuilder b(dtype, dims);
  SPMDSIM_CHECK(static_cast<int64_t>(values.size()) == b.size(), "{} values for {} elements", values.size(), b.size());
  internal::VisitType(dtype, [&](auto t) {
    using T = decltype(t);
    T* o = b.data<T>();
    for (size_t i = 0; i < values.size(); ++i) o[i] = internal::Convert<T, double>(values[i]);
  });
  return std::move(b).Finish();
}

std::vector<double> ValueToDoubles(const Value& value) { return internal::ToDoubles(value); }

}  // namespace spmdsim::hlo
