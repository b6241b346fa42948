#!/usr/bin/env bash
# Packaging: a small consumer, in a temporary folder outside the source tree,
# gets twheel each way its users would, builds with -Werror, and runs.
#
#   package.sh MODE SOURCE_ROOT
#
#   pkgconfig           meson install into a temporary prefix (headers,
#                       libraries, package files, share/doc/twheel); C and
#                       C++ consumers built with `pkg-config --cflags --libs
#                       twheel`, whose version must be timer.h's
#   private_prefix      docs/embedding.md's route into a private prefix, as
#                       the page has it: its two marked blocks run verbatim
#                       (HOME a temporary folder, no LD_LIBRARY_PATH), the
#                       install from a copy of SOURCE_ROOT, the consumer's
#                       pkg-config and -rpath line beside an app.c; the
#                       program then runs on its own
#   relocate            that prefix moved elsewhere: pkg-config (also with
#                       --define-prefix) and find_package point into the
#                       moved tree, which names its old place nowhere; the
#                       consumers build and run
#   cmake               meson install; find_package(twheel): the versions and
#                       ranges the version file accepts and refuses, then
#                       twheel::twheel and twheel::twheel_static
#   cmake_subdirectory  add_subdirectory(third_party/twheel -> SOURCE_ROOT):
#                       the same targets; the library exports tw_* only, as
#                       TWHEEL_1; the consumer's install gets nothing of
#                       twheel unless TWHEEL_INSTALL=ON
#   cmake_fetchcontent  FetchContent with SOURCE_DIR, then with a file:// URL
#                       of a tarball of SOURCE_ROOT (no network)
#   cmake_install       SOURCE_ROOT's CMakeLists.txt as the top-level project,
#                       with no C++ compiler: it installs the same tree as
#                       meson (same package files), which the consumers use
#   subproject          a C-only meson project, subprojects/twheel ->
#                       SOURCE_ROOT, dependency('twheel') (the override), no
#                       C++ compiler; its install gets nothing of twheel
#                       unless -Dtwheel:install=enabled, and then a
#                       relocatable tree; no folder with a plain timer.h
#                       on its include path
#   subproject_cpp      a C++-only meson project uses <twheel/timer.hpp>
#                       through dependency('twheel', fallback: 'twheel')
#   dlopen              meson install; hosts built outside the tree with the
#                       installed <twheel/timer.h> only (no -ltwheel) load the
#                       installed libtwheel.so.1: examples/plugin_host.c as a
#                       user copies it, and tests/embed/test_plugin.c (reload,
#                       two copies side by side), under valgrind when present
#
# The pkg-config and CMake consumers (and the C++ subproject one) include a
# project with its own header named timer.h, included as "timer.h" next to
# <twheel/timer.h> (its folder searched after twheel's) and to
# <twheel/timer.hpp> (its folder first): twheel puts no plain timer.h on a
# consumer's include path. CMake runs with --warn-uninitialized -Wdev, and
# any CMake warning fails the mode.
#
# Installs are separate, unsanitized builds of SOURCE_ROOT with tests,
# examples and bench off, so the result does not depend on how the calling
# build was configured.
# Exit 0 pass, 1 fail, 77 skip (a tool this mode needs is absent).

# CMake text is in single quotes on purpose: its ${...} are CMake's.
# shellcheck disable=SC2016
set -uo pipefail

usage="usage: package.sh pkgconfig|private_prefix|relocate|cmake|cmake_subdirectory|cmake_fetchcontent|cmake_install|subproject|subproject_cpp|dlopen SOURCE_ROOT"
mode=${1:?$usage}
src=$(cd "${2:?$usage}" && pwd) || exit 1
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd) || exit 1

need() {
    local tool
    for tool in "$@"; do
        if ! command -v "$tool" >/dev/null; then
            echo "SKIP: $tool not found"
            exit 77
        fi
    done
}
case $mode in
pkgconfig) need meson ninja cc c++ pkg-config readelf ;;
private_prefix) need meson ninja cc pkg-config readelf python3 tar ;;
relocate) need meson ninja cc c++ pkg-config cmake readelf ;;
cmake) need meson ninja cc c++ cmake readelf ;;
cmake_subdirectory) need ninja cc c++ cmake readelf nm ;;
cmake_fetchcontent) need ninja cc c++ cmake tar sha256sum readelf ;;
cmake_install) need meson ninja cc c++ cmake pkg-config readelf nm ;;
subproject) need meson ninja cc readelf ;;
subproject_cpp) need meson ninja cc c++ ;;
dlopen)
    need meson ninja cc pkg-config readelf
    # test_plugin is a CMocka program (the tests need CMocka anyway)
    pkg-config --exists cmocka || { echo "SKIP: no cmocka for test_plugin"; exit 77; }
    ;;
