/* ==== slots and bitmaps =================================================
 * Each slot is a queue of node indices in 64-byte blocks. Placing a node
 * appends its index and remembers the entry's position in the node; taking
 * it out (cancel, a reschedule that moves it now) only changes the node,
 * leaving a stale entry behind, and a reschedule to later of a timer in a
 * level slot leaves even the entry live (see staging). So a cancel or
 * reschedule touches one cache line of its own, an add touches its node and a
 * queue tail that is warm, and walking a slot (staging, dispatch) reads
 * indices in line-sized runs, fetching their nodes in parallel instead of
 * chasing one pointer per node. An entry is live exactly when its node is
 * placed and names that entry's position.
 *
 * Stale entries cost 4 bytes each and are bounded: a queue whose live count
 * drops to 0 gives all its blocks back at once, and a queue whose stale
 * entries outnumber twice its live ones (plus a block's worth) is compacted
 * in place, a few entries per later unlink, which the stale entries pay for
 * once each (the slot being staged is rotated instead: see staging).
 *
 * Blocks never fail to come when a node moves (staging, rotation, periodic
 * re-arm): entries never outnumber what the blocks support (entries_supported),
 * with one kept for a re-arm. An add grows the block pool first, or fails;
 * a reschedule that moves its timer now grows it when it can and else
 * compacts the queue it leaves (move_now). A slot's occupancy bit is set
 * exactly when it holds a live entry. */

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
        struct block *chunk = add_chunk(w, &w->block_chunks, 4, MAX_BLOCK_CHUNKS,
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
static HOT_INLINE int reserve_entries(tw_wheel *w, uint32_t more)
{
    uint64_t entries = (uint64_t)w->entries + more + 1;
    return entries <= w->entries_supported ? 0 : grow_blocks(w, entries);
}

static uint32_t block_take(tw_wheel *w)
{
    uint32_t block = w->free_block; /* never NIL: see reserve_entries */
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

/* The one step of every walk that reads a queue in place (the least-tick
 * scan, compaction, the checker): a position one past a block's last entry
 * (offset 15, BLOCK_ENTRIES, which no entry has) is the start of the next
 * block. Walks that consume a queue from its head (dispatch, staging) move
 * it with pass_head instead, giving blocks back as they go. */
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
 * reads them. Inlined by force: GCC deems a void function that only
 * prefetches pure and deletes its calls. */
#if defined(__GNUC__)
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

/* A queue's group as tw_stats reports it: 0 near, 1..4 level 0..3, 5 due. */
static int group_of(unsigned list)
{
    if (list < LIST_LEVEL0)
        return 0;
    if (list < LIST_SLOTS)
        return 1 + (int)((list - LIST_LEVEL0) / LEVEL_SLOTS);
    return 5;
}

/* Whether queue `list` is a level slot (those keep a least tick). */
static int is_level_slot(unsigned list)
{
    return list - LIST_LEVEL0 < LEVEL_SLOT_COUNT; /* unsigned: below wraps */
}

/* The queue a node is placed in, from its `list` field. */
static unsigned list_of(const struct node *n)
{
    if (n->list & DUE_FLAG)
        return LIST_DUE_A + ((n->list >> DUE_WHICH_SHIFT) & 1);
    return n->list;
}

/* The full 64-bit due tick of a placed node. A slot holds timers due less
 * than 2^32 ticks ahead; a due queue keeps 14 more bits, so its timers are
 * exact up to 2^46 ticks back (beyond that, a periodic timer's missed
 * firings are coalesced). */
static uint64_t due_tick(const tw_wheel *w, const struct node *n)
{
    /* a due queue holds ticks up to now, or while driving up to the call's
     * target (delay 0 on a clock-driven wheel, see due_of_call) */
    uint64_t due, latest, span = UINT64_C(1) << (32 + DUE_EPOCH_BITS);
    if (!(n->list & DUE_FLAG))
        return w->now + (uint32_t)(n->expire - (uint32_t)w->now);
    latest = w->drive ? w->drive->target : w->now;
    due = (latest & ~(span - 1)) |
          ((uint64_t)(n->list & DUE_EPOCH_MASK) << 32) | n->expire;
    return due > latest ? due - span : due;
}

static int entry_live(const tw_wheel *w, uint32_t index, uint32_t position)
{
    const struct node *n = node_at(w, index);
    return n->state == NODE_LINKED && n->position == position;
}

/* Appends a node index; returns the entry's position. */
static HOT_INLINE uint32_t queue_push(tw_wheel *w, unsigned list, uint32_t index)
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

/* Whether a queue's stale entries have come to outnumber twice its live
 * ones (plus a block's worth): then they are taken out, COMPACT_STEP
 * entries read per step (compaction, or rotation in a slot being staged). */
#define COMPACT_STEP 64

static HOT_INLINE int too_stale(const struct queue *q)
{
    return q->entries - q->count > 2 * q->count + BLOCK_ENTRIES;
}

/* Empties a queue that has no live entry left, giving its blocks back. */
static void queue_drop(tw_wheel *w, unsigned list)
{
    struct queue *q = &w->queues[list];
    if (q->entries)
        blocks_give(w, q->head >> POSITION_BITS, (q->tail - 1) >> POSITION_BITS);
    w->entries -= q->entries;
    q->entries = q->count = 0;
    q->head = q->tail = q->compact_read = NO_POSITION;
    if (list < LIST_SLOTS) {
        w->occupied[list >> 6] &= ~(UINT64_C(1) << (list & 63));
        if (!w->occupied[list >> 6])
            w->occupied_words &= ~(1u << (list >> 6));
    }
    if (list < NEAR_SLOTS) {
        w->near_stamp[list] = 0;
        w->unsorted[list >> 6] &= ~(UINT64_C(1) << (list & 63));
    }
}

/* Ends a compaction under way on a queue being consumed from its head
 * (see "compaction and unlink"): what it left is stale entries. */
static void compact_abandon(struct queue *q)
{
    q->compact_read = NO_POSITION;
}

/* The least due tick of each level slot is kept as timers are filed, so
 * tw_next_expiry answers without reading the slot. A timer leaving a slot
 * cannot lower it; when the one holding it leaves, the value stays as a
 * lower bound (marked inexact) until the slot is rescanned or refilled. All
 * ticks in a slot lie ahead of the wheel's time, so they compare as
 * distances from it. */
static HOT_INLINE void note_least(tw_wheel *w, unsigned slot, uint32_t expire)
{
    uint32_t time = (uint32_t)w->now;
    /* below even an inexact bound, nothing else in the slot lies lower */
    if (w->queues[LIST_LEVEL0 + slot].count == 0 ||
        (uint32_t)(expire - time) < (uint32_t)(w->least[slot] - time)) {
        w->least[slot] = expire;
        w->least_inexact[slot >> 6] &= ~(UINT64_C(1) << (slot & 63));
    }
}

static HOT_INLINE void forget_least(tw_wheel *w, unsigned slot, uint32_t expire)
{
    if (expire == w->least[slot])
        w->least_inexact[slot >> 6] |= UINT64_C(1) << (slot & 63);
}

/* A near slot's entries are dispatched in stamp order. Appends keep it
 * unless a node moved in place, or rotated (see staging), arrives behind a
 * newer one: the slot is then marked, and sorted before it is dispatched. */
static HOT_INLINE void note_order(tw_wheel *w, unsigned list, uint64_t stamp)
{
    if (stamp > w->near_stamp[list])
        w->near_stamp[list] = stamp;
    else
        w->unsorted[list >> 6] |= UINT64_C(1) << (list & 63);
}

/* Places a node at the tail of a queue. */
static HOT_INLINE void link_tail(tw_wheel *w, unsigned list, uint32_t index,
                                 struct node *n)
{
    n->position = queue_push(w, list, index);
    n->list = (uint16_t)list;
    n->state = NODE_LINKED;
    if (is_level_slot(list))
        note_least(w, list - LIST_LEVEL0, n->expire);
    else if (list < NEAR_SLOTS)
        note_order(w, list, n->stamp);
    if (w->queues[list].count++ == 0 && list < LIST_SLOTS) {
        w->occupied[list >> 6] |= UINT64_C(1) << (list & 63);
        w->occupied_words |= 1u << (list >> 6);
    }
}

/* The start of a walk from a queue's head, which prefetches on entering a
 * block (`calls`: a dispatch, or a staging into near). */
static void prefetch_queue(const tw_wheel *w, unsigned list, int calls)
{
    if (w->queues[list].entries)
        prefetch_ahead(w, w->queues[list].head, 1, calls);
}

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

/* Level l's slots each span 2^level_shift(l) ticks; its ring of
 * level_ring(l) slots starts at list level_list(l). */
static unsigned level_shift(unsigned level)
{
    return NEAR_BITS + LEVEL_BITS * level;
}

static unsigned level_list(unsigned level)
{
    return LIST_LEVEL0 + level * LEVEL_SLOTS;
}

static unsigned level_ring(unsigned level)
{
    return level == LEVELS - 1 ? LEVEL_SIZE : LEVEL_SLOTS;
}


/* Takes the first live entry off a queue's head, skipping stale ones, and
 * detaches its node; NIL when the queue is empty. *due_out gets the node's
 * due tick. */
static HOT_INLINE uint32_t pop_live(tw_wheel *w, unsigned list, uint64_t *due_out)
{
    struct queue *q = &w->queues[list];
    compact_abandon(q);
    while (q->entries) {
        uint32_t index, position = take_head(w, q, &index, 1);
        struct node *n = node_at(w, index);
        if (n->state != NODE_LINKED || n->position != position)
            continue;
        *due_out = due_tick(w, n);
        n->list = LIST_NONE;
        n->state = NODE_DETACHED;
        n->position = NO_POSITION;
        if (--q->count == 0)
            queue_drop(w, list); /* only stale entries are left */
        return index;
    }
    return NIL;
}

/* The slot an add or reschedule files a timer due at `expire` in when the
 * wheel's time is `time` (expire != time): near when they differ only in
 * the low 8 bits, else the level holding their highest differing bit, at
 * expire's bits of that level. This is skynet's add_node without the mask
 * loop; with rings twice the window, it always lands in a ring's current
 * half (level 3's 32-bit index has only 6 bits). */
static unsigned slot_for(uint32_t expire, uint32_t time)
{
    uint32_t differ = expire ^ time;
    unsigned level;
    if (differ <= NEAR_MASK)
        return expire & NEAR_RING_MASK;
    level = (unsigned)(highest_bit(differ) - NEAR_BITS) / LEVEL_BITS;
    return level_list(level) + ((expire >> level_shift(level)) & LEVEL_RING_MASK);
}

/* How many slots after `from` the first occupied slot of the ring of
 * `size` slots (64, 128 or 512) starting at list `base` lies, 1 .. size - 1;
 * 0 when there is none. `from` itself, the slot of time, is not looked at.
 * The words are visited once round the ring from the one holding `from`,
 * which is visited again for its bits below `from`; an empty ring costs one
 * test of the summary. */
static HOT_INLINE unsigned ring_next(const tw_wheel *w, unsigned base, unsigned size,
                                     unsigned from)
{
    const uint64_t *words = &w->occupied[base >> 6];
    unsigned count = size >> 6, first = from >> 6, i;
    uint64_t bits;
    if (!((w->occupied_words >> (base >> 6)) & ((1u << count) - 1)))
        return 0;
    bits = words[first] & ((~UINT64_C(0) << (from & 63)) << 1);
    if (bits) /* most often: the slot sought shares a word with `from` */
        return (unsigned)lowest_bit(bits) - (from & 63);
    for (i = 1; i <= count; i++) {
        unsigned word = (first + i) & (count - 1);
        bits = words[word];
        if (i == count)
            bits &= (UINT64_C(1) << (from & 63)) - 1;
        if (bits)
            return ((word << 6) + (unsigned)lowest_bit(bits) - from) & (size - 1);
    }
    return 0;
}

/* Ticks from now to the first occupied near slot after now's, or TW_NEVER:
 * exact, as each near slot holds one tick. */
static uint64_t near_next(const tw_wheel *w)
{
    unsigned offset = ring_next(w, 0, NEAR_SLOTS, (unsigned)w->now & NEAR_RING_MASK);
    return offset ? offset : TW_NEVER;
}

/* Whether any slot of `level` holds a timer (its ring fills two words of
 * the bitmap; level 3's second word stays empty). */
static HOT_INLINE int level_occupied(const tw_wheel *w, unsigned level)
{
    return (w->occupied_words >> (level_list(level) >> 6)) & 3u;
}

/* Level `level`'s first occupied slot after the one time is in: its list,
 * with the tick its span starts at in *start_out; 0 when the level is
 * empty. Slots of one level hold disjoint spans in ring order, so this
 * one holds the level's earliest timer. */
static HOT_INLINE unsigned level_first(const tw_wheel *w, unsigned level,
                                       uint64_t *start_out)
{
    unsigned shift = level_shift(level), size = level_ring(level);
    uint64_t current = w->now >> shift;
    unsigned offset = ring_next(w, level_list(level), size, (unsigned)current & (size - 1));
    if (!offset)
        return 0;
    *start_out = (current + offset) << shift;
    return level_list(level) + ((unsigned)(current + offset) & (size - 1));
}

/* The tick level slot `list` spans from: its first occurrence from the
 * slot time is in on (which it may be). */
static uint64_t slot_start(const tw_wheel *w, unsigned level, unsigned list)
{
    unsigned shift = level_shift(level), size = level_ring(level);
    uint64_t current = w->now >> shift;
    return (current + ((list - level_list(level) - (unsigned)current) & (size - 1))) << shift;
}

/* The occupied slot of `level` after slot `list` (whose span starts at
 * *start), up to the slot time is in: its list, with *start moved to its
 * span's start; 0 when there is none. */
static unsigned level_after(const tw_wheel *w, unsigned level, unsigned list,
                            uint64_t *start)
{
    unsigned shift = level_shift(level), size = level_ring(level);
    unsigned from = list - level_list(level), current = (unsigned)(w->now >> shift);
    unsigned offset = ring_next(w, level_list(level), size, from);
    if (!offset || ((from - current) & (size - 1)) + offset >= size)
        return 0; /* none, or only past the slot time is in */
    *start += (uint64_t)offset << shift;
    return level_list(level) + ((from + offset) & (size - 1));
}
