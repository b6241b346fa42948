/*
 * twheel: a hierarchical timing wheel (skynet's near[256] + t[4][64] shape)
 * with real cancellation, occupancy bitmaps, a node pool and a plain C ABI.
 *
 * This header is the whole public API. Every exported name starts with tw_ or
 * TW_. Time is counted in ticks; a wheel's tick length is fixed at creation.
 *
 * Return values: see "return conventions" below, one table for every
 * function. tw_strerror() names every error code.
 */
#ifndef TW_TIMER_H
#define TW_TIMER_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- version ------------------------------------------------------------ */

#define TW_VERSION_MAJOR 1
#define TW_VERSION_MINOR 4
#define TW_VERSION_PATCH 0
#define TW_VERSION_HEX                                                        \
    ((TW_VERSION_MAJOR << 16) | (TW_VERSION_MINOR << 8) | TW_VERSION_PATCH)
#define TW_VERSION_STRING "1.4.0"

/* Version of the function table returned by tw_get_api(). */
#define TW_API_VERSION 3

/* Symbols are exported with default visibility from the shared library. On
 * Windows the DLL is built with TW_BUILDING_DLL (dllexport), and its users
 * define TW_DLL (dllimport; pkg-config and CMake's twheel::twheel pass it
 * on); a static library, or timer.c compiled into a program, needs
 * neither. An embedder that compiles timer.c into its own tree may define
 * TW_EXPORT (for example as nothing, or as `static` in a unity build)
 * before including this header. */
#ifndef TW_EXPORT
#if defined(_WIN32) || defined(__CYGWIN__)
#if defined(TW_BUILDING_DLL)
#define TW_EXPORT __declspec(dllexport)
#elif defined(TW_DLL)
#define TW_EXPORT __declspec(dllimport)
#else
#define TW_EXPORT
#endif
#elif defined(__GNUC__) || defined(__clang__)
#define TW_EXPORT __attribute__((visibility("default")))
#else
#define TW_EXPORT
#endif
#endif

/* ---- types -------------------------------------------------------------- */

typedef struct tw_wheel tw_wheel;

/* Names one timer of one wheel: a pool index plus a generation counter
 * (mixed with a tag the wheel draws at creation). 0 is never a valid id. An
 * id stays unique for the wheel's lifetime: once its timer is gone, the id
 * matches nothing, even after its node is reused. Another wheel's ids are
 * refused as stale ones are, but for a chance of about 2^-31 per id (see
 * docs/guarantees.md, "Ids"). */
typedef uint64_t tw_id;

/* "No timer pending" from tw_next_expiry() and tw_remaining(). */
#define TW_NEVER UINT64_MAX

/* Longest delay or interval in ticks: 2^32 - 2^26 (about 48.9 days of 1 ms
 * ticks, 489 days of 10 ms ticks). Longer requests fail with ERANGE. On a
 * clock-driven wheel the limit is on the due tick counted from tw_now():
 * while the wheel holds timers or is driven, a wheel whose tw_now() lags
 * its clock by L ticks takes delays up to TW_MAX_DELAY - L (see tw_add()). */
#define TW_MAX_DELAY UINT64_C(4227858432)

/* tw_now() never goes past this tick (2^63 - 1). */
#define TW_MAX_TICK UINT64_C(9223372036854775807)

/* Tick length limits in microseconds (1 µs .. 1 hour). */
#define TW_MIN_TICK_US 1u
#define TW_MAX_TICK_US 3600000000u

/* Called on the driving thread, with the wheel's lock released, when a timer
 * fires. It may add, cancel and reschedule timers of the same wheel, its own
 * included. tw_now(w) is the tick the timer was due at, or, for a timer that
 * was already due when the advance/expire call started, that call's starting
 * tick. */
typedef void tw_callback(tw_wheel *wheel, tw_id id, void *user_data);

/* Hands a timer's user data back, exactly once, when the wheel is done with
 * it: after a one-shot's callback returned, when a cancel succeeds, or at
 * tw_destroy() for timers still pending. Signature-compatible with free(). */
typedef void tw_release(void *user_data);

/* A monotonic clock in microseconds, for tw_expire(), tw_timeout_ms() and,
 * unless the wheel is TW_DRIVE_TICKS, every add and reschedule: it is called
 * from every thread that makes those calls, so it must be thread-safe. It
 * is called without the wheel's lock, except to read again a reading that
 * came out below the wheel's last one (to tell a step back from a reading
 * another thread overtook): it must not call into the wheel. A clock that
 * steps back is allowed: the first call that sees it re-bases the wheel
 * (tw_expire()). */
typedef uint64_t tw_clock_fn(void *context);

/* realloc-style allocator: (NULL, n) allocates, (p, n) resizes, (p, 0) frees
 * and returns NULL. Returning NULL for n > 0 is an allocation failure. It is
 * called with the wheel's lock held: it must not call into that wheel (that
 * would deadlock). */
typedef void *tw_realloc_fn(void *pointer, size_t size, void *context);

