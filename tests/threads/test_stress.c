/*
 * Stress: P producer threads each add hundreds of thousands of timers with
 * random delays (about 10% periodic), and reschedule and cancel random
 * recent timers, their own and other producers', while one thread drives the
 * wheel with the real clock: either a loop calling tw_expire on 100 µs ticks,
 * or the library's timer thread on 1 ms ticks. Some callbacks cancel or
 * reschedule random timers themselves.
 *
 * At the end, for every timer: its user data was released exactly once; a
 * one-shot either fired exactly once or was cancelled exactly once (a cancel
 * returned 1), never both; a periodic was cancelled exactly once; no
 * callback started after a cancel of its timer had returned 1 or after its
 * release; the id a callback is given is the id tw_add returned. The wheel's
 * counters (added, fired, cancelled, rescheduled) match the producers' own
 * tallies, nothing is pending and tw_check passes.
 *
 * Parameters (environment):
 *   TWHEEL_THREADS      producers (default 4)
 *   TWHEEL_STRESS_OPS   timers added per producer per test (default 200000;
 *                       25000 when built with ThreadSanitizer)
 *   TWHEEL_STRESS_SEED  seed of the producers' random choices (default 1)
 * Each test prints its parameters and the wheel's counters.
 */
#include "thr.h"

#define WINDOW 1024 /* recent timers a producer picks from */

struct record {
    _Atomic uint64_t id;     /* published after tw_add returned */
    atomic_int fired;        /* callbacks run */
    atomic_int cancelled;    /* cancels that returned 1 */
    atomic_int released;     /* release hook calls */
    atomic_int periodic;     /* set before the add */
};

struct stress {
    tw_wheel *w;
    int producers;
    uint64_t per_producer;
    uint64_t seed;
    uint64_t short_delay, mid_delay, long_delay; /* in ticks */
    struct record *records;     /* producers * per_producer */
    _Atomic uint64_t *progress; /* timers added so far, per producer */

    /* violations seen on other threads */
    atomic_int late;          /* a callback started after cancel returned 1 */
    atomic_int after_release; /* a callback started after the release */
    atomic_int id_mismatch;   /* callback id != tw_add's id */
    atomic_int errors;        /* an API call failed unexpectedly */

    /* tallies to compare with tw_get_stats */
    _Atomic uint64_t added, rescheduled;
    atomic_int stop_driver;
    _Atomic uint64_t driver_calls;
};

static struct stress *S;

static struct record *pick(uint64_t *rng, int producer)
{
    uint64_t done = atomic_load(&S->progress[producer]);
    uint64_t lo = done > WINDOW ? done - WINDOW : 0;
    if (done == 0)
        return NULL;
    return &S->records[(uint64_t)producer * S->per_producer + lo +
                       thr_rng(rng) % (done - lo)];
}

static uint64_t random_delay(uint64_t *rng)
{
    uint64_t r = thr_rng(rng) % 100;
    if (r < 90)
        return thr_rng(rng) % S->short_delay;
    if (r < 99)
        return thr_rng(rng) % S->mid_delay;
    return thr_rng(rng) % S->long_delay;
}

static void try_cancel(struct record *r)
{
    tw_id id = atomic_load(&r->id);
    int c;
    if (!id)
        return;
    c = tw_cancel(S->w, id);
    if (c == 1)
        atomic_fetch_add(&r->cancelled, 1);
    else if (c != 0)
        atomic_fetch_add(&S->errors, 1);
}

static void try_reschedule(struct record *r, uint64_t delay)
{
    tw_id id = atomic_load(&r->id);
    int c;
    if (!id)
        return;
    c = tw_reschedule(S->w, id, delay);
    if (c == 1)
        atomic_fetch_add_explicit(&S->rescheduled, 1, memory_order_relaxed);
    else if (c != 0)
        atomic_fetch_add(&S->errors, 1);
}

