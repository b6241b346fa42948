/*
 * The adaptive lock's two promises to the driver, counted through the test
 * hooks of timer.c's locking section (this file compiles timer.c in, with
 * TW_TEST_LOCK_EVENT defined; the library itself has no hooks):
 *
 *  (a) driver first, to a bound: from the moment the driver has said that
 *      it waits until it has the lock, at most DRIVER_PASSES producers take
 *      the lock. Counted per wait while producers outnumber the cores; the
 *      count also takes in the producer that held the lock when the driver
 *      asked (its hook may run after the driver's), so the check is
 *      DRIVER_PASSES + 1. A driver that never says so (waiting like a
 *      producer) fails the test. A wait in which the driver found the lock
 *      taken and then free when it next looked is not held to the bound:
 *      producers get in there only while the driver is off its core, which
 *      no lock can bound (seen with busy processes beside the test).
 *  (b) no lost wake-up: thousands of short trials in which one producer
 *      holds the lock while the driver comes for it, sometimes with two
 *      more producers crowding in. In one trial of four the holder lets go
 *      exactly between the driver's last look at the lock and its saying
 *      that it sleeps (a hook holds the driver there), the window Dekker's
 *      pattern closes; in the others hold times are random, and the driver
 *      sometimes dawdles on its way to sleep. A thread
 *      waiting in the lock while the lock is free and no acquisition
 *      happens for a second is a lost wake-up: the test wakes it by hand,
 *      finishes the trial and fails, saying who slept.
 *
 * Parameters: TWHEEL_BOUND_WAITS driver waits to count in (a) (default
 * 3000; 600 under TSan), TWHEEL_WAKE_TRIALS trials in (b) (default 4000;
 * 1000 under TSan).
 */
#define TW_TEST_LOCK_EVENT(lock, what) lock_event((lock), (what))
struct wheel_lock;
static void lock_event(const struct wheel_lock *lock, int what);
#include "../../timer.c"

#include "thr.h"

/* ---- what the hooks see ------------------------------------------------- */

static struct {
    tw_wheel *w; /* the wheel watched */
    /* (a) */
    atomic_int driver_waits;  /* the driver found the lock taken ... */
    atomic_int driver_asked;  /* ... and said so */
    atomic_int since_wait, since_ask; /* producer acquisitions since */
    atomic_int waits, asked, at_bound, max_passes;
    atomic_int max_unasked; /* passes in waits the driver never announced */
    _Atomic uint64_t passes; /* over all waits */
    /* (b) */
    _Atomic uint64_t took;    /* acquisitions: the lock moves */
    atomic_int waiting;       /* threads between finding the lock taken
                                 and having it */
    atomic_int driver_slept;  /* DRIVER_SLEEPS in this trial */
    atomic_int hold_driver;   /* this trial: hold the driver at its first
                                 DRIVER_SLEEPS until the holder let go */
    _Atomic uint64_t stretch_us; /* or spin there this long */
    struct thr_gate about_to_sleep, let_go; /* for that, per trial */
    _Atomic uint64_t trial;
} ev;

static _Thread_local int this_thread_waits; /* found the lock taken */

