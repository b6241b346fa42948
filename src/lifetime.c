/* ==== lifetime: hooks, cancel waits, teardown =============================
 * Guarantees: user data is handed back exactly once; no memory is freed
 * while another thread is inside the wheel in a way the destroy must wait
 * for (a release hook, a waiting tw_cancel, a start or stop of the timer
 * thread). Owns w->hooks, w->cancel_waits, w->destroying (set by
 * tw_destroy's decision and by the release), w->thread_calls, and the
 * timer thread's state with src/drive.c (under sleep_mutex).
 *
 * Handing user data back and ending the wheel: release hooks (run with the
 * lock dropped, each tracked by a frame so that tw_destroy can tell where
 * it is called from), tw_cancel's wait for a running callback, stopping
 * the timer thread, and the teardown. tw_destroy's rules (timer.h,
 * "re-entrancy") are decided in tw_destroy; these are the steps they
 * share. */

static int on_driver_thread(const tw_wheel *w)
{
    return w->drive && same_thread(w->drive->thread, thread_self());
}

static int timer_thread_drives(const tw_wheel *w)
{
    return w->drive && w->drive->timer_thread;
}

/* Frees a node and hands its user data back, lock released for the hook.
 * Returns 1 when the hook called tw_destroy and the caller (tw_cancel) must
 * now finish destroying the wheel. */
static int finish_node_relock(tw_wheel *w, uint32_t index)
{
    struct node *n = node_at(w, index);
    tw_release *release = w->releases[n->release];
    void *user_data = call_at(w, index)->user_data;
    struct hook_frame frame, **link;
    int driver;
    /* Dead from here on: while the hook runs unlocked, its id must not be
     * cancelled, rescheduled or counted again. */
    n->state = NODE_ENDED;
    if (!release) {
        node_free(w, n, index);
        return 0;
    }
    driver = on_driver_thread(w); /* decided under the lock */
    frame.thread = thread_self();
    frame.destroy = 0;
    frame.next = w->hooks;
    w->hooks = &frame;
    unlock(w);
    release(user_data);
    lock_acquire(&w->lock, driver);
    for (link = &w->hooks; *link != &frame; link = &(*link)->next)
        ;
    *link = frame.next;
    node_free(w, n, index);
    return frame.destroy;
}

/* Lock held: wakes the tw_cancel calls waiting for the callback just
 * settled. A condition variable, not the lock's park: it sleeps on every
 * platform, whatever the lock. */
static COLD void settle_cancel_waits(tw_wheel *w)
{
    struct cancel_wait *wait;
    mutex_lock(&w->sleep_mutex);
    for (wait = w->cancel_waits; wait; wait = wait->next)
        wait->settled = 1;
    cond_broadcast(&w->wake);
    mutex_unlock(&w->sleep_mutex);
}

/* Lock held on entry and on return: sleeps until the driver has settled
 * the callback running now (the caller looks again at what it waits for).
 * Asleep, not polling the lock: a waiter that keeps retaking the lock can
 * keep the driver from ever finishing the callback on a busy machine. */
static void wait_for_callback_relock(tw_wheel *w)
{
    struct cancel_wait wait, **link;
    wait.settled = 0;
    wait.next = w->cancel_waits;
    w->cancel_waits = &wait;
    unlock(w);
    mutex_lock(&w->sleep_mutex);
    while (!wait.settled)
        cond_wait(&w->wake, &w->sleep_mutex);
    mutex_unlock(&w->sleep_mutex);
    TW_TEST_CANCEL_WOKEN(w);
    lock(w);
    for (link = &w->cancel_waits; *link != &wait; link = &(*link)->next)
        ;
    *link = wait.next;
}

/* The timer thread's state (enum thread_state). */
static int timer_thread_state(tw_wheel *w)
{
    int state;
    mutex_lock(&w->sleep_mutex);
    state = w->thread_state;
    mutex_unlock(&w->sleep_mutex);
    return state;
}

/* 1 while a tw_thread_start or tw_thread_stop is inside the wheel. */
static int thread_calls_inside(tw_wheel *w)
{
    int inside;
    mutex_lock(&w->sleep_mutex);
    inside = w->thread_calls != 0;
    mutex_unlock(&w->sleep_mutex);
    return inside;
}

/* Waits, lock held, until no other thread drives the wheel, runs one of
 * its release hooks, waits in tw_cancel for a callback, or is inside
 * tw_thread_start/stop: only a caller that ignored tw_destroy's rules
 * (using the wheel from another thread while destroying it) waits for the
 * first two; a tw_cancel that began waiting for the callback that then
 * destroyed the wheel is woken when it returns, and must be gone before
 * the memory is, as must a start or stop that raced the destroy. */
static void wait_until_alone_relock(tw_wheel *w)
{
    while (w->drive || w->hooks || w->cancel_waits || thread_calls_inside(w)) {
        unlock(w);
        TW_TEST_TEARDOWN_WAITS(w);
        yield_cpu();
        lock(w);
    }
}

/* Hands every pending timer to its release hook; lock held. From here on
 * adds fail and nothing fires. */
