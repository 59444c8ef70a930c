"""spmdsim.compile_for: JAX programs compiled for TPU pods and GPU clusters by their real compilers (libtpu, the
CUDA plugin), device-free (docs/targets.md). Every compile here is a few seconds: small programs on small slices.

The end-to-end runs through run_hlo use GPU and TPU modules, both of which spmdsim's parser reads (TPU modules with
their copy-starts, tiled layouts and mixed precision, docs/hlo.md)."""
import os
import subprocess
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import NamedSharding, PartitionSpec as P

import spmdsim
from spmdsim import target as target_module


@pytest.fixture(autouse=True, scope="module")
def cache_dir(tmp_path_factory):
    """A fresh compile cache for this file: every first compile below really compiles."""
    path = tmp_path_factory.mktemp("compile-cache")
    old = os.environ.get("SPMDSIM_CACHE_DIR")
    os.environ["SPMDSIM_CACHE_DIR"] = str(path)
    yield path
    if old is None:
        del os.environ["SPMDSIM_CACHE_DIR"]
    else:
        os.environ["SPMDSIM_CACHE_DIR"] = old


def mlp(x, w1, w2):
    """A small MLP step whose hidden layer is constrained to the batch axis (a bare P: compile_for resolves it
    against the arguments' abstract mesh)."""
    h = jax.nn.relu(x @ w1)
    h = jax.lax.with_sharding_constraint(h, P(("data",), None))
    return jnp.mean(jnp.square(h @ w2))


def mlp_args(mesh, data_spec=P("data", None), model_spec=P(None, "model")):
    s = lambda spec: NamedSharding(mesh, spec)  # noqa: E731
    return (jax.ShapeDtypeStruct((256, 512), jnp.bfloat16, sharding=s(data_spec)),
            jax.ShapeDtypeStruct((512, 1024), jnp.bfloat16, sharding=s(model_spec)),
            jax.ShapeDtypeStruct((1024, 512), jnp.bfloat16, sharding=s(P("model", None))))


MEMORY_FIELDS = ("argument_size_in_bytes", "output_size_in_bytes", "alias_size_in_bytes", "temp_size_in_bytes",
                 "generated_code_size_in_bytes")


def check_module(m, target, n, platform, module_partitions=None):
    assert m.target == target and m.platform == platform and m.num_devices == n
    k = module_partitions or n
    assert m.module_partitions == k and m.text.startswith("HloModule ") and f"num_partitions={k}," in m.text
    assert set(MEMORY_FIELDS) <= set(m.memory_analysis)
    # Per device: x's block (256/data x 512 bf16) and both weights' blocks, never more than the global arrays.
    assert 0 < m.memory_analysis["argument_size_in_bytes"] <= (256 * 512 + 2 * 512 * 1024) * 2
    assert len(m.device_assignment) == n and sorted(m.device_assignment) == list(range(n))
    assert len(m.compiler_devices) == n and m.compile_seconds > 0
    assert m.versions["jax"] == jax.__version__
    assert m.cache_path and os.path.isfile(os.path.join(m.cache_path, "module.txt")) and not m.cache_hit


# ---------------------------------------------------------------------------------------------------------------
# Targets: spmdsim topologies as the compilers see them

