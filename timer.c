/*
 * twheel: hierarchical timing wheel. See timer.h for the contract.
 *
 * Sections, in the order data flows; each uses only those above it:
 *   geometry and types -> lock -> pool -> slots and bitmaps -> staging ->
 *   compaction and unlink -> order -> clock -> add -> next expiry ->
 *   lifetime -> dispatch -> driver -> timer thread -> API (wheels, timers,
 *   driving, absolute time, inspection) -> checker -> errors, versions and
 *   the function table.
 * Parts with a state of their own: the lock (only its section touches its
 * words; others ask its kind), the clock (only its section writes its
 * fields: readings, the reference point, the drive mode), the slots
 * (queues, blocks and bitmaps, changed through the slot functions and the
 * walks that rewrite a queue in place; read by the driver and next
 * expiry), and lifetime (release hooks, tw_cancel's wait, destroy, the
 * timer thread's state).
 *
 * This file needs only libc and pthread and compiles alone as C99 or C11.
 */
#if !defined(_POSIX_C_SOURCE) || _POSIX_C_SOURCE < 200809L
#undef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif
#if defined(__linux__) && !defined(_DEFAULT_SOURCE)
#define _DEFAULT_SOURCE 1 /* syscall(), for the adaptive lock's futex */
#endif

#include "timer.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
/* TW_NO_FUTEX: build the portable path on Linux too (a test does). */
#if defined(__linux__) && !defined(TW_NO_FUTEX)
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>
#define TW_HAVE_FUTEX 1
#endif

/* C11 atomics when the compiler offers them; the GNU builtins (same memory
 * model) keep strict C99 builds working. The lock's words use them, and
 * so does the clock's drive mode, which adds read before taking the lock. */
#if defined(__STDC_VERSION__) && __STDC_VERSION__ >= 201112L &&              \
    !defined(__STDC_NO_ATOMICS__)
#include <stdatomic.h>
typedef atomic_uint spin_word;
#define spin_init(p) atomic_init((p), 0u)
#define spin_load(p) atomic_load_explicit((p), memory_order_relaxed)
#define spin_store(p, v) atomic_store_explicit((p), (v), memory_order_relaxed)
#define spin_exchange_acquire(p, v)                                           \
    atomic_exchange_explicit((p), (v), memory_order_acquire)
#define spin_store_release(p, v)                                              \
    atomic_store_explicit((p), (v), memory_order_release)
#define spin_claim(p, expected, v)                                            \
    atomic_compare_exchange_strong_explicit((p), (expected), (v),             \
                                            memory_order_acquire,             \
                                            memory_order_relaxed)
/* sequentially consistent: the adaptive lock's wake-up of the driver */
#define spin_load_sc(p) atomic_load((p))
#define spin_store_sc(p, v) atomic_store((p), (v))
#define spin_exchange_sc(p, v) atomic_exchange((p), (v))
#define spin_claim_sc(p, expected, v)                                         \
    atomic_compare_exchange_strong((p), (expected), (v))
#elif defined(__GNUC__)
typedef unsigned spin_word;
#define spin_init(p) (*(p) = 0u)
#define spin_load(p) __atomic_load_n((p), __ATOMIC_RELAXED)
#define spin_store(p, v) __atomic_store_n((p), (v), __ATOMIC_RELAXED)
#define spin_exchange_acquire(p, v) __atomic_exchange_n((p), (v), __ATOMIC_ACQUIRE)
#define spin_store_release(p, v) __atomic_store_n((p), (v), __ATOMIC_RELEASE)
#define spin_claim(p, expected, v)                                            \
    __atomic_compare_exchange_n((p), (expected), (v), 0, __ATOMIC_ACQUIRE,    \
                                __ATOMIC_RELAXED)
#define spin_load_sc(p) __atomic_load_n((p), __ATOMIC_SEQ_CST)
#define spin_store_sc(p, v) __atomic_store_n((p), (v), __ATOMIC_SEQ_CST)
#define spin_exchange_sc(p, v) __atomic_exchange_n((p), (v), __ATOMIC_SEQ_CST)
#define spin_claim_sc(p, expected, v)                                         \
    __atomic_compare_exchange_n((p), (expected), (v), 0, __ATOMIC_SEQ_CST,    \
                                __ATOMIC_SEQ_CST)
#else
#error "twheel needs C11 atomics or the GNU __atomic builtins"
#endif

/* ==== geometry and types ================================================
 * Skynet's shape: near slots for the current 256-tick window, then four
 * levels of 64 slots, each covering 6 more bits of the 32-bit tick. Near
 * and levels 0..2 have twice the slots (a ring): the half not in use holds the
 * next window's timers, moved there ahead of time a few per tick by the
 * staging (see its section) instead of all at once when time enters that
 * window. Level 3 is never staged into and keeps 64. */

#define NEAR_BITS 8
#define NEAR_SIZE (1u << NEAR_BITS) /* ticks in a near window */
#define NEAR_MASK (NEAR_SIZE - 1)
#define NEAR_SLOTS (2 * NEAR_SIZE)
#define NEAR_RING_MASK (NEAR_SLOTS - 1)
#define LEVEL_BITS 6
#define LEVEL_SIZE (1u << LEVEL_BITS) /* slots in a level's window */
#define LEVEL_SLOTS (2 * LEVEL_SIZE)  /* room given to each level */
#define LEVEL_RING_MASK (LEVEL_SLOTS - 1)
#define LEVELS 4

/* Every pending node is placed in exactly one queue, named by a small
 * number: the 512 near slots, the 4*128 level slots (level 3 uses 64), and
 * two due queues that take turns: one collects timers due now for the next
 * advance while the driver runs the other. ("list" in names below means
 * such a number.) Level l's slots start at level_list(l), a multiple of 64,
 * so a level's occupancy bits fill whole words. */
#define LIST_LEVEL0 NEAR_SLOTS
#define LIST_SLOTS (NEAR_SLOTS + LEVELS * LEVEL_SLOTS) /* 1024 */
#define LIST_DUE_A LIST_SLOTS
#define LIST_DUE_B (LIST_SLOTS + 1)
#define LIST_COUNT (LIST_SLOTS + 2)
#define LIST_NONE 0xffffu
#define LEVEL_SLOT_COUNT (LIST_SLOTS - LIST_LEVEL0)

/* A node's `list` field names its queue. On a due queue, the due tick may
 * lie more than 2^32 ticks back (a callback re-armed it during a long jump),
 * so the field also keeps bits 32..45 of the due tick: flag | which queue |
 * 14 epoch bits. */
#define DUE_FLAG 0x8000u
#define DUE_WHICH_SHIFT 14
#define DUE_EPOCH_BITS 14
#define DUE_EPOCH_MASK ((1u << DUE_EPOCH_BITS) - 1)

/* A queue is a chain of 64-byte blocks (one cache line: a link and 15 node
 * indices). A position names one entry: block number << 4 | offset, 0..14;
 * offset 15 (BLOCK_ENTRIES) means one past the block's last entry, where
 * a walk steps to the next block (next_position). */
#define BLOCK_ENTRIES 15
#define POSITION_BITS 4
#define OFFSET_MASK ((1u << POSITION_BITS) - 1)
#define NO_POSITION UINT32_MAX
#define BLOCK_CHUNK_BITS 7 /* blocks come from the allocator 128 at a time */
#define BLOCK_CHUNK (1u << BLOCK_CHUNK_BITS)
#define MAX_BLOCK_CHUNKS ((UINT32_C(1) << (32 - POSITION_BITS - BLOCK_CHUNK_BITS)) - 1)

#define NIL UINT32_MAX

/* Nodes live in fixed chunks that never move; a pool index names a node. */
#define CHUNK_BITS 10
#define CHUNK_NODES (1u << CHUNK_BITS)
#define MAX_CHUNKS ((UINT32_C(1) << (32 - CHUNK_BITS)) - 1) /* index < NIL */

#define MAX_RELEASES 255

enum node_state {
    NODE_FREE = 0,   /* on the free list (or retired) */
    NODE_LINKED,     /* placed in a queue: a slot or a due queue */
    NODE_DETACHED,   /* in no queue for a moment, under the lock: popped,
                        unlinked or being sorted, and relinked, run or
                        ended before the lock is dropped */
    NODE_REARMING,   /* in no queue: a periodic timer whose callback runs,
                        still live; re-armed when the callback returns */
    NODE_ENDED       /* in no queue and dead (its id no longer works), its
                        callback or release hook still running: freed as
                        soon as that returns */
};

/* Everything a cancel, reschedule or move reads or writes: 32 bytes, in
 * chunks aligned so that a node never straddles two cache lines, so each
 * of those touches one node line. What the timer calls lives apart
 * (struct call), touched only by the add, the dispatch and finish_node,
 * which ends a timer that has a release hook, or one that a cancel or the
 * destroy ends. */
struct node {
    uint32_t expire;      /* due tick, low 32 bits: the wheel's time domain */
    uint32_t position;    /* its live queue entry, or NO_POSITION */
    uint32_t generation;  /* bumped on free, the high half of the id (low 31
                             bits); PERIODIC: the timer has an interval */
    uint16_t list;        /* which list holds it (see DUE_FLAG), or LIST_NONE */
    uint8_t state;        /* enum node_state */
    uint8_t release;      /* index into tw_wheel.releases, 0 for none */
    uint32_t interval;    /* ticks between firings, for a PERIODIC timer */
    uint32_t link;        /* in no queue, on a chain of nodes: the free list,
                             or a slot being sorted (see "order"); the next
                             node on it, or NIL */
    uint64_t stamp;       /* order of its last add, reschedule or re-arm:
                             timers due at one tick run by it (see "order") */
};

/* What a timer calls, beside its node: a dispatch reads both lines. */
struct call {
    tw_callback *callback;
    void *user_data;
};

/* a node is half a cache line */
typedef char node_fills_half_a_line[sizeof(struct node) == 32 ? 1 : -1];

/* Nodes and queue blocks come from the allocator in chunks that never
 * move, each aligned to a cache line: a node chunk holds CHUNK_NODES nodes
 * and then their calls (see call_at), a block chunk BLOCK_CHUNK blocks. A
 * table of chunks grows by doubling. */
struct chunk {
    void *start;  /* aligned to 64 inside `memory` */
    void *memory; /* as the allocator gave it */
};

struct chunk_table {
    struct chunk *chunks;
    uint32_t count, capacity;
};

#define PERIODIC 0x80000000u
#define GENERATION_MASK 0x7fffffffu

struct block {
    uint32_t next; /* next block of its queue or of the free list, or NIL */
    uint32_t index[BLOCK_ENTRIES];
};

/* Entries are appended at the tail and taken from the head, so timers of one
 * tick keep their insertion order. An entry whose node has since been
 * cancelled or moved is stale and is skipped when reached. */
struct queue {
    uint32_t head, tail; /* next entry to read, next to write; NO_POSITION
                            when the queue holds no block */
    uint32_t count;      /* live entries */
    uint32_t entries;    /* live and stale entries */
    /* a compaction in progress (see compact_step), or compact_read ==
     * NO_POSITION */
    uint32_t compact_read, compact_write;
    uint32_t compact_holes;  /* stale entries passed over */
};

/* The timer thread's state, under sleep_mutex. THREAD_LEFT_TEARDOWN: its
 * drive destroyed the wheel while another thread was joining it; it exits
 * without freeing the wheel, and the joiner frees it. */
enum thread_state {
    THREAD_IDLE = 0,
    THREAD_RUNNING,
    THREAD_STOPPING,
    THREAD_LEFT_TEARDOWN
};

/* One lock per wheel (see the lock section, the only code that touches
 * these words). */
struct wheel_lock {
    int kind;                 /* enum tw_lock_kind */
    spin_word word;           /* adaptive: LOCK_* bits; spin: 0 or 1 */
    spin_word driver_waiting; /* the driver waits: spin lock producers stand
                                 back; the adaptive driver sleeps on it */
    spin_word driver_claim;   /* a thread drives, or is about to */
    pthread_mutex_t mutex;    /* TW_LOCK_MUTEX */
};

/* Where a delay counts from (see the clock section). The first three are
 * tw_drive_kind's values. */
enum clock_mode {
    MODE_AUTO = TW_DRIVE_AUTO,   /* not driven yet: from now, exact */
    MODE_CLOCK = TW_DRIVE_CLOCK, /* from the clock */
    MODE_TICKS = TW_DRIVE_TICKS, /* from now; only tw_advance drove it, so
                                    the clock says nothing of when the next
                                    tick comes */
    MODE_TICKS_CLOCKED           /* from now; tw_expire or the timer thread
                                    has driven it too */
};

/* The wheel's clock: ticks are counted from a reference point (tick
 * base_tick began at reading base_us), so remainders carry over. */
struct wheel_clock {
    spin_word mode;     /* enum clock_mode. Written under the lock; read
                           before it by add and reschedule, to know whether
                           to read the clock */
    uint32_t tick_us;
    clockid_t id;
    tw_clock_fn *fn;    /* or NULL: clock_gettime(id) */
    void *context;
    uint64_t base_us, base_tick;
    uint64_t last_us;   /* the latest reading a call counted from */
};

/* The drive in progress (tw_advance, tw_expire, the timer thread), on the
 * driving thread's stack; tw_wheel.drive points to it while it lasts. */
struct drive {
    pthread_t thread;
    uint64_t target;  /* the tick the call walks to */
    int timer_thread; /* the timer thread drives */
    int free_wheel;   /* tw_destroy was called on the driving thread: the
                         wheel is freed as the drive ends */
};

/* A release hook running with the lock dropped. Frames live on the stacks
 * of the threads running hooks and are chained per wheel (newest first), so
 * tw_destroy can tell that it is called from inside one, and so teardown
 * can wait for hooks that other threads are running. */
struct hook_frame {
    struct hook_frame *next;
    pthread_t thread;
    int destroy; /* tw_destroy was called in this hook: finish it after */
};

/* A tw_cancel asleep until the callback running on its timer is settled,
 * on that thread's stack; `settled` is set under `sleep_mutex`. */
struct cancel_wait {
    struct cancel_wait *next;
    int settled;
};

struct tw_wheel {
    /* time: 64-bit `now`; its low 32 bits are skynet's `time` */
    uint64_t now;
    uint64_t live; /* tw_count() */

    /* slots, with one occupancy bit per slot, by queue number: near in
     * words 0..7, level i in words 8 + 2i and 9 + 2i (level 3's second word
     * stays empty) */
    struct queue queues[LIST_COUNT];
    uint64_t occupied[LIST_SLOTS / 64];
    uint32_t occupied_words; /* bit k: occupied[k] has a bit set */
    /* per level slot: the least due tick filed there (low 32 bits), a lower
     * bound on its timers, exact unless the slot's bit in least_inexact says
     * the timer that held it has left since */
    uint32_t least[LEVEL_SLOT_COUNT];
    uint64_t least_inexact[LEVEL_SLOT_COUNT / 64];
    uint64_t staged_tick; /* `now` when the staging last ran */

    /* order (see "order"): the last stamp handed out; per near slot, the
     * highest stamp appended since it was last empty, and a bit set when a
     * lower one came after it */
    uint64_t stamp;
    uint64_t near_stamp[NEAR_SLOTS];
    uint64_t unsorted[NEAR_SLOTS / 64];

    /* pool */
    struct chunk_table node_chunks;
    uint32_t used;      /* indices below this have been handed out once */
    uint64_t id_tag;    /* this wheel's tag << 32, XORed into its ids (see
                           make_id) */
    uint32_t free_head; /* LIFO: a reused node is still warm in cache */
    uint32_t free_count;

    /* queue blocks */
    struct chunk_table block_chunks;
    uint32_t free_block; /* free blocks, linked by `next` */
    uint32_t entries; /* in all queues, stale ones included */
    uint64_t entries_supported; /* by the blocks there are */

    /* dispatch */
    unsigned due_list;    /* the due queue collecting timers for next time */
    uint32_t running;     /* node whose callback is running, or NIL */
    uint64_t running_due; /* the tick that node was due at */
    struct cancel_wait *cancel_waits; /* tw_cancel calls waiting for it */

    /* driving and lifetime */
    struct drive *drive;      /* the drive in progress, or NULL */
    int destroying;           /* tw_destroy has begun: nothing is added or
                                 fires */
    struct hook_frame *hooks; /* release hooks running now */
    struct wheel_lock lock;
    struct wheel_clock clock;

    /* allocation */
    tw_realloc_fn *realloc_fn;
    void *alloc_context;
    uint64_t bytes;
    uint64_t max_timers; /* UINT64_MAX for no cap */

    /* release functions, remembered so a node needs one byte, not eight */
    tw_release *releases[MAX_RELEASES + 1];
    uint32_t release_count;
    void *context;          /* the caller's, from tw_config */
    tw_release *on_destroy; /* told once the wheel is freed */

    /* counters for tw_get_stats, and what tw_check last found broken */
    uint64_t added, fired, cancelled, rescheduled, cascaded, rebases;
    const char *broken;

    /* timer thread: `control` serialises start/stop; `sleep_mutex` guards
     * the state threads sleep on (the timer thread between expiries, a
     * tw_cancel waiting for a callback), and `wake` wakes them */
    pthread_mutex_t control;
    pthread_mutex_t sleep_mutex;
    pthread_cond_t wake;
    pthread_t thread;
    int thread_state;
    uint32_t period_us;
    uint32_t thread_calls; /* tw_thread_start/stop calls inside, which a
                              teardown waits out */
};

/* Small functions on the hot paths are inlined by force (a call per timer
 * per step is measurable); cold paths, and long ones that would weigh on a
 * short caller's frame, are kept out of line. */
#if defined(__GNUC__)
#define HOT_INLINE inline __attribute__((always_inline))
#define COLD __attribute__((noinline, cold))
#define NOINLINE __attribute__((noinline))
#else
#define HOT_INLINE inline
#define COLD
#define NOINLINE
#endif

static int lowest_bit(uint64_t x) /* x != 0 */
{
#if defined(__GNUC__)
    return __builtin_ctzll(x);
#else
    int n = 0;
    while (!(x & 1)) {
        x >>= 1;
        n++;
    }
    return n;
#endif
}

static int highest_bit(uint32_t x) /* x != 0 */
{
#if defined(__GNUC__)
    return 31 - __builtin_clz(x);
#else
    int n = 31;
    while (!(x & 0x80000000u)) {
        x <<= 1;
        n--;
    }
    return n;
#endif
}

