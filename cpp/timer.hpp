/*
 * twheel C++ facade: RAII handles, lambdas and std::chrono over the C API of
 * timer.h. Header-only, C++17, namespace twheel. Adds no timer structure of its
 * own: every member is a few lines over a tw_* call.
 *
 * Exception policy, in one place:
 *  - C errors surface as std::system_error (std::generic_category(), the
 *    positive errno value) from the call that caused them; destructors never
 *    throw.
 *  - No exception crosses a C frame: the callback trampoline catches
 *    everything. When a callback throws inside wheel::expire()/advance(), the
 *    first exception is kept, the rest of the batch still runs, and
 *    expire()/advance() rethrow it once the C call has returned. Later
 *    exceptions of the same call are dropped.
 *  - When the wheel is driven without the facade (the timer thread of
 *    wheel::start_thread(), or tw_advance() on native_handle()), there is no
 *    caller to rethrow to: an escaping exception calls std::terminate, as it
 *    would from a std::thread.
 *
 * Lifetime rules:
 *  - A closure is destroyed exactly once: right after a one-shot's callback
 *    returns, when a cancel succeeds, or when the wheel is destroyed with the
 *    timer pending (pending timers never fire at destruction).
 *  - A timer handle owns no part of the wheel: it shares a small heap block
 *    with its closure, which the wheel marks dead when it hands the closure
 *    back. A handle may outlive the firing, the wheel object being moved, and
 *    the wheel itself, and may be destroyed from inside its own callback.
 *  - With several threads, cancel() and the destructor wait for a callback
 *    running on another thread to return (like tw_cancel() for a one-shot,
 *    and for a periodic timer too): once they return, the closure is gone
 *    and whatever it captured by reference may die.
 *  - Callbacks may add, cancel and reschedule timers of their wheel, their own
 *    included. Calling expire()/advance() of the same wheel from a callback
 *    throws std::system_error(EBUSY); destroying the wheel from a callback is
 *    the caller's error (the C library refuses and the facade then leaks the
 *    wheel rather than free it under the running driver). A closure may hold
 *    the last reference to its wheel: when cancel() from plain code releases
 *    it, tw_cancel() destroys the wheel once the closure is gone.
 */
#ifndef TW_TIMER_HPP
#define TW_TIMER_HPP

/* Said plainly, and alone, rather than as the first of many template errors:
 * the facade needs C++17 (std::optional, if constexpr) and exceptions (errors
 * are std::system_error). Without exceptions, use the C API of timer.h, which
 * C++ code can call directly. The rest of the file is skipped after an
 * #error, so the message is the only one. */
#if !defined(_MSVC_LANG) && __cplusplus < 201703L
#error "twheel/timer.hpp needs C++17 or later (-std=c++17); the C API in twheel/timer.h works with any C++"
#elif defined(_MSVC_LANG) && _MSVC_LANG < 201703L
#error "twheel/timer.hpp needs C++17 or later (/std:c++17); the C API in twheel/timer.h works with any C++"
#elif !defined(__cpp_exceptions) && !defined(__EXCEPTIONS) && !defined(_CPPUNWIND)
#error "twheel/timer.hpp reports errors as exceptions and cannot be built with -fno-exceptions; use the C API in twheel/timer.h"
#else

#include "timer.h"

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <limits>
#include <new>
#include <optional>
#include <ratio>
#include <system_error>
#include <thread>
#include <type_traits>
#include <utility>

