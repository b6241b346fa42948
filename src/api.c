/* ==== api: the public functions ==========================================
 * Guarantees: every public function checks its arguments and answers bad
 * input as timer.h says, never with undefined behaviour. Owns what a wheel
 * is created with (the config's fields, the allocator) and the cancel and
 * reschedule counters. Besides calling the parts above it writes some of
 * their state directly: every part's initial state (wheel_init), `live`
 * and a node's `state` as a cancel ends it, a stamp and a node's `expire`
 * as a reschedule moves it in place, `destroying` as a destroy decides,
 * and the drive frame's `free_wheel` as a callback destroys its wheel
 * (docs/internals.md lists them by part).
 * Cancel and reschedule keep their common case inline (see "Hot paths" in
 * docs/internals.md). */

/* ---- wheels -------------------------------------------------------------- */

TW_EXPORT void tw_config_init(struct tw_config *config)
{
    if (!config)
        return;
    memset(config, 0, sizeof *config);
    config->size = sizeof *config;
    config->tick_us = 1000;
    config->lock = TW_LOCK_ADAPTIVE;
    config->clock = TW_CLOCK_MONOTONIC;
}

/* A config from a newer header may be longer: its extra bytes must be zero,
 * or the caller asked for something this library cannot do. One from an
 * older header is shorter: the fields it lacks take their defaults (1.0's
 * config ended before `drive`). NULL is the defaults. */
#define CONFIG_SIZE_1_0 offsetof(struct tw_config, drive)

static int config_read(const struct tw_config *config, struct tw_config *c)
{
    const unsigned char *bytes = (const unsigned char *)config;
    size_t i;
    tw_config_init(c);
    if (!config)
        return 1;
    if (config->size < CONFIG_SIZE_1_0)
        return 0;
    for (i = sizeof *c; i < config->size; i++)
        if (bytes[i])
            return 0;
    memcpy(c, config, config->size < sizeof *c ? config->size : sizeof *c);
    return c->tick_us >= TW_MIN_TICK_US && c->tick_us <= TW_MAX_TICK_US &&
           (unsigned)c->lock <= TW_LOCK_ADAPTIVE &&
           (unsigned)c->clock <= TW_CLOCK_MONOTONIC_COARSE &&
           c->start_tick <= TW_MAX_TICK && (unsigned)c->drive <= TW_DRIVE_TICKS;
}

/* The lock, and the mutexes and condition the timer thread and cancel
 * waits use; 0, or an error with nothing left to destroy. */
static int init_sync(tw_wheel *w, int lock_kind)
{
    int error = cond_init(&w->wake);
    if (error)
        return error;
    error = mutex_init(&w->sleep_mutex);
    if (error)
        goto no_sleep_mutex;
    error = mutex_init(&w->control);
    if (error)
        goto no_control;
    error = lock_init(&w->lock, lock_kind);
    if (!error)
        return 0;
    mutex_destroy(&w->control);
no_control:
    mutex_destroy(&w->sleep_mutex);
no_sleep_mutex:
    cond_destroy(&w->wake);
    return error;
}

/* A wheel's tag (see make_id): 31 bits, never 0, from what differs between
 * wheels without any state they share: the wheel's address, the stack's,
 * and the monotonic clock's finest count (not the wheel's own clock, which
 * may be a fake one that reads the same for every wheel), stirred by a
 * 64-bit finaliser so that every input bit reaches every tag bit. */
static uint32_t draw_tag(const tw_wheel *w)
{
    uint64_t x = monotonic_count();
    x ^= (uint64_t)(uintptr_t)w ^ (uint64_t)(uintptr_t)&x << 20;
    x = (x ^ x >> 31) * UINT64_C(0x7fb5d329728ea185);
    x = (x ^ x >> 27) * UINT64_C(0x81dadef4bc2dd44d);
    x = (uint32_t)(x >> 33) & GENERATION_MASK;
    return x ? (uint32_t)x : 1;
}

