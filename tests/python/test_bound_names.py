"""Every public name of the package and of the extension is exercised by a test in this folder (a new binding
without a test fails here)."""
import pathlib
import re

import spmdsim
from spmdsim import _spmdsim

HERE = pathlib.Path(__file__).resolve().parent
EXAMPLES = HERE.parents[2] / "examples" / "python"


def _all_test_sources():
    text = "".join(p.read_text() for p in sorted(HERE.glob("test_*.py")) if p.name != "test_bound_names.py")
    return text + "".join(p.read_text() for p in sorted(EXAMPLES.glob("*.py")))


def test_every_public_name_is_tested():
    text = _all_test_sources()
    names = set(spmdsim.__all__) | {n for n in dir(_spmdsim) if not n.startswith("__")}
    names -= {"_tokens", "_NOT_GIVEN", "_dynamic_sharding_presets"}  # reached through the names they define
    names -= {"_run_program", "_run_scenario", "_analyze"}  # reached through ShardMap, run, analyze_sharding_strategy
    # Private functions are reached through the public wrapper of the same name.
    def mentioned(word):
        return re.search(rf"\b{re.escape(word)}\b", text) is not None

    untested = sorted(n for n in names if not mentioned(n) and not mentioned(n.lstrip("_")))
    assert not untested, f"names without a test: {untested}"


def test_every_extension_class_is_in_the_package():
    for name in ("Topology", "Device", "Mesh", "PartitionSpec", "P", "NamedSharding", "PartitionAxis",
                 "DuplicateSpecError", "IndivisibleError", "ScenarioError"):
        assert getattr(spmdsim, name) is getattr(_spmdsim, name)
    assert not issubclass(spmdsim.DuplicateSpecError, ValueError)  # JAX 0.10.2: an Exception, not a ValueError
    assert issubclass(spmdsim.IndivisibleError, ValueError)
    assert spmdsim.DuplicateSpecError.__module__ == "spmdsim"
