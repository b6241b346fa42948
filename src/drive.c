/* ==== drive: dispatch, the walk, the timer thread ==========================
 * Guarantees: every due timer runs once, in stamp order within a tick;
 * once tw_cancel returned 1 its callback does not start; a drive never
 * allocates. Owns w->drive, w->running, w->running_due, w->due_list,
 * w->fired, w->period_us; moves w->now.
 *
 * A queue is dispatched in place: each live entry is taken off its head
 * under the lock and its callback runs with the lock released. Nothing new
 * lands on a near slot being dispatched (a timer due exactly now goes to
 * the due queue that is not being run); only a periodic timer still behind
 * re-arms onto the due queue being run, behind the others. A cancel of a
 * node still in the queue leaves a stale entry that is skipped, so once
 * tw_cancel returned 1 that callback never starts. A node
 * is never freed while its callback runs: whatever happened to it meanwhile
 * is settled when the callback returns. */

/* Runs the callback of node `n` (`index`), just popped (due at `due`):
 * lock held on entry and on return, dropped around the callback. */
static HOT_INLINE void run_callback_relock(tw_wheel *w, struct node *n, uint32_t index,
                                           uint64_t due)
{
    uint32_t generation = generation_of(n);
    tw_callback *callback = call_at(w, index)->callback;
    void *user_data = call_at(w, index)->user_data;
    if (is_periodic(n)) {
        n->state = NODE_REARMING;
    } else { /* a one-shot's id dies as its callback starts */
        n->state = NODE_ENDED;
        w->live--;
    }
    w->running = index;
    w->running_due = due;
    w->fired++;
    unlock(w);
    callback(w, make_id(w, index, generation), user_data);
    lock_acquire(&w->lock, 1);
}

/* Settles node `index` once its callback has returned: a periodic timer
 * nobody touched re-arms, a timer that is done is freed (its release hook
 * run with the lock dropped), one moved meanwhile stays where it went. */
static HOT_INLINE void settle_ran_relock(tw_wheel *w, unsigned list, struct node *n,
                                         uint32_t index, uint64_t due)
{
    if (n->state == NODE_REARMING && !w->destroying) {
        /* Fixed rate: the next firing counts from when this one was due.
         * Catching up (due again already) happens only on a due queue (a
         * near slot's timers are due now, and the interval is at least 1):
         * back onto it, behind the timers now on it, in order. */
        uint64_t next = due + n->interval;
        n->stamp = ++w->stamp;
        if (next <= w->now)
            link_due(w, list, index, next);
        else
            schedule(w, index, n, next);
    } else if (n->state != NODE_LINKED) {
        /* one-shot done, cancelled meanwhile, or a periodic timer whose
         * callback destroyed the wheel (nothing re-arms then) */
        if (n->state == NODE_REARMING)
            w->live--;
        if (!n->release)
            node_free(w, n, index);
        else
            finish_node_relock(w, index);
    }
    w->running = NIL;
    if (w->cancel_waits) /* they sleep until this callback is done */
        settle_cancel_waits(w);
}

static int64_t run_batch_relock(tw_wheel *w, unsigned list)
{
    int64_t ran = 0;
    uint32_t index;
    uint64_t due;
    queue_prefetch(w, list, UINT64_MAX, 1);
    if (list < NEAR_SLOTS)
        order_slot(w, list);
    /* Once tw_destroy has begun (from another thread, while the timer
     * thread drives), no further callback starts: the teardown releases
     * what is left. */
    while (!w->destroying && (index = pop_live(w, list, &due)) != NIL) {
        struct node *n = node_at(w, index); /* stays the node: chunks never move */
        run_callback_relock(w, n, index, due);
        ran++;
        settle_ran_relock(w, list, n, index, due);
    }
    return ran;
}

/* ==== driver ============================================================
 * tw_advance and tw_expire walk from now to a target tick, stopping only at
 * ticks where next_event() says there is work; in between nothing changes
 * but the counter and the staging shares, so the result equals ticking one
 * by one. Timers already due run first; timers made due during the walk
 * wait for the next call, so a callback re-adding itself with delay 0
 * cannot loop forever.
 *
 * One guard keeps a second driver out: the lock's driver claim, taken in
 * begin_drive_lock before the lock and given back in end_drive_unlock. A callback
 * re-entering finds it taken, as does another thread. While the claim is
 * held, tw_wheel.drive points to the drive's frame on this thread's
 * stack. */

/* Starts a drive: 0 with the lock held and w->drive set to `d`, or -EBUSY
 * (a drive in progress, or the wheel being destroyed). */
static int begin_drive_lock(tw_wheel *w, struct drive *d, int timer_thread)
{
    if (!claim_driver(&w->lock))
        return -EBUSY;
    lock_acquire(&w->lock, 1);
    if (w->destroying) {
        end_driver_claim(&w->lock);
        unlock(w);
        return -EBUSY;
    }
    d->thread = thread_self();
    d->target = w->now;
    d->timer_thread = timer_thread;
    d->free_wheel = 0;
    w->drive = d;
    return 0;
}

/* Ends a drive; lock held on entry, released on return. A callback or hook
 * that destroyed the wheel left nothing pending, so the walk has ended; the
 * wheel is freed here, and d->free_wheel says so to the caller. */
