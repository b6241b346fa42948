/*
 * One test per bug found by the model test, the fuzzer, TSan or a helper's
 * review, named after what the bug was. Each failed on the code before its
 * fix. (The due-list-across-2^32 bug has its own test in test_jump.c:
 * test_due_periodic_waits_past_2_32; tw_strerror(INT_MIN) is in
 * test_limits.c: test_strerror.)
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "timer.h"

static int check_result_in_callback;
static int firings;

static tw_wheel *new_wheel(void)
{
    struct tw_config config;
    tw_config_init(&config);
    config.lock = TW_LOCK_NONE;
    tw_wheel *w = tw_create(&config);
    assert_non_null(w);
    return w;
}

/* tw_check counted a running periodic timer twice once its own callback had
 * rescheduled it (found by the model test). */
static void reschedule_self_then_check(tw_wheel *w, tw_id id, void *user_data)
{
    (void)user_data;
    firings++;
    assert_int_equal(tw_reschedule(w, id, 5), 1);
    check_result_in_callback = tw_check(w);
}

static void test_check_counts_rescheduled_running_periodic(void **state)
{
    (void)state;
    tw_wheel *w = new_wheel();
    firings = 0;
    check_result_in_callback = -1;
    tw_id id = tw_add_periodic(w, 0, 1, reschedule_self_then_check, NULL);
    assert_int_not_equal(id, 0);
    assert_int_equal(tw_advance(w, 0), 1);
    assert_int_equal(check_result_in_callback, 0);
    assert_int_equal(tw_check(w), 0);
    assert_int_equal(tw_remaining(w, id), 5);
    assert_int_equal(tw_destroy(w), 0);
}

/* A periodic timer catching up on the due list was relinked without its due
 * tick being moved on, so it re-fired the same tick forever (found by the
 * unit and model tests). */
static void reschedule_self_to_zero_once(tw_wheel *w, tw_id id, void *user_data)
{
    (void)user_data;
    if (firings++ == 0)
        assert_int_equal(tw_reschedule(w, id, 0), 1);
}

static void test_catch_up_moves_due_tick_forward(void **state)
{
    (void)state;
    tw_wheel *w = new_wheel();
    firings = 0;
    tw_id id = tw_add_periodic(w, 1, 1, reschedule_self_to_zero_once, NULL);
    assert_int_not_equal(id, 0);
    /* fires at 1, is rescheduled to "due now" (tick 1), waits for the next call */
    assert_int_equal(tw_advance(w, 10), 1);
    /* due at 1, 2, ..., 10: ten catch-up firings, then it is due at 11 */
    assert_int_equal(tw_advance(w, 0), 10);
    assert_int_equal(firings, 11);
    assert_int_equal(tw_next_expiry(w), 1);
    assert_int_equal(tw_check(w), 0);
    assert_int_equal(tw_destroy(w), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_check_counts_rescheduled_running_periodic),
        cmocka_unit_test(test_catch_up_moves_due_tick_forward),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
