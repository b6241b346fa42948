/*
 * A wheel destroyed by its own callback while other threads are inside it,
 * watched from within: this program compiles timer.c in (like
 * test_lock_bound) to read, under the lock, the counts a test needs to
 * line the threads up without sleeping.
 *
 * (a) Another thread's tw_cancel is waiting for the running callback when
 *     that callback destroys the wheel: the drive must not free the wheel
 *     until the waiter has woken and left (under AddressSanitizer, a use
 *     after free inside tw_cancel otherwise).
 * (b) Another thread is stopping the timer thread (joining it) when a
 *     callback on it destroys the wheel: that destroy is refused with
 *     -EBUSY, the stopper's join completes, and the wheel is still whole.
 * (c) A thread's tw_destroy has decided to stop the timer thread and tear
 *     the wheel down, and has not begun the stop, when a callback on the
 *     timer thread destroys the wheel: that second destroy is refused
 *     with -EBUSY and the first completes, once (a hook in timer.c holds
 *     the first destroy at that point until the callback has answered).
 */
#define TW_TEST_DESTROY_DECIDED(w) destroy_decided(w)
struct tw_wheel;
static void destroy_decided(struct tw_wheel *w);
#include "../../timer.c"

#include "thr.h"

/* ---- (a) a cancel waiting for the callback that destroys the wheel ------- */

static struct {
    tw_wheel *w;
    tw_id id;
    atomic_int started;  /* the callback runs */
    atomic_int cancelled; /* tw_cancel's result, + 10 once returned */
    atomic_int destroyed; /* on_destroy calls */
    int destroy_result;
} waiter;

static unsigned cancel_waits_now(tw_wheel *w)
{
    unsigned n = 0;
    const struct cancel_wait *wait;
    lock(w);
    for (wait = w->cancel_waits; wait; wait = wait->next)
        n++;
    unlock(w);
    return n;
}

static void destroy_after_waiter_cb(tw_wheel *w, tw_id id, void *data)
{
    (void)id, (void)data;
    atomic_store(&waiter.started, 1);
    /* the canceller is parked in tw_cancel, waiting for this callback */
    THR_WAIT_UNTIL(cancel_waits_now(w) == 1);
    waiter.destroy_result = tw_destroy(w);
}

static void *canceller_main(void *argument)
{
    (void)argument;
    THR_WAIT_UNTIL(atomic_load(&waiter.started));
    atomic_store(&waiter.cancelled, 10 + tw_cancel(waiter.w, waiter.id));
    return NULL;
}

static void count_destroyed(void *context)
{
    (void)context;
    atomic_fetch_add(&waiter.destroyed, 1);
}

static void test_cancel_waiting_when_callback_destroys(void **state)
{
    struct tw_config c;
    pthread_t canceller;
    int64_t ran;
    memset(&waiter, 0, sizeof waiter);
    tw_config_init(&c);
    c.lock = thr_lock_of(state);
    c.on_destroy = count_destroyed;
    waiter.w = tw_create(&c);
    assert_non_null(waiter.w);
    waiter.id = tw_add(waiter.w, 0, destroy_after_waiter_cb, NULL);
    assert_int_not_equal(waiter.id, 0);
    assert_int_equal(pthread_create(&canceller, NULL, canceller_main, NULL), 0);
    ran = tw_advance(waiter.w, 1); /* the wheel is gone when this returns */
    assert_int_equal(pthread_join(canceller, NULL), 0);
    assert_int_equal(ran, 1);
    assert_int_equal(waiter.destroy_result, 0);
    assert_int_equal(atomic_load(&waiter.cancelled), 10); /* a one-shot that ran: 0 */
    assert_int_equal(atomic_load(&waiter.destroyed), 1);
}

/* ---- (b) destroy on a timer thread that another thread is stopping ------- */

static struct {
    tw_wheel *w;
    atomic_int inside;   /* the callback runs on the timer thread */
    atomic_int result;   /* its tw_destroy's result, + 100 once made */
    atomic_int stopped;  /* tw_thread_stop's result, + 100 once returned */
} stopping;

static int thread_state_now(tw_wheel *w)
{
    int state;
    pthread_mutex_lock(&w->sleep_mutex);
    state = w->thread_state;
    pthread_mutex_unlock(&w->sleep_mutex);
    return state;
}

