"""The JAX-comparing tests of the HLO importer (docs/hlo.md): real JAX compiles each program for 8 host CPU
devices, spmdsim runs the compiled module on its virtual devices, and the outputs are compared with JAX's own."""
import os

# 8 host CPU devices for JAX; set before jax is imported anywhere in the session.
os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=8").strip()
os.environ.setdefault("JAX_PLATFORMS", "cpu")
