// Calibration runs and profile files (scenario/calibration_file.h), read with the scenario's YAML readers
// (scenario/internal/scenario_yaml.h); a run's scenario with LoadScenario.
#include "scenario/calibration_file.h"

#include <filesystem>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include "common/error.h"
#include "common/file.h"
#include "scenario/internal/scenario_yaml.h"
#include "scenario/scenario.h"

namespace spmdsim {
namespace {

// The first model workload of the scenario, with the scenario's cost options, as a run.
CalibrationRun RunOf(const std::string& name, const std::string& scenario_path, double measured) {
  const Scenario s = LoadScenario(scenario_path);
  for (const ScenarioWorkload& w : s.workloads) {
    if (const ValidatedModel* m = std::get_if<ValidatedModel>(&w.config)) {
      ModelStepOptions options;
      options.roofline = s.topology.efficiency;
      return CalibrationRun{name, *m, options, measured};
    }
  }
  Throw(ErrorCode::kInvalidArgument, "{}: no `kind: model` workload to calibrate on", scenario_path);
}

// A list of strings under `key`, when present.
std::vector<std::string> OptionalStrings(const YamlContext& ctx, const YamlMap& m, std::string_view key) {
  std::vector<std::string> out;
  if (!m.Has(key)) return out;
  const YAML::Node node = m.Get(key);
  ctx.RequireSequence(node, m.Key(key));
  for (size_t i = 0; i < node.size(); ++i) out.push_back(ctx.String(node[i], fmt::format("{}[{}]", m.Key(key), i)));
  return out;
}

// A runs file's root; each run's scenario is read (relative paths against `base_dir`).
CalibrationRunsFile ParseCalibrationRunsNode(const YamlContext& ctx, const YAML::Node& root,
                                             const std::string& base_dir) {
  YamlMap m(ctx, root, "", {"runs"});
  YAML::Node runs = m.Need("runs");
  ctx.RequireSequence(runs, "runs");
  if (runs.size() == 0) ctx.Fail(runs, "runs", "list at least one measured run");
  const std::filesystem::path base(base_dir);
  CalibrationRunsFile out;
  std::set<std::string> names;
  for (size_t i = 0; i < runs.size(); ++i) {
    YamlMap r(ctx, runs[i], fmt::format("runs[{}]", i), {"name", "scenario", "measured_seconds", "holdout"});
    const std::string scenario = ctx.String(r.Need("scenario"), r.Key("scenario"));
    const double measured = ctx.NumberIn(r.Need("measured_seconds"), r.Key("measured_seconds"), 1e-9, 1e9);
    const std::string name =
        r.Has("name") ? ctx.String(r.Get("name"), r.Key("name")) : std::filesystem::path(scenario).stem().string();
    if (!names.insert(name).second)
      ctx.Fail(runs[i], r.Key("name"), fmt::format("two runs are named '{}'; give each a distinct name", name));
    const std::string resolved = std::filesystem::path(scenario).is_absolute() ? scenario : (base / scenario).string();
    std::vector<CalibrationRun>& list = r.Bool("holdout", false) ? out.holdout : out.fit;
    try {
      list.push_back(RunOf(name, resolved, measured));
    } catch (const Error& e) {
      ctx.Rethrow(r.Get("scenario"), r.Key("scenario"), e);
    }
  }
  if (out.fit.empty()) ctx.Fail(runs, "runs", "every run is `holdout: true`; leave at least one to fit on");
  return out;
}

// A profile file's root.
CalibrationProfile ParseCalibrationProfileNode(const YamlContext& ctx, const YAML::Node& root) {
  YamlMap top(ctx, root, "", {"calibration"});
  YamlMap m(ctx, top.Need("calibration"), "calibration",
            {"device_kind", "stack", "compute_scale", "comm_scale", "host_launch_scale", "fitted", "runs",
             "rms_log_error_before", "rms_log_error_after"});
  CalibrationProfile p;
  p.device_kind = ctx.String(m.Need("device_kind"), m.Key("device_kind"));
  p.stack = ParseStack(ctx.Choice(m.Need("stack"), m.Key("stack"),
                                  {"megatron", "pytorch-fsdp", "maxtext", "megatron-deepspeed-2022"}));
  auto scale = [&](std::string_view key) {
    return m.Has(key) ? ctx.NumberIn(m.Get(key), m.Key(key), 1.0 / 64, 64) : 1.0;
  };
  p.figures.compute_scale = scale("compute_scale");
  p.figures.comm_scale = scale("comm_scale");
  p.figures.host_launch_scale = scale("host_launch_scale");
  p.fitted = OptionalStrings(ctx, m, "fitted");
  p.runs = OptionalStrings(ctx, m, "runs");
  auto error = [&](std::string_view key) {
    if (!m.Has(key)) return 0.0;
    const double e = ctx.Number(m.Get(key), m.Key(key));
    if (e < 0) ctx.Fail(m.Get(key), m.Key(key), "expected a number >= 0");
    return e;
  };
  p.rms_log_error_before = error("rms_log_error_before");
  p.rms_log_error_after = error("rms_log_error_after");
  return p;
}

template <typename Parse>
auto Located(const std::string& path, Parse&& parse) {
  try {
    return parse();
  } catch (const Error&) {
    throw;
  } catch (const YAML::Exception& e) {
    ThrowKind(ErrorCode::kInvalidArgument, ErrorKind::kScenarioError, "{}:{}:{}: {}", path, e.mark.line + 1,
              e.mark.column + 1, e.msg);
  }
}

}  // namespace

CalibrationRunsFile ParseCalibrationRuns(std::string_view text, const std::string& path) {
  return Located(path, [&] {
    const YamlContext ctx(path);
    return ParseCalibrationRunsNode(ctx, LoadSingleYamlDocument(text, path, "a calibration runs file"),
                                    std::filesystem::path(path).parent_path().string());
  });
}

CalibrationRunsFile LoadCalibrationRuns(const std::string& path) {
  return ParseCalibrationRuns(ReadFileBounded(path, kMaxTextFileBytes, "calibration runs file"), path);
}

CalibrationProfile ParseCalibrationProfile(std::string_view text, const std::string& path) {
  return Located(path, [&] {
    const YamlContext ctx(path);
    return ParseCalibrationProfileNode(ctx, LoadSingleYamlDocument(text, path, "a calibration profile"));
  });
}

CalibrationProfile LoadCalibrationProfile(const std::string& path) {
  return ParseCalibrationProfile(ReadFileBounded(path, kMaxTextFileBytes, "calibration profile"), path);
}

std::string CalibrationProfileYaml(const CalibrationProfile& p, const std::string& comment) {
  YAML::Emitter out;
  out << YAML::BeginMap << YAML::Key << "calibration" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "device_kind" << YAML::Value << p.device_kind;
  out << YAML::Key << "stack" << YAML::Value << std::string(StackName(p.stack));
  out << YAML::Key << "compute_scale" << YAML::Value << p.figures.compute_scale;
  out << YAML::Key << "comm_scale" << YAML::Value << p.figures.comm_scale;
  out << YAML::Key << "host_launch_scale" << YAML::Value << p.figures.host_launch_scale;
  out << YAML::Key << "fitted" << YAML::Value << YAML::Flow << p.fitted;
  out << YAML::Key << "runs" << YAML::Value << YAML::Flow << p.runs;
  out << YAML::Key << "rms_log_error_before" << YAML::Value << p.rms_log_error_before;
  out << YAML::Key << "rms_log_error_after" << YAML::Value << p.rms_log_error_after;
  out << YAML::EndMap << YAML::EndMap;
  std::string text;
  std::istringstream lines(comment);
  for (std::string line; std::getline(lines, line);) text += "# " + line + "\n";
  return text + out.c_str() + "\n";
}

}  // namespace spmdsim
