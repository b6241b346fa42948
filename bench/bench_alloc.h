/*
 * Counting allocator for the baselines: every allocation a baseline makes goes
 * through these helpers, which add malloc_usable_size(p) + 8 (the glibc chunk
 * header) to the structure's own byte counter. So "bytes per timer" for a
 * baseline is measured from what malloc really handed out, overhead included.
 * skynet and the tree, whose nodes all have one size, ask malloc_usable_size
 * once per size and count that figure per node.
 */
#ifndef BENCH_ALLOC_H
#define BENCH_ALLOC_H

#include <malloc.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#ifdef __cplusplus
extern "C" {
#endif

#define CA_CHUNK_OVERHEAD 8

static inline void ca_count(int64_t *counter, void *p, int sign)
{
    if (p)
        *counter += sign * (int64_t)(malloc_usable_size(p) + CA_CHUNK_OVERHEAD);
}

static inline void *ca_malloc(int64_t *counter, size_t n)
{
    void *p = malloc(n);
    ca_count(counter, p, 1);
    return p;
}

static inline void *ca_calloc(int64_t *counter, size_t n)
{
    void *p = calloc(1, n);
    ca_count(counter, p, 1);
    return p;
}

static inline void *ca_aligned(int64_t *counter, size_t align, size_t n)
{
    void *p = NULL;
    if (posix_memalign(&p, align, n) != 0)
        return NULL;
    ca_count(counter, p, 1);
    return p;
}

static inline void *ca_realloc(int64_t *counter, void *old, size_t n)
{
    int64_t before = old
        ? (int64_t)(malloc_usable_size(old) + CA_CHUNK_OVERHEAD) : 0;
    void *p = realloc(old, n);
    if (p) {
        *counter -= before;
        ca_count(counter, p, 1);
    }
    return p;
}

static inline void ca_free(int64_t *counter, void *p)
{
    ca_count(counter, p, -1);
    free(p);
}

#ifdef __cplusplus
}
#endif

#endif
