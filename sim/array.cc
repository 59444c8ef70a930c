#include "sim/array.h"

#include <Eigen/Core>
#include <algorithm>
#include <bit>
#include <cstdlib>
#include <cstring>
#include <new>
#include <vector>

#include <unistd.h>

#include <fmt/format.h>

#include "common/host_memory.h"
#include "common/strings.h"
#include "sim/internal/buffer.h"

namespace spmdsim {

float ToFloat(bfloat16 value) {
  return static_cast<float>(Eigen::numext::bit_cast<Eigen::bfloat16>(value.bits));
}
float ToFloat(float16 value) { return static_cast<float>(Eigen::numext::bit_cast<Eigen::half>(value.bits)); }
bfloat16 ToBFloat16(float value) {
  return bfloat16{Eigen::numext::bit_cast<uint16_t>(Eigen::bfloat16(value))};
}
float16 ToFloat16(float value) { return float16{Eigen::numext::bit_cast<uint16_t>(Eigen::half(value))}; }

std::string ShapeString(DType dtype, std::span<const int64_t> shape) {
  return fmt::format("{}{}", DTypeName(dtype), ShapeToString(shape));
}

namespace {

// Arrays hold the seven dtypes the simulator computes with; the others are sized only (common/dtype.h).
void CheckArrayDType(DType dtype) {
  if (IsArrayDType(dtype)) return;
  Throw(ErrorCode::kInvalidArgument, "spmdsim has no arrays of dtype {}; array dtypes are {}", DTypeName(dtype),
        ValidDTypeNames(ArrayDTypes()));
}

}  // namespace

Array Array::Over(DType dtype, std::vector<int64_t> shape, std::shared_ptr<internal::Buffer> buffer,
                  internal::DeviceMemory* memory) {
  CheckArrayDType(dtype);
  Array a;
  a.size_ = NumElements(shape);
  a.shape_ = std::move(shape);
  a.dtype_ = dtype;
  int64_t bytes = a.size_ * DTypeSize(dtype);
  std::shared_ptr<internal::DeviceMemory> owner;
  if (memory != nullptr) {
    memory->Charge(bytes);
    owner = memory->shared_from_this();
  }
  a.holding_ = std::make_shared<internal::Holding>(std::move(buffer), bytes, std::move(owner));
  return a;
}

Array Array::Allocated(DType dtype, std::vector<int64_t> shape, internal::DeviceMemory* memory, bool zeroed,
                       bool abstract) {
  CheckArrayDType(dtype);
  int64_t bytes = NumElements(shape) * DTypeSize(dtype);
  std::shared_ptr<internal::DeviceMemory> owner;
  if (memory != nullptr) {
    memory->Charge(bytes);
    owner = memory->shared_from_this();
  }
  std::shared_ptr<internal::Buffer> buffer;
  try {
    if (!abstract) buffer = zeroed ? internal::Buffer::AllocateZeroed(bytes) : internal::Buffer::Allocate(bytes);
  } catch (...) {
    if (memory != nullptr) memory->Release(bytes);
    throw;
  }
  Array a;
  a.size_ = NumElements(shape);
  a.shape_ = std::move(shape);
  a.dtype_ = dtype;
  a.holding_ = std::make_shared<internal::Holding>(std::move(buffer), bytes, std::move(owner));
  return a;
}

namespace {

void* MutableData(const Array& a) { return const_cast<void*>(a.raw_data()); }

}  // namespace

Array Array::FromBytes(DType dtype, std::vector<int64_t> shape, const void* data, size_t count) {
  if (static_cast<int64_t>(count) != NumElements(shape)) {
    Throw(ErrorCode::kInvalidArgument, "{} values cannot fill an array of shape {} ({} elements)", count,
          ShapeToString(shape), NumElements(shape));
  }
  Array a = Allocated(dtype, std::move(shape), internal::CurrentDeviceMemory(), false, false);
  if (count > 0) std::memcpy(MutableData(a), data, count * DTypeSize(dtype));
  return a;
}

Array Array::FromVector(const std::vector<bool>& values, std::vector<int64_t> shape) {
  std::vector<uint8_t> bytes(values.begin(), values.end());
  return FromBytes(DType::kBool, std::move(shape), bytes.data(), bytes.size());
}

Array Array::Zeros(std::vector<int64_t> shape, DType dtype) {
  return Allocated(dtype, std::move(shape), internal::CurrentDeviceMemory(), true, false);
}

namespace {
template <typename T>
T FromDouble(double v) {
  if constexpr (std::is_same_v<T, bfloat16>) {
    return ToBFloat16(static_cast<float>(v));
  } else if constexpr (std::is_same_v<T, float16>) {
    return ToFloat16(static_cast<float>(v));
  } else if constexpr (std::is_same_v<T, bool>) {
    return v != 0;
  } else {
    return static_cast<T>(v);
  }
}
template <typename T>
double ToDouble(T v) {
  if constexpr (std::is_same_v<T, bfloat16> || std::is_same_v<T, float16>) {
    return ToFloat(v);
  } else {
    return static_cast<double>(v);
  }
}

template <typename F>
auto VisitDType(DType dtype, F&& f) {
  switch (dtype) {
    case DType::kF32: return f(float{});
    case DType::kF64: return f(double{});
    case DType::kBF16: return f(bfloat16{});
    case DType::kF16: return f(float16{});
    case DType::kI32: return f(int32_t{});
    case DType::kI64: return f(int64_t{});
    case DType::kBool: return f(bool{});
    default: break;  // not an array dtype (rejected when the array is made)
  }
  return f(float{});
}
}  // namespace

Array Array::Full(std::vector<int64_t> shape, DType dtype, double value) {
  Array a = Allocated(dtype, std::move(shape), internal::CurrentDeviceMemory(), false, false);
  VisitDType(dtype, [&](auto zero) {
    using T = decltype(zero);
    T* out = static_cast<T*>(MutableData(a));
    T v = FromDouble<T>(value);
    for (int64_t i = 0; i < a.size(); ++i) out[i] = v;
  });
  return a;
}

Array Array::Iota(std::vector<int64_t> shape, DType dtype) {
  Array a = Allocated(dtype, std::move(shape), internal::CurrentDeviceMemory(), false, false);
  VisitDType(dtype, [&](auto zero) {
    using T = decltype(zero);
    T* out = static_cast<T*>(MutableData(a));
    for (int64_t i = 0; i < a.size(); ++i) out[i] = FromDouble<T>(static_cast<double>(i));
  });
  return a;
}

Array Array::Abstract(std::vector<int64_t> shape, DType dtype) {
  return Allocated(dtype, std::move(shape), internal::CurrentDeviceMemory(), false, true);
}

bool Array::is_abstract() const { return holding_ != nullptr && holding_->buffer() == nullptr; }

const void* Array::raw_data() const {
  if (holding_ == nullptr || holding_->buffer() == nullptr) return nullptr;
  return holding_->buffer()->data();
}

void Array::CheckReadable(DType requested) const {
  if (holding_ == nullptr) Throw(ErrorCode::kFailedPrecondition, "reading an empty Array handle");
  if (requested != dtype_) {
    Throw(ErrorCode::kInvalidArgument, "array is {}, not {}", ShapeString(), DTypeName(requested));
  }
  if (is_abstract()) {
    Throw(ErrorCode::kFailedPrecondition, "array {} is abstract (shape and dtype only); it has no elements",
          ShapeString());
  }
}

std::vector<double> Array::ToDoubles() const {
  CheckReadable(dtype_);
  std::vector<double> out(static_cast<size_t>(size_));
  VisitDType(dtype_, [&](auto zero) {
    using T = decltype(zero);
    const T* in = static_cast<const T*>(raw_data());
    for (int64_t i = 0; i < size_; ++i) out[i] = ToDouble<T>(in[i]);
  });
  return out;
}

std::string Array::ToString() const {
  if (!valid()) return "Array()";
  if (is_abstract()) return ShapeString() + "{abstract}";
  std::vector<double> values = ToDoubles();
  std::string out;
  // Recursive numpy-like nesting.
  auto rec = [&](auto&& self, int dim, int64_t offset, int64_t stride) -> void {
    if (dim == rank()) {
      out += fmt::format("{}", values[offset]);
      return;
    }
    int64_t inner = stride / (shape_[dim] == 0 ? 1 : shape_[dim]);
    out += '[';
    for (int64_t i = 0; i < shape_[dim]; ++i) {
      if (i > 0) out += ", ";
      self(self, dim + 1, offset + i * inner, inner);
    }
    out += ']';
  };
  rec(rec, 0, 0, size_);
  return out;
}

Array Array::Reshape(std::vector<int64_t> shape) const {
  if (NumElements(shape) != size_) {
    Throw(ErrorCode::kInvalidArgument, "cannot reshape array of shape {} ({} elements) into shape {}",
          ShapeToString(shape_), size_, ShapeToString(shape));
  }
  Array a = *this;
  a.shape_ = std::move(shape);
  return a;
}

int64_t Array::charged_position() const {
  if (holding_ == nullptr || holding_->memory() == nullptr) return -1;
  return holding_->memory()->position();
}

bool Array::SharesBufferWith(const Array& other) const {
  return holding_ && other.holding_ && holding_->buffer() && holding_->buffer() == other.holding_->buffer();
}

bool Array::BitwiseEquals(const Array& other) const {
  if (dtype_ != other.dtype_ || shape_ != other.shape_ || is_abstract() != other.is_abstract()) return false;
  if (is_abstract() || size_ == 0) return true;
  return std::memcmp(raw_data(), other.raw_data(), static_cast<size_t>(nbytes())) == 0;
}

}  // namespace spmdsim
