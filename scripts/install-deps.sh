#!/usr/bin/env bash
# Installs the Debian packages spmdsim builds with, if any is missing. Safe to run again: with everything
# present it only checks (dpkg -s) and prints nothing.
#   scripts/install-deps.sh                 what building and running need
#   scripts/install-deps.sh --test-tools    also the optional test and measurement tools (./test.sh passes it):
#                                           chromium, for the HTML report's headless-browser test (skipped without
#                                           it); valgrind, for the instruction counts (docs/testing.md);
#                                           universal-ctags, for scripts/long-functions.py
set -euo pipefail
packages=(
  build-essential cmake ninja-build ccache pkg-config
  libtbb-dev libboost-dev libboost-context-dev libboost-regex-dev libeigen3-dev
  libfmt-dev nlohmann-json3-dev libyaml-cpp-dev libcli11-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  pybind11-dev python3-dev python3-numpy python3-pytest python3-venv
  libopenmpi-dev openmpi-bin
)
optional=()
[ "${1:-}" = "--test-tools" ] && optional=(chromium valgrind universal-ctags)
missing=()
for p in "${packages[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
optional_missing=()
for p in "${optional[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || optional_missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && [ ${#optional_missing[@]} -eq 0 ] && exit 0
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
# Installing ca-certificates (pulled in by the packages above) regenerates /etc/ssl/certs/ca-certificates.crt from
# Debian's list. A bundle that was there before the package (a site's own CA, e.g. behind a TLS-inspecting proxy)
# would be lost, and with it the Python package index that scripts/python-env.sh needs: keep it as a local CA.
bundle=/etc/ssl/certs/ca-certificates.crt
if ! dpkg -s ca-certificates >/dev/null 2>&1 && [ -s "$bundle" ]; then
  $sudo mkdir -p /usr/local/share/ca-certificates
  $sudo cp "$bundle" /usr/local/share/ca-certificates/preinstalled-bundle.crt
fi
$sudo apt-get update -qq
if [ ${#missing[@]} -gt 0 ]; then
  echo "install-deps: installing ${missing[*]}" >&2
  $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
fi
for p in "${optional_missing[@]}"; do  # one at a time: a tool the mirror lacks does not keep the others out
  echo "install-deps: installing the optional tool $p" >&2
  $sudo apt-get install -y -qq --no-install-recommends "$p" >&2 ||
    echo "install-deps: could not install $p; what needs it is skipped (see the usage above)" >&2
done