enum tw_lock_kind {
    TW_LOCK_SPIN = 0, /* spinlock (pause, yield, nap): only when threads
                         never outnumber cores */
    TW_LOCK_MUTEX = 1, /* pthread mutex */
    TW_LOCK_NONE = 2, /* single-threaded use: no lock, no atomic
                         read-modify-write (plain loads and stores) */
    TW_LOCK_ADAPTIVE = 3 /* waiters sleep (a futex on Linux), the driver
                            after a short spin, and is woken first; the
                            default: holds up with more threads than cores */
};

/* How a wheel is driven, which decides where a delay counts from
 * (tw_config.drive; see tw_add()). */
enum tw_drive_kind {
    TW_DRIVE_AUTO = 0, /* the default: decided by the first driving call.
                          tw_expire() or tw_thread_start() make the wheel
                          clock-driven, tw_advance() tick-driven */
    TW_DRIVE_CLOCK = 1, /* clock-driven from creation */
    TW_DRIVE_TICKS = 2 /* tick-driven from creation: no clock read per add */
};

enum tw_clock_kind {
    TW_CLOCK_MONOTONIC = 0, /* CLOCK_MONOTONIC; default */
    TW_CLOCK_MONOTONIC_COARSE = 1 /* cheaper, jiffy resolution (Linux) */
};

/* Creation parameters. Always start from tw_config_init(), which sets `size`
 * and the defaults, then change what you need. */
struct tw_config {
    uint32_t size;      /* sizeof(struct tw_config), set by tw_config_init */
    uint32_t tick_us;   /* tick length in µs; default 1000 (skynet: 10000) */
    int lock;           /* enum tw_lock_kind; default TW_LOCK_ADAPTIVE */
    int clock;          /* enum tw_clock_kind; ignored when clock_fn is set */
    tw_clock_fn *clock_fn;      /* optional clock (fake clocks, simulation) */
    void *clock_context;        /* passed to clock_fn */
    tw_realloc_fn *realloc_fn;  /* optional allocator; default libc */
    void *alloc_context;        /* passed to realloc_fn */
    uint64_t max_timers;        /* cap on pending timers; 0 = no cap */
    uint64_t start_tick;        /* initial tw_now(); default 0. On a clock-
                                   driven wheel this tick starts at the
                                   clock reading tw_create() takes */
    int drive;                  /* enum tw_drive_kind; default TW_DRIVE_AUTO
                                   (a config from a 1.0 header, whose size
                                   stops before this field, gets AUTO) */
    void *context;              /* (1.2) the caller's, for tw_context() and
                                   on_destroy; the wheel never reads it */
    tw_release *on_destroy;     /* optional (1.2): called once with context
                                   right after the wheel has been freed,
                                   every release hook having run: at the end
                                   of tw_destroy(), or of the call that
                                   finishes a deferred destroy. For state
                                   that must live as long as the wheel. */
};

/* Counters for operators. Set `size` to sizeof(struct tw_stats) before the
 * call; fields beyond `size` are not written, and `size` comes back as the
 * bytes written: the smaller of the caller's size and the library's
 * struct (an older library's shorter one leaves newer fields alone). */
struct tw_stats {
    uint32_t size;
    uint32_t tick_us;
    uint64_t now;             /* tw_now() */
    uint64_t pending;         /* tw_count() */
    uint64_t pending_due;     /* due, waiting for the next advance/expire */
    uint64_t pending_near;    /* in near slots (this window, and the
                                 next one's timers moved down early) */
    uint64_t pending_level[4]; /* in level 0..3 slots */
    uint64_t pool_capacity;   /* nodes allocated */
    uint64_t pool_free;       /* nodes ready for reuse or never used yet
                                 (node 0 is neither: it would make id 0) */
    uint64_t bytes;           /* bytes held from the allocator, wheel included */
    uint64_t added;           /* timers added */
    uint64_t fired;           /* callbacks run */
    uint64_t cancelled;       /* cancels that returned 1 */
    uint64_t rescheduled;     /* reschedules that returned 1 */
    uint64_t cascaded;        /* moves of a timer one level down (each
                                 level slot is moved down a share per tick
                                 before its time comes) */
    uint64_t rebases;         /* clock went backwards: reference re-based */
    uint64_t next_expiry_exact; /* ticks to the earliest pending timer, always
                                   exact (tw_next_expiry may answer earlier);
                                   TW_NEVER when none. In tw_next_expiry's
                                   early case this reads that slot, under
                                   the lock: O(entries in it). */
    const char *broken_invariant; /* (1.3) what the last tw_check() found
                                     broken, in words (a constant string),
                                     or NULL: it passed, or never ran */
};

