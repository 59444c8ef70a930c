"""Compile a JAX program for a TPU pod or a GPU cluster that this machine does not have (docs/targets.md).

    mesh = spmdsim.target_mesh("tpu-v5e:4x4", data=4, model=4)              # a jax.sharding.AbstractMesh
    x = jax.ShapeDtypeStruct((1024, 512), jnp.bfloat16, sharding=NamedSharding(mesh, P("data", "model")))
    m = spmdsim.compile_for(step, x, target="tpu-v5e:4x4")                   # -> TargetModule
    m.memory_analysis["temp_size_in_bytes"], m.text                          # the compiler's own figures

The program is lowered here, device-free (jit(...).trace(...).lower(lowering_platforms=("tpu",))), and compiled
in a subprocess (spmdsim/_compile_worker.py) by the target's real compiler, libtpu or the CUDA plugin, against a
compile-only topology (jax.experimental.topologies). The result is cached by what decides it: the StableHLO
text, the target, the mesh, the flags and the compiler's package versions.
"""

import contextlib
import dataclasses
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

from spmdsim import _spmdsim
from spmdsim import _compile_worker

# Bumped whenever the worker's output changes meaning: entries of older workers are then not found.
_CACHE_FORMAT = 1
_GPU_TARGETS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "gpu_targets")

# spmdsim's TPU presets -> the compiler's generation name and number of torus dimensions.
_TPU_GENERATIONS = {"tpu-v2": ("v2", 2), "tpu-v3": ("v3", 2), "tpu-v4": ("v4", 3), "tpu-v5e": ("v5e", 2),
                    "tpu-v5p": ("v5p", 3), "tpu-v6e": ("v6e", 2)}
# spmdsim's GPU presets -> the GpuTargetConfigProto of their GPU (gpu_targets/). "gpu" is spmdsim's generic H100.
_GPU_CONFIGS = {"dgx-h100": "h100_sxm.txtpb", "gpu": "h100_sxm.txtpb", "dgx-h200": "h200_sxm.txtpb",
                "dgx-a100": "a100_sxm_80gb.txtpb", "dgx-b200": "b200.txtpb"}


class CompileError(RuntimeError):
    """The target's compiler failed, crashed or timed out. The message is one line: what happened, the compiler's
    last error line and the log's path. Attributes: kind ("error", "crash", "timeout", "not installed"),
    log_path (str or None), returncode (int or None)."""

    def __init__(self, message, *, kind, log_path=None, returncode=None):
        super().__init__(message)
        self.kind = kind
        self.log_path = log_path
        self.returncode = returncode


@dataclasses.dataclass(frozen=True)
class Target:
    """A spmdsim topology and how its compiler sees it.

    name: spmdsim's form ("tpu-v5e:4x4", "tpu-v5e:4x4 x 2 slices", "dgx-h100:2"); topology: the spmdsim.Topology;
    platform: JAX's lowering platform ("tpu" or "cuda"); compiler_topology: the keywords of
    jax.experimental.topologies.get_topology_desc (TPU: topology_name, chip_config_name, num_slices,
    chips_per_host_bounds; GPU: topology "1x<hosts>x<GPUs per host>"); gpu_config: the GpuTargetConfigProto file
    (GPU); granules: slices (TPU) or hosts (GPU), the groups joined by the data-centre network."""
    name: str
    topology: object = dataclasses.field(repr=False, compare=False)
    platform: str
    compiler_topology: dict
    gpu_config: str = None
    granules: int = 1

    @property
    def num_devices(self):
        return self.topology.num_devices


def _dims(topology):
    """Chips per torus dimension of one slice: 1 + the largest coordinate along each."""
    return [1 + max(d.coords[k] for d in topology.devices) for k in range(3)]


def _with_slices(topology, slices):
    if slices is None or slices == topology.num_slices:
        return topology
    text = topology.accelerator_type or str(topology).split(" x ")[0]
    return _spmdsim.Topology(text, int(slices))