/* ==== lock ==============================================================
 * One lock per wheel, chosen at creation. TW_LOCK_NONE does nothing at all,
 * not even an atomic operation.
 *
 * TW_LOCK_ADAPTIVE (the default) puts a producer that finds the lock taken
 * to sleep in the kernel at once (a futex on Linux), as glibc's mutex does:
 * a waiter never burns the time slice that a preempted holder needs, which
 * is what survives more threads than cores. The driver is served first, to
 * a bound: it spins a little, then sleeps on its own word, `driver_waiting`,
 * and an unlock wakes it ahead of any producer. While it waits, producers
 * may still take a free lock, but at most DRIVER_PASSES of them: a driver
 * woken but not yet running (on a loaded machine it may wait a time slice
 * for a core) would otherwise be passed by every producer that runs. After
 * that many, producers sleep until the driver has had the lock. The lock is
 * never reserved before then: standing back for a driver that is preempted
 * leaves the lock idle, and handing it to a thread that is asleep leaves it
 * idle until that thread gets a core; on a loaded machine either one,
 * paid on every acquisition, collapses. Paid once per DRIVER_PASSES
 * producers, it is the price of the bound.
 *
 * TW_LOCK_SPIN is test-and-test-and-set: pause, then yield, then nap, with
 * producers standing back while the driver waits. It is cheapest when
 * threads never outnumber cores and starves the driver when they do.
 * TW_LOCK_MUTEX is a pthread mutex: no priority for the driver.
 *
 * Its interface: lock_init and lock_destroy; lock_acquire (as the driver
 * or a producer), lock_try (a producer's, which never waits: for the hot
 * paths) and lock_release; and the driver claim, the one guard that keeps a
 * second thread from driving the wheel: taken before the lock, so that the
 * lock knows which single thread to serve first. Outside this section,
 * code asks for the lock's kind and nothing more. Off Linux, where there is
 * no futex, park is a short nap: the adaptive lock's waiters poll (use
 * TW_LOCK_MUTEX there). Nothing else parks: tw_cancel's wait for a
 * callback sleeps on a condition variable (see lifetime). */

#define DRIVER_SPINS 64 /* pauses before the driver sleeps */
#define DRIVER_ASLEEP 1u /* in driver_waiting, for the adaptive lock */

/* The adaptive lock's `word`: */
#define LOCK_HELD 1u     /* a thread holds the lock */
#define LOCK_SLEEPERS 2u /* producers may sleep on the word: wake one */
#define LOCK_DRIVER 4u   /* the driver waits for the lock */
#define LOCK_PASS 8u     /* times LOCK_PASS: producers that took it since */
#define DRIVER_PASSES 8u /* producers that may take the lock ahead of it */

/* Test hooks: tests/threads/test_lock_bound.c and test_cancel_wait.c
 * compile this file in with TW_TEST_LOCK_EVENT defined, to watch the lock;
 * here they are nothing. */
#ifndef TW_TEST_LOCK_EVENT
#define TW_TEST_LOCK_EVENT(lock, what) ((void)0)
#endif
/* And five for tests/threads/test_destroy_races.c: tw_destroy has decided
 * to stop the timer thread and tear the wheel down; a teardown waits for
 * other threads to leave the wheel; a tw_cancel waiting for a callback has
 * been woken and has not yet taken the lock back; a tw_thread_stop has
 * counted itself in; a tw_thread_start has looked at `destroying`. All
 * with the lock dropped. */
#ifndef TW_TEST_DESTROY_DECIDED
#define TW_TEST_DESTROY_DECIDED(w) ((void)0)
#endif
#ifndef TW_TEST_TEARDOWN_WAITS
#define TW_TEST_TEARDOWN_WAITS(w) ((void)0)
#endif
#ifndef TW_TEST_CANCEL_WOKEN
#define TW_TEST_CANCEL_WOKEN(w) ((void)0)
#endif
#ifndef TW_TEST_STOP_ENTERED
#define TW_TEST_STOP_ENTERED(w) ((void)0)
#endif
#ifndef TW_TEST_START_CHECKED
#define TW_TEST_START_CHECKED(w) ((void)0)
#endif
/* tests/unit/test_foreign_ids.c gives two wheels the tags it wants. */
#ifndef TW_TEST_WHEEL_TAG
#define TW_TEST_WHEEL_TAG(w, tag) (tag)
#endif
enum lock_event {
    LOCK_EV_PRODUCER_WAITS, /* a producer found the lock taken */
    LOCK_EV_DRIVER_WAITS,   /* the driver found the lock taken */
    LOCK_EV_PRODUCER_TOOK,  /* a producer has the lock */
    LOCK_EV_DRIVER_TOOK,    /* the driver has the lock */
    LOCK_EV_DRIVER_ASKS,    /* it found it taken and said so: producers
                               count from here */
    LOCK_EV_DRIVER_SLEEPS   /* ... spun in vain, about to say it sleeps */
};

static void cpu_pause(void)
{
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
    __builtin_ia32_pause();
#elif defined(__GNUC__) && (defined(__aarch64__) || defined(__arm__))
    __asm__ __volatile__("yield");
#endif
}

/* Sleeps while *word == value (or for a short nap where there is no
 * futex); wakes up to `count` sleepers. Both are hints: callers re-check. */
static void park(spin_word *word, unsigned value)
{
#if defined(TW_HAVE_FUTEX)
    syscall(SYS_futex, (void *)word, FUTEX_WAIT_PRIVATE, value, NULL, NULL, 0);
#else
    struct timespec nap = {0, 20000};
    (void)word;
    (void)value;
    nanosleep(&nap, NULL);
#endif
}

static void unpark(spin_word *word, int count)
{
#if defined(TW_HAVE_FUTEX)
    syscall(SYS_futex, (void *)word, FUTEX_WAKE_PRIVATE, count, NULL, NULL, 0);
#else
    (void)word;
    (void)count;
#endif
}

static int spin_try(struct wheel_lock *l)
{
    return !spin_load(&l->word) && !spin_exchange_acquire(&l->word, 1u);
}

/* A spin lock's try: producers stand back while the driver waits. */
static int spin_try_as(struct wheel_lock *l, int driver)
{
    return (driver || !spin_load(&l->driver_waiting)) && spin_try(l);
}

/* After a failed first try. The driver raises its flag while it waits. */
static COLD void spin_wait(struct wheel_lock *l, int driver)
{
    unsigned spins = 0;
    if (driver)
        spin_store(&l->driver_waiting, 1u);
    for (;;) {
        if (spin_try_as(l, driver))
            break;
        cpu_pause();
        /* Every 64 pauses give the CPU away: first by yielding; when that
         * has not helped (the holder is preempted and CFS keeps choosing
         * us), by a 20 µs nap, so the holder gets a core to finish on. */
        if (++spins % 64 == 0) {
            if (spins < 64 * 8) {
                sched_yield();
            } else {
                struct timespec nap = {0, 20000};
                nanosleep(&nap, NULL);
            }
        }
    }
    if (driver)
        spin_store(&l->driver_waiting, 0u);
}

static int adaptive_try(struct wheel_lock *l, unsigned value)
{
    unsigned expected = 0;
    return spin_claim(&l->word, &expected, value);
}

/* The driver has been passed DRIVER_PASSES times: the lock is its next. */
static int driver_due(unsigned word)
{
    return (word & LOCK_DRIVER) && word / LOCK_PASS >= DRIVER_PASSES;
}

/* A producer sleeps as soon as the lock is taken, or is the driver's next.
 * While the driver waits (LOCK_DRIVER), even a free lock is taken here, not
 * by the fast path, so that each producer passing the driver is counted. */
static COLD void adaptive_wait(struct wheel_lock *l)
{
    unsigned word = spin_load(&l->word);
    for (;;) {
        if (!(word & LOCK_HELD) && !driver_due(word)) {
            /* with "sleepers": we may have slept, so others may sleep too */
            unsigned next = word | LOCK_HELD | LOCK_SLEEPERS;
            if (word & LOCK_DRIVER)
                next += LOCK_PASS;
            if (spin_claim(&l->word, &word, next))
                return;
        } else if ((word & LOCK_SLEEPERS) ||
                   spin_claim(&l->word, &word, word | LOCK_SLEEPERS)) {
            park(&l->word, word | LOCK_SLEEPERS);
            word = spin_load(&l->word);
        }
    }
}

/* The driver says it waits (LOCK_DRIVER, which also sends producers to the
 * counting path), spins a little, then sleeps until an unlock wakes it, and
 * spins again. Dekker's pattern keeps that wake-up from being missed: the
 * driver says "asleep" and then looks at the lock; an unlock frees the lock
 * and then looks for a sleeping driver (all sequentially consistent), so at
 * least one of them sees the other. Once woken it claims the lock with
 * "sleepers": a producer it was woken instead of may be asleep, and the
 * driver's own unlock must wake it. Its claim clears LOCK_DRIVER and the
 * count of producers that passed it. */
static COLD void adaptive_wait_driver(struct wheel_lock *l)
{
    unsigned spins, word = spin_load(&l->word), slept = 0, state;
    for (;;) {
        if (word & LOCK_HELD) {
            if (spin_claim(&l->word, &word, word | LOCK_DRIVER))
                break;
        } else if (spin_claim(&l->word, &word, word | LOCK_HELD)) {
            return; /* freed meanwhile: not a wait */
        }
    }
    TW_TEST_LOCK_EVENT(l, LOCK_EV_DRIVER_ASKS);
    for (;;) {
        for (spins = 0; spins < DRIVER_SPINS; spins++) {
            word = spin_load(&l->word);
            if (!(word & LOCK_HELD) &&
                spin_claim(&l->word, &word,
                           (word & LOCK_SLEEPERS) | slept | LOCK_HELD))
                return;
            cpu_pause();
        }
        slept = LOCK_SLEEPERS;
        TW_TEST_LOCK_EVENT(l, LOCK_EV_DRIVER_SLEEPS);
        spin_store_sc(&l->driver_waiting, DRIVER_ASLEEP);
        if (spin_load_sc(&l->word) & LOCK_HELD)
            park(&l->driver_waiting, DRIVER_ASLEEP);
        state = DRIVER_ASLEEP; /* woken, timed out, or never slept */
        spin_claim_sc(&l->driver_waiting, &state, 0u);
    }
}

/* Frees the adaptive lock and wakes one sleeper: the driver when it sleeps
 * (preferred to producers), else a producer when one may sleep, unless the
 * driver is due: then the sleepers stay asleep, marked, for the driver's
 * unlock to wake. The lock is never handed to a sleeping thread: with more
 * threads than cores a woken thread may wait a whole time slice for a
 * core, and a lock reserved for it would stand idle all that time (a ticket
 * lock's collapse). Nobody waiting, it is one compare-and-swap, inline
 * (adaptive_release); this is the rest, `word` as that one found it. */
static COLD void adaptive_release_waiters(struct wheel_lock *l, unsigned word)
{
    unsigned next, state = DRIVER_ASLEEP;
    do { /* a driver that is due is next: its unlock wakes the sleepers */
        next = word & ~LOCK_HELD;
        if (!driver_due(word))
            next &= ~LOCK_SLEEPERS;
    } while (!spin_claim_sc(&l->word, &word, next));
    if ((word & LOCK_DRIVER) &&
        spin_load_sc(&l->driver_waiting) == DRIVER_ASLEEP &&
        spin_claim_sc(&l->driver_waiting, &state, 0u))
        unpark(&l->driver_waiting, 1);
    else if ((word & LOCK_SLEEPERS) && !(next & LOCK_SLEEPERS))
        unpark(&l->word, 1);
}

static HOT_INLINE void adaptive_release(struct wheel_lock *l)
{
    unsigned word = LOCK_HELD;
    if (!spin_claim_sc(&l->word, &word, 0u))
        adaptive_release_waiters(l, word);
}

/* `driver`: the driving thread (from begin_drive, and retaking the lock
 * between callbacks), which the adaptive lock and the spinlock serve ahead
 * of producers. Uncontended (the common case), a lock is one atomic
 * operation that writes no flag waiting threads poll. The test hook names
 * the event by `driver` (each driver event follows its producer one). */
static HOT_INLINE void lock_acquire(struct wheel_lock *l, int driver)
{
    if (l->kind == TW_LOCK_ADAPTIVE) { /* first: the default */
        if (!adaptive_try(l, LOCK_HELD)) {
            TW_TEST_LOCK_EVENT(l, LOCK_EV_PRODUCER_WAITS + driver);
            if (driver)
                adaptive_wait_driver(l);
            else
                adaptive_wait(l);
        }
    } else if (l->kind == TW_LOCK_NONE) {
        return;
    } else if (l->kind == TW_LOCK_SPIN) {
        if (!spin_try_as(l, driver)) {
            TW_TEST_LOCK_EVENT(l, LOCK_EV_PRODUCER_WAITS + driver);
            spin_wait(l, driver);
        }
    } else {
        pthread_mutex_lock(&l->mutex);
    }
    TW_TEST_LOCK_EVENT(l, LOCK_EV_PRODUCER_TOOK + driver);
}

/* A producer's acquire that never waits and makes no call: 1 with the
 * lock held; 0 when it is taken (or, for the adaptive lock, when a driver
 * waits for it: the waiting path counts the producers that pass it) and
 * always for a mutex, which has no trylock without a call. Lets a hot path
 * save no registers, and take the lock with lock() out of line on 0. */
static HOT_INLINE int lock_try(struct wheel_lock *l)
{
    int taken;
    if (l->kind == TW_LOCK_ADAPTIVE) /* first: the default */
        taken = adaptive_try(l, LOCK_HELD);
    else if (l->kind == TW_LOCK_NONE)
        return 1;
    else
        taken = l->kind == TW_LOCK_SPIN && spin_try_as(l, 0);
    if (taken)
        TW_TEST_LOCK_EVENT(l, LOCK_EV_PRODUCER_TOOK);
    return taken;
}

static HOT_INLINE void lock_release(struct wheel_lock *l)
{
    if (l->kind == TW_LOCK_ADAPTIVE) /* first: the default */
        adaptive_release(l);
    else if (l->kind == TW_LOCK_NONE)
        return;
    else if (l->kind == TW_LOCK_SPIN)
        spin_store_release(&l->word, 0u);
    else
        pthread_mutex_unlock(&l->mutex);
}

/* Makes the caller the one thread that drives the wheel, until
 * end_driver_claim; 0 when another thread drives or a callback of this
 * drive re-enters. TW_LOCK_NONE has one thread: a plain read and write,
 * no atomic operation. */
static int claim_driver(struct wheel_lock *l)
{
    unsigned expected = 0;
    if (l->kind != TW_LOCK_NONE)
        return spin_claim(&l->driver_claim, &expected, 1u);
    expected = spin_load(&l->driver_claim);
    spin_store(&l->driver_claim, 1u);
    return !expected;
}

/* Lock held, as its last act: a thread claiming next then waits for this
 * lock as the driver, which is what it is. */
static void end_driver_claim(struct wheel_lock *l)
{
    spin_store_release(&l->driver_claim, 0u);
}

/* For the checker: whether a driver has claimed the wheel. */
static int lock_driver_claimed(const struct wheel_lock *l)
{
    return spin_load(&l->driver_claim) != 0;
}

static int lock_init(struct wheel_lock *l, int kind)
{
    l->kind = kind;
    spin_init(&l->word);
    spin_init(&l->driver_waiting);
    spin_init(&l->driver_claim);
    return kind == TW_LOCK_MUTEX ? pthread_mutex_init(&l->mutex, NULL) : 0;
}

static void lock_destroy(struct wheel_lock *l)
{
    if (l->kind == TW_LOCK_MUTEX)
        pthread_mutex_destroy(&l->mutex);
}

static HOT_INLINE void lock(tw_wheel *w)
{
    lock_acquire(&w->lock, 0);
}

static HOT_INLINE void unlock(tw_wheel *w)
{
    lock_release(&w->lock);
}

/* ==== pool ==============================================================
 * Nodes come from chunks of 1024 that never move, so a node pointer stays
 * valid while the lock is dropped. A node's generation (31 bits) is bumped
 * on every free; a node whose generation would wrap is retired instead of
 * reused, so an id (index, generation) is never handed out twice. */

static void *wheel_alloc(tw_wheel *w, void *pointer, size_t size)
{
    return w->realloc_fn(pointer, size, w->alloc_context);
}

static void *libc_realloc(void *pointer, size_t size, void *context)
{
    (void)context;
    if (size == 0) {
        free(pointer);
        return NULL;
    }
    return realloc(pointer, size);
}

static struct node *node_at(const tw_wheel *w, uint32_t index)
{
    return (struct node *)w->node_chunks.chunks[index >> CHUNK_BITS].start +
           (index & (CHUNK_NODES - 1));
}

static uint32_t generation_of(const struct node *n)
{
    return n->generation & GENERATION_MASK;
}

static int is_periodic(const struct node *n)
{
    return (n->generation & PERIODIC) != 0;
}

/* A node's call, in the array that follows its chunk's nodes. */
static struct call *call_at(const tw_wheel *w, uint32_t index)
{
    struct node *nodes = w->node_chunks.chunks[index >> CHUNK_BITS].start;
    struct call *calls = (struct call *)(void *)(nodes + CHUNK_NODES);
    return &calls[index & (CHUNK_NODES - 1)];
}

/* The interval is read only for a node marked PERIODIC. */
static void set_interval(struct node *n, uint32_t interval)
{
    n->interval = interval;
    n->generation = generation_of(n) | (interval ? PERIODIC : 0);
}

/* An id is the node's index and its generation XORed with the wheel's tag,
 * so that another wheel's ids name none of this wheel's timers (but for a
 * chance of about 2^-31 per id, see guarantees.md). Node 0 is never handed
 * out, so no id is 0 whatever its generation half. */
static tw_id make_id(const tw_wheel *w, uint32_t index, uint32_t generation)
{
    return (((uint64_t)generation << 32) | index) ^ w->id_tag;
}

/* The node named by id if it has not been freed yet, else NULL; the caller
 * looks at its state to see whether the timer is still live. */
static struct node *node_of(const tw_wheel *w, tw_id id, uint32_t *index_out)
{
    uint32_t index = (uint32_t)id;
    uint32_t generation = (uint32_t)((id ^ w->id_tag) >> 32);
    struct node *n;
    if (index >= w->used)
        return NULL;
    n = node_at(w, index);
    if (generation_of(n) != generation || n->state == NODE_FREE)
        return NULL;
    *index_out = index;
    return n;
}

/* Adds a chunk of `size` bytes to a table, doubling the table first when
 * it is full (to `initial` entries the first time, at most `limit`
 * chunks); its aligned start, or NULL with nothing changed. */
static COLD void *add_chunk(tw_wheel *w, struct chunk_table *t, uint32_t initial,
                            uint32_t limit, size_t size)
{
    unsigned char *memory;
    struct chunk *chunk;
    if (t->count == limit)
        return NULL;
    if (t->count == t->capacity) {
        uint32_t wanted = t->capacity ? t->capacity * 2 : initial;
        struct chunk *grown;
        wanted = wanted < limit ? wanted : limit;
        grown = wheel_alloc(w, t->chunks, (size_t)wanted * sizeof *grown);
        if (!grown)
            return NULL;
        w->bytes += (uint64_t)(wanted - t->capacity) * sizeof *grown;
        t->chunks = grown;
        t->capacity = wanted;
    }
    memory = wheel_alloc(w, NULL, size + 63);
    if (!memory)
        return NULL;
    w->bytes += size + 63;
    chunk = &t->chunks[t->count++];
    chunk->memory = memory;
    chunk->start = memory + (-(uintptr_t)memory & 63);
    return chunk->start;
}

/* Adds a chunk of nodes; the first one's node 0 is retired at once (see
 * make_id). 0 when the allocator failed. */
static COLD int add_node_chunk(tw_wheel *w)
{
    struct node *nodes = add_chunk(w, &w->node_chunks, 8, MAX_CHUNKS,
                                   CHUNK_NODES * (sizeof(struct node) + sizeof(struct call)));
    if (nodes && w->used == 0) {
        nodes->state = NODE_FREE;
        nodes->list = LIST_NONE;
        nodes->generation = 0;
        w->used = 1;
    }
    return nodes != NULL;
}

