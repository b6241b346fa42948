/*
 * The timer-thread driver: tw_thread_start/stop with a fake clock (an atomic
 * the test advances) and with the real clock. Callbacks run on the timer
 * thread, never early; stop joins (a running callback finishes first, none
 * runs afterwards), is idempotent and safe from several threads at once;
 * from inside a callback stop gives -EDEADLK and destroy -EBUSY; start twice
 * gives -EBUSY; start after stop works; tw_destroy stops a running thread,
 * also while it runs a release hook.
 */
#include "thr.h"

#include <stdio.h>

/* ---- what the callbacks saw ---------------------------------------------- */

static pthread_t main_thread;
static pthread_t first_cb_thread; /* written by the first callback only */
static atomic_int have_cb_thread;
static atomic_int on_main_thread;  /* callbacks that ran on the test thread */
static atomic_int on_other_thread; /* ... on a second, different thread */
static atomic_int fired;
static atomic_int released;
static atomic_int early;           /* callbacks whose tw_now() was before due */
static _Atomic uint64_t last_tick;

static void note_thread(void)
{
    pthread_t self = pthread_self();
    if (pthread_equal(self, main_thread))
        atomic_fetch_add(&on_main_thread, 1);
    if (!atomic_load(&have_cb_thread)) {
        first_cb_thread = self;
        atomic_store(&have_cb_thread, 1);
    } else if (!pthread_equal(self, first_cb_thread)) {
        atomic_fetch_add(&on_other_thread, 1);
    }
}

static void reset(void)
{
    main_thread = pthread_self();
    atomic_store(&have_cb_thread, 0);
    atomic_store(&on_main_thread, 0);
    atomic_store(&on_other_thread, 0);
    atomic_store(&fired, 0);
    atomic_store(&released, 0);
    atomic_store(&early, 0);
    atomic_store(&last_tick, 0);
}

/* user_data = the tick the timer is due at, at the earliest */
static void count_cb(tw_wheel *w, tw_id id, void *data)
{
    uint64_t now = tw_now(w);
    (void)id;
    note_thread();
    if (now < (uint64_t)(uintptr_t)data)
        atomic_fetch_add(&early, 1);
    atomic_store(&last_tick, now);
    atomic_fetch_add(&fired, 1);
}

static void count_release(void *data)
{
    (void)data;
    atomic_fetch_add(&released, 1);
}

static void expect_one_timer_thread(void)
{
    assert_int_equal(atomic_load(&on_main_thread), 0);
    assert_int_equal(atomic_load(&on_other_thread), 0);
    assert_int_equal(atomic_load(&early), 0);
}

#define DATA(tick) ((void *)(uintptr_t)(tick))

/* ---- fake clock ---------------------------------------------------------- */

static _Atomic uint64_t clock_us; /* the fake clock */

static void test_fake_clock(void **state)
{
    int kind = thr_lock_of(state);
    tw_wheel *w;

    reset();
    atomic_store(&clock_us, 5000000);
    w = thr_wheel(kind, 1000, thr_fake_clock, &clock_us);
    assert_non_null(w);
    assert_true(tw_add_ex(w, 5, 0, count_cb, count_release, DATA(5)) != 0);
    assert_true(tw_add_ex(w, 300, 0, count_cb, count_release, DATA(300)) != 0);
    assert_int_equal(tw_thread_start(w, 100), 0);

    /* 4.999 ms later the wheel reaches tick 4; the timer due at 5 waits */
    atomic_store(&clock_us, 5004999);
    THR_WAIT_UNTIL(tw_now(w) >= 4);
    assert_int_equal(tw_now(w), 4);
    thr_sleep_us(2000); /* many more tw_expire calls at the same time */
    assert_int_equal(atomic_load(&fired), 0);
    assert_int_equal(tw_now(w), 4);

    atomic_store(&clock_us, 5005000);
    assert_true(thr_wait_int(&fired, 1));
    assert_int_equal(atomic_load(&last_tick), 5);
    /* the release hook runs right after the callback returned */
    assert_true(thr_wait_int(&released, 1));

    /* one jump of the clock: the level timer cascades and fires at 300 */
    atomic_store(&clock_us, 5400000);
    assert_true(thr_wait_int(&fired, 2));
    assert_int_equal(atomic_load(&last_tick), 300);
    assert_true(thr_wait_int(&released, 2));
    expect_one_timer_thread();

    assert_int_equal(tw_thread_stop(w), 0);
    assert_int_equal(tw_thread_stop(w), 0);
    assert_int_equal(tw_count(w), 0);
    thr_destroy(w);
}

