#!/usr/bin/env bash
# Drop-in embedding: timer.h, timer.c and src/ copied alone into an empty folder build
# with gcc and clang, as C99 and C11, with -Wall -Wextra -Wpedantic -Werror;
# a tiny C program and a C++ translation unit link the object and run; the
# object defines no global name outside tw_. Also the embedder's knob: a
# unity build (#include "timer.c" with TW_EXPORT defined as static inline; also
# after a system header, with -D_DEFAULT_SOURCE as the README says), and the
# C++ facade copied next to timer.h and included as "timer.hpp". This is the
# one route where the headers are spelled "timer.h" / "timer.hpp".
#
#   drop_in.sh SOURCE_ROOT
#
# Exit 0 pass, 1 fail, 77 skip (no C compiler at all).
set -uo pipefail

src=${1:?usage: drop_in.sh SOURCE_ROOT}
work=$(mktemp -d "${TMPDIR:-/tmp}/twheel-dropin-XXXXXX")
trap 'rm -rf "$work"' EXIT
cp "$src/timer.h" "$src/timer.c" "$src/cpp/timer.hpp" "$work/"
cp -R "$src/src" "$work/src"
cd "$work" || exit 1

warn=(-Wall -Wextra -Wpedantic -Werror)
failures=0
ran=0

# step DESCRIPTION COMMAND...: run, show output only on failure.
step() {
    local what=$1
    shift
    local out
    if out=$("$@" 2>&1); then
        return 0
    fi
    printf 'FAIL: %s\n  $ %s\n%s\n' "$what" "$*" "$out"
    failures=$((failures + 1))
    return 1
}

cat >main.c <<'EOF'
#include "timer.h"
#include <stdio.h>

static int fired;
static int released;
static void on_fire(tw_wheel *w, tw_id id, void *data)
{
    (void)w; (void)id; (void)data;
    fired++;
}
static void on_release(void *data)
{
    (void)data;
    released++;
}

int main(void)
{
    struct tw_config config;
    tw_wheel *w;
    tw_id once, every, gone;
    tw_config_init(&config);
    config.lock = TW_LOCK_SPIN;
    w = tw_create(&config);
    if (w == NULL)
        return 1;
    once = tw_add_ex(w, 3, 0, on_fire, on_release, NULL);
    every = tw_add_periodic(w, 1, 2, on_fire, NULL);
    gone = tw_add_ex(w, 2, 0, on_fire, on_release, NULL);
    if (!once || !every || !gone || tw_cancel(w, gone) != 1)
        return 2;
    if (tw_advance(w, 5) != 4) /* once at 3; every at 1, 3, 5 */
        return 3;
    if (fired != 4 || released != 2 || tw_check(w) != 0 || tw_count(w) != 1)
        return 4;
    if (tw_get_api(TW_API_VERSION) == NULL || tw_get_api(0) != NULL)
        return 5;
    if (tw_version() != TW_VERSION_HEX || tw_destroy(w) != 0)
        return 6;
    printf("ok %s\n", tw_version_string());
    return 0;
}
EOF

cat >main.cpp <<'EOF'
// A C++ translation unit using the C API from a C-compiled timer.o.
#include "timer.h"
#include <cstdio>
#include <vector>

static void on_fire(tw_wheel *, tw_id id, void *data)
{
    static_cast<std::vector<tw_id> *>(data)->push_back(id);
}

int main()
{
    std::vector<tw_id> fired;
    tw_wheel *w = tw_create(nullptr);
    if (w == nullptr)
        return 1;
    tw_id a = tw_add(w, 2, on_fire, &fired);
    tw_id b = tw_add(w, 1, on_fire, &fired);
    if (tw_advance(w, 2) != 2 || fired.size() != 2 || fired[0] != b ||
        fired[1] != a)
        return 2;
    const tw_api *api = tw_get_api(TW_API_VERSION);
    if (api == nullptr || api->size != sizeof(tw_api) || api->now(w) != 2)
        return 3;
    if (tw_destroy(w) != 0)
        return 4;
    std::printf("ok c++\n");
    return 0;
}
EOF