/* ---- return conventions --------------------------------------------------
 * Errors are errno codes: a function returning int or int64_t gives them
 * negated; one returning a pointer or an id gives NULL or 0 and sets errno,
 * and tw_last_error() (which crosses C runtimes, where errno may not).
 * Every function, with its answer for a NULL wheel:
 *
 *   function              success          nothing / failure        NULL wheel
 *   tw_create             the wheel        NULL, errno EINVAL,      (NULL config:
 *                                          ENOMEM, a thread error    defaults)
 *   tw_destroy            0                -EBUSY                   0
 *   tw_add, tw_add_ex,    the id (not 0)   0, errno EINVAL, ERANGE, 0, errno EINVAL
 *     tw_add_periodic                      ENOSPC, ENOMEM, EBUSY,
 *                                          EMFILE (add_ex)
 *   tw_cancel             1 (cancelled)    0 (nothing to cancel)    -EINVAL
 *   tw_reschedule(_ex)    1 (moved)        0 (not live), -ERANGE    -EINVAL
 *   tw_expire, tw_advance callbacks run    -EBUSY, -ERANGE          -EINVAL
 *   tw_thread_start       0                -EINVAL, -EBUSY, a       -EINVAL
 *                                          negated pthread error
 *   tw_thread_stop        0                -EDEADLK                 -EINVAL
 *   tw_get_stats          0                -EINVAL                  -EINVAL
 *   tw_check              0                -EFAULT (which invariant -EINVAL
 *                                          broke: tw_stats)
 *   tw_remaining,         ticks / a clock  TW_NEVER (none pending,  TW_NEVER
 *     tw_next_expiry,     reading          or the id is not live)
 *     tw_deadline_us,
 *     tw_next_deadline_us
 *   tw_timeout_ms         milliseconds     -1 (none pending)        -1
 *   tw_now, tw_count,     the value        -                        0
 *     tw_tick_us, tw_clock_us
 *   tw_context            the context      -                        NULL
 *   tw_get_api            the table        NULL (unknown version)   -
 *   tw_config_init, tw_gettime, tw_strerror, tw_version,
 *     tw_version_string: always succeed (tw_config_init(NULL) does nothing)
 *
 * Exceptions to the rule above, kept because callers rely on them:
 *  - A NULL wheel gets answers that look valid wherever the table says so
 *    (tw_now() 0, tw_next_expiry() TW_NEVER, tw_destroy() 0 like free());
 *    only functions that return an error code or an id report EINVAL.
 *  - tw_add() and its kin report through errno, tw_reschedule() through its
 *    return value, with the same codes; 0 from tw_reschedule() or
 *    tw_cancel() is an answer (the id is not live), not an error.
 *  - Interval 0 is EINVAL for tw_add_periodic() but a one-shot for
 *    tw_add_ex() and tw_reschedule_ex().
 *  - tw_cancel() is O(1) but blocks while the timer's callback runs on
 *    another thread (see tw_cancel()).
 *  - TW_MAX_DELAY is the limit from tw_now(), which on a clock-driven
 *    wheel may lag the clock (see TW_MAX_DELAY).
 *  - tw_reschedule() checks its delay and interval before the id: out of
 *    range, it answers -ERANGE even for an id that is not live. */

/* ---- re-entrancy ---------------------------------------------------------
 * Callbacks and release hooks run with the wheel's lock released, so they
 * may call any function of the same wheel. What each call does there
 * ("works": as from plain code):
 *
 *                      in a         in a release hook run ...
 *                      callback     by the driver  by tw_cancel   by
 *                                   (one-shot end, from plain     tw_destroy
 *                                   cancel in cb)  code
 * add, add_periodic,   works        works          works          0, EBUSY
 *   add_ex
 * cancel (other id)    works        works          works          works [1]
 * cancel (own id)      0 / 1 [2]    0              0              0
 * reschedule (own id)  0 / 1 [2]    0              0              0
 * reschedule (other)   works        works          works          0
 * remaining (own id)   NEVER/next   TW_NEVER       TW_NEVER       TW_NEVER
 * advance, expire      -EBUSY       -EBUSY         works          -EBUSY
 * destroy              0 [5]        0 [5]          0, deferred[3] -EBUSY
 * thread_start         works        works          works          -EBUSY
 * thread_stop          works [4]    works [4]      works          0
 * next_expiry, timeout_ms, now, count, tick_us, get_stats, check, and the
 * functions that take no wheel work everywhere.
 *
 * [1] 1 for a timer that tw_destroy has not released yet (its hook then
 *     runs once, from that cancel), else 0.
 * [2] a one-shot's id died as its callback started: 0; periodic: 1, unless
 *     another thread's tw_cancel, waiting for this callback, has cancelled
 *     it already (that one returns 1, this call 0).
 * [3] the tw_cancel that ran the hook destroys the wheel when the hook
 *     returns (pending timers released, none fired), then returns 1. The
 *     wheel must not be used after either call.
 * [4] -EDEADLK on the timer thread itself.
 * [5] every pending timer is released inside the call (each hook once),
 *     the callback (or hook) goes on to its end, no further callback runs,
 *     and tw_advance()/tw_expire() (or the timer thread) frees the wheel
 *     as it returns, returning the callbacks run. From then on, add fails with
 *     EBUSY and reschedule returns 0; cancel still works (a release hook
 *     may cancel its neighbours). The caller of the driving call must not
 *     use the wheel once it returns. A shutdown timer is this case. On the
 *     timer thread, the thread frees the wheel and exits (detached);
 *     -EBUSY there while another thread is stopping it.
 *
 * From another thread while a callback or hook runs, every call works as
 * from plain code, except: advance/expire -EBUSY while the wheel is driven;
 * destroy -EBUSY while another thread drives with tw_advance/tw_expire or
 * runs a release hook; add -EBUSY and reschedule 0 during tw_destroy;
 * cancel of a timer whose callback is running waits for it (see
 * tw_cancel). The allocator hook is the exception to all of this: it runs
 * with the lock held and must not call into the wheel.
 *
 * Destroy, start and stop from other threads (docs/threads.md has the
 * whole table):
 *  - tw_destroy while the timer thread runs a batch: the callback running
 *    then finishes, no other callback starts (nor does a periodic one
 *    re-arm), the thread is joined, and every timer is released once (the
 *    running one on the timer thread as it ends, the rest on the caller's).
 *  - a callback on the timer thread destroyed the wheel and still runs:
 *    tw_thread_stop from another thread joins the thread and finishes the
 *    destroy (the wheel is gone when it returns 0); tw_thread_start and
 *    tw_destroy return -EBUSY.
 *  - tw_thread_stop first, then tw_destroy from a callback on that thread:
 *    -EBUSY, the wheel stays whole.
 * A call that begins after tw_destroy was called (by anyone) is the
 * caller's error: the wheel may be gone. One already inside (a tw_cancel
 * waiting for a callback, a start or stop) is waited for before the wheel
 * is freed. */

