/* Absolute time (at, deadline, next_deadline, clock_now), durations for
 * advance and every, interval changes, the state table of a handle, and the
 * three places a closure can live (inline, pooled, boxed). */
#include <array>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <atomic>
#include <cstdlib>
#include <new>

#include "helpers.hpp"

using std::chrono::steady_clock;

/* Every allocation of this program, counted while `counting` is set: the
 * facade must make none per timer for a small closure. */
static std::atomic<bool> counting{false};
static std::atomic<long> allocations{0};
[[gnu::noinline]] void *operator new(std::size_t size)
{
    if (counting.load(std::memory_order_relaxed))
        allocations.fetch_add(1, std::memory_order_relaxed);
    if (void *p = std::malloc(size ? size : 1))
        return p;
    throw std::bad_alloc();
}
/* out of line: inlined, gcc takes the free() for a mismatch with new */
[[gnu::noinline]] void operator delete(void *p) noexcept { std::free(p); }
[[gnu::noinline]] void operator delete(void *p, std::size_t) noexcept { std::free(p); }

/* A fake clock wheel: readings are mapped onto steady_clock by offset. */
struct fake_wheel {
    std::uint64_t clock_us = 1000000;
    twheel::wheel w;
    fake_wheel() : w(make(this)) {}
    static twheel::config make(fake_wheel *self)
    {
        twheel::config c = single_threaded();
        c.clock_fn = fake_clock;
        c.clock_context = &self->clock_us;
        c.drive = twheel::drive_kind::clock;
        return c;
    }
};

static void test_at_and_deadline_on_a_custom_clock(void **)
{
    fake_wheel f;
    int runs = 0;
    const twheel::time_point now = f.w.clock_now();
    twheel::timer t = f.w.at(now + 2500us, [&] { ++runs; });
    /* 2.5 ms rounds up to 3 ticks (due at reading 1 003 000) unless
     * steady_clock moved between the two readings */
    const auto d = t.deadline();
    assert_true(d.has_value());
    const auto late = std::chrono::duration_cast<std::chrono::microseconds>(*d - now).count();
    /* deadline() reads steady_clock later than at() did, so the answer is
     * never before the time asked for, and later only by that gap */
    assert_true(late >= 2500 && late < 3000 + 100000);
    assert_true(f.w.next_deadline().has_value());
    /* at() counts from a second steady_clock reading, so a slow run (valgrind)
     * can round 2.5 ms to 2 ticks instead of 3: take the due reading from the
     * C side, bound it, and require the timer to fire exactly there. */
    const std::uint64_t due = tw_deadline_us(f.w.native_handle(), t.id());
    assert_true(due >= 1001000 && due <= 1003000);
    assert_int_equal(due % 1000, 0);
    f.clock_us = due - 1;
    assert_int_equal(f.w.expire(), 0);
    f.clock_us = due;
    assert_int_equal(f.w.expire(), 1);
    assert_int_equal(runs, 1);
    assert_false(t.deadline().has_value());
    assert_false(f.w.next_deadline().has_value());
    /* a time already past runs at the next expire() */
    twheel::timer past = f.w.at(f.w.clock_now() - 1s, [&] { ++runs; });
    assert_int_equal(f.w.expire(), 1);
    assert_int_equal(runs, 2);
    tw_id id = f.w.at_detached(f.w.clock_now() + 1ms, [&] { ++runs; });
    assert_int_not_equal(id, 0);
    f.clock_us += 1000;
    assert_int_equal(f.w.expire(), 1);
}

/* On Linux the built-in clock is steady_clock's: at() is never early by
 * steady_clock and the deadline is the exact tick boundary. */
static void test_at_on_the_monotonic_clock(void **)
{
    twheel::config c = single_threaded();
    c.drive = twheel::drive_kind::clock;
    twheel::wheel w(c);
    const auto when = steady_clock::now() + 3ms;
    std::optional<steady_clock::time_point> ran_at;
    twheel::timer t = w.at(when, [&] { ran_at = steady_clock::now(); });
    assert_true(*t.deadline() >= when);
    assert_true(*t.deadline() < when + 2ms); /* within a tick of it */
#if defined(__linux__)
    assert_true(*w.next_deadline() == *t.deadline());
    const auto clock_gap = steady_clock::now() - w.clock_now();
    assert_true(clock_gap < 1s && clock_gap > -1s);
#endif
    while (!ran_at) {
        std::this_thread::sleep_until(*w.next_deadline());
        w.expire();
    }
    assert_true(*ran_at >= when); /* never early */
}

