/*
 * Shared by the unit tests: a fire recorder, wheel bookkeeping so a failed
 * test still frees its wheels, and a few assertion macros.
 *
 * Callbacks only record; assertions run after tw_advance()/tw_expire()
 * returns, so a failing assertion never longjmps out of the library.
 */
#ifndef TW_TEST_HELPERS_H
#define TW_TEST_HELPERS_H

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <twheel/timer.h>

/* user_data carries a small integer tag. */
#define TAG(n) ((void *)(uintptr_t)(n))
#define UNTAG(p) ((int)(uintptr_t)(p))

/* ---- fire recorder ------------------------------------------------------ */

struct fire {
    uint64_t tick; /* tw_now() inside the callback */
    tw_id id;      /* id passed to the callback */
    int tag;       /* UNTAG(user_data) */
};

#define REC_CAP 8192
static struct {
    size_t n;        /* firings seen (may exceed REC_CAP) */
    struct fire f[REC_CAP];
} rec;

static inline void rec_reset(void)
{
    rec.n = 0;
}

static inline void rec_push(tw_wheel *w, tw_id id, void *user_data)
{
    if (rec.n < REC_CAP) {
        rec.f[rec.n].tick = tw_now(w);
        rec.f[rec.n].id = id;
        rec.f[rec.n].tag = UNTAG(user_data);
    }
    rec.n++;
}

/* The plain recording callback. */
static inline void rec_cb(tw_wheel *w, tw_id id, void *user_data)
{
    rec_push(w, id, user_data);
}

#define ASSERT_NFIRES(count) assert_int_equal(rec.n, (count))
#define ASSERT_FIRE(i, t, g)                                                  \
    do {                                                                      \
        assert_true((size_t)(i) < rec.n && (size_t)(i) < REC_CAP);            \
        assert_int_equal(rec.f[(i)].tick, (t));                               \
        assert_int_equal(rec.f[(i)].tag, (g));                                \
    } while (0)
#define CHECK(w) assert_int_equal(tw_check(w), 0)
/* An id-returning call that must fail with errno `e`, which
 * tw_last_error() reports too. */
#define ASSERT_FAILS_ERRNO(call, e)                                           \
    do {                                                                      \
        errno = 0;                                                            \
        assert_int_equal((call), 0);                                          \
        assert_int_equal(errno, (e));                                         \
        assert_int_equal(tw_last_error(), (e));                               \
    } while (0)

/* ---- wheels ------------------------------------------------------------- */

/* Every wheel a test creates through these helpers is destroyed by the
 * teardown if the test body did not get that far. */
#define MAX_TRACKED 16
static tw_wheel *tracked[MAX_TRACKED];

static inline tw_wheel *track(tw_wheel *w)
{
    assert_non_null(w);
    for (int i = 0; i < MAX_TRACKED; i++) {
        if (tracked[i] == NULL) {
            tracked[i] = w;
            return w;
        }
    }
    fail_msg("too many wheels in one test");
    return w;
}

static inline tw_wheel *new_wheel_cfg(const struct tw_config *config)
{
    return track(tw_create(config));
}

/* A single-threaded wheel starting at `start_tick`. */
static inline tw_wheel *new_wheel(uint64_t start_tick)
{
    struct tw_config c;
    tw_config_init(&c);
    c.lock = TW_LOCK_NONE;
    c.start_tick = start_tick;
    return new_wheel_cfg(&c);
}

/* The test destroys this wheel itself. */
static inline void untrack(tw_wheel *w)
{
    for (int i = 0; i < MAX_TRACKED; i++) {
        if (tracked[i] == w)
            tracked[i] = NULL;
    }
}

/* Destroys a tracked wheel now and checks the result. */
static inline void drop(tw_wheel *w)
{
    untrack(w);
    assert_int_equal(tw_destroy(w), 0);
}

static inline int setup_test(void **state)
{
    (void)state;
    rec_reset();
    return 0;
}

static inline int teardown_test(void **state)
{
    (void)state;
    for (int i = 0; i < MAX_TRACKED; i++) {
        if (tracked[i] != NULL) {
            tw_destroy(tracked[i]);
            tracked[i] = NULL;
        }
    }
    rec_reset();
    return 0;
}

#define T(f) cmocka_unit_test_setup_teardown(f, setup_test, teardown_test)

static inline struct tw_stats get_stats(tw_wheel *w)
{
    struct tw_stats s;
    memset(&s, 0, sizeof s);
    s.size = sizeof s;
    assert_int_equal(tw_get_stats(w, &s), 0);
    return s;
}

/* ---- an allocator that can be told to fail ------------------------------ */

/* libc's, except that every allocation fails while alloc_refused is set
 * (frees always work). */
static int alloc_refused;

static inline void *refusing_realloc(void *pointer, size_t size, void *context)
{
    (void)context;
    if (size == 0) {
        free(pointer);
        return NULL;
    }
    return alloc_refused ? NULL : realloc(pointer, size);
}

/* ---- a fake clock -------------------------------------------------------- */

/* A clock the test moves by hand, read through clock_fn; it counts the
 * reads. */
struct fake_clock {
    uint64_t us;
    uint64_t reads;
};

static inline uint64_t read_fake_clock(void *context)
{
    struct fake_clock *clock = context;
    clock->reads++;
    return clock->us;
}

/* A wheel with ticks of tick_us on that clock, with lock `kind` (enum
 * tw_lock_kind), driven as `drive` says (enum tw_drive_kind). */
static inline tw_wheel *new_fake_clock_wheel_ticks(struct fake_clock *clock, int drive,
                                                   int kind, uint32_t tick_us)
{
    struct tw_config c;
    tw_config_init(&c);
    c.lock = kind;
    c.tick_us = tick_us;
    c.clock_fn = read_fake_clock;
    c.clock_context = clock;
    c.drive = drive;
    return new_wheel_cfg(&c);
}

/* The same with 1 ms ticks. */
static inline tw_wheel *new_fake_clock_wheel_locked(struct fake_clock *clock, int drive,
                                                    int kind)
{
    return new_fake_clock_wheel_ticks(clock, drive, kind, 1000);
}

/* The same, single-threaded. */
static inline tw_wheel *new_fake_clock_wheel_driven(struct fake_clock *clock, int drive)
{
    return new_fake_clock_wheel_locked(clock, drive, TW_LOCK_NONE);
}

static inline tw_wheel *new_fake_clock_wheel(struct fake_clock *clock)
{
    return new_fake_clock_wheel_driven(clock, TW_DRIVE_AUTO);
}

/* Deterministic PRNG (xorshift64*) for the few tests that scatter delays. */
static inline uint64_t rng_next(uint64_t *s)
{
    uint64_t x = *s;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *s = x;
    return x * UINT64_C(2685821657736338717);
}

#endif /* TW_TEST_HELPERS_H */