def test_topology_presets_and_cloud_tpu_names_map_to_the_compilers_topologies():
    cases = {
        "tpu-v5e:16x16": ("tpu", {"topology_name": "v5e:16x16"}, 256),
        "tpu-v5p:8x16x16": ("tpu", {"topology_name": "v5p:8x16x16"}, 2048),
        "tpu-v4:4x4x4": ("tpu", {"topology_name": "v4:4x4x4", "chip_config_name": "megacore"}, 64),
        "tpu-v6e:16x16": ("tpu", {"topology_name": "v6e:16x16"}, 256),
        "tpu-v3:4x4": ("tpu", {"topology_name": "v3:4x4"}, 32),          # 2 devices (TensorCores) per chip
        "v5p-2048": ("tpu", {"topology_name": "v5p:8x8x16"}, 1024),      # Cloud TPU counts v5p TensorCores
        "v5litepod-256": ("tpu", {"topology_name": "v5e:16x16"}, 256),
        "tpu-v5e:1x1": ("tpu", {"topology_name": "v5e:1x1", "chips_per_host_bounds": [1, 1, 1]}, 1),
        "dgx-h100:4": ("cuda", {"topology": "1x4x8"}, 32),
        "dgx-h200:1": ("cuda", {"topology": "1x1x8"}, 8),
        "dgx-a100:2": ("cuda", {"topology": "1x2x8"}, 16),
        "dgx-b200:1": ("cuda", {"topology": "1x1x8"}, 8),
        "gpu:2x4": ("cuda", {"topology": "1x2x4"}, 8),
    }
    for text, (platform, topology, n) in cases.items():
        t = spmdsim.resolve_target(text)
        assert (t.platform, t.compiler_topology, t.num_devices) == (platform, topology, n), text
    assert spmdsim.resolve_target("dgx-b200:1").gpu_config == "b200.txtpb"
    assert spmdsim.resolve_target("dgx-a100:1").gpu_config == "a100_sxm_80gb.txtpb"
    sliced = spmdsim.resolve_target("tpu-v5e:4x4", slices=2)
    assert sliced.name == "tpu-v5e:4x4 x 2 slices" and sliced.granules == 2 and sliced.num_devices == 32
    assert sliced.compiler_topology == {"topology_name": "v5e:4x4", "num_slices": 2}
    assert spmdsim.resolve_target(spmdsim.Topology("tpu-v5e:4x4", num_slices=4)).compiler_topology["num_slices"] == 4
    assert spmdsim.resolve_target("dgx-h100:2").granules == 2
    with pytest.raises(ValueError, match=r"no compiler target for 'h800:1'.*dgx-h100"):
        spmdsim.resolve_target("h800:1")
    with pytest.raises(ValueError, match="no compiler target for 'cpu:8'"):
        spmdsim.resolve_target("cpu:8")
    with pytest.raises(TypeError, match="target must be"):
        spmdsim.resolve_target(8)


def test_every_gpu_target_config_is_a_datasheet_text_proto_shipped_with_the_package():
    folder = os.path.join(os.path.dirname(spmdsim.__file__), "gpu_targets")
    for name in ("h100_sxm", "h200_sxm", "a100_sxm_80gb", "b200"):
        text = open(os.path.join(folder, name + ".txtpb")).read()
        for field in ("core_count", "clock_rate_ghz", "device_memory_size", "memory_bandwidth", "l2_cache_size",
                      "shared_memory_per_core", "shared_memory_per_block_optin", "cuda_compute_capability",
                      "registers_per_core_limit", "matrix_unit_description"):
            assert field in text, (name, field)
        assert "Sources:" in text


def test_target_mesh_checks_that_the_axes_use_every_device():
    mesh = spmdsim.target_mesh("tpu-v5e:16x16", data=16, model=16)
    assert isinstance(mesh, jax.sharding.AbstractMesh)
    assert dict(mesh.shape) == {"data": 16, "model": 16}
    assert spmdsim.abstract_mesh("dgx-h100:2", {"data": 2, "model": 8}).axis_names == ("data", "model")
    assert spmdsim.abstract_mesh("tpu-v5e:4x4", {"data": 32}, slices=2).size == 32
    with pytest.raises(ValueError, match=r"mesh data=4 x model=2 has 8 devices; tpu-v5e:4x4 has 16"):
        spmdsim.target_mesh("tpu-v5e:4x4", data=4, model=2)


# ---------------------------------------------------------------------------------------------------------------
# Compiling for each family

