#include "sim/array.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/strings.h"
#include "mesh/mesh.h"
#include "sim/array_builder.h"
#include "sim/internal/array_access.h"
#include "sim/internal/buffer.h"
#include "sim/memory.h"
#include "sim/runtime.h"

namespace spmdsim {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(Array, FromVectorKeepsShapeDtypeAndValues) {
  Array a = Array::FromVector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  EXPECT_EQ(a.ShapeString(), "float32[2,3]");
  EXPECT_EQ(a.rank(), 2);
  EXPECT_EQ(a.size(), 6);
  EXPECT_EQ(a.nbytes(), 24);
  EXPECT_EQ(a.data<float>()[4], 5.0f);
  EXPECT_EQ(a.ToString(), "[[1, 2, 3], [4, 5, 6]]");
}

TEST(Array, ReadingWithTheWrongTypeIsAnError) {
  Array a = Array::FromVector<float>({1, 2}, {2});
  try {
    (void)a.data<int32_t>();
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_THAT(e.message(), HasSubstr("array is float32[2], not int32"));
  }
}

TEST(Array, FromVectorRejectsAWrongNumberOfValues) {
  try {
    Array::FromVector<int32_t>({1, 2, 3}, {2, 2});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_THAT(e.message(), HasSubstr("3 values cannot fill an array of shape [2,2] (4 elements)"));
  }
}

TEST(Array, ScalarHasRankZero) {
  Array s = Array::Scalar<int64_t>(7);
  EXPECT_EQ(s.rank(), 0);
  EXPECT_EQ(s.size(), 1);
  EXPECT_EQ(s.ShapeString(), "int64[]");
  EXPECT_EQ(s.ToString(), "7");
}

TEST(Array, ZerosFullAndIotaFillEveryDtype) {
  for (DType d : {DType::kF32, DType::kF64, DType::kBF16, DType::kF16, DType::kI32, DType::kI64, DType::kBool}) {
    SCOPED_TRACE(DTypeName(d));
    EXPECT_THAT(Array::Zeros({3}, d).ToDoubles(), ElementsAre(0, 0, 0));
    EXPECT_THAT(Array::Full({2}, d, 1.0).ToDoubles(), ElementsAre(1, 1));
    if (d != DType::kBool) {
      EXPECT_THAT(Array::Iota({2, 2}, d).ToDoubles(), ElementsAre(0, 1, 2, 3));
    }
    EXPECT_EQ(Array::Zeros({3}, d).nbytes(), 3 * DTypeSize(d));
  }
}

TEST(Array, BoolArraysStoreOneBytePerElement) {
  Array b = Array::FromVector(std::vector<bool>{true, false, true}, {3});
  EXPECT_EQ(b.dtype(), DType::kBool);
  EXPECT_EQ(b.nbytes(), 3);
  EXPECT_THAT(b.ToDoubles(), ElementsAre(1, 0, 1));
}

TEST(DType, NamesRoundTripAndUnknownNamesAreListed) {
  for (DType d : {DType::kF32, DType::kF64, DType::kBF16, DType::kF16, DType::kI32, DType::kI64, DType::kBool})
    EXPECT_EQ(ParseDType(DTypeName(d)), d);
  try {
    ParseDType("float8");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_THAT(e.message(), HasSubstr("unknown dtype 'float8'; valid dtypes are f32 (float32), f64 (float64)"));
  }
  EXPECT_TRUE(IsFloating(DType::kBF16));
  EXPECT_FALSE(IsFloating(DType::kI32));
  EXPECT_TRUE(IsInteger(DType::kI64));
  EXPECT_FALSE(IsInteger(DType::kBool));
}

TEST(HalfPrecision, ConversionsRoundToNearestEven) {
  // bfloat16 keeps 8 significant bits: 1 + 2^-8 is halfway between 1 and 1 + 2^-7 and rounds to even (1).
  EXPECT_EQ(ToFloat(ToBFloat16(1.0f + 1.0f / 256)), 1.0f);
  EXPECT_EQ(ToFloat(ToBFloat16(1.0f + 3.0f / 256)), 1.0f + 4.0f / 256);
  EXPECT_EQ(ToBFloat16(1.0f).bits, 0x3f80);  // the top half of float 1.0f (0x3f800000)
  // float16 has 11 significant bits: 2049 is halfway between 2048 and 2050 and rounds to 2048.
  EXPECT_EQ(ToFloat(ToFloat16(2049.0f)), 2048.0f);
  EXPECT_EQ(ToFloat16(1.0f).bits, 0x3c00);  // IEEE 754 binary16 1.0
  EXPECT_TRUE(std::isinf(ToFloat(ToFloat16(70000.0f))));
}

TEST(Array, ReshapeSharesTheBuffer) {
  Array a = Array::Iota({2, 3}, DType::kI32);
  Array b = a.Reshape({3, 2});
  EXPECT_TRUE(b.SharesBufferWith(a));
  EXPECT_EQ(b.ShapeString(), "int32[3,2]");
  EXPECT_THROW(a.Reshape({4}), Error);
}

TEST(Array, BitwiseEqualsComparesShapeDtypeAndBytes) {
  Array a = Array::FromVector<float>({1, std::numeric_limits<float>::quiet_NaN()}, {2});
  Array b = Array::FromVector<float>({1, std::numeric_limits<float>::quiet_NaN()}, {2});
  EXPECT_TRUE(a.BitwiseEquals(b));
  EXPECT_FALSE(a.BitwiseEquals(a.Reshape({1, 2})));
  EXPECT_FALSE(a.BitwiseEquals(Array::FromVector<float>({1, 2}, {2})));
  EXPECT_FALSE(a.BitwiseEquals(Array::FromVector<int32_t>({1, 2}, {2})));
}

TEST(Array, AbstractArraysHaveAShapeButNoElements) {
  Array a = Array::Abstract({1024, 1024}, DType::kBF16);
  EXPECT_TRUE(a.is_abstract());
  EXPECT_EQ(a.nbytes(), 2 * kMiB);
  EXPECT_EQ(a.raw_data(), nullptr);
  EXPECT_EQ(a.ToString(), "bfloat16[1024,1024]{abstract}");
  try {
    (void)a.data<bfloat16>();
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kFailedPrecondition);
    EXPECT_THAT(e.message(), HasSubstr("is abstract"));
  }
}