namespace twheel {

/* Durations the facade hands back (ticks times the tick length). */
using duration = std::chrono::microseconds;

enum class lock_kind : int {
    adaptive = TW_LOCK_ADAPTIVE, /* default: spins briefly, then sleeps */
    spin = TW_LOCK_SPIN,   /* only when threads never outnumber cores */
    mutex = TW_LOCK_MUTEX,
    none = TW_LOCK_NONE    /* single-threaded: no lock, no atomics */
};

/* Where a delay counts from: see tw_drive_kind in timer.h. */
enum class drive_kind : int {
    automatic = TW_DRIVE_AUTO, /* default: clock-driven once expire() ran
                                  (or the timer thread started), tick-driven
                                  once advance() ran first */
    clock = TW_DRIVE_CLOCK,    /* from the clock at the call, from creation */
    ticks = TW_DRIVE_TICKS     /* from now(); exact in ticks; no clock read */
};

enum class clock_kind : int {
    monotonic = TW_CLOCK_MONOTONIC,
    monotonic_coarse = TW_CLOCK_MONOTONIC_COARSE
};

/* Creation parameters; the defaults are tw_config_init()'s. An aggregate, so
 * C++20 code may write wheel{{.tick = 10ms, .lock = lock_kind::none}}. */
struct config {
    std::chrono::microseconds tick{1000};  /* tick length; skynet uses 10 ms */
    lock_kind lock = lock_kind::adaptive;
    std::uint64_t max_timers = 0;          /* cap on pending timers; 0 = none */
    clock_kind clock = clock_kind::monotonic;
    tw_clock_fn *clock_fn = nullptr;       /* optional clock (fake clocks) */
    void *clock_context = nullptr;
    tw_realloc_fn *realloc_fn = nullptr;   /* optional allocator */
    void *alloc_context = nullptr;
    std::uint64_t start_tick = 0;          /* initial now() */
    drive_kind drive = drive_kind::automatic;
};

class wheel;
class timer;

namespace detail {

[[noreturn]] inline void throw_error(int error, const char *what)
{
    throw std::system_error(error, std::generic_category(), what);
}

/* The heap block a timer handle shares with its closure. The wheel holds one
 * reference (given up in the release hook), a handle the other. The closure
 * itself is destroyed in the release hook, whoever still holds the block. */
class block {
public:
    /* pending -> (one-shot: fired ->) releasing -> released */
    enum : unsigned char { pending, fired, releasing, released };

    block(tw_wheel *w, std::uint32_t tick_us, bool threaded, bool periodic,
          unsigned refs)
        : refs_(refs), state_(pending), periodic_(periodic), threaded_(threaded),
          tick_us_(tick_us), wheel_(w)
    {
    }
    block(const block &) = delete;
    block &operator=(const block &) = delete;

    bool live() const noexcept
    {
        return state_.load(std::memory_order_acquire) == pending;
    }
    /* The C library may still name it: pending, or a one-shot running. */
    bool known_to_wheel() const noexcept
    {
        return state_.load(std::memory_order_acquire) <= fired;
    }
    /* Its closure has been destroyed. */
    bool released_yet() const noexcept
    {
        return state_.load(std::memory_order_acquire) == released;
    }
    bool threaded() const noexcept { return threaded_; }
    tw_wheel *native_wheel() const noexcept { return wheel_; }
    std::uint32_t tick_us() const noexcept { return tick_us_; }

    void unref() noexcept
    {
        if (refs_.fetch_sub(1, std::memory_order_acq_rel) == 1)
            delete this;
    }

    /* Called by the C library only. */
    void fire()
    {
        if (!periodic_) /* the C id of a one-shot dies when it starts */
            state_.store(fired, std::memory_order_release);
        invoke();
    }
    void release() noexcept
    {
        state_.store(releasing, std::memory_order_release);
        drop_closure();
        state_.store(released, std::memory_order_release);
        unref();
    }

    virtual ~block() = default;

    tw_id id = 0; /* written once by the creating thread, read by the handle */

private:
    virtual void invoke() = 0;
    virtual void drop_closure() noexcept = 0;

    std::atomic<unsigned> refs_;
    std::atomic<unsigned char> state_;
    bool periodic_;
    bool threaded_; /* not a TW_LOCK_NONE wheel */
    std::uint32_t tick_us_;
    tw_wheel *wheel_;
};

template <class F>
class closure_block final : public block {
public:
    template <class G>
    closure_block(tw_wheel *w, std::uint32_t tick_us, bool threaded, bool periodic,
                  unsigned refs, G &&g)
        : block(w, tick_us, threaded, periodic, refs),
          fn_(std::in_place, std::forward<G>(g))
    {
    }

private:
    void invoke() override { static_cast<void>(std::invoke(*fn_)); }
    void drop_closure() noexcept override { fn_.reset(); }

