#include "sim/array.h"

#include <Eigen/Core>
#include <algorithm>
#include <bit>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <list>
#include <map>
#include <new>
#include <vector>

#include <unistd.h>

#include <fmt/format.h>

#include "common/host_memory.h"
#include "common/strings.h"
#include "common/thread_annotations.h"
#include "sim/array_builder.h"
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

namespace internal {

namespace {

// Freed buffers of 128 KiB and more (glibc's default mmap threshold: smaller ones come from malloc's arenas
// without page faults) are kept for the next allocation of the same size: a collective that runs again needs
// the same output sizes, and reusing them saves the mmap, the page faults and the kernel's zeroing of fresh
// pages (a 16 MiB psum result would otherwise pay ~4096 page faults every time; an all_to_all at N=8 with
// 512 KiB per device took 200-320 us with 1 MiB as the threshold, 44-53 us with 128 KiB).
//
// Policy (docs/runtime.md, "Arrays and memory"):
//  - Sizes match exactly (a buffer is always its requested size rounded to 64 bytes, so what a device is
//    charged is what the host holds). Taking a size returns its most recently returned buffer (the warmest).
//  - Bound: the pool holds at most max(256 MiB, the bytes of pooled-size buffers in use), checked whenever a
//    buffer comes back; so beyond 256 MiB it at most doubles what the program holds, and it shrinks as the
//    program frees its arrays. A returned buffer larger than the bound is freed at once.
//  - Eviction: to make room, the buffers returned longest ago are freed first (least recently used), so sizes
//    a program stopped using give way to the sizes it uses now. (The pool used to keep up to 512 MiB of any
//    sizes for ever: after other sizes had filled it, a sweep's 64 MiB points paid page faults on every
//    output, 105-126 ms per all_to_all instead of 35 ms.)
//  - Frees happen outside the lock.
class LargeBufferPool {
 public:
  static constexpr size_t kMinBytes = size_t{128} << 10;
  static constexpr size_t kFloorBytes = size_t{256} << 20;

  // A pooled buffer of exactly `bytes`, or nullptr (the caller allocates). Counts `bytes` as in use either way;
  // the caller calls Untrack when its own allocation fails.
  void* Take(size_t bytes) {
    MutexLock lock(mu_);
    in_use_ += bytes;
    auto [first, last] = by_size_.equal_range(bytes);
    if (first == last) return nullptr;
    const auto it = std::prev(last);  // equal keys keep insertion order: the most recently returned
    void* data = it->second->data;
    lru_.erase(it->second);
    by_size_.erase(it);
    pooled_ -= bytes;
    return data;
  }
  void Untrack(size_t bytes) {
    MutexLock lock(mu_);
    in_use_ -= bytes;
  }
  // Takes back a buffer that was in use; keeps it, evicting the least recently returned ones as needed, or
  // frees it when it alone exceeds the bound.
  void Give(void* data, size_t bytes) {
    void* evicted_inline[8];
    std::vector<void*> evicted_more;
    size_t num_evicted = 0;
    bool keep = false;
    {
      MutexLock lock(mu_);
      in_use_ -= bytes;
      const size_t bound = std::max(kFloorBytes, in_use_);
      if (bytes <= bound) {
        keep = true;
        while (pooled_ + bytes > bound) {
          const Entry oldest = lru_.front();
          auto [first, last] = by_size_.equal_range(oldest.bytes);
          while (first->second != lru_.begin()) ++first;
          by_size_.erase(first);
          lru_.pop_front();
          pooled_ -= oldest.bytes;
          if (num_evicted < std::size(evicted_inline)) {
            evicted_inline[num_evicted++] = oldest.data;
          } else {
            evicted_more.push_back(oldest.data);
          }
        }
        try {
          lru_.push_back({bytes, data});
          try {
            by_size_.emplace(bytes, std::prev(lru_.end()));
          } catch (...) {
            lru_.pop_back();
            throw;
          }
          pooled_ += bytes;
        } catch (...) {  // no memory for the bookkeeping (this runs in a destructor): free the buffer instead
          keep = false;
        }
      }
    }
    if (!keep) std::free(data);
    for (size_t i = 0; i < num_evicted; ++i) std::free(evicted_inline[i]);
    for (void* p : evicted_more) std::free(p);
  }
  BufferPoolStats Stats() {
    MutexLock lock(mu_);
    return {static_cast<int64_t>(pooled_), static_cast<int64_t>(lru_.size()), static_cast<int64_t>(in_use_)};
  }