/* ---- wheel lifetime ----------------------------------------------------- */

/* Fills *config with the defaults (1 ms ticks, TW_LOCK_ADAPTIVE,
 * CLOCK_MONOTONIC, libc allocator, no cap, start tick 0, TW_DRIVE_AUTO).
 * Thread-safe. */
TW_EXPORT void tw_config_init(struct tw_config *config);

/* Creates a wheel. config may be NULL for the defaults. Returns NULL with
 * errno EINVAL (size smaller than 1.0's struct, tick_us outside
 * TW_MIN_TICK_US..TW_MAX_TICK_US, unknown lock, clock or drive kind,
 * start_tick > TW_MAX_TICK, unknown non-zero bytes past the fields this
 * library knows) or ENOMEM. A config from an older header (a smaller size)
 * gets the defaults for the fields it lacks. Thread-safe; no global state
 * is shared between wheels. */
TW_EXPORT tw_wheel *tw_create(const struct tw_config *config);

/* Stops the timer thread if one runs (joining it: a callback running on it
 * finishes, and no other starts), hands every pending timer's user data to
 * its release hook (callbacks never run), and frees the wheel. Returns 0;
 * 0 for NULL.
 * From a callback, or a release hook run on the driving thread, it
 * releases every pending timer as above, returns 0 and leaves the rest to
 * the driving call: the batch stops after that callback and
 * tw_advance()/tw_expire() (or the timer thread, which then detaches and
 * exits) frees the wheel as it returns (a shutdown timer); a tw_cancel on
 * another thread waiting for that callback returns first. From a release
 * hook that
 * tw_cancel() runs on this thread outside any callback, it returns 0 and
 * that tw_cancel() finishes the destroy as soon as the hook returns.
 * Returns -EBUSY and touches nothing (the timer thread keeps running) when
 * called a second time while a destroy is under way (a deferred one, or
 * one that is stopping the timer thread), from a release hook run by
 * tw_destroy, on the
 * timer thread while another thread is stopping it, while
 * another thread drives the wheel with tw_advance() or tw_expire(), or
 * while another thread runs one of its release hooks (but the timer
 * thread: its hooks, like its callbacks, finish before the join). See
 * "re-entrancy" above. tw_config.on_destroy tells when the wheel is gone.
 * Any other use of the wheel by another thread during or after the call
 * is the caller's error. */
TW_EXPORT int tw_destroy(tw_wheel *wheel);

/* ---- timers ------------------------------------------------------------- */

