"""A JAX training step compiled for a TPU v5e 4x4 slice by libtpu, without one, and priced as compiled."""
import jax, jax.numpy as jnp
from jax.sharding import NamedSharding, PartitionSpec as P
import spmdsim

mesh = spmdsim.target_mesh("tpu-v5e:4x4", data=4, model=4)  # 16 chips, as a jax.sharding.AbstractMesh
S = lambda shape, spec: jax.ShapeDtypeStruct(shape, jnp.bfloat16, sharding=NamedSharding(mesh, spec))
w = {"a": S((4096, 16384), P(None, "model")), "b": S((16384, 4096), P("model", None))}
x = S((8192, 4096), P("data", None))

def step(w, x):  # one SGD step of a two-layer MLP, the weights donated
    g = jax.grad(lambda w: jnp.mean(jnp.square(jax.nn.relu(x @ w["a"]) @ w["b"])))(w)
    return jax.tree.map(lambda p, d: p - 1e-3 * d, w, g)

m = spmdsim.compile_for(jax.jit(step, donate_argnums=0), w, x, target="tpu-v5e:4x4")  # libtpu, in a subprocess
_, report = m.predict(model_flops_per_step=6 * 2 * 4096 * 16384 * 8192, tokens_per_step=8192)
h, xla = report["hlo"], {k: v / 2**20 for k, v in m.memory_analysis.items()}
axes = ", ".join(f"{a} {t * 1e3:.2f} ms" for a, t in report["totals"]["communication_seconds_by_axis"].items())
print(f"step {report['totals']['predicted_seconds'] * 1e3:.2f} ms, MFU {h['mfu']:.0%}, communication exposed "
      f"{h['exposed_comm_seconds'] * 1e3:.2f} ms (by axis: {axes})")
libtpu = sum(xla[f"{k}_size_in_bytes"] for k in ("argument", "output", "temp")) - xla["alias_size_in_bytes"]
print(f"memory per chip: spmdsim {h['peak_bytes'] / 2**20:.1f} MiB, libtpu {libtpu:.1f} MiB")
