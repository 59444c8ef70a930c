// Hostile and oversized input through the built `spmdsim` binary: every case ends with exit 1 (bad input) or 2
// (usage) and one line on stderr that names the culprit and what would be valid; never a signal, exit 3, a
// hang or the host's memory (issue #10, "Hostile and oversized input").
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/cli/run_spmdsim.h"

namespace spmdsim {
namespace {

using ::spmdsim::testing_cli::CommandResult;
using ::spmdsim::testing_cli::RunSpmdsim;
using ::testing::HasSubstr;
using ::testing::Not;

std::string WriteTemp(const std::string& name, const std::string& text) {
  std::string path = ::testing::TempDir() + "hostile_" + name;
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

// Exit `code`, exactly one line on stderr containing `what`, no longer than `max_chars`.
void ExpectOneLineError(const CommandResult& r, int code, const std::string& what, size_t max_chars = 400) {
  EXPECT_EQ(r.exit_code, code) << r.err.substr(0, 1000);
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err.substr(0, 1000);
  EXPECT_THAT(r.err.substr(0, 1000), HasSubstr(what));
  EXPECT_LE(r.err.size(), max_chars) << r.err.substr(0, 1000);
}

const char kHead[] = "topology: {preset: \"cpu:8\"}\nmesh: {axes: {data: 2, model: 4}}\n";

TEST(HostileInput, ADeviceAsTheScenarioFileIsRefusedNotReadForever) {
  ExpectOneLineError(RunSpmdsim("run /dev/zero"), 1, "cannot read scenario file '/dev/zero': it is a device");
}

TEST(HostileInput, ADirectoryAsAFileIsBadInputNotAnInternalError) {
  const std::string dir = ::testing::TempDir();
  ExpectOneLineError(RunSpmdsim("run " + dir), 1, "it is a directory; give the path of a regular file");
  ExpectOneLineError(RunSpmdsim("rules --rules-file " + dir + " --names batch"), 1, "--rules-file");
  ExpectOneLineError(RunSpmdsim("analyze --mesh x=2 --file " + dir), 1, "--file");
}

TEST(HostileInput, ADeviceAsTheRulesFileIsRefused) {
  ExpectOneLineError(RunSpmdsim("rules --rules-file /dev/zero --names batch"), 1,
                     "cannot read --rules-file '/dev/zero': it is a device");
}

TEST(HostileInput, ADeviceAsAnNpyInputIsRefusedWithItsLocation) {
  std::string path = WriteTemp("npy_device.yaml", std::string(kHead) +
                                                      "arrays: [{name: x, data: npy, file: /dev/zero}]\n"
                                                      "workloads: [{kind: collectives}]\n");
  ExpectOneLineError(RunSpmdsim("run " + path), 1, "arrays[0].file: cannot read .npy file '/dev/zero'");
}

TEST(HostileInput, ASecondYamlDocumentIsAnErrorAtItsLine) {
  std::string path = WriteTemp("two_docs.yaml", std::string(kHead) + "workloads: [{kind: collectives}]\n---\n"
                                                                     "workloads: [{kind: mlp}]\n");
  ExpectOneLineError(RunSpmdsim("run " + path), 1, path + ":4:1: a second YAML document starts here");
}

TEST(HostileInput, BytesThatAreNotUtf8AreAnErrorAtTheirPosition) {
  std::string path = WriteTemp("latin1.yaml", std::string(kHead) + "name: caf\xe9\nworkloads: [{kind: collectives}]\n");
  ExpectOneLineError(RunSpmdsim("run " + path), 1, path + ":3:10: byte 0xe9 is not UTF-8");
}

TEST(HostileInput, AnalyzeFilesGetTheSameOneDocumentAndUtf8Checks) {
  const std::string arrays = "arrays: [{name: w, shape: [64, 32], spec: [x, null]}]\n";
  std::string path = WriteTemp("analyze_two_docs.yaml", arrays + "---\n" + arrays);
  ExpectOneLineError(RunSpmdsim("analyze --mesh x=2 --file " + path), 1,
                     path + ":2:1: a second YAML document starts here; an arrays file (--file) holds one document");
  path = WriteTemp("analyze_latin1.yaml", "arrays: [{name: caf\xe9, shape: [64, 32]}]\n");
  ExpectOneLineError(RunSpmdsim("analyze --mesh x=2 --file " + path), 1, path + ":1:20: byte 0xe9 is not UTF-8");
}

TEST(HostileInput, APeersMultiLineMessageIsPrintedOnOneLine) {
  ExpectOneLineError(RunSpmdsim("mesh --topology tpu-v5e:4x4 --num-partitions 4"), 1,
                     "No default mesh for this configuration: specify config.model_parallel_submesh explicitly. "
                     "Platform: tpu; Device kind: TPU v5 lite; Num partitions: 4");
}

TEST(HostileInput, IntegersThatDoNotFitAreRefusedNotWrapped) {
  ExpectOneLineError(RunSpmdsim("rules --standard 99999999999,1 --names batch"), 1,
                     "--standard activation dims: '99999999999' is out of range");
  ExpectOneLineError(RunSpmdsim("mesh --topology tpu-v4:2x2x4 --submesh 4294967297,1,1,1"), 1,
                     "--submesh entry: '4294967297' is out of range; expected a positive integer (at most 2147483647)");
  ExpectOneLineError(RunSpmdsim("mesh --topology tpu-v4:2x2x4 --slices 4294967297"), 2,
                     "--slices: '4294967297' is out of range");
}

TEST(HostileInput, AnArgumentThatIsNotUtf8IsAUsageError) {
  ExpectOneLineError(RunSpmdsim("rules --rules \"$(printf 'b\\377=data')\" --names batch --json"), 2,
                     "argument 3 'b\\xff=data': byte 0xff at offset 1 is not UTF-8");
}

TEST(HostileInput, RangeErrorsSayTheRangeInWords) {
  CommandResult r = RunSpmdsim("mesh --topology tpu-v4:2x2x4 --slices 0");
  ExpectOneLineError(r, 2, "--slices: '0' is out of range; expected a positive integer");
  EXPECT_THAT(r.err, Not(HasSubstr("179769")));
  ExpectOneLineError(RunSpmdsim("mesh --topology cpu:8 --host -1"), 2, "expected a non-negative integer");
}

TEST(HostileInput, AHugeValueIsQuotedShortly) {
  CommandResult r = RunSpmdsim("mesh --topology cpu:" + std::string(100000, '7'));
  ExpectOneLineError(r, 1, "... (100004 chars)");
}

TEST(HostileInput, TooManyDevicesAreRefusedBeforeBuildingThem) {
  ExpectOneLineError(RunSpmdsim("mesh --topology tpu-v4:16x16x16 --slices 1000"), 1,
                     "topology 'tpu-v4:16x16x16' x 1000 slices: more than 65536 devices");
  ExpectOneLineError(RunSpmdsim("shard --topology cpu:70000 --mesh x=2 --shape 4 --spec \"P('x')\""), 1,
                     "spmdsim simulates at most 65536 devices");
}

TEST(HostileInput, ARegexThatBacktracksForeverIsReportedNotRun) {
  std::string path = WriteTemp(
      "backtrack.yaml",
      std::string(kHead) + "rules: {partition_rules: [['(a+)+$', [data]]]}\n"
                           "workloads:\n  - kind: partition\n    params: [{name: " + std::string(40, 'a') +
          "b, shape: [8]}]\n");
  ExpectOneLineError(RunSpmdsim("run " + path), 1, "the pattern '(a+)+$' is too expensive to match against 'aaaa");
}

TEST(HostileInput, AnAbstractSweepOfTebibyteMessagesRunsWithoutData) {
  std::string path = WriteTemp("tib.yaml", "topology: {preset: \"cpu:8\", hbm_GiB: 8192}\n"
                                           "mesh: {axes: {data: 2, model: 4}}\n"
                                           "workloads: [{kind: collectives, ops: [psum, all_gather, ppermute], "
                                           "sizes: [1TiB], iterations: 2}]\n");
  CommandResult r = RunSpmdsim("run --abstract --quiet " + path);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  // Without --abstract the same sweep is refused before allocating, naming it and the bytes.
  ExpectOneLineError(RunSpmdsim("run --quiet " + path), 1, "RESOURCE_EXHAUSTED");
  ExpectOneLineError(RunSpmdsim("run --quiet " + path), 1,
                     "collectives 'collectives': psum of 1099511627776 bytes per device on 8 devices needs");
}

TEST(HostileInput, AnArrayLargerThanTheHostIsRefusedBeforeAllocating) {
  std::string path = WriteTemp("big_array.yaml", std::string(kHead) +
                                                     "arrays: [{name: x, shape: [65536, 4194304], "
                                                     "spec: [data, model]}]\n"
                                                     "workloads:\n  - kind: shard_map\n    inputs: [x]\n"
                                                     "    steps: [{name: y, op: psum, args: [x], axes: [model]}]\n"
                                                     "    outputs: [{name: y, spec: [data, model]}]\n");
  ExpectOneLineError(RunSpmdsim("run --quiet " + path), 1,
                     "array 'x' (float32 (65536, 4194304)) needs 1099511627776 bytes (1.00TiB) of host memory");
}

// `command` run by the shell with its address space limited to `kib` KiB (ulimit -v): exit code and output.
std::pair<int, std::string> RunUnderAddressSpaceLimit(int64_t kib, const std::string& args) {
  const std::string command = "ulimit -v " + std::to_string(kib) + "; " + std::string(SPMDSIM_CLI_BINARY) + " " +
                              args + " 2>&1";
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return {-1, "popen failed"};
  std::string out;
  char buffer[4096];
  size_t n;
  while ((n = fread(buffer, 1, sizeof(buffer), pipe)) > 0) out.append(buffer, n);
  const int status = pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status), out};
}

// Before: a real run needing more than `ulimit -v` allows was checked against the host's free memory only, and
// failed when it allocated. After: refused before allocating, citing the limit.
TEST(HostileInput, ARealRunBeyondTheAddressSpaceLimitIsRefusedCitingTheLimit) {
#if defined(SPMDSIM_CLI_SANITIZED)
  GTEST_SKIP() << "the sanitized spmdsim reserves more address space than the limit";
#endif
  std::string path = WriteTemp("over_limit.yaml", std::string(kHead) +
                                                     "arrays: [{name: x, shape: [256, 1048576], "
                                                     "spec: [data, model]}]\n"
                                                     "workloads:\n  - kind: shard_map\n    inputs: [x]\n"
                                                     "    steps: [{name: y, op: psum, args: [x], axes: [model]}]\n"
                                                     "    outputs: [{name: y, spec: [data, model]}]\n");
  const auto [code, out] = RunUnderAddressSpaceLimit(800000, "run --quiet " + path);
  EXPECT_EQ(code, 1) << out.substr(0, 1000);
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1) << out.substr(0, 1000);
  EXPECT_THAT(out, HasSubstr("array 'x' (float32 (256, 1048576)) needs 1073741824 bytes (1.00GiB) of host memory"));
  EXPECT_THAT(out, HasSubstr("address-space limit (ulimit -v) of 781.25MiB leaves"));
}

