#!/usr/bin/env bash
# Compares the ABI of BUILD_DIR's libtwheel.so.1 with the record in
# abi/libtwheel.abi and fails on any change an existing binary or plugin host
# could notice:
#   - a removed or changed function or variable (abidiff, with twheel.suppr);
#   - a different soname;
#   - tw_api, tw_config or tw_stats changed other than by appending members
#     (abi/grow_only.py).
# Added functions and appended members pass, with a reminder to record them
# (abi/update.sh) so that the next release is checked against them.
#
#   abi/check.sh BUILD_DIR        exit 0 ok, 1 incompatible/error, 77 no tools
set -uo pipefail
# shellcheck source=abi/lib.sh
source "$(dirname "$0")/lib.sh"

build=${1:?usage: abi/check.sh BUILD_DIR}
twheel_abi_need_tools || exit $?
lib=$(twheel_abi_find_lib "$build") || exit 1
[[ -f $record ]] || { echo "no ABI record $record: run abi/update.sh $build"; exit 1; }

work=$(mktemp -d "${TMPDIR:-/tmp}/twheel-abicheck-XXXXXX")
trap 'rm -rf "$work"' EXIT
twheel_abi_dump "$lib" "$work/current.abi" || exit 1

failures=0
echo "ABI of $lib against ${record#"$source_root"/}"

old_soname=$(sed -n "1s/.* soname='\([^']*\)'.*/\1/p" "$record")
new_soname=$(sed -n "1s/.* soname='\([^']*\)'.*/\1/p" "$work/current.abi")
if [[ $old_soname != "$new_soname" ]]; then
    echo "INCOMPATIBLE: soname changed from '$old_soname' to '$new_soname'"
    failures=$((failures + 1))
fi

DEBUGINFOD_URLS='' abidiff --suppressions "$abi_dir/twheel.suppr" \
    "$record" "$work/current.abi" >"$work/diff.txt" 2>&1
status=$?
# abidiff's exit status is a bit field: 1 error, 2 usage error, 4 ABI
# changed, 8 incompatible change (a removed symbol).
if ((status & 3)); then
    cat "$work/diff.txt"
    echo "ERROR: abidiff failed (status $status)"
    failures=$((failures + 1))
elif ((status & 8)); then
    cat "$work/diff.txt"
    echo "INCOMPATIBLE: abidiff reports removed or incompatible symbols"
    failures=$((failures + 1))
elif ((status & 4)); then
    cat "$work/diff.txt"
    # Only additions are compatible: any removed or changed entry fails.
    if grep -Eq '([1-9][0-9]* Removed|[1-9][0-9]* Changed)' "$work/diff.txt" ||
        grep -q 'SONAME changed' "$work/diff.txt"; then
        echo "INCOMPATIBLE: functions or variables changed or removed"
        failures=$((failures + 1))
    else
        echo "note: compatible additions; record them with abi/update.sh $build"
    fi
fi

python3 "$abi_dir/grow_only.py" "$record" "$work/current.abi" || failures=$((failures + 1))

if ((failures)); then
    cat <<MSG
ABI check FAILED. If this change is deliberate, it needs a new major version
and soname (libtwheel.so.2, the version script node, TW_API_VERSION rules in
timer.h), then: abi/update.sh $build
MSG
    exit 1
fi
echo "ABI check passed"
exit 0
