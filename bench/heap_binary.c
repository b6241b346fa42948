/*
 * Binary min-heap with per-timer index (libevent min_heap.h, written from its
 * textbook description). Hole-based sift up/down, erase by moving the last
 * entry into the hole and sifting it whichever way it must go, adjust in
 * place for reschedule. Timer records come from a chunked pool (no malloc per
 * timer); the heap array doubles when full and never shrinks, like libevent's.
 */
#include "heap_binary.h"

#include "bench_alloc.h"
#include "bench_pool.h"

struct hb_timer {
    hb_callback *cb; /* doubles as the free-list link while pooled */
    void *arg;
    uint32_t idx;    /* position in the heap array */
};

struct hb_entry {
    uint64_t at;
    struct hb_timer *t;
};

struct hb_heap {
    struct hb_entry *p;
    uint32_t n, cap;
    uint64_t now;
    int64_t bytes;
    struct bench_pool pool;
};

hb_heap *hb_create(void)
{
    int64_t bytes = 0;
    hb_heap *h = (hb_heap *)ca_calloc(&bytes, sizeof *h);
    if (!h)
        return NULL;
    h->bytes = bytes;
    bench_pool_init(&h->pool, sizeof(struct hb_timer), &h->bytes);
    return h;
}

void hb_destroy(hb_heap *h)
{
    if (!h)
        return;
    bench_pool_destroy(&h->pool);
    ca_free(&h->bytes, h->p);
    int64_t bytes = h->bytes;
    ca_free(&bytes, h);
}

static void shift_up(struct hb_entry *p, uint32_t hole, struct hb_entry e)
{
    while (hole) {
        uint32_t parent = (hole - 1) / 2;
        if (p[parent].at <= e.at)
            break;
        p[hole] = p[parent];
        p[hole].t->idx = hole;
        hole = parent;
    }
    p[hole] = e;
    e.t->idx = hole;
}

static void shift_down(struct hb_entry *p, uint32_t n, uint32_t hole,
                       struct hb_entry e)
{
    uint32_t child = 2 * hole + 2; /* right child */
    while (child <= n) {
        if (child == n || p[child].at > p[child - 1].at)
            child--;
        if (e.at <= p[child].at)
            break;
        p[hole] = p[child];
        p[hole].t->idx = hole;
        hole = child;
        child = 2 * hole + 2;
    }
    p[hole] = e;
    e.t->idx = hole;
}

hb_timer *hb_add(hb_heap *h, uint64_t delay, hb_callback *cb, void *arg)
{
    if (h->n == h->cap) {
        uint32_t cap = h->cap ? 2 * h->cap : 64;
        struct hb_entry *p = (struct hb_entry *)ca_realloc(
            &h->bytes, h->p, (size_t)cap * sizeof *p);
        if (!p)
            return NULL;
        h->p = p;
        h->cap = cap;
    }
    struct hb_timer *t = (struct hb_timer *)bench_pool_get(&h->pool);
    if (!t)
        return NULL;
    t->cb = cb;
    t->arg = arg;
    struct hb_entry e = { h->now + delay, t };
    shift_up(h->p, h->n++, e);
    return t;
}

/* Puts e at index idx (whose old entry is gone) and restores the heap. */
static void adjust(hb_heap *h, uint32_t idx, struct hb_entry e)
{
    if (idx > 0 && h->p[(idx - 1) / 2].at > e.at)
        shift_up(h->p, idx, e);
    else
        shift_down(h->p, h->n, idx, e);
}

int hb_cancel(hb_heap *h, hb_timer *t)
{
    uint32_t idx = t->idx;
    struct hb_entry last = h->p[--h->n];
    if (idx < h->n)
        adjust(h, idx, last);
    bench_pool_put(&h->pool, t);
    return 1;
}

int hb_reschedule(hb_heap *h, hb_timer *t, uint64_t delay)
{
    struct hb_entry e = { h->now + delay, t };
    adjust(h, t->idx, e);
    return 1;
}

uint64_t hb_advance(hb_heap *h, uint64_t ticks)
{
    uint64_t fired = 0;
    h->now += ticks;
    while (h->n && h->p[0].at <= h->now) {
        struct hb_timer *t = h->p[0].t;
        struct hb_entry last = h->p[--h->n];
        if (h->n)
            shift_down(h->p, h->n, 0, last);
        hb_callback *cb = t->cb;
        void *arg = t->arg;
        bench_pool_put(&h->pool, t);
        cb(arg);
        fired++;
    }
    return fired;
}

uint64_t hb_next_expiry(const hb_heap *h)
{
    if (!h->n)
        return UINT64_MAX;
    return h->p[0].at <= h->now ? 0 : h->p[0].at - h->now;
}

int64_t hb_bytes(const hb_heap *h) { return h->bytes; }
uint64_t hb_count(const hb_heap *h) { return h->n; }