 private:
  struct Entry {
    size_t bytes;
    void* data;
  };
  Mutex mu_;
  std::list<Entry> lru_ SPMDSIM_GUARDED_BY(mu_);  // least recently returned first
  std::multimap<size_t, std::list<Entry>::iterator> by_size_ SPMDSIM_GUARDED_BY(mu_);  // the same entries by size
  size_t pooled_ SPMDSIM_GUARDED_BY(mu_) = 0;  // bytes in lru_
  size_t in_use_ SPMDSIM_GUARDED_BY(mu_) = 0;  // bytes of large buffers allocated and not yet returned
};

LargeBufferPool& Pool() {
  static LargeBufferPool* pool = new LargeBufferPool;  // never destroyed: buffers may die after main
  return *pool;
}

[[noreturn]] void ThrowHostMemory(int64_t bytes) {
  Throw(ErrorCode::kResourceExhausted,
        "host memory: allocating an array of {} needs {} bytes, {} available (the host has {} of physical memory)",
        HumanBytes(bytes), bytes, HumanBytes(HostMemoryAvailableBytes()), HumanBytes(HostPhysicalMemoryBytes()));
}

size_t RoundedSize(int64_t bytes) {
  size_t rounded = (static_cast<size_t>(bytes) + 63) / 64 * 64;
  return rounded == 0 ? 64 : rounded;
}

}  // namespace

std::shared_ptr<Buffer> Buffer::Allocate(int64_t bytes) {
  if (bytes > HostPhysicalMemoryBytes()) ThrowHostMemory(bytes);  // checked first: allocating could succeed lazily
  const size_t rounded = RoundedSize(bytes);
  const bool large = rounded >= LargeBufferPool::kMinBytes;
  void* data = large ? Pool().Take(rounded) : nullptr;
  if (data == nullptr) data = std::aligned_alloc(64, rounded);
  if (data == nullptr) {
    if (large) Pool().Untrack(rounded);
    ThrowHostMemory(bytes);
  }
  try {
    return std::shared_ptr<Buffer>(new Buffer(data, bytes));
  } catch (...) {
    if (large) Pool().Untrack(rounded);
    std::free(data);
    throw;
  }
}

std::shared_ptr<Buffer> Buffer::AllocateZeroed(int64_t bytes) {
  auto buffer = Allocate(bytes);
  std::memset(buffer->data(), 0, static_cast<size_t>(bytes));
  return buffer;
}

Buffer::~Buffer() {
  const size_t rounded = RoundedSize(bytes_);
  if (rounded >= LargeBufferPool::kMinBytes) {
    Pool().Give(data_, rounded);
  } else {
    std::free(data_);
  }
}

BufferPoolStats GetBufferPoolStats() { return Pool().Stats(); }

// Arrays hold the seven dtypes the simulator computes with; the others are sized only (common/dtype.h).
static void CheckArrayDType(DType dtype) {
  if (IsArrayDType(dtype)) return;
  Throw(ErrorCode::kInvalidArgument, "spmdsim has no arrays of dtype {}; array dtypes are {}", DTypeName(dtype),
        ValidDTypeNames(ArrayDTypes()));
}

Array ArrayAccess::Make(DType dtype, std::vector<int64_t> shape, std::shared_ptr<Buffer> buffer,
                        DeviceMemory* memory) {
  CheckArrayDType(dtype);
  Array a;
  a.size_ = NumElements(shape);
  a.shape_ = std::move(shape);
  a.dtype_ = dtype;
  int64_t bytes = a.size_ * DTypeSize(dtype);
  std::shared_ptr<DeviceMemory> owner;
  if (memory != nullptr) {
    memory->Charge(bytes);
    owner = memory->shared_from_this();
  }
  a.holding_ = std::make_shared<Holding>(std::move(buffer), bytes, std::move(owner));
  return a;
}

Array ArrayAccess::Allocate(DType dtype, std::vector<int64_t> shape, DeviceMemory* memory, bool zeroed,
                            bool abstract) {
  CheckArrayDType(dtype);
  int64_t bytes = NumElements(shape) * DTypeSize(dtype);
  std::shared_ptr<DeviceMemory> owner;
  if (memory != nullptr) {
    memory->Charge(bytes);
    owner = memory->shared_from_this();
  }
  std::shared_ptr<Buffer> buffer;
  try {
    if (!abstract) buffer = zeroed ? Buffer::AllocateZeroed(bytes) : Buffer::Allocate(bytes);
  } catch (...) {
    if (memory != nullptr) memory->Release(bytes);
    throw;
  }
  Array a;
  a.size_ = NumElements(shape);
  a.shape_ = std::move(shape);
  a.dtype_ = dtype;
  a.holding_ = std::make_shared<Holding>(std::move(buffer), bytes, std::move(owner));
  return a;
}

const std::shared_ptr<Buffer>& ArrayAccess::buffer(const Array& array) { return array.holding_->buffer(); }

void* ArrayAccess::mutable_data(const Array& array) {
  const auto& buffer = array.holding_->buffer();
  return buffer ? buffer->data() : nullptr;
}

Array ArrayAccess::Rehold(const Array& array, DeviceMemory* memory) {
  if (array.holding_->memory() == memory) return array;
  return Make(array.dtype_, array.shape_, array.holding_->buffer(), memory).WithVaryingAxes(array.varying_axes_);
}

}  // namespace internal

