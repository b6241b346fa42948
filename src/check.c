/* ==== check: the invariant checker ======================================
 * Guarantees: tw_check reads the wheel and changes nothing but w->broken.
 * The slot store checks its own structure (queue_check in src/queue.c);
 * this part checks the rest.
 *
 * tw_check names the first invariant it finds broken
 * (tw_stats.broken_invariant), by checker: the drive, the clock (with the
 * staging's tick), the slots (each queue: its entries, counts, bit,
 * placement, least tick, order marks, compaction, each timer's release
 * hook), the pool and the blocks. Hook frames and cancel waits live on
 * other threads' stacks and are not walked. A value that fails is
 * recorded and the walk goes on; a link that fails (an index out of range)
 * ends that walk, which would otherwise read outside the wheel. */

static void check_drive(const tw_wheel *w, struct verdict *v)
{
    check(v, !w->drive || lock_driver_claimed(&w->lock),
          "a drive in progress holds the driver claim");
    check(v, w->due_list == LIST_DUE_A || w->due_list == LIST_DUE_B,
          "the collecting due queue is one of the two");
    check(v, w->running == NIL || w->running < w->used,
          "the running callback's node has been handed out");
}

static void check_clock(const tw_wheel *w, struct verdict *v)
{
    check(v, clock_mode(w) <= MODE_TICKS_CLOCKED, "the drive mode is known");
    check(v, w->clock.base_tick <= w->now,
          "the clock's reference tick is not ahead of now");
    check(v, w->staged_tick <= w->now, "the staging is not ahead of now");
}

/* Whether slot `list` may hold a timer due at `expire` at time `time`: the
 * slot adds file it in, or the one staging moves it to, one level down in
 * the half of the ring that holds the next window. */
static int may_hold(unsigned list, uint32_t expire, uint32_t time)
{
    /* the ring below `level`: near for level 0 */
    unsigned level, below = 0, below_shift = 0, mask = NEAR_RING_MASK;
    if (list == slot_for(expire, time))
        return 1;
    for (level = 0; level < LEVELS; level++) {
        /* staged from level `level`: its next slot's span holds expire */
        unsigned shift = level_shift(level);
        if ((((expire >> shift) - (time >> shift)) & (UINT32_MAX >> shift)) == 1 &&
            list == below + ((expire >> below_shift) & mask))
            return 1;
        below = level_list(level);
        below_shift = shift;
        mask = LEVEL_RING_MASK;
    }
    return 0;
}

/* Whether a timer due at `expire` may lie in level slot `list` because it
 * was rescheduled past the slot's span while it waited there (see
 * moves_in_place): the slot is staged before that tick comes, and files it
 * anew. Not the slot time is in: a timer waits in a slot only until its
 * span begins. */
static int moved_past(const tw_wheel *w, unsigned list, uint32_t expire)
{
    unsigned level = (list - LIST_LEVEL0) / LEVEL_SLOTS;
    uint64_t start;
    if (!is_level_slot(list))
        return 0;
    start = slot_start(w, level, list);
    return start > w->now && w->now + (uint32_t)(expire - (uint32_t)w->now) >=
                                 start + (UINT64_C(1) << level_shift(level));
}

/* A live entry's due tick against the slot holding it. Due queues hold
 * any tick up to now (or the drive's target). */
static void check_placement(const tw_wheel *w, unsigned list, const struct node *n,
                            struct verdict *v)
{
    uint32_t time = (uint32_t)w->now, expire = n->expire;
    if (list >= LIST_SLOTS)
        return;
    if (list == (time & NEAR_RING_MASK)) {
        check(v, w->drive && expire == time,
              "the near slot of now holds only timers due now, while driving");
        return;
    }
    check(v, expire != time && (may_hold(list, expire, time) ||
                                moved_past(w, list, expire)),
          "a slot holds only timers its span (or the staging into it) allows, "
          "or timers rescheduled past its span while they waited in it");
    check(v, (uint32_t)(expire - time) <= TW_MAX_DELAY,
          "a slot holds only timers at most TW_MAX_DELAY ahead");
}

/* A level slot's cached least tick against `least`, the least distance
 * from now among its live entries. */
static void check_least(const tw_wheel *w, unsigned slot, uint32_t least,
                        struct verdict *v)
{
    uint32_t cached = w->least[slot] - (uint32_t)w->now;
    int inexact = (int)((w->least_inexact[slot >> 6] >> (slot & 63)) & 1);
    check(v, cached <= least && cached != 0,
          "a level slot's least tick is a lower bound on its timers, ahead of now");
    check(v, inexact || cached == least,
          "a level slot's least tick is exact unless marked inexact");
}

