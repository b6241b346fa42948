#!/usr/bin/env bash
# The facade adds no warning to a user's build with the warnings teams make
# errors: gcc -Wall -Wextra -Wpedantic -Wconversion -Wsign-conversion
# -Wuseless-cast -Wshadow -Wold-style-cast; clang the same plus
# -Wweak-vtables; C++17 and C++20. Compiles strict_consumer.cpp, which
# instantiates every template, with -Werror.
#   strict.sh SOURCE_DIR INCLUDE_DIR CXX [CXX ARGS...]
set -uo pipefail
source_dir=${1:?usage: strict.sh SOURCE_DIR INCLUDE_DIR CXX...}
include=${2:?}
shift 2
work=$(mktemp -d "${TMPDIR:-/tmp}/twheel-strict-XXXXXX")
trap 'rm -rf "$work"' EXIT
flags=(-Wall -Wextra -Wpedantic -Wconversion -Wsign-conversion -Wshadow -Wold-style-cast -Werror)
if "$@" --version 2>/dev/null | grep -qi clang; then
    flags+=(-Wweak-vtables)
else
    flags+=(-Wuseless-cast)
fi
status=0
for std in c++17 c++20; do
    if "$@" -std=$std "${flags[@]}" -I"$include" -c "$source_dir/strict_consumer.cpp" \
        -o "$work/a.o" >"$work/log" 2>&1; then
        echo "ok: -std=$std ${flags[*]}"
    else
        echo "FAIL: -std=$std ${flags[*]}:"
        head -40 "$work/log"
        status=1
    fi
done
# Where <windows.h> is included without NOMINMAX, min and max are
# function-like macros: after the standard headers, before the facade.
if "$@" -std=c++17 "${flags[@]}" -I"$include" -include "$source_dir/minmax_prelude.hpp" \
    -c "$source_dir/strict_consumer.cpp" -o "$work/a.o" >"$work/log" 2>&1; then
    echo "ok: -std=c++17 with min and max defined as macros"
else
    echo "FAIL: -std=c++17 with min and max defined as macros:"
    head -40 "$work/log"
    status=1
fi
exit $status
