// numpy in and out: shard / gather over a NamedSharding, shard_map programs (workloads' RunShardMapProgram) and
// scenario runs (scenario/run.h, the same JSON as `spmdsim run --json`).
//
// GIL: released while a program or a scenario runs (the simulator's workers never call into Python); held while
// numpy buffers are read or written.
// dtypes: shard / gather copy bytes, so every numpy dtype with a fixed item size works (bfloat16 from ml_dtypes
// too). Programs compute with the seven array dtypes (common/dtype.h): float32, float64, float16, int32, int64,
// bool, and bfloat16 (an ml_dtypes.bfloat16 array in; out as ml_dtypes.bfloat16 when ml_dtypes imports, else
// float32).
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <pybind11/numpy.h>

#include "common/dtype.h"
#include "common/error.h"
#include "common/exit_code.h"
#include "common/strings.h"
#include "partition/named_sharding.h"
#include "scenario/plan.h"
#include "scenario/report.h"
#include "scenario/run.h"
#include "scenario/scenario.h"
#include "sim/array.h"
#include "sim/array_builder.h"
#include "workloads/workloads.h"
#include "python/bindings.h"

namespace spmdsim::python {

// A report's keys as Python strings, made once: reports repeat a small vocabulary of keys for every workload and
// device, and a reused string also keeps its hash (dict insertion then skips hashing). The GIL guards the cache.
// Bounded: past kMaxKeys (user-chosen names also appear as keys) a key is made per call.
static py::object KeyString(const std::string& key) {
  static constexpr size_t kMaxKeys = 4096;
  // Never destroyed: the interpreter may be gone when static destructors run.
  static auto* cache = new std::unordered_map<std::string, py::object>();
  if (auto it = cache->find(key); it != cache->end()) return it->second;
  py::object k = py::reinterpret_steal<py::object>(
      PyUnicode_DecodeUTF8(key.data(), static_cast<Py_ssize_t>(key.size()), "strict"));
  if (!k) throw py::error_already_set();
  if (cache->size() < kMaxKeys) cache->emplace(key, k);
  return k;
}

// The Python value json.loads(j.dump()) gives, built without the text: objects -> dicts (keys in j's order),
// arrays -> lists, NaN and infinities -> None (dump writes them as null).
py::object JsonToPy(const nlohmann::json& j) {
  using Type = nlohmann::json::value_t;
  PyObject* out = nullptr;
  switch (j.type()) {
    case Type::null:
    case Type::discarded:
      return py::none();
    case Type::boolean:
      return py::bool_(j.get<bool>());
    case Type::number_integer:
      out = PyLong_FromLongLong(j.get<int64_t>());
      break;
    case Type::number_unsigned:
      out = PyLong_FromUnsignedLongLong(j.get<uint64_t>());
      break;
    case Type::number_float: {
      const double v = j.get<double>();
      if (!std::isfinite(v)) return py::none();
      out = PyFloat_FromDouble(v);
      break;
    }
    case Type::string: {
      const std::string& text = j.get_ref<const std::string&>();
      out = PyUnicode_DecodeUTF8(text.data(), static_cast<Py_ssize_t>(text.size()), "strict");
      break;
    }
    case Type::array: {
      out = PyList_New(static_cast<Py_ssize_t>(j.size()));
      if (out == nullptr) throw py::error_already_set();
      py::object list = py::reinterpret_steal<py::object>(out);
      Py_ssize_t i = 0;
      for (const nlohmann::json& item : j) PyList_SET_ITEM(out, i++, JsonToPy(item).release().ptr());
      return list;
    }
    case Type::object: {
      py::dict dict;
      for (const auto& [key, value] : j.get_ref<const nlohmann::json::object_t&>()) {
        if (PyDict_SetItem(dict.ptr(), KeyString(key).ptr(), JsonToPy(value).ptr()) != 0) throw py::error_already_set();
      }
      return dict;
    }
    case Type::binary:
      throw py::type_error("a JSON report holds no binary values");
  }
  if (out == nullptr) throw py::error_already_set();
  return py::reinterpret_steal<py::object>(out);
}

namespace {

py::array Contiguous(py::handle x) {
  py::array arr = py::module_::import("numpy").attr("ascontiguousarray")(x);
  if (arr.dtype().kind() == 'O')
    throw py::type_error("arrays of Python objects cannot be sharded; use a numeric dtype");
  return arr;
}

std::vector<int64_t> ArrayShape(const py::array& a) { return std::vector<int64_t>(a.shape(), a.shape() + a.ndim()); }

py::dict Shard(py::handle x, const NamedSharding& sharding) {
  py::array global = Contiguous(x);
  std::vector<int64_t> shape = ArrayShape(global);
  ShardingLayout layout = sharding.Layout(shape);
  const size_t itemsize = NumpyItemSize(global);
  py::dict out;
  for (const DeviceShard& s : layout.shards) {
    py::array block = NumpyEmpty(layout.shard_shape, global.attr("dtype"));
    CopyBlockOut(static_cast<const std::byte*>(global.data()), shape, s.index, itemsize,
                 static_cast<std::byte*>(block.mutable_data()));
    out[DeviceObject(sharding.mesh(), s.device)] = block;
  }
  return out;
}

// spmdsim's NamedSharding, or JAX's (converted by NamedSharding.from_jax).
NamedSharding ShardingFromPy(py::handle value) {
  if (py::isinstance<NamedSharding>(value)) return value.cast<NamedSharding>();
  if (py::hasattr(value, "mesh") && py::hasattr(value, "spec")) {
    return py::module_::import("spmdsim").attr("NamedSharding").attr("from_jax")(value).cast<NamedSharding>();
  }
  throw py::type_error(fmt::format("expected a NamedSharding (spmdsim's or JAX's), got {}",
                                   py::type::handle_of(value).attr("__name__").cast<std::string>()));
}

py::array Gather(py::object shards, const NamedSharding& sharding, bool check_replicas) {
  const Mesh& mesh = sharding.mesh();
  std::vector<py::array> blocks;
  if (py::isinstance<py::dict>(shards)) {
    // Keys are Device objects (what shard() returns) or device ids.
    std::unordered_map<int, py::handle> by_id;
    for (auto [key, value] : shards.cast<py::dict>()) {
      by_id[py::hasattr(key, "id") ? key.attr("id").cast<int>() : key.cast<int>()] = value;
    }
    for (int id : mesh.device_ids()) {
      auto it = by_id.find(id);
      if (it == by_id.end())
        throw Error(ErrorCode::kInvalidArgument,
                    fmt::format("gather: no shard for device {}; the mesh's devices are {}", id,
                                PyTuple(mesh.device_ids())),
                    ErrorKind::kValueError);
      blocks.push_back(Contiguous(it->second));
    }
  } else {
    for (py::handle b : shards) blocks.push_back(Contiguous(b));
  }
  if (static_cast<int64_t>(blocks.size()) != mesh.size())
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("gather: got {} shards for a mesh of {} devices", blocks.size(), mesh.size()),
                ErrorKind::kValueError);
  std::vector<int64_t> shard_shape = ArrayShape(blocks[0]);
  py::object dtype = blocks[0].attr("dtype");
  for (size_t i = 1; i < blocks.size(); ++i) {
    if (ArrayShape(blocks[i]) != shard_shape || !py::object(blocks[i].attr("dtype")).equal(dtype))
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("gather: shard {} is {}{}, shard 0 is {}{}", i,
                              py::str(blocks[i].dtype()).cast<std::string>(), PyTuple(ArrayShape(blocks[i])),
                              py::str(dtype).cast<std::string>(), PyTuple(shard_shape)),
                  ErrorKind::kValueError);
  }
  // The global shape: each dimension's block size times the blocks its spec entry makes.
  PartitionSpec spec = sharding.spec().Normalized(
      std::max<int>(sharding.spec().size(), static_cast<int>(shard_shape.size())));
  if (spec.size() > static_cast<int>(shard_shape.size())) sharding.CheckShape(shard_shape);  // JAX's rank error
  std::vector<int64_t> global_shape = shard_shape;
  for (size_t d = 0; d < shard_shape.size(); ++d) global_shape[d] *= EntryPartitions(spec[static_cast<int>(d)], mesh);
  ShardingLayout layout = sharding.Layout(global_shape);
  const size_t itemsize = NumpyItemSize(blocks[0]);
  std::vector<std::vector<std::byte>> bytes(blocks.size());
  for (size_t i = 0; i < blocks.size(); ++i) {
    const auto* p = static_cast<const std::byte*>(blocks[i].data());
    bytes[i].assign(p, p + NumpyBytes(blocks[i]));
  }
  std::vector<std::byte> global = GatherBytes(layout, bytes, itemsize, {.check_replicas = check_replicas});
  py::array out = NumpyEmpty(global_shape, dtype);
  if (!global.empty()) std::memcpy(out.mutable_data(), global.data(), global.size());
  return out;
}

