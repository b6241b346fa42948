/* ==== queue: the slot store ===============================================
 * Every slot and due queue is a queue of node indices: entries appended at
 * the tail, taken from the head, so timers of one tick keep the order they
 * were filed in. An entry whose node has since left (cancelled, moved,
 * fired) is stale and is skipped when reached; an entry is live exactly
 * when its node is placed (NODE_LINKED) and names that entry's position.
 *
 * Owns, and nothing outside this part touches: struct queue (w->queues),
 * the blocks (w->block_chunks, w->free_block), the counts of queue
 * contents (each queue's live `count` and `entries`, w->entries,
 * w->entries_supported) and each placed node's `position`. Positions,
 * blocks and offsets are this part's own arithmetic; the rest of the wheel
 * uses the functions below: push, forget (an entry went stale), take from
 * the head (one entry, the first live one, or a run of a block), walks in
 * place (a cursor), a rewrite from the head (the sort's write-back), and
 * the two ways stale entries go: compaction in place, in order, and
 * rotation (which of them a queue gets is settle_slot's choice, in
 * src/staging.c). Bound: a queue holds at most twice as many stale entries
 * as live ones plus 15, but for the level slot being staged (rotated, see
 * staging) and while the wheel is being destroyed (nothing is compacted).
 *
 * Representation: a queue is a chain of 64-byte blocks (one cache line: a
 * link and 15 node indices). A position names one entry: block number << 4
 * | offset 0..14; offset 15 (BLOCK_ENTRIES) means one past a block's last
 * entry, where a walk steps to the next block. Walks read runs of indices a
 * block at a time, fetching their nodes in parallel instead of chasing one
 * pointer per node.
 *
 * Stale entries cost 4 bytes each and are bounded: a queue whose live count
 * drops to 0 gives all its blocks back at once, and one whose stale entries
 * outnumber twice its live ones (plus a block's worth) is compacted or
 * rotated a step per later entry made stale (COMPACT_STEP), which the stale
 * entries pay for once each.
 *
 * Blocks never fail to come when a node moves (staging, rotation, periodic
 * re-arm): entries never outnumber what the blocks support
 * (entries_supported), with one kept for a re-arm. An add grows the block
 * pool first (queue_reserve), or fails; a reschedule that moves its timer
 * grows it when it can and else compacts the queue it leaves. */

#define BLOCK_ENTRIES 15
#define POSITION_BITS 4
#define OFFSET_MASK ((1u << POSITION_BITS) - 1)
#define NO_POSITION UINT32_MAX
#define BLOCK_CHUNK (1u << BLOCK_CHUNK_BITS)
#define MAX_BLOCK_CHUNKS ((UINT32_C(1) << (32 - POSITION_BITS - BLOCK_CHUNK_BITS)) - 1)

struct block {
    uint32_t next; /* next block of its queue or of the free list, or NIL */
    uint32_t index[BLOCK_ENTRIES];
};

static struct block *block_at(const tw_wheel *w, uint32_t block)
{
    return (struct block *)w->block_chunks.chunks[block >> BLOCK_CHUNK_BITS].start +
           (block & (BLOCK_CHUNK - 1));
}

static struct block *block_of(const tw_wheel *w, uint32_t position)
{
    return block_at(w, position >> POSITION_BITS);
}

static uint32_t entry_at(const tw_wheel *w, uint32_t position)
{
    return block_of(w, position)->index[position & OFFSET_MASK];
}

/* Blocks that queues holding `entries` entries can need at most: a
 * non-empty queue spans at most entries/15 + 2 blocks (partly read head,
 * partly written tail), and at most `entries` queues are non-empty; two
 * spare blocks cover the rounding. */
static uint64_t blocks_needed(uint64_t entries)
{
    uint64_t busy = entries < LIST_COUNT ? entries : LIST_COUNT;
    return entries / BLOCK_ENTRIES + 2 * busy + 2;
}

static uint64_t block_count(const tw_wheel *w)
{
    return (uint64_t)w->block_chunks.count << BLOCK_CHUNK_BITS;
}

