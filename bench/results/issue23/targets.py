#!/usr/bin/env python3
"""bench/results/issue23/targets.py OUT: issue 23's GPU targets, met or
missed, from what gpu_next.sh's comparisons wrote into OUT (ct512_cudnn.txt,
ct64.txt; bench/compare_torch.sh's tables): ours against torch at 1 rank,
batch 512 (>= 1.0x) and batch 64 (>= 0.8x), mlp and cnn, as the medians of
the paired ratios; and the 2-rank step on the shared GPU within 1.2x of
twice the 1-rank step, which is ours at 2 ranks >= 2 / (2 x 1.2) = 0.83x
ours at 1 rank in images/s (medians of the reps). A comparison that did
not run or did not finish is named as missing."""
import os
import re
import sys

ROW = re.compile(r"^\s+(mlp|cnn)\s+(\d+) \| (\d+) \(.*\| (\d+) \(.*\| "
                 r"([\d.]+) \(")


def table(path):
    """{(model, np): (ours, torch, ratio)} from a compare_torch output."""
    rows = {}
    try:
        with open(path) as f:
            for line in f:
                m = ROW.match(line)
                if m:
                    rows[(m.group(1), int(m.group(2)))] = (
                        float(m.group(3)), float(m.group(4)),
                        float(m.group(5)))
    except OSError:
        pass
    return rows


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    out = sys.argv[1]
    b512 = table(os.path.join(out, "ct512_cudnn.txt"))
    b64 = table(os.path.join(out, "ct64.txt"))
    checks = []
    for model in ("mlp", "cnn"):
        for name, rows, want in (("batch 512", b512, 1.0),
                                 ("batch 64", b64, 0.8)):
            row = rows.get((model, 1))
            checks.append(("%s %s, 1 rank, ours/torch >= %.2f" %
                           (model, name, want),
                           row and row[2], want))
        one, two = b64.get((model, 1)), b64.get((model, 2))
        checks.append(("%s batch 64, 2 ranks sharing the GPU, ours np2/np1 "
                       "images/s >= 0.83" % model,
                       one and two and two[0] / one[0], 2 / 2.4))
    for what, got, want in checks:
        verdict = ("missing" if got is None else
                   "met" if got >= want - 1e-9 else "MISSED")
        print("target %-70s %s%s" % (what + ":", "" if got is None else
                                     "%.2f " % got, verdict))


if __name__ == "__main__":
    main()
