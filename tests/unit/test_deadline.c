/*
 * Absolute time and interval changes: tw_clock_us, tw_deadline_us,
 * tw_next_deadline_us (a deadline is the first clock reading at which
 * tw_expire runs the timer) and tw_reschedule_ex.
 */
#include "helpers.h"

/* The deadline is exact: one microsecond before it tw_expire runs nothing,
 * at it the timer runs. Added 2.5 ticks into the clock, delay 5: the add
 * rounds up to the boundary at 3 ms, so it is due at 8 ms. */
static void test_deadline_is_first_reading_that_runs_it(void **state)
{
    (void)state;
    struct fake_clock clock = {0, 0};
    tw_wheel *w = new_fake_clock_wheel(&clock);
    assert_int_equal(tw_expire(w), 0); /* clock-driven from here */
    clock.us = 2500;
    assert_int_equal(tw_clock_us(w), 2500);
    tw_id id = tw_add(w, 5, rec_cb, TAG(1));
    assert_int_not_equal(id, 0);
    assert_int_equal(tw_deadline_us(w, id), 8000);
    assert_int_equal(tw_next_deadline_us(w), 8000);
    clock.us = 7999;
    assert_int_equal(tw_expire(w), 0);
    assert_int_equal(tw_deadline_us(w, id), 8000); /* unchanged by driving */
    clock.us = 8000;
    assert_int_equal(tw_expire(w), 1);
    assert_int_equal(tw_deadline_us(w, id), TW_NEVER);
    assert_int_equal(tw_next_deadline_us(w), TW_NEVER);
    drop(w);
}

/* The earliest of several, a periodic timer's next firing, and a timer
 * already due (a deadline in the past). */
static void test_next_deadline_and_periodic(void **state)
{
    (void)state;
    struct fake_clock clock = {1000000, 0};
    tw_wheel *w = new_fake_clock_wheel(&clock);
    assert_int_equal(tw_expire(w), 0);
    tw_id late = tw_add(w, 300, rec_cb, TAG(1));
    tw_id every = tw_add_periodic(w, 10, 7, rec_cb, TAG(2));
    assert_int_equal(tw_deadline_us(w, late), 1300000);
    assert_int_equal(tw_deadline_us(w, every), 1010000);
    assert_int_equal(tw_next_deadline_us(w), 1010000);
    clock.us = 1010000;
    assert_int_equal(tw_expire(w), 1);
    assert_int_equal(tw_deadline_us(w, every), 1017000);
    /* due, not yet run: its deadline has passed */
    clock.us = 1020000;
    tw_id due = tw_add(w, 0, rec_cb, TAG(3));
    assert_true(tw_deadline_us(w, due) <= 1020000);
    assert_true(tw_next_deadline_us(w) <= 1020000);
    drop(w);
}

/* A tick-driven wheel's ticks do not follow the clock: the deadline is the
 * clock now plus the ticks left, one tick length each. */
static void test_tick_driven_deadline_is_projected(void **state)
{
    (void)state;
    struct fake_clock clock = {50000, 0};
    tw_wheel *w = new_fake_clock_wheel_driven(&clock, TW_DRIVE_TICKS);
    tw_id id = tw_add(w, 4, rec_cb, TAG(1));
    assert_int_equal(tw_deadline_us(w, id), 54000);
    clock.us = 90000;
    assert_int_equal(tw_deadline_us(w, id), 94000);
    assert_int_equal(tw_advance(w, 3), 0);
    assert_int_equal(tw_next_deadline_us(w), 91000);
    drop(w);
}

static void test_deadline_bad_input(void **state)
{
    (void)state;
    tw_wheel *w = new_wheel(0);
    assert_int_equal(tw_deadline_us(NULL, 1), TW_NEVER);
    assert_int_equal(tw_next_deadline_us(NULL), TW_NEVER);
    assert_int_equal(tw_clock_us(NULL), 0);
    assert_int_equal(tw_deadline_us(w, 0), TW_NEVER);
    assert_int_equal(tw_deadline_us(w, 12345), TW_NEVER);
    assert_int_equal(tw_next_deadline_us(w), TW_NEVER);
    tw_id id = tw_add(w, 3, rec_cb, TAG(1));
    assert_int_equal(tw_cancel(w, id), 1);
    assert_int_equal(tw_deadline_us(w, id), TW_NEVER); /* stale */
    assert_true(tw_clock_us(w) > 0); /* CLOCK_MONOTONIC */
    drop(w);
}

