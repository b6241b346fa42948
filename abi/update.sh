#!/usr/bin/env bash
# Re-records the ABI of BUILD_DIR's libtwheel.so.1 in abi/libtwheel.abi, on
# purpose: after adding functions or appending table members (compatible), or
# after a deliberate break that came with a new soname. Prints what changed
# against the old record so the commit can say so.
#
#   abi/update.sh BUILD_DIR       (a gcc debugoptimized build, as .ci/run's)
set -uo pipefail
# shellcheck source=abi/lib.sh
source "$(dirname "$0")/lib.sh"

build=${1:?usage: abi/update.sh BUILD_DIR}
twheel_abi_need_tools || exit $?
lib=$(twheel_abi_find_lib "$build") || exit 1

new=$(mktemp "${TMPDIR:-/tmp}/twheel-abi-XXXXXX")
trap 'rm -f "$new"' EXIT
twheel_abi_dump "$lib" "$new" || exit 1

if [[ -f $record ]]; then
    if cmp -s "$record" "$new"; then
        echo "abi/libtwheel.abi is already up to date"
        exit 0
    fi
    echo "changes against the previous record:"
    DEBUGINFOD_URLS='' abidiff "$record" "$new" | sed 's/^/  /'
    python3 "$abi_dir/grow_only.py" "$record" "$new" | sed 's/^/  /'
fi
cp "$new" "$record"
echo "recorded the ABI of $lib in abi/libtwheel.abi"