def resolve_target(target, slices=None):
    """The Target of `target`: a spmdsim topology preset ("tpu-v5e:16x16", "tpu-v5p:8x16x16", "tpu-v4:4x4x4",
    "dgx-h100:2", ...), a Cloud TPU accelerator type ("v5p-2048", "v5litepod-256"), a spmdsim.Topology (its
    num_slices kept) or a Target. slices: the number of TPU slices, joined by the data-centre network."""
    if isinstance(target, Target):
        if slices is not None and slices != target.topology.num_slices:
            return resolve_target(target.topology, slices)
        return target
    topology = _spmdsim.Topology(target, int(slices or 1)) if isinstance(target, str) else target
    if not isinstance(topology, _spmdsim.Topology):
        raise TypeError(f"target must be a topology preset str, a spmdsim.Topology or a Target, not "
                        f"{type(target).__name__}")
    topology = _with_slices(topology, slices)
    preset = topology.preset
    if preset in _TPU_GENERATIONS:
        generation, rank = _TPU_GENERATIONS[preset]
        x, y, z = _dims(topology)
        name = f"{generation}:{x}x{y}" if rank == 2 else f"{generation}:{x}x{y}x{z}"
        keywords = {"topology_name": name}
        if generation == "v4":
            keywords["chip_config_name"] = "megacore"  # one device per chip, as spmdsim's tpu-v4 (and v5p's default)
        if topology.num_slices > 1:
            keywords["num_slices"] = topology.num_slices
        if x < 2 or y < 2:
            keywords["chips_per_host_bounds"] = [min(2, x), min(2, y), 1]  # libtpu's default host is 2x2x1 chips
        return Target(str(topology), topology, "tpu", keywords, None, topology.num_slices)
    if preset in _GPU_CONFIGS:
        hosts, per_host = topology.num_processes, topology.devices_per_process
        return Target(str(topology), topology, "cuda", {"topology": f"1x{hosts}x{per_host}"}, _GPU_CONFIGS[preset],
                      hosts)
    known = sorted(_TPU_GENERATIONS) + sorted(_GPU_CONFIGS)
    raise ValueError(f"compile_for: no compiler target for '{topology}' ({preset}); targets: {', '.join(known)} "
                     f"(with their sizes, e.g. 'tpu-v5e:16x16', 'dgx-h100:2'), or Cloud TPU types such as 'v5p-2048'")


def abstract_mesh(target, axes, *, slices=None, axis_types=None):
    """A jax.sharding.AbstractMesh of `axes` ({"data": 16, "model": 16}, in order) for `target`, whose devices it
    must use exactly: the product of the sizes is the target's device count (else ValueError)."""
    import jax
    t = resolve_target(target, slices)
    names, sizes = tuple(axes), tuple(int(s) for s in axes.values())
    total = 1
    for s in sizes:
        total *= s
    if total != t.num_devices:
        shown = " x ".join(f"{n}={s}" for n, s in zip(names, sizes)) or "no axes"
        raise ValueError(f"mesh {shown} has {total} devices; {t.name} has {t.num_devices}")
    if axis_types is None:
        return jax.sharding.AbstractMesh(sizes, names)
    return jax.sharding.AbstractMesh(sizes, names, axis_types=axis_types)


def target_mesh(target, *, slices=None, **axes):
    """abstract_mesh(target, axes) with the axes as keywords: target_mesh("tpu-v5e:4x4", data=4, model=4)."""
    return abstract_mesh(target, axes, slices=slices)