// Before: 65,536 devices with data failed in mmap (64 GiB of fiber stacks under an 8 GiB limit). After: refused
// up front, before any device is built, naming the devices, the bytes and the limit.
TEST(HostileInput, SixtyFiveThousandRealDevicesAreRefusedUpFront) {
#if defined(SPMDSIM_CLI_SANITIZED)
  GTEST_SKIP() << "the sanitized spmdsim reserves more address space than the limit";
#endif
  std::string path = WriteTemp("pods.yaml", "topology: {preset: \"tpu-v4:16x16x16\", slices: 16}\n"
                                            "mesh: {axes: {dcn: 1, z: 16, y: 16, x: 16}, "
                                            "dcn_axes: {dcn: 16, z: 1, y: 1, x: 1}}\n"
                                            "workloads: [{kind: collectives, ops: [psum], axes: [[x]], "
                                            "sizes: [1KiB], iterations: 1, warmup: 0}]\n");
  const auto [code, out] = RunUnderAddressSpaceLimit(8388608, "run --quiet " + path);
  EXPECT_EQ(code, 1) << out.substr(0, 1000);
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1) << out.substr(0, 1000);
  EXPECT_THAT(out, HasSubstr("cannot map the fiber stacks of 65536 virtual devices: they need 64.25GiB"));
  EXPECT_THAT(out, HasSubstr("the process's address-space limit (ulimit -v) of 8.00GiB leaves"));
  EXPECT_THAT(out, Not(HasSubstr("mapping")));
}

