#!/usr/bin/env bash
# The facade says what it needs, in one message and nothing after it: C++17
# and exceptions (cpp/timer.hpp's #error lines). Compiles a one-line consumer
# in each mode and checks the message.
#   guards.sh INCLUDE_DIR CXX [CXX ARGS...]
set -uo pipefail
include=${1:?usage: guards.sh INCLUDE_DIR CXX...}
shift
work=$(mktemp -d "${TMPDIR:-/tmp}/twheel-guards-XXXXXX")
trap 'rm -rf "$work"' EXIT
printf '#include <twheel/timer.hpp>\nint main() { return 0; }\n' >"$work/a.cpp"

compile() { "$@" -I"$include" -c "$work/a.cpp" -o "$work/a.o" >"$work/log" 2>&1; }

status=0
CXX_CMD=("$@")
expect_error() { # $1: text the error must contain; the rest: flags
    local text=$1
    shift
    if compile "${CXX_CMD[@]}" "$@"; then
        echo "FAIL: $* compiled"
        status=1
    elif ! grep -q -- "$text" "$work/log"; then
        echo "FAIL: $* did not say '$text':"
        head -5 "$work/log"
        status=1
    elif [[ $(grep -c 'error:' "$work/log") -ne 1 ]]; then
        echo "FAIL: $*: more errors than the #error:"
        grep 'error:' "$work/log" | head -5
        status=1
    else
        echo "ok: $* -> '$text'"
    fi
}
expect_error "needs C++17 or later" -std=c++14
expect_error "cannot be built with -fno-exceptions" -std=c++17 -fno-exceptions
if compile "${CXX_CMD[@]}" -std=c++17; then
    echo "ok: -std=c++17 compiles"
else
    echo "FAIL: -std=c++17 did not compile:"
    head -5 "$work/log"
    status=1
fi
exit $status
