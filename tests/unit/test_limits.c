/* Limits and bad input: TW_MAX_DELAY and beyond (ERANGE), the pending cap
 * (ENOSPC, nothing else touched), bad arguments to every public function,
 * bad configs, the 255 release-function limit (EMFILE), adding while the
 * wheel is being destroyed (EBUSY), and tw_strerror. */
#include <limits.h>
#include <pthread.h>

#include "helpers.h"

static int released;
static void count_release(void *p)
{
    (void)p;
    released++;
}

/* ---- delays ------------------------------------------------------------- */

static void test_max_delay_accepted_beyond_refused(void **state)
{
    (void)state;
    released = 0;
    tw_wheel *w = new_wheel(0);
    const uint64_t bad[] = {TW_MAX_DELAY + 1, UINT64_C(1) << 32,
                            TW_MAX_TICK, UINT64_MAX};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ASSERT_FAILS_ERRNO(tw_add(w, bad[i], rec_cb, NULL), ERANGE);
        ASSERT_FAILS_ERRNO(tw_add_periodic(w, bad[i], 10, rec_cb, NULL),
                           ERANGE);
        ASSERT_FAILS_ERRNO(tw_add_periodic(w, 10, bad[i], rec_cb, NULL),
                           ERANGE);
        ASSERT_FAILS_ERRNO(tw_add_ex(w, bad[i], 0, rec_cb, count_release,
                                     TAG(1)), ERANGE);
        ASSERT_FAILS_ERRNO(tw_add_ex(w, 5, bad[i], rec_cb, count_release,
                                     TAG(1)), ERANGE);
    }
    assert_int_equal(tw_count(w), 0);
    assert_int_equal(released, 0);
    assert_int_equal(get_stats(w).added, 0);
    CHECK(w);
    tw_id a = tw_add(w, TW_MAX_DELAY, rec_cb, TAG(1));
    tw_id p = tw_add_periodic(w, TW_MAX_DELAY, TW_MAX_DELAY, rec_cb, TAG(2));
    tw_id e = tw_add_ex(w, TW_MAX_DELAY, TW_MAX_DELAY, rec_cb, count_release,
                        TAG(3));
    assert_int_not_equal(a, 0);
    assert_int_not_equal(p, 0);
    assert_int_not_equal(e, 0);
    assert_int_equal(tw_remaining(w, a), TW_MAX_DELAY);
    assert_int_equal(tw_advance(w, TW_MAX_DELAY - 1), 0);
    assert_int_equal(tw_advance(w, 1), 3);
    ASSERT_FIRE(0, TW_MAX_DELAY, 1);
    ASSERT_FIRE(1, TW_MAX_DELAY, 2);
    ASSERT_FIRE(2, TW_MAX_DELAY, 3);
    assert_int_equal(tw_remaining(w, p), TW_MAX_DELAY);
    assert_int_equal(tw_advance(w, TW_MAX_DELAY), 2);
    ASSERT_FIRE(3, 2 * TW_MAX_DELAY, 2);
    ASSERT_FIRE(4, 2 * TW_MAX_DELAY, 3);
    CHECK(w);
    drop(w);
    assert_int_equal(released, 1);
}

static void test_periodic_interval_zero(void **state)
{
    (void)state;
    tw_wheel *w = new_wheel(0);
    ASSERT_FAILS_ERRNO(tw_add_periodic(w, 5, 0, rec_cb, NULL), EINVAL);
    assert_int_equal(tw_count(w), 0);
    /* In tw_add_ex, interval 0 means one-shot. */
    assert_int_not_equal(tw_add_ex(w, 5, 0, rec_cb, NULL, TAG(1)), 0);
    assert_int_equal(tw_advance(w, 100), 1);
    ASSERT_NFIRES(1);
    drop(w);
}

/* ---- the pending cap ---------------------------------------------------- */

static tw_wheel *capped(uint64_t cap)
{
    struct tw_config c;
    tw_config_init(&c);
    c.lock = TW_LOCK_NONE;
    c.max_timers = cap;
    return new_wheel_cfg(&c);
}

