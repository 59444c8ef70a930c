#include "scenario/npy.h"

#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>
#include <sstream>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "common/error.h"
#include "common/file.h"
#include "common/shape.h"
#include "common/strings.h"

namespace spmdsim {
namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicSize = 6;

struct DTypeInfo {
  DType dtype;
  std::string_view descr;  // what we write
};

constexpr DTypeInfo kDTypes[] = {
    {DType::kF32, "<f4"}, {DType::kF64, "<f8"}, {DType::kF16, "<f2"}, {DType::kI32, "<i4"},
    {DType::kI64, "<i8"}, {DType::kBool, "|b1"}, {DType::kBF16, "<f4"},
};
constexpr DType kNpyDTypes[] = {DType::kF32, DType::kF64, DType::kF16, DType::kI32,
                                DType::kI64, DType::kBool, DType::kBF16};

std::optional<DTypeInfo> Find(DType dtype) {
  for (const DTypeInfo& info : kDTypes)
    if (info.dtype == dtype) return info;
  return std::nullopt;
}

std::string NpyDTypeList() {
  std::string out;
  for (DType d : kNpyDTypes) out += (out.empty() ? "" : ", ") + std::string(DTypeName(d));
  return out;
}

// descr -> dtype for reading ('|b1', '<b1', '>b1' are all bool; '=' and '|' mean native = little here).
std::optional<DType> DTypeFromDescr(std::string_view descr) {
  if (descr.size() < 2) return std::nullopt;
  char order = descr[0];
  std::string_view rest = descr.substr(1);
  if (rest == "b1") return DType::kBool;
  if (order != '<' && order != '|' && order != '=') return std::nullopt;
  if (rest == "f4") return DType::kF32;
  if (rest == "f8") return DType::kF64;
  if (rest == "f2") return DType::kF16;
  if (rest == "i4") return DType::kI32;
  if (rest == "i8") return DType::kI64;
  return std::nullopt;
}

// A tiny reader for the Python dict literal in the header.
class HeaderParser {
 public:
  HeaderParser(std::string_view text, std::string_view what) : text_(text), what_(what) {}

  void Parse(std::string* descr, bool* fortran, std::vector<int64_t>* shape) {
    bool has_descr = false, has_fortran = false, has_shape = false;
    Expect('{');
    while (true) {
      SkipSpace();
      if (Peek() == '}') {
        ++pos_;
        break;
      }
      std::string key = ReadString();
      Expect(':');
      if (key == "descr") {
        SkipSpace();
        if (Peek() != '\'' && Peek() != '"')
          Fail("'descr' is not a string (structured dtypes are not supported)");
        *descr = ReadString();
        has_descr = true;
      } else if (key == "fortran_order") {
        *fortran = ReadBool();
        has_fortran = true;
      } else if (key == "shape") {
        *shape = ReadTuple();
        has_shape = true;
      } else {
        Fail(fmt::format("unknown header key '{}'; valid keys are 'descr', 'fortran_order', 'shape'", key));
      }
      SkipSpace();
      if (Peek() == ',') {
        ++pos_;
        continue;
      }
      Expect('}');
      break;
    }
    if (!has_descr || !has_fortran || !has_shape)
      Fail("header lacks one of 'descr', 'fortran_order', 'shape'");
  }

 private:
  [[noreturn]] void Fail(const std::string& message) const {
    Throw(ErrorCode::kInvalidArgument, "{}: bad .npy header at byte {} of the header dict: {}", what_, pos_,
          message);
  }
  char Peek() const { return pos_ < text_.size() ? text_[pos_] : '\0'; }
  void SkipSpace() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\t' || text_[pos_] == '\n' ||
                                   text_[pos_] == '\r'))
      ++pos_;
  }
  void Expect(char c) {
    SkipSpace();
    if (Peek() != c) Fail(fmt::format("expected '{}'", c));
    ++pos_;
  }
  std::string ReadString() {
    SkipSpace();
    char quote = Peek();
    if (quote != '\'' && quote != '"') Fail("expected a quoted key or string");
    ++pos_;
    size_t end = text_.find(quote, pos_);
    if (end == std::string_view::npos) Fail("unterminated string");
    std::string out(text_.substr(pos_, end - pos_));
    pos_ = end + 1;
    return out;
  }
  bool ReadBool() {
    SkipSpace();
    if (text_.substr(pos_, 4) == "True") {
      pos_ += 4;
      return true;
    }
    if (text_.substr(pos_, 5) == "False") {
      pos_ += 5;
      return false;
    }
    Fail("'fortran_order' is neither True nor False");
  }
  std::vector<int64_t> ReadTuple() {
    Expect('(');
    std::vector<int64_t> dims;
    while (true) {
      SkipSpace();
      if (Peek() == ')') {
        ++pos_;
        return dims;
      }
      size_t start = pos_;
      while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9') ++pos_;
      // numpy may write 'L' suffixes (Python 2 files).
      std::string_view digits = text_.substr(start, pos_ - start);
      if (Peek() == 'L') ++pos_;
      if (digits.empty()) Fail("'shape' holds something other than non-negative integers");
      if (digits.size() > 18) Fail(fmt::format("shape entry {} is too large", digits));
      int64_t value = 0;
      for (char c : digits) value = value * 10 + (c - '0');
      dims.push_back(value);
      if (dims.size() > 64) Fail("shape has more than 64 dimensions");
      SkipSpace();
      if (Peek() == ',') {
        ++pos_;
        continue;
      }
      Expect(')');
      return dims;
    }
  }

  std::string_view text_;
  std::string_view what_;
  size_t pos_ = 0;
};