@pytest.mark.parametrize("target,axes", [
    ("tpu-v4:2x2x2", {"data": 4, "model": 2}),
    ("tpu-v5p:2x2x2", {"data": 4, "model": 2}),
    ("tpu-v6e:2x2", {"data": 2, "model": 2}),
    ("dgx-h200:1", {"data": 4, "model": 2}),
    ("dgx-b200:1", {"data": 4, "model": 2}),
])
def test_compile_for_tpu_generations_and_gpus(target, axes):
    mesh = spmdsim.target_mesh(target, **axes)
    m = spmdsim.compile_for(mlp, *mlp_args(mesh), target=target)
    n = mesh.size
    check_module(m, target, n, "cuda" if target.startswith("dgx") else "tpu")
    kind = spmdsim.Topology(target).device_kind
    assert {d["device_kind"] for d in m.compiler_devices} == {kind}
    assert m.mesh == axes
    # The same device order as spmdsim's (and JAX's) create_device_mesh on that topology.
    expected = [d.id for d in spmdsim.create_device_mesh(mesh.axis_sizes, spmdsim.Topology(target).devices).flat]
    assert list(m.device_assignment) == expected


def test_a_v5e_slice_whose_mesh_order_is_a_ring_maps_each_logical_device_to_its_chip():
    target = "tpu-v5e:2x4"
    mesh = spmdsim.target_mesh(target, data=4, model=2)
    m = spmdsim.compile_for(mlp, *mlp_args(mesh), target=target)
    check_module(m, target, 8, "tpu")
    # JAX lays a v5e tray out as a ring (mesh_utils' _V5E_TRAY_RING_ORDER): not the identity.
    assert m.device_assignment == (0, 1, 2, 3, 7, 6, 5, 4)
    topology = spmdsim.Topology(target)
    for logical, (spmdsim_id, device) in enumerate(zip(m.device_assignment, m.compiler_devices)):
        chip = topology.devices[spmdsim_id]
        assert tuple(chip.coords) == tuple(device["coords"]), logical
    expected = spmdsim.create_device_mesh((4, 2), topology.devices)
    assert [d.id for d in expected.flat] == list(m.device_assignment)
    assert m.memory_analysis["generated_code_size_in_bytes"] > 0  # TPU programs count their code


def test_two_v5e_slices_over_dcn_compile_as_a_hybrid_mesh():
    mesh = spmdsim.abstract_mesh("tpu-v5e:2x2", {"data": 2, "model": 4}, slices=2)
    m = spmdsim.compile_for(mlp, *mlp_args(mesh), target="tpu-v5e:2x2", slices=2)
    # libtpu compiles one slice's program (MegaScale): 4 partitions, the reduction over `data` (across the
    # slices) a host transfer to the MegaScale runtime beside the all-reduce over `model` inside the slice.
    check_module(m, "tpu-v5e:2x2 x 2 slices", 8, "tpu", module_partitions=4)
    assert "xla_megascale_runtime" in m.text and "all-reduce(" in m.text
    assert len(m.notes) == 1 and "one slice's program (4 of 8 devices" in m.notes[0]
    assert [d["slice_index"] for d in m.compiler_devices] == [0] * 4 + [1] * 4  # data spans the slices
    topology = spmdsim.Topology("tpu-v5e:2x2", num_slices=2)
    expected = spmdsim.create_hybrid_device_mesh((1, 4), (2, 1), topology.devices)
    assert [d.id for d in expected.flat] == list(m.device_assignment)
    assert m.device_assignment[:4] == (0, 1, 3, 2)  # the 2x2 tray's ring, slice 0 first


def test_h100_hosts_map_by_host_and_local_index_and_flags_reach_the_compiler():
    mesh = spmdsim.target_mesh("dgx-h100:2", model=8, data=2)
    flags = "--xla_gpu_enable_latency_hiding_scheduler=true"
    m = spmdsim.compile_for(mlp, *mlp_args(mesh), target="dgx-h100:2", dcn_axes={"data": 2}, xla_flags=flags)
    check_module(m, "dgx-h100:2", 16, "cuda")
    assert m.compiler_topology == {"topology": "1x2x8"}
    assert flags in m.flags["XLA_FLAGS"]
    assert m.memory_analysis["generated_code_size_in_bytes"] == 0  # deviceless GPU executables count none
    # model (the first axis) inside a host, data across the two: logical (model=i, data=j) is GPU i of host j.
    assert list(m.device_assignment) == [j * 8 + i for i in range(8) for j in range(2)]
    assert [d["process_index"] for d in m.compiler_devices] == [j for i in range(8) for j in range(2)]
    topology = spmdsim.Topology("dgx-h100:2")
    expected = spmdsim.create_hybrid_device_mesh((8, 1), (1, 2), topology.devices, process_is_granule=True)
    assert [d.id for d in expected.flat] == list(m.device_assignment)
    # Other flags are another program: a miss, recorded as such.
    other = spmdsim.compile_for(mlp, *mlp_args(mesh), target="dgx-h100:2", dcn_axes={"data": 2})
    assert not other.cache_hit and other.cache_path != m.cache_path and flags not in other.flags["XLA_FLAGS"]


