#!/usr/bin/env bash
# Packaging: a small outside consumer builds against twheel the way its users
# would, then runs.
#
#   package.sh pkgconfig  SOURCE_ROOT   install into a temporary prefix; build
#                                       a C and a C++ consumer with
#                                       `pkg-config --cflags --libs twheel`
#   package.sh cmake      SOURCE_ROOT   install into a temporary prefix; an
#                                       outside CMake project uses
#                                       find_package(twheel 1.0) and links
#                                       twheel::twheel and twheel::twheel_static
#   package.sh subproject SOURCE_ROOT   a temporary meson project with
#                                       subprojects/twheel -> SOURCE_ROOT and
#                                       dependency('twheel') (the override)
#
# The install is a separate, unsanitized `meson setup --prefix=TMP` build of
# SOURCE_ROOT with tests, examples and bench off, so the result does not
# depend on how the calling build was configured.
# Exit 0 pass, 1 fail, 77 skip (a tool this mode needs is absent).
set -uo pipefail

mode=${1:?usage: package.sh pkgconfig|cmake|subproject SOURCE_ROOT}
src=$(cd "${2:?usage: package.sh MODE SOURCE_ROOT}" && pwd) || exit 1

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
pkgconfig) need meson ninja cc c++ pkg-config ;;
cmake) need meson ninja cc cmake ;;
subproject) need meson ninja cc c++ ;;
*)
    echo "unknown mode $mode"
    exit 2
    ;;
esac

work=$(mktemp -d "${TMPDIR:-/tmp}/twheel-$mode-XXXXXX")
trap 'rm -rf "$work"' EXIT
# A nested build must not inherit the calling test run's settings.
unset MESON_TESTTHREADS DESTDIR PKG_CONFIG_PATH PKG_CONFIG_LIBDIR CMAKE_PREFIX_PATH

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

# The consumer, written as a user of the package would.
write_consumer() { # $1: the #include line
    cat >"$work/consumer.c" <<EOF
$1
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
}

install_prefix() {
    prefix=$work/prefix
    run setup.log meson setup "$work/build" "$src" --prefix="$prefix" \
        --buildtype=debugoptimized -Db_sanitize=none \
        -Dtests=false -Dexamples=false -Dbench=false -Dfacade=false
    run compile.log meson compile -C "$work/build"
    run install.log meson install -C "$work/build" --quiet

    # What `meson install` must give: headers, both libraries, twheel.pc and
    # the CMake package config.
    local f
    for f in include/twheel/timer.h include/twheel/timer.hpp; do
        [[ -f $prefix/$f ]] || fail "installed tree lacks $f"
    done
    libdir=$(dirname "$(find "$prefix" -name libtwheel.a | head -n1)")
    [[ -d $libdir ]] || fail "installed tree lacks libtwheel.a"
    for f in libtwheel.a libtwheel.so libtwheel.so.1 pkgconfig/twheel.pc \
        cmake/twheel/twheelConfig.cmake cmake/twheel/twheelConfigVersion.cmake; do
        [[ -e $libdir/$f ]] || fail "installed tree lacks ${libdir#"$prefix"/}/$f"
    done
    soname=$(readelf -d "$libdir/libtwheel.so.1" 2>/dev/null | sed -n 's/.*SONAME.*\[\(.*\)\]/\1/p')
    [[ -z $soname || $soname == libtwheel.so.1 ]] || fail "soname is $soname, not libtwheel.so.1"
}