/* The most entries `blocks` blocks are enough for. */
static uint64_t entries_for_blocks(uint64_t blocks)
{
    uint64_t low = 0, high = blocks * BLOCK_ENTRIES + BLOCK_ENTRIES;
    while (low < high) { /* the largest e with blocks_needed(e) <= blocks */
        uint64_t middle = low + (high - low + 1) / 2;
        if (blocks_needed(middle) <= blocks)
            low = middle;
        else
            high = middle - 1;
    }
    return blocks_needed(low) <= blocks ? low : 0;
}

static COLD int grow_blocks(tw_wheel *w, uint64_t entries)
{
    while (block_count(w) < blocks_needed(entries)) {
        uint32_t first = w->block_chunks.count << BLOCK_CHUNK_BITS, i;
        struct block *chunk = add_chunk(w, &w->block_chunks, BLOCK_TABLE_START, MAX_BLOCK_CHUNKS,
                                        BLOCK_CHUNK * sizeof(struct block));
        if (!chunk)
            return ENOMEM;
        /* all 0xff, so that unused entries read NIL */
        memset(chunk, 0xff, BLOCK_CHUNK * sizeof *chunk);
        for (i = BLOCK_CHUNK; i-- > 0;) { /* lowest block handed out first */
            chunk[i].next = w->free_block;
            w->free_block = first + i;
        }
        w->entries_supported = entries_for_blocks(block_count(w));
    }
    return 0;
}

/* Grows the block pool, if needed, so that `more` entries can be added
 * (one more is kept for a periodic timer's re-arm). 0 or ENOMEM. */
static HOT_INLINE int queue_reserve(tw_wheel *w, uint32_t more)
{
    uint64_t entries = (uint64_t)w->entries + more + 1;
    return entries <= w->entries_supported ? 0 : grow_blocks(w, entries);
}

static uint32_t block_take(tw_wheel *w)
{
    uint32_t block = w->free_block; /* never NIL: see queue_reserve */
    w->free_block = block_at(w, block)->next;
    block_at(w, block)->next = NIL;
    return block;
}

/* Gives back the chain of blocks from `first` to `last`, in O(1). */
static void blocks_give(tw_wheel *w, uint32_t first, uint32_t last)
{
    block_at(w, last)->next = w->free_block;
    w->free_block = first;
}

static void block_give(tw_wheel *w, uint32_t block)
{
    blocks_give(w, block, block);
}

/* The one step of every walk that reads or writes a queue in place: a
 * position one past a block's last entry (offset 15, BLOCK_ENTRIES, which
 * no entry has) is the start of the next block. Walks that consume a
 * queue from its head move it with pass_head instead, giving blocks back
 * as they go. */
static uint32_t next_position(const tw_wheel *w, uint32_t position)
{
    if ((position & OFFSET_MASK) != BLOCK_ENTRIES)
        return position;
    return block_of(w, position - 1)->next << POSITION_BITS;
}

/* Walks over a queue (staging, dispatch, compaction) would wait for one
 * cache miss per node; instead, on entering a block they ask for the nodes
 * of the next block and for the block after that, so that many misses are
 * in flight while nodes are handled. A dispatch (`calls`) asks for the
 * nodes' calls too, and so does the staging into near: a call was last
 * touched by its add; asked for as its node moves into near (less than
 * two level-0 spans before it fires), it is in cache when the dispatch
 * reads it instead of costing a miss per fired timer. Compaction never
 * reads them. Inlined by force (HOT_INLINE), so that no call of it can be
 * dropped as a call without effect. */
#if defined(TW_GNU)
static HOT_INLINE void
prefetch_block(const tw_wheel *w, uint32_t block, unsigned from, int calls)
{
    const struct block *b = block_at(w, block);
    unsigned i;
    for (i = from; i < BLOCK_ENTRIES; i++)
        if (b->index[i] < w->used) {
            __builtin_prefetch(node_at(w, b->index[i]), 1);
            if (calls)
                __builtin_prefetch(call_at(w, b->index[i]), 0);
        }
    if (b->next != NIL)
        __builtin_prefetch(block_at(w, b->next));
}

/* At `position`, the start of a walk or of a block. */
static HOT_INLINE void
prefetch_ahead(const tw_wheel *w, uint32_t position, int walk_start, int calls)
{
    uint32_t next = block_of(w, position)->next;
    if (walk_start)
        prefetch_block(w, position >> POSITION_BITS, position & OFFSET_MASK, calls);
    if (next != NIL)
        prefetch_block(w, next, 0, calls);
}
#else
static void prefetch_ahead(const tw_wheel *w, uint32_t position, int walk_start,
                           int calls)
{
    (void)w;
    (void)position;
    (void)walk_start;
    (void)calls;
}
#endif