static void test_cap_refuses_and_touches_nothing(void **state)
{
    (void)state;
    released = 0;
    tw_wheel *w = capped(3);
    tw_id a = tw_add(w, 7, rec_cb, TAG(1));
    tw_id p = tw_add_periodic(w, 3, 3, rec_cb, TAG(2));
    tw_id e = tw_add_ex(w, 300, 0, rec_cb, count_release, TAG(3));
    assert_true(a && p && e);
    for (int round = 0; round < 3; round++) {
        ASSERT_FAILS_ERRNO(tw_add(w, 1, rec_cb, TAG(9)), ENOSPC);
        ASSERT_FAILS_ERRNO(tw_add(w, 0, rec_cb, TAG(9)), ENOSPC);
        ASSERT_FAILS_ERRNO(tw_add_periodic(w, 1, 1, rec_cb, TAG(9)), ENOSPC);
        ASSERT_FAILS_ERRNO(tw_add_ex(w, 1, 0, rec_cb, count_release, TAG(9)),
                           ENOSPC);
    }
    assert_int_equal(released, 0);
    assert_int_equal(tw_count(w), 3);
    assert_int_equal(tw_remaining(w, a), 7);
    assert_int_equal(tw_remaining(w, p), 3);
    assert_int_equal(tw_remaining(w, e), 300);
    CHECK(w);
    /* Rescheduling at the cap is fine: it adds nothing. */
    assert_int_equal(tw_reschedule(w, a, 8), 1);
    assert_int_equal(tw_advance(w, 8), 3);
    ASSERT_FIRE(0, 3, 2);
    ASSERT_FIRE(1, 6, 2);
    ASSERT_FIRE(2, 8, 1);
    /* a fired: room for one more. */
    assert_int_equal(tw_count(w), 2);
    tw_id b = tw_add(w, 1, rec_cb, TAG(4));
    assert_int_not_equal(b, 0);
    ASSERT_FAILS_ERRNO(tw_add(w, 1, rec_cb, TAG(9)), ENOSPC);
    /* A cancel makes room too. */
    assert_int_equal(tw_cancel(w, e), 1);
    assert_int_equal(released, 1);
    assert_int_not_equal(tw_add(w, 2, rec_cb, TAG(5)), 0);
    assert_int_equal(tw_advance(w, 2), 3);
    ASSERT_FIRE(3, 9, 2);
    ASSERT_FIRE(4, 9, 4);
    ASSERT_FIRE(5, 10, 5);
    for (size_t i = 0; i < rec.n; i++)
        assert_int_not_equal(rec.f[i].tag, 9);
    CHECK(w);
    drop(w);
}

/* Cap 1: a one-shot whose callback runs is no longer counted, so it may add
 * its successor; a running periodic still counts. */
static tw_id cap_added;
static int cap_errno;

static void cap_add_cb(tw_wheel *w, tw_id id, void *user_data)
{
    rec_push(w, id, user_data);
    errno = 0;
    cap_added = tw_add(w, 5, rec_cb, TAG(UNTAG(user_data) + 10));
    cap_errno = errno;
}

static void test_cap_from_callbacks(void **state)
{
    (void)state;
    tw_wheel *w = capped(1);
    assert_int_not_equal(tw_add(w, 2, cap_add_cb, TAG(1)), 0);
    assert_int_equal(tw_advance(w, 10), 2);
    assert_int_not_equal(cap_added, 0);
    ASSERT_FIRE(0, 2, 1);
    ASSERT_FIRE(1, 7, 11);
    drop(w);

    rec_reset();
    w = capped(1);
    tw_id p = tw_add_periodic(w, 2, 100, cap_add_cb, TAG(2));
    assert_int_not_equal(p, 0);
    assert_int_equal(tw_advance(w, 10), 1);
    assert_int_equal(cap_added, 0);
    assert_int_equal(cap_errno, ENOSPC);
    assert_int_equal(tw_count(w), 1);
    CHECK(w);
    drop(w);
}

/* A cap of 0 means no cap. */
static void test_cap_zero_is_unlimited(void **state)
{
    (void)state;
    tw_wheel *w = capped(0);
    for (int i = 0; i < 5000; i++)
        assert_int_not_equal(tw_add(w, (uint64_t)i, rec_cb, NULL), 0);
    assert_int_equal(tw_count(w), 5000);
    drop(w);
}

/* ---- bad configs -------------------------------------------------------- */

#define ASSERT_CREATE_EINVAL(cfg)                                             \
    do {                                                                      \
        errno = 0;                                                            \
        assert_null(tw_create(cfg));                                          \
        assert_int_equal(errno, EINVAL);                                      \
        assert_int_equal(tw_last_error(), EINVAL);                            \
    } while (0)