def test_a_program_without_a_mesh_compiles_for_one_device_of_an_a100():
    m = spmdsim.compile_for(lambda a, b: jnp.tanh(a @ b), np.ones((128, 256), np.float32),
                            np.ones((256, 64), np.float32), target="dgx-a100:1")
    assert m.num_devices == 1 and m.device_assignment == (0,) and m.mesh == {}
    assert m.compiler_devices[0]["device_kind"] == "NVIDIA A100-SXM4-80GB"
    assert m.memory_analysis["argument_size_in_bytes"] == (128 * 256 + 256 * 64) * 4


def test_a_program_whose_mesh_is_not_the_targets_is_refused_before_compiling():
    mesh = jax.sharding.AbstractMesh((4, 2), ("data", "model"))
    with pytest.raises(ValueError, match=r"runs on 8 devices .* tpu-v5e:4x4 has 16"):
        spmdsim.compile_for(mlp, *mlp_args(mesh), target="tpu-v5e:4x4")
    four = spmdsim.target_mesh("tpu-v5e:2x2", a=2, b=2, c=2, d=2, slices=4)
    x = jax.ShapeDtypeStruct((16, 16), jnp.float32, sharding=NamedSharding(four, P(("a", "b"), ("c", "d"))))
    with pytest.raises(ValueError, match=r"4 slices but no mesh axis .* is a multiple of 4; .*dcn_axes"):
        spmdsim.compile_for(lambda x: x * 2, x, target="tpu-v5e:2x2", slices=4)
    with pytest.raises(ValueError, match=r"dcn_axes\['a'\] = 4 does not divide the axis size 2"):
        spmdsim.compile_for(lambda x: x * 2, x, target="tpu-v5e:2x2", slices=4, dcn_axes={"a": 4})
    with pytest.raises(ValueError, match=r"dcn_axes names \['e'\]"):
        spmdsim.compile_for(lambda x: x * 2, x, target="tpu-v5e:2x2", slices=4, dcn_axes={"e": 4})
    with pytest.raises(ValueError, match=r"spans 2 granules; tpu-v5e:2x2 x 4 slices has 4"):
        spmdsim.compile_for(lambda x: x * 2, x, target="tpu-v5e:2x2", slices=4, dcn_axes={"a": 2})


def test_target_module_predict_runs_run_hlo_on_the_target_and_its_chips():
    mesh = spmdsim.target_mesh("dgx-h100:1", data=4, model=2)
    m = spmdsim.compile_for(mlp, *mlp_args(mesh), target="dgx-h100:1")
    assert isinstance(m, spmdsim.TargetModule) and m.module_partitions == 8 and m.notes == ()
    outputs, report = m.predict()
    assert outputs is None and report["hlo"]["devices"] == 8 and report["totals"]["predicted_seconds"] > 0
    assert report["hlo"]["argument_bytes"] == m.memory_analysis["argument_size_in_bytes"]
    assert isinstance(spmdsim.resolve_target("dgx-h100:1"), spmdsim.Target)
    assert target_module.cache_dir() == os.environ["SPMDSIM_CACHE_DIR"]


# ---------------------------------------------------------------------------------------------------------------
# The cache