uint32_t ReadLe(std::string_view bytes, size_t offset, int width) {
  uint32_t value = 0;
  for (int i = width - 1; i >= 0; --i) value = (value << 8) | static_cast<uint8_t>(bytes[offset + i]);
  return value;
}

// Product of dims, or nullopt on overflow past int64.
std::optional<int64_t> CheckedProduct(const std::vector<int64_t>& dims, int64_t itemsize) {
  int64_t n = itemsize;
  for (int64_t d : dims) {
    if (d != 0 && n > std::numeric_limits<int64_t>::max() / d) return std::nullopt;
    n *= d;
  }
  return n;
}

}  // namespace

int64_t NpyArray::num_elements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::span<const DType> NpyDTypes() { return kNpyDTypes; }

namespace {

// The header at the start of `bytes`, for a file of `file_size` bytes (bytes may be only its head).
NpyHeader ParseHeader(std::string_view bytes, int64_t file_size, std::string_view what) {
  if (bytes.size() < kMagicSize + 2 || std::memcmp(bytes.data(), kMagic, kMagicSize) != 0)
    Throw(ErrorCode::kInvalidArgument, "{}: not a .npy file (it does not start with \\x93NUMPY)", what);
  int major = static_cast<uint8_t>(bytes[6]);
  int minor = static_cast<uint8_t>(bytes[7]);
  if (major < 1 || major > 3 || minor != 0)
    Throw(ErrorCode::kInvalidArgument, "{}: .npy format version {}.{} is not supported; valid: 1.0, 2.0, 3.0",
          what, major, minor);
  int width = major == 1 ? 2 : 4;
  size_t prefix = kMagicSize + 2 + width;
  if (bytes.size() < prefix) Throw(ErrorCode::kInvalidArgument, "{}: truncated .npy header", what);
  uint64_t header_len = ReadLe(bytes, kMagicSize + 2, width);
  if (header_len > static_cast<uint64_t>(file_size) - prefix)
    Throw(ErrorCode::kInvalidArgument, "{}: the .npy header says {} bytes but the file has only {} after it",
          what, header_len, static_cast<uint64_t>(file_size) - prefix);
  if (header_len > bytes.size() - prefix)
    Throw(ErrorCode::kInvalidArgument, "{}: the .npy header of {} bytes is longer than the {} bytes read", what,
          header_len, bytes.size() - prefix);
  std::string_view header = bytes.substr(prefix, header_len);
  std::string descr;
  NpyHeader out;
  HeaderParser(header, what).Parse(&descr, &out.fortran_order, &out.shape);

  std::optional<DType> dtype = DTypeFromDescr(descr);
  if (!dtype) {
    std::string why = !descr.empty() && descr[0] == '>' ? " (big-endian data is not supported)" : "";
    Throw(ErrorCode::kInvalidArgument,
          "{}: unsupported .npy dtype '{}'{}; valid: '<f4' float32, '<f8' float64, '<f2' float16, '<i4' int32, "
          "'<i8' int64, '|b1' bool",
          what, descr, why);
  }
  out.dtype = *dtype;
  out.data_offset = static_cast<int64_t>(prefix + header_len);
  const int64_t itemsize = DTypeSize(out.dtype);
  std::optional<int64_t> nbytes = CheckedProduct(out.shape, itemsize);
  const int64_t data = file_size - out.data_offset;
  if (!nbytes || *nbytes != data)
    Throw(ErrorCode::kInvalidArgument, "{}: shape {} of {} needs {} bytes of data but the file has {}", what,
          PyTuple(out.shape), DTypeName(out.dtype), nbytes ? fmt::format("{}", *nbytes) : std::string("more than 2^63"),
          data);
  out.data_bytes = *nbytes;
  return out;
}

}  // namespace

