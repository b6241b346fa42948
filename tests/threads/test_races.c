/*
 * The race contracts, each checked over many iterations with callbacks and
 * release hooks that spin a little to widen the windows:
 *
 *  (a) cancel vs dispatch: a timer cancelled from another thread while the
 *      driver dispatches its batch either ran entirely (its callback had
 *      returned and its user data was released) before tw_cancel returned 0,
 *      or never starts once tw_cancel returned 1 (and was released by then).
 *      Also for periodic timers: after cancel returned 1 no callback is
 *      running or starts, and the release has happened.
 *  (b) reschedule vs expiry: either the timer already started (reschedule
 *      returned 0, it fires once at its old tick) or it fires exactly once
 *      later, at now-at-reschedule + delay.
 *  (c) a callback cancelling a timer of its own batch (same tick) prevents
 *      it; cancelling one that already ran returns 0; rescheduling one moves
 *      it; also with 64 timers of one tick cancelling each other.
 *  (d) release hooks run exactly once, never while the callback runs, and a
 *      callback never runs after its release, while several threads race to
 *      cancel and reschedule the same timers (one-shots and periodics).
 *  (e) the id tw_add returns is the id the callback is given, even when the
 *      driver fires the timer before tw_add has returned.
 *
 * Every verdict comes from counters and gates, never from timing: the race
 * windows only decide which outcome an iteration gets, and every outcome
 * has its checks. The test thread and the driver hand over through gates
 * (a waiter sleeps after a short spin), so that on a loaded machine a
 * waiting thread leaves the core to the one it waits for.
 *
 * Iterations: TWHEEL_RACE_ITERS (default 2000, 500 under TSan; the periodic
 * race runs half as many).
 */
#include "thr.h"

static uint64_t iterations(void)
{
    return thr_env("TWHEEL_RACE_ITERS", THR_TSAN ? 500 : 2000);
}

/* ---- a driver thread that advances on request ---------------------------- */

struct driver {
    tw_wheel *w;
    pthread_t thread;
    struct thr_gate go, begun, done; /* requests made, begun, done */
    atomic_int quit;
    _Atomic uint64_t step, then; /* tw_advance(step), then tw_advance(then) */
    _Atomic uint64_t lead_us; /* spin between `begun` and tw_advance */
    atomic_int errors;
};

#define NO_STEP UINT64_MAX
#define HANDOFF_SPINS 20000 /* a gate's spin before it sleeps */

/* Threads a failed test may leave behind: the teardown stops them before
 * the wheels are destroyed. */
static struct driver *live_driver;

static void *driver_main(void *argument)
{
    struct driver *d = argument;
    uint64_t seen = 0;
    for (;;) {
        if (!thr_gate_wait(&d->go, seen + 1, HANDOFF_SPINS) ||
            atomic_load(&d->quit))
            break;
        seen++;
        thr_gate_set(&d->begun, seen);
        thr_spin_us(atomic_load(&d->lead_us));
        if (tw_advance(d->w, atomic_load(&d->step)) < 0)
            atomic_fetch_add(&d->errors, 1);
        if (atomic_load(&d->then) != NO_STEP &&
            tw_advance(d->w, atomic_load(&d->then)) < 0)
            atomic_fetch_add(&d->errors, 1);
        thr_gate_set(&d->done, seen);
    }
    return NULL;
}

static void driver_start(struct driver *d, tw_wheel *w)
{
    memset(d, 0, sizeof *d);
    d->w = w;
    thr_gate_init(&d->go);
    thr_gate_init(&d->begun);
    thr_gate_init(&d->done);
    atomic_store(&d->step, 1);
    atomic_store(&d->then, NO_STEP);
    thr_create(&d->thread, driver_main, d);
    live_driver = d;
}

/* Asks for tw_advance(step) and then, unless NO_STEP, tw_advance(then);
 * returns at once. */
static void driver_go2(struct driver *d, uint64_t step, uint64_t then)
{
    atomic_store(&d->step, step);
    atomic_store(&d->then, then);
    thr_gate_set(&d->go, thr_gate_get(&d->go) + 1);
}

static void driver_go(struct driver *d, uint64_t step)
{
    driver_go2(d, step, NO_STEP);
}

/* Waits until the driver is about to call tw_advance: race windows are
 * measured from there, not from the driver's wake-up, which varies a lot.
 * It spins first: the race is over if this thread has to be woken. */
static void driver_wait_begun(struct driver *d)
{
    assert_true(thr_gate_wait(&d->begun, thr_gate_get(&d->go), 1ul << 18));
}

static void driver_wait(struct driver *d)
{
    assert_true(thr_gate_wait(&d->done, thr_gate_get(&d->go), HANDOFF_SPINS));
}

