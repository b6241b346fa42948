# Renders the CSV of twheel_bench into one PNG: ns/op against N (log-log),
# one panel per workload, one line per structure; then the tick latency's
# tail (microseconds per tick), one panel per input.
#
#   gnuplot -e "csv='build/bench/results.csv'; out='bench.png'" bench/plot.gp
#
# Needs gnuplot with the pngcairo terminal (Debian: gnuplot-nox) and awk.

if (!exists("csv")) csv = "results.csv"
if (!exists("out")) out = "bench.png"

set terminal pngcairo size 2700,900 noenhanced font ",10"
set output out
set datafile separator whitespace

# rows "n median" of one structure and workload, sorted by n
rows(s, w) = sprintf("< awk -F, '$1==\"%s\" && $3==\"%s\" && $2>0 {print $2, $5}' '%s' | sort -n", s, w, csv)

all = "twheel twheel-none heap_binary heap_quad tree_map skynet timeout_wheel"
mt = "twheel twheel-spin twheel-mutex skynet"
color(s) = s eq "twheel" ? 1 : s eq "twheel-none" ? 2 : s eq "heap_binary" ? 3 : \
           s eq "heap_quad" ? 4 : s eq "tree_map" ? 5 : s eq "skynet" ? 6 : \
           s eq "twheel-spin" ? 3 : s eq "timeout_wheel" ? 8 : 7
width(s) = s eq "twheel" ? 3 : 1.5

set style line 1 lc rgb "#d62728" pt 7
set style line 2 lc rgb "#ff9896" pt 6
set style line 3 lc rgb "#1f77b4" pt 5
set style line 4 lc rgb "#17becf" pt 4
set style line 5 lc rgb "#2ca02c" pt 9
set style line 6 lc rgb "#7f7f7f" pt 11
set style line 7 lc rgb "#9467bd" pt 13
set style line 8 lc rgb "#ff7f0e" pt 3

set logscale xy
set grid xtics ytics mxtics mytics lc rgb "#dddddd"
set xlabel "N (live timers)"
set format x "%.0s%c"
set key top left box opaque font ",9"

set multiplot layout 2,6 title sprintf("twheel_bench: %s (median ns per operation, tick latency in us per tick; lower is better)", csv)

names = "add cancel expire next_expiry far_next_expiry reschedule heartbeat far_loop contended bytes_per_timer"
titles = "add|cancel (half of N)|expire (per timer fired, tick by tick)|next-expiry query|next-expiry, all timers 30-60k ticks away|reschedule|heartbeat (add, 20 reschedules, cancel)|loop turn (advance 1 + next-expiry), far timers|contended (4 threads add/cancel, 1 drives)|bytes per live timer"

do for [i = 1:words(names)] {
    w = word(names, i)
    # the i-th |-separated title
    t = titles
    do for [k = 1:i-1] { t = t[strstrt(t, "|") + 1:] }
    if (strstrt(t, "|") > 0) { t = t[1:strstrt(t, "|") - 1] }
    set title t
    set ylabel (w eq "bytes_per_timer" ? "bytes" : "ns/op")
    list = (w eq "contended") ? mt : all
    plot for [j = 1:words(list)] rows(word(list, j), w) using 1:2 \
        with linespoints ls color(word(list, j)) lw width(word(list, j)) \
        title word(list, j)
}

# Tick latency (workload_tick.hpp): the worst tick (solid) and p99.9
# (dashed) of the per-tick minima; at 10M only the structures that run there.
do for [input in "far uniform"] {
    set title sprintf("tick latency, %s: worst (solid), p99.9 (dashed)", input)
    set ylabel "us per tick"
    plot for [j = 1:words(all)] rows(word(all, j), "tick_".input."_worst") using 1:2 \
        with linespoints ls color(word(all, j)) lw width(word(all, j)) \
        title word(all, j), \
        for [j = 1:words(all)] rows(word(all, j), "tick_".input."_p999") using 1:2 \
        with linespoints ls color(word(all, j)) dt 2 lw 1 notitle
}
unset multiplot