static void test_bad_configs(void **state)
{
    (void)state;
    struct tw_config c;

    tw_config_init(&c);
    c.size = 0;
    ASSERT_CREATE_EINVAL(&c);
    tw_config_init(&c);
    c.size = 3;
    ASSERT_CREATE_EINVAL(&c);

    const uint32_t ticks[] = {0, TW_MAX_TICK_US + 1, UINT32_MAX};
    for (size_t i = 0; i < 3; i++) {
        tw_config_init(&c);
        c.tick_us = ticks[i];
        ASSERT_CREATE_EINVAL(&c);
    }
    const int locks[] = {-1, 4, 100, INT_MAX, INT_MIN};
    for (size_t i = 0; i < 5; i++) {
        tw_config_init(&c);
        c.lock = locks[i];
        ASSERT_CREATE_EINVAL(&c);
    }
    const int clocks[] = {-1, 2, 100};
    for (size_t i = 0; i < 3; i++) {
        tw_config_init(&c);
        c.clock = clocks[i];
        ASSERT_CREATE_EINVAL(&c);
    }
    const uint64_t starts[] = {TW_MAX_TICK + 1, UINT64_MAX};
    for (size_t i = 0; i < 2; i++) {
        tw_config_init(&c);
        c.start_tick = starts[i];
        ASSERT_CREATE_EINVAL(&c);
    }
    /* The extremes that are allowed. */
    tw_config_init(&c);
    c.tick_us = TW_MIN_TICK_US;
    drop(new_wheel_cfg(&c));
    c.tick_us = TW_MAX_TICK_US;
    c.start_tick = TW_MAX_TICK;
    drop(new_wheel_cfg(&c));
}

/* A newer caller's bigger config: accepted when the unknown tail is zero,
 * refused when it holds anything. */
static void test_config_size_from_the_future(void **state)
{
    (void)state;
    struct {
        struct tw_config c;
        unsigned char extra[24];
    } big;
    memset(&big, 0, sizeof big);
    tw_config_init(&big.c);
    big.c.size = sizeof big;
    big.c.lock = TW_LOCK_NONE;
    tw_wheel *w = new_wheel_cfg(&big.c);
    assert_int_not_equal(tw_add(w, 1, rec_cb, TAG(1)), 0);
    assert_int_equal(tw_advance(w, 1), 1);
    drop(w);
    big.extra[17] = 1;
    ASSERT_CREATE_EINVAL(&big.c);
}

/* ---- NULL and nonsense arguments to every function ---------------------- */

static void test_null_wheel_everywhere(void **state)
{
    (void)state;
    struct tw_stats s;
    memset(&s, 0, sizeof s);
    s.size = sizeof s;
    ASSERT_FAILS_ERRNO(tw_add(NULL, 1, rec_cb, NULL), EINVAL);
    ASSERT_FAILS_ERRNO(tw_add_periodic(NULL, 1, 1, rec_cb, NULL), EINVAL);
    ASSERT_FAILS_ERRNO(tw_add_ex(NULL, 1, 0, rec_cb, count_release, NULL),
                       EINVAL);
    assert_int_equal(tw_destroy(NULL), 0);
    assert_int_equal(tw_cancel(NULL, 1), -EINVAL);
    assert_int_equal(tw_reschedule(NULL, 1, 1), -EINVAL);
    assert_int_equal(tw_remaining(NULL, 1), TW_NEVER);
    assert_int_equal(tw_expire(NULL), -EINVAL);
    assert_int_equal(tw_advance(NULL, 1), -EINVAL);
    assert_int_equal(tw_advance(NULL, 0), -EINVAL);
    assert_int_equal(tw_next_expiry(NULL), TW_NEVER);
    assert_int_equal(tw_timeout_ms(NULL), -1);
    assert_int_equal(tw_thread_start(NULL, 1000), -EINVAL);
    assert_int_equal(tw_thread_stop(NULL), -EINVAL);
    assert_int_equal(tw_now(NULL), 0);
    assert_int_equal(tw_count(NULL), 0);
    assert_int_equal(tw_tick_us(NULL), 0);
    assert_int_equal(tw_get_stats(NULL, &s), -EINVAL);
    assert_int_equal(tw_check(NULL), -EINVAL);
}

