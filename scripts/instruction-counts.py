#!/usr/bin/env python3
"""Instructions per call of the runtime's and ShardMap's hot paths in two builds, under callgrind: runs each
build's shardmap_instruction_counts (bench/shardmap/instruction_counts.cc) and prints every case's count per call
and the ratio new/old. Counts do not depend on the machine's load, unlike wall times (docs/testing.md).

  scripts/instruction-counts.py OLD_BINARY NEW_BINARY [ROUNDS]
  (a binary: BUILD/bench/shardmap/shardmap_instruction_counts of a `bench` preset build)

Each binary runs ROUNDS times (default 3, alternating) and each case keeps its lowest count: the Run's thread
waits on a timed condition variable and malloc's behaviour depends on what ran before, which only ever add
instructions (a single run moved one case by 40%).
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


def lowest(runs):
    return {case: min(run[case] for run in runs if case in run) for case in runs[0]}


def main():
    if len(sys.argv) not in (3, 4):
        sys.exit(__doc__)
    rounds = int(sys.argv[3]) if len(sys.argv) == 4 else 3
    old_runs, new_runs = [], []
    for _ in range(rounds):
        old_runs.append(counts(sys.argv[1]))
        new_runs.append(counts(sys.argv[2]))
    old, new = lowest(old_runs), lowest(new_runs)
    print(f"{'case':28} {'old instr/call':>16} {'new instr/call':>16} {'new/old':>8}")
    for case in sorted(old, key=list(old).index):
        if case in new:
            print(f"{case:28} {old[case]:16.0f} {new[case]:16.0f} {new[case] / old[case]:8.3f}")


if __name__ == "__main__":
    main()
