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

static int cancel_waits_now(tw_wheel *w)
{
    int waiting;
    lock(w);
    waiting = w->cancel_waits != NULL;
    unlock(w);
    return waiting;
}

static void held_cb(tw_wheel *w, tw_id id, void *data)
{
    int before, i;
    (void)id, (void)data;
    atomic_store(&run.started, 1);
    THR_WAIT_UNTIL(cancel_waits_now(w));
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        T_SPIN(test_cancel_sleeps_while_the_callback_runs),
        T_ADAPTIVE(test_cancel_sleeps_while_the_callback_runs),
        T_MUTEX(test_cancel_sleeps_while_the_callback_runs),
    };
    return THR_RUN(tests);
}
