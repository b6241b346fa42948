/*
 * twheel C++ facade: RAII handles, lambdas and std::chrono over the C API of
 * timer.h. Header-only, C++17, namespace twheel. Adds no timer structure of
 * its own: every member is a few lines over a tw_* call.
 *
 * Errors: a C error is a std::system_error (std::generic_category(), the
 * positive errno value) thrown by the call that caused it; destructors never
 * throw. No exception crosses a C frame: the trampolines catch everything.
 * An exception a callback throws goes to the wheel's on_error handler when
 * one is set; otherwise expire()/advance() collect every exception of the
 * batch (which runs to its end) and throw one callback_error holding them
 * all and the number of callbacks run. Where nobody called expire() (the
 * timer thread, tw_advance() on native_handle()) and no handler is set, an
 * escaping exception calls std::terminate, as from a std::thread.
 *
 * Lifetime: a closure is destroyed exactly once: right after a one-shot's
 * callback returns, when a cancel succeeds, or when the wheel is destroyed
 * with the timer pending (pending timers never fire then). A handle holds
 * the wheel's shared state and the C id, never the closure or the wheel
 * object, so it may outlive the firing, a move of the wheel, the wheel
 * itself (once its destruction has finished: not on another thread during
 * it), and be destroyed from inside its own callback or by the closure
 * its own cancel() destroys (a closure may own its handle, or the object
 * holding it: the shared_from_this idiom). A callback may destroy the wheel
 * object that runs it (a shutdown timer): every other pending closure is
 * released inside that destruction, the rest of the batch does not run,
 * and the wheel is freed as the driving call returns. While a wheel is
 * being destroyed, after()/every()/at() from a closure's destructor
 * schedule nothing and throw nothing (the closure is destroyed, the handle
 * empty); cancel() still works.
 *
 * Absolute time: time_point is std::chrono::steady_clock's. On Linux a
 * wheel on the built-in clocks reads steady_clock's own clock
 * (CLOCK_MONOTONIC; the coarse clock has the same epoch and lags by up to a
 * jiffy), so its deadlines are exact steady_clock time points. With a
 * custom clock_fn, or elsewhere, a reading of the wheel's clock is placed
 * on steady_clock by the offset between the two clocks at the call. On a
 * tick-driven wheel (advance() only) ticks do not follow any clock: at(t)
 * counts from the clock now, and deadlines are projections (now plus the
 * ticks left, one tick length each).
 *
 * A handle's states (what its members return):
 *
 *   state        pending()  remaining()/deadline()  cancel()  reschedule()
 *   empty        false      nullopt                 false     false
 *   pending      true       time to the next run    true      moves it
 *   running      one-shot false, periodic true (and its next run; cancel()
 *                true stops later runs; reschedule() moves the next run)
 *   fired        false      nullopt                 false     false
 *   cancelled    false      nullopt                 false     false
 *
 * empty: default-constructed, moved from, cancel()ed or detach()ed (cancel()
 * empties the handle); fired: a one-shot whose callback has started;
 * cancelled: by tw_cancel() on native_handle() or by the wheel's
 * destruction. operator bool is pending().
 *
 * Threads (every lock_kind but none; with none, one thread at a time uses
 * the wheel and every handle): the standard library's rule, with the wheel
 * object shared as a tw_wheel* is.
 *  - One wheel object may be used by several threads at once: after(),
 *    at(), every() and their _detached forms, expire()/advance() (one thread
 *    drives at a time; a second one gets std::system_error EBUSY),
 *    start_thread()/stop_thread() and the queries. Not on_error(), which is
 *    set before other threads use the wheel, nor move-assignment or
 *    destruction, which need every other thread done with the object.
 *  - Distinct timer handles are independent: each thread may cancel,
 *    reschedule, detach, move and destroy its own handles while other
 *    threads do the same with theirs and another drives the wheel.
 *  - One handle object is not shared without a lock: its const members
 *    (pending(), remaining(), deadline(), id(), operator bool) may run on
 *    several threads at once, but cancel(), reschedule(), detach(),
 *    assignment and destruction must not run while another thread uses
 *    that same object. Two threads cancelling one handle object at once
 *    race on the handle (the standard calls that undefined behaviour); hand
 *    a handle to another thread under a mutex, or keep it with one thread.
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

#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace twheel {

/* Durations the facade hands back (ticks times the tick length). */
using duration = std::chrono::microseconds;
/* Points in time: std::chrono::steady_clock's. See "Absolute time" in the
 * header comment for what they mean on each kind of wheel. */
using time_point = std::chrono::steady_clock::time_point;

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

/* Thrown by expire()/advance() when callbacks threw and no on_error handler
 * is set: every exception of the batch, in order, and how many callbacks
 * ran (the throwing ones included). what() names the count and the first.
 * (A template only so that its vtable lives in the header without a
 * -Wweak-vtables warning; use the alias.) */
