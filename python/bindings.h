// Shared pieces of the Python bindings (python/*.cc): conversions between Python values and spmdsim's value
// types, and the Bind* functions each file defines. Used by the extension module only (nothing includes it
// from another folder).
//
// Conversions follow the peers: a PartitionSpec entry is None, a str, a tuple/list of str, or
// PartitionSpec.UNCONSTRAINED; shapes are sequences of ints. Every conversion raises TypeError (pybind11's
// cast error) or the library's own Error (mapped by errors.cc) for a bad value.
#ifndef SPMDSIM_PYTHON_BINDINGS_H_
#define SPMDSIM_PYTHON_BINDINGS_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "mesh/mesh.h"
#include "mesh/topology.h"
#include "partition/partition_spec.h"

namespace spmdsim::python {

namespace py = pybind11;

// PartitionSpec.UNCONSTRAINED: a singleton whose repr is "UNCONSTRAINED" (JAX: UnconstrainedSingleton).
py::object Unconstrained();

// One PartitionSpec entry from Python (JAX's _canonicalize_partition): None, '', () -> None; 'x'; ('x',) -> 'x';
// ('x', 'y') / ['x', 'y']; UNCONSTRAINED. A nested tuple is JAX's ValueError.
PartitionSpec::Entry EntryFromPy(py::handle value);
// The Python value of an entry: None, 'x', ('x', 'y') or UNCONSTRAINED.
py::object EntryToPy(const PartitionSpec::Entry& entry);
// A PartitionSpec, or any sequence of entries (JAX accepts a tuple wherever it takes a spec).
PartitionSpec SpecFromPy(py::handle value);

// A shape: any sequence of ints (tuple, list, numpy shape).
std::vector<int64_t> ShapeFromPy(py::handle value);
py::tuple ShapeToPy(const std::vector<int64_t>& shape);

// The Topology of a Python Topology object (shared with the mesh that uses it).
std::shared_ptr<const Topology> TopologyFromPy(py::handle value);

// The Python value json.loads(j.dump()) gives (data_bindings.cc).
py::object JsonToPy(const nlohmann::json& j);
// The Device objects of a topology, in id order: the same objects on every call (JAX's jax.devices() returns the
// same Device objects too), kept for the last 64 topologies. REQUIRES: the GIL.
const py::list& DeviceObjects(const std::shared_ptr<const Topology>& topology);
// The Device object of `id` in the mesh's topology.
py::object DeviceObject(const Mesh& mesh, int id);
// A Mesh from a Python value: spmdsim's Mesh, or a jax.sharding.Mesh (converted by spmdsim.Mesh.from_jax).
Mesh MeshFromPy(py::handle value);

// numpy (numpy_util.cc): arrays made and measured through numpy's Python API, because Debian 12's pybind11 reads
// dtype item sizes at numpy 1.x's struct offset (wrong under numpy 2). Use these instead of py::array(dtype, shape),
// array_t<T>(shape), itemsize() and nbytes(); data(), mutable_data(), ndim(), shape() and dtype().kind() are safe.
py::array NumpyEmpty(const std::vector<int64_t>& shape, py::handle dtype);  // np.empty(shape, dtype)
size_t NumpyItemSize(const py::array& a);
size_t NumpyBytes(const py::array& a);

void BindErrors(py::module_& m);
void BindMesh(py::module_& m);
void BindPartition(py::module_& m);
void BindRules(py::module_& m);
void BindData(py::module_& m);
void BindHlo(py::module_& m);

}  // namespace spmdsim::python

#endif  // SPMDSIM_PYTHON_BINDINGS_H_
