# spmdsim in one screen, from Python: a sharded matmul on a simulated 8-chip TPU v4 slice, checked against numpy.
import numpy as np
import spmdsim
from spmdsim import P

# 8 TPU v4 chips as a (data: 2, model: 4) mesh, in the device order JAX's mesh_utils would pick.
topology = spmdsim.Topology("tpu-v4:2x2x2")
mesh = spmdsim.Mesh(spmdsim.create_device_mesh((2, 4), topology.devices), ("data", "model"))
# x [4, 8] is split by rows over 'data' and by columns over 'model'; w [8, 2] by rows over 'model'.
# Each device multiplies its blocks; psum over 'model' adds the 4 partial products.
p = spmdsim.Program()
x, w = p.input("x"), p.input("w")
p.returns(p.psum(p.einsum("bd,df->bf", x, w), "model"))
matmul = spmdsim.ShardMap(p, mesh, in_specs=(P("data", "model"), P("model", None)), out_specs=P("data", None))
x_np, w_np = np.arange(32, dtype=np.float32).reshape(4, 8), np.ones((8, 2), np.float32)
y, prediction = matmul(x_np, w_np)  # row i of x @ ones sums 8i..8i+7: 64i + 28
print(f"{mesh} on devices {mesh.device_ids.tolist()}\ny = {y.tolist()}")
print(f"predicted {prediction['totals']['predicted_seconds'] * 1e6:.2f} us on {topology}")
raise SystemExit(0 if np.array_equal(y, x_np @ w_np) else 1)
