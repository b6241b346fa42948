#!/bin/sh
# Instructions per add, cancel, fired timer, reschedule and add into
# reused slots, counted by cachegrind (which this machine's timing noise
# cannot move), for timers without arguments (w:add) and with one (w:after
# with an entity made beforehand), at N = 200 000 under Lua 5.4. Each
# figure is one run's total minus the run that stops one stage earlier,
# divided by N.
#
#   lua/bench/instructions.sh BUILD/lua/5.4 [add|after]
#
# Point it at the build of an older module to compare two versions (an
# older module without `after` can only run `add`). Runs differ by about
# 1 % (Lua hashes strings with a random seed, and addresses move).
set -eu
dir=$1
mode=${2:-after}
n=200000
here=$(dirname "$0")
count() {
    LUA_CPATH="$dir/?.so" valgrind --tool=cachegrind --cache-sim=no \
        --cachegrind-out-file=/dev/null lua5.4 "$here/instructions.lua" "$1" "$n" "$2" 2>&1 |
        sed -n 's/.*I *refs: *//p' | tr -d ,
}
base=$(count none f)
fill=$(count "$mode" f)
cancel=$(count "$mode" fc)
expire=$(count "$mode" fe)
resched=$(count "$mode" fr)
refill=$(count "$mode" fcf)
echo "$mode: add $(( (fill - base) / n ))" \
     "cancel $(( (cancel - fill) / n ))" \
     "fired $(( (expire - fill) / n ))" \
     "reschedule $(( (resched - fill) / n ))" \
     "add into reused slots $(( (refill - cancel) / n ))"