/* Returns a node index, or NIL when the allocator failed. */
static HOT_INLINE uint32_t node_alloc(tw_wheel *w)
{
    uint32_t index;
    if (w->free_head != NIL) {
        index = w->free_head;
        w->free_head = node_at(w, index)->link;
        w->free_count--;
        return index;
    }
    if (w->used == w->node_chunks.count * CHUNK_NODES && !add_node_chunk(w))
        return NIL;
    index = w->used++;
    node_at(w, index)->generation = 1;
    return index;
}

static HOT_INLINE void node_free(tw_wheel *w, struct node *n, uint32_t index)
{
    n->state = NODE_FREE;
    n->list = LIST_NONE;
    n->generation = (n->generation + 1) & GENERATION_MASK; /* and one-shot */
    if (n->generation == 0)
        return; /* retired: 2^31 - 1 timers have used this node */
    n->link = w->free_head;
    w->free_head = index;
    w->free_count++;
}

/* ==== slots and bitmaps =================================================
 * Each slot is a queue of node indices in 64-byte blocks. Placing a node
 * appends its index and remembers the entry's position in the node; taking
 * it out (cancel, a reschedule that moves it now) only changes the node,
 * leaving a stale entry behind, and a reschedule to later of a timer in a
 * level slot leaves even the entry live (see staging). So a cancel or
 * reschedule touches one cache line of its own, an add touches its node and a
 * queue tail that is warm, and walking a slot (staging, dispatch) reads
 * indices in line-sized runs, fetching their nodes in parallel instead of
 * chasing one pointer per node. An entry is live exactly when its node is
 * placed and names that entry's position.
 *
 * Stale entries cost 4 bytes each and are bounded: a queue whose live count
 * drops to 0 gives all its blocks back at once, and a queue whose stale
 * entries outnumber twice its live ones (plus a block's worth) is compacted
 * in place, a few entries per later unlink, which the stale entries pay for
 * once each (the slot being staged is rotated instead: see staging).
 *
 * Blocks never fail to come when a node moves (staging, rotation, periodic
 * re-arm): entries never outnumber what the blocks support (entries_supported),
 * with one kept for a re-arm. An add grows the block pool first, or fails;
 * a reschedule that moves its timer now grows it when it can and else
 * compacts the queue it leaves (move_now). A slot's occupancy bit is set
 * exactly when it holds a live entry. */

static struct block *block_at(const tw_wheel *w, uint32_t block)
{
    return (struct block *)w->block_chunks.chunks[block >> BLOCK_CHUNK_BITS].start +
           (block & (BLOCK_CHUNK - 1));
}

static struct block *block_of(const tw_wheel *w, uint32_t position)
{
    return block_at(w, position >> POSITION_BITS);
}

static uint32_t entry_at(const tw_wheel *w, uint32_t position)
{
    return block_of(w, position)->index[position & OFFSET_MASK];
}

/* Blocks that queues holding `entries` entries can need at most: a
 * non-empty queue spans at most entries/15 + 2 blocks (partly read head,
 * partly written tail), and at most `entries` queues are non-empty; two
 * spare blocks cover the rounding. */
static uint64_t blocks_needed(uint64_t entries)
{
    uint64_t busy = entries < LIST_COUNT ? entries : LIST_COUNT;
    return entries / BLOCK_ENTRIES + 2 * busy + 2;
}

static uint64_t block_count(const tw_wheel *w)
{
    return (uint64_t)w->block_chunks.count << BLOCK_CHUNK_BITS;
}

/* The most entries `blocks` blocks are enough for. */
static uint64_t entries_for_blocks(uint64_t blocks)
{
    uint64_t low = 0, high = blocks * BLOCK_ENTRIES + BLOCK_ENTRIES;
    while (low < high) { /* the largest e with blocks_needed(e) <= blocks */
        uint64_t middle = low + (high - low + 1) / 2;
        if (blocks_needed(middle) <= blocks)
            low = middle;
        else
            high = middle - 1;
    }
    return blocks_needed(low) <= blocks ? low : 0;
}

static COLD int grow_blocks(tw_wheel *w, uint64_t entries)
{
    while (block_count(w) < blocks_needed(entries)) {
        uint32_t first = w->block_chunks.count << BLOCK_CHUNK_BITS, i;
        struct block *chunk = add_chunk(w, &w->block_chunks, 4, MAX_BLOCK_CHUNKS,
                                        BLOCK_CHUNK * sizeof(struct block));
        if (!chunk)
            return ENOMEM;
        /* all 0xff, so that unused entries read NIL */
        memset(chunk, 0xff, BLOCK_CHUNK * sizeof *chunk);
        for (i = BLOCK_CHUNK; i-- > 0;) { /* lowest block handed out first */
            chunk[i].next = w->free_block;
            w->free_block = first + i;
        }
        w->entries_supported = entries_for_blocks(block_count(w));
    }
    return 0;
}

/* Grows the block pool, if needed, so that `more` entries can be added
 * (one more is kept for a periodic timer's re-arm). 0 or ENOMEM. */
static HOT_INLINE int reserve_entries(tw_wheel *w, uint32_t more)
{
    uint64_t entries = (uint64_t)w->entries + more + 1;
    return entries <= w->entries_supported ? 0 : grow_blocks(w, entries);
}

static uint32_t block_take(tw_wheel *w)
{
    uint32_t block = w->free_block; /* never NIL: see reserve_entries */
    w->free_block = block_at(w, block)->next;
    block_at(w, block)->next = NIL;
    return block;
}

/* Gives back the chain of blocks from `first` to `last`, in O(1). */
static void blocks_give(tw_wheel *w, uint32_t first, uint32_t last)
{
    block_at(w, last)->next = w->free_block;
    w->free_block = first;
}

static void block_give(tw_wheel *w, uint32_t block)
{
    blocks_give(w, block, block);
}

/* The one step of every walk that reads a queue in place (the least-tick
 * scan, compaction, the checker): a position one past a block's last entry
 * (offset 15, BLOCK_ENTRIES, which no entry has) is the start of the next
 * block. Walks that consume a queue from its head (dispatch, staging) move
 * it with pass_head instead, giving blocks back as they go. */
static uint32_t next_position(const tw_wheel *w, uint32_t position)
{
    if ((position & OFFSET_MASK) != BLOCK_ENTRIES)
        return position;
    return block_of(w, position - 1)->next << POSITION_BITS;
}

/* Walks over a queue (staging, dispatch, compaction) would wait for one
 * cache miss per node; instead, on entering a block they ask for the nodes
 * of the next block and for the block after that, so that many misses are
 * in flight while nodes are handled. A dispatch (`calls`) asks for the
 * nodes' calls too, and so does the staging into near: a call was last
 * touched by its add; asked for as its node moves into near (less than
 * two level-0 spans before it fires), it is in cache when the dispatch
 * reads it instead of costing a miss per fired timer. Compaction never
 * reads them. Inlined by force: GCC deems a void function that only
 * prefetches pure and deletes its calls. */
#if defined(__GNUC__)
static HOT_INLINE void
prefetch_block(const tw_wheel *w, uint32_t block, unsigned from, int calls)
{
    const struct block *b = block_at(w, block);
    unsigned i;
    for (i = from; i < BLOCK_ENTRIES; i++)
        if (b->index[i] < w->used) {
            __builtin_prefetch(node_at(w, b->index[i]), 1);
            if (calls)
                __builtin_prefetch(call_at(w, b->index[i]), 0);
        }
    if (b->next != NIL)
        __builtin_prefetch(block_at(w, b->next));
}

/* At `position`, the start of a walk or of a block. */
static HOT_INLINE void
prefetch_ahead(const tw_wheel *w, uint32_t position, int walk_start, int calls)
{
    uint32_t next = block_of(w, position)->next;
    if (walk_start)
        prefetch_block(w, position >> POSITION_BITS, position & OFFSET_MASK, calls);
    if (next != NIL)
        prefetch_block(w, next, 0, calls);
}
#else
static void prefetch_ahead(const tw_wheel *w, uint32_t position, int walk_start,
                           int calls)
{
    (void)w;
    (void)position;
    (void)walk_start;
    (void)calls;
}
#endif

/* A queue's group as tw_stats reports it: 0 near, 1..4 level 0..3, 5 due. */
static int group_of(unsigned list)
{
    if (list < LIST_LEVEL0)
        return 0;
    if (list < LIST_SLOTS)
        return 1 + (int)((list - LIST_LEVEL0) / LEVEL_SLOTS);
    return 5;
}

/* Whether queue `list` is a level slot (those keep a least tick). */
static int is_level_slot(unsigned list)
{
    return list - LIST_LEVEL0 < LEVEL_SLOT_COUNT; /* unsigned: below wraps */
}

/* The queue a node is placed in, from its `list` field. */
static unsigned list_of(const struct node *n)
{
    if (n->list & DUE_FLAG)
        return LIST_DUE_A + ((n->list >> DUE_WHICH_SHIFT) & 1);
    return n->list;
}

/* The full 64-bit due tick of a placed node. A slot holds timers due less
 * than 2^32 ticks ahead; a due queue keeps 14 more bits, so its timers are
 * exact up to 2^46 ticks back (beyond that, a periodic timer's missed
 * firings are coalesced). */
static uint64_t due_tick(const tw_wheel *w, const struct node *n)
{
    /* a due queue holds ticks up to now, or while driving up to the call's
     * target (delay 0 on a clock-driven wheel, see due_of_call) */
    uint64_t due, latest, span = UINT64_C(1) << (32 + DUE_EPOCH_BITS);
    if (!(n->list & DUE_FLAG))
        return w->now + (uint32_t)(n->expire - (uint32_t)w->now);
    latest = w->drive ? w->drive->target : w->now;
    due = (latest & ~(span - 1)) |
          ((uint64_t)(n->list & DUE_EPOCH_MASK) << 32) | n->expire;
    return due > latest ? due - span : due;
}

static int entry_live(const tw_wheel *w, uint32_t index, uint32_t position)
{
    const struct node *n = node_at(w, index);
    return n->state == NODE_LINKED && n->position == position;
}

/* Appends a node index; returns the entry's position. */
static HOT_INLINE uint32_t queue_push(tw_wheel *w, unsigned list, uint32_t index)
{
    struct queue *q = &w->queues[list];
    uint32_t position = q->tail;
    if (q->entries == 0) {
        position = block_take(w) << POSITION_BITS;
        q->head = position;
    } else if ((position & OFFSET_MASK) == BLOCK_ENTRIES) {
        uint32_t block = block_take(w);
        block_of(w, position)->next = block;
        position = block << POSITION_BITS;
    }
    block_of(w, position)->index[position & OFFSET_MASK] = index;
    q->tail = position + 1;
    q->entries++;
    w->entries++;
    return position;
}

/* Whether a queue's stale entries have come to outnumber twice its live
 * ones (plus a block's worth): then they are taken out, COMPACT_STEP
 * entries read per step (compaction, or rotation in a slot being staged). */
#define COMPACT_STEP 64

static HOT_INLINE int too_stale(const struct queue *q)
{
    return q->entries - q->count > 2 * q->count + BLOCK_ENTRIES;
}

/* Empties a queue that has no live entry left, giving its blocks back. */
static void queue_drop(tw_wheel *w, unsigned list)
{
    struct queue *q = &w->queues[list];
    if (q->entries)
        blocks_give(w, q->head >> POSITION_BITS, (q->tail - 1) >> POSITION_BITS);
    w->entries -= q->entries;
    q->entries = q->count = 0;
    q->head = q->tail = q->compact_read = NO_POSITION;
    if (list < LIST_SLOTS) {
        w->occupied[list >> 6] &= ~(UINT64_C(1) << (list & 63));
        if (!w->occupied[list >> 6])
            w->occupied_words &= ~(1u << (list >> 6));
    }
    if (list < NEAR_SLOTS) {
        w->near_stamp[list] = 0;
        w->unsorted[list >> 6] &= ~(UINT64_C(1) << (list & 63));
    }
}

/* Ends a compaction under way on a queue being consumed from its head
 * (see "compaction and unlink"): what it left is stale entries. */
static void compact_abandon(struct queue *q)
{
    q->compact_read = NO_POSITION;
}

/* The least due tick of each level slot is kept as timers are filed, so
 * tw_next_expiry answers without reading the slot. A timer leaving a slot
 * cannot lower it; when the one holding it leaves, the value stays as a
 * lower bound (marked inexact) until the slot is rescanned or refilled. All
 * ticks in a slot lie ahead of the wheel's time, so they compare as
 * distances from it. */
static HOT_INLINE void note_least(tw_wheel *w, unsigned slot, uint32_t expire)
{
    uint32_t time = (uint32_t)w->now;
    /* below even an inexact bound, nothing else in the slot lies lower */
    if (w->queues[LIST_LEVEL0 + slot].count == 0 ||
        (uint32_t)(expire - time) < (uint32_t)(w->least[slot] - time)) {
        w->least[slot] = expire;
        w->least_inexact[slot >> 6] &= ~(UINT64_C(1) << (slot & 63));
    }
}

static HOT_INLINE void forget_least(tw_wheel *w, unsigned slot, uint32_t expire)
{
    if (expire == w->least[slot])
        w->least_inexact[slot >> 6] |= UINT64_C(1) << (slot & 63);
}

/* A near slot's entries are dispatched in stamp order. Appends keep it
 * unless a node moved in place, or rotated (see staging), arrives behind a
 * newer one: the slot is then marked, and sorted before it is dispatched. */
static HOT_INLINE void note_order(tw_wheel *w, unsigned list, uint64_t stamp)
{
    if (stamp > w->near_stamp[list])
        w->near_stamp[list] = stamp;
    else
        w->unsorted[list >> 6] |= UINT64_C(1) << (list & 63);
}

/* Places a node at the tail of a queue. */
static HOT_INLINE void link_tail(tw_wheel *w, unsigned list, uint32_t index,
                                 struct node *n)
{
    n->position = queue_push(w, list, index);
    n->list = (uint16_t)list;
    n->state = NODE_LINKED;
    if (is_level_slot(list))
        note_least(w, list - LIST_LEVEL0, n->expire);
    else if (list < NEAR_SLOTS)
        note_order(w, list, n->stamp);
    if (w->queues[list].count++ == 0 && list < LIST_SLOTS) {
        w->occupied[list >> 6] |= UINT64_C(1) << (list & 63);
        w->occupied_words |= 1u << (list >> 6);
    }
}

/* The start of a walk from a queue's head, which prefetches on entering a
 * block (`calls`: a dispatch, or a staging into near). */
static void prefetch_queue(const tw_wheel *w, unsigned list, int calls)
{
    if (w->queues[list].entries)
        prefetch_ahead(w, w->queues[list].head, 1, calls);
}

/* Moves a queue's head to offset `end` of its head block `block` (whose
 * link is `next`), the entries before it taken and counted off: the block
 * goes back to the pool once passed, and the next one is prefetched. */
static HOT_INLINE void pass_head(tw_wheel *w, struct queue *q, uint32_t block,
                                 uint32_t next, unsigned end, int calls)
{
    if (q->entries == 0) {
        block_give(w, block);
        q->head = q->tail = NO_POSITION;
    } else if (end == BLOCK_ENTRIES) {
        block_give(w, block);
        q->head = next << POSITION_BITS;
        prefetch_ahead(w, q->head, 0, calls);
    } else {
        q->head = (block << POSITION_BITS) | end;
    }
}

/* Takes the entry at the head of a queue that has one, live or stale, for
 * a dispatch (`calls`: it asks for the calls too, see prefetch_block) or a
 * rotation, and gives its block back once passed: returns the entry's
 * position (compared with its node's to tell whether it was live) and its
 * node in *index_out. */
static HOT_INLINE uint32_t take_head(tw_wheel *w, struct queue *q, uint32_t *index_out,
                                     int calls)
{
    uint32_t position = q->head;
    struct block *b = block_of(w, position);
    *index_out = b->index[position & OFFSET_MASK];
    q->entries--;
    w->entries--;
    pass_head(w, q, position >> POSITION_BITS, b->next, (position & OFFSET_MASK) + 1, calls);
    return position;
}

/* Level l's slots each span 2^level_shift(l) ticks; its ring of
 * level_ring(l) slots starts at list level_list(l). */
static unsigned level_shift(unsigned level)
{
    return NEAR_BITS + LEVEL_BITS * level;
}

static unsigned level_list(unsigned level)
{
    return LIST_LEVEL0 + level * LEVEL_SLOTS;
}

static unsigned level_ring(unsigned level)
{
    return level == LEVELS - 1 ? LEVEL_SIZE : LEVEL_SLOTS;
}


/* Takes the first live entry off a queue's head, skipping stale ones, and
 * detaches its node; NIL when the queue is empty. *due_out gets the node's
 * due tick. */
static HOT_INLINE uint32_t pop_live(tw_wheel *w, unsigned list, uint64_t *due_out)
{
    struct queue *q = &w->queues[list];
    compact_abandon(q);
    while (q->entries) {
        uint32_t index, position = take_head(w, q, &index, 1);
        struct node *n = node_at(w, index);
        if (n->state != NODE_LINKED || n->position != position)
            continue;
        *due_out = due_tick(w, n);
        n->list = LIST_NONE;
        n->state = NODE_DETACHED;
        n->position = NO_POSITION;
        if (--q->count == 0)
            queue_drop(w, list); /* only stale entries are left */
        return index;
    }
    return NIL;
}

/* The slot an add or reschedule files a timer due at `expire` in when the
 * wheel's time is `time` (expire != time): near when they differ only in
 * the low 8 bits, else the level holding their highest differing bit, at
 * expire's bits of that level. This is skynet's add_node without the mask
 * loop; with rings twice the window, it always lands in a ring's current
 * half (level 3's 32-bit index has only 6 bits). */
static unsigned slot_for(uint32_t expire, uint32_t time)
{
    uint32_t differ = expire ^ time;
    unsigned level;
    if (differ <= NEAR_MASK)
        return expire & NEAR_RING_MASK;
    level = (unsigned)(highest_bit(differ) - NEAR_BITS) / LEVEL_BITS;
    return level_list(level) + ((expire >> level_shift(level)) & LEVEL_RING_MASK);
}

/* How many slots after `from` the first occupied slot of the ring of
 * `size` slots (64, 128 or 512) starting at list `base` lies, 1 .. size - 1;
 * 0 when there is none. `from` itself, the slot of time, is not looked at.
 * The words are visited once round the ring from the one holding `from`,
 * which is visited again for its bits below `from`; an empty ring costs one
 * test of the summary. */
static HOT_INLINE unsigned ring_next(const tw_wheel *w, unsigned base, unsigned size,
                                     unsigned from)
{
    const uint64_t *words = &w->occupied[base >> 6];
    unsigned count = size >> 6, first = from >> 6, i;
    uint64_t bits;
    if (!((w->occupied_words >> (base >> 6)) & ((1u << count) - 1)))
        return 0;
    bits = words[first] & ((~UINT64_C(0) << (from & 63)) << 1);
    if (bits) /* most often: the slot sought shares a word with `from` */
        return (unsigned)lowest_bit(bits) - (from & 63);
    for (i = 1; i <= count; i++) {
        unsigned word = (first + i) & (count - 1);
        bits = words[word];
        if (i == count)
            bits &= (UINT64_C(1) << (from & 63)) - 1;
        if (bits)
            return ((word << 6) + (unsigned)lowest_bit(bits) - from) & (size - 1);
    }
    return 0;
}