static void lock_event(const struct wheel_lock *lock, int what)
{
    int passes;
    if (!ev.w || lock != &ev.w->lock)
        return;
    switch (what) {
    case LOCK_EV_PRODUCER_WAITS:
        this_thread_waits = 1;
        atomic_fetch_add(&ev.waiting, 1);
        break;
    case LOCK_EV_DRIVER_WAITS:
        this_thread_waits = 1;
        atomic_fetch_add(&ev.waiting, 1);
        atomic_store(&ev.since_wait, 0);
        atomic_store(&ev.driver_waits, 1);
        break;
    case LOCK_EV_DRIVER_ASKS:
        atomic_store(&ev.since_ask, 0);
        atomic_store(&ev.driver_asked, 1);
        break;
    case LOCK_EV_PRODUCER_TOOK:
        atomic_fetch_add(&ev.took, 1);
        if (this_thread_waits) {
            this_thread_waits = 0;
            atomic_fetch_sub(&ev.waiting, 1);
        }
        if (atomic_load(&ev.driver_waits)) {
            atomic_fetch_add(&ev.since_wait, 1);
            if (atomic_load(&ev.driver_asked))
                atomic_fetch_add(&ev.since_ask, 1);
        }
        break;
    case LOCK_EV_DRIVER_TOOK:
        atomic_fetch_add(&ev.took, 1);
        if (this_thread_waits) {
            this_thread_waits = 0;
            atomic_fetch_sub(&ev.waiting, 1);
        }
        if (!atomic_load(&ev.driver_waits))
            break;
        atomic_fetch_add(&ev.waits, 1);
        if (!atomic_load(&ev.driver_asked)) {
            /* It found the lock taken, then free when it next looked: it
             * took it without announcing itself. Producers that got in
             * between did so while the driver was off its core (it had
             * only to look again), which no lock can bound: reported, not
             * held to the bound. */
            passes = atomic_load(&ev.since_wait);
            if (passes > atomic_load(&ev.max_unasked))
                atomic_store(&ev.max_unasked, passes);
        } else {
            passes = atomic_load(&ev.since_ask);
            atomic_fetch_add(&ev.asked, 1);
            atomic_fetch_add(&ev.at_bound, passes >= (int)DRIVER_PASSES);
            atomic_fetch_add(&ev.passes, (uint64_t)passes);
            if (passes > atomic_load(&ev.max_passes))
                atomic_store(&ev.max_passes, passes);
        }
        atomic_store(&ev.driver_asked, 0);
        atomic_store(&ev.driver_waits, 0);
        break;
    case LOCK_EV_DRIVER_SLEEPS:
        atomic_store(&ev.driver_slept, 1);
        thr_spin_us(atomic_load(&ev.stretch_us));
        if (atomic_exchange(&ev.hold_driver, 0)) {
            uint64_t t = atomic_load(&ev.trial);
            thr_gate_set(&ev.about_to_sleep, t);
            thr_gate_wait(&ev.let_go, t, 1000);
        }
        break;
    default:
        break;
    }
}

/* For the watchdog's message: where the lock stands. */
static void describe_lock(void)
{
    tw_wheel *w = ev.w;
    unsigned word, asleep;
    if (!w)
        return;
    word = spin_load_sc(&w->lock.word);
    asleep = spin_load_sc(&w->lock.driver_waiting);
    fprintf(stderr,
            "the lock: %s%s%s, %u producers passed the driver; the driver "
            "%s; %d threads waiting in the lock\n",
            word & LOCK_HELD ? "held" : "free",
            word & LOCK_SLEEPERS ? ", producers may sleep" : "",
            word & LOCK_DRIVER ? ", the driver waits" : "", word / LOCK_PASS,
            asleep == DRIVER_ASLEEP ? "sleeps" : "does not sleep",
            atomic_load(&ev.waiting));
}

static void watch(tw_wheel *w)
{
    memset(&ev, 0, sizeof ev);
    thr_gate_init(&ev.about_to_sleep);
    thr_gate_init(&ev.let_go);
    ev.w = w;
    atomic_store(&thr_watch.describe, describe_lock);
}

static void unwatch(void)
{
    atomic_store(&thr_watch.describe, NULL);
    ev.w = NULL;
    thr_gate_destroy(&ev.about_to_sleep);
    thr_gate_destroy(&ev.let_go);
}

/* ---- (a) the driver is passed at most DRIVER_PASSES times ---------------- */

#define PRODUCERS 6 /* on 2 cores: more threads than cores */
#define RING 64

static atomic_int producers_stop;

static void noop_cb(tw_wheel *w, tw_id id, void *data)
{
    (void)w, (void)id, (void)data;
}