/* Bad arguments on a live wheel are refused and disturb nothing. */
static void test_bad_arguments_leave_wheel_intact(void **state)
{
    (void)state;
    released = 0;
    tw_wheel *w = new_wheel(0);
    tw_id sentinel = tw_add(w, 20, rec_cb, TAG(1));
    tw_id per = tw_add_periodic(w, 10, 10, rec_cb, TAG(2));

    ASSERT_FAILS_ERRNO(tw_add(w, 1, NULL, NULL), EINVAL);
    ASSERT_FAILS_ERRNO(tw_add_periodic(w, 1, 1, NULL, NULL), EINVAL);
    ASSERT_FAILS_ERRNO(tw_add_ex(w, 1, 0, NULL, count_release, TAG(3)),
                       EINVAL);
    assert_int_equal(tw_cancel(w, 0), 0);
    assert_int_equal(tw_reschedule(w, 0, 1), 0);
    assert_int_equal(tw_remaining(w, 0), TW_NEVER);
    assert_int_equal(tw_thread_start(w, 0), -EINVAL);
    /* TW_LOCK_NONE wheel: a timer thread is refused. */
    assert_int_equal(tw_thread_start(w, 1000), -EINVAL);
    assert_int_equal(tw_thread_stop(w), 0);
    assert_int_equal(tw_thread_stop(w), 0);

    struct tw_stats s;
    assert_int_equal(tw_get_stats(w, NULL), -EINVAL);
    memset(&s, 0, sizeof s);
    s.size = 0;
    assert_int_equal(tw_get_stats(w, &s), -EINVAL);
    s.size = 7;
    assert_int_equal(tw_get_stats(w, &s), -EINVAL);

    assert_int_equal(released, 0);
    assert_int_equal(tw_count(w), 2);
    assert_int_equal(get_stats(w).added, 2);
    CHECK(w);
    assert_int_equal(tw_advance(w, 20), 3);
    ASSERT_FIRE(0, 10, 2);
    ASSERT_FIRE(1, 20, 1);
    ASSERT_FIRE(2, 20, 2);
    assert_int_equal(tw_cancel(w, per), 1);
    assert_int_equal(tw_cancel(w, sentinel), 0);
    drop(w);
}

/* ---- release-function table: 255 distinct functions, then EMFILE -------- */

