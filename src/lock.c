/* ==== lock: one per wheel =================================================
 * One lock per wheel, chosen at creation. TW_LOCK_NONE's lock does
 * nothing; its driver claim is a relaxed load and store, no read-modify-
 * write (the claim is released with a release store for every kind).
 *
 * TW_LOCK_ADAPTIVE (the default) puts a producer that finds the lock taken
 * to sleep in the kernel at once (a futex on Linux, WaitOnAddress on
 * Windows), as glibc's mutex does:
 * a waiter never burns the time slice that a preempted holder needs, which
 * is what survives more threads than cores. The driver is served first, to
 * a bound: it spins a little, then sleeps on its own word, `driver_waiting`,
 * and an unlock wakes it ahead of any producer. While it waits, producers
 * may still take a free lock, but at most DRIVER_PASSES of them: a driver
 * woken but not yet running (on a loaded machine it may wait a time slice
 * for a core) would otherwise be passed by every producer that runs. After
 * that many, producers sleep until the driver has had the lock. The lock is
 * never reserved before then: standing back for a driver that is preempted
 * leaves the lock idle, and handing it to a thread that is asleep leaves it
 * idle until that thread gets a core; on a loaded machine either one,
 * paid on every acquisition, collapses. Paid once per DRIVER_PASSES
 * producers, it is the price of the bound.
 *
 * TW_LOCK_SPIN is test-and-test-and-set: pause, then yield, then nap, with
 * producers standing back while the driver waits. It is cheapest when
 * threads never outnumber cores and starves the driver when they do.
 * TW_LOCK_MUTEX is the platform's mutex (a pthread mutex, an SRW lock on
 * Windows): no priority for the driver.
 *
 * Its interface: lock_init and lock_destroy; lock_acquire (as the driver
 * or a producer), lock_try (a producer's, which never waits: for the hot
 * paths) and lock_release; and the driver claim, the one guard that keeps a
 * second thread from driving the wheel: taken before the lock, so that the
 * lock knows which single thread to serve first. Owns struct wheel_lock
 * (w->lock): outside this part, code asks for its kind and nothing more.
 *
 * Names tell who holds the lock across a call: a function whose name ends
 * in _unlock is entered with the lock held and returns with it released
 * (on every path); one ending in _relock drops the lock and takes it back
 * before it returns (its node pointers stay valid: chunks never move, and
 * a node is never freed while its callback or hook runs); one ending in
 * _lock returns with the lock held that it took. Every other function
 * returns with the lock as it found it. The adaptive lock's waiters sleep
 * on a word (park, src/platform.c: the futex on Linux, WaitOnAddress on
 * Windows); on other systems park is a short nap, so they poll (use
 * TW_LOCK_MUTEX there). Nothing else parks: tw_cancel's wait for a
 * callback sleeps on a condition variable (see lifetime). */

#define DRIVER_ASLEEP 1u /* in driver_waiting, for the adaptive lock */

/* The adaptive lock's `word`: */
#define LOCK_HELD 1u     /* a thread holds the lock */
#define LOCK_SLEEPERS 2u /* producers may sleep on the word: wake one */
#define LOCK_DRIVER 4u   /* the driver waits for the lock */
#define LOCK_PASS 8u     /* times LOCK_PASS: producers that took it since */

/* Test hooks: tests/threads/test_lock_bound.c and test_cancel_wait.c
 * compile this file in with TW_TEST_LOCK_EVENT defined, to watch the lock;
 * here they are nothing. */
#ifndef TW_TEST_LOCK_EVENT
#define TW_TEST_LOCK_EVENT(lock, what) ((void)0)
#endif
enum lock_event {
    LOCK_EV_PRODUCER_WAITS, /* a producer found the lock taken */
    LOCK_EV_DRIVER_WAITS,   /* the driver found the lock taken */
    LOCK_EV_PRODUCER_TOOK,  /* a producer has the lock */
    LOCK_EV_DRIVER_TOOK,    /* the driver has the lock */
    LOCK_EV_DRIVER_ASKS,    /* it found it taken and said so: producers
                               count from here */
    LOCK_EV_DRIVER_SLEEPS   /* ... spun in vain, about to say it sleeps */
};

static int spin_try(struct wheel_lock *l)
{
    return !spin_load(&l->word) && !spin_exchange_acquire(&l->word, 1u);
}

/* A spin lock's try: producers stand back while the driver waits. */
static int spin_try_as(struct wheel_lock *l, int driver)
{
    return (driver || !spin_load(&l->driver_waiting)) && spin_try(l);
}