/* ---- delays count from the clock, not from the timer thread's tick ------- */

#define CLOCK0 UINT64_C(7000000) /* the fake clock at creation: tick 0 */
#define TICK_US UINT64_C(1000)

/* user_data of these timers: when they were armed and for how long */
struct armed {
    _Atomic uint64_t at_us, delay_us;
    _Atomic uint64_t fired_us;   /* the fake clock when the callback ran */
    _Atomic uint64_t fired_tick; /* tw_now() then: the tick it was due at */
};

static void clock_rule_cb(tw_wheel *w, tw_id id, void *data)
{
    struct armed *a = data;
    (void)id;
    note_thread();
    atomic_store(&a->fired_tick, tw_now(w));
    atomic_store(&a->fired_us, atomic_load(&clock_us));
    if (atomic_load(&a->fired_us) < atomic_load(&a->at_us) + atomic_load(&a->delay_us))
        atomic_fetch_add(&early, 1);
    atomic_fetch_add(&fired, 1);
}

static atomic_int blocker_running, blocker_release;

/* Holds the timer thread inside a callback until the test lets it go: its
 * tw_now() is then stuck while the clock moves on. */
static void blocker_cb(tw_wheel *w, tw_id id, void *data)
{
    (void)w;
    (void)id;
    (void)data;
    atomic_store(&blocker_running, 1);
    thr_wait_int(&blocker_release, 1);
}

static void wait_for_count(tw_wheel *w, uint64_t count)
{
    THR_WAIT_UNTIL(tw_count(w) == count);
    assert_int_equal(tw_count(w), count);
}

static void wait_for_tick(tw_wheel *w, uint64_t tick)
{
    THR_WAIT_UNTIL(tw_now(w) >= tick);
    assert_true(tw_now(w) >= tick);
}

#define ARMED 64

