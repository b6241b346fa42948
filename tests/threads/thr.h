/*
 * Shared by the threading tests: wheels per lock mode, waiting with a hang
 * limit, gates, a watchdog, short spins, a per-thread PRNG, env parameters
 * and sanitizer detection.
 *
 * Rule for every test here: only the CMocka test thread asserts. Worker
 * threads and callbacks count what they see in C11 atomics; the test thread
 * checks those counts after joining (a cmocka assert longjmps and must never
 * run on another thread or inside a callback of the library).
 *
 * Verdicts come from gates and counters, never from "within N ms": a thread
 * that must wait for another waits on a gate or polls with a hang limit that
 * only a test making no progress at all reaches. Waiters yield and then
 * sleep, so that on a loaded machine the thread they wait for gets the core.
 * Every test runs under a watchdog: if nothing progresses for
 * THR_WATCHDOG_US, it names the test and what it last waited for, and
 * aborts, instead of hanging until meson's timeout.
 */
#ifndef TW_THR_H
#define TW_THR_H

#if !defined(_POSIX_C_SOURCE) || _POSIX_C_SOURCE < 200809L
#undef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif
#if defined(__linux__) && !defined(_DEFAULT_SOURCE)
#define _DEFAULT_SOURCE 1 /* syscall(), for thr_tid() */
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
#if defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

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

/* ---- progress and the watchdog ------------------------------------------ */

/* A wait fails after THR_HANG_US in which nothing in the test progressed;
 * the watchdog aborts after THR_WATCHDOG_US of the same (it catches a
 * thread stuck inside a library call, which no wait can time out).
 * TWHEEL_HANG_S and TWHEEL_WATCHDOG_S override them. */
#define THR_HANG_US (thr_env("TWHEEL_HANG_S", 10) * UINT64_C(1000000))
#define THR_WATCHDOG_US (thr_env("TWHEEL_WATCHDOG_S", 20) * UINT64_C(1000000))

static struct {
    _Atomic uint64_t progress; /* anything that moved */
    _Atomic(const char *) test;
    _Atomic(const char *) what; /* the last wait or step noted */
    _Atomic(const char *) file;
    atomic_int line;
    atomic_int started;
    void (*_Atomic describe)(void); /* a test's own state, for the message */
} thr_watch;

/* Something moved: any thread may say so, as often as it likes. */
static inline void thr_progress(void)
{
    atomic_fetch_add_explicit(&thr_watch.progress, 1, memory_order_relaxed);
}

/* Notes what the test is doing or waiting for, for the watchdog's message. */
static inline void thr_note_at(const char *what, const char *file, int line)
{
    atomic_store(&thr_watch.what, what);
    atomic_store(&thr_watch.file, file);
    atomic_store(&thr_watch.line, line);
}
#define THR_STEP(what)                                                        \
    (thr_note_at((what), __FILE__, __LINE__), thr_progress())

static void *thr_watchdog_main(void *argument)
{
    uint64_t seen = 0, since = thr_now_us(), limit = THR_WATCHDOG_US;
    (void)argument;
    for (;;) {
        uint64_t now = atomic_load(&thr_watch.progress);
        thr_sleep_us(100000);
        if (now != seen) {
            seen = now;
            since = thr_now_us();
        } else if (thr_now_us() - since >= limit) {
            fprintf(stderr,
                    "\nwatchdog: %s made no progress for %llu s; last at "
                    "%s:%d: %s\n",
                    atomic_load(&thr_watch.test),
                    (unsigned long long)(limit / 1000000u),
                    atomic_load(&thr_watch.file), atomic_load(&thr_watch.line),
                    atomic_load(&thr_watch.what));
            if (atomic_load(&thr_watch.describe))
                atomic_load(&thr_watch.describe)();
            fflush(stderr);
            abort();
        }
    }
    return NULL;
}

