/*
 * Lock modes: spin, mutex and none each run the whole single-threaded
 * contract (add, cancel, reschedule, periodic, advance, expire, release
 * hooks, callbacks re-entering the wheel); the two thread-safe modes keep
 * the wheel consistent under concurrent producers and a concurrent checker,
 * and never starve the driver; the timer thread refuses a TW_LOCK_NONE wheel.
 */
#include "thr.h"

/* ---- single-threaded contract, run once per lock mode -------------------- */

#define MAXREC 64
static struct {
    int n;
    int tag[MAXREC];
    uint64_t tick[MAXREC];
    int released[MAXREC];
    int reentry_ok;
} st;

static void st_reset(void)
{
    memset(&st, 0, sizeof st);
}

static void st_cb(tw_wheel *w, tw_id id, void *data)
{
    (void)id;
    if (st.n < MAXREC) {
        st.tag[st.n] = (int)(uintptr_t)data;
        st.tick[st.n] = tw_now(w);
    }
    st.n++;
}

static void st_release(void *data)
{
    st.released[(int)(uintptr_t)data]++;
}

/* A callback that uses every locking entry point of its own wheel: with the
 * lock still held by the driver, any of these would deadlock (spin, mutex)
 * or corrupt (none). */
static tw_id reentry_victim;
static void reentry_cb(tw_wheel *w, tw_id id, void *data)
{
    struct tw_stats s;
    int ok = 1;
    tw_id added;
    (void)id;
    st_cb(w, id, data);
    memset(&s, 0, sizeof s);
    s.size = sizeof s;
    ok &= tw_get_stats(w, &s) == 0;
    ok &= tw_check(w) == 0;
    ok &= tw_now(w) == s.now;
    ok &= tw_count(w) == s.pending;
    ok &= tw_remaining(w, reentry_victim) == 7; /* added at 3 with delay 10 */
    ok &= tw_reschedule(w, reentry_victim, 2) == 1;
    ok &= tw_cancel(w, reentry_victim) == 1;
    ok &= tw_cancel(w, reentry_victim) == 0;
    ok &= tw_advance(w, 1) == -EBUSY;
    ok &= tw_expire(w) == -EBUSY;
    added = tw_add_ex(w, 1, 0, st_cb, st_release, (void *)(uintptr_t)21);
    ok &= added != 0;
    st.reentry_ok = ok;
}

static _Atomic uint64_t clock_us; /* the fake clock */

