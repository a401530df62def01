#!/usr/bin/env python3
"""bench/summarize.py: the median over several `allreduce_perf --compare`
launches of the same configuration, per size: busbw of ring, MPI, the
no-reduction limit and shm (in place), the ring/MPI ratio in place and out
of place, and shm over the limit and over the ring (in place), each with its
spread (min-max) across launches. The machines here vary
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
            if not fields or not fields[0].isdigit() or len(fields) < 17:
                continue
            num = [None if v == "n/a" else float(v) for v in fields[4:16]]
            rows[int(fields[0])] = {
                "ring": num[0], "mpi": num[1], "limit": num[2], "shm": num[3],
                "ratio_in": num[4], "shm_lim": num[6], "shm_ring": num[7],
                "ratio_out": num[11],
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
    print("# size (B) | busbw GB/s in place: ring mpi limit shm | "
          "ring/mpi in place | ring/mpi out of place | shm/limit | shm/ring")

    def spread(values):
        """median (min-max), or n/a where a launch had no figure."""
        if any(v is None for v in values):
            return "n/a"
        return f"{med(values):4.2f} ({min(values):.2f}-{max(values):.2f})"

    def busbw(values):
        return "  n/a" if any(v is None for v in values) else \
            f"{med(values):5.2f}"

    for s in sizes:
        col = {k: [r[s][k] for r in runs] for k in runs[0][s]}
        print(f"{s:>10} | " +
              " ".join(busbw(col[k]) for k in ("ring", "mpi", "limit", "shm")) +
              " | " + " | ".join(spread(col[k]) for k in
                                 ("ratio_in", "ratio_out", "shm_lim",
                                  "shm_ring")))


if __name__ == "__main__":
    main(sys.argv[1:])
