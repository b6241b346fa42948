/*
 * A wheel destroyed by its own callback while other threads are inside it,
 * watched from within: this program compiles timer.c in (like
 * test_lock_bound) to read, under the lock, the counts a test needs to
 * line the threads up without sleeping.
 *
 * (a) Another thread's tw_cancel is waiting for the running callback when
 *     that callback destroys the wheel: the drive must not free the wheel
 *     until the waiter has woken and left. A hook holds the woken waiter
 *     until the teardown either waits for it (right) or frees the wheel
 *     (wrong: seen through on_destroy, with the wheel's memory kept by the
 *     test's allocator so that the waiter's last steps stay harmless).
 * (b) Another thread is stopping the timer thread (joining it) when a
 *     callback on it destroys the wheel: that destroy is refused with
 *     -EBUSY, the stopper's join completes, and the wheel is still whole.
 * (c) A thread's tw_destroy has decided to stop the timer thread and tear
 *     the wheel down, and has not begun the stop, when a callback on the
 *     timer thread destroys the wheel: that second destroy is refused
 *     with -EBUSY and the first completes, once (a hook in timer.c holds
 *     the first destroy at that point until the callback has answered).
 * (d) tw_destroy from another thread while the timer thread runs a batch:
 *     the callback running then finishes, no other callback starts (a
 *     periodic one does not re-arm), and every timer goes to its release
 *     hook once: the running one on the timer thread as it ends, the rest
 *     on the destroying thread.
 * (e) A callback on the timer thread destroys the wheel (deferred) and
 *     goes on running while one or two other threads call tw_thread_stop:
 *     no hang; the stop that joins the thread frees the wheel, each stop
 *     returns 0, on_destroy is called once. With two, a hook holds the
 *     second inside tw_thread_stop until the teardown either waits for it
 *     (right) or frees the wheel (wrong, seen as in (a)).
 * (f) In the window between a deferred destroy and the end of its
 *     callback, tw_thread_start and tw_destroy from another thread answer
 *     -EBUSY, and the timer thread then frees the wheel by itself.
 * (g) A tw_thread_start has looked at `destroying` (and found the wheel
 *     whole) when a destroy comes: tw_destroy from another thread, or a
 *     shutdown callback on a tw_advance driver. A hook holds the start
 *     there until the destroy has either returned (wrong: it freed the
 *     wheel under the start) or gone to sleep waiting (right). Then the
 *     start may go on: the wheel must not be freed while the start is
 *     inside, nor with a timer thread running that it started. The
 *     test's allocator keeps the freed wheel readable, so a start that
 *     went on into it is seen (a timer thread alive in it, a count left
 *     in) and its thread is stopped before the test fails.
 * (h) A tw_thread_start after a destroy has decided: -EBUSY, no thread.
 * (i) Two tw_thread_start calls at once: the first, held after its check,
 *     keeps the second waiting; one thread runs, the second start answers
 *     -EBUSY.
 * (j) A shutdown callback on a tw_advance driver while a timer thread runs
 *     beside it: the drive stops and joins that thread as it frees the
 *     wheel; every timer released once, on_destroy once.
 */
#define TW_TEST_DESTROY_DECIDED(w) destroy_decided(w)
#define TW_TEST_TEARDOWN_WAITS(w) teardown_waits(w)
#define TW_TEST_CANCEL_WOKEN(w) cancel_woken(w)
#define TW_TEST_STOP_ENTERED(w) stop_entered(w)
#define TW_TEST_START_CHECKED(w) start_checked(w)
struct tw_wheel;
static void destroy_decided(struct tw_wheel *w);
static void teardown_waits(struct tw_wheel *w);
static void cancel_woken(struct tw_wheel *w);
static void stop_entered(struct tw_wheel *w);
static void start_checked(struct tw_wheel *w);
#include "../../timer.c"

#include "thr.h"

/* Every test's wheel counts its on_destroy calls in `*destroyed` (the
 * wheel's context); `realloc_fn` may be NULL for the libc allocator. */
static void count_destroyed(void *context)
{
    atomic_fetch_add((atomic_int *)context, 1);
}

