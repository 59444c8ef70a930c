"""The differential suite's shared setup: JAX sees 64 host CPU devices (set before jax is imported), and every test
file reports how many cases it compared with each peer (pytest's summary, and $SPMDSIM_PEER_COUNTS/<file>.txt that
./test.sh prints)."""
import os

os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=64").strip()
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import pathlib  # noqa: E402

import peers  # noqa: E402


def pytest_terminal_summary(terminalreporter):
    if not peers.COUNTS:
        return
    lines = [f"{peer}: {n} cases compared" for peer, n in sorted(peers.COUNTS.items())]
    terminalreporter.write_sep("=", "cases per peer")
    for line in lines:
        terminalreporter.write_line(line)
    out = os.environ.get("SPMDSIM_PEER_COUNTS")
    if out:
        path = pathlib.Path(out)
        path.mkdir(parents=True, exist_ok=True)
        name = pathlib.Path(terminalreporter.config.args[0]).stem if terminalreporter.config.args else "peers"
        (path / f"{name}.txt").write_text("".join(f"{name}: {line}\n" for line in lines))
