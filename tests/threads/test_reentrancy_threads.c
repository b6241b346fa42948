/*
 * The re-entrancy contract across threads (timer.h "re-entrancy", README
 * "Re-entrancy"): calls made from another thread while a callback or a
 * release hook runs, calls made on the timer thread itself, and the
 * regression for "tw_destroy that returns -EBUSY has already stopped the
 * timer thread". The single-thread cells are in tests/unit/test_reentrancy.c.
 *
 * A worker thread enters the context (a callback inside tw_advance, a
 * release hook inside tw_cancel or tw_destroy) and waits there until the
 * test thread, the "other thread", has made its call. Only the test thread
 * asserts (see thr.h).
 */
#include "thr.h"

enum context {
    IN_CALLBACK,     /* a one-shot's callback, inside tw_advance */
    IN_DRIVER_HOOK,  /* the release hook after that callback */
    IN_CANCEL_HOOK,  /* a release hook run by tw_cancel from plain code */
    IN_DESTROY_HOOK, /* a release hook run by tw_destroy */
    CONTEXTS
};

static const char *const context_names[CONTEXTS] = {
    "callback", "hook run by the driver", "hook run by tw_cancel",
    "hook run by tw_destroy",
};

/* tw_cancel of the timer whose callback runs (it waits for the callback)
 * is covered by test_races.c's cancel-versus-dispatch tests. */
enum call {
    CALL_ADD, CALL_ADD_PERIODIC, CALL_CANCEL_OTHER, CALL_RESCHEDULE_OTHER,
    CALL_REMAINING_OTHER, CALL_ADVANCE, CALL_EXPIRE, CALL_DESTROY,
    CALL_THREAD_START, CALL_THREAD_STOP, CALL_NEXT_EXPIRY, CALL_TIMEOUT_MS,
    CALL_NOW, CALL_COUNT, CALL_TICK_US, CALL_GET_STATS, CALL_CHECK, CALLS
};

static const char *const call_names[CALLS] = {
    "tw_add_ex", "tw_add_periodic", "tw_cancel(other)", "tw_reschedule(other)",
    "tw_remaining(other)", "tw_advance", "tw_expire", "tw_destroy",
    "tw_thread_start", "tw_thread_stop", "tw_next_expiry", "tw_timeout_ms",
    "tw_now", "tw_count", "tw_tick_us", "tw_get_stats", "tw_check",
};

#define ANY_ID INT64_MIN       /* a valid id */
#define BUSY_ID (INT64_MIN + 1) /* 0 with errno EBUSY */
#define NON_NEGATIVE (INT64_MIN + 2)
#define FINITE (INT64_MIN + 3) /* not TW_NEVER */

static const int64_t table[CALLS][CONTEXTS] = {
    /*                        callback  driver hook cancel hook   destroy hook */
    [CALL_ADD] =             {ANY_ID,   ANY_ID,     ANY_ID,       BUSY_ID},
    [CALL_ADD_PERIODIC] =    {ANY_ID,   ANY_ID,     ANY_ID,       BUSY_ID},
    [CALL_CANCEL_OTHER] =    {1,        1,          1,            1},
    [CALL_RESCHEDULE_OTHER] ={1,        1,          1,            0},
    [CALL_REMAINING_OTHER] = {FINITE,   FINITE,     FINITE,       FINITE},
    [CALL_ADVANCE] =         {-EBUSY,   -EBUSY,     NON_NEGATIVE, -EBUSY},
    [CALL_EXPIRE] =          {-EBUSY,   -EBUSY,     NON_NEGATIVE, -EBUSY},
    [CALL_DESTROY] =         {-EBUSY,   -EBUSY,     -EBUSY,       -EBUSY},
    [CALL_THREAD_START] =    {0,        0,          0,            -EBUSY},
    [CALL_THREAD_STOP] =     {0,        0,          0,            0},
    [CALL_NEXT_EXPIRY] =     {FINITE,   FINITE,     FINITE,       FINITE},
    [CALL_TIMEOUT_MS] =      {NON_NEGATIVE, NON_NEGATIVE, NON_NEGATIVE, NON_NEGATIVE},
    [CALL_NOW] =             {1,        1,          0,            0},
    [CALL_COUNT] =           {1,        1,          1,            1},
    [CALL_TICK_US] =         {1000,     1000,       1000,         1000},
    [CALL_GET_STATS] =       {0,        0,          0,            0},
    [CALL_CHECK] =           {0,        0,          0,            0},
};

enum datum { SELF, OTHER, ADDED, DATUMS };

