#include "common/file.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <system_error>

#include "common/error.h"
#include "common/user_text.h"

namespace spmdsim {
namespace {

std::string_view FileTypeName(std::filesystem::file_type type) {
  switch (type) {
    case std::filesystem::file_type::directory: return "a directory";
    case std::filesystem::file_type::character:
    case std::filesystem::file_type::block: return "a device";
    case std::filesystem::file_type::fifo: return "a pipe";
    case std::filesystem::file_type::socket: return "a socket";
    default: return "not a regular file";
  }
}

}  // namespace

namespace {

// Checks `path` as ReadFileBounded does and returns its size.
int64_t CheckedFileSize(const std::string& path, int64_t max_bytes, std::string_view what) {
  namespace fs = std::filesystem;
  const std::string quoted = QuoteForError(path);
  std::error_code ec;
  fs::file_status status = fs::status(path, ec);
  if (ec || status.type() == fs::file_type::not_found)
    Throw(ErrorCode::kNotFound, "cannot read {} {}: no such file", what, quoted);
  if (status.type() != fs::file_type::regular)
    Throw(ErrorCode::kInvalidArgument, "cannot read {} {}: it is {}; give the path of a regular file", what, quoted,
          FileTypeName(status.type()));
  const uintmax_t size = fs::file_size(path, ec);
  if (ec) Throw(ErrorCode::kNotFound, "cannot read {} {}: {}", what, quoted, ec.message());
  if (size > static_cast<uintmax_t>(max_bytes))
    Throw(ErrorCode::kInvalidArgument, "cannot read {} {}: it is {} bytes, more than the limit of {} bytes", what,
          quoted, size, max_bytes);
  return static_cast<int64_t>(size);
}

}  // namespace

std::string ReadFileBounded(const std::string& path, int64_t max_bytes, std::string_view what) {
  const int64_t size = CheckedFileSize(path, max_bytes, what);
  const std::string quoted = QuoteForError(path);
  std::ifstream in(path, std::ios::binary);
  if (!in) Throw(ErrorCode::kNotFound, "cannot read {} {}: cannot open it", what, quoted);
  // Read at most max_bytes + 1 even if the file grew since it was measured.
  std::string text(static_cast<size_t>(size), '\0');
  in.read(text.data(), static_cast<std::streamsize>(size));
  text.resize(static_cast<size_t>(in.gcount()));
  if (in.peek() != std::char_traits<char>::eof())
    Throw(ErrorCode::kInvalidArgument, "cannot read {} {}: it grew while being read", what, quoted);
  return text;
}

std::string ReadFileHead(const std::string& path, int64_t max_bytes, int64_t head_bytes, std::string_view what,
                         int64_t* file_size) {
  const int64_t size = CheckedFileSize(path, max_bytes, what);
  std::ifstream in(path, std::ios::binary);
  if (!in) Throw(ErrorCode::kNotFound, "cannot read {} {}: cannot open it", what, QuoteForError(path));
  std::string head(static_cast<size_t>(std::min(size, head_bytes)), '\0');
  in.read(head.data(), static_cast<std::streamsize>(head.size()));
  head.resize(static_cast<size_t>(in.gcount()));
  *file_size = size;
  return head;
}

}  // namespace spmdsim
