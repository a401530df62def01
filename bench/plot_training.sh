#!/bin/sh
# bench/plot_training.sh: loss and accuracy per epoch from training logs, as
# a PNG with two panels: train and test loss (left), test accuracy (right).
# Reads the lines that examples/train_fmnist and bench/torch_fmnist.py print
# after each epoch,
#   epoch E/N  train_loss L  test_loss L  test_acc A  (...)  time T s  X images/s
# (progress-bar carriage returns and the rest of the log are skipped). Give
# several logs to draw them on the same axes, such as ours and PyTorch's from
# bench/compare_torch.sh --epochs E; each is labelled from its first line
# ("ours mlp, 2 ranks" / "torch mlp, 2 ranks") or, failing that, its name.
# Needs gnuplot with the pngcairo terminal (gnuplot-nox), like bench/plot.sh.
#
# Usage: bench/plot_training.sh LOG [LOG...] OUT.png
#   TITLE="..." sets the title (default: from the first log's first line).
# Example:
#   mpirun --allow-run-as-root --oversubscribe --bind-to none -np 2 \
#       examples/train_fmnist --model mlp --epochs 5 --progress lines > log.txt
#   bench/plot_training.sh log.txt training.png
set -eu

if [ $# -lt 2 ]; then
    echo "usage: $0 LOG [LOG...] OUT.png   (LOG: train_fmnist or torch_fmnist.py output)" >&2
    exit 2
fi
# The last argument is the PNG.
for out; do :; done
case $out in
    *.png|*.PNG) ;;
    *) echo "$0: the last argument, \"$out\", should be the .png to write" >&2; exit 2 ;;
esac

tmp=$(mktemp -d "${TMPDIR:-/tmp}/plot_training.XXXXXX")
trap 'rm -rf "$tmp"' EXIT INT TERM

# Per log: $tmp/N.dat (epoch train_loss test_loss test_acc) and its label.
plots_loss=
plots_acc=
i=0
title_default=
colors="#1f77b4 #d62728 #2ca02c #ff7f0e #9467bd #8c564b"
while [ $# -gt 1 ]; do
    log=$1
    shift
    if [ ! -r "$log" ]; then
        echo "$0: cannot read $log" >&2
        exit 1
    fi
    i=$((i + 1))
    dat=$tmp/$i.dat
    # Strip progress-bar carriage returns and "erase line" escapes.
    tr '\r' '\n' < "$log" | sed 's/\x1b\[K//g' | awk '
        /^epoch [0-9]+\/[0-9]+ / {
            split($2, e, "/"); tl = ""; vl = ""; acc = ""
            for (k = 3; k < NF; k++) {
                if ($k == "train_loss") tl = $(k + 1)
                if ($k == "test_loss") vl = $(k + 1)
                if ($k == "test_acc") acc = $(k + 1)
            }
            if (tl != "" && vl != "" && acc != "") print e[1], tl, vl, acc
        }' > "$dat"
    if [ ! -s "$dat" ]; then
        echo "$0: $log has no \"epoch E/N  train_loss ...  test_loss ...  test_acc ...\" lines" >&2
        exit 1
    fi
    # Label from the header: "train_fmnist: mlp, 235146 parameters, 2 ranks, ..."
    label=$(tr '\r' '\n' < "$log" | sed -n \
        's/^\(train_fmnist\|torch_fmnist\): \([a-z0-9]*\), [0-9]* parameters, \([0-9]* ranks*\), batch \([0-9]*\) per rank.*/\1 \2, \3, batch \4/p' |
        head -n 1 | sed 's/^train_fmnist/ours/; s/^torch_fmnist/torch/')
    [ -n "$label" ] || label=$(basename "$log")
    [ -n "$title_default" ] || title_default=$label
    # Quote for gnuplot (double-quoted string): escape backslashes and quotes.
    qlabel=$(printf '%s' "$label" | sed 's/\\/\\\\/g; s/"/\\"/g')
    color=$(echo "$colors" | cut -d' ' -f$(( (i - 1) % 6 + 1 )))
    sep=
    [ -z "$plots_loss" ] || sep=", "
    plots_loss="$plots_loss$sep\"$dat\" using 1:2 with linespoints lw 2 pt 7 ps 0.8 lc rgb \"$color\" title \"$qlabel train\" noenhanced, \"$dat\" using 1:3 with linespoints lw 2 dt 2 pt 5 ps 0.8 lc rgb \"$color\" title \"$qlabel test\" noenhanced"
    plots_acc="$plots_acc$sep\"$dat\" using 1:4 with linespoints lw 2 pt 7 ps 0.8 lc rgb \"$color\" title \"$qlabel\" noenhanced"
done
if [ $i -eq 1 ]; then
    title=${TITLE:-"training: $title_default"}
else
    title=${TITLE:-"training: $i runs"}
fi
# Integer epochs on the x axis, at most about 10 tics.
max_epoch=$(cat "$tmp"/*.dat | awk '$1 > m { m = $1 } END { print m + 0 }')
xstep=$(( (max_epoch + 9) / 10 ))
[ "$xstep" -ge 1 ] || xstep=1
qtitle=$(printf '%s' "$title" | sed 's/\\/\\\\/g; s/"/\\"/g')
qout=$(printf '%s' "$out" | sed 's/\\/\\\\/g; s/"/\\"/g')

cat > "$tmp/plot.gp" <<EOF
set terminal pngcairo size 1200,520 enhanced font "sans,11"
set output "$qout"
set multiplot layout 1,2 title "$qtitle" noenhanced
unset xlabel
set xtics $xstep nomirror
set ytics nomirror
set grid xtics ytics lc rgb "#dddddd"
set key below box

set title "loss (softmax cross-entropy) per epoch"
set ylabel "loss"
set yrange [0:*]
plot $plots_loss

set title "test accuracy per epoch"
set ylabel "accuracy"
set yrange [*:*]
plot $plots_acc
unset multiplot
EOF
# Last: what was wrong with the arguments or inputs is said first.
if ! command -v gnuplot >/dev/null 2>&1; then
    echo "$0: gnuplot not found; install gnuplot-nox" >&2
    exit 1
fi
gnuplot "$tmp/plot.gp"
echo "$0: wrote $out ($i log$( [ $i -eq 1 ] || echo s))"