/* The start of a walk from a queue's head of `budget` entries, which
 * prefetches on entering a block (`calls`: a dispatch, or a staging into
 * near); a walk shorter than a block would spend more on it. */
static void queue_prefetch(const tw_wheel *w, unsigned list, uint64_t budget, int calls)
{
    if (w->queues[list].entries && budget >= BLOCK_ENTRIES)
        prefetch_ahead(w, w->queues[list].head, 1, calls);
}

static int entry_live(const tw_wheel *w, uint32_t index, uint32_t position)
{
    const struct node *n = node_at(w, index);
    return n->state == NODE_LINKED && n->position == position;
}

/* Live entries of a queue: its placed timers. */
static HOT_INLINE uint32_t queue_count(const tw_wheel *w, unsigned list)
{
    return w->queues[list].count;
}

/* Entries of a queue, live and stale. */
static HOT_INLINE uint32_t queue_entries(const tw_wheel *w, unsigned list)
{
    return w->queues[list].entries;
}

static void queue_init(tw_wheel *w)
{
    unsigned list;
    for (list = 0; list < LIST_COUNT; list++)
        w->queues[list].head = w->queues[list].tail =
            w->queues[list].compact_read = NO_POSITION;
    w->free_block = NIL;
}


/* Appends an entry; returns its position. */
static HOT_INLINE uint32_t append(tw_wheel *w, unsigned list, uint32_t index)
{
    struct queue *q = &w->queues[list];
    uint32_t position = q->tail;
    if (q->entries == 0) {
        position = block_take(w) << POSITION_BITS;
        q->head = position;
    } else if ((position & OFFSET_MASK) == BLOCK_ENTRIES) {
        uint32_t block = block_take(w);
        block_of(w, position)->next = block;
        position = block << POSITION_BITS;
    }
    block_of(w, position)->index[position & OFFSET_MASK] = index;
    q->tail = position + 1;
    q->entries++;
    w->entries++;
    return position;
}

/* Files node `n` (`index`) at the tail of queue `list` as a live entry; 1
 * when it is the queue's only live one. */
static HOT_INLINE int queue_push(tw_wheel *w, unsigned list, uint32_t index, struct node *n)
{
    int first = w->queues[list].count++ == 0;
    n->position = append(w, list, index);
    return first;
}

/* Whether a queue's stale entries have come to outnumber twice its live
 * ones (plus a block's worth): then they are taken out, COMPACT_STEP
 * entries read per step (compaction or rotation). */
static HOT_INLINE int too_stale(const struct queue *q)
{
    return q->entries - q->count > 2 * q->count + BLOCK_ENTRIES;
}

static HOT_INLINE int queue_too_stale(const tw_wheel *w, unsigned list)
{
    return too_stale(&w->queues[list]);
}

/* Node `n`'s live entry in queue `list` goes stale: the node leaves (the
 * caller places it elsewhere or ends it). Returns 1 when the queue wants
 * settling now: emptied of live entries, under compaction, or too stale. */
static HOT_INLINE int queue_forget(tw_wheel *w, unsigned list, struct node *n)
{
    struct queue *q = &w->queues[list];
    n->position = NO_POSITION;
    return --q->count == 0 || q->compact_read != NO_POSITION || too_stale(q);
}

/* Ends a compaction under way on a queue being consumed from its head:
 * what it left is stale entries. */
static void compact_abandon(struct queue *q)
{
    q->compact_read = NO_POSITION;
}

/* Empties a queue that has no live entry left, giving its blocks back. */
static void queue_clear(tw_wheel *w, unsigned list)
{
    struct queue *q = &w->queues[list];
    if (q->entries)
        blocks_give(w, q->head >> POSITION_BITS, (q->tail - 1) >> POSITION_BITS);
    w->entries -= q->entries;
    q->entries = q->count = 0;
    q->head = q->tail = NO_POSITION;
    compact_abandon(q);
}

/* ---- taking from the head --------------------------------------------- */

