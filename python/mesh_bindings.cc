// Topology, Device, Mesh, JAX's mesh_utils and T5X's mesh builders (mesh/). The package layer
// (spmdsim/mesh.py, spmdsim/t5x.py) gives the JAX / T5X signatures; the functions here take the topology explicitly.
#include <algorithm>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <pybind11/numpy.h>

#include "common/error.h"
#include "common/strings.h"
#include "mesh/mesh.h"
#include "mesh/mesh_utils.h"
#include "mesh/t5x_mesh.h"
#include "mesh/topology.h"
#include "python/bindings.h"

namespace spmdsim::python {
namespace {

// One device of a topology (JAX: jax.Device). Keeps its topology alive.
struct PyDevice {
  std::shared_ptr<const Topology> topology;
  int id = 0;
  const Device& device() const { return topology->device(id); }
};

std::string DeviceRepr(const PyDevice& d) {
  const Device& dev = d.device();
  switch (d.topology->platform()) {
    case Platform::kTpu:
      return fmt::format("TpuDevice(id={}, process_index={}, coords=({},{},{}), core_on_chip={})", dev.id,
                         dev.process_index, dev.coords[0], dev.coords[1], dev.coords[2], dev.core_on_chip);
    case Platform::kGpu: return fmt::format("CudaDevice(id={})", dev.id);
    case Platform::kCpu: return fmt::format("CpuDevice(id={})", dev.id);
  }
  return fmt::format("Device(id={})", dev.id);
}

// numpy object array of the Device objects, shaped as the array (JAX: mesh.devices).
py::array DeviceArrayToObjects(const DeviceArray& devices, const std::shared_ptr<const Topology>& topology) {
  py::array out = NumpyEmpty(devices.shape(), py::str("O"));  // filled with None
  const py::list& table = DeviceObjects(topology);
  PyObject** data = static_cast<PyObject**>(out.mutable_data());
  for (size_t i = 0; i < devices.ids().size(); ++i) {
    PyObject* d = table[static_cast<size_t>(devices.ids()[i])].ptr();
    Py_INCREF(d);
    Py_XDECREF(data[i]);
    data[i] = d;
  }
  return out;
}

py::array DeviceArrayToNumpy(const DeviceArray& devices) {
  py::array out = NumpyEmpty(devices.shape(), py::str("int64"));
  auto* data = static_cast<int64_t*>(out.mutable_data());
  for (size_t i = 0; i < devices.ids().size(); ++i) data[i] = devices.ids()[i];
  return out;
}

// Device ids from numpy / nested lists of ints or Device objects; *topology is set from Device objects.
DeviceArray DeviceArrayFromPy(py::handle devices, std::shared_ptr<const Topology>* topology) {
  py::module_ np = py::module_::import("numpy");
  py::array arr = np.attr("asarray")(devices);
  std::vector<int64_t> shape(arr.shape(), arr.shape() + arr.ndim());
  std::vector<int> ids;
  ids.reserve(static_cast<size_t>(arr.size()));
  if (arr.dtype().kind() == 'O') {
    for (py::handle item : arr.attr("flat")) {
      if (py::isinstance<PyDevice>(item)) {
        const PyDevice& d = item.cast<const PyDevice&>();
        if (*topology == nullptr) *topology = d.topology;
        if (d.topology != *topology)
          throw py::value_error("the devices of a Mesh must come from one Topology");
        ids.push_back(d.id);
      } else {
        ids.push_back(item.cast<int>());
      }
    }
  } else if (arr.dtype().kind() == 'i' || arr.dtype().kind() == 'u') {
    py::array flat = np.attr("ascontiguousarray")(arr, py::str("int64"));
    const auto* values = static_cast<const int64_t*>(flat.data());
    for (py::ssize_t i = 0; i < flat.size(); ++i) ids.push_back(static_cast<int>(values[i]));
  } else if (arr.size() == 0) {
    // np.asarray([]) is float64: an empty mesh.
  } else {
    throw py::type_error(fmt::format("devices must be Device objects or integer ids, got an array of {}",
                                     py::str(arr.dtype()).cast<std::string>()));
  }
  return DeviceArray(std::move(shape), std::move(ids));
}

std::optional<std::vector<int>> IdsFromPy(const py::object& devices) {
  if (devices.is_none()) return std::nullopt;
  std::vector<int> ids;
  for (py::handle item : devices) {
    ids.push_back(py::isinstance<PyDevice>(item) ? item.cast<const PyDevice&>().id : item.cast<int>());
  }
  return ids;
}

// JAX: Mesh(devices, 'x') names one axis; otherwise a sequence of names.
std::vector<std::string> AxisNamesFromPy(py::handle names) {
  if (py::isinstance<py::str>(names)) return {names.cast<std::string>()};
  if (!py::isinstance<py::sequence>(names)) {
    throw py::type_error(fmt::format("axis_names must be a str or a sequence of str, got {}",
                                     py::type::handle_of(names).attr("__name__").cast<std::string>()));
  }
  // JAX's check and message (jax.sharding.Mesh.__new__), before the type check below.
  for (py::handle n : names) {
    if (n.is_none()) {
      const py::tuple got(py::reinterpret_borrow<py::object>(names));
      throw py::value_error(fmt::format("Mesh axis names cannot be None. Got: {}", py::repr(got).cast<std::string>()));
    }
  }
  std::vector<std::string> out;
  for (py::handle n : names) {
    if (!py::isinstance<py::str>(n)) {
      throw py::type_error(fmt::format("mesh axis names must be str, got {} ({})", py::repr(n).cast<std::string>(),
                                       py::type::handle_of(n).attr("__name__").cast<std::string>()));
    }
    out.push_back(n.cast<std::string>());
  }
  return out;
}

// An AxisType from spmdsim's or JAX's enum (both have .name Auto / Explicit / Manual).
AxisType AxisTypeFromPy(py::handle value) {
  const std::string name = py::hasattr(value, "name") ? py::str(value.attr("name")).cast<std::string>() : "";
  if (name == "Auto") return AxisType::kAuto;
  if (name == "Explicit") return AxisType::kExplicit;
  if (name == "Manual") return AxisType::kManual;
  throw py::type_error(fmt::format("axis_types entries must be AxisType.Auto, .Explicit or .Manual, got {}",
                                   py::repr(value).cast<std::string>()));
}

std::vector<AxisType> AxisTypesFromPy(py::handle types, size_t rank) {
  if (types.is_none()) return {};
  std::vector<AxisType> out;
  if (py::isinstance<py::sequence>(types)) {
    for (py::handle t : types) out.push_back(AxisTypeFromPy(t));
  } else {
    out.push_back(AxisTypeFromPy(types));  // JAX accepts one AxisType for a one-axis mesh
  }
  if (out.size() != rank) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("Number of axis names should match the number of axis_types. Got axis_names rank {} "
                            "and axis_types {}", rank, py::repr(types).cast<std::string>()),
                ErrorKind::kValueError);
  }
  return out;
}

