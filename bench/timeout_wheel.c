/*
 * Hierarchical timing wheel in the style of timeout.c (William Ahern),
 * written from its design; see timeout_wheel.h for what it is.
 *
 * Placement: a timer whose remaining time r satisfies 64^L <= r < 64^(L+1)
 * goes on level L (remainders of 2^24 and more all go on level 3). On level 0
 * the slot is the expiry's low 6 bits, so the timer is due the moment time
 * enters that slot. On level L > 0 it is the slot just BEFORE the expiry's
 * level-L digit: the timer is re-filed when time leaves that slot, i.e. at
 * the start of the expiry's digit, from where less than 64^L ticks remain and
 * it fits a lower level (or is due, if the lower digits are all zero).
 *
 * Advancing from `old` to `now` visits, on each level whose digit moved, the
 * slots from old's digit to now's digit inclusive (all 64 if the digit moved
 * 63 or more): that covers every slot entered (what level 0 needs) and every
 * slot left (what the upper levels need). timeout.c derives the same set from
 * the low bits of the elapsed time; we take the digit difference directly,
 * which lets the walk up the levels stop at the first level whose digit did
 * not move (timeout.c sometimes visits one more level than that).
 */
#include "timeout_wheel.h"

#include <stddef.h>
#include <stdlib.h>

#define LEVEL_BITS 6
#define LEVELS 4
#define SLOTS (1u << LEVEL_BITS)
#define SLOT_MASK (SLOTS - 1)
/* Remainders at or past this all live on the top level. */
#define SPAN (UINT64_C(1) << (LEVEL_BITS * LEVELS))

struct tc_wheel {
    struct tc_link slot[LEVELS][SLOTS]; /* circular lists, head = sentinel */
    struct tc_link expired;             /* due, callback not yet run */
    uint64_t occupied[LEVELS];          /* bit s set iff slot[L][s] non-empty */
    uint64_t now;
    uint64_t count;
};

/* Circular doubly linked lists with a sentinel head: no NULL tests on the
 * hot paths, and a whole slot moves to another list in O(1). */
static inline void list_init(struct tc_link *h) { h->next = h->prev = h; }

static inline int list_empty(const struct tc_link *h) { return h->next == h; }

static inline void list_push(struct tc_link *h, struct tc_link *e)
{
    e->next = h;
    e->prev = h->prev;
    h->prev->next = e;
    h->prev = e;
}

static inline void list_unlink(struct tc_link *e)
{
    e->prev->next = e->next;
    e->next->prev = e->prev;
}

/* Appends all of src to dst and leaves src empty. */
static inline void list_splice(struct tc_link *dst, struct tc_link *src)
{
    if (list_empty(src))
        return;
    src->next->prev = dst->prev;
    dst->prev->next = src->next;
    src->prev->next = dst;
    dst->prev = src->prev;
    list_init(src);
}

/* Written so that c == 0 shifts by 0, not 64 (which would be undefined);
 * compilers turn both into a single rotate instruction. */
static inline uint64_t rotl64(uint64_t v, unsigned c)
{
    c &= 63;
    return (v << c) | (v >> ((64 - c) & 63));
}

static inline uint64_t rotr64(uint64_t v, unsigned c)
{
    c &= 63;
    return (v >> c) | (v << ((64 - c) & 63));
}

static inline struct tc_timeout *of_link(struct tc_link *e)
{
    return (struct tc_timeout *)(void *)e; /* link is the first member */
}

/* Puts t on the list its expiry calls for, relative to w->now. */
static void file(tc_wheel *w, struct tc_timeout *t)
{
    struct tc_link *list;
    if (t->expires <= w->now) {
        list = &w->expired;
    } else {
        uint64_t rem = t->expires - w->now;
        unsigned level = rem >= SPAN
            ? LEVELS - 1
            : (63u - (unsigned)__builtin_clzll(rem)) / LEVEL_BITS;
        unsigned shift = level * LEVEL_BITS;
        unsigned slot =
            (unsigned)((t->expires >> shift) - (level != 0)) & SLOT_MASK;
        list = &w->slot[level][slot];
        w->occupied[level] |= UINT64_C(1) << slot;
    }
    t->pending = list;
    list_push(list, &t->link);
}

/* Takes a pending t off its list, keeping the occupancy bit truthful. */
static void detach(tc_wheel *w, struct tc_timeout *t)
{
    struct tc_link *list = t->pending;
    list_unlink(&t->link);
    if (list != &w->expired && list_empty(list)) {
        /* Byte offsets stay within the one object *w, so this is defined. */
        size_t idx = (size_t)((char *)list - (char *)w->slot)
                     / sizeof(struct tc_link);
        w->occupied[idx / SLOTS] &= ~(UINT64_C(1) << (idx % SLOTS));
    }
    t->pending = NULL;
}