/* Arms the watchdog for a test (the first call starts its thread). */
static inline void thr_watch_test(const char *name)
{
    pthread_t thread;
    atomic_store(&thr_watch.test, name);
    atomic_store(&thr_watch.describe, NULL);
    thr_note_at("test started", __FILE__, __LINE__);
    thr_progress();
    if (atomic_exchange(&thr_watch.started, 1) == 0 &&
        (pthread_create(&thread, NULL, thr_watchdog_main, NULL) != 0 ||
         pthread_detach(thread) != 0)) {
        fprintf(stderr, "cannot start the watchdog thread\n");
        abort();
    }
}

/* ---- waiting ------------------------------------------------------------ */

/* One poll of a wait: yields at first, then sleeps (growing to 1 ms) so a
 * waiter leaves its core to the threads it waits for. 0 once nothing in
 * the test has progressed for THR_HANG_US; it then says what it waited for
 * and where. */
struct thr_poll {
    const char *what, *file;
    int line;
    unsigned polls;
    uint64_t progress, since;
};

static inline struct thr_poll thr_poll_begin(const char *what, const char *file,
                                             int line)
{
    struct thr_poll p;
    p.what = what;
    p.file = file;
    p.line = line;
    p.polls = 0;
    p.progress = atomic_load(&thr_watch.progress);
    p.since = thr_now_us();
    thr_note_at(what, file, line);
    return p;
}

/* 0 once nothing has progressed for THR_HANG_US since the wait began. */
static inline int thr_poll_check(struct thr_poll *p)
{
    uint64_t progress = atomic_load(&thr_watch.progress), now = thr_now_us();
    if (progress != p->progress) {
        p->progress = progress;
        p->since = now;
    } else if (now - p->since >= THR_HANG_US) {
        fprintf(stderr, "%s:%d: no progress for %llu s waiting for %s\n",
                p->file, p->line, (unsigned long long)(THR_HANG_US / 1000000u),
                p->what);
        return 0;
    }
    return 1;
}

static inline int thr_poll_next(struct thr_poll *p)
{
    if (++p->polls <= 16) {
        sched_yield();
        return 1;
    }
    thr_sleep_us(p->polls < 64 ? 20 : p->polls < 256 ? 200 : 1000);
    return thr_poll_check(p);
}