static void test_clock_driven_adds(void **state)
{
    static struct armed armed[ARMED];
    int kind = thr_lock_of(state);
    uint64_t seed = thr_seed(11);
    tw_wheel *w;
    tw_id ids[ARMED];
    int i;

    reset();
    memset(armed, 0, sizeof armed);
    atomic_store(&blocker_running, 0);
    atomic_store(&blocker_release, 0);
    atomic_store(&clock_us, CLOCK0);
    w = thr_wheel(kind, (uint32_t)TICK_US, thr_fake_clock, &clock_us);
    assert_true(tw_add(w, 2, blocker_cb, NULL) != 0);
    assert_int_equal(tw_thread_start(w, 100), 0); /* AUTO: clock-driven now */

    /* 1. The timer thread is stuck in a callback at tick 2 while the clock
     * runs 50 ms on: timers added meanwhile count from the clock, not from
     * the stuck tick. */
    atomic_store(&clock_us, CLOCK0 + 2 * TICK_US);
    assert_true(thr_wait_int(&blocker_running, 1));
    atomic_store(&clock_us, CLOCK0 + 52300);
    for (i = 0; i < 8; i++) {
        atomic_store(&armed[i].at_us, atomic_load(&clock_us));
        atomic_store(&armed[i].delay_us, (uint64_t)(1 + 3 * i) * TICK_US);
        ids[i] = tw_add(w, 1 + 3 * (uint64_t)i, clock_rule_cb, &armed[i]);
        assert_true(ids[i] != 0);
    }
    atomic_store(&blocker_release, 1);
    wait_for_tick(w, 52); /* caught up to the clock ... */
    thr_sleep_us(2000);
    assert_int_equal(atomic_load(&fired), 0); /* ... and nothing ran early */

    /* 2. The clock moves in random steps; each step arms a new timer or
     * moves a pending one at once (the thread may or may not have expired
     * since), then waits until the thread has caught up. */
    for (i = 8; i < ARMED; i++) {
        uint64_t step = thr_rng(&seed) % (3 * TICK_US);
        uint64_t delay = thr_rng(&seed) % 20;
        uint64_t at = atomic_load(&clock_us) + step;
        int which = i;
        atomic_store(&clock_us, at);
        if (i % 4 == 3) /* move one of the first eight instead */
            which = (int)(thr_rng(&seed) % 8);
        if (which == i) {
            atomic_store(&armed[i].at_us, at);
            atomic_store(&armed[i].delay_us, delay * TICK_US);
            ids[i] = tw_add(w, delay, clock_rule_cb, &armed[i]);
            assert_true(ids[i] != 0);
        } else if (atomic_load(&armed[which].fired_us) == 0) {
            /* the callback reads at_us/delay_us: set them first, and put
               them back if the timer fired before the move */
            uint64_t old_at = atomic_load(&armed[which].at_us);
            uint64_t old_delay = atomic_load(&armed[which].delay_us);
            atomic_store(&armed[which].delay_us, 0);
            atomic_store(&armed[which].at_us, at);
            atomic_store(&armed[which].delay_us, delay * TICK_US);
            if (tw_reschedule(w, ids[which], delay) != 1) {
                atomic_store(&armed[which].delay_us, old_delay);
                atomic_store(&armed[which].at_us, old_at);
            }
        }
        wait_for_tick(w, (at - CLOCK0) / TICK_US);
    }
    atomic_store(&clock_us, atomic_load(&clock_us) + 30 * TICK_US);
    wait_for_count(w, 0);
    assert_int_equal(tw_thread_stop(w), 0);

    /* By the clock: no callback before its delay had passed since the call
     * that armed it; and each timer's tick began at most one tick after
     * that (rounding up to a tick boundary), so with a driver every 100 µs
     * it ran about a tick late at most. */
    assert_int_equal(atomic_load(&early), 0);
    for (i = 0; i < ARMED; i++) {
        uint64_t due = atomic_load(&armed[i].at_us) + atomic_load(&armed[i].delay_us);
        uint64_t tick_start = CLOCK0 + atomic_load(&armed[i].fired_tick) * TICK_US;
        if (i >= 8 && i % 4 == 3)
            continue; /* no timer of its own */
        assert_true(atomic_load(&armed[i].fired_us) >= due);
        if (atomic_load(&armed[i].delay_us) == 0) /* due in the call's tick */
            assert_true(tick_start <= due);
        else
            assert_true(tick_start >= due);
        assert_true(tick_start < due + TICK_US);
    }
    expect_one_timer_thread();
    thr_destroy(w);
}

/* ---- the timer thread stages level slots as it goes ---------------------- */

static atomic_int wrong_tick; /* callbacks whose tw_now() was not their due tick */

static void exact_cb(tw_wheel *w, tw_id id, void *data)
{
    (void)id;
    note_thread();
    if (tw_now(w) != (uint64_t)(uintptr_t)data)
        atomic_fetch_add(&wrong_tick, 1);
    atomic_fetch_add(&fired, 1);
}

static uint64_t pending_at_level(tw_wheel *w, int level)
{
    struct tw_stats s;
    s.size = (uint32_t)offsetof(struct tw_stats, pool_capacity);
    assert_int_equal(tw_get_stats(w, &s), 0);
    return s.pending_level[level];
}

/* Timers in the level-1 slot after time's: as the fake clock walks through
 * the slot before it, the timer thread's drives move them down a share at a
 * time (about half by mid-way, all by the deadline, one level-0 slot span
 * before theirs starts), then every one fires on its tick, on the thread. */
static void test_staging_on_timer_thread(void **state)
{
    int kind = thr_lock_of(state);
    const int count = 3000;
    uint64_t seed = 11;
    tw_wheel *w;

    reset();
    atomic_store(&wrong_tick, 0);
    atomic_store(&clock_us, 9000000);
    w = thr_wheel(kind, 1000, thr_fake_clock, &clock_us);
    assert_non_null(w);
    for (int i = 0; i < count; i++) {
        uint64_t delay = 16384 + thr_rng(&seed) % 16384;
        assert_true(tw_add(w, delay, exact_cb, DATA(delay)) != 0);
    }
    assert_int_equal(pending_at_level(w, 1), (uint64_t)count);
    assert_int_equal(tw_thread_start(w, 100), 0);

    atomic_store(&clock_us, 9000000 + 8000 * 1000);
    wait_for_tick(w, 8000);
    assert_true(pending_at_level(w, 1) < (uint64_t)count * 3 / 4);
    assert_true(pending_at_level(w, 1) > (uint64_t)count / 4);
    atomic_store(&clock_us, 9000000 + (16384 - 256) * 1000);
    wait_for_tick(w, 16384 - 256);
    assert_int_equal(pending_at_level(w, 1), 0);
    assert_int_equal(atomic_load(&fired), 0);

    atomic_store(&clock_us, 9000000 + 40000 * 1000);
    assert_true(thr_wait_int(&fired, count));
    assert_int_equal(atomic_load(&wrong_tick), 0);
    expect_one_timer_thread();
    assert_int_equal(tw_thread_stop(w), 0);
    assert_int_equal(tw_count(w), 0);
    assert_int_equal(tw_check(w), 0);
    thr_destroy(w);
}

