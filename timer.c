/*
 * twheel: hierarchical timing wheel. See timer.h for the contract.
 *
 * The whole library is this one translation unit: the parts in src/, in
 * the order data flows, each using only those above it. Compile this file
 * alone (cc -c timer.c) with timer.h beside it and src/ below it.
 * Parts with a state of their own: the lock (only its part touches its
 * words; others ask its kind), the clock (only its part writes its
 * fields: readings, the reference point, the drive mode), the slots
 * (queues, blocks and bitmaps, changed through the slot functions and the
 * walks that rewrite a queue in place; read by the driver and next
 * expiry), and lifetime (release hooks, tw_cancel's wait, destroy, the
 * timer thread's state).
 *
 * This file needs only libc and pthread and compiles alone as C99 or C11.
 */
#include "src/base.h"       /* geometry and types */
#include "src/lock.c"       /* the wheel's lock */
#include "src/pool.c"       /* nodes and ids */
#include "src/queue.c"      /* the slot store: queues of node indices */
#include "src/slots.c"      /* slots and bitmaps */
#include "src/staging.c"    /* moving level slots down ahead of time */
#include "src/order.c"      /* one tick's timers in stamp order */
#include "src/clock.c"      /* where a delay counts from */
#include "src/timers.c"     /* add and next expiry */
#include "src/lifetime.c"   /* release hooks, cancel waits, teardown */
#include "src/drive.c"      /* dispatch, driver, timer thread */
#include "src/api.c"        /* the public functions */
#include "src/check.c"      /* the invariant checker */
#include "src/table.c"      /* errors, versions and the function table */
