/*
 * Shared by the threading tests: wheels per lock mode, waiting with a hang
 * limit, short spins, a per-thread PRNG, env parameters and sanitizer
 * detection.
 *
 * Rule for every test here: only the CMocka test thread asserts. Worker
 * threads and callbacks count what they see in C11 atomics; the test thread
 * checks those counts after joining (a cmocka assert longjmps and must never
 * run on another thread or inside a callback of the library).
 */
#ifndef TW_THR_H
#define TW_THR_H

#if !defined(_POSIX_C_SOURCE) || _POSIX_C_SOURCE < 200809L
#undef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include <twheel/timer.h>

/* ---- sanitizers --------------------------------------------------------- */

#if defined(__SANITIZE_THREAD__)
#define THR_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define THR_TSAN 1
#endif
#endif
#ifndef THR_TSAN
#define THR_TSAN 0
#endif

/* ---- time --------------------------------------------------------------- */

static inline uint64_t thr_now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

static inline void thr_sleep_us(uint64_t us)
{
    struct timespec ts;
    ts.tv_sec = (time_t)(us / 1000000u);
    ts.tv_nsec = (long)(us % 1000000u) * 1000;
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

/* Busy-waits about `us` microseconds without a syscall: widens race windows
 * without letting the scheduler step in. */
static inline void thr_spin_us(uint64_t us)
{
    uint64_t end = thr_now_us() + us;
    while (thr_now_us() < end)
        ;
}

/* Limit for "this must happen eventually": only hangs fail, never slowness. */
#define THR_HANG_US UINT64_C(30000000)

/* Polls an atomic int until it reaches at least `value`; 0 on timeout. */
static inline int thr_wait_int(atomic_int *p, int value)
{
    uint64_t end = thr_now_us() + THR_HANG_US;
    while (atomic_load(p) < value) {
        if (thr_now_us() > end)
            return 0;
        sched_yield();
    }
    return 1;
}

static inline int thr_wait_u64(_Atomic uint64_t *p, uint64_t value)
{
    uint64_t end = thr_now_us() + THR_HANG_US;
    while (atomic_load(p) < value) {
        if (thr_now_us() > end)
            return 0;
        sched_yield();
    }
    return 1;
}

/* ---- randomness --------------------------------------------------------- */

/* xorshift64*: one state per thread, seeded differently per thread. */
static inline uint64_t thr_rng(uint64_t *s)
{
    uint64_t x = *s;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *s = x;
    return x * UINT64_C(2685821657736338717);
}

static inline uint64_t thr_seed(uint64_t n)
{
    uint64_t s = UINT64_C(0x9E3779B97F4A7C15) * (n + 1);
    return s ? s : 1;
}

/* ---- parameters --------------------------------------------------------- */

/* A positive integer from the environment, or `fallback`. */
static inline uint64_t thr_env(const char *name, uint64_t fallback)
{
    const char *s = getenv(name);
    char *end;
    unsigned long long v;
    if (!s || !*s)
        return fallback;
    v = strtoull(s, &end, 10);
    if (*end || v == 0)
        return fallback;
    return (uint64_t)v;
}

/* ---- wheels ------------------------------------------------------------- */

static inline const char *thr_lock_name(int kind)
{
    return kind == TW_LOCK_SPIN       ? "spin"
           : kind == TW_LOCK_MUTEX    ? "mutex"
           : kind == TW_LOCK_ADAPTIVE ? "adaptive"
                                      : "none";
}

/* Wheels made by thr_wheel() are remembered, so that a test that fails
 * half-way (an assert longjmps out) still stops their timer threads and
 * frees them in its teardown instead of leaving a thread running into the
 * next test. */
#define THR_MAX_WHEELS 64
static tw_wheel *thr_wheels[THR_MAX_WHEELS];

static inline tw_wheel *thr_wheel(int lock_kind, uint32_t tick_us,
                                  tw_clock_fn *clock_fn, void *clock_context)
{
    struct tw_config c;
    tw_wheel *w;
    int i;
    tw_config_init(&c);
    c.lock = lock_kind;
    c.tick_us = tick_us;
    c.clock_fn = clock_fn;
    c.clock_context = clock_context;
    w = tw_create(&c);
    assert_non_null(w);
    for (i = 0; i < THR_MAX_WHEELS; i++) {
        if (!thr_wheels[i]) {
            thr_wheels[i] = w;
            return w;
        }
    }
    fail_msg("too many wheels in one test");
    return w;
}

/* Forgets a wheel the test destroys itself (or is about to). */
static inline void thr_forget(tw_wheel *w)
{
    int i;
    for (i = 0; i < THR_MAX_WHEELS; i++)
        if (thr_wheels[i] == w)
            thr_wheels[i] = NULL;
}

static inline void thr_destroy(tw_wheel *w)
{
    thr_forget(w);
    assert_int_equal(tw_destroy(w), 0);
}

static inline int thr_teardown(void **state)
{
    int i;
    (void)state;
    for (i = 0; i < THR_MAX_WHEELS; i++) {
        if (thr_wheels[i]) {
            tw_destroy(thr_wheels[i]);
            thr_wheels[i] = NULL;
        }
    }
    return 0;
}

/* A fake clock: the wheel reads the atomic that the test advances. */
static inline uint64_t thr_fake_clock(void *context)
{
    return atomic_load((_Atomic uint64_t *)context);
}

/* Lock modes as CMocka initial states. */
#if defined(__GNUC__)
#define THR_UNUSED __attribute__((unused))
#else
#define THR_UNUSED
#endif
static int thr_lock_spin THR_UNUSED = TW_LOCK_SPIN;
static int thr_lock_mutex THR_UNUSED = TW_LOCK_MUTEX;
static int thr_lock_none THR_UNUSED = TW_LOCK_NONE;
static int thr_lock_adaptive THR_UNUSED = TW_LOCK_ADAPTIVE;

static inline int thr_lock_of(void **state)
{
    return *(int *)*state;
}

#define THR_T(f, name, kind) { #f "/" name, f, NULL, thr_teardown, &(kind) }
#define T_ONE(f) cmocka_unit_test_teardown(f, thr_teardown)
#define T_SPIN(f) THR_T(f, "spin", thr_lock_spin)
#define T_MUTEX(f) THR_T(f, "mutex", thr_lock_mutex)
#define T_NONE(f) THR_T(f, "none", thr_lock_none)
#define T_ADAPTIVE(f) THR_T(f, "adaptive", thr_lock_adaptive)

/* Runs a group; TWHEEL_TEST_FILTER (a cmocka glob such as
 * "test_stress_loop/spin" or "test_races_*") picks tests by name. */
static inline int thr_run(const struct CMUnitTest *tests, size_t count)
{
    const char *filter = getenv("TWHEEL_TEST_FILTER");
    if (filter && *filter)
        cmocka_set_test_filter(filter);
    return _cmocka_run_group_tests("threads", tests, count, NULL, NULL);
}
#define THR_RUN(tests) thr_run((tests), sizeof(tests) / sizeof((tests)[0]))

/* ---- threads ------------------------------------------------------------ */

static inline void thr_create(pthread_t *t, void *(*fn)(void *), void *arg)
{
    assert_int_equal(pthread_create(t, NULL, fn, arg), 0);
}

static inline void thr_join(pthread_t t)
{
    assert_int_equal(pthread_join(t, NULL), 0);
}

#endif /* TW_THR_H */