*)
    echo "$usage"
    exit 2
    ;;
esac

work=$(mktemp -d "${TMPDIR:-/tmp}/twheel-$mode-XXXXXX")
trap 'rm -rf "$work"' EXIT
# A nested build must not inherit the calling test run's settings.
unset MESON_TESTTHREADS DESTDIR PKG_CONFIG_PATH PKG_CONFIG_LIBDIR CMAKE_PREFIX_PATH \
    CMAKE_GENERATOR CMAKE_INSTALL_PREFIX

tw_version=$(sed -n 's/^#define TW_VERSION_STRING "\(.*\)"/\1/p' "$src/timer.h")
IFS=. read -r tw_major tw_minor _ <<<"$tw_version"
[[ $tw_major =~ ^[0-9]+$ && $tw_minor =~ ^[0-9]+$ ]] || {
    echo "FAIL: no TW_VERSION_STRING in $src/timer.h"
    exit 1
}

# run LOG COMMAND...: quiet on success, log tail on failure (then exit 1).
run() {
    local log=$work/$1
    shift
    if ! "$@" >"$log" 2>&1; then
        echo "FAIL: $*"
        tail -n 40 "$log"
        exit 1
    fi
}

fail() {
    echo "FAIL: $*"
    exit 1
}

# cmake_configure LOG ARGS...: every developer warning on; a warning fails.
cmake_configure() {
    local log=$1
    shift
    run "$log" cmake -G Ninja --warn-uninitialized -Wdev "$@"
    if grep -q '^CMake [A-Za-z ]*Warning' "$work/$log"; then
        echo "FAIL: cmake warned: cmake $*"
        grep -A 10 '^CMake [A-Za-z ]*Warning' "$work/$log"
        exit 1
    fi
}

# The consumers' sources, written as a user of the package would.
write_sources() { # DIR
    mkdir -p "$1/app-include"
    cat >"$1/consumer.c" <<'EOF'
#include <twheel/timer.h>
#include <stdio.h>

static int fired;
static void on_fire(tw_wheel *w, tw_id id, void *data)
{
    (void)w; (void)id; (void)data;
    fired++;
}

int main(void)
{
    tw_wheel *w = tw_create(NULL);
    if (w == NULL || tw_version() != TW_VERSION_HEX)
        return 1;
    if (tw_add(w, 5, on_fire, NULL) == 0 || tw_add_periodic(w, 1, 1, on_fire, NULL) == 0)
        return 2;
    if (tw_advance(w, 5) != 6 || fired != 6 || tw_destroy(w) != 0)
        return 3;
    printf("consumer ok: twheel %s\n", tw_version_string());
    return 0;
}
EOF
    cat >"$1/consumer.cpp" <<'EOF'
#include <twheel/timer.hpp>
#include <chrono>
#include <cstdio>

int main()
{
    twheel::wheel w;
    int fired = 0;
    auto t = w.after(std::chrono::milliseconds(3), [&fired] { ++fired; });
    w.advance(3);
    std::printf("c++ consumer ok: %d\n", fired);
    return fired == 1 ? 0 : 1;
}
EOF
    # The consumer's own timer.h.
    cat >"$1/app-include/timer.h" <<'EOF'
/* The consumer's own timer.h: nothing to do with twheel. */
#ifndef APP_TIMER_H
#define APP_TIMER_H
#define APP_TIMER_TICKS 42
struct app_timer { int ticks; };
#endif
EOF
    cat >"$1/collision.c" <<'EOF'
/* Built with twheel's include folders BEFORE app-include: a plain timer.h in
 * one of them would be found as "timer.h" instead of the consumer's. */
#include "timer.h"
#include <twheel/timer.h>
#include <stdio.h>

#ifndef APP_TIMER_H
#error "\"timer.h\" is twheel's: twheel put a plain timer.h on the include path"
#endif

int main(void)
{
    struct app_timer t = {APP_TIMER_TICKS};
    tw_wheel *w = tw_create(NULL);
    if (w == NULL || t.ticks != 42 || tw_destroy(w) != 0)
        return 1;
    printf("collision (C) ok\n");
    return 0;
}
EOF
    cat >"$1/collision.cpp" <<'EOF'
// Built with app-include BEFORE twheel's include folder: the facade's own
// #include "timer.h" must still find twheel's header (next to timer.hpp),
// not the consumer's.
#include "timer.h"
#include <twheel/timer.hpp>
#include <chrono>
#include <cstdio>

#ifndef APP_TIMER_H
#error "\"timer.h\" is twheel's: twheel put a plain timer.h on the include path"
#endif

int main()
{
    app_timer t{APP_TIMER_TICKS};
    twheel::wheel w;
    int fired = 0;
    auto h = w.after(std::chrono::milliseconds(1), [&fired] { ++fired; });
    w.advance(1);
    std::printf("collision (C++) ok\n");
    return fired == 1 && t.ticks == 42 ? 0 : 1;
}
EOF
}