static struct {
    tw_wheel *wheel;
    enum context context;
    tw_id self, other;
    atomic_int inside;  /* the worker is in the context */
    atomic_int done;    /* the other thread's call has returned */
    atomic_int timed_out;
    atomic_int releases[DATUMS];
} cell;

static _Atomic uint64_t clock_us;

static void noop_cb(tw_wheel *w, tw_id id, void *user_data)
{
    (void)w, (void)id, (void)user_data;
}

static atomic_int fired_after;
static void count_cb(tw_wheel *w, tw_id id, void *user_data)
{
    (void)w, (void)id, (void)user_data;
    atomic_fetch_add(&fired_after, 1);
}

static void count_release(void *user_data)
{
    atomic_fetch_add(&cell.releases[(int)(uintptr_t)user_data], 1);
}

/* The worker's side of the handshake: say we are inside, wait for the
 * other thread's call to return. */
static void wait_inside(void)
{
    atomic_store(&cell.inside, 1);
    if (!thr_wait_int(&cell.done, 1))
        atomic_store(&cell.timed_out, 1);
}

static void waiting_cb(tw_wheel *w, tw_id id, void *user_data)
{
    (void)w, (void)id, (void)user_data;
    if (cell.context == IN_CALLBACK)
        wait_inside();
}

static void waiting_release(void *user_data)
{
    count_release(user_data);
    if ((int)(uintptr_t)user_data == SELF)
        wait_inside();
}

static void *worker(void *argument)
{
    (void)argument;
    switch (cell.context) {
    case IN_CALLBACK:
    case IN_DRIVER_HOOK: /* a timer thread may hold the driver role a moment */
        while (tw_advance(cell.wheel, 1) == -EBUSY)
            sched_yield();
        break;
    case IN_CANCEL_HOOK:
        tw_cancel(cell.wheel, cell.self);
        break;
    case IN_DESTROY_HOOK:
        tw_destroy(cell.wheel);
        break;
    case CONTEXTS:
        break;
    }
    return NULL;
}

static int64_t make_call(tw_wheel *w, enum call call, int *error, int *started)
{
    tw_id id;
    errno = 0;
    switch (call) {
    case CALL_ADD:
        id = tw_add_ex(w, 3, 0, noop_cb, count_release, (void *)(uintptr_t)ADDED);
        *error = errno;
        return id ? ANY_ID : 0;
    case CALL_ADD_PERIODIC:
        id = tw_add_periodic(w, 3, 7, noop_cb, NULL);
        *error = errno;
        return id ? ANY_ID : 0;
    case CALL_CANCEL_OTHER:
        return tw_cancel(w, cell.other);
    case CALL_REMAINING_OTHER:
        return (int64_t)tw_remaining(w, cell.other);
    case CALL_THREAD_STOP:
        return tw_thread_stop(w);
    case CALL_TIMEOUT_MS:
        return tw_timeout_ms(w);
    case CALL_NOW:
        return (int64_t)tw_now(w);
    case CALL_COUNT:
        return (int64_t)tw_count(w);
    case CALL_TICK_US:
        return tw_tick_us(w);
    case CALL_GET_STATS: {
        struct tw_stats stats;
        stats.size = sizeof stats;
        return tw_get_stats(w, &stats);
    }
    case CALL_RESCHEDULE_OTHER:
        return tw_reschedule(w, cell.other, 9);
    case CALL_ADVANCE:
        return tw_advance(w, 1);
    case CALL_EXPIRE:
        return tw_expire(w);
    case CALL_DESTROY:
        return tw_destroy(w);
    case CALL_THREAD_START: {
        int r = tw_thread_start(w, 300);
        *started = r == 0;
        return r;
    }
    case CALL_NEXT_EXPIRY:
        return (int64_t)tw_next_expiry(w);
    case CALL_CHECK:
        return tw_check(w);
    case CALLS:
        break;
    }
    return 0;
}

static int matches(int64_t want, int64_t got, int error)
{
    if (want == ANY_ID)
        return got == ANY_ID;
    if (want == BUSY_ID)
        return got == 0 && error == EBUSY;
    if (want == NON_NEGATIVE)
        return got >= 0;
    if (want == FINITE)
        return (uint64_t)got != TW_NEVER;
    return got == want;
}