static void test_contract(void **state)
{
    int kind = thr_lock_of(state);
    tw_wheel *w;
    tw_id a, b, c, p, far_id;
    struct tw_stats s;

    st_reset();
    atomic_store(&clock_us, 1000000);
    w = thr_wheel(kind, 1000, thr_fake_clock, &clock_us);
    assert_non_null(w);

    a = tw_add_ex(w, 1, 0, st_cb, st_release, (void *)(uintptr_t)1);
    b = tw_add_ex(w, 5, 0, st_cb, st_release, (void *)(uintptr_t)2);
    c = tw_add_ex(w, 5, 0, st_cb, st_release, (void *)(uintptr_t)3);
    p = tw_add_ex(w, 2, 2, st_cb, st_release, (void *)(uintptr_t)4);
    far_id = tw_add_ex(w, 300, 0, st_cb, st_release, (void *)(uintptr_t)5);
    assert_true(a && b && c && p && far_id);
    assert_int_equal(tw_count(w), 5);
    assert_int_equal(tw_check(w), 0);

    assert_int_equal(tw_cancel(w, b), 1);
    assert_int_equal(st.released[2], 1);
    assert_int_equal(tw_cancel(w, b), 0);
    assert_int_equal(tw_reschedule(w, c, 3), 1);
    assert_int_equal(tw_remaining(w, c), 3);
    assert_int_equal(tw_next_expiry(w), 1);

    /* advance 4: a@1, p@2, c@3, p@4 */
    assert_int_equal(tw_advance(w, 4), 4);
    assert_int_equal(st.n, 4);
    assert_int_equal(st.tag[0], 1);
    assert_int_equal(st.tick[0], 1);
    assert_int_equal(st.tag[1], 4);
    assert_int_equal(st.tick[1], 2);
    assert_int_equal(st.tag[2], 3);
    assert_int_equal(st.tick[2], 3);
    assert_int_equal(st.tag[3], 4);
    assert_int_equal(st.tick[3], 4);
    assert_int_equal(st.released[1], 1);
    assert_int_equal(st.released[3], 1);
    assert_int_equal(st.released[4], 0);
    assert_int_equal(tw_check(w), 0);

    /* the fake clock drives tw_expire: 2.5 ms more -> tick 2 past creation
     * time, which is below now (4): nothing moves, nothing due */
    atomic_store(&clock_us, 1002500);
    assert_int_equal(tw_expire(w), 0);
    assert_int_equal(tw_now(w), 4);
    /* to 6.9 ms: tick 6, p fires at 6 */
    atomic_store(&clock_us, 1006900);
    assert_int_equal(tw_expire(w), 1);
    assert_int_equal(tw_now(w), 6);
    assert_int_equal(st.tag[4], 4);
    assert_int_equal(st.tick[4], 6);

    /* cancelling the periodic timer releases it once */
    assert_int_equal(tw_cancel(w, p), 1);
    assert_int_equal(st.released[4], 1);

    /* a timer on a level cascades down and fires at its tick */
    assert_int_equal(tw_advance(w, 293), 0);
    assert_int_equal(tw_advance(w, 1), 1);
    assert_int_equal(st.tag[5], 5);
    assert_int_equal(st.tick[5], 300);
    assert_int_equal(st.released[5], 1);

    /* callbacks run with the lock released */
    reentry_victim = 0;
    assert_non_null(tw_add(w, 3, reentry_cb, (void *)(uintptr_t)20));
    reentry_victim = tw_add_ex(w, 10, 0, st_cb, st_release, (void *)(uintptr_t)22);
    assert_int_equal(tw_advance(w, 3), 1);
    assert_int_equal(st.reentry_ok, 1);
    assert_int_equal(st.released[22], 1);
    assert_int_equal(tw_advance(w, 20), 1); /* tag 21 */
    assert_int_equal(st.tag[st.n - 1], 21);
    assert_int_equal(st.released[21], 1);

    memset(&s, 0, sizeof s);
    s.size = sizeof s;
    assert_int_equal(tw_get_stats(w, &s), 0);
    assert_int_equal(s.added, 8);
    assert_int_equal(s.fired, 8);
    assert_int_equal(s.cancelled, 3);
    assert_int_equal(s.pending, 0);

    /* destroy releases what is still pending, never fires it */
    assert_non_null(tw_add_ex(w, 50, 0, st_cb, st_release, (void *)(uintptr_t)30));
    assert_non_null(tw_add_ex(w, 0, 7, st_cb, st_release, (void *)(uintptr_t)31));
    int fired = st.n;
    thr_destroy(w);
    assert_int_equal(st.n, fired);
    assert_int_equal(st.released[30], 1);
    assert_int_equal(st.released[31], 1);
}

/* ---- TW_LOCK_NONE: single-threaded use ------------------------------------ */

/* In none mode a callback cancelling the timer it runs for, and a release
 * hook cancelling another timer, must return at once (nothing to wait for). */
static tw_id none_self, none_other;
static int none_self_cancel = -1;
static void none_self_cb(tw_wheel *w, tw_id id, void *data)
{
    (void)data;
    none_self = id;
    none_self_cancel = tw_cancel(w, id);
}

static tw_wheel *none_wheel;
static void none_release_cancels_other(void *data)
{
    (void)data;
    st.released[41]++;
    st.reentry_ok = tw_cancel(none_wheel, none_other) == 1;
}

static void test_none_single_threaded(void **state)
{
    tw_wheel *w;
    tw_id x;
    int i;
    (void)state;
    st_reset();
    w = thr_wheel(TW_LOCK_NONE, 1000, NULL, NULL);
    assert_non_null(w);
    none_wheel = w;

    /* one-shot cancelling itself from its callback: 0 at once */
    assert_non_null(tw_add(w, 1, none_self_cb, NULL));
    assert_int_equal(tw_advance(w, 1), 1);
    assert_int_equal(none_self_cancel, 0);

    /* periodic cancelling itself from its callback: 1 at once, no more runs */
    none_self_cancel = -1;
    x = tw_add_periodic(w, 1, 1, none_self_cb, NULL);
    assert_true(x != 0);
    assert_int_equal(tw_advance(w, 5), 1);
    assert_int_equal(none_self_cancel, 1);
    assert_int_equal(tw_count(w), 0);

    /* a release hook that cancels another timer */
    none_other = tw_add_ex(w, 10, 0, st_cb, st_release, (void *)(uintptr_t)2);
    x = tw_add_ex(w, 10, 0, st_cb, none_release_cancels_other, NULL);
    assert_int_equal(tw_cancel(w, x), 1);
    assert_int_equal(st.released[41], 1);
    assert_int_equal(st.reentry_ok, 1);
    assert_int_equal(st.released[2], 1);
    assert_int_equal(tw_count(w), 0);

    /* many timers, driven to the end, nothing lost */
    st_reset();
    for (i = 0; i < 1000; i++)
        assert_true(tw_add(w, (uint64_t)(i * 37 % 5000), st_cb, NULL) != 0);
    assert_int_equal(tw_advance(w, 5000), 1000);
    assert_int_equal(st.n, 1000);
    assert_int_equal(tw_check(w), 0);

    thr_destroy(w);
}

