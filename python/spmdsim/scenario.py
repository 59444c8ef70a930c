"""Scenarios from Python: run one (what `spmdsim run --json` writes) or plan its model workload (what
`spmdsim plan --json` prints), from a YAML file's path or the same document as a dict."""

import json as _json
import os as _os

from spmdsim import _spmdsim


def plan(path_or_dict, topology=None, global_batch=None, top=10, threads=0, max_context=8, placement=True,
         memory_headroom=0.1, stack=None, calibration=None):
    """Searches the parallel configurations of the scenario's `model` workload (a YAML file's path, or the same
    document as a dict) and returns exactly what `spmdsim plan --json` prints with the same options, as a dict: the
    counts and the `top` fastest configurations (docs/plan.md). The options are the CLI's: `topology` overrides
    the scenario's ("dgx-h100:16", --topology), `global_batch` the model's (--global-batch), `max_context` is the
    largest context degree searched (--max-context), `placement=False` keeps Megatron's axis order
    (--no-placement), `memory_headroom` is the fraction of each device's memory left free, in [0, 1)
    (--memory-headroom 0.1), `stack` prices the step for a software stack ("megatron", "pytorch-fsdp", "maxtext",
    "megatron-deepspeed-2022", "auto"; --stack) and `calibration` names a profile of `spmdsim calibrate` (--calibration; default: the
    scenario's topology.calibration when the topology is the scenario's). No scenario file is written. The GIL is
    released while it runs; `threads` workers (0: one per core) evaluate configurations in parallel."""
    if global_batch is not None and global_batch < 1:
        raise ValueError(f"global_batch must be >= 1, got {global_batch}")
    if top < 1:
        raise ValueError(f"top must be >= 1, got {top}")
    args = (topology or "", global_batch or 0, top, threads, max_context, placement, float(memory_headroom),
            stack or "", _os.fspath(calibration) if calibration is not None else "")
    if isinstance(path_or_dict, dict):
        return _spmdsim._plan(_json.dumps(path_or_dict), True, *args)
    return _spmdsim._plan(_os.fspath(path_or_dict), False, *args)


def run(path_or_dict, abstract=False, threads=0):
    """Runs a scenario (a YAML file's path, or the same document as a dict) and returns what
    `spmdsim run --json` writes, as a dict. The GIL is released while the simulation runs."""
    if isinstance(path_or_dict, dict):
        text = _json.dumps(path_or_dict)  # JSON is YAML
        return _spmdsim._run_scenario(text, True, abstract, threads)
    return _spmdsim._run_scenario(_os.fspath(path_or_dict), False, abstract, threads)
