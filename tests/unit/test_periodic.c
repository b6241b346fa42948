/* Fixed-rate periodic timers: no drift over 1000 periods (tick by tick, in
 * chunks, and by a jittery fake clock), missed firings all run in order each
 * at its own tick, first == 0, re-arm counts as an insertion for FIFO,
 * intervals over every level and up to TW_MAX_DELAY. */
#include "helpers.h"

static void assert_periodic_fires(size_t from, size_t count, uint64_t base,
                                  uint64_t interval, int tag)
{
    size_t k = 0;
    for (size_t i = from; i < rec.n && k < count; i++) {
        if (rec.f[i].tag != tag)
            continue;
        assert_int_equal(rec.f[i].tick, base + k * interval);
        k++;
    }
    assert_int_equal(k, count);
}

static void test_no_drift_tick_by_tick(void **state)
{
    (void)state;
    tw_wheel *w = new_wheel(3);
    tw_id p = tw_add_periodic(w, 7, 13, rec_cb, TAG(1));
    assert_int_not_equal(p, 0);
    for (uint64_t t = 0; t < 7 + 13 * 999; t++)
        assert_true(tw_advance(w, 1) >= 0);
    ASSERT_NFIRES(1000);
    assert_periodic_fires(0, 1000, 3 + 7, 13, 1);
    assert_int_equal(tw_count(w), 1);
    assert_int_equal(tw_remaining(w, p), 13);
    assert_int_equal(get_stats(w).fired, 1000);
    CHECK(w);
    drop(w);
}

static void test_no_drift_random_chunks(void **state)
{
    (void)state;
    const uint64_t intervals[] = {1, 2, 255, 256, 1000, 70000};
    uint64_t seed = 7;
    for (size_t i = 0; i < sizeof intervals / sizeof intervals[0]; i++) {
        rec_reset();
        const uint64_t iv = intervals[i];
        tw_wheel *w = new_wheel(100);
        assert_int_not_equal(tw_add_periodic(w, 5, iv, rec_cb, TAG(1)), 0);
        const uint64_t end = 100 + 5 + 999 * iv;
        while (tw_now(w) < end) {
            uint64_t left = end - tw_now(w);
            uint64_t step = rng_next(&seed) % (3 * iv + 2);
            assert_true(tw_advance(w, step < left ? step : left) >= 0);
        }
        ASSERT_NFIRES(1000);
        assert_periodic_fires(0, 1000, 105, iv, 1);
        CHECK(w);
        drop(w);
    }
}

/* A driver that is late by a jittery amount every time: fired ticks stay
 * on the grid. */
static void test_no_drift_with_late_clock(void **state)
{
    (void)state;
    struct fake_clock clk = {5000000, 0};
    tw_wheel *w = new_fake_clock_wheel(&clk);
    assert_int_not_equal(tw_add_periodic(w, 50, 50, rec_cb, TAG(1)), 0);
    uint64_t seed = 99;
    while (rec.n < 1000) {
        clk.us += 1000 + rng_next(&seed) % 97000; /* 1..98 ticks */
        assert_true(tw_expire(w) >= 0);
    }
    assert_periodic_fires(0, 1000, 50, 50, 1);
    CHECK(w);
    drop(w);
}

/* One jump over 100 periods: every firing runs, in order, interleaved with
 * one-shots by due tick. */
static void test_missed_firings_run_in_order(void **state)
{
    (void)state;
    tw_wheel *w = new_wheel(0);
    assert_int_not_equal(tw_add_periodic(w, 10, 10, rec_cb, TAG(1)), 0);
    assert_int_not_equal(tw_add(w, 25, rec_cb, TAG(2)), 0);
    assert_int_not_equal(tw_add(w, 995, rec_cb, TAG(3)), 0);
    assert_int_equal(tw_advance(w, 1000), 102);
    ASSERT_NFIRES(102);
    ASSERT_FIRE(0, 10, 1);
    ASSERT_FIRE(1, 20, 1);
    ASSERT_FIRE(2, 25, 2);
    ASSERT_FIRE(3, 30, 1);
    ASSERT_FIRE(100, 995, 3);
    ASSERT_FIRE(101, 1000, 1);
    assert_periodic_fires(0, 100, 10, 10, 1);
    assert_int_equal(tw_count(w), 1);
    CHECK(w);
    drop(w);
}

static void test_interval_one_big_jump(void **state)
{
    (void)state;
    tw_wheel *w = new_wheel((UINT64_C(1) << 32) - 2500);
    assert_int_not_equal(tw_add_periodic(w, 1, 1, rec_cb, TAG(1)), 0);
    assert_int_equal(tw_advance(w, 5000), 5000);
    assert_periodic_fires(0, 5000, (UINT64_C(1) << 32) - 2499, 1, 1);
    CHECK(w);
    drop(w);
}

/* first == 0: the first firing is due at once (start of the next call, at
 * the current tick), then every interval. */
static void test_first_zero(void **state)
{
    (void)state;
    tw_wheel *w = new_wheel(5);
    tw_id p = tw_add_periodic(w, 0, 10, rec_cb, TAG(1));
    assert_int_equal(tw_next_expiry(w), 0);
    assert_int_equal(tw_remaining(w, p), 0);
    assert_int_equal(tw_advance(w, 30), 4);
    assert_periodic_fires(0, 4, 5, 10, 1);
    assert_int_equal(tw_remaining(w, p), 10);
    CHECK(w);
    drop(w);
}

/* Every re-arm is an insertion: at a shared tick, a one-shot added before
 * the periodic's previous firing runs first; one added after runs last. */