/* Moves a queue's head to offset `end` of its head block `block` (whose
 * link is `next`), the entries before it taken and counted off: the block
 * goes back to the pool once passed, and the next one is prefetched. */
static HOT_INLINE void pass_head(tw_wheel *w, struct queue *q, uint32_t block,
                                 uint32_t next, unsigned end, int calls)
{
    if (q->entries == 0) {
        block_give(w, block);
        q->head = q->tail = NO_POSITION;
    } else if (end == BLOCK_ENTRIES) {
        block_give(w, block);
        q->head = next << POSITION_BITS;
        prefetch_ahead(w, q->head, 0, calls);
    } else {
        q->head = (block << POSITION_BITS) | end;
    }
}

/* Takes the entry at the head of a queue that has one, live or stale, for
 * a dispatch (`calls`: it asks for the calls too, see prefetch_block) or a
 * rotation, and gives its block back once passed: returns the entry's
 * position (compared with its node's to tell whether it was live) and its
 * node in *index_out. */
static HOT_INLINE uint32_t take_head(tw_wheel *w, struct queue *q, uint32_t *index_out,
                                     int calls)
{
    uint32_t position = q->head;
    struct block *b = block_of(w, position);
    *index_out = b->index[position & OFFSET_MASK];
    q->entries--;
    w->entries--;
    pass_head(w, q, position >> POSITION_BITS, b->next, (position & OFFSET_MASK) + 1, calls);
    return position;
}

/* Takes the first live entry off a queue's head, skipping stale ones; its
 * node keeps no position. NIL when the queue had none. The caller, done
 * with the node, counts the entry off with queue_popped. */
static HOT_INLINE uint32_t queue_pop(tw_wheel *w, unsigned list)
{
    struct queue *q = &w->queues[list];
    compact_abandon(q);
    while (q->entries) {
        uint32_t index, position = take_head(w, q, &index, 1);
        if (!entry_live(w, index, position))
            continue;
        node_at(w, index)->position = NO_POSITION;
        return index;
    }
    return NIL;
}

/* Counts off the entry queue_pop took; 1 when the queue has no live entry
 * left (it may hold stale ones: the caller clears it). */
static HOT_INLINE int queue_popped(tw_wheel *w, unsigned list)
{
    return --w->queues[list].count == 0;
}

/* What a taker does with each live entry it takes off a queue: place the
 * node in another queue (see queue_take). */
typedef void queue_move_fn(tw_wheel *w, unsigned list, uint32_t index, const void *context);

/* Takes up to `budget` entries, live or stale, off the head of queue
 * `list`, a run of a block at a time, counting them off before their nodes
 * move (so the reserve of blocks holds: see queue_reserve), and hands each
 * live one to `move` with `context`; a block goes back to the pool once
 * passed. Returns how many moved. Inlined by force, so that a constant
 * `move` is inlined into the walk. */
static HOT_INLINE uint64_t queue_take(tw_wheel *w, unsigned list, uint64_t budget,
                                      int calls, queue_move_fn *move, const void *context)
{
    struct queue *q = &w->queues[list];
    uint64_t moved = 0;
    compact_abandon(q);
    queue_prefetch(w, list, budget, calls);
    while (budget > 0 && q->entries) {
        uint32_t block = q->head >> POSITION_BITS, next;
        const struct block *b = block_at(w, block);
        unsigned offset = q->head & OFFSET_MASK, run = BLOCK_ENTRIES - offset, end;
        if (run > q->entries)
            run = q->entries;
        if (run > budget)
            run = (unsigned)budget;
        end = offset + run;
        budget -= run;
        q->entries -= run;
        w->entries -= run;
        next = b->next;
        for (; offset < end; offset++) {
            uint32_t index = b->index[offset];
            if (!entry_live(w, index, (block << POSITION_BITS) | offset))
                continue;
            q->count--;
            move(w, list, index, context);
            moved++;
        }
        pass_head(w, q, block, next, end, calls);
    }
    return moved;
}

/* ---- walks in place ----------------------------------------------------- */

/* A cursor over a queue's entries, head to tail, that leaves them where
 * they are (the least-tick scan, the sort, the checker). */
struct cursor {
    uint32_t position; /* of the entry read last */
    uint32_t next;     /* of the entry to read next */
    uint32_t left;     /* entries not read yet */
};

