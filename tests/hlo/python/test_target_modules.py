"""What the parser and interpreter do with the text of XLA's TPU and GPU compiles, from Python: reduce-precision
(which TPU and GPU programs use to round to bf16 / fp8 ranges) computed bitwise as XLA does, and strings with bytes
that are not UTF-8 (a JAX name can hold any) reaching reports and JSON as valid UTF-8 (U+FFFD)."""
import json
import os
import subprocess

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import spmdsim

# Ties at the rounding bit, values just above and below them, the exponent range's edges, denormals, signed
# zeros, infinities and NaNs, then random values over many binades.
_SPECIAL = np.array([1.0, 1.00390625, 1.01171875, 1.0 + 2.0**-8 + 2.0**-20, -2.5, 3.4e38, -3.4e38, 65504.0, 65536.0,
                     2.0**-14, 2.0**-15, -(2.0**-15), 1e-40, -0.0, 0.0, np.inf, -np.inf, np.nan, 0.1, 1.0 / 3.0],
                    dtype=np.float32)


def _inputs(dtype):
    rng = np.random.default_rng(7)
    random = (rng.standard_normal(236) * np.exp2(rng.integers(-30, 30, 236))).astype(np.float32)
    return jnp.asarray(np.concatenate([_SPECIAL, random]), dtype=dtype)


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.bfloat16])
@pytest.mark.parametrize("exponent_bits,mantissa_bits", [(8, 7), (5, 10), (5, 2), (4, 3), (8, 0), (2, 1), (11, 52)])
def test_reduce_precision_is_bitwise_xlas(dtype, exponent_bits, mantissa_bits):
    x = _inputs(dtype)

    def f(v):
        return jax.lax.reduce_precision(v * 1, exponent_bits=exponent_bits, mantissa_bits=mantissa_bits)

    want = np.asarray(jax.jit(f)(x))
    got, _ = spmdsim.from_jax(jax.jit(f), x, topology="cpu:1")
    assert got.dtype == want.dtype
    bits = np.uint32 if want.dtype == np.float32 else np.uint16
    nan = np.isnan(want.astype(np.float32))
    np.testing.assert_array_equal(np.isnan(got.astype(np.float32)), nan)
    np.testing.assert_array_equal(got.view(bits)[~nan], want.view(bits)[~nan])


_NOT_UTF8 = (b"HloModule m\n\nENTRY %e (x: f32[4]) -> f32[4] {\n"
             b"  %x = f32[4]{0} parameter(0), metadata={op_name=\"x\"}\n"
             b"  ROOT %n = f32[4]{0} negate(%x), metadata={op_name=\"jit(f)/caf\xc3\xa9\xff\xfe/neg\"}\n}\n")


def test_names_that_are_not_utf8_reach_python_and_json_as_valid_utf8(tmp_path):
    _, report = spmdsim.run_hlo(_NOT_UTF8, topology="cpu:1", abstract=True)
    text = json.dumps(report, ensure_ascii=False)
    assert "jit(f)/caf\u00e9\ufffd\ufffd" in text
    cli = os.environ.get("SPMDSIM_CLI")
    if not cli:
        return
    (tmp_path / "m.txt").write_bytes(_NOT_UTF8)
    (tmp_path / "s.yaml").write_text("topology: {preset: 'cpu:1'}\nmesh: {axes: {data: 1}}\n"
                                     "workloads:\n  - kind: hlo\n    file: m.txt\n")
    out = subprocess.run([cli, "run", str(tmp_path / "s.yaml"), "--abstract", "--json", "-"], capture_output=True)
    assert out.returncode == 0, out.stderr.decode("utf-8", "replace")
    assert "caf\u00e9\ufffd\ufffd" in json.dumps(json.loads(out.stdout.decode("utf-8")), ensure_ascii=False)