template <class = void>
class basic_callback_error : public std::runtime_error {
public:
    basic_callback_error(std::size_t fired, std::vector<std::exception_ptr> errors)
        : std::runtime_error(describe(errors)), fired_(fired),
          errors_(std::make_shared<const std::vector<std::exception_ptr>>(std::move(errors)))
    {
    }
    /* Callbacks the call ran, those that threw included. */
    std::size_t fired() const noexcept { return fired_; }
    /* Every exception thrown by a callback of the call, in order. */
    const std::vector<std::exception_ptr> &errors() const noexcept { return *errors_; }

private:
    static std::string describe(const std::vector<std::exception_ptr> &errors)
    {
        std::string text = "twheel: " + std::to_string(errors.size()) +
                           (errors.size() == 1 ? " callback threw: " : " callbacks threw; first: ");
        try {
            std::rethrow_exception(errors.at(0));
        } catch (const std::exception &e) {
            text += e.what();
        } catch (...) {
            text += "an exception not derived from std::exception";
        }
        return text;
    }

    std::size_t fired_;
    /* shared: copying an exception object must not throw */
    std::shared_ptr<const std::vector<std::exception_ptr>> errors_;
};
using callback_error = basic_callback_error<>;

class wheel;
class timer;

namespace detail {

/* A conversion that is a no-op on some platforms (uint64_t to size_t):
 * no cast where the types agree, so -Wuseless-cast stays quiet. */
template <class To, class From>
constexpr To convert(From value) noexcept
{
    if constexpr (std::is_same_v<To, From>)
        return value;
    else
        return static_cast<To>(value);
}

[[noreturn]] inline void throw_error(int error, const char *what)
{
    throw std::system_error(error, std::generic_category(), what);
}

/* ---- closure storage ---------------------------------------------------
 * A closure lives in one of three places, chosen by its type:
 *  - inline: a trivially copyable closure of at most a pointer's size whose
 *    call operator is const (a lambda capturing one pointer) is carried in
 *    the C timer's user_data itself: no memory, no release hook;
 *  - a pooled slot of the wheel: up to slot_bytes, alignment up to 8;
 *  - its own heap block: anything larger.
 * Slots and blocks start with a header the C release hook dispatches on. */

struct closure_header;
struct closure_ops {
    void (*invoke)(closure_header *);
    void (*destroy)(closure_header *) noexcept; /* and frees the storage */
};
class closure_pool;
struct closure_header {
    const closure_ops *ops;
    closure_pool *pool; /* the pool the slot returns to; null for a block */
};

constexpr std::size_t slot_bytes = 48;
struct slot {
    closure_header header;
    union {
        slot *next_free;
        alignas(8) unsigned char storage[slot_bytes];
    };
};

/* A wheel's free list of slots, grown by chunks and freed with the wheel
 * (every closure has been released by then). Taken by the adding thread,
 * given back by whichever thread releases the closure: a short spinlock on
 * wheels with a lock, nothing on lock_kind::none. */
class closure_pool {
public:
    explicit closure_pool(bool threaded) noexcept : threaded_(threaded) {}
    closure_pool(const closure_pool &) = delete;
    closure_pool &operator=(const closure_pool &) = delete;
    ~closure_pool() { clear(); }

    /* Frees every chunk; only once no slot is in use (the wheel is gone). */
    void clear() noexcept
    {
        while (chunks_) {
            chunk *next = chunks_->next;
            delete chunks_;
            chunks_ = next;
        }
        free_ = nullptr;
    }

    slot *take()
    {
        {
            guard held(*this);
            if (free_)
                return pop();
        }
        chunk *c = new chunk; /* outside the lock: releases go on meanwhile */
        guard held(*this);
        c->next = chunks_;
        chunks_ = c;
        for (slot &s : c->slots) {
            s.next_free = free_;
            free_ = &s;
        }
        return pop();
    }
    void give(slot *s) noexcept
    {
        guard held(*this);
        s->next_free = free_;
        free_ = s;
    }

private:
    struct chunk {
        chunk *next;
        slot slots[256];
    };
    struct guard {
        explicit guard(closure_pool &p) noexcept : pool(p)
        {
            if (!pool.threaded_)
                return;
            while (pool.busy_.exchange(true, std::memory_order_acquire))
                while (pool.busy_.load(std::memory_order_relaxed))
                    std::this_thread::yield();
        }
        ~guard()
        {
            if (pool.threaded_)
                pool.busy_.store(false, std::memory_order_release);
        }
        guard(const guard &) = delete;
        guard &operator=(const guard &) = delete;
        closure_pool &pool;
    };

    slot *pop() noexcept /* lock held, free list not empty */
    {
        slot *s = free_;
        free_ = s->next_free;
        return s;
    }