static tw_wheel *counted_wheel(void **state, atomic_int *destroyed,
                               tw_realloc_fn *realloc_fn)
{
    struct tw_config c;
    tw_wheel *w;
    tw_config_init(&c);
    c.lock = thr_lock_of(state);
    c.on_destroy = count_destroyed;
    c.context = destroyed;
    c.realloc_fn = realloc_fn;
    w = tw_create(&c);
    assert_non_null(w);
    return w;
}

/* ---- (a) a cancel waiting for the callback that destroys the wheel ------- */

static struct {
    tw_wheel *_Atomic w;
    tw_id id;
    atomic_int started;  /* the callback runs */
    atomic_int cancelled; /* tw_cancel's result, + 10 once returned */
    atomic_int destroyed; /* on_destroy calls */
    atomic_int teardown_waited; /* the teardown waited for someone */
    atomic_int freed_under_waiter; /* the wheel was freed before the woken
                                      canceller had left */
    int destroy_result;
} waiter;

/* Frees are kept until the test has joined its threads: a wheel freed too
 * early (the bug this test looks for) stays readable, so the waiter's last
 * steps inside tw_cancel do no harm and the test can report it. */
#define KEPT_MAX 64
static void *kept[KEPT_MAX];
static int kept_count;

static void *keeping_realloc(void *pointer, size_t size, void *context)
{
    (void)context;
    if (size)
        return realloc(pointer, size);
    if (pointer && kept_count < KEPT_MAX)
        kept[kept_count++] = pointer;
    else
        free(pointer);
    return NULL;
}

static void free_kept(void)
{
    while (kept_count)
        free(kept[--kept_count]);
}

static atomic_int stop_teardown_waited;

static void teardown_waits(struct tw_wheel *w)
{
    if (w == atomic_load(&waiter.w))
        atomic_store(&waiter.teardown_waited, 1);
    atomic_store(&stop_teardown_waited, 1);
}

/* The canceller, woken, holds here until the teardown shows which way it
 * goes: waiting for the canceller (right) or freeing the wheel. */
static void cancel_woken(struct tw_wheel *w)
{
    if (w != atomic_load(&waiter.w))
        return;
    THR_WAIT_UNTIL(atomic_load(&waiter.teardown_waited) ||
                   atomic_load(&waiter.destroyed));
    if (atomic_load(&waiter.destroyed))
        atomic_store(&waiter.freed_under_waiter, 1);
}

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

static void test_cancel_waiting_when_callback_destroys(void **state)
{
    pthread_t canceller;
    int64_t ran;
    memset(&waiter, 0, sizeof waiter);
    waiter.w = counted_wheel(state, &waiter.destroyed, keeping_realloc);
    waiter.id = tw_add(waiter.w, 0, destroy_after_waiter_cb, NULL);
    assert_int_not_equal(waiter.id, 0);
    assert_int_equal(pthread_create(&canceller, NULL, canceller_main, NULL), 0);
    ran = tw_advance(waiter.w, 1); /* the wheel is gone when this returns */
    assert_int_equal(pthread_join(canceller, NULL), 0);
    atomic_store(&waiter.w, NULL);
    free_kept();
    assert_int_equal(ran, 1);
    assert_int_equal(waiter.destroy_result, 0);
    assert_int_equal(atomic_load(&waiter.cancelled), 10); /* a one-shot that ran: 0 */
    assert_int_equal(atomic_load(&waiter.destroyed), 1);
    if (atomic_load(&waiter.freed_under_waiter))
        fail_msg("the teardown freed the wheel under a woken tw_cancel");
    assert_int_equal(atomic_load(&waiter.teardown_waited), 1);
}

/* ---- (b) destroy on a timer thread that another thread is stopping ------- */

static struct {
    tw_wheel *w;
    atomic_int inside;   /* the callback runs on the timer thread */
    atomic_int result;   /* its tw_destroy's result, + 100 once made */
    atomic_int stopped;  /* tw_thread_stop's result, + 100 once returned */
} stopping;

