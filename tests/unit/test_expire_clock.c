/* tw_expire with a fake clock (clock_fn): whole ticks from the reference
 * point taken at tw_create, remainders carried over (no drift), a clock
 * going backwards re-bases and runs only timers already due (delay 0),
 * -ERANGE past TW_MAX_TICK runs nothing, a clock behind tw_advance
 * moves nothing, tw_timeout_ms rounding, and tw_gettime. */
#include "helpers.h"

static tw_wheel *clock_wheel(struct fake_clock *clk, uint32_t tick_us,
                             uint64_t start_tick)
{
    struct tw_config c;
    tw_config_init(&c);
    c.lock = TW_LOCK_NONE;
    c.tick_us = tick_us;
    c.clock = TW_CLOCK_MONOTONIC_COARSE; /* ignored: clock_fn is set */
    c.clock_fn = read_fake_clock;
    c.clock_context = clk;
    c.start_tick = start_tick;
    return new_wheel_cfg(&c);
}

static void test_expire_whole_ticks(void **state)
{
    (void)state;
    struct fake_clock clk = {1000000, 0};
    tw_wheel *w = clock_wheel(&clk, 1000, 0);
    assert_int_not_equal(tw_add(w, 3, rec_cb, TAG(1)), 0);
    clk.us += 999;
    assert_int_equal(tw_expire(w), 0);
    assert_int_equal(tw_now(w), 0);
    assert_true(clk.reads > 0);
    clk.us += 2000;
    assert_int_equal(tw_expire(w), 0);
    assert_int_equal(tw_now(w), 2);
    clk.us += 1;
    assert_int_equal(tw_expire(w), 1);
    assert_int_equal(tw_now(w), 3);
    ASSERT_FIRE(0, 3, 1);
    /* An unchanged clock moves nothing. */
    assert_int_equal(tw_expire(w), 0);
    assert_int_equal(tw_now(w), 3);
    CHECK(w);
    drop(w);
}

/* The reference point is the clock reading at tw_create. */
static void test_reference_taken_at_create(void **state)
{
    (void)state;
    struct fake_clock clk = {777, 0};
    tw_wheel *w = clock_wheel(&clk, 1000, 50);
    clk.us = 777 + 999;
    assert_int_equal(tw_expire(w), 0);
    assert_int_equal(tw_now(w), 50);
    clk.us = 777 + 1000;
    assert_int_equal(tw_expire(w), 0);
    assert_int_equal(tw_now(w), 51);
    drop(w);
}

static void test_remainder_carries_over(void **state)
{
    (void)state;
    struct {
        uint32_t tick_us;
        uint64_t step_us;
        uint64_t steps;
    } cases[] = {
        {1000, 1500, 1000}, /* 1.5 ticks per call */
        {7, 10, 10000},     /* 1.43 ticks per call */
        {3, 1, 3000},       /* a third of a tick per call */
        {1000, 999, 100000},
        {10000, 2500, 4000}, /* skynet: 10 ms ticks, 2.5 ms driver */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct fake_clock clk = {123456789, 0};
        tw_wheel *w = clock_wheel(&clk, cases[i].tick_us, 0);
        for (uint64_t s = 0; s < cases[i].steps; s++) {
            clk.us += cases[i].step_us;
            assert_true(tw_expire(w) >= 0);
        }
        assert_int_equal(tw_now(w),
                         cases[i].steps * cases[i].step_us / cases[i].tick_us);
        drop(w);
    }
}

/* Timers fire at their exact ticks however the clock is sampled; a
 * ten-day jump lands exactly. */
static void test_expire_fires_exact_ticks(void **state)
{
    (void)state;
    struct fake_clock clk = {0, 0};
    tw_wheel *w = clock_wheel(&clk, 1000, (UINT64_C(1) << 32) - 5);
    const uint64_t start = (UINT64_C(1) << 32) - 5;
    for (int d = 1; d <= 40; d++)
        assert_int_not_equal(tw_add(w, (uint64_t)d * 37, rec_cb, TAG(d)), 0);
    assert_int_not_equal(tw_add(w, 864000000, rec_cb, TAG(99)), 0);
    uint64_t seed = 3;
    while (tw_now(w) < start + 40 * 37) {
        clk.us += rng_next(&seed) % 20000;
        assert_true(tw_expire(w) >= 0);
    }
    ASSERT_NFIRES(40);
    for (int d = 1; d <= 40; d++)
        ASSERT_FIRE(d - 1, start + (uint64_t)d * 37, d);
    clk.us = UINT64_C(864000000) * 1000 + 999;
    assert_int_equal(tw_expire(w), 1);
    ASSERT_FIRE(40, start + 864000000, 99);
    assert_int_equal(tw_now(w), start + 864000000);
    CHECK(w);
    drop(w);
}