    std::optional<F> fn_;
};

/* One frame per facade-driven expire()/advance() on this thread (a callback
 * may drive another wheel, so frames nest). Holds the first exception thrown
 * by a callback of that wheel until the C call has returned. */
struct drive_frame {
    explicit drive_frame(tw_wheel *w) noexcept : wheel(w), outer(top()) { top() = this; }
    ~drive_frame() { top() = outer; }
    drive_frame(const drive_frame &) = delete;
    drive_frame &operator=(const drive_frame &) = delete;

    static drive_frame *&top() noexcept
    {
        static thread_local drive_frame *frame = nullptr;
        return frame;
    }

    tw_wheel *wheel;
    drive_frame *outer;
    std::exception_ptr error;
};

/* The callbacks (and release hooks) running on this thread, innermost first
 * (a callback may drive another wheel). */
struct run_frame {
    explicit run_frame(const block *b) noexcept : running(b), outer(top()) { top() = this; }
    ~run_frame() { top() = outer; }
    run_frame(const run_frame &) = delete;
    run_frame &operator=(const run_frame &) = delete;

    static run_frame *&top() noexcept
    {
        static thread_local run_frame *frame = nullptr;
        return frame;
    }
    static bool inside(const block *b) noexcept
    {
        for (const run_frame *f = top(); f; f = f->outer)
            if (f->running == b)
                return true;
        return false;
    }

    const block *running;
    run_frame *outer;
};

/* The wheel this thread is destroying, if any: handles destroyed by closures
 * released during tw_destroy() must not call back into that wheel. */
inline tw_wheel *&destroying() noexcept
{
    static thread_local tw_wheel *w = nullptr;
    return w;
}

/* The only callback and release functions the facade gives the C library
 * (a wheel remembers a bounded number of distinct release functions). */
inline void on_fire(tw_wheel *w, tw_id, void *user_data) noexcept
{
    const run_frame running(static_cast<block *>(user_data));
    try {
        static_cast<block *>(user_data)->fire();
    } catch (...) {
        for (drive_frame *f = drive_frame::top(); f; f = f->outer) {
            if (f->wheel == w) {
                if (!f->error)
                    f->error = std::current_exception();
                return;
            }
        }
        std::terminate(); /* driven outside the facade: nowhere to rethrow */
    }
}

inline void on_release(void *user_data) noexcept
{
    const run_frame releasing(static_cast<block *>(user_data));
    static_cast<block *>(user_data)->release();
}

/* Whole ticks covering d, rounded up (never early). Negative durations count
 * as 0; results too large for uint64_t saturate, so the C library reports
 * ERANGE for them. Exact for integer representations. */
template <class Rep, class Period>
std::uint64_t to_ticks(std::chrono::duration<Rep, Period> d, std::uint32_t tick_us)
{
    constexpr std::uint64_t sat = std::numeric_limits<std::uint64_t>::max();
    if (tick_us == 0)
        return sat;
    using r = std::ratio_divide<Period, std::micro>; /* d in µs = count*num/den */
    if constexpr (std::is_floating_point_v<Rep>) {
        const long double us = static_cast<long double>(d.count()) *
                               static_cast<long double>(r::num) /
                               static_cast<long double>(r::den);
        const long double t = us / static_cast<long double>(tick_us);
        if (std::isnan(t))
            return sat;
        if (t <= 0)
            return 0;
        if (!(t < 18446744073709551615.0L))
            return sat;
        std::uint64_t n = static_cast<std::uint64_t>(t);
        return static_cast<long double>(n) < t ? n + 1 : n;
    } else {
        static_assert(std::is_integral_v<Rep>, "duration rep must be arithmetic");
        if (d.count() <= 0)
            return 0;
#if defined(__SIZEOF_INT128__)
        __extension__ typedef unsigned __int128 u128;
        const u128 num = static_cast<u128>(static_cast<std::uint64_t>(r::num)) *
                         static_cast<u128>(static_cast<std::uint64_t>(d.count()));
        const u128 den = static_cast<u128>(static_cast<std::uint64_t>(r::den)) * tick_us;
        const u128 t = num / den + (num % den != 0);
        return t > sat ? sat : static_cast<std::uint64_t>(t);
#else
        const long double us = static_cast<long double>(d.count()) *
                               static_cast<long double>(r::num) /
                               static_cast<long double>(r::den);
        return to_ticks(std::chrono::duration<long double, std::micro>(us), tick_us);
#endif
    }
}

inline duration ticks_to_duration(std::uint64_t ticks, std::uint32_t tick_us) noexcept
{
    constexpr auto max = static_cast<std::uint64_t>(duration::max().count());
    if (tick_us != 0 && ticks > max / tick_us)
        return duration::max();
    return duration(static_cast<duration::rep>(ticks * tick_us));
}

} // namespace detail

/* A pending timer. Move-only; its destructor cancels the timer (destroying
 * the closure) unless detach() was called. All members are safe after the
 * timer fired and after its wheel was destroyed: they then do nothing. */
class [[nodiscard]] timer {
public:
    timer() noexcept = default;
    timer(timer &&other) noexcept : b_(std::exchange(other.b_, nullptr)) {}
    timer &operator=(timer &&other) noexcept
    {
        if (this != &other) {
            reset();
            b_ = std::exchange(other.b_, nullptr);
        }
        return *this;
    }
    timer(const timer &) = delete;
    timer &operator=(const timer &) = delete;
    ~timer() { reset(); }

