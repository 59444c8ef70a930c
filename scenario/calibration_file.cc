// Calibration runs and profile files (scenario/calibration_file.h), read with the scenario's YAML readers.
#include "scenario/calibration_file.h"

#include <filesystem>
#include <sstream>

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include "common/error.h"
#include "common/file.h"
#include "scenario/internal/scenario_parsers.h"

namespace spmdsim {
namespace {

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
