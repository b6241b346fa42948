#!/usr/bin/env bash
# The model test over a range of master seeds, as many at once as there are
# cores: `meson test --suite long` runs it over seeds 1-2000 (over an hour
# on 2 cores). Every failing seed is listed with the end of its report (the
# shrunk program and its TWHEEL_REPLAY line); all seeds run even after one
# fails.
#   sweep.sh TEST_MODEL [FIRST [LAST]]     (default 1 2000)
# TWHEEL_OPS and the other variables of test_model.c pass through.
set -uo pipefail
model=$1
first=${2:-1}
last=${3:-2000}
jobs=$(nproc 2>/dev/null || echo 2)
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
start=$(date +%s)
seq "$first" "$last" | xargs -P "$jobs" -I{} sh -c \
    'TWHEEL_SEED={} "$1" >"$2/{}.log" 2>&1 && rm -f "$2/{}.log"' sh "$model" "$logs"
failed=0
for log in "$logs"/*.log; do
    [[ -e $log ]] || continue
    failed=$((failed + 1))
    seed=$(basename "$log" .log)
    echo "---- seed $seed FAILED: TWHEEL_SEED=$seed $model"
    grep -A3 -E '^FAILED|^twheel and the model' "$log" | head -n 20
    grep -A1 '^replay with' "$log"
done
echo "seeds $first-$last: $((last - first + 1 - failed)) passed, $failed failed" \
    "in $(($(date +%s) - start)) s"
[[ $failed -eq 0 ]]