TEST(Array, HostArraysAreNotChargedToAnyDevice) {
  EXPECT_EQ(Array::Zeros({4}, DType::kF32).charged_position(), -1);
  EXPECT_FALSE(Array().valid());
}

TEST(Array, ArraysMadeWhileADeviceIsCurrentAreChargedToItUntilTheLastCopyGoes) {
  Runtime runtime(Mesh::Iota({6}, {"x"}), RuntimeOptions{.num_threads = 1, .device_memory_bytes = 1000});
  Array a;
  runtime.Run([&](DeviceContext& d) {
    if (d.position() == 5) a = Array::Zeros({100}, DType::kF32);  // 400 bytes
  });
  EXPECT_EQ(a.charged_position(), 5);
  EXPECT_EQ(runtime.memory_stats(5).in_use_bytes, 400);
  {
    Array copy = a;
    Array reshaped = a.Reshape({10, 10});
    EXPECT_EQ(runtime.memory_stats(5).in_use_bytes, 400);  // copies share the one charge
  }
  a = Array();
  EXPECT_EQ(runtime.memory_stats(5).in_use_bytes, 0);
  EXPECT_EQ(runtime.memory_stats(5).peak_bytes, 400);
}

TEST(Array, OneBufferHeldByTwoDevicesIsChargedToBoth) {
  auto d0 = std::make_shared<internal::DeviceMemory>(0, 0, kMiB);
  auto d1 = std::make_shared<internal::DeviceMemory>(1, 1, kMiB);
  Array host = Array::Iota({256}, DType::kF32);
  Array on0 = internal::ArrayAccess::Rehold(host, d0.get());
  Array on1 = internal::ArrayAccess::Rehold(host, d1.get());
  EXPECT_TRUE(on0.SharesBufferWith(on1));
  EXPECT_EQ(d0->stats().in_use_bytes, 1024);
  EXPECT_EQ(d1->stats().in_use_bytes, 1024);
  on0 = Array();
  EXPECT_EQ(d0->stats().in_use_bytes, 0);
  EXPECT_EQ(d1->stats().in_use_bytes, 1024);
}

TEST(Array, AnArrayOverCapacityIsRefusedBeforeAnyHostMemoryIsAllocated) {
  Runtime runtime(Mesh::Iota({4}, {"x"}), RuntimeOptions{.num_threads = 1, .device_memory_bytes = kMiB});
  std::vector<std::string> errors(4);
  runtime.Run([&](DeviceContext& d) {
    try {
      // 1 TiB: had it been allocated first, the host would have failed instead.
      if (d.position() == 3) Array::Zeros({int64_t{1} << 38}, DType::kF32);
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kResourceExhausted);
      errors[d.position()] = e.what();
    }
  });
  EXPECT_THAT(errors[3], HasSubstr("RESOURCE_EXHAUSTED: Out of memory while trying to allocate 1.00TiB"));
  EXPECT_THAT(errors[3], HasSubstr("on device 3 (position 3)"));
  EXPECT_EQ(runtime.memory_stats(3).in_use_bytes, 0);
}