/* Everything but the lock and the thread state, from a valid config. */
static void wheel_init(tw_wheel *w, const struct tw_config *c, tw_realloc_fn *realloc_fn)
{
    memset(w, 0, sizeof *w);
    w->realloc_fn = realloc_fn;
    w->alloc_context = c->alloc_context;
    w->bytes = sizeof *w;
    queue_init(w);
    w->free_head = NIL;
    w->running = NIL;
    w->due_list = LIST_DUE_A;
    w->max_timers = c->max_timers ? c->max_timers : UINT64_MAX;
    w->on_destroy = c->on_destroy;
    w->context = c->context;
    w->now = w->staged_tick = c->start_tick;
    w->id_tag = (uint64_t)TW_TEST_WHEEL_TAG(w, draw_tag(w)) << 32;
    clock_init(w, c);
}

TW_EXPORT tw_wheel *tw_create(const struct tw_config *config)
{
    struct tw_config c;
    tw_realloc_fn *realloc_fn;
    tw_wheel *w;
    int error;
    if (!config_read(config, &c)) {
        fail_with(EINVAL);
        return NULL;
    }
    realloc_fn = c.realloc_fn ? c.realloc_fn : libc_realloc;
    w = realloc_fn(NULL, sizeof *w, c.alloc_context);
    if (!w) {
        fail_with(ENOMEM);
        return NULL;
    }
    wheel_init(w, &c, realloc_fn);
    error = init_sync(w, c.lock);
    if (error) {
        realloc_fn(w, 0, c.alloc_context);
        fail_with(error);
        return NULL;
    }
    return w;
}

/* tw_destroy's decision under the lock, by its re-entrancy rules (see
 * timer.h): -EBUSY; 0 when this call is done, the destroy finished by the
 * drive or by the outermost tw_cancel running a hook on this thread; or 1
 * to stop the timer thread and tear the wheel down.
 *  - On the driver (a callback, or a hook it runs): every pending timer is
 *    released now, as a plain destroy would; the batch stops after this
 *    callback and the drive frees the wheel as it ends. Not on a timer
 *    thread another thread is stopping: that one joins it and uses the
 *    wheel after this call.
 *  - Inside hooks of cancels on this thread: the outermost of those
 *    tw_cancel calls destroys the wheel once its hook has returned, so no
 *    caller further in still holds a wheel that was freed.
 *  - Hooks of other threads' cancels, or another driver, are the caller's
 *    race; the timer thread's own hooks are part of its drive, which
 *    stopping the thread waits for.
 * A destroy decided (0 or 1) marks the wheel at once: from then on adds
 * fail, and a callback still running on the timer thread, which this call
 * will stop and join, is refused rather than beginning a second destroy. */
static int destroy_decision_relock(tw_wheel *w)
{
    struct hook_frame *frame, *outermost = NULL;
    int timer_thread = timer_thread_drives(w);
    int foreign = w->drive && !timer_thread; /* another thread drives */
    if (w->destroying)
        return -EBUSY;
    if (on_driver_thread(w)) {
        if (timer_thread && timer_thread_state(w) == THREAD_STOPPING)
            return -EBUSY;
        w->drive->free_wheel = 1;
        release_pending_relock(w);
        return 0;
    }
    for (frame = w->hooks; frame; frame = frame->next)
        if (same_thread(frame->thread, thread_self()))
            outermost = frame;
        else if (!timer_thread || !same_thread(frame->thread, w->drive->thread))
            foreign = 1;
    if (outermost)
        outermost->destroy = 1;
    else if (foreign)
        return -EBUSY;
    w->destroying = 1;
    return outermost ? 0 : 1;
}

TW_EXPORT int tw_destroy(tw_wheel *w)
{
    int decision;
    if (!w)
        return 0;
    lock(w);
    decision = destroy_decision_relock(w);
    unlock(w);
    if (decision <= 0)
        return decision;
    TW_TEST_DESTROY_DECIDED(w);
    /* Not the timer thread, whose calls all come from its drive: so the
     * stop cannot fail. */
    stop_thread(w);
    teardown(w);
    return 0;
}

/* ---- timers -------------------------------------------------------------- */

TW_EXPORT tw_id tw_add(tw_wheel *w, uint64_t delay, tw_callback *callback,
                       void *user_data)
{
    return add_timer(w, delay, 0, 0, callback, NULL, user_data);
}