/* Stops the thread (also from a teardown: no assert there). */
static int driver_quit(struct driver *d)
{
    live_driver = NULL;
    atomic_store(&d->quit, 1);
    thr_gate_set(&d->go, thr_gate_get(&d->go) + 1);
    if (pthread_join(d->thread, NULL) != 0)
        return 0;
    thr_gate_destroy(&d->go);
    thr_gate_destroy(&d->begun);
    thr_gate_destroy(&d->done);
    return 1;
}

static void driver_stop(struct driver *d)
{
    assert_true(driver_quit(d));
    assert_int_equal(atomic_load(&d->errors), 0);
}

/* An adaptive race window: the test thread waits a random time in
 * [0, 2 * window] µs before its racing call; the window grows while the call
 * lands too early (before the driver got to the timer) and shrinks while it
 * lands too late, so both outcomes, and everything between, keep coming. */
struct window {
    int64_t us; /* > 0: the test thread waits; < 0: the driver waits */
};

/* Before driver_go: how long the driver waits before tw_advance. */
static void window_lead(struct window *win, struct driver *d, uint64_t *rng)
{
    uint64_t span = win->us < 0 ? (uint64_t)(-win->us) : 0;
    atomic_store(&d->lead_us, thr_rng(rng) % (2 * span + 4));
}

/* After driver_wait_begun: how long the test thread waits. */
static void window_wait(struct window *win, uint64_t *rng)
{
    uint64_t span = win->us > 0 ? (uint64_t)win->us : 0;
    thr_spin_us(thr_rng(rng) % (2 * span + 1));
}

/* Capped: past a few hundred µs the skew is the scheduler's (a thread
 * waiting for a core), which no window corrects. */
#define WINDOW_CAP 250

static void window_early(struct window *win, int early)
{
    if (early && win->us < WINDOW_CAP)
        win->us++;
    else if (!early && win->us > -WINDOW_CAP)
        win->us--;
}

/* ---- per-timer records --------------------------------------------------- */

struct record {
    atomic_int started;   /* callback entered */
    atomic_int finished;  /* callback reached its very end */
    atomic_int released;  /* release hook calls */
    atomic_int in_cb;     /* callback running now */
    atomic_int cancelled; /* tw_cancel returned 1 (set after it returned) */
    atomic_int late;      /* callback started after cancel returned 1 */
    atomic_int after_release; /* callback started after its release */
    atomic_int release_in_cb; /* release ran while the callback ran */
    _Atomic uint64_t tick;   /* tw_now() in the (last) callback */
    _Atomic uint64_t cb_id;  /* id the callback was given */
    _Atomic uint64_t spin_us; /* how long the callback spins */
    atomic_int hold;     /* the callback waits until tw_cancel sleeps */
    atomic_int returned; /* ... or has returned (set after it did) */
};

/* The thread that calls tw_cancel on a held callback's timer. */
static _Atomic long canceller;

static void record_reset(struct record *r, uint64_t spin_us)
{
    atomic_store(&r->started, 0);
    atomic_store(&r->finished, 0);
    atomic_store(&r->released, 0);
    atomic_store(&r->in_cb, 0);
    atomic_store(&r->cancelled, 0);
    atomic_store(&r->late, 0);
    atomic_store(&r->after_release, 0);
    atomic_store(&r->release_in_cb, 0);
    atomic_store(&r->tick, 0);
    atomic_store(&r->cb_id, 0);
    atomic_store(&r->spin_us, spin_us);
    atomic_store(&r->hold, 0);
    atomic_store(&r->returned, 0);
}

static void record_cb(tw_wheel *w, tw_id id, void *data)
{
    struct record *r = data;
    atomic_fetch_add(&r->in_cb, 1);
    if (atomic_load(&r->cancelled))
        atomic_fetch_add(&r->late, 1);
    if (atomic_load(&r->released))
        atomic_fetch_add(&r->after_release, 1);
    atomic_fetch_add(&r->started, 1);
    atomic_store(&r->tick, tw_now(w));
    atomic_store(&r->cb_id, id);
    thr_spin_us(atomic_load(&r->spin_us));
    /* held: until the canceller sleeps in tw_cancel, waiting for us (if
     * tw_cancel returns first, the test sees this callback unfinished) */
    if (atomic_load(&r->hold)) {
        struct thr_poll poll = thr_poll_begin("tw_cancel to wait for the "
                                              "callback", __FILE__, __LINE__);
        while (!thr_tid_asleep(atomic_load(&canceller)) &&
               !atomic_load(&r->returned) && thr_poll_next(&poll))
            ;
    }
    atomic_fetch_sub(&r->in_cb, 1);
    atomic_fetch_add(&r->finished, 1); /* the very end */
}

static void record_release(void *data)
{
    struct record *r = data;
    if (atomic_load(&r->in_cb))
        atomic_fetch_add(&r->release_in_cb, 1);
    atomic_fetch_add(&r->released, 1);
}