@dataclasses.dataclass(frozen=True)
class TargetModule:
    """What compile_for returns: the compiled module and what the compiler said about it.

    text: the optimized HLO module (compiled.as_text(), large constants printed); memory_analysis: the compiler's
    memory analysis per device (argument_size_in_bytes, output_size_in_bytes, alias_size_in_bytes,
    temp_size_in_bytes, generated_code_size_in_bytes, ...; JAX: compiled.memory_analysis()); cost_analysis: its
    cost analysis where it has one (flops, bytes accessed); target: the spmdsim topology text; platform: "tpu" or
    "cuda"; num_devices: the module's logical devices; mesh: {axis: size}; device_assignment: the spmdsim topology
    device id of each logical device (for run_hlo); compiler_devices: the compiler's device of each logical device
    (id, coords, core_on_chip, slice_index, process_index, device_kind); flags: XLA_FLAGS and LIBTPU_INIT_ARGS as
    the compiler ran; compile_seconds: the compiler's time (of the first compile, on a cache hit);
    lower_seconds: this call's lowering; versions: the compiler's packages; cache_path: the cache entry (None
    with cache=False); cache_hit: whether it came from the cache; module_partitions: the num_partitions of the
    module text, which is num_devices except on several TPU slices: libtpu then compiles one slice's program
    (MegaScale), its cross-slice collectives host transfers (send / recv to the MegaScale runtime); notes: such
    facts, in words."""
    text: str = dataclasses.field(repr=False)
    memory_analysis: dict
    cost_analysis: dict = dataclasses.field(repr=False)
    target: str
    platform: str
    num_devices: int
    mesh: dict
    device_assignment: tuple = dataclasses.field(repr=False)
    compiler_devices: tuple = dataclasses.field(repr=False)
    flags: dict
    compile_seconds: float
    lower_seconds: float
    versions: dict = dataclasses.field(repr=False)
    compiler_topology: dict = dataclasses.field(repr=False)
    cache_path: str = None
    cache_hit: bool = False
    module_partitions: int = 1
    notes: tuple = ()
    topology: object = dataclasses.field(default=None, repr=False, compare=False)

    def predict(self, **options):
        """run_hlo(text, topology=the target, device_assignment=..., abstract=True, **options): spmdsim's prediction
        of this module on its target (docs/hlo.md); on several TPU slices, of one slice's program on slice 0."""
        from spmdsim.hlo import run_hlo
        options.setdefault("abstract", True)
        if self.module_partitions == self.num_devices:
            options.setdefault("mesh", self.mesh)
        return run_hlo(self.text, topology=self.topology,
                       device_assignment=list(self.device_assignment[:self.module_partitions]), **options)


# ---------------------------------------------------------------------------------------------------------------
# Lowering (in this process, device-free)

def _as_abstract_mesh(mesh):
    import jax
    if mesh is None or isinstance(mesh, jax.sharding.AbstractMesh):
        return mesh
    if isinstance(mesh, dict):
        return jax.sharding.AbstractMesh(tuple(mesh.values()), tuple(mesh))
    if hasattr(mesh, "abstract_mesh"):
        return mesh.abstract_mesh
    raise TypeError(f"mesh must be a jax.sharding.AbstractMesh, a jax.sharding.Mesh or a dict, not "
                    f"{type(mesh).__name__}")


def _is_array(x):
    return hasattr(x, "shape") and hasattr(x, "dtype")


def _abstract_arguments(args, kwargs, mesh):
    """The arguments as ShapeDtypeStructs over one AbstractMesh (returned too; None when nothing names a mesh).
    A NamedSharding over a concrete Mesh moves to its abstract mesh; an argument without a NamedSharding is
    replicated; leaves that are not arrays (static arguments, Python scalars) stay as they are."""
    import jax
    from jax.sharding import NamedSharding, PartitionSpec
    leaves = jax.tree_util.tree_leaves((args, kwargs), is_leaf=_is_array)
    meshes = {_as_abstract_mesh(leaf.sharding.mesh) for leaf in leaves
              if _is_array(leaf) and isinstance(getattr(leaf, "sharding", None), NamedSharding)}
    if mesh is not None:
        meshes.add(_as_abstract_mesh(mesh))
    if len(meshes) > 1:
        raise ValueError(f"compile_for: the arguments' shardings use different meshes: {sorted(map(str, meshes))}")
    am = next(iter(meshes), None)

    def convert(leaf):
        if not _is_array(leaf):
            return leaf
        sharding = getattr(leaf, "sharding", None)
        spec = sharding.spec if isinstance(sharding, NamedSharding) else PartitionSpec()
        return jax.ShapeDtypeStruct(leaf.shape, leaf.dtype, sharding=None if am is None else NamedSharding(am, spec),
                                    weak_type=bool(getattr(leaf, "weak_type", False)))
    args, kwargs = jax.tree_util.tree_map(convert, (args, kwargs), is_leaf=_is_array)
    return args, kwargs, am


def _lower(fn, args, kwargs, platform, mesh):
    """(StableHLO text, abstract mesh or None, seconds): `fn` lowered for `platform` without its devices."""
    import jax
    jitted = fn if hasattr(fn, "trace") else jax.jit(fn)
    args, kwargs, am = _abstract_arguments(args, kwargs, mesh)
    started = time.perf_counter()
    # Bare PartitionSpecs inside the program (with_sharding_constraint(x, P("data"))) resolve against this mesh.
    with (jax.sharding.use_abstract_mesh(am) if am is not None else contextlib.nullcontext()):
        lowered = jitted.trace(*args, **kwargs).lower(lowering_platforms=(platform,))
    return lowered.as_text(), am, time.perf_counter() - started