/* ---- real clock ---------------------------------------------------------- */

#define REAL_TIMERS 200

static void test_real_clock(void **state)
{
    int kind = thr_lock_of(state);
    tw_wheel *w;
    int i;

    reset();
    w = thr_wheel(kind, 1000, NULL, NULL);
    assert_non_null(w);
    assert_int_equal(tw_thread_start(w, 500), 0);
    for (i = 0; i < REAL_TIMERS; i++) {
        /* the due tick is at least now-before-add + delay */
        uint64_t delay = (uint64_t)(i % 40);
        uint64_t due = tw_now(w) + delay;
        assert_true(tw_add_ex(w, delay, 0, count_cb, count_release, DATA(due)) != 0);
        if (i % 20 == 0)
            thr_sleep_us(1000);
    }
    assert_true(thr_wait_int(&fired, REAL_TIMERS));
    assert_true(thr_wait_int(&released, REAL_TIMERS));
    expect_one_timer_thread();
    assert_int_equal(tw_thread_stop(w), 0);
    assert_int_equal(atomic_load(&fired), REAL_TIMERS);
    assert_int_equal(tw_count(w), 0);
    assert_int_equal(tw_check(w), 0);
    thr_destroy(w);
}

/* ---- an idle timer thread sleeps ------------------------------------------ */

/* A timer thread with nothing to do wakes once a period: counted through
 * the wheel's clock, which each of its drives reads once, over 500 ms of a
 * 10 ms period: at most about twice per period; and the process uses
 * under 100 ms of CPU meanwhile (the test's own thread sleeps). The bounds
 * only cap: a loaded machine gives fewer wake-ups and no more CPU. A
 * timed wait that returned at once (its deadline read on another clock
 * than the one it was computed on) would make the thread spin: thousands
 * of wake-ups. */
static atomic_uint idle_reads;

static uint64_t counting_clock(void *context)
{
    (void)context;
    atomic_fetch_add(&idle_reads, 1);
    return tw_gettime();
}

static uint64_t process_cpu_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

static void test_idle_thread_sleeps(void **state)
{
    tw_wheel *w = thr_wheel(thr_lock_of(state), 1000, counting_clock, NULL);
    uint64_t cpu = process_cpu_us();
    unsigned reads;
    atomic_store(&idle_reads, 0);
    assert_int_equal(tw_thread_start(w, 10000), 0);
    thr_sleep_us(500000);
    assert_int_equal(tw_thread_stop(w), 0);
    reads = atomic_load(&idle_reads);
    cpu = process_cpu_us() - cpu;
    if (reads == 0 || reads > 2 * 50 + 10)
        fail_msg("an idle timer thread at 10 ms woke %u times in 500 ms", reads);
    if (cpu > 100000)
        fail_msg("an idle timer thread took %llu us of CPU in 500 ms",
                 (unsigned long long)cpu);
    thr_destroy(w);
}

/* ---- stop joins ---------------------------------------------------------- */

static atomic_int slow_entered, slow_done, slow_runs;
static uint64_t slow_sleep_us = 20000;

/* Periodic: on its third run it sleeps inside the callback, so the test can
 * call stop while a callback is running. */
static void slow_cb(tw_wheel *w, tw_id id, void *data)
{
    (void)w;
    (void)id;
    (void)data;
    note_thread();
    if (atomic_fetch_add(&slow_runs, 1) == 2) {
        atomic_store(&slow_entered, 1);
        thr_sleep_us(slow_sleep_us);
        atomic_store(&slow_done, 1);
    }
}

