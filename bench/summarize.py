#!/usr/bin/env python3
"""bench/summarize.py: the median over several `allreduce_perf --compare`
launches of the same configuration, per size: busbw of ring, MPI and the
no-reduction limit (in place), and the ring/MPI ratio in place and out of
place with its spread (min-max) across launches. The machines here vary
4-5x between launches, so one launch proves nothing; the median of
interleaved ratios does.

Usage: bench/summarize.py RUN.txt [RUN.txt ...]
"""
import statistics
import sys


def parse(path):
    """{size: columns} from the data rows of one --compare output."""
    rows = {}
    with open(path) as f:
        for line in f:
            fields = line.split()
            if not fields or not fields[0].isdigit() or len(fields) < 13:
                continue
            num = [None if v == "n/a" else float(v) for v in fields[4:12]]
            rows[int(fields[0])] = {
                "ring": num[0], "mpi": num[1], "limit": num[2],
                "ratio_in": num[3], "ratio_out": num[7],
            }
    return rows


def main(paths):
    if not paths:
        sys.exit(__doc__)
    runs = [parse(p) for p in paths]
    sizes = sorted(set.intersection(*(set(r) for r in runs)))
    if not sizes:
        sys.exit("summarize.py: no common sizes (not --compare output?)")
    med = statistics.median
    print(f"# {len(runs)} launches; medians; (min-max) across launches")
    print("# size (B) | busbw GB/s in place: ring mpi limit | "
          "ring/mpi in place | ring/mpi out of place")
    for s in sizes:
        col = {k: [r[s][k] for r in runs] for k in runs[0][s]}
        rin, rout = col["ratio_in"], col["ratio_out"]
        print(f"{s:>10} | {med(col['ring']):5.2f} {med(col['mpi']):5.2f} "
              f"{med(col['limit']):5.2f} | {med(rin):4.2f} "
              f"({min(rin):.2f}-{max(rin):.2f}) | {med(rout):4.2f} "
              f"({min(rout):.2f}-{max(rout):.2f})")


if __name__ == "__main__":
    main(sys.argv[1:])
