#!/usr/bin/env python
"""Where a profiled ansible-playbook run spent its CPU: sums py-spy's raw folded stacks.

Record: py-spy record --subprocesses --format raw --output FILE -- ansible-playbook ... (bench/ssh_rerun_cost.py
--keep prints the environment of a rerun by hand). Prints the share of samples per process kind (the main process,
the task workers), then the functions with the largest inclusive share (each counted once per stack) and self share.
Usage: .venv/bin/python bench/pyspy_summary.py FILE [--top N] [--match TEXT]
"""
from __future__ import annotations

import argparse
import collections
import re

FRAME = re.compile(r"^(?P<name>.*?) \((?P<file>[^()]*?)(?::\d+)?\)$")


def frames(stack):
    """The stack's frames as 'function (file)', line numbers and site-packages prefixes left out, outermost first."""
    out = []
    for frame in stack.split(";"):
        match = FRAME.match(frame.strip())
        if match:
            out.append("%s (%s)" % (match.group("name"), match.group("file").rsplit("/site-packages/", 1)[-1]))
        else:
            out.append(frame.strip())
    return out


def process_kind(names):
    if any("executor/process/worker.py" in name for name in names):
        return "task worker"
    return "main process"


def summarise(path, top, match=None):
    inclusive, selfs, kinds = collections.Counter(), collections.Counter(), collections.Counter()
    total = 0
    with open(path) as handle:
        for line in handle:
            stack, dummy, count = line.rstrip("\n").rpartition(" ")
            if not count.isdigit() or (match and match not in stack):
                continue
            total += int(count)
            names = frames(stack)
            kinds[process_kind(names)] += int(count)
            for name in set(names[1:]):
                inclusive[name] += int(count)
            selfs[names[-1]] += int(count)
    print("%d samples%s" % (total, " matching %r" % match if match else ""))
    for kind, count in kinds.most_common():
        print("  %-14s %5.1f %%" % (kind, 100.0 * count / total))
    for title, counter in (("inclusive", inclusive), ("self", selfs)):
        print(title + ":")
        for name, count in counter.most_common(top):
            print("  %5.1f %%  %s" % (100.0 * count / total, name))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("file")
    parser.add_argument("--top", type=int, default=40)
    parser.add_argument("--match")
    args = parser.parse_args()
    summarise(args.file, args.top, args.match)


if __name__ == "__main__":
    main()