case $mode in
pkgconfig)
    install_prefix
    export PKG_CONFIG_PATH=$libdir/pkgconfig
    run pc.log pkg-config --exists --print-errors twheel
    version=$(pkg-config --modversion twheel)
    [[ $version == "$(sed -n 's/^#define TW_VERSION_STRING "\(.*\)"/\1/p' "$src/timer.h")" ]] ||
        fail "pkg-config version $version does not match timer.h"
    cflags=$(pkg-config --cflags twheel)
    libs=$(pkg-config --libs twheel)

    # The documented spelling of the installed header...
    write_consumer '#include <twheel/timer.h>'
    # shellcheck disable=SC2086
    if ! cc -std=c11 -Wall -Wextra -Wpedantic -Werror "$work/consumer.c" \
        $cflags $libs -o "$work/consumer" >"$work/cc.log" 2>&1; then
        cat "$work/cc.log"
        grep -q 'twheel/timer.h: No such file' "$work/cc.log" &&
            echo "(twheel.pc Cflags '$cflags' lack -I\${includedir})"
        fail "building the consumer through pkg-config"
    fi
    readelf -d "$work/consumer" | grep -q 'NEEDED.*libtwheel\.so\.1\]' ||
        fail "consumer does not link libtwheel.so.1"
    LD_LIBRARY_PATH=$libdir run run.log "$work/consumer"
    cat "$work/run.log"

    # ...and the C++ facade, installed next to it.
    cat >"$work/consumer.cpp" <<'EOF'
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
    # shellcheck disable=SC2086
    run cxx.log c++ -std=c++17 -Wall -Wextra -Wpedantic -Werror "$work/consumer.cpp" \
        $cflags $libs -o "$work/consumer_cpp"
    LD_LIBRARY_PATH=$libdir run runcpp.log "$work/consumer_cpp"
    cat "$work/runcpp.log"
    ;;

cmake)
    install_prefix
    write_consumer '#include <twheel/timer.h>'
    mkdir -p "$work/cmake-consumer"
    cat >"$work/cmake-consumer/CMakeLists.txt" <<EOF
cmake_minimum_required(VERSION 3.13)
project(twheel_consumer C)

# A major version we are not must be refused by the version file.
find_package(twheel 2.0 QUIET CONFIG)
if(twheel_FOUND)
  message(FATAL_ERROR "find_package(twheel 2.0) accepted version \${twheel_VERSION}")
endif()

find_package(twheel 1.0 REQUIRED CONFIG)
message(STATUS "found twheel \${twheel_VERSION} in \${twheel_DIR}")

add_executable(consumer_shared "$work/consumer.c")
target_link_libraries(consumer_shared PRIVATE twheel::twheel)
add_executable(consumer_static "$work/consumer.c")
target_link_libraries(consumer_static PRIVATE twheel::twheel_static)
foreach(t consumer_shared consumer_static)
  set_target_properties(\${t} PROPERTIES C_STANDARD 11 C_STANDARD_REQUIRED ON)
  target_compile_options(\${t} PRIVATE -Wall -Wextra -Wpedantic -Werror)
endforeach()
EOF
    run cmake.log cmake -S "$work/cmake-consumer" -B "$work/cmake-build" \
        -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_TYPE=Release
    grep -- '-- found twheel' "$work/cmake.log"
    run cmake-build.log cmake --build "$work/cmake-build"
    # The shared one runs from its build rpath; the static one needs nothing.
    run run-shared.log "$work/cmake-build/consumer_shared"
    run run-static.log "$work/cmake-build/consumer_static"
    readelf -d "$work/cmake-build/consumer_shared" | grep -q 'NEEDED.*libtwheel\.so\.1\]' ||
        fail "consumer_shared does not link libtwheel.so.1"
    readelf -d "$work/cmake-build/consumer_static" | grep -q 'NEEDED.*libtwheel' &&
        fail "consumer_static links libtwheel dynamically"
    cat "$work/run-shared.log" "$work/run-static.log"
    ;;

subproject)
    mkdir -p "$work/proj/subprojects"
    ln -s "$src" "$work/proj/subprojects/twheel"
    # The same spelling as installed: <twheel/timer.h>.
    write_consumer '#include <twheel/timer.h>'
    mv "$work/consumer.c" "$work/proj/"
    cat >"$work/proj/meson.build" <<'EOF'
project('twheel_consumer', 'c',
  default_options: ['c_std=c11', 'warning_level=3', 'werror=true'])
subproject('twheel')
# The subproject overrides dependency('twheel'): no pkg-config lookup.
twheel = dependency('twheel')
executable('consumer', 'consumer.c', dependencies: twheel)
EOF
    run setup.log meson setup "$work/proj-build" "$work/proj" \
        --buildtype=debugoptimized -Db_sanitize=none
    grep -q "Dependency twheel found: YES .*(overridden)" "$work/setup.log" ||
        fail "dependency('twheel') was not resolved by the subproject's override"
    run compile.log meson compile -C "$work/proj-build"
    run run.log "$work/proj-build/consumer"
    cat "$work/run.log"
    ;;
esac
echo "package ($mode): ok"
exit 0