static void stress_cb(tw_wheel *w, tw_id id, void *data)
{
    struct record *r = data;
    tw_id published = atomic_load(&r->id);
    /* cheap per-callback randomness, from the id */
    uint64_t rng = thr_seed(id ^ (uint64_t)(uintptr_t)r);
    (void)w;
    if (atomic_load(&r->cancelled))
        atomic_fetch_add(&S->late, 1);
    if (atomic_load(&r->released))
        atomic_fetch_add(&S->after_release, 1);
    if (published && published != id)
        atomic_fetch_add(&S->id_mismatch, 1);
    atomic_fetch_add(&r->fired, 1);
    /* about 4% of the callbacks cancel or reschedule someone else */
    switch (thr_rng(&rng) % 50) {
    case 0: {
        struct record *other = pick(&rng, (int)(thr_rng(&rng) % (uint64_t)S->producers));
        if (other && other != r)
            try_cancel(other);
        break;
    }
    case 1: {
        struct record *other = pick(&rng, (int)(thr_rng(&rng) % (uint64_t)S->producers));
        if (other)
            try_reschedule(other, random_delay(&rng));
        break;
    }
    default:
        break;
    }
}

static void stress_release(void *data)
{
    struct record *r = data;
    atomic_fetch_add(&r->released, 1);
}

static void *producer_main(void *argument)
{
    int me = (int)(uintptr_t)argument;
    uint64_t rng = thr_seed(S->seed * 1000 + (uint64_t)me);
    struct record *mine = &S->records[(uint64_t)me * S->per_producer];
    uint64_t i, added = 0;

    for (i = 0; i < S->per_producer; i++) {
        struct record *r = &mine[i];
        int periodic = thr_rng(&rng) % 10 == 0;
        uint64_t op;
        tw_id id;
        atomic_store(&r->periodic, periodic);
        id = tw_add_ex(S->w, random_delay(&rng),
                       periodic ? 1 + thr_rng(&rng) % (S->mid_delay / 4) : 0,
                       stress_cb, stress_release, r);
        if (!id) {
            atomic_fetch_add(&S->errors, 1);
            break;
        }
        added++;
        atomic_store(&r->id, id);
        atomic_store(&S->progress[me], i + 1);

        /* about one reschedule and a third of a cancel per add, on a
         * recent timer of this producer or (one time in four) another */
        op = thr_rng(&rng) % 20;
        {
            int who = thr_rng(&rng) % 4 == 0
                          ? (int)(thr_rng(&rng) % (uint64_t)S->producers)
                          : me;
            struct record *other = pick(&rng, who);
            if (other) {
                if (op < 10)
                    try_reschedule(other, random_delay(&rng));
                else if (op < 13)
                    try_reschedule(other, 0);
                else if (op < 19)
                    try_cancel(other);
                else
                    (void)tw_remaining(S->w, atomic_load(&other->id));
            }
        }
        /* periodic timers leaving the window are cancelled by their owner
         * (if nobody did it yet), so only a few hundred keep firing */
        if (i >= WINDOW && atomic_load(&mine[i - WINDOW].periodic))
            try_cancel(&mine[i - WINDOW]);
        if (i % 4096 == 0) {
            (void)tw_next_expiry(S->w);
            thr_progress();
        }
    }
    atomic_fetch_add(&S->added, added);

    /* a periodic timer lives until cancelled: cancel the rest of ours */
    for (i = added > WINDOW ? added - WINDOW : 0; i < added; i++)
        if (atomic_load(&mine[i].periodic))
            try_cancel(&mine[i]);
    return NULL;
}

static void *loop_driver(void *argument)
{
    (void)argument;
    while (!atomic_load(&S->stop_driver)) {
        int64_t r = tw_expire(S->w);
        if (r < 0)
            atomic_fetch_add(&S->errors, 1);
        atomic_fetch_add_explicit(&S->driver_calls, 1, memory_order_relaxed);
        thr_progress();
        thr_sleep_us(50);
    }
    return NULL;
}

enum drive { DRIVE_LOOP, DRIVE_THREAD };