static void slow_reset(void)
{
    atomic_store(&slow_entered, 0);
    atomic_store(&slow_done, 0);
    atomic_store(&slow_runs, 0);
}

static void test_stop_joins(void **state)
{
    int kind = thr_lock_of(state);
    tw_wheel *w;
    int runs;

    reset();
    slow_reset();
    w = thr_wheel(kind, 100, NULL, NULL);
    assert_non_null(w);
    assert_true(tw_add_ex(w, 1, 1, slow_cb, count_release, NULL) != 0);
    assert_int_equal(tw_thread_start(w, 100), 0);
    assert_true(thr_wait_int(&slow_entered, 1));
    /* the callback is sleeping on the timer thread: stop waits for it */
    assert_int_equal(tw_thread_stop(w), 0);
    assert_int_equal(atomic_load(&slow_done), 1);
    runs = atomic_load(&slow_runs);
    thr_sleep_us(5000); /* 50 ticks: nothing may run now */
    assert_int_equal(atomic_load(&slow_runs), runs);
    assert_int_equal(tw_thread_stop(w), 0); /* twice */
    assert_int_equal(tw_count(w), 1);       /* the periodic timer stays */
    assert_int_equal(atomic_load(&released), 0);
    expect_one_timer_thread();

    /* start after stop: a new thread drives again */
    atomic_store(&have_cb_thread, 0);
    assert_int_equal(tw_thread_start(w, 100), 0);
    assert_true(thr_wait_int(&slow_runs, runs + 3));
    assert_int_equal(tw_thread_stop(w), 0);
    expect_one_timer_thread();
    thr_destroy(w);
    assert_int_equal(atomic_load(&released), 1);
}

/* ---- start/stop errors --------------------------------------------------- */

static void test_start_twice(void **state)
{
    int kind = thr_lock_of(state);
    tw_wheel *w;

    reset();
    w = thr_wheel(kind, 1000, NULL, NULL);
    assert_non_null(w);
    assert_int_equal(tw_thread_stop(w), 0); /* never started */
    assert_int_equal(tw_thread_start(w, 0), -EINVAL);
    assert_int_equal(tw_thread_start(w, 1000), 0);
    assert_int_equal(tw_thread_start(w, 1000), -EBUSY);
    assert_int_equal(tw_thread_start(w, 50), -EBUSY);
    assert_int_equal(tw_thread_stop(w), 0);
    assert_int_equal(tw_thread_stop(w), 0);
    /* start after stop works and drives */
    assert_int_equal(tw_thread_start(w, 1000), 0);
    assert_true(tw_add(w, 2, count_cb, DATA(0)) != 0);
    assert_true(thr_wait_int(&fired, 1));
    assert_int_equal(tw_thread_stop(w), 0);
    /* many start/stop rounds */
    for (int i = 0; i < 50; i++) {
        assert_int_equal(tw_thread_start(w, 100 + (uint32_t)i), 0);
        assert_true(tw_add(w, 0, count_cb, DATA(0)) != 0);
        if (i % 2)
            thr_sleep_us(300);
        assert_int_equal(tw_thread_stop(w), 0);
    }
    /* whatever did not fire yet fires after the last start */
    assert_int_equal(tw_thread_start(w, 100), 0);
    assert_true(thr_wait_int(&fired, 51));
    assert_int_equal(tw_thread_stop(w), 0);
    /* several threads drove in turn, never the test thread */
    assert_int_equal(atomic_load(&on_main_thread), 0);
    assert_int_equal(atomic_load(&early), 0);
    thr_destroy(w);
}

/* ---- from inside a callback ---------------------------------------------- */

static tw_wheel *inside_wheel;
static atomic_int inside_stop, inside_destroy, inside_start, inside_done;
static atomic_int inside_destroyed, inside_later_ran;
/* opened by on_destroy: the timer thread has freed the wheel (it detached
 * itself, so there is no join to wait for) */
static struct thr_gate inside_gone;

/* A shutdown timer on the timer thread: stop and start are refused there,
 * destroy is deferred to the thread, which frees the wheel and exits. */
