"""JAX's NamedSharding (construction checks, shard_shape, devices_indices_map, is_fully_replicated, str) and
eformer's get_corrected_named_sharding against spmdsim's, on random meshes of up to 64 host CPU devices (JAX's own
devices, --xla_force_host_platform_device_count), random specs and random shapes; a sample through
`spmdsim shard --json`."""
import random

import jax
import numpy as np
import pytest
from eformer import escale
from jax.sharding import AxisType as JaxAxisType
from jax.sharding import Mesh as JaxMesh
from jax.sharding import NamedSharding as JaxNamedSharding
from jax.sharding import PartitionSpec as JaxP

import peers
import spmdsim

SEED = 22
CASES = 1500
NAMES = ("a", "b", "c", "d")
TOPOLOGY = spmdsim.Topology("cpu:64")


def random_mesh_shape(rng):
    rank = rng.randint(1, 4)
    shape = []
    total = 1
    for _ in range(rank):
        size = rng.choice([1, 2, 2, 4, 4, 8, 3])
        if total * size > 64:
            size = 1
        shape.append(size)
        total *= size
    return tuple(shape)


def random_entry(rng, names):
    r = rng.random()
    if r < 0.35:
        return None
    if r < 0.70:
        return rng.choice(names)
    if r < 0.88:
        return tuple(rng.sample(names, min(len(names), rng.randint(1, 3))))
    if r < 0.93:
        return "UNCONSTRAINED"
    if r < 0.96:
        return "z"  # not an axis of the mesh
    return ()


def random_case(rng):
    mesh_shape = random_mesh_shape(rng)
    names = NAMES[: len(mesh_shape)]
    explicit = rng.random() < 0.2
    rank = rng.randint(0, 4)
    spec = [random_entry(rng, names) for _ in range(rng.randint(max(rank - 1, 0), rank + (rng.random() < 0.08)))]
    sizes = dict(zip(names, mesh_shape))
    shape = []
    for d in range(rank):
        entry = spec[d] if d < len(spec) else None
        axes = (entry,) if isinstance(entry, str) else (entry or ())
        parts = int(np.prod([sizes.get(a, 1) for a in axes if a != "UNCONSTRAINED"])) if axes else 1
        k = rng.randint(1, 3)
        shape.append(parts * k + (rng.randint(1, 2) if rng.random() < 0.1 else 0))
    return mesh_shape, names, explicit, spec, tuple(shape)


def jax_spec(spec):
    return JaxP(*(JaxP.UNCONSTRAINED if e == "UNCONSTRAINED" else e for e in spec))


def our_spec(spec):
    return spmdsim.P(*(spmdsim.UNCONSTRAINED if e == "UNCONSTRAINED" else e for e in spec))


def index_map(m):
    return {d.id: tuple((s.start, s.stop) for s in idx) for d, idx in m.items()}


def summarize(sharding, shape):
    """What a NamedSharding says about `shape`, as comparable values (each an outcome of its own)."""
    out = {"str": str(sharding), "is_fully_replicated": sharding.is_fully_replicated,
           "device_set": sorted(d.id for d in sharding.device_set)}
    out["shard_shape"] = peers.outcome(sharding.shard_shape, shape)[:2]
    out["indices"] = peers.outcome(lambda: index_map(sharding.devices_indices_map(shape)))[:2]
    return out


def test_named_sharding_matches_jax():
    rng = random.Random(SEED)
    jax_devices = jax.devices()
    assert len(jax_devices) == 64
    bad = peers.Disagreements("jax.sharding.NamedSharding")
    for i in range(CASES):
        mesh_shape, names, explicit, spec, shape = random_case(rng)
        n = int(np.prod(mesh_shape))
        types_j = (JaxAxisType.Explicit if explicit else JaxAxisType.Auto,) * len(names)
        types_o = (spmdsim.AxisType.Explicit if explicit else spmdsim.AxisType.Auto,) * len(names)
        jmesh = JaxMesh(np.array(jax_devices[:n]).reshape(mesh_shape), names, axis_types=types_j)
        omesh = spmdsim.Mesh(np.arange(n).reshape(mesh_shape), names, types_o, topology=TOPOLOGY)
        theirs = peers.outcome(JaxNamedSharding, jmesh, jax_spec(spec))
        ours = peers.outcome(spmdsim.NamedSharding, omesh, our_spec(spec))
        case = (mesh_shape, "explicit" if explicit else "auto", spec, shape)
        if ours[:2 if ours[0] == "raise" else 1] != theirs[:2 if theirs[0] == "raise" else 1]:
            bad.add(case, ours[:2], theirs[:2])
            continue
        if ours[0] == "ok":
            o, t = summarize(ours[1], shape), summarize(theirs[1], shape)
            for key in o:
                if o[key] != t[key]:
                    bad.add(case + (key,), o[key], t[key])
    peers.count("jax.NamedSharding", CASES)
    bad.check()


