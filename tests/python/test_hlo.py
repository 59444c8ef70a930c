"""spmdsim.run_hlo without JAX: a module's text run on the devices of a topology (docs/hlo.md). The comparisons
with JAX itself (from_jax, hlo_text) are in tests/hlo/python, which need JAX."""
import numpy as np
import pytest

import spmdsim

SUM = """HloModule m, num_partitions=4
%add (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %c = f32[] add(%a, %b)
}
ENTRY %e (x: f32[2,3]) -> f32[2,3] {
  %x = f32[2,3] parameter(0)
  %y = f32[2,3] multiply(%x, %x)
  ROOT %r = f32[2,3] all-reduce(%y), channel_id=1, replica_groups={{0,1},{2,3}}, use_global_device_ids=true, to_apply=%add
}
"""


def test_run_hlo_runs_each_device_its_arguments_and_predicts_the_module():
    args = [[np.full((2, 3), d, np.float32)] for d in range(4)]
    result = spmdsim.run_hlo(SUM, topology="tpu-v4:2x2x1", args=args)
    assert isinstance(result, spmdsim.HloResult)
    for d, outputs in enumerate(result.outputs):
        pair = (d // 2) * 2
        np.testing.assert_array_equal(outputs[0], np.full((2, 3), pair**2 + (pair + 1) ** 2, np.float32))
    report = result.report
    assert report["kind"] == "hlo" and report["hlo"]["devices"] == 4
    assert any(c["name"] == "collective all-reduce" for c in report["hlo"]["by_class"])


def test_run_hlo_abstract_predicts_without_data_and_errors_name_the_line():
    outputs, report = spmdsim.run_hlo(SUM, topology="dgx-h100:1", abstract=True, narrow_types=False)
    assert outputs is None and report["totals"]["predicted_seconds"] > 0
    with pytest.raises(ValueError, match=r"^hlo:3:19: unknown opcode .frobnicate."):
        spmdsim.run_hlo("HloModule m\nENTRY %e {\n  ROOT %x = f32[] frobnicate()\n}\n", topology="cpu:1")
