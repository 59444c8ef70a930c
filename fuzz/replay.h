// The replay driver of the fuzz targets' SPMDSIM_FUZZ_REPLAY builds (scenario_fuzzer.cc, hlo_fuzzer.cc): every
// file under the folders (or the files) it is given, in sorted order, then a fixed set of mutations of each, fed to
// the target's parse function; each target keeps its own mutations (the damage its inputs suffer).
//
//   Usage: NAME_fuzz_replay [--mutations N] DIR_OR_FILE...
//
// Exit 0 when at least one file was read (a crash, a sanitizer report or an abort in the parse function is the
// failure), 1 when none was.
#ifndef SPMDSIM_FUZZ_REPLAY_H_
#define SPMDSIM_FUZZ_REPLAY_H_

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

namespace spmdsim_fuzz {

struct Replay {
  const char* name;       // printed: "NAME fuzz replay: N inputs from M files, ..."
  const char* extension;  // files taken from folders: those with this extension (".txt"), or every file ("")
  uint64_t seed_base;     // file f's mutations are seeded with seed_base + f
  // `count` mutations of `text` from `seed`.
  std::function<std::vector<std::string>(const std::string& text, uint64_t seed, int count)> mutations;
  std::function<void(std::string_view)> parse_one;
};

// The lines of `text` without their '\n', and back (every line ended by '\n').
inline std::vector<std::string> SplitLines(const std::string& text) {
  std::vector<std::string> lines;
  std::stringstream ss(text);
  for (std::string line; std::getline(ss, line);) lines.push_back(line);
  return lines;
}
inline std::string JoinLines(const std::vector<std::string>& lines) {
  std::string out;
  for (const std::string& l : lines) out += l + "\n";
  return out;
}

inline int ReplayMain(int argc, char** argv, const Replay& replay) {
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
        const bool wanted = std::string_view(replay.extension).empty() || e.path().extension() == replay.extension;
        if (e.is_regular_file() && wanted) files.push_back(e.path());
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
    replay.parse_one(text);
    ++inputs;
    for (const std::string& m : replay.mutations(text, replay.seed_base + f, mutations)) {
      replay.parse_one(m);
      ++inputs;
    }
  }
  std::printf("%s fuzz replay: %zu inputs from %zu files, every one parsed or rejected with spmdsim::Error\n",
              replay.name, inputs, files.size());
  return files.empty() ? 1 : 0;
}

}  // namespace spmdsim_fuzz

#endif  // SPMDSIM_FUZZ_REPLAY_H_
