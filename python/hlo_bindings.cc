// spmdsim._spmdsim._run_hlo: an HLO module (XLA's text) run on the virtual devices of a topology and predicted
// there (workloads/hlo_workload.h); the package's run_hlo and from_jax (python/spmdsim/hlo.py) call it.
//
// Arrays cross as numpy arrays of the HLO element types: bool, int8..int64, uint8..uint64, float16, bfloat16
// (ml_dtypes, which JAX installs; without it bfloat16 arrives as float32), float32, float64.
#include <chrono>
#include <cstring>
#include <memory>

#include <fmt/format.h>

#include "common/dtype.h"
#include "common/error.h"
#include "hlo/parser.h"
#include "hlo/sharding.h"
#include "python/bindings.h"
#include "scenario/report.h"
#include "sim/runtime_options.h"
#include "workloads/hlo_workload.h"

namespace spmdsim::python {

namespace {

// numpy arrays are read and made through numpy's Python API (shape, dtype name, nbytes, __array_interface__'s
// data pointer) rather than pybind11's array type: Debian's pybind11 2.10 reads a dtype's item size where numpy 1.x
// kept it, and numpy 2 (the test environment's, which jax 0.10 needs) moved it.
void* DataPointer(const py::object& arr) {
  return reinterpret_cast<void*>(arr.attr("__array_interface__")["data"].cast<py::tuple>()[0].cast<uintptr_t>());
}

// A numpy array as an hlo::Value of the HLO type `want` (the parameter's), converting the element type if needed.
hlo::Value ValueFromNumpy(py::handle x, DType want);

// An argument for `param`: converted to its type and, when smaller (an uneven block, which XLA pads), zero-padded
// to its shape.
hlo::Value Argument(py::handle x, const hlo::Instruction& param) {
  hlo::Value v = ValueFromNumpy(x, param.shape().dtype);
  const std::vector<int64_t>& want = param.shape().dims;
  if (v.dims() == want) return v;
  bool fits = v.rank() == static_cast<int>(want.size());
  for (size_t d = 0; fits && d < want.size(); ++d) fits = v.dims()[d] <= want[d];
  if (!fits) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("argument {} is {}; parameter %{} is {}", param.attrs().parameter_number, v.ShapeString(),
                            param.name(), param.shape().ToString()), ErrorKind::kValueError);
  }
  hlo::Sharding whole;
  return hlo::ShardOf(v, whole, 0, want);
}

hlo::Value ValueFromNumpy(py::handle x, DType want) {
  py::object np = py::module_::import("numpy");
  py::object arr = np.attr("asarray")(x, py::arg("order") = "C");  // keeps 0-d arrays 0-d
  const std::string name = py::str(arr.attr("dtype").attr("name")).cast<std::string>();
  const std::vector<int64_t> dims = ShapeFromPy(arr.attr("shape"));
  DType have = DType::kF32;
  try {
    have = ParseDType(name);
  } catch (const Error&) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("arrays of numpy dtype {} cannot be HLO arguments", name),
                ErrorKind::kTypeError);
  }
  hlo::ValueBuilder b(have, dims);
  const int64_t nbytes = arr.attr("nbytes").cast<int64_t>();
  if (nbytes != b.size() * DTypeSize(have)) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("a numpy {} array of {} bytes", name, nbytes),
                ErrorKind::kTypeError);
  }
  if (nbytes > 0) std::memcpy(b.raw(), DataPointer(arr), static_cast<size_t>(nbytes));
  hlo::Value v = std::move(b).Finish();
  if (have == want) return v;
  return hlo::ValueFromDoubles(want, dims, hlo::ValueToDoubles(v));
}

py::object ValueToNumpy(const hlo::Value& v) {
  py::object np = py::module_::import("numpy");
  py::object dtype = py::str(std::string(DTypeName(v.dtype())));
  if (v.dtype() == DType::kBF16) {
    try {
      dtype = py::module_::import("ml_dtypes").attr("bfloat16");
    } catch (py::error_already_set&) {
      std::vector<double> d = hlo::ValueToDoubles(v);
      return np.attr("array")(py::cast(d), "float32").attr("reshape")(ShapeToPy(v.dims()));
    }
  }
  py::object out = np.attr("empty")(ShapeToPy(v.dims()), dtype);
  if (v.nbytes() > 0) std::memcpy(DataPointer(out), v.raw(), static_cast<size_t>(v.nbytes()));
  return out;
}

// A result as a list of numpy arrays (a tuple's leaves in order; one array for an array result).
void Flatten(const hlo::Value& v, py::list* out) {
  if (v.is_tuple()) {
    for (const hlo::Value& e : v.elements()) Flatten(e, out);
  } else if (v.is_array()) {
    out->append(ValueToNumpy(v));
  }
}

std::shared_ptr<const Topology> TopologyOf(py::handle topology) {
  if (py::isinstance<py::str>(topology))
    return std::make_shared<const Topology>(Topology::Parse(topology.cast<std::string>()));
  return TopologyFromPy(topology);
}