/* Fillers share the batch with the timer under test and take some time. */
#define FILLERS 3
static struct record fillers[FILLERS];

/* ---- (a) cancel vs dispatch ---------------------------------------------- */

static void test_cancel_vs_dispatch(void **state)
{
    int kind = thr_lock_of(state);
    uint64_t n = iterations(), i, rng = thr_seed(1);
    uint64_t before = 0, in_batch = 0, while_running = 0, after = 0;
    static struct record r;
    static struct driver d;
    struct window win = {5};
    tw_wheel *w = thr_wheel(kind, 1000, NULL, NULL);

    driver_start(&d, w);
    for (i = 0; i < n; i++) {
        unsigned nf = (unsigned)(thr_rng(&rng) % (FILLERS + 1)), f;
        unsigned target_pos = nf ? (unsigned)(thr_rng(&rng) % (nf + 1)) : 0;
        int started_before, finished_before, c, fillers_started = 0;
        tw_id id = 0;

        record_reset(&r, thr_rng(&rng) % 30);
        for (f = 0; f <= nf; f++) {
            if (f == target_pos) {
                id = tw_add_ex(w, 1, 0, record_cb, record_release, &r);
                assert_true(id != 0);
            }
            if (f < nf) {
                record_reset(&fillers[f], thr_rng(&rng) % 15);
                assert_true(tw_add_ex(w, 1, 0, record_cb, record_release,
                                      &fillers[f]) != 0);
            }
        }
        window_lead(&win, &d, &rng);
        driver_go(&d, 1);
        driver_wait_begun(&d);
        window_wait(&win, &rng);
        started_before = atomic_load(&r.started);
        finished_before = atomic_load(&r.finished);
        c = tw_cancel(w, id);
        window_early(&win, c == 1);
        if (c == 1) {
            /* never started, already handed back */
            assert_int_equal(atomic_load(&r.started), 0);
            assert_int_equal(atomic_load(&r.released), 1);
            atomic_store(&r.cancelled, 1);
            for (f = 0; f < nf; f++)
                fillers_started += atomic_load(&fillers[f].started);
            if (fillers_started)
                in_batch++;
            else
                before++;
        } else {
            /* ran entirely, and released, before cancel returned */
            assert_int_equal(c, 0);
            assert_int_equal(atomic_load(&r.finished), 1);
            assert_int_equal(atomic_load(&r.released), 1);
            if (started_before && !finished_before)
                while_running++;
            else
                after++;
        }
        driver_wait(&d);
        assert_int_equal(atomic_load(&r.started), c == 1 ? 0 : 1);
        assert_int_equal(atomic_load(&r.late), 0);
        assert_int_equal(atomic_load(&r.released), 1);
        assert_int_equal(atomic_load(&r.release_in_cb), 0);
        for (f = 0; f < nf; f++) {
            assert_int_equal(atomic_load(&fillers[f].finished), 1);
            assert_int_equal(atomic_load(&fillers[f].released), 1);
        }
    }
    driver_stop(&d);
    assert_int_equal(tw_count(w), 0);
    assert_int_equal(tw_check(w), 0);
    print_message("%s: cancel returned 1 before dispatch %llu, in the batch %llu; "
                  "returned 0 while running %llu, after %llu (window %lld us)\n",
                  thr_lock_name(kind), (unsigned long long)before,
                  (unsigned long long)in_batch, (unsigned long long)while_running,
                  (unsigned long long)after, (long long)win.us);
    thr_destroy(w);
}

/* Deterministic halves of (a): cancel of a timer still in the batch while an
 * earlier timer of that batch runs, and cancel of a running callback. */
static atomic_int gate_entered, gate_open;
static void gate_cb(tw_wheel *w, tw_id id, void *data)
{
    (void)w;
    (void)id;
    (void)data;
    atomic_store(&gate_entered, 1);
    THR_WAIT_UNTIL(atomic_load(&gate_open));
}

