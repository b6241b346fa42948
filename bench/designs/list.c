/* (b) Intrusive doubly linked lists threaded through the nodes by index,
 * as Linux's timer wheel (hlist) and William Ahern's timeout.c (TAILQ)
 * keep them; with CHAINS > 1 (chains.c), (c): several chains per slot.
 *
 * A slot is CHAINS chains; a node holds the index of the next and the
 * previous node of its chain (previous NIL: it is the chain's first) and
 * the chain's number. An add pushes at the head of a chain, Linux's
 * hlist_add_head; a slot's adds take its chains in turn. A cancel unlinks
 * in O(1): no stale entry is ever left, but it writes the two neighbours,
 * which lie elsewhere in the pool. A walk follows the chains: with one
 * chain each node's address comes from the node before, so the misses
 * come one after another; with CHAINS chains, the walk takes a node from
 * each chain in turn, so that CHAINS independent misses can be in flight.
 *
 * Order: a chain is LIFO here (hlist); timeout.c appends at a TAILQ's tail
 * instead, which costs the same miss (the old tail rather than the old
 * head). Neither keeps FIFO order across a slot's chains. */
#ifndef CHAINS
#define CHAINS 1
#endif
#ifndef DESIGN
#define DESIGN "list"
#endif
#include "common.h"

struct node {
    uint32_t due, id;
    uint32_t next, prev; /* in its chain, or NIL */
    uint32_t link;       /* on the free list: the next free node */
    uint16_t chain;      /* slot * CHAINS + which */
    uint8_t state, spare8;
    uint64_t stamp; /* the rest of twheel's node (interval, generation, order) */
};

struct wheel {
    uint32_t head[SLOTS * CHAINS]; /* each chain's first node, or NIL */
    unsigned turn[SLOTS];          /* the chain of the slot's next add */
};

static struct wheel *wheel_new(void)
{
    struct wheel *w = calloc(1, sizeof *w);
    unsigned c;
    if (!w) {
        perror("calloc");
        exit(2);
    }
    for (c = 0; c < SLOTS * CHAINS; c++)
        w->head[c] = NIL;
    return w;
}

static void wheel_free(struct wheel *w)
{
    free(w);
}

static void link_node(struct wheel *w, uint32_t index, unsigned slot)
{
    struct node *n = node_at(index);
    unsigned chain = slot * CHAINS;
#if CHAINS > 1
    chain += w->turn[slot]++ % CHAINS;
#endif
    n->chain = (uint16_t)chain;
    n->prev = NIL;
    n->next = w->head[chain];
    if (n->next != NIL)
        node_at(n->next)->prev = index;
    w->head[chain] = index;
}

static void unlink_node(struct wheel *w, struct node *n)
{
    if (n->prev == NIL)
        w->head[n->chain] = n->next;
    else
        node_at(n->prev)->next = n->next;
    if (n->next != NIL)
        node_at(n->next)->prev = n->prev;
}

static void wheel_add(struct wheel *w, uint32_t index)
{
    link_node(w, index, slot_of(node_at(index)->due));
}

static void wheel_cancel(struct wheel *w, uint32_t index)
{
    unlink_node(w, node_at(index));
}

static void wheel_move(struct wheel *w, uint32_t index, uint32_t due)
{
    struct node *n = node_at(index);
    unlink_node(w, n);
    n->due = due;
    link_node(w, index, slot_of(due));
}

static void wheel_expire(struct wheel *w, struct tally *t)
{
    unsigned s, c;
    for (s = 0; s < SLOTS; s++) {
        uint32_t at[CHAINS], *head = &w->head[s * CHAINS];
        int more = 0;
        for (c = 0; c < CHAINS; c++) {
            at[c] = head[c];
            more |= head[c] != NIL;
            head[c] = NIL;
        }
        while (more) { /* a node from each chain in turn */
            more = 0;
            for (c = 0; c < CHAINS; c++) {
                uint32_t index = at[c];
                if (index != NIL) {
                    struct node *n = node_at(index);
                    at[c] = n->next;
                    more |= at[c] != NIL;
                    fire(n, index, s, t);
                }
            }
        }
    }
}

#include "harness.h"