DType ArrayDTypeFromPy(py::handle dtype) {
  if (py::isinstance<py::str>(dtype))
    return ParseArrayDType(dtype.cast<std::string>());  // 'bfloat16' without ml_dtypes
  return ParseArrayDType(py::str(py::module_::import("numpy").attr("dtype")(dtype).attr("name")).cast<std::string>());
}

// numpy -> Array (a host array: made outside any Runtime). An object with `shape` and `dtype` but no data (JAX's
// ShapeDtypeStruct, spmdsim.ShapeDtypeStruct) is an abstract array.
Array ArrayFromNumpy(py::handle x) {
  if (!py::isinstance<py::array>(x) && py::hasattr(x, "shape") && py::hasattr(x, "dtype") &&
      !py::hasattr(x, "__array__")) {
    return Array::Abstract(ShapeFromPy(x.attr("shape")), ArrayDTypeFromPy(x.attr("dtype")));
  }
  py::array arr = Contiguous(x);
  std::string name = py::str(arr.dtype().attr("name")).cast<std::string>();
  DType dtype = ParseArrayDType(name);
  ArrayBuilder b(dtype, ArrayShape(arr));
  if (const size_t bytes = NumpyBytes(arr); bytes > 0) std::memcpy(b.mutable_data(), arr.data(), bytes);
  return std::move(b).Freeze();
}

