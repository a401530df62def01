#!/usr/bin/env python3
"""bench/timeline_phases.py TRACE [SKIP]: where an HVD_TIMELINE trace's
time went, phase by phase (NEGOTIATE, QUEUE, MEMCPY_IN_FUSION_BUFFER,
SHM_ALLREDUCE, ...): how many times each ran, and the median, 90th
percentile and total of its durations in microseconds. A fused group
writes one event per tensor with the same start and length; it counts
once. A device group's phases as the device ran them (the lane
"device", tid 1) are named with " (device)"; the others are the host's. SKIP (default 0) drops the events that start in the first SKIP
seconds (warm-up). The trace may be cut short (a run killed before
hvd_shutdown): complete lines are read."""
import json
import statistics
import sys


def events(path):
    with open(path) as f:
        for line in f:
            line = line.strip().rstrip(",")
            if not line.startswith("{"):
                continue
            try:
                yield json.loads(line)
            except ValueError:
                continue  # the last line of a trace cut short


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    skip_us = float(sys.argv[2]) * 1e6 if len(sys.argv) == 3 else 0.0
    groups = {}
    for e in events(sys.argv[1]):
        if e.get("ph") != "X" or e.get("ts", 0) < skip_us:
            continue
        name = e["name"] + (" (device)" if e.get("tid") == 1 else "")
        groups.setdefault(name, set()).add((e["ts"], e["dur"]))
    if not groups:
        sys.exit("%s: no events" % sys.argv[1])
    print("%-34s %7s %10s %10s %12s" % ("phase", "count", "median_us",
                                        "p90_us", "total_us"))
    for name in sorted(groups, key=lambda n: -sum(d for _, d in groups[n])):
        durs = sorted(d for _, d in groups[name])
        p90 = durs[min(len(durs) - 1, int(0.9 * len(durs)))]
        print("%-34s %7d %10.1f %10.1f %12.0f" % (
            name, len(durs), statistics.median(durs), p90, sum(durs)))


if __name__ == "__main__":
    main()