/* Adds, cancels and reschedules flat out until told to stop. */
static void *producer(void *argument)
{
    tw_wheel *w = argument;
    uint64_t rng = thr_seed((uint64_t)(uintptr_t)&rng);
    tw_id ids[RING] = {0};
    while (!atomic_load(&producers_stop)) {
        unsigned slot = (unsigned)(thr_rng(&rng) % RING);
        switch (thr_rng(&rng) % 4) {
        case 0:
            tw_cancel(w, ids[slot]);
            ids[slot] = 0;
            break;
        case 1:
            tw_reschedule(w, ids[slot], 1 + thr_rng(&rng) % 32);
            break;
        default:
            tw_cancel(w, ids[slot]);
            ids[slot] = tw_add(w, 1 + thr_rng(&rng) % 32, noop_cb, NULL);
            break;
        }
    }
    return NULL;
}

static void test_driver_passed_at_most_bound(void **state)
{
    uint64_t want = thr_env("TWHEEL_BOUND_WAITS", THR_TSAN ? 600 : 3000);
    uint64_t advances = 0;
    pthread_t threads[PRODUCERS];
    int p, waits;
    tw_wheel *w = thr_wheel(thr_lock_of(state), 1000, NULL, NULL);

    watch(w);
    atomic_store(&producers_stop, 0);
    for (p = 0; p < PRODUCERS; p++)
        thr_create(&threads[p], producer, w);
    /* drive until enough waits have been counted: a count, not a time;
     * progress is a wait counted (producers that never get the lock back
     * leave the driver alone with the lock, and the watchdog says so) */
    THR_STEP("driving until the driver has waited often enough");
    for (waits = 0; (uint64_t)waits < want; advances++) {
        if (tw_advance(w, 1) < 0)
            break;
        if (atomic_load(&ev.waits) != waits) {
            waits = atomic_load(&ev.waits);
            thr_progress();
        }
    }
    atomic_store(&producers_stop, 1);
    for (p = 0; p < PRODUCERS; p++)
        thr_join(threads[p]);
    unwatch();

    waits = atomic_load(&ev.waits);
    print_message("%d driver waits in %llu advances, %d announced; producers "
                  "taking the lock ahead of an announced driver: mean %.2f, "
                  "max %d, the bound %u reached in %d (unannounced waits: "
                  "max %d)\n",
                  waits, (unsigned long long)advances, atomic_load(&ev.asked),
                  (double)atomic_load(&ev.passes) /
                      (atomic_load(&ev.asked) ? atomic_load(&ev.asked) : 1),
                  atomic_load(&ev.max_passes), DRIVER_PASSES,
                  atomic_load(&ev.at_bound), atomic_load(&ev.max_unasked));
    assert_true((uint64_t)waits >= want);
    /* a driver that waits like a producer never announces itself */
    if (atomic_load(&ev.asked) == 0)
        fail_msg("the driver never announced itself in %d waits", waits);
    if (atomic_load(&ev.max_passes) > (int)DRIVER_PASSES + 1)
        fail_msg("a waiting driver was passed by %d producers; the bound is "
                 "%u (+1: the holder it found)",
                 atomic_load(&ev.max_passes), DRIVER_PASSES);
    assert_int_equal(tw_check(w), 0);
}

/* ---- (b) no lost wake-up ------------------------------------------------- */

#define CROWD 2
#define STUCK_US 1000000
#define SPINS 20000 /* a gate's spin before it sleeps */

static const char *const trial_kinds[4] = {
    "the holder lets go as the driver is about to say it sleeps",
    "two more producers crowd in", "random hold",
    "random hold, the driver slowed on its way to sleep",
};

static struct {
    tw_wheel *w;
    struct thr_gate start, held, released, driven, crowd_done[CROWD];
    _Atomic uint64_t hold_us;
    atomic_int crowd; /* this trial: the crowd comes too */
    atomic_int no_sleep; /* a held driver never came to its sleep */
    atomic_int quit;
} trial;