static void destroy_while_stopped_cb(tw_wheel *w, tw_id id, void *data)
{
    (void)id, (void)data;
    atomic_store(&stopping.inside, 1);
    THR_WAIT_UNTIL(timer_thread_state(w) == THREAD_STOPPING);
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

static void race_destroy_decided(struct tw_wheel *w);

static void destroy_decided(struct tw_wheel *w)
{
    race_destroy_decided(w);
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

static void test_second_destroy_while_the_first_stops_the_thread(void **state)
{
    memset(&gap, 0, sizeof gap);
    gap.w = counted_wheel(state, &gap.destroyed, NULL);
    assert_int_not_equal(tw_add(gap.w, 0, second_destroy_cb, NULL), 0);
    assert_int_not_equal(tw_add(gap.w, 100000, second_destroy_cb, NULL), 0);
    atomic_store(&gap.armed, 1);
    assert_int_equal(tw_thread_start(gap.w, 200), 0);
    THR_WAIT_UNTIL(atomic_load(&gap.inside));
    assert_int_equal(tw_destroy(gap.w), 0); /* stops, joins and frees */
    assert_int_equal(atomic_load(&gap.answered), 100 - EBUSY);
    assert_int_equal(atomic_load(&gap.destroyed), 1);
}

/* ---- (d) destroy from another thread while the timer thread drives ------- */

#define BATCH 1000
#define BATCH_PERIODIC 10

static struct {
    pthread_t destroyer;
    atomic_int fired;             /* callbacks started */
    atomic_int released;          /* release hooks run */
    atomic_int released_on_destroyer; /* of those, on the destroying thread */
    atomic_int released_first;    /* the first callback's timer's hook runs */
    atomic_int destroyed;         /* on_destroy calls */
} batch;

static int destroying_now(tw_wheel *w)
{
    int destroying;
    lock(w);
    destroying = w->destroying;
    unlock(w);
    return destroying;
}

/* The first callback to start holds until the destroy has begun; no other
 * may start at all. */
static void batch_cb(tw_wheel *w, tw_id id, void *data)
{
    (void)id, (void)data;
    if (atomic_fetch_add(&batch.fired, 1) == 0)
        THR_WAIT_UNTIL(destroying_now(w));
}

static void batch_release(void *data)
{
    atomic_fetch_add(&batch.released, 1);
    if (pthread_equal(pthread_self(), batch.destroyer))
        atomic_fetch_add(&batch.released_on_destroyer, 1);
    if (data == &batch)
        atomic_fetch_add(&batch.released_first, 1);
}

static void test_destroy_stops_the_timer_threads_batch(void **state)
{
    tw_wheel *w;
    int i;
    memset(&batch, 0, sizeof batch);
    batch.destroyer = pthread_self();
    w = counted_wheel(state, &batch.destroyed, NULL);
    /* all due at one tick; the first to run is periodic (same-tick order is
     * the order of adding), so a re-arm after the destroy would show */
    assert_int_not_equal(tw_add_ex(w, 0, 5, batch_cb, batch_release, &batch), 0);
    for (i = 1; i < BATCH_PERIODIC; i++)
        assert_int_not_equal(tw_add_ex(w, 0, 5, batch_cb, batch_release, NULL), 0);
    for (; i < BATCH; i++)
        assert_int_not_equal(tw_add_ex(w, 0, 0, batch_cb, batch_release, NULL), 0);
    assert_int_not_equal(tw_add_ex(w, 100000, 0, batch_cb, batch_release, NULL), 0);
    assert_int_equal(tw_thread_start(w, 200), 0);
    THR_WAIT_UNTIL(atomic_load(&batch.fired) > 0);
    /* returns once the running callback has: it stops and joins the thread */
    assert_int_equal(tw_destroy(w), 0);
    assert_int_equal(atomic_load(&batch.fired), 1);
    assert_int_equal(atomic_load(&batch.released), BATCH + 1);
    assert_int_equal(atomic_load(&batch.released_first), 1);
    /* all but the running timer's, which ends on the timer thread */
    assert_int_equal(atomic_load(&batch.released_on_destroyer), BATCH);
    assert_int_equal(atomic_load(&batch.destroyed), 1);
}

/* ---- (e) stop racing a shutdown callback -------------------------------- */

static struct {
    tw_wheel *w;
    int stoppers;           /* how many threads call tw_thread_stop */
    atomic_int destroy;     /* the callback's tw_destroy, + 100 once made */
    atomic_int stopped[2];  /* each tw_thread_stop's result, + 100 */
    atomic_int released;
    atomic_int destroyed;   /* on_destroy calls */
    atomic_int freed_under_stopper; /* while the second stop was held */
} shutdown;

static _Thread_local int hold_this_stop;

/* The second stopper, counted in, holds until the teardown (run by the
 * first, which joined the thread) shows which way it goes. */
static void race_stop_entered(struct tw_wheel *w);

static void stop_entered(struct tw_wheel *w)
{
    race_stop_entered(w);
    if (!hold_this_stop)
        return;
    THR_WAIT_UNTIL(atomic_load(&stop_teardown_waited) ||
                   atomic_load(&shutdown.destroyed));
    if (atomic_load(&shutdown.destroyed))
        atomic_store(&shutdown.freed_under_stopper, 1);
}

static unsigned thread_calls_now(tw_wheel *w)
{
    unsigned n;
    mutex_lock(&w->sleep_mutex);
    n = w->thread_calls;
    mutex_unlock(&w->sleep_mutex);
    return n;
}

/* Destroys the wheel, then goes on until every stopper is inside
 * tw_thread_stop and one of them is joining this thread. */
static void shutdown_cb(tw_wheel *w, tw_id id, void *data)
{
    (void)id, (void)data;
    atomic_store(&shutdown.destroy, 100 + tw_destroy(w));
    THR_WAIT_UNTIL(timer_thread_state(w) == THREAD_STOPPING &&
                   thread_calls_now(w) == (unsigned)shutdown.stoppers);
}

static void *shutdown_stopper_main(void *argument)
{
    int which = (int)(intptr_t)argument;
    int result;
    THR_WAIT_UNTIL(atomic_load(&shutdown.destroy) != 0);
    if (which == 1) { /* once the first is joining the timer thread */
        THR_WAIT_UNTIL(timer_thread_state(shutdown.w) == THREAD_STOPPING);
        hold_this_stop = 1;
    }
    result = tw_thread_stop(shutdown.w);
    atomic_store(&shutdown.stopped[which], 100 + result);
    return NULL;
}

static void shutdown_release(void *data)
{
    (void)data;
    atomic_fetch_add(&shutdown.released, 1);
}

static void stop_racing_shutdown(void **state, int stoppers)
{
    pthread_t threads[2];
    int i;
    memset(&shutdown, 0, sizeof shutdown);
    atomic_store(&stop_teardown_waited, 0);
    shutdown.stoppers = stoppers;
    shutdown.w = counted_wheel(state, &shutdown.destroyed, keeping_realloc);
    assert_int_not_equal(tw_add_ex(shutdown.w, 0, 0, shutdown_cb, shutdown_release, NULL), 0);
    for (i = 0; i < 3; i++)
        assert_int_not_equal(tw_add_ex(shutdown.w, 100000, 7, shutdown_cb,
                                       shutdown_release, NULL), 0);
    for (i = 0; i < stoppers; i++)
        assert_int_equal(pthread_create(&threads[i], NULL, shutdown_stopper_main,
                                        (void *)(intptr_t)i), 0);
    assert_int_equal(tw_thread_start(shutdown.w, 200), 0);
    for (i = 0; i < stoppers; i++)
        assert_int_equal(pthread_join(threads[i], NULL), 0);
    free_kept();
    if (atomic_load(&shutdown.freed_under_stopper))
        fail_msg("the teardown freed the wheel under a tw_thread_stop");
    /* every stop has returned, and the wheel is gone */
    assert_int_equal(atomic_load(&shutdown.destroy), 100);
    for (i = 0; i < stoppers; i++)
        assert_int_equal(atomic_load(&shutdown.stopped[i]), 100);
    assert_int_equal(atomic_load(&shutdown.destroyed), 1);
    assert_int_equal(atomic_load(&shutdown.released), 4);
}

static void test_stop_racing_a_shutdown_callback(void **state)
{
    stop_racing_shutdown(state, 1);
}

static void test_two_stops_racing_a_shutdown_callback(void **state)
{
    stop_racing_shutdown(state, 2);
}

/* ---- (f) calls in the window of a deferred destroy ---------------------- */

static struct {
    tw_wheel *w;
    atomic_int destroy;  /* the callback's tw_destroy, + 100 once made */
    atomic_int probed;   /* the other thread's calls have answered */
    int start, second_destroy;
    atomic_int destroyed;
} window;

static void window_cb(tw_wheel *w, tw_id id, void *data)
{
    (void)id, (void)data;
    atomic_store(&window.destroy, 100 + tw_destroy(w));
    THR_WAIT_UNTIL(atomic_load(&window.probed));
}

static void test_calls_in_a_deferred_destroys_window(void **state)
{
    memset(&window, 0, sizeof window);
    window.w = counted_wheel(state, &window.destroyed, NULL);
    assert_int_not_equal(tw_add(window.w, 0, window_cb, NULL), 0);
    assert_int_equal(tw_thread_start(window.w, 200), 0);
    THR_WAIT_UNTIL(atomic_load(&window.destroy) != 0);
    window.start = tw_thread_start(window.w, 200);
    window.second_destroy = tw_destroy(window.w);
    atomic_store(&window.probed, 1);
    /* the timer thread frees the wheel once the callback returns */
    THR_WAIT_UNTIL(atomic_load(&window.destroyed) == 1);
    assert_int_equal(atomic_load(&window.destroy), 100);
    assert_int_equal(window.start, -EBUSY);
    assert_int_equal(window.second_destroy, -EBUSY);
    assert_int_equal(atomic_load(&window.destroyed), 1);
}

/* ---- (g) a start racing a destroy --------------------------------------- */

static struct {
    tw_wheel *_Atomic w;
    int from_callback;       /* the destroy comes from a shutdown callback on
                                a tw_advance driver, else from tw_destroy */
    int start_after_decision; /* (h): the start comes once the destroy has
                                 decided, and is not held */
    atomic_long destroyer;   /* the destroying thread's kernel id */
    atomic_int checked;      /* the start has looked at `destroying` */
    atomic_int decided;      /* the destroy has decided */
    atomic_int stop_entered; /* the destroy is inside stop_thread */
    atomic_int start;        /* tw_thread_start's result, + 100 once made */
    atomic_int destroy;      /* tw_destroy's result (or the callbacks
                                tw_advance ran), + 100 once returned */
    atomic_int destroyed;    /* on_destroy calls */
    atomic_int freed_busy;   /* the wheel was freed with a timer thread in
                                it or a start or stop counted in */
} race;

static void race_destroy_decided(struct tw_wheel *w)
{
    if (w != atomic_load(&race.w))
        return;
    atomic_store(&race.decided, 1);
    if (race.start_after_decision) /* the start answers first */
        THR_WAIT_UNTIL(atomic_load(&race.start) != 0);
}

static void race_stop_entered(struct tw_wheel *w)
{
    if (w == atomic_load(&race.w))
        atomic_store(&race.stop_entered, 1);
}

/* The start, past its check, holds until the destroy has returned or is
 * asleep inside stop_thread (waiting for this start to let go). */
static void two_starts_checked(struct tw_wheel *w);

static void start_checked(struct tw_wheel *w)
{
    two_starts_checked(w);
    if (w != atomic_load(&race.w) || race.start_after_decision)
        return;
    atomic_store(&race.checked, 1);
    THR_WAIT_UNTIL(atomic_load(&race.destroy) != 0 ||
                   (atomic_load(&race.stop_entered) &&
                    thr_tid_asleep(atomic_load(&race.destroyer))));
}

/* Keeps the freed wheel (see keeping_realloc), noting what was still in it
 * when it was freed. */
static void *race_realloc(void *pointer, size_t size, void *context)
{
    tw_wheel *w = pointer;
    if (!size && w && w == atomic_load(&race.w) &&
        (w->thread_state != THREAD_IDLE || w->thread_calls != 0))
        atomic_store(&race.freed_busy, 1);
    return keeping_realloc(pointer, size, context);
}

static void race_shutdown_cb(tw_wheel *w, tw_id id, void *data)
{
    (void)id, (void)data;
    assert_int_equal(tw_destroy(w), 0); /* deferred to the drive's end */
}

static void *race_starter_main(void *argument)
{
    (void)argument;
    if (race.start_after_decision)
        THR_WAIT_UNTIL(atomic_load(&race.decided));
    atomic_store(&race.start, 100 + tw_thread_start(atomic_load(&race.w), 200));
    return NULL;
}

static void *race_destroyer_main(void *argument)
{
    tw_wheel *w = argument;
    atomic_store(&race.destroyer, thr_tid());
    if (race.from_callback)
        atomic_store(&race.destroy, 100 + (int)tw_advance(w, 1));
    else
        atomic_store(&race.destroy, 100 + tw_destroy(w));
    return NULL;
}

/* A timer thread started in a wheel already freed (kept by the test's
 * allocator) is stopped the way stop_thread would, so that a failing run
 * ends cleanly. */
static int stop_stray_thread(tw_wheel *w)
{
    int stray = w->thread_state == THREAD_RUNNING;
    if (stray) {
        w->thread_state = THREAD_STOPPING;
        cond_broadcast(&w->wake);
        thread_join(&w->thread);
    }
    return stray || w->thread_calls != 0;
}

static void start_racing_destroy(void **state, int from_callback,
                                 int start_after_decision)
{
    pthread_t starter, destroyer;
    tw_wheel *w;
    memset(&race, 0, sizeof race);
    race.from_callback = from_callback;
    race.start_after_decision = start_after_decision;
    w = counted_wheel(state, &race.destroyed, race_realloc);
    assert_int_not_equal(tw_add(w, from_callback ? 1 : 100000,
                                race_shutdown_cb, NULL), 0);
    atomic_store(&race.w, w);
    thr_create(&starter, race_starter_main, NULL);
    if (!start_after_decision)
        THR_WAIT_UNTIL(atomic_load(&race.checked));
    thr_create(&destroyer, race_destroyer_main, w);
    thr_join(starter);
    thr_join(destroyer);
    atomic_store(&race.w, NULL);
    if (stop_stray_thread(w)) {
        free_kept();
        fail_msg("tw_thread_start went on in a wheel that tw_destroy had freed "
                 "(a timer thread alive or a count left in it after both returned)");
    }
    free_kept();
    if (atomic_load(&race.freed_busy))
        fail_msg("the wheel was freed with a timer thread running or a start inside");
    assert_int_equal(atomic_load(&race.destroy), from_callback ? 101 : 100);
    assert_int_equal(atomic_load(&race.start), start_after_decision ? 100 - EBUSY : 100);
    assert_int_equal(atomic_load(&race.destroyed), 1);
}

static void test_start_racing_destroy(void **state)
{
    start_racing_destroy(state, 0, 0);
}

static void test_start_racing_a_shutdown_callback(void **state)
{
    start_racing_destroy(state, 1, 0);
}

static void test_start_after_the_destroy_decided(void **state)
{
    start_racing_destroy(state, 0, 1);
}

/* ---- (i) two starts at once --------------------------------------------- */

static struct {
    tw_wheel *_Atomic w;
    atomic_int held;      /* a start is held after its check */
    atomic_long second;   /* the second starter's kernel id, once it runs */
    atomic_int results[2]; /* each start's result, + 100 once made */
} starts;

/* The first start to get here holds until the second is asleep, waiting
 * for `control`, or has answered. */
static void two_starts_checked(struct tw_wheel *w)
{
    if (w != atomic_load(&starts.w) || atomic_exchange(&starts.held, 1))
        return;
    THR_WAIT_UNTIL(atomic_load(&starts.second) != 0);
    THR_WAIT_UNTIL(atomic_load(&starts.results[1]) != 0 ||
                   thr_tid_asleep(atomic_load(&starts.second)));
}

static void *second_starter_main(void *argument)
{
    (void)argument;
    THR_WAIT_UNTIL(atomic_load(&starts.held));
    atomic_store(&starts.second, thr_tid());
    atomic_store(&starts.results[1], 100 + tw_thread_start(atomic_load(&starts.w), 200));
    return NULL;
}

static void test_two_starts_at_once(void **state)
{
    pthread_t second;
    tw_wheel *w = thr_wheel(thr_lock_of(state), 1000, NULL, NULL);
    memset(&starts, 0, sizeof starts);
    atomic_store(&starts.w, w);
    thr_create(&second, second_starter_main, NULL);
    atomic_store(&starts.results[0], 100 + tw_thread_start(w, 200));
    thr_join(second);
    atomic_store(&starts.w, NULL);
    assert_int_equal(atomic_load(&starts.results[0]), 100);
    assert_int_equal(atomic_load(&starts.results[1]), 100 - EBUSY);
    assert_int_equal(timer_thread_state(w), THREAD_RUNNING);
    assert_int_equal(tw_thread_stop(w), 0);
    assert_int_equal(timer_thread_state(w), THREAD_IDLE);
    thr_destroy(w);
}

/* ---- (j) a shutdown on a tw_advance driver beside a timer thread -------- */

static struct {
    tw_wheel *_Atomic w;
    atomic_int released;
    atomic_int destroyed;
    atomic_int thread_ran_at_free; /* the timer thread still ran then */
} beside;

static void beside_release(void *data)
{
    (void)data;
    atomic_fetch_add(&beside.released, 1);
}

static void beside_shutdown_cb(tw_wheel *w, tw_id id, void *data)
{
    (void)id, (void)data;
    assert_int_equal(timer_thread_state(w), THREAD_RUNNING);
    assert_int_equal(tw_destroy(w), 0);
}

static void *beside_realloc(void *pointer, size_t size, void *context)
{
    tw_wheel *w = pointer;
    if (!size && w && w == atomic_load(&beside.w))
        atomic_store(&beside.thread_ran_at_free, w->thread_state != THREAD_IDLE);
    return keeping_realloc(pointer, size, context);
}

static void test_shutdown_on_advance_beside_a_timer_thread(void **state)
{
    struct tw_config c;
    tw_wheel *w;
    int64_t result;
    int i;
    memset(&beside, 0, sizeof beside);
    tw_config_init(&c);
    c.lock = thr_lock_of(state);
    c.on_destroy = count_destroyed;
    c.context = &beside.destroyed;
    c.realloc_fn = beside_realloc;
    w = tw_create(&c);
    assert_non_null(w);
    atomic_store(&beside.w, w);
    assert_int_not_equal(tw_add_ex(w, 1, 0, beside_shutdown_cb, beside_release, NULL), 0);
    for (i = 0; i < 5; i++)
        assert_int_not_equal(tw_add_ex(w, 100000, 3, beside_shutdown_cb, beside_release,
                                       NULL), 0);
    /* a long period: its drives take no part, but its first one, at
     * start, runs nothing and may hold the drive as tw_advance comes:
     * -EBUSY then, with nothing done, so the advance tries again */
    assert_int_equal(tw_thread_start(w, 1000000), 0);
    for (i = 0; (result = tw_advance(w, 1)) == -EBUSY && i < 100000; i++)
        thr_sleep_us(100);
    assert_int_equal(result, 1); /* stops the thread, frees the wheel */
    assert_int_equal(atomic_load(&beside.destroyed), 1);
    assert_int_equal(atomic_load(&beside.released), 6);
    assert_int_equal(atomic_load(&beside.thread_ran_at_free), 0);
    atomic_store(&beside.w, NULL);
    free_kept();
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
        T_SPIN(test_destroy_stops_the_timer_threads_batch),
        T_ADAPTIVE(test_destroy_stops_the_timer_threads_batch),
        T_MUTEX(test_destroy_stops_the_timer_threads_batch),
        T_SPIN(test_stop_racing_a_shutdown_callback),
        T_ADAPTIVE(test_stop_racing_a_shutdown_callback),
        T_MUTEX(test_stop_racing_a_shutdown_callback),
        T_SPIN(test_two_stops_racing_a_shutdown_callback),
        T_ADAPTIVE(test_two_stops_racing_a_shutdown_callback),
        T_MUTEX(test_two_stops_racing_a_shutdown_callback),
        T_SPIN(test_calls_in_a_deferred_destroys_window),
        T_ADAPTIVE(test_calls_in_a_deferred_destroys_window),
        T_MUTEX(test_calls_in_a_deferred_destroys_window),
        T_SPIN(test_start_racing_destroy),
        T_ADAPTIVE(test_start_racing_destroy),
        T_MUTEX(test_start_racing_destroy),
        T_SPIN(test_start_racing_a_shutdown_callback),
        T_ADAPTIVE(test_start_racing_a_shutdown_callback),
        T_MUTEX(test_start_racing_a_shutdown_callback),
        T_SPIN(test_start_after_the_destroy_decided),
        T_ADAPTIVE(test_start_after_the_destroy_decided),
        T_MUTEX(test_start_after_the_destroy_decided),
        T_SPIN(test_two_starts_at_once),
        T_ADAPTIVE(test_two_starts_at_once),
        T_MUTEX(test_two_starts_at_once),
        T_SPIN(test_shutdown_on_advance_beside_a_timer_thread),
        T_ADAPTIVE(test_shutdown_on_advance_beside_a_timer_thread),
        T_MUTEX(test_shutdown_on_advance_beside_a_timer_thread),
    };
    return THR_RUN(tests);
}