    /* Stops the timer. true when this stopped a run that would have happened,
     * false when it had fired (a one-shot), was cancelled, or the wheel is
     * gone. The handle is empty afterwards. Thread-safe: when the callback is
     * running on another thread (the driver, a timer thread), cancel() waits
     * for it to return, so once cancel() or the destructor has returned the
     * callback is not running and its closure has been destroyed -- except
     * from inside that very callback, where the closure is destroyed right
     * after the callback returns. */
    bool cancel() noexcept
    {
        bool stopped = false;
        if (b_ && !b_->released_yet() && detail::destroying() != b_->native_wheel()) {
            /* tw_cancel() itself waits for a one-shot running elsewhere */
            if (b_->known_to_wheel())
                stopped = tw_cancel(b_->native_wheel(), b_->id) == 1;
            /* a periodic timer's callback, or any closure's destructor, may
             * still run on another thread: wait until the closure is gone
             * (never for our own callback or release: that would deadlock) */
            if (b_->threaded() && !detail::run_frame::inside(b_))
                while (!b_->released_yet())
                    std::this_thread::yield();
        }
        drop();
        return stopped;
    }

    /* Whether the timer can still run: a one-shot until its callback starts,
     * a periodic timer until cancelled (or its wheel destroyed). */
    bool pending() const noexcept { return b_ && b_->live(); }

    /* Ticks from the wheel's now() until the next run, as a duration (0 when
     * due), or nullopt when not pending. On a clock-driven wheel now() lags
     * the clock between expire() calls, so this can exceed the time left. */
    std::optional<duration> remaining() const noexcept
    {
        if (!pending())
            return std::nullopt;
        const std::uint64_t t = tw_remaining(b_->native_wheel(), b_->id);
        if (t == TW_NEVER)
            return std::nullopt;
        return detail::ticks_to_duration(t, b_->tick_us());
    }