static void test_cancel_in_batch_exact(void **state)
{
    int kind = thr_lock_of(state);
    static struct record r;
    static struct driver d;
    tw_wheel *w = thr_wheel(kind, 1000, NULL, NULL);
    tw_id id;
    int c;

    /* A then B in one tick; B is cancelled while A's callback holds the
     * driver: 1, and B never starts */
    atomic_store(&gate_entered, 0);
    atomic_store(&gate_open, 0);
    record_reset(&r, 0);
    assert_true(tw_add(w, 1, gate_cb, NULL) != 0);
    id = tw_add_ex(w, 1, 0, record_cb, record_release, &r);
    driver_start(&d, w);
    driver_go(&d, 1);
    assert_true(thr_wait_int(&gate_entered, 1));
    assert_int_equal(tw_cancel(w, id), 1);
    assert_int_equal(atomic_load(&r.released), 1);
    atomic_store(&gate_open, 1);
    driver_wait(&d);
    assert_int_equal(atomic_load(&r.started), 0);

    /* a running callback: cancel waits for its end (and release), gives 0.
     * The callback holds until this thread sleeps in tw_cancel. */
    atomic_store(&canceller, thr_tid());
    record_reset(&r, 0);
    atomic_store(&r.hold, 1);
    id = tw_add_ex(w, 1, 0, record_cb, record_release, &r);
    driver_go(&d, 1);
    assert_true(thr_wait_int(&r.started, 1));
    c = tw_cancel(w, id);
    atomic_store(&r.returned, 1);
    assert_int_equal(c, 0);
    assert_int_equal(atomic_load(&r.finished), 1);
    assert_int_equal(atomic_load(&r.released), 1);
    driver_wait(&d);

    /* a running periodic callback: cancel gives 1, waits for the callback
     * to return, and the release has run when it returns. One tick per
     * advance: it runs once, however late this thread gets to cancel. */
    record_reset(&r, 0);
    atomic_store(&r.hold, 1);
    id = tw_add_ex(w, 1, 1, record_cb, record_release, &r);
    driver_go(&d, 1);
    assert_true(thr_wait_int(&r.started, 1));
    c = tw_cancel(w, id);
    atomic_store(&r.returned, 1);
    atomic_store(&r.cancelled, 1);
    assert_int_equal(c, 1);
    assert_int_equal(atomic_load(&r.in_cb), 0);
    assert_int_equal(atomic_load(&r.finished), 1);
    assert_int_equal(atomic_load(&r.released), 1);
    driver_go(&d, 3); /* cancelled: it never runs again */
    driver_wait(&d);
    assert_int_equal(atomic_load(&r.started), 1);
    assert_int_equal(atomic_load(&r.late), 0);
    assert_int_equal(atomic_load(&r.release_in_cb), 0);

    driver_stop(&d);
    assert_int_equal(tw_count(w), 0);
    thr_destroy(w);
}

/* (a) for periodic timers: the driver advances several ticks per request,
 * so the timer fires repeatedly while it is being cancelled. */
static void test_cancel_periodic_vs_dispatch(void **state)
{
    int kind = thr_lock_of(state);
    uint64_t n = iterations() / 2, i, rng = thr_seed(2);
    static struct record r;
    static struct driver d;
    tw_wheel *w = thr_wheel(kind, 1000, NULL, NULL);

    driver_start(&d, w);
    for (i = 0; i < n; i++) {
        tw_id id;
        int started;
        record_reset(&r, thr_rng(&rng) % 20);
        id = tw_add_ex(w, thr_rng(&rng) % 2, 1 + thr_rng(&rng) % 2, record_cb,
                       record_release, &r);
        assert_true(id != 0);
        driver_go(&d, 1 + thr_rng(&rng) % 6);
        driver_wait_begun(&d);
        thr_spin_us(thr_rng(&rng) % 60);
        assert_int_equal(tw_cancel(w, id), 1);
        atomic_store(&r.cancelled, 1);
        started = atomic_load(&r.started);
        /* nothing in flight, released by now */
        assert_int_equal(atomic_load(&r.in_cb), 0);
        assert_int_equal(atomic_load(&r.finished), started);
        assert_int_equal(atomic_load(&r.released), 1);
        assert_int_equal(tw_cancel(w, id), 0);
        assert_int_equal(tw_reschedule(w, id, 1), 0);
        driver_wait(&d);
        assert_int_equal(atomic_load(&r.started), started);
        assert_int_equal(atomic_load(&r.late), 0);
        assert_int_equal(atomic_load(&r.release_in_cb), 0);
        assert_int_equal(atomic_load(&r.released), 1);
    }
    driver_stop(&d);
    assert_int_equal(tw_count(w), 0);
    assert_int_equal(tw_check(w), 0);
    thr_destroy(w);
}

/* ---- (b) reschedule vs expiry -------------------------------------------- */