TW_EXPORT tw_id tw_add_periodic(tw_wheel *w, uint64_t first, uint64_t interval,
                                tw_callback *callback, void *user_data)
{
    if (interval == 0) {
        fail_with(EINVAL);
        return 0;
    }
    return add_timer(w, first, 0, interval, callback, NULL, user_data);
}

TW_EXPORT tw_id tw_add_ex(tw_wheel *w, uint64_t delay, uint64_t interval,
                          tw_callback *callback, tw_release *release,
                          void *user_data)
{
    return add_timer(w, delay, 0, interval, callback, release, user_data);
}

TW_EXPORT tw_id tw_add_us(tw_wheel *w, uint64_t delay_us, uint64_t interval,
                          tw_callback *callback, tw_release *release, void *user_data)
{
    if (!w || delay_us == 0) /* delay 0 is the same in both units */
        return add_timer(w, 0, 0, interval, callback, release, user_data);
    return add_timer(w, ticks_of_us(w, delay_us), delay_us, interval, callback, release,
                     user_data);
}

/* tw_cancel in every case; lock held, n as node_of found it. Out of line:
 * tw_cancel inlines only its common case. */
static NOINLINE int cancel_unlock(tw_wheel *w, struct node *n, uint32_t index)
{
    int cancelled;
    uint32_t generation;
    if (!n) {
        unlock(w);
        return 0;
    }
    cancelled = n->state == NODE_LINKED || n->state == NODE_REARMING;
    if (cancelled) {
        if (n->state == NODE_LINKED)
            unlink_node(w, n);
        w->live--;
        w->cancelled++;
        n->state = NODE_ENDED; /* freed below, or by settle_ran_relock
                                  when its running callback returns */
    }
    if (cancelled && w->running != index) {
        int destroy = finish_node_relock(w, index);
        unlock(w);
        if (destroy) { /* tw_destroy was called by the release hook */
            stop_thread(w);
            teardown(w);
        }
        return 1;
    }
    /* Its callback is running on the driver: wait for it (and its release)
     * to finish, unless this is that callback calling. TW_LOCK_NONE has no
     * other thread to wait for. */
    generation = generation_of(n);
    while (w->lock.kind != TW_LOCK_NONE && !on_driver_thread(w) &&
           w->running == index && generation_of(n) == generation)
        wait_for_callback_relock(w);
    unlock(w);
    return cancelled;
}

/* tw_cancel with a lock to wait for. */
static NOINLINE int cancel_rest(tw_wheel *w, tw_id id)
{
    uint32_t index = NIL;
    struct node *n;
    lock(w);
    n = node_of(w, id, &index);
    return cancel_unlock(w, n, index);
}

/* The end of a cancel whose queue needs settling. */
static NOINLINE int settle_and_unlock(tw_wheel *w, unsigned list)
{
    settle_slot(w, list);
    unlock(w);
    return 1;
}

TW_EXPORT int tw_cancel(tw_wheel *w, tw_id id)
{
    uint32_t index = NIL;
    struct node *n;
    unsigned list;
    int settle;
    if (!w)
        return -EINVAL;
    if (!lock_try(&w->lock))
        return cancel_rest(w, id);
    n = node_of(w, id, &index);
    /* the common case: a pending timer with no release hook to run */
    if (!n || n->state != NODE_LINKED || n->release || w->running == index)
        return cancel_unlock(w, n, index);
    list = list_of(n);
    settle = take_out(w, n, list);
    w->live--;
    w->cancelled++;
    node_free(w, n, index);
    if (settle)
        return settle_and_unlock(w, list);
    unlock(w);
    return 1;
}

/* KEEP_INTERVAL: tw_reschedule, which leaves the interval as it is. */
#define KEEP_INTERVAL UINT64_MAX

/* Whether a reschedule to `due` may leave the node's entry where it is: a
 * timer waiting in a level slot, moved later. The staging that reaches the
 * slot files it by its new tick (see "staging"), and its stamp keeps its
 * place among the timers of that tick (see "order"). A delay of 0 moves
 * now (while driving, to the due queue: see schedule_call). */
