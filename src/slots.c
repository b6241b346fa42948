/* ==== slots: filing, bitmaps, least ticks ===============================
 * The wheel's slots over the queues of src/queue.c: which queue a timer is
 * filed in, the occupancy bitmaps and their scans, each level slot's least
 * tick, and each near slot's order marks. Placing a node appends its index
 * to its slot's queue; taking it out (cancel, a reschedule that moves it
 * now) only changes the node, leaving a stale entry behind, and a
 * reschedule to later of a timer in a level slot leaves even the entry
 * live (see staging). So a cancel or reschedule touches one cache line of
 * its own, an add touches its node and a queue tail that is warm.
 *
 * Owns: w->occupied and w->occupied_words (a slot's bit is set exactly when
 * it holds a live entry), w->least and w->least_inexact, w->near_stamp and
 * w->unsorted. It places nodes (their `list` and `state`), which staging,
 * order, timers (a due queue's number) and the api also write under the
 * lock as they take out, sort or end them. */

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

/* The least due tick of each level slot is kept as timers are filed, so
 * tw_next_expiry answers without reading the slot. A timer leaving a slot
 * cannot lower it; when the one holding it leaves, the value stays as a
 * lower bound (marked inexact) until the slot is rescanned or refilled. All
 * ticks in a slot lie ahead of the wheel's time, so they compare as
 * distances from it. `first`: the timer is the slot's only one. */
static HOT_INLINE void note_least(tw_wheel *w, unsigned slot, uint32_t expire, int first)
{
    uint32_t time = (uint32_t)w->now;
    /* below even an inexact bound, nothing else in the slot lies lower */
    if (first || (uint32_t)(expire - time) < (uint32_t)(w->least[slot] - time)) {
        w->least[slot] = expire;
        w->least_inexact[slot >> 6] &= ~(UINT64_C(1) << (slot & 63));
    }
}

static HOT_INLINE void forget_least(tw_wheel *w, unsigned slot, uint32_t expire)
{
    if (expire == w->least[slot])
        w->least_inexact[slot >> 6] |= UINT64_C(1) << (slot & 63);
}

/* A level slot whose least tick went inexact is read again when it holds
 * at most RESCAN_PENDING pending timers, so small wheels always get exact
 * answers. Compaction (rotation, in the slot being staged) keeps such a
 * slot at about 3 * 32 + 15 entries, stale ones included; RESCAN_ENTRIES
 * only makes that bound explicit. A larger slot answers with the inexact
 * bound, which lies inside the slot: by the time it comes, the slot has
 * been staged into finer slots with exact values. */

/* The least due tick among a slot's live entries, read from them. */
static uint32_t scan_least(const tw_wheel *w, unsigned list)
{
    uint32_t time = (uint32_t)w->now, least = UINT32_MAX, index;
    struct cursor c = queue_walk(w, list);
    while (walk_next_live(w, &c, &index))
        if ((uint32_t)(node_at(w, index)->expire - time) < least)
            least = node_at(w, index)->expire - time;
    return time + least;
}

/* The least due tick in a level slot (low 32 bits): its cached bound, or
 * read from its entries when that went inexact and `exact` asks, or the slot
 * is small. With `exact` the scan is not kept: tw_get_stats must not change
 * what tw_next_expiry answers. */
static HOT_INLINE uint32_t slot_least(tw_wheel *w, unsigned list, int exact)
{
    unsigned slot = list - LIST_LEVEL0;
    uint64_t *inexact = &w->least_inexact[slot >> 6];
    uint64_t bit = UINT64_C(1) << (slot & 63);
    if (!(*inexact & bit))
        return w->least[slot];
    if (exact)
        return scan_least(w, list);
    if (queue_count(w, list) <= RESCAN_PENDING &&
        queue_entries(w, list) <= RESCAN_ENTRIES) {
        *inexact &= ~bit;
        return w->least[slot] = scan_least(w, list);
    }
    return w->least[slot];
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
    int first = queue_push(w, list, index, n);
    n->list = (uint16_t)list;
    n->state = NODE_LINKED;
    if (is_level_slot(list))
        note_least(w, list - LIST_LEVEL0, n->expire, first);
    else if (list < NEAR_SLOTS)
        note_order(w, list, n->stamp);
    if (first && list < LIST_SLOTS) {
        w->occupied[list >> 6] |= UINT64_C(1) << (list & 63);
        w->occupied_words |= 1u << (list >> 6);
    }
}

/* Empties a queue that has no live entry left: its blocks go back, its
 * bit and order marks are cleared. */
static void slot_drop(tw_wheel *w, unsigned list)
{
    queue_clear(w, list);
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
    uint32_t index = queue_pop(w, list);
    struct node *n;
    if (index == NIL)
        return NIL;
    n = node_at(w, index);
    *due_out = due_tick(w, n);
    n->list = LIST_NONE;
    n->state = NODE_DETACHED;
    if (queue_popped(w, list))
        slot_drop(w, list); /* only stale entries are left */
    return index;
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
