/*
 * tw_cancel waiting for a callback that runs on another thread sleeps until
 * the callback is settled: it does not come back for the lock meanwhile.
 * This program compiles timer.c in with TW_NO_FUTEX, the path of every
 * platform without a futex (where the lock's own wait is a short nap), and
 * counts, through the TW_TEST_LOCK_EVENT hook, how often the cancelling
 * thread takes the lock.
 *
 * The callback holds still until the canceller's wait is registered, then
 * gives it many chances to run (yields and short sleeps, no deadline) and
 * counts its lock acquisitions over them: a wait that polled would take the
 * lock each time it ran. The verdict cannot depend on timing for a wait
 * that sleeps: it then takes the lock exactly zero times.
 *
 * Waits share one condition variable, so every wake-up must reach them
 * all: two cancellers of one running callback both return, and stopping
 * the timer thread while a cancel waits stops it (it does not sleep out
 * its hour-long period). A periodic callback's own cancel and reschedule,
 * once a cancel waiting for it has taken its timer, return 0, and that
 * cancel returns 1.
 */
#define TW_NO_FUTEX 1
#define TW_TEST_LOCK_EVENT(lock, what) lock_event((what))
static void lock_event(int what);
#include "../../timer.c"

#include "thr.h"

static _Thread_local int on_canceller; /* this thread is the canceller */
static atomic_int canceller_took;       /* its lock acquisitions */

static void lock_event(int what)
{
    if (on_canceller && what == LOCK_EV_PRODUCER_TOOK)
        atomic_fetch_add(&canceller_took, 1);
}

static struct {
    tw_wheel *w;
    tw_id id;
    atomic_int started;   /* the callback runs */
    atomic_int result;    /* tw_cancel's result, + 10 once returned */
    int took_while_waiting;
} run;

/* tw_cancel calls asleep in their wait for a callback. */
static int waits_now(tw_wheel *w)
{
    int n = 0;
    const struct cancel_wait *wait;
    lock(w);
    for (wait = w->cancel_waits; wait; wait = wait->next)
        n++;
    unlock(w);
    return n;
}

static void held_cb(tw_wheel *w, tw_id id, void *data)
{
    int before, i;
    (void)id, (void)data;
    atomic_store(&run.started, 1);
    THR_WAIT_UNTIL(waits_now(w) > 0);
    before = atomic_load(&canceller_took);
    for (i = 0; i < 200; i++) { /* chances for a polling waiter to poll */
        sched_yield();
        thr_sleep_us(100);
    }
    run.took_while_waiting = atomic_load(&canceller_took) - before;
}

static void *canceller_main(void *argument)
{
    (void)argument;
    on_canceller = 1;
    THR_WAIT_UNTIL(atomic_load(&run.started));
    atomic_store(&run.result, 10 + tw_cancel(run.w, run.id));
    return NULL;
}

static void test_cancel_sleeps_while_the_callback_runs(void **state)
{
    pthread_t canceller;
    memset(&run, 0, sizeof run);
    run.w = thr_wheel(thr_lock_of(state), 1000, NULL, NULL);
    run.id = tw_add_periodic(run.w, 1, 5, held_cb, NULL);
    assert_int_not_equal(run.id, 0);
    assert_int_equal(pthread_create(&canceller, NULL, canceller_main, NULL), 0);
    assert_int_equal(tw_advance(run.w, 1), 1);
    assert_int_equal(pthread_join(canceller, NULL), 0);
    assert_int_equal(atomic_load(&run.result), 11); /* periodic: cancelled */
    assert_int_equal(run.took_while_waiting, 0);
    assert_int_equal(tw_count(run.w), 0);
    assert_int_equal(tw_advance(run.w, 20), 0); /* never again */
    assert_int_equal(tw_check(run.w), 0);
    thr_destroy(run.w);
}

/* ---- two cancellers of one running callback ---------------------------- */

static struct {
    tw_wheel *w;
    tw_id id;
    atomic_int started;
    atomic_int results; /* sum of the cancels' results, + 10 each */
} two;

static void wait_for_two_cb(tw_wheel *w, tw_id id, void *data)
{
    (void)id, (void)data;
    atomic_store(&two.started, 1);
    THR_WAIT_UNTIL(waits_now(w) == 2);
}

static void *second_canceller_main(void *argument)
{
    (void)argument;
    THR_WAIT_UNTIL(atomic_load(&two.started));
    atomic_fetch_add(&two.results, 10 + tw_cancel(two.w, two.id));
    return NULL;
}

static void test_two_cancellers_both_return(void **state)
{
    pthread_t a, b;
    memset(&two, 0, sizeof two);
    two.w = thr_wheel(thr_lock_of(state), 1000, NULL, NULL);
    two.id = tw_add_periodic(two.w, 1, 5, wait_for_two_cb, NULL);
    assert_int_not_equal(two.id, 0);
    assert_int_equal(pthread_create(&a, NULL, second_canceller_main, NULL), 0);
    assert_int_equal(pthread_create(&b, NULL, second_canceller_main, NULL), 0);
    assert_int_equal(tw_advance(two.w, 1), 1);
    THR_WAIT_UNTIL(atomic_load(&two.results) >= 20); /* both woke */
    assert_int_equal(pthread_join(a, NULL), 0);
    assert_int_equal(pthread_join(b, NULL), 0);
    assert_int_equal(atomic_load(&two.results), 21); /* one cancelled it */
    assert_int_equal(tw_count(two.w), 0);
    thr_destroy(two.w);
}

/* ---- a periodic callback's own calls after a waiting cancel took it ----- */

/* The callback holds still until another thread's cancel waits for it:
 * that cancel has already cancelled the timer, so the callback's own
 * cancel and reschedule of its id find it dead (0), and the waiting cancel
 * returns 1; the timer is released once (timer.h, note [2]). */