def test_a_second_compile_is_a_cache_hit_that_starts_no_process(monkeypatch):
    mesh = spmdsim.target_mesh("tpu-v5e:2x4", data=4, model=2)
    args = mlp_args(mesh)
    jitted = jax.jit(mlp)
    first = spmdsim.compile_for(jitted, *args, target="tpu-v5e:2x4")  # compiled above, or now

    def no_process(*a, **k):
        raise AssertionError("a cache hit must not start a process")
    monkeypatch.setattr(subprocess, "Popen", no_process)
    monkeypatch.setattr(subprocess, "run", no_process)
    started = time.perf_counter()
    second = spmdsim.compile_for(jitted, *args, target="tpu-v5e:2x4")
    seconds = time.perf_counter() - started
    assert second.cache_hit and second.text == first.text and second.cache_path == first.cache_path
    assert second.memory_analysis == first.memory_analysis and second.device_assignment == first.device_assignment
    assert second.compile_seconds == first.compile_seconds  # the first compile's, as recorded
    assert seconds < 1.0, seconds  # lowering again (to know the key) and reading two files
    print(f"cache hit in {seconds * 1e3:.1f} ms (first compile {first.compile_seconds:.2f} s)")
    uncached = spmdsim.compile_for  # cache=False never reads it
    monkeypatch.undo()
    m = uncached(jitted, *args, target="tpu-v5e:2x4", cache=False)
    assert not m.cache_hit and m.cache_path is None and m.text == first.text


def test_the_cache_key_covers_program_target_mesh_and_flags(cache_dir):
    mesh = spmdsim.target_mesh("tpu-v6e:2x2", data=2, model=2)
    base = spmdsim.compile_for(mlp, *mlp_args(mesh), target="tpu-v6e:2x2")
    other_mesh = spmdsim.target_mesh("tpu-v6e:2x2", data=4, model=1)
    moved = spmdsim.compile_for(mlp, *mlp_args(other_mesh), target="tpu-v6e:2x2")
    assert moved.cache_path != base.cache_path and moved.mesh == {"data": 4, "model": 1}
    entries = [p for p in cache_dir.glob("??/*") if (p / "result.json").exists()]
    assert base.cache_path in map(str, entries) and moved.cache_path in map(str, entries)
    assert os.path.dirname(os.path.dirname(base.cache_path)) == str(cache_dir)


# ---------------------------------------------------------------------------------------------------------------
# Failures: one exception, one line, the log's path

def test_a_program_too_large_for_hbm_is_the_compilers_error_in_one_line():
    mesh = spmdsim.target_mesh("tpu-v5e:2x2", data=4)
    huge = jax.ShapeDtypeStruct((1 << 16, 1 << 16), jnp.float32, sharding=NamedSharding(mesh, P()))  # 16 GiB
    with pytest.raises(spmdsim.CompileError, match=r"tpu compiler failed: .*RESOURCE_EXHAUSTED.*HBM.*; log: ") as e:
        spmdsim.compile_for(lambda x: x * 2, huge, target="tpu-v5e:2x2")
    assert e.value.kind == "error" and os.path.isfile(e.value.log_path) and "\n" not in str(e.value)


def test_an_indivisible_sharding_is_jaxs_error_from_the_lowering():
    mesh = spmdsim.target_mesh("tpu-v5e:2x2", data=4)
    odd = jax.ShapeDtypeStruct((6, 128), jnp.float32, sharding=NamedSharding(mesh, P("data")))
    with pytest.raises(ValueError, match="partitioned 4 times, but the dimension size is 6"):
        spmdsim.compile_for(lambda x: x * 2, odd, target="tpu-v5e:2x2")


