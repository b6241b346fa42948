/* (d) A vector of node indices per slot, with swap-remove on cancel.
 *
 * A slot is a growable array of 4-byte node indices; a node remembers its
 * slot and its place in the array. An add appends (the array doubles when
 * full). A cancel moves the slot's last index into the cancelled one's
 * place and writes that node's new place: O(1), no stale entry, but it
 * writes a second node, elsewhere in the pool, and it breaks the order of
 * adds. A walk reads the indices in order and asks for the node 16 entries
 * (one cache line of indices) ahead, as the queue walk asks for the next
 * block's nodes.
 *
 * Left out: a slot cannot be consumed from its head a share at a time (as
 * twheel's staging does) without moving the rest or keeping a start
 * offset, and an array's capacity, kept after a walk, stays at the
 * slot's largest size. */
#define DESIGN "vector"
#include "common.h"

#define AHEAD 16

struct node {
    uint32_t due, id;
    uint32_t position; /* its place in its slot's array */
    uint32_t link;     /* on the free list: the next free node */
    uint16_t slot;
    uint8_t state, spare8;
    uint32_t spare32;
    uint64_t stamp; /* the rest of twheel's node (interval, generation, order) */
};

struct vector {
    uint32_t *index;
    uint32_t count, capacity;
};

struct wheel {
    struct vector v[SLOTS];
};

static struct wheel *wheel_new(void)
{
    struct wheel *w = calloc(1, sizeof *w);
    if (!w) {
        perror("calloc");
        exit(2);
    }
    return w;
}

static void wheel_free(struct wheel *w)
{
    unsigned s;
    for (s = 0; s < SLOTS; s++)
        free(w->v[s].index);
    free(w);
}

static void push(struct wheel *w, uint32_t index, unsigned slot)
{
    struct vector *v = &w->v[slot];
    struct node *n = node_at(index);
    if (v->count == v->capacity) {
        uint32_t capacity = v->capacity ? 2 * v->capacity : 16;
        uint32_t *grown = realloc(v->index, capacity * sizeof *grown);
        if (!grown) {
            perror("realloc");
            exit(2);
        }
        v->index = grown;
        v->capacity = capacity;
    }
    n->slot = (uint16_t)slot;
    n->position = v->count;
    v->index[v->count++] = index;
}

static void swap_remove(struct wheel *w, struct node *n)
{
    struct vector *v = &w->v[n->slot];
    uint32_t last = v->index[--v->count];
    v->index[n->position] = last;
    node_at(last)->position = n->position;
}

static void wheel_add(struct wheel *w, uint32_t index)
{
    push(w, index, slot_of(node_at(index)->due));
}

static void wheel_cancel(struct wheel *w, uint32_t index)
{
    swap_remove(w, node_at(index));
}

static void wheel_move(struct wheel *w, uint32_t index, uint32_t due)
{
    struct node *n = node_at(index);
    swap_remove(w, n);
    n->due = due;
    push(w, index, slot_of(due));
}

static void wheel_expire(struct wheel *w, struct tally *t)
{
    unsigned s;
    uint32_t i;
    for (s = 0; s < SLOTS; s++) {
        struct vector *v = &w->v[s];
        for (i = 0; i < v->count && i < AHEAD; i++)
            prefetch(node_at(v->index[i]));
        for (i = 0; i < v->count; i++) {
            uint32_t index = v->index[i];
            if (i + AHEAD < v->count)
                prefetch(node_at(v->index[i + AHEAD]));
            fire(node_at(index), index, s, t);
        }
        v->count = 0;
    }
}

#include "harness.h"
