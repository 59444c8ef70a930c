"""The compiler process of spmdsim.compile_for (docs/targets.md): compiles one lowered JAX program (StableHLO text)
for a TPU pod or a GPU cluster that this machine does not have, with the real compiler (libtpu; the CUDA PJRT
plugin with ptxas), and writes the optimized HLO module and its memory analysis.

    python .../spmdsim/_compile_worker.py WORKDIR/request.json      (what compile_for runs)
    python -m spmdsim._compile_worker WORKDIR/request.json          (the same, by module name)

It runs in its own process so that a compiler crash, a hang or libtpu's process lock never reaches the user's
process. It imports nothing from spmdsim (a compiler interpreter needs only jax, jaxlib and the compilers), and
reads everything from the request (JSON, written by spmdsim/target.py):

    platform            "tpu" | "cuda"
    topology            keywords of jax.experimental.topologies.get_topology_desc (TPU: topology_name,
                        num_slices, chip_config_name, chips_per_host_bounds; GPU: topology "1xHxG")
    target_config_file  GPU only: a GpuTargetConfigProto text file (spmdsim/gpu_targets/)
    mesh_shape, dcn_mesh_shape
                        the program's mesh; with several slices (TPU) or hosts (GPU), the DCN factor of each axis
    num_partitions, num_replicas
    module_file         the StableHLO text (jax's lowered.as_text())

and writes, next to the request: module.txt (the compiled module's text, large constants printed), result.json
(memory analysis, cost analysis, the compiler's devices in logical-device order, times, versions, flags) or, on a
Python-level failure, error.json ({"type", "message"}) and exit status 1. Everything the compiler prints goes to
the caller's log file.

SPMDSIM_COMPILE_WORKER_FAULT=abort|hang makes it abort or sleep after reading the request: the tests' stand-in
for a compiler crash and a compiler that never returns.
"""

import json
import os
import sys
import time

# Run as a file, Python puts this folder (the spmdsim package) first on sys.path; its module names (hlo, testing,
# target, ...) must not shadow anything jax imports.
_HERE = os.path.dirname(os.path.abspath(__file__))
if sys.path and os.path.abspath(sys.path[0] or os.getcwd()) == _HERE:
    del sys.path[0]

# The packages whose versions decide the compiled module (recorded in the result and in the cache key).
VERSION_PACKAGES = {
    "tpu": ("jax", "jaxlib", "libtpu"),
    "cuda": ("jax", "jaxlib", "jax-cuda12-plugin", "jax-cuda12-pjrt", "nvidia-cuda-nvcc-cu12"),
}


def package_versions(platform):
    """{package: version or None} of the packages that decide a compile for `platform`."""
    from importlib import metadata
    versions = {}
    for name in VERSION_PACKAGES[platform]:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def _fault_injection():
    fault = os.environ.get("SPMDSIM_COMPILE_WORKER_FAULT", "")
    if fault == "abort":
        print("spmdsim compile worker: aborting (SPMDSIM_COMPILE_WORKER_FAULT=abort)", flush=True)
        os.abort()
    if fault == "hang":
        time.sleep(3600)


def _make_topology(request):
    from jax.experimental import topologies
    if request["platform"] == "tpu":
        return topologies.get_topology_desc(platform="tpu", **request["topology"])
    with open(request["target_config_file"]) as f:
        target_config = f.read()
    return topologies.get_topology_desc(platform="cuda", topology_name="", target_config=target_config,
                                        **request["topology"])