/* Adds a one-shot timer due `delay` ticks from now. "Now" depends on how the
 * wheel is driven (tw_config.drive):
 *  - tick-driven: tw_now(). Exact in ticks: tw_advance(delay) runs it.
 *  - clock-driven: the wheel's clock, read by this call as it starts,
 *    rounded up to the next tick boundary (never before tw_now()). tw_now()
 *    only moves when the wheel is driven, so it may lag the clock by any
 *    amount; the clock does not. The timer never runs before `delay` whole
 *    ticks of the clock have passed since the call, whatever the caller's
 *    loop order and from any thread, and runs at the first tw_expire() that
 *    reads the clock at or past the end of its tick: at most one tick after
 *    `delay` has passed, plus the time until that tw_expire() call. A
 *    reading below the wheel's last one (the clock stepped back) re-bases
 *    the wheel first (see tw_expire()), so this holds after a step too.
 *  - AUTO and not driven yet: tw_now(), exact in ticks; the wheel's clock
 *    then restarts at this call (tick tw_now() begins here), so if the
 *    first driving call is tw_expire(), timers added before it are not
 *    early by the clock either (they are late by at most the time between
 *    the first and the last of these calls).
 * Every add and reschedule on a wheel that is not TW_DRIVE_TICKS reads the
 * clock (the README's benchmarks give what that costs).
 * delay 0 fires in the next tw_advance()/tw_expire() call: tick-driven, at
 * its start; clock-driven, it is due at the tick the clock is in, so the
 * next tw_expire() runs it, in tick order (a tw_advance() once it reaches
 * that tick). Made during a call (from a callback), delay 0 always waits
 * for the next call. No release hook.
 * Returns its id, or 0 with errno EINVAL (NULL wheel or callback), ERANGE
 * (delay > TW_MAX_DELAY; or, on a clock-driven wheel holding timers or
 * being driven, when the due tick lies more than TW_MAX_DELAY ticks past
 * tw_now(): no tw_expire() ran for about that long, or delay is within a
 * tick of TW_MAX_DELAY; a wheel holding none and not driven moves tw_now()
 * up to the clock instead), ENOSPC (max_timers reached), ENOMEM, or EBUSY
 * (the wheel is being destroyed). On failure nothing is scheduled and
 * user_data stays the caller's. Thread-safe. */
TW_EXPORT tw_id tw_add(tw_wheel *wheel, uint64_t delay, tw_callback *callback,
                       void *user_data);

/* Adds a fixed-rate periodic timer: the k-th firing (k = 0, 1, ...) is due at
 * now + first + k * interval ("now" as in tw_add()), however late earlier
 * callbacks ran; a driver that fell behind runs every missed firing, in
 * order. On a clock-driven wheel with first 0 the grid starts at the tick
 * the clock is in, so later firings may come less than one tick before
 * k intervals have passed since the call; with first >= 1 none is early.
 * interval must be 1..TW_MAX_DELAY (0 gives EINVAL), first 0..TW_MAX_DELAY.
 * Errors as tw_add(). Runs until cancelled. Thread-safe. */
TW_EXPORT tw_id tw_add_periodic(tw_wheel *wheel, uint64_t first,
                                uint64_t interval, tw_callback *callback,
                                void *user_data);

/* The general form: interval 0 makes a one-shot. release (may be NULL) gets
 * user_data back exactly once when the wheel is done with the timer. A wheel
 * remembers up to 255 distinct release functions (EMFILE past that), for
 * its whole life: a function stays remembered after its timers are gone,
 * so use a few long-lived ones; NULL does not count. Errors as tw_add().
 * Thread-safe. */
TW_EXPORT tw_id tw_add_ex(tw_wheel *wheel, uint64_t delay, uint64_t interval,
                          tw_callback *callback, tw_release *release,
                          void *user_data);

/* tw_add_ex() with the first delay in microseconds of the wheel's clock
 * instead of whole ticks: on a clock-driven wheel the timer is due at the
 * first tick that begins at or after the clock's reading at the call plus
 * delay_us, so it runs less than one tick after delay_us has passed (plus
 * the time until the tw_expire() that reaches it), where a delay in ticks
 * rounded up from delay_us could take up to two. Never early, as
 * tw_add(). Where delays count from tw_now() (tick-driven, or AUTO and not
 * driven yet) it is delay_us rounded up to whole ticks. delay_us 0 is
 * delay 0. interval is in ticks. Errors as tw_add_ex(), ERANGE when
 * delay_us is more than TW_MAX_DELAY ticks. Thread-safe. (1.4) */
TW_EXPORT tw_id tw_add_us(tw_wheel *wheel, uint64_t delay_us, uint64_t interval,
                          tw_callback *callback, tw_release *release,
                          void *user_data);

/* Cancels a timer in O(1), except that it blocks while the timer's callback
 * runs on another thread (below). Returns 1 when the timer was live: its callback
 * will not start again, and its user data has been (or, for a periodic timer
 * cancelled from inside its own callback, will be right after that callback)
 * handed to its release hook. Returns 0 when there was nothing to cancel:
 * id 0, an unknown or stale id, a timer that already fired, a second cancel.
 * When the timer's callback is running on another thread, waits for it and
 * its release hook to finish (a one-shot then returns 0, a periodic timer 1),
 * so the callback is never running once tw_cancel has returned. From inside
 * that callback it returns at once (one-shot 0, periodic 1, or 0 when a
 * waiting tw_cancel on another thread cancelled it first). Deadlock rule:
 * do not call tw_cancel() while holding a lock that the timer's callback
 * (or its release hook) may take: it waits for a callback that waits for
 * you. The wait sleeps (a condition variable), it does not poll.
 * Returns -EINVAL for a NULL wheel. Thread-safe. */
TW_EXPORT int tw_cancel(tw_wheel *wheel, tw_id id);

