#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/cli/run_spmdsim.h"

namespace spmdsim {
namespace {

using ::spmdsim::testing_cli::RunSpmdsim;
using ::testing::HasSubstr;

const std::string kLlama = std::string(SPMDSIM_SOURCE_DIR) + "/scenarios/llama-gqa-dgx-h100-32.yaml";

TEST(PlanCommand, PrintsTheFastestAndWritesAScenarioThatRuns) {
  const std::string out_file = ::testing::TempDir() + "plan_best.yaml";
  const auto r = RunSpmdsim("plan " + kLlama + " --no-placement --top 3 --threads 2 --write " + out_file);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("plan llama2_70b on 32 devices of dgx-h100:4, 32 GPUs; global batch 64"));
  EXPECT_THAT(r.out, HasSubstr("   1  "));
  EXPECT_THAT(r.out, HasSubstr("   3  "));
  EXPECT_THAT(r.out, HasSubstr("error band (rank 1): validated: "));  // H100 megatron runs are published
  EXPECT_THAT(r.out, HasSubstr("wrote the fastest configuration to " + out_file));
  const auto run = RunSpmdsim("run --abstract " + out_file);
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_THAT(run.out, HasSubstr("training step (simulated"));
  EXPECT_THAT(run.out, HasSubstr(": fits"));
}

TEST(PlanCommand, JsonListsTheRankingAndTheCounts) {
  const auto r = RunSpmdsim("plan " + kLlama + " --no-placement --top 4 --json --write '' --topology dgx-h100:2 "
                            "--global-batch 32");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["devices"].get<int64_t>(), 16);
  EXPECT_EQ(j["best"].size(), 4u);
  EXPECT_EQ(j["enumerated"].get<int64_t>(),
            j["evaluated"].get<int64_t>() + j["invalid"].get<int64_t>() + j["over_memory"].get<int64_t>());
  double last = 0;
  for (const auto& b : j["best"]) {
    EXPECT_GE(b["step_seconds"].get<double>(), last);
    last = b["step_seconds"].get<double>();
    EXPECT_LE(b["peak_bytes"].get<double>(), 80.0e9);
    EXPECT_THAT(b["validation"]["class"].get<std::string>(), HasSubstr("H100 x megatron x "));
    EXPECT_EQ(b["validation"]["source"], "docs/model-validation.md");
  }
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Before: the file was <scenario name>.plan.yaml whatever the topology, its header "Written by `spmdsim plan
// FILE`". After: named after the model, the machine and the batch; the header holds the command that writes it
// again, every deciding option spelled out, and running that command gives the same file.
TEST(PlanCommand, NamesTheFileAfterWhatItDescribesAndRecordsTheCommand) {
  const std::string dir = ::testing::TempDir() + "plan_naming_" + std::to_string(getpid());
  std::filesystem::create_directories(dir);
  const std::string plan = std::string(SPMDSIM_CLI_BINARY) + " plan " + kLlama +
                           " --no-placement --top 2 --threads 2 --topology dgx-h100:2 --global-batch 32";
  ASSERT_EQ(std::system(("cd " + dir + " && " + plan + " > out.txt 2>&1").c_str()), 0) << ReadFile(dir + "/out.txt");
  const std::string name = dir + "/llama2_70b-dgx-h100-2-gb32.plan.yaml";
  const std::string text = ReadFile(name);
  ASSERT_FALSE(text.empty()) << ReadFile(dir + "/out.txt");
  const std::string command = "spmdsim plan " + kLlama + " --topology dgx-h100:2 --global-batch 32 "
                              "--memory-headroom 10% --max-context 8 --no-placement --write "
                              "llama2_70b-dgx-h100-2-gb32.plan.yaml";
  EXPECT_THAT(text, HasSubstr("# Written by `" + command + "`."));
  EXPECT_THAT(text, HasSubstr("# The fastest configuration of llama2_70b on dgx-h100:2, 16 GPUs: predicted "));
  EXPECT_THAT(text, HasSubstr("(10% kept free)"));
  std::filesystem::rename(name, dir + "/first.yaml");
  const std::string again = std::string(SPMDSIM_CLI_BINARY) + command.substr(std::string("spmdsim").size());
  ASSERT_EQ(std::system(("cd " + dir + " && " + again + " > out2.txt 2>&1").c_str()), 0);
  EXPECT_EQ(ReadFile(name), text);
  std::filesystem::remove_all(dir);
}

TEST(PlanCommand, MemoryHeadroomTakesAFractionOrAPercentage) {
  const auto ten = RunSpmdsim("plan " + kLlama + " --no-placement --top 1 --write '' --memory-headroom 0.25");
  ASSERT_EQ(ten.exit_code, 0) << ten.err;
  EXPECT_THAT(ten.out,
              HasSubstr("memory: at most 59.74GiB of the 79.65GiB per device (25% kept free: --memory-headroom)"));
  const auto pct = RunSpmdsim("plan " + kLlama + " --no-placement --top 1 --write '' --memory-headroom 25%");
  EXPECT_THAT(pct.out, HasSubstr("(25% kept free"));
  const auto bad = RunSpmdsim("plan " + kLlama + " --memory-headroom 100%");
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_THAT(bad.err, HasSubstr("--memory-headroom: '100%' is not a fraction of the device memory in [0, 1) or a "
                                 "percentage below 100%, e.g. 0.1 or 10%"));
}

// --html: every evaluated configuration is a dot of the scatter, the `top` fastest marked, and the fastest one's
// step drawn (the page itself is loaded in a browser by html_report_browser_test.sh).
TEST(PlanCommand, HtmlScattersEveryEvaluatedConfiguration) {
  const std::string html = ::testing::TempDir() + "plan.html";
  const auto r = RunSpmdsim("plan " + kLlama + " --no-placement --top 4 --json --write '' --threads 2 --html " + html);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  std::ifstream in(html);
  const std::string page((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto count = [&](const std::string& what) {
    int64_t n = 0;
    for (size_t at = page.find(what); at != std::string::npos; at = page.find(what, at + 1)) ++n;
    return n;
  };
  EXPECT_EQ(count("<circle class=\"point\""), j["evaluated"].get<int64_t>());
  EXPECT_EQ(count("<circle class=\"point winner"), 4);
  EXPECT_EQ(count("<svg class=\"figure timeline"), 1);
  EXPECT_EQ(count("<th>error band</th>"), 1);  // each winner's, beside its step time
  EXPECT_THAT(page, HasSubstr("validated: "));
  EXPECT_THAT(page, HasSubstr("spmdsim plan " + kLlama));
}

TEST(PlanCommand, BadInputIsOneLine) {
  const auto none = RunSpmdsim("plan " + std::string(SPMDSIM_SOURCE_DIR) + "/scenarios/cpu8-quick.yaml");
  EXPECT_EQ(none.exit_code, 1);
  EXPECT_THAT(none.err, HasSubstr("no `kind: model` workload to plan"));
  EXPECT_EQ(std::count(none.err.begin(), none.err.end(), '\n'), 1) << none.err;
  const auto topo = RunSpmdsim("plan " + kLlama + " --topology dgx-h999:2");
  EXPECT_EQ(topo.exit_code, 1);
  EXPECT_EQ(std::count(topo.err.begin(), topo.err.end(), '\n'), 1) << topo.err;
  EXPECT_EQ(RunSpmdsim("plan " + kLlama + " --top 0").exit_code, 2);
}

}  // namespace
}  // namespace spmdsim
