// The scenario's arrays made concrete (scenario/arrays.h).
#include "scenario/arrays.h"

#include <algorithm>
#include <cstring>
#include <fstream>

#include <fmt/format.h>

#include "common/error.h"
#include "common/host_memory.h"
#include "common/strings.h"
#include "common/user_text.h"
#include "ops/elementwise.h"
#include "ops/random.h"
#include "sim/array_builder.h"

namespace spmdsim {
namespace {

// Error(kInvalidArgument) when the file now holds another dtype or shape than the header read at load time.
// REQUIRES: a.init.npy (the callers check it before they read the file).
void CheckFileUnchanged(const ScenarioArray& a, DType dtype, const std::vector<int64_t>& shape) {
  if (dtype != a.init.npy->dtype || shape != a.init.npy->shape)
    Throw(ErrorCode::kInvalidArgument, "{}: the file changed since the scenario was loaded: it holds {} {}, not {} {}",
          a.init.path, DTypeName(dtype), PyTuple(shape), DTypeName(a.init.npy->dtype), PyTuple(a.init.npy->shape));
}

// The file's header again (it may have changed since the scenario was loaded), checked by CheckFileUnchanged.
NpyHeader CheckedNpyHeader(const ScenarioArray& a) {
  SPMDSIM_CHECK(a.init.npy.has_value(), "npy array without a header");
  NpyHeader now = ReadNpyHeader(a.init.path);
  CheckFileUnchanged(a, now.dtype, now.shape);
  return now;
}

// The whole file, read once; its header checked by CheckFileUnchanged.
NpyArray ReadNpyAgain(const ScenarioArray& a) {
  SPMDSIM_CHECK(a.init.npy.has_value(), "npy array without a header");
  NpyArray now = ReadNpy(a.init.path);
  CheckFileUnchanged(a, now.dtype, now.shape);
  return now;
}

// The blocks of an npy-backed array, each read from the file as runs of contiguous elements (a Fortran-order
// file is read whole and cut).
std::vector<NpyArray> ReadNpyBlocks(const ScenarioArray& a, const std::vector<std::vector<IndexRange>>& blocks) {
  const NpyHeader header = CheckedNpyHeader(a);
  const int64_t itemsize = DTypeSize(header.dtype);
  std::vector<NpyArray> out;
  if (header.fortran_order && header.shape.size() > 1) {
    const NpyArray whole = ReadNpy(a.init.path);
    for (const auto& index : blocks) {
      NpyArray b{header.dtype, {}, {}};
      for (const IndexRange& r : index) b.shape.push_back(r.size());
      b.data.resize(static_cast<size_t>(b.num_elements() * itemsize));
      if (!b.data.empty())
        CopyBlockOut(reinterpret_cast<const std::byte*>(whole.data.data()), header.shape, index,
                     static_cast<size_t>(itemsize), reinterpret_cast<std::byte*>(b.data.data()));
      out.push_back(std::move(b));
    }
    return out;
  }
  std::ifstream in(a.init.path, std::ios::binary);
  if (!in) Throw(ErrorCode::kNotFound, "cannot read .npy file {}: cannot open it", QuoteForError(a.init.path));
  for (const auto& index : blocks) {
    NpyArray b{header.dtype, {}, {}};
    for (const IndexRange& r : index) b.shape.push_back(r.size());
    b.data.resize(static_cast<size_t>(b.num_elements() * itemsize));
    size_t filled = 0;
    const std::vector<int64_t> starts = BlockRunStarts(header.shape, index);
    const int64_t length = index.empty() ? 1 : index.back().size();
    for (size_t i = 0; i < starts.size();) {
      size_t j = i + 1;  // merge runs that follow one another in the file
      while (j < starts.size() && starts[j] == starts[j - 1] + length) ++j;
      const int64_t bytes = static_cast<int64_t>(j - i) * length * itemsize;
      in.seekg(header.data_offset + starts[i] * itemsize);
      in.read(reinterpret_cast<char*>(b.data.data() + filled), bytes);
      if (in.gcount() != bytes)
        Throw(ErrorCode::kInvalidArgument, "{}: the file ended while reading a block of the array", a.init.path);
      filled += static_cast<size_t>(bytes);
      i = j;
    }
    out.push_back(std::move(b));
  }
  return out;
}

// The file's elements as an array of `dtype` (the array's; a float32 file may back a bfloat16 array: rounded as
// Cast rounds).
Array FromNpy(const NpyArray& npy, DType dtype) {
  ArrayBuilder stored(npy.dtype, npy.shape);
  if (!npy.data.empty()) std::memcpy(stored.mutable_data(), npy.data.data(), npy.data.size());
  Array array = std::move(stored).Freeze();
  return array.dtype() == dtype ? array : Cast(array, dtype);
}

std::vector<int64_t> BlockShape(const std::vector<IndexRange>& index) {
  std::vector<int64_t> shape;
  for (const IndexRange& r : index) shape.push_back(r.size());
  return shape;
}

// Blocks of iota values, streamed in flat order as the random fills are.
std::vector<Array> IotaBlocks(const ScenarioArray& a, const std::vector<std::vector<IndexRange>>& blocks) {
  return BlocksOfValues(a.shape, a.dtype, blocks, [](int64_t n, const ValueChunk& chunk) {
    std::vector<double> values;
    for (int64_t first = 0; first < n; first += kValueChunk) {
      values.resize(static_cast<size_t>(std::min(kValueChunk, n - first)));
      for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<double>(first + static_cast<int64_t>(i));
      if (!chunk(first, values)) return;
    }
  });
}

}  // namespace

Array MakeScenarioArray(const ScenarioArray& a, bool abstract) {
  if (abstract) return Array::Abstract(a.shape, a.dtype);
  CheckFitsHostMemory(fmt::format("array '{}' ({} {})", a.name, DTypeName(a.dtype), PyTuple(a.shape)),
                      ArrayBytes(a.shape, DTypeSize(a.dtype)));
  switch (a.init.kind) {
    case ArrayInit::Kind::kZeros: return Array::Zeros(a.shape, a.dtype);
    case ArrayInit::Kind::kOnes: return Array::Full(a.shape, a.dtype, 1.0);
    case ArrayInit::Kind::kIota: return Array::Iota(a.shape, a.dtype);
    case ArrayInit::Kind::kRandom: return RandomArray(a.shape, a.dtype, a.init.random);
    case ArrayInit::Kind::kNpy: return FromNpy(ReadNpyAgain(a), a.dtype);
  }
  SPMDSIM_CHECK(false, "unknown init");
  return Array();
}

std::vector<Array> MakeScenarioArrayBlocks(const ScenarioArray& a, const std::vector<std::vector<IndexRange>>& blocks) {
  int64_t bytes = 0;
  for (const auto& index : blocks) bytes += ArrayBytes(BlockShape(index), DTypeSize(a.dtype));
  CheckFitsHostMemory(fmt::format("{} block(s) of array '{}' ({} {})", blocks.size(), a.name, DTypeName(a.dtype),
                                  PyTuple(a.shape)),
                      bytes);
  std::vector<Array> out;
  switch (a.init.kind) {
    case ArrayInit::Kind::kZeros:
    case ArrayInit::Kind::kOnes:
      for (const auto& index : blocks) {
        out.push_back(a.init.kind == ArrayInit::Kind::kZeros ? Array::Zeros(BlockShape(index), a.dtype)
                                                             : Array::Full(BlockShape(index), a.dtype, 1.0));
      }
      return out;
    case ArrayInit::Kind::kNpy:
      for (const NpyArray& block : ReadNpyBlocks(a, blocks)) out.push_back(FromNpy(block, a.dtype));
      return out;
    case ArrayInit::Kind::kRandom: return RandomArrayBlocks(a.shape, a.dtype, a.init.random, blocks);
    case ArrayInit::Kind::kIota: return IotaBlocks(a, blocks);
  }
  SPMDSIM_CHECK(false, "unknown init");
  return out;
}

NpyArray ToNpy(const Array& array) {
  NpyArray out;
  out.dtype = array.dtype();
  out.shape = array.shape();
  const auto* bytes = static_cast<const uint8_t*>(array.raw_data());
  if (bytes == nullptr)
    Throw(ErrorCode::kFailedPrecondition, "cannot write an abstract array {} to .npy", array.ShapeString());
  out.data.assign(bytes, bytes + array.nbytes());
  return out;
}

}  // namespace spmdsim
