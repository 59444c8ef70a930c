"""spmdsim.plan returns exactly what `spmdsim plan --json` prints with the same options: both call PlanScenario
(scenario/plan.h). SPMDSIM_CLI names the executable (ctest sets it); SPMDSIM_SOURCE_DIR the repository (default:
two folders up from this file)."""
import json
import os
import pathlib
import subprocess

import pytest

import spmdsim

SOURCE = pathlib.Path(os.environ.get("SPMDSIM_SOURCE_DIR", pathlib.Path(__file__).resolve().parents[2]))
SCENARIOS = SOURCE / "scenarios"

# The one field that measures this machine.
WALL_FIELDS = {"wall_seconds"}

SCENARIO = """name: calibrated-plan
topology: {{preset: "dgx-h100:2"{calibration}}}
mesh: {{axes: {{data: 16}}}}
workloads:
  - kind: model
    name: small
    vocab: 32000
    d_model: 1024
    layers: 4
    heads: 8
    d_ff: 4096
    seq: 1024
    global_batch: 32
    micro_batch: 1
    dtype: bfloat16
    parallel: {{data_axes: [data]}}
"""

PROFILE = """calibration:
  device_kind: NVIDIA H100 80GB HBM3
  stack: {stack}
  compute_scale: 0.8
  comm_scale: 1.5
  host_launch_scale: 1
  fitted: [compute_scale, comm_scale]
  runs: [a, b]
  rms_log_error_before: 0.1
  rms_log_error_after: 0.01
"""


def without_wall_clock(value):
    if isinstance(value, dict):
        return {k: without_wall_clock(v) for k, v in value.items() if k not in WALL_FIELDS}
    if isinstance(value, list):
        return [without_wall_clock(v) for v in value]
    return value


def cli():
    path = os.environ.get("SPMDSIM_CLI")
    if not path:
        pytest.skip("SPMDSIM_CLI is not set (ctest sets it to the spmdsim executable)")
    return path


def cli_plan(*args):
    done = subprocess.run([cli(), "plan", *map(str, args), "--json", "--write", ""], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.fixture
def files(tmp_path):
    """A scenario calibrated by its topology.calibration (megatron), the same without it, and a pytorch-fsdp
    profile."""
    (tmp_path / "megatron.calibration.yaml").write_text(PROFILE.format(stack="megatron"))
    (tmp_path / "fsdp.calibration.yaml").write_text(PROFILE.format(stack="pytorch-fsdp"))
    calibrated = tmp_path / "calibrated.yaml"
    calibrated.write_text(SCENARIO.format(calibration=", calibration: megatron.calibration.yaml"))
    plain = tmp_path / "plain.yaml"
    plain.write_text(SCENARIO.format(calibration=""))
    return {"calibrated": calibrated, "plain": plain, "fsdp": tmp_path / "fsdp.calibration.yaml"}


def test_plan_of_a_calibrated_scenario_is_the_cli_s_json(files):
    want = cli_plan(files["calibrated"], "--stack", "megatron", "--memory-headroom", "0.2", "--top", "5",
                    "--threads", "2", "--no-placement")
    got = spmdsim.plan(files["calibrated"], stack="megatron", memory_headroom=0.2, top=5, threads=2,
                       placement=False)
    assert without_wall_clock(got) == without_wall_clock(want)
    # The same types (1 is not 1.0) and key order as json.loads of the CLI's text.
    assert repr(without_wall_clock(got)) == repr(without_wall_clock(want))
    assert got["memory_headroom"] == 0.2 and len(got["best"]) == 5
    # The scenario's calibration was applied: without it every step is another.
    plain = spmdsim.plan(files["plain"], stack="megatron", memory_headroom=0.2, top=5, threads=2, placement=False)
    assert plain["best"][0]["step_seconds"] != got["best"][0]["step_seconds"]


def test_plan_with_every_option_is_the_cli_s_json(files):
    want = cli_plan(files["plain"], "--topology", "dgx-h100:1", "--global-batch", "16", "--top", "4", "--threads",
                    "2", "--max-context", "2", "--memory-headroom", "25%", "--stack", "pytorch-fsdp",
                    "--calibration", files["fsdp"])
    got = spmdsim.plan(str(files["plain"]), topology="dgx-h100:1", global_batch=16, top=4, threads=2, max_context=2,
                       placement=True, memory_headroom=0.25, stack="pytorch-fsdp", calibration=files["fsdp"])
    assert without_wall_clock(got) == without_wall_clock(want)
    assert got["devices"] == 8 and got["memory_headroom"] == 0.25


def test_plan_refuses_a_profile_of_another_stack_as_the_cli_does(files):
    done = subprocess.run([cli(), "plan", str(files["calibrated"]), "--stack", "pytorch-fsdp", "--write", ""],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 1
    assert "topology.calibration was fitted on NVIDIA H100 80GB HBM3 with stack megatron" in done.stderr
    with pytest.raises(ValueError, match="topology.calibration was fitted on NVIDIA H100 80GB HBM3 with stack "
                                         "megatron; the model runs on NVIDIA H100 80GB HBM3 with stack pytorch-fsdp"):
        spmdsim.plan(files["calibrated"], stack="pytorch-fsdp")


def test_plan_gives_the_cli_s_json_on_a_shipped_scenario():
    path = str(SCENARIOS / "llama-gqa-dgx-h100-32.yaml")
    want = cli_plan(path, "--topology", "dgx-h100:2", "--global-batch", "32", "--top", "3", "--threads", "2",
                    "--no-placement")
    got = spmdsim.plan(path, topology="dgx-h100:2", global_batch=32, top=3, threads=2, placement=False)
    assert without_wall_clock(got) == without_wall_clock(want)
    assert len(got["best"]) == 3
    assert got["best"][0]["step_seconds"] <= got["best"][1]["step_seconds"]


def test_plan_takes_the_document_as_a_dict():
    doc = {"topology": {"preset": "dgx-h100:1"}, "mesh": {"axes": {"data": 8}},
           "workloads": [{"kind": "model", "name": "small", "vocab": 32000, "d_model": 1024, "layers": 4,
                          "heads": 8, "d_ff": 4096, "seq": 1024, "global_batch": 16, "micro_batch": 1,
                          "dtype": "bfloat16", "parallel": {"data_axes": ["data"]}}]}
    got = spmdsim.plan(doc, top=2, threads=2, placement=False)
    assert got["devices"] == 8 and len(got["best"]) == 2


def test_plan_rejects_a_scenario_without_a_model():
    with pytest.raises(ValueError, match="no `kind: model` workload to plan"):
        spmdsim.plan(SCENARIOS / "cpu8-quick.yaml")
    with pytest.raises(ValueError, match="top must be >= 1"):
        spmdsim.plan(SCENARIOS / "cpu8-quick.yaml", top=0)
    with pytest.raises(ValueError, match="memory headroom must be in"):
        spmdsim.plan(SCENARIOS / "llama-gqa-dgx-h100-32.yaml", memory_headroom=1.0)
    with pytest.raises(ValueError, match="unknown stack 'deepspeed'"):
        spmdsim.plan(SCENARIOS / "llama-gqa-dgx-h100-32.yaml", stack="deepspeed")