static struct {
    tw_wheel *w;
    tw_id id;
    atomic_int started, result, releases;
    int own_cancel, own_reschedule;
} own;

static void own_calls_cb(tw_wheel *w, tw_id id, void *data)
{
    (void)data;
    atomic_store(&own.started, 1);
    THR_WAIT_UNTIL(waits_now(w) > 0);
    own.own_reschedule = tw_reschedule(w, id, 5);
    own.own_cancel = tw_cancel(w, id);
}

static void own_release(void *data)
{
    (void)data;
    atomic_fetch_add(&own.releases, 1);
}

static void *own_canceller_main(void *argument)
{
    (void)argument;
    THR_WAIT_UNTIL(atomic_load(&own.started));
    atomic_store(&own.result, 10 + tw_cancel(own.w, own.id));
    return NULL;
}

static void test_own_calls_after_a_waiting_cancel(void **state)
{
    pthread_t canceller;
    memset(&own, 0, sizeof own);
    own.w = thr_wheel(thr_lock_of(state), 1000, NULL, NULL);
    own.id = tw_add_ex(own.w, 1, 5, own_calls_cb, own_release, NULL);
    assert_int_not_equal(own.id, 0);
    assert_int_equal(pthread_create(&canceller, NULL, own_canceller_main, NULL), 0);
    assert_int_equal(tw_advance(own.w, 1), 1);
    assert_int_equal(pthread_join(canceller, NULL), 0);
    assert_int_equal(atomic_load(&own.result), 11);
    assert_int_equal(own.own_reschedule, 0);
    assert_int_equal(own.own_cancel, 0);
    assert_int_equal(atomic_load(&own.releases), 1);
    assert_int_equal(tw_count(own.w), 0);
    assert_int_equal(tw_advance(own.w, 20), 0); /* never again */
    assert_int_equal(tw_check(own.w), 0);
    thr_destroy(own.w);
}

/* ---- stopping the timer thread while a cancel waits --------------------- */

static struct {
    tw_wheel *w;
    tw_id id;
    atomic_int started, release, result, stopped;
    atomic_int gave_up; /* the callback stopped waiting for `release` */
} stop;

static void held_until_released_cb(tw_wheel *w, tw_id id, void *data)
{
    (void)w, (void)id, (void)data;
    atomic_store(&stop.started, 1);
    THR_WAIT_UNTIL(atomic_load(&stop.release));
    if (!atomic_load(&stop.release))
        atomic_store(&stop.gave_up, 1);
}

static void *stop_driver_main(void *argument)
{
    (void)argument;
    (void)tw_advance(stop.w, 1);
    return NULL;
}

static void *stop_canceller_main(void *argument)
{
    (void)argument;
    atomic_store(&stop.result, 10 + tw_cancel(stop.w, stop.id));
    return NULL;
}

static void *stopper_main(void *argument)
{
    (void)argument;
    atomic_store(&stop.stopped, 100 + tw_thread_stop(stop.w));
    return NULL;
}

static void test_stop_reaches_the_timer_thread(void **state)
{
    pthread_t driver, canceller, stopper;
    int stopped_while_held;
    memset(&stop, 0, sizeof stop);
    stop.w = thr_wheel(thr_lock_of(state), 1000, NULL, NULL);
    stop.id = tw_add_periodic(stop.w, 1, 5, held_until_released_cb, NULL);
    assert_int_not_equal(stop.id, 0);
    assert_int_equal(pthread_create(&driver, NULL, stop_driver_main, NULL), 0);
    THR_WAIT_UNTIL(atomic_load(&stop.started));
    assert_int_equal(pthread_create(&canceller, NULL, stop_canceller_main, NULL), 0);
    THR_WAIT_UNTIL(waits_now(stop.w) == 1);
    /* an hour's period: its first tw_expire finds the wheel driven (-EBUSY)
     * and it sleeps; only the stop's wake-up can end that sleep */
    assert_int_equal(tw_thread_start(stop.w, 3600u * 1000000u), 0);
    thr_sleep_us(20000); /* a chance to be asleep before the stop */
    assert_int_equal(pthread_create(&stopper, NULL, stopper_main, NULL), 0);
    THR_WAIT_UNTIL(atomic_load(&stop.stopped) == 100);
    /* stopped while the callback is still held: nothing else woke it */
    stopped_while_held = atomic_load(&stop.stopped) == 100 && !atomic_load(&stop.gave_up);
    atomic_store(&stop.release, 1);
    assert_int_equal(pthread_join(stopper, NULL), 0);
    assert_int_equal(pthread_join(driver, NULL), 0);
    assert_int_equal(pthread_join(canceller, NULL), 0);
    assert_int_equal(atomic_load(&stop.result), 11);
    assert_true(stopped_while_held);
    thr_destroy(stop.w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        T_SPIN(test_cancel_sleeps_while_the_callback_runs),
        T_ADAPTIVE(test_cancel_sleeps_while_the_callback_runs),
        T_MUTEX(test_cancel_sleeps_while_the_callback_runs),
        T_SPIN(test_two_cancellers_both_return),
        T_ADAPTIVE(test_two_cancellers_both_return),
        T_MUTEX(test_two_cancellers_both_return),
        T_SPIN(test_own_calls_after_a_waiting_cancel),
        T_ADAPTIVE(test_own_calls_after_a_waiting_cancel),
        T_MUTEX(test_own_calls_after_a_waiting_cancel),
        T_SPIN(test_stop_reaches_the_timer_thread),
        T_ADAPTIVE(test_stop_reaches_the_timer_thread),
        T_MUTEX(test_stop_reaches_the_timer_thread),
    };
    return THR_RUN(tests);
}
