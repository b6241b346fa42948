/*
 * One test per bug found by the model test, the fuzzer, TSan or a helper's
 * review, named after what the bug was. Each failed on the code before its
 * fix. (The due-list-across-2^32 bug has its own test in test_jump.c:
 * test_due_periodic_waits_past_2_32; tw_strerror(INT_MIN) is in
 * test_limits.c: test_strerror.)
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stddef.h>
#include <errno.h>
#include <sched.h>
#include <stdint.h>

#include <cmocka.h>

#include <twheel/timer.h>

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

/* While a cancelled periodic timer's release hook ran (lock dropped), its
 * id still looked live: a reschedule linked the node again just before it
 * was freed, and a second cancel returned 1 and counted it twice (found by
 * review). */
static tw_wheel *hook_wheel;
static tw_id hook_id;
static int hook_reschedule_result, hook_cancel_result;

static void revive_in_release(void *user_data)
{
    (void)user_data;
    hook_reschedule_result = tw_reschedule(hook_wheel, hook_id, 5);
    hook_cancel_result = tw_cancel(hook_wheel, hook_id);
}

static void never(tw_wheel *w, tw_id id, void *user_data)
{
    (void)w, (void)id, (void)user_data;
    fail_msg("must not fire");
}

static void test_release_hook_cannot_revive_cancelled_timer(void **state)
{
    (void)state;
    hook_wheel = new_wheel();
    hook_id = tw_add_ex(hook_wheel, 10, 10, never, revive_in_release, NULL);
    assert_int_not_equal(hook_id, 0);
    assert_int_equal(tw_cancel(hook_wheel, hook_id), 1);
    assert_int_equal(hook_reschedule_result, 0);
    assert_int_equal(hook_cancel_result, 0);
    assert_int_equal(tw_count(hook_wheel), 0);
    assert_int_equal(tw_check(hook_wheel), 0);
    assert_int_not_equal(tw_add(hook_wheel, 1, never, NULL), 0); /* reuses the node */
    assert_int_equal(tw_check(hook_wheel), 0);
    assert_int_equal(tw_next_expiry(hook_wheel), 1);
    assert_int_equal(tw_destroy(hook_wheel), 0);
}

/* tw_expire read the clock before taking the lock: a second driver holding
 * an older reading than the first took it for the clock going backwards and
 * re-based, after which timers fired early (found by review). Now the first
 * caller claims the driver role before reading, and the second is refused. */
static atomic_int reader_in_clock, other_driver_done;
static _Thread_local int slow_reader;
static atomic_ullong fake_clock_us;

static uint64_t stalling_clock(void *context)
{
    uint64_t reading = atomic_load(&fake_clock_us);
    (void)context;
    if (slow_reader) {
        atomic_store(&reader_in_clock, 1);
        while (!atomic_load(&other_driver_done))
            sched_yield();
    }
    return reading;
}

static void *slow_expire(void *wheel)
{
    slow_reader = 1;
    tw_expire(wheel);
    return NULL;
}

static void test_stale_clock_reading_does_not_rebase(void **state)
{
    (void)state;
    struct tw_config config;
    tw_config_init(&config);
    config.clock_fn = stalling_clock;
    tw_wheel *w = tw_create(&config);
    assert_non_null(w);
    pthread_t thread;
    assert_int_equal(pthread_create(&thread, NULL, slow_expire, w), 0);
    while (!atomic_load(&reader_in_clock))
        sched_yield();
    atomic_store(&fake_clock_us, 5000);
    assert_int_equal(tw_expire(w), -EBUSY /* the slow caller drives */);
    atomic_store(&other_driver_done, 1);
    assert_int_equal(pthread_join(thread, NULL), 0);
    struct tw_stats stats = {.size = sizeof stats};
    assert_int_equal(tw_get_stats(w, &stats), 0);
    assert_int_equal(stats.rebases, 0);
    assert_int_equal(tw_expire(w), 0);
    assert_int_equal(tw_now(w), 5);
    assert_int_equal(tw_destroy(w), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_check_counts_rescheduled_running_periodic),
        cmocka_unit_test(test_catch_up_moves_due_tick_forward),
        cmocka_unit_test(test_release_hook_cannot_revive_cancelled_timer),
        cmocka_unit_test(test_stale_clock_reading_does_not_rebase),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