def _module_attribute(text, name, default):
    m = re.search(rf"mhlo\.{name} = (\d+)", text[:4096])
    return int(m.group(1)) if m else default


def _dcn_mesh_shape(target, names, sizes, dcn_axes):
    """Per mesh axis, how many slices (TPU) or hosts (GPU) it spans. Default: all of them on the first axis whose
    size they divide (MaxText's data-parallel-over-DCN layout)."""
    g = target.granules
    if dcn_axes is None:
        if g == 1:
            return None
        for i, s in enumerate(sizes):
            if s % g == 0:
                return [g if k == i else 1 for k in range(len(sizes))]
        raise ValueError(f"compile_for: {target.name} has {g} {'slices' if target.platform == 'tpu' else 'hosts'} "
                         f"but no mesh axis of {dict(zip(names, sizes))} is a multiple of {g}; say how the axes span "
                         f"them with dcn_axes={{axis: count, ...}}")
    unknown = sorted(set(dcn_axes) - set(names))
    if unknown:
        raise ValueError(f"compile_for: dcn_axes names {unknown}, which the mesh {dict(zip(names, sizes))} lacks")
    dcn = [int(dcn_axes.get(n, 1)) for n in names]
    product = 1
    for d, s, n in zip(dcn, sizes, names):
        if d < 1 or s % d:
            raise ValueError(f"compile_for: dcn_axes[{n!r}] = {d} does not divide the axis size {s}")
        product *= d
    if product != g:
        raise ValueError(f"compile_for: dcn_axes {dcn_axes} spans {product} granules; {target.name} has {g}")
    return dcn


# ---------------------------------------------------------------------------------------------------------------
# The compiler process and the cache

def cache_dir():
    """Where compiled modules are kept: $SPMDSIM_CACHE_DIR, else ~/.cache/spmdsim/compiled."""
    return os.environ.get("SPMDSIM_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "spmdsim",
                                                               "compiled")


_versions_of_interpreter = {}


def _compiler_versions(python, platform):
    """The compiler interpreter's package versions (cache key): read here when it is this interpreter, else asked
    once per interpreter and platform."""
    if os.path.realpath(python) == os.path.realpath(sys.executable):
        return _compile_worker.package_versions(platform)
    key = (python, platform)
    if key not in _versions_of_interpreter:
        code = ("import json, sys; sys.path.insert(0, sys.argv[1]); import _compile_worker as w; "
                "print(json.dumps(w.package_versions(sys.argv[2])))")
        out = subprocess.run([python, "-c", code, os.path.dirname(_compile_worker.__file__), platform],
                             capture_output=True, text=True, timeout=120)
        if out.returncode != 0:
            raise CompileError(f"compile_for: the compiler interpreter {python} does not run: "
                               f"{_last_error_line(out.stderr) or out.returncode}", kind="not installed")
        _versions_of_interpreter[key] = json.loads(out.stdout.strip().splitlines()[-1])
    return _versions_of_interpreter[key]


def _flags(name, extra):
    parts = [os.environ.get(name, "")]
    if extra:
        parts.append(extra if isinstance(extra, str) else " ".join(extra))
    return " ".join(p.strip() for p in parts if p and p.strip())


_ERROR_LINE = re.compile(r"(Error|ERROR|error:|Check failed|FATAL|Fatal|F\d{4} |RESOURCE_EXHAUSTED|INVALID_ARGUMENT|"
                         r"INTERNAL|UNIMPLEMENTED|Aborted|Traceback)")


def _last_error_line(log):
    lines = [line.strip() for line in log.splitlines() if line.strip()]
    for line in reversed(lines):
        if _ERROR_LINE.search(line) and not line.startswith("Traceback"):
            return line
    return lines[-1] if lines else ""


def _worker_env(target, flags):
    env = dict(os.environ)
    env.update({
        "JAX_PLATFORMS": "cpu",                   # the compiler process runs nothing: CPU is its only runtime
        "ALLOW_MULTIPLE_LIBTPU_LOAD": "1",        # libtpu's process lock (/tmp/libtpu_lockfile) may be held
        "TPU_SKIP_MDS_QUERY": "1",                # no GCE metadata server to ask
        "TPU_WORKER_HOSTNAMES": "localhost",      # with TPU_WORKER_ID, silences libtpu's "could not determine" lines
        "TPU_WORKER_ID": "0",
        "JAX_SKIP_CUDA_CONSTRAINTS_CHECK": "1",   # no CUDA runtime to check
        "PYTHONUNBUFFERED": "1",
        "XLA_FLAGS": flags["XLA_FLAGS"],
        "LIBTPU_INIT_ARGS": flags["LIBTPU_INIT_ARGS"],
    })
    if target.platform == "tpu" and "TPU_ACCELERATOR_TYPE" not in os.environ:
        env["TPU_ACCELERATOR_TYPE"] = _accelerator_type(target)
    return env