static HOT_INLINE int moves_in_place(const tw_wheel *w, const struct node *n,
                                     uint64_t due, uint64_t delay)
{
    uint32_t time = (uint32_t)w->now;
    /* a node in a level slot is placed (NODE_LINKED): others have no slot */
    return is_level_slot(n->list) && delay != 0 && due > w->now &&
           (uint32_t)((uint32_t)due - time) > (uint32_t)(n->expire - time);
}

/* Moves a timer now: a new entry where an add would file it, the old one
 * left stale. The entry comes from the block pool, grown first when it can
 * be. When the allocator refuses, the queue the node leaves is compacted
 * at once: that takes back at least the entry it left there, so the move
 * never fails for memory (a periodic timer whose callback runs has no
 * entry: it takes the one kept for its re-arm, see queue_reserve). That
 * compaction costs a pass over the queue, paid only while memory is short.
 * Lock held; the move ends the reschedule: it unlocks and returns 1. Out of
 * line, and called last, so that the common case stays short. */
static NOINLINE int move_now_unlock(tw_wheel *w, uint32_t index, struct node *n,
                                    uint64_t due, uint64_t delay)
{
    int short_of_entries = queue_reserve(w, 1) != 0;
    if (n->state == NODE_LINKED) {
        unsigned list = list_of(n);
        unlink_node(w, n);
        if (short_of_entries)
            queue_compact_whole(w, list);
    }
    schedule_call(w, index, n, due, delay);
    unlock(w);
    return 1;
}

/* The move in place itself: the node's tick, and the slot's least tick
 * marked inexact if the node held it. */
static HOT_INLINE void move_in_place(tw_wheel *w, struct node *n, uint64_t due)
{
    forget_least(w, n->list - LIST_LEVEL0, n->expire);
    n->expire = (uint32_t)due;
}

/* The end of every reschedule that moves its timer: its new stamp, then
 * the move in place or now; unlocks and returns 1. */
static HOT_INLINE int reschedule_move_unlock(tw_wheel *w, uint32_t index, struct node *n,
                                             uint64_t due, uint64_t delay)
{
    n->stamp = ++w->stamp;
    w->rescheduled++;
    if (!moves_in_place(w, n, due, delay))
        return move_now_unlock(w, index, n, due, delay);
    move_in_place(w, n, due);
    unlock(w);
    return 1;
}

/* tw_reschedule in every case; lock held, n as node_of found it, `clock`
 * as call_clock read it. Out of line, so that the common case, inlined in
 * tw_reschedule, stays short. */
static NOINLINE int reschedule_unlock(tw_wheel *w, struct node *n, uint32_t index,
                                      uint64_t delay, uint64_t delay_us, uint64_t interval,
                                      uint64_t clock)
{
    uint64_t due = 0;
    int result = 1;
    if (!n || w->destroying || !(n->state == NODE_LINKED || n->state == NODE_REARMING))
        result = 0;
    else if ((due = due_for(w, delay, delay_us, clock)) == TW_NEVER)
        result = -ERANGE;
    if (result != 1) {
        unlock(w);
        return result;
    }
    /* A periodic timer made a one-shot while its callback runs is linked
     * again by move_now_unlock, so run_batch_relock leaves it alone; its id dies when it
     * next starts, as any one-shot's. */
    if (interval != KEEP_INTERVAL)
        set_interval(n, (uint32_t)interval);
    return reschedule_move_unlock(w, index, n, due, delay);
}

/* tw_reschedule with a lock to wait for; `clock` as call_clock read it. */
static NOINLINE int reschedule_waiting(tw_wheel *w, tw_id id, uint64_t delay,
                                       uint64_t delay_us, uint64_t interval, uint64_t clock)
{
    uint32_t index = NIL;
    struct node *n;
    lock(w);
    n = node_of(w, id, &index);
    return reschedule_unlock(w, n, index, delay, delay_us, interval, clock);
}

/* The common cases, inlined twice (see reschedule): a pending timer moved
 * with its interval kept, in place (an idle timeout on every packet) or
 * now. Every other case, a wait and every error go out of line, last, so
 * that a tick-driven wheel's common case stays short. */
