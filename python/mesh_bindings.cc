// Topology, Device, Mesh, JAX's mesh_utils and T5X's mesh builders (mesh/). The package layer
// (spmdsim/__init__.py) gives the JAX / T5X signatures; the functions here take the topology explicitly.
#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <pybind11/numpy.h>

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

py::array_t<int64_t> DeviceArrayToNumpy(const DeviceArray& devices) {
  py::array_t<int64_t> out(devices.shape());
  int64_t* data = out.mutable_data();
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
    py::array_t<int64_t, py::array::c_style | py::array::forcecast> flat(arr);
    for (py::ssize_t i = 0; i < flat.size(); ++i) ids.push_back(static_cast<int>(flat.data()[i]));
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

Mesh MakePyMesh(py::handle devices, const std::vector<std::string>& axis_names, py::object topology) {
  std::shared_ptr<const Topology> topo;
  if (!topology.is_none()) topo = TopologyFromPy(topology);
  std::shared_ptr<const Topology> from_devices;
  DeviceArray array = DeviceArrayFromPy(devices, &from_devices);
  if (topo == nullptr) topo = from_devices;
  if (topo == nullptr && array.size() > 0) {
    // Integer ids without a topology: a CPU host with enough devices (JAX's Mesh needs Device objects).
    int max_id = *std::max_element(array.ids().begin(), array.ids().end());
    topo = std::make_shared<const Topology>(Topology::Cpu(std::max(max_id + 1, 1)));
  }
  if (array.size() == 0) return Mesh();
  return Mesh(std::move(array), axis_names, topo);
}

py::object MeshShape(const Mesh& mesh) {
  py::object ordered = py::module_::import("collections").attr("OrderedDict")();
  for (int i = 0; i < mesh.rank(); ++i) ordered[py::str(mesh.axis_names()[i])] = mesh.shape()[i];
  return ordered;
}

std::string MeshRepr(const Mesh& mesh) {
  if (mesh.empty()) return "Mesh(device_ids=[], axis_names=())";
  std::string ids = py::repr(DeviceArrayToNumpy(mesh.devices())).cast<std::string>();
  std::vector<std::string> types(mesh.rank(), "Auto");
  std::string axis_types = types.size() == 1 ? "(Auto,)" : fmt::format("({})", fmt::join(types, ", "));
  return fmt::format("Mesh(device_ids={}, axis_names={}, axis_types={})", ids, PyTuple(mesh.axis_names()),
                     axis_types);
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
  return value.cast<std::shared_ptr<Topology>>();
}

void BindMesh(py::module_& m) {
  py::class_<PyDevice>(m, "Device", "One device of a Topology (JAX: jax.Device).")
      .def_property_readonly("id", [](const PyDevice& d) { return d.id; })
      .def_property_readonly("process_index", [](const PyDevice& d) { return d.device().process_index; })
      .def_property_readonly("slice_index", [](const PyDevice& d) { return d.device().slice_index; })
      .def_property_readonly("coords", [](const PyDevice& d) {
        const auto& c = d.device().coords;
        return py::make_tuple(c[0], c[1], c[2]);
      })
      .def_property_readonly("core_on_chip", [](const PyDevice& d) { return d.device().core_on_chip; })
      .def_property_readonly("platform", [](const PyDevice& d) { return std::string(PlatformName(d.topology->platform())); })
      .def_property_readonly("device_kind", [](const PyDevice& d) { return d.topology->device_kind(); })
      .def_property_readonly("topology", [](const PyDevice& d) { return std::const_pointer_cast<Topology>(d.topology); })
      .def("__repr__", &DeviceRepr)
      .def("__eq__", [](const PyDevice& a, py::object b) {
        return py::isinstance<PyDevice>(b) && a.topology == b.cast<const PyDevice&>().topology &&
               a.id == b.cast<const PyDevice&>().id;
      })
      .def("__hash__", [](const PyDevice& d) { return py::hash(py::make_tuple(d.id, reinterpret_cast<uintptr_t>(d.topology.get()))); });

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
        py::list out;
        for (const Device& d : t->devices()) out.append(py::cast(PyDevice{t, d.id}));
        return out;
      }, "Every device in id order (JAX: jax.devices() lists them in process order; see jax_devices_order).")
      .def("jax_devices_order", [](const Topology& t) { return JaxDevicesOrder(t); },
           "Device ids in the order jax.devices() lists them.")
      .def("__str__", &Topology::ToString)
      .def("__repr__", [](const Topology& t) {
        return t.num_slices() > 1 ? fmt::format("Topology({}, num_slices={})", PyRepr(Split(t.ToString(), ' ')[0]), t.num_slices())
                                  : fmt::format("Topology({})", PyRepr(t.ToString()));
      });

  py::class_<Mesh>(m, "Mesh", "Named axes over an array of device ids (JAX: jax.sharding.Mesh).")
      .def(py::init(&MakePyMesh), py::arg("devices"), py::arg("axis_names"), py::kw_only(),
           py::arg("topology") = py::none())
      .def_property_readonly("devices", [](const Mesh& mesh) { return DeviceArrayToNumpy(mesh.devices()); },
                             "numpy array of device ids, shaped as the mesh")
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
      .def("local_mesh", &t5x::LocalMesh, py::arg("process_index"),
           "JAX: Mesh.local_mesh as seen from process `process_index`.")
      .def("__str__", &Mesh::ToString)
      .def("__repr__", &MeshRepr)
      .def("__eq__", [](const Mesh& a, py::object b) { return py::isinstance<Mesh>(b) && a == b.cast<const Mesh&>(); })
      .def("__hash__", [](const Mesh& mesh) {
        return py::hash(py::make_tuple(py::tuple(py::cast(mesh.axis_names())), py::tuple(py::cast(mesh.device_ids()))));
      });

  m.def("_create_device_mesh",
        [](const std::vector<int64_t>& shape, py::object topology, py::object devices, bool contiguous, bool split) {
          auto topo = TopologyFromPy(topology);
          return DeviceArrayToNumpy(CreateDeviceMesh(shape, *topo, IdsFromPy(devices),
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
                         py::object devices) { return MakeMesh(shapes, names, TopologyFromPy(topology), IdsFromPy(devices)); });
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
      .def("_get_local_chunk_info", [](const t5x::LocalChunker& c, const std::vector<int64_t>& shape, py::sequence axes) {
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

}  // namespace spmdsim::python