static struct cursor queue_walk(const tw_wheel *w, unsigned list)
{
    struct cursor c;
    c.position = NO_POSITION;
    c.next = w->queues[list].head;
    c.left = w->queues[list].entries;
    return c;
}

/* The next live entry's node in *index; 0 at the queue's end. */
static HOT_INLINE int walk_next_live(const tw_wheel *w, struct cursor *c, uint32_t *index)
{
    while (c->left) {
        c->left--;
        c->position = next_position(w, c->next);
        c->next = c->position + 1;
        *index = entry_at(w, c->position);
        if (entry_live(w, *index, c->position))
            return 1;
    }
    return 0;
}

/* A rewrite of a queue from its head (the sort's write-back): entries put
 * in turn over the old ones; what lies past the last is dropped. */
static uint32_t queue_rewrite(const tw_wheel *w, unsigned list)
{
    return w->queues[list].head;
}

static void rewrite_put(tw_wheel *w, uint32_t *write, uint32_t index)
{
    uint32_t position = next_position(w, *write);
    block_of(w, position)->index[position & OFFSET_MASK] = index;
    node_at(w, index)->position = position;
    *write = position + 1;
}

static void compact_finish(tw_wheel *w, struct queue *q);

/* Ends a rewrite that put every live entry: the rest goes. */
static void queue_rewrite_end(tw_wheel *w, unsigned list, uint32_t write)
{
    struct queue *q = &w->queues[list];
    q->compact_write = write;
    q->compact_holes = q->entries - q->count;
    compact_finish(w, q);
}

/* ---- rotation and compaction -------------------------------------------
 * Two ways stale entries leave a queue, a step at a time so that no single
 * call pays for a whole slot (which may hold most of the timers):
 *
 * Rotation takes entries off the head and puts the live ones back at the
 * tail: simple, and it shares the head with a walk that consumes the
 * queue a share at a time (the staging), but it changes the order.
 *
 * Compaction rewrites the queue without its stale entries, in place and
 * in order. While it runs, the queue reads: compacted entries from the
 * head up to `compact_write`, then only stale ones (moved or dead) up to
 * `compact_read`, then entries not yet looked at; every walk stays valid.
 * Anything that consumes the queue from its head (dispatch, staging, a
 * clear) just abandons it: what it left behind is stale entries. */

/* Takes up to `budget` entries off a queue's head and puts its live ones
 * back at its tail, in the same queue: it keeps its live entries and loses
 * the stale ones passed. At most one pass over the queue. */
static void queue_rotate(tw_wheel *w, unsigned list, uint64_t budget)
{
    struct queue *q = &w->queues[list];
    compact_abandon(q);
    if (budget > q->entries) /* one pass: the second would find none */
        budget = q->entries;
    for (; budget > 0; budget--) {
        uint32_t index, position = take_head(w, q, &index, 0);
        if (entry_live(w, index, position))
            node_at(w, index)->position = append(w, list, index);
    }
}

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

/* Moves up to COMPACT_STEP entries of a queue under compaction. The
 * blocks of the two cursors are looked up once per block, not per entry:
 * this is a cancel's and a reschedule's share of the work. */
