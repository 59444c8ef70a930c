#!/usr/bin/env python3
"""Lists the lines of the C++ sources (.h, .cc) longer than a limit: 120 columns by default, the ColumnLimit of
.clang-format (docs/architecture.md, "Names and includes").

  scripts/long-lines.py                           # every C++ source in the checkout; exit 1 when a line is over 120
  scripts/long-lines.py sim scenario              # only these folders (or files)
  scripts/long-lines.py --skip hlo/ --skip x.cc   # leave these paths out (prefixes); their count is still printed

A line's length is its characters (code points, as editors count columns), without the line break. Lines wholly
inside a raw string literal R"(...)" are test data (an HLO module's text) and are not counted. To wrap a
line: by hand, or `clang-format -i --lines=N:N FILE` (the style of .clang-format, on that statement only).
"""
import argparse
import pathlib
import re
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent


def sources(paths):
    listed = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard", "--", *paths], cwd=ROOT,
                            capture_output=True, text=True, check=True)
    return sorted(f for f in set(listed.stdout.split()) if f.endswith((".h", ".cc")) and (ROOT / f).is_file())


RAW_OPEN = re.compile(r'R"([^()\\ ]{0,16})\(')


def raw_string_lines(text):
    """Line numbers (1-based) of a C++ raw string literal R"delim( ... )delim" that spans lines, but its last: test
    data such as an HLO module's text, whose lines are what they are (the rule is about code)."""
    inside, at, line = set(), 0, 1
    while True:
        m = RAW_OPEN.search(text, at)
        if not m:
            return inside
        close = text.find(")" + m.group(1) + '"', m.end())
        if close < 0:
            return inside
        first = text.count("\n", 0, m.end()) + 1
        last = text.count("\n", 0, close) + 1
        if last > first:  # the opening line (its data runs to the line's end) and the lines up to the closing one
            inside.update(range(first, last))
        at = close + 1


def long_lines(path, limit):
    text = (ROOT / path).read_text(encoding="utf-8")
    exempt = raw_string_lines(text)
    return [(n, len(line)) for n, line in enumerate(text.splitlines(), 1) if len(line) > limit and n not in exempt]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--max", type=int, default=120, help="the longest a line may be (characters)")
    parser.add_argument("--skip", action="append", default=[], help="a path prefix to leave out (repeatable)")
    parser.add_argument("paths", nargs="*")
    args = parser.parse_args()
    found, skipped = 0, 0
    for path in sources(args.paths):
        lines = long_lines(path, args.max)
        if any(path.startswith(prefix) for prefix in args.skip):
            skipped += len(lines)
            continue
        for n, length in lines:
            print(f"{path}:{n}: {length} characters")
        found += len(lines)
    where = ", ".join(args.paths) or "the C++ sources"
    note = f" ({skipped} more in the skipped paths: {', '.join(args.skip)})" if args.skip else ""
    print(f"{found} lines over {args.max} characters in {where}{note}")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
