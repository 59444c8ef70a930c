// Value: what an HLO instruction produces on one virtual device while a module runs with data: an array of any
// HLO element type, a tuple of values, or a token.
//
// An array's elements live in a sim Array (sim/array.h), row-major in LOGICAL order (layouts only matter to
// bitcast, which the interpreter resolves), so they are charged to the virtual device that made them and shared
// by handle like every Array. Element types the simulator does not compute with (s8, s16, u8..u64) are stored in
// an Array of the same element size (the "carrier": pred/s8/u8 -> bool, s16/u16 -> float16, u32 -> int32,
// u64 -> int64) and read through the HLO dtype; the bytes are the HLO type's.
//
// Example:
//   ValueBuilder b(DType::kU32, {2, 2});      // uninitialised u32[2,2], charged to the current device
//   b.data<uint32_t>()[3] = 7;
//   Value v = std::move(b).Finish();
//   v.dtype() == DType::kU32;  v.storage().dtype() == DType::kI32;  v.nbytes() == 16
//
// Thread safety: a Value is immutable once built; copies share elements (as Array handles do).
#ifndef SPMDSIM_HLO_VALUE_H_
#define SPMDSIM_HLO_VALUE_H_

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "common/dtype.h"
#include "hlo/shape.h"
#include "sim/array.h"
#include "sim/array_builder.h"

namespace spmdsim::hlo {

// The sim dtype an HLO dtype's elements are stored in (itself for the seven array dtypes). REQUIRES: not complex.
DType CarrierDType(DType dtype);

class Value {
 public:
  Value() = default;
  // An array value over `storage` (whose dtype must be CarrierDType(dtype)).
  static Value FromArray(DType dtype, Array storage);
  static Value Tuple(std::vector<Value> elements);
  static Value Token();

  bool valid() const { return kind_ != Kind::kNone; }
  bool is_array() const { return kind_ == Kind::kArray; }
  bool is_tuple() const { return kind_ == Kind::kTuple; }
  DType dtype() const { return dtype_; }
  const std::vector<int64_t>& dims() const { return storage_.shape(); }
  int rank() const { return storage_.rank(); }
  int64_t size() const { return storage_.size(); }  // elements
  int64_t nbytes() const { return storage_.nbytes(); }
  const Array& storage() const { return storage_; }
  const void* raw() const { return storage_.raw_data(); }
  template <typename T>
  const T* data() const {
    return static_cast<const T*>(storage_.raw_data());
  }
  const std::vector<Value>& elements() const { return *elements_; }
  const Value& element(size_t i) const { return (*elements_)[i]; }
  // "f32[2,2]" / "(f32[2], s32[])".
  std::string ShapeString() const;
  // The HLO shape of this value (no layout).
  Shape shape() const;

 private:
  enum class Kind : uint8_t { kNone, kArray, kTuple, kToken };
  Kind kind_ = Kind::kNone;
  DType dtype_ = DType::kF32;
  Array storage_;
  std::shared_ptr<const std::vector<Value>> elements_;
};

// A new array value of `dtype` and `dims` to be written through data(), charged to the current device; Finish()
// makes the Value. Throws what ArrayBuilder throws (RESOURCE_EXHAUSTED when the device or the host is full).
class ValueBuilder {
 public:
  ValueBuilder(DType dtype, std::vector<int64_t> dims, bool zeroed = false);
  void* raw() { return data_; }
  template <typename T>
  T* data() {
    return static_cast<T*>(data_);
  }
  int64_t size() const { return size_; }
  Value Finish() &&;

 private:
  DType dtype_;
  ArrayBuilder builder_;
  void* data_ = nullptr;
  int64_t size_ = 0;
};

// An array value of `dtype` from doubles (XLA's convert from f64: saturating for integers), and back (every
// element as a double: pred 0/1, 16-bit floats exactly). For inputs, outputs and checks.
Value ValueFromDoubles(DType dtype, const std::vector<int64_t>& dims, std::span<const double> values);
std::vector<double> ValueToDoubles(const Value& value);

}  // namespace spmdsim::hlo

#endif  // SPMDSIM_HLO_VALUE_H_