static HOT_INLINE int reschedule_fast(tw_wheel *w, tw_id id, uint64_t delay,
                                      uint64_t delay_us, uint64_t interval, uint64_t clock)
{
    uint32_t index = NIL;
    struct node *n;
    uint64_t due;
    if (!lock_try(&w->lock))
        return reschedule_waiting(w, id, delay, delay_us, interval, clock);
    n = node_of(w, id, &index);
    if (!n || n->state != NODE_LINKED || w->destroying || interval != KEEP_INTERVAL ||
        (due = due_for(w, delay, delay_us, clock)) == TW_NEVER)
        return reschedule_unlock(w, n, index, delay, delay_us, interval, clock);
    return reschedule_move_unlock(w, index, n, due, delay);
}

/* A clock-driven wheel's reschedule: the clock is read before the lock (a
 * clock_fn may be slow), which takes a call. */
static NOINLINE int reschedule_clocked(tw_wheel *w, tw_id id, uint64_t delay,
                                       uint64_t delay_us, uint64_t interval)
{
    return reschedule_fast(w, id, delay, delay_us, interval, call_clock(w));
}

/* A move by `delay` ticks, or by delay_us microseconds when that is not 0
 * (`delay` is then its whole ticks rounded up, see due_for). */
static HOT_INLINE int reschedule(tw_wheel *w, tw_id id, uint64_t delay, uint64_t delay_us,
                                 uint64_t interval)
{
    if (!w)
        return -EINVAL;
    if (delay > TW_MAX_DELAY || (interval != KEEP_INTERVAL && interval > TW_MAX_DELAY))
        return -ERANGE;
    if (delays_read_clock(clock_mode(w)))
        return reschedule_clocked(w, id, delay, delay_us, interval);
    return reschedule_fast(w, id, delay, delay_us, interval, NO_READING);
}

TW_EXPORT int tw_reschedule(tw_wheel *w, tw_id id, uint64_t delay)
{
    return reschedule(w, id, delay, 0, KEEP_INTERVAL);
}

TW_EXPORT int tw_reschedule_ex(tw_wheel *w, tw_id id, uint64_t delay, uint64_t interval)
{
    return reschedule(w, id, delay, 0, interval);
}

TW_EXPORT int tw_reschedule_us(tw_wheel *w, tw_id id, uint64_t delay_us)
{
    if (!w || delay_us == 0)
        return reschedule(w, id, 0, 0, KEEP_INTERVAL);
    return reschedule(w, id, ticks_of_us(w, delay_us), delay_us, KEEP_INTERVAL);
}

TW_EXPORT uint64_t tw_remaining(tw_wheel *w, tw_id id)
{
    uint64_t result;
    if (!w)
        return TW_NEVER;
    lock(w);
    result = remaining_locked(w, id);
    unlock(w);
    return result;
}

/* ---- driving ------------------------------------------------------------- */

TW_EXPORT uint64_t tw_gettime(void)
{
    return monotonic_us(0);
}

TW_EXPORT int64_t tw_expire(tw_wheel *w)
{
    struct drive d;
    return w ? drive_by_clock(w, &d, 0) : -EINVAL;
}

TW_EXPORT int64_t tw_advance(tw_wheel *w, uint64_t ticks)
{
    return w ? drive_by_ticks(w, ticks) : -EINVAL;
}

TW_EXPORT uint64_t tw_next_expiry(tw_wheel *w)
{
    uint64_t result;
    if (!w)
        return TW_NEVER;
    lock(w);
    result = next_expiry_locked(w, 0);
    unlock(w);
    return result;
}

TW_EXPORT int32_t tw_timeout_ms(tw_wheel *w)
{
    uint64_t ticks, due_us = 0, last_us, clock, wait_us;
    int by_clock;
    if (!w)
        return -1;
    lock(w);
    ticks = next_expiry_locked(w, 0);
    by_clock = ticks_have_times(clock_mode(w));
    last_us = w->clock.last_us;
    if (ticks == TW_NEVER || ticks == 0) {
        unlock(w);
        return ticks == 0 ? 0 : -1;
    }
    if (by_clock)
        due_us = tick_start_us(w, ticks);
    unlock(w);
    wait_us = saturated_product(ticks, w->clock.tick_us);
    /* Read after the lock: a later reading can only shorten the wait. A
     * clock that went back makes the next tw_expire re-base, after which
     * the timer is `ticks` whole ticks away: wait_us stands. */
    if (by_clock && (clock = read_clock(w)) >= last_us)
        wait_us = due_us > clock ? due_us - clock : 0;
    wait_us = wait_us / 1000 + (wait_us % 1000 != 0);
    return wait_us > INT32_MAX ? INT32_MAX : (int32_t)wait_us;
}

