// Fuzz target for the HLO text parser and verifier (hlo/parser.h), and what runs on a module without data (the
// support check, memory liveness and the step prediction): whatever the bytes, each either succeeds or throws
// spmdsim::Error; any other exception, a crash, a hang or a sanitizer report is a bug.
//
// Two builds of this file (fuzz/CMakeLists.txt), as scenario_fuzzer.cc:
//  - with clang and -DSPMDSIM_BUILD_FUZZERS=ON: the libFuzzer binary `hlo_fuzzer`;
//  - always: `hlo_fuzz_replay` (SPMDSIM_FUZZ_REPLAY), which feeds every file under the folders it is given and a
//    fixed set of mutations of each to the same function; ctest `fuzz.hlo_replay` runs it on fuzz/hlo_corpus and
//    tests/hlo/testdata.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <memory>
#include <string>
#include <string_view>

#include "common/error.h"
#include "hlo/memory.h"
#include "hlo/parser.h"
#include "hlo/predict.h"
#include "hlo/support.h"
#include "mesh/mesh.h"

namespace {

void ParseOne(std::string_view bytes) {
  try {
    const spmdsim::hlo::SupportedModule m = spmdsim::hlo::SupportedModule::Check(
        spmdsim::hlo::ParseModule(bytes, "fuzz.txt"), spmdsim::hlo::SupportedModule::Use::kAbstract);
    const int64_t n = m.device_count();
    if (n <= 64) {
      auto topology = std::make_shared<const spmdsim::Topology>(spmdsim::Topology::Parse("cpu:64"));
      std::vector<int> ids(static_cast<size_t>(n));
      for (int i = 0; i < n; ++i) ids[i] = i;
      spmdsim::hlo::PredictOptions options;
      options.record_events = false;
      spmdsim::hlo::Predict(m, spmdsim::Mesh(spmdsim::DeviceArray({n}, ids), {"devices"}, topology), options);
    }
  } catch (const spmdsim::Error&) {
    // Expected: bad input is reported as an Error.
  } catch (const std::exception& e) {
    std::fprintf(stderr, "hlo fuzzer: a non-spmdsim exception escaped: %s\n", e.what());
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

// Deterministic mutations of one module: truncation, a token inserted, a byte overwritten, a line deleted,
// duplicated or swapped, a number changed to an extreme.
std::vector<std::string> Mutations(const std::string& text, uint64_t seed, int count) {
  static const char* kTokens[] = {"{", "}", "(", ")", "[", "]", ",", "=", "%", "ROOT ", "ENTRY ", "/*", "\"",
                                  "f32[", "pred[]", "s32[]", "-1", "0", "9223372036854775807", "99999999999999999999",
                                  "nan", "inf", "{...}", "<=[8]", "T(1,0)", "tuple(", "while(", "dimensions={9}",
                                  "replica_groups={{0,0}}", "mesh['a'=2] {'a'}", "\xff", "\n", "x"};
  std::mt19937_64 rng(seed);
  const std::vector<std::string> lines = spmdsim_fuzz::SplitLines(text);
  std::vector<std::string> out;
  for (int i = 0; i < count; ++i) {
    std::string m = text;
    std::vector<std::string> ls = lines;
    switch (rng() % 6) {
      case 0: m = text.substr(0, text.empty() ? 0 : rng() % text.size()); break;
      case 1: m.insert(text.empty() ? 0 : rng() % text.size(), kTokens[rng() % std::size(kTokens)]); break;
      case 2: if (!m.empty()) m[rng() % m.size()] = static_cast<char>(rng()); break;
      case 3:
        if (!ls.empty()) ls.erase(ls.begin() + static_cast<long>(rng() % ls.size()));
        m = spmdsim_fuzz::JoinLines(ls);
        break;
      case 4:
        if (ls.size() > 1) std::swap(ls[rng() % ls.size()], ls[rng() % ls.size()]);
        m = spmdsim_fuzz::JoinLines(ls);
        break;
      default: {  // a digit replaced by a huge number
        const size_t at = m.find_first_of("0123456789", text.empty() ? 0 : rng() % text.size());
        if (at != std::string::npos) m.replace(at, 1, kTokens[18 + rng() % 2]);
      }
    }
    out.push_back(std::move(m));
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  return spmdsim_fuzz::ReplayMain(argc, argv, {"hlo", ".txt", 2000, Mutations, ParseOne});
}
#endif  // SPMDSIM_FUZZ_REPLAY
