#!/usr/bin/env bash
# `pip install .` as a user does it, checked end to end: builds the wheel with pip (scikit-build-core, from the
# Python package index, runs CMake), installs it into a fresh virtual environment of /usr/bin/python3 (numpy from
# the index), then uses the module and the `spmdsim` command from there, not from the build tree.
#   wheel_test.sh SOURCE_DIR WORK_DIR CXX
# The wheel is built with the dev preset's compiler (CXX) and flags in build/wheel (beside build/dev) so that ccache
# serves the objects the dev build compiled (./test.sh sets CCACHE_NOHASHDIR and CCACHE_BASEDIR; ccache keys include
# the compiler's name, and scikit-build-core would otherwise pick Python's, x86_64-linux-gnu-g++); a user's
# `pip install .` builds Release with the default compiler.
set -euo pipefail
src="$1"; work="$2"; cxx="$3"
rm -rf "$work"; mkdir -p "$work"
# A build/wheel configured with another compiler is started afresh (CMake would refuse to switch in place).
cache="$src/build/wheel/CMakeCache.txt"
if [ -f "$cache" ] && ! grep -qx "CMAKE_CXX_COMPILER:FILEPATH=$cxx" "$cache"; then rm -rf "$src/build/wheel"; fi
export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$src}" CCACHE_NOHASHDIR="${CCACHE_NOHASHDIR:-1}"
# Under the C locale Python sets LC_CTYPE=C.UTF-8 for its children (PEP 538), and ccache keys include the locale:
# keep pip's compiler runs in the dev build's locale.
export PYTHONCOERCECLOCALE=0
/usr/bin/python3 -m venv "$work/venv"
cd "$work"
start=$SECONDS
"$work/venv/bin/python" -m pip wheel --quiet --no-deps --disable-pip-version-check -w "$work/dist" "$src" \
  --config-settings=build-dir="$src/build/wheel" --config-settings=cmake.build-type=RelWithDebInfo \
  "--config-settings=cmake.define.CMAKE_CXX_FLAGS_RELWITHDEBINFO=-O2 -g" \
  --config-settings=cmake.define.SPMDSIM_WERROR=ON --config-settings=cmake.define.CMAKE_CXX_COMPILER="$cxx" \
  >"$work/build.log" 2>&1 \
  || { tail -40 "$work/build.log"; echo "wheel_test: pip wheel failed (log: $work/build.log)"; exit 1; }
echo "wheel built in $((SECONDS - start)) s: $(ls "$work"/dist)"
"$work/venv/bin/python" -m pip install --quiet --disable-pip-version-check "$work"/dist/spmdsim-*.whl
env -u PYTHONPATH "$work/venv/bin/python" - <<'PY'
import sys
import spmdsim
assert spmdsim.__file__.startswith(sys.prefix), spmdsim.__file__
mesh = spmdsim.make_mesh((2, 4), ("data", "model"), topology=spmdsim.Topology("cpu:8"))
s = spmdsim.NamedSharding(mesh, spmdsim.P("data", None))
assert s.shard_shape((8, 4)) == (4, 4), s.shard_shape((8, 4))
print("module installed:", spmdsim.__file__)
PY
exe="$work/venv/bin/spmdsim"
[ -x "$exe" ] || { echo "wheel_test: the wheel installed no spmdsim command in $work/venv/bin"; exit 1; }
out="$(env -u PYTHONPATH PATH="$work/venv/bin:/usr/bin:/bin" spmdsim mesh --topology tpu-v4:2x2x2 --mesh data=2,model=4 --json)"
echo "$out" | "$work/venv/bin/python" -c 'import json, sys; j = json.load(sys.stdin); assert j["device_ids"] == [0, 2, 1, 3, 4, 6, 5, 7], j["device_ids"]; print("command installed:", sys.argv[1])' "$exe"
