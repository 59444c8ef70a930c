"""What the differential tests share: the case counter, device objects that JAX's mesh_utils can read, T5X's
partitioning module from fjformer, the spmdsim CLI, and outcome comparison (a value, or an exception type)."""
import collections
import importlib.util
import json
import os
import pathlib
import subprocess

COUNTS = collections.Counter()


def count(peer, n=1):
    COUNTS[peer] += n


class FakeDevice:
    """A device with the attributes JAX's mesh_utils and T5X read (id, coords, core_on_chip, slice_index,
    process_index, platform, device_kind), copied from a spmdsim Device: the peer lays out the same machine."""

    def __init__(self, device):
        self.id = device.id
        self.coords = tuple(device.coords)
        self.core_on_chip = device.core_on_chip
        self.slice_index = device.slice_index
        self.process_index = device.process_index
        self.platform = device.platform
        self.device_kind = device.device_kind

    def __repr__(self):
        return f"FakeDevice(id={self.id}, coords={self.coords}, core={self.core_on_chip})"


def fake_devices(topology):
    """The topology's devices as JAX's jax.devices() would list them on that machine."""
    table = topology.devices
    return [FakeDevice(table[i]) for i in topology.jax_devices_order()]


def ids_of(array):
    import numpy as np
    return np.vectorize(lambda d: d.id, otypes=[np.int64])(np.asarray(array, dtype=object)).tolist()


_t5x = None


def t5x():
    """fjformer's copy of T5X's partitioning module (t5x/partitioning.py), loaded from its file so that
    fjformer's package __init__ (which imports its triton kernels) does not run."""
    global _t5x
    if _t5x is None:
        spec = importlib.util.find_spec("fjformer")
        path = pathlib.Path(spec.origin).parent / "sharding" / "t5x_partitioning.py"
        module_spec = importlib.util.spec_from_file_location("t5x_partitioning", path)
        _t5x = importlib.util.module_from_spec(module_spec)
        module_spec.loader.exec_module(_t5x)
    return _t5x


def cli(*args):
    """Runs the spmdsim executable with --json; returns the parsed JSON, or ('error', first stderr line)."""
    exe = os.environ.get("SPMDSIM_CLI")
    assert exe, "SPMDSIM_CLI is not set (ctest sets it)"
    p = subprocess.run([exe, *args, "--json"], capture_output=True, text=True, timeout=60)
    if p.returncode != 0:
        return ("error", p.stderr.strip().splitlines()[0] if p.stderr.strip() else f"exit {p.returncode}")
    return json.loads(p.stdout)


def outcome(fn, *args, **kwargs):
    """('ok', result) or ('raise', exception class name)."""
    try:
        return ("ok", fn(*args, **kwargs))
    except Exception as e:  # noqa: BLE001 - every exception is an outcome to compare
        return ("raise", type(e).__name__, str(e))


class Disagreements:
    """Collects the cases where spmdsim and the peer differ; the test fails listing the first few."""

    def __init__(self, what):
        self.what = what
        self.items = []

    def add(self, case, ours, theirs):
        self.items.append((case, ours, theirs))

    def check(self):
        if self.items:
            shown = "\n".join(f"  {c}: spmdsim {o!r} vs peer {t!r}" for c, o, t in self.items[:10])
            raise AssertionError(f"{len(self.items)} disagreements with {self.what}:\n{shown}")