static void inside_cb(tw_wheel *w, tw_id id, void *data)
{
    (void)id;
    (void)data;
    note_thread();
    atomic_store(&inside_stop, tw_thread_stop(w));
    atomic_store(&inside_start, tw_thread_start(w, 1000));
    atomic_store(&inside_destroy, tw_destroy(w));
    atomic_store(&inside_done, 1);
}

static void inside_later_cb(tw_wheel *w, tw_id id, void *data)
{
    (void)w, (void)id, (void)data;
    atomic_fetch_add(&inside_later_ran, 1);
}

static void inside_destroyed_hook(void *context)
{
    (void)context;
    atomic_fetch_add(&inside_destroyed, 1);
    thr_gate_set(&inside_gone, 1);
}

static void test_destroy_inside_callback(void **state)
{
    int kind = thr_lock_of(state);
    struct tw_config c;
    tw_wheel *w;

    reset();
    atomic_store(&inside_done, 0);
    atomic_store(&inside_destroyed, 0);
    atomic_store(&inside_later_ran, 0);
    thr_gate_set(&inside_gone, 0);
    tw_config_init(&c);
    c.lock = kind;
    c.on_destroy = inside_destroyed_hook;
    w = tw_create(&c);
    assert_non_null(w);
    inside_wheel = w;
    /* same tick, after the shutdown: must not run; far away: released */
    assert_true(tw_add(w, 1, inside_cb, NULL) != 0);
    assert_true(tw_add(w, 1, inside_later_cb, NULL) != 0);
    assert_true(tw_add_ex(w, 100000, 0, count_cb, count_release, DATA(100000)) != 0);
    assert_int_equal(tw_thread_start(w, 200), 0);
    /* on_destroy, on a condition variable: what a caller has to wait for */
    assert_true(thr_gate_wait(&inside_gone, 1, 0));
    assert_int_equal(atomic_load(&inside_done), 1);
    assert_int_equal(atomic_load(&inside_stop), -EDEADLK);
    assert_int_equal(atomic_load(&inside_start), -EBUSY);
    assert_int_equal(atomic_load(&inside_destroy), 0);
    assert_int_equal(atomic_load(&inside_later_ran), 0);
    assert_int_equal(atomic_load(&released), 1);
    assert_int_equal(atomic_load(&fired), 0);
    assert_int_equal(atomic_load(&inside_destroyed), 1);
}

/* The timer thread that frees its wheel detaches itself: run it many
 * times and the address space does not grow by a thread stack each time
 * (an undetached, unjoined thread keeps its stack for good; 8 MB each by
 * default). Read from /proc/self/status; skipped where that is missing or
 * under a sanitizer, whose allocator changes the picture. */
static long vm_size_kb(void)
{
    char line[256];
    long kb = -1;
    FILE *f = fopen("/proc/self/status", "r");
    if (!f)
        return -1;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "VmSize: %ld kB", &kb) == 1)
            break;
    fclose(f);
    return kb;
}

static void test_destroy_inside_callback_frees_the_thread(void **state)
{
    const int rounds = 40;
    long before, after;
    int i;
#if THR_TSAN || defined(__SANITIZE_ADDRESS__)
    skip();
#endif
    before = vm_size_kb();
    if (before < 0)
        skip();
    for (i = 0; i < rounds; i++)
        test_destroy_inside_callback(state);
    after = vm_size_kb();
    if (after - before > 8 * 1024 * (rounds / 2))
        fail_msg("address space grew by %ld kB over %d timer threads that "
                 "destroyed their wheel: their stacks were not freed",
                 after - before, rounds);
}

/* ---- destroy with the thread running ------------------------------------- */

static void test_destroy_running(void **state)
{
    int kind = thr_lock_of(state);
    tw_wheel *w;
    int runs;

    reset();
    slow_reset();
    w = thr_wheel(kind, 100, NULL, NULL);
    assert_non_null(w);
    assert_true(tw_add_ex(w, 0, 1, slow_cb, count_release, NULL) != 0);
    assert_true(tw_add_ex(w, 1000000, 0, count_cb, count_release, NULL) != 0);
    assert_true(tw_add_ex(w, 3, 7, count_cb, count_release, NULL) != 0);
    assert_int_equal(tw_thread_start(w, 100), 0);
    /* destroy while the slow callback sleeps on the timer thread */
    assert_true(thr_wait_int(&slow_entered, 1));
    thr_destroy(w);
    assert_int_equal(atomic_load(&slow_done), 1);
    assert_int_equal(atomic_load(&released), 3);
    runs = atomic_load(&slow_runs);
    thr_sleep_us(5000);
    assert_int_equal(atomic_load(&slow_runs), runs);
    expect_one_timer_thread();

    /* and destroy right after start, before the thread did anything */
    for (int i = 0; i < 20; i++) {
        w = thr_wheel(kind, 1000, NULL, NULL);
        assert_non_null(w);
        assert_true(tw_add_ex(w, 0, 1, count_cb, count_release, NULL) != 0);
        assert_int_equal(tw_thread_start(w, 50), 0);
        thr_destroy(w);
    }
    assert_int_equal(atomic_load(&released), 23);
}

