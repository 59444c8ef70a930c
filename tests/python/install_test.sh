#!/usr/bin/env bash
# Installs the Python module into a fresh virtual environment without a package index, the way docs/python.md
# tells users to, and imports it from there (not from the build tree).
#   install_test.sh PYTHON BUILD_DIR WORK_DIR
set -euo pipefail
python="$1"; build="$2"; work="$3"
rm -rf "$work"
"$python" -m venv --system-site-packages "$work/venv"   # numpy and pytest from Debian, offline
cmake --install "$build" --component python --prefix "$work/venv" >/dev/null
cd "$work"
env -u PYTHONPATH "$work/venv/bin/python" - <<'PY'
import spmdsim, sys
assert spmdsim.__file__.startswith(sys.prefix), spmdsim.__file__
mesh = spmdsim.make_mesh((2, 4), ("data", "model"), topology=spmdsim.Topology("cpu:8"))
s = spmdsim.NamedSharding(mesh, spmdsim.P("data", None))
assert s.shard_shape((8, 4)) == (4, 4), s.shard_shape((8, 4))
# The subpackages and data files come along (spmdsim.models, the GPU target configurations of compile_for).
import os
package = os.path.dirname(spmdsim.__file__)
for f in ("_compile_worker.py", "models/decoder.py", "gpu_targets/h100_sxm.txtpb", "gpu_targets/b200.txtpb"):
    assert os.path.isfile(os.path.join(package, f)), f
assert spmdsim.resolve_target("dgx-h100:2").compiler_topology == {"topology": "1x2x8"}
print("installed:", spmdsim.__file__)
PY
