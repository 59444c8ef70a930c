"""shard_map programs: a Program (the body as steps), ShardMap (JAX: shard_map with a Program as f) and its result."""

import typing as _typing

from spmdsim import _spmdsim
from spmdsim.interop import _as_mesh
from spmdsim.sharding import _is_spec


class ShapeDtypeStruct(_typing.NamedTuple):
    """JAX: jax.ShapeDtypeStruct. An abstract program input (shape and dtype, no data)."""
    shape: tuple
    dtype: _typing.Any


class Value:
    """A value of a Program (an input or the result of a step)."""

    def __init__(self, program, name):
        self.program = program
        self.name = name

    def __repr__(self):
        return f"Value({self.name!r})"

    def __add__(self, other): return self.program.add(self, other)
    def __sub__(self, other): return self.program.sub(self, other)
    def __mul__(self, other): return self.program.mul(self, other)
    def __truediv__(self, other): return self.program.div(self, other)
    def __neg__(self): return self.program.neg(self)
    def __matmul__(self, other): return self.program.matmul(self, other)


def _axes(axis_name):
    return [axis_name] if isinstance(axis_name, str) else list(axis_name)


class Program:
    """A shard_map body as a list of steps (workloads' ProgramStep; docs/workloads.md lists every op).

    Example::

        p = spmdsim.Program()
        x, w = p.input("x"), p.input("w")
        y = p.psum(p.einsum("bd,df->bf", x, w), "model")
        p.returns(y)
    """

    def __init__(self):
        self.inputs = []
        self.steps = []
        self.outputs = []
        self._count = 0

    def input(self, name):
        if any(n == name for n in self.inputs):
            raise ValueError(f"input {name!r} defined twice")
        self.inputs.append(name)
        return Value(self, name)

    def returns(self, *values):
        self.outputs = [v.name for v in values]
        return self

    def step(self, op, *args, name=None, **fields):
        """Any op of the program language: p.step('softmax', x, axis=1)."""
        if name is None:
            self._count += 1
            name = f"{op}_{self._count}"
        for a in args:
            if not isinstance(a, Value) or a.program is not self:
                raise TypeError(f"{op}: arguments must be Values of this program, got {a!r}")
        step = {"name": name, "op": op, "args": [a.name for a in args]}
        step.update({k: v for k, v in fields.items() if v is not None})
        self.steps.append(step)
        return Value(self, name)

    # Collectives (JAX: jax.lax.psum & co; axis_name a mesh axis or a tuple of them).
    def psum(self, x, axis_name, *, name=None): return self.step("psum", x, axes=_axes(axis_name), name=name)
    def pmean(self, x, axis_name, *, name=None): return self.step("pmean", x, axes=_axes(axis_name), name=name)
    def pmax(self, x, axis_name, *, name=None): return self.step("pmax", x, axes=_axes(axis_name), name=name)
    def pmin(self, x, axis_name, *, name=None): return self.step("pmin", x, axes=_axes(axis_name), name=name)

    def all_gather(self, x, axis_name, *, axis=0, tiled=False, name=None):
        return self.step("all_gather", x, axes=_axes(axis_name), axis=axis, tiled=tiled, name=name)

    def psum_scatter(self, x, axis_name, *, scatter_dimension=0, tiled=False, name=None):
        return self.step("psum_scatter", x, axes=_axes(axis_name), axis=scatter_dimension, tiled=tiled, name=name)

    def all_to_all(self, x, axis_name, split_axis, concat_axis, *, tiled=False, name=None):
        return self.step("all_to_all", x, axes=_axes(axis_name), split_axis=split_axis, concat_axis=concat_axis,
                         tiled=tiled, name=name)

    def ppermute(self, x, axis_name, perm, *, name=None):
        return self.step("ppermute", x, axes=_axes(axis_name), pairs=[tuple(p) for p in perm], name=name)

    def axis_index(self, axis_name, *, name=None): return self.step("axis_index", axes=_axes(axis_name), name=name)

    # Linear algebra.
    def einsum(self, equation, *operands, name=None): return self.step("einsum", *operands, equation=equation, name=name)
    def matmul(self, a, b, *, name=None): return self.step("matmul", a, b, name=name)
    def dot(self, a, b, *, name=None): return self.step("dot", a, b, name=name)

    # Elementwise: y is a Value or a Python number.
    def _binary(self, op, x, y, name):
        if isinstance(y, Value):
            return self.step(op, x, y, name=name)
        return self.step(op, x, scalar=float(y), name=name)

    def add(self, x, y, *, name=None): return self._binary("add", x, y, name)
    def sub(self, x, y, *, name=None): return self._binary("sub", x, y, name)
    def mul(self, x, y, *, name=None): return self._binary("mul", x, y, name)
    def div(self, x, y, *, name=None): return self._binary("div", x, y, name)
    def max(self, x, y, *, name=None): return self._binary("max", x, y, name)
    def min(self, x, y, *, name=None): return self._binary("min", x, y, name)
    def pow(self, x, y, *, name=None): return self._binary("pow", x, y, name)

    def gelu(self, x, *, approximate=True, name=None): return self.step("gelu", x, approximate=approximate, name=name)
    def cast(self, x, dtype, *, name=None): return self.step("cast", x, dtype=dtype, name=name)

    # Reductions and shapes.
    def _dims(self, axis):
        return [] if axis is None else ([axis] if isinstance(axis, int) else list(axis))

    def sum(self, x, axis=None, *, keepdims=False, name=None):
        return self.step("sum", x, dims=self._dims(axis), keepdims=keepdims, name=name)

    def mean(self, x, axis=None, *, keepdims=False, name=None):
        return self.step("mean", x, dims=self._dims(axis), keepdims=keepdims, name=name)

    def softmax(self, x, axis, *, name=None): return self.step("softmax", x, axis=axis, name=name)
    def log_softmax(self, x, axis, *, name=None): return self.step("log_softmax", x, axis=axis, name=name)
    def reshape(self, x, shape, *, name=None): return self.step("reshape", x, shape=list(shape), name=name)
    def transpose(self, x, axes, *, name=None): return self.step("transpose", x, dims=list(axes), name=name)
    def broadcast_to(self, x, shape, *, name=None): return self.step("broadcast_to", x, shape=list(shape), name=name)

    def concatenate(self, values, axis=0, *, name=None):
        return self.step("concatenate", *values, axis=axis, name=name)

    def slice(self, x, start, limit, strides=None, *, name=None):
        return self.step("slice", x, start=list(start), limit=list(limit),
                         strides=None if strides is None else list(strides), name=name)


