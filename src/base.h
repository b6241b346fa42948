/* ==== base: what every part stands on ===================================
 * Feature macros and includes, the atomics the lock and the clock use, the
 * wheel's geometry, every type (each struct's fields belong to the part its
 * comment names), the tuning constants, the test hooks, and small helpers.
 * Owns no state. */
/* The platform: POSIX (pthread, clock_gettime, the Linux futex) or Win32
 * (SRW locks, condition variables, _beginthreadex, QueryPerformanceCounter,
 * WaitOnAddress: Windows 8 or later), chosen by _WIN32 alone, so that a
 * MinGW build runs the code MSVC compiles. src/platform.c wraps them. */
#if defined(_WIN32)
#define TW_WINDOWS 1
#if !defined(_WIN32_WINNT) || _WIN32_WINNT < 0x0602
#undef _WIN32_WINNT
#define _WIN32_WINNT 0x0602 /* WaitOnAddress */
#endif
#ifndef WIN32_LEAN_AND_MEAN
#define WIN32_LEAN_AND_MEAN
#endif
#ifndef NOMINMAX
#define NOMINMAX
#endif
#else
#if !defined(_POSIX_C_SOURCE) || _POSIX_C_SOURCE < 200809L
#undef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif
#if defined(__linux__) && !defined(_DEFAULT_SOURCE)
#define _DEFAULT_SOURCE 1 /* syscall(), for the adaptive lock's futex */
#endif
#endif

#include "../timer.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#if defined(TW_WINDOWS)
#include <windows.h>
#include <intrin.h>
#include <mmsystem.h>
#include <process.h>
#else
#include <pthread.h>
#include <sched.h>
#include <time.h>
#endif
/* TW_NO_FUTEX: build the portable path on Linux too (a test does). */
#if defined(__linux__) && !defined(TW_NO_FUTEX)
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>
#define TW_HAVE_FUTEX 1
#endif

/* The GNU builtins and attributes, unless TW_NO_GNU_BUILTINS asks for the
 * code a compiler without them (MSVC) gets: the meson option `fallbacks`
 * builds it with GCC to test it. */
#if defined(__GNUC__) && !defined(TW_NO_GNU_BUILTINS)
#define TW_GNU 1
#endif

/* C11 atomics when the compiler offers them; else the GNU builtins (same
 * memory model), which keep strict C99 builds working; else, on Windows,
 * the Interlocked functions (full barriers, stronger than each use asks).
 * The lock's words use them, and so does the clock's drive mode, which
 * adds read before taking the lock. TW_NO_C11_ATOMICS: as for MSVC, which
 * defines __STDC_NO_ATOMICS__. */
#if defined(__STDC_VERSION__) && __STDC_VERSION__ >= 201112L &&              \
    !defined(__STDC_NO_ATOMICS__) && !defined(TW_NO_C11_ATOMICS)
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
#elif defined(TW_GNU)
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
#elif defined(TW_WINDOWS)
/* A relaxed load is a volatile read (32 bits: never torn); every other
 * operation is an Interlocked one, a full barrier on every architecture
 * Windows runs on (x86, x64, ARM64). */
typedef volatile LONG spin_word;
#define spin_init(p) (*(p) = 0)
#define spin_load(p) ((unsigned)*(p))
#define spin_store(p, v) ((void)InterlockedExchange((p), (LONG)(v)))
#define spin_exchange_acquire(p, v) ((unsigned)InterlockedExchange((p), (LONG)(v)))
#define spin_store_release(p, v) ((void)InterlockedExchange((p), (LONG)(v)))
#define spin_claim(p, expected, v) spin_claim_interlocked((p), (expected), (v))
#define spin_load_sc(p) ((unsigned)InterlockedCompareExchange((p), 0, 0))
#define spin_store_sc(p, v) ((void)InterlockedExchange((p), (LONG)(v)))
#define spin_exchange_sc(p, v) ((unsigned)InterlockedExchange((p), (LONG)(v)))
#define spin_claim_sc(p, expected, v) spin_claim_interlocked((p), (expected), (v))
/* 1 when *p held *expected and now holds v; else *expected gets *p. */
static int spin_claim_interlocked(spin_word *p, unsigned *expected, unsigned v)
{
    LONG seen = InterlockedCompareExchange(p, (LONG)v, (LONG)*expected);
    if ((unsigned)seen == *expected)
        return 1;
    *expected = (unsigned)seen;
    return 0;
}
#else
#error "twheel needs C11 atomics, the GNU __atomic builtins or Windows"
#endif