    /* Moves a pending timer so that it is next due `delay` from now (rounded
     * up to ticks; "now" as for wheel::after()); a periodic timer then keeps its interval
     * from there. false when the timer is not pending (a one-shot cannot be
     * rescheduled from its own callback: add a new timer instead). Throws
     * std::system_error(ERANGE) when delay exceeds the wheel's range, or
     * (ENOMEM) when the wheel cannot allocate (the timer is left as it was). */
    template <class Rep, class Period>
    bool reschedule(std::chrono::duration<Rep, Period> delay)
    {
        if (!pending())
            return false;
        const int r = tw_reschedule(b_->native_wheel(), b_->id,
                                    detail::to_ticks(delay, b_->tick_us()));
        if (r < 0)
            detail::throw_error(-r, "tw_reschedule");
        return r == 1;
    }

    /* Lets the timer run on without this handle; the wheel still destroys the
     * closure after the last run, on a cancel through tw_cancel(), or when the
     * wheel is destroyed. Returns its C id (0 for an empty handle). */
    tw_id detach() noexcept
    {
        const tw_id id = b_ ? b_->id : 0;
        drop();
        return id;
    }

    /* The C id (usable with tw_* calls on wheel::native_handle()), 0 if empty. */
    tw_id id() const noexcept { return b_ ? b_->id : 0; }
    explicit operator bool() const noexcept { return b_ != nullptr; }

private:
    friend class wheel;
    explicit timer(detail::block *b) noexcept : b_(b) {}

    void reset() noexcept { static_cast<void>(cancel()); }
    void drop() noexcept
    {
        if (b_)
            std::exchange(b_, nullptr)->unref();
    }

    detail::block *b_ = nullptr;
};

/* A timing wheel. Move-only owner of a tw_wheel*. Its destructor destroys
 * every pending closure without running it. Timer handles do not refer to
 * this object, so moving a wheel leaves them working. */
class wheel {
public:
    wheel() : wheel(config{}) {}
    explicit wheel(const config &cfg)
    {
        struct tw_config c;
        tw_config_init(&c);
        const auto tick = cfg.tick.count();
        c.tick_us = tick >= 1 && tick <= static_cast<long long>(TW_MAX_TICK_US)
                        ? static_cast<std::uint32_t>(tick)
                        : 0u; /* out of range: let tw_create() say EINVAL */
        c.lock = static_cast<int>(cfg.lock);
        c.clock = static_cast<int>(cfg.clock);
        c.clock_fn = cfg.clock_fn;
        c.clock_context = cfg.clock_context;
        c.realloc_fn = cfg.realloc_fn;
        c.alloc_context = cfg.alloc_context;
        c.max_timers = cfg.max_timers;
        c.start_tick = cfg.start_tick;
        c.drive = static_cast<int>(cfg.drive);
        w_ = tw_create(&c);
        if (!w_)
            detail::throw_error(errno, "tw_create");
        tick_us_ = tw_tick_us(w_);
        threaded_ = cfg.lock != lock_kind::none;
    }
    wheel(wheel &&other) noexcept
        : w_(std::exchange(other.w_, nullptr)), tick_us_(other.tick_us_),
          threaded_(other.threaded_)
    {
    }
    wheel &operator=(wheel &&other) noexcept
    {
        if (this != &other) {
            destroy();
            w_ = std::exchange(other.w_, nullptr);
            tick_us_ = other.tick_us_;
            threaded_ = other.threaded_;
        }
        return *this;
    }
    wheel(const wheel &) = delete;
    wheel &operator=(const wheel &) = delete;
    ~wheel() { destroy(); }

    /* Runs f() once, `delay` from now (rounded up to whole ticks; 0 runs it at
     * the start of the next expire()/advance()). On a clock-driven wheel
     * "now" is the clock at this call, whenever expire() last ran: f never
     * runs before `delay` has passed, and at most about one tick plus the
     * wait for the next expire() after it. On a tick-driven wheel it is
     * now(), exactly. See tw_add(). Throws std::system_error:
     * ERANGE (delay too long), ENOSPC (max_timers reached), ENOMEM, EINVAL
     * (moved-from wheel); f is then destroyed and nothing is scheduled. */
    template <class Rep, class Period, class F>
    timer after(std::chrono::duration<Rep, Period> delay, F &&f)
    {
        tw_id id;
        return timer(add(detail::to_ticks(delay, tick_us_), 0, std::forward<F>(f), 2, &id));
    }

