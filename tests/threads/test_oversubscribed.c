/*
 * More threads than cores (issue 11): 8 producers add, cancel and
 * reschedule one-shot and periodic timers while the timer thread drives the
 * wheel and busy threads compete for this machine's cores. Whatever the
 * lock, every call returns, every one-shot fires or is cancelled exactly
 * once, no periodic timer starts after its cancel returned, every user
 * datum is released exactly once, and both sides make progress: the timer
 * thread fires while producers run (a producer does not finish before it
 * has), and every producer finishes its quota. Outcomes and progress only;
 * never a speed.
 *
 * Parameters: TWHEEL_OVERSUB_OPS operations per producer (default 20000;
 * 4000 under ThreadSanitizer), TWHEEL_STRESS_SEED.
 */
#include "thr.h"

#define PRODUCERS 8
#define HOGS 2
#define RING 64 /* timers a producer keeps track of at once */

/* One per timer ever added: what happened to it. */
struct record {
    atomic_int fired;
    atomic_int cancelled;      /* tw_cancel returned 1 */
    atomic_int released;
    atomic_int after_cancel;   /* callbacks started after cancel returned */
    atomic_int cancel_returned;
    int added; /* tw_add_ex returned an id for it */
    int periodic;
};

static struct {
    struct record *records;
    uint64_t ops;      /* per producer */
    int slow_callbacks; /* callbacks spin, so cancels meet running ones */
    tw_wheel *wheel;
    atomic_int producers_running;
    atomic_int producers_done;
    atomic_int stop_hogs;
    atomic_int fired_while_producing;
    atomic_int failed_adds;
} run;

static void fire(tw_wheel *w, tw_id id, void *user_data)
{
    struct record *r = user_data;
    (void)w, (void)id;
    if (atomic_load(&r->cancel_returned))
        atomic_fetch_add(&r->after_cancel, 1);
    atomic_fetch_add(&r->fired, 1);
    if (atomic_load(&run.producers_running))
        atomic_fetch_add(&run.fired_while_producing, 1);
    if (run.slow_callbacks)
        thr_spin_us(30);
}

static void release(void *user_data)
{
    struct record *r = user_data;
    atomic_fetch_add(&r->released, 1);
}

static void *hog(void *argument)
{
    volatile uint64_t x = 1;
    (void)argument;
    while (!atomic_load_explicit(&run.stop_hogs, memory_order_relaxed))
        x = x * 6364136223846793005u + 1442695040888963407u;
    return NULL;
}

struct producer {
    int index;
    tw_id ids[RING];
    struct record *owners[RING];
};

static void cancel_slot(struct producer *p, int slot)
{
    struct record *r = p->owners[slot];
    if (!r)
        return;
    if (tw_cancel(run.wheel, p->ids[slot]) == 1) {
        atomic_store(&r->cancel_returned, 1);
        atomic_fetch_add(&r->cancelled, 1);
    }
    p->owners[slot] = NULL;
}

static void *producer(void *argument)
{
    struct producer *p = argument;
    uint64_t seed = thr_seed(thr_env("TWHEEL_STRESS_SEED", 1) * 64 + (uint64_t)p->index);
    uint64_t k;
    int slot;
    for (k = 0; k < run.ops; k++) {
        uint64_t dice = thr_rng(&seed);
        struct record *r = &run.records[(uint64_t)p->index * run.ops + k];
        slot = (int)((dice >> 8) % RING);
        switch (dice % 8) {
        case 0: /* reschedule a timer of ours, live or not */
            if (p->owners[slot])
                tw_reschedule(run.wheel, p->ids[slot], (dice >> 20) % 50);
            break;
        case 1: /* cancel one, maybe while its callback runs */
            cancel_slot(p, slot);
            break;
        default: { /* replace the slot's timer with a new one */
            int periodic = (dice >> 16) % 16 == 0;
            tw_id id;
            cancel_slot(p, slot); /* every periodic ends cancelled */
            r->periodic = periodic;
            id = tw_add_ex(run.wheel, (dice >> 20) % 50,
                           periodic ? 1 + (dice >> 30) % 20 : 0, fire, release, r);
            if (!id) {
                atomic_fetch_add(&run.failed_adds, 1);
                break;
            }
            r->added = 1;
            p->ids[slot] = id;
            p->owners[slot] = r;
            break;
        }
        }
        if (k % 64 == 0) {
            sched_yield(); /* the interleavings a busy machine makes */
            thr_progress();
        }
    }
    /* both sides make progress: the timer thread fires while producers
     * run (a starved driver fails this wait, named, instead of hanging) */
    THR_WAIT_UNTIL(atomic_load(&run.fired_while_producing) > 0);
    for (slot = 0; slot < RING; slot++)
        if (p->owners[slot] && p->owners[slot]->periodic)
            cancel_slot(p, slot);
    atomic_fetch_add(&run.producers_done, 1);
    return NULL;
}