/* What the platform's threads and sleeps are made of (see src/platform.c):
 * a mutex, a condition variable, a thread that can be joined, and the
 * identity of a thread. */
#if defined(TW_WINDOWS)
typedef SRWLOCK sys_mutex;
typedef CONDITION_VARIABLE sys_cond;
typedef DWORD thread_id;
struct sys_thread {
    HANDLE handle;
    DWORD id;
};
#else
typedef pthread_mutex_t sys_mutex;
typedef pthread_cond_t sys_cond;
typedef pthread_t thread_id;
struct sys_thread {
    pthread_t thread;
};
#endif

/* ---- geometry and types ------------------------------------------------
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

#define NIL UINT32_MAX

/* ---- tuning -------------------------------------------------------------
 * Every constant a maintainer might turn, with the bound it keeps and the
 * test that holds it. Measurements that chose them are in
 * docs/internals.md, with the commands that made them. */

/* Nodes come from the allocator CHUNK_NODES at a time, blocks BLOCK_CHUNK
 * at a time (src/pool.c, src/queue.c). Bound: a node index stays below
 * NIL, a block's position inside 32 bits (MAX_CHUNKS here,
 * MAX_BLOCK_CHUNKS in src/queue.c, which owns the position's layout).
 * Test: test_node_layout (a chunk table stops at its limit). A chunk
 * starts on a CACHE_LINE boundary, so no node straddles two lines. The
 * tables of chunks start with room for NODE_TABLE_START and
 * BLOCK_TABLE_START chunks and double. */
#define CHUNK_BITS 10
#define CHUNK_NODES (1u << CHUNK_BITS)
#define MAX_CHUNKS ((UINT32_C(1) << (32 - CHUNK_BITS)) - 1) /* index < NIL */
#define BLOCK_CHUNK_BITS 7
#define CACHE_LINE 64u
#define NODE_TABLE_START 8u
#define BLOCK_TABLE_START 4u

/* Distinct release functions per wheel: a node names its hook in one byte.
 * Test: test_limits (the 256th is refused with EMFILE). */
#define MAX_RELEASES 255

/* Entries read per step of a compaction or rotation (src/queue.c), the work
 * one cancel or reschedule may add. Bound: a queue holds at most 2 stale
 * entries per live one plus a block's worth, but while a step is under
 * way. Test: test_move_entries (a compaction starts only past that bound
 * and goes on until no stale entry is left). */
#define COMPACT_STEP 64

/* Entries the staging rotates in the slot it stages, per timer its share
 * moved down (src/staging.c). Bound: that slot keeps about three entries
 * per pending timer. Test: test_staging (the slot being staged). */
#define ROTATE_PER_MOVE 8

/* A level slot whose least tick went inexact is read again when it holds
 * at most RESCAN_PENDING timers in at most RESCAN_ENTRIES entries
 * (src/slots.c, slot_least). Bound: tw_next_expiry is exact for small slots, O(1) for
 * large ones. Test: test_next_expiry (small slots exact), test_staging
 * (exact while the slot being staged holds 32 or fewer). */
#define RESCAN_PENDING 32
#define RESCAN_ENTRIES 256

/* The adaptive lock (src/lock.c): pauses before the driver sleeps, and
 * producers that may take the lock ahead of a waiting driver. Bound: a
 * driver waits for at most DRIVER_PASSES producers. Test: test_lock_bound. */
#define DRIVER_SPINS 64
#define DRIVER_PASSES 8u

/* The spin lock's wait, and the adaptive lock's park without a futex: a
 * yield every SPIN_YIELD_EVERY pauses, naps of NAP_NS after
 * SPIN_YIELDS yields. Bound: a preempted holder gets a core. Test:
 * test_oversubscribed (every thread progresses, more threads than cores). */
#define SPIN_YIELD_EVERY 64
#define SPIN_YIELDS 8
#define NAP_NS 20000

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
 * (struct call), touched only by the add, the dispatch and finish_node_relock,
 * which ends a timer that has a release hook, or one that a cancel or the
 * destroy ends. */