def test_error_messages_match_jax():
    """The messages of JAX's construction and shape errors, word for word (spmdsim prints them the same way)."""
    rng = random.Random(SEED + 1)
    jax_devices = jax.devices()
    bad = peers.Disagreements("JAX's error messages")
    cases = 0
    while cases < 300:
        mesh_shape, names, explicit, spec, shape = random_case(rng)
        n = int(np.prod(mesh_shape))
        jmesh = JaxMesh(np.array(jax_devices[:n]).reshape(mesh_shape), names)
        omesh = spmdsim.Mesh(np.arange(n).reshape(mesh_shape), names, topology=TOPOLOGY)
        theirs = peers.outcome(lambda: JaxNamedSharding(jmesh, jax_spec(spec)).shard_shape(shape))
        ours = peers.outcome(lambda: spmdsim.NamedSharding(omesh, our_spec(spec)).shard_shape(shape))
        if theirs[0] != "raise":
            continue
        cases += 1
        if theirs[1:] == ("IndexError", "list index out of range"):
            # A documented difference (docs/python.md): the same IndexError, with a message that says what is wrong.
            if ours[1] != "IndexError" or not ours[2].endswith("JAX says: list index out of range"):
                bad.add((mesh_shape, spec, shape), ours, theirs)
        elif ours != theirs:
            bad.add((mesh_shape, spec, shape), ours, theirs)
    peers.count("jax.NamedSharding errors (messages)", cases)
    bad.check()


def test_eformer_corrections_match_eformer():
    rng = random.Random(SEED + 2)
    jax_devices = jax.devices()
    bad = peers.Disagreements("eformer get_corrected_named_sharding")
    cases = 0
    for _ in range(1000):
        mesh_shape, names, _, spec, shape = random_case(rng)
        spec = [e for e in spec if e not in ("UNCONSTRAINED", ())]
        n = int(np.prod(mesh_shape))
        jmesh = JaxMesh(np.array(jax_devices[:n]).reshape(mesh_shape), names)
        omesh = spmdsim.Mesh(np.arange(n).reshape(mesh_shape), names, topology=TOPOLOGY)
        with jmesh:
            theirs = peers.outcome(lambda: tuple(escale.get_corrected_named_sharding(shape, jax_spec(spec)).spec))
        with omesh:
            ours = peers.outcome(lambda: tuple(spmdsim.get_corrected_named_sharding(shape, our_spec(spec)).spec))
        cases += 1
        if ours[:2] != theirs[:2]:
            bad.add((mesh_shape, spec, shape), ours[:2], theirs[:2])
    peers.count("eformer.get_corrected_named_sharding", cases)
    bad.check()


def test_cli_shard_json_matches_jax():
    rng = random.Random(SEED + 3)
    jax_devices = jax.devices()
    bad = peers.Disagreements("NamedSharding via `spmdsim shard --json`")
    cases = 0
    while cases < 60:
        mesh_shape, names, _, spec, shape = random_case(rng)
        if any(e in ("UNCONSTRAINED", "z") for e in spec) or not shape:
            continue
        n = int(np.prod(mesh_shape))
        jmesh = JaxMesh(np.array(jax_devices[:n]).reshape(mesh_shape), names)
        theirs = peers.outcome(lambda: index_map(JaxNamedSharding(jmesh, jax_spec(spec)).devices_indices_map(shape)))
        spec_text = repr(our_spec(spec)) if spec else "P()"
        report = peers.cli("shard", "--mesh", ",".join(f"{a}={s}" for a, s in zip(names, mesh_shape)),
                           "--shape", ",".join(map(str, shape)), "--spec", spec_text, "--correct", "none")
        if isinstance(report, tuple):
            ours = ("raise",)
        else:
            def norm(d, ix, dim):
                lo, hi = ix
                return (None, None) if (lo, hi) == (0, shape[dim]) else (lo, hi)
            ours = ("ok", {s["device"]: tuple(norm(s["device"], ix, k) for k, ix in enumerate(s["index"]))
                           for s in report["shards"]})
        cases += 1
        if ours[0] != theirs[0] or (ours[0] == "ok" and ours[1] != theirs[1]):
            bad.add((mesh_shape, spec, shape), ours[:2], theirs[:2])
    peers.count("jax.NamedSharding (CLI)", cases)
    bad.check()