/* The holder: takes the lock, says so, and lets go after hold_us or, when
 * the driver is held, once the driver is about to sleep. */
static void *holder_main(void *argument)
{
    uint64_t t;
    (void)argument;
    for (t = 1; thr_gate_wait(&trial.start, t, SPINS) &&
                !atomic_load(&trial.quit);
         t++) {
        int held_driver = atomic_load(&ev.hold_driver);
        lock(trial.w);
        thr_gate_set(&trial.held, t);
        if (held_driver && !thr_gate_wait(&ev.about_to_sleep, t, 1ul << 20))
            atomic_store(&trial.no_sleep, 1);
        else
            thr_spin_us(atomic_load(&trial.hold_us));
        unlock(trial.w);
        thr_gate_set(&ev.let_go, t);
        thr_gate_set(&trial.released, t);
    }
    return NULL;
}

/* The driver: comes for the lock once the holder has it. */
static void *driver_main(void *argument)
{
    uint64_t t;
    (void)argument;
    for (t = 1; thr_gate_wait(&trial.start, t, SPINS) &&
                !atomic_load(&trial.quit);
         t++) {
        thr_gate_wait(&trial.held, t, SPINS);
        tw_advance(trial.w, 0);
        thr_gate_set(&trial.driven, t);
    }
    return NULL;
}

/* The crowd: when asked, a few short critical sections of its own. */
static void *crowd_main(void *argument)
{
    int me = (int)(uintptr_t)argument, k;
    uint64_t t, rng = thr_seed(50 + (uint64_t)me);
    for (t = 1; thr_gate_wait(&trial.start, t, SPINS) &&
                !atomic_load(&trial.quit);
         t++) {
        if (atomic_load(&trial.crowd)) {
            thr_gate_wait(&trial.held, t, SPINS);
            for (k = 0; k < 3; k++) {
                lock(trial.w);
                thr_spin_us(thr_rng(&rng) % 3);
                unlock(trial.w);
            }
        }
        thr_gate_set(&trial.crowd_done[me], t);
    }
    return NULL;
}

static int trial_done(uint64_t t)
{
    int i;
    if (thr_gate_get(&trial.released) < t || thr_gate_get(&trial.driven) < t)
        return 0;
    for (i = 0; i < CROWD; i++)
        if (thr_gate_get(&trial.crowd_done[i]) < t)
            return 0;
    return 1;
}

/* Waits for trial t. A thread waiting in a free lock while no acquisition
 * happens for STUCK_US was not woken: describe it, wake everyone by hand
 * (so the trial ends) and return 0. */
static int trial_wait(uint64_t t, int kind, char *failure, size_t size)
{
    struct thr_poll poll =
        thr_poll_begin("the trial to end", __FILE__, __LINE__);
    uint64_t took = atomic_load(&ev.took), still = thr_now_us();
    int lost = 0;
    while (!trial_done(t) && thr_poll_next(&poll)) {
        unsigned word = spin_load_sc(&trial.w->lock.word);
        unsigned asleep = spin_load_sc(&trial.w->lock.driver_waiting);
        int waiting = atomic_load(&ev.waiting);
        if (atomic_load(&ev.took) != took || (word & LOCK_HELD) || !waiting) {
            took = atomic_load(&ev.took);
            still = thr_now_us();
        } else if (!lost && thr_now_us() - still >= STUCK_US) {
            snprintf(failure, size,
                     "trial %llu (%s): lost wake-up: %s while the lock is free "
                     "(lock word %#x, %d thread%s waiting in it), no "
                     "acquisition for %d ms; woken by hand",
                     (unsigned long long)t, trial_kinds[kind],
                     asleep == DRIVER_ASLEEP ? "the driver sleeps"
                                             : "a producer sleeps",
                     word, waiting, waiting == 1 ? "" : "s", STUCK_US / 1000);
            lost = 1;
            unpark(&trial.w->lock.driver_waiting, INT_MAX);
            unpark(&trial.w->lock.word, INT_MAX);
        }
    }
    return !lost && trial_done(t);
}