/* ---- destroy while the timer thread runs a release hook ------------------
 * The timer thread hands a fired one-shot's user data back with the lock
 * released, like a callback; tw_destroy must wait for it as it waits for a
 * callback (regression: it answered -EBUSY and left the thread running, and
 * the C++ facade then leaked the wheel with the thread still firing). */

static atomic_int hook_entered, destroy_called;

static void slow_release(void *data)
{
    (void)data;
    if (atomic_exchange(&hook_entered, 1) == 0) {
        /* stay inside until the test is in tw_destroy, and a little more */
        thr_wait_int(&destroy_called, 1);
        thr_sleep_us(20000);
    }
    atomic_fetch_add(&released, 1);
}

static void test_destroy_during_release(void **state)
{
    int kind = thr_lock_of(state);
    tw_wheel *w;
    int r;

    reset();
    atomic_store(&hook_entered, 0);
    atomic_store(&destroy_called, 0);
    w = thr_wheel(kind, 100, NULL, NULL);
    assert_non_null(w);
    assert_true(tw_add_ex(w, 0, 0, count_cb, slow_release, NULL) != 0);
    assert_true(tw_add_ex(w, 1000000, 0, count_cb, count_release, NULL) != 0);
    assert_int_equal(tw_thread_start(w, 100), 0);
    assert_true(thr_wait_int(&hook_entered, 1));
    atomic_store(&destroy_called, 1);
    thr_forget(w);
    r = tw_destroy(w);
    if (r != 0) {
        /* refused: the wheel is still there; stop it before failing */
        tw_thread_stop(w);
        tw_destroy(w);
        fail_msg("tw_destroy during the timer thread's release hook: %d", r);
    }
    assert_int_equal(atomic_load(&fired), 1);
    assert_int_equal(atomic_load(&released), 2);
    expect_one_timer_thread();
}

/* ---- concurrent stoppers and a competing driver -------------------------- */

static tw_wheel *shared_wheel;
static atomic_int stop_results[2];

static void *stopper(void *argument)
{
    int i = (int)(uintptr_t)argument;
    atomic_store(&stop_results[i], tw_thread_stop(shared_wheel));
    return NULL;
}

static void test_concurrent_stop(void **state)
{
    int kind = thr_lock_of(state);
    pthread_t t[2];
    int i, busy = 0, ok = 0;

    reset();
    slow_reset();
    shared_wheel = thr_wheel(kind, 100, NULL, NULL);
    assert_non_null(shared_wheel);
    assert_true(tw_add(shared_wheel, 1, slow_cb, NULL) != 0);
    assert_true(tw_add(shared_wheel, 2, slow_cb, NULL) != 0);
    assert_true(tw_add(shared_wheel, 3, slow_cb, NULL) != 0);
    assert_int_equal(tw_thread_start(shared_wheel, 100), 0);

    /* the test thread competes as a driver: -EBUSY or a count, never harm */
    for (i = 0; i < 200; i++) {
        int64_t r = tw_advance(shared_wheel, 0);
        if (r == -EBUSY)
            busy++;
        else if (r >= 0)
            ok++;
        else
            fail_msg("tw_advance returned %lld", (long long)r);
    }
    (void)busy;
    (void)ok;

    assert_true(thr_wait_int(&slow_entered, 1));
    atomic_store(&stop_results[0], 1);
    atomic_store(&stop_results[1], 1);
    thr_create(&t[0], stopper, (void *)(uintptr_t)0);
    thr_create(&t[1], stopper, (void *)(uintptr_t)1);
    thr_join(t[0]);
    thr_join(t[1]);
    assert_int_equal(atomic_load(&stop_results[0]), 0);
    assert_int_equal(atomic_load(&stop_results[1]), 0);
    assert_int_equal(atomic_load(&slow_done), 1);
    assert_int_equal(tw_check(shared_wheel), 0);
    thr_destroy(shared_wheel);
}