    slot *free_ = nullptr;
    chunk *chunks_ = nullptr;
    std::atomic<bool> busy_{false};
    bool threaded_;
};

template <class F>
constexpr bool fits_inline = std::is_trivially_copyable_v<F> && sizeof(F) <= sizeof(void *) &&
                             alignof(F) <= alignof(void *) && std::is_invocable_v<const F &>;
template <class F>
constexpr bool fits_slot = sizeof(F) <= slot_bytes && alignof(F) <= 8;

template <class F>
struct boxed : closure_header {
    template <class G>
    boxed(const closure_ops *o, G &&g) : closure_header{o, nullptr}, fn(std::forward<G>(g))
    {
    }
    F fn;
};

template <class F>
F &pooled_fn(closure_header *h) noexcept
{
    return *std::launder(reinterpret_cast<F *>(reinterpret_cast<slot *>(h)->storage));
}

template <class F>
struct ops_for {
    static void invoke_pooled(closure_header *h) { static_cast<void>(std::invoke(pooled_fn<F>(h))); }
    static void destroy_pooled(closure_header *h) noexcept
    {
        std::destroy_at(&pooled_fn<F>(h)); /* may re-enter the facade: pool not locked */
        h->pool->give(reinterpret_cast<slot *>(h));
    }
    static void invoke_boxed(closure_header *h)
    {
        static_cast<void>(std::invoke(static_cast<boxed<F> *>(h)->fn));
    }
    static void destroy_boxed(closure_header *h) noexcept { delete static_cast<boxed<F> *>(h); }
    static constexpr closure_ops pooled{invoke_pooled, destroy_pooled};
    static constexpr closure_ops boxed_ops{invoke_boxed, destroy_boxed};
};

/* Stores f; the caller hands the header to the C library (or destroys it
 * through its ops if the add fails). */
template <class F, class G>
closure_header *store_closure(closure_pool &pool, G &&g)
{
    if constexpr (fits_slot<F>) {
        slot *s = pool.take();
        try {
            ::new (static_cast<void *>(s->storage)) F(std::forward<G>(g));
        } catch (...) {
            pool.give(s);
            throw;
        }
        s->header.ops = &ops_for<F>::pooled;
        s->header.pool = &pool;
        return &s->header;
    } else {
        return new boxed<F>(&ops_for<F>::boxed_ops, std::forward<G>(g));
    }
}

/* ---- per-wheel state -----------------------------------------------------
 * Shared by the wheel object and every handle, so that a handle may outlive
 * the wheel: `wheel` turns null once the C wheel is freed (its on_destroy),
 * and the state itself goes with the last reference. */
struct wheel_state {
    wheel_state(std::uint32_t tick, bool is_threaded, bool is_steady)
        : pool(is_threaded), tick_us(tick), threaded(is_threaded), steady(is_steady)
    {
    }

