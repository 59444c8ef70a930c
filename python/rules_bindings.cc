// Flax / T5X logical axis rules, eformer's PartitionAxis, PartitionManager and regex partition rules (partition/).
// Rules are plain Python values, as in the peers: ((logical name, mesh axes), ...); a tuple of rules passed
// again and again is converted once (tuples of str / None / tuples are immutable, so the cache by identity is
// exact; a list is converted on every call).
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "common/error.h"
#include "partition/logical_axis_rules.h"
#include "partition/match_rules.h"
#include "partition/partition_axis.h"
#include "partition/partition_manager.h"
#include "python/bindings.h"

namespace spmdsim::python {
namespace {

LogicalAxis LogicalAxisFromPy(py::handle value) {
  if (value.is_none()) return LogicalAxis::None();
  if (value.is(Unconstrained())) return LogicalAxis::Unconstrained();
  return LogicalAxis(value.cast<std::string>());
}

bool DeeplyImmutable(py::handle value) {
  if (value.is_none() || py::isinstance<py::str>(value) || value.is(Unconstrained())) return true;
  if (!py::isinstance<py::tuple>(value)) return false;
  for (py::handle item : value) {
    if (!DeeplyImmutable(item)) return false;
  }
  return true;
}

LogicalAxisRules ConvertRules(py::handle rules) {
  if (!py::isinstance<py::tuple>(rules) && !py::isinstance<py::list>(rules)) {
    // Flax's message.
    throw Error(ErrorCode::kInvalidArgument, "Unknown axis rule specification type.", ErrorKind::kValueError);
  }
  LogicalAxisRules out;
  for (py::handle rule : rules) {
    py::sequence pair = rule.cast<py::sequence>();
    if (pair.size() != 2) {
      throw py::value_error(
          fmt::format("a logical axis rule is (name, mesh_axes); got {}", py::repr(rule).cast<std::string>()));
    }
    out.push_back({pair[0].cast<std::string>(), EntryFromPy(pair[1])});
  }
  return out;
}

// The rules of `rules`, converted once per tuple object.
const LogicalAxisRules& RulesFromPy(py::handle rules, LogicalAxisRules* scratch) {
  static py::object* cached_object = new py::object();
  static LogicalAxisRules* cached = new LogicalAxisRules();
  if (cached_object->ptr() != nullptr && rules.is(*cached_object)) return *cached;
  *scratch = ConvertRules(rules);
  if (DeeplyImmutable(rules)) {
    *cached_object = py::reinterpret_borrow<py::object>(rules);
    *cached = *scratch;
  }
  return *scratch;
}

py::list RulesToPy(const LogicalAxisRules& rules) {
  py::list out;
  for (const LogicalAxisRule& r : rules) out.append(py::make_tuple(r.logical_name, EntryToPy(r.mesh_axes)));
  return out;
}

py::object LogicalToMeshAxesPy(py::object names, py::object rules) {
  if (names.is_none()) return py::none();  // Flax returns None for None
  std::vector<LogicalAxis> axes;
  for (py::handle n : names) axes.push_back(LogicalAxisFromPy(n));
  if (rules.is_none()) return py::cast(LogicalToMeshAxes(axes));
  LogicalAxisRules scratch;
  return py::cast(LogicalToMeshAxes(axes, RulesFromPy(rules, &scratch)));
}

AxisRule AxisRuleFromPy(py::handle value) {
  if (value.is_none()) return AxisRule::None();
  if (py::isinstance<py::str>(value)) return AxisRule(value.cast<std::string>());
  if (py::isinstance<py::tuple>(value) || py::isinstance<py::list>(value)) {
    std::vector<AxisRule> items;
    for (py::handle item : value) items.push_back(AxisRuleFromPy(item));
    return py::isinstance<py::tuple>(value) ? AxisRule::Tuple(std::move(items)) : AxisRule::List(std::move(items));
  }
  throw py::type_error(fmt::format("an axis rule is None, a str, or a tuple / list of them; got {}",
                                   py::repr(value).cast<std::string>()));
}

py::object AxisRuleToPy(const AxisRule& rule) {
  switch (rule.kind()) {
    case AxisRule::Kind::kNone: return py::none();
    case AxisRule::Kind::kName: return py::str(rule.name());
    case AxisRule::Kind::kTuple:
    case AxisRule::Kind::kList: {
      py::list items;
      for (const AxisRule& item : rule.items()) items.append(AxisRuleToPy(item));
      if (rule.kind() == AxisRule::Kind::kList) return items;
      return py::tuple(items);
    }
  }
  return py::none();
}

std::vector<SemanticAxis> SemanticAxesFromPy(py::handle axes) {
  std::vector<SemanticAxis> out;
  for (py::handle a : axes) {
    if (a.is_none()) {
      out.push_back(SemanticAxis());
    } else if (py::isinstance<py::str>(a)) {
      out.push_back(SemanticAxis(a.cast<std::string>()));
    } else {
      out.push_back(SemanticAxis::Composite(a.cast<std::vector<std::string>>()));
    }
  }
  return out;
}

py::object SemanticAxisToPy(const SemanticAxis& a) {
  if (a.is_none()) return py::none();
  if (a.is_name()) return py::str(a.name());
  return py::cast(a.names());
}

ModeOrDim ModeFromPy(py::handle mode) {
  if (py::isinstance<py::int_>(mode)) return mode.cast<int>();
  return ParseRuntimeMode(mode.cast<std::string>());
}

py::object ModeToPy(const ModeOrDim& mode) {
  if (std::holds_alternative<int>(mode)) return py::int_(std::get<int>(mode));
  return py::str(std::string(RuntimeModeToken(std::get<RuntimeMode>(mode))));
}

// Flax's and T5X's logical axis rules.
void BindLogicalAxisRules(py::module_& m) {
  m.def("logical_to_mesh_axes", &LogicalToMeshAxesPy, py::arg("array_dim_names"), py::arg("rules") = py::none(),
        "Flax: the PartitionSpec for dimensions named `array_dim_names` under `rules` (default: the rules of the "
        "enclosing `logical_axis_rules` context).");
  m.def("get_logical_axis_rules", [] { return py::tuple(RulesToPy(GetLogicalAxisRules())); },
        "Flax: the rules of this thread's current context.");
  m.def("set_logical_axis_rules", [](py::object rules) { SetLogicalAxisRules(ConvertRules(rules)); }, py::arg("rules"),
        "Flax: sets this thread's rules.");
  m.def("standard_logical_axis_rules",
        [](int activation_dims, int parameter_dims, py::object additional) {
          LogicalAxisRules extra = additional.is_none() ? LogicalAxisRules{} : ConvertRules(additional);
          return RulesToPy(StandardLogicalAxisRules(activation_dims, parameter_dims, extra));
        },
        py::arg("activation_partitioning_dims") = 1, py::arg("parameter_partitioning_dims") = 1,
        py::arg("additional_rules") = py::none(), "T5X: the default logical axis rules.");
  m.def("composite_rules", [](py::object a, py::object b) {
    return py::tuple(RulesToPy(CompositeRules(ConvertRules(a), ConvertRules(b))));
  }, py::arg("rule1"), py::arg("rule2"), "Flax: rule1 with rule2 added.");
}

// eformer's PartitionAxis, with its semantic tokens and runtime modes.
void BindPartitionAxis(py::module_& m) {
  // eformer's tokens and modes.
  py::module_ tokens = m.def_submodule("_tokens");
  for (const auto& [short_name, token] : SemanticAxisShortNames()) {
    tokens.attr(py::str(std::string(short_name))) = std::string(token);
  }
  tokens.attr("empty") = std::string(semantic::kEmpty);
  for (RuntimeMode mode : {RuntimeMode::kTrain, RuntimeMode::kPrefill, RuntimeMode::kDecode, RuntimeMode::kInsert}) {
    tokens.attr(py::str(std::string("mode_") + std::string(RuntimeModeName(mode)))) =
        std::string(RuntimeModeToken(mode));
  }

  py::object not_given = py::module_::import("builtins").attr("object")();
  m.attr("_NOT_GIVEN") = not_given;
  py::class_<PartitionAxis>(m, "PartitionAxis", "eformer: PartitionAxis(**fields), semantic axes -> mesh axes.")
      .def(py::init([](py::kwargs kwargs) {
        std::vector<std::pair<std::string, AxisRule>> overrides;
        for (auto [k, v] : kwargs) overrides.emplace_back(k.cast<std::string>(), AxisRuleFromPy(v));
        return PartitionAxis(overrides);
      }))
      .def("__getattr__", [](const PartitionAxis& p, const std::string& name) {
        if (!PartitionAxis::FindField(name)) {
          throw py::attribute_error(fmt::format("'PartitionAxis' object has no attribute '{}'", name));
        }
        return AxisRuleToPy(p.Get(name));
      })
      .def("resolve_axis", [](const PartitionAxis& p, py::object axes, py::object mode) {
        py::list out;
        for (const AxisRule& r : p.ResolveAxis(SemanticAxesFromPy(axes), ParseRuntimeMode(mode.cast<std::string>()))) {
          out.append(AxisRuleToPy(r));
        }
        return out;
      }, py::arg("axes"), py::arg("mode"))
      .def("resolve_spec", [](const PartitionAxis& p, py::object axes, py::object mode) {
        return p.ResolveSpec(SemanticAxesFromPy(axes), ParseRuntimeMode(mode.cast<std::string>()));
      }, py::arg("axes"), py::arg("mode"))
      .def_static("register", [not_given](const std::string& name, py::object rule, py::object generation,
                                          bool override_) {
        std::optional<AxisRule> gen;
        if (!generation.is(not_given)) gen = AxisRuleFromPy(generation);
        PartitionAxis::Register(name, AxisRuleFromPy(rule), gen, override_);
      }, py::arg("semantic_axis"), py::arg("axis_rule"), py::arg("generation_axis_rule") = not_given,
         py::arg("override") = false)
      .def_static("unregister", &PartitionAxis::Unregister, py::arg("semantic_axis"), py::arg("missing_ok") = true)
      .def_static("clear_registered_axes", &PartitionAxis::ClearRegisteredAxes)
      .def_property_readonly_static("_field_names", [](py::object) {
        py::list out;
        for (int i = 0; i < PartitionAxis::kNumFields; ++i)
          out.append(py::str(std::string(PartitionAxis::FieldName(static_cast<PartitionAxis::Field>(i)))));
        return py::tuple(out);
      })
      .def("__repr__", &PartitionAxis::ToString)
      .def("__eq__", [](const PartitionAxis& a, py::object b) {
        return py::isinstance<PartitionAxis>(b) && a == b.cast<const PartitionAxis&>();
      });
}

// eformer's PartitionManager and dynamic presets, and match_partition_rules.
void BindPartitionManager(py::module_& m) {
  py::class_<PartitionManager>(m, "_PartitionManager")
      .def(py::init([](py::object paxis) {
        return paxis.is_none() ? PartitionManager() : PartitionManager(paxis.cast<const PartitionAxis&>());
      }), py::arg("paxis") = py::none())
      .def_property_readonly("paxis", &PartitionManager::paxis)
      .def("_resolve", [](const PartitionManager& pm, py::object axes, py::object mode, py::object shape) {
        std::optional<std::vector<int64_t>> s;
        if (!shape.is_none()) s = ShapeFromPy(shape);
        return pm.Resolve(SemanticAxesFromPy(axes), ModeFromPy(mode),
                          s ? std::optional<std::span<const int64_t>>(*s) : std::nullopt);
      });
  m.def("_dynamic_sharding_presets", [] {
    py::list out;
    for (const auto& [name, preset] : DynamicShardingPresets()) {
      py::list axes;
      for (const SemanticAxis& a : preset.axes) axes.append(SemanticAxisToPy(a));
      out.append(py::make_tuple(std::string(name), axes, ModeToPy(preset.mode)));
    }
    return out;
  });

  m.def("_match_partition_rules", [](py::list rules, py::list params, py::object min_size, bool strict) {
    std::vector<PartitionRule> compiled;
    for (py::handle r : rules) {
      py::sequence pair = r.cast<py::sequence>();
      compiled.push_back({pair[0].cast<std::string>(), SpecFromPy(pair[1])});
    }
    std::vector<NamedParameter> named;
    for (py::handle p : params) {
      py::tuple t = p.cast<py::tuple>();
      NamedParameter param{t[0].cast<std::string>(), std::nullopt};
      if (!t[1].is_none()) param.shape = ShapeFromPy(t[1]);
      named.push_back(std::move(param));
    }
    MatchOptions options;
    options.min_size = min_size.is_none() ? std::nullopt : std::optional<int64_t>(min_size.cast<int64_t>());
    options.strict = strict;
    py::list out;
    for (const auto& [name, spec] : MatchPartitionRules(compiled, named, options)) out.append(py::cast(spec));
    return out;
  });
}

}  // namespace

void BindRules(py::module_& m) {
  BindLogicalAxisRules(m);
  BindPartitionAxis(m);
  BindPartitionManager(m);
}

}  // namespace spmdsim::python
