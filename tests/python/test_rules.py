"""Flax / T5X logical axis rules, eformer's PartitionAxis / PartitionManager / match_partition_rules /
analyze_sharding_strategy. Expected values: the worked examples of partition/*.h (from the peers' docstrings and
logic)."""
import threading

import numpy as np
import pytest

import spmdsim
from spmdsim import P, Mesh, PartitionAxis, PartitionManager

FLAX_RULES = (("batch", "X"), ("features", "X"), ("heads", "Y"), ("batch", "Z"))


def test_logical_to_mesh_axes_is_flax_s():
    assert spmdsim.logical_to_mesh_axes(("batch", "length", "heads", "features"), FLAX_RULES) == P("X", None, "Y", None)
    assert spmdsim.logical_to_mesh_axes(["batch", None], list(FLAX_RULES)) == P("X", None)
    assert spmdsim.logical_to_mesh_axes(None, FLAX_RULES) is None
    assert spmdsim.logical_to_mesh_axes(("batch",)) == P(None)  # no rules in effect
    assert spmdsim.logical_to_mesh_axes(("a", spmdsim.UNCONSTRAINED), (("a", ("x", "y")),)) == P(("x", "y"), P.UNCONSTRAINED)
    with pytest.raises(ValueError, match=r"Unsupported: Dimensions \('batch',\) occur more than once in array names."):
        spmdsim.logical_to_mesh_axes(("batch", "batch"), FLAX_RULES)
    with pytest.raises(ValueError, match="Unknown axis rule specification type."):
        spmdsim.logical_to_mesh_axes(("batch",), "batch=X")


def test_rules_tuple_is_converted_once_and_lists_every_time():
    rules = [("batch", "X")]
    assert spmdsim.logical_to_mesh_axes(("batch",), rules) == P("X")
    rules[0] = ("batch", "Y")  # a list may change between calls
    assert spmdsim.logical_to_mesh_axes(("batch",), rules) == P("Y")
    frozen = (("batch", "X"),)
    assert spmdsim.logical_to_mesh_axes(("batch",), frozen) == P("X")
    assert spmdsim.logical_to_mesh_axes(("batch",), frozen) == P("X")
    assert spmdsim.logical_to_mesh_axes(("batch",), (("batch", "Z"),)) == P("Z")


def test_logical_axis_rules_context_is_per_thread_and_nests():
    assert spmdsim.get_logical_axis_rules() == ()
    with spmdsim.logical_axis_rules(FLAX_RULES):
        assert spmdsim.get_logical_axis_rules() == FLAX_RULES
        assert spmdsim.logical_to_mesh_axes(("heads",)) == P("Y")
        with spmdsim.axis_rules((("heads", "Z"),)):
            assert spmdsim.logical_to_mesh_axes(("heads",)) == P("Z")
        assert spmdsim.logical_to_mesh_axes(("heads",)) == P("Y")
        seen = []
        t = threading.Thread(target=lambda: seen.append(spmdsim.get_logical_axis_rules()))
        t.start()
        t.join()
        assert seen == [()]
    assert spmdsim.get_logical_axis_rules() == ()
    spmdsim.set_logical_axis_rules((("a", "b"),))
    assert spmdsim.get_logical_axis_rules() == (("a", "b"),)
    spmdsim.set_logical_axis_rules(())


def test_standard_logical_axis_rules_are_t5x_s():
    rules = spmdsim.standard_logical_axis_rules(2, 2)
    assert isinstance(rules, list) and ("batch", "data") in rules
    assert spmdsim.logical_to_mesh_axes(("embed", "mlp"), rules) == P("data", "model")
    one = spmdsim.standard_logical_axis_rules()
    assert one[-1] == ("mlp_activations", None) or ("mlp_activations", None) in one
    assert spmdsim.standard_logical_axis_rules(additional_rules=(("x", "y"),))[-1] == ("x", "y")
    with pytest.raises(ValueError, match="`activation_partitioning_dims` = 3 `parameter_partitioning_dims` = 1 is "
                                         "not supported."):
        spmdsim.standard_logical_axis_rules(3, 1)


