#!/usr/bin/env python3
"""Lists the functions longer than a limit (80 lines by default) in the given folders, longest first, with
Universal Ctags (Debian: universal-ctags), which finds every function definition and where it ends.

  scripts/long-functions.py sim scenario model          # exit 1 when a function is over 80 lines
  scripts/long-functions.py --max 60 shardmap
  (exit 77 when ctags is not installed)

A function's length counts its lines from the signature to the closing brace, comments and blank lines
included (docs/architecture.md: no function over ~80 lines).
"""
import argparse
import json
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent


def functions(folders):
    listed = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard", "--", *folders], cwd=ROOT, capture_output=True, text=True, check=True)
    files = sorted(f for f in set(listed.stdout.split()) if f.endswith((".h", ".cc")) and (ROOT / f).is_file())
    if not files:
        return []
    try:
        out = subprocess.run(["ctags", "--output-format=json", "--fields=+ne", "--kinds-C++=f", "--language-force=C++",
                              "-f", "-", *files], cwd=ROOT, capture_output=True, text=True, check=True)
    except FileNotFoundError:
        print("long-functions.py: needs Universal Ctags on PATH (Debian: apt-get install universal-ctags)",
              file=sys.stderr)
        sys.exit(77)  # what ctest reports as skipped (tests/rules/CMakeLists.txt: SKIP_RETURN_CODE 77)
    found = []
    for line in out.stdout.splitlines():
        tag = json.loads(line)
        if tag.get("_type") != "tag" or "end" not in tag:
            continue
        scope = tag.get("scope", "")
        name = f"{scope.split('::')[-1]}::{tag['name']}" if tag.get("scopeKind") in ("class", "struct") else tag["name"]
        found.append((tag["end"] - tag["line"] + 1, tag["path"], tag["line"], name))
    return found


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--max", type=int, default=80, help="the longest a function may be (lines)")
    parser.add_argument("folders", nargs="+")
    args = parser.parse_args()
    long = sorted((f for f in functions(args.folders) if f[0] > args.max), reverse=True)
    for lines, path, line, name in long:
        print(f"{lines:5} lines  {path}:{line}  {name}")
    print(f"{len(long)} functions over {args.max} lines in {', '.join(args.folders)}")
    return 1 if long else 0


if __name__ == "__main__":
    sys.exit(main())
