/* tw_add_us and tw_reschedule_us: a delay in microseconds of the wheel's
 * clock. On a clock-driven wheel the timer is due at the first tick that
 * begins at or after the reading plus the delay (never early, less than a
 * tick late), where the delay rounded up to whole ticks can come up to two
 * ticks late; where delays count from tw_now(), whole ticks rounded up;
 * 0 is delay 0; the range and NULL answers; a move keeps the interval. */
#include "helpers.h"

static tw_wheel *clock_wheel(struct fake_clock *clk, uint32_t tick_us)
{
    return new_fake_clock_wheel_ticks(clk, TW_DRIVE_CLOCK, TW_LOCK_NONE, tick_us);
}

/* Many readings inside ticks and many delays: each timer's deadline lies
 * at or past reading + delay and less than a tick after it, and it fires
 * at that reading, not one microsecond before. tw_add_ex with the delay
 * rounded up to ticks misses that bound on some of the same inputs. */
static void test_less_than_a_tick_late(void **state)
{
    (void)state;
    static const uint32_t ticks[] = {1000, 333, 100000, 7, 1};
    uint64_t seed = 0x5eed;
    int whole_ticks_late = 0;
    for (size_t t = 0; t < sizeof ticks / sizeof ticks[0]; t++) {
        uint32_t tick_us = ticks[t];
        struct fake_clock clk = {1000000007, 0};
        tw_wheel *w = clock_wheel(&clk, tick_us);
        for (int i = 0; i < 2000; i++) {
            uint64_t delay_us = 1 + rng_next(&seed) % (20ull * tick_us);
            uint64_t target, deadline, rounded;
            tw_id id, whole;
            clk.us += rng_next(&seed) % (3ull * tick_us); /* anywhere in a tick */
            assert_true(tw_expire(w) >= 0);
            clk.us += rng_next(&seed) % tick_us; /* the wheel lags a little */
            target = clk.us + delay_us;
            id = tw_add_us(w, delay_us, 0, rec_cb, NULL, TAG(1));
            assert_int_not_equal(id, 0);
            deadline = tw_deadline_us(w, id);
            assert_true(deadline >= target);
            assert_true(deadline - target < tick_us);
            whole = tw_add_ex(w, (delay_us + tick_us - 1) / tick_us, 0, rec_cb, NULL, TAG(2));
            rounded = tw_deadline_us(w, whole);
            assert_true(rounded >= deadline);
            whole_ticks_late += rounded - target >= tick_us;
            /* fires at its deadline, not before */
            size_t before = rec.n;
            uint64_t resume = clk.us;
            clk.us = deadline - 1;
            assert_true(tw_expire(w) >= 0);
            for (size_t k = before; k < rec.n; k++)
                assert_int_not_equal(rec.f[k].id, id);
            clk.us = deadline;
            assert_true(tw_expire(w) >= 0);
            assert_int_equal(tw_deadline_us(w, id), TW_NEVER); /* it ran */
            tw_cancel(w, whole);
            assert_true(clk.us >= resume);
            rec_reset();
        }
        CHECK(w);
        drop(w);
    }
    assert_true(whole_ticks_late > 0);
}

/* A tick-driven wheel: whole ticks, rounded up; AUTO before any drive:
 * the same, exact from now. */
static void test_where_delays_count_from_now(void **state)
{
    (void)state;
    struct tw_config c;
    tw_config_init(&c);
    c.lock = TW_LOCK_NONE;
    c.drive = TW_DRIVE_TICKS;
    tw_wheel *w = new_wheel_cfg(&c);
    assert_int_not_equal(tw_add_us(w, 2500, 0, rec_cb, NULL, TAG(1)), 0);
    assert_int_not_equal(tw_add_us(w, 3000, 0, rec_cb, NULL, TAG(2)), 0);
    assert_int_not_equal(tw_add_us(w, 1, 0, rec_cb, NULL, TAG(3)), 0);
    assert_int_equal(tw_advance(w, 1), 1);
    ASSERT_FIRE(0, 1, 3);
    assert_int_equal(tw_advance(w, 1), 0);
    assert_int_equal(tw_advance(w, 1), 2);
    ASSERT_FIRE(1, 3, 1);
    ASSERT_FIRE(2, 3, 2);
    CHECK(w);
    drop(w);

    struct fake_clock clk = {5000500, 0};
    w = new_fake_clock_wheel(&clk); /* AUTO, 1 ms ticks */
    clk.us += 300;
    tw_id id = tw_add_us(w, 1500, 0, rec_cb, NULL, TAG(4));
    assert_int_equal(tw_remaining(w, id), 2);
    assert_int_equal(tw_deadline_us(w, id), clk.us + 2000);
    drop(w);
}

