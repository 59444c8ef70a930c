# Run your JAX program on a simulated TPU v5e slice: spmdsim runs the module XLA compiled and predicts its time.
import os
os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=8"  # 8 CPU devices for JAX to compile for
import jax, numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
import spmdsim

mesh = Mesh(np.array(jax.devices()).reshape(2, 4), ("data", "model"))
rng = np.random.default_rng(0)
x = jax.device_put(rng.random((16, 512)).astype(np.float32), NamedSharding(mesh, P("data", None)))
w = jax.device_put(rng.random((512, 1024)).astype(np.float32), NamedSharding(mesh, P(None, "model")))
layer = jax.jit(lambda x, w: jax.nn.gelu(x @ w).sum(axis=0))

y, report = spmdsim.from_jax(layer, x, w, topology="tpu-v5e:2x4")  # XLA's module, run on 8 simulated v5e chips
want = np.asarray(layer(x, w))                                       # JAX's own result, for comparison
print(f"largest relative difference from JAX: {np.max(np.abs(y - want) / np.abs(want)):.1e}")
print(f"predicted {report['totals']['predicted_seconds'] * 1e6:.2f} us per call on tpu-v5e:2x4, "
      f"{report['hlo']['peak_bytes'] / 2**10:.0f} KiB per chip")
raise SystemExit(0 if np.allclose(y, want, rtol=1e-5) else 1)