def _unary(op):
    def method(self, x, *, name=None):
        return self.step(op, x, name=name)
    method.__name__ = op
    method.__doc__ = f"Elementwise {op}."
    return method


for _op in ("neg", "abs", "exp", "log", "sqrt", "rsqrt", "tanh", "sigmoid", "relu", "silu", "square"):
    setattr(Program, _op, _unary(_op))
for _op in ("max_reduce", "min_reduce"):
    setattr(Program, _op, lambda self, x, axis=None, *, keepdims=False, name=None, _o=_op:
            self.step(_o, x, dims=self._dims(axis), keepdims=keepdims, name=name))
for _op in ("gelu_grad", "relu_grad"):
    setattr(Program, _op, lambda self, x, dy, *, name=None, _o=_op: self.step(_o, x, dy, name=name))
Program.softmax_grad = lambda self, p, dp, axis, *, name=None: self.step("softmax_grad", p, dp, axis=axis, name=name)
del _op


class ShardMapResult(_typing.NamedTuple):
    """What a ShardMap call returns: the outputs (numpy; None in abstract mode) and the prediction (the workload's
    dict of `spmdsim run --json`: steps, totals, memory, check)."""
    outputs: _typing.Any
    prediction: dict


def _not_a_program(f):
    what = "a Python function" if callable(f) else f"{type(f).__name__} {f!r}"
    return (f"ShardMap takes a spmdsim.Program as f, got {what}: build the body with p = spmdsim.Program(); "
            f"x = p.input('x'); p.returns(p.psum(x, 'data')) (docs/python.md); to simulate a JAX function as XLA "
            f"compiles it, use spmdsim.from_jax(fn, *args, topology=...) (docs/hlo.md)")


class ShardMap:
    """JAX: shard_map(f, mesh=, in_specs=, out_specs=, check_vma=) with a Program as f.

    Calling it runs the program on the simulated devices with numpy inputs (global arrays, split by in_specs) and
    returns ShardMapResult(outputs, prediction). The outputs are compared with the program run on one device
    (prediction['check']) unless check=False.
    """

    def __init__(self, program, mesh, in_specs, out_specs, check_vma=True, *, name="shard_map"):
        if not isinstance(program, Program):
            raise TypeError(_not_a_program(program))
        if not program.outputs:
            raise ValueError("the program returns nothing: call program.returns(value, ...) first")
        self.program = program
        self.mesh = _as_mesh(mesh)
        self.in_specs = tuple(in_specs) if isinstance(in_specs, (tuple, list)) else (in_specs,)
        self._single_output = _is_spec(out_specs)
        self.out_specs = (out_specs,) if self._single_output else tuple(out_specs)
        if len(self.in_specs) != len(program.inputs):
            raise ValueError(f"shard_map: {len(self.in_specs)} in_specs for {len(program.inputs)} program inputs")
        if len(self.out_specs) != len(program.outputs):
            raise ValueError(f"shard_map: {len(self.out_specs)} out_specs for {len(program.outputs)} program outputs")
        self.check_vma = check_vma
        self.name = name

    def __call__(self, *args, abstract=False, threads=0, check=True, rtol=1e-5, atol=1e-6):
        if len(args) != len(self.program.inputs):
            raise TypeError(f"shard_map: expected {len(self.program.inputs)} arguments, got {len(args)}")
        inputs = [(n, a, s) for n, a, s in zip(self.program.inputs, args, self.in_specs)]
        outputs = list(zip(self.program.outputs, self.out_specs))
        values, prediction = _spmdsim._run_program(self.mesh, inputs, self.program.steps, outputs, self.check_vma,
                                                   check, rtol, atol, abstract, threads, self.name)
        if abstract:
            result = None if self._single_output else tuple(None for _ in outputs)
        else:
            result = tuple(values[n] for n in self.program.outputs)
            if self._single_output:
                result = result[0]
        return ShardMapResult(result, prediction)


def shard_map(program, mesh, in_specs, out_specs, check_vma=True):
    """JAX: jax.shard_map (keyword names as JAX's) for a Program."""
    return ShardMap(program, mesh, in_specs, out_specs, check_vma)