struct node {
    uint32_t expire;      /* due tick, low 32 bits: the wheel's time domain */
    uint32_t position;    /* its live queue entry (src/queue.c) */
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

/* A slot or due queue (src/queue.c owns it; nothing else reads its
 * fields). */
struct queue {
    uint32_t head, tail; /* positions: the next entry to read, the next to
                            write; none when the queue holds no block */
    uint32_t count;      /* live entries */
    uint32_t entries;    /* live and stale entries */
    /* a compaction in progress (see compact_step), or none */
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
    sys_mutex mutex;          /* TW_LOCK_MUTEX */
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
    int coarse;         /* TW_CLOCK_MONOTONIC_COARSE, where there is one */
    tw_clock_fn *fn;    /* or NULL: the system's monotonic clock */
    void *context;
    uint64_t base_us, base_tick;
    uint64_t last_us;   /* the latest reading a call counted from */
};

/* The drive in progress (tw_advance, tw_expire, the timer thread), on the
 * driving thread's stack; tw_wheel.drive points to it while it lasts. */
struct drive {
    thread_id thread;
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
    thread_id thread;
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

    /* slots (src/slots.c; the queues themselves src/queue.c), with one
     * occupancy bit per slot, by queue number: near in
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
    uint64_t staged_tick; /* src/staging.c: `now` when the staging last ran */

    /* the last stamp handed out (by adds, reschedules and re-arms); the
     * order marks (src/slots.c, cleared by src/order.c as it sorts): per
     * near slot, the highest stamp appended since it was last empty, and
     * a bit set when a lower one came after it */
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

    /* dispatch (src/drive.c) */
    unsigned due_list;    /* the due queue collecting timers for next time */
    uint32_t running;     /* node whose callback is running, or NIL */
    uint64_t running_due; /* the tick that node was due at */
    /* src/lifetime.c: tw_cancel calls waiting for the running callback */
    struct cancel_wait *cancel_waits;

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
    sys_mutex control;
    sys_mutex sleep_mutex;
    sys_cond wake;
    struct sys_thread thread;
    int thread_state;
    uint32_t period_us;
    uint32_t thread_calls; /* tw_thread_start/stop calls inside, which a
                              teardown waits out */
};

/* Test hooks, nothing here (the lock's own is in src/lock.c). Five for
 * tests/threads/test_destroy_races.c: tw_destroy has decided to stop the
 * timer thread and tear the wheel down; a teardown waits for
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

/* Small functions on the hot paths are inlined by force (they run once per
 * timer per step); cold paths, and long ones that would weigh on a short
 * caller's frame, are kept out of line. */
#if defined(TW_GNU)
#define HOT_INLINE inline __attribute__((always_inline))
#define COLD __attribute__((noinline, cold))
#define NOINLINE __attribute__((noinline))
#elif defined(_MSC_VER)
#define HOT_INLINE __forceinline
#define COLD __declspec(noinline)
#define NOINLINE __declspec(noinline)
#else
#define HOT_INLINE inline
#define COLD
#define NOINLINE
#endif

static int lowest_bit(uint64_t x) /* x != 0 */
{
#if defined(TW_GNU)
    return __builtin_ctzll(x);
#elif defined(TW_WINDOWS) && defined(_WIN64)
    unsigned long n;
    _BitScanForward64(&n, x);
    return (int)n;
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
#if defined(TW_GNU)
    return 31 - __builtin_clz(x);
#elif defined(TW_WINDOWS)
    unsigned long n;
    _BitScanReverse(&n, x);
    return (int)n;
#else
    int n = 31;
    while (!(x & 0x80000000u)) {
        x <<= 1;
        n--;
    }
    return n;
#endif
}

/* Sums and products that stop at UINT64_MAX (readings in µs of far ticks). */
static uint64_t saturated_sum(uint64_t a, uint64_t b)
{
    return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

static uint64_t saturated_product(uint64_t a, uint64_t b) /* b != 0 */
{
    return a > UINT64_MAX / b ? UINT64_MAX : a * b;
}

/* The error of the last failing call on this thread (tw_last_error): a
 * thread-local, one per copy of the library, like errno. */
#if defined(__STDC_VERSION__) && __STDC_VERSION__ >= 201112L
#define THREAD_LOCAL _Thread_local
#elif defined(TW_GNU)
#define THREAD_LOCAL __thread
#elif defined(_MSC_VER)
#define THREAD_LOCAL __declspec(thread)
#else
#error "twheel needs thread-local storage (C11, GCC or MSVC)"
#endif
static THREAD_LOCAL int last_error;

/* A call fails with `error`: in errno, and in last_error, which crosses C
 * runtimes where errno does not. */
static void fail_with(int error)
{
    errno = error;
    last_error = error;
}

/* What tw_check found (see src/check.c): the checkers of src/check.c and
 * the slot store's own (queue_check) record into it with check(). */
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