def _accelerator_type(target):
    """The Cloud TPU type of one slice of the target (libtpu reads it at start-up): v5e 4x4 -> v5litepod-16."""
    topology = target.topology
    chips = topology.num_chips // topology.num_slices
    generation = _TPU_GENERATIONS[topology.preset][0]
    if generation in ("v2", "v3", "v4", "v5p"):
        return f"{generation}-{2 * chips}"  # these count TensorCores, 2 per chip
    return f"{'v5litepod' if generation == 'v5e' else generation}-{chips}"


def _run_worker(python, request, workdir, env, timeout):
    """Runs the worker in workdir; returns when it wrote its result there, or raises CompileError."""
    request_path = os.path.join(workdir, "request.json")
    with open(request_path, "w") as f:
        json.dump(request, f, indent=1)
    log_path = os.path.join(workdir, "worker.log")
    worker = os.path.abspath(_compile_worker.__file__)
    with open(log_path, "w") as log:
        process = subprocess.Popen([python, worker, request_path], stdout=log, stderr=subprocess.STDOUT,
                                   stdin=subprocess.DEVNULL, env=env, cwd=workdir, start_new_session=True)
        try:
            returncode = process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            raise CompileError(f"compile_for: the {request['platform']} compiler did not finish in {timeout} s "
                               f"(killed); log: {log_path}", kind="timeout", log_path=log_path) from None
        except BaseException:  # KeyboardInterrupt: take the compiler down with us
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            raise
    with open(log_path, errors="replace") as f:
        log_text = f.read()
    error_path = os.path.join(workdir, "error.json")
    if returncode != 0 and os.path.exists(error_path):
        with open(error_path) as f:
            error = json.load(f)
        lines = [line for line in error["message"].splitlines() if line.strip()]
        message = lines[0] if lines else error["type"]
        raise CompileError(f"compile_for: the {request['platform']} compiler failed: {error['type']}: {message}; "
                           f"log: {log_path}", kind="error", log_path=log_path, returncode=returncode)
    if returncode != 0:
        how = f"exit status {returncode}"
        if returncode < 0:
            how = f"signal {signal.Signals(-returncode).name}"
        raise CompileError(f"compile_for: the {request['platform']} compiler process crashed ({how}): "
                           f"{_last_error_line(log_text)}; log: {log_path}", kind="crash", log_path=log_path,
                           returncode=returncode)


def _check_installed(python, platform, versions):
    needed = [p for p, v in versions.items() if v is None]
    if needed:
        extra = "tpu" if platform == "tpu" else "gpu"
        raise CompileError(f"compile_for: {', '.join(needed)} not installed for {python} (the {platform} compiler): "
                           f"pip install -r python/requirements-target.txt, or spmdsim[{extra}]",
                           kind="not installed")


def _load_entry(path):
    with open(os.path.join(path, "result.json")) as f:
        result = json.load(f)
    with open(os.path.join(path, "module.txt")) as f:
        text = f.read()
    return result, text


def _device_assignment(target, devices):
    """The spmdsim topology device id of each of the compiler's logical devices: TPU by (slice, chip coordinates,
    core), GPU by (host, local index)."""
    topology = target.topology
    if target.platform == "tpu":
        ids = {(d.slice_index, tuple(d.coords), d.core_on_chip): d.id for d in topology.devices}
        keys = [(d.get("slice_index", 0), tuple(d["coords"]), d.get("core_on_chip", 0)) for d in devices]
    else:
        ids = {(d.process_index, d.coords[0]): d.id for d in topology.devices}
        keys = [(d["process_index"], d["coords"][2]) for d in devices]
    missing = [k for k in keys if k not in ids]
    if missing:
        raise CompileError(f"compile_for: the compiler's device {missing[0]} has no device in {target.name}",
                           kind="error")
    return tuple(ids[k] for k in keys)