NpyArray ParseNpy(std::string_view bytes, std::string_view what) {
  const NpyHeader header = ParseHeader(bytes, static_cast<int64_t>(bytes.size()), what);
  NpyArray out;
  out.dtype = header.dtype;
  out.shape = header.shape;
  const std::vector<int64_t>& shape = out.shape;
  const int64_t itemsize = DTypeSize(out.dtype);
  std::string_view data = bytes.substr(static_cast<size_t>(header.data_offset));
  out.data.assign(data.begin(), data.end());
  if (header.fortran_order && shape.size() > 1) {
    // Element with C index (i0..in-1) is at Fortran offset sum(i_k * prod(d_0..d_{k-1})).
    std::vector<int64_t> fortran_strides(shape.size());
    int64_t stride = 1;
    for (size_t k = 0; k < shape.size(); ++k) {
      fortran_strides[k] = stride;
      stride *= shape[k];
    }
    std::vector<uint8_t> c_order(out.data.size());
    StridedCopy(out.data.data(), 0, fortran_strides, c_order.data(), 0, RowMajorStrides(shape), shape, itemsize);
    out.data = std::move(c_order);
  }
  return out;
}

NpyHeader ReadNpyHeader(const std::string& path) {
  int64_t size = 0;
  const std::string head = ReadFileHead(path, kMaxNpyFileBytes, kMiB, ".npy file", &size);
  return ParseHeader(head, size, path);
}

NpyArray ReadNpy(const std::string& path) {
  return ParseNpy(ReadFileBounded(path, kMaxNpyFileBytes, ".npy file"), path);
}

std::string SerializeNpy(const NpyArray& array) {
  std::optional<DTypeInfo> info = Find(array.dtype);
  if (!info)
    Throw(ErrorCode::kInvalidArgument, "cannot write dtype '{}' to .npy; valid dtypes are {}", DTypeName(array.dtype),
          NpyDTypeList());
  for (int64_t d : array.shape)
    if (d < 0) Throw(ErrorCode::kInvalidArgument, "cannot write shape {}: negative dimension", PyTuple(array.shape));
  std::optional<int64_t> nbytes = CheckedProduct(array.shape, DTypeSize(array.dtype));
  if (!nbytes || static_cast<uint64_t>(*nbytes) != array.data.size())
    Throw(ErrorCode::kInvalidArgument, "array of shape {} and dtype {} needs {} bytes, has {}", PyTuple(array.shape),
          DTypeName(array.dtype), nbytes.value_or(-1), array.data.size());
  std::string shape_text = "(";
  for (size_t i = 0; i < array.shape.size(); ++i) {
    shape_text += fmt::format("{}", array.shape[i]);
    shape_text += array.shape.size() == 1 ? "," : (i + 1 < array.shape.size() ? ", " : "");
  }
  shape_text += ")";
  std::string dict =
      fmt::format("{{'descr': '{}', 'fortran_order': False, 'shape': {}, }}", info->descr, shape_text);
  int version = dict.size() + 1 + kMagicSize + 2 + 2 > 65535 ? 2 : 1;
  size_t prefix = kMagicSize + 2 + (version == 1 ? 2 : 4);
  size_t total = prefix + dict.size() + 1;
  size_t padded = (total + 63) / 64 * 64;
  dict.append(padded - total, ' ');
  dict.push_back('\n');
  std::string out(kMagic, kMagicSize);
  out.push_back(static_cast<char>(version));
  out.push_back(0);
  uint32_t len = static_cast<uint32_t>(dict.size());
  for (int i = 0; i < (version == 1 ? 2 : 4); ++i) out.push_back(static_cast<char>((len >> (8 * i)) & 0xff));
  out += dict;
  if (array.dtype == DType::kBF16) {
    // Widen to float32: the bf16 bits are the high half of the float32 bits.
    size_t n = array.data.size() / 2;
    for (size_t i = 0; i < n; ++i) {
      out.push_back(0);
      out.push_back(0);
      out.push_back(static_cast<char>(array.data[2 * i]));
      out.push_back(static_cast<char>(array.data[2 * i + 1]));
    }
  } else {
    out.append(reinterpret_cast<const char*>(array.data.data()), array.data.size());
  }
  return out;
}

void WriteNpy(const std::string& path, const NpyArray& array) {
  std::string bytes = SerializeNpy(array);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) Throw(ErrorCode::kInvalidArgument, "cannot write .npy file '{}'", path);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out) Throw(ErrorCode::kInvalidArgument, "failed writing .npy file '{}'", path);
}

}  // namespace spmdsim