    /* Runs f() every `interval` (rounded up to whole ticks, at least one),
     * first `first` from now ("now" as for after()), at a fixed rate without
     * drift: a driver that fell behind runs every missed firing, in order.
     * On a clock-driven wheel with `first` under one tick, the grid starts
     * at the tick the clock is in: later firings may come less than a tick
     * before k intervals have passed (tw_add_periodic()). Errors as after(),
     * plus EINVAL for an interval <= 0. */
    template <class R1, class P1, class R2, class P2, class F>
    timer every(std::chrono::duration<R1, P1> first,
                std::chrono::duration<R2, P2> interval, F &&f)
    {
        tw_id id;
        return timer(add_periodic(first, interval, std::forward<F>(f), 2, &id));
    }

    /* Fire-and-forget forms: no handle; the closure lives until it has run
     * (after()), or until the wheel is destroyed (every()), or until
     * tw_cancel(native_handle(), id) with the returned id. */
    template <class Rep, class Period, class F>
    tw_id after_detached(std::chrono::duration<Rep, Period> delay, F &&f)
    {
        tw_id id;
        add(detail::to_ticks(delay, tick_us_), 0, std::forward<F>(f), 1, &id);
        return id;
    }
    template <class R1, class P1, class R2, class P2, class F>
    tw_id every_detached(std::chrono::duration<R1, P1> first,
                         std::chrono::duration<R2, P2> interval, F &&f)
    {
        tw_id id;
        add_periodic(first, interval, std::forward<F>(f), 1, &id);
        return id;
    }

    /* Reads the wheel's clock and runs every callback now due; returns how
     * many ran. Rethrows the first exception a callback threw (after the whole
     * batch ran). Throws std::system_error EBUSY when called from one of this
     * wheel's callbacks or while another thread drives it. */
    std::size_t expire() { return drive(false, 0); }

    /* The same, moving the wheel `ticks` ticks forward without a clock. */
    std::size_t advance(std::uint64_t ticks) { return drive(true, ticks); }

    /* Ticks from now() until the earliest pending timer, as a duration (0
     * when one is due), or nullopt when nothing is pending. O(1); may be
     * early, never late, in the one case tw_next_expiry() names
     * (stats().next_expiry_exact is exact). On a clock-driven wheel now()
     * lags the clock between expire() calls: to sleep, use timeout_ms(),
     * which counts by the clock. */
    std::optional<duration> next_expiry() const noexcept
    {
        const std::uint64_t t = tw_next_expiry(w_);
        if (t == TW_NEVER)
            return std::nullopt;
        return detail::ticks_to_duration(t, tick_us_);
    }

    /* Milliseconds for epoll_wait()/poll(), by the wheel's clock: -1 idle,
     * 0 due, rounded up (tw_timeout_ms()). */
    int timeout_ms() const noexcept { return static_cast<int>(tw_timeout_ms(w_)); }

    /* Starts/stops the C library's timer thread, which calls tw_expire()
     * every `period` (callbacks then run on it, and must not throw).
     * stop_thread() is safe to call twice; throws EDEADLK from a callback. */
    template <class Rep, class Period>
    void start_thread(std::chrono::duration<Rep, Period> period)
    {
        const std::uint64_t us = detail::to_ticks(period, 1);
        const int r = tw_thread_start(
            w_, us > std::numeric_limits<std::uint32_t>::max()
                    ? std::numeric_limits<std::uint32_t>::max()
                    : static_cast<std::uint32_t>(us));
        if (r < 0)
            detail::throw_error(-r, "tw_thread_start");
    }
    void stop_thread()
    {
        const int r = tw_thread_stop(w_);
        if (r < 0)
            detail::throw_error(-r, "tw_thread_stop");
    }

