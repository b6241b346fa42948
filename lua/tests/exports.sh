#!/usr/bin/env bash
# The Lua module exports luaopen_twheel and nothing else: timer.c is
# compiled into it, and none of its tw_ functions may leak out (a second
# twheel in the same process, libtwheel.so or another module, must not
# bind to them).
#
#   exports.sh path/to/twheel.so
#
# Exit 0 pass, 1 fail, 77 skip (no nm).
set -uo pipefail
module=${1:?usage: exports.sh twheel.so}
command -v nm >/dev/null || { echo "SKIP: nm not found"; exit 77; }
symbols=$(nm -D --defined-only "$module" | awk 'NF >= 3 {sub(/@.*/, "", $3); print $3}' | sort -u)
if [[ $symbols != luaopen_twheel ]]; then
    printf 'FAIL: %s exports:\n%s\n(expected luaopen_twheel alone)\n' "$module" "$symbols"
    exit 1
fi
echo "ok: $module exports luaopen_twheel alone"