    void ref() noexcept
    {
        if (threaded)
            refs.fetch_add(1, std::memory_order_relaxed);
        else /* one thread by contract: no locked instruction */
            refs.store(refs.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    }
    void unref() noexcept
    {
        std::size_t before;
        if (threaded) {
            before = refs.fetch_sub(1, std::memory_order_acq_rel);
        } else {
            before = refs.load(std::memory_order_relaxed);
            refs.store(before - 1, std::memory_order_relaxed);
        }
        if (before == 1)
            delete this;
    }

    /* Clock readings of the wheel (µs) and steady_clock time points. On
     * Linux the built-in clocks are steady_clock's own (CLOCK_MONOTONIC and
     * its coarse twin share the epoch): the conversion is exact. A custom
     * clock is mapped through the offset between the two clocks now. */
    time_point to_time_point(tw_wheel *w, std::uint64_t us) const
    {
        using clock_type = std::chrono::steady_clock;
        constexpr auto max_us = static_cast<std::uint64_t>(std::chrono::duration_cast<duration>(
                                    (clock_type::duration::max)()).count());
        if (steady)
            return time_point(std::chrono::duration_cast<clock_type::duration>(
                duration(static_cast<duration::rep>(us < max_us ? us : max_us))));
        const std::uint64_t clock = tw_clock_us(w);
        const time_point now = clock_type::now();
        /* Saturated: an offset past what the time point can hold is its end.
         * steady_clock's epoch lies in the past (now >= 0), so now minus any
         * offset the duration holds stays above time_point::min(). */
        const auto now_us = static_cast<std::uint64_t>(
            std::chrono::duration_cast<duration>(now.time_since_epoch()).count());
        if (us >= clock)
            return us - clock >= max_us - now_us
                       ? (time_point::max)()
                       : now + duration(static_cast<duration::rep>(us - clock));
        return clock - us >= max_us
                   ? (time_point::min)()
                   : now - duration(static_cast<duration::rep>(clock - us));
    }
    /* Microseconds of the wheel's clock from now until t, rounded up (never
     * early); 0 for a time already past. */
    std::uint64_t until(tw_wheel *w, time_point t) const
    {
        using std::chrono::ceil;
        const std::uint64_t clock = tw_clock_us(w);
        if (steady) {
            const auto us = ceil<duration>(t.time_since_epoch()).count();
            return us > 0 && static_cast<std::uint64_t>(us) > clock
                       ? static_cast<std::uint64_t>(us) - clock
                       : 0;
        }
        const time_point now = std::chrono::steady_clock::now();
        /* compared first: t - now overflows for t = time_point::min(); once
         * t > now it cannot (steady_clock's epoch lies in the past) */
        if (t <= now)
            return 0;
        return static_cast<std::uint64_t>(ceil<duration>(t - now).count());
    }

    std::atomic<std::size_t> refs{1}; /* the C wheel's, plus one per handle */
    std::atomic<tw_wheel *> wheel{nullptr};
    closure_pool pool;
    /* called for each exception a callback throws; set from plain code */
    std::function<void(std::exception_ptr)> on_error;
    std::uint32_t tick_us;
    bool threaded; /* not lock_kind::none */
    bool steady;   /* the wheel's clock is steady_clock's */
};

/* The C wheel's on_destroy: it has been freed, every closure released. */
inline void on_wheel_destroyed(void *context)
{
    auto *state = static_cast<wheel_state *>(context);
    state->wheel.store(nullptr, std::memory_order_release);
    state->pool.clear(); /* handles may keep the state, not the slots */
    state->unref();
}

/* ---- callbacks and exceptions ------------------------------------------ */

/* One frame per facade-driven expire()/advance() on this thread (a callback
 * may drive another wheel, so frames nest). Collects the exceptions thrown
 * by callbacks of that wheel until the C call has returned. */
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
    std::vector<std::exception_ptr> errors;
};

/* Inside a catch block: hands the exception to the wheel's on_error, else
 * to the facade call driving it; with neither (the timer thread, or
 * tw_advance on native_handle()) there is nowhere to report it. */
inline void report_error(tw_wheel *w) noexcept
{
    const auto *state = static_cast<const wheel_state *>(tw_context(w));
    if (state && state->on_error) {
        state->on_error(std::current_exception()); /* a throw here: terminate */
        return;
    }
    for (drive_frame *f = drive_frame::top(); f; f = f->outer) {
        if (f->wheel == w) {
            f->errors.push_back(std::current_exception());
            return;
        }
    }
    std::terminate();
}

inline void on_fire(tw_wheel *w, tw_id, void *user_data) noexcept
{
    auto *h = static_cast<closure_header *>(user_data);
    try {
        h->ops->invoke(h);
    } catch (...) {
        report_error(w);
    }
}

template <class F>
void on_fire_inline(tw_wheel *w, tw_id, void *user_data) noexcept
{
    try {
        /* the closure's bytes, copied out of the pointer (trivially
         * copyable, so the copy is the object) */
        alignas(F) unsigned char bytes[sizeof(F)];
        std::memcpy(bytes, &user_data, sizeof(F));
        static_cast<void>(std::invoke(*std::launder(reinterpret_cast<const F *>(bytes))));
    } catch (...) {
        report_error(w);
    }
}

inline void on_release(void *user_data) noexcept
{
    auto *h = static_cast<closure_header *>(user_data);
    h->ops->destroy(h);
}

/* a * b as a 128-bit number (high, low), from 32-bit halves: exact on
 * every compiler, with or without a 128-bit integer type. */
struct wide {
    std::uint64_t high, low;
};

constexpr wide multiply_wide(std::uint64_t a, std::uint64_t b) noexcept
{
    const std::uint64_t mask = 0xffffffffu;
    const std::uint64_t a0 = a & mask, a1 = a >> 32, b0 = b & mask, b1 = b >> 32;
    const std::uint64_t p00 = a0 * b0, p01 = a0 * b1, p10 = a1 * b0, p11 = a1 * b1;
    const std::uint64_t middle = (p00 >> 32) + (p01 & mask) + (p10 & mask);
    return {p11 + (p01 >> 32) + (p10 >> 32) + (middle >> 32), (middle << 32) | (p00 & mask)};
}

/* x / d rounded up, as a 128-bit number; d != 0. The low half of a
 * 128-bit dividend is divided bit by bit, but only when the dividend does
 * not fit in 64 bits (a duration of more than about 584 years in
 * nanoseconds): every other case is one 64-bit division. */
constexpr wide divide_up(wide x, std::uint64_t d) noexcept
{
    if (x.high == 0)
        return {0, x.low / d + (x.low % d != 0)};
    wide q{x.high / d, 0};
    std::uint64_t r = x.high % d;
    for (int bit = 63; bit >= 0; --bit) {
        const bool carry = (r >> 63) != 0;
        r = (r << 1) | ((x.low >> bit) & 1u);
        q.low <<= 1;
        if (carry || r >= d) {
            r -= d;
            q.low |= 1u;
        }
    }
    if (r != 0 && ++q.low == 0)
        ++q.high;
    return q;
}

/* Whole ticks covering d, rounded up (never early). Negative durations count
 * as 0; results too large for uint64_t saturate, so the C library reports
 * ERANGE for them. Exact for integer representations, with or without a
 * 128-bit integer type (TWHEEL_NO_INT128 forces the portable arithmetic,
 * which is what MSVC compiles). */
template <class Rep, class Period>
std::uint64_t to_ticks(std::chrono::duration<Rep, Period> d, std::uint32_t tick_us)
{
    constexpr std::uint64_t sat = (std::numeric_limits<std::uint64_t>::max)();
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
        const auto count = static_cast<std::uint64_t>(d.count());
        const auto num = static_cast<std::uint64_t>(r::num);
        const auto den = static_cast<std::uint64_t>(r::den);
#if defined(__SIZEOF_INT128__) && !defined(TWHEEL_NO_INT128)
        __extension__ typedef unsigned __int128 u128;
        const u128 x = static_cast<u128>(num) * count;
        const u128 den_ticks = static_cast<u128>(den) * tick_us;
        const u128 t = x / den_ticks + (x % den_ticks != 0);
        return t > sat ? sat : static_cast<std::uint64_t>(t);
#else
        /* ceil(ceil(x / den) / tick) == ceil(x / (den * tick)) */
        const wide t = divide_up(divide_up(multiply_wide(num, count), den), tick_us);
        return t.high != 0 ? sat : t.low;
#endif
    }
}