// The CPU topology of N devices that meshes of bare integer ids use: one per N, so that their Devices compare equal.
std::shared_ptr<const Topology> CpuTopology(int n) {
  static auto* by_size = new std::map<int, std::shared_ptr<const Topology>>();
  auto& t = (*by_size)[n];
  if (t == nullptr) t = std::make_shared<const Topology>(Topology::Cpu(n));
  return t;
}

Mesh MakePyMesh(py::handle devices, py::handle axis_names_obj, py::handle axis_types, py::object topology) {
  const std::vector<std::string> axis_names = AxisNamesFromPy(axis_names_obj);
  std::shared_ptr<const Topology> topo;
  if (!topology.is_none()) topo = TopologyFromPy(topology);
  std::shared_ptr<const Topology> from_devices;
  DeviceArray array = DeviceArrayFromPy(devices, &from_devices);
  if (topo == nullptr) topo = from_devices;
  if (topo == nullptr && array.size() > 0) {
    // Integer ids without a topology: the current one (spmdsim.devices()) when it holds them, else a CPU host
    // with enough devices.
    int max_id = *std::max_element(array.ids().begin(), array.ids().end());
    py::object current = py::module_::import("spmdsim.machine").attr("_current_topology")();
    if (!current.is_none() && TopologyFromPy(current)->num_devices() > max_id) {
      topo = TopologyFromPy(current);
    } else {
      topo = CpuTopology(std::max(max_id + 1, 1));
    }
  }
  if (array.size() == 0) return Mesh();
  if (static_cast<int>(axis_names.size()) != array.rank()) {
    // JAX's message, without the device array (it can run to many lines).
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("Mesh requires the ndim of its first argument (`devices`) to equal the length of its "
                            "second argument (`axis_names`), but got devices.ndim == {} and len(axis_names) == {}.",
                            array.rank(), axis_names.size()),
                ErrorKind::kValueError);
  }
  std::vector<AxisType> types = AxisTypesFromPy(axis_types, axis_names.size());
  return Mesh(std::move(array), axis_names, topo, std::move(types));
}

