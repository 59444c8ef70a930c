#include "hlo/value.h"

#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "common/error.h"

namespace spmdsim::hlo {

DType CarrierDType(DType dtype) {
  if (IsArrayDType(dtype)) return dtype;
  switch (DTypeSize(dtype)) {
    case 1: return DType::kBool;
    case 2: return DType::kF16;
    case 4: return DType::kI32;
    case 8: return DType::kI64;
    default: break;
  }
  Throw(ErrorCode::kUnimplemented, "arrays of {} are not supported", HloTypeName(dtype));
}

Value Value::FromArray(DType dtype, Array storage) {
  SPMDSIM_CHECK(storage.dtype() == CarrierDType(dtype), "{} stored as {}", HloTypeName(dtype),
                DTypeName(storage.dtype()));
  Value v;
  v.kind_ = Kind::kArray;
  v.dtype_ = dtype;
  v.storage_ = std::move(storage);
  return v;
}

Value Value::Tuple(std::vector<Value> elements) {
  Value v;
  v.kind_ = Kind::kTuple;
  v.elements_ = std::make_shared<const std::vector<Value>>(std::move(elements));
  return v;
}

Value Value::Token() {
  Value v;
  v.kind_ = Kind::kToken;
  return v;
}

Shape Value::shape() const {
  if (kind_ == Kind::kToken) return Shape::Token();
  if (kind_ == Kind::kTuple) {
    std::vector<Shape> parts;
    for (const Value& e : *elements_) parts.push_back(e.shape());
    return Shape::Tuple(std::move(parts));
  }
  return Shape::Array(dtype_, dims());
}

std::string Value::ShapeString() const { return shape().ToString(); }

ValueBuilder::ValueBuilder(DType dtype, std::vector<int64_t> dims, bool zeroed)
    : dtype_(dtype), builder_(CarrierDType(dtype), std::move(dims), ArrayBuilder::Options{.zeroed = zeroed}) {
  data_ = builder_.mutable_data();
  size_ = builder_.size();
}

Value ValueBuilder::Finish() && {
  data_ = nullptr;
  return Value::FromArray(dtype_, std::move(builder_).Freeze());
}

}  // namespace spmdsim::hlo
