/*
 * A chunked free-list pool for the heap baselines' timer records, so that the
 * heaps pay no malloc per timer (as with libev's user-embedded watchers) and
 * their records never move (the heap stores pointers to them). Chunks of
 * BENCH_POOL_CHUNK records, a growing chunk table, LIFO reuse.
 */
#ifndef BENCH_POOL_H
#define BENCH_POOL_H

#include "bench_alloc.h"

#define BENCH_POOL_CHUNK 1024

struct bench_pool {
    void *free_list;
    char *bump;          /* next unused record of the newest chunk */
    char *bump_end;
    void **chunks;
    size_t nchunks, chunk_cap;
    size_t elem;
    int64_t *bytes;
};

static inline void bench_pool_init(struct bench_pool *p, size_t elem,
                                   int64_t *bytes)
{
    p->free_list = NULL;
    p->bump = p->bump_end = NULL;
    p->chunks = NULL;
    p->nchunks = p->chunk_cap = 0;
    p->elem = elem;
    p->bytes = bytes;
}

static inline int bench_pool_grow(struct bench_pool *p)
{
    if (p->nchunks == p->chunk_cap) {
        size_t cap = p->chunk_cap ? 2 * p->chunk_cap : 16;
        void **t = (void **)ca_realloc(p->bytes, p->chunks, cap * sizeof *t);
        if (!t)
            return -1;
        p->chunks = t;
        p->chunk_cap = cap;
    }
    char *c = (char *)ca_malloc(p->bytes, p->elem * BENCH_POOL_CHUNK);
    if (!c)
        return -1;
    p->chunks[p->nchunks++] = c;
    p->bump = c;
    p->bump_end = c + p->elem * BENCH_POOL_CHUNK;
    return 0;
}

static inline void *bench_pool_get(struct bench_pool *p)
{
    void *r = p->free_list;
    if (r) {
        p->free_list = *(void **)r;
        return r;
    }
    if (p->bump == p->bump_end && bench_pool_grow(p) != 0)
        return NULL;
    r = p->bump;
    p->bump += p->elem;
    return r;
}

static inline void bench_pool_put(struct bench_pool *p, void *r)
{
    *(void **)r = p->free_list;
    p->free_list = r;
}

static inline void bench_pool_destroy(struct bench_pool *p)
{
    for (size_t i = 0; i < p->nchunks; i++)
        ca_free(p->bytes, p->chunks[i]);
    ca_free(p->bytes, p->chunks);
    bench_pool_init(p, p->elem, p->bytes);
}

#endif