/* Ticks from now to the first occupied near slot after now's, or TW_NEVER:
 * exact, as each near slot holds one tick. */
static uint64_t near_next(const tw_wheel *w)
{
    unsigned offset = ring_next(w, 0, NEAR_SLOTS, (unsigned)w->now & NEAR_RING_MASK);
    return offset ? offset : TW_NEVER;
}

/* Whether any slot of `level` holds a timer (its ring fills two words of
 * the bitmap; level 3's second word stays empty). */
static HOT_INLINE int level_occupied(const tw_wheel *w, unsigned level)
{
    return (w->occupied_words >> (level_list(level) >> 6)) & 3u;
}

/* Level `level`'s first occupied slot after the one time is in: its list,
 * with the tick its span starts at in *start_out; 0 when the level is
 * empty. Slots of one level hold disjoint spans in ring order, so this
 * one holds the level's earliest timer. */
static HOT_INLINE unsigned level_first(const tw_wheel *w, unsigned level,
                                       uint64_t *start_out)
{
    unsigned shift = level_shift(level), size = level_ring(level);
    uint64_t current = w->now >> shift;
    unsigned offset = ring_next(w, level_list(level), size, (unsigned)current & (size - 1));
    if (!offset)
        return 0;
    *start_out = (current + offset) << shift;
    return level_list(level) + ((unsigned)(current + offset) & (size - 1));
}

/* The tick level slot `list` spans from: its first occurrence from the
 * slot time is in on (which it may be). */
static uint64_t slot_start(const tw_wheel *w, unsigned level, unsigned list)
{
    unsigned shift = level_shift(level), size = level_ring(level);
    uint64_t current = w->now >> shift;
    return (current + ((list - level_list(level) - (unsigned)current) & (size - 1))) << shift;
}

/* The occupied slot of `level` after slot `list` (whose span starts at
 * *start), up to the slot time is in: its list, with *start moved to its
 * span's start; 0 when there is none. */
static unsigned level_after(const tw_wheel *w, unsigned level, unsigned list,
                            uint64_t *start)
{
    unsigned shift = level_shift(level), size = level_ring(level);
    unsigned from = list - level_list(level), current = (unsigned)(w->now >> shift);
    unsigned offset = ring_next(w, level_list(level), size, from);
    if (!offset || ((from - current) & (size - 1)) + offset >= size)
        return 0; /* none, or only past the slot time is in */
    *start += (uint64_t)offset << shift;
    return level_list(level) + ((from + offset) & (size - 1));
}

/* ==== staging ===========================================================
 * Skynet re-files a whole level slot when time enters its span (a cascade):
 * with a million timers that is hundreds of thousands of moves in one tick.
 * Here each level slot is moved one level down ahead of time instead, a
 * share per tick, while the slot before it is current: into the other half
 * of the ring below (near for level 0), which holds the next window and so
 * mixes with nothing current. The share is what is left divided by the
 * ticks left, so moving a slot costs about its size over its span per tick,
 * and a jump over many ticks does their shares at once.
 *
 * Deadlines: level 0 must be done as its span starts (near dispatches it);
 * level l >= 1 one level-(l-1) slot span earlier, when the level below
 * starts staging the first slot it fed. next_event stops the driver at each
 * deadline, so a jump does each slot's moves at the ticks ticking one by one
 * would (a slot left past its deadline is still emptied as its span starts,
 * before anything in it is due: the stops keep the shares, not exactness).
 * A timer filed after its slot's deadline (adds go by skynet's rule) waits
 * for the next tick, and is moved then: that work is bounded by the adds
 * since.
 *
 * Moved later: a timer rescheduled later while it waits in a level slot
 * keeps its entry there (moves_in_place). The staging that reaches it
 * goes by its tick: still inside the slot's span, it moves down as any
 * other; past it, it is filed where an add would file it now. That is one
 * move, inside the slot's share, however often it was pushed back
 * meanwhile: an idle timeout pushed on every packet costs a write to its
 * node.
 *
 * Order: a slot is read from its head and appended to the tails below, and
 * adds and reschedules go to the highest level that can hold their tick,
 * so for any one tick the entries in a higher slot are newer than those
 * already moved below. Only a timer moved later breaks that, and its stamp
 * puts it back in place (see "order"). Outside stage(), the slot time
 * itself is in is empty at every level.
 *
 * Stale entries: a slot being staged loses live timers from its head, so
 * compaction's bound on its stale entries (see "compaction and unlink")
 * would not hold there: live timers at the head moved down, the stale
 * entries behind them kept, a slot left with 32 timers could hold
 * hundreds of entries, too many for tw_next_expiry to re-read. And it
 * cannot be compacted in place, since the staging reads its head. Instead
 * it is rotated while too_stale: entries are taken off its head, the stale
 * ones dropped and the live ones put back at its tail, in the same slot.
 * Its live count holds while its stale entries go, as under compaction:
 * COMPACT_STEP entries per unlink from it, and after each share
 * ROTATE_PER_MOVE per timer the share moved down, plus COMPACT_STEP. The
 * rotated timers reach the slots below later than their neighbours, and
 * their stamps keep their places (see "order"). */
#define ROTATE_PER_MOVE 8

/* Moves the live entries at offsets offset..end-1 of block `block` of
 * level slot `list`, whose span is the `span` ticks from `start`, to the
 * tails of their slots below (`below`, and the bits `shift` and `mask` of
 * their tick that pick the slot there). A node rescheduled past the span
 * while it waited here is filed where an add would file it. Returns how
 * many moved. Inlined by force so the constants of a move into near drop
 * the level upkeep. */
static HOT_INLINE uint64_t move_run(tw_wheel *w, unsigned list, const struct block *b,
                                    uint32_t block, unsigned offset, unsigned end,
                                    uint32_t start, uint32_t span,
                                    unsigned below, unsigned shift, unsigned mask)
{
    uint64_t moved = 0;
    for (; offset < end; offset++) {
        uint32_t index = b->index[offset];
        struct node *n = node_at(w, index);
        if (n->state != NODE_LINKED || n->position != ((block << POSITION_BITS) | offset))
            continue;
        forget_least(w, list - LIST_LEVEL0, n->expire);
        w->queues[list].count--;
        if ((uint32_t)(n->expire - start) < span)
            link_tail(w, below + ((n->expire >> shift) & mask), index, n);
        else
            link_tail(w, slot_for(n->expire, (uint32_t)w->now), index, n);
        moved++;
    }
    return moved;
}

/* Moves up to `budget` entries, live or stale, off the head of a level
 * slot, each live one to the tail of its slot one level down. A block's
 * entries are read as a run and the queue's counts settled once per run
 * (before the moves, so the reserve of blocks holds: see reserve_entries);
 * a block goes back to the pool once passed. */
static uint64_t stage_entries(tw_wheel *w, unsigned level, unsigned list, uint64_t budget)
{
    struct queue *q = &w->queues[list];
    uint32_t start = (uint32_t)slot_start(w, level, list);
    uint32_t span = UINT32_C(1) << level_shift(level);
    uint64_t moved = 0;
    compact_abandon(q);
    if (budget >= BLOCK_ENTRIES) /* a short batch would spend more on it */
        prefetch_queue(w, list, level == 0);
    while (budget > 0 && q->entries) {
        uint32_t block = q->head >> POSITION_BITS, next;
        struct block *b = block_at(w, block);
        unsigned offset = q->head & OFFSET_MASK, run = BLOCK_ENTRIES - offset, end;
        if (run > q->entries)
            run = q->entries;
        if (run > budget)
            run = (unsigned)budget;
        end = offset + run;
        budget -= run;
        q->entries -= run;
        w->entries -= run;
        next = b->next;
        if (level == 0) /* into near: the constants leave out level upkeep */
            moved += move_run(w, list, b, block, offset, end, start, span, 0, 0,
                              NEAR_RING_MASK);
        else
            moved += move_run(w, list, b, block, offset, end, start, span,
                              level_list(level - 1), level_shift(level - 1),
                              LEVEL_RING_MASK);
        pass_head(w, q, block, next, end, level == 0);
    }
    if (q->count == 0)
        queue_drop(w, list); /* what is left is stale */
    w->cascaded += moved;
    return moved;
}

/* Takes up to `budget` entries off the head of level slot `list`, the one
 * being staged, and puts the live ones back at its tail: the slot keeps
 * its timers and loses the stale entries passed (see "Stale entries"). At
 * most one pass over the slot. */
static void rotate_entries(tw_wheel *w, unsigned list, uint64_t budget)
{
    struct queue *q = &w->queues[list];
    compact_abandon(q);
    if (budget > q->entries) /* one pass: the second would find none */
        budget = q->entries;
    for (; budget > 0; budget--) {
        uint32_t index, position = take_head(w, q, &index, 0);
        if (entry_live(w, index, position))
            node_at(w, index)->position = queue_push(w, list, index);
    }
}

/* The slot of `level` that staging is moving down now: the one after the
 * slot time is in. */
static unsigned staged_slot(const tw_wheel *w, unsigned level)
{
    return level_list(level) +
           (((unsigned)(w->now >> level_shift(level)) + 1) & (level_ring(level) - 1));
}

/* The tick the slot after time's at `level` starts at: no timer in the
 * level is due earlier. */
static uint64_t next_start(const tw_wheel *w, unsigned level)
{
    return ((w->now >> level_shift(level)) + 1) << level_shift(level);
}

/* How long before a level slot's span starts its staging must be done:
 * before the level below begins staging the span's first slot (near has
 * nothing below: level 0 finishes as its span starts). */
static uint64_t stage_lead(unsigned level)
{
    return level ? UINT64_C(1) << level_shift(level - 1) : 0;
}

/* Brings every level's staging up to `now`, top level first so that what
 * a level moves down is there for the level below to move on. */
static void stage(tw_wheel *w)
{
    unsigned level = LEVELS;
    while (level-- > 0) {
        unsigned shift = level_shift(level), size = level_ring(level);
        uint64_t current = w->now >> shift, start = (current + 1) << shift;
        uint64_t deadline = start - stage_lead(level), from, budget;
        unsigned here = level_list(level) + ((unsigned)current & (size - 1));
        unsigned next = staged_slot(w, level);
        struct queue *q = &w->queues[next];
        if (!level_occupied(w, level))
            continue;
        /* the slot time is in: level 0's on its first tick (its deadline),
         * or timers filed into a slot after its deadline had passed */
        if (w->queues[here].entries)
            stage_entries(w, level, here, UINT64_MAX);
        if (!q->entries)
            continue;
        from = start - (UINT64_C(1) << shift);
        if (from < w->staged_tick)
            from = w->staged_tick;
        if (w->now >= deadline)
            budget = UINT64_MAX;
        else /* its share of the entries left for the ticks since `from` */
            budget = (q->entries * (w->now - from) + (deadline - from) - 1) /
                     (deadline - from);
        if (budget) {
            uint64_t moved = stage_entries(w, level, next, budget);
            if (too_stale(q)) /* false for a slot the share emptied */
                rotate_entries(w, next, ROTATE_PER_MOVE * moved + COMPACT_STEP);
        }
    }
    w->staged_tick = w->now;
}

/* Ticks from now to the next tick at which the wheel has work: a near slot
 * to dispatch, or a level slot whose staging must be finished by then;
 * TW_NEVER when every slot is empty. Staging may be overdue (a timer filed
 * in a slot past its deadline): that is work for the next tick. */
static uint64_t next_event(const tw_wheel *w)
{
    uint64_t best = near_next(w), start;
    unsigned level;
    if (best == 1)
        return 1; /* no deadline comes sooner */
    for (level = 0; level < LEVELS; level++) {
        /* no deadline of the level comes before the next slot's, and an
         * overdue one counts as the next tick */
        uint64_t soonest = next_start(w, level) - stage_lead(level);
        if (soonest > w->now && soonest - w->now >= best)
            continue;
        if (level_first(w, level, &start)) {
            uint64_t deadline = start - stage_lead(level);
            uint64_t step = deadline > w->now ? deadline - w->now : 1;
            if (step < best)
                best = step;
        }
    }
    return best;
}

/* ==== compaction and unlink ============================================
 * Compaction rewrites a queue without its stale entries, in place and in
 * order, a few entries per cancel or reschedule on that queue, so that no
 * single call pays for a whole slot (which may hold most of the timers).
 * While it runs, the queue reads: compacted entries from the head up to
 * `compact_write`, then only stale ones (moved or dead) up to
 * `compact_read`, then entries not yet looked at; every walk stays valid.
 * Anything that consumes the queue from its head (dispatch, staging, drop)
 * just abandons a compaction: what it left behind is stale entries.
 * Taking a node out of its queue (cancel, reschedule) is here too: it is
 * what starts and drives a compaction. */

static void compact_finish(tw_wheel *w, struct queue *q)
{
    /* q->count > 0 and all live entries lie before `write`: the blocks
     * after the one it ends in hold stale entries only */
    uint32_t write = q->compact_write, spare = block_of(w, write - 1)->next;
    if (spare != NIL) {
        blocks_give(w, spare, (q->tail - 1) >> POSITION_BITS);
        block_of(w, write - 1)->next = NIL;
    }
    w->entries -= q->compact_holes;
    q->entries -= q->compact_holes;
    q->tail = write;
    compact_abandon(q);
}

/* Moves up to COMPACT_STEP entries of a queue under compaction. */
static void compact_step(tw_wheel *w, struct queue *q)
{
    uint32_t read = q->compact_read, write = q->compact_write, steps;
    const struct block *from = NULL; /* the blocks of read and write, once */
    struct block *to = NULL;         /* looked up */
    for (steps = 0; steps < COMPACT_STEP && read != q->tail; steps++, read++) {
        uint32_t index;
        struct node *n;
        if ((read & OFFSET_MASK) == BLOCK_ENTRIES) {
            read = next_position(w, read);
            prefetch_ahead(w, read, 0, 0);
            from = NULL;
        }
        if (!from)
            from = block_of(w, read);
        index = from->index[read & OFFSET_MASK];
        n = node_at(w, index);
        if (n->state != NODE_LINKED || n->position != read) {
            q->compact_holes++; /* stale */
            continue;
        }
        if ((write & OFFSET_MASK) == BLOCK_ENTRIES) {
            write = next_position(w, write);
            to = NULL;
        }
        if (!to)
            to = block_of(w, write);
        to->index[write & OFFSET_MASK] = index;
        n->position = write;
        write++;
    }
    q->compact_read = read;
    q->compact_write = write;
    if (read == q->tail)
        compact_finish(w, q);
}

static void compact_start(tw_wheel *w, struct queue *q)
{
    q->compact_read = q->compact_write = q->head;
    q->compact_holes = 0;
    prefetch_ahead(w, q->head, 1, 0);
}

/* Compacts a queue from its head to its tail in one call, dropping every
 * stale entry in it (a compaction under way starts over, so the entries it
 * had passed are read again); a queue already emptied is left alone. For
 * a move that found the block pool short (see move_now). */
static COLD void compact_whole(tw_wheel *w, unsigned list)
{
    struct queue *q = &w->queues[list];
    if (!q->entries)
        return;
    compact_start(w, q);
    while (q->compact_read != NO_POSITION)
        compact_step(w, q);
}

static int staging_now(const tw_wheel *w, unsigned list)
{
    return is_level_slot(list) &&
           list == staged_slot(w, (list - LIST_LEVEL0) / LEVEL_SLOTS);
}

/* A queue that has just lost a live entry: compacts it a step when its
 * stale entries have come to outnumber twice its live ones. A slot being
 * staged is read from its head a share per tick, which a compaction in
 * place cannot share the head with; it is rotated a step instead (see
 * "Stale entries" in staging). Kept out of line: cancel and reschedule
 * inline only the test. */
static void compact_some(tw_wheel *w, unsigned list)
{
    struct queue *q = &w->queues[list];
    if (w->destroying)
        return; /* the release empties queues in order: nothing may move
                   into one it has passed (a hook cancelling others) */
    if (staging_now(w, list)) {
        rotate_entries(w, list, COMPACT_STEP);
        return;
    }
    if (q->compact_read == NO_POSITION)
        compact_start(w, q);
    compact_step(w, q);
}

/* A queue that has just lost a live entry: emptied, it gives its blocks
 * back; else it is compacted a step when due (see compact_some). */
static NOINLINE void settle_queue(tw_wheel *w, unsigned list)
{
    if (w->queues[list].count == 0)
        queue_drop(w, list);
    else
        compact_some(w, list);
}

/* Takes a node out of its queue `list`; its entry stays behind, stale.
 * Returns 1 when the queue must then be settled (settle_queue): the caller
 * may finish with the node first, so that the call comes last. Inlined: it
 * is most of a cancel, which is short enough for the CPU to overlap the
 * cache misses of consecutive calls only if it stays small. */
static HOT_INLINE int take_out(tw_wheel *w, struct node *n, unsigned list)
{
    struct queue *q = &w->queues[list];
    n->list = LIST_NONE;
    n->state = NODE_DETACHED;
    n->position = NO_POSITION;
    if (is_level_slot(list))
        forget_least(w, list - LIST_LEVEL0, n->expire);
    return --q->count == 0 || q->compact_read != NO_POSITION || too_stale(q);
}

static HOT_INLINE void unlink_node(tw_wheel *w, struct node *n)
{
    unsigned list = list_of(n);
    if (take_out(w, n, list))
        settle_queue(w, list);
}

/* ==== order =============================================================
 * Timers due at one tick run in the order of their last add, reschedule
 * or re-arm, each of which hands the node the next stamp of a 64-bit
 * counter. Appends keep a near slot in that order (adds and re-arms carry
 * the newest stamp; staging moves a slot in order to the tails below; of
 * one tick's timers, those filed higher are newer), except when a timer
 * rescheduled in place, or rotated in the slot being staged (see
 * staging), arrives behind a newer one: note_order marks the slot then,
 * and the slot is sorted by stamp just before its dispatch.
 *
 * The sort needs no memory, so a dispatch never fails: the slot's live
 * nodes are detached and chained through their `link` fields, the
 * chain is merge sorted by its ascending runs (a slot is mostly one run
 * with a few late arrivals, which costs little more than a pass), and the
 * nodes are written back from the queue's head, its stale entries
 * dropped as a compaction would drop them. O(n log n) for n timers in the
 * slot, whatever their order. */

/* Merges two chains of detached nodes linked through `link`. */
static uint32_t merge_chains(tw_wheel *w, uint32_t a, uint32_t b)
{
    uint32_t head = NIL, *tail = &head;
    while (a != NIL && b != NIL) {
        struct node *x = node_at(w, a), *y = node_at(w, b);
        if (x->stamp < y->stamp) {
            *tail = a;
            tail = &x->link;
            a = x->link;
        } else {
            *tail = b;
            tail = &y->link;
            b = y->link;
        }
    }
    *tail = a != NIL ? a : b;
    return head;
}

/* Sorts a chain by stamp: each ascending run cut off its head is merged
 * into a binary counter of sorted chains (runs[k] holds about 2^k runs),
 * which the counter's 32 places hold for any count of runs below 2^32. */
