#!/usr/bin/env bash
# The shared library exports tw_* and nothing else, and no libc/POSIX name
# (librt's timer_create and friends); the static archive defines no global
# outside tw_ either (hidden visibility does not hide names in an archive).
#
#   exported_symbols.sh path/to/libtwheel.so [path/to/libtwheel.a]
#
# Exit 0 pass, 1 fail, 77 skip (no nm).
set -uo pipefail

so=${1:?usage: exported_symbols.sh LIB.so [LIB.a]}
archive=${2:-}

# A Windows DLL: its export table, read by objdump (OBJDUMP: the cross
# toolchain's); the static archive is checked as below, with its nm.
if [[ $so == *.dll ]]; then
    objdump=${OBJDUMP:-objdump}
    command -v "$objdump" >/dev/null || { echo "SKIP: $objdump not found"; exit 77; }
    exports=$("$objdump" -p "$so" | awk '/^\[Ordinal\/Name Pointer\] Table/ {t = 1; next}
        t && /^\t\[/ {print $NF; next} t && !/^\t/ {t = 0}')
    bad=$(grep -v '^tw_' <<<"$exports")
    count=$(grep -c . <<<"$exports")
    if [[ -z $exports || -n $bad ]] || ! grep -qx tw_get_api <<<"$exports"; then
        printf 'FAIL: %s exports (all must start with tw_, tw_get_api among them):\n%s\n' \
            "$so" "$exports"
        exit 1
    fi
    if [[ -n $archive ]]; then
        nm=${OBJDUMP%objdump}nm
        bad=$("$nm" -g --defined-only "$archive" | awk 'NF >= 3 && $3 !~ /^tw_/ {print $3}')
        if [[ -n $bad ]]; then
            printf 'FAIL: %s defines globals outside tw_:\n%s\n' "$archive" "$bad"
            exit 1
        fi
    fi
    echo "ok: $count exported symbols, all tw_*"
    exit 0
fi
command -v nm >/dev/null || { echo "SKIP: nm not found"; exit 77; }

# Names that would collide with libc / librt / POSIX if we exported them.
posix_names=(timer_create timer_delete timer_settime timer_gettime
    timer_getoverrun timerfd_create timerfd_settime timerfd_gettime
    clock_gettime clock_settime clock_getres clock_nanosleep nanosleep
    setitimer getitimer alarm time)

failures=0

# Version nodes of the version script (TWHEEL_1) show up in nm -D as
# absolute symbols; they are not functions or data, so they are allowed.
version_nodes=$(readelf -V --wide "$so" 2>/dev/null |
    awk '/Version definition section/ {d = 1; next}
         /Version needs section/ {d = 0}
         d && /Name:/ {for (i = 1; i <= NF; i++) if ($i == "Name:") print $(i + 1)}')

# "ADDR TYPE NAME[@@VERSION]": strip the version suffix.
dynamic=$(nm -D --defined-only "$so" | awk 'NF >= 3 {sub(/@.*/, "", $3); print $2, $3}')
if [[ -z $dynamic ]]; then
    echo "FAIL: nm -D found no defined symbols in $so"
    exit 1
fi

count=0
while read -r type name; do
    if [[ $type == A ]] && grep -qxF "$name" <<<"$version_nodes"; then
        continue
    fi
    count=$((count + 1))
    if [[ $name != tw_* ]]; then
        echo "FAIL: $so exports '$name' ($type), which does not start with tw_"
        failures=$((failures + 1))
    fi
    for p in "${posix_names[@]}"; do
        if [[ $name == "$p" ]]; then
            echo "FAIL: $so exports the libc/POSIX name '$name'"
            failures=$((failures + 1))
        fi
    done
done <<<"$dynamic"

# The entry point a plugin host looks for must be there.
if ! grep -qx 'T tw_get_api' <<<"$dynamic"; then
    echo "FAIL: $so does not export the function tw_get_api"
    failures=$((failures + 1))
fi

if [[ -n $archive ]]; then
    bad=$(nm -g --defined-only "$archive" | awk 'NF >= 3 && $3 !~ /^tw_/ {print $3}')
    if [[ -n $bad ]]; then
        printf 'FAIL: %s defines globals outside tw_:\n%s\n' "$archive" "$bad"
        failures=$((failures + 1))
    fi
fi

if ((failures)); then
    echo "exported symbols:"
    printf '  %s\n' "${dynamic//$'\n'/$'\n  '}"
    exit 1
fi
echo "ok: $count exported symbols, all tw_*"
exit 0