/* Backwards: re-base, run nothing (not even due timers), count it. */
static void test_backwards_clock_rebases(void **state)
{
    (void)state;
    const uint64_t base = 10000000;
    struct fake_clock clk = {base, 0};
    tw_wheel *w = clock_wheel(&clk, 1000, 0);
    clk.us = base + 10500;
    assert_int_equal(tw_expire(w), 0);
    assert_int_equal(tw_now(w), 10);
    assert_int_not_equal(tw_add(w, 0, rec_cb, TAG(1)), 0);
    /* added 10.5 ms in: due at tick 16, the fifth whole tick after the call */
    assert_int_not_equal(tw_add(w, 5, rec_cb, TAG(2)), 0);

    clk.us = base + 5000; /* 5.5 ms backwards: no tick, delay 0 still runs */
    assert_int_equal(tw_expire(w), 1);
    ASSERT_NFIRES(1);
    ASSERT_FIRE(0, 10, 1);
    assert_int_equal(tw_now(w), 10);
    assert_int_equal(tw_count(w), 1);
    assert_int_equal(get_stats(w).rebases, 1);
    CHECK(w);

    /* New reference: tick 10 began 500 us before the new reading, as it
     * had before the old one (the part of the tick already gone is kept). */
    clk.us = base + 4500 + 5999;
    assert_int_equal(tw_expire(w), 0);
    assert_int_equal(tw_now(w), 15);
    clk.us += 1;
    assert_int_equal(tw_expire(w), 1);
    ASSERT_FIRE(1, 16, 2);
    assert_int_equal(tw_now(w), 16);

    /* A 1 us step back re-bases too; nothing moves. */
    clk.us -= 1;
    assert_int_equal(tw_expire(w), 0);
    assert_int_equal(get_stats(w).rebases, 2);
    assert_int_equal(tw_now(w), 16);
    clk.us += 1001;
    assert_int_equal(tw_expire(w), 0);
    assert_int_equal(tw_now(w), 17);
    CHECK(w);
    drop(w);
}

/* The user also called tw_advance: a clock target below tw_now() moves
 * nothing, but due timers still run. */
static void test_clock_behind_advance(void **state)
{
    (void)state;
    struct fake_clock clk = {5000, 0};
    tw_wheel *w = clock_wheel(&clk, 1000, 0);
    assert_int_equal(tw_advance(w, 10), 0);
    assert_int_not_equal(tw_add(w, 0, rec_cb, TAG(1)), 0);
    assert_int_not_equal(tw_add(w, 1, rec_cb, TAG(2)), 0);
    clk.us += 5000;
    assert_int_equal(tw_expire(w), 1);
    ASSERT_FIRE(0, 10, 1);
    assert_int_equal(tw_now(w), 10);
    assert_int_equal(get_stats(w).rebases, 0);
    clk.us += 7000; /* 12 ticks since the reference */
    assert_int_equal(tw_expire(w), 1);
    ASSERT_FIRE(1, 11, 2);
    assert_int_equal(tw_now(w), 12);
    CHECK(w);
    drop(w);
}

static void test_expire_past_max_tick(void **state)
{
    (void)state;
    struct fake_clock clk = {0, 0};
    tw_wheel *w = clock_wheel(&clk, 1000, TW_MAX_TICK - 5);
    clk.us = 5000;
    assert_int_equal(tw_expire(w), 0);
    assert_int_equal(tw_now(w), TW_MAX_TICK);
    clk.us = 10000;
    assert_int_not_equal(tw_add(w, 0, rec_cb, TAG(1)), 0);
    assert_int_equal(tw_expire(w), -ERANGE);
    assert_int_equal(tw_now(w), TW_MAX_TICK);
    ASSERT_NFIRES(0); /* the documented exception: nothing runs */
    assert_int_equal(tw_advance(w, 0), 1); /* the next call that can run it */
    CHECK(w);
    drop(w);
}

/* ---- tw_timeout_ms ------------------------------------------------------ */