def _device_mesh(request, devices):
    """The compiler's devices laid out as the program's mesh, the way JAX lays out a mesh on that machine
    (mesh_utils.create_device_mesh; create_hybrid_device_mesh over slices or hosts). Logical device i of the
    module is the i-th device of the flattened mesh."""
    import numpy as np
    from jax.experimental import mesh_utils
    shape = list(request["mesh_shape"])
    if int(np.prod(shape)) == 1:
        return np.array(devices[:1]).reshape(shape)  # a program without a mesh: the first device
    dcn = request.get("dcn_mesh_shape")
    if dcn and int(np.prod(dcn)) > 1:
        ici = [s // d for s, d in zip(shape, dcn)]
        build = lambda split: mesh_utils.create_hybrid_device_mesh(  # noqa: E731
            ici, dcn, devices, process_is_granule=request["platform"] == "cuda", allow_split_physical_axes=split)
    else:
        build = lambda split: mesh_utils.create_device_mesh(  # noqa: E731
            shape, devices=devices, allow_split_physical_axes=split)
    try:
        return build(False)
    except (NotImplementedError, ValueError, AssertionError):
        # e.g. a logical axis of 2 on a ring of 4 chips: JAX's mesh_utils then needs allow_split_physical_axes.
        return build(True)


def _describe(device):
    described = {"id": int(device.id), "process_index": int(device.process_index),
                 "device_kind": device.device_kind, "platform": device.platform}
    for attribute in ("coords", "core_on_chip", "slice_index"):
        value = getattr(device, attribute, None)
        if value is not None:
            described[attribute] = [int(v) for v in value] if attribute == "coords" else int(value)
    return described


def _memory_analysis(executable):
    stats = executable.get_compiled_memory_stats()
    return {name: int(getattr(stats, name)) for name in dir(stats)
            if not name.startswith("_") and isinstance(getattr(stats, name), int)}


def _cost_analysis(executable):
    try:
        analysis = executable.cost_analysis()
    except Exception:  # noqa: BLE001  (not every executable has one)
        return {}
    if isinstance(analysis, list):
        analysis = analysis[0] if analysis else {}
    return {str(k): float(v) for k, v in (analysis or {}).items() if isinstance(v, (int, float))}


def _module_text(executable):
    module = executable.hlo_modules()[0]
    try:
        import jaxlib._hlo as hlo
        options = hlo.HloPrintOptions()
        options.print_large_constants = True
        return module.to_string(options)
    except (ImportError, AttributeError, TypeError):
        return module.to_string()


def compile_request(request, workdir):
    """Compiles the request's module; returns the result dict and writes module.txt into workdir."""
    started = time.perf_counter()
    import numpy as np
    import jax
    from jax._src import compiler
    from jax._src.interpreters import mlir
    from jax._src.lib import xla_client
    from jax._src.lib.mlir import ir

    t0 = time.perf_counter()
    topology = _make_topology(request)
    topology_seconds = time.perf_counter() - t0
    mesh = _device_mesh(request, list(topology.devices))
    logical = list(mesh.flat)
    n = request["num_partitions"] * request["num_replicas"]
    if len(logical) != n:
        raise ValueError(f"the mesh has {len(logical)} devices but the module {n} (num_partitions x num_replicas)")
    with open(request["module_file"]) as f:
        text = f.read()
    context = mlir.make_ir_context()
    with context:
        module = ir.Module.parse(text)
    options = compiler.get_compile_options(
        num_replicas=request["num_replicas"], num_partitions=request["num_partitions"],
        device_assignment=np.array(logical).reshape(request["num_replicas"], request["num_partitions"]))
    t0 = time.perf_counter()
    executable = logical[0].client.compile(module, executable_devices=xla_client.DeviceList(tuple(logical)),
                                           compile_options=options)
    compile_seconds = time.perf_counter() - t0
    with open(os.path.join(workdir, "module.txt"), "w") as f:
        f.write(_module_text(executable))
    return {
        "platform": request["platform"],
        "device_kind": logical[0].device_kind,
        "devices": [_describe(d) for d in logical],
        "memory_analysis": _memory_analysis(executable),
        "cost_analysis": _cost_analysis(executable),
        "compile_seconds": compile_seconds,
        "topology_seconds": topology_seconds,
        "worker_seconds": time.perf_counter() - started,
        "versions": dict(package_versions(request["platform"]), python=sys.version.split()[0]),
        "flags": {name: os.environ.get(name, "") for name in ("XLA_FLAGS", "LIBTPU_INIT_ARGS")},
        "jax_version": jax.__version__,
    }


def main(argv):
    if len(argv) != 2:
        print("usage: _compile_worker.py WORKDIR/request.json", file=sys.stderr)
        return 2
    workdir = os.path.dirname(os.path.abspath(argv[1]))
    with open(argv[1]) as f:
        request = json.load(f)
    _fault_injection()
    try:
        result = compile_request(request, workdir)
    except Exception as e:  # noqa: BLE001  (reported to the caller as one CompileError)
        import traceback
        traceback.print_exc()
        with open(os.path.join(workdir, "error.json"), "w") as f:
            json.dump({"type": type(e).__name__, "message": str(e)}, f)
        return 1
    with open(os.path.join(workdir, "result.json"), "w") as f:
        json.dump(result, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
