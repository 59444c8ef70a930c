"""Writes the HLO text of the JAX programs in tests/hlo/python/jax_programs.py, as XLA compiles them for 8 host CPU
devices (JAX 0.10.2, python/requirements-test.txt), with their large constants printed, of the GPT training step
that test_model_comparison.py compiles (gpt_train_step.txt), and of a transformer training step compiled for a
4096-device mesh (pod4096_transformer_train_step.txt). These files are test data: the
parser's and the fuzzer's inputs (fuzz/CMakeLists.txt), the pod scenario (scenarios/hlo-tpu-v4-pod-import.yaml)
and what the benchmarks price (bench/hlo/). The comparisons with JAX run JAX itself (tests/hlo/python).

    PYTHONPATH=build/dev/python build/venv/bin/python tests/hlo/testdata/generate.py

XLA's CPU client holds at most 2048 devices per process, so the 4096-device module is compiled by two processes
of 2048 host devices each (jax.distributed on localhost, gloo collectives); nothing is executed.
"""
import os
import pathlib
import sys

os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=8"
os.environ.setdefault("JAX_PLATFORMS", "cpu")
here = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(here.parent / "python"))

import subprocess  # noqa: E402

POD_PROGRAM = r"""
import os, sys
os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=2048"
os.environ["JAX_PLATFORMS"] = "cpu"
import jax
jax.config.update("jax_cpu_collectives_implementation", "gloo")
jax.distributed.initialize(coordinator_address="localhost:" + sys.argv[2], num_processes=2, process_id=int(sys.argv[1]))
import jax.numpy as jnp, numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
mesh = Mesh(np.array(jax.devices()).reshape(256, 16), ("data", "model"))
L, D, F, B, S, H = 4, 1024, 4096, 1024, 128, 16
def layer(x, p):
    wq, wk, wv, wo, w1, w2 = p
    q, k, v = [(x @ w).reshape(B, S, H, D // H) for w in (wq, wk, wv)]
    a = jax.nn.softmax(jnp.einsum("bshd,bthd->bhst", q, k) / 8.0, axis=-1)
    x = x + jnp.einsum("bhst,bthd->bshd", a, v).reshape(B, S, D) @ wo
    return x + jax.nn.gelu(x @ w1) @ w2, None
def step(params, x):
    def loss(p):
        return jnp.mean(jax.lax.scan(layer, x, p)[0] ** 2)
    l, g = jax.value_and_grad(loss)(params)
    return jax.tree.map(lambda p, g: p - 0.1 * g, params, g), l
shapes = [(L, D, D)] * 4 + [(L, D, F), (L, F, D)]
specs = [P(None, None, "model")] * 3 + [P(None, "model", None), P(None, None, "model"), P(None, "model", None)]
params = tuple(jax.ShapeDtypeStruct(s, jnp.bfloat16, sharding=NamedSharding(mesh, p)) for s, p in zip(shapes, specs))
x = jax.ShapeDtypeStruct((B, S, D), jnp.bfloat16, sharding=NamedSharding(mesh, P("data")))
compiled = jax.jit(step).lower(params, x).compile()
if sys.argv[1] == "0":
    from spmdsim.hlo import hlo_text
    open(sys.argv[3], "w").write(hlo_text(compiled))
jax.distributed.shutdown()
"""


def pod_module(path, port="61234"):
    """A transformer training step (4 scanned layers, d_model 1024, bf16) over data 256 x model 16: 4096 devices."""
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    procs = [subprocess.Popen([sys.executable, "-c", POD_PROGRAM, str(i), port, str(path)], env=env)
             for i in range(2)]
    if any(p.wait(timeout=900) != 0 for p in procs):
        raise SystemExit("compiling the 4096-device module failed")
    print(f"{path.name}: {path.stat().st_size} bytes")


import jax  # noqa: E402
import jax_programs  # noqa: E402
from spmdsim.hlo import hlo_text  # noqa: E402


def main():
    pod_module(here / "pod4096_transformer_train_step.txt")
    fn, args = jax_programs.gpt_train_step(**jax_programs.GPT)  # compiled only (scenarios/hlo-vs-model-dgx-h100.yaml)
    (here / "gpt_train_step.txt").write_text(hlo_text(fn.lower(*args).compile()))
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