/* A tick-driven wheel: at() counts from the clock now; deadlines are
 * projections that advance() keeps. */
static void test_tick_driven_time(void **)
{
    twheel::config c = single_threaded();
    c.drive = twheel::drive_kind::ticks;
    twheel::wheel w(c);
    int runs = 0;
    twheel::timer t = w.at(w.clock_now() + 10ms, [&] { ++runs; });
    assert_true(t.remaining() >= twheel::duration(10ms));
    assert_true(t.remaining() <= twheel::duration(11ms));
    assert_int_equal(w.advance(9ms), 0);
    assert_true(t.remaining() <= twheel::duration(2ms));
    assert_int_equal(w.advance(2ms), 1);
    assert_int_equal(runs, 1);
}

static void test_advance_by_duration_rounds_as_after(void **)
{
    twheel::wheel w(single_threaded(10ms));
    std::vector<std::uint64_t> ran;
    twheel::timer a = w.after(25ms, [&] { ran.push_back(w.now()); }); /* 3 ticks */
    assert_int_equal(w.advance(25ms), 1); /* also 3 ticks */
    assert_true((ran == std::vector<std::uint64_t>{3}));
    assert_int_equal(w.advance(0ms), 0);
    assert_int_equal(w.advance(-5ms), 0);
    assert_int_equal(w.now(), 3);
}

static void test_every_with_one_duration(void **)
{
    twheel::wheel w(single_threaded());
    std::vector<std::uint64_t> at;
    twheel::timer t = w.every(3ms, [&] { at.push_back(w.now()); });
    tw_id id = w.every_detached(4ms, [&] { at.push_back(100 + w.now()); });
    assert_int_not_equal(id, 0);
    w.advance(9);
    assert_true((at == std::vector<std::uint64_t>{3, 104, 6, 108, 9}));
    assert_int_equal(error_of([&] { auto u = w.every(0ms, [] {}); }), EINVAL);
}

static void test_reschedule_changes_the_interval(void **)
{
    twheel::wheel w(single_threaded());
    std::vector<std::uint64_t> at;
    twheel::timer t = w.every(2ms, [&] { at.push_back(w.now()); });
    w.advance(2);
    assert_true(t.reschedule(1ms, 5ms));
    w.advance(12); /* 3, 8, 13 */
    assert_true((at == std::vector<std::uint64_t>{2, 3, 8, 13}));
    /* a one-shot becomes periodic */
    std::vector<std::uint64_t> one;
    twheel::timer o = w.after(1ms, [&] { one.push_back(w.now()); });
    assert_true(o.reschedule(2ms, 2ms));
    w.advance(6); /* from 14: due at 16, then every 2 */
    assert_true((one == std::vector<std::uint64_t>{16, 18, 20}));
    assert_true(o.pending());
    /* from inside its own callback */
    std::optional<twheel::timer> self;
    std::vector<std::uint64_t> s;
    self = w.every(1ms, [&] {
        s.push_back(w.now());
        if (s.size() == 2)
            assert_true(self->reschedule(4ms, 4ms));
    });
    w.advance(10); /* from 20: 21, 22, then every 4 */
    assert_true((s == std::vector<std::uint64_t>{21, 22, 26, 30}));
    assert_int_equal(error_of([&] { o.reschedule(1ms, 0ms); }), EINVAL);
    o.cancel();
    assert_false(o.reschedule(1ms, 1ms)); /* empty */
}

/* The state table of the header comment, row by row. */
static void test_state_table(void **)
{
    twheel::wheel w(single_threaded());
    /* empty */
    twheel::timer empty;
    assert_false(empty.pending());
    assert_false(static_cast<bool>(empty));
    assert_false(empty.remaining().has_value());
    assert_false(empty.deadline().has_value());
    assert_false(empty.reschedule(1ms));
    assert_false(empty.cancel());
    /* pending */
    twheel::timer p = w.after(5ms, [] {});
    assert_true(p.pending());
    assert_true(static_cast<bool>(p));
    assert_true((p.remaining() == twheel::duration(5ms)));
    assert_true(p.deadline().has_value());
    assert_true(p.reschedule(3ms));
    /* running: a one-shot is no longer pending, a periodic one still is */
    std::optional<twheel::timer> one, per;
    bool one_seen = true, per_seen = false;
    std::optional<twheel::duration> per_left;
    one = w.after(1ms, [&] {
        one_seen = one->pending() || one->remaining().has_value() || one->reschedule(1ms);
    });
    per = w.every(1ms, 2ms, [&] {
        per_seen = per->pending();
        per_left = per->remaining();
    });
    w.advance(1);
    assert_false(one_seen);
    assert_true(per_seen);
    assert_true((per_left == twheel::duration(2ms)));
    /* fired */
    assert_false(one->pending());
    assert_false(one->remaining().has_value());
    assert_false(one->cancel());
    assert_true(one->id() == 0); /* cancel() empties the handle */
    /* cancelled through the C API, and by the wheel's destruction */
    assert_int_equal(tw_cancel(w.native_handle(), per->id()), 1);
    assert_false(per->pending());
    assert_false(per->reschedule(1ms));
    assert_false(per->cancel());
    twheel::timer orphan;
    {
        twheel::wheel gone(single_threaded());
        orphan = gone.after(1ms, [] {});
    }
    assert_false(orphan.pending());
    assert_false(orphan.deadline().has_value());
    assert_false(orphan.cancel());
}