/* After a failed first try. The driver raises its flag while it waits. */
static COLD void spin_wait(struct wheel_lock *l, int driver)
{
    unsigned spins = 0;
    if (driver)
        spin_store(&l->driver_waiting, 1u);
    for (;;) {
        if (spin_try_as(l, driver))
            break;
        cpu_pause();
        /* Every SPIN_YIELD_EVERY pauses give the CPU away: first by
         * yielding; when that has not helped (the holder is preempted and
         * the scheduler keeps choosing us), by a nap, so the holder gets a
         * core to finish on. */
        if (++spins % SPIN_YIELD_EVERY == 0) {
            if (spins < SPIN_YIELD_EVERY * SPIN_YIELDS)
                yield_cpu();
            else
                nap();
        }
    }
    if (driver)
        spin_store(&l->driver_waiting, 0u);
}

static int adaptive_try(struct wheel_lock *l, unsigned value)
{
    unsigned expected = 0;
    return spin_claim(&l->word, &expected, value);
}

/* The driver has been passed DRIVER_PASSES times: the lock is its next. */
static int driver_due(unsigned word)
{
    return (word & LOCK_DRIVER) && word / LOCK_PASS >= DRIVER_PASSES;
}

/* A producer sleeps as soon as the lock is taken, or is the driver's next.
 * While the driver waits (LOCK_DRIVER), even a free lock is taken here, not
 * by the fast path, so that each producer passing the driver is counted. */
static COLD void adaptive_wait(struct wheel_lock *l)
{
    unsigned word = spin_load(&l->word);
    for (;;) {
        if (!(word & LOCK_HELD) && !driver_due(word)) {
            /* with "sleepers": we may have slept, so others may sleep too */
            unsigned next = word | LOCK_HELD | LOCK_SLEEPERS;
            if (word & LOCK_DRIVER)
                next += LOCK_PASS;
            if (spin_claim(&l->word, &word, next))
                return;
        } else if ((word & LOCK_SLEEPERS) ||
                   spin_claim(&l->word, &word, word | LOCK_SLEEPERS)) {
            park(&l->word, word | LOCK_SLEEPERS);
            word = spin_load(&l->word);
        }
    }
}

/* The driver says it waits (LOCK_DRIVER, which also sends producers to the
 * counting path), spins a little, then sleeps until an unlock wakes it, and
 * spins again. Dekker's pattern keeps that wake-up from being missed: the
 * driver says "asleep" and then looks at the lock; an unlock frees the lock
 * and then looks for a sleeping driver (all sequentially consistent), so at
 * least one of them sees the other. Once woken it claims the lock with
 * "sleepers": a producer it was woken instead of may be asleep, and the
 * driver's own unlock must wake it. Its claim clears LOCK_DRIVER and the
 * count of producers that passed it. */
static COLD void adaptive_wait_driver(struct wheel_lock *l)
{
    unsigned spins, word = spin_load(&l->word), slept = 0, state;
    for (;;) {
        if (word & LOCK_HELD) {
            if (spin_claim(&l->word, &word, word | LOCK_DRIVER))
                break;
        } else if (spin_claim(&l->word, &word, word | LOCK_HELD)) {
            return; /* freed meanwhile: not a wait */
        }
    }
    TW_TEST_LOCK_EVENT(l, LOCK_EV_DRIVER_ASKS);
    for (;;) {
        for (spins = 0; spins < DRIVER_SPINS; spins++) {
            word = spin_load(&l->word);
            if (!(word & LOCK_HELD) &&
                spin_claim(&l->word, &word,
                           (word & LOCK_SLEEPERS) | slept | LOCK_HELD))
                return;
            cpu_pause();
        }
        slept = LOCK_SLEEPERS;
        TW_TEST_LOCK_EVENT(l, LOCK_EV_DRIVER_SLEEPS);
        spin_store_sc(&l->driver_waiting, DRIVER_ASLEEP);
        if (spin_load_sc(&l->word) & LOCK_HELD)
            park(&l->driver_waiting, DRIVER_ASLEEP);
        state = DRIVER_ASLEEP; /* woken, timed out, or never slept */
        spin_claim_sc(&l->driver_waiting, &state, 0u);
    }
}

/* Frees the adaptive lock and wakes one sleeper: the driver when it sleeps
 * (preferred to producers), else a producer when one may sleep, unless the
 * driver is due: then the sleepers stay asleep, marked, for the driver's
 * unlock to wake. The lock is never handed to a sleeping thread: with more
 * threads than cores a woken thread may wait a whole time slice for a
 * core, and a lock reserved for it would stand idle all that time (a ticket
 * lock's collapse). Nobody waiting, it is one compare-and-swap, inline
 * (adaptive_release); this is the rest, `word` as that one found it. */