/* ---- absolute time -------------------------------------------------------
 * Deadlines as readings of the wheel's own clock, for callers that sleep
 * until a point in time (an event loop's timer, a C++ time_point) rather
 * than for a number of ticks. */

TW_EXPORT uint64_t tw_clock_us(tw_wheel *w)
{
    return w ? read_clock(w) : 0;
}

/* Lock held on entry, released on return. `ticks` from now (TW_NEVER for
 * none) as the clock reading at which that tick's tw_expire() runs it: the
 * tick's start by the reference point, which tw_expire() counts from. A
 * wheel only tw_advance drives has no such point: its ticks are placed
 * from the clock as it reads now, one tick length each. */
static uint64_t deadline_unlock(tw_wheel *w, uint64_t ticks)
{
    uint64_t result = TW_NEVER;
    if (ticks == TW_NEVER || ticks_have_times(clock_mode(w))) {
        if (ticks != TW_NEVER)
            result = tick_start_us(w, ticks);
        unlock(w);
        return result;
    }
    unlock(w);
    return ticks_after_us(w, read_clock(w), ticks);
}

TW_EXPORT uint64_t tw_deadline_us(tw_wheel *w, tw_id id)
{
    if (!w)
        return TW_NEVER;
    lock(w);
    return deadline_unlock(w, remaining_locked(w, id));
}

TW_EXPORT uint64_t tw_next_deadline_us(tw_wheel *w)
{
    if (!w)
        return TW_NEVER;
    lock(w);
    return deadline_unlock(w, next_expiry_locked(w, 0));
}

/* ---- inspection ---------------------------------------------------------- */

TW_EXPORT uint64_t tw_now(tw_wheel *w)
{
    uint64_t now;
    if (!w)
        return 0;
    lock(w);
    now = w->now;
    unlock(w);
    return now;
}

TW_EXPORT uint64_t tw_count(tw_wheel *w)
{
    uint64_t live;
    if (!w)
        return 0;
    lock(w);
    live = w->live;
    unlock(w);
    return live;
}

TW_EXPORT void *tw_context(tw_wheel *w)
{
    return w ? w->context : NULL; /* written once, at creation */
}

TW_EXPORT uint32_t tw_tick_us(tw_wheel *w)
{
    return w ? w->clock.tick_us : 0;
}

TW_EXPORT int tw_get_stats(tw_wheel *w, struct tw_stats *stats)
{
    struct tw_stats s;
    uint64_t *group_count[] = {&s.pending_near,     &s.pending_level[0],
                               &s.pending_level[1], &s.pending_level[2],
                               &s.pending_level[3], &s.pending_due};
    unsigned list;
    size_t size;
    if (!w || !stats || stats->size < 8)
        return -EINVAL;
    size = stats->size < sizeof s ? stats->size : sizeof s;
    memset(&s, 0, sizeof s);
    s.size = (uint32_t)size;
    s.tick_us = w->clock.tick_us;
    lock(w);
    s.now = w->now;
    s.pending = w->live;
    for (list = 0; list < LIST_COUNT; list++) /* not kept on the hot paths */
        *group_count[group_of(list)] += queue_count(w, list);
    s.pool_capacity = (uint64_t)w->node_chunks.count * CHUNK_NODES;
    s.pool_free = w->free_count + (s.pool_capacity - w->used);
    s.bytes = w->bytes;
    s.added = w->added;
    s.fired = w->fired;
    s.cancelled = w->cancelled;
    s.rescheduled = w->rescheduled;
    s.cascaded = w->cascaded;
    s.rebases = w->rebases;
    if (size >= offsetof(struct tw_stats, next_expiry_exact) + sizeof s.next_expiry_exact)
        s.next_expiry_exact = next_expiry_locked(w, 1); /* may read a slot */
    s.broken_invariant = w->broken;
    unlock(w);
    memcpy(stats, &s, size);
    return 0;
}
