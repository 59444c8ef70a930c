"""Errors: the peers' exception classes, and one-line TypeErrors for the bindings.

pybind11 answers arguments that match no binding with a TypeError listing every signature and the repr of every
argument (a Mesh's repr can run to many lines); every bound callable whose arguments can fail to convert is wrapped
here (wrap_bound_callables, called once the package is imported) so that the TypeError says in one line what it
got and what it takes.
"""

import functools as _functools
import re as _re

from spmdsim import _spmdsim
from spmdsim._spmdsim import (  # noqa: F401  (re-exported by the package)
    DuplicateSpecError,
    IndivisibleError,
    ScenarioError,
)


_SIGNATURE_LINE = _re.compile(r"^\s*1\. (?:[\w.]+)?(\(.*?\))(?: -> .*)?$", _re.M)


def _mismatch_message(name, message, args, kwargs):
    got = [type(a).__name__ for a in args] + [f"{k}={type(v).__name__}" for k, v in kwargs.items()]
    match = _SIGNATURE_LINE.search(message)
    takes = match.group(1).replace("spmdsim._spmdsim.", "") if match else "(see help())"
    takes = _re.sub(r"^\(self: \w+(, )?", "(", takes)
    return f"{name}() got ({', '.join(got)}); it takes {takes}"


def _one_line_errors(func, name):
    @_functools.wraps(func)
    def wrapper(*args, **kwargs):
        try:
            return func(*args, **kwargs)
        except TypeError as e:
            text = str(e)
            if "incompatible function arguments" in text or "incompatible constructor arguments" in text:
                raise TypeError(_mismatch_message(name, text, args[1:] if name.endswith("__init__") else args,
                                                  kwargs)) from None
            raise
    return wrapper


def _can_mismatch(func):
    """False when every parameter of the binding accepts any Python object (its dispatch cannot fail)."""
    doc = (getattr(func, "__doc__", None) or "").split("\n", 1)[0]
    match = _re.match(r"^\w+\((.*)\)", doc)
    if not match:
        return True
    params = [p.strip() for p in match.group(1).split(",") if p.strip() and not p.strip().startswith("self")]
    params = [p for p in params if p not in ("*", "/")]
    return not all(p.startswith("*") or p.split(":", 1)[-1].split("=")[0].strip() in ("handle", "object", "args",
                                                                                        "kwargs")
                   for p in params)


def wrap_bound_callables(classes, namespaces):
    """Wraps, in place: the methods of `classes` (the extension's classes), every function of the extension that
    `namespaces` (the package's modules' globals) hold, and the extension's private functions (what the package's
    functions call). One wrapper per function, so that the same function has the same wrapper in every module."""
    for cls in classes:
        for attr, value in list(vars(cls).items()):
            if type(value).__name__ != "instancemethod" or (attr.startswith("__") and attr != "__init__"):
                continue
            func = value.__func__
            if _can_mismatch(func):
                setattr(cls, attr, _one_line_errors(func, f"{cls.__name__}.{attr}" if attr != "__init__"
                                                    else f"{cls.__name__}.__init__"))
    wrappers = {}  # id(function) -> its wrapper
    for namespace in namespaces:
        for attr, value in list(namespace.items()):
            if type(value).__name__ == "builtin_function_or_method" and getattr(value, "__module__", "") in (
                    "spmdsim._spmdsim", "spmdsim") and _can_mismatch(value):
                if id(value) not in wrappers:
                    wrappers[id(value)] = _one_line_errors(value, attr)
                namespace[attr] = wrappers[id(value)]
    for attr, value in list(vars(_spmdsim).items()):
        if type(value).__name__ == "builtin_function_or_method" and attr.startswith("_") and _can_mismatch(value):
            setattr(_spmdsim, attr, _one_line_errors(value, attr.lstrip("_")))