static void test_reschedule_vs_expiry(void **state)
{
    int kind = thr_lock_of(state);
    uint64_t n = iterations(), i, rng = thr_seed(3);
    uint64_t moved = 0, too_late = 0;
    static struct record r;
    static struct driver d;
    struct window win = {5};
    tw_wheel *w = thr_wheel(kind, 1000, NULL, NULL);

    driver_start(&d, w);
    for (i = 0; i < n; i++) {
        unsigned nf = (unsigned)(thr_rng(&rng) % (FILLERS + 1)), f;
        uint64_t base = tw_now(w), delay = thr_rng(&rng) % 5, lo, hi, tick;
        int res;
        tw_id id;

        record_reset(&r, thr_rng(&rng) % 10);
        for (f = 0; f < nf; f++) {
            record_reset(&fillers[f], thr_rng(&rng) % 15);
            assert_true(tw_add_ex(w, 1, 0, record_cb, record_release,
                                  &fillers[f]) != 0);
        }
        id = tw_add_ex(w, 1, 0, record_cb, record_release, &r);
        assert_true(id != 0);
        window_lead(&win, &d, &rng);
        driver_go(&d, 1);
        driver_wait_begun(&d);
        window_wait(&win, &rng);
        lo = tw_now(w);
        res = tw_reschedule(w, id, delay);
        window_early(&win, res == 1);
        hi = tw_now(w);
        driver_wait(&d);
        /* 0: its callback had been taken for this very advance (it may not
         * have reached record_cb yet when reschedule returned) */
        if (res == 0)
            assert_int_equal(atomic_load(&r.started), 1);
        /* let it fire wherever it went: two more calls cover delay 0 */
        driver_go2(&d, delay + 2, 0);
        driver_wait(&d);

        assert_int_equal(atomic_load(&r.started), 1);
        assert_int_equal(atomic_load(&r.finished), 1);
        assert_int_equal(atomic_load(&r.released), 1);
        assert_int_equal(atomic_load(&r.release_in_cb), 0);
        assert_int_equal(atomic_load(&r.after_release), 0);
        tick = atomic_load(&r.tick);
        if (res == 1) {
            /* fires once, at the new time: due at now-at-reschedule + delay
             * (lo..hi); delay 0 means "due now" and runs at the start of the
             * next advance, whose tick may be one later than hi */
            if (tick < lo + delay || tick > hi + delay + (delay == 0))
                fail_msg("rescheduled by %llu between ticks %llu and %llu, "
                         "fired at %llu", (unsigned long long)delay,
                         (unsigned long long)lo, (unsigned long long)hi,
                         (unsigned long long)tick);
            moved++;
        } else {
            /* it had started: once, at its old tick */
            assert_int_equal(res, 0);
            assert_int_equal(tick, base + 1);
            too_late++;
        }
        for (f = 0; f < nf; f++) {
            assert_int_equal(atomic_load(&fillers[f].started), 1);
            assert_int_equal(atomic_load(&fillers[f].released), 1);
        }
    }
    driver_stop(&d);
    assert_int_equal(tw_count(w), 0);
    assert_int_equal(tw_check(w), 0);
    print_message("%s: reschedule returned 1 %llu times, 0 %llu times "
                  "(window %lld us)\n",
                  thr_lock_name(kind), (unsigned long long)moved,
                  (unsigned long long)too_late, (long long)win.us);
    thr_destroy(w);
}

/* ---- (c) a callback cancelling a timer of its own batch ------------------ */

#define BATCH 64
static struct record batch[BATCH];
static tw_id batch_ids[BATCH];
static int batch_victim[BATCH];   /* whom each callback cancels */
static atomic_int batch_cancel[BATCH]; /* cancel results, by victim */
static atomic_int batch_errors;

static void batch_cb(tw_wheel *w, tw_id id, void *data)
{
    int me = (int)((struct record *)data - batch);
    int v = batch_victim[me];
    int c;
    record_cb(w, id, data);
    if (v < 0)
        return;
    c = tw_cancel(w, batch_ids[v]);
    if (c == 1) {
        atomic_fetch_add(&batch_cancel[v], 1);
        atomic_store(&batch[v].cancelled, 1);
        if (atomic_load(&batch[v].released) != 1) /* released before return */
            atomic_fetch_add(&batch_errors, 1);
    } else if (c != 0) {
        atomic_fetch_add(&batch_errors, 1);
    }
}

/* Resets the records and picks each callback's victim: random, or none. */
static void batch_reset(uint64_t *rng, int victims)
{
    int i;
    for (i = 0; i < BATCH; i++) {
        record_reset(&batch[i], 0);
        atomic_store(&batch_cancel[i], 0);
        batch_victim[i] = victims ? (int)(thr_rng(rng) % BATCH) : -1;
    }
}

/* Adds the whole batch due at one tick. */
static int batch_add(tw_wheel *w, uint64_t delay)
{
    int i;
    for (i = 0; i < BATCH; i++) {
        batch_ids[i] = tw_add_ex(w, delay, 0, batch_cb, record_release, &batch[i]);
        if (!batch_ids[i])
            return 0;
    }
    return 1;
}

/* How to drive one batch: on this thread, on a driver thread, or on the
 * timer thread. */
enum { DRIVE_HERE, DRIVE_DRIVER, DRIVE_TIMER_THREAD };

/* Every member released: fired or cancelled, and done. */
static int batch_settled(void)
{
    int i;
    for (i = 0; i < BATCH; i++)
        if (atomic_load(&batch[i].released) != 1)
            return 0;
    return 1;
}

