/*
 * Baseline: a hierarchical timing wheel in the style of William Ahern's
 * timeout.c (github.com/wahern/timeout), written from its published design:
 * caller-owned intrusive records (no allocation per timer), 4 levels of 64
 * slots (6 bits each), every slot a doubly linked list so cancel is an O(1)
 * unlink, one 64-bit occupancy bitmap per level, absolute 64-bit expiry per
 * record. Advancing time is "tickless": one call handles any jump, visiting
 * only the occupied slots whose time has come, found with the bitmaps and a
 * rotated mask. Timers further out than 2^24 ticks sit in the top level and
 * are re-filed each time the top level comes round to their slot.
 *
 * tc_next_expiry is timeout.c's timeouts_timeout: a LOWER BOUND derived from
 * the bitmaps in O(1). It is exact when the earliest timer is on level 0;
 * otherwise it is the time until the earliest occupied slot must be
 * re-filed, and advancing by it may run nothing.
 */
#ifndef BENCH_TIMEOUT_WHEEL_H
#define BENCH_TIMEOUT_WHEEL_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef void tc_callback(void *arg);
typedef struct tc_wheel tc_wheel;

struct tc_link {
    struct tc_link *next, *prev;
};

/*
 * The caller allocates this record and owns it; the wheel only links it.
 * 48 bytes on LP64. A record that has never been passed to tc_add must have
 * pending == NULL (e.g. be zeroed) before tc_cancel / tc_reschedule sees it.
 * tc_add overwrites every field, so the record must not be pending then.
 */
struct tc_timeout {
    struct tc_link link;     /* must stay first: lists hold &link */
    struct tc_link *pending; /* list the record is on; NULL when idle */
    uint64_t expires;        /* absolute tick */
    tc_callback *cb;
    void *arg;
};

tc_wheel *tc_create(void);
/* Frees the wheel only; records still pending are left as they are. */
void tc_destroy(tc_wheel *w);
/* Schedules t to fire `delay` ticks from now (delay >= 1 expected; 0 fires
 * on the next tc_advance). t must not be pending. */
void tc_add(tc_wheel *w, struct tc_timeout *t, uint64_t delay,
            tc_callback *cb, void *arg);
/* 1 if t was pending (it no longer is), 0 otherwise. */
int tc_cancel(tc_wheel *w, struct tc_timeout *t);
/* 1 if t was pending and now fires `delay` ticks from now, 0 if not pending. */
int tc_reschedule(tc_wheel *w, struct tc_timeout *t, uint64_t delay);
/* Moves time forward by `ticks` and runs every timer now due, each callback
 * being the wheel's last touch of its record. Returns how many ran. */
uint64_t tc_advance(tc_wheel *w, uint64_t ticks);
/* Lower bound on the ticks until a timer is due (see above); 0 if one is due
 * now, UINT64_MAX when empty. */
uint64_t tc_next_expiry(const tc_wheel *w);

#ifdef __cplusplus
}
#endif

#endif
