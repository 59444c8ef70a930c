// Bounded reads of the files users name (scenario files, rules files, .npy inputs).
//
// Every reader of a user-named file goes through ReadFileBounded: a path that is a directory, a device (e.g.
// /dev/zero, which never ends), a FIFO or a missing file, and a file larger than `max_bytes`, is refused with
// Error(kInvalidArgument or kNotFound) whose message names `what`, the path and what would be valid, instead
// of reading forever or exhausting the host's memory.
//
// Example:
//   std::string text = ReadFileBounded(path, kMaxTextFileBytes, "scenario file");
//   // "/dev/zero": "cannot read scenario file '/dev/zero': not a regular file (a device); give a path to a file"
#ifndef SPMDSIM_COMMON_FILE_H_
#define SPMDSIM_COMMON_FILE_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "common/strings.h"

namespace spmdsim {

// The largest text file (scenario, rules) spmdsim reads: 16 MiB. Hand-written scenario files are a few KiB.
inline constexpr int64_t kMaxTextFileBytes = 16 * kMiB;
// The largest .npy input file: 4 GiB (the array is then also checked against the host's memory).
inline constexpr int64_t kMaxNpyFileBytes = 4 * kGiB;

// The whole content of the regular file at `path`, at most `max_bytes` long. `what` names the file's role in
// messages ("scenario file", "--rules-file"). Throws Error(kNotFound) when it does not exist or cannot be
// opened, Error(kInvalidArgument) when it is not a regular file or is larger than `max_bytes`.
// Thread-safe (no shared state).
std::string ReadFileBounded(const std::string& path, int64_t max_bytes, std::string_view what);

// The same checks as ReadFileBounded, but only the first `head_bytes` bytes (fewer when the file is shorter) are
// read; the file's size goes to `*file_size`. For a format whose header says where the data lies (.npy).
std::string ReadFileHead(const std::string& path, int64_t max_bytes, int64_t head_bytes, std::string_view what,
                         int64_t* file_size);

}  // namespace spmdsim

#endif  // SPMDSIM_COMMON_FILE_H_