static void destroy_while_stopped_cb(tw_wheel *w, tw_id id, void *data)
{
    (void)id, (void)data;
    atomic_store(&stopping.inside, 1);
    THR_WAIT_UNTIL(thread_state_now(w) == THREAD_STOPPING);
    atomic_store(&stopping.result, 100 + tw_destroy(w));
}

static void *stopper_main(void *argument)
{
    (void)argument;
    THR_WAIT_UNTIL(atomic_load(&stopping.inside));
    atomic_store(&stopping.stopped, 100 + tw_thread_stop(stopping.w));
    return NULL;
}

static void test_destroy_on_a_timer_thread_being_stopped(void **state)
{
    pthread_t stopper;
    memset(&stopping, 0, sizeof stopping);
    stopping.w = thr_wheel(thr_lock_of(state), 1000, NULL, NULL);
    assert_int_not_equal(tw_add(stopping.w, 0, destroy_while_stopped_cb, NULL), 0);
    assert_int_not_equal(tw_add(stopping.w, 100000, destroy_while_stopped_cb, NULL), 0);
    assert_int_equal(pthread_create(&stopper, NULL, stopper_main, NULL), 0);
    assert_int_equal(tw_thread_start(stopping.w, 200), 0);
    assert_int_equal(pthread_join(stopper, NULL), 0);
    assert_int_equal(atomic_load(&stopping.result), 100 - EBUSY);
    assert_int_equal(atomic_load(&stopping.stopped), 100);
    assert_int_equal(tw_count(stopping.w), 1); /* untouched */
    assert_int_equal(tw_check(stopping.w), 0);
    thr_destroy(stopping.w);
}

/* ---- (c) a second destroy from the timer thread, in the first's gap ------ */

static struct {
    tw_wheel *w;
    atomic_int armed;    /* the hook acts for this test's wheel only */
    atomic_int inside;   /* the callback runs on the timer thread */
    atomic_int decided;  /* the first destroy has decided */
    atomic_int answered; /* the callback's tw_destroy, + 100 once made */
    atomic_int destroyed; /* on_destroy calls */
} gap;

static void destroy_decided(struct tw_wheel *w)
{
    if (!atomic_load(&gap.armed) || w != gap.w)
        return;
    atomic_store(&gap.decided, 1);
    THR_WAIT_UNTIL(atomic_load(&gap.answered)); /* the callback's turn */
}

static void second_destroy_cb(tw_wheel *w, tw_id id, void *data)
{
    (void)id, (void)data;
    atomic_store(&gap.inside, 1);
    THR_WAIT_UNTIL(atomic_load(&gap.decided));
    atomic_store(&gap.answered, 100 + tw_destroy(w));
}

static void count_gap_destroyed(void *context)
{
    (void)context;
    atomic_fetch_add(&gap.destroyed, 1);
}

static void test_second_destroy_while_the_first_stops_the_thread(void **state)
{
    struct tw_config c;
    memset(&gap, 0, sizeof gap);
    tw_config_init(&c);
    c.lock = thr_lock_of(state);
    c.on_destroy = count_gap_destroyed;
    gap.w = tw_create(&c);
    assert_non_null(gap.w);
    assert_int_not_equal(tw_add(gap.w, 0, second_destroy_cb, NULL), 0);
    assert_int_not_equal(tw_add(gap.w, 100000, second_destroy_cb, NULL), 0);
    atomic_store(&gap.armed, 1);
    assert_int_equal(tw_thread_start(gap.w, 200), 0);
    THR_WAIT_UNTIL(atomic_load(&gap.inside));
    assert_int_equal(tw_destroy(gap.w), 0); /* stops, joins and frees */
    assert_int_equal(atomic_load(&gap.answered), 100 - EBUSY);
    assert_int_equal(atomic_load(&gap.destroyed), 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        T_SPIN(test_cancel_waiting_when_callback_destroys),
        T_ADAPTIVE(test_cancel_waiting_when_callback_destroys),
        T_MUTEX(test_cancel_waiting_when_callback_destroys),
        T_SPIN(test_destroy_on_a_timer_thread_being_stopped),
        T_ADAPTIVE(test_destroy_on_a_timer_thread_being_stopped),
        T_MUTEX(test_destroy_on_a_timer_thread_being_stopped),
        T_SPIN(test_second_destroy_while_the_first_stops_the_thread),
        T_ADAPTIVE(test_second_destroy_while_the_first_stops_the_thread),
        T_MUTEX(test_second_destroy_while_the_first_stops_the_thread),
    };
    return THR_RUN(tests);
}
