/* (a) Block queues of node indices: twheel's slot representation
 * (src/queue.c), cut down to what the comparison needs.
 *
 * A slot is a FIFO queue of 4-byte node indices in a chain of 64-byte
 * blocks (a link and 15 indices, one cache line). A node remembers the
 * position of its entry (block << 4 | offset). A cancel only marks the
 * node: its entry stays, stale, and is skipped when reached. A slot whose
 * stale entries outnumber twice its live ones plus a block is compacted in
 * place; one left with no live entry gives its blocks back at once. A walk
 * reads a block's indices a line at a time and, on entering a block, asks
 * for the nodes of the next one, so that ~15 misses are in flight at once.
 *
 * -DSLIDE_PREFETCH ("queue-slide", not twheel's code): the walk asks for
 * one node per entry, the one 15 entries ahead (same offset, next block).
 *
 * Left out: twheel compacts in place, COMPACT_STEP entries per cancel;
 * this rewrites a whole slot at once (the same entries read). Its blocks
 * come in chunks from a reserve grown ahead, these from one array. */
#ifdef SLIDE_PREFETCH
#define DESIGN "queue-slide"
#else
#define DESIGN "queue"
#endif
#include "common.h"

#define BLOCK_ENTRIES 15
#define POSITION_BITS 4
#define OFFSET_MASK ((1u << POSITION_BITS) - 1)
#define NO_POSITION UINT32_MAX

struct node {
    uint32_t due, id;
    uint32_t position; /* of its live entry, or NO_POSITION */
    uint32_t link;     /* on the free list: the next free node */
    uint16_t slot;
    uint8_t state, spare8;
    uint32_t spare32;
    uint64_t stamp; /* the rest of twheel's node (interval, generation, order) */
};

struct block {
    uint32_t next; /* the next block of its queue or of the free list, or NIL */
    uint32_t index[BLOCK_ENTRIES];
};

struct queue {
    uint32_t head, tail; /* the first entry; one past the last */
    uint32_t count;      /* live entries */
    uint32_t entries;    /* live and stale entries */
};

struct wheel {
    struct queue q[SLOTS];
    struct block *blocks; /* handed out in order, then from the free list */
    uint32_t used, capacity, free_block;
};

#define block_of(w, position) (&(w)->blocks[(position) >> POSITION_BITS])

/* One past a block's last entry (offset 15) is the next block's first. */
static uint32_t step(struct wheel *w, uint32_t position)
{
    if ((position & OFFSET_MASK) != BLOCK_ENTRIES)
        return position;
    return block_of(w, position - 1)->next << POSITION_BITS;
}

static struct wheel *wheel_new(void)
{
    struct wheel *w = checked(calloc(1, sizeof *w));
    unsigned s;
    /* an entry per add and per move (2N at most), two part-filled blocks a slot */
    w->capacity = 2 * pool.nodes / BLOCK_ENTRIES + 2 * SLOTS;
    w->blocks = checked(aligned_alloc(64, w->capacity * sizeof *w->blocks));
    for (s = 0; s < SLOTS; s++)
        w->q[s].head = w->q[s].tail = NO_POSITION;
    w->free_block = NIL;
    return w;
}

static void wheel_free(struct wheel *w)
{
    free(w->blocks);
    free(w);
}

static uint32_t block_take(struct wheel *w)
{
    uint32_t block = w->free_block;
    if (block != NIL) {
        w->free_block = w->blocks[block].next;
    } else { /* a fresh block, its entries all NIL */
        if (w->used == w->capacity)
            checked(NULL); /* more than wheel_new allowed for */
        block = w->used++;
        memset(&w->blocks[block], 0xff, sizeof w->blocks[block]);
    }
    w->blocks[block].next = NIL;
    return block;
}

/* Gives back the chain of blocks from `first` to `last` in O(1). */
static void blocks_give(struct wheel *w, uint32_t first, uint32_t last)
{
    w->blocks[last].next = w->free_block;
    w->free_block = first;
}