TEST(ArrayBuilder, WritesOnceAndFreezesIntoAnArrayChargedToTheCurrentDevice) {
  ArrayBuilder host(DType::kF32, {2, 3});
  std::span<float> v = host.data<float>();
  for (int i = 0; i < 6; ++i) v[i] = static_cast<float>(i);
  Array a = std::move(host).Freeze();
  EXPECT_EQ(a.ToString(), "[[0, 1, 2], [3, 4, 5]]");
  EXPECT_EQ(a.charged_position(), -1);
  EXPECT_EQ(host.mutable_data(), nullptr);  // NOLINT(bugprone-use-after-move): empty after Freeze
  EXPECT_EQ(ArrayBuilder(DType::kI32, {4}, {.zeroed = true}).data<int32_t>()[3], 0);
  ArrayBuilder abstract(DType::kBF16, {1024, 1024}, {.abstract = true});
  EXPECT_EQ(abstract.mutable_data(), nullptr);
  EXPECT_TRUE(std::move(abstract).Freeze().is_abstract());
  EXPECT_THROW(ArrayBuilder(DType::kF32, {2}).data<int32_t>(), Error);

  Runtime runtime(Mesh::Iota({2}, {"x"}), RuntimeOptions{.num_threads = 1, .device_memory_bytes = 1000});
  std::vector<Array> made(2);
  std::vector<int> refused(2);
  runtime.Run([&](DeviceContext& d) {
    made[d.position()] = ArrayBuilder(DType::kF64, {10}, {.abstract = true}).Freeze();
    try {
      ArrayBuilder too_big(DType::kF64, {1000});
    } catch (const Error& e) {
      refused[d.position()] = e.code() == ErrorCode::kResourceExhausted;
    }
  });
  EXPECT_EQ(made[1].charged_position(), 1);
  EXPECT_EQ(runtime.memory_stats(1).in_use_bytes, 80);  // the refused builder charged nothing
  EXPECT_EQ(refused, (std::vector<int>{1, 1}));
}

TEST(Array, RandomShapesRoundTripThroughToDoubles) {
  std::srand(42);
  for (int trial = 0; trial < 50; ++trial) {
    std::vector<int64_t> shape;
    int rank = std::rand() % 4;
    for (int i = 0; i < rank; ++i) shape.push_back(std::rand() % 4);
    int64_t n = NumElements(shape);
    std::vector<int32_t> values(n);
    for (auto& v : values) v = std::rand() % 1000 - 500;
    Array a = Array::FromVector(values, shape);
    std::vector<double> back = a.ToDoubles();
    ASSERT_EQ(back.size(), values.size());
    for (int64_t i = 0; i < n; ++i) EXPECT_EQ(back[i], values[i]);
  }
}

// The pool of freed buffers of >= 1 MiB (sim/array.cc): a size comes back; the pool holds at most
// max(256 MiB, the bytes of large buffers in use) and makes room by freeing the buffers returned longest ago.
// The buffers are allocated and never written, so no page of them is resident. Sizes are unique to this test.
TEST(BufferPool, ReusesASizeAndIsBoundedByWhatIsInUseEvictingTheLeastRecentlyReturned) {
  using internal::Buffer;
  using internal::GetBufferPoolStats;
  ASSERT_EQ(GetBufferPoolStats().in_use_bytes, 0);
  const int64_t a = 100 * kMiB + 64;
  void* first = nullptr;
  {
    auto buffer = Buffer::Allocate(a);
    first = buffer->data();
    EXPECT_EQ(GetBufferPoolStats().in_use_bytes, a);
  }
  {
    auto buffer = Buffer::Allocate(a);
    EXPECT_EQ(buffer->data(), first);
  }
  {
    auto x = Buffer::Allocate(a);
    auto y = Buffer::Allocate(a);
  }
  EXPECT_GE(GetBufferPoolStats().pooled_bytes, 2 * a);
  // Nothing in use, so the bound is 256 MiB: the two `a` buffers (and anything older) make room for `b`.
  const int64_t b = 200 * kMiB + 128;
  { auto z = Buffer::Allocate(b); }
  auto stats = GetBufferPoolStats();
  EXPECT_EQ(stats.pooled_bytes, b);
  EXPECT_EQ(stats.pooled_buffers, 1);
  // A buffer larger than the bound is freed, not pooled.
  { auto big = Buffer::Allocate(300 * kMiB + 192); }
  EXPECT_EQ(GetBufferPoolStats().pooled_bytes, b);
  // With 3 x 128 MiB in use the bound is 384 MiB: two returned 150 MiB buffers are kept, `b` (older) goes.
  const int64_t held_size = 128 * kMiB + 256, c = 150 * kMiB + 320;
  {
    std::vector<std::shared_ptr<Buffer>> held;
    for (int i = 0; i < 3; ++i) held.push_back(Buffer::Allocate(held_size));
    {
      auto p = Buffer::Allocate(c);
      auto q = Buffer::Allocate(c);
    }
    stats = GetBufferPoolStats();
    EXPECT_EQ(stats.in_use_bytes, 3 * held_size);
    EXPECT_EQ(stats.pooled_bytes, 2 * c);
    EXPECT_EQ(stats.pooled_buffers, 2);
  }
  // As the held buffers are freed the bound falls back to 256 MiB, and the pool with it.
  stats = GetBufferPoolStats();
  EXPECT_EQ(stats.in_use_bytes, 0);
  EXPECT_LE(stats.pooled_bytes, 256 * kMiB);
  EXPECT_GT(stats.pooled_bytes, 0);
}

}  // namespace
}  // namespace spmdsim
