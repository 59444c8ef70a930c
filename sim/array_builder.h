// ArrayBuilder: the one way to make a new Array whose elements are computed in place (ops/, shardmap/):
// allocate dtype[shape], write the elements through mutable_data(), then Freeze() into an immutable Array.
//
// The new array is charged like any Array made now (sim/array.h): to the virtual device whose code runs on
// this thread (CurrentDevice(), sim/device_context.h), or to nobody (a host array) outside Runtime::Run.
//
// Example:
//   ArrayBuilder b(DType::kF32, {2, 3});                   // uninitialised float32[2,3]
//   std::span<float> v = b.data<float>();
//   for (int i = 0; i < 6; ++i) v[i] = i;
//   Array a = std::move(b).Freeze();                        // a.ToString() == "[[0, 1, 2], [3, 4, 5]]"
//   ArrayBuilder z(DType::kI32, {4}, {.zeroed = true});     // four zeros
//   ArrayBuilder s(DType::kBF16, {1024, 1024}, {.abstract = true});  // no elements: mutable_data() == nullptr
//
// Errors (the constructor throws, and nothing is allocated or charged then):
//  - Error(kResourceExhausted) "Out of memory while trying to allocate ..." when the current device is full;
//  - Error(kResourceExhausted) "host memory: ..." when the host cannot hold the elements (more than its
//    physical memory, or an allocation that fails);
//  - Error(kInvalidArgument) for a negative dimension.
//
// Thread safety: a builder belongs to the thread that made it until Freeze (it is not thread-safe). Writes
// made through mutable_data() before Freeze are visible to every thread that obtains the frozen Array (or a
// copy of it) through any synchronisation. After Freeze the builder is empty: mutable_data() is nullptr.
#ifndef SPMDSIM_SIM_ARRAY_BUILDER_H_
#define SPMDSIM_SIM_ARRAY_BUILDER_H_

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "sim/array.h"

namespace spmdsim {

class ArrayBuilder {
 public:
  struct Options {
    bool zeroed = false;    // every byte 0 (otherwise the elements are uninitialised)
    bool abstract = false;  // shape and dtype only (Array::Abstract): no elements, charged all the same
  };

  ArrayBuilder(DType dtype, std::vector<int64_t> shape, Options options);
  ArrayBuilder(DType dtype, std::vector<int64_t> shape);  // uninitialised elements
  ArrayBuilder(ArrayBuilder&&) = default;
  ArrayBuilder& operator=(ArrayBuilder&&) = default;
  ArrayBuilder(const ArrayBuilder&) = delete;
  ArrayBuilder& operator=(const ArrayBuilder&) = delete;

  DType dtype() const { return array_.dtype(); }
  const std::vector<int64_t>& shape() const { return array_.shape(); }
  int rank() const { return array_.rank(); }
  int64_t size() const { return array_.size(); }      // elements
  int64_t nbytes() const { return array_.nbytes(); }
  bool is_abstract() const { return array_.is_abstract(); }

  // The elements, row-major; nullptr for an abstract array or after Freeze.
  void* mutable_data() { return data_; }
  // Typed view. Throws Error(kInvalidArgument) when T is not the dtype and Error(kFailedPrecondition) for an
  // abstract (or frozen) builder.
  template <typename T>
  std::span<T> data() {
    CheckWritable(DTypeOf<T>::value);
    return {static_cast<T*>(data_), static_cast<size_t>(array_.size())};
  }

  // The finished array; the builder is empty afterwards.
  Array Freeze() && {
    data_ = nullptr;
    return std::move(array_);
  }

 private:
  void CheckWritable(DType requested) const;

  Array array_;
  void* data_ = nullptr;
};

}  // namespace spmdsim

#endif  // SPMDSIM_SIM_ARRAY_BUILDER_H_