static void run_cell(int lock_kind, enum context context, enum call call)
{
    tw_wheel *w;
    pthread_t thread;
    int64_t got;
    int error = 0, started = 0, i;
    memset(&cell, 0, sizeof cell);
    cell.context = context;
    atomic_store(&clock_us, 0);
    w = cell.wheel = thr_wheel(lock_kind, 1000, thr_fake_clock, &clock_us);
    cell.other = tw_add_ex(w, 1000, 0, noop_cb, count_release, (void *)(uintptr_t)OTHER);
    cell.self = tw_add_ex(w, context == IN_CALLBACK || context == IN_DRIVER_HOOK ? 1 : 10,
                          0, waiting_cb, waiting_release, (void *)(uintptr_t)SELF);
    assert_true(cell.other && cell.self);
    thr_create(&thread, worker, NULL);
    assert_true(thr_wait_int(&cell.inside, 1));
    got = make_call(w, call, &error, &started);
    atomic_store(&cell.done, 1);
    thr_join(thread);
    assert_false(atomic_load(&cell.timed_out));
    if (!matches(table[call][context], got, error))
        fail_msg("%s from another thread while a %s runs (%s lock): got %lld "
                 "(errno %d), want %lld", call_names[call], context_names[context],
                 thr_lock_name(lock_kind), (long long)got, error,
                 (long long)table[call][context]);
    if (context == IN_DESTROY_HOOK) {
        thr_forget(w); /* the worker destroyed it */
    } else {
        if (started)
            assert_int_equal(tw_thread_stop(w), 0);
        assert_int_equal(tw_check(w), 0);
        thr_destroy(w);
    }
    for (i = 0; i < DATUMS; i++) {
        int want = i == ADDED ? (call == CALL_ADD && got == ANY_ID) : 1;
        if (atomic_load(&cell.releases[i]) != want)
            fail_msg("%s while a %s runs: datum %d released %d times, want %d",
                     call_names[call], context_names[context], i,
                     atomic_load(&cell.releases[i]), want);
    }
}

static void test_calls_from_another_thread(void **state)
{
    int lock_kind = thr_lock_of(state), context, call;
    for (context = 0; context < CONTEXTS; context++)
        for (call = 0; call < CALLS; call++)
            run_cell(lock_kind, (enum context)context, (enum call)call);
}

/* ---- on the timer thread itself ----------------------------------------- */

/* tw_destroy there (deferred to the timer thread, which frees the wheel
 * and exits) is test_timer_thread's test_destroy_inside_callback. */
enum { T_ADD, T_CANCEL_OWN, T_ADVANCE, T_EXPIRE, T_THREAD_START,
       T_THREAD_STOP, T_HOOK_THREAD_STOP, T_RESULTS };

static struct {
    int64_t result[T_RESULTS];
    atomic_int callback_done, hook_done;
} on_thread;

static void timer_thread_cb(tw_wheel *w, tw_id id, void *user_data)
{
    (void)user_data;
    tw_id added = tw_add(w, 5, noop_cb, NULL);
    on_thread.result[T_ADD] = added != 0;
    on_thread.result[T_CANCEL_OWN] = tw_cancel(w, id);
    on_thread.result[T_ADVANCE] = tw_advance(w, 1);
    on_thread.result[T_EXPIRE] = tw_expire(w);
    on_thread.result[T_THREAD_START] = tw_thread_start(w, 300);
    on_thread.result[T_THREAD_STOP] = tw_thread_stop(w);
    atomic_store(&on_thread.callback_done, 1);
}

static tw_wheel *hook_wheel;
static void timer_thread_release(void *user_data)
{
    (void)user_data;
    on_thread.result[T_HOOK_THREAD_STOP] = tw_thread_stop(hook_wheel);
    atomic_store(&on_thread.hook_done, 1);
}

static void test_calls_on_the_timer_thread(void **state)
{
    tw_wheel *w;
    memset(&on_thread, 0, sizeof on_thread);
    atomic_store(&clock_us, 0);
    w = hook_wheel = thr_wheel(thr_lock_of(state), 1000, thr_fake_clock, &clock_us);
    assert_int_equal(tw_thread_start(w, 200), 0);
    assert_int_not_equal(tw_add_ex(w, 1, 0, timer_thread_cb, timer_thread_release, NULL), 0);
    atomic_store(&clock_us, 1000);
    assert_true(thr_wait_int(&on_thread.hook_done, 1));
    assert_int_equal(on_thread.result[T_ADD], 1);
    assert_int_equal(on_thread.result[T_CANCEL_OWN], 0);
    assert_int_equal(on_thread.result[T_ADVANCE], -EBUSY);
    assert_int_equal(on_thread.result[T_EXPIRE], -EBUSY);
    assert_int_equal(on_thread.result[T_THREAD_START], -EBUSY);
    assert_int_equal(on_thread.result[T_THREAD_STOP], -EDEADLK);
    assert_int_equal(on_thread.result[T_HOOK_THREAD_STOP], -EDEADLK);
    /* refused calls left the timer thread running: it still fires */
    assert_int_equal(tw_thread_start(w, 200), -EBUSY);
    atomic_store(&fired_after, 0);
    assert_int_not_equal(tw_add(w, 1, count_cb, NULL), 0);
    atomic_store(&clock_us, 10000);
    assert_true(thr_wait_int(&fired_after, 1));
    thr_destroy(w);
}

