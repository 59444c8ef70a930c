#!/usr/bin/env python3
"""Writes every shipped scenario's outputs in a form that two builds can be compared by: the --json report with
wall times and resident memory removed, and a digest of every file --dump writes.

  scripts/scenario-outputs.py BUILD/cli/spmdsim OUT_DIR        # writes OUT_DIR/<scenario>.json
  scripts/scenario-outputs.py --compare DIR_A DIR_B             # exit 1 and name each difference

Real scenarios run with data (and --dump); the large ones run --abstract, as in tests/scenarios/CMakeLists.txt.
Used to show that a restructuring leaves outputs unchanged (docs/testing.md, "Outputs unchanged").
"""
import hashlib
import json
import os
import pathlib
import re
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parent.parent
# Fields that measure this machine, not the simulation: they differ from run to run.
VOLATILE = re.compile(r"(^|_)wall(_|$)|peak_rss|^measured_|spmdsim_version")


def scenario_lists():
    text = (ROOT / "tests/scenarios/CMakeLists.txt").read_text()
    lists = {}
    for name in ("_spmdsim_scenarios", "_spmdsim_abstract_scenarios"):
        body = re.search(r"set\(" + name + r"\s+(.*?)\)", text, re.S).group(1)
        lists[name] = body.split()
    return lists["_spmdsim_scenarios"], lists["_spmdsim_abstract_scenarios"]


def strip_volatile(value):
    if isinstance(value, dict):
        return {k: strip_volatile(v) for k, v in value.items() if not VOLATILE.search(k)}
    if isinstance(value, list):
        return [strip_volatile(v) for v in value]
    return value


def run_one(spmdsim, name, abstract):
    with tempfile.TemporaryDirectory() as tmp:
        report, dump = os.path.join(tmp, "report.json"), os.path.join(tmp, "dump")
        # Run from the checkout's root with a relative path, so that reports of two checkouts compare.
        cmd = [os.path.abspath(spmdsim), "run", f"scenarios/{name}.yaml", "--quiet", "--json", report]
        cmd += ["--abstract"] if abstract else ["--dump", dump]
        proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
        out = {"exit_code": proc.returncode, "stderr": proc.stderr.strip()}
        if os.path.exists(report):
            out["report"] = strip_volatile(json.load(open(report)))
        digests = {}
        for path in sorted(pathlib.Path(dump).rglob("*")) if os.path.isdir(dump) else []:
            if path.is_file():
                digests[str(path.relative_to(dump))] = hashlib.sha256(path.read_bytes()).hexdigest()
        out["dump"] = digests
        return out


def write(spmdsim, out_dir):
    os.makedirs(out_dir, exist_ok=True)
    real, abstract = scenario_lists()
    for name, is_abstract in [(n, False) for n in real] + [(n, True) for n in abstract]:
        result = run_one(spmdsim, name, is_abstract)
        with open(os.path.join(out_dir, f"{name}.json"), "w") as f:
            json.dump(result, f, indent=1, sort_keys=True)
        print(f"{name}: exit {result['exit_code']}, {len(result['dump'])} dump files", flush=True)


def diff(a, b, path=""):
    if type(a) is not type(b):
        return [f"{path}: {a!r} vs {b!r}"]
    if isinstance(a, dict):
        out = []
        for k in sorted(set(a) | set(b)):
            if k not in a or k not in b:
                out.append(f"{path}.{k}: only in {'second' if k not in a else 'first'}")
            else:
                out += diff(a[k], b[k], f"{path}.{k}")
        return out
    if isinstance(a, list):
        if len(a) != len(b):
            return [f"{path}: length {len(a)} vs {len(b)}"]
        return [d for i, (x, y) in enumerate(zip(a, b)) for d in diff(x, y, f"{path}[{i}]")]
    return [] if a == b else [f"{path}: {a!r} vs {b!r}"]


def compare(dir_a, dir_b):
    names = sorted(set(os.listdir(dir_a)) | set(os.listdir(dir_b)))
    problems = 0
    for name in names:
        pa, pb = os.path.join(dir_a, name), os.path.join(dir_b, name)
        if not (os.path.exists(pa) and os.path.exists(pb)):
            print(f"{name}: present in one directory only")
            problems += 1
            continue
        found = diff(json.load(open(pa)), json.load(open(pb)))
        for d in found[:20]:
            print(f"{name}{d}")
        problems += len(found)
    print(f"{len(names)} scenarios compared, {problems} differences")
    return 1 if problems else 0


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--compare":
        sys.exit(compare(sys.argv[2], sys.argv[3]))
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    write(sys.argv[1], sys.argv[2])
