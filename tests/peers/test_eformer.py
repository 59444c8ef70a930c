"""eformer's PartitionAxis (every field, random overrides), resolve_axis / resolve_spec in every runtime mode,
PartitionManager.resolve (axes + mode, presets, modes inferred from a shape), and match_partition_rules (random
parameter trees, rules, min_size, strict; numpy arrays, jax.ShapeDtypeStruct and spmdsim.ShapeDtypeStruct leaves)
against spmdsim's."""
import dataclasses
import random

import jax
import numpy as np
from eformer import common_types as ct
from eformer import escale
from jax.sharding import PartitionSpec as JaxP

import peers
import spmdsim

SEED = 22
MESH_AXES = ["dp", "fsdp", "tp", "sp", "ep"]
FIELDS = [f.name for f in dataclasses.fields(escale.PartitionAxis)]
TOKENS = [ct.BATCH, ct.LENGTH, ct.QUERY_LENGTH, ct.KV_LENGTH, ct.EMBED, ct.HEAD, ct.KV_HEAD, ct.MLP_INTERMEDIATE,
          ct.VOCAB, ct.EXPERT, ct.EXPERT_GATE, ct.HEAD_DIM, ct.KV_HEAD_DIM, ct.BIAS_HEAD_SEQ, ct.BIAS_KV_SEQ, ct.EMPTY,
          ct.DP, ct.FSDP, ct.TP, ct.SP, ct.EP]
MODES = [ct.MODE_TRAIN, ct.MODE_PREFILL, ct.MODE_DECODE, ct.MODE_INSERT]


def random_rule(rng):
    r = rng.random()
    if r < 0.2:
        return None
    if r < 0.6:
        return rng.choice(MESH_AXES)
    if r < 0.85:
        return tuple(rng.sample(MESH_AXES, rng.randint(1, 3)))
    return list(rng.sample(MESH_AXES, rng.randint(1, 2)))


def random_overrides(rng):
    return {f: random_rule(rng) for f in rng.sample(FIELDS, rng.randint(0, 6))}


def spec_tuple(spec):
    return tuple(spec)


def none_inside_a_tuple(outcome):
    return outcome[0] == "ok" and any(isinstance(e, (tuple, list)) and None in e for e in outcome[1])


def agree(ours, theirs, documented):
    """True when the outcomes agree, or differ as docs/python.md documents: where a mesh-dimension field is None,
    eformer builds entries such as ('fsdp', None), which JAX's NamedSharding rejects ("Resource axis: None ... is
    not found in mesh"); spmdsim raises that ValueError at resolve time, naming the rule."""
    if ours[:2] == theirs[:2]:
        return True
    if none_inside_a_tuple(theirs) and ours[:2] == ("raise", "ValueError") and "holds None inside a tuple" in ours[2]:
        documented[0] += 1
        return True
    return False


def test_partition_axis_fields_and_resolution_match_eformer():
    rng = random.Random(SEED)
    bad = peers.Disagreements("eformer PartitionAxis")
    cases = 0
    documented = [0]
    for _ in range(400):
        overrides = random_overrides(rng)
        theirs_pa = peers.outcome(escale.PartitionAxis, **overrides)
        ours_pa = peers.outcome(spmdsim.PartitionAxis, **overrides)
        cases += 1
        if theirs_pa[0] != ours_pa[0]:
            bad.add(overrides, ours_pa[:2], theirs_pa[:2])
            continue
        if theirs_pa[0] != "ok":
            continue
        t, o = theirs_pa[1], ours_pa[1]
        for f in FIELDS:
            if getattr(t, f) != getattr(o, f):
                bad.add((overrides, f), getattr(o, f), getattr(t, f))
        for _ in range(6):
            axes = [rng.choice(TOKENS + [None]) for _ in range(rng.randint(1, 5))]
            if rng.random() < 0.15:
                axes[0] = [ct.BATCH, ct.LENGTH]  # a composite axis
            mode = rng.choice(MODES)
            theirs = peers.outcome(lambda: spec_tuple(t.resolve_spec(axes, mode)))
            ours = peers.outcome(lambda: spec_tuple(o.resolve_spec(axes, mode)))
            cases += 1
            if not agree(ours, theirs, documented):
                bad.add((overrides, axes, mode), ours[:2], theirs[:2])
    peers.count("eformer.PartitionAxis", cases)
    peers.count("eformer.PartitionAxis (documented difference: None inside a tuple)", documented[0])
    bad.check()


def test_partition_manager_resolve_matches_eformer():
    rng = random.Random(SEED + 1)
    presets = ["HiddenStateSharding", "AttnQSharding", "AttnKVSharding", "RowWise", "ColumnWise", "Replicated"]
    bad = peers.Disagreements("eformer PartitionManager.resolve")
    cases = 0
    documented = [0]
    for _ in range(300):
        overrides = random_overrides(rng)
        tm = escale.PartitionManager(escale.PartitionAxis(**overrides))
        om = spmdsim.PartitionManager(spmdsim.PartitionAxis(**overrides))
        name = rng.choice(presets)
        shape = tuple(rng.choice([1, 1, 4, 8]) for _ in range(4))
        calls = [
            (lambda m, mod: m.resolve(getattr(mod, name), shape=shape)),
            (lambda m, mod: m.resolve(dynamic_axes=getattr(mod, name), shape=shape)),
            (lambda m, mod: m.resolve(axes=[ct.BATCH, ct.QUERY_LENGTH, ct.HEAD], mode=rng_mode, shape=shape)),
            (lambda m, mod: m.resolve(axes=[ct.BATCH, ct.EMBED], mode=1)),  # int mode without shape: ValueError
        ]
        rng_mode = rng.choice(MODES + [1, 2])
        for call in calls:
            theirs = peers.outcome(lambda: spec_tuple(call(tm, ct)))
            ours = peers.outcome(lambda: spec_tuple(call(om, spmdsim)))
            cases += 1
            if not agree(ours, theirs, documented):
                bad.add((overrides, name, shape), ours[:2], theirs[:2])
    peers.count("eformer.PartitionManager", cases)
    peers.count("eformer.PartitionManager (documented difference: None inside a tuple)", documented[0])
    bad.check()