static void test_no_lost_wakeup(void **state)
{
    uint64_t n = thr_env("TWHEEL_WAKE_TRIALS", THR_TSAN ? 1000 : 4000), t;
    uint64_t rng = thr_seed(7), hold = 2, slept = 0, held_trials = 0;
    pthread_t holder, driver, crowd[CROWD];
    static char failure[512];
    int i;

    failure[0] = 0;
    memset(&trial, 0, sizeof trial);
    trial.w = thr_wheel(thr_lock_of(state), 1000, NULL, NULL);
    watch(trial.w);
    thr_gate_init(&trial.start);
    thr_gate_init(&trial.held);
    thr_gate_init(&trial.released);
    thr_gate_init(&trial.driven);
    for (i = 0; i < CROWD; i++)
        thr_gate_init(&trial.crowd_done[i]);
    thr_create(&holder, holder_main, NULL);
    thr_create(&driver, driver_main, NULL);
    for (i = 0; i < CROWD; i++)
        thr_create(&crowd[i], crowd_main, (void *)(uintptr_t)i);

    for (t = 1; t <= n && !failure[0]; t++) {
        int kind = (int)(t % 4);
        /* 0: the holder lets go in the driver's window; 1: with the
         * crowd; 2, 3: random holds around the driver's spin-to-sleep,
         * and in 3 the driver dawdles a few µs on its way to sleep */
        atomic_store(&ev.trial, t);
        atomic_store(&ev.driver_slept, 0);
        atomic_store(&ev.hold_driver, kind == 0);
        atomic_store(&trial.crowd, kind == 1);
        atomic_store(&trial.hold_us, thr_rng(&rng) % (2 * hold + 1));
        atomic_store(&ev.stretch_us, kind == 3 ? thr_rng(&rng) % 5 : 0);
        held_trials += kind == 0;
        thr_gate_set(&trial.start, t);
        if (!trial_wait(t, kind, failure, sizeof failure) && !failure[0])
            snprintf(failure, sizeof failure, "trial %llu (%s) did not end",
                     (unsigned long long)t, trial_kinds[kind]);
        if (atomic_load(&trial.no_sleep))
            snprintf(failure, sizeof failure,
                     "trial %llu (%s): the driver, kept off the lock, never "
                     "came to its sleep",
                     (unsigned long long)t, trial_kinds[kind]);
        if (kind >= 2) { /* aim at the driver's spin-to-sleep moment */
            slept += (uint64_t)atomic_load(&ev.driver_slept);
            if (atomic_load(&ev.driver_slept))
                hold -= hold > 1;
            else
                hold += hold < 200;
        }
        thr_progress();
    }
    atomic_store(&trial.quit, 1);
    thr_gate_set(&trial.start, UINT64_MAX);
    thr_join(holder);
    thr_join(driver);
    for (i = 0; i < CROWD; i++)
        thr_join(crowd[i]);
    print_message("%llu trials (%llu letting go in the driver's window), the "
                  "driver slept in %llu of the random ones; hold %llu us\n",
                  (unsigned long long)(t - 1), (unsigned long long)held_trials,
                  (unsigned long long)slept, (unsigned long long)hold);
    unwatch();
    thr_gate_destroy(&trial.start);
    thr_gate_destroy(&trial.held);
    thr_gate_destroy(&trial.released);
    thr_gate_destroy(&trial.driven);
    for (i = 0; i < CROWD; i++)
        thr_gate_destroy(&trial.crowd_done[i]);
    if (failure[0])
        fail_msg("%s", failure);
    assert_int_equal(tw_check(trial.w), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        T_ADAPTIVE(test_driver_passed_at_most_bound),
        T_ADAPTIVE(test_no_lost_wakeup),
    };
    return THR_RUN(tests);
}