cat >facade.cpp <<'EOF'
// The facade copied in as a third file; its own #include "timer.h" finds
// the copy next to it.
#include "timer.hpp"
#include <chrono>
#include <cstdio>

int main()
{
    twheel::wheel w;
    int fired = 0;
    auto t = w.after(std::chrono::milliseconds(2), [&fired] { ++fired; });
    w.advance(2);
    std::printf("ok facade\n");
    return fired == 1 ? 0 : 1;
}
EOF

# A unity build: the embedder makes every tw_ function file-local in its
# own translation unit, as the README shows: `static inline`, so the ones it
# does not call draw no -Wunused-function (checked: -Werror below).
cat >unity.c <<'EOF'
#define TW_EXPORT static inline
#include "timer.c"

static void noop(tw_wheel *w, tw_id id, void *data)
{
    (void)w; (void)id; (void)data;
}

int main(void)
{
    tw_wheel *w = tw_create(NULL);
    int ok = w != NULL && tw_add(w, 1, noop, NULL) != 0 &&
             tw_advance(w, 1) == 1 && tw_destroy(w) == 0;
    return ok ? 0 : 1;
}
EOF

# The same after a system header: timer.c's feature macros then come too
# late, and the README says to define _DEFAULT_SOURCE for the whole
# translation unit instead (built below with -D_DEFAULT_SOURCE).
{
    echo '#include <stdio.h>'
    cat unity.c
} >unity_late.c

# Global names the object may define: tw_* only.
check_globals() {
    local bad
    bad=$(nm -g --defined-only "$1" | awk 'NF >= 3 && $3 !~ /^tw_/ {print $3}')
    if [[ -n $bad ]]; then
        printf 'FAIL: %s defines non-tw_ globals:\n%s\n' "$1" "$bad"
        failures=$((failures + 1))
    fi
}

cxx_for() {
    case $1 in
    gcc) echo g++ ;;
    clang) echo clang++ ;;
    esac
}

for cc in gcc clang; do
    if ! command -v "$cc" >/dev/null; then
        echo "SKIP: $cc not found"
        continue
    fi
    for std in c99 c11; do
        tag=$cc-$std
        ran=$((ran + 1))
        step "$tag: compile timer.c" "$cc" -std=$std "${warn[@]}" -O2 -c timer.c -o "timer-$tag.o" || continue
        command -v nm >/dev/null && check_globals "timer-$tag.o"
        step "$tag: build main.c" \
            "$cc" -std=$std "${warn[@]}" -O2 main.c "timer-$tag.o" -o "main-$tag" -pthread &&
            step "$tag: run main" "./main-$tag"
        step "$tag: unity build" \
            "$cc" -std=$std "${warn[@]}" -O2 unity.c -o "unity-$tag" -pthread &&
            step "$tag: run unity" "./unity-$tag"
        step "$tag: unity build after a system header, -D_DEFAULT_SOURCE" \
            "$cc" -std=$std "${warn[@]}" -D_DEFAULT_SOURCE -O2 unity_late.c -o "unity-late-$tag" -pthread &&
            step "$tag: run unity (late)" "./unity-late-$tag"
        cxx=$(cxx_for "$cc")
        if [[ $std == c11 ]] && command -v "$cxx" >/dev/null; then
            for cxxstd in c++11 c++17; do
                step "$tag: $cxx -std=$cxxstd main.cpp + timer.o" \
                    "$cxx" -std=$cxxstd "${warn[@]}" -O2 main.cpp "timer-$tag.o" -o "main-$tag-$cxxstd" -pthread &&
                    step "$tag: run C++ main ($cxxstd)" "./main-$tag-$cxxstd"
            done
            step "$tag: $cxx -std=c++17 facade.cpp (\"timer.hpp\") + timer.o" \
                "$cxx" -std=c++17 "${warn[@]}" -O2 facade.cpp "timer-$tag.o" -o "facade-$tag" -pthread &&
                step "$tag: run facade" "./facade-$tag"
        fi
    done
done

if ((ran == 0)); then
    echo "SKIP: neither gcc nor clang found"
    exit 77
fi
if ((failures)); then
    echo "$failures drop-in step(s) failed"
    exit 1
fi
echo "drop-in: $ran compiler/standard combinations built and ran"
exit 0