/* Moves a live timer so that it is next due `delay` ticks from now, "now"
 * as in tw_add() (a periodic timer then continues every interval from
 * there). Counts as a new insertion for ordering within a tick. Returns 1
 * on success; 0 when the id is not live (including a one-shot whose
 * callback has started); -EINVAL for a NULL wheel; -ERANGE as tw_add()'s
 * ERANGE (the timer is then left untouched). Never fails for memory.
 * Pushing a timer that waits to fire, due more than 512 ticks from now, to
 * a later tick with a delay of at least 1 (an idle timeout, on every
 * packet) writes its node and nothing else: O(1), no allocation. Other
 * moves (earlier, nearer, delay 0, or of a periodic timer whose callback
 * runs) take a new slot entry, also in O(1): the pool of entries grows
 * through the allocator when it can; when the allocator refuses, the slot
 * the timer leaves is compacted to make room, which costs a pass over that
 * slot.
 * Thread-safe. */
TW_EXPORT int tw_reschedule(tw_wheel *wheel, tw_id id, uint64_t delay);

/* The general form of tw_reschedule(): moves the timer as tw_reschedule()
 * does and sets its interval: 0 makes it a one-shot, 1..TW_MAX_DELAY a
 * periodic timer that continues every `interval` from its new due tick.
 * Works on a periodic timer from inside its own callback (then made a
 * one-shot, it runs once more, at `delay`). Returns as tw_reschedule(),
 * plus -ERANGE for an interval > TW_MAX_DELAY. Thread-safe. (1.2) */
TW_EXPORT int tw_reschedule_ex(tw_wheel *wheel, tw_id id, uint64_t delay,
                               uint64_t interval);

/* tw_reschedule() with the delay in microseconds of the wheel's clock,
 * counted as tw_add_us() counts it; the interval is kept. Returns as
 * tw_reschedule(). Thread-safe. (1.4) */
TW_EXPORT int tw_reschedule_us(tw_wheel *wheel, tw_id id, uint64_t delay_us);

/* Ticks from tw_now() until the timer's next firing: 0 when it is due or
 * waits for the next call (delay 0 made during a call), TW_NEVER when the
 * id is not live or the wheel is NULL. On a clock-driven
 * wheel whose tw_now() lags the clock this is more than the delay asked
 * for. Thread-safe. */
TW_EXPORT uint64_t tw_remaining(tw_wheel *wheel, tw_id id);

/* ---- driving ------------------------------------------------------------ */

/* Monotonic time in microseconds (CLOCK_MONOTONIC). Thread-safe. */
TW_EXPORT uint64_t tw_gettime(void);

/* Reads the wheel's clock, turns the time elapsed since the wheel's reference
 * point into whole ticks (the remainder carries over: no drift), advances to
 * that tick and runs every due callback. A clock that reads lower than the
 * wheel's last reading re-bases the wheel (or was already seen by an add or
 * reschedule, which re-based it): the wheel's ticks move back by the step,
 * tw_now() does not, the current tick keeps the part of it already gone and
 * every pending timer the time it had left; the call then walks to the
 * clock's tick as always (when the last reading was the previous
 * tw_expire's, that is the current tick: only timers already due run,
 * delay 0 included). A timer armed after the step
 * counts from its call's reading: never early by a clock that only moved
 * forward since. Returns the number of callbacks run, -EINVAL
 * for NULL, -EBUSY when the wheel is already being driven (from a callback,
 * or by another thread), -ERANGE past TW_MAX_TICK (then nothing runs, not
 * even timers already due: the one exception to delay 0's promise). Call
 * from one driving thread at a time. */
TW_EXPORT int64_t tw_expire(tw_wheel *wheel);

/* Advances the wheel by `ticks` without a clock (frame-driven games,
 * simulation, tests) and runs every due callback. Timers already due run
 * first, in insertion order, even when ticks is 0; then the rest in due-tick
 * order, FIFO within a tick. Empty
 * stretches are skipped in O(1) per occupied slot; the upper slots are moved
 * down a share per tick walked (docs/guarantees.md, "Tail latency"), so no
 * tick costs more than its own timers and those shares. Returns as
 * tw_expire(). The first
 * driving call of a TW_DRIVE_AUTO wheel makes it tick-driven; on a
 * clock-driven wheel it moves tw_now() ahead of the clock, and delays then
 * count from tw_now(), the later of the two. */
TW_EXPORT int64_t tw_advance(tw_wheel *wheel, uint64_t ticks);

/* Ticks from tw_now() until the earliest pending timer is due: 0 when one
 * is due now, TW_NEVER when nothing is pending or the wheel is NULL. On a
 * clock-driven wheel tw_now() lags the clock between tw_expire() calls, so
 * to sleep, use tw_timeout_ms(), which counts by the clock. O(1) in every case
 * (a few bitmap words and cached values per level, or re-reads of slots
 * holding at most 32 timers; bounded by the slots, not by the timers).
 * Never later than the earliest timer, and exact except in one case: an
 * upper-level slot (timers outside the current 256-tick window, though
 * possibly fewer than 256 ticks away) that holds the earliest timer, or
 * comes before it, has lost the timer that was its earliest (cancelled or
 * rescheduled, pushed later included) and still holds more than 32 pending
 * timers. Then the answer may be that departed timer's tick: a waiter
 * wakes early once for that slot, finds nothing due, and the slot has
 * been moved down by then (a second such slot can make it wake early
 * once more before the answer is exact). Never 0 unless something is due.
 * For an always-exact figure, see tw_stats.next_expiry_exact (which may
 * read a whole slot). Thread-safe. */