/* 0 is delay 0 (the next drive runs it); NULL wheel and callback; ERANGE
 * past TW_MAX_DELAY ticks, in microseconds. */
static void test_zero_and_errors(void **state)
{
    (void)state;
    struct fake_clock clk = {1000, 0};
    tw_wheel *w = clock_wheel(&clk, 1000);
    clk.us += 500;
    assert_int_not_equal(tw_add_us(w, 0, 0, rec_cb, NULL, TAG(1)), 0);
    assert_int_equal(tw_expire(w), 1);
    ASSERT_FAILS_ERRNO(tw_add_us(NULL, 5, 0, rec_cb, NULL, NULL), EINVAL);
    ASSERT_FAILS_ERRNO(tw_add_us(w, 5, 0, NULL, NULL, NULL), EINVAL);
    ASSERT_FAILS_ERRNO(tw_add_us(w, (uint64_t)TW_MAX_DELAY * 1000 + 1, 0, rec_cb, NULL, NULL),
                       ERANGE);
    ASSERT_FAILS_ERRNO(tw_add_us(w, UINT64_MAX, 0, rec_cb, NULL, NULL), ERANGE);
    assert_int_equal(tw_reschedule_us(NULL, 1, 5), -EINVAL);
    assert_int_equal(tw_reschedule_us(w, 12345, 5), 0);
    tw_id id = tw_add(w, 10, rec_cb, TAG(2));
    uint64_t deadline = tw_deadline_us(w, id);
    assert_int_equal(tw_reschedule_us(w, id, UINT64_MAX), -ERANGE);
    assert_int_equal(tw_deadline_us(w, id), deadline); /* untouched */
    CHECK(w);
    drop(w);
}

/* A move in microseconds lands as an add would, and a periodic timer keeps
 * its interval from the new due tick. */
static void test_reschedule_us(void **state)
{
    (void)state;
    struct fake_clock clk = {2000000, 0};
    tw_wheel *w = clock_wheel(&clk, 1000);
    tw_id id = tw_add_periodic(w, 50, 10, rec_cb, TAG(7));
    clk.us += 400; /* mid-tick */
    assert_int_equal(tw_reschedule_us(w, id, 1500), 1);
    uint64_t deadline = tw_deadline_us(w, id);
    assert_true(deadline >= clk.us + 1500 && deadline - (clk.us + 1500) < 1000);
    assert_int_equal(deadline, 2000000 + 2000); /* the boundary at 1.9 ms: 2 ms */
    clk.us = deadline;
    assert_int_equal(tw_expire(w), 1);
    assert_int_equal(tw_remaining(w, id), 10);
    CHECK(w);
    drop(w);
}

/* After tw_advance has moved now() past the clock, a delay in
 * microseconds counts from now(), as a delay in ticks does: it never lands
 * behind the wheel, where the next tw_expire would run it early. */
static void test_after_an_advance_past_the_clock(void **state)
{
    (void)state;
    struct fake_clock clk = {1000000, 0};
    tw_wheel *w = clock_wheel(&clk, 100000); /* 100 ms ticks */
    assert_int_equal(tw_advance(w, 3), 0);   /* now 3, the clock at tick 0 */
    tw_id us = tw_add_us(w, 200000, 0, rec_cb, NULL, TAG(1));
    tw_id ticks = tw_add(w, 2, rec_cb, TAG(2));
    assert_int_equal(tw_remaining(w, us), 2);
    assert_int_equal(tw_remaining(w, us), tw_remaining(w, ticks));
    clk.us += 150000;
    assert_int_equal(tw_expire(w), 0); /* 150 ms into a 200 ms delay */
    CHECK(w);
    drop(w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_less_than_a_tick_late),
        T(test_where_delays_count_from_now),
        T(test_after_an_advance_past_the_clock),
        T(test_zero_and_errors),
        T(test_reschedule_us),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