inline duration ticks_to_duration(std::uint64_t ticks, std::uint32_t tick_us) noexcept
{
    constexpr auto max = static_cast<std::uint64_t>((duration::max)().count());
    if (tick_us != 0 && ticks > max / tick_us)
        return (duration::max)();
    return duration(static_cast<duration::rep>(ticks * tick_us));
}

} // namespace detail

/* A handle to a timer: its wheel's shared state and the C id. Move-only;
 * its destructor cancels the timer (destroying the closure) unless detach()
 * was called. Every member is safe after the timer fired, was cancelled,
 * or its wheel was destroyed: they then do nothing. See the state table in
 * the header comment. */
class [[nodiscard]] timer {
public:
    timer() noexcept = default;
    timer(timer &&other) noexcept
        : state_(std::exchange(other.state_, nullptr)), id_(std::exchange(other.id_, 0))
    {
    }
    /* Takes other's timer first, then cancels the one this handle held: the
     * closure that cancel destroys may own this handle (or other). */
    timer &operator=(timer &&other) noexcept
    {
        if (this != &other) {
            timer old(std::move(*this));
            state_ = std::exchange(other.state_, nullptr);
            id_ = std::exchange(other.id_, 0);
            static_cast<void>(old.cancel());
        }
        return *this;
    }
    timer(const timer &) = delete;
    timer &operator=(const timer &) = delete;
    ~timer() { static_cast<void>(cancel()); }

    /* Stops the timer; the handle is empty afterwards (even when the
     * closure this destroys owned the handle). true when this stopped a
     * run that would have happened (a periodic timer: any further run),
     * false when a one-shot had started or fired, the timer was cancelled
     * already, or the wheel is gone. Callable on any thread while another
     * drives the wheel (any lock but none), but not on one handle object
     * from two threads at once (see "Threads" above): when the callback
     * runs on another thread, cancel() waits for it and for the closure's
     * destruction (tw_cancel()), so once cancel() or the destructor has
     * returned the callback is not running -- except from inside that
     * callback, where a periodic closure is destroyed right after it
     * returns. Do not hold, while cancelling, a lock the callback takes. */
    bool cancel() noexcept
    {
        detail::wheel_state *const state = std::exchange(state_, nullptr);
        const tw_id id = std::exchange(id_, 0);
        if (!state)
            return false;
        bool stopped = false;
        if (tw_wheel *const w = state->wheel.load(std::memory_order_acquire))
            stopped = tw_cancel(w, id) == 1;
        state->unref();
        return stopped;
    }

    /* Whether the timer will run again: a one-shot until its callback
     * starts, a periodic timer until cancelled (also while its callback
     * runs). false for an empty handle. Takes the wheel's lock. */
    bool pending() const noexcept
    {
        tw_wheel *const w = native();
        return w && tw_remaining(w, id_) != TW_NEVER;
    }
    /* pending() */
    explicit operator bool() const noexcept { return pending(); }

    /* Ticks from the wheel's now() until the next run, as a duration (0 when
     * due), or nullopt when not pending. On a clock-driven wheel now() lags
     * the clock between expire() calls: deadline() is the point in time. */
    std::optional<duration> remaining() const noexcept
    {
        tw_wheel *const w = native();
        const std::uint64_t t = w ? tw_remaining(w, id_) : TW_NEVER;
        if (t == TW_NEVER)
            return std::nullopt;
        return detail::ticks_to_duration(t, state_->tick_us);
    }