// Per-iteration records do not accumulate: 150000 iterations of an abstract sweep fit in 600 MB of address space
// (they took ~1 GB of resident memory before).
TEST(HostileInput, ALongAbstractSweepRunsInBoundedMemory) {
#if defined(SPMDSIM_CLI_SANITIZED)
  GTEST_SKIP() << "the sanitized spmdsim reserves more address space than the limit";
#endif
  std::string path = WriteTemp("long_sweep.yaml", std::string(kHead) +
                                                      "workloads: [{kind: collectives, sizes: [1MiB], "
                                                      "iterations: 150000, warmup: 0}]\n");
  const std::string command =
      "ulimit -v 600000; " + std::string(SPMDSIM_CLI_BINARY) + " run --abstract --quiet " + path + " 2>&1";
  FILE* pipe = popen(command.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string out;
  char buffer[4096];
  size_t n;
  while ((n = fread(buffer, 1, sizeof(buffer), pipe)) > 0) out.append(buffer, n);
  const int status = pclose(pipe);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << out.substr(0, 1000);
}

}  // namespace
}  // namespace spmdsim

namespace spmdsim {
namespace {

TEST(HostileInput, AThousandAxisSpecOrMeshGivesAShortMessage) {
  std::string spec = "P(";
  for (int i = 0; i < 1000; ++i) spec += "'x',";
  spec += ")";
  ExpectOneLineError(RunSpmdsim("shard --mesh x=2 --shape 4 --spec \"" + spec + "\""), 1,
                     "DuplicateSpecError: A single NamedSharding spec specification", 700);
  std::string mesh;
  for (int i = 0; i < 1000; ++i) mesh += "axis" + std::to_string(i) + "=1,";
  mesh.pop_back();
  ExpectOneLineError(RunSpmdsim("shard --mesh " + mesh + " --shape 4 --spec \"P('axis_x')\""), 1,
                     "Resource axis: axis_x of P('axis_x',) is not found in mesh: ('axis0', 'axis1',", 700);
}

}  // namespace
}  // namespace spmdsim
