/* ==== staging: level slots moved down ahead of time =======================
 * Guarantees: no tick re-files a whole slot; a level slot is moved one
 * level down a share per tick, and is empty by its deadline. Owns
 * w->staged_tick (where the shares stand) and w->cascaded. It also takes a
 * node out of its slot (take_out, unlink_node: cancel and reschedule use
 * them) and chooses how a slot then loses its stale entries (settle_slot):
 * both here because the choice asks which slot is being staged.
 *
 * Skynet re-files a whole level slot when time enters its span (a cascade):
 * with a million timers that is hundreds of thousands of moves in one tick.
 * Here each level slot is moved one level down ahead of time instead, a
 * share per tick, while the slot before it is current: into the other half
 * of the ring below (near for level 0), which holds the next window and so
 * mixes with nothing current. The share is what is left divided by the
 * ticks left, so moving a slot costs about its size over its span per tick,
 * and a jump over many ticks does their shares at once.
 *
 * Deadlines: level 0 must be done as its span starts (near dispatches it);
 * level l >= 1 one level-(l-1) slot span earlier, when the level below
 * starts staging the first slot it fed. next_event stops the driver at each
 * deadline, so a jump keeps each slot's deadline as ticking one by one
 * would (a slot left past its deadline is still emptied as its span starts,
 * before anything in it is due). The shares are rounded up at each stop,
 * so a jump moves different amounts at different moments than single
 * ticks: timers fire on the same ticks either way; the placement on the
 * way, and the counts tw_get_stats reports of it, differ.
 * A timer filed after its slot's deadline (adds go by skynet's rule) waits
 * for the next tick, and is moved then: that work is bounded by the adds
 * since.
 *
 * Moved later: a timer rescheduled later while it waits in a level slot
 * keeps its entry there (moves_in_place). The staging that reaches it
 * goes by its tick: still inside the slot's span, it moves down as any
 * other; past it, it is filed where an add would file it now. That is one
 * move, inside the slot's share, however often it was pushed back
 * meanwhile: an idle timeout pushed on every packet costs a write to its
 * node.
 *
 * Order: a slot is read from its head and appended to the tails below, and
 * adds and reschedules go to the highest level that can hold their tick,
 * so for any one tick the entries in a higher slot are newer than those
 * already moved below. Only a timer moved later breaks that, and its stamp
 * puts it back in place (see "order"). Outside stage(), the slot time
 * itself is in is empty at every level.
 *
 * Stale entries: a slot being staged loses live timers from its head, so
 * compaction's bound on its stale entries (see src/queue.c)
 * would not hold there: live timers at the head moved down, the stale
 * entries behind them kept, a slot left with 32 timers could hold
 * hundreds of entries, too many for tw_next_expiry to re-read. And it
 * cannot be compacted in place, since the staging reads its head. Instead
 * it is rotated while too_stale: entries are taken off its head, the stale
 * ones dropped and the live ones put back at its tail, in the same slot.
 * Its live count holds while its stale entries go, as under compaction:
 * COMPACT_STEP entries per unlink from it, and after each share
 * ROTATE_PER_MOVE per timer the share moved down, plus COMPACT_STEP. The
 * rotated timers reach the slots below later than their neighbours, and
 * their stamps keep their places (see "order"). */

/* Where the staging moves the timers of a level slot: the slot's span, and
 * the slots below, picked by bits of the tick. */
struct mover {
    uint32_t start, span;
    unsigned below, shift, mask;
};

/* Moves a live timer of level slot `list` to the tail of its slot below
 * (`context`: a struct mover). A node rescheduled past the span while it
 * waited here is filed where an add would file it. Inlined by force so the
 * constants of a move into near drop the level upkeep. */
static HOT_INLINE void move_down(tw_wheel *w, unsigned list, uint32_t index,
                                 const void *context)
{
    const struct mover *m = context;
    struct node *n = node_at(w, index);
    forget_least(w, list - LIST_LEVEL0, n->expire);
    if ((uint32_t)(n->expire - m->start) < m->span)
        link_tail(w, m->below + ((n->expire >> m->shift) & m->mask), index, n);
    else
        link_tail(w, slot_for(n->expire, (uint32_t)w->now), index, n);
}

/* Moves up to `budget` entries, live or stale, off the head of a level
 * slot, each live one to the tail of its slot one level down. */
static uint64_t stage_entries(tw_wheel *w, unsigned level, unsigned list, uint64_t budget)
{
    struct mover m;
    uint64_t moved;
    m.start = (uint32_t)slot_start(w, level, list);
    m.span = UINT32_C(1) << level_shift(level);
    if (level == 0) { /* into near: the constants leave out level upkeep */
        m.below = 0;
        m.shift = 0;
        m.mask = NEAR_RING_MASK;
        moved = queue_take(w, list, budget, 1, move_down, &m);
    } else {
        m.below = level_list(level - 1);
        m.shift = level_shift(level - 1);
        m.mask = LEVEL_RING_MASK;
        moved = queue_take(w, list, budget, 0, move_down, &m);
    }
    if (queue_count(w, list) == 0)
        slot_drop(w, list); /* what is left is stale */
    w->cascaded += moved;
    return moved;
}

/* The slot of `level` that staging is moving down now: the one after the
 * slot time is in. */