static int rel_hits[256];
#define REL(a, b)                                                             \
    static void rel_##a##b(void *p)                                           \
    {                                                                         \
        (void)p;                                                              \
        rel_hits[0x##a##b]++;                                                 \
    }
#define REL_ROW(a)                                                            \
    REL(a, 0) REL(a, 1) REL(a, 2) REL(a, 3) REL(a, 4) REL(a, 5) REL(a, 6)     \
    REL(a, 7) REL(a, 8) REL(a, 9) REL(a, A) REL(a, B) REL(a, C) REL(a, D)     \
    REL(a, E) REL(a, F)
REL_ROW(0) REL_ROW(1) REL_ROW(2) REL_ROW(3) REL_ROW(4) REL_ROW(5) REL_ROW(6)
REL_ROW(7) REL_ROW(8) REL_ROW(9) REL_ROW(A) REL_ROW(B) REL_ROW(C) REL_ROW(D)
REL_ROW(E) REL_ROW(F)

#define RELP(a, b) rel_##a##b,
#define RELP_ROW(a)                                                           \
    RELP(a, 0) RELP(a, 1) RELP(a, 2) RELP(a, 3) RELP(a, 4) RELP(a, 5)         \
    RELP(a, 6) RELP(a, 7) RELP(a, 8) RELP(a, 9) RELP(a, A) RELP(a, B)         \
    RELP(a, C) RELP(a, D) RELP(a, E) RELP(a, F)
static tw_release *const rels[256] = {
    RELP_ROW(0) RELP_ROW(1) RELP_ROW(2) RELP_ROW(3) RELP_ROW(4) RELP_ROW(5)
    RELP_ROW(6) RELP_ROW(7) RELP_ROW(8) RELP_ROW(9) RELP_ROW(A) RELP_ROW(B)
    RELP_ROW(C) RELP_ROW(D) RELP_ROW(E) RELP_ROW(F)
};

static void test_release_function_limit(void **state)
{
    (void)state;
    memset(rel_hits, 0, sizeof rel_hits);
    tw_wheel *w = new_wheel(0);
    for (int i = 0; i < 255; i++)
        assert_int_not_equal(tw_add_ex(w, 10, 0, rec_cb, rels[i], TAG(i)), 0);
    ASSERT_FAILS_ERRNO(tw_add_ex(w, 10, 0, rec_cb, rels[255], TAG(255)),
                       EMFILE);
    assert_int_equal(tw_count(w), 255);
    /* Known functions and no function at all still work. */
    assert_int_not_equal(tw_add_ex(w, 5, 0, rec_cb, rels[0], TAG(300)), 0);
    assert_int_not_equal(tw_add_ex(w, 5, 0, rec_cb, rels[254], TAG(301)), 0);
    assert_int_not_equal(tw_add_ex(w, 5, 0, rec_cb, NULL, TAG(302)), 0);
    assert_int_equal(tw_advance(w, 5), 3);
    assert_int_equal(rel_hits[0], 1);
    assert_int_equal(rel_hits[254], 1);
    CHECK(w);
    drop(w);
    for (int i = 0; i < 255; i++)
        assert_int_equal(rel_hits[i], i == 0 || i == 254 ? 2 : 1);
    assert_int_equal(rel_hits[255], 0);
    ASSERT_NFIRES(3);
}

/* ---- adding while the wheel is destroyed -------------------------------- */

static tw_wheel *dying;
static struct {
    int calls;
    tw_id add, periodic, ex;
    int add_errno, periodic_errno, ex_errno;
} during;

static void add_during_destroy(void *p)
{
    (void)p;
    during.calls++;
    errno = 0;
    during.add = tw_add(dying, 1, rec_cb, NULL);
    during.add_errno = errno;
    errno = 0;
    during.periodic = tw_add_periodic(dying, 1, 1, rec_cb, NULL);
    during.periodic_errno = errno;
    errno = 0;
    during.ex = tw_add_ex(dying, 1, 0, rec_cb, count_release, NULL);
    during.ex_errno = errno;
}

static void test_add_during_destroy_is_busy(void **state)
{
    (void)state;
    memset(&during, 0, sizeof during);
    released = 0;
    dying = new_wheel(0);
    assert_int_not_equal(tw_add_ex(dying, 5, 0, rec_cb, add_during_destroy,
                                   NULL), 0);
    drop(dying);
    assert_int_equal(during.calls, 1);
    assert_int_equal(during.add, 0);
    assert_int_equal(during.add_errno, EBUSY);
    assert_int_equal(during.periodic, 0);
    assert_int_equal(during.periodic_errno, EBUSY);
    assert_int_equal(during.ex, 0);
    assert_int_equal(during.ex_errno, EBUSY);
    assert_int_equal(released, 0);
    ASSERT_NFIRES(0);
}

/* ---- tw_strerror -------------------------------------------------------- */

static void test_strerror(void **state)
{
    (void)state;
    const int codes[] = {EINVAL, ERANGE, ENOSPC, ENOMEM, EBUSY, EDEADLK,
                         EMFILE};
    const size_t n = sizeof codes / sizeof codes[0];
    for (size_t i = 0; i < n; i++) {
        const char *neg = tw_strerror(-codes[i]);
        const char *pos = tw_strerror(codes[i]);
        assert_non_null(neg);
        assert_non_null(pos);
        assert_true(strlen(neg) > 0);
        assert_string_equal(neg, pos);
        for (size_t j = 0; j < i; j++)
            assert_string_not_equal(neg, tw_strerror(-codes[j]));
    }
    const int odd[] = {0, 12345, -12345, INT_MAX, INT_MIN, INT_MIN + 1};
    for (size_t i = 0; i < sizeof odd / sizeof odd[0]; i++)
        assert_non_null(tw_strerror(odd[i]));
}

/* tw_last_error: the failure of the last failing call on this thread, set
 * with errno; a call that succeeds leaves it; another thread's failures do
 * not reach it. */
static void *fail_on_another_thread(void *w)
{
    errno = 0;
    if (tw_last_error() != 0) /* nothing failed on this thread yet */
        return w;
    if (tw_add(w, TW_MAX_DELAY + 1, rec_cb, NULL) != 0 || errno != ERANGE ||
        tw_last_error() != ERANGE)
        return w; /* wrong: reported by main */
    return NULL;
}

static void test_last_error(void **state)
{
    tw_wheel *w = new_wheel(0);
    pthread_t other;
    void *wrong = NULL;
    (void)state;
    ASSERT_FAILS_ERRNO(tw_add(w, 1, NULL, NULL), EINVAL);
    assert_int_not_equal(tw_add(w, 1, rec_cb, NULL), 0);
    assert_int_equal(tw_last_error(), EINVAL); /* success leaves it */
    assert_int_equal(pthread_create(&other, NULL, fail_on_another_thread, w), 0);
    assert_int_equal(pthread_join(other, &wrong), 0);
    assert_null(wrong);
    assert_int_equal(tw_last_error(), EINVAL); /* not the other thread's */
    ASSERT_FAILS_ERRNO(tw_add_periodic(w, 1, 0, rec_cb, NULL), EINVAL);
    ASSERT_FAILS_ERRNO(tw_add(NULL, 1, rec_cb, NULL), EINVAL);
    drop(w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_max_delay_accepted_beyond_refused),
        T(test_periodic_interval_zero),
        T(test_cap_refuses_and_touches_nothing),
        T(test_cap_from_callbacks),
        T(test_cap_zero_is_unlimited),
        T(test_bad_configs),
        T(test_config_size_from_the_future),
        T(test_null_wheel_everywhere),
        T(test_bad_arguments_leave_wheel_intact),
        T(test_release_function_limit),
        T(test_add_during_destroy_is_busy),
        T(test_strerror),
        T(test_last_error),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