static void batch_check(void)
{
    int i;
    assert_int_equal(atomic_load(&batch_errors), 0);
    for (i = 0; i < BATCH; i++) {
        int fired = atomic_load(&batch[i].started);
        int cancelled = atomic_load(&batch_cancel[i]);
        if (fired + cancelled != 1 || atomic_load(&batch[i].released) != 1 ||
            atomic_load(&batch[i].late) != 0)
            fail_msg("batch timer %d: fired %d cancelled %d released %d", i,
                     fired, cancelled, atomic_load(&batch[i].released));
        /* cancelled only if its canceller ran before it */
        if (cancelled)
            assert_true(fired == 0);
    }
}

static void test_callback_cancels_same_batch(void **state)
{
    int kind = thr_lock_of(state);
    int mode, round;
    uint64_t rng = thr_seed(4);

    for (mode = DRIVE_HERE; mode <= DRIVE_TIMER_THREAD; mode++) {
        tw_wheel *w;
        static struct driver d;
        if (kind == TW_LOCK_NONE && mode != DRIVE_HERE)
            continue;
        w = thr_wheel(kind, 1000, NULL, NULL);
        if (mode == DRIVE_DRIVER)
            driver_start(&d, w);
        if (mode == DRIVE_TIMER_THREAD)
            assert_int_equal(tw_thread_start(w, 200), 0);

        for (round = 0; round < (THR_TSAN ? 20 : 100); round++) {
            /* everyone due in one tick; each callback cancels a random
             * member of the batch (maybe itself, maybe one already run) */
            batch_reset(&rng, 1);
            /* the timer thread is stopped while the batch is added: every
             * id is known before the first callback reads it */
            if (mode == DRIVE_TIMER_THREAD)
                assert_int_equal(tw_thread_stop(w), 0);
            assert_true(batch_add(w, 1 + (uint64_t)round % 3));
            if (mode == DRIVE_TIMER_THREAD)
                assert_int_equal(tw_thread_start(w, 200), 0);
            if (mode == DRIVE_HERE)
                assert_true(tw_advance(w, 3) >= 0);
            else if (mode == DRIVE_DRIVER) {
                driver_go(&d, 3);
                driver_wait(&d);
            } else {
                THR_WAIT_UNTIL(batch_settled());
            }
            batch_check();
        }

        /* the two-timer case, exactly: A cancels B (after A) -> 1, B never
         * runs; B' before A' -> 0 */
        batch_reset(&rng, 0);
        batch_victim[0] = 1; /* 0 runs first, cancels 1 */
        batch_victim[3] = 2; /* 2 already ran */
        if (mode == DRIVE_TIMER_THREAD)
            assert_int_equal(tw_thread_stop(w), 0);
        assert_true(batch_add(w, 2));
        if (mode == DRIVE_TIMER_THREAD)
            assert_int_equal(tw_thread_start(w, 200), 0);
        if (mode == DRIVE_HERE)
            assert_true(tw_advance(w, 2) >= 0);
        else if (mode == DRIVE_DRIVER) {
            driver_go(&d, 2);
            driver_wait(&d);
        } else {
            int i;
            for (i = 0; i < BATCH; i++)
                assert_true(thr_wait_int(&batch[i].released, 1));
        }
        batch_check();
        assert_int_equal(atomic_load(&batch_cancel[1]), 1);
        assert_int_equal(atomic_load(&batch[1].started), 0);
        assert_int_equal(atomic_load(&batch_cancel[2]), 0);
        assert_int_equal(atomic_load(&batch[2].started), 1);

        if (mode == DRIVE_DRIVER)
            driver_stop(&d);
        if (mode == DRIVE_TIMER_THREAD)
            assert_int_equal(tw_thread_stop(w), 0);
        assert_int_equal(tw_count(w), 0);
        assert_int_equal(tw_check(w), 0);
        thr_destroy(w);
    }
}

/* A callback rescheduling a timer of its own batch: it moves, fires once. */
static tw_id move_target;
static atomic_int move_result;
static void mover_cb(tw_wheel *w, tw_id id, void *data)
{
    (void)id;
    (void)data;
    atomic_store(&move_result, tw_reschedule(w, move_target, 7));
}