static void test_timeout_ms(void **state)
{
    (void)state;
    const uint64_t base = 1000000;
    struct fake_clock clk = {base, 0};
    tw_wheel *w = clock_wheel(&clk, 1000, 0);
    assert_int_equal(tw_timeout_ms(w), -1);
    tw_id a = tw_add(w, 5, rec_cb, TAG(1));
    assert_int_equal(tw_timeout_ms(w), 5);
    clk.us = base + 1500; /* not expired yet: 3.5 ms left, rounded up */
    assert_int_equal(tw_timeout_ms(w), 4);
    clk.us = base + 5000;
    assert_int_equal(tw_timeout_ms(w), 0);
    clk.us = base + 9000; /* late */
    assert_int_equal(tw_timeout_ms(w), 0);
    clk.us = base + 1500;
    assert_int_equal(tw_expire(w), 0); /* now 1, 500 us carried */
    assert_int_equal(tw_timeout_ms(w), 4);
    assert_int_equal(tw_cancel(w, a), 1);
    assert_int_equal(tw_timeout_ms(w), -1);
    /* added 1.5 ms in: due at tick 7, five whole ticks after the call */
    assert_int_not_equal(tw_add(w, 5, rec_cb, TAG(2)), 0);
    assert_int_equal(tw_timeout_ms(w), 6); /* 5.5 ms, rounded up */
    assert_int_not_equal(tw_add(w, 0, rec_cb, TAG(3)), 0);
    assert_int_equal(tw_timeout_ms(w), 0);
    assert_int_equal(tw_timeout_ms(NULL), -1);
    ASSERT_NFIRES(0);
    drop(w);
}

static void test_timeout_ms_tick_lengths(void **state)
{
    (void)state;
    struct {
        uint32_t tick_us;
        uint64_t delay;
        int32_t ms;
    } cases[] = {
        {10000, 3, 30},
        {1, 1500, 2},
        {1, 1000, 1},
        {1, 1001, 2},
        {1, 1, 1},
        {250, 9, 3},
        {1000, TW_MAX_DELAY, INT32_MAX},
        {TW_MAX_TICK_US, 1000, INT32_MAX},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct fake_clock clk = {42, 0};
        tw_wheel *w = clock_wheel(&clk, cases[i].tick_us, 0);
        assert_int_not_equal(tw_add(w, cases[i].delay, rec_cb, NULL), 0);
        assert_int_equal(tw_timeout_ms(w), cases[i].ms);
        drop(w);
    }
}

/* After a re-base the timeout counts from the new reference. */
static void test_timeout_ms_after_rebase(void **state)
{
    (void)state;
    struct fake_clock clk = {100000, 0};
    tw_wheel *w = clock_wheel(&clk, 1000, 0);
    clk.us = 110500;
    assert_int_equal(tw_expire(w), 0); /* now 10 */
    clk.us = 50000;
    /* re-base: tick 10 keeps its 500 us gone, so it began at 49500 us */
    assert_int_equal(tw_expire(w), 0);
    /* 2 whole ticks from the next boundary, 50500: due at tick 13, 52500 */
    assert_int_not_equal(tw_add(w, 2, rec_cb, NULL), 0);
    assert_int_equal(tw_timeout_ms(w), 3);
    clk.us = 50001;
    assert_int_equal(tw_timeout_ms(w), 3);
    clk.us = 51000;
    assert_int_equal(tw_timeout_ms(w), 2);
    drop(w);
}

static void test_real_clock(void **state)
{
    (void)state;
    uint64_t a = tw_gettime();
    uint64_t b = tw_gettime();
    assert_true(a > 0);
    assert_true(b >= a);
    /* A wheel on the real clock: a timer due later than the test can take
     * never fires, and expire returns a count, not an error. */
    struct tw_config c;
    tw_config_init(&c);
    c.lock = TW_LOCK_NONE;
    tw_wheel *w = new_wheel_cfg(&c);
    assert_int_not_equal(tw_add(w, 3600000, rec_cb, NULL), 0);
    assert_int_not_equal(tw_add(w, 0, rec_cb, TAG(1)), 0);
    assert_int_equal(tw_expire(w), 1);
    assert_int_equal(tw_expire(w), 0);
    int32_t t = tw_timeout_ms(w);
    assert_true(t > 3500000 && t <= 3600000);
    assert_int_equal(tw_expire(NULL), -EINVAL);
    drop(w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_expire_whole_ticks),
        T(test_reference_taken_at_create),
        T(test_remainder_carries_over),
        T(test_expire_fires_exact_ticks),
        T(test_backwards_clock_rebases),
        T(test_clock_behind_advance),
        T(test_expire_past_max_tick),
        T(test_timeout_ms),
        T(test_timeout_ms_tick_lengths),
        T(test_timeout_ms_after_rebase),
        T(test_real_clock),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