TW_EXPORT uint64_t tw_next_expiry(tw_wheel *wheel);

/* Milliseconds until the earliest timer is due, rounded up, for
 * epoll_wait()/poll(): -1 when nothing is pending (or NULL wheel), 0 when
 * something is due (or, in tw_next_expiry()'s early case, when the tick it
 * answers has come), at most INT32_MAX. By the wheel's clock, except on a
 * wheel only ever driven by tw_advance(), where the clock says nothing
 * about when the next tick comes: there it is tw_next_expiry() ticks
 * times the tick length. After the clock went backwards (before the
 * tw_expire() that re-bases) it is also that tick count. Computed from
 * tw_next_expiry(), so O(1) and never late (early in the case it names).
 * Thread-safe. */
TW_EXPORT int32_t tw_timeout_ms(tw_wheel *wheel);

/* ---- absolute time -------------------------------------------------------
 * For callers that wait until a point in time (an event loop's timer, a C++
 * time_point) rather than for a number of ticks. Times are readings of the
 * wheel's own clock in microseconds: CLOCK_MONOTONIC, the coarse clock, or
 * tw_config.clock_fn. (1.2) */

/* Reads the wheel's clock now; 0 for NULL. Thread-safe. */
TW_EXPORT uint64_t tw_clock_us(tw_wheel *wheel);

/* The clock reading from which the timer's next firing is due: the first
 * tw_expire() that reads the clock at or past it runs the timer. A time in
 * the past means it is due now. TW_NEVER when the id is not live or the
 * wheel is NULL. On a wheel driven by tw_advance() alone (tick-driven), the
 * clock does not move its ticks: the answer is then the clock now plus the
 * ticks left times the tick length, a projection. Thread-safe. */
TW_EXPORT uint64_t tw_deadline_us(tw_wheel *wheel, tw_id id);

/* The same for the earliest pending timer (tw_next_expiry()'s, so early in
 * the one case named there, never late); TW_NEVER when nothing is pending
 * or the wheel is NULL. Thread-safe. */
TW_EXPORT uint64_t tw_next_deadline_us(tw_wheel *wheel);

/* Starts a dedicated thread that calls tw_expire() every period_us
 * microseconds (skynet: 2500); callbacks then run on that thread, and an
 * AUTO wheel becomes clock-driven: a timer runs at most about one tick plus
 * one period after its delay has passed. The thread waits out its period by
 * CLOCK_MONOTONIC, also when the wheel reads a clock_fn: with a fake clock,
 * watch tw_now() to see it catch up. Returns 0,
 * -EINVAL (NULL wheel, period_us 0, or a TW_LOCK_NONE wheel), -EBUSY (already
 * running, or the wheel is being destroyed: a thread started then would
 * outlive it) or a negative pthread error. Thread-safe. A start that meets
 * a tw_destroy() on another thread either starts its thread before the
 * destroy decides (the destroy then stops and joins it) or returns -EBUSY;
 * the destroy waits for it to leave either way. */
TW_EXPORT int tw_thread_start(tw_wheel *wheel, uint32_t period_us);

/* Stops the timer thread and joins it. The drive in progress ends first:
 * every timer due up to the tick it read runs, so after a stall (a long
 * catch-up) the stop waits for that batch; tw_destroy() instead stops after
 * the running callback. Returns 0, also when no thread runs (safe to call
 * twice); -EINVAL for NULL; -EDEADLK when called from the timer thread
 * itself (a callback), where joining would deadlock. Thread-safe.
 * When a callback on that thread has destroyed the wheel (a shutdown timer)
 * and is still running, the stop joins the thread and finishes that
 * destroy: it returns 0 with the wheel freed. */
TW_EXPORT int tw_thread_stop(tw_wheel *wheel);

/* ---- inspection --------------------------------------------------------- */

/* Current tick (64-bit, never wraps): where the last tw_advance()/tw_expire()
 * left the wheel, so on a clock-driven wheel it lags the clock between
 * calls; 0 for NULL. While a callback runs it is the tick being dispatched
 * (see tw_callback). Thread-safe. */
TW_EXPORT uint64_t tw_now(tw_wheel *wheel);

/* Live timers: those a tw_cancel() could still stop. 0 for NULL. */
TW_EXPORT uint64_t tw_count(tw_wheel *wheel);

/* tw_config.context of the wheel (NULL for NULL). Thread-safe. (1.2) */
TW_EXPORT void *tw_context(tw_wheel *wheel);

/* The wheel's tick length in microseconds; 0 for NULL. */
TW_EXPORT uint32_t tw_tick_us(tw_wheel *wheel);