def random_tree(rng, depth=0):
    if depth >= 2 or rng.random() < 0.3:
        kind = rng.random()
        shape = tuple(rng.choice([1, 2, 8, 64, 256]) for _ in range(rng.randint(0, 3)))
        if kind < 0.4:
            return np.zeros(shape, np.float32)
        if kind < 0.7:
            return ("jax", shape)
        if kind < 0.9:
            return ("ours", shape)
        return None
    if rng.random() < 0.8:
        return {rng.choice(["attn", "mlp", "kernel", "bias", "embed", "norm", "w1", "w2"]) + str(i): random_tree(rng, depth + 1)
                for i in range(rng.randint(1, 3))}
    return [random_tree(rng, depth + 1) for _ in range(rng.randint(1, 3))]


def realize(tree, which):
    if isinstance(tree, tuple) and len(tree) == 2 and tree[0] in ("jax", "ours"):
        if tree[0] == "jax" or which == "jax":
            return jax.ShapeDtypeStruct(tree[1], np.float32)
        return spmdsim.ShapeDtypeStruct(tree[1], np.float32)
    if isinstance(tree, dict):
        return {k: realize(v, which) for k, v in tree.items()}
    if isinstance(tree, list):
        return [realize(v, which) for v in tree]
    return tree


def specs_of(tree):
    if isinstance(tree, dict):
        return {k: specs_of(v) for k, v in tree.items()}
    if isinstance(tree, list):
        return [specs_of(v) for v in tree]
    return None if tree is None else tuple(tree)


def test_match_partition_rules_matches_eformer():
    rng = random.Random(SEED + 2)
    bad = peers.Disagreements("eformer match_partition_rules")
    cases = 0
    for _ in range(600):
        tree = random_tree(rng)
        rules = []
        for _ in range(rng.randint(1, 4)):
            pattern = rng.choice(["attn", "mlp.*", "kernel", "bias$", "w[12]", "^embed", "norm", "/0", "1$"])
            spec = tuple(rng.choice([None, "dp", "tp", ("dp", "fsdp")]) for _ in range(rng.randint(0, 3)))
            rules.append((pattern, spec))
        if rng.random() < 0.7:
            rules.append((".*", ()))
        min_size = rng.choice([0, 0, 64, 1024])
        strict = rng.random() < 0.8
        theirs = peers.outcome(lambda: specs_of(escale.match_partition_rules(
            [(p, JaxP(*s)) for p, s in rules], realize(tree, "jax"), min_size=min_size, strict=strict)))
        ours = peers.outcome(lambda: specs_of(spmdsim.match_partition_rules(
            [(p, spmdsim.P(*s)) for p, s in rules], realize(tree, "ours"), min_size=min_size, strict=strict)))
        cases += 1
        if ours[:2] != theirs[:2]:
            bad.add((tree, rules, min_size, strict), ours[:2], theirs[:2])
    peers.count("eformer.match_partition_rules", cases)
    bad.check()


def test_cli_resolve_json_matches_eformer():
    """The C++ library through `spmdsim resolve --axes ... --mode ... --json` (default PartitionAxis), against
    eformer's resolve_spec."""
    rng = random.Random(SEED + 3)
    short = {ct.BATCH: "batch", ct.LENGTH: "length", ct.QUERY_LENGTH: "query_length", ct.KV_LENGTH: "kv_length",
             ct.EMBED: "embed", ct.HEAD: "head", ct.KV_HEAD: "kv_head", ct.MLP_INTERMEDIATE: "mlp_intermediate",
             ct.VOCAB: "vocab", ct.EXPERT: "expert", ct.HEAD_DIM: "head_dim"}
    modes = {ct.MODE_TRAIN: "train", ct.MODE_PREFILL: "prefill", ct.MODE_DECODE: "decode", ct.MODE_INSERT: "insert"}
    pa = escale.PartitionAxis()
    bad = peers.Disagreements("eformer resolve_spec via `spmdsim resolve --json`")
    cases = 0
    for _ in range(40):
        axes = [rng.choice(list(short)) for _ in range(rng.randint(1, 4))]
        mode = rng.choice(list(modes))
        theirs = peers.outcome(lambda: spec_tuple(pa.resolve_spec(axes, mode)))
        report = peers.cli("resolve", "--axes", ",".join(short[a] for a in axes), "--mode", modes[mode])
        ours = ("raise",) if isinstance(report, tuple) else (
            "ok", tuple(tuple(e) if isinstance(e, list) else e for e in report["spec"]))
        cases += 1
        if ours[:2] != theirs[:2]:
            bad.add((axes, mode), ours[:2], theirs[:2])
    peers.count("eformer.PartitionAxis (CLI)", cases)
    bad.check()
