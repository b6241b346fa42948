/*
 * Baseline: binary min-heap with a per-timer index, as in libevent's
 * min_heap.h (also the muduo-era servers). Each heap entry caches its expiry
 * next to the timer pointer (16 bytes), so comparisons never chase a pointer;
 * every move writes the timer's new index back into the timer, which is what
 * makes O(log n) cancel and reschedule possible.
 */
#ifndef BENCH_HEAP_BINARY_H
#define BENCH_HEAP_BINARY_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef void hb_callback(void *arg);
typedef struct hb_heap hb_heap;
typedef struct hb_timer hb_timer;

hb_heap *hb_create(void);
void hb_destroy(hb_heap *h);
hb_timer *hb_add(hb_heap *h, uint64_t delay, hb_callback *cb, void *arg);
int hb_cancel(hb_heap *h, hb_timer *t);
int hb_reschedule(hb_heap *h, hb_timer *t, uint64_t delay);
/* Moves time forward by `ticks` and runs every timer now due. */
uint64_t hb_advance(hb_heap *h, uint64_t ticks);
/* Ticks until the earliest timer (0 if due), UINT64_MAX when empty. */
uint64_t hb_next_expiry(const hb_heap *h);
int64_t hb_bytes(const hb_heap *h);
uint64_t hb_count(const hb_heap *h);

#ifdef __cplusplus
}
#endif

#endif