def compile_for(fn, *args, target, slices=None, mesh=None, dcn_axes=None, xla_flags=None, libtpu_init_args=None,
                cache=True, timeout=600, compiler_python=None, **kwargs):
    """Compiles `fn` for `args` with the compiler of `target` and returns a TargetModule.

    fn: a jitted function (its jit options, donate_argnums and the rest, apply) or a plain one. args / kwargs: the
    program's arguments: jax.ShapeDtypeStructs (or arrays) whose shardings are NamedShardings over one
    jax.sharding.AbstractMesh (spmdsim.target_mesh) or over a Mesh (its abstract mesh is used); one without a
    NamedSharding is replicated. The mesh must have the target's device count (a program without a mesh compiles
    for one device). target: a topology preset or Topology (resolve_target); slices: TPU slices. mesh: the mesh of
    arguments without a sharding, when none has one. dcn_axes: {axis: count} of the slices (TPU) or hosts (GPU)
    each mesh axis spans (default: all on the first axis they divide). xla_flags / libtpu_init_args: appended to
    the environment's XLA_FLAGS / LIBTPU_INIT_ARGS for the compiler (str or list). cache: use and fill the cache
    (cache_dir()). timeout: seconds before the compiler is killed. compiler_python: the interpreter that compiles
    (default $SPMDSIM_COMPILER_PYTHON, else this one); it needs jax and the compilers of
    python/requirements-target.txt, not spmdsim.

    Raises CompileError when the compiler fails, crashes, times out or is not installed; JAX's own errors (a
    sharding that does not divide a shape) come from the lowering, here."""
    t = resolve_target(target, slices)
    python = compiler_python or os.environ.get("SPMDSIM_COMPILER_PYTHON") or sys.executable
    text, am, lower_seconds = _lower(fn, args, kwargs, t.platform, mesh)
    n, num_replicas, names, sizes = _program_devices(t, text, am)
    dcn = _dcn_mesh_shape(t, names, sizes, dcn_axes) if n > 1 else None
    flags = {"XLA_FLAGS": _flags("XLA_FLAGS", xla_flags),
             "LIBTPU_INIT_ARGS": _flags("LIBTPU_INIT_ARGS", libtpu_init_args)}
    versions = _compiler_versions(python, t.platform)
    _check_installed(python, t.platform, versions)
    config_file = os.path.join(_GPU_TARGETS, t.gpu_config) if t.gpu_config else None
    key_fields = {
        "format": _CACHE_FORMAT, "stablehlo_sha256": _sha256(text.encode()), "platform": t.platform,
        "topology": t.compiler_topology, "mesh": [list(names), list(sizes)], "dcn": dcn,
        "num_partitions": n // num_replicas, "num_replicas": num_replicas, "flags": flags, "versions": versions,
        "target_config_sha256": _file_sha256(config_file) if config_file else None,
    }
    request = {"platform": t.platform, "topology": t.compiler_topology, "target_config_file": config_file,
               "mesh_shape": list(sizes) or [1], "dcn_mesh_shape": dcn, "num_partitions": n // num_replicas,
               "num_replicas": num_replicas, "target": t.name, "key": key_fields}
    result, module_text, entry, hit = _cached_or_compiled(python, t, text, request, flags, timeout, cache)
    module_partitions = _module_attribute_in_text(module_text, "num_partitions")
    notes = []
    if module_partitions != n:
        notes.append(f"the module is one slice's program ({module_partitions} of {n} devices, libtpu's MegaScale "
                     f"compile): its collectives across the {t.granules} slices are host transfers (send / recv to "
                     f"the MegaScale runtime), not collectives of the module")
    return TargetModule(
        text=module_text, memory_analysis=result["memory_analysis"], cost_analysis=result["cost_analysis"],
        target=t.name, platform=t.platform, num_devices=n, mesh=dict(zip(names, sizes)),
        device_assignment=_device_assignment(t, result["devices"]), compiler_devices=tuple(result["devices"]),
        flags=result["flags"], compile_seconds=result["compile_seconds"], lower_seconds=lower_seconds,
        versions=result["versions"], compiler_topology=t.compiler_topology, cache_path=entry, cache_hit=hit,
        module_partitions=module_partitions, notes=tuple(notes), topology=t.topology)


def _sha256(data):
    return hashlib.sha256(data).hexdigest()


