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
#include "mesh/mesh.h"

namespace {

void ParseOne(std::string_view bytes) {
  try {
    std::unique_ptr<spmdsim::hlo::Module> m = spmdsim::hlo::ParseModule(bytes, "fuzz.txt");
    spmdsim::hlo::EstimateMemory(*m);
    const int64_t n = m->replica_count() * m->num_partitions();
    if (n <= 64) {
      auto topology = std::make_shared<const spmdsim::Topology>(spmdsim::Topology::Parse("cpu:64"));
      std::vector<int> ids(static_cast<size_t>(n));
      for (int i = 0; i < n; ++i) ids[i] = i;
      spmdsim::hlo::PredictOptions options;
      options.record_events = false;
      spmdsim::hlo::Predict(*m, spmdsim::Mesh(spmdsim::DeviceArray({n}, ids), {"devices"}, topology), options);
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
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <vector>

namespace {

// Deterministic mutations of one module: truncation, a token inserted, a byte overwritten, a line deleted,
// duplicated or swapped, a number changed to an extreme.
std::vector<std::string> Mutations(const std::string& text, uint64_t seed, int count) {
  static const char* kTokens[] = {"{", "}", "(", ")", "[", "]", ",", "=", "%", "ROOT ", "ENTRY ", "/*", "\"",
                                  "f32[", "pred[]", "s32[]", "-1", "0", "9223372036854775807", "99999999999999999999",
                                  "nan", "inf", "{...}", "<=[8]", "T(1,0)", "tuple(", "while(", "dimensions={9}",
                                  "replica_groups={{0,0}}", "mesh['a'=2] {'a'}", "\xff", "\n", "x"};
  std::mt19937_64 rng(seed);
  std::vector<std::string> lines;
  std::stringstream ss(text);
  for (std::string line; std::getline(ss, line);) lines.push_back(line);
  auto join = [](const std::vector<std::string>& ls) {
    std::string out;
    for (const std::string& l : ls) out += l + "\n";
    return out;
  };
  std::vector<std::string> out;
  for (int i = 0; i < count; ++i) {
    std::string m = text;
    std::vector<std::string> ls = lines;
    switch (rng() % 6) {
      case 0: m = text.substr(0, text.empty() ? 0 : rng() % text.size()); break;
      case 1: m.insert(text.empty() ? 0 : rng() % text.size(), kTokens[rng() % std::size(kTokens)]); break;
      case 2: if (!m.empty()) m[rng() % m.size()] = static_cast<char>(rng()); break;
      case 3: if (!ls.empty()) ls.erase(ls.begin() + static_cast<long>(rng() % ls.size())); m = join(ls); break;
      case 4: if (ls.size() > 1) std::swap(ls[rng() % ls.size()], ls[rng() % ls.size()]); m = join(ls); break;
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

// Usage: hlo_fuzz_replay [--mutations N] DIR_OR_FILE...
int main(int argc, char** argv) {
  int mutations = 40;
  std::vector<std::filesystem::path> files;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--mutations" && i + 1 < argc) {
      mutations = std::atoi(argv[++i]);
      continue;
    }
    if (std::filesystem::is_directory(arg)) {
      for (const auto& e : std::filesystem::recursive_directory_iterator(arg)) {
        if (e.is_regular_file() && e.path().extension() == ".txt") files.push_back(e.path());
      }
    } else {
      files.push_back(arg);
    }
  }
  std::sort(files.begin(), files.end());
  size_t inputs = 0;
  for (size_t f = 0; f < files.size(); ++f) {
    std::ifstream in(files[f], std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    const std::string text = ss.str();
    ParseOne(text);
    ++inputs;
    for (const std::string& m : Mutations(text, 2000 + f, mutations)) {
      ParseOne(m);
      ++inputs;
    }
  }
  std::printf("hlo fuzz replay: %zu inputs from %zu files, every one parsed or rejected with spmdsim::Error\n",
              inputs, files.size());
  return files.empty() ? 1 : 0;
}
#endif  // SPMDSIM_FUZZ_REPLAY
