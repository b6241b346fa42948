/* ==== timers: add, next expiry, time left ================================
 * Guarantees: an add never fires inside the call that made it; timers of
 * one tick keep the order of their adds; tw_next_expiry is never late and
 * O(1) but for slots holding only timers moved later. Owns the release
 * table (w->releases, w->release_count) and w->added; hands out stamps
 * (w->stamp, as reschedules and re-arms do) and counts w->live (as every
 * part that ends a timer does).
 *
 * A node due at or before now waits on the due queue for the start of the
 * next advance; anything later goes into its slot. */

/* Places a node on due queue `list` (which the `list` field records, with
 * bits 32..45 of the due tick). */
static void link_due(tw_wheel *w, unsigned list, uint32_t index, uint64_t due)
{
    struct node *n = node_at(w, index);
    link_tail(w, list, index, n);
    n->expire = (uint32_t)due;
    n->list = (uint16_t)(DUE_FLAG | ((list - LIST_DUE_A) << DUE_WHICH_SHIFT) |
                         ((due >> 32) & DUE_EPOCH_MASK));
}

static HOT_INLINE void schedule(tw_wheel *w, uint32_t index, struct node *n,
                                uint64_t due)
{
    n->expire = (uint32_t)due;
    if (due <= w->now)
        link_due(w, w->due_list, index, due);
    else
        link_tail(w, slot_for((uint32_t)due, (uint32_t)w->now), index, n);
}

/* An add or reschedule: a delay of 0 made while the wheel is driven waits
 * for the next call even when its due tick (the clock's, on a clock-driven
 * wheel) lies ahead of the tick being dispatched: a callback that re-adds
 * itself with delay 0 runs once per call, never in a loop. */
static HOT_INLINE void schedule_call(tw_wheel *w, uint32_t index,
                                     struct node *n, uint64_t due,
                                     uint64_t delay)
{
    if (delay == 0 && w->drive)
        link_due(w, w->due_list, index, due);
    else
        schedule(w, index, n, due);
}

/* Index of `release` in the wheel's table (0 for NULL); for a function not
 * in it yet, the index it would get, or -1 when the table is full. Nothing
 * is registered here, so an add that fails later leaves no entry behind.
 * A linear scan, under the lock: programs pass a handful of distinct
 * functions (free, a delete, a closure's destroy), found in the first few
 * entries, and it keeps the node's reference to one byte. */
static int release_index(const tw_wheel *w, tw_release *release)
{
    uint32_t i;
    if (!release)
        return 0;
    for (i = 1; i <= w->release_count; i++)
        if (w->releases[i] == release)
            return (int)i;
    return w->release_count == MAX_RELEASES ? -1 : (int)w->release_count + 1;
}

/* An add of `delay` ticks, or of delay_us microseconds when that is not 0
 * (`delay` is then its whole ticks rounded up, see due_for). */
static HOT_INLINE tw_id add_timer(tw_wheel *w, uint64_t delay, uint64_t delay_us,
                                  uint64_t interval, tw_callback *callback,
                                  tw_release *release, void *user_data)
{
    uint32_t index = NIL, generation;
    struct node *n;
    uint64_t clock, due = 0;
    int release_slot = 0, error = 0;
    if (!w || !callback) {
        fail_with(EINVAL);
        return 0;
    }
    if (delay > TW_MAX_DELAY || interval > TW_MAX_DELAY) {
        fail_with(ERANGE);
        return 0;
    }
    clock = call_clock(w);
    lock(w);
    if (w->destroying)
        error = EBUSY;
    else if (w->live >= w->max_timers)
        error = ENOSPC;
    else if ((release_slot = release_index(w, release)) < 0)
        error = EMFILE;
    else if ((due = due_for(w, delay, delay_us, clock)) == TW_NEVER)
        error = ERANGE;
    else if (queue_reserve(w, 1) || (index = node_alloc(w)) == NIL)
        error = ENOMEM;
    if (error) {
        unlock(w);
        fail_with(error);
        return 0;
    }
    if ((uint32_t)release_slot > w->release_count)
        w->releases[++w->release_count] = release;
    n = node_at(w, index);
    call_at(w, index)->callback = callback;
    call_at(w, index)->user_data = user_data;
    set_interval(n, (uint32_t)interval);
    n->release = (uint8_t)release_slot;
    n->stamp = ++w->stamp;
    schedule_call(w, index, n, due, delay);
    w->live++;
    w->added++;
    generation = generation_of(n); /* before unlocking: it may fire at once */
    unlock(w);
    return make_id(w, index, generation);
}

/* ==== next expiry ========================================================
 * What is due when: tw_next_expiry in O(1), and a timer's time left. */

/* Ticks from now to `tick`, 0 when it has come. */
static uint64_t ticks_until(const tw_wheel *w, uint64_t tick)
{
    return tick > w->now ? tick - w->now : 0;
}

/* The tick a periodic timer whose callback runs (NODE_REARMING) is due at
 * next: it re-arms when the callback returns. */
static uint64_t rearm_tick(const tw_wheel *w)
{
    return w->running_due + node_at(w, w->running)->interval;
}

/* Ticks to the earliest pending timer; lock held. Due queues and the near
 * slot of now (which holds timers only while it is dispatched) are due
 * now; near slots are exact; each level's first occupied slot answers with
 * its least tick, and when that lies past the slot's span (its timers were
 * all rescheduled later, see staging) the next occupied slot is asked too.
 * Staging lets the spans of levels overlap (a slot partly moved down), so
 * every level is asked, unless its first slot starts after the best answer
 * yet: O(1) but for slots holding only timers moved later. Without
 * `exact`, a big slot's inexact bound may answer early, never late. */
static uint64_t next_expiry_locked(tw_wheel *w, int exact)
{
    uint64_t step, start;
    unsigned level, list;
    if (queue_count(w, LIST_DUE_A) || queue_count(w, LIST_DUE_B) ||
        (w->drive && queue_count(w, (unsigned)w->now & NEAR_RING_MASK)))
        return 0;
    step = near_next(w);
    for (level = 0; level < LEVELS && next_start(w, level) - w->now < step; level++) {
        uint32_t span = UINT32_C(1) << level_shift(level);
        if (!level_occupied(w, level))
            continue;
        list = level_first(w, level, &start);
        while (list && start - w->now < step) {
            uint32_t least = slot_least(w, list, exact);
            uint64_t until = (uint32_t)(least - (uint32_t)w->now);
            if (until < step)
                step = until;
            if ((uint32_t)(least - (uint32_t)start) < span)
                break; /* later slots start past this one's span */
            list = level_after(w, level, list, &start);
        }
    }
    if (w->running != NIL && node_at(w, w->running)->state == NODE_REARMING &&
        ticks_until(w, rearm_tick(w)) < step)
        step = ticks_until(w, rearm_tick(w));
    return step;
}

/* Ticks from now to a timer's next firing, TW_NEVER when not live; lock
 * held. A timer on a due queue runs in the next call, whatever its due
 * tick (delay 0 from a callback). */
static uint64_t remaining_locked(const tw_wheel *w, tw_id id)
{
    uint32_t index;
    const struct node *n = node_of(w, id, &index);
    if (n && n->state == NODE_REARMING)
        return ticks_until(w, rearm_tick(w));
    if (!n || n->state != NODE_LINKED)
        return TW_NEVER;
    return n->list & DUE_FLAG ? 0 : ticks_until(w, due_tick(w, n));
}
