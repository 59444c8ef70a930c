// Fuzz target for the scenario parser (scenario/scenario.h) and the .npy reader (scenario/npy.h): whatever the
// bytes, parsing either succeeds or throws spmdsim::Error; any other exception, a crash, a hang or a sanitizer
// report is a bug.
//
// Two builds of this file (fuzz/CMakeLists.txt):
//  - with clang and -DSPMDSIM_BUILD_FUZZERS=ON: a libFuzzer binary `scenario_fuzzer`
//      build/fuzz/fuzz/scenario_fuzzer fuzz/corpus scenarios -max_total_time=60
//  - always: `scenario_fuzz_replay` (SPMDSIM_FUZZ_REPLAY), which feeds every file under the folders it is given
//    and a fixed set of mutations of them to the same function; ctest `fuzz.scenario_replay` runs it on
//    fuzz/corpus and scenarios/.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <string_view>

#include "common/error.h"
#include "scenario/npy.h"
#include "scenario/scenario.h"

namespace {

// Relative .npy paths resolve under a folder that does not exist, so inputs cannot read the tree's files.
constexpr char kFuzzPath[] = "/nonexistent-spmdsim-fuzz/fuzz.yaml";

void ParseOne(std::string_view bytes) {
  try {
    if (bytes.substr(0, 6) == "\x93NUMPY") {
      spmdsim::ParseNpy(bytes, "fuzz.npy");
    } else {
      spmdsim::ParseScenario(bytes, kFuzzPath);
    }
  } catch (const spmdsim::Error&) {
    // Expected: bad input is reported as an Error.
  } catch (const std::exception& e) {
    std::fprintf(stderr, "scenario fuzzer: a non-spmdsim exception escaped: %s\n", e.what());
    std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ParseOne(std::string_view(reinterpret_cast<const char*>(data), size));
  return 0;
}

#ifdef SPMDSIM_FUZZ_REPLAY
#include <iterator>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "fuzz/replay.h"

namespace {

// Deterministic mutations of one input: the kinds of damage a hand-edited YAML file suffers.
std::vector<std::string> Mutations(const std::string& text, uint64_t seed, int count) {
  static const char* kTokens[] = {"{", "}", "[", "]", ":", ": ", "- ", ",", "&a ", "*a", "!!binary ", "\t", "'",
                                  "\"", "#", "~", "null", "-1", "0", "1e308", "999999999999999999999", "nan",
                                  "P(", "P('x',", "x=", "1KiB", "? ", "|\n", ">\n", "%YAML 1.2\n", "---\n", "...\n",
                                  "\xff\xfe", "kind: mlp", "shape: [0]", "axes: {}", "<<: *a"};
  std::mt19937_64 rng(seed);
  const std::vector<std::string> lines = spmdsim_fuzz::SplitLines(text);
  std::vector<std::string> out;
  for (int i = 0; i < count; ++i) {
    std::string m = text;
    switch (rng() % 6) {
      case 0:  // truncate
        m = text.substr(0, text.empty() ? 0 : rng() % text.size());
        break;
      case 1:  // insert a token
        m.insert(text.empty() ? 0 : rng() % text.size(), kTokens[rng() % std::size(kTokens)]);
        break;
      case 2:  // overwrite a byte
        if (!m.empty()) m[rng() % m.size()] = static_cast<char>(rng());
        break;
      case 3: {  // delete a line
        std::vector<std::string> ls = lines;
        if (!ls.empty()) ls.erase(ls.begin() + static_cast<long>(rng() % ls.size()));
        m = spmdsim_fuzz::JoinLines(ls);
        break;
      }
      case 4: {  // duplicate a line
        std::vector<std::string> ls = lines;
        if (!ls.empty()) {
          size_t k = rng() % ls.size();
          ls.insert(ls.begin() + static_cast<long>(k), ls[k]);
        }
        m = spmdsim_fuzz::JoinLines(ls);
        break;
      }
      default: {  // swap two lines
        std::vector<std::string> ls = lines;
        if (ls.size() > 1) std::swap(ls[rng() % ls.size()], ls[rng() % ls.size()]);
        m = spmdsim_fuzz::JoinLines(ls);
        break;
      }
    }
    out.push_back(std::move(m));
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  return spmdsim_fuzz::ReplayMain(argc, argv, {"scenario", "", 1000, Mutations, ParseOne});
}
#endif  // SPMDSIM_FUZZ_REPLAY
