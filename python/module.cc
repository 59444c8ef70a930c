// The extension module spmdsim._spmdsim. The package spmdsim (python/spmdsim/: one module per concept, their names
// re-exported by __init__.py) gives it the peers' Python signatures; docs/python.md describes what is bound how.
#include <pybind11/pybind11.h>

#include "python/bindings.h"

PYBIND11_MODULE(_spmdsim, m) {
  m.doc() = "spmdsim's C++ library, bound for Python (use the package `spmdsim`, not this module)";
  spmdsim::python::BindErrors(m);
  spmdsim::python::BindMesh(m);
  spmdsim::python::BindPartition(m);
  spmdsim::python::BindRules(m);
  spmdsim::python::BindData(m);
  spmdsim::python::BindHlo(m);
}