static uint32_t sort_chain(tw_wheel *w, uint32_t chain)
{
    uint32_t runs[32], sorted = NIL;
    unsigned k;
    for (k = 0; k < 32; k++)
        runs[k] = NIL;
    while (chain != NIL) {
        uint32_t run = chain, last = chain, next;
        while ((next = node_at(w, last)->link) != NIL &&
               node_at(w, next)->stamp > node_at(w, last)->stamp)
            last = next;
        chain = next;
        node_at(w, last)->link = NIL;
        for (k = 0; runs[k] != NIL; k++) {
            run = merge_chains(w, runs[k], run);
            runs[k] = NIL;
        }
        runs[k] = run;
    }
    for (k = 0; k < 32; k++)
        if (runs[k] != NIL)
            sorted = merge_chains(w, runs[k], sorted);
    return sorted;
}

/* Sorts a near slot about to be dispatched, if note_order marked it. */
static void order_slot(tw_wheel *w, unsigned list)
{
    struct queue *q = &w->queues[list];
    uint64_t bit = UINT64_C(1) << (list & 63);
    uint32_t position = q->head, chain = NIL, *tail = &chain, left, index;
    if (!(w->unsorted[list >> 6] & bit))
        return;
    w->unsorted[list >> 6] &= ~bit;
    for (left = q->entries; left > 0; left--, position++) {
        position = next_position(w, position);
        index = entry_at(w, position);
        if (entry_live(w, index, position)) {
            struct node *n = node_at(w, index);
            n->state = NODE_DETACHED; /* a stale entry of it now reads stale */
            *tail = index;
            tail = &n->link;
        }
    }
    *tail = NIL;
    position = q->head;
    for (index = sort_chain(w, chain); index != NIL; position++) {
        struct node *n = node_at(w, index);
        uint32_t next = n->link;
        position = next_position(w, position);
        block_of(w, position)->index[position & OFFSET_MASK] = index;
        n->position = position;
        n->state = NODE_LINKED;
        index = next;
    }
    q->compact_write = position;
    q->compact_holes = q->entries - q->count;
    compact_finish(w, q);
}

/* ==== clock =============================================================
 * Where a delay counts from. On a tick-driven wheel: `now`, exact in
 * ticks. On a clock-driven wheel `now` only moves when the driver runs, so
 * it can lag the clock by any amount (an event loop adding timers before
 * its tw_expire, a busy timer thread); the delay then counts from the
 * clock reading the call took, rounded up to the next tick boundary, so
 * the timer never runs before `delay` whole ticks of the clock have passed;
 * rounding up costs at most one tick of lateness. Delay 0 is due at the
 * tick the clock is in, rounded down, so the next tw_expire runs it. A
 * periodic timer's grid starts from its first due tick: never early after
 * a delay of 1 or more, and less than a tick early after a delay of 0.
 *
 * The clock's interface: call_clock (the reading a call needs, taken
 * before the lock), due_of (the due tick of an add or reschedule),
 * expire_target (where tw_expire walks to), the drive mode and its
 * changes, and tick_start_us / ticks_after_us (ticks back to readings,
 * for deadlines). Nothing else writes the clock's fields; tw_timeout_ms,
 * tw_tick_us, tw_get_stats and the checker read some. */

#define NO_READING UINT64_MAX

static unsigned clock_mode(const tw_wheel *w)
{
    return spin_load(&w->clock.mode);
}

/* The two questions the mode answers. A delay counts from a clock reading
 * in modes AUTO (not driven yet) and CLOCK; once ticks drive it, from
 * `now`. */
static HOT_INLINE int delays_read_clock(unsigned mode)
{
    return mode < MODE_TICKS;
}

/* The reference point says when each tick starts, unless only tw_advance
 * ever drove the wheel: then nothing ties its ticks to the clock. */
static int ticks_have_times(unsigned mode)
{
    return mode != MODE_TICKS;
}

/* The mode after a driving call, by the mode before: tw_expire and the
 * timer thread drive by the clock, tw_advance by ticks. Lock held. */
static const unsigned char mode_after_expire[] = {
    MODE_CLOCK, MODE_CLOCK, MODE_TICKS_CLOCKED, MODE_TICKS_CLOCKED};
static const unsigned char mode_after_advance[] = {
    MODE_TICKS, MODE_CLOCK, MODE_TICKS, MODE_TICKS_CLOCKED};

/* Written only when it changes (at most twice in a wheel's life): adds on
 * other threads read the word before taking the lock, and a store on every
 * drive would take its cache line from them each time. */
static void set_mode(tw_wheel *w, const unsigned char *mode_after)
{
    unsigned mode = clock_mode(w);
    if (mode_after[mode] != mode)
        spin_store(&w->clock.mode, mode_after[mode]);
}