/* ---- tw_reschedule_ex ---------------------------------------------------- */

static void test_reschedule_ex_changes_interval(void **state)
{
    (void)state;
    rec_reset();
    tw_wheel *w = new_wheel(0);
    tw_id id = tw_add_periodic(w, 2, 2, rec_cb, TAG(1));
    assert_int_equal(tw_advance(w, 2), 1); /* tick 2 */
    assert_int_equal(tw_reschedule_ex(w, id, 5, 10), 1);
    assert_int_equal(tw_remaining(w, id), 5);
    assert_int_equal(tw_advance(w, 30), 3); /* ticks 7, 17, 27 */
    ASSERT_FIRE(1, 7, 1);
    ASSERT_FIRE(2, 17, 1);
    ASSERT_FIRE(3, 27, 1);
    /* periodic to one-shot: runs once more, then its id is dead */
    assert_int_equal(tw_reschedule_ex(w, id, 1, 0), 1);
    assert_int_equal(tw_advance(w, 50), 1);
    ASSERT_FIRE(4, 33, 1);
    assert_int_equal(tw_remaining(w, id), TW_NEVER);
    assert_int_equal(tw_count(w), 0);
    /* one-shot to periodic */
    id = tw_add(w, 3, rec_cb, TAG(2));
    assert_int_equal(tw_reschedule_ex(w, id, 1, 4), 1);
    assert_int_equal(tw_advance(w, 9), 3); /* +1, +5, +9 */
    assert_int_equal(tw_count(w), 1);
    CHECK(w);
    drop(w);
}

static void test_reschedule_ex_errors(void **state)
{
    (void)state;
    tw_wheel *w = new_wheel(0);
    tw_id id = tw_add_periodic(w, 2, 2, rec_cb, TAG(1));
    assert_int_equal(tw_reschedule_ex(NULL, id, 1, 1), -EINVAL);
    assert_int_equal(tw_reschedule_ex(w, id, 1, TW_MAX_DELAY + 1), -ERANGE);
    assert_int_equal(tw_reschedule_ex(w, id, TW_MAX_DELAY + 1, 1), -ERANGE);
    assert_int_equal(tw_remaining(w, id), 2); /* untouched */
    assert_int_equal(tw_reschedule_ex(w, 0, 1, 1), 0);
    assert_int_equal(tw_reschedule_ex(w, id + 1, 1, 1), 0);
    drop(w);
}

/* From inside its own callback: a periodic timer given a new interval
 * continues on it; made a one-shot, it runs once more. */
static tw_id self_id;
static int self_runs;
static void retune_self_cb(tw_wheel *w, tw_id id, void *user_data)
{
    rec_push(w, id, user_data);
    if (++self_runs == 1)
        assert_int_equal(tw_reschedule_ex(w, self_id, 3, 3), 1);
    else if (self_runs == 3)
        assert_int_equal(tw_reschedule_ex(w, self_id, 10, 0), 1);
}

static void test_reschedule_ex_from_own_callback(void **state)
{
    (void)state;
    rec_reset();
    self_runs = 0;
    tw_wheel *w = new_wheel(0);
    self_id = tw_add_periodic(w, 1, 1, retune_self_cb, TAG(5));
    assert_int_equal(tw_advance(w, 100), 4); /* 1, 4, 7, 17 */
    ASSERT_FIRE(0, 1, 5);
    ASSERT_FIRE(1, 4, 5);
    ASSERT_FIRE(2, 7, 5);
    ASSERT_FIRE(3, 17, 5);
    assert_int_equal(tw_count(w), 0);
    CHECK(w);
    drop(w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_deadline_is_first_reading_that_runs_it),
        cmocka_unit_test(test_next_deadline_and_periodic),
        cmocka_unit_test(test_tick_driven_deadline_is_projected),
        cmocka_unit_test(test_deadline_bad_input),
        cmocka_unit_test(test_reschedule_ex_changes_interval),
        cmocka_unit_test(test_reschedule_ex_errors),
        cmocka_unit_test(test_reschedule_ex_from_own_callback),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