static void release_pending_relock(tw_wheel *w)
{
    unsigned list;
    uint32_t index;
    uint64_t due;
    w->destroying = 1;
    /* Release hooks run unlocked and may cancel other timers of this wheel;
     * popping queue heads keeps that safe. */
    for (list = 0; list < LIST_COUNT; list++) {
        while ((index = pop_live(w, list, &due)) != NIL) {
            /* only here does pop_live take from a level slot: keep its
             * least tick true for tw_next_expiry and tw_check in hooks */
            if (is_level_slot(list))
                forget_least(w, list - LIST_LEVEL0, node_at(w, index)->expire);
            w->live--;
            if (index == w->running) /* moved while its callback runs */
                node_at(w, index)->state = NODE_ENDED; /* settle_ran_relock ends it */
            else
                finish_node_relock(w, index);
        }
    }
}

static void free_chunks(tw_wheel *w, struct chunk_table *t)
{
    while (t->count)
        wheel_alloc(w, t->chunks[--t->count].memory, 0);
    wheel_alloc(w, t->chunks, 0);
}

static void destroy_sync(tw_wheel *w)
{
    lock_destroy(&w->lock);
    mutex_destroy(&w->control);
    mutex_destroy(&w->sleep_mutex);
    cond_destroy(&w->wake);
}

/* Releases every pending timer and frees the wheel; lock not held, the
 * timer thread stopped, the decision to destroy taken. */
static void teardown(tw_wheel *w)
{
    tw_release *on_destroy = w->on_destroy;
    void *context = w->context;
    lock(w);
    wait_until_alone_relock(w);
    release_pending_relock(w); /* nothing left after a destroy from a callback */
    wait_until_alone_relock(w); /* hooks of cancels made meanwhile by others */
    unlock(w);
    free_chunks(w, &w->node_chunks);
    free_chunks(w, &w->block_chunks);
    destroy_sync(w);
    w->realloc_fn(w, 0, w->alloc_context);
    if (on_destroy)
        on_destroy(context);
}

/* tw_thread_start and tw_thread_stop count themselves in while they may
 * touch `control`, so that a teardown racing them waits until they are
 * out; every enter_thread_call is paired with a leave_thread_call. It
 * answers the thread's state as it found it, or -EDEADLK on the timer
 * thread itself. */
static int enter_thread_call(tw_wheel *w)
{
    int state;
    mutex_lock(&w->sleep_mutex);
    state = w->thread_state;
    if (state != THREAD_IDLE && same_thread(thread_of(&w->thread), thread_self()))
        state = -EDEADLK;
    w->thread_calls++;
    mutex_unlock(&w->sleep_mutex);
    return state;
}

static void leave_thread_call(tw_wheel *w)
{
    mutex_lock(&w->sleep_mutex);
    w->thread_calls--;
    mutex_unlock(&w->sleep_mutex);
}

/* Stops the timer thread and joins it: 0 (also when none runs), or
 * -EDEADLK on the timer thread itself. `control` makes a second stopper
 * wait for the first. When the thread's drive destroyed the wheel while
 * this call was joining it, the thread leaves the teardown to this call
 * (it cannot free a wheel that a joiner touches after the join): the wheel
 * is gone when this returns. */
static int stop_thread(tw_wheel *w)
{
    int state = enter_thread_call(w);
    if (state == -EDEADLK) {
        leave_thread_call(w);
        return state;
    }
    TW_TEST_STOP_ENTERED(w);
    mutex_lock(&w->control);
    mutex_lock(&w->sleep_mutex);
    state = w->thread_state;
    if (state == THREAD_RUNNING) {
        w->thread_state = THREAD_STOPPING;
        cond_broadcast(&w->wake); /* cancel waits sleep there too */
        mutex_unlock(&w->sleep_mutex);
        thread_join(&w->thread);
        mutex_lock(&w->sleep_mutex);
        state = w->thread_state;
        w->thread_state = THREAD_IDLE;
    }
    mutex_unlock(&w->sleep_mutex);
    mutex_unlock(&w->control);
    leave_thread_call(w); /* after `control`: a teardown destroys it */
    if (state == THREAD_LEFT_TEARDOWN)
        teardown(w);
    return 0;
}

/* The end of a tw_destroy called from a callback or a hook on the driver,
 * once the drive is over. The timer thread cannot join itself: it detaches
 * and frees the wheel as its last act, unless a stopper is joining it
 * already; then the stopper frees the wheel once the thread is gone. */
static void finish_deferred_destroy(tw_wheel *w)
{
    int state;
    mutex_lock(&w->sleep_mutex);
    state = w->thread_state;
    if (state == THREAD_IDLE || !same_thread(thread_of(&w->thread), thread_self()))
        state = THREAD_IDLE; /* not on the timer thread */
    else if (state == THREAD_STOPPING)
        w->thread_state = THREAD_LEFT_TEARDOWN;
    else {
        w->thread_state = THREAD_IDLE;
        thread_detach(&w->thread);
    }
    mutex_unlock(&w->sleep_mutex);
    if (state == THREAD_STOPPING)
        return;
    if (state == THREAD_IDLE)
        stop_thread(w); /* a timer thread beside a tw_advance driver */
    teardown(w);
}