static void run_oversubscribed(int lock_kind, int slow_callbacks)
{
    pthread_t producers[PRODUCERS], hogs[HOGS];
    struct producer *state;
    uint64_t total, i;
    int n;
    memset(&run, 0, sizeof run);
    run.ops = thr_env("TWHEEL_OVERSUB_OPS", THR_TSAN ? 4000 : 20000);
    run.slow_callbacks = slow_callbacks;
    total = run.ops * PRODUCERS;
    run.records = calloc(total, sizeof *run.records);
    state = calloc(PRODUCERS, sizeof *state);
    assert_non_null(run.records);
    assert_non_null(state);
    run.wheel = thr_wheel(lock_kind, 100, NULL, NULL); /* 100 µs ticks */
    assert_int_equal(tw_thread_start(run.wheel, 200), 0);
    for (n = 0; n < HOGS; n++)
        thr_create(&hogs[n], hog, NULL);
    atomic_store(&run.producers_running, 1);
    for (n = 0; n < PRODUCERS; n++) {
        state[n].index = n;
        thr_create(&producers[n], producer, &state[n]);
    }
    /* every call returns: a deadlock fails here instead of hanging CI */
    assert_true(thr_wait_int(&run.producers_done, PRODUCERS));
    for (n = 0; n < PRODUCERS; n++)
        thr_join(producers[n]);
    atomic_store(&run.producers_running, 0);
    /* the last one-shots are at most 50 ticks (5 ms) away */
    THR_WAIT_UNTIL(tw_count(run.wheel) == 0);
    assert_int_equal(tw_count(run.wheel), 0);
    atomic_store(&run.stop_hogs, 1);
    for (n = 0; n < HOGS; n++)
        thr_join(hogs[n]);
    assert_int_equal(tw_thread_stop(run.wheel), 0);
    assert_int_equal(tw_check(run.wheel), 0);
    thr_destroy(run.wheel);

    assert_int_equal(atomic_load(&run.failed_adds), 0);
    assert_true(atomic_load(&run.fired_while_producing) > 0); /* driver not starved */
    for (i = 0; i < total; i++) {
        struct record *r = &run.records[i];
        int fired = atomic_load(&r->fired), cancelled = atomic_load(&r->cancelled);
        int released = atomic_load(&r->released);
        if (!r->added)
            continue; /* that operation added nothing */
        if (released != 1)
            fail_msg("%s: timer %llu released %d times", thr_lock_name(lock_kind),
                     (unsigned long long)i, released);
        if (atomic_load(&r->after_cancel))
            fail_msg("%s: timer %llu fired after tw_cancel returned 1",
                     thr_lock_name(lock_kind), (unsigned long long)i);
        if (r->periodic ? cancelled != 1 : fired + cancelled != 1)
            fail_msg("%s: %s timer %llu fired %d times, cancelled %d times",
                     thr_lock_name(lock_kind), r->periodic ? "periodic" : "one-shot",
                     (unsigned long long)i, fired, cancelled);
    }
    free(run.records);
    free(state);
}

static void test_oversubscribed(void **state)
{
    run_oversubscribed(thr_lock_of(state), 0);
}

static void test_oversubscribed_slow_callbacks(void **state)
{
    run_oversubscribed(thr_lock_of(state), 1);
}

static void test_oversubscribed_default(void **state)
{
    struct tw_config config;
    (void)state;
    tw_config_init(&config);
    run_oversubscribed(config.lock, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        T_ONE(test_oversubscribed_default),
        T_ADAPTIVE(test_oversubscribed),
        T_SPIN(test_oversubscribed),
        T_MUTEX(test_oversubscribed),
        T_ADAPTIVE(test_oversubscribed_slow_callbacks),
        T_SPIN(test_oversubscribed_slow_callbacks),
        T_MUTEX(test_oversubscribed_slow_callbacks),
    };
    return THR_RUN(tests);
}