def test_a_compiler_that_aborts_or_rejects_its_flags_is_a_crash_in_one_line(monkeypatch):
    mesh = spmdsim.target_mesh("tpu-v5e:2x2", data=4)
    x = jax.ShapeDtypeStruct((64, 128), jnp.float32, sharding=NamedSharding(mesh, P("data")))
    with pytest.raises(spmdsim.CompileError, match=r"crashed \(exit status 1\): .*Unknown flag in XLA_FLAGS: "
                                                   r"--xla_no_such_flag.*; log: ") as e:
        spmdsim.compile_for(lambda x: x + 1, x, target="tpu-v5e:2x2", xla_flags=["--xla_no_such_flag=1"])
    assert e.value.kind == "crash" and e.value.returncode == 1
    monkeypatch.setenv("SPMDSIM_COMPILE_WORKER_FAULT", "abort")
    with pytest.raises(spmdsim.CompileError, match=r"crashed \(signal SIGABRT\): .*aborting.*; log: ") as e:
        spmdsim.compile_for(lambda x: x + 2, x, target="tpu-v5e:2x2")
    assert e.value.kind == "crash" and e.value.returncode < 0
    monkeypatch.setenv("SPMDSIM_COMPILE_WORKER_FAULT", "hang")
    started = time.perf_counter()
    with pytest.raises(spmdsim.CompileError, match=r"did not finish in 2 s \(killed\); log: ") as e:
        spmdsim.compile_for(lambda x: x + 3, x, target="tpu-v5e:2x2", timeout=2)
    assert e.value.kind == "timeout" and time.perf_counter() - started < 30


def test_a_compiler_interpreter_without_the_compilers_is_named(tmp_path, monkeypatch):
    bare = tmp_path / "bare-python"  # this interpreter without site-packages: no jax, no libtpu
    bare.write_text(f"#!/bin/sh\nexec {sys.executable} -S \"$@\"\n")
    bare.chmod(0o755)
    mesh = spmdsim.target_mesh("tpu-v5e:2x2", data=4)
    x = jax.ShapeDtypeStruct((64, 128), jnp.float32, sharding=NamedSharding(mesh, P("data")))
    with pytest.raises(spmdsim.CompileError, match=r"jax, jaxlib, libtpu not installed for .*bare-python .*"
                                                   r"requirements-target.txt, or spmdsim\[tpu\]") as e:
        spmdsim.compile_for(lambda x: x - 1, x, target="tpu-v5e:2x2", compiler_python=str(bare))
    assert e.value.kind == "not installed"
    monkeypatch.setenv("SPMDSIM_COMPILER_PYTHON", str(bare))
    with pytest.raises(spmdsim.CompileError, match=r"spmdsim\[gpu\]"):
        spmdsim.compile_for(lambda x: x - 1, np.ones(4, np.float32), target="dgx-h100:1")


def test_the_worker_runs_by_module_name_too(tmp_path):
    out = subprocess.run([sys.executable, "-m", "spmdsim._compile_worker"], capture_output=True, text=True)
    assert out.returncode == 2 and "usage: _compile_worker.py WORKDIR/request.json" in out.stderr


# ---------------------------------------------------------------------------------------------------------------
# from_jax(target=...): the compiled module predicted on its target

def test_from_jax_on_a_gpu_target_predicts_the_compiled_module_beside_the_compilers_memory():
    mesh = spmdsim.target_mesh("dgx-h100:1", data=4, model=2)
    outputs, report = spmdsim.from_jax(mlp, *mlp_args(mesh), target="dgx-h100:1")
    assert outputs is None and report["abstract"] and report["kind"] == "hlo"
    hlo = report["hlo"]
    assert set(MEMORY_FIELDS) <= set(hlo["compiler_memory"])
    assert hlo["target"]["target"] == "dgx-h100:1" and hlo["target"]["platform"] == "cuda"
    assert hlo["target"]["compile_seconds"] > 0 and "XLA_FLAGS" in hlo["target"]["flags"]
    assert hlo["devices"] == 8 and report["totals"]["predicted_seconds"] > 0
    # spmdsim's estimate of the same module's arguments is the compiler's.
    assert hlo["argument_bytes"] == hlo["compiler_memory"]["argument_size_in_bytes"]
    assert any(c["name"].startswith("collective") for c in hlo["by_class"])
    with pytest.raises(TypeError, match="needs topology= .* or target="):
        spmdsim.from_jax(mlp, *mlp_args(mesh))


def test_from_jax_on_a_tpu_target_predicts_the_compiled_module():
    mesh = spmdsim.target_mesh("tpu-v5e:2x4", data=4, model=2)
    _, report = spmdsim.from_jax(mlp, *mlp_args(mesh), target="tpu-v5e:2x4")
    assert report["hlo"]["compiler_memory"]["argument_size_in_bytes"] > 0