/* Waits until `cond` holds or the wait gives up (then `cond` is false). */
#define THR_WAIT_UNTIL(cond)                                                  \
    do {                                                                      \
        struct thr_poll thr_poll_ = thr_poll_begin(#cond, __FILE__, __LINE__); \
        while (!(cond) && thr_poll_next(&thr_poll_))                          \
            ;                                                                 \
    } while (0)

/* Waits until an atomic reaches at least `value`; 0 if it gave up. */
static inline int thr_wait_int_at(atomic_int *p, int value, const char *what,
                                  const char *file, int line)
{
    struct thr_poll poll = thr_poll_begin(what, file, line);
    int seen = atomic_load(p);
    while (seen < value) {
        if (!thr_poll_next(&poll))
            return 0;
        if (atomic_load(p) != seen) {
            seen = atomic_load(p);
            thr_progress();
        }
    }
    thr_progress();
    return 1;
}
#define thr_wait_int(p, value)                                                \
    thr_wait_int_at((p), (value), #p " >= " #value, __FILE__, __LINE__)

/* A gate: a counter threads wait on until it reaches a value. A waiter
 * spins `spins` times first (a hand-off between running threads stays
 * fast), then sleeps on a condition variable until the counter is set. */
struct thr_gate {
    _Atomic uint64_t value;
    atomic_int sleepers;
    pthread_mutex_t mutex;
    pthread_cond_t cond;
};

static inline void thr_gate_init(struct thr_gate *g)
{
    atomic_init(&g->value, 0);
    atomic_init(&g->sleepers, 0);
    pthread_mutex_init(&g->mutex, NULL);
    pthread_cond_init(&g->cond, NULL);
}

static inline void thr_gate_destroy(struct thr_gate *g)
{
    pthread_mutex_destroy(&g->mutex);
    pthread_cond_destroy(&g->cond);
}

static inline void thr_gate_set(struct thr_gate *g, uint64_t value)
{
    /* the store, then the look at sleepers; a sleeper counts itself, then
     * looks at the value: one of the two sees the other */
    atomic_store(&g->value, value);
    thr_progress();
    if (atomic_load(&g->sleepers)) {
        pthread_mutex_lock(&g->mutex);
        pthread_cond_broadcast(&g->cond);
        pthread_mutex_unlock(&g->mutex);
    }
}

static inline uint64_t thr_gate_get(struct thr_gate *g)
{
    return atomic_load(&g->value);
}

/* 1 once the gate's counter is at least `want`, 0 if the wait gave up. */
static inline int thr_gate_wait_at(struct thr_gate *g, uint64_t want,
                                   unsigned long spins, const char *what,
                                   const char *file, int line)
{
    struct thr_poll poll;
    unsigned long i;
    int ok = 1;
    for (i = 0; i < spins; i++)
        if (atomic_load_explicit(&g->value, memory_order_acquire) >= want)
            return 1;
    poll = thr_poll_begin(what, file, line);
    pthread_mutex_lock(&g->mutex);
    atomic_fetch_add(&g->sleepers, 1);
    while (atomic_load(&g->value) < want) {
        struct timespec until; /* 10 ms: a look at the hang limit */
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_nsec += 10000000;
        if (until.tv_nsec >= 1000000000) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000;
        }
        pthread_cond_timedwait(&g->cond, &g->mutex, &until);
        if (atomic_load(&g->value) < want && !(ok = thr_poll_check(&poll)))
            break;
    }
    atomic_fetch_sub(&g->sleepers, 1);
    pthread_mutex_unlock(&g->mutex);
    return ok;
}
#define thr_gate_wait(g, want, spins)                                         \
    thr_gate_wait_at((g), (want), (spins), "gate " #g " >= " #want, __FILE__,  \
                     __LINE__)

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

/* A test case's initial state: its lock mode and its name (for the
 * watchdog). */
struct thr_case {
    int kind;
    const char *name;
};

static inline int thr_lock_of(void **state)
{
    return ((const struct thr_case *)*state)->kind;
}

static inline int thr_setup(void **state)
{
    thr_watch_test(((const struct thr_case *)*state)->name);
    return 0;
}

#define THR_CASE(f, name, kind, teardown)                                     \
    { #f "/" name, f, thr_setup, teardown,                                    \
      &(struct thr_case){(kind), #f "/" name} }
#define THR_T(f, name, kind) THR_CASE(f, name, kind, thr_teardown)
#define T_ONE(f)                                                              \
    { #f, f, thr_setup, thr_teardown, &(struct thr_case){-1, #f} }
#define T_SPIN(f) THR_T(f, "spin", TW_LOCK_SPIN)
#define T_MUTEX(f) THR_T(f, "mutex", TW_LOCK_MUTEX)
#define T_NONE(f) THR_T(f, "none", TW_LOCK_NONE)
#define T_ADAPTIVE(f) THR_T(f, "adaptive", TW_LOCK_ADAPTIVE)

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

/* The calling thread's kernel id, and whether that thread is asleep in the
 * kernel: a gate for "the other thread has reached its blocking call" (a
 * tw_cancel waiting for a running callback sleeps; one that has not got
 * that far does not). Off Linux: a 20 ms pause, then "asleep". */
static inline long thr_tid(void)
{
#if defined(__linux__)
    return (long)syscall(SYS_gettid);
#else
    return 0;
#endif
}

static inline int thr_tid_asleep(long tid)
{
#if defined(__linux__)
    char path[64], text[512], *end;
    size_t n;
    FILE *f;
    snprintf(path, sizeof path, "/proc/self/task/%ld/stat", tid);
    f = fopen(path, "r");
    if (!f)
        return 1; /* gone: not running anything of ours */
    n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[n] = 0;
    end = strrchr(text, ')'); /* "tid (name) S ..." */
    return end && end[1] == ' ' && (end[2] == 'S' || end[2] == 'D');
#else
    (void)tid;
    thr_sleep_us(20000);
    return 1;
#endif
}

#endif /* TW_THR_H */
