/* ==== compaction and unlink ============================================
 * Compaction rewrites a queue without its stale entries, in place and in
 * order, a few entries per cancel or reschedule on that queue, so that no
 * single call pays for a whole slot (which may hold most of the timers).
 * While it runs, the queue reads: compacted entries from the head up to
 * `compact_write`, then only stale ones (moved or dead) up to
 * `compact_read`, then entries not yet looked at; every walk stays valid.
 * Anything that consumes the queue from its head (dispatch, staging, drop)
 * just abandons a compaction: what it left behind is stale entries.
 * Taking a node out of its queue (cancel, reschedule) is here too: it is
 * what starts and drives a compaction. */

static void compact_finish(tw_wheel *w, struct queue *q)
{
    /* q->count > 0 and all live entries lie before `write`: the blocks
     * after the one it ends in hold stale entries only */
    uint32_t write = q->compact_write, spare = block_of(w, write - 1)->next;
    if (spare != NIL) {
        blocks_give(w, spare, (q->tail - 1) >> POSITION_BITS);
        block_of(w, write - 1)->next = NIL;
    }
    w->entries -= q->compact_holes;
    q->entries -= q->compact_holes;
    q->tail = write;
    compact_abandon(q);
}

/* Moves up to COMPACT_STEP entries of a queue under compaction. */
static void compact_step(tw_wheel *w, struct queue *q)
{
    uint32_t read = q->compact_read, write = q->compact_write, steps;
    const struct block *from = NULL; /* the blocks of read and write, once */
    struct block *to = NULL;         /* looked up */
    for (steps = 0; steps < COMPACT_STEP && read != q->tail; steps++, read++) {
        uint32_t index;
        struct node *n;
        if ((read & OFFSET_MASK) == BLOCK_ENTRIES) {
            read = next_position(w, read);
            prefetch_ahead(w, read, 0, 0);
            from = NULL;
        }
        if (!from)
            from = block_of(w, read);
        index = from->index[read & OFFSET_MASK];
        n = node_at(w, index);
        if (n->state != NODE_LINKED || n->position != read) {
            q->compact_holes++; /* stale */
            continue;
        }
        if ((write & OFFSET_MASK) == BLOCK_ENTRIES) {
            write = next_position(w, write);
            to = NULL;
        }
        if (!to)
            to = block_of(w, write);
        to->index[write & OFFSET_MASK] = index;
        n->position = write;
        write++;
    }
    q->compact_read = read;
    q->compact_write = write;
    if (read == q->tail)
        compact_finish(w, q);
}

static void compact_start(tw_wheel *w, struct queue *q)
{
    q->compact_read = q->compact_write = q->head;
    q->compact_holes = 0;
    prefetch_ahead(w, q->head, 1, 0);
}

/* Compacts a queue from its head to its tail in one call, dropping every
 * stale entry in it (a compaction under way starts over, so the entries it
 * had passed are read again); a queue already emptied is left alone. For
 * a move that found the block pool short (see move_now). */
static COLD void compact_whole(tw_wheel *w, unsigned list)
{
    struct queue *q = &w->queues[list];
    if (!q->entries)
        return;
    compact_start(w, q);
    while (q->compact_read != NO_POSITION)
        compact_step(w, q);
}

static int staging_now(const tw_wheel *w, unsigned list)
{
    return is_level_slot(list) &&
           list == staged_slot(w, (list - LIST_LEVEL0) / LEVEL_SLOTS);
}

/* A queue that has just lost a live entry: compacts it a step when its
 * stale entries have come to outnumber twice its live ones. A slot being
 * staged is read from its head a share per tick, which a compaction in
 * place cannot share the head with; it is rotated a step instead (see
 * "Stale entries" in staging). Kept out of line: cancel and reschedule
 * inline only the test. */
static void compact_some(tw_wheel *w, unsigned list)
{
    struct queue *q = &w->queues[list];
    if (w->destroying)
        return; /* the release empties queues in order: nothing may move
                   into one it has passed (a hook cancelling others) */
    if (staging_now(w, list)) {
        rotate_entries(w, list, COMPACT_STEP);
        return;
    }
    if (q->compact_read == NO_POSITION)
        compact_start(w, q);
    compact_step(w, q);
}

/* A queue that has just lost a live entry: emptied, it gives its blocks
 * back; else it is compacted a step when due (see compact_some). */
static NOINLINE void settle_queue(tw_wheel *w, unsigned list)
{
    if (w->queues[list].count == 0)
        queue_drop(w, list);
    else
        compact_some(w, list);
}

/* Takes a node out of its queue `list`; its entry stays behind, stale.
 * Returns 1 when the queue must then be settled (settle_queue): the caller
 * may finish with the node first, so that the call comes last. Inlined: it
 * is most of a cancel, which is short enough for the CPU to overlap the
 * cache misses of consecutive calls only if it stays small. */
static HOT_INLINE int take_out(tw_wheel *w, struct node *n, unsigned list)
{
    struct queue *q = &w->queues[list];
    n->list = LIST_NONE;
    n->state = NODE_DETACHED;
    n->position = NO_POSITION;
    if (is_level_slot(list))
        forget_least(w, list - LIST_LEVEL0, n->expire);
    return --q->count == 0 || q->compact_read != NO_POSITION || too_stale(q);
}

static HOT_INLINE void unlink_node(tw_wheel *w, struct node *n)
{
    unsigned list = list_of(n);
    if (take_out(w, n, list))
        settle_queue(w, list);
}
