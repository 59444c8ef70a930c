// Tests of scenario/npy.h. Expected headers were produced by numpy's np.save (numpy/lib/format.py) with
// /usr/bin/python3, e.g. np.save(f, np.arange(6, dtype=np.float32).reshape(2, 3)).
#include "scenario/npy.h"

#include <cstring>
#include <filesystem>
#include <random>
#include <string>

#include <gtest/gtest.h>

#include "common/error.h"

namespace spmdsim {
namespace {

std::string Prefix(int version, size_t header_len) {
  std::string out("\x93NUMPY", 6);
  out.push_back(static_cast<char>(version));
  out.push_back(0);
  out.push_back(static_cast<char>(header_len & 0xff));
  out.push_back(static_cast<char>(header_len >> 8));
  if (version > 1) out.append(2, '\0');
  return out;
}

// numpy's header for a dict, padded so that the data starts at a multiple of 64.
std::string NumpyFile(const std::string& dict, const std::string& data, int version = 1) {
  size_t prefix = version == 1 ? 10 : 12;
  size_t total = prefix + dict.size() + 1;
  size_t padded = (total + 63) / 64 * 64;
  std::string header = dict + std::string(padded - total, ' ') + "\n";
  return Prefix(version, header.size()) + header + data;
}

template <typename T>
std::vector<uint8_t> Bytes(const std::vector<T>& values) {
  std::vector<uint8_t> out(values.size() * sizeof(T));
  std::memcpy(out.data(), values.data(), out.size());
  return out;
}

TEST(Npy, WritesTheSameBytesAsNumpySave) {
  NpyArray a{DType::kF32, {2, 3}, Bytes<float>({0, 1, 2, 3, 4, 5})};
  std::string bytes = SerializeNpy(a);
  // np.save: header_len 0x76 = 118, total 152 bytes.
  EXPECT_EQ(bytes.size(), 152u);
  EXPECT_EQ(bytes.substr(0, 10), Prefix(1, 118));
  EXPECT_EQ(bytes.substr(10, 59), "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }");
  EXPECT_EQ(bytes[127], '\n');
  EXPECT_EQ(bytes, NumpyFile("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }",
                             std::string(reinterpret_cast<const char*>(a.data.data()), a.data.size())));
}

TEST(Npy, WritesOneDimensionalAndScalarShapesAsPythonTuples) {
  std::string one = SerializeNpy({DType::kBool, {4}, {1, 0, 1, 1}});
  EXPECT_NE(one.find("{'descr': '|b1', 'fortran_order': False, 'shape': (4,), }"), std::string::npos);
  EXPECT_EQ(one.size(), 132u);  // np.save(np.array([True, False, True, True]))
  std::string scalar = SerializeNpy({DType::kF16, {}, {0x00, 0x3e}});
  EXPECT_NE(scalar.find("'shape': (), }"), std::string::npos);
  EXPECT_EQ(scalar.size(), 130u);  // np.save(np.float16(1.5) * np.ones((), np.float16))
}

TEST(Npy, RoundTripsEveryDtypeThroughAFile) {
  std::mt19937_64 rng(7);
  std::string dir = ::testing::TempDir();
  for (DType dtype : {DType::kF32, DType::kF64, DType::kF16, DType::kI32, DType::kI64, DType::kBool}) {
    for (int trial = 0; trial < 5; ++trial) {
      NpyArray a;
      a.dtype = dtype;
      int rank = static_cast<int>(rng() % 4);
      for (int d = 0; d < rank; ++d) a.shape.push_back(static_cast<int64_t>(rng() % 5));
      a.data.resize(a.num_elements() * DTypeSize(dtype));
      for (uint8_t& b : a.data)
        b = dtype == DType::kBool ? static_cast<uint8_t>(rng() % 2) : static_cast<uint8_t>(rng());
      std::string path = dir + "npy_roundtrip_" + std::string(DTypeName(dtype)) + ".npy";
      WriteNpy(path, a);
      NpyArray b = ReadNpy(path);
      EXPECT_EQ(b.dtype, a.dtype);
      EXPECT_EQ(b.shape, a.shape);
      EXPECT_EQ(b.data, a.data);
    }
  }
}

TEST(Npy, WidensBfloat16ToFloat32Exactly) {
  // bf16 1.0 = 0x3f80, -2.5 = 0xc020: the float32 bits are the bf16 bits followed by 16 zero bits.
  NpyArray a{DType::kBF16, {2}, {0x80, 0x3f, 0x20, 0xc0}};
  NpyArray b = ParseNpy(SerializeNpy(a), "bf16");
  ASSERT_EQ(b.dtype, DType::kF32);
  float values[2];
  std::memcpy(values, b.data.data(), 8);
  EXPECT_EQ(values[0], 1.0f);
  EXPECT_EQ(values[1], -2.5f);
}

TEST(Npy, ReadsFortranOrderIntoRowMajor) {
  // np.asfortranarray(np.arange(6, dtype=np.int64).reshape(2, 3)) stores 0 3 1 4 2 5.
  std::string file = NumpyFile("{'descr': '<i8', 'fortran_order': True, 'shape': (2, 3), }",
                               std::string(reinterpret_cast<const char*>(Bytes<int64_t>({0, 3, 1, 4, 2, 5}).data()),
                                           48));
  NpyArray a = ParseNpy(file, "f.npy");
  EXPECT_EQ(a.shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(a.data, Bytes<int64_t>({0, 1, 2, 3, 4, 5}));
}

TEST(Npy, ReadsVersionTwoHeaders) {
  std::string data(reinterpret_cast<const char*>(Bytes<double>({1, 2, 3}).data()), 24);
  NpyArray a = ParseNpy(NumpyFile("{'descr': '<f8', 'fortran_order': False, 'shape': (3,), }", data, 2), "v2.npy");
  EXPECT_EQ(a.dtype, DType::kF64);
  EXPECT_EQ(a.shape, std::vector<int64_t>{3});
}

void ExpectError(const std::string& bytes, const std::string& fragment) {
  try {
    ParseNpy(bytes, "bad.npy");
    ADD_FAILURE() << "no error; expected one mentioning " << fragment;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("bad.npy"), std::string::npos) << e.what();
  }
}

TEST(Npy, RejectsBadFilesNamingWhatIsWrong) {
  ExpectError("hello", "not a .npy file");
  ExpectError(Prefix(4, 0), "version 4.0");
  ExpectError(Prefix(1, 500) + "{}", "header says 500 bytes");
  ExpectError(NumpyFile("{'descr': '>f4', 'fortran_order': False, 'shape': (1,), }", "abcd"), "big-endian");
  ExpectError(NumpyFile("{'descr': '<c8', 'fortran_order': False, 'shape': (1,), }", "abcdabcd"), "valid: '<f4'");
  ExpectError(NumpyFile("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", "abcd"), "needs 8 bytes");
  ExpectError(NumpyFile("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), 'x': 1}", "abcd"),
              "unknown header key 'x'");
  ExpectError(NumpyFile("{'descr': '<f4', 'shape': (1,), }", "abcd"), "lacks");
  ExpectError(NumpyFile("{'descr': '<f4', 'fortran_order': Maybe, 'shape': (1,), }", "abcd"), "neither True nor False");
  ExpectError(NumpyFile("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999, 99999999999, 99999999999), }",
                        ""),
              "more than 2^63");
  ExpectError(NumpyFile("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (1,), }", "abcd"), "structured");
}

TEST(Npy, NeverCrashesOnTruncatedOrMutatedFiles) {
  std::string good = SerializeNpy({DType::kI32, {2, 2}, Bytes<int32_t>({1, 2, 3, 4})});
  std::mt19937 rng(11);
  int errors = 0;
  for (size_t cut = 0; cut < good.size(); ++cut) {
    try {
      ParseNpy(good.substr(0, cut), "cut.npy");
    } catch (const Error&) {
      ++errors;
    }
  }
  EXPECT_EQ(errors, static_cast<int>(good.size()));  // every proper prefix is rejected
  for (int trial = 0; trial < 2000; ++trial) {
    std::string bytes = good;
    for (int k = 0; k < 3; ++k) bytes[rng() % bytes.size()] = static_cast<char>(rng());
    try {
      NpyArray a = ParseNpy(bytes, "mutated.npy");
      EXPECT_EQ(static_cast<int64_t>(a.data.size()), a.num_elements() * DTypeSize(a.dtype));
    } catch (const Error&) {
    }
  }
}

TEST(Npy, ReportsAMissingFile) {
  try {
    ReadNpy("/nonexistent/x.npy");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kNotFound);
    EXPECT_NE(std::string(e.what()).find("/nonexistent/x.npy"), std::string::npos);
  }
}

TEST(Npy, RefusesToWriteInconsistentArrays) {
  EXPECT_THROW(SerializeNpy({DType::kC64, {1}, {0, 0, 0, 0, 0, 0, 0, 0}}), Error);
  EXPECT_THROW(SerializeNpy({DType::kF32, {3}, {0, 0, 0, 0}}), Error);
  EXPECT_THROW(SerializeNpy({DType::kF32, {-1}, {}}), Error);
  EXPECT_THROW(WriteNpy("/nonexistent/dir/x.npy", {DType::kF32, {1}, {0, 0, 0, 0}}), Error);
}

}  // namespace
}  // namespace spmdsim
