#!/usr/bin/env python3
"""Instructions per call of the runtime's and ShardMap's hot paths in two builds, under callgrind: runs each
build's shardmap_instruction_counts (bench/shardmap/instruction_counts.cc) and prints every case's count per call
and the ratio new/old. Counts do not depend on the machine's load, unlike wall times (docs/testing.md).

  scripts/instruction-counts.py OLD_BINARY NEW_BINARY
  (a binary: BUILD/bench/shardmap/shardmap_instruction_counts of a `bench` preset build)
"""
import pathlib
import re
import subprocess
import sys
import tempfile


def counts(binary):
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={tmp}/ic.%p", binary], check=True,
                       capture_output=True, text=True)
        out = subprocess.run([binary], capture_output=True, text=True, check=True).stdout
        calls = dict(re.findall(r"^(\S+): (\d+) calls$", out, re.M))
        result = {}
        for dump in pathlib.Path(tmp).glob("ic.*"):
            text = dump.read_text(errors="replace")
            case = re.search(r"^desc: Trigger: Client Request: (\S+)", text, re.M)
            total = re.search(r"^(?:totals|summary): (\d+)", text, re.M)
            if case and total and case.group(1) in calls:
                result[case.group(1)] = int(total.group(1)) / int(calls[case.group(1)])
        return result


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    old, new = counts(sys.argv[1]), counts(sys.argv[2])
    print(f"{'case':28} {'old instr/call':>16} {'new instr/call':>16} {'new/old':>8}")
    for case in sorted(old, key=list(old).index):
        if case in new:
            print(f"{case:28} {old[case]:16.0f} {new[case]:16.0f} {new[case] / old[case]:8.3f}")


if __name__ == "__main__":
    main()
