/*
 * 4-ary min-heap with per-timer index, written from libev's description
 * (ev.c: DHEAP 4, HEAP0 = DHEAP - 1, ANHE entries caching "at", upheap /
 * downheap / adjustheap, the 4-children fast path). The root lives at index
 * HEAP0 so that each node's four children (16-byte entries) fill exactly one
 * 64-byte line of the aligned array. Records come from a chunked pool.
 */
#include "heap_quad.h"

#include <string.h>

#include "bench_alloc.h"
#include "bench_pool.h"

#define DHEAP 4
#define HEAP0 (DHEAP - 1)
#define HPARENT(k) ((((k) - HEAP0 - 1) / DHEAP) + HEAP0)

struct hq_timer {
    hq_callback *cb; /* doubles as the free-list link while pooled */
    void *arg;
    uint32_t idx;    /* position in the heap array (>= HEAP0) */
};

struct hq_entry {
    uint64_t at;
    struct hq_timer *t;
};

struct hq_heap {
    struct hq_entry *heap; /* heap[HEAP0 .. HEAP0 + n - 1] */
    uint32_t n, cap;       /* cap counts entries including the HEAP0 pad */
    uint64_t now;
    int64_t bytes;
    struct bench_pool pool;
};

hq_heap *hq_create(void)
{
    int64_t bytes = 0;
    hq_heap *h = (hq_heap *)ca_calloc(&bytes, sizeof *h);
    if (!h)
        return NULL;
    h->bytes = bytes;
    bench_pool_init(&h->pool, sizeof(struct hq_timer), &h->bytes);
    return h;
}

void hq_destroy(hq_heap *h)
{
    if (!h)
        return;
    bench_pool_destroy(&h->pool);
    ca_free(&h->bytes, h->heap);
    int64_t bytes = h->bytes;
    ca_free(&bytes, h);
}

static void upheap(struct hq_entry *heap, uint32_t k)
{
    struct hq_entry he = heap[k];
    while (k > HEAP0) {
        uint32_t p = HPARENT(k);
        if (heap[p].at <= he.at)
            break;
        heap[k] = heap[p];
        heap[k].t->idx = k;
        k = p;
    }
    heap[k] = he;
    he.t->idx = k;
}

static void downheap(struct hq_entry *heap, uint32_t n, uint32_t k)
{
    struct hq_entry he = heap[k];
    size_t end = (size_t)n + HEAP0;
    for (;;) {
        size_t first = (size_t)DHEAP * (k - HEAP0) + HEAP0 + 1;
        size_t min;
        uint64_t minat;
        if (first + DHEAP - 1 < end) {
            /* fast path: all four children exist */
            min = first, minat = heap[first].at;
            if (minat > heap[first + 1].at) min = first + 1, minat = heap[min].at;
            if (minat > heap[first + 2].at) min = first + 2, minat = heap[min].at;
            if (minat > heap[first + 3].at) min = first + 3, minat = heap[min].at;
        } else if (first < end) {
            min = first, minat = heap[first].at;
            if (first + 1 < end && minat > heap[first + 1].at) min = first + 1, minat = heap[min].at;
            if (first + 2 < end && minat > heap[first + 2].at) min = first + 2, minat = heap[min].at;
        } else {
            break;
        }
        if (he.at <= minat)
            break;
        heap[k] = heap[min];
        heap[k].t->idx = k;
        k = (uint32_t)min;
    }
    heap[k] = he;
    he.t->idx = k;
}

static void adjustheap(struct hq_entry *heap, uint32_t n, uint32_t k)
{
    if (k > HEAP0 && heap[k].at <= heap[HPARENT(k)].at)
        upheap(heap, k);
    else
        downheap(heap, n, k);
}

static int grow(hq_heap *h)
{
    uint32_t cap = h->cap ? 2 * h->cap : 64;
    /* posix_memalign cannot realloc: copy, as an aligned array must */
    struct hq_entry *p = (struct hq_entry *)ca_aligned(
        &h->bytes, 64, (size_t)cap * sizeof *p);
    if (!p)
        return -1;
    if (h->heap)
        memcpy(p, h->heap, (size_t)(h->n + HEAP0) * sizeof *p);
    ca_free(&h->bytes, h->heap);
    h->heap = p;
    h->cap = cap;
    return 0;
}

hq_timer *hq_add(hq_heap *h, uint64_t delay, hq_callback *cb, void *arg)
{
    if (h->n + HEAP0 >= h->cap && grow(h) != 0)
        return NULL;
    struct hq_timer *t = (struct hq_timer *)bench_pool_get(&h->pool);
    if (!t)
        return NULL;
    t->cb = cb;
    t->arg = arg;
    uint32_t k = h->n++ + HEAP0;
    h->heap[k].at = h->now + delay;
    h->heap[k].t = t;
    upheap(h->heap, k);
    return t;
}

int hq_cancel(hq_heap *h, hq_timer *t)
{
    uint32_t active = t->idx;
    --h->n;
    if (active < h->n + HEAP0) {
        h->heap[active] = h->heap[h->n + HEAP0];
        adjustheap(h->heap, h->n, active);
    }
    bench_pool_put(&h->pool, t);
    return 1;
}

int hq_reschedule(hq_heap *h, hq_timer *t, uint64_t delay)
{
    h->heap[t->idx].at = h->now + delay;
    adjustheap(h->heap, h->n, t->idx);
    return 1;
}

uint64_t hq_advance(hq_heap *h, uint64_t ticks)
{
    uint64_t fired = 0;
    h->now += ticks;
    while (h->n && h->heap[HEAP0].at <= h->now) {
        struct hq_timer *t = h->heap[HEAP0].t;
        --h->n;
        if (h->n) {
            h->heap[HEAP0] = h->heap[h->n + HEAP0];
            downheap(h->heap, h->n, HEAP0);
        }
        hq_callback *cb = t->cb;
        void *arg = t->arg;
        bench_pool_put(&h->pool, t);
        cb(arg);
        fired++;
    }
    return fired;
}

uint64_t hq_next_expiry(const hq_heap *h)
{
    if (!h->n)
        return UINT64_MAX;
    uint64_t at = h->heap[HEAP0].at;
    return at <= h->now ? 0 : at - h->now;
}

int64_t hq_bytes(const hq_heap *h) { return h->bytes; }
uint64_t hq_count(const hq_heap *h) { return h->n; }