/* Fills *stats up to stats->size bytes: O(slots), as the pending counts per
 * level are summed from the 1026 queues here rather than kept up to date by
 * every add, move and cancel; plus one slot's read for next_expiry_exact
 * in tw_next_expiry's early case (see there), skipped when stats->size
 * stops short of that field. Returns 0, or -EINVAL for NULL arguments or a
 * size smaller than 8. Thread-safe. */
TW_EXPORT int tw_get_stats(tw_wheel *wheel, struct tw_stats *stats);

/* Verifies the wheel's internal invariants (queues, bitmaps, slot
 * placement, least ticks, counts, free lists, the drive and the clock) in
 * O(nodes ever handed out + queue entries, stale ones included).
 * Returns 0 when consistent, -EINVAL for NULL, or -EFAULT when an invariant
 * is broken; tw_stats.broken_invariant then says which, in words (and is
 * NULL again after a check that passes). For tests and debugging.
 * Thread-safe. */
TW_EXPORT int tw_check(tw_wheel *wheel);

/* A short English description of an error code (negative or positive). */
TW_EXPORT const char *tw_strerror(int error);

/* The error of the last call on this thread that failed and set errno
 * (tw_create, tw_add, tw_add_periodic, tw_add_ex): the same positive code,
 * read through the library itself. It reaches a caller whose C runtime is
 * not the library's, where errno does not: a program built with MSVC's
 * UCRT calling a MinGW DLL, or any two modules linked with static
 * runtimes. Set on failure only: a call that succeeds leaves it as it
 * was, so read it right after the failing call, as errno. 0 on a thread
 * where no call has failed. Thread-safe (one per thread). (1.4) */
TW_EXPORT int tw_last_error(void);

/* TW_VERSION_HEX and TW_VERSION_STRING of the library actually loaded. */
TW_EXPORT uint32_t tw_version(void);
TW_EXPORT const char *tw_version_string(void);

/* ---- plugin ABI --------------------------------------------------------- */

/* Every function above, for hosts that dlopen the library. The table only
 * ever grows at its end; `size` tells a host which members exist. */
struct tw_api {
    uint32_t size;    /* sizeof(struct tw_api) of the library */
    uint32_t version; /* TW_API_VERSION of the library */
    uint32_t (*version_hex)(void);
    const char *(*version_string)(void);
    const char *(*strerror)(int error);
    void (*config_init)(struct tw_config *config);
    tw_wheel *(*create)(const struct tw_config *config);
    int (*destroy)(tw_wheel *wheel);
    tw_id (*add)(tw_wheel *wheel, uint64_t delay, tw_callback *callback,
                 void *user_data);
    tw_id (*add_periodic)(tw_wheel *wheel, uint64_t first, uint64_t interval,
                          tw_callback *callback, void *user_data);
    tw_id (*add_ex)(tw_wheel *wheel, uint64_t delay, uint64_t interval,
                    tw_callback *callback, tw_release *release,
                    void *user_data);
    int (*cancel)(tw_wheel *wheel, tw_id id);
    int (*reschedule)(tw_wheel *wheel, tw_id id, uint64_t delay);
    uint64_t (*remaining)(tw_wheel *wheel, tw_id id);
    uint64_t (*gettime)(void);
    int64_t (*expire)(tw_wheel *wheel);
    int64_t (*advance)(tw_wheel *wheel, uint64_t ticks);
    uint64_t (*next_expiry)(tw_wheel *wheel);
    int32_t (*timeout_ms)(tw_wheel *wheel);
    int (*thread_start)(tw_wheel *wheel, uint32_t period_us);
    int (*thread_stop)(tw_wheel *wheel);
    uint64_t (*now)(tw_wheel *wheel);
    uint64_t (*count)(tw_wheel *wheel);
    uint32_t (*tick_us)(tw_wheel *wheel);
    int (*get_stats)(tw_wheel *wheel, struct tw_stats *stats);
    int (*check)(tw_wheel *wheel);
    /* version 2 (1.2) */
    int (*reschedule_ex)(tw_wheel *wheel, tw_id id, uint64_t delay,
                         uint64_t interval);
    uint64_t (*clock_us)(tw_wheel *wheel);
    uint64_t (*deadline_us)(tw_wheel *wheel, tw_id id);
    uint64_t (*next_deadline_us)(tw_wheel *wheel);
    void *(*context)(tw_wheel *wheel);
    /* version 3 (1.4) */
    int (*last_error)(void);
    tw_id (*add_us)(tw_wheel *wheel, uint64_t delay_us, uint64_t interval,
                    tw_callback *callback, tw_release *release, void *user_data);
    int (*reschedule_us)(tw_wheel *wheel, tw_id id, uint64_t delay_us);
};

/* Returns the function table for API version `version` (1 ..
 * TW_API_VERSION), or NULL for 0 or a version newer than this library.
 * The table is constant and lives as long as the library is loaded. */
TW_EXPORT const struct tw_api *tw_get_api(uint32_t version);

#ifdef __cplusplus
}
#endif

#endif /* TW_TIMER_H */