using internal::ArrayAccess;

Array Array::FromBytes(DType dtype, std::vector<int64_t> shape, const void* data, size_t count) {
  if (static_cast<int64_t>(count) != NumElements(shape)) {
    Throw(ErrorCode::kInvalidArgument, "{} values cannot fill an array of shape {} ({} elements)", count,
          ShapeToString(shape), NumElements(shape));
  }
  Array a = ArrayAccess::Allocate(dtype, std::move(shape), internal::CurrentDeviceMemory(), false, false);
  if (count > 0) std::memcpy(ArrayAccess::mutable_data(a), data, count * DTypeSize(dtype));
  return a;
}

Array Array::FromVector(const std::vector<bool>& values, std::vector<int64_t> shape) {
  std::vector<uint8_t> bytes(values.begin(), values.end());
  return FromBytes(DType::kBool, std::move(shape), bytes.data(), bytes.size());
}

Array Array::Zeros(std::vector<int64_t> shape, DType dtype) {
  return ArrayAccess::Allocate(dtype, std::move(shape), internal::CurrentDeviceMemory(), true, false);
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
  Array a = ArrayAccess::Allocate(dtype, std::move(shape), internal::CurrentDeviceMemory(), false, false);
  VisitDType(dtype, [&](auto zero) {
    using T = decltype(zero);
    T* out = static_cast<T*>(ArrayAccess::mutable_data(a));
    T v = FromDouble<T>(value);
    for (int64_t i = 0; i < a.size(); ++i) out[i] = v;
  });
  return a;
}

Array Array::Iota(std::vector<int64_t> shape, DType dtype) {
  Array a = ArrayAccess::Allocate(dtype, std::move(shape), internal::CurrentDeviceMemory(), false, false);
  VisitDType(dtype, [&](auto zero) {
    using T = decltype(zero);
    T* out = static_cast<T*>(ArrayAccess::mutable_data(a));
    for (int64_t i = 0; i < a.size(); ++i) out[i] = FromDouble<T>(static_cast<double>(i));
  });
  return a;
}

Array Array::Abstract(std::vector<int64_t> shape, DType dtype) {
  return ArrayAccess::Allocate(dtype, std::move(shape), internal::CurrentDeviceMemory(), false, true);
}

ArrayBuilder::ArrayBuilder(DType dtype, std::vector<int64_t> shape, Options options)
    : array_(ArrayAccess::Allocate(dtype, std::move(shape), internal::CurrentDeviceMemory(), options.zeroed,
                                   options.abstract)),
      data_(ArrayAccess::mutable_data(array_)) {}

ArrayBuilder::ArrayBuilder(DType dtype, std::vector<int64_t> shape) : ArrayBuilder(dtype, std::move(shape), Options{}) {}

void ArrayBuilder::CheckWritable(DType requested) const {
  if (requested != array_.dtype()) {
    Throw(ErrorCode::kInvalidArgument, "array is {}, not {}", array_.ShapeString(), DTypeName(requested));
  }
  if (data_ == nullptr && array_.size() > 0) {
    Throw(ErrorCode::kFailedPrecondition, "array {} has no elements to write (abstract, or already frozen)",
          array_.ShapeString());
  }
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