    /* When the next run is due, by the wheel's clock (tw_deadline_us()): the
     * first expire() at or after it runs the timer. nullopt when not
     * pending. On a tick-driven wheel, a projection: now plus the ticks
     * left, one tick length each. */
    std::optional<time_point> deadline() const
    {
        tw_wheel *const w = native();
        const std::uint64_t us = w ? tw_deadline_us(w, id_) : TW_NEVER;
        if (us == TW_NEVER)
            return std::nullopt;
        return state_->to_time_point(w, us);
    }

    /* Moves a pending timer so that it is next due `delay` from now (rounded
     * up to ticks; "now" as for wheel::after()); a periodic timer then keeps
     * its interval from there. false when the timer is not pending (a
     * one-shot cannot be rescheduled from its own callback: add a new timer
     * instead). Throws std::system_error(ERANGE) when delay exceeds the
     * wheel's range (the timer is left as it was); never fails for memory
     * (see tw_reschedule()). */
    template <class Rep, class Period>
    bool reschedule(std::chrono::duration<Rep, Period> delay)
    {
        tw_wheel *const w = native();
        if (!w)
            return false;
        return result(tw_reschedule(w, id_, detail::to_ticks(delay, state_->tick_us)),
                      "tw_reschedule");
    }

    /* The same, and the timer runs every `interval` from its new due time
     * on (a one-shot becomes periodic). Also from inside its own callback,
     * for a periodic timer. Throws as above, and EINVAL for an interval
     * <= 0 (cancel() stops a timer). */
    template <class R1, class P1, class R2, class P2>
    bool reschedule(std::chrono::duration<R1, P1> delay, std::chrono::duration<R2, P2> interval)
    {
        tw_wheel *const w = native();
        if (!w)
            return false;
        const std::uint64_t every = detail::to_ticks(interval, state_->tick_us);
        if (every == 0)
            detail::throw_error(EINVAL, "twheel::timer::reschedule: interval <= 0");
        return result(tw_reschedule_ex(w, id_, detail::to_ticks(delay, state_->tick_us), every),
                      "tw_reschedule_ex");
    }

    /* Lets the timer run on without this handle; the wheel still destroys the
     * closure after the last run, on a cancel through tw_cancel(), or when the
     * wheel is destroyed. Returns its C id (0 for an empty handle). */
    tw_id detach() noexcept
    {
        const tw_id id = id_;
        if (state_)
            std::exchange(state_, nullptr)->unref();
        id_ = 0;
        return id;
    }

    /* The C id (usable with tw_* calls on wheel::native_handle()), 0 if empty. */
    tw_id id() const noexcept { return id_; }

private:
    friend class wheel;
    timer(detail::wheel_state *state, tw_id id) noexcept : state_(state), id_(id)
    {
        state_->ref();
    }

    tw_wheel *native() const noexcept
    {
        return state_ ? state_->wheel.load(std::memory_order_acquire) : nullptr;
    }
    static bool result(int r, const char *what)
    {
        if (r < 0)
            detail::throw_error(-r, what);
        return r == 1;
    }

    detail::wheel_state *state_ = nullptr;
    tw_id id_ = 0;
};

/* A timing wheel. Move-only owner of a tw_wheel*. Its destructor destroys
 * every pending closure without running it; from inside one of the wheel's
 * own callbacks the C library defers that to the end of the drive, and the
 * rest of the batch does not run. Timer handles do not refer to this
 * object, so moving a wheel leaves them working. */
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
#if defined(__linux__)
        const bool steady = cfg.clock_fn == nullptr;
#else
        const bool steady = false;