/* ---- the timer thread refuses an unlocked wheel ------------------------- */

static void test_thread_start_refuses_none(void **state)
{
    tw_wheel *w;
    (void)state;
    st_reset();
    w = thr_wheel(TW_LOCK_NONE, 1000, NULL, NULL);
    assert_non_null(w);
    assert_int_equal(tw_thread_start(w, 1000), -EINVAL);
    assert_int_equal(tw_thread_start(w, 1), -EINVAL);
    /* nothing runs, so stop is a no-op */
    assert_int_equal(tw_thread_stop(w), 0);
    /* the wheel is untouched and usable */
    assert_non_null(tw_add(w, 1, st_cb, NULL));
    assert_int_equal(tw_advance(w, 1), 1);
    assert_int_equal(st.n, 1);
    thr_destroy(w);

    /* the locked modes accept the same call */
    w = thr_wheel(TW_LOCK_SPIN, 1000, NULL, NULL);
    assert_non_null(w);
    assert_int_equal(tw_thread_start(w, 0), -EINVAL);
    assert_int_equal(tw_thread_start(w, 1000), 0);
    assert_int_equal(tw_thread_stop(w), 0);
    thr_destroy(w);
    w = thr_wheel(TW_LOCK_MUTEX, 1000, NULL, NULL);
    assert_non_null(w);
    assert_int_equal(tw_thread_start(w, 1000), 0);
    assert_int_equal(tw_thread_stop(w), 0);
    thr_destroy(w);
    assert_int_equal(tw_thread_start(NULL, 1000), -EINVAL);
    assert_int_equal(tw_thread_stop(NULL), -EINVAL);
}

/* ---- thread-safe modes under concurrent use ----------------------------- */

#define PRODUCERS 3
#define SLOTS 4096 /* timers per producer */

struct shared {
    tw_wheel *w;
    atomic_int driver_done;  /* driver finished its advances */
    atomic_int producers_up; /* producers that started */
    atomic_int check_failures;
    atomic_int errors;
    atomic_int fired[PRODUCERS * SLOTS];
    atomic_int released[PRODUCERS * SLOTS];
    atomic_int cancelled[PRODUCERS * SLOTS];
    atomic_int added[PRODUCERS * SLOTS];
    _Atomic uint64_t producer_ops;
};
static struct shared *sh;

static void sh_cb(tw_wheel *w, tw_id id, void *data)
{
    (void)w;
    (void)id;
    atomic_fetch_add(&sh->fired[(uintptr_t)data], 1);
}

static void sh_release(void *data)
{
    atomic_fetch_add(&sh->released[(uintptr_t)data], 1);
}

struct producer_arg {
    int index;
};

/* Adds, reschedules and cancels its own timers, then keeps hammering the
 * lock with add + cancel pairs until the driver is done: if the lock starved
 * the driver, this would never end (the test would time out). */