tc_wheel *tc_create(void)
{
    tc_wheel *w = (tc_wheel *)calloc(1, sizeof *w);
    if (!w)
        return NULL;
    for (unsigned l = 0; l < LEVELS; l++)
        for (unsigned s = 0; s < SLOTS; s++)
            list_init(&w->slot[l][s]);
    list_init(&w->expired);
    return w;
}

void tc_destroy(tc_wheel *w)
{
    free(w);
}

void tc_add(tc_wheel *w, struct tc_timeout *t, uint64_t delay,
            tc_callback *cb, void *arg)
{
    t->cb = cb;
    t->arg = arg;
    /* Saturate rather than wrap, so a huge delay means "far future". */
    t->expires = delay > UINT64_MAX - w->now ? UINT64_MAX : w->now + delay;
    file(w, t);
    w->count++;
}

int tc_cancel(tc_wheel *w, struct tc_timeout *t)
{
    if (!t->pending)
        return 0;
    detach(w, t);
    w->count--;
    return 1;
}

int tc_reschedule(tc_wheel *w, struct tc_timeout *t, uint64_t delay)
{
    if (!t->pending)
        return 0;
    detach(w, t);
    t->expires = delay > UINT64_MAX - w->now ? UINT64_MAX : w->now + delay;
    file(w, t);
    return 1;
}

uint64_t tc_advance(tc_wheel *w, uint64_t ticks)
{
    uint64_t old = w->now, now = old + ticks;
    struct tc_link todo;
    list_init(&todo);

    /* Gather every slot whose time came, from all levels, before re-filing
     * anything: re-filing is relative to the new time and must not land in
     * a slot that is still to be gathered. */
    for (unsigned level = 0; level < LEVELS; level++) {
        unsigned shift = level * LEVEL_BITS;
        uint64_t moved = (now >> shift) - (old >> shift);
        if (!moved)
            break; /* a level's digit moves only if the one below wrapped */
        uint64_t span = moved >= SLOTS - 1
            ? ~UINT64_C(0)
            : rotl64((UINT64_C(2) << moved) - 1,
                     (unsigned)(old >> shift) & SLOT_MASK);
        uint64_t hit = span & w->occupied[level];
        w->occupied[level] &= ~hit;
        while (hit) {
            list_splice(&todo, &w->slot[level][__builtin_ctzll(hit)]);
            hit &= hit - 1;
        }
    }
    w->now = now;

    /* todo is a throwaway list: walk it without unlinking, since file()
     * rewrites both links of each record. */
    for (struct tc_link *e = todo.next, *next; e != &todo; e = next) {
        next = e->next;
        file(w, of_link(e));
    }

    /* Run the due ones. Each record's links are read before its callback,
     * which may free or reuse the record. */
    uint64_t ran = 0;
    struct tc_link due;
    list_init(&due);
    list_splice(&due, &w->expired);
    for (struct tc_link *e = due.next, *next; e != &due; e = next) {
        struct tc_timeout *t = of_link(e);
        next = e->next;
        t->pending = NULL;
        w->count--;
        ran++;
        t->cb(t->arg);
    }
    return ran;
}

/*
 * Lower bound (timeout.c's timeouts_timeout). On level 0 the distance from
 * the current slot to the first occupied one is the exact time to expiry. On
 * level L > 0 a timer in the slot `ahead` slots from the current one is
 * re-filed only when time leaves that slot, ahead+1 level-L periods from the
 * start of the current one; its expiry is no earlier than that. Never 0
 * unless something is due: the current level-0 slot is always empty, and an
 * upper level is at least the rest of its current period away.
 */
uint64_t tc_next_expiry(const tc_wheel *w)
{
    if (!w->count)
        return UINT64_MAX;
    if (!list_empty(&w->expired))
        return 0;
    uint64_t best = UINT64_MAX;
    for (unsigned level = 0; level < LEVELS; level++) {
        uint64_t occ = w->occupied[level];
        if (!occ)
            continue;
        unsigned shift = level * LEVEL_BITS;
        unsigned cur = (unsigned)(w->now >> shift) & SLOT_MASK;
        uint64_t ahead = (uint64_t)__builtin_ctzll(rotr64(occ, cur));
        uint64_t into = w->now & ((UINT64_C(1) << shift) - 1);
        uint64_t d = ((ahead + (level != 0)) << shift) - into;
        if (d < best)
            best = d;
    }
    return best;
}