/* Inline (a pointer-sized closure), pooled (up to 48 bytes), boxed (more):
 * each runs, keeps its state across periodic runs, and is destroyed once. */
static void test_closure_storage_kinds(void **)
{
    life l;
    twheel::wheel w(single_threaded());
    static int inline_runs;
    inline_runs = 0;
    int *counter = &inline_runs;
    twheel::timer a = w.every(1ms, [counter] { ++*counter; }); /* inline */
    std::array<char, 40> mid{};
    int mid_runs = 0;
    twheel::timer b = w.every(1ms, [&mid_runs, mid, n = 0, k = token(&l)]() mutable {
        mid_runs = ++n + mid[0]; /* state kept between runs */
    });
    std::array<char, 200> big{};
    int big_runs = 0;
    twheel::timer c = w.every(1ms, [&big_runs, big, n = 0, k = token(&l)]() mutable {
        big_runs = ++n + big[0];
    });
    w.advance(3);
    assert_int_equal(inline_runs, 3);
    assert_int_equal(mid_runs, 3);
    assert_int_equal(big_runs, 3);
    /* a mutable lambda is never inline: its state persists between runs,
     * also at a pointer's size */
    int m = 0;
    twheel::timer d = w.every(1ms, [&m, n = 0]() mutable { m = ++n; });
    static std::intptr_t small_state;
    small_state = 0;
    twheel::timer e = w.every(1ms, [n = std::intptr_t{0}]() mutable { small_state = ++n; });
    w.advance(2);
    assert_int_equal(m, 2);
    assert_int_equal(small_state, 2);
    assert_true(b.cancel());
    assert_true(c.cancel());
    assert_int_equal(l.alive(), 0);
    /* many pooled closures: the pool grows once, then reuses its slots;
     * neither a pooled nor an inline closure allocates per timer */
    std::vector<twheel::timer> many;
    many.reserve(2000);
    for (int round = 0; round < 5; round++) {
        if (round == 1)
            counting = true;
        for (int i = 0; i < 1000; i++) {
            many.push_back(w.after(1ms, [k = token(&l), i] { (void)i; }));
            many.push_back(w.after(1ms, [counter] { ++*counter; }));
        }
        assert_int_equal(l.alive(), 1000);
        many.clear();
    }
    counting = false;
    assert_int_equal(allocations.load(), 0);
    assert_int_equal(l.alive(), 0);
}

/* A custom clock's readings are placed on steady_clock by the offset now:
 * a deadline the clock has passed lies in steady_clock's past by as much. */
static void test_deadline_past_on_a_custom_clock(void **)
{
    fake_wheel f;
    twheel::timer t = f.w.after(1ms, [] {});
    f.clock_us += 50000; /* 50 ms on, no expire() yet */
    const twheel::time_point deadline = *t.deadline(); /* then now: later */
    const auto before = std::chrono::duration_cast<std::chrono::microseconds>(
                            steady_clock::now() - deadline).count();
    assert_true(before >= 49000 && before < 49000 + 100000);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_at_and_deadline_on_a_custom_clock),
        cmocka_unit_test(test_at_on_the_monotonic_clock),
        cmocka_unit_test(test_tick_driven_time),
        cmocka_unit_test(test_advance_by_duration_rounds_as_after),
        cmocka_unit_test(test_every_with_one_duration),
        cmocka_unit_test(test_reschedule_changes_the_interval),
        cmocka_unit_test(test_state_table),
        cmocka_unit_test(test_closure_storage_kinds),
        cmocka_unit_test(test_deadline_past_on_a_custom_clock),
    };
    return RUN_TESTS(tests);
}