static void *producer(void *argument)
{
    struct producer_arg *a = argument;
    uint64_t rng = thr_seed((uint64_t)a->index);
    tw_id ids[SLOTS];
    int slot = 0, base = a->index * SLOTS;
    memset(ids, 0, sizeof ids);
    atomic_fetch_add(&sh->producers_up, 1);
    while (!atomic_load(&sh->driver_done)) {
        int i = base + slot;
        if (ids[slot] == 0 && !atomic_load(&sh->added[i])) {
            ids[slot] = tw_add_ex(sh->w, thr_rng(&rng) % 40, 0, sh_cb, sh_release,
                                  (void *)(uintptr_t)i);
            if (ids[slot] == 0)
                atomic_fetch_add(&sh->errors, 1);
            atomic_store(&sh->added[i], 1);
        } else if (ids[slot] != 0) {
            uint64_t r = thr_rng(&rng) % 4;
            if (r == 0) {
                int c = tw_cancel(sh->w, ids[slot]);
                if (c == 1)
                    atomic_fetch_add(&sh->cancelled[i], 1);
                else if (c != 0)
                    atomic_fetch_add(&sh->errors, 1);
                ids[slot] = 0;
            } else if (r == 1) {
                if (tw_reschedule(sh->w, ids[slot], thr_rng(&rng) % 40) < 0)
                    atomic_fetch_add(&sh->errors, 1);
            } else {
                ids[slot] = 0; /* leave it to fire */
            }
        } else {
            /* slots used up: a far timer the driver cannot reach */
            tw_id scratch = tw_add(sh->w, 1000000, sh_cb, (void *)(uintptr_t)i);
            if (scratch == 0 || tw_cancel(sh->w, scratch) != 1)
                atomic_fetch_add(&sh->errors, 1);
        }
        slot = (slot + 1) % SLOTS;
        atomic_fetch_add_explicit(&sh->producer_ops, 1, memory_order_relaxed);
    }
    return NULL;
}

static void *checker(void *argument)
{
    (void)argument;
    while (!atomic_load(&sh->driver_done)) {
        if (tw_check(sh->w) != 0)
            atomic_fetch_add(&sh->check_failures, 1);
        (void)tw_next_expiry(sh->w);
        (void)tw_count(sh->w);
        thr_sleep_us(200);
    }
    return NULL;
}

static void test_concurrent_producers(void **state)
{
    int kind = thr_lock_of(state);
    pthread_t threads[PRODUCERS + 1];
    struct producer_arg args[PRODUCERS];
    int i, advances = THR_TSAN ? 2000 : 20000;
    uint64_t end;

    sh = calloc(1, sizeof *sh);
    assert_non_null(sh);
    sh->w = thr_wheel(kind, 1000, NULL, NULL);
    assert_non_null(sh->w);
    for (i = 0; i < PRODUCERS; i++) {
        args[i].index = i;
        thr_create(&threads[i], producer, &args[i]);
    }
    thr_create(&threads[PRODUCERS], checker, NULL);
    assert_true(thr_wait_int(&sh->producers_up, PRODUCERS));

    /* the driver: one tick per call, while producers hammer the lock, until
     * both it and the producers have done their share (a starved side would
     * hang here until the test's timeout) */
    for (i = 0; i < advances ||
                atomic_load(&sh->producer_ops) < (uint64_t)advances * 10;
         i++) {
        assert_true(tw_advance(sh->w, 1) >= 0);
        if (i % 1024 == 0)
            thr_progress();
    }
    advances = i;
    atomic_store(&sh->driver_done, 1);
    for (i = 0; i <= PRODUCERS; i++)
        thr_join(threads[i]);

    /* drain: every timer still pending fires */
    end = thr_now_us() + THR_HANG_US;
    while (tw_count(sh->w) != 0 && thr_now_us() < end)
        assert_true(tw_advance(sh->w, 64) >= 0);
    assert_int_equal(tw_count(sh->w), 0);
    assert_int_equal(tw_check(sh->w), 0);
    assert_int_equal(atomic_load(&sh->errors), 0);
    assert_int_equal(atomic_load(&sh->check_failures), 0);

    for (i = 0; i < PRODUCERS * SLOTS; i++) {
        int added = atomic_load(&sh->added[i]);
        int fired = atomic_load(&sh->fired[i]);
        int cancelled = atomic_load(&sh->cancelled[i]);
        if (fired + cancelled != added || atomic_load(&sh->released[i]) != added)
            fail_msg("timer %d: added %d fired %d cancelled %d released %d", i,
                     added, fired, cancelled, atomic_load(&sh->released[i]));
    }
    print_message("%s: %d advances, %llu producer operations\n",
                  thr_lock_name(kind), advances,
                  (unsigned long long)atomic_load(&sh->producer_ops));
    thr_destroy(sh->w);
    free(sh);
    sh = NULL;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        T_SPIN(test_contract),
        T_ADAPTIVE(test_contract),
        T_MUTEX(test_contract),
        T_NONE(test_contract),
        T_ONE(test_none_single_threaded),
        T_ONE(test_thread_start_refuses_none),
        T_SPIN(test_concurrent_producers),
        T_ADAPTIVE(test_concurrent_producers),
        T_MUTEX(test_concurrent_producers),
    };
    return THR_RUN(tests);
}
