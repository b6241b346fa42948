/*
 * twheel: hierarchical timing wheel. See timer.h for the contract and
 * docs/internals.md for how it works.
 *
 * The whole library is this one translation unit: the parts in src/, in
 * the order data flows, each using only those above it and opening with
 * what it guarantees and what state it owns. Compile this file alone
 * (cc -c timer.c) with timer.h beside it and src/ below it; it needs only
 * libc and pthread (on Windows: the Win32 API) and compiles as C99 or
 * C11.
 */
#include "src/base.h"     /* types, geometry, tuning constants */
#include "src/platform.c" /* threads, clock, sleeping: POSIX or Win32 */
#include "src/lock.c"     /* the wheel's lock and the driver claim */
#include "src/pool.c"     /* nodes, ids */
#include "src/queue.c"    /* the slot store: queues of node indices */
#include "src/slots.c"    /* filing, bitmaps, least ticks */
#include "src/staging.c"  /* level slots moved down ahead of time */
#include "src/order.c"    /* one tick's timers in stamp order */
#include "src/clock.c"    /* where a delay counts from */
#include "src/timers.c"   /* add, next expiry */
#include "src/lifetime.c" /* release hooks, cancel waits, teardown */
#include "src/drive.c"    /* dispatch, the walk, the timer thread */
#include "src/api.c"      /* the public functions */
#include "src/check.c"    /* the invariant checker */
#include "src/table.c"    /* errors, versions, the function table */
