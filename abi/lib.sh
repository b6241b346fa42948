# shellcheck shell=bash
# Shared by abi/check.sh and abi/update.sh (sourced, not run).
#
# twheel_abi_dump LIB OUT: the ABI of LIB as abidw XML, limited to what
# timer.h declares (struct tw_wheel stays opaque), without machine-specific
# paths, so the record only changes when the ABI does.

abi_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source_root=$(dirname "$abi_dir")
# shellcheck disable=SC2034 # used by the scripts that source this file
record=$abi_dir/libtwheel.abi

# The library a meson build made: BUILD_DIR/libtwheel.so.1 (the soname link).
twheel_abi_find_lib() {
    local build=$1 lib
    for lib in "$build/libtwheel.so.1" "$build/libtwheel.so"; do
        if [[ -e $lib ]]; then
            readlink -f "$lib"
            return 0
        fi
    done
    echo "no libtwheel.so.1 in $build (build it first: meson compile -C $build)" >&2
    return 1
}

twheel_abi_need_tools() {
    local tool
    for tool in abidw abidiff readelf python3; do
        if ! command -v "$tool" >/dev/null; then
            echo "SKIP: $tool not found (Debian: apt-get install abigail-tools binutils python3)" >&2
            return 77
        fi
    done
}

twheel_abi_dump() {
    local lib=$1 out=$2 headers
    if ! readelf -S --wide "$lib" | grep -q '\.debug_info'; then
        echo "$lib has no debug info: build with -g (meson's default debugoptimized does)" >&2
        return 1
    fi
    headers=$(mktemp -d "${TMPDIR:-/tmp}/twheel-abi-XXXXXX") || return 1
    cp "$source_root/timer.h" "$headers/"
    # No debuginfod lookups: everything needed is in the library.
    DEBUGINFOD_URLS='' abidw --no-corpus-path --no-comp-dir-path --no-show-locs \
        --headers-dir "$headers" --drop-private-types "$lib" >"$out.tmp"
    local status=$?
    rm -rf "$headers"
    if ((status != 0)); then
        rm -f "$out.tmp"
        echo "abidw failed on $lib" >&2
        return 1
    fi
    # Translation-unit paths depend on where the build dir is: keep the name.
    sed -E "s|(<abi-instr [^>]* path=')[^']*/([^'/]*')|\\1\\2|" "$out.tmp" >"$out"
    rm -f "$out.tmp"
}