/* ---- callbacks use the wheel from the timer thread ----------------------- */

#define CHAIN 200
static atomic_int chain_links, chain_errors;

/* Each link adds the next, reschedules a decoy and cancels it. */
static void chain_cb(tw_wheel *w, tw_id id, void *data)
{
    tw_id decoy;
    (void)data;
    note_thread();
    if (tw_cancel(w, id) != 0 || tw_reschedule(w, id, 1) != 0)
        atomic_fetch_add(&chain_errors, 1); /* a one-shot's id died */
    decoy = tw_add(w, 5, count_cb, DATA(0));
    if (!decoy || tw_reschedule(w, decoy, 9) != 1 || tw_cancel(w, decoy) != 1)
        atomic_fetch_add(&chain_errors, 1);
    if (atomic_fetch_add(&chain_links, 1) + 1 < CHAIN &&
        tw_add(w, (uint64_t)(atomic_load(&chain_links) % 3), chain_cb, NULL) == 0)
        atomic_fetch_add(&chain_errors, 1);
}

static void test_callbacks_reenter(void **state)
{
    int kind = thr_lock_of(state);
    tw_wheel *w;

    reset();
    atomic_store(&chain_links, 0);
    atomic_store(&chain_errors, 0);
    w = thr_wheel(kind, 100, NULL, NULL);
    assert_non_null(w);
    assert_int_equal(tw_thread_start(w, 100), 0);
    assert_true(tw_add(w, 1, chain_cb, NULL) != 0);
    assert_true(thr_wait_int(&chain_links, CHAIN));
    assert_int_equal(tw_thread_stop(w), 0);
    assert_int_equal(atomic_load(&chain_links), CHAIN);
    assert_int_equal(atomic_load(&chain_errors), 0);
    assert_int_equal(atomic_load(&fired), 0);
    expect_one_timer_thread();
    assert_int_equal(tw_count(w), 0);
    thr_destroy(w);
}

int main(void)
{
    thr_gate_init(&inside_gone);
    const struct CMUnitTest tests[] = {
        T_SPIN(test_fake_clock),
        T_ADAPTIVE(test_fake_clock),
        T_MUTEX(test_fake_clock),
        T_SPIN(test_real_clock),
        T_ADAPTIVE(test_real_clock),
        T_MUTEX(test_real_clock),
        T_ADAPTIVE(test_idle_thread_sleeps),
        T_MUTEX(test_idle_thread_sleeps),
        T_SPIN(test_stop_joins),
        T_ADAPTIVE(test_stop_joins),
        T_MUTEX(test_stop_joins),
        T_SPIN(test_start_twice),
        T_ADAPTIVE(test_start_twice),
        T_MUTEX(test_start_twice),
        T_SPIN(test_destroy_inside_callback),
        T_ADAPTIVE(test_destroy_inside_callback),
        T_MUTEX(test_destroy_inside_callback),
        T_ADAPTIVE(test_destroy_inside_callback_frees_the_thread),
        T_SPIN(test_destroy_running),
        T_ADAPTIVE(test_destroy_running),
        T_MUTEX(test_destroy_running),
        T_SPIN(test_destroy_during_release),
        T_ADAPTIVE(test_destroy_during_release),
        T_MUTEX(test_destroy_during_release),
        T_SPIN(test_concurrent_stop),
        T_ADAPTIVE(test_concurrent_stop),
        T_MUTEX(test_concurrent_stop),
        T_SPIN(test_callbacks_reenter),
        T_ADAPTIVE(test_callbacks_reenter),
        T_MUTEX(test_callbacks_reenter),
        T_SPIN(test_clock_driven_adds),
        T_ADAPTIVE(test_clock_driven_adds),
        T_MUTEX(test_clock_driven_adds),
        T_SPIN(test_staging_on_timer_thread),
        T_ADAPTIVE(test_staging_on_timer_thread),
        T_MUTEX(test_staging_on_timer_thread),
    };
    return THR_RUN(tests);
}
