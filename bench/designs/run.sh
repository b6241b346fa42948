#!/usr/bin/env bash
# Builds the slot-representation prototypes (see README.md) into a
# temporary folder and runs them side by side.
#
#   run.sh [--n N] [--reps K] [--cancel PERCENT] [--raw]
#   run.sh --cachegrind [--n N] [--cancel PERCENT]
#
# Timing (default): every program runs K times (default 3), the designs
# taking turns, and each figure is the least of its K runs; the ratios are
# each design's figure over the queue's, from the same invocation. Fails
# if any program fails its own check or if the designs fired different
# timers. --raw also prints every run's line. Default N = 1000000;
# --cancel: the share of timers the cancel stage cancels (default 50).
#
# --cachegrind: counts instead of times, under valgrind --tool=cachegrind
# with fixed caches (L1 32 KiB 8-way, last level 2 MiB 16-way, 64-byte
# lines), at N = 200000 unless --n says otherwise: the node pool is then
# about 3 times the last level, as 1M nodes (32 MB) are to a server's
# share of L3. Each stage is the difference between a run that builds
# the wheel and runs the stage and one that only builds it (same input).
# cachegrind does not simulate prefetches: a miss that a walk's prefetch
# hides is still counted where the node is read.
set -euo pipefail

usage="usage: $0 [--n N] [--reps K] [--cancel PERCENT] [--raw] | --cachegrind [--n N] [--cancel PERCENT]"
here=$(cd "$(dirname "$0")" && pwd)
n= reps=3 cancel=50 raw= cachegrind=
while (($#)); do
    case $1 in
        --n) n=${2:?$usage}; shift 2 ;;
        --reps) reps=${2:?$usage}; shift 2 ;;
        --cancel) cancel=${2:?$usage}; shift 2 ;;
        --raw) raw=yes; shift ;;
        --cachegrind) cachegrind=yes; shift ;;
        *) echo "$usage" >&2; exit 2 ;;
    esac
done
[[ -z $n ]] && if [[ -n $cachegrind ]]; then n=200000; else n=1000000; fi
[[ $n =~ ^[0-9]+$ && $reps =~ ^[0-9]+$ && $cancel =~ ^[0-9]+$ ]] &&
    ((n >= 1 && reps >= 1 && cancel <= 100)) || { echo "$usage" >&2; exit 2; }

work=$(mktemp -d "${TMPDIR:-/tmp}/twheel-designs-XXXXXX")
trap 'rm -rf "$work"' EXIT

# name, source, extra flags: the four designs, then two variants of the queue
designs=(queue list chains8 vector queue-slide queue-nopf)
declare -A source=([queue]=queue.c [list]=list.c [chains8]=chains.c [vector]=vector.c
                   [queue-slide]=queue.c [queue-nopf]=queue.c)
declare -A extra=([queue-slide]=-DSLIDE_PREFETCH [queue-nopf]=-DNO_PREFETCH)
for d in "${designs[@]}"; do
    ${CC:-cc} -std=c11 -O2 -Wall -Wextra -Wpedantic ${extra[$d]:-} \
        -o "$work/$d" "$here/${source[$d]}"
done

if [[ -n $cachegrind ]]; then
    command -v valgrind >/dev/null || { echo "valgrind is not installed" >&2; exit 1; }
    designs=(queue list chains8 vector) # the variants differ in prefetches only
    stages=(build expire cancel resched)
    # one stage of one design: "ops Ir LLmisses" into $work/DESIGN.STAGE
    measure() {
        local out=$work/$1.$2
        valgrind --tool=cachegrind --cache-sim=yes \
            --I1=32768,8,64 --D1=32768,8,64 --LL=2097152,16,64 \
            --cachegrind-out-file="$out.cg" \
            "$work/$1" --n "$n" --cancel "$cancel" --only "$2" >"$out.txt" 2>"$out.log" ||
            { echo "valgrind failed for $1 $2:" >&2; cat "$out.log" >&2; return 1; }
        # events: Ir I1mr ILmr Dr D1mr DLmr Dw D1mw DLmw
        awk -v ops="$(sed -n 's/.*ops=\([0-9]*\).*/\1/p' "$out.txt")" \
            '/^summary:/ {print ops, $2, $7 + $10}' "$out.cg" >"$out"
    }
    pids=()
    for d in "${designs[@]}"; do # two at a time: the counts do not depend on it
        for s in "${stages[@]}"; do
            measure "$d" "$s" &
            pids+=($!)
            if ((${#pids[@]} == 2)); then wait "${pids[0]}" "${pids[1]}"; pids=(); fi
        done
    done
    for p in "${pids[@]}"; do wait "$p"; done
    echo "cachegrind, N = $n (L1 32 KiB, last level 2 MiB), $cancel% cancelled: per timer fired (expire) or per operation"
    printf '%-10s %10s %10s %10s %10s %10s %10s\n' design "expire Ir" "LL miss" \
        "cancel Ir" "LL miss" "resched Ir" "LL miss"
    for d in "${designs[@]}"; do
        read -r _ i0 m0 <"$work/$d.build"
        line=$(printf '%-10s' "$d")
        for s in expire cancel resched; do
            read -r o i m <"$work/$d.$s"
            line+=$(awk -v o="$o" -v i="$((i - i0))" -v m="$((m - m0))" \
                'BEGIN {if (o == 0) {printf " %10s %10s", "-", "-"; exit}
                       x = m / o; if (x < 0) x = 0; printf " %10.1f %10.2f", i / o, x}')
        done
        echo "$line"
    done
    exit 0
fi

results=$work/results
for ((r = 1; r <= reps; r++)); do
    for d in "${designs[@]}"; do
        "$work/$d" --n "$n" --cancel "$cancel" >>"$results" ||
            { echo "FAIL: $d exited with status $? (run $r)" >&2; exit 1; }
    done
done
[[ -n $raw ]] && cat "$results"

awk -v reps="$reps" -v cancel="$cancel" -v order="${designs[*]}" '
{
    for (i = 1; i <= NF; i++) {
        split($i, kv, "=")
        f[kv[1]] = kv[2]
    }
    d = f["design"]
    if (check == "") check = f["check"]
    if (f["check"] != check) {
        printf "FAIL: %s fired other timers than the first design (check %s, not %s)\n",
               d, f["check"], check > "/dev/stderr"
        bad = 1
    }
    split("expire cancel resched expire_after_cancel expire_after_resched", keys, " ")
    for (k in keys) {
        key = keys[k]
        if (!((d, key) in best) || f[key] + 0 < best[d, key]) best[d, key] = f[key] + 0
    }
    n = f["n"]
}
END {
    if (bad) exit 1
    printf "slot designs, N = %d, least of %d runs; ns per timer fired (expire), per cancel (%d%% of timers), per reschedule; x: over queue\n", n, reps, cancel
    printf "%-12s %8s %8s %7s %8s %7s %8s %7s %9s %7s\n", "design", "N", "expire", "x", "cancel", "x",
           "resched", "x", "exp-cncl", "x"
    split(order, names, " ")
    for (j = 1; j in names; j++) {
        d = names[j]
        printf "%-12s %8d", d, n
        split("expire cancel resched expire_after_cancel", keys, " ")
        for (k = 1; k <= 4; k++) {
            base = best["queue", keys[k]]
            if (base > 0)
                printf " %8.2f %6.2fx", best[d, keys[k]], best[d, keys[k]] / base
            else
                printf " %8.2f %7s", best[d, keys[k]], "-"
        }
        printf "\n"
    }
    printf "exp-cncl: the walk after the cancels, per timer it fired. check %s: every design fired the same timers.\n", check
}' "$results"
