/*
 * Baseline: 4-ary min-heap with a per-timer index, as in libev (DHEAP 4 with
 * EV_HEAP_CACHE_AT) and Go's runtime timers. Entries cache the expiry next to
 * the timer pointer (16 bytes); the array is offset by HEAP0 = 3 and 64-byte
 * aligned so the four children of a node share one cache line.
 */
#ifndef BENCH_HEAP_QUAD_H
#define BENCH_HEAP_QUAD_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef void hq_callback(void *arg);
typedef struct hq_heap hq_heap;
typedef struct hq_timer hq_timer;

hq_heap *hq_create(void);
void hq_destroy(hq_heap *h);
hq_timer *hq_add(hq_heap *h, uint64_t delay, hq_callback *cb, void *arg);
int hq_cancel(hq_heap *h, hq_timer *t);
int hq_reschedule(hq_heap *h, hq_timer *t, uint64_t delay);
/* Moves time forward by `ticks` and runs every timer now due. */
uint64_t hq_advance(hq_heap *h, uint64_t ticks);
/* Ticks until the earliest timer (0 if due), UINT64_MAX when empty. */
uint64_t hq_next_expiry(const hq_heap *h);
int64_t hq_bytes(const hq_heap *h);
uint64_t hq_count(const hq_heap *h);

#ifdef __cplusplus
}
#endif

#endif