/* A placed node of queue `list`; `stamp` is the previous live entry's
 * stamp, `in_order` whether the queue must hold its stamps ascending. */
static void check_timer(const tw_wheel *w, unsigned list, const struct node *n,
                        uint64_t stamp, int in_order, struct verdict *v)
{
    check(v, list_of(n) == list, "a placed node names the queue holding its entry");
    check(v, n->release <= w->release_count,
          "a timer's release hook is one the wheel remembers");
    check_placement(w, list, n, v);
    check(v, n->stamp <= w->stamp && n->stamp > 0,
          "a timer's stamp is one the wheel handed out");
    check(v, list >= NEAR_SLOTS || n->stamp <= w->near_stamp[list],
          "a near slot's highest stamp is at least its timers'");
    check(v, !in_order || n->stamp > stamp,
          "a near slot not marked unsorted holds its timers in stamp order");
}

/* Queue `list`: its structure (queue_check), then, as a slot, its bit and
 * each live timer against it, and its least tick. */
static void check_queue(const tw_wheel *w, unsigned list, struct verdict *v)
{
    uint32_t time = (uint32_t)w->now, least = UINT32_MAX, index; /* distance from time */
    uint64_t stamp = 0; /* the last live entry's */
    int in_order = list < NEAR_SLOTS && !((w->unsorted[list >> 6] >> (list & 63)) & 1);
    struct cursor c;
    if (!queue_check(w, list, v))
        return;
    check(v, list >= LIST_SLOTS ||
                 (int)((w->occupied[list >> 6] >> (list & 63)) & 1) == (queue_count(w, list) != 0),
          "a slot's occupancy bit is set exactly when it holds a live entry");
    c = queue_walk(w, list);
    while (walk_next_live(w, &c, &index)) {
        const struct node *n = node_at(w, index);
        check_timer(w, list, n, stamp, in_order, v);
        stamp = n->stamp;
        if ((uint32_t)(n->expire - time) < least)
            least = n->expire - time;
    }
    if (is_level_slot(list) && queue_count(w, list))
        check_least(w, list - LIST_LEVEL0, least, v);
}

static void check_slots(const tw_wheel *w, struct verdict *v)
{
    unsigned list, word;
    for (word = 0; word < LIST_SLOTS / 64; word++)
        check(v, !w->occupied[word] == !((w->occupied_words >> word) & 1),
              "an occupancy word's summary bit is set exactly when the word has a bit");
    for (list = 0; list < LIST_COUNT; list++)
        check_queue(w, list, v);
}

/* After check_slots: v->linked is the live entries of every queue. */
static void check_pool(const tw_wheel *w, struct verdict *v)
{
    uint64_t placed = 0, detached = 0, free_nodes = 0;
    uint32_t index;
    int running_apart = w->running != NIL && node_at(w, w->running)->state != NODE_LINKED;
    for (index = 0; index < w->used; index++) {
        placed += node_at(w, index)->state == NODE_LINKED;
        detached += node_at(w, index)->state == NODE_DETACHED;
    }
    check(v, placed == v->linked, "every placed node has exactly one live entry");
    check(v, detached == 0, "no node stays detached once the lock is free");
    check(v, v->linked + (running_apart &&
                          node_at(w, w->running)->state == NODE_REARMING) == w->live,
          "the live count is the placed timers and a periodic one re-arming");
    for (index = w->free_head; index != NIL; index = node_at(w, index)->link)
        if (!check(v, index < w->used && ++free_nodes <= w->free_count &&
                          node_at(w, index)->state == NODE_FREE,
                   "the free list holds free nodes, free_count of them"))
            return;
    check(v, free_nodes == w->free_count, "the free list is as long as free_count says");
    check(v, free_nodes + v->linked + running_apart <= w->used,
          "no node is both free and in use");
}

TW_EXPORT int tw_check(tw_wheel *w)
{
    struct verdict v = {NULL, 0, 0, 0};
    if (!w)
        return -EINVAL;
    lock(w);
    check_drive(w, &v);
    check_clock(w, &v);
    check_slots(w, &v);
    check_pool(w, &v);
    queue_check_blocks(w, &v);
    w->broken = v.broken;
    unlock(w);
    return v.broken ? -EFAULT : 0;
}
