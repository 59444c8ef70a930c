#!/usr/bin/env bash
# scripts/python-env.sh without a reachable package index: it must fail (exit 1) and say so in one line on stderr,
# never leave a half-made environment that a later run would take for a good one.
#   env_offline_test.sh SOURCE_DIR WORK_DIR
set -uo pipefail
src="$1"; work="$2"
rm -rf "$work"; mkdir -p "$work"
# An index on a closed local port, no configuration files, no retries: pip cannot get anything.
err="$(env PIP_CONFIG_FILE=/dev/null PIP_INDEX_URL=http://127.0.0.1:9/simple PIP_FIND_LINKS= PIP_EXTRA_INDEX_URL= \
        PIP_RETRIES=0 PIP_TIMEOUT=2 bash "$src/scripts/python-env.sh" "$work/venv" 2>&1 >/dev/null)"
rc=$?
lines="$(printf '%s\n' "$err" | grep -c .)"
echo "exit $rc; stderr: $err"
[ "$rc" -eq 1 ] || { echo "FAIL: expected exit 1"; exit 1; }
# The script announces what it makes, then one line saying why it failed.
printf '%s\n' "$err" | tail -1 | grep -q "cannot install python/requirements-test.txt from the Python package index" \
  || { echo "FAIL: the last line does not say the index could not be used"; exit 1; }
[ "$lines" -le 2 ] || { echo "FAIL: $lines lines on stderr"; exit 1; }
[ ! -e "$work/venv" ] || { echo "FAIL: a half-made environment was left at $work/venv"; exit 1; }
echo "ok"
