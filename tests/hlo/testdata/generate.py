"""Writes the HLO text of the JAX programs in tests/hlo/python/jax_programs.py, as XLA compiles them for 8 host CPU
devices (JAX 0.10.2, python/requirements-test.txt), with their large constants printed. These files are test data:
the parser's and the fuzzer's inputs (fuzz/CMakeLists.txt), and what the abstract benchmarks price
(bench/hlo/). The comparisons with JAX run JAX itself (tests/hlo/python).

    PYTHONPATH=build/dev/python build/venv/bin/python tests/hlo/testdata/generate.py
"""
import os
import pathlib
import sys

os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=8"
os.environ.setdefault("JAX_PLATFORMS", "cpu")
here = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(here.parent / "python"))

import jax  # noqa: E402
import jax_programs  # noqa: E402
from spmdsim.hlo import hlo_text  # noqa: E402


def main():
    for name, make in jax_programs.PROGRAMS.items():
        fn, args = make()
        compiled = fn.lower(*args).compile()
        (here / f"{name}.txt").write_text(hlo_text(compiled))
        stats = compiled.memory_analysis()
        print(f"{name}: {len(hlo_text(compiled))} chars; XLA memory_analysis: arguments "
              f"{stats.argument_size_in_bytes}, outputs {stats.output_size_in_bytes}, temporaries "
              f"{stats.temp_size_in_bytes} bytes (jax {jax.__version__})")


if __name__ == "__main__":
    main()