static unsigned staged_slot(const tw_wheel *w, unsigned level)
{
    return level_list(level) +
           (((unsigned)(w->now >> level_shift(level)) + 1) & (level_ring(level) - 1));
}

/* The tick the slot after time's at `level` starts at: no timer in the
 * level is due earlier. */
static uint64_t next_start(const tw_wheel *w, unsigned level)
{
    return ((w->now >> level_shift(level)) + 1) << level_shift(level);
}

/* How long before a level slot's span starts its staging must be done:
 * before the level below begins staging the span's first slot (near has
 * nothing below: level 0 finishes as its span starts). */
static uint64_t stage_lead(unsigned level)
{
    return level ? UINT64_C(1) << level_shift(level - 1) : 0;
}

/* Brings every level's staging up to `now`, top level first so that what
 * a level moves down is there for the level below to move on. */
static void stage(tw_wheel *w)
{
    unsigned level = LEVELS;
    while (level-- > 0) {
        unsigned shift = level_shift(level), size = level_ring(level);
        uint64_t current = w->now >> shift, start = (current + 1) << shift;
        uint64_t deadline = start - stage_lead(level), from, budget;
        unsigned here = level_list(level) + ((unsigned)current & (size - 1));
        unsigned next = staged_slot(w, level);
        if (!level_occupied(w, level))
            continue;
        /* the slot time is in: level 0's on its first tick (its deadline),
         * or timers filed into a slot after its deadline had passed */
        if (queue_entries(w, here))
            stage_entries(w, level, here, UINT64_MAX);
        if (!queue_entries(w, next))
            continue;
        from = start - (UINT64_C(1) << shift);
        if (from < w->staged_tick)
            from = w->staged_tick;
        if (w->now >= deadline)
            budget = UINT64_MAX;
        else /* its share of the entries left for the ticks since `from` */
            budget = (queue_entries(w, next) * (w->now - from) + (deadline - from) - 1) /
                     (deadline - from);
        if (budget) {
            uint64_t moved = stage_entries(w, level, next, budget);
            if (queue_too_stale(w, next)) /* false for a slot the share emptied */
                queue_rotate(w, next, ROTATE_PER_MOVE * moved + COMPACT_STEP);
        }
    }
    w->staged_tick = w->now;
}

/* Ticks from now to the next tick at which the wheel has work: a near slot
 * to dispatch, or a level slot whose staging must be finished by then;
 * TW_NEVER when every slot is empty. Staging may be overdue (a timer filed
 * in a slot past its deadline): that is work for the next tick. */
static uint64_t next_event(const tw_wheel *w)
{
    uint64_t best = near_next(w), start;
    unsigned level;
    if (best == 1)
        return 1; /* no deadline comes sooner */
    for (level = 0; level < LEVELS; level++) {
        /* no deadline of the level comes before the next slot's, and an
         * overdue one counts as the next tick */
        uint64_t soonest = next_start(w, level) - stage_lead(level);
        if (soonest > w->now && soonest - w->now >= best)
            continue;
        if (level_first(w, level, &start)) {
            uint64_t deadline = start - stage_lead(level);
            uint64_t step = deadline > w->now ? deadline - w->now : 1;
            if (step < best)
                best = step;
        }
    }
    return best;
}

/* ---- leaving a slot ---------------------------------------------------- */

/* A queue that has just lost a live entry: emptied, it gives its blocks
 * back; else, once its stale entries have come to outnumber twice its live
 * ones, a step of them goes (COMPACT_STEP entries read). The slot being
 * staged is read from its head a share per tick, which a compaction in
 * place cannot share the head with: it is rotated (see "Stale entries"
 * above). Every other queue is compacted in place, in order: near slots
 * and due queues are dispatched in the order of their entries, and a
 * compaction, once begun, goes on with every later unlink until the queue
 * has no stale entry left, which keeps level slots leaner for the staging
 * than a rotation that stops at the threshold (docs/internals.md has the
 * counts). Kept out of line: cancel and reschedule inline only the test. */
static NOINLINE void settle_slot(tw_wheel *w, unsigned list)
{
    if (queue_count(w, list) == 0)
        slot_drop(w, list);
    else if (w->destroying)
        return; /* the release empties queues in order: nothing may move
                   into one it has passed (a hook cancelling others) */
    else if (is_level_slot(list) &&
             list == staged_slot(w, (list - LIST_LEVEL0) / LEVEL_SLOTS))
        queue_rotate(w, list, COMPACT_STEP);
    else
        queue_compact_some(w, list);
}

/* Takes a node out of its queue `list`; its entry stays behind, stale.
 * Returns 1 when the queue must then be settled (settle_slot): the caller
 * may finish with the node first, so that the call comes last. Inlined:
 * it is most of a cancel's common case (see "Hot paths" in
 * docs/internals.md). */
static HOT_INLINE int take_out(tw_wheel *w, struct node *n, unsigned list)
{
    n->list = LIST_NONE;
    n->state = NODE_DETACHED;
    if (is_level_slot(list))
        forget_least(w, list - LIST_LEVEL0, n->expire);
    return queue_forget(w, list, n);
}

static HOT_INLINE void unlink_node(tw_wheel *w, struct node *n)
{
    unsigned list = list_of(n);
    if (take_out(w, n, list))
        settle_slot(w, list);
}
