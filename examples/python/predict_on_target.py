"""A JAX training step compiled for a TPU v5e 4x4 slice by libtpu, without one: the compiler's memory analysis."""
import jax, jax.numpy as jnp
from jax.sharding import NamedSharding, PartitionSpec as P
import spmdsim

mesh = spmdsim.target_mesh("tpu-v5e:4x4", data=4, model=4)  # 16 chips, as a jax.sharding.AbstractMesh
S = lambda shape, spec: jax.ShapeDtypeStruct(shape, jnp.bfloat16, sharding=NamedSharding(mesh, spec))
w = {"a": S((1024, 4096), P(None, "model")), "b": S((4096, 1024), P("model", None))}
x = S((256, 1024), P("data", None))

def step(w, x):  # one SGD step of a two-layer MLP, the weights donated
    g = jax.grad(lambda w: jnp.mean(jnp.square(jax.nn.relu(x @ w["a"]) @ w["b"])))(w)
    return jax.tree.map(lambda p, d: p - 1e-3 * d, w, g)

m = spmdsim.compile_for(jax.jit(step, donate_argnums=0), w, x, target="tpu-v5e:4x4")
for name in ("argument", "output", "alias", "temp", "generated_code"):
    print(f"{name:>14}: {m.memory_analysis[name + '_size_in_bytes']:>10,} B per chip")
print(f"compiled by libtpu {m.versions['libtpu']} in {m.compile_seconds:.1f} s; cache: {m.cache_path}")
assert m.memory_analysis["alias_size_in_bytes"] == 2 * 1024 * 4096 * 2 // 4  # w, donated, is updated in place
