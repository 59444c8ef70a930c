#!/usr/bin/env python3
"""The include graph between the files of one library folder, by module (a module is a header and its source:
sim/array.h and sim/array.cc are `sim/array`), and the checks that keep it layered.

  scripts/include-graph.py sim            # prints each module's layer and what it includes; exit 1 on a cycle
  scripts/include-graph.py --internal     # exit 1 when a file includes another folder's internal/ header
                                          # (tests/<folder>/ and bench/<folder>/ count as <folder>)

A module may include only modules on lower layers: an include that closes a cycle (an upward include) is
reported with the cycle it closes.
"""
import pathlib
import re
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
SOURCE_SUFFIXES = (".h", ".cc")


def module_of(path):
    return str(pathlib.PurePosixPath(path).with_suffix(""))


def includes(path):
    return INCLUDE.findall((ROOT / path).read_text())


def graph(folder):
    listed = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard", "--", folder], cwd=ROOT, capture_output=True, text=True, check=True)
    # A file deleted from the work tree but not yet from the index is listed too: skip it.
    files = sorted(f for f in set(listed.stdout.split()) if f.endswith(SOURCE_SUFFIXES) and (ROOT / f).is_file())
    edges = {}
    for f in files:
        m = module_of(f)
        edges.setdefault(m, {})
        for inc in includes(f):
            if not inc.startswith(folder.rstrip("/") + "/"):
                continue
            target = module_of(inc)
            if target != m:
                edges[m].setdefault(target, []).append(f"{f} -> {inc}")
                edges.setdefault(target, {})
    return edges


def layers(edges):
    """Layer of each module: 0 for modules that include nothing inside the folder, else 1 + the highest layer
    they include. None for modules on a cycle."""
    layer, visiting = {}, set()

    def visit(m):
        if m in layer:
            return layer[m]
        if m in visiting:
            return None
        visiting.add(m)
        below = [visit(t) for t in edges[m]]
        visiting.discard(m)
        layer[m] = None if any(b is None for b in below) else 1 + max(below, default=-1)
        return layer[m]

    for m in sorted(edges):
        visit(m)
    return layer


def reaches(edges, start, goal):
    seen, stack = set(), [start]
    while stack:
        m = stack.pop()
        if m == goal:
            return True
        if m not in seen:
            seen.add(m)
            stack.extend(edges[m])
    return False


def check_folder(folder):
    edges = graph(folder)
    layer = layers(edges)
    upward = [(m, t, why) for m in sorted(edges) for t, why in sorted(edges[m].items()) if reaches(edges, t, m)]
    for m in sorted(edges, key=lambda m: (layer[m] is None, layer[m] or 0, m)):
        tag = "cycle" if layer[m] is None else f"layer {layer[m]}"
        print(f"{tag:>8}  {m}: {', '.join(sorted(edges[m])) or '-'}")
    for m, t, why in upward:
        print(f"upward include: {m} -> {t} ({'; '.join(why)})")
    print(f"{len(edges)} modules, {sum(len(e) for e in edges.values())} include edges, {len(upward)} upward")
    return 1 if upward else 0


def check_internal():
    bad = []
    listed = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard", "*.h", "*.cc"], cwd=ROOT, capture_output=True, text=True, check=True)
    for name in sorted(set(listed.stdout.split())):
        if not (ROOT / name).is_file():
            continue
        rel = pathlib.PurePosixPath(name)
        for inc in includes(rel):
            parts = pathlib.PurePosixPath(inc).parts
            # tests/<folder>/ and bench/<folder>/ are white-box tests of <folder>.
            owner = rel.parts[1] if rel.parts[0] in ("tests", "bench") and len(rel.parts) > 2 else rel.parts[0]
            if "internal" in parts and parts[0] != owner:
                bad.append(f"{rel} includes {inc}")
    print("\n".join(bad) or "no file includes another folder's internal/ header")
    return 1 if bad else 0


if __name__ == "__main__":
    if sys.argv[1:] == ["--internal"]:
        sys.exit(check_internal())
    sys.exit(max(check_folder(f) for f in (sys.argv[1:] or ["sim"])))
