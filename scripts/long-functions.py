#!/usr/bin/env python3
"""Lists the functions longer than a limit in C++ sources (a heuristic reader: a definition is a line ending in
'{' after a parameter list, not a control statement; its length runs to the matching brace).

  scripts/long-functions.py [--max 80] sim scenario model      # exit 1 when one is longer
"""
import argparse
import pathlib
import re
import sys

CONTROL = re.compile(r"^\s*(if|for|while|switch|else|do|namespace|class|struct|enum|union|try|catch)\b|^\s*\}\s*(else|catch)\b")


def strip(line):
    line = re.sub(r'"(\\.|[^"\\])*"', '""', line)
    line = re.sub(r"'(\\.|[^'\\])*'", "''", line)
    return line.split("//")[0]


def functions(path):
    lines = [strip(l.rstrip("\n")) for l in path.read_text(errors="replace").splitlines()]
    i = 0
    while i < len(lines):
        code = lines[i]
        if code.rstrip().endswith("{") and not CONTROL.search(code) and "=" not in code.split("(")[0]:
            # the signature: this line and the ones above it up to a blank line or ';' / '}' / '{'
            sig, j = code, i
            while ")" not in sig and j > 0 and lines[j - 1].strip() and not lines[j - 1].rstrip().endswith((";", "}", "{")):
                j -= 1
                sig = lines[j] + " " + sig
            if "(" in sig and ")" in sig and "[" not in sig.split("(")[0] and not CONTROL.search(sig):
                depth, k = 0, i
                while k < len(lines):
                    depth += lines[k].count("{") - lines[k].count("}")
                    if depth <= 0:
                        break
                    k += 1
                name = re.findall(r"([\w:~]+)\s*\(", sig)
                yield (name[0] if name else "?"), j + 1, k - j + 1
                i = k
        i += 1


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--max", type=int, default=80)
    ap.add_argument("folders", nargs="+")
    args = ap.parse_args()
    over = 0
    for folder in args.folders:
        for path in sorted(pathlib.Path(folder).rglob("*")):
            if path.suffix not in (".cc", ".h"):
                continue
            for name, line, length in functions(path):
                if length > args.max:
                    print(f"{path}:{line}: {name}: {length} lines")
                    over += 1
    print(f"{over} function(s) over {args.max} lines")
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main())