    /* Live timers (pending, plus a periodic one whose callback runs). */
    std::size_t size() const noexcept { return static_cast<std::size_t>(tw_count(w_)); }
    bool empty() const noexcept { return size() == 0; }
    /* Current tick; inside a callback, the tick it was due at. */
    std::uint64_t now() const noexcept { return tw_now(w_); }
    duration tick() const noexcept { return duration(tick_us_); }
    /* Whole ticks covering d, as after() rounds it. */
    template <class Rep, class Period>
    std::uint64_t ticks(std::chrono::duration<Rep, Period> d) const
    {
        return detail::to_ticks(d, tick_us_);
    }
    tw_stats stats() const
    {
        tw_stats s{};
        s.size = sizeof s;
        const int r = tw_get_stats(w_, &s);
        if (r < 0)
            detail::throw_error(-r, "tw_get_stats");
        return s;
    }

    tw_wheel *native_handle() const noexcept { return w_; }
    explicit operator bool() const noexcept { return w_ != nullptr; }

private:
    /* Schedules f; refs 2 gives a block for a handle (returned), refs 1 a
     * detached timer (nullptr returned: a timer thread may already have run
     * and released it). *id receives the C id either way. */
    template <class F>
    detail::block *add(std::uint64_t delay, std::uint64_t interval, F &&f,
                       unsigned refs, tw_id *id)
    {
        using fn_type = std::decay_t<F>;
        static_assert(std::is_invocable_v<fn_type &>,
                      "twheel: a timer callback must be callable with no arguments");
        detail::block *b = new detail::closure_block<fn_type>(
            w_, tick_us_, threaded_, interval != 0, refs, std::forward<F>(f));
        *id = tw_add_ex(w_, delay, interval, &detail::on_fire, &detail::on_release, b);
        if (*id == 0) {
            const int error = errno;
            delete b; /* on failure the user data is still ours */
            detail::throw_error(error, "tw_add_ex");
        }
        if (refs == 1)
            return nullptr;
        b->id = *id; /* the wheel never reads it, so no race with a driver */
        return b;
    }

    template <class R1, class P1, class R2, class P2, class F>
    detail::block *add_periodic(std::chrono::duration<R1, P1> first,
                                std::chrono::duration<R2, P2> interval, F &&f,
                                unsigned refs, tw_id *id)
    {
        const std::uint64_t iv = detail::to_ticks(interval, tick_us_);
        if (iv == 0) /* tw_add_ex() would make a one-shot of it */
            detail::throw_error(EINVAL, "twheel::wheel::every: interval <= 0");
        return add(detail::to_ticks(first, tick_us_), iv, std::forward<F>(f), refs, id);
    }

    std::size_t drive(bool by_ticks, std::uint64_t ticks)
    {
        std::int64_t r;
        std::exception_ptr error;
        {
            detail::drive_frame frame(w_);
            r = by_ticks ? tw_advance(w_, ticks) : tw_expire(w_);
            error = std::move(frame.error);
        }
        if (error)
            std::rethrow_exception(error);
        if (r < 0)
            detail::throw_error(static_cast<int>(-r), by_ticks ? "tw_advance" : "tw_expire");
        return static_cast<std::size_t>(r);
    }

    void destroy() noexcept
    {
        if (!w_)
            return;
        tw_wheel *const outer = std::exchange(detail::destroying(), w_);
        const int r = tw_destroy(w_);
        detail::destroying() = outer;
        /* 0 also when deferred (from a closure released by tw_cancel: that
         * call finishes the destroy). -EBUSY: destroyed from its own
         * callback, the caller's error. The C library refused; leaking beats
         * freeing under the running driver. */
        static_cast<void>(r);
        w_ = nullptr;
    }

    tw_wheel *w_ = nullptr;
    std::uint32_t tick_us_ = 0;
    bool threaded_ = true;
};

} // namespace twheel

#endif /* C++17 with exceptions */
#endif /* TW_TIMER_HPP */