/* Files node `index` at the tail of the queue of the slot its due names. */
static void append(struct wheel *w, uint32_t index)
{
    struct node *n = node_at(index);
    struct queue *q = &w->q[n->slot = (uint16_t)slot_of(n->due)];
    uint32_t position = q->tail;
    if (q->entries == 0) {
        position = q->head = block_take(w) << POSITION_BITS;
    } else if ((position & OFFSET_MASK) == BLOCK_ENTRIES) {
        uint32_t block = block_take(w);
        block_of(w, position - 1)->next = block;
        position = block << POSITION_BITS;
    }
    block_of(w, position)->index[position & OFFSET_MASK] = index;
    n->position = position;
    q->tail = position + 1;
    q->entries++;
    q->count++;
}

/* Asks for the nodes that block `block` names, and for the block after it. */
static void prefetch_block(struct wheel *w, uint32_t block)
{
    const struct block *b = &w->blocks[block];
    unsigned i;
    for (i = 0; i < BLOCK_ENTRIES; i++)
        if (b->index[i] < pool.nodes)
            prefetch(node_at(b->index[i]));
    if (b->next != NIL)
        prefetch(&w->blocks[b->next]);
}

/* Rewrites a queue without its stale entries, in order, into fresh
 * blocks (twheel rewrites it in place, a step per cancel). */
static void compact(struct wheel *w, struct queue *q)
{
    uint32_t read = q->head, left = q->entries, first = q->head >> POSITION_BITS;
    uint32_t last = (q->tail - 1) >> POSITION_BITS;
    q->head = q->tail = NO_POSITION;
    q->entries = q->count = 0;
    prefetch_block(w, first);
    for (; left > 0; left--, read++) {
        uint32_t index;
        read = step(w, read);
        if ((read & OFFSET_MASK) == 0 && block_of(w, read)->next != NIL)
            prefetch_block(w, block_of(w, read)->next); /* as a walk does */
        index = block_of(w, read)->index[read & OFFSET_MASK];
        if (node_at(index)->position == read)
            append(w, index); /* live */
    }
    blocks_give(w, first, last);
}

/* Takes node n out of its queue: its entry stays behind, stale. */
static void forget(struct wheel *w, struct node *n)
{
    struct queue *q = &w->q[n->slot];
    n->position = NO_POSITION;
    if (--q->count == 0) { /* nothing live left: every block goes back */
        blocks_give(w, q->head >> POSITION_BITS, (q->tail - 1) >> POSITION_BITS);
        q->head = q->tail = NO_POSITION;
        q->entries = 0;
    } else if (q->entries - q->count > 2 * q->count + BLOCK_ENTRIES) {
        compact(w, q);
    }
}

static void wheel_add(struct wheel *w, uint32_t index)
{
    append(w, index);
}

static void wheel_cancel(struct wheel *w, uint32_t index)
{
    forget(w, node_at(index));
}

static void wheel_move(struct wheel *w, uint32_t index, uint32_t due)
{
    forget(w, node_at(index));
    node_at(index)->due = due;
    append(w, index);
}

static void wheel_expire(struct wheel *w, struct tally *t)
{
    unsigned s;
    for (s = 0; s < SLOTS; s++) {
        struct queue *q = &w->q[s];
        /* the head is a block's start: nothing here takes from a head */
        uint32_t left = q->entries, block = q->head >> POSITION_BITS, offset;
        if (left)
            prefetch_block(w, block);
        for (; left > 0; block = w->blocks[block].next) {
            const struct block *b = &w->blocks[block];
            uint32_t end = left < BLOCK_ENTRIES ? left : BLOCK_ENTRIES;
#ifdef SLIDE_PREFETCH
            const struct block *ahead = b->next != NIL ? &w->blocks[b->next] : b;
            if (ahead->next != NIL)
                prefetch(&w->blocks[ahead->next]);
#else
            if (b->next != NIL)
                prefetch_block(w, b->next);
#endif
            for (left -= end, offset = 0; offset < end; offset++) {
                uint32_t index = b->index[offset];
                struct node *n = node_at(index);
#ifdef SLIDE_PREFETCH
                if (ahead != b && ahead->index[offset] < pool.nodes)
                    prefetch(node_at(ahead->index[offset]));
#endif
                if (n->position != (block << POSITION_BITS | offset))
                    continue; /* stale: cancelled or moved */
                n->position = NO_POSITION;
                fire(n, index, s, t);
            }
        }
        if (q->entries) /* every block goes back */
            blocks_give(w, q->head >> POSITION_BITS, (q->tail - 1) >> POSITION_BITS);
        q->head = q->tail = NO_POSITION;
        q->entries = q->count = 0;
    }
}

#include "harness.h"
