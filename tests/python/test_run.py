"""spmdsim.run returns what `spmdsim run --json` writes, on the shipped scenarios. SPMDSIM_CLI names the
executable (ctest sets it); SPMDSIM_SOURCE_DIR the repository (default: two folders up from this file)."""
import json
import os
import pathlib
import subprocess
import threading
import time

import pytest

import spmdsim

SOURCE = pathlib.Path(os.environ.get("SPMDSIM_SOURCE_DIR", pathlib.Path(__file__).resolve().parents[2]))
SCENARIOS = SOURCE / "scenarios"

# Fields that are wall-clock measurements of this machine, which differ between any two runs.
WALL_FIELDS = {"wall_seconds", "measured_seconds", "measured_algbw", "measured_busbw"}


def without_wall_clock(value):
    if isinstance(value, dict):
        return {k: without_wall_clock(v) for k, v in value.items() if k not in WALL_FIELDS}
    if isinstance(value, list):
        return [without_wall_clock(v) for v in value]
    return value


def cli_json(path, abstract):
    cli = os.environ.get("SPMDSIM_CLI")
    if not cli:
        pytest.skip("SPMDSIM_CLI is not set (ctest sets it to the spmdsim executable)")
    args = [cli, "run", str(path), "--json", "-", "--quiet"] + (["--abstract"] if abstract else [])
    done = subprocess.run(args, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.mark.parametrize("name,abstract", [("cpu8-quick", False), ("all-kinds", False), ("cpu8-quick", True),
                                           ("tpu-v4-32-mlp", True), ("tpu-v5p-2slices", True),
                                           ("dgx-h100-32", True)])
def test_run_gives_the_cli_s_json(name, abstract):
    path = SCENARIOS / f"{name}.yaml"
    ours = spmdsim.run(path, abstract=abstract, threads=2)
    assert ours["exit_code"] == 0
    cli = cli_json(path, abstract)
    assert without_wall_clock(ours) == without_wall_clock(cli)
    # The same types (1 is not 1.0) and key order as json.loads of the CLI's text.
    assert repr(without_wall_clock(ours)) == repr(without_wall_clock(cli))
    assert spmdsim.run(str(path), abstract=abstract)["workloads"][0]["name"] == ours["workloads"][0]["name"]


def test_run_takes_the_document_as_a_dict():
    doc = {
        "name": "from-python",
        "topology": {"preset": "cpu:8"},
        "mesh": {"axes": {"data": 2, "model": 4}},
        "workloads": [{"kind": "mlp", "name": "tp_mlp", "batch": 4, "seq": 8, "d_model": 32, "d_ff": 64,
                       "sharding": {"batch_axes": ["data"], "tensor_axes": ["model"]}}],
    }
    report = spmdsim.run(doc)
    w = report["workloads"][0]
    assert w["name"] == "tp_mlp" and w["check"]["passed"]
    assert spmdsim.run(doc, abstract=True)["workloads"][0]["check"]["performed"] is False


def test_run_errors_are_scenario_errors():
    with pytest.raises(spmdsim.ScenarioError) as e:
        spmdsim.run({"topology": {"preset": "cpu:8"}, "mesh": {"axes": {"data": 8}}, "workloads": [], "wrkloads": 1})
    assert isinstance(e.value, ValueError) and str(e.value).startswith("<dict>:") and "workloads" in str(e.value)
    with pytest.raises(ValueError, match="<dict>:1:52: mesh: Number of devices 8 must equal the product of "
                                         r"mesh_shape \(3,\)"):  # the library's ValueError, with the place
        spmdsim.run({"topology": {"preset": "cpu:8"}, "mesh": {"axes": {"data": 3}}, "workloads": []})
    with pytest.raises(ValueError):
        spmdsim.run(SCENARIOS / "no-such-file.yaml")
    with pytest.raises(ValueError, match="threads must be >= 0"):
        spmdsim.run(SCENARIOS / "cpu8-quick.yaml", threads=-1)


def test_run_releases_the_gil():
    # Another Python thread keeps running while run() simulates: with the GIL held for the whole call, none of its
    # iterations could fall strictly inside the call.
    started, done, stamps = threading.Event(), threading.Event(), []

    def tick():
        started.wait()
        while not done.is_set():
            stamps.append(time.perf_counter())
            time.sleep(0.001)

    helper = threading.Thread(target=tick)
    helper.start()
    started.set()
    begin = time.perf_counter()
    spmdsim.run(SCENARIOS / "cpu8-quick.yaml", threads=1)
    end = time.perf_counter()
    done.set()
    helper.join()
    inside = [t for t in stamps if begin + 0.005 < t < end - 0.005]
    assert len(inside) >= 3, f"{len(inside)} of {len(stamps)} helper iterations ran during run() ({end - begin:.3f} s)"
