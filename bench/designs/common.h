/* common.h: what the slot-representation prototypes share (see
 * README.md). A design's file includes this first, then defines struct
 * node (32 bytes, with at least the fields `due`, `id`, `link` and
 * `state`), struct wheel and the wheel_* functions declared below, and
 * includes harness.h last, which holds the workloads and main().
 *
 * The model: one level of SLOTS slots of 2^SLOT_SHIFT ticks each, keyed by
 * due tick (due >> SLOT_SHIFT), walked in order. Adds are due in
 * [1, MAX_DUE], so at N = 1M a slot holds about 267 timers. Nodes are
 * 32-byte records in chunks of 1024, as in twheel, and are handed out in a
 * random order, so that the nodes of one slot lie all over the pool. */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#endif
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define SLOT_SHIFT 4     /* a slot spans 16 ticks */
#define SLOTS 4096       /* ticks 0..65535: adds and reschedules fit */
#define MAX_DUE 60000    /* adds are due in [1, MAX_DUE] */
#define NIL UINT32_MAX
#define CHUNK_BITS 10    /* twheel's CHUNK_NODES: 1024 nodes a chunk */
#define CHUNK_NODES (1u << CHUNK_BITS)
#define NODE_FREE 0
#define NODE_LINKED 1

static unsigned slot_of(uint32_t due)
{
    return due >> SLOT_SHIFT;
}

/* Allocation failure ends the program. */
static inline void *checked(void *p)
{
    if (!p) {
        perror("out of memory");
        exit(2);
    }
    return p;
}

/* The node pool: chunks that never move, a free list through `link`. */
struct node;
static struct {
    struct node **chunks;
    uint32_t nodes; /* handed out or free: indices below this exist */
    uint32_t free;  /* head of the free list, or NIL */
} pool;

/* A macro, so that it works on struct node defined after this header. */
#define node_at(i) (pool.chunks[(i) >> CHUNK_BITS] + ((i) & (CHUNK_NODES - 1)))

/* Built with -DNO_PREFETCH, the walks ask for nothing ahead. */
#if defined(__GNUC__) && !defined(NO_PREFETCH)
#define prefetch(p) __builtin_prefetch((p), 1)
#else
#define prefetch(p) ((void)0)
#endif

/* What the walks add up: every design must fire the same timers. */
struct tally {
    uint64_t count, sum, misfiled;
};

/* Fires the live timer of node `index` found in slot `slot`: reads the
 * node, adds to the tally, frees the node (harness.h). */
static inline void fire(struct node *n, uint32_t index, unsigned slot, struct tally *t);
static inline void node_free(uint32_t index);

/* What a design defines. */
struct wheel;
static struct wheel *wheel_new(void);
static void wheel_free(struct wheel *w);
/* Files node `index` (its `due` set) in slot slot_of(due). */
static void wheel_add(struct wheel *w, uint32_t index);
/* Takes node `index` out of its slot; the harness frees the node. */
static void wheel_cancel(struct wheel *w, uint32_t index);
/* Moves node `index` to slot slot_of(due), due being later. */
static void wheel_move(struct wheel *w, uint32_t index, uint32_t due);
/* Walks every slot in order and fires each timer filed there, leaving
 * the wheel empty. */
static void wheel_expire(struct wheel *w, struct tally *t);