static void end_drive_unlock(tw_wheel *w, struct drive *d)
{
    w->drive = NULL;
    end_driver_claim(&w->lock);
    unlock(w);
    if (d->free_wheel)
        finish_deferred_destroy(w);
}

/* Walks to `target`, ending the drive; lock held on entry (from
 * begin_drive_lock), released on return. Returns the callbacks run. */
static int64_t walk_to_unlock(tw_wheel *w, struct drive *d, uint64_t target)
{
    int64_t ran;
    unsigned list = w->due_list;
    d->target = target;
    w->due_list = list == LIST_DUE_A ? LIST_DUE_B : LIST_DUE_A;
    ran = run_batch_relock(w, list);
    for (;;) {
        uint64_t step = next_event(w);
        if (step == TW_NEVER || step > target - w->now)
            break;
        w->now += step;
        stage(w);
        list = (unsigned)w->now & NEAR_RING_MASK;
        if (queue_count(w, list))
            ran += run_batch_relock(w, list);
    }
    if (w->now != target) {
        w->now = target;
        stage(w); /* the share of the ticks walked since the last event */
    }
    end_drive_unlock(w, d);
    return ran;
}

/* tw_expire, and the timer thread's call of it: the frame `d` is the
 * caller's, which reads d->free_wheel after the call. */
static int64_t drive_by_clock(tw_wheel *w, struct drive *d, int timer_thread)
{
    uint64_t target;
    if (begin_drive_lock(w, d, timer_thread))
        return -EBUSY;
    target = expire_target_relock(w);
    if (target == TW_NEVER) {
        /* the one call that runs nothing, not even timers already due */
        end_drive_unlock(w, d);
        return -ERANGE;
    }
    return walk_to_unlock(w, d, target);
}

/* tw_advance. */
static int64_t drive_by_ticks(tw_wheel *w, uint64_t ticks)
{
    struct drive d;
    if (begin_drive_lock(w, &d, 0))
        return -EBUSY;
    set_mode(w, mode_after_advance);
    if (ticks > TW_MAX_TICK - w->now) {
        end_drive_unlock(w, &d);
        return -ERANGE;
    }
    return walk_to_unlock(w, &d, w->now + ticks);
}

/* ==== timer thread ======================================================
 * skynet's dedicated timer thread: tw_expire every period, sleeping on a
 * condition variable so that stop wakes it at once. */

/* The timer thread's loop: tw_expire, then sleep until the period is over
 * or a stop wakes it; returns when told to stop, or when a callback
 * destroyed the wheel (then without touching it). */
static void timer_thread_loop(tw_wheel *w)
{
    struct drive d;
    uint64_t deadline;
    mutex_lock(&w->sleep_mutex);
    while (w->thread_state == THREAD_RUNNING) {
        mutex_unlock(&w->sleep_mutex);
        d.free_wheel = 0;
        drive_by_clock(w, &d, 1);
        if (d.free_wheel)
            return; /* a callback destroyed the wheel; detached */
        deadline = monotonic_us(0) + w->period_us;
        mutex_lock(&w->sleep_mutex);
        while (w->thread_state == THREAD_RUNNING &&
               cond_wait_until(&w->wake, &w->sleep_mutex, deadline) == 0)
            ;
    }
    mutex_unlock(&w->sleep_mutex);
}

THREAD_ENTRY(timer_thread_main, argument)
{
    timer_resolution(1);
    timer_thread_loop(argument);
    timer_resolution(0);
    THREAD_RETURN;
}

TW_EXPORT int tw_thread_start(tw_wheel *w, uint32_t period_us)
{
    int error;
    if (!w || period_us == 0 || w->lock.kind == TW_LOCK_NONE)
        return -EINVAL;
    /* Counted in first, so that a teardown from here on waits for this
     * call; the state is looked at before taking `control`: a stopper
     * holds it while joining, and this caller may be the very thread it
     * joins. */
    if (enter_thread_call(w) != THREAD_IDLE) { /* -EDEADLK included */
        leave_thread_call(w);
        return -EBUSY;
    }
    /* `destroying` is read holding `control`: a destroy decided after this
     * read stops the thread made below, because its stop_thread takes
     * `control` after this call lets go of it. */
    mutex_lock(&w->control);
    error = 0;
    lock(w);
    if (w->destroying)
        error = EBUSY;
    else
        set_mode(w, mode_after_expire);
    unlock(w);
    TW_TEST_START_CHECKED(w);
    mutex_lock(&w->sleep_mutex);
    if (!error && w->thread_state == THREAD_IDLE) {
        w->period_us = period_us;
        w->thread_state = THREAD_RUNNING;
        error = thread_start(&w->thread, timer_thread_main, w);
        if (error)
            w->thread_state = THREAD_IDLE;
    } else {
        error = EBUSY; /* being destroyed, or another start got here first */
    }
    mutex_unlock(&w->sleep_mutex);
    mutex_unlock(&w->control);
    leave_thread_call(w);
    return -error;
}

TW_EXPORT int tw_thread_stop(tw_wheel *w)
{
    return w ? stop_thread(w) : -EINVAL;
}