def test_composite_rules_are_flax_s():
    assert spmdsim.composite_rules((("a", "x"),), (("b", "y"),)) == (("a", "x"), ("b", "y"))
    with pytest.raises(ValueError, match="Inconsistent logical axis annotations for a: x vs y"):
        spmdsim.composite_rules((("a", "x"),), (("a", "y"),))


def test_partition_axis_defaults_and_overrides():
    paxis = PartitionAxis()
    assert paxis.data_parallel_axis == "dp" and paxis.batch_axis == ("fsdp", "dp")
    assert paxis.head_axis == "tp" and paxis.attention_dim_axis is None
    assert repr(paxis).startswith("PartitionAxis(data_parallel_axis='dp'")
    assert PartitionAxis(decode_query_sequence_axis="dp").decode_query_sequence_axis == "dp"
    assert PartitionAxis(batch_axis=["dp", "fsdp"]).batch_axis == ["dp", "fsdp"]
    assert PartitionAxis() == PartitionAxis() and PartitionAxis(head_axis="x") != PartitionAxis()
    with pytest.raises(TypeError, match="PartitionAxis.__init__\\(\\) got an unexpected keyword argument 'x'"):
        PartitionAxis(x="dp")
    with pytest.raises(AttributeError):
        paxis.no_such_field
    spec = [spmdsim.BATCH, spmdsim.QUERY_LENGTH, spmdsim.HEAD, spmdsim.HEAD_DIM]
    assert paxis.resolve_spec(spec, spmdsim.MODE_TRAIN) == P(("fsdp", "dp"), "sp", "tp", None)
    assert paxis.resolve_axis(spec, spmdsim.MODE_TRAIN) == [("fsdp", "dp"), "sp", "tp", None]
    decode = PartitionAxis(decode_query_sequence_axis="dp")
    assert decode.resolve_spec(spec, spmdsim.MODE_DECODE) == P(("fsdp", "dp"), "dp", "tp", None)
    with pytest.raises(ValueError, match="Unknown semantic axis name"):
        paxis.resolve_spec(["__NOPE__"], spmdsim.MODE_TRAIN)


def test_partition_axis_registry():
    try:
        PartitionAxis.register("__MY_AXIS__", "tensor_parallel_axis")
        assert PartitionAxis().resolve_spec(["__MY_AXIS__"], "train") == P("tp")
        with pytest.raises(ValueError, match="Semantic axis '__MY_AXIS__' already exists. Use override=True"):
            PartitionAxis.register("__MY_AXIS__", "dp")
        PartitionAxis.register("__MY_AXIS__", "dp", generation_axis_rule=None, override=True)
        assert PartitionAxis().resolve_spec(["__MY_AXIS__"], spmdsim.MODE_DECODE) == P(None)
        PartitionAxis.unregister("__MY_AXIS__")
        with pytest.raises(KeyError):
            PartitionAxis.unregister("__MY_AXIS__", missing_ok=False)
    finally:
        PartitionAxis.clear_registered_axes()


