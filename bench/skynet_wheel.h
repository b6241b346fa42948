/*
 * Baseline: skynet's timer (skynet-src/skynet_timer.c) as published, minus
 * its global singleton and message queue: near[256] + t[4][64] slot lists
 * (singly linked, tail pointer), one malloc per timer node, one spinlock
 * taken for every add and every tick, one loop turn per elapsed tick, due
 * lists detached under the lock and dispatched after releasing it, each node
 * freed as it is dispatched.
 *
 * skynet has no cancel: its users drop the response of a session they no
 * longer want. Here sk_cancel sets a flag in the node; the node stays in its
 * slot (and in memory) until its slot is dispatched, where it is skipped and
 * freed. sk_reschedule is therefore cancel + add: it returns a new handle.
 * sk_next_expiry is not in skynet either; it is the scan a user would add.
 */
#ifndef BENCH_SKYNET_WHEEL_H
#define BENCH_SKYNET_WHEEL_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef void sk_dispatch(void *arg);
typedef struct sk_timer sk_timer;
typedef struct sk_node sk_node;

/* dispatch: the one function every due node's payload is pushed to (skynet:
 * skynet_context_push). */
sk_timer *sk_create(sk_dispatch *dispatch);
void sk_destroy(sk_timer *T);
sk_node *sk_add(sk_timer *T, uint32_t delay, void *arg);
int sk_cancel(sk_timer *T, sk_node *node);
/* `arg` is the caller's own (a skynet user never reads the old node). */
sk_node *sk_reschedule(sk_timer *T, sk_node *node, uint32_t delay, void *arg);
/* skynet_updatetime's loop: timer_update once per elapsed tick. */
void sk_advance(sk_timer *T, uint64_t ticks);
uint64_t sk_next_expiry(sk_timer *T);
int64_t sk_bytes(const sk_timer *T);

#ifdef __cplusplus
}
#endif

#endif
