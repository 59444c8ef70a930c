// Array: an immutable N-d value with a dtype, held by a virtual device (JAX: a per-device shard, a
// jax.Array's addressable_data(i)).
//
// The elements live in a reference-counted host buffer; copying an Array copies a handle, never the bytes.
// Device memory accounting (sim/memory.h): an Array created while a virtual device runs (inside
// Runtime::Run) is charged to that device; copies of it share that one charge, which is released when the
// last copy goes. The same buffer held by several devices (a psum result, a replicated input; see
// DeviceContext::Hold) is stored once on the host and charged once to each device that holds it.
// An abstract array (Array::Abstract) has a shape and dtype but no elements: collectives compute its result
// shape and charge its bytes, and reading its elements is an error.
//
// Example:
//   Array a = Array::FromVector<float>({1, 2, 3, 4, 5, 6}, {2, 3});   // float32[2,3]
//   a.data<float>()[4] == 5;  a.nbytes() == 24;  a.ShapeString() == "float32[2,3]"
//   a.data<int32_t>()   // throws Error(kInvalidArgument): "array is float32[2,3], not int32"
//
// Thread safety: an Array is immutable; const members may be called from any thread concurrently. Copying
// and destroying handles is thread-safe (std::shared_ptr reference counts). The elements written when the
// Array was made are visible to every thread that obtains a copy of the handle through any synchronisation.
#ifndef SPMDSIM_SIM_ARRAY_H_
#define SPMDSIM_SIM_ARRAY_H_

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/dtype.h"
#include "common/error.h"
#include "common/shape.h"

namespace spmdsim {

// 16-bit floating-point storage types; arithmetic converts through float (Eigen's conversions, in array.cc).
struct bfloat16 {
  uint16_t bits = 0;
};
struct float16 {
  uint16_t bits = 0;
};
float ToFloat(bfloat16 value);
float ToFloat(float16 value);
bfloat16 ToBFloat16(float value);  // round to nearest even, as Eigen::bfloat16
float16 ToFloat16(float value);

template <typename T>
struct DTypeOf;
template <> struct DTypeOf<float> { static constexpr DType value = DType::kF32; };
template <> struct DTypeOf<double> { static constexpr DType value = DType::kF64; };
template <> struct DTypeOf<bfloat16> { static constexpr DType value = DType::kBF16; };
template <> struct DTypeOf<float16> { static constexpr DType value = DType::kF16; };
template <> struct DTypeOf<int32_t> { static constexpr DType value = DType::kI32; };
template <> struct DTypeOf<int64_t> { static constexpr DType value = DType::kI64; };
template <> struct DTypeOf<bool> { static constexpr DType value = DType::kBool; };

// "float32[2,3]" (ShapeToString and NumElements: common/shape.h).
std::string ShapeString(DType dtype, std::span<const int64_t> shape);

namespace internal {
class Buffer;
class DeviceMemory;
class Holding;
struct ArrayAccess;
}  // namespace internal

class Array {
 public:
  // An empty float32 scalar handle with no buffer; valid() is false. Only for default-constructed slots.
  Array() = default;

  // REQUIRES: values.size() == product(shape). Charged to the current device, if any.
  template <typename T>
  static Array FromVector(const std::vector<T>& values, std::vector<int64_t> shape) {
    return FromBytes(DTypeOf<T>::value, std::move(shape), values.data(), values.size());
  }
  template <typename T>
  static Array Scalar(T value) {
    return FromBytes(DTypeOf<T>::value, {}, &value, 1);
  }
  static Array FromVector(const std::vector<bool>& values, std::vector<int64_t> shape);
  static Array Zeros(std::vector<int64_t> shape, DType dtype);
  // Every element `value` converted to dtype (bool: value != 0).
  static Array Full(std::vector<int64_t> shape, DType dtype, double value);
  // Row-major 0, 1, 2, ... converted to dtype (numpy: arange(n).reshape(shape)).
  static Array Iota(std::vector<int64_t> shape, DType dtype);
  // Shape and dtype only. Charged like a real array of that size.
  static Array Abstract(std::vector<int64_t> shape, DType dtype);

  bool valid() const { return holding_ != nullptr; }
  const std::vector<int64_t>& shape() const { return shape_; }
  int rank() const { return static_cast<int>(shape_.size()); }
  int64_t size() const { return size_; }  // elements
  int64_t nbytes() const { return size_ * DTypeSize(dtype_); }
  DType dtype() const { return dtype_; }
  bool is_abstract() const;
  std::string ShapeString() const { return spmdsim::ShapeString(dtype_, shape_); }

  // The elements in row-major order. Throws Error(kInvalidArgument) when T is not the dtype and
  // Error(kFailedPrecondition) for an abstract array.
  template <typename T>
  std::span<const T> data() const {
    CheckReadable(DTypeOf<T>::value);
    return {static_cast<const T*>(raw_data()), static_cast<size_t>(size_)};
  }
  const void* raw_data() const;  // nullptr for abstract arrays
  // Every element converted to double (bool -> 0/1, bf16/f16 exactly); for tests and printing.
  std::vector<double> ToDoubles() const;
  // numpy-like: "[[1, 2], [3, 4]]" (abstract: "float32[2,2]{abstract}").
  std::string ToString() const;

  // Same elements, new shape; shares the buffer and the charge. REQUIRES: same number of elements.
  Array Reshape(std::vector<int64_t> shape) const;

  // Varying manual axes (JAX: the value's vma, `jax.typeof(x).mat.varying`): bit i set when the value may
  // differ between devices that differ only in mesh axis i (axis i of the mesh of the Runtime that made it).
  // Metadata for shard_map's static replication check; it never changes the elements. 0 (invariant) for
  // arrays made by factories; the collectives of sim/device_context.h set it by JAX's rules, and local ops
  // take the union of their inputs' masks.
  // Example: mesh {x:4, y:2}; an input split by P('x') has mask 0b01; Psum(it, "x") has 0; AllGather over "y"
  // gives 0b11.
  uint64_t varying_axes() const { return varying_axes_; }
  // The same buffer and charge with another mask.
  Array WithVaryingAxes(uint64_t mask) const& {
    Array a = *this;
    a.varying_axes_ = mask;
    return a;
  }
  Array WithVaryingAxes(uint64_t mask) && {  // reuses this handle (no shape copy, no reference count)
    varying_axes_ = mask;
    return std::move(*this);
  }

  // Position of the device charged for this array, or -1 for a host array.
  int64_t charged_position() const;
  // True when both handles read the same host buffer.
  bool SharesBufferWith(const Array& other) const;
  // Same dtype, shape and bytes (NaNs with equal bits compare equal).
  bool BitwiseEquals(const Array& other) const;

 private:
  friend struct internal::ArrayAccess;
  static Array FromBytes(DType dtype, std::vector<int64_t> shape, const void* data, size_t count);
  // internal::ArrayAccess::Make and ::Allocate (sim/internal/array_access.h), which they call.
  static Array Over(DType dtype, std::vector<int64_t> shape, std::shared_ptr<internal::Buffer> buffer,
                    internal::DeviceMemory* memory);
  static Array Allocated(DType dtype, std::vector<int64_t> shape, internal::DeviceMemory* memory, bool zeroed,
                         bool abstract);
  void CheckReadable(DType requested) const;

  std::vector<int64_t> shape_;
  int64_t size_ = 0;
  DType dtype_ = DType::kF32;
  uint64_t varying_axes_ = 0;
  std::shared_ptr<const internal::Holding> holding_;
};

}  // namespace spmdsim

#endif  // SPMDSIM_SIM_ARRAY_H_
