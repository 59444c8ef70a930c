// spmdsim::Error -> the Python exception the peer raises for the same mistake (docs/python.md, "Errors").
//
// The class comes from Error::kind() (the peer's exception class, common/error.h ErrorKind) when it has one,
// else from the ErrorCode:
//   ValueError, TypeError, KeyError, IndexError, AssertionError, NameError, NotImplementedError, SyntaxError,
//   RuntimeError                      -> the builtin of that name
//   DuplicateSpecError                -> spmdsim's class of that name, an Exception (as JAX's; not a ValueError)
//   IndivisibleError, ScenarioError   -> spmdsim's classes of that name, subclasses of ValueError
//   re.error                          -> Python's re.error
//   no kind: kUnimplemented -> NotImplementedError, kResourceExhausted -> MemoryError, kDeadlineExceeded ->
//            TimeoutError, kInternal / kAborted -> RuntimeError, every other code -> ValueError.
// The exception's args are (message,) with the C++ message (Error::message(), without the kind prefix); it
// also carries `code` (the ErrorCode's name, e.g. "INVALID_ARGUMENT") and `kind` (the peer's name or ""), and a
// note "did you mean 'model' for 'modle'?" when a spec names a mesh axis close to one the mesh has.
// pybind11's cast_error (a Python value of the wrong type inside a binding) -> TypeError, in one line.
#include <exception>
#include <string>

#include "common/error.h"
#include "partition/partition_spec.h"
#include "python/bindings.h"

namespace spmdsim::python {
namespace {

PyObject* g_duplicate_spec_error = nullptr;
PyObject* g_indivisible_error = nullptr;
PyObject* g_scenario_error = nullptr;

PyObject* NewExceptionClass(py::module_& m, const char* name, const char* doc, PyObject* base) {
  std::string qualified = std::string("spmdsim.") + name;
  PyObject* cls = PyErr_NewExceptionWithDoc(qualified.c_str(), doc, base, nullptr);
  if (cls == nullptr) throw py::error_already_set();
  m.attr(name) = py::handle(cls);  // the module holds a reference too; ours is kept for the process
  return cls;
}

// nullptr for kNone and kReError (re.error is looked up in RaiseError).
PyObject* ClassForKind(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::kValueError: return PyExc_ValueError;
    case ErrorKind::kTypeError: return PyExc_TypeError;
    case ErrorKind::kKeyError: return PyExc_KeyError;
    case ErrorKind::kIndexError: return PyExc_IndexError;
    case ErrorKind::kAssertionError: return PyExc_AssertionError;
    case ErrorKind::kNameError: return PyExc_NameError;
    case ErrorKind::kNotImplementedError: return PyExc_NotImplementedError;
    case ErrorKind::kSyntaxError: return PyExc_SyntaxError;
    case ErrorKind::kRuntimeError: return PyExc_RuntimeError;
    case ErrorKind::kDuplicateSpecError: return g_duplicate_spec_error;
    case ErrorKind::kIndivisibleError: return g_indivisible_error;
    case ErrorKind::kScenarioError: return g_scenario_error;
    case ErrorKind::kNone:
    case ErrorKind::kReError: return nullptr;
  }
  return nullptr;
}

PyObject* ClassForCode(ErrorCode code) {
  switch (code) {
    case ErrorCode::kUnimplemented: return PyExc_NotImplementedError;
    case ErrorCode::kResourceExhausted: return PyExc_MemoryError;
    case ErrorCode::kDeadlineExceeded: return PyExc_TimeoutError;
    case ErrorCode::kInternal:
    case ErrorCode::kAborted: return PyExc_RuntimeError;
    default: return PyExc_ValueError;
  }
}

void RaiseError(const Error& e) {
  py::object cls;
  if (e.kind() == ErrorKind::kReError) {
    cls = py::module_::import("re").attr("error");
  } else if (PyObject* c = ClassForKind(e.kind())) {
    cls = py::reinterpret_borrow<py::object>(c);
  } else {
    cls = py::reinterpret_borrow<py::object>(ClassForCode(e.code()));
  }
  py::object exc = cls(e.message());
  exc.attr("code") = std::string(ErrorCodeName(e.code()));
  exc.attr("kind") = std::string(ErrorKindName(e.kind()));
  // A did-you-mean for a spec's unknown mesh axis, as a note (PEP 678, shown under the traceback): str(exc) stays
  // JAX's message.
  if (std::string hint = UnknownAxisHint(e); !hint.empty() && py::hasattr(exc, "add_note")) {
    exc.attr("add_note")(hint.substr(2, hint.size() - 3));  // " (did you mean ...?)" -> "did you mean ...?"
  }
  PyErr_SetObject(cls.ptr(), exc.ptr());
}

}  // namespace

void BindErrors(py::module_& m) {
  g_duplicate_spec_error =
      NewExceptionClass(m, "DuplicateSpecError",
                        "An axis named twice in a PartitionSpec (JAX: jax._src.named_sharding.DuplicateSpecError, "
                        "an Exception that is not a ValueError).",
                        PyExc_Exception);
  g_indivisible_error = NewExceptionClass(
      m, "IndivisibleError", "An array dimension that the mesh axes of its spec do not divide (JAX: a ValueError).",
      PyExc_ValueError);
  g_scenario_error = NewExceptionClass(m, "ScenarioError", "A problem in a scenario file (file:line:column: ...).",
                                       PyExc_ValueError);
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const Error& e) {
      // Translate any exception that escapes in a way that keeps pybind11's state consistent.
      try {
        RaiseError(e);
      } catch (py::error_already_set& inner) {
        inner.restore();
      }
    } catch (const py::cast_error& e) {
      // A Python value of the wrong type inside a binding: pybind11 raises RuntimeError("Unable to cast Python
      // instance of type ... (#define PYBIND11_DETAILED_ERROR_MESSAGES ...)"); Python (and the peers) say TypeError.
      std::string message = e.what();
      if (auto cut = message.find(" (#define"); cut != std::string::npos) message.resize(cut);
      if (auto cut = message.find(" (compile in debug mode"); cut != std::string::npos) message.resize(cut);
      PyErr_SetString(PyExc_TypeError, message.c_str());
    }
  });
}

}  // namespace spmdsim::python