static void run_stress(int kind, enum drive drive)
{
    uint64_t ops = thr_env("TWHEEL_STRESS_OPS", THR_TSAN ? 25000 : 200000);
    int producers = (int)thr_env("TWHEEL_THREADS", 4);
    uint64_t total, i, fired = 0, cancelled = 0, begin = thr_now_us(), end;
    uint64_t problems = 0;
    pthread_t *threads, driver;
    struct tw_stats s;
    int p;

    S = calloc(1, sizeof *S);
    assert_non_null(S);
    S->producers = producers;
    S->per_producer = ops;
    S->seed = thr_env("TWHEEL_STRESS_SEED", 1);
    total = (uint64_t)producers * ops;
    S->records = calloc(total, sizeof *S->records);
    S->progress = calloc((size_t)producers, sizeof *S->progress);
    threads = calloc((size_t)producers, sizeof *threads);
    assert_true(S->records && S->progress && threads);

    /* about the same wall-clock delays for both drivers: mostly under 6 ms,
     * some up to 200 ms, a few up to 1 s (these sit on level 0/1 and
     * cascade) */
    if (drive == DRIVE_LOOP) {
        S->w = thr_wheel(kind, 100, NULL, NULL);
        S->short_delay = 64;
        S->mid_delay = 2000;
        S->long_delay = 10000;
        thr_create(&driver, loop_driver, NULL);
    } else {
        S->w = thr_wheel(kind, 1000, NULL, NULL);
        S->short_delay = 6;
        S->mid_delay = 200;
        S->long_delay = 1000;
        assert_int_equal(tw_thread_start(S->w, 500), 0);
    }

    for (p = 0; p < producers; p++)
        thr_create(&threads[p], producer_main, (void *)(uintptr_t)p);
    for (p = 0; p < producers; p++)
        thr_join(threads[p]);

    /* everything left fires within the longest delay */
    THR_WAIT_UNTIL(tw_count(S->w) == 0);
    if (drive == DRIVE_LOOP) {
        atomic_store(&S->stop_driver, 1);
        thr_join(driver);
    } else {
        assert_int_equal(tw_thread_stop(S->w), 0);
    }
    end = thr_now_us();


    for (i = 0; i < total; i++) {
        struct record *r = &S->records[i];
        int f = atomic_load(&r->fired), c = atomic_load(&r->cancelled);
        int rel = atomic_load(&r->released);
        int bad = atomic_load(&r->periodic) ? (c != 1 || rel != 1)
                                            : (f + c != 1 || rel != 1);
        if (bad && problems++ < 10)
            print_error("timer %llu (%s, producer %llu): fired %d, cancelled %d, "
                        "released %d\n", (unsigned long long)i,
                        atomic_load(&r->periodic) ? "periodic" : "one-shot",
                        (unsigned long long)(i / ops), f, c, rel);
        fired += (uint64_t)f;
        cancelled += (uint64_t)c;
    }
    if (problems)
        fail_msg("%llu of %llu timers lost, doubled or not released once "
                 "(tw_count %llu, tw_check %d)",
                 (unsigned long long)problems, (unsigned long long)total,
                 (unsigned long long)tw_count(S->w), tw_check(S->w));
    assert_int_equal(tw_count(S->w), 0);
    assert_int_equal(tw_check(S->w), 0);
    assert_int_equal(atomic_load(&S->errors), 0);
    assert_int_equal(atomic_load(&S->late), 0);
    assert_int_equal(atomic_load(&S->after_release), 0);
    assert_int_equal(atomic_load(&S->id_mismatch), 0);
    assert_int_equal(atomic_load(&S->added), total);

    memset(&s, 0, sizeof s);
    s.size = sizeof s;
    assert_int_equal(tw_get_stats(S->w, &s), 0);
    assert_int_equal(s.added, total);
    assert_int_equal(s.fired, fired);
    assert_int_equal(s.cancelled, cancelled);
    assert_int_equal(s.rescheduled, atomic_load(&S->rescheduled));
    assert_int_equal(s.pending, 0);
    print_message("%s/%s: %d producers x %llu timers in %.2f s: fired %llu, "
                  "cancelled %llu, rescheduled %llu, cascaded %llu, "
                  "pool %llu nodes\n",
                  drive == DRIVE_LOOP ? "tw_expire loop, 100 us ticks"
                                      : "timer thread, 1 ms ticks",
                  thr_lock_name(kind), producers, (unsigned long long)ops,
                  (double)(end - begin) / 1e6, (unsigned long long)s.fired,
                  (unsigned long long)s.cancelled,
                  (unsigned long long)s.rescheduled,
                  (unsigned long long)s.cascaded,
                  (unsigned long long)s.pool_capacity);

    thr_destroy(S->w);
    free(threads);
    free(S->progress);
    free(S->records);
    free(S);
    S = NULL;
}

static void test_stress_loop(void **state)
{
    run_stress(thr_lock_of(state), DRIVE_LOOP);
}

static void test_stress_thread(void **state)
{
    run_stress(thr_lock_of(state), DRIVE_THREAD);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        T_SPIN(test_stress_loop),
        T_ADAPTIVE(test_stress_loop),
        T_MUTEX(test_stress_loop),
        T_SPIN(test_stress_thread),
        T_ADAPTIVE(test_stress_thread),
        T_MUTEX(test_stress_thread),
    };
    return THR_RUN(tests);
}