def _file_sha256(path):
    with open(path, "rb") as f:
        return _sha256(f.read())


def _module_attribute_in_text(text, name):
    m = re.search(rf"\b{name}=(\d+)", text[:65536])  # the HloModule line
    return int(m.group(1)) if m else 1


def _program_devices(target, text, am):
    """(devices, num_replicas, mesh axis names, sizes) of the lowered program, which must use every device of the
    target or one (a program without a mesh)."""
    num_partitions = _module_attribute(text, "num_partitions", 1)
    num_replicas = _module_attribute(text, "num_replicas", 1)
    n = num_partitions * num_replicas
    names = tuple(am.axis_names) if am is not None else ()
    sizes = tuple(am.axis_sizes) if am is not None else ()
    if n != 1 and n != target.num_devices:
        raise ValueError(f"compile_for: the program runs on {n} devices (mesh {dict(zip(names, sizes))}) but "
                         f"{target.name} has {target.num_devices}; make its mesh with "
                         f"spmdsim.target_mesh({target.name!r}, ...)")
    return (n, num_replicas, names, sizes) if n > 1 else (1, num_replicas, (), ())


def _cached_or_compiled(python, target, text, request, flags, timeout, cache):
    """(result, module text, cache entry or None, hit): the cache's entry for the request's key, else the
    worker's compile in a fresh folder of <cache>/tmp, renamed into place (or removed with cache=False)."""
    root = cache_dir()
    key = _sha256(json.dumps(request["key"], sort_keys=True).encode())
    entry = os.path.join(root, key[:2], key)
    if cache and os.path.exists(os.path.join(entry, "result.json")):
        return (*_load_entry(entry), entry, True)
    os.makedirs(os.path.join(root, "tmp"), exist_ok=True)
    workdir = tempfile.mkdtemp(prefix="compile-", dir=os.path.join(root, "tmp"))
    request = dict(request, module_file=os.path.join(workdir, "module.mlir"))
    with open(request["module_file"], "w") as f:
        f.write(text)
    _run_worker(python, request, workdir, _worker_env(target, flags), timeout)
    result, module_text = _load_entry(workdir)
    if not cache:
        shutil.rmtree(workdir, ignore_errors=True)
        return result, module_text, None, False
    os.makedirs(os.path.dirname(entry), exist_ok=True)
    try:
        os.rename(workdir, entry)
    except OSError:  # another process stored the same entry first: keep theirs
        shutil.rmtree(workdir, ignore_errors=True)
    return result, module_text, entry, False


def from_jax_on_target(fn, args, kwargs, *, target, topology=None, xla_flags=None, libtpu_init_args=None,
                       device_assignment=None, threads=0, trace=False, overlap_collectives=False, narrow_types=None,
                       model_flops_per_step=0, tokens_per_step=0):
    """spmdsim.from_jax(fn, *args, target=...): compile_for, then run_hlo abstractly on `topology` (default: the
    target), with the compiler's memory analysis, the target and the flags in report["hlo"]."""
    from spmdsim.hlo import HloResult, run_hlo
    module = compile_for(fn, *args, target=target, xla_flags=xla_flags, libtpu_init_args=libtpu_init_args,
                         **kwargs)
    try:
        assignment = device_assignment or module.device_assignment[:module.module_partitions]
        _, report = run_hlo(module.text, topology=topology if topology is not None else module.topology,
                            device_assignment=list(assignment), abstract=True,
                            threads=threads, trace=trace, overlap_collectives=overlap_collectives,
                            narrow_types=narrow_types, mesh=module.mesh if len(assignment) == module.num_devices
                            else None, model_flops_per_step=model_flops_per_step, tokens_per_step=tokens_per_step)
    except Exception as e:
        e.add_note(f"the module {module.target}'s compiler made is {module.cache_path or '(not cached)'}"
                   f"/module.txt; its memory analysis: {module.memory_analysis}")
        raise
    report["hlo"]["compiler_memory"] = dict(module.memory_analysis)
    report["hlo"]["target"] = {
        "target": module.target, "platform": module.platform, "mesh": module.mesh, "flags": module.flags,
        "compile_seconds": module.compile_seconds, "lower_seconds": module.lower_seconds,
        "cache_hit": module.cache_hit, "cache_path": module.cache_path, "versions": module.versions,
        "device_assignment": list(module.device_assignment), "notes": list(module.notes)}
    return HloResult(None, report)