/* ---- destroy while the timer thread runs a callback ----------------------- */

static struct {
    atomic_int inside, calling, finished;
} slow;

static void slow_cb(tw_wheel *w, tw_id id, void *user_data)
{
    (void)w, (void)id, (void)user_data;
    atomic_store(&slow.inside, 1);
    thr_wait_int(&slow.calling, 1);
    thr_sleep_us(20000); /* tw_destroy is waiting meanwhile */
    atomic_store(&slow.finished, 1);
}

/* From another thread, tw_destroy stops the timer thread (waiting for the
 * callback it runs) and then destroys: 0, every datum released once. */
static void test_destroy_waits_for_timer_thread_callback(void **state)
{
    tw_wheel *w;
    memset(&slow, 0, sizeof slow);
    memset(&cell, 0, sizeof cell);
    atomic_store(&clock_us, 0);
    w = thr_wheel(thr_lock_of(state), 1000, thr_fake_clock, &clock_us);
    assert_int_not_equal(tw_add_ex(w, 1, 0, slow_cb, count_release, (void *)(uintptr_t)SELF), 0);
    assert_int_not_equal(tw_add_ex(w, 500, 0, noop_cb, count_release, (void *)(uintptr_t)OTHER), 0);
    assert_int_equal(tw_thread_start(w, 200), 0);
    atomic_store(&clock_us, 1000);
    assert_true(thr_wait_int(&slow.inside, 1));
    atomic_store(&slow.calling, 1);
    thr_forget(w);
    assert_int_equal(tw_destroy(w), 0);
    assert_int_equal(atomic_load(&slow.finished), 1);
    assert_int_equal(atomic_load(&cell.releases[SELF]), 1);
    assert_int_equal(atomic_load(&cell.releases[OTHER]), 1);
}

/* ---- regression: a refused destroy stopped the timer thread -------------- */


/* Issue 11, defect 3: tw_destroy returning -EBUSY (another thread drives
 * with tw_advance) had already stopped the timer thread, though timer.h
 * says it then does nothing. */
static void test_destroy_ebusy_keeps_timer_thread(void **state)
{
    tw_wheel *w;
    pthread_t thread;
    memset(&cell, 0, sizeof cell);
    atomic_store(&fired_after, 0);
    atomic_store(&clock_us, 0);
    w = cell.wheel = thr_wheel(thr_lock_of(state), 1000, thr_fake_clock, &clock_us);
    cell.context = IN_CALLBACK;
    cell.self = tw_add_ex(w, 1, 0, waiting_cb, count_release, (void *)(uintptr_t)SELF);
    assert_int_equal(tw_thread_start(w, 200), 0);
    thr_create(&thread, worker, NULL); /* tw_advance, blocks in the callback */
    assert_true(thr_wait_int(&cell.inside, 1));
    assert_int_equal(tw_destroy(w), -EBUSY);
    atomic_store(&cell.done, 1);
    thr_join(thread);
    assert_int_equal(tw_thread_start(w, 200), -EBUSY); /* still running */
    assert_int_not_equal(tw_add(w, 1, count_cb, NULL), 0);
    atomic_store(&clock_us, 5000);
    assert_true(thr_wait_int(&fired_after, 1)); /* fired by the timer thread */
    thr_destroy(w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        T_ADAPTIVE(test_calls_from_another_thread),
        T_SPIN(test_calls_from_another_thread),
        T_MUTEX(test_calls_from_another_thread),
        T_ADAPTIVE(test_calls_on_the_timer_thread),
        T_MUTEX(test_calls_on_the_timer_thread),
        T_ADAPTIVE(test_destroy_waits_for_timer_thread_callback),
        T_MUTEX(test_destroy_waits_for_timer_thread_callback),
        T_ADAPTIVE(test_destroy_ebusy_keeps_timer_thread),
        T_SPIN(test_destroy_ebusy_keeps_timer_thread),
        T_MUTEX(test_destroy_ebusy_keeps_timer_thread),
    };
    return THR_RUN(tests);
}