py::object MeshShape(const Mesh& mesh) {
  py::object ordered = py::module_::import("collections").attr("OrderedDict")();
  for (int i = 0; i < mesh.rank(); ++i) ordered[py::str(mesh.axis_names()[i])] = mesh.shape()[i];
  return ordered;
}

std::string AxisTypesRepr(const Mesh& mesh) {
  std::vector<std::string> types;
  for (AxisType t : mesh.axis_types()) types.emplace_back(AxisTypeName(t));
  return types.size() == 1 ? fmt::format("({},)", types[0]) : fmt::format("({})", fmt::join(types, ", "));
}

// JAX: str(mesh) "Mesh('x': 2, 'y': 4, axis_types=(Auto, Auto))".
std::string MeshStr(const Mesh& mesh) {
  if (mesh.empty()) return "Mesh()";
  std::vector<std::string> sizes;
  for (int i = 0; i < mesh.rank(); ++i) {
    sizes.push_back(fmt::format("{}: {}", PyRepr(mesh.axis_names()[i]), mesh.shape()[i]));
  }
  return fmt::format("Mesh({}, axis_types={})", fmt::join(sizes, ", "), AxisTypesRepr(mesh));
}

// JAX: repr(mesh) "Mesh(axis_sizes=(2, 4), axis_names=('x', 'y'), axis_types=(Auto, Auto))".
std::string MeshRepr(const Mesh& mesh) {
  if (mesh.empty()) return "Mesh(axis_sizes=(), axis_names=(), axis_types=())";
  return fmt::format("Mesh(axis_sizes={}, axis_names={}, axis_types={})", PyTuple(mesh.shape()),
                     PyTuple(mesh.axis_names()), AxisTypesRepr(mesh));
}

py::tuple ChunkSliceToPy(const t5x::ChunkSlice& s) {
  return py::make_tuple(s.start ? py::object(py::int_(*s.start)) : py::object(py::none()),
                        s.stop ? py::object(py::int_(*s.stop)) : py::object(py::none()));
}

t5x::ChunkMeshAxis ChunkAxisFromPy(py::handle value) {
  if (value.is_none()) return std::monostate{};
  if (py::isinstance<py::str>(value)) return value.cast<std::string>();
  return value.cast<std::vector<std::string>>();
}

}  // namespace

std::shared_ptr<const Topology> TopologyFromPy(py::handle value) {
  if (py::isinstance<py::str>(value)) {
    return std::make_shared<const Topology>(Topology::Parse(value.cast<std::string>()));
  }
  if (!py::isinstance<Topology>(value)) {
    throw py::type_error(fmt::format("expected a Topology or a preset string such as 'tpu-v4:2x2x2', got {}",
                                     py::type::handle_of(value).attr("__name__").cast<std::string>()));
  }
  return value.cast<std::shared_ptr<Topology>>();
}

const py::list& DeviceObjects(const std::shared_ptr<const Topology>& topology) {
  struct Entry {
    std::shared_ptr<const Topology> topology;
    py::list devices;
  };
  static constexpr size_t kEntries = 64;
  static auto* cache = new std::vector<Entry>();  // most recently used last; never destroyed (holds Python objects)
  for (size_t i = cache->size(); i-- > 0;) {
    if ((*cache)[i].topology == topology) {
      std::swap((*cache)[i], cache->back());
      return cache->back().devices;
    }
  }
  py::list devices;
  for (const Device& d : topology->devices()) devices.append(py::cast(PyDevice{topology, d.id}));
  if (cache->size() >= kEntries) cache->erase(cache->begin());
  cache->push_back({topology, std::move(devices)});
  return cache->back().devices;
}