static void test_callback_reschedules_same_batch(void **state)
{
    int kind = thr_lock_of(state);
    static struct record r;
    tw_wheel *w = thr_wheel(kind, 1000, NULL, NULL);
    record_reset(&r, 0);
    atomic_store(&move_result, -1);
    assert_true(tw_add(w, 4, mover_cb, NULL) != 0);
    move_target = tw_add_ex(w, 4, 0, record_cb, record_release, &r);
    assert_int_equal(tw_advance(w, 4), 1);
    assert_int_equal(atomic_load(&move_result), 1);
    assert_int_equal(atomic_load(&r.started), 0);
    assert_int_equal(tw_advance(w, 6), 0);
    assert_int_equal(tw_advance(w, 1), 1);
    assert_int_equal(atomic_load(&r.tick), 11);
    assert_int_equal(atomic_load(&r.started), 1);
    assert_int_equal(atomic_load(&r.released), 1);
    thr_destroy(w);
}

/* ---- (d) release exactly once while threads race on the same ids --------- */

#define SHARED 256
#define RACERS 3
static struct record shared[SHARED];
static _Atomic uint64_t shared_ids[SHARED];
static atomic_int shared_cancels[SHARED];
static atomic_int shared_periodic[SHARED];
static tw_wheel *race_wheel;
static struct thr_gate racers_go; /* the round the racers may run */
static atomic_int racers_quit, racers_done, racer_errors;
static pthread_t racer_threads[RACERS];
static int racers_running;

static void racers_stop(void)
{
    int i;
    if (!racers_running)
        return;
    racers_running = 0;
    atomic_store(&racers_quit, 1);
    thr_gate_set(&racers_go, UINT64_MAX);
    for (i = 0; i < RACERS; i++)
        pthread_join(racer_threads[i], NULL);
    thr_gate_destroy(&racers_go);
}

static void *racer(void *argument)
{
    uint64_t rng = thr_seed(100 + (uint64_t)(uintptr_t)argument);
    uint64_t round = 0;
    while (thr_gate_wait(&racers_go, round + 1, HANDOFF_SPINS) &&
           !atomic_load(&racers_quit)) {
        int i;
        round++;
        /* every racer walks all timers from a different random start */
        for (i = 0; i < SHARED * 2; i++) {
            int k = (int)(thr_rng(&rng) % SHARED);
            tw_id id = atomic_load(&shared_ids[k]);
            uint64_t op = thr_rng(&rng) % 3;
            int c;
            if (op == 0) {
                c = tw_reschedule(race_wheel, id, thr_rng(&rng) % 4);
                if (c != 0 && c != 1)
                    atomic_fetch_add(&racer_errors, 1);
                continue;
            }
            c = tw_cancel(race_wheel, id);
            if (c == 1) {
                atomic_store(&shared[k].cancelled, 1);
                atomic_fetch_add(&shared_cancels[k], 1);
                if (atomic_load(&shared[k].released) != 1 ||
                    atomic_load(&shared[k].in_cb) != 0)
                    atomic_fetch_add(&racer_errors, 1);
            } else if (c != 0) {
                atomic_fetch_add(&racer_errors, 1);
            }
        }
        atomic_fetch_add(&racers_done, 1);
    }
    return NULL;
}

static void test_release_once_under_races(void **state)
{
    int kind = thr_lock_of(state);
    uint64_t rounds = iterations() / 100, rng = thr_seed(5), round;
    static struct driver d;
    static char failure[512];
    int i;

    race_wheel = thr_wheel(kind, 1000, NULL, NULL);
    thr_gate_init(&racers_go);
    atomic_store(&racers_quit, 0);
    atomic_store(&racers_done, 0);
    atomic_store(&racer_errors, 0);
    failure[0] = 0;
    for (i = 0; i < RACERS; i++)
        thr_create(&racer_threads[i], racer, (void *)(uintptr_t)i);
    racers_running = 1;
    driver_start(&d, race_wheel);

    /* no assert while the racers run: note the first failure, stop, then
     * report */
    for (round = 1; round <= rounds && !failure[0]; round++) {
        for (i = 0; i < SHARED; i++) {
            int periodic = thr_rng(&rng) % 4 == 0;
            tw_id id;
            record_reset(&shared[i], thr_rng(&rng) % 4);
            atomic_store(&shared_cancels[i], 0);
            atomic_store(&shared_periodic[i], periodic);
            id = tw_add_ex(race_wheel, thr_rng(&rng) % 4, periodic ? 1 : 0,
                           record_cb, record_release, &shared[i]);
            if (!id)
                snprintf(failure, sizeof failure, "tw_add_ex failed");
            atomic_store(&shared_ids[i], id);
        }
        thr_gate_set(&racers_go, round);
        /* drive while they race */
        while (atomic_load(&racers_done) < (int)round * RACERS) {
            driver_go(&d, 1);
            driver_wait(&d);
        }
        /* settle: cancel the periodic survivors, fire the rest */
        for (i = 0; i < SHARED; i++) {
            if (tw_cancel(race_wheel, atomic_load(&shared_ids[i])) == 1) {
                atomic_fetch_add(&shared_cancels[i], 1);
                atomic_store(&shared[i].cancelled, 1);
            }
        }
        driver_go(&d, 8);
        driver_wait(&d);
        if (atomic_load(&racer_errors))
            snprintf(failure, sizeof failure,
                     "round %llu: %d cancels returned 1 before the release ran "
                     "or while the callback ran, or returned an error",
                     (unsigned long long)round, atomic_load(&racer_errors));
        else if (tw_count(race_wheel) != 0)
            snprintf(failure, sizeof failure,
                     "round %llu: tw_count %llu after every timer fired or was "
                     "cancelled (tw_check %d)",
                     (unsigned long long)round,
                     (unsigned long long)tw_count(race_wheel), tw_check(race_wheel));
        for (i = 0; i < SHARED && !failure[0]; i++) {
            struct record *r = &shared[i];
            int cancels = atomic_load(&shared_cancels[i]);
            int fired = atomic_load(&r->started);
            int periodic = atomic_load(&shared_periodic[i]);
            if (atomic_load(&r->released) != 1 || cancels > 1 ||
                (!periodic && fired + cancels != 1) || (periodic && cancels != 1) ||
                atomic_load(&r->late) || atomic_load(&r->after_release) ||
                atomic_load(&r->release_in_cb))
                snprintf(failure, sizeof failure,
                         "round %llu timer %d (%s): fired %d, cancel returned 1 "
                         "%d times, released %d, late %d, after release %d, "
                         "release during callback %d",
                         (unsigned long long)round, i,
                         periodic ? "periodic" : "one-shot", fired, cancels,
                         atomic_load(&r->released), atomic_load(&r->late),
                         atomic_load(&r->after_release),
                         atomic_load(&r->release_in_cb));
        }
    }
    racers_stop();
    driver_stop(&d);
    if (failure[0])
        fail_msg("%s", failure);
    assert_int_equal(tw_check(race_wheel), 0);
    thr_destroy(race_wheel);
}

