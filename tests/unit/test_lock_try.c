/*
 * The lock try that tw_cancel and tw_reschedule make before their fast
 * path (timer.c, lock_try), watched through the TW_TEST_LOCK_EVENT hook
 * that tests/threads/test_lock_bound.c counts acquisitions with:
 *
 *   - every uncontended cancel or reschedule, whichever path it takes
 *     (the try that succeeds, or the mutex's lock out of line), reports
 *     exactly one producer acquisition and no wait, on every lock kind
 *     that has a lock (TW_LOCK_NONE reports nothing);
 *   - on the spin lock, a producer stands back while the driver says that
 *     it waits (driver_waiting): its try fails and it waits in the lock,
 *     fast path or not. The hook plays the driver: when the producer
 *     reports its wait, the driver is done and clears its flag.
 *
 * Single-threaded and deterministic. This program compiles timer.c in,
 * with the hook defined.
 */
#define TW_TEST_LOCK_EVENT(lock, what) lock_event((lock), (what))
struct wheel_lock;
static void lock_event(const struct wheel_lock *lock, int what);
#include "../../timer.c"

#include "helpers.h"

static struct {
    const struct wheel_lock *watched;
    int events[LOCK_EV_DRIVER_SLEEPS + 1];
    int driver_done_on_wait; /* clear driver_waiting when a producer waits */
} ev;

static void lock_event(const struct wheel_lock *lock, int what)
{
    if (lock != ev.watched || what < 0 || what > LOCK_EV_DRIVER_SLEEPS)
        return;
    ev.events[what]++;
    if (what == LOCK_EV_PRODUCER_WAITS && ev.driver_done_on_wait)
        spin_store(&((struct wheel_lock *)lock)->driver_waiting, 0u);
}

static void watch(tw_wheel *w)
{
    memset(&ev, 0, sizeof ev);
    ev.watched = &w->lock;
}

static tw_wheel *kind_wheel(int kind)
{
    struct tw_config c;
    tw_config_init(&c);
    c.lock = kind;
    return new_wheel_cfg(&c);
}

/* After one call: `took` producer acquisitions, no wait, nothing else. */
static void assert_events(int took, int waits)
{
    assert_int_equal(ev.events[LOCK_EV_PRODUCER_TOOK], took);
    assert_int_equal(ev.events[LOCK_EV_PRODUCER_WAITS], waits);
    assert_int_equal(ev.events[LOCK_EV_DRIVER_WAITS], 0);
    assert_int_equal(ev.events[LOCK_EV_DRIVER_TOOK], 0);
    memset(ev.events, 0, sizeof ev.events);
}

static void test_one_acquisition_per_call(void **state)
{
    static const int kinds[] = {TW_LOCK_ADAPTIVE, TW_LOCK_SPIN, TW_LOCK_MUTEX, TW_LOCK_NONE};
    size_t k;
    (void)state;
    for (k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
        tw_wheel *w = kind_wheel(kinds[k]);
        int took = kinds[k] != TW_LOCK_NONE;
        tw_id a = tw_add(w, 1000, rec_cb, TAG(1));
        tw_id b = tw_add(w, 1000, rec_cb, TAG(2));
        tw_id c = tw_add(w, 20, rec_cb, TAG(3));
        assert_true(a && b && c);
        watch(w);
        assert_int_equal(tw_reschedule(w, a, 2000), 1); /* in place */
        assert_events(took, 0);
        assert_int_equal(tw_reschedule(w, b, 10), 1);   /* moves now */
        assert_events(took, 0);
        assert_int_equal(tw_reschedule_ex(w, b, 15, 7), 1); /* out of line */
        assert_events(took, 0);
        assert_int_equal(tw_cancel(w, c), 1);           /* fast path */
        assert_events(took, 0);
        assert_int_equal(tw_cancel(w, c), 0);           /* dead id */
        assert_events(took, 0);
        assert_int_equal(tw_reschedule(w, c, 5), 0);
        assert_events(took, 0);
        ev.watched = NULL;
        CHECK(w);
        drop(w);
    }
}

/* Spin lock: the driver waits, so a producer's try fails and it waits. */
static void test_spin_producers_stand_back(void **state)
{
    tw_wheel *w = kind_wheel(TW_LOCK_SPIN);
    tw_id a = tw_add(w, 1000, rec_cb, TAG(1));
    tw_id b = tw_add(w, 1000, rec_cb, TAG(2));
    tw_id c = tw_add(w, 20, rec_cb, TAG(3));
    (void)state;
    assert_true(a && b && c);
    watch(w);
    ev.driver_done_on_wait = 1;

    spin_store(&w->lock.driver_waiting, 1u);
    assert_int_equal(tw_reschedule(w, a, 2000), 1); /* in place */
    assert_events(1, 1);
    assert_int_equal(spin_load(&w->lock.driver_waiting), 0u);

    spin_store(&w->lock.driver_waiting, 1u);
    assert_int_equal(tw_reschedule(w, b, 10), 1);   /* moves now */
    assert_events(1, 1);

    spin_store(&w->lock.driver_waiting, 1u);
    assert_int_equal(tw_cancel(w, c), 1);
    assert_events(1, 1);

    spin_store(&w->lock.driver_waiting, 1u);
    assert_int_equal(tw_cancel(w, c), 0);           /* dead id */
    assert_events(1, 1);

    ev.watched = NULL;
    assert_int_equal(tw_advance(w, 2000), 2);
    ASSERT_FIRE(0, 10, 2);
    ASSERT_FIRE(1, 2000, 1);
    CHECK(w);
    drop(w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_one_acquisition_per_call),
        T(test_spin_producers_stand_back),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