def test_partition_manager_resolve_is_eformer_s():
    pm = PartitionManager(PartitionAxis(decode_query_sequence_axis="dp"))
    assert pm.paxis.decode_query_sequence_axis == "dp"
    hidden = spmdsim.HiddenStateSharding
    assert hidden.mode == 1
    assert pm.resolve(dynamic_axes=hidden, shape=(2, 1, 32)) == P(("fsdp", "dp"), "dp", "tp")
    assert pm.resolve(dynamic_axes=hidden, shape=(2, 8, 32)) == P(("fsdp", "dp"), "sp", "tp")
    assert pm.resolve(axes=[spmdsim.BATCH, None], mode=spmdsim.MODE_TRAIN) == P(("fsdp", "dp"), None)
    with pytest.raises(ValueError, match="when using dynamic mode detection shape should be provided"):
        pm.resolve(dynamic_axes=hidden)
    with pytest.raises(IndexError, match="tuple index out of range"):
        pm.resolve(axes=[spmdsim.BATCH], mode=5, shape=(2,))
    with pytest.raises(ValueError):
        pm.resolve(axes=[spmdsim.BATCH])
    assert spmdsim.get_current_partition_manager() is None
    with pm:
        assert spmdsim.get_current_partition_manager() is pm
    assert repr(pm) == "PartitionManager(...)"  # eformer's
    assert PartitionManager().paxis == PartitionAxis()
    presets = ("HiddenStateSharding", "AttnQSharding", "AttnKVSharding", "RowWise", "SRowWise", "ColumnWise",
               "SColumnWise", "Replicated", "ExpertColumnWise", "ExpertRowWise", "ExpertColumnWiseAlt",
               "ExpertRowWiseAlt", "UnifiedExpertColumnWise", "UnifiedExpertRowWise", "ExpertActivations",
               "ExpertActivationsAlt", "ExpertTensorParallel")
    for name in presets:
        preset = getattr(spmdsim, name)
        assert isinstance(preset, spmdsim.DynamicShardingAxes)
        spec = pm.resolve(dynamic_axes=preset, shape=(2,) * len(preset.axes))
        assert len(spec) == len(preset.axes)


def test_match_partition_rules_over_arrays_shapes_and_nested_dicts():
    rules = ((".*/kernel", P("fsdp", "tp")), (".*", P()))
    params = {"dense": {"kernel": np.zeros((1024, 4096), np.float32)}, "small/kernel": (64, 64),
              "norm": {"scale": (1024,)}, "step": 3}
    specs = spmdsim.match_partition_rules(rules, params, min_size=16384)
    assert specs == {"dense": {"kernel": P("fsdp", "tp")}, "small/kernel": P(), "norm": {"scale": P()}, "step": P()}
    assert spmdsim.match_partition_rules(rules, {"head/kernel": (8,)})["head/kernel"] == P("fsdp")
    assert spmdsim.match_partition_rules(rules, {"head/kernel": (8,)}, strict=False)["head/kernel"] == P("fsdp", "tp")
    assert spmdsim.match_partition_rules(rules, [(8, 8), (4,)]) == [P(), P()]
    with pytest.raises(ValueError, match="Partition rule not found for param: w"):
        spmdsim.match_partition_rules(((".*/kernel", P("x")),), {"w": (4, 4)})
    import re
    with pytest.raises(re.error):
        spmdsim.match_partition_rules((("(?P<n>a)", P()),), {"a": (2,)})


def test_analyze_sharding_strategy_fills_eformer_s_fields():
    mesh = Mesh(np.arange(8).reshape(2, 4), ("dp", "tp"))
    params = {"w": np.zeros((1024, 4096), np.float32), "b": (4096,)}
    specs = {"w": P(None, "tp"), "b": P()}
    a = spmdsim.analyze_sharding_strategy(params, specs, mesh)
    assert a["total_parameters"] == 4198400 and a["sharded_parameters"] == 4194304
    assert a["memory_per_device"] == {d: 4210688 for d in range(8)}
    assert a["balance_score"] == 1.0
    assert a["memory_efficiency"] == pytest.approx(0.4985, abs=1e-4)
    assert a["replication_factor"] == pytest.approx(2.006, abs=1e-3)
    assert a["partition_stats"]["w"]["shard_shape"] == (1024, 1024)
    assert a["partition_stats"]["b"]["replication"] == 8
    assert a["fits"] and a["memory_per_process"] == {0: 8 * 4210688}
    with mesh:
        assert spmdsim.analyze_sharding_strategy(params, specs)["total_parameters"] == 4198400
    with pytest.raises(ValueError):
        spmdsim.analyze_sharding_strategy({"w": (3,)}, {"w": P("tp")}, mesh)
    with pytest.raises(ValueError, match="2 arrays but 1 partition specs"):
        spmdsim.analyze_sharding_strategy(params, {"w": P()}, mesh)
