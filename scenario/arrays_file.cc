// Arrays files (scenario/arrays_file.h), read with the scenario's YAML readers.
#include "scenario/arrays_file.h"

#include <set>

#include <fmt/format.h>

#include "common/file.h"
#include "common/shape.h"
#include "scenario/internal/scenario_parsers.h"

namespace spmdsim {
namespace {

std::vector<int64_t> ParseShapeNode(const YamlContext& ctx, const YAML::Node& node, const std::string& key) {
  std::vector<int64_t> shape;
  if (node.IsScalar()) {
    try {
      shape = ParseShape(node.Scalar(), key);
    } catch (const Error& e) {
      ctx.Rethrow(node, key, e);
    }
  } else if (!(node.IsSequence() && node.size() == 0)) {
    shape = ctx.IntList(node, key);
  }
  if (static_cast<int64_t>(shape.size()) > kMaxScenarioRank)
    ctx.Fail(node, key, fmt::format("rank {} is above the limit {}", shape.size(), kMaxScenarioRank));
  for (size_t d = 0; d < shape.size(); ++d)
    if (shape[d] < 0) ctx.Fail(node, key, fmt::format("dimension {} is {}; sizes must be >= 0", d, shape[d]));
  return shape;
}

NamedArray ParseOne(const YamlContext& ctx, const YAML::Node& node, const std::string& key) {
  YamlMap m(ctx, node, key, {"name", "shape", "dtype", "spec"});
  NamedArray array;
  array.name = ctx.String(m.Need("name"), m.Key("name"));
  if (array.name.empty()) ctx.Fail(m.Get("name"), m.Key("name"), "an array needs a non-empty name");
  array.shape = ParseShapeNode(ctx, m.Need("shape"), m.Key("shape"));
  if (m.Has("dtype")) {
    try {
      array.dtype = ParseDType(ctx.String(m.Get("dtype"), m.Key("dtype")));
    } catch (const Error& e) {
      ctx.Rethrow(m.Get("dtype"), m.Key("dtype"), e);
    }
  }
  if (m.Has("spec") && !m.Get("spec").IsNull()) array.spec = ParseSpecNode(ctx, m.Get("spec"), m.Key("spec"));
  return array;
}

}  // namespace

std::vector<NamedArray> ParseArraysFile(std::string_view text, const std::string& path) {
  const YamlContext ctx(path, ErrorKind::kValueError);
  const YAML::Node root = LoadSingleYamlDocument(text, path, "an arrays file (--file)", ErrorKind::kValueError);
  YAML::Node list = root;
  if (root.IsMap()) list = YamlMap(ctx, root, "", {"arrays"}).Need("arrays");
  if (!list.IsSequence())
    ctx.Fail(list, "arrays", "expected a list of arrays, or a map with an `arrays:` list");
  std::vector<NamedArray> arrays;
  std::set<std::string> names;
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string key = fmt::format("arrays[{}]", i);
    arrays.push_back(ParseOne(ctx, list[i], key));
    if (!names.insert(arrays.back().name).second)
      ctx.Fail(list[i], key + ".name",
               fmt::format("array '{}' is given twice; names must be unique", arrays.back().name));
  }
  return arrays;
}

std::vector<NamedArray> LoadArraysFile(const std::string& path) {
  return ParseArraysFile(ReadFileBounded(path, kMaxTextFileBytes, "--file"), path);
}

}  // namespace spmdsim