static void compact_step(tw_wheel *w, struct queue *q)
{
    uint32_t read = q->compact_read, write = q->compact_write, steps;
    const struct block *from = NULL;
    struct block *to = NULL;
    for (steps = 0; steps < COMPACT_STEP && read != q->tail; steps++, read++) {
        uint32_t index;
        if ((read & OFFSET_MASK) == BLOCK_ENTRIES) {
            read = next_position(w, read);
            prefetch_ahead(w, read, 0, 0);
            from = NULL;
        }
        if (!from)
            from = block_of(w, read);
        index = from->index[read & OFFSET_MASK];
        if (!entry_live(w, index, read)) {
            q->compact_holes++;
            continue;
        }
        if ((write & OFFSET_MASK) == BLOCK_ENTRIES) {
            write = next_position(w, write);
            to = NULL;
        }
        if (!to)
            to = block_of(w, write);
        to->index[write & OFFSET_MASK] = index;
        node_at(w, index)->position = write;
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

/* A compaction step, starting one if none is under way. */
static void queue_compact_some(tw_wheel *w, unsigned list)
{
    struct queue *q = &w->queues[list];
    if (q->compact_read == NO_POSITION)
        compact_start(w, q);
    compact_step(w, q);
}

/* Compacts a queue from its head to its tail in one call, dropping every
 * stale entry in it (a compaction under way starts over, so the entries it
 * had passed are read again); a queue already emptied is left alone. For
 * a move that found the block pool short (see move_now_unlock). */
static COLD void queue_compact_whole(tw_wheel *w, unsigned list)
{
    struct queue *q = &w->queues[list];
    if (!q->entries)
        return;
    compact_start(w, q);
    while (q->compact_read != NO_POSITION)
        compact_step(w, q);
}

/* ---- the checker's part ------------------------------------------------- */

/* The phase of a walk over a queue under compaction at `position`: before
 * its write cursor (0), between the cursors where all entries are stale
 * (1), past its read cursor or none under way (2). */
static int compact_phase(const struct queue *q, int phase, uint32_t position)
{
    if (phase == 0 && position == q->compact_write)
        phase = 1;
    if (phase == 1 && position == q->compact_read)
        phase = 2;
    return phase;
}

/* Queue `list`'s own structure: its counts, its chain of blocks, its
 * positions and its compaction cursors; adds its entries, live entries and
 * blocks to the verdict. 0 when a link is broken, so that the wheel's walk
 * over its live entries must not follow it. */
static int queue_check(const tw_wheel *w, unsigned list, struct verdict *v)
{
    const struct queue *q = &w->queues[list];
    uint32_t position = q->head, left, index, live = 0, holes = 0;
    int phase = q->compact_read == NO_POSITION ? 2 : 0, is_live;
    check(v, (q->count == 0) == (q->entries == 0) && q->count <= q->entries,
          "a queue's live entries are among its entries, and it has some exactly when it has live ones");
    check(v, (q->entries == 0) == (q->head == NO_POSITION),
          "a queue holds blocks exactly when it has entries");
    check(v, q->entries || q->compact_read == NO_POSITION,
          "an empty queue is not under compaction");
    v->blocks += q->entries != 0;
    for (left = q->entries; left > 0; left--, position++) {
        phase = compact_phase(q, phase, position);
        if ((position & OFFSET_MASK) == BLOCK_ENTRIES) {
            uint32_t next = block_of(w, position - 1)->next;
            if (!check(v, next < block_count(w) && ++v->blocks <= block_count(w),
                       "a queue's blocks are a chain of blocks that exist"))
                return 0;
            position = next_position(w, position);
            phase = compact_phase(q, phase, position);
        }
        if (!check(v, (position & OFFSET_MASK) < BLOCK_ENTRIES &&
                          (position >> POSITION_BITS) < block_count(w),
                   "a queue's positions lie in blocks that exist") ||
            !check(v, (index = entry_at(w, position)) < w->used,
                   "an entry names a node handed out"))
            return 0;
        is_live = entry_live(w, index, position);
        check(v, phase != 1 || !is_live,
              "compaction leaves only stale entries between its cursors");
        holes += phase == 1;
        live += is_live;
    }
    check(v, live == q->count, "a queue's live count is its live entries");
    check(v, position == q->tail, "a queue's tail follows its last entry");
    check(v, !q->entries || block_of(w, q->tail - 1)->next == NIL,
          "a queue's last block ends its chain");
    check(v, q->compact_read == NO_POSITION ||
                 (compact_phase(q, phase, position) == 2 && holes == q->compact_holes),
          "a compaction's cursors and holes match its queue");
    v->entries += q->entries;
    v->linked += live;
    return 1;
}

/* After every queue_check: the blocks not in a queue are free, and there
 * are enough of them for the reserve. */
static void queue_check_blocks(const tw_wheel *w, struct verdict *v)
{
    uint64_t free_blocks = 0;
    uint32_t block;
    check(v, v->entries == w->entries, "the entry count is the queues' entries");
    for (block = w->free_block; block != NIL; block = block_at(w, block)->next)
        if (!check(v, block < block_count(w) && ++free_blocks <= block_count(w),
                   "the free blocks are a chain of blocks that exist"))
            return;
    check(v, v->blocks + free_blocks == block_count(w), "every block is in one queue or free");
    check(v, !w->entries || block_count(w) >= blocks_needed(w->entries),
          "the blocks cover the reserve that lets nodes move without allocating");
}