static COLD void adaptive_release_waiters(struct wheel_lock *l, unsigned word)
{
    unsigned next, state = DRIVER_ASLEEP;
    do { /* a driver that is due is next: its unlock wakes the sleepers */
        next = word & ~LOCK_HELD;
        if (!driver_due(word))
            next &= ~LOCK_SLEEPERS;
    } while (!spin_claim_sc(&l->word, &word, next));
    if ((word & LOCK_DRIVER) &&
        spin_load_sc(&l->driver_waiting) == DRIVER_ASLEEP &&
        spin_claim_sc(&l->driver_waiting, &state, 0u))
        unpark(&l->driver_waiting, 1);
    else if ((word & LOCK_SLEEPERS) && !(next & LOCK_SLEEPERS))
        unpark(&l->word, 1);
}

static HOT_INLINE void adaptive_release(struct wheel_lock *l)
{
    unsigned word = LOCK_HELD;
    if (!spin_claim_sc(&l->word, &word, 0u))
        adaptive_release_waiters(l, word);
}

/* `driver`: the driving thread (from begin_drive_lock, and retaking the lock
 * between callbacks), which the adaptive lock and the spinlock serve ahead
 * of producers. Uncontended (the common case), a lock is one atomic
 * operation that writes no flag waiting threads poll. The test hook names
 * the event by `driver` (each driver event follows its producer one). */
static HOT_INLINE void lock_acquire(struct wheel_lock *l, int driver)
{
    if (l->kind == TW_LOCK_ADAPTIVE) { /* first: the default */
        if (!adaptive_try(l, LOCK_HELD)) {
            TW_TEST_LOCK_EVENT(l, LOCK_EV_PRODUCER_WAITS + driver);
            if (driver)
                adaptive_wait_driver(l);
            else
                adaptive_wait(l);
        }
    } else if (l->kind == TW_LOCK_NONE) {
        return;
    } else if (l->kind == TW_LOCK_SPIN) {
        if (!spin_try_as(l, driver)) {
            TW_TEST_LOCK_EVENT(l, LOCK_EV_PRODUCER_WAITS + driver);
            spin_wait(l, driver);
        }
    } else {
        mutex_lock(&l->mutex);
    }
    TW_TEST_LOCK_EVENT(l, LOCK_EV_PRODUCER_TOOK + driver);
}

/* A producer's acquire that never waits: 1 with the lock held; 0 when it
 * is taken (or, for the adaptive lock, when a driver waits for it: the
 * waiting path counts the producers that pass it) and always for a mutex,
 * which has no trylock without a call. A hot path inlines it and takes
 * the lock with lock() out of line on 0. */
static HOT_INLINE int lock_try(struct wheel_lock *l)
{
    int taken;
    if (l->kind == TW_LOCK_ADAPTIVE) /* first: the default */
        taken = adaptive_try(l, LOCK_HELD);
    else if (l->kind == TW_LOCK_NONE)
        return 1;
    else
        taken = l->kind == TW_LOCK_SPIN && spin_try_as(l, 0);
    if (taken)
        TW_TEST_LOCK_EVENT(l, LOCK_EV_PRODUCER_TOOK);
    return taken;
}

static HOT_INLINE void lock_release(struct wheel_lock *l)
{
    if (l->kind == TW_LOCK_ADAPTIVE) /* first: the default */
        adaptive_release(l);
    else if (l->kind == TW_LOCK_NONE)
        return;
    else if (l->kind == TW_LOCK_SPIN)
        spin_store_release(&l->word, 0u);
    else
        mutex_unlock(&l->mutex);
}

/* Makes the caller the one thread that drives the wheel, until
 * end_driver_claim; 0 when another thread drives or a callback of this
 * drive re-enters. TW_LOCK_NONE has one thread: a plain read and write,
 * no atomic operation. */
static int claim_driver(struct wheel_lock *l)
{
    unsigned expected = 0;
    if (l->kind != TW_LOCK_NONE)
        return spin_claim(&l->driver_claim, &expected, 1u);
    expected = spin_load(&l->driver_claim);
    spin_store(&l->driver_claim, 1u);
    return !expected;
}

/* Lock held, as its last act: a thread claiming next then waits for this
 * lock as the driver, which is what it is. */
static void end_driver_claim(struct wheel_lock *l)
{
    spin_store_release(&l->driver_claim, 0u);
}

/* For the checker: whether a driver has claimed the wheel. */
static int lock_driver_claimed(const struct wheel_lock *l)
{
    return spin_load(&l->driver_claim) != 0;
}

static int lock_init(struct wheel_lock *l, int kind)
{
    l->kind = kind;
    spin_init(&l->word);
    spin_init(&l->driver_waiting);
    spin_init(&l->driver_claim);
    return kind == TW_LOCK_MUTEX ? mutex_init(&l->mutex) : 0;
}

static void lock_destroy(struct wheel_lock *l)
{
    if (l->kind == TW_LOCK_MUTEX)
        mutex_destroy(&l->mutex);
}

static HOT_INLINE void lock(tw_wheel *w)
{
    lock_acquire(&w->lock, 0);
}

static HOT_INLINE void unlock(tw_wheel *w)
{
    lock_release(&w->lock);
}
