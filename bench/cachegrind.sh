#!/usr/bin/env bash
# Deterministic counts per operation: instructions (Ir) and simulated
# last-level data misses (DLmr + DLmw), for every structure and workload of
# `twheel_bench --count`, under cachegrind. Timings on a small shared machine
# move by tens of percent from run to run; these counts do not. twheel
# structures get one more row, add_clock (add on a TW_DRIVE_CLOCK wheel):
# valgrind hides the vDSO, so its clock_gettime is a system call whose
# kernel side is not counted; against add, it shows twheel's code around
# the read, not the read (see bench/README.md). The idle_timeout row is per
# step of the idle timeout workload: 17 000 ticks of packets after its
# setup (17M at N = 1M), past the first 16 384-tick boundary.
#
#   bench/cachegrind.sh BUILD_DIR [N] [STRUCTURE,...]
#   bench/cachegrind.sh --tick BUILD_DIR N K [STRUCTURE] [far|uniform]
#
# --tick: one tick of the tick latency drive (workload_tick.hpp), tick K
# alone, for one structure (default twheel) and input (default far): its
# instructions, last-level data misses and the timers it fired. K is
# typically the "at tick" column of the tick latency table.
#
# BUILD_DIR holds a release build (meson setup BUILD_DIR --buildtype=release).
# N defaults to 1000000, the structures to all the program has
# (twheel_bench --list). The caches are fixed rather than read from this
# CPU, so the counts compare across machines: L1 32 KiB 8-way, last level
# 8 MiB 16-way (a server core's share), 64-byte lines.
#
# cachegrind 3.19 counts a whole process, so each stage is measured as the
# difference between the run that stops after it and the run that stops
# after the stage before (same input, same code up to there). A stage that
# misses less than nothing (two runs' layouts differ by a line or two) is
# shown as 0.
set -euo pipefail

usage="usage: bench/cachegrind.sh BUILD_DIR [N] [STRUCTURE,...]
       bench/cachegrind.sh --tick BUILD_DIR N K [STRUCTURE] [far|uniform]"
tick=
if [[ ${1:-} == --tick ]]; then
    tick=yes
    shift
fi
build=${1:?$usage}
n=${2:-1000000}
bench=$build/bench/twheel_bench
[[ -x $bench ]] || { echo "no $bench: build the bench first" >&2; exit 1; }
command -v valgrind >/dev/null || { echo "valgrind is not installed" >&2; exit 1; }

stages=(start add next_expiry cancel reschedule expire far_setup far_next_expiry far_churn churn_next_expiry hb_setup heartbeat)
reported=(add next_expiry cancel reschedule expire far_next_expiry churn_next_expiry heartbeat add_clock idle_timeout)
# twheel only: add once more on a TW_DRIVE_CLOCK wheel (a clock read per add)
clock_stages=(clock_setup add_clock)
# the idle timeout: its setup, then a fixed number of steps (per step); these
# two runs start afresh, not after the stages above
idle_stages=(idle_setup idle_timeout)
work=$(mktemp -d "${TMPDIR:-/tmp}/twheel-cachegrind-XXXXXX")
trap 'rm -rf "$work"' EXIT

# Runs the bench up to stage $2 for structure $1; prints "ops Ir DLmiss".
measure() {
    local out=$work/$1.$2
    valgrind --tool=cachegrind --cache-sim=yes \
        --I1=32768,8,64 --D1=32768,8,64 --LL=8388608,16,64 \
        --cachegrind-out-file="$out.cg" \
        "$bench" --count "$2" --n "$n" --only "$1" >"$out.txt" 2>"$out.log" ||
        { echo "valgrind failed for $1 $2: see below" >&2; cat "$out.log" >&2; exit 1; }
    local ops
    ops=$(awk '$1 == "count" {print $4}' "$out.txt")
    # events: Ir I1mr ILmr Dr D1mr DLmr Dw D1mw DLmw
    awk -v ops="$ops" '/^summary:/ {print ops, $2, $7 + $10}' "$out.cg"
}

if [[ -n $tick ]]; then
    k=${3:?$usage}
    s=${4:-twheel}
    input=${5:-far}
    case $input in
        far) stage=tick ;;
        uniform) stage=tick_uniform ;;
        *) echo "$usage" >&2; exit 2 ;;
    esac
    [[ $k =~ ^[0-9]+$ ]] && ((k >= 1)) || { echo "K: a tick, 1 or more" >&2; exit 2; }
    # "ops" of a tick stage: the timers fired so far
    read -r o0 i0 m0 < <(measure "$s" "$stage:$((k - 1))")
    read -r o1 i1 m1 < <(measure "$s" "$stage:$k")
    printf '%s\n' "cachegrind, N = $n, $input timers, $s: tick $k alone (the run to tick $k minus the run to tick $((k - 1)))"
    printf '%-28s %14s\n' Ir "$((i1 - i0))" "LL data misses (DLmr+DLmw)" "$((m1 - m0))" \
        "timers fired" "$((o1 - o0))"
    exit 0
fi

structures=${3:-$("$bench" --list)}
printf '%s\n' "cachegrind, N = $n: instructions and simulated last-level data misses per operation"
printf '%-16s %-16s %12s %12s\n' structure workload "Ir/op" "LL miss/op"
for s in ${structures//,/ }; do
    if ! "$bench" --count start --n 2 --only "$s" >/dev/null 2>&1; then
        echo "skipping $s: not in this bench" >&2
        continue
    fi
    declare -A ir=() miss=() ops=()
    mine=("${stages[@]}")
    if [[ $s == twheel* ]]; then mine+=("${clock_stages[@]}"); fi
    mine+=("${idle_stages[@]}")
    for stage in "${mine[@]}"; do
        read -r o i m < <(measure "$s" "$stage")
        ops[$stage]=$o ir[$stage]=$i miss[$stage]=$m
    done
    previous=start
    for stage in "${mine[@]:1}"; do
        if [[ " ${reported[*]} " == *" $stage "* ]]; then
            awk -v s="$s" -v w="$stage" -v o="${ops[$stage]}" \
                -v i="$((ir[$stage] - ir[$previous]))" \
                -v m="$((miss[$stage] - miss[$previous]))" \
                'BEGIN {x = m / o; if (x < 0) x = 0; printf "%-16s %-16s %12.1f %12.3f\n", s, w, i / o, x}'
        fi
        previous=$stage
    done
    unset ir miss ops
done