// Per logical device, the entry's arguments from Python's lists of arrays.
std::vector<std::vector<hlo::Value>> DeviceArguments(py::handle args, const hlo::Computation& entry) {
  std::vector<std::vector<hlo::Value>> out;
  for (py::handle device : args) {
    std::vector<hlo::Value> values;
    int64_t i = 0;
    for (py::handle a : device) {
      if (i >= entry.parameter_count())
        throw Error(ErrorCode::kInvalidArgument,
                    fmt::format("more arguments than the {} parameters of %{}", entry.parameter_count(), entry.name()),
                    ErrorKind::kTypeError);
      values.push_back(Argument(a, *entry.parameter(i++)));
    }
    out.push_back(std::move(values));
  }
  return out;
}

// The context mesh: the module's logical devices on the topology's first devices, laid out as `mesh_axes` when
// they are given and their sizes multiply to the module's devices (so that collectives are attributed to the axes),
// else one axis "devices".
Mesh ContextMesh(int64_t module_devices, const std::shared_ptr<const Topology>& topo,
                 const std::vector<std::pair<std::string, int64_t>>& mesh_axes) {
  std::vector<int> ids(static_cast<size_t>(std::min<int64_t>(module_devices, topo->num_devices())));
  for (size_t k = 0; k < ids.size(); ++k) ids[k] = static_cast<int>(k);
  std::vector<int64_t> shape;
  std::vector<std::string> names;
  for (const auto& [name, size] : mesh_axes) names.push_back(name), shape.push_back(size);
  if (!names.empty() && NumElements(shape) == static_cast<int64_t>(ids.size())) {
    return Mesh(DeviceArray(shape, ids), names, topo);
  }
  return Mesh(DeviceArray({static_cast<int64_t>(ids.size())}, ids), {"devices"}, topo);
}

py::tuple RunHloModule(const std::string& text, const std::string& file, py::handle topology,
                       std::vector<int> device_assignment, py::object args, bool abstract, int threads, bool trace,
                       bool overlap_collectives, py::object narrow_types,
                       std::vector<std::pair<std::string, int64_t>> mesh_axes, double model_flops_per_step,
                       double tokens_per_step, int64_t max_while_iterations, double max_while_seconds) {
  if (max_while_iterations < 1 || !(max_while_seconds > 0)) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("max_while_iterations must be >= 1 and max_while_seconds > 0, got {} and {}",
                            max_while_iterations, max_while_seconds),
                ErrorKind::kValueError);
  }
  if (threads < 0)
    throw Error(ErrorCode::kInvalidArgument, fmt::format("threads must be >= 0 (0: one per core), got {}", threads),
                ErrorKind::kValueError);
  HloConfig config;
  config.name = file;
  config.module = hlo::ParseModule(text, file);
  config.device_assignment = std::move(device_assignment);
  config.overlap_collectives = overlap_collectives;
  if (!narrow_types.is_none()) config.narrow_types = narrow_types.cast<bool>();
  if (!args.is_none() && !abstract) config.device_arguments = DeviceArguments(args, *config.module->entry());
  const std::shared_ptr<const Topology> topo = TopologyOf(topology);
  const int64_t n = config.module->replica_count() * config.module->num_partitions();
  config.model_flops_per_step = model_flops_per_step;
  config.max_while_iterations = max_while_iterations;
  config.max_while_seconds = max_while_seconds;
  config.tokens_per_step = tokens_per_step;
  if (!config.device_assignment.empty()) config.mesh_axes = mesh_axes;
  WorkloadContext context;
  context.mesh = ContextMesh(n, topo, mesh_axes);
  context.abstract = abstract;
  context.record_trace = trace;
  context.runtime.num_threads = threads;
  context.runtime.fiber_stack_bytes = kEigenFiberStackBytes;
  std::vector<hlo::Value> outputs;
  nlohmann::json json;
  {
    py::gil_scoped_release release;
    WorkloadResult result = RunHlo(context, config, &outputs);
    if (topo->num_devices() > n && result.hlo.has_value()) {
      result.hlo->notes.push_back(fmt::format(
          "module {} runs on {} devices; {} has {}: it is priced on {} of them ({}), not on the whole topology",
          config.module->name(), n, topo->ToString(), topo->num_devices(), n,
          config.device_assignment.empty() ? fmt::format("devices 0-{}", n - 1) : "its device_assignment"));
    }
    json = WorkloadJson(result);
  }
  py::list per_device;
  for (const hlo::Value& v : outputs) {
    py::list leaves;
    Flatten(v, &leaves);
    per_device.append(leaves);
  }
  return py::make_tuple(per_device, JsonToPy(json));
}

}  // namespace

void BindHlo(py::module_& m) {
  m.def("_run_hlo", &RunHloModule, py::arg("text"), py::arg("file"), py::arg("topology"),
        py::arg("device_assignment"), py::arg("args"), py::arg("abstract"), py::arg("threads"), py::arg("trace"),
        py::arg("overlap_collectives"), py::arg("narrow_types"),
        py::arg("mesh_axes") = std::vector<std::pair<std::string, int64_t>>{},
        py::arg("model_flops_per_step") = 0.0, py::arg("tokens_per_step") = 0.0,
        py::arg("max_while_iterations") = int64_t{100'000'000}, py::arg("max_while_seconds") = 300.0,
        "Runs an HLO module on the devices of a topology; returns (per-device outputs, report dict).");
}

}  // namespace spmdsim::python