#endif
        auto state = std::make_unique<detail::wheel_state>(
            c.tick_us, cfg.lock != lock_kind::none, steady);
        c.context = state.get();
        c.on_destroy = &detail::on_wheel_destroyed;
        w_ = tw_create(&c);
        if (!w_)
            detail::throw_error(errno, "tw_create");
        state->wheel.store(w_, std::memory_order_release);
        state_ = state.release(); /* the C wheel's reference, until on_destroy */
    }
    wheel(wheel &&other) noexcept
        : w_(std::exchange(other.w_, nullptr)), state_(std::exchange(other.state_, nullptr))
    {
    }
    wheel &operator=(wheel &&other) noexcept
    {
        if (this != &other) {
            destroy();
            w_ = std::exchange(other.w_, nullptr);
            state_ = std::exchange(other.state_, nullptr);
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
     * (moved-from wheel); f is then destroyed and nothing is scheduled.
     * On a wheel being destroyed (from a closure's destructor as the wheel
     * releases it, or after a callback destroyed the wheel) nothing is
     * scheduled either, without an exception: f is destroyed and the
     * handle is empty. */
    template <class Rep, class Period, class F>
    timer after(std::chrono::duration<Rep, Period> delay, F &&f)
    {
        return handle(add(ticks(delay), 0, std::forward<F>(f)));
    }

    /* Runs f() once at `when` by the wheel's clock (see "Absolute time"):
     * never before it on a clock-driven wheel, and less than two ticks
     * after it plus the wait for the next expire(). A time already past
     * runs at the next expire()/advance(). Errors as after(). */
    template <class F>
    timer at(time_point when, F &&f)
    {
        return handle(add(until(when), 0, std::forward<F>(f)));
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
        return handle(add(ticks(first), period(interval), std::forward<F>(f)));
    }
    /* every(interval, interval, f): first run one interval from now. */
    template <class Rep, class Period, class F>
    timer every(std::chrono::duration<Rep, Period> interval, F &&f)
    {
        return every(interval, interval, std::forward<F>(f));
    }

    /* Fire-and-forget forms: no handle; the closure lives until it has run
     * (after(), at()), or until the wheel is destroyed (every()), or until
     * tw_cancel(native_handle(), id) with the returned id (0 when the wheel
     * is being destroyed and nothing was scheduled). */
    template <class Rep, class Period, class F>
    tw_id after_detached(std::chrono::duration<Rep, Period> delay, F &&f)
    {
        return add(ticks(delay), 0, std::forward<F>(f));
    }
    template <class F>
    tw_id at_detached(time_point when, F &&f)
    {
        return add(until(when), 0, std::forward<F>(f));
    }
    template <class R1, class P1, class R2, class P2, class F>
    tw_id every_detached(std::chrono::duration<R1, P1> first,
                         std::chrono::duration<R2, P2> interval, F &&f)
    {
        return add(ticks(first), period(interval), std::forward<F>(f));
    }
    template <class Rep, class Period, class F>
    tw_id every_detached(std::chrono::duration<Rep, Period> interval, F &&f)
    {
        return every_detached(interval, interval, std::forward<F>(f));
    }

    /* Reads the wheel's clock and runs every callback now due; returns how
     * many ran. When callbacks threw and no on_error handler is set, throws
     * callback_error (every exception, and the count) after the whole batch
     * ran. Throws std::system_error EBUSY when called from one of this
     * wheel's callbacks or while another thread drives it. A callback may
     * destroy this wheel object: the batch then stops after it, and the
     * call returns (or throws) without touching the object. */
    std::size_t expire() { return drive(false, 0); }

    /* The same, moving the wheel `ticks` ticks forward without a clock. */
    std::size_t advance(std::uint64_t ticks) { return drive(true, ticks); }
    /* The same by a duration, rounded up to whole ticks as after() rounds:
     * advance(d) runs what after(d, f) scheduled on a tick-driven wheel. */
    template <class Rep, class Period>
    std::size_t advance(std::chrono::duration<Rep, Period> d)
    {
        return drive(true, ticks(d));
    }

    /* Each exception a callback throws is handed to `handler` (on the
     * driving thread, right after that callback, with the rest of the batch
     * still to run) instead of being collected for expire()/advance(); also
     * for the timer thread, where an exception otherwise calls
     * std::terminate. The handler must not throw (std::terminate). Set it
     * before the wheel is driven by another thread; an empty function
     * removes it. */
    void on_error(std::function<void(std::exception_ptr)> handler)
    {
        if (!state_)
            detail::throw_error(EINVAL, "twheel::wheel::on_error: moved-from wheel");
        state_->on_error = std::move(handler);
    }

    /* Ticks from now() until the earliest pending timer, as a duration (0
     * when one is due), or nullopt when nothing is pending. O(1); may be
     * early, never late, in the one case tw_next_expiry() names
     * (stats().next_expiry_exact is exact). On a clock-driven wheel now()
     * lags the clock between expire() calls: to sleep, use timeout_ms() or
     * next_deadline(), which count by the clock. */
    std::optional<duration> next_expiry() const noexcept
    {
        const std::uint64_t t = tw_next_expiry(w_);
        if (t == TW_NEVER)
            return std::nullopt;
        return detail::ticks_to_duration(t, tick_us());
    }

    /* When the earliest pending timer is due, by the wheel's clock
     * (tw_next_deadline_us()): a time to hand to an Asio timer's
     * expires_at() or to sleep_until(). nullopt when nothing is pending.
     * Never late; early in tw_next_expiry()'s one case. */
    std::optional<time_point> next_deadline() const
    {
        const std::uint64_t us = tw_next_deadline_us(w_);
        if (us == TW_NEVER)
            return std::nullopt;
        return state_->to_time_point(w_, us);
    }

    /* The wheel's clock now, as a time point. */
    time_point clock_now() const
    {
        if (!w_)
            detail::throw_error(EINVAL, "twheel::wheel::clock_now: moved-from wheel");
        return state_->to_time_point(w_, tw_clock_us(w_));
    }

    /* Milliseconds for epoll_wait()/poll(), by the wheel's clock: -1 idle,
     * 0 due, rounded up (tw_timeout_ms()). */
    int timeout_ms() const noexcept { return detail::convert<int>(tw_timeout_ms(w_)); }

    /* Starts/stops the C library's timer thread, which calls tw_expire()
     * every `period` (callbacks then run on it; an exception escaping one
     * goes to on_error, or calls std::terminate without it).
     * stop_thread() is safe to call twice; throws EDEADLK from a callback. */
    template <class Rep, class Period>
    void start_thread(std::chrono::duration<Rep, Period> period)
    {
        const std::uint64_t us = detail::to_ticks(period, 1);
        const int r = tw_thread_start(
            w_, us > (std::numeric_limits<std::uint32_t>::max)()
                    ? (std::numeric_limits<std::uint32_t>::max)()
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
    std::size_t size() const noexcept { return detail::convert<std::size_t>(tw_count(w_)); }
    bool empty() const noexcept { return size() == 0; }
    /* Current tick; inside a callback, the tick it was due at. */
    std::uint64_t now() const noexcept { return tw_now(w_); }
    duration tick() const noexcept { return duration(tick_us()); }
    /* Whole ticks covering d, as after() rounds it. */
    template <class Rep, class Period>
    std::uint64_t ticks(std::chrono::duration<Rep, Period> d) const
    {
        return detail::to_ticks(d, tick_us());
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
    std::uint32_t tick_us() const noexcept { return state_ ? state_->tick_us : 0; }

    template <class Rep, class Period>
    std::uint64_t period(std::chrono::duration<Rep, Period> interval) const
    {
        const std::uint64_t t = ticks(interval);
        if (t == 0) /* tw_add_ex() would make a one-shot of it */
            detail::throw_error(EINVAL, "twheel::wheel::every: interval <= 0");
        return t;
    }

    /* Ticks until `when` by the wheel's clock, rounded up. */
    std::uint64_t until(time_point when) const
    {
        if (!w_)
            detail::throw_error(EINVAL, "twheel::wheel::at: moved-from wheel");
        const std::uint64_t us = state_->until(w_, when);
        return us / tick_us() + (us % tick_us() != 0);
    }

    timer handle(tw_id id) const noexcept { return id ? timer(state_, id) : timer(); }

    /* Schedules f; returns its id, or 0 when the wheel is being destroyed. */
    template <class F>
    tw_id add(std::uint64_t delay, std::uint64_t interval, F &&f)
    {
        using fn_type = std::decay_t<F>;
        static_assert(std::is_invocable_v<fn_type &>,
                      "twheel: a timer callback must be callable with no arguments");
        if (!w_)
            detail::throw_error(EINVAL, "twheel::wheel: moved-from wheel");
        tw_id id;
        if constexpr (detail::fits_inline<fn_type>) {
            void *bits = nullptr;
            const fn_type fn(std::forward<F>(f));
            std::memcpy(&bits, static_cast<const void *>(&fn), sizeof fn);
            id = tw_add_ex(w_, delay, interval, &detail::on_fire_inline<fn_type>, nullptr, bits);
        } else {
            detail::closure_header *h =
                detail::store_closure<fn_type>(state_->pool, std::forward<F>(f));
            id = tw_add_ex(w_, delay, interval, &detail::on_fire, &detail::on_release, h);
            if (!id) {
                const int error = errno;
                h->ops->destroy(h); /* on failure the user data is still ours */
                errno = error;
            }
        }
        if (!id && errno != EBUSY)
            detail::throw_error(errno, "tw_add_ex");
        return id;
    }

    std::size_t drive(bool by_ticks, std::uint64_t ticks)
    {
        /* Locals only once the C call has started: a callback may destroy
         * this object. */
        tw_wheel *const w = w_;
        detail::drive_frame frame(w);
        const std::int64_t r = by_ticks ? tw_advance(w, ticks) : tw_expire(w);
        if (r < 0)
            detail::throw_error(static_cast<int>(-r), by_ticks ? "tw_advance" : "tw_expire");
        if (!frame.errors.empty())
            throw callback_error(static_cast<std::size_t>(r), std::move(frame.errors));
        return static_cast<std::size_t>(r);
    }

    void destroy() noexcept
    {
        /* w_ stays set while the closures are released: a closure's
         * destructor may call after() (which then schedules nothing). The
         * state goes with the C wheel (its on_destroy), now or at the end of
         * the drive when called from a callback. -EBUSY means another
         * thread is inside the wheel (driving it with advance()/expire(),
         * or in a release hook of its own cancel: the logout of a session
         * on its thread): wait for it to leave rather than return with the
         * wheel still running callbacks. */
        if (w_)
            while (tw_destroy(w_) == -EBUSY)
                std::this_thread::yield();
        w_ = nullptr;
        state_ = nullptr;
    }

    tw_wheel *w_ = nullptr;
    detail::wheel_state *state_ = nullptr;
};

} // namespace twheel

#endif /* C++17 with exceptions */
#endif /* TW_TIMER_HPP */