static void test_rearm_is_insertion(void **state)
{
    (void)state;
    tw_wheel *w = new_wheel(0);
    assert_int_not_equal(tw_add_periodic(w, 10, 10, rec_cb, TAG(1)), 0);
    assert_int_not_equal(tw_add(w, 20, rec_cb, TAG(2)), 0); /* before 10 */
    assert_int_equal(tw_advance(w, 25), 3);
    assert_int_not_equal(tw_add(w, 15, rec_cb, TAG(3)), 0); /* 40, before 30 */
    assert_int_equal(tw_advance(w, 7), 1);                   /* now 32 */
    assert_int_not_equal(tw_add(w, 8, rec_cb, TAG(4)), 0);  /* 40, after 30 */
    assert_int_equal(tw_advance(w, 8), 3);
    assert_int_not_equal(tw_add(w, 10, rec_cb, TAG(5)), 0); /* 50, after 40 */
    assert_int_equal(tw_advance(w, 10), 2);
    const uint64_t ticks[] = {10, 20, 20, 30, 40, 40, 40, 50, 50};
    const int tags[] = {1, 2, 1, 1, 3, 1, 4, 1, 5};
    ASSERT_NFIRES(9);
    for (int i = 0; i < 9; i++)
        ASSERT_FIRE(i, ticks[i], tags[i]);
    CHECK(w);
    drop(w);
}

/* Intervals living at every level, including the largest one. */
static void test_intervals_at_every_level(void **state)
{
    (void)state;
    const uint64_t intervals[] = {255, 256, UINT64_C(1) << 14,
                                  (UINT64_C(1) << 20) + 3,
                                  (UINT64_C(1) << 26) - 1,
                                  UINT64_C(1) << 30, TW_MAX_DELAY};
    for (size_t i = 0; i < sizeof intervals / sizeof intervals[0]; i++) {
        rec_reset();
        const uint64_t iv = intervals[i];
        tw_wheel *w = new_wheel(77);
        tw_id p = tw_add_periodic(w, iv, iv, rec_cb, TAG(1));
        assert_int_not_equal(p, 0);
        for (int k = 1; k <= 4; k++) {
            assert_int_equal(tw_advance(w, iv - 1), 0);
            assert_int_equal(tw_remaining(w, p), 1);
            assert_int_equal(tw_advance(w, 1), 1);
            CHECK(w);
        }
        /* and four more in one jump */
        assert_int_equal(tw_advance(w, 4 * iv), 4);
        assert_periodic_fires(0, 8, 77 + iv, iv, 1);
        drop(w);
    }
}

/* Periodic and one-shots with the same due tick in a multi-period jump. */
static void test_two_periodics_same_grid(void **state)
{
    (void)state;
    tw_wheel *w = new_wheel(0);
    assert_int_not_equal(tw_add_periodic(w, 6, 6, rec_cb, TAG(1)), 0);
    assert_int_not_equal(tw_add_periodic(w, 4, 4, rec_cb, TAG(2)), 0);
    assert_int_equal(tw_advance(w, 24), 6 + 4);
    /* 4:B 6:A 8:B 12:A,B? -- at 12 A re-armed at 6, B re-armed at 8: A
     * first. At 24 A re-armed at 18, B re-armed at 20: A first. */
    const uint64_t ticks[] = {4, 6, 8, 12, 12, 16, 18, 20, 24, 24};
    const int tags[] = {2, 1, 2, 1, 2, 2, 1, 2, 1, 2};
    for (int i = 0; i < 10; i++)
        ASSERT_FIRE(i, ticks[i], tags[i]);
    drop(w);
}

/* A periodic timer made due by a callback waits on the due list with its
 * due tick kept to 46 bits; the next call runs its missed firings from
 * there. Made due at 2^46 - 16 and caught up at 2^46 + 16, it must fire at
 * -16, -9, -2, +5, +12 around the 2^46 boundary: the due tick is rebuilt
 * from the current epoch and moved back one epoch when that lands ahead of
 * now (without that step it fired once and its grid moved). */
#define EPOCH46 (UINT64_C(1) << 46)

static void add_periodic_now(tw_wheel *w, tw_id id, void *user_data)
{
    (void)id;
    (void)user_data;
    rec_push(w, id, TAG(1));
    assert_int_not_equal(tw_add_periodic(w, 0, 7, rec_cb, TAG(2)), 0);
}

static void test_catch_up_across_epoch46(void **state)
{
    (void)state;
    tw_wheel *w = new_wheel(EPOCH46 - 17);
    assert_int_not_equal(tw_add(w, 1, add_periodic_now, NULL), 0);
    assert_int_equal(tw_advance(w, 1 + 0x20), 1); /* adds P, due now */
    assert_int_equal(tw_now(w), EPOCH46 + 16);
    CHECK(w);
    assert_int_equal(tw_advance(w, 0), 5);
    ASSERT_NFIRES(6);
    ASSERT_FIRE(0, EPOCH46 - 16, 1);
    /* firings already due run with tw_now() at the call's start */
    for (int i = 0; i < 5; i++)
        ASSERT_FIRE(1 + i, EPOCH46 + 16, 2);
    assert_int_equal(tw_next_expiry(w), 19 - 16); /* the grid held */
    CHECK(w);
    drop(w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_no_drift_tick_by_tick),
        T(test_no_drift_random_chunks),
        T(test_no_drift_with_late_clock),
        T(test_missed_firings_run_in_order),
        T(test_interval_one_big_jump),
        T(test_first_zero),
        T(test_rearm_is_insertion),
        T(test_intervals_at_every_level),
        T(test_two_periodics_same_grid),
        T(test_catch_up_across_epoch46),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
