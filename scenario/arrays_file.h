// Arrays files (`spmdsim analyze --file`): named array shapes with their specs, for memory analysis.
//
// Format: YAML, a list of arrays or a map with an `arrays:` list; each array is a map
//   {name, shape: [1024, 4096] or "1024x4096", dtype (default float32; any dtype, sized only is fine),
//    spec: "P('dp', None)" text or a list [dp, null, [fsdp, tp]] (default: replicated)}
// read with the same readers as a scenario file's `arrays:`, so errors name file:line:col and the key:
//   "a.yaml:3:5: arrays[0].sepc: unknown key 'sepc'; did you mean 'spec'? valid keys: name, shape, dtype, spec"
//
// Errors: Error(kInvalidArgument, kind ValueError) as above; a bad spec keeps its own kind (SyntaxError, ...).
// Thread safety: free functions; each reads its own file.
#ifndef SPMDSIM_SCENARIO_ARRAYS_FILE_H_
#define SPMDSIM_SCENARIO_ARRAYS_FILE_H_

#include <string>
#include <string_view>
#include <vector>

#include "partition/memory_analysis.h"

namespace spmdsim {

// Parses the text of an arrays file; `path` names it in messages.
std::vector<NamedArray> ParseArraysFile(std::string_view text, const std::string& path);
// Reads a regular file of at most kMaxTextFileBytes (common/file.h) and parses it.
std::vector<NamedArray> LoadArraysFile(const std::string& path);

}  // namespace spmdsim

#endif  // SPMDSIM_SCENARIO_ARRAYS_FILE_H_