/* ---- (e) the id returned by tw_add is the id the callback gets ----------- */

static void test_add_id_matches_callback(void **state)
{
    int kind = thr_lock_of(state);
    uint64_t n = iterations() / 10, i, mismatches = 0;
    static struct record r;
    tw_wheel *w = thr_wheel(kind, 100, NULL, NULL);

    /* the timer thread fires delay-0 timers as soon as it can: often before
     * tw_add has returned */
    assert_int_equal(tw_thread_start(w, 1), 0);
    for (i = 0; i < n; i++) {
        tw_id id;
        record_reset(&r, 0);
        id = tw_add_ex(w, 0, 0, record_cb, record_release, &r);
        assert_true(id != 0);
        assert_true(thr_wait_int(&r.released, 1));
        if (atomic_load(&r.cb_id) != id)
            mismatches++;
        /* the id is dead: it must not touch whatever reuses its node */
        assert_int_equal(tw_cancel(w, id), 0);
    }
    assert_int_equal(tw_thread_stop(w), 0);
    assert_int_equal(mismatches, 0);
    thr_destroy(w);
}

static int races_teardown(void **state)
{
    racers_stop();
    if (live_driver)
        driver_quit(live_driver);
    return thr_teardown(state);
}

#undef THR_T
#define THR_T(f, name, kind) THR_CASE(f, name, kind, races_teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T_SPIN(test_cancel_in_batch_exact),
        T_ADAPTIVE(test_cancel_in_batch_exact),
        T_MUTEX(test_cancel_in_batch_exact),
        T_SPIN(test_cancel_vs_dispatch),
        T_ADAPTIVE(test_cancel_vs_dispatch),
        T_MUTEX(test_cancel_vs_dispatch),
        T_SPIN(test_cancel_periodic_vs_dispatch),
        T_ADAPTIVE(test_cancel_periodic_vs_dispatch),
        T_MUTEX(test_cancel_periodic_vs_dispatch),
        T_SPIN(test_reschedule_vs_expiry),
        T_ADAPTIVE(test_reschedule_vs_expiry),
        T_MUTEX(test_reschedule_vs_expiry),
        T_SPIN(test_callback_cancels_same_batch),
        T_ADAPTIVE(test_callback_cancels_same_batch),
        T_MUTEX(test_callback_cancels_same_batch),
        T_NONE(test_callback_cancels_same_batch),
        T_SPIN(test_callback_reschedules_same_batch),
        T_ADAPTIVE(test_callback_reschedules_same_batch),
        T_NONE(test_callback_reschedules_same_batch),
        T_SPIN(test_release_once_under_races),
        T_ADAPTIVE(test_release_once_under_races),
        T_MUTEX(test_release_once_under_races),
        T_SPIN(test_add_id_matches_callback),
        T_ADAPTIVE(test_add_id_matches_callback),
        T_MUTEX(test_add_id_matches_callback),
    };
    return THR_RUN(tests);
}