py::object DeviceObject(const Mesh& mesh, int id) {
  return DeviceObjects(mesh.shared_topology())[static_cast<size_t>(id)];
}

Mesh MeshFromPy(py::handle value) {
  if (py::isinstance<Mesh>(value)) return value.cast<Mesh>();
  if (py::hasattr(value, "shape_tuple") && py::hasattr(value, "axis_names") && py::hasattr(value, "devices")) {
    return py::module_::import("spmdsim").attr("Mesh").attr("from_jax")(value).cast<Mesh>();
  }
  throw py::type_error(fmt::format("expected a Mesh (spmdsim's or JAX's), got {}",
                                   py::type::handle_of(value).attr("__name__").cast<std::string>()));
}

namespace {

void BindDevice(py::module_& m) {
  py::class_<PyDevice>(m, "Device", "One device of a Topology (JAX: jax.Device).")
      .def_property_readonly("id", [](const PyDevice& d) { return d.id; })
      .def_property_readonly("process_index", [](const PyDevice& d) { return d.device().process_index; })
      .def_property_readonly("slice_index", [](const PyDevice& d) { return d.device().slice_index; })
      .def_property_readonly("coords", [](const PyDevice& d) {
        const auto& c = d.device().coords;
        return py::make_tuple(c[0], c[1], c[2]);
      })
      .def_property_readonly("core_on_chip", [](const PyDevice& d) { return d.device().core_on_chip; })
      .def_property_readonly("platform",
                             [](const PyDevice& d) { return std::string(PlatformName(d.topology->platform())); })
      .def_property_readonly("device_kind", [](const PyDevice& d) { return d.topology->device_kind(); })
      .def_property_readonly("topology",
                             [](const PyDevice& d) { return std::const_pointer_cast<Topology>(d.topology); })
      .def("__repr__", &DeviceRepr)
      .def("__eq__", [](const PyDevice& a, py::object b) {
        return py::isinstance<PyDevice>(b) && a.topology == b.cast<const PyDevice&>().topology &&
               a.id == b.cast<const PyDevice&>().id;
      })
      .def("__hash__", [](const PyDevice& d) {
        return py::hash(py::make_tuple(d.id, reinterpret_cast<uintptr_t>(d.topology.get())));
      });
}

void BindTopology(py::module_& m) {
  py::class_<Topology, std::shared_ptr<Topology>>(m, "Topology",
                                                  "A simulated machine: Topology('tpu-v4:2x2x4'), "
                                                  "Topology('dgx-h100:4'), Topology('cpu:8').")
      .def(py::init([](const std::string& text, int num_slices) {
             return std::make_shared<Topology>(Topology::Parse(text, num_slices));
           }),
           py::arg("preset"), py::arg("num_slices") = 1)
      .def_property_readonly_static("presets", [](py::object) { return Topology::PresetNames(); })
      .def_property_readonly("platform", [](const Topology& t) { return std::string(PlatformName(t.platform())); })
      .def_property_readonly("preset", &Topology::preset)
      .def_property_readonly("device_kind", &Topology::device_kind)
      .def_property_readonly("num_devices", &Topology::num_devices)
      .def_property_readonly("num_chips", &Topology::num_chips)
      .def_property_readonly("accelerator_type", &Topology::accelerator_type,
                             "the Cloud TPU accelerator type it was given as ('v5p-64'), '' for a preset")
      .def_property_readonly("chips", &Topology::ChipCountText,
                             "the chip count in words: '32 chips (Cloud TPU v5p-64 counts 64 TensorCores, 2 per chip)'")
      .def_property_readonly("num_processes", &Topology::num_processes)
      .def_property_readonly("num_slices", &Topology::num_slices)
      .def_property_readonly("devices_per_process", &Topology::devices_per_process)
      .def_property_readonly("memory_bytes", &Topology::memory_bytes)
      .def_property_readonly("memory_bandwidth", &Topology::memory_bandwidth_Bps)
      .def_property_readonly("peak_flops", [](const Topology& t) {
        py::dict out;
        for (const auto& [dtype, flops] : t.peak_flops()) out[py::str(std::string(DTypeName(dtype)))] = flops;
        return out;
      })
      .def_property_readonly("devices", [](const std::shared_ptr<Topology>& t) {
        return py::list(DeviceObjects(t));  // a new list of the same Device objects
      }, "Every device in id order (JAX: jax.devices() lists them in process order; see jax_devices_order).")
      .def("jax_devices_order", [](const Topology& t) { return JaxDevicesOrder(t); },
           "Device ids in the order jax.devices() lists them.")
      .def("__str__", &Topology::ToString)
      .def("__repr__", [](const Topology& t) {
        return t.num_slices() > 1
                   ? fmt::format("Topology({}, num_slices={})", PyRepr(Split(t.ToString(), ' ')[0]), t.num_slices())
                   : fmt::format("Topology({})", PyRepr(t.ToString()));
      });
}

void BindMeshClass(py::module_& m) {
  py::class_<Mesh>(m, "Mesh", "Named axes over an array of device ids (JAX: jax.sharding.Mesh).")
      .def(py::init(&MakePyMesh), py::arg("devices"), py::arg("axis_names"), py::arg("axis_types") = py::none(),
           py::kw_only(), py::arg("topology") = py::none())
      .def_property_readonly("devices", [](const Mesh& mesh) -> py::object {
        if (mesh.empty()) return py::module_::import("numpy").attr("empty")(0, "O");
        return DeviceArrayToObjects(mesh.devices(), mesh.shared_topology());
      }, "numpy array of Device objects, shaped as the mesh (JAX: mesh.devices)")
      .def_property_readonly("axis_types", [](const Mesh& mesh) {
        py::object cls = py::module_::import("spmdsim").attr("AxisType");
        py::tuple out(mesh.axis_types().size());
        for (size_t i = 0; i < out.size(); ++i) {
          out[i] = cls.attr(py::str(std::string(AxisTypeName(mesh.axis_types()[i]))));
        }
        return out;
      })
      .def_property_readonly("device_ids", [](const Mesh& mesh) { return DeviceArrayToNumpy(mesh.devices()); })
      .def_property_readonly("axis_names", [](const Mesh& mesh) {
        py::tuple out(mesh.axis_names().size());
        for (size_t i = 0; i < mesh.axis_names().size(); ++i) out[i] = py::str(mesh.axis_names()[i]);
        return out;
      })
      .def_property_readonly("shape", &MeshShape, "OrderedDict axis name -> size")
      .def_property_readonly("shape_tuple", [](const Mesh& mesh) {
        py::list out;
        for (int i = 0; i < mesh.rank(); ++i) out.append(py::make_tuple(mesh.axis_names()[i], mesh.shape()[i]));
        return py::tuple(out);
      })
      .def_property_readonly("axis_sizes", [](const Mesh& mesh) { return ShapeToPy(mesh.shape()); })
      .def_property_readonly("size", &Mesh::size)
      .def_property_readonly("empty", &Mesh::empty)
      .def_property_readonly("topology", [](const Mesh& mesh) -> py::object {
        if (mesh.shared_topology() == nullptr) return py::none();
        return py::cast(std::const_pointer_cast<Topology>(mesh.shared_topology()));
      })
      .def("_local_mesh", &t5x::LocalMesh, py::arg("process_index"),
           "JAX: Mesh._local_mesh(process_index), the devices of that process.")
      .def("__str__", &MeshStr)
      .def("__repr__", &MeshRepr)
      .def("__eq__", [](const Mesh& a, py::object b) { return py::isinstance<Mesh>(b) && a == b.cast<const Mesh&>(); })
      .def("__hash__", [](const Mesh& mesh) {
        return py::hash(py::make_tuple(py::tuple(py::cast(mesh.axis_names())), py::tuple(py::cast(mesh.device_ids()))));
      });
}

// The device-array factories (mesh_utils, make_mesh, T5X's get_mesh family) under the names mesh.py and t5x.py wrap.
void BindMeshFactories(py::module_& m) {
  m.def("_create_device_mesh",
        [](const std::vector<int64_t>& shape, py::object topology, py::object devices, bool contiguous, bool split) {
          auto topo = TopologyFromPy(topology);
          return DeviceArrayToNumpy(
              CreateDeviceMesh(shape, *topo, IdsFromPy(devices),
                               {.contiguous_submeshes = contiguous, .allow_split_physical_axes = split}));
        });
  m.def("_create_hybrid_device_mesh",
        [](const std::vector<int64_t>& ici, const std::vector<int64_t>& dcn, py::object topology, py::object devices,
           bool process_is_granule, bool sort_granules, bool split) {
          auto topo = TopologyFromPy(topology);
          return DeviceArrayToNumpy(CreateHybridDeviceMesh(ici, dcn, *topo, IdsFromPy(devices),
                                                           {.process_is_granule = process_is_granule,
                                                            .should_sort_granules_by_key = sort_granules,
                                                            .allow_split_physical_axes = split}));
        });
  m.def("_make_mesh", [](const std::vector<int64_t>& shapes, const std::vector<std::string>& names, py::object topology,
                         py::object devices) {
    return MakeMesh(shapes, names, TopologyFromPy(topology), IdsFromPy(devices));
  });
  m.def("_get_mesh", [](const std::vector<int>& submesh, py::object topology, int host, bool tile) {
    return t5x::GetMesh(submesh, TopologyFromPy(topology), host, tile);
  });
  m.def("_get_cpu_mesh", [](py::object topology) { return t5x::GetCpuMesh(TopologyFromPy(topology)); });
  m.def("_get_gpu_mesh", [](int num_partitions, py::object topology) {
    return t5x::GetGpuMesh(num_partitions, TopologyFromPy(topology));
  });
  m.def("_default_mesh", [](int num_partitions, std::optional<std::vector<int>> submesh, py::object topology,
                            std::optional<std::vector<int64_t>> ici, std::optional<std::vector<int64_t>> dcn) {
    return t5x::DefaultMesh(num_partitions, submesh, TopologyFromPy(topology), ici, dcn);
  });
}

void BindLocalChunker(py::module_& m) {
  py::class_<t5x::LocalChunker>(m, "LocalChunker",
                                "T5X: LocalChunker(global_mesh) as it runs on process `host`.")
      .def(py::init<Mesh, int>(), py::arg("global_mesh"), py::kw_only(), py::arg("host") = 0)
      .def_property_readonly("global_mesh", &t5x::LocalChunker::global_mesh)
      .def_property_readonly("local_mesh", &t5x::LocalChunker::local_mesh)
      .def_property_readonly("host", &t5x::LocalChunker::host)
      .def_property_readonly("mesh_axes", [](const t5x::LocalChunker& c) { return c.mesh_axes(); })
      .def_property_readonly("num_chunks", [](const t5x::LocalChunker& c) {
        py::dict out;
        for (size_t i = 0; i < c.mesh_axes().size(); ++i) out[py::str(c.mesh_axes()[i])] = c.num_chunks()[i];
        return out;
      })
      .def_property_readonly("chunk_ids", [](const t5x::LocalChunker& c) {
        py::dict out;
        for (size_t i = 0; i < c.mesh_axes().size(); ++i) out[py::str(c.mesh_axes()[i])] = c.chunk_ids()[i];
        return out;
      })
      .def("_get_local_chunk_info",
           [](const t5x::LocalChunker& c, const std::vector<int64_t>& shape, py::sequence axes) {
             std::vector<t5x::ChunkMeshAxis> mesh_axes;
             for (py::handle a : axes) mesh_axes.push_back(ChunkAxisFromPy(a));
             t5x::LocalChunkInfo info = c.GetLocalChunkInfo(shape, mesh_axes);
             py::list slices;
             for (const t5x::ChunkSlice& s : info.slice) slices.append(ChunkSliceToPy(s));
             return py::make_tuple(slices, info.replica_id);
           })
      .def("get_shard_id", &t5x::LocalChunker::GetShardId, py::arg("sharded_mesh_axes"))
      .def("get_replica_id", &t5x::LocalChunker::GetReplicaId, py::arg("sharded_mesh_axes"));
}

}  // namespace

void BindMesh(py::module_& m) {
  BindDevice(m);
  BindTopology(m);
  BindMeshClass(m);
  BindMeshFactories(m);
  BindLocalChunker(m);
}

}  // namespace spmdsim::python
