// numpy arrays made and measured through numpy's Python API (python/bindings.h, "numpy").
//
// Why: Debian 12's pybind11 (2.10) reads a dtype's item size from PyArray_Descr at numpy 1.x's offset, which
// numpy 2 moved (jax needs numpy >= 2, so the test environment has it). pybind11's py::array(dtype, shape),
// array_t<T>(shape), itemsize() and nbytes() then compute strides and sizes from garbage. What stays right under
// both numpy ABIs is used directly: PyArrayObject's data, ndim, shape and strides, and a dtype's `kind` character.
#include <cstdint>
#include <vector>

#include "python/bindings.h"

namespace spmdsim::python {

py::array NumpyEmpty(const std::vector<int64_t>& shape, py::handle dtype) {
  py::tuple dims(shape.size());
  for (size_t i = 0; i < shape.size(); ++i) dims[i] = py::int_(shape[i]);
  return py::module_::import("numpy").attr("empty")(dims, dtype);
}

size_t NumpyItemSize(const py::array& a) { return a.attr("itemsize").cast<size_t>(); }

size_t NumpyBytes(const py::array& a) { return a.attr("nbytes").cast<size_t>(); }

}  // namespace spmdsim::python
