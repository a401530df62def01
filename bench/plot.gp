# bench/plot.gp: bus bandwidth against message size from the table that
# `allreduce_perf --compare` prints, one line each for our ring, the MPI
# library's MPI_Allreduce, "noreduce" (the same messages with no
# reduction: the limit for a ring on this machine) and our shared-memory
# allreduce. All in place.
#
# Usage: gnuplot -c bench/plot.gp IN.txt OUT.png [TITLE]   (or bench/plot.sh)
#
# Columns read (lines starting with '#' are comments to gnuplot):
#   1 size (B), 5 ring, 6 mpi, 7 noreduce, 8 shm: in-place busbw in GB/s.
# "n/a" (mpi for dtypes MPI lacks, such as half) is treated as missing.

if (ARGC < 2) {
    print "usage: gnuplot -c plot.gp IN.txt OUT.png [TITLE]"
    exit status 2
}
infile = ARG1
outfile = ARG2
plottitle = (ARGC >= 3) ? ARG3 : "allreduce busbw"

set terminal pngcairo size 1000,620 enhanced font "sans,11"
set output outfile
set datafile missing "n/a"

set title plottitle noenhanced
set xlabel "message size"
set ylabel "bus bandwidth (GB/s, in place)"
# Sizes step by a factor (-f): a log2 axis spaces them evenly. Tics at
# every power of 4, labelled in 1024-based units.
set logscale x 2
size_label(x) = x < 2**10 ? sprintf("%d B", x) : \
                x < 2**20 ? sprintf("%d KiB", x / 2**10) : \
                x < 2**30 ? sprintf("%d MiB", x / 2**20) : \
                sprintf("%d GiB", x / 2**30)
set xtics () nomirror
do for [e = 0:40:2] {
    set xtics add (size_label(2**e) 2**e)
}
set ytics nomirror
set yrange [0:*]
set grid xtics ytics lc rgb "#dddddd"
set key top left box opaque

plot infile using 1:5 with linespoints lw 2 pt 7 ps 0.8 lc rgb "#1f77b4" \
         title "ring (ours)", \
     infile using 1:6 with linespoints lw 2 pt 5 ps 0.8 lc rgb "#d62728" \
         title "MPI\\_Allreduce", \
     infile using 1:7 with lines lw 2 dt 2 lc rgb "#7f7f7f" \
         title "no reduction (limit)", \
     infile using 1:8 with linespoints lw 2 pt 9 ps 0.8 lc rgb "#2ca02c" \
         title "shm (ours, shared memory)"