static uint64_t read_clock(const tw_wheel *w)
{
    struct timespec ts = {0, 0};
    if (w->clock.fn)
        return w->clock.fn(w->clock.context);
    clock_gettime(w->clock.id, &ts); /* the id was tried at creation */
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

/* The clock reading an add or reschedule needs, taken before the lock (a
 * clock_fn may be slow); NO_READING when it needs none. The drive mode can
 * only change from AUTO, and the reading is then still right or unused. */
static HOT_INLINE uint64_t call_clock(const tw_wheel *w)
{
    if (!delays_read_clock(clock_mode(w)))
        return NO_READING;
    return read_clock(w);
}

/* The clock read lower than the wheel's last reading (seen by tw_expire,
 * or first by an add or reschedule): the wheel's ticks move back by the
 * step, so tick `now` keeps the part of it already gone (a clock that
 * jitters back by a microsecond costs that microsecond, not the tick, and
 * cannot stall the wheel), a tw_advance lead is kept (timers it has not
 * reached do not become due early), and every pending timer keeps the
 * time it had left. The wheel's time never goes back. Lock held. */
static void rebase(tw_wheel *w, uint64_t clock)
{
    struct wheel_clock *c = &w->clock;
    /* where tick `now` starts, relative to the last reading, in µs:
     * ahead_us - behind_us (saturating; the lead can be any tw_advance) */
    uint64_t ahead_us = w->now - c->base_tick, behind_us = 0;
    ahead_us = ahead_us > UINT64_MAX / c->tick_us ? UINT64_MAX : ahead_us * c->tick_us;
    if (c->last_us >= c->base_us)
        behind_us = c->last_us - c->base_us;
    else if (ahead_us <= UINT64_MAX - (c->base_us - c->last_us))
        ahead_us += c->base_us - c->last_us;
    else
        ahead_us = UINT64_MAX;
    if (ahead_us >= behind_us)
        c->base_us = ahead_us - behind_us > UINT64_MAX - clock
                         ? UINT64_MAX
                         : clock + (ahead_us - behind_us);
    else
        c->base_us = behind_us - ahead_us > clock ? 0 : clock - (behind_us - ahead_us);
    c->base_tick = w->now;
    c->last_us = clock;
    w->rebases++;
}

/* Every reading a call counts from passes here, lock held, and becomes
 * the wheel's last reading, so a step back from any of them is seen. A
 * reading below the last one was either taken before the lock while
 * another thread's newer reading got in first (the call is still in
 * progress, so reading again now is as good a moment of it), or the clock
 * stepped back. A reading taken under the lock tells them apart: on a
 * clock that only moves forward it cannot lie below the last one. A step
 * back re-bases at once, so the call that saw it counts from the clock as
 * it now reads. */
static uint64_t settle_reading(tw_wheel *w, uint64_t clock)
{
    if (clock < w->clock.last_us) {
        clock = read_clock(w);
        if (clock < w->clock.last_us)
            rebase(w, clock);
    }
    w->clock.last_us = clock;
    return clock;
}

/* The tick `clock` falls in by the wheel's reference point, or the next
 * tick boundary when round_up and it falls inside a tick; never before
 * now; TW_NEVER past TW_MAX_TICK. Lock held. */
static uint64_t clock_tick(const tw_wheel *w, uint64_t clock, int round_up)
{
    const struct wheel_clock *c = &w->clock;
    uint64_t elapsed, ticks;
    if (clock <= c->base_us) /* a reading older than the reference point */
        return w->now;
    elapsed = clock - c->base_us;
    ticks = elapsed / c->tick_us + (round_up && elapsed % c->tick_us != 0);
    if (ticks > TW_MAX_TICK - c->base_tick)
        return TW_NEVER;
    ticks += c->base_tick;
    return ticks > w->now ? ticks : w->now;
}

/* The reading `ticks` tick lengths after `start_us`, saturated below
 * UINT64_MAX (TW_NEVER). */
static uint64_t ticks_after_us(const tw_wheel *w, uint64_t start_us, uint64_t ticks)
{
    const uint64_t latest = UINT64_MAX - 1;
    if (start_us >= latest || ticks > (latest - start_us) / w->clock.tick_us)
        return latest;
    return start_us + ticks * w->clock.tick_us;
}

/* The reading at which the tick `ticks` from now begins by the reference
 * point, so the first tw_expire() reading it reaches that tick; lock held,
 * a clock-driven wheel (base_tick <= now always). */
static uint64_t tick_start_us(const tw_wheel *w, uint64_t ticks)
{
    return ticks_after_us(w, w->clock.base_us, w->now + ticks - w->clock.base_tick);
}

/* The due tick of a timer added or rescheduled now, from a clock reading;
 * lock held. TW_NEVER when the clock has run so far past `now` (no driver
 * ran for about TW_MAX_DELAY ticks, with timers pending) that the wheel
 * cannot hold it. Out of line: the tick-driven add stays short. */
static uint64_t due_of_call(tw_wheel *w, uint64_t delay, uint64_t clock)
{
    unsigned mode = clock_mode(w);
    uint64_t start;
    if (!delays_read_clock(mode)) /* decided since the reading was taken */
        return w->now + delay;
    clock = settle_reading(w, clock);
    if (mode == MODE_AUTO) {
        /* Not driven yet, so perhaps by tw_advance, which needs delays
         * exact in ticks. Count from `now`, and move the clock's reference
         * point here: tick `now` then starts no earlier than this call,
         * and a first tw_expire cannot find the timer due early. The
         * reading is the latest (settle_reading re-based a lower one). */
        w->clock.base_us = clock;
        w->clock.base_tick = w->now;
        return w->now + delay;
    }
    start = clock_tick(w, clock, delay != 0);
    if (start > TW_MAX_TICK) /* the clock is past the last tick: tw_expire */
        start = TW_MAX_TICK; /* will say so; the timer waits at the end */
    if (delay == 0 && w->drive && start > w->drive->target)
        start = w->drive->target; /* on the due queue: see schedule_call */
    if (start - w->now > TW_MAX_DELAY - delay) {
        if (w->live || w->drive)
            return TW_NEVER;
        w->now = start; /* empty: what a tw_expire would do, firing nothing */
    }
    return start + delay;
}

/* The due tick of an add or reschedule `delay` ticks from now, given the
 * reading call_clock took (a tick-driven wheel's is exact, inline). */
static HOT_INLINE uint64_t due_of(tw_wheel *w, uint64_t delay, uint64_t clock)
{
    return clock == NO_READING ? w->now + delay : due_of_call(w, delay, clock);
}

/* Where tw_expire walks to: the tick the clock is in. Called as the driver
 * with the lock held; drops it to read the clock (a clock_fn may be slow).
 * An add may record a newer reading meanwhile: ours then looks lower, and
 * settle_reading reads again under the lock. An add that re-based
 * meanwhile (it saw the clock step back) makes ours possibly from before
 * the step, higher than the clock now: read again after it. After a
 * re-base the clock lies in tick `now` when the last reading was this
 * driver's, further on when it was an add's (the wheel had not caught up
 * with it): either way, walk to it. A reference point ahead of the clock
 * (a re-base kept tw_advance's lead) means no tick yet. TW_NEVER past
 * TW_MAX_TICK. */
static uint64_t expire_target(tw_wheel *w)
{
    uint64_t clock, rebases = w->rebases;
    unlock(w);
    clock = read_clock(w);
    lock_acquire(&w->lock, 1);
    if (w->rebases != rebases)
        clock = read_clock(w);
    set_mode(w, mode_after_expire);
    return clock_tick(w, settle_reading(w, clock), 0);
}

/* Lock not held: the wheel is being created. `now` is set. */
static void clock_init(tw_wheel *w, const struct tw_config *c)
{
    spin_init(&w->clock.mode);
    spin_store(&w->clock.mode, (unsigned)c->drive);
    w->clock.tick_us = c->tick_us;
    w->clock.fn = c->clock_fn;
    w->clock.context = c->clock_context;
    w->clock.id = CLOCK_MONOTONIC;
#ifdef CLOCK_MONOTONIC_COARSE
    if (c->clock == TW_CLOCK_MONOTONIC_COARSE) {
        struct timespec probe;
        if (clock_gettime(CLOCK_MONOTONIC_COARSE, &probe) == 0)
            w->clock.id = CLOCK_MONOTONIC_COARSE; /* else the precise one */
    }
#endif
    w->clock.base_tick = w->now;
    w->clock.base_us = w->clock.last_us = read_clock(w);
}

/* ==== add ===============================================================
 * A node due at or before now waits on the due queue for the start of the
 * next advance; anything later goes into its slot. Appending keeps timers
 * of one tick in insertion order. */

/* Places a node on due queue `list` (which the `list` field records, with
 * bits 32..45 of the due tick). */
static void link_due(tw_wheel *w, unsigned list, uint32_t index, uint64_t due)
{
    struct node *n = node_at(w, index);
    link_tail(w, list, index, n);
    n->expire = (uint32_t)due;
    n->list = (uint16_t)(DUE_FLAG | ((list - LIST_DUE_A) << DUE_WHICH_SHIFT) |
                         ((due >> 32) & DUE_EPOCH_MASK));
}

static HOT_INLINE void schedule(tw_wheel *w, uint32_t index, struct node *n,
                                uint64_t due)
{
    n->expire = (uint32_t)due;
    if (due <= w->now)
        link_due(w, w->due_list, index, due);
    else
        link_tail(w, slot_for((uint32_t)due, (uint32_t)w->now), index, n);
}

/* An add or reschedule: a delay of 0 made while the wheel is driven waits
 * for the next call even when its due tick (the clock's, on a clock-driven
 * wheel) lies ahead of the tick being dispatched: a callback that re-adds
 * itself with delay 0 runs once per call, never in a loop. */
static HOT_INLINE void schedule_call(tw_wheel *w, uint32_t index,
                                     struct node *n, uint64_t due,
                                     uint64_t delay)
{
    if (delay == 0 && w->drive)
        link_due(w, w->due_list, index, due);
    else
        schedule(w, index, n, due);
}

/* Index of `release` in the wheel's table (0 for NULL); for a function not
 * in it yet, the index it would get, or -1 when the table is full. Nothing
 * is registered here, so an add that fails later leaves no entry behind.
 * A linear scan, under the lock: programs pass a handful of distinct
 * functions (free, a delete, a closure's destroy), found in the first few
 * entries, and it keeps the node's reference to one byte. */
static int release_index(const tw_wheel *w, tw_release *release)
{
    uint32_t i;
    if (!release)
        return 0;
    for (i = 1; i <= w->release_count; i++)
        if (w->releases[i] == release)
            return (int)i;
    return w->release_count == MAX_RELEASES ? -1 : (int)w->release_count + 1;
}

static HOT_INLINE tw_id add_timer(tw_wheel *w, uint64_t delay, uint64_t interval,
                                  tw_callback *callback, tw_release *release,
                                  void *user_data)
{
    uint32_t index = NIL, generation;
    struct node *n;
    uint64_t clock, due = 0;
    int release_slot = 0, error = 0;
    if (!w || !callback) {
        errno = EINVAL;
        return 0;
    }
    if (delay > TW_MAX_DELAY || interval > TW_MAX_DELAY) {
        errno = ERANGE;
        return 0;
    }
    clock = call_clock(w);
    lock(w);
    if (w->destroying)
        error = EBUSY;
    else if (w->live >= w->max_timers)
        error = ENOSPC;
    else if ((release_slot = release_index(w, release)) < 0)
        error = EMFILE;
    else if ((due = due_of(w, delay, clock)) == TW_NEVER)
        error = ERANGE;
    else if (reserve_entries(w, 1) || (index = node_alloc(w)) == NIL)
        error = ENOMEM;
    if (error) {
        unlock(w);
        errno = error;
        return 0;
    }
    if ((uint32_t)release_slot > w->release_count)
        w->releases[++w->release_count] = release;
    n = node_at(w, index);
    call_at(w, index)->callback = callback;
    call_at(w, index)->user_data = user_data;
    set_interval(n, (uint32_t)interval);
    n->release = (uint8_t)release_slot;
    n->stamp = ++w->stamp;
    schedule_call(w, index, n, due, delay);
    w->live++;
    w->added++;
    generation = generation_of(n); /* before unlocking: it may fire at once */
    unlock(w);
    return make_id(w, index, generation);
}

/* ==== next expiry ========================================================
 * What is due when: tw_next_expiry in O(1), and a timer's time left. */

/* A level slot whose least tick went inexact is read again when it holds
 * this few pending timers, so small wheels always get exact answers.
 * Compaction (rotation, in the slot being staged) keeps such a slot at
 * about 3 * 32 + 15 entries, stale ones included; RESCAN_ENTRIES only makes
 * that bound explicit. A larger slot answers with the inexact bound, which
 * lies inside the slot: by the time it comes, the slot has been staged into
 * finer slots with exact values. */
#define RESCAN_PENDING 32
#define RESCAN_ENTRIES 256

/* The least due tick among a slot's live entries, read from them. */
static uint32_t scan_least(const tw_wheel *w, unsigned list)
{
    const struct queue *q = &w->queues[list];
    uint32_t time = (uint32_t)w->now, least = UINT32_MAX;
    uint32_t position = q->head, left;
    for (left = q->entries; left > 0; left--, position++) {
        uint32_t index;
        position = next_position(w, position);
        index = entry_at(w, position);
        if (entry_live(w, index, position) &&
            (uint32_t)(node_at(w, index)->expire - time) < least)
            least = node_at(w, index)->expire - time;
    }
    return time + least;
}

/* The least due tick in a level slot (low 32 bits): its cached bound, or
 * read from its entries when that went inexact and `exact` asks, or the slot
 * is small. With `exact` the scan is not kept: tw_get_stats must not change
 * what tw_next_expiry answers. */
static HOT_INLINE uint32_t slot_least(tw_wheel *w, unsigned list, int exact)
{
    unsigned slot = list - LIST_LEVEL0;
    uint64_t *inexact = &w->least_inexact[slot >> 6];
    uint64_t bit = UINT64_C(1) << (slot & 63);
    if (!(*inexact & bit))
        return w->least[slot];
    if (exact)
        return scan_least(w, list);
    if (w->queues[list].count <= RESCAN_PENDING &&
        w->queues[list].entries <= RESCAN_ENTRIES) {
        *inexact &= ~bit;
        return w->least[slot] = scan_least(w, list);
    }
    return w->least[slot];
}

/* Ticks from now to `tick`, 0 when it has come. */
static uint64_t ticks_until(const tw_wheel *w, uint64_t tick)
{
    return tick > w->now ? tick - w->now : 0;
}

/* The tick a periodic timer whose callback runs (NODE_REARMING) is due at
 * next: it re-arms when the callback returns. */
static uint64_t rearm_tick(const tw_wheel *w)
{
    return w->running_due + node_at(w, w->running)->interval;
}

/* Ticks to the earliest pending timer; lock held. Due queues and the near
 * slot of now (which holds timers only while it is dispatched) are due
 * now; near slots are exact; each level's first occupied slot answers with
 * its least tick, and when that lies past the slot's span (its timers were
 * all rescheduled later, see staging) the next occupied slot is asked too.
 * Staging lets the spans of levels overlap (a slot partly moved down), so
 * every level is asked, unless its first slot starts after the best answer
 * yet: O(1) but for slots holding only timers moved later. Without
 * `exact`, a big slot's inexact bound may answer early, never late. */
static uint64_t next_expiry_locked(tw_wheel *w, int exact)
{
    uint64_t step, start;
    unsigned level, list;
    if (w->queues[LIST_DUE_A].count || w->queues[LIST_DUE_B].count ||
        (w->drive && w->queues[w->now & NEAR_RING_MASK].count))
        return 0;
    step = near_next(w);
    for (level = 0; level < LEVELS && next_start(w, level) - w->now < step; level++) {
        uint32_t span = UINT32_C(1) << level_shift(level);
        if (!level_occupied(w, level))
            continue;
        list = level_first(w, level, &start);
        while (list && start - w->now < step) {
            uint32_t least = slot_least(w, list, exact);
            uint64_t until = (uint32_t)(least - (uint32_t)w->now);
            if (until < step)
                step = until;
            if ((uint32_t)(least - (uint32_t)start) < span)
                break; /* later slots start past this one's span */
            list = level_after(w, level, list, &start);
        }
    }
    if (w->running != NIL && node_at(w, w->running)->state == NODE_REARMING &&
        ticks_until(w, rearm_tick(w)) < step)
        step = ticks_until(w, rearm_tick(w));
    return step;
}

/* Ticks from now to a timer's next firing, TW_NEVER when not live; lock
 * held. A timer on a due queue runs in the next call, whatever its due
 * tick (delay 0 from a callback). */
static uint64_t remaining_locked(const tw_wheel *w, tw_id id)
{
    uint32_t index;
    const struct node *n = node_of(w, id, &index);
    if (n && n->state == NODE_REARMING)
        return ticks_until(w, rearm_tick(w));
    if (!n || n->state != NODE_LINKED)
        return TW_NEVER;
    return n->list & DUE_FLAG ? 0 : ticks_until(w, due_tick(w, n));
}
/* ==== lifetime ==========================================================
 * Handing user data back and ending the wheel: release hooks (run with the
 * lock dropped, each tracked by a frame so that tw_destroy can tell where
 * it is called from), tw_cancel's wait for a running callback, stopping
 * the timer thread, and the teardown. tw_destroy's rules (timer.h,
 * "re-entrancy") are decided in tw_destroy; these are the steps they
 * share. */

static int on_driver_thread(const tw_wheel *w)
{
    return w->drive && pthread_equal(w->drive->thread, pthread_self());
}

static int timer_thread_drives(const tw_wheel *w)
{
    return w->drive && w->drive->timer_thread;
}

/* Frees a node and hands its user data back, lock released for the hook.
 * Returns 1 when the hook called tw_destroy and the caller (tw_cancel) must
 * now finish destroying the wheel. */
static int finish_node(tw_wheel *w, uint32_t index)
{
    struct node *n = node_at(w, index);
    tw_release *release = w->releases[n->release];
    void *user_data = call_at(w, index)->user_data;
    struct hook_frame frame, **link;
    int driver;
    /* Dead from here on: while the hook runs unlocked, its id must not be
     * cancelled, rescheduled or counted again. */
    n->state = NODE_ENDED;
    if (!release) {
        node_free(w, n, index);
        return 0;
    }
    driver = on_driver_thread(w); /* decided under the lock */
    frame.thread = pthread_self();
    frame.destroy = 0;
    frame.next = w->hooks;
    w->hooks = &frame;
    unlock(w);
    release(user_data);
    lock_acquire(&w->lock, driver);
    for (link = &w->hooks; *link != &frame; link = &(*link)->next)
        ;
    *link = frame.next;
    node_free(w, n, index);
    return frame.destroy;
}

/* Lock held: wakes the tw_cancel calls waiting for the callback just
 * settled. A condition variable, not the lock's park: it sleeps on every
 * platform, whatever the lock. */
static COLD void settle_cancel_waits(tw_wheel *w)
{
    struct cancel_wait *wait;
    pthread_mutex_lock(&w->sleep_mutex);
    for (wait = w->cancel_waits; wait; wait = wait->next)
        wait->settled = 1;
    pthread_cond_broadcast(&w->wake);
    pthread_mutex_unlock(&w->sleep_mutex);
}

/* Lock held on entry and on return: sleeps until the driver has settled
 * the callback running now (the caller looks again at what it waits for).
 * Asleep, not polling the lock: a waiter that keeps retaking the lock can
 * keep the driver from ever finishing the callback on a busy machine. */
static void wait_for_callback(tw_wheel *w)
{
    struct cancel_wait wait, **link;
    wait.settled = 0;
    wait.next = w->cancel_waits;
    w->cancel_waits = &wait;
    unlock(w);
    pthread_mutex_lock(&w->sleep_mutex);
    while (!wait.settled)
        pthread_cond_wait(&w->wake, &w->sleep_mutex);
    pthread_mutex_unlock(&w->sleep_mutex);
    TW_TEST_CANCEL_WOKEN(w);
    lock(w);
    for (link = &w->cancel_waits; *link != &wait; link = &(*link)->next)
        ;
    *link = wait.next;
}

/* The timer thread's state (enum thread_state). */
static int timer_thread_state(tw_wheel *w)
{
    int state;
    pthread_mutex_lock(&w->sleep_mutex);
    state = w->thread_state;
    pthread_mutex_unlock(&w->sleep_mutex);
    return state;
}

/* 1 while a tw_thread_start or tw_thread_stop is inside the wheel. */
static int thread_calls_inside(tw_wheel *w)
{
    int inside;
    pthread_mutex_lock(&w->sleep_mutex);
    inside = w->thread_calls != 0;
    pthread_mutex_unlock(&w->sleep_mutex);
    return inside;
}

/* Waits, lock held, until no other thread drives the wheel, runs one of
 * its release hooks, waits in tw_cancel for a callback, or is inside
 * tw_thread_start/stop: only a caller that ignored tw_destroy's rules
 * (using the wheel from another thread while destroying it) waits for the
 * first two; a tw_cancel that began waiting for the callback that then
 * destroyed the wheel is woken when it returns, and must be gone before
 * the memory is, as must a start or stop that raced the destroy. */
static void wait_until_alone(tw_wheel *w)
{
    while (w->drive || w->hooks || w->cancel_waits || thread_calls_inside(w)) {
        unlock(w);
        TW_TEST_TEARDOWN_WAITS(w);
        sched_yield();
        lock(w);
    }
}

/* Hands every pending timer to its release hook; lock held. From here on
 * adds fail and nothing fires. */
static void release_pending(tw_wheel *w)
{
    unsigned list;
    uint32_t index;
    uint64_t due;
    w->destroying = 1;
    /* Release hooks run unlocked and may cancel other timers of this wheel;
     * popping queue heads keeps that safe. */
    for (list = 0; list < LIST_COUNT; list++) {
        while ((index = pop_live(w, list, &due)) != NIL) {
            /* only here does pop_live take from a level slot: keep its
             * least tick true for tw_next_expiry and tw_check in hooks */
            if (is_level_slot(list))
                forget_least(w, list - LIST_LEVEL0, node_at(w, index)->expire);
            w->live--;
            if (index == w->running) /* moved while its callback runs */
                node_at(w, index)->state = NODE_ENDED; /* run_batch ends it */
            else
                finish_node(w, index);
        }
    }
}

static void free_chunks(tw_wheel *w, struct chunk_table *t)
{
    while (t->count)
        wheel_alloc(w, t->chunks[--t->count].memory, 0);
    wheel_alloc(w, t->chunks, 0);
}

static void destroy_sync(tw_wheel *w)
{
    lock_destroy(&w->lock);
    pthread_mutex_destroy(&w->control);
    pthread_mutex_destroy(&w->sleep_mutex);
    pthread_cond_destroy(&w->wake);
}

/* Releases every pending timer and frees the wheel; lock not held, the
 * timer thread stopped, the decision to destroy taken. */
static void teardown(tw_wheel *w)
{
    tw_release *on_destroy = w->on_destroy;
    void *context = w->context;
    lock(w);
    wait_until_alone(w);
    release_pending(w); /* nothing left after a destroy from a callback */
    wait_until_alone(w); /* hooks of cancels made meanwhile by others */
    unlock(w);
    free_chunks(w, &w->node_chunks);
    free_chunks(w, &w->block_chunks);
    destroy_sync(w);
    w->realloc_fn(w, 0, w->alloc_context);
    if (on_destroy)
        on_destroy(context);
}

/* tw_thread_start and tw_thread_stop count themselves in while they may
 * touch `control`, so that a teardown racing them waits until they are
 * out; every enter_thread_call is paired with a leave_thread_call. It
 * answers the thread's state as it found it, or -EDEADLK on the timer
 * thread itself. */
static int enter_thread_call(tw_wheel *w)
{
    int state;
    pthread_mutex_lock(&w->sleep_mutex);
    state = w->thread_state;
    if (state != THREAD_IDLE && pthread_equal(w->thread, pthread_self()))
        state = -EDEADLK;
    w->thread_calls++;
    pthread_mutex_unlock(&w->sleep_mutex);
    return state;
}

static void leave_thread_call(tw_wheel *w)
{
    pthread_mutex_lock(&w->sleep_mutex);
    w->thread_calls--;
    pthread_mutex_unlock(&w->sleep_mutex);
}

/* Stops the timer thread and joins it: 0 (also when none runs), or
 * -EDEADLK on the timer thread itself. `control` makes a second stopper
 * wait for the first. When the thread's drive destroyed the wheel while
 * this call was joining it, the thread leaves the teardown to this call
 * (it cannot free a wheel that a joiner touches after the join): the wheel
 * is gone when this returns. */
static int stop_thread(tw_wheel *w)
{
    int state = enter_thread_call(w);
    if (state == -EDEADLK) {
        leave_thread_call(w);
        return state;
    }
    TW_TEST_STOP_ENTERED(w);
    pthread_mutex_lock(&w->control);
    pthread_mutex_lock(&w->sleep_mutex);
    state = w->thread_state;
    if (state == THREAD_RUNNING) {
        w->thread_state = THREAD_STOPPING;
        pthread_cond_broadcast(&w->wake); /* cancel waits sleep there too */
        pthread_mutex_unlock(&w->sleep_mutex);
        pthread_join(w->thread, NULL);
        pthread_mutex_lock(&w->sleep_mutex);
        state = w->thread_state;
        w->thread_state = THREAD_IDLE;
    }
    pthread_mutex_unlock(&w->sleep_mutex);
    pthread_mutex_unlock(&w->control);
    leave_thread_call(w); /* after `control`: a teardown destroys it */
    if (state == THREAD_LEFT_TEARDOWN)
        teardown(w);
    return 0;
}

/* The end of a tw_destroy called from a callback or a hook on the driver,
 * once the drive is over. The timer thread cannot join itself: it detaches
 * and frees the wheel as its last act, unless a stopper is joining it
 * already; then the stopper frees the wheel once the thread is gone. */
static void finish_deferred_destroy(tw_wheel *w)
{
    int state;
    pthread_mutex_lock(&w->sleep_mutex);
    state = w->thread_state;
    if (state == THREAD_IDLE || !pthread_equal(w->thread, pthread_self()))
        state = THREAD_IDLE; /* not on the timer thread */
    else if (state == THREAD_STOPPING)
        w->thread_state = THREAD_LEFT_TEARDOWN;
    else {
        w->thread_state = THREAD_IDLE;
        pthread_detach(w->thread);
    }
    pthread_mutex_unlock(&w->sleep_mutex);
    if (state == THREAD_STOPPING)
        return;
    if (state == THREAD_IDLE)
        stop_thread(w); /* a timer thread beside a tw_advance driver */
    teardown(w);
}

/* ==== dispatch ==========================================================
 * A queue is dispatched in place: each live entry is taken off its head
 * under the lock and its callback runs with the lock released. Nothing new
 * lands on a near slot being dispatched (a timer due exactly now goes to
 * the due queue that is not being run); only a periodic timer still behind
 * re-arms onto the due queue being run, behind the others. A cancel of a
 * node still in the queue leaves a stale entry that is skipped, so once
 * tw_cancel returned 1 that callback never starts. A node
 * is never freed while its callback runs: whatever happened to it meanwhile
 * is settled when the callback returns. */

/* Runs the callbacks of queue `list` (a due queue, or the near slot of
 * now); lock held, dropped around each callback. */
static int64_t run_batch(tw_wheel *w, unsigned list)
{
    int64_t ran = 0;
    uint32_t index;
    uint64_t due;
    prefetch_queue(w, list, 1);
    if (list < NEAR_SLOTS)
        order_slot(w, list);
    /* Once tw_destroy has begun (from another thread, while the timer
     * thread drives), no further callback starts: the teardown releases
     * what is left. */
    while (!w->destroying && (index = pop_live(w, list, &due)) != NIL) {
        struct node *n = node_at(w, index);
        uint32_t generation = generation_of(n);
        tw_callback *callback = call_at(w, index)->callback;
        void *user_data = call_at(w, index)->user_data;
        if (is_periodic(n)) {
            n->state = NODE_REARMING;
        } else { /* a one-shot's id dies as its callback starts */
            n->state = NODE_ENDED;
            w->live--;
        }
        w->running = index;
        w->running_due = due;
        w->fired++;
        unlock(w);
        callback(w, make_id(w, index, generation), user_data);
        lock_acquire(&w->lock, 1);
        ran++; /* n is still the node: chunks never move */
        if (n->state == NODE_REARMING && !w->destroying) {
            /* A periodic timer nobody touched while it ran: fixed rate, so
             * the next firing counts from when this one was due. Catching
             * up (due again already) happens only on a due queue (a near
             * slot's timers are due now, and the interval is at least 1):
             * back onto it, behind the timers now on it, in order. */
            uint64_t next = due + n->interval;
            n->stamp = ++w->stamp;
            if (next <= w->now)
                link_due(w, list, index, next);
            else
                schedule(w, index, n, next);
        } else if (n->state != NODE_LINKED) {
            /* one-shot done, cancelled meanwhile, or a periodic timer whose
             * callback destroyed the wheel (nothing re-arms then) */
            if (n->state == NODE_REARMING)
                w->live--;
            if (!n->release)
                node_free(w, n, index);
            else
                finish_node(w, index);
        }
        w->running = NIL;
        if (w->cancel_waits) /* they sleep until this callback is done */
            settle_cancel_waits(w);
    }
    return ran;
}

/* ==== driver ============================================================
 * tw_advance and tw_expire walk from now to a target tick, stopping only at
 * ticks where next_event() says there is work; in between nothing changes
 * but the counter and the staging shares, so the result equals ticking one
 * by one. Timers already due run first; timers made due during the walk
 * wait for the next call, so a callback re-adding itself with delay 0
 * cannot loop forever.
 *
 * One guard keeps a second driver out: the lock's driver claim, taken in
 * begin_drive before the lock and given back in end_drive. A callback
 * re-entering finds it taken, as does another thread. While the claim is
 * held, tw_wheel.drive points to the drive's frame on this thread's
 * stack. */

/* Starts a drive: 0 with the lock held and w->drive set to `d`, or -EBUSY
 * (a drive in progress, or the wheel being destroyed). */
static int begin_drive(tw_wheel *w, struct drive *d, int timer_thread)
{
    if (!claim_driver(&w->lock))
        return -EBUSY;
    lock_acquire(&w->lock, 1);
    if (w->destroying) {
        end_driver_claim(&w->lock);
        unlock(w);
        return -EBUSY;
    }
    d->thread = pthread_self();
    d->target = w->now;
    d->timer_thread = timer_thread;
    d->free_wheel = 0;
    w->drive = d;
    return 0;
}

/* Ends a drive; lock held on entry, released on return. A callback or hook
 * that destroyed the wheel left nothing pending, so the walk has ended; the
 * wheel is freed here, and d->free_wheel says so to the caller. */
static void end_drive(tw_wheel *w, struct drive *d)
{
    w->drive = NULL;
    end_driver_claim(&w->lock);
    unlock(w);
    if (d->free_wheel)
        finish_deferred_destroy(w);
}

/* Walks to `target`, ending the drive; lock held on entry (from
 * begin_drive), released on return. Returns the callbacks run. */
static int64_t walk_to(tw_wheel *w, struct drive *d, uint64_t target)
{
    int64_t ran;
    unsigned list = w->due_list;
    d->target = target;
    w->due_list = list == LIST_DUE_A ? LIST_DUE_B : LIST_DUE_A;
    ran = run_batch(w, list);
    for (;;) {
        uint64_t step = next_event(w);
        if (step == TW_NEVER || step > target - w->now)
            break;
        w->now += step;
        stage(w);
        list = (unsigned)w->now & NEAR_RING_MASK;
        if (w->queues[list].count)
            ran += run_batch(w, list);
    }
    if (w->now != target) {
        w->now = target;
        stage(w); /* the share of the ticks walked since the last event */
    }
    end_drive(w, d);
    return ran;
}

/* tw_expire, and the timer thread's call of it: the frame `d` is the
 * caller's, which reads d->free_wheel after the call. */
static int64_t drive_by_clock(tw_wheel *w, struct drive *d, int timer_thread)
{
    uint64_t target;
    if (begin_drive(w, d, timer_thread))
        return -EBUSY;
    target = expire_target(w);
    if (target == TW_NEVER) {
        end_drive(w, d); /* the one call that runs nothing, not even timers
                            already due */
        return -ERANGE;
    }
    return walk_to(w, d, target);
}

/* tw_advance. */
static int64_t drive_by_ticks(tw_wheel *w, uint64_t ticks)
{
    struct drive d;
    if (begin_drive(w, &d, 0))
        return -EBUSY;
    set_mode(w, mode_after_advance);
    if (ticks > TW_MAX_TICK - w->now) {
        end_drive(w, &d);
        return -ERANGE;
    }
    return walk_to(w, &d, w->now + ticks);
}

/* ==== timer thread ======================================================
 * skynet's dedicated timer thread: tw_expire every period, sleeping on a
 * condition variable so that stop wakes it at once. */

static void *timer_thread_main(void *argument)
{
    tw_wheel *w = argument;
    struct timespec deadline;
    struct drive d;
    pthread_mutex_lock(&w->sleep_mutex);
    while (w->thread_state == THREAD_RUNNING) {
        pthread_mutex_unlock(&w->sleep_mutex);
        d.free_wheel = 0;
        drive_by_clock(w, &d, 1);
        if (d.free_wheel)
            return NULL; /* a callback destroyed the wheel; detached */
        clock_gettime(CLOCK_MONOTONIC, &deadline);
        deadline.tv_nsec += (long)(w->period_us % 1000000u) * 1000;
        deadline.tv_sec += (time_t)(w->period_us / 1000000u);
        if (deadline.tv_nsec >= 1000000000L) {
            deadline.tv_nsec -= 1000000000L;
            deadline.tv_sec++;
        }
        pthread_mutex_lock(&w->sleep_mutex);
        while (w->thread_state == THREAD_RUNNING &&
               pthread_cond_timedwait(&w->wake, &w->sleep_mutex, &deadline) == 0)
            ;
    }
    pthread_mutex_unlock(&w->sleep_mutex);
    return NULL;
}

TW_EXPORT int tw_thread_start(tw_wheel *w, uint32_t period_us)
{
    int error;
    if (!w || period_us == 0 || w->lock.kind == TW_LOCK_NONE)
        return -EINVAL;
    /* Counted in first, so that a teardown from here on waits for this
     * call; the state is looked at before taking `control`: a stopper
     * holds it while joining, and this caller may be the very thread it
     * joins. */
    if (enter_thread_call(w) != THREAD_IDLE) { /* -EDEADLK included */
        leave_thread_call(w);
        return -EBUSY;
    }
    /* `destroying` is read holding `control`: a destroy decided after this
     * read stops the thread made below, because its stop_thread takes
     * `control` after this call lets go of it. */
    pthread_mutex_lock(&w->control);
    lock(w);
    error = w->destroying ? EBUSY : 0;
    if (!error)
        set_mode(w, mode_after_expire);
    unlock(w);
    TW_TEST_START_CHECKED(w);
    pthread_mutex_lock(&w->sleep_mutex);
    if (!error && w->thread_state != THREAD_IDLE)
        error = EBUSY;
    if (!error) {
        w->period_us = period_us;
        w->thread_state = THREAD_RUNNING;
        error = pthread_create(&w->thread, NULL, timer_thread_main, w);
        if (error)
            w->thread_state = THREAD_IDLE;
    }
    pthread_mutex_unlock(&w->sleep_mutex);
    pthread_mutex_unlock(&w->control);
    leave_thread_call(w);
    return -error;
}

TW_EXPORT int tw_thread_stop(tw_wheel *w)
{
    return w ? stop_thread(w) : -EINVAL;
}

/* ==== API: wheels ======================================================= */

TW_EXPORT void tw_config_init(struct tw_config *config)
{
    if (!config)
        return;
    memset(config, 0, sizeof *config);
    config->size = sizeof *config;
    config->tick_us = 1000;
    config->lock = TW_LOCK_ADAPTIVE;
    config->clock = TW_CLOCK_MONOTONIC;
}

/* A config from a newer header may be longer: its extra bytes must be zero,
 * or the caller asked for something this library cannot do. One from an
 * older header is shorter: the fields it lacks take their defaults (1.0's
 * config ended before `drive`). NULL is the defaults. */
#define CONFIG_SIZE_1_0 offsetof(struct tw_config, drive)

static int config_read(const struct tw_config *config, struct tw_config *c)
{
    const unsigned char *bytes = (const unsigned char *)config;
    size_t i;
    tw_config_init(c);
    if (!config)
        return 1;
    if (config->size < CONFIG_SIZE_1_0)
        return 0;
    for (i = sizeof *c; i < config->size; i++)
        if (bytes[i])
            return 0;
    memcpy(c, config, config->size < sizeof *c ? config->size : sizeof *c);
    return c->tick_us >= TW_MIN_TICK_US && c->tick_us <= TW_MAX_TICK_US &&
           (unsigned)c->lock <= TW_LOCK_ADAPTIVE &&
           (unsigned)c->clock <= TW_CLOCK_MONOTONIC_COARSE &&
           c->start_tick <= TW_MAX_TICK && (unsigned)c->drive <= TW_DRIVE_TICKS;
}

/* The lock, and the mutexes and condition the timer thread and cancel
 * waits use; 0, or an error with nothing left to destroy. */
static int init_sync(tw_wheel *w, int lock_kind)
{
    pthread_condattr_t attributes;
    int error = pthread_condattr_init(&attributes);
    if (error)
        return error;
    error = pthread_condattr_setclock(&attributes, CLOCK_MONOTONIC);
    if (!error)
        error = pthread_cond_init(&w->wake, &attributes);
    pthread_condattr_destroy(&attributes);
    if (error)
        return error;
    error = pthread_mutex_init(&w->sleep_mutex, NULL);
    if (error)
        goto no_sleep_mutex;
    error = pthread_mutex_init(&w->control, NULL);
    if (error)
        goto no_control;
    error = lock_init(&w->lock, lock_kind);
    if (!error)
        return 0;
    pthread_mutex_destroy(&w->control);
no_control:
    pthread_mutex_destroy(&w->sleep_mutex);
no_sleep_mutex:
    pthread_cond_destroy(&w->wake);
    return error;
}

/* A wheel's tag (see make_id): 31 bits, never 0, from what differs between
 * wheels without any state they share: the wheel's address, the stack's,
 * and the monotonic clock in nanoseconds (not the wheel's own clock, which
 * may be a fake one that reads the same for every wheel), stirred by a
 * 64-bit finaliser so that every input bit reaches every tag bit. */
static uint32_t draw_tag(const tw_wheel *w)
{
    struct timespec now;
    uint64_t x;
    clock_gettime(CLOCK_MONOTONIC, &now);
    x = (uint64_t)(uintptr_t)w ^ (uint64_t)(uintptr_t)&now << 20 ^
        ((uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec);
    x = (x ^ x >> 31) * UINT64_C(0x7fb5d329728ea185);
    x = (x ^ x >> 27) * UINT64_C(0x81dadef4bc2dd44d);
    x = (uint32_t)(x >> 33) & GENERATION_MASK;
    return x ? (uint32_t)x : 1;
}

/* Everything but the lock and the thread state, from a valid config. */
static void wheel_init(tw_wheel *w, const struct tw_config *c, tw_realloc_fn *realloc_fn)
{
    unsigned list;
    memset(w, 0, sizeof *w);
    w->realloc_fn = realloc_fn;
    w->alloc_context = c->alloc_context;
    w->bytes = sizeof *w;
    for (list = 0; list < LIST_COUNT; list++)
        w->queues[list].head = w->queues[list].tail =
            w->queues[list].compact_read = NO_POSITION;
    w->free_head = NIL;
    w->free_block = NIL;
    w->running = NIL;
    w->due_list = LIST_DUE_A;
    w->max_timers = c->max_timers ? c->max_timers : UINT64_MAX;
    w->on_destroy = c->on_destroy;
    w->context = c->context;
    w->now = w->staged_tick = c->start_tick;
    w->id_tag = (uint64_t)TW_TEST_WHEEL_TAG(w, draw_tag(w)) << 32;
    clock_init(w, c);
}

TW_EXPORT tw_wheel *tw_create(const struct tw_config *config)
{
    struct tw_config c;
    tw_realloc_fn *realloc_fn;
    tw_wheel *w;
    int error;
    if (!config_read(config, &c)) {
        errno = EINVAL;
        return NULL;
    }
    realloc_fn = c.realloc_fn ? c.realloc_fn : libc_realloc;
    w = realloc_fn(NULL, sizeof *w, c.alloc_context);
    if (!w) {
        errno = ENOMEM;
        return NULL;
    }
    wheel_init(w, &c, realloc_fn);
    error = init_sync(w, c.lock);
    if (error) {
        realloc_fn(w, 0, c.alloc_context);
        errno = error;
        return NULL;
    }
    return w;
}

/* tw_destroy's decision under the lock, by its re-entrancy rules (see
 * timer.h): -EBUSY; 0 when this call is done, the destroy finished by the
 * drive or by the outermost tw_cancel running a hook on this thread; or 1
 * to stop the timer thread and tear the wheel down.
 *  - On the driver (a callback, or a hook it runs): every pending timer is
 *    released now, as a plain destroy would; the batch stops after this
 *    callback and the drive frees the wheel as it ends. Not on a timer
 *    thread another thread is stopping: that one joins it and uses the
 *    wheel after this call.
 *  - Inside hooks of cancels on this thread: the outermost of those
 *    tw_cancel calls destroys the wheel once its hook has returned, so no
 *    caller further in still holds a wheel that was freed.
 *  - Hooks of other threads' cancels, or another driver, are the caller's
 *    race; the timer thread's own hooks are part of its drive, which
 *    stopping the thread waits for.
 * A destroy decided (0 or 1) marks the wheel at once: from then on adds
 * fail, and a callback still running on the timer thread, which this call
 * will stop and join, is refused rather than beginning a second destroy. */
static int destroy_decision(tw_wheel *w)
{
    struct hook_frame *frame, *outermost = NULL;
    int timer_thread = timer_thread_drives(w);
    int foreign = w->drive && !timer_thread; /* another thread drives */
    if (w->destroying)
        return -EBUSY;
    if (on_driver_thread(w)) {
        if (timer_thread && timer_thread_state(w) == THREAD_STOPPING)
            return -EBUSY;
        w->drive->free_wheel = 1;
        release_pending(w);
        return 0;
    }
    for (frame = w->hooks; frame; frame = frame->next)
        if (pthread_equal(frame->thread, pthread_self()))
            outermost = frame;
        else if (!timer_thread || !pthread_equal(frame->thread, w->drive->thread))
            foreign = 1;
    if (outermost)
        outermost->destroy = 1;
    else if (foreign)
        return -EBUSY;
    w->destroying = 1;
    return outermost ? 0 : 1;
}

TW_EXPORT int tw_destroy(tw_wheel *w)
{
    int decision;
    if (!w)
        return 0;
    lock(w);
    decision = destroy_decision(w);
    unlock(w);
    if (decision <= 0)
        return decision;
    TW_TEST_DESTROY_DECIDED(w);
    /* Not the timer thread, whose calls all come from its drive: so the
     * stop cannot fail. */
    stop_thread(w);
    teardown(w);
    return 0;
}

/* ==== API: timers ======================================================= */

TW_EXPORT tw_id tw_add(tw_wheel *w, uint64_t delay, tw_callback *callback,
                       void *user_data)
{
    return add_timer(w, delay, 0, callback, NULL, user_data);
}

TW_EXPORT tw_id tw_add_periodic(tw_wheel *w, uint64_t first, uint64_t interval,
                                tw_callback *callback, void *user_data)
{
    if (interval == 0) {
        errno = EINVAL;
        return 0;
    }
    return add_timer(w, first, interval, callback, NULL, user_data);
}

TW_EXPORT tw_id tw_add_ex(tw_wheel *w, uint64_t delay, uint64_t interval,
                          tw_callback *callback, tw_release *release,
                          void *user_data)
{
    return add_timer(w, delay, interval, callback, release, user_data);
}

/* tw_cancel in every case; lock held, n as node_of found it. Out of line:
 * tw_cancel inlines only its common case. */
static NOINLINE int cancel_locked(tw_wheel *w, struct node *n, uint32_t index)
{
    int cancelled;
    uint32_t generation;
    if (!n) {
        unlock(w);
        return 0;
    }
    cancelled = n->state == NODE_LINKED || n->state == NODE_REARMING;
    if (cancelled) {
        if (n->state == NODE_LINKED)
            unlink_node(w, n);
        w->live--;
        w->cancelled++;
        n->state = NODE_ENDED; /* freed below, or by run_batch when
                                  its running callback returns */
    }
    if (cancelled && w->running != index) {
        int destroy = finish_node(w, index);
        unlock(w);
        if (destroy) { /* tw_destroy was called by the release hook */
            stop_thread(w);
            teardown(w);
        }
        return 1;
    }
    /* Its callback is running on the driver: wait for it (and its release)
     * to finish, unless this is that callback calling. TW_LOCK_NONE has no
     * other thread to wait for. */
    generation = generation_of(n);
    while (w->lock.kind != TW_LOCK_NONE && !on_driver_thread(w) &&
           w->running == index && generation_of(n) == generation)
        wait_for_callback(w);
    unlock(w);
    return cancelled;
}

/* tw_cancel with a lock to wait for. */
static NOINLINE int cancel_rest(tw_wheel *w, tw_id id)
{
    uint32_t index = NIL;
    struct node *n;
    lock(w);
    n = node_of(w, id, &index);
    return cancel_locked(w, n, index);
}

/* The end of a cancel whose queue needs settling. */
static NOINLINE int settle_and_unlock(tw_wheel *w, unsigned list)
{
    settle_queue(w, list);
    unlock(w);
    return 1;
}

TW_EXPORT int tw_cancel(tw_wheel *w, tw_id id)
{
    uint32_t index = NIL;
    struct node *n;
    unsigned list;
    int settle;
    if (!w)
        return -EINVAL;
    if (!lock_try(&w->lock))
        return cancel_rest(w, id);
    n = node_of(w, id, &index);
    /* the common case: a pending timer with no release hook to run */
    if (!n || n->state != NODE_LINKED || n->release || w->running == index)
        return cancel_locked(w, n, index);
    list = list_of(n);
    settle = take_out(w, n, list);
    w->live--;
    w->cancelled++;
    node_free(w, n, index);
    if (settle)
        return settle_and_unlock(w, list);
    unlock(w);
    return 1;
}

/* KEEP_INTERVAL: tw_reschedule, which leaves the interval as it is. */
#define KEEP_INTERVAL UINT64_MAX

/* Whether a reschedule to `due` may leave the node's entry where it is: a
 * timer waiting in a level slot, moved later. The staging that reaches the
 * slot files it by its new tick (see "staging"), and its stamp keeps its
 * place among the timers of that tick (see "order"). A delay of 0 moves
 * now (while driving, to the due queue: see schedule_call). */
static HOT_INLINE int moves_in_place(const tw_wheel *w, const struct node *n,
                                     uint64_t due, uint64_t delay)
{
    uint32_t time = (uint32_t)w->now;
    /* a node in a level slot is placed (NODE_LINKED): others have no slot */
    return is_level_slot(n->list) && delay != 0 && due > w->now &&
           (uint32_t)((uint32_t)due - time) > (uint32_t)(n->expire - time);
}

/* Moves a timer now: a new entry where an add would file it, the old one
 * left stale. The entry comes from the block pool, grown first when it can
 * be. When the allocator refuses, the queue the node leaves is compacted
 * at once: that takes back at least the entry it left there, so the move
 * never fails for memory (a periodic timer whose callback runs has no
 * entry: it takes the one kept for its re-arm, see reserve_entries). That
 * compaction costs a pass over the queue, paid only while memory is short.
 * Lock held; the move ends the reschedule: it unlocks and returns 1. Out of
 * line, and called last, so that the move in place saves no registers. */
static NOINLINE int move_now(tw_wheel *w, uint32_t index, struct node *n,
                             uint64_t due, uint64_t delay)
{
    int short_of_entries = reserve_entries(w, 1) != 0;
    if (n->state == NODE_LINKED) {
        unsigned list = list_of(n);
        unlink_node(w, n);
        if (short_of_entries)
            compact_whole(w, list);
    }
    schedule_call(w, index, n, due, delay);
    unlock(w);
    return 1;
}

/* The move in place itself: the node's tick, and the slot's least tick
 * marked inexact if the node held it. */
static HOT_INLINE void move_in_place(tw_wheel *w, struct node *n, uint64_t due)
{
    forget_least(w, n->list - LIST_LEVEL0, n->expire);
    n->expire = (uint32_t)due;
}

/* The end of every reschedule that moves its timer: its new stamp, then
 * the move in place or now; unlocks and returns 1. */
static HOT_INLINE int reschedule_move(tw_wheel *w, uint32_t index, struct node *n,
                                      uint64_t due, uint64_t delay)
{
    n->stamp = ++w->stamp;
    w->rescheduled++;
    if (!moves_in_place(w, n, due, delay))
        return move_now(w, index, n, due, delay);
    move_in_place(w, n, due);
    unlock(w);
    return 1;
}

/* tw_reschedule in every case; lock held, n as node_of found it, `clock`
 * as call_clock read it. Out of line, so that the common case, inlined in
 * tw_reschedule, saves no registers. */
static NOINLINE int reschedule_locked(tw_wheel *w, struct node *n, uint32_t index,
                                      uint64_t delay, uint64_t interval, uint64_t clock)
{
    uint64_t due = 0;
    int result = 1;
    if (!n || w->destroying || !(n->state == NODE_LINKED || n->state == NODE_REARMING))
        result = 0;
    else if ((due = due_of(w, delay, clock)) == TW_NEVER)
        result = -ERANGE;
    if (result != 1) {
        unlock(w);
        return result;
    }
    /* A periodic timer made a one-shot while its callback runs is linked
     * again by move_now, so run_batch leaves it alone; its id dies when it
     * next starts, as any one-shot's. */
    if (interval != KEEP_INTERVAL)
        set_interval(n, (uint32_t)interval);
    return reschedule_move(w, index, n, due, delay);
}

/* tw_reschedule with a lock to wait for; `clock` as call_clock read it. */
static NOINLINE int reschedule_waiting(tw_wheel *w, tw_id id, uint64_t delay,
                                       uint64_t interval, uint64_t clock)
{
    uint32_t index = NIL;
    struct node *n;
    lock(w);
    n = node_of(w, id, &index);
    return reschedule_locked(w, n, index, delay, interval, clock);
}

/* The common cases, inlined twice (see reschedule): a pending timer moved
 * with its interval kept, in place (an idle timeout on every packet) or
 * now. Every other case, a wait and every error go out of line, last, so
 * that a tick-driven wheel's common case saves no registers. */
static HOT_INLINE int reschedule_fast(tw_wheel *w, tw_id id, uint64_t delay,
                                      uint64_t interval, uint64_t clock)
{
    uint32_t index = NIL;
    struct node *n;
    uint64_t due;
    if (!lock_try(&w->lock))
        return reschedule_waiting(w, id, delay, interval, clock);
    n = node_of(w, id, &index);
    if (!n || n->state != NODE_LINKED || w->destroying || interval != KEEP_INTERVAL ||
        (due = due_of(w, delay, clock)) == TW_NEVER)
        return reschedule_locked(w, n, index, delay, interval, clock);
    return reschedule_move(w, index, n, due, delay);
}

/* A clock-driven wheel's reschedule: the clock is read before the lock (a
 * clock_fn may be slow), which takes a call. */
static NOINLINE int reschedule_clocked(tw_wheel *w, tw_id id, uint64_t delay,
                                       uint64_t interval)
{
    return reschedule_fast(w, id, delay, interval, call_clock(w));
}

static HOT_INLINE int reschedule(tw_wheel *w, tw_id id, uint64_t delay, uint64_t interval)
{
    if (!w)
        return -EINVAL;
    if (delay > TW_MAX_DELAY || (interval != KEEP_INTERVAL && interval > TW_MAX_DELAY))
        return -ERANGE;
    if (delays_read_clock(clock_mode(w)))
        return reschedule_clocked(w, id, delay, interval);
    return reschedule_fast(w, id, delay, interval, NO_READING);
}

TW_EXPORT int tw_reschedule(tw_wheel *w, tw_id id, uint64_t delay)
{
    return reschedule(w, id, delay, KEEP_INTERVAL);
}

TW_EXPORT int tw_reschedule_ex(tw_wheel *w, tw_id id, uint64_t delay, uint64_t interval)
{
    return reschedule(w, id, delay, interval);
}

TW_EXPORT uint64_t tw_remaining(tw_wheel *w, tw_id id)
{
    uint64_t result;
    if (!w)
        return TW_NEVER;
    lock(w);
    result = remaining_locked(w, id);
    unlock(w);
    return result;
}

/* ==== API: driving ====================================================== */

TW_EXPORT uint64_t tw_gettime(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

TW_EXPORT int64_t tw_expire(tw_wheel *w)
{
    struct drive d;
    return w ? drive_by_clock(w, &d, 0) : -EINVAL;
}

TW_EXPORT int64_t tw_advance(tw_wheel *w, uint64_t ticks)
{
    return w ? drive_by_ticks(w, ticks) : -EINVAL;
}

TW_EXPORT uint64_t tw_next_expiry(tw_wheel *w)
{
    uint64_t result;
    if (!w)
        return TW_NEVER;
    lock(w);
    result = next_expiry_locked(w, 0);
    unlock(w);
    return result;
}

TW_EXPORT int32_t tw_timeout_ms(tw_wheel *w)
{
    uint64_t ticks, due_us = 0, last_us, clock, wait_us;
    int by_clock;
    if (!w)
        return -1;
    lock(w);
    ticks = next_expiry_locked(w, 0);
    by_clock = ticks_have_times(clock_mode(w));
    last_us = w->clock.last_us;
    if (ticks == TW_NEVER || ticks == 0) {
        unlock(w);
        return ticks == 0 ? 0 : -1;
    }
    if (by_clock)
        due_us = tick_start_us(w, ticks);
    unlock(w);
    wait_us = ticks > UINT64_MAX / w->clock.tick_us ? UINT64_MAX : ticks * w->clock.tick_us;
    /* Read after the lock: a later reading can only shorten the wait. A
     * clock that went back makes the next tw_expire re-base, after which
     * the timer is `ticks` whole ticks away: wait_us stands. */
    if (by_clock && (clock = read_clock(w)) >= last_us)
        wait_us = due_us > clock ? due_us - clock : 0;
    wait_us = wait_us / 1000 + (wait_us % 1000 != 0);
    return wait_us > INT32_MAX ? INT32_MAX : (int32_t)wait_us;
}

/* ==== API: absolute time ================================================
 * Deadlines as readings of the wheel's own clock, for callers that sleep
 * until a point in time (an event loop's timer, a C++ time_point) rather
 * than for a number of ticks. */

TW_EXPORT uint64_t tw_clock_us(tw_wheel *w)
{
    return w ? read_clock(w) : 0;
}

/* Lock held on entry, released on return. `ticks` from now (TW_NEVER for
 * none) as the clock reading at which that tick's tw_expire() runs it: the
 * tick's start by the reference point, which tw_expire() counts from. A
 * wheel only tw_advance drives has no such point: its ticks are placed
 * from the clock as it reads now, one tick length each. */
static uint64_t deadline_unlock(tw_wheel *w, uint64_t ticks)
{
    uint64_t result = TW_NEVER;
    if (ticks == TW_NEVER || ticks_have_times(clock_mode(w))) {
        if (ticks != TW_NEVER)
            result = tick_start_us(w, ticks);
        unlock(w);
        return result;
    }
    unlock(w);
    return ticks_after_us(w, read_clock(w), ticks);
}

TW_EXPORT uint64_t tw_deadline_us(tw_wheel *w, tw_id id)
{
    if (!w)
        return TW_NEVER;
    lock(w);
    return deadline_unlock(w, remaining_locked(w, id));
}

TW_EXPORT uint64_t tw_next_deadline_us(tw_wheel *w)
{
    if (!w)
        return TW_NEVER;
    lock(w);
    return deadline_unlock(w, next_expiry_locked(w, 0));
}

/* ==== API: inspection =================================================== */

TW_EXPORT uint64_t tw_now(tw_wheel *w)
{
    uint64_t now;
    if (!w)
        return 0;
    lock(w);
    now = w->now;
    unlock(w);
    return now;
}

TW_EXPORT uint64_t tw_count(tw_wheel *w)
{
    uint64_t live;
    if (!w)
        return 0;
    lock(w);
    live = w->live;
    unlock(w);
    return live;
}

TW_EXPORT void *tw_context(tw_wheel *w)
{
    return w ? w->context : NULL; /* written once, at creation */
}

TW_EXPORT uint32_t tw_tick_us(tw_wheel *w)
{
    return w ? w->clock.tick_us : 0;
}

TW_EXPORT int tw_get_stats(tw_wheel *w, struct tw_stats *stats)
{
    struct tw_stats s;
    uint64_t *group_count[] = {&s.pending_near,     &s.pending_level[0],
                               &s.pending_level[1], &s.pending_level[2],
                               &s.pending_level[3], &s.pending_due};
    unsigned list;
    size_t size;
    if (!w || !stats || stats->size < 8)
        return -EINVAL;
    size = stats->size < sizeof s ? stats->size : sizeof s;
    memset(&s, 0, sizeof s);
    s.size = (uint32_t)size;
    s.tick_us = w->clock.tick_us;
    lock(w);
    s.now = w->now;
    s.pending = w->live;
    for (list = 0; list < LIST_COUNT; list++) /* not kept on the hot paths */
        *group_count[group_of(list)] += w->queues[list].count;
    s.pool_capacity = (uint64_t)w->node_chunks.count * CHUNK_NODES;
    s.pool_free = w->free_count + (s.pool_capacity - w->used);
    s.bytes = w->bytes;
    s.added = w->added;
    s.fired = w->fired;
    s.cancelled = w->cancelled;
    s.rescheduled = w->rescheduled;
    s.cascaded = w->cascaded;
    s.rebases = w->rebases;
    if (size >= offsetof(struct tw_stats, next_expiry_exact) + sizeof s.next_expiry_exact)
        s.next_expiry_exact = next_expiry_locked(w, 1); /* may read a slot */
    s.broken_invariant = w->broken;
    unlock(w);
    memcpy(stats, &s, size);
    return 0;
}

/* ==== checker ===========================================================
 * tw_check names the first invariant it finds broken
 * (tw_stats.broken_invariant), one checker per part: the drive, the clock,
 * the slots (each queue: its entries, counts, bit, placement, least tick,
 * compaction, each timer's release hook), the pool and the blocks. Hook
 * frames and cancel waits live on other threads' stacks and are not
 * walked. A value
 * that fails is recorded and the walk goes on; a link that fails (an index
 * out of range) ends that walk, which would otherwise read outside the
 * wheel. */

struct verdict {
    const char *broken;     /* the first invariant found broken, or NULL */
    uint64_t linked;        /* live entries seen in the queues */
    uint64_t entries;       /* entries, live and stale */
    uint64_t blocks;        /* blocks the queues hold */
};

/* Records `what` as broken unless `holds`; returns `holds`. */
static int check(struct verdict *v, int holds, const char *what)
{
    if (!holds && !v->broken)
        v->broken = what;
    return holds;
}

static void check_drive(const tw_wheel *w, struct verdict *v)
{
    check(v, !w->drive || lock_driver_claimed(&w->lock),
          "a drive in progress holds the driver claim");
    check(v, w->due_list == LIST_DUE_A || w->due_list == LIST_DUE_B,
          "the collecting due queue is one of the two");
    check(v, w->running == NIL || w->running < w->used,
          "the running callback's node has been handed out");
}

static void check_clock(const tw_wheel *w, struct verdict *v)
{
    check(v, clock_mode(w) <= MODE_TICKS_CLOCKED, "the drive mode is known");
    check(v, w->clock.base_tick <= w->now,
          "the clock's reference tick is not ahead of now");
    check(v, w->staged_tick <= w->now, "the staging is not ahead of now");
}

/* The phase of a walk over a queue under compaction at `position`: before
 * its write cursor (0), between the cursors where all entries are stale
 * (1), past its read cursor or none under way (2). */
static int compact_phase(const struct queue *q, int phase, uint32_t position)
{
    if (phase == 0 && position == q->compact_write)
        phase = 1;
    if (phase == 1 && position == q->compact_read)
        phase = 2;
    return phase;
}

/* Whether slot `list` may hold a timer due at `expire` at time `time`: the
 * slot adds file it in, or the one staging moves it to, one level down in
 * the half of the ring that holds the next window. */
static int may_hold(unsigned list, uint32_t expire, uint32_t time)
{
    /* the ring below `level`: near for level 0 */
    unsigned level, below = 0, below_shift = 0, mask = NEAR_RING_MASK;
    if (list == slot_for(expire, time))
        return 1;
    for (level = 0; level < LEVELS; level++) {
        /* staged from level `level`: its next slot's span holds expire */
        unsigned shift = level_shift(level);
        if ((((expire >> shift) - (time >> shift)) & (UINT32_MAX >> shift)) == 1 &&
            list == below + ((expire >> below_shift) & mask))
            return 1;
        below = level_list(level);
        below_shift = shift;
        mask = LEVEL_RING_MASK;
    }
    return 0;
}

/* Whether a timer due at `expire` may lie in level slot `list` because it
 * was rescheduled past the slot's span while it waited there (see
 * moves_in_place): the slot is staged before that tick comes, and files it
 * anew. Not the slot time is in: a timer waits in a slot only until its
 * span begins. */
static int moved_past(const tw_wheel *w, unsigned list, uint32_t expire)
{
    unsigned level = (list - LIST_LEVEL0) / LEVEL_SLOTS;
    uint64_t start;
    if (!is_level_slot(list))
        return 0;
    start = slot_start(w, level, list);
    return start > w->now && w->now + (uint32_t)(expire - (uint32_t)w->now) >=
                                 start + (UINT64_C(1) << level_shift(level));
}

/* A live entry's due tick against the slot holding it. Due queues hold
 * any tick up to now (or the drive's target). */
static void check_placement(const tw_wheel *w, unsigned list, const struct node *n,
                            struct verdict *v)
{
    uint32_t time = (uint32_t)w->now, expire = n->expire;
    if (list >= LIST_SLOTS)
        return;
    if (list == (time & NEAR_RING_MASK)) {
        check(v, w->drive && expire == time,
              "the near slot of now holds only timers due now, while driving");
        return;
    }
    check(v, expire != time && (may_hold(list, expire, time) ||
                                moved_past(w, list, expire)),
          "a slot holds only timers its span (or the staging into it) allows, "
          "or timers rescheduled past its span while they waited in it");
    check(v, (uint32_t)(expire - time) <= TW_MAX_DELAY,
          "a slot holds only timers at most TW_MAX_DELAY ahead");
}

/* A level slot's cached least tick against `least`, the least distance
 * from now among its live entries. */
static void check_least(const tw_wheel *w, unsigned slot, uint32_t least,
                        struct verdict *v)
{
    uint32_t cached = w->least[slot] - (uint32_t)w->now;
    int inexact = (int)((w->least_inexact[slot >> 6] >> (slot & 63)) & 1);
    check(v, cached <= least && cached != 0,
          "a level slot's least tick is a lower bound on its timers, ahead of now");
    check(v, inexact || cached == least,
          "a level slot's least tick is exact unless marked inexact");
}

/* The header of queue `list`, before its entries are walked. */
static void check_queue_header(const tw_wheel *w, unsigned list, struct verdict *v)
{
    const struct queue *q = &w->queues[list];
    check(v, (q->count == 0) == (q->entries == 0) && q->count <= q->entries,
          "a queue's live entries are among its entries, and it has some exactly when it has live ones");
    check(v, (q->entries == 0) == (q->head == NO_POSITION),
          "a queue holds blocks exactly when it has entries");
    check(v, q->entries || q->compact_read == NO_POSITION,
          "an empty queue is not under compaction");
    check(v, list >= LIST_SLOTS ||
                 (int)((w->occupied[list >> 6] >> (list & 63)) & 1) == (q->count != 0),
          "a slot's occupancy bit is set exactly when it holds a live entry");
}

/* A placed node of queue `list`; `stamp` is the previous live entry's
 * stamp, `in_order` whether the queue must hold its stamps ascending. */
static void check_timer(const tw_wheel *w, unsigned list, const struct node *n,
                        uint64_t stamp, int in_order, struct verdict *v)
{
    check(v, list_of(n) == list, "a placed node names the queue holding its entry");
    check(v, n->release <= w->release_count,
          "a timer's release hook is one the wheel remembers");
    check_placement(w, list, n, v);
    check(v, n->stamp <= w->stamp && n->stamp > 0,
          "a timer's stamp is one the wheel handed out");
    check(v, list >= NEAR_SLOTS || n->stamp <= w->near_stamp[list],
          "a near slot's highest stamp is at least its timers'");
    check(v, !in_order || n->stamp > stamp,
          "a near slot not marked unsorted holds its timers in stamp order");
}

static void check_queue(const tw_wheel *w, unsigned list, struct verdict *v)
{
    const struct queue *q = &w->queues[list];
    uint32_t time = (uint32_t)w->now, position = q->head, left, index;
    uint32_t live = 0, holes = 0, least = UINT32_MAX; /* distance from time */
    int phase = q->compact_read == NO_POSITION ? 2 : 0, is_live;
    uint64_t stamp = 0; /* the last live entry's */
    int in_order = list < NEAR_SLOTS && !((w->unsorted[list >> 6] >> (list & 63)) & 1);
    check_queue_header(w, list, v);
    v->blocks += q->entries != 0;
    for (left = q->entries; left > 0; left--, position++) {
        const struct node *n;
        phase = compact_phase(q, phase, position);
        if ((position & OFFSET_MASK) == BLOCK_ENTRIES) {
            uint32_t next = block_of(w, position - 1)->next;
            if (!check(v, next < block_count(w) && ++v->blocks <= block_count(w),
                       "a queue's blocks are a chain of blocks that exist"))
                return;
            position = next_position(w, position);
            phase = compact_phase(q, phase, position);
        }
        if (!check(v, (position & OFFSET_MASK) < BLOCK_ENTRIES &&
                          (position >> POSITION_BITS) < block_count(w),
                   "a queue's positions lie in blocks that exist") ||
            !check(v, (index = entry_at(w, position)) < w->used,
                   "an entry names a node handed out"))
            return;
        is_live = entry_live(w, index, position);
        check(v, phase != 1 || !is_live,
              "compaction leaves only stale entries between its cursors");
        holes += phase == 1;
        if (!is_live)
            continue;
        n = node_at(w, index);
        check_timer(w, list, n, stamp, in_order, v);
        stamp = n->stamp;
        live++;
        if ((uint32_t)(n->expire - time) < least)
            least = n->expire - time;
    }
    check(v, live == q->count, "a queue's live count is its live entries");
    check(v, position == q->tail, "a queue's tail follows its last entry");
    check(v, !q->entries || block_of(w, q->tail - 1)->next == NIL,
          "a queue's last block ends its chain");
    check(v, q->compact_read == NO_POSITION ||
                 (compact_phase(q, phase, position) == 2 && holes == q->compact_holes),
          "a compaction's cursors and holes match its queue");
    if (is_level_slot(list) && q->count)
        check_least(w, list - LIST_LEVEL0, least, v);
    v->entries += q->entries;
    v->linked += live;
}

static void check_slots(const tw_wheel *w, struct verdict *v)
{
    unsigned list, word;
    for (word = 0; word < LIST_SLOTS / 64; word++)
        check(v, !w->occupied[word] == !((w->occupied_words >> word) & 1),
              "an occupancy word's summary bit is set exactly when the word has a bit");
    for (list = 0; list < LIST_COUNT; list++)
        check_queue(w, list, v);
    check(v, v->entries == w->entries, "the entry count is the queues' entries");
}

/* After check_slots: v->linked is the live entries of every queue. */
static void check_pool(const tw_wheel *w, struct verdict *v)
{
    uint64_t placed = 0, detached = 0, free_nodes = 0;
    uint32_t index;
    int running_apart = w->running != NIL && node_at(w, w->running)->state != NODE_LINKED;
    for (index = 0; index < w->used; index++) {
        placed += node_at(w, index)->state == NODE_LINKED;
        detached += node_at(w, index)->state == NODE_DETACHED;
    }
    check(v, placed == v->linked, "every placed node has exactly one live entry");
    check(v, detached == 0, "no node stays detached once the lock is free");
    check(v, v->linked + (running_apart &&
                          node_at(w, w->running)->state == NODE_REARMING) == w->live,
          "the live count is the placed timers and a periodic one re-arming");
    for (index = w->free_head; index != NIL; index = node_at(w, index)->link)
        if (!check(v, index < w->used && ++free_nodes <= w->free_count &&
                          node_at(w, index)->state == NODE_FREE,
                   "the free list holds free nodes, free_count of them"))
            return;
    check(v, free_nodes == w->free_count, "the free list holds free_count nodes");
    check(v, free_nodes + v->linked + running_apart <= w->used,
          "no node is both free and in use");
}

/* After check_slots: v->blocks is the blocks the queues hold. */
static void check_blocks(const tw_wheel *w, struct verdict *v)
{
    uint64_t free_blocks = 0;
    uint32_t block;
    for (block = w->free_block; block != NIL; block = block_at(w, block)->next)
        if (!check(v, block < block_count(w) && ++free_blocks <= block_count(w),
                   "the free blocks are a chain of blocks that exist"))
            return;
    check(v, v->blocks + free_blocks == block_count(w), "every block is in one queue or free");
    check(v, !w->entries || block_count(w) >= blocks_needed(w->entries),
          "the blocks cover the reserve that lets nodes move without allocating");
}

TW_EXPORT int tw_check(tw_wheel *w)
{
    struct verdict v = {NULL, 0, 0, 0};
    if (!w)
        return -EINVAL;
    lock(w);
    check_drive(w, &v);
    check_clock(w, &v);
    check_slots(w, &v);
    check_pool(w, &v);
    check_blocks(w, &v);
    w->broken = v.broken;
    unlock(w);
    return v.broken ? -EFAULT : 0;
}

/* ==== API: errors, versions and the function table ==================== */

static const struct {
    int code;
    const char *text;
} error_texts[] = {
    {0, "success"},
    {EINVAL, "invalid argument"},
    {ERANGE, "delay, interval or tick out of range"},
    {ENOSPC, "pending timer cap reached"},
    {ENOMEM, "out of memory"},
    {EBUSY, "wheel is busy: being driven or destroyed"},
    {EDEADLK, "would deadlock: called from the timer thread"},
    {EMFILE, "too many distinct release functions on one wheel"},
    {EFAULT, "wheel invariant broken"},
};

TW_EXPORT const char *tw_strerror(int error)
{
    size_t i;
    for (i = 0; i < sizeof error_texts / sizeof error_texts[0]; i++)
        if (error_texts[i].code == error || -error_texts[i].code == error)
            return error_texts[i].text;
    return "unknown error";
}

TW_EXPORT uint32_t tw_version(void)
{
    return TW_VERSION_HEX;
}

TW_EXPORT const char *tw_version_string(void)
{
    return TW_VERSION_STRING;
}

/* One constant table per library; it only ever grows at its end, so a host
 * built against version N can use any library of version >= N. */

static const struct tw_api api_table = {
    sizeof(struct tw_api),
    TW_API_VERSION,
    tw_version,
    tw_version_string,
    tw_strerror,
    tw_config_init,
    tw_create,
    tw_destroy,
    tw_add,
    tw_add_periodic,
    tw_add_ex,
    tw_cancel,
    tw_reschedule,
    tw_remaining,
    tw_gettime,
    tw_expire,
    tw_advance,
    tw_next_expiry,
    tw_timeout_ms,
    tw_thread_start,
    tw_thread_stop,
    tw_now,
    tw_count,
    tw_tick_us,
    tw_get_stats,
    tw_check,
    tw_reschedule_ex,
    tw_clock_us,
    tw_deadline_us,
    tw_next_deadline_us,
    tw_context,
};

TW_EXPORT const struct tw_api *tw_get_api(uint32_t version)
{
    if (version == 0 || version > TW_API_VERSION)
        return NULL;
    return &api_table;
}