py::object ArrayToNumpy(const Array& a) {
  if (a.dtype() == DType::kBF16) {
    py::array bits = NumpyEmpty(a.shape(), py::str("uint16"));
    if (a.nbytes() > 0) std::memcpy(bits.mutable_data(), a.raw_data(), static_cast<size_t>(a.nbytes()));
    try {
      return bits.attr("view")(py::module_::import("ml_dtypes").attr("bfloat16"));
    } catch (py::error_already_set&) {
      py::array wide = NumpyEmpty(a.shape(), py::str("float32"));
      const auto* src = static_cast<const bfloat16*>(a.raw_data());
      auto* dst = static_cast<float*>(wide.mutable_data());
      for (int64_t i = 0; i < a.size(); ++i) dst[i] = ToFloat(src[i]);
      return wide;
    }
  }
  py::array out = NumpyEmpty(a.shape(), py::str(std::string(DTypeName(a.dtype()))));
  if (a.nbytes() > 0) std::memcpy(out.mutable_data(), a.raw_data(), static_cast<size_t>(a.nbytes()));
  return out;
}

template <typename T>
void Read(const py::dict& d, const char* key, T* out) {
  if (d.contains(key)) *out = d[key].cast<T>();
}

ProgramStep StepFromPy(const py::dict& d) {
  ProgramStep s;
  Read(d, "name", &s.name);
  Read(d, "op", &s.op);
  Read(d, "args", &s.args);
  Read(d, "axes", &s.axes);
  Read(d, "equation", &s.equation);
  Read(d, "axis", &s.axis);
  Read(d, "split_axis", &s.split_axis);
  Read(d, "concat_axis", &s.concat_axis);
  Read(d, "tiled", &s.tiled);
  Read(d, "pairs", &s.pairs);
  Read(d, "dims", &s.dims);
  Read(d, "keepdims", &s.keepdims);
  Read(d, "shape", &s.shape);
  Read(d, "start", &s.start);
  Read(d, "limit", &s.limit);
  Read(d, "strides", &s.strides);
  if (d.contains("scalar") && !d["scalar"].is_none()) s.scalar = d["scalar"].cast<double>();
  Read(d, "approximate", &s.approximate);
  if (d.contains("dtype")) {
    s.dtype = ArrayDTypeFromPy(d["dtype"]);
  }
  return s;
}

WorkloadContext ContextFor(const Mesh& mesh, bool abstract, int threads, bool keep_arrays) {
  if (threads < 0)
    throw Error(ErrorCode::kInvalidArgument, fmt::format("threads must be >= 0 (0: one per core), got {}", threads),
                ErrorKind::kValueError);
  WorkloadContext context;
  context.mesh = mesh;
  context.abstract = abstract;
  context.keep_arrays = keep_arrays && !abstract;
  context.runtime.num_threads = threads;
  return context;
}