# check_tree PREFIX: what an install of twheel must hold; sets libdir.
check_tree() {
    local p=$1 f
    for f in include/twheel/timer.h include/twheel/timer.hpp \
        share/doc/twheel/LICENSE share/doc/twheel/README.md \
        share/doc/twheel/docs/guarantees.md; do
        [[ -f $p/$f ]] || fail "installed tree lacks $f"
    done
    cmp -s "$src/LICENSE" "$p/share/doc/twheel/LICENSE" || fail "installed LICENSE differs from the source's"
    [[ -e $p/include/timer.h || -e $p/include/timer.hpp ]] && fail "a plain timer.h/timer.hpp is installed in include/"
    libdir=$(dirname "$(find "$p" -name libtwheel.a | head -n1)")
    [[ -d $libdir ]] || fail "installed tree lacks libtwheel.a"
    for f in libtwheel.a libtwheel.so libtwheel.so.1 "libtwheel.so.$tw_version" pkgconfig/twheel.pc \
        cmake/twheel/twheelConfig.cmake cmake/twheel/twheelConfigVersion.cmake; do
        [[ -e $libdir/$f ]] || fail "installed tree lacks ${libdir#"$p"/}/$f"
    done
    check_soname "$libdir/libtwheel.so.1"
    # Relocatable however it was installed (a meson subproject too): the
    # package files name their prefix nowhere.
    grep -qF "$p" "$libdir/pkgconfig/twheel.pc" "$libdir"/cmake/twheel/*.cmake &&
        fail "the installed package files name the prefix $p: the tree cannot move"
    return 0
}

check_soname() { # LIB.so
    local soname
    soname=$(readelf -d "$1" | sed -n 's/.*SONAME.*\[\(.*\)\]/\1/p')
    [[ $soname == libtwheel.so.1 ]] || fail "$1: soname is '$soname', not libtwheel.so.1"
}

# check_exports LIB.so LIB.a: tw_* only, under the version node TWHEEL_1
# (the version script was applied).
check_exports() {
    run symbols.log "$here/exported_symbols.sh" "$1" "$2"
    readelf -V --wide "$1" | grep -q 'Name: TWHEEL_1$' ||
        fail "$1 has no version node TWHEEL_1 (twheel.map not applied)"
    check_soname "$1"
}

# meson install of SOURCE_ROOT into $work/prefix; sets prefix and libdir.
# (No Lua module: it is not installed, building it would only cost time.)
install_prefix() {
    prefix=$work/prefix
    run setup.log meson setup "$work/build" "$src" --prefix="$prefix" \
        --buildtype=debugoptimized -Db_sanitize=none \
        -Dtests=false -Dexamples=false -Dbench=false -Dfacade=false -Dlua=disabled
    run compile.log meson compile -C "$work/build"
    run install.log meson install -C "$work/build" --quiet
    check_tree "$prefix"
}

# pkgconfig_consumers PCDIR: the consumers built with pkg-config's flags
# from PCDIR/twheel.pc, run against the library it names.
pkgconfig_consumers() {
    local d=$work/pc-consumer cflags libs pclibdir version
    rm -rf "$d"
    write_sources "$d"
    export PKG_CONFIG_PATH=$1
    run pc.log pkg-config --exists --print-errors twheel
    version=$(pkg-config --modversion twheel)
    [[ $version == "$tw_version" ]] || fail "pkg-config version $version is not timer.h's $tw_version"
    cflags=$(pkg-config --cflags twheel)
    libs=$(pkg-config --libs twheel)
    pclibdir=$(pkg-config --variable=libdir twheel)

    # -rpath as docs/embedding.md says: the programs run without
    # LD_LIBRARY_PATH
    local warn=(-Wall -Wextra -Wpedantic -Werror) rpath=-Wl,-rpath,$pclibdir
    # shellcheck disable=SC2086
    {
        run cc.log cc -std=c11 "${warn[@]}" "$d/consumer.c" $cflags $libs "$rpath" -o "$d/consumer"
        run cxx.log c++ -std=c++17 "${warn[@]}" "$d/consumer.cpp" $cflags $libs "$rpath" \
            -o "$d/consumer_cpp"
        run cc-collision.log cc -std=c11 "${warn[@]}" $cflags -I"$d/app-include" \
            "$d/collision.c" $libs "$rpath" -o "$d/collision_c"
        run cxx-collision.log c++ -std=c++17 "${warn[@]}" -I"$d/app-include" $cflags \
            "$d/collision.cpp" $libs "$rpath" -o "$d/collision_cpp"
    }
    readelf -d "$d/consumer" | grep -q 'NEEDED.*libtwheel\.so\.1\]' ||
        fail "the pkg-config consumer does not link libtwheel.so.1"
    local exe
    for exe in consumer consumer_cpp collision_c collision_cpp; do
        run "run-$exe.log" env -u LD_LIBRARY_PATH "$d/$exe"
        cat "$work/run-$exe.log"
    done
    unset PKG_CONFIG_PATH
}

# doc_blocks PAGE: the ```sh blocks of PAGE that come right after a line
# "<!-- tests/embed/package.sh private_prefix runs this block ...", in
# order, each ended by a NUL.
doc_blocks() {
    python3 - "$1" <<'PY'
import sys
lines = open(sys.argv[1], encoding="utf-8").read().split("\n")
marker = "<!-- tests/embed/package.sh private_prefix runs this block"
for i, line in enumerate(lines):
    if line.startswith(marker):
        if i + 1 >= len(lines) or lines[i + 1].strip() != "```sh":
            sys.exit(f"{sys.argv[1]}:{i + 1}: no ```sh block right after the marker")
        end = lines.index("```", i + 2)
        sys.stdout.write("\n".join(lines[i + 2:end]) + "\n\0")
PY
}

# cmake_consumer NAME SNIPPET [CMAKE ARGS...]: a CMake project in $work/NAME
# that gets twheel by SNIPPET, then builds and runs the consumers against
# twheel::twheel and twheel::twheel_static. Leaves its build in $work/NAME-build.
cmake_consumer() {
    local name=$1 snippet=$2 d=$work/$1 b=$work/$1-build
    shift 2
    write_sources "$d"
    cat >"$d/CMakeLists.txt" <<EOF
cmake_minimum_required(VERSION 3.14...3.30)
project(twheel_consumer C CXX)

$snippet

set(CMAKE_C_STANDARD 11)
set(CMAKE_C_STANDARD_REQUIRED ON)
set(CMAKE_C_EXTENSIONS OFF)
set(CMAKE_CXX_STANDARD 17)
set(CMAKE_CXX_STANDARD_REQUIRED ON)
set(CMAKE_CXX_EXTENSIONS OFF)
add_compile_options(-Wall -Wextra -Wpedantic -Werror)

add_executable(consumer_shared consumer.c)
target_link_libraries(consumer_shared PRIVATE twheel::twheel)
add_executable(consumer_static consumer.c)
target_link_libraries(consumer_static PRIVATE twheel::twheel_static)
add_executable(consumer_cpp consumer.cpp)
target_link_libraries(consumer_cpp PRIVATE twheel::twheel)

# The consumer's own timer.h: searched after everything twheel gives, -I
# or -isystem (an imported target's folders are -isystem)...
add_executable(collision_c collision.c)
target_link_libraries(collision_c PRIVATE twheel::twheel_static)
target_compile_options(collision_c PRIVATE
  "SHELL:-idirafter \${CMAKE_CURRENT_SOURCE_DIR}/app-include")
# ...and before it (a target's own folders come first).
add_executable(collision_cpp collision.cpp)
target_include_directories(collision_cpp PRIVATE app-include)
target_link_libraries(collision_cpp PRIVATE twheel::twheel)

install(TARGETS consumer_static DESTINATION bin)
EOF
    cmake_configure "$name-cmake.log" -S "$d" -B "$b" -DCMAKE_BUILD_TYPE=Release "$@"
    run "$name-build.log" cmake --build "$b"
    local exe
    for exe in consumer_shared consumer_static consumer_cpp collision_c collision_cpp; do
        # The shared ones run from their build rpath.
        run "$name-run-$exe.log" "$b/$exe"
        cat "$work/$name-run-$exe.log"
    done
    readelf -d "$b/consumer_shared" | grep -q 'NEEDED.*libtwheel\.so\.1\]' ||
        fail "consumer_shared does not link libtwheel.so.1"
    readelf -d "$b/consumer_static" | grep -q 'NEEDED.*libtwheel' &&
        fail "consumer_static links libtwheel dynamically"
    return 0
}

# no_plain_timer_h BUILD_DIR: no folder on an include path of the
# consumer's own compile commands (twheel's timer.c is not the consumer's)
# holds a plain timer.h, but for the consumer's own app-include. Meson adds
# the folder of a generated header to every target that uses it, so a
# header copy made by a build target would put one there.
no_plain_timer_h() {
    local out
    out=$(python3 - "$1" <<'PY'
import json, os, shlex, sys
build = sys.argv[1]
folders = set()
for entry in json.load(open(os.path.join(build, "compile_commands.json"))):
    if "subprojects" in entry["file"]:
        continue
    args = entry.get("arguments") or shlex.split(entry["command"])
    for arg, following in zip(args, args[1:] + [""]):
        flag = next((f for f in ("-isystem", "-iquote", "-idirafter", "-I")
                     if arg.startswith(f)), None)
        if flag:  # -Ifolder or -I folder
            folders.add(arg[len(flag):] or following)
if not folders:
    print("no include folder in the consumer's compile commands")
for folder in sorted(folders):
    path = os.path.normpath(os.path.join(build, folder))
    if not path.endswith("app-include") and os.path.exists(os.path.join(path, "timer.h")):
        print("a folder holding a plain timer.h is on the consumer's include path: " + path)
PY
    ) || fail "no_plain_timer_h: python3 failed"
    [[ -z $out ]] || fail "$out"
    return 0
}

# find_package(twheel) with the version file's answers checked first.
find_package_snippet() {
    local checks=() r
    # A plain version keeps the same-major rule...
    checks+=("\"$tw_major\" TRUE" "\"$tw_major.$tw_minor\" TRUE"
        "\"$tw_major.$((tw_minor + 1))\" FALSE" "\"$((tw_major + 1)).0\" FALSE")
    ((tw_major > 0)) && checks+=("\"$((tw_major - 1)).0\" FALSE")
    # ...a range is whatever it contains, whatever the majors of its ends.
    local ranges=("\"$((tw_major > 0 ? tw_major - 1 : 0)).5...<$((tw_major + 1)).0\" TRUE"
        "\"0.1...$tw_version\" TRUE" "\"0.1...<$tw_version\" FALSE"
        "\"$tw_major.$((tw_minor + 1))...<$((tw_major + 2)).0\" FALSE")
    printf '%s\n' \
        'function(expect_twheel request expected)' \
        '  find_package(twheel ${request} QUIET CONFIG)' \
        '  if(twheel_FOUND)' \
        '    set(found TRUE)' \
        '  else()' \
        '    set(found FALSE)' \
        '  endif()' \
        '  if(NOT found STREQUAL expected)' \
        '    message(FATAL_ERROR "find_package(twheel ${request}): found ${found}, expected ${expected}")' \
        '  endif()' \
        '  message(STATUS "find_package(twheel ${request}): ${found}, as expected")' \
        'endfunction()'
    for r in "${checks[@]}"; do
        echo "expect_twheel($r)"
    done
    echo 'if(NOT CMAKE_VERSION VERSION_LESS 3.19)  # version ranges'
    for r in "${ranges[@]}"; do
        echo "  expect_twheel($r)"
    done
    echo 'endif()'
    echo "find_package(twheel $tw_major.0 REQUIRED CONFIG)"
    echo 'message(STATUS "found twheel ${twheel_VERSION} in ${twheel_DIR}")'
}

# find_package_consumer PREFIX: the find_package consumer against PREFIX.
find_package_consumer() {
    cmake_consumer find-package "$(find_package_snippet)" -DCMAKE_PREFIX_PATH="$1"
    grep -- '-- find_package(twheel' "$work/find-package-cmake.log"
    grep -- '-- found twheel' "$work/find-package-cmake.log" | grep -qF "in $1/" ||
        fail "find_package did not find twheel under $1"
}

case $mode in
pkgconfig)
    install_prefix
    pkgconfig_consumers "$libdir/pkgconfig"
    ;;

private_prefix)
    page=$src/docs/embedding.md
    blocks=()
    while IFS= read -r -d '' block; do
        blocks+=("$block")
    done < <(doc_blocks "$page")
    ((${#blocks[@]} == 2)) ||
        fail "$page: ${#blocks[@]} blocks marked for private_prefix, not 2 (install, consume)"
    home=$work/home
    copy=$work/twheel-source
    app=$work/app
    mkdir -p "$home" "$copy" "$app"
    tar -C "$src" --exclude-vcs --exclude='./build*' -cf - . | tar -C "$copy" -xf - ||
        fail "copying $src"
    write_sources "$work/sources"
    cp "$work/sources/consumer.c" "$app/app.c"
    # The blocks as a reader runs them: a shell that stops at the first
    # failing line, HOME set, LD_LIBRARY_PATH not.
    (cd "$copy" && run install-block.log env -u LD_LIBRARY_PATH HOME="$home" \
        bash -e -o pipefail -c "${blocks[0]}") || exit 1
    (cd "$app" && run consume-block.log env -u LD_LIBRARY_PATH HOME="$home" \
        bash -e -o pipefail -c "${blocks[1]}") || exit 1
    cat "$work/consume-block.log"
    grep -q '^consumer ok' "$work/consume-block.log" || fail "./app did not say 'consumer ok'"
    prefix=$home/.local/twheel
    check_tree "$prefix"
    readelf -d "$app/app" | grep -q 'NEEDED.*libtwheel\.so\.1\]' ||
        fail "app does not link libtwheel.so.1"
    readelf -d "$app/app" | grep -qE '\((RUNPATH|RPATH)\)' || fail "app records no run path"
    run app-alone.log env -u LD_LIBRARY_PATH -u PKG_CONFIG_PATH "$app/app"
    echo "private prefix: installed and consumed by the page's commands; app runs on its own"
    ;;

relocate)
    install_prefix
    moved=$work/elsewhere/deeper/twheel-moved
    mkdir -p "${moved%/*}"
    mv "$prefix" "$moved"
    mlibdir=$moved/${libdir#"$prefix"/}
    hits=$(grep -rlF "$prefix" "$moved")
    [[ -z $hits ]] || fail "the installed tree names its install prefix $prefix: $hits"
    export PKG_CONFIG_PATH=$mlibdir/pkgconfig
    flags=$(pkg-config --cflags --libs twheel) || fail "pkg-config on the moved tree"
    echo "moved: pkg-config --cflags --libs twheel: $flags"
    for flag in $flags; do
        case $flag in
        -I* | -L*)
            dir=$(realpath -m "${flag:2}")
            [[ $dir == "$moved"/* ]] || fail "$flag is outside the moved tree $moved"
            ;;
        esac
    done
    if ! grep -qE -- "-I[^ ]+" <<<"$flags" || ! grep -qE -- "-L[^ ]+" <<<"$flags"; then
        fail "pkg-config gave no -I or no -L"
    fi
    # --define-prefix replaces ${prefix} by a guess from the folder names
    # (wrong for a multiarch libdir): the flags must not depend on it.
    dflags=$(pkg-config --define-prefix --cflags --libs twheel) || fail "pkg-config --define-prefix"
    [[ $dflags == "$flags" ]] ||
        fail "pkg-config --define-prefix gives '$dflags', not '$flags'"
    unset PKG_CONFIG_PATH
    pkgconfig_consumers "$mlibdir/pkgconfig"
    find_package_consumer "$moved"
    ;;

cmake)
    install_prefix
    find_package_consumer "$prefix"
    ;;

cmake_subdirectory)
    mkdir -p "$work/sub/third_party"
    ln -s "$src" "$work/sub/third_party/twheel"
    cmake_consumer sub "$(printf '%s\n' \
        'add_subdirectory(third_party/twheel)' \
        'get_target_property(twheel_version twheel VERSION)' \
        'message(STATUS "twheel target version ${twheel_version}")')" \
        -DCMAKE_INSTALL_PREFIX="$work/sub-prefix"
    grep -q -- "-- twheel target version $tw_version\$" "$work/sub-cmake.log" ||
        fail "the twheel target's version is not timer.h's $tw_version"
    check_exports "$work/sub-build/third_party/twheel/libtwheel.so.1" \
        "$work/sub-build/third_party/twheel/libtwheel.a"
    # Vendored: the consumer's install holds its own program only...
    run sub-install.log cmake --install "$work/sub-build"
    installed=$(cd "$work/sub-prefix" && find . -type f -o -type l | sort)
    [[ $installed == ./bin/consumer_static ]] ||
        fail "the consumer's install holds more than its program:"$'\n'"$installed"
    # ...unless it asks for twheel's too.
    cmake_configure sub-cmake-install.log -S "$work/sub" -B "$work/sub-build" -DTWHEEL_INSTALL=ON \
        -DCMAKE_INSTALL_PREFIX="$work/sub-prefix2"
    run sub-install2.log cmake --install "$work/sub-build"
    check_tree "$work/sub-prefix2"
    echo "add_subdirectory: nothing of twheel installed by default; all of it with TWHEEL_INSTALL=ON"
    ;;

cmake_fetchcontent)
    cmake_consumer fc-source "$(printf '%s\n' \
        'include(FetchContent)' \
        "FetchContent_Declare(twheel SOURCE_DIR \"$src\")" \
        'FetchContent_MakeAvailable(twheel)')"
    # A release-like tarball of the working tree (build folders and VCS left out).
    tarball=$work/twheel-$tw_version.tar.gz
    run tar.log tar -C "$src" --exclude-vcs --exclude='./build*' --exclude='*.o' \
        --exclude='*.a' --exclude='*.so' --exclude='*.so.*' \
        --transform "s,^\\.,twheel-$tw_version," -czf "$tarball" .
    sha=$(sha256sum "$tarball" | cut -d' ' -f1)
    cmake_consumer fc-url "$(printf '%s\n' \
        'include(FetchContent)' \
        "FetchContent_Declare(twheel URL \"file://$tarball\" URL_HASH SHA256=$sha)" \
        'FetchContent_MakeAvailable(twheel)')"
    [[ -f $work/fc-url-build/_deps/twheel-src/CMakeLists.txt ]] ||
        fail "FetchContent did not unpack the tarball into _deps/twheel-src"
    ;;

cmake_install)
    install_prefix # meson's, to compare with
    rel_libdir=${libdir#"$prefix"/}
    cprefix=$work/cmake-prefix
    # twheel as the top-level CMake project: it installs by default, and a
    # C++ compiler, had it looked for one, would have failed the configure.
    CXX=false cmake_configure tw-cmake.log -S "$src" -B "$work/tw-build" \
        -DCMAKE_INSTALL_PREFIX="$cprefix" -DCMAKE_INSTALL_LIBDIR="$rel_libdir"
    grep -q 'CXX compiler' "$work/tw-cmake.log" && fail "twheel's CMakeLists.txt looked for a C++ compiler"
    run tw-build.log cmake --build "$work/tw-build"
    run tw-install.log cmake --install "$work/tw-build"
    check_tree "$cprefix"
    check_exports "$cprefix/$rel_libdir/libtwheel.so.1" "$cprefix/$rel_libdir/libtwheel.a"
    # The same tree as meson's, the same CMake package files, and a twheel.pc
    # that says the same.
    diff <(cd "$prefix" && find . | sort) <(cd "$cprefix" && find . | sort) ||
        fail "CMake installs another tree than meson (< meson, > CMake)"
    diff -r "$prefix/$rel_libdir/cmake" "$cprefix/$rel_libdir/cmake" ||
        fail "CMake's package config differs from meson's"
    diff -r "$prefix/include" "$cprefix/include" || fail "CMake installs other headers than meson"
    pc_says() { # PREFIX
        PKG_CONFIG_PATH=$1/$rel_libdir/pkgconfig pkg-config --modversion --cflags --libs --static twheel |
            sed "s|$1/|PREFIX/|g"
    }
    diff <(pc_says "$prefix") <(pc_says "$cprefix") || fail "CMake's twheel.pc says other than meson's"
    diff "$prefix/$rel_libdir/pkgconfig/twheel.pc" "$cprefix/$rel_libdir/pkgconfig/twheel.pc" ||
        fail "CMake's twheel.pc differs from meson's"
    pkgconfig_consumers "$cprefix/$rel_libdir/pkgconfig"
    find_package_consumer "$cprefix"
    ;;

subproject)
    mkdir -p "$work/proj/subprojects"
    ln -s "$src" "$work/proj/subprojects/twheel"
    write_sources "$work/proj"
    cat >"$work/proj/meson.build" <<'EOF'
project('twheel_consumer', 'c',
  default_options: ['c_std=c11', 'warning_level=3', 'werror=true'])
subproject('twheel')
# The subproject overrides dependency('twheel'): no pkg-config lookup.
twheel = dependency('twheel')
executable('consumer', 'consumer.c', dependencies: twheel, install: true)
EOF
    # CXX=false: had twheel looked for a C++ compiler, the setup would fail.
    CXX=false run setup.log meson setup "$work/proj-build" "$work/proj" \
        --prefix="$work/proj-prefix" --buildtype=debugoptimized -Db_sanitize=none
    grep -q "Dependency twheel found: YES .*(overridden)" "$work/setup.log" ||
        fail "dependency('twheel') was not resolved by the subproject's override"
    grep -q 'C++ compiler' "$work/setup.log" && fail "the twheel subproject looked for a C++ compiler"
    grep -iE 'warning|notice|deprecat' "$work/setup.log" && fail "the consumer's setup warned (above)"
    run compile.log meson compile -C "$work/proj-build"
    no_plain_timer_h "$work/proj-build"
    run run.log "$work/proj-build/consumer"
    cat "$work/run.log"
    # The consumer's install holds its own program only...
    run install.log meson install -C "$work/proj-build" --quiet
    installed=$(cd "$work/proj-prefix" && find . -type f -o -type l | sort)
    [[ $installed == ./bin/consumer ]] ||
        fail "the consumer's install holds more than its program:"$'\n'"$installed"
    # ...unless it asks for twheel's too.
    CXX=false run configure.log meson configure "$work/proj-build" -Dtwheel:install=enabled
    run install2.log meson install -C "$work/proj-build" --quiet
    check_tree "$work/proj-prefix"
    echo "subproject: C only; nothing of twheel installed by default; all of it with -Dtwheel:install=enabled"
    ;;

subproject_cpp)
    mkdir -p "$work/proj/subprojects"
    ln -s "$src" "$work/proj/subprojects/twheel"
    write_sources "$work/proj"
    cat >"$work/proj/meson.build" <<'EOF'
project('twheel_consumer_cpp', 'cpp',
  default_options: ['cpp_std=c++17', 'warning_level=3', 'werror=true'])
# As the README has it; --wrap-mode=forcefallback keeps an installed twheel
# out of this test.
twheel = dependency('twheel', fallback: 'twheel')
executable('consumer_cpp', 'consumer.cpp', dependencies: twheel)
executable('collision_cpp', 'collision.cpp', dependencies: twheel,
  include_directories: 'app-include')
EOF
    run setup.log meson setup "$work/proj-build" "$work/proj" --wrap-mode=forcefallback \
        --buildtype=debugoptimized -Db_sanitize=none
    grep -iE 'warning|notice|deprecat' "$work/setup.log" && fail "the consumer's setup warned (above)"
    run compile.log meson compile -C "$work/proj-build"
    no_plain_timer_h "$work/proj-build"
    for exe in consumer_cpp collision_cpp; do
        run "run-$exe.log" "$work/proj-build/$exe"
        cat "$work/run-$exe.log"
    done
    ;;

dlopen)
    install_prefix
    host=$work/host
    mkdir -p "$host"
    cp "$src/examples/plugin_host.c" "$src/tests/embed/test_plugin.c" "$host/"
    warn=(-Wall -Wextra -Wpedantic -Werror)
    run host-cc.log cc -std=c11 "${warn[@]}" -I"$prefix/include" \
        "$host/plugin_host.c" -ldl -o "$host/plugin_host"
    readelf -d "$host/plugin_host" | grep -q 'NEEDED.*libtwheel' &&
        fail "plugin_host links libtwheel: a plugin host must reach it through dlopen only"
    run host-run.log "$host/plugin_host" "$libdir/libtwheel.so.1"
    cat "$work/host-run.log"
    # shellcheck disable=SC2046
    run plugin-cc.log cc -std=c11 "${warn[@]}" -I"$prefix/include" "$host/test_plugin.c" \
        $(pkg-config --cflags --libs cmocka) -ldl -pthread -o "$host/test_plugin"
    readelf -d "$host/test_plugin" | grep -q 'NEEDED.*libtwheel' &&
        fail "test_plugin links libtwheel"
    run plugin-run.log "$host/test_plugin" "$libdir/libtwheel.so.1"
    grep -F 'PASSED' "$work/plugin-run.log" || fail "test_plugin did not say PASSED"
    if command -v valgrind >/dev/null; then
        run plugin-valgrind.log valgrind --error-exitcode=1 --leak-check=full \
            --errors-for-leak-kinds=definite,indirect --quiet \
            "$host/test_plugin" "$libdir/libtwheel.so.1"
        echo "dlopen: the installed library loads, reloads and runs two copies; valgrind clean"
    fi
    ;;
esac
echo "package ($mode): ok"
exit 0
