// NumPy .npy files: the format `numpy.save` writes and `numpy.load` reads (numpy/lib/format.py, "NPY format
// version 1.0/2.0/3.0"), for the dtypes spmdsim supports.
//
// Layout: the magic "\x93NUMPY", a major and a minor version byte, the header length (uint16 little-endian in
// version 1, uint32 in versions 2 and 3), then an ASCII (v3: UTF-8) Python dict literal
//   {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
// padded with spaces and a final '\n' so that the data starts at a multiple of 64 bytes, then the elements.
//
// Supported dtypes (numpy name -> descr): float32 '<f4', float64 '<f8', float16 '<f2', int32 '<i4',
// int64 '<i8', bool '|b1' ('<b1' and '>b1' are accepted too: one byte has no order). numpy has no bfloat16;
// WriteNpy stores a "bfloat16" array as '<f4' (exact widening), so `numpy.load` reads it without ml_dtypes.
// Big-endian data ('>f4') and other dtypes are rejected with the list above. Fortran-order files are read
// and reordered to C (row-major) order.
//
// Example:
//   NpyArray a{DType::kF32, {2, 3}, bytes_of({0, 1, 2, 3, 4, 5})};
//   WriteNpy("/tmp/a.npy", a);   // numpy.load("/tmp/a.npy") -> array([[0., 1., 2.], [3., 4., 5.]], dtype=float32)
//   NpyArray b = ReadNpy("/tmp/a.npy");   // b.dtype == DType::kF32, b.shape == {2, 3}, b.data.size() == 24
//
// Errors: Error(kInvalidArgument) naming the file (or `what`) and what is wrong (bad magic, truncated header,
// unknown key, unsupported descr, data length that does not match the shape); Error(kNotFound) for a file
// that cannot be opened. Never a crash, whatever the bytes (tests/scenario/npy_test.cc, fuzz/).
#ifndef SPMDSIM_SCENARIO_NPY_H_
#define SPMDSIM_SCENARIO_NPY_H_

#include <cstdint>
#include <string>
#include <span>
#include <string_view>
#include <vector>

#include "common/dtype.h"

namespace spmdsim {

// One array as stored in a .npy file: numpy dtype name, shape, and the elements in C order, little-endian.
struct NpyArray {
  DType dtype = DType::kF32;    // float32, float64, float16, bfloat16 (write only), int32, int64, bool
  std::vector<int64_t> shape;   // () for a scalar
  std::vector<uint8_t> data;    // product(shape) * itemsize bytes

  int64_t num_elements() const;
};

// What a .npy file's header says, and where its data lies (C or Fortran order, little-endian).
struct NpyHeader {
  DType dtype = DType::kF32;    // as NpyArray::dtype
  std::vector<int64_t> shape;
  bool fortran_order = false;
  int64_t data_offset = 0;      // bytes before the first element
  int64_t data_bytes = 0;       // product(shape) * itemsize
};

// The dtypes .npy files hold here (bfloat16 is written widened to float32).
std::span<const DType> NpyDTypes();

// Parses the bytes of a .npy file; `what` names the source in errors (a path).
NpyArray ParseNpy(std::string_view bytes, std::string_view what);
// Reads a regular file of at most kMaxNpyFileBytes (common/file.h) and parses it.
NpyArray ReadNpy(const std::string& path);
// Reads and checks only the header of such a file (at most its first 1 MiB), and that the file holds exactly the
// shape's data after it: the same errors as ReadNpy, without reading the data (a rank reads its blocks later).
NpyHeader ReadNpyHeader(const std::string& path);

// The bytes of a version 1.0 file (2.0 when the header does not fit in 65535 bytes).
// REQUIRES: a supported dtype and data.size() == num_elements * itemsize (Error(kInvalidArgument) otherwise).
std::string SerializeNpy(const NpyArray& array);
// Throws Error(kInvalidArgument) naming the path when it cannot be written.
void WriteNpy(const std::string& path, const NpyArray& array);

}  // namespace spmdsim

#endif  // SPMDSIM_SCENARIO_NPY_H_