py::tuple RunProgram(const Mesh& mesh, py::list inputs, py::list steps, py::list outputs, bool check_vma, bool check,
                     double rtol, double atol, bool abstract, int threads, const std::string& name) {
  ShardMapConfig config;
  config.name = name;
  config.check_vma = check_vma;
  config.check = check;
  config.rtol = rtol;
  config.atol = atol;
  for (py::handle item : inputs) {
    py::tuple t = item.cast<py::tuple>();
    config.inputs.push_back({t[0].cast<std::string>(), ArrayFromNumpy(t[1]), SpecFromPy(t[2])});
  }
  for (py::handle item : steps) config.steps.push_back(StepFromPy(item.cast<py::dict>()));
  for (py::handle item : outputs) {
    py::tuple t = item.cast<py::tuple>();
    config.outputs.push_back({t[0].cast<std::string>(), SpecFromPy(t[1])});
  }
  WorkloadContext context = ContextFor(mesh, abstract, threads, /*keep_arrays=*/true);
  WorkloadResult result;
  nlohmann::json json;
  {
    py::gil_scoped_release release;
    result = RunShardMapProgram(context, config);
    json = WorkloadJson(result);
  }
  py::dict values;
  for (const auto& [value_name, array] : result.outputs) values[py::str(value_name)] = ArrayToNumpy(array);
  return py::make_tuple(values, JsonToPy(json));
}

// A scenario from a file path, or from its text (a dict passed as JSON) named "<dict>".
Scenario ScenarioFrom(const std::string& source, bool is_text) {
  return is_text ? ParseScenario(source, "<dict>") : LoadScenario(source);
}

// The report `spmdsim run --json` prints, as the dict json.loads would make of it.
py::object RunScenarioReport(const std::string& source, bool is_text, bool abstract, int threads) {
  if (threads < 0)
    throw Error(ErrorCode::kInvalidArgument, fmt::format("threads must be >= 0 (0: one per core), got {}", threads),
                ErrorKind::kValueError);
  nlohmann::json report;
  {
    py::gil_scoped_release release;
    auto start = std::chrono::steady_clock::now();
    Scenario s = ScenarioFrom(source, is_text);
    ScenarioRunOptions options{.abstract = abstract, .num_threads = threads};
    std::vector<WorkloadResult> results = RunScenario(s, options);
    double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    ExitCode code = AllChecksPassed(results) ? ExitCode::kOk : ExitCode::kCheckFailed;
    report = JsonReport(s, results, abstract, wall, code);
  }
  return JsonToPy(report);
}

// What `spmdsim plan --json` prints, as a dict (no scenario file is written): PlanScenario with the CLI's options.
py::object PlanScenarioReport(const std::string& source, bool is_text, const PlanScenarioOptions& options) {
  if (options.threads < 0)
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("threads must be >= 0 (0: one per core), got {}", options.threads),
                ErrorKind::kValueError);
  nlohmann::json report;
  {
    py::gil_scoped_release release;
    report = PlanJson(PlanScenario(ScenarioFrom(source, is_text), options).result);
  }
  return JsonToPy(report);
}

}  // namespace

void BindData(py::module_& m) {
  m.def("shard", [](py::handle x, py::handle sharding) { return Shard(x, ShardingFromPy(sharding)); },
        py::arg("x"), py::arg("sharding"),
        "{Device: numpy block} for every device of the sharding's mesh, in mesh order (each a copy).");
  m.def(
      "gather",
      [](py::object shards, py::handle sharding, bool check) {
        return Gather(shards, ShardingFromPy(sharding), check);
      },
      py::arg("shards"), py::arg("sharding"), py::kw_only(), py::arg("check_replicas") = true,
      "The global array from shard()'s dict (or a list in mesh order); replicas must agree unless "
      "check_replicas=False.");
  m.def("_run_program", &RunProgram);
  m.def("_run_scenario", &RunScenarioReport);
  m.def("_plan",
        [](const std::string& source, bool is_text, const std::string& topology, int64_t global_batch, int64_t top,
           int threads, int64_t max_context, bool placement, double memory_headroom, const std::string& stack,
           const std::string& calibration) {
          return PlanScenarioReport(source, is_text,
                                    {.topology = topology, .global_batch = global_batch, .top = top,
                                     .threads = threads, .max_context = max_context, .search_placement = placement,
                                     .memory_headroom = memory_headroom, .stack = stack, .calibration = calibration});
        },
        py::arg("source"), py::arg("is_text"), py::arg("topology"), py::arg("global_batch"), py::arg("top"),
        py::arg("threads"), py::arg("max_context"), py::arg("placement"),
        py::arg("memory_headroom") = PlanScenarioOptions{}.memory_headroom, py::arg("stack") = "",
        py::arg("calibration") = "");
  m.def("_array_round_trip", [](py::handle x) { return ArrayToNumpy(ArrayFromNumpy(x)); },
        "numpy -> spmdsim Array -> numpy (tests the dtype mapping of programs).");
  m.def("array_dtypes", [] {
    std::vector<std::string> out;
    for (DType d : ArrayDTypes()) out.emplace_back(DTypeName(d));
    return out;
  }, "The dtypes programs compute with.");
}

}  // namespace spmdsim::python
