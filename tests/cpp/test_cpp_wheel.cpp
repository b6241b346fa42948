/* twheel::wheel and twheel::timer over the C API: construction, chrono
 * rounding (never early), errors as std::system_error, driving, inspection. */
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <limits>
#include <optional>
#include <type_traits>
#include <vector>

#include "helpers.hpp"

static_assert(!std::is_copy_constructible_v<twheel::wheel>);
static_assert(!std::is_copy_assignable_v<twheel::wheel>);
static_assert(std::is_nothrow_move_constructible_v<twheel::wheel>);
static_assert(std::is_nothrow_move_assignable_v<twheel::wheel>);
static_assert(!std::is_copy_constructible_v<twheel::timer>);
static_assert(!std::is_copy_assignable_v<twheel::timer>);
static_assert(std::is_nothrow_move_constructible_v<twheel::timer>);
static_assert(std::is_nothrow_move_assignable_v<twheel::timer>);
static_assert(std::is_nothrow_destructible_v<twheel::timer>);
static_assert(std::is_nothrow_destructible_v<twheel::wheel>);
static_assert(std::is_same_v<decltype(std::declval<twheel::wheel &>().next_expiry()),
                             std::optional<twheel::duration>>);

static void test_defaults(void **)
{
    twheel::wheel w;
    assert_non_null(w.native_handle());
    assert_true(static_cast<bool>(w));
    assert_true(w.tick() == 1ms);
    assert_int_equal(tw_tick_us(w.native_handle()), 1000);
    assert_int_equal(w.size(), 0);
    assert_true(w.empty());
    assert_int_equal(w.now(), 0);
    assert_false(w.next_expiry().has_value());
    assert_int_equal(w.timeout_ms(), -1);
    assert_int_equal(w.advance(10), 0);
    assert_int_equal(w.now(), 10);
}

static void test_config(void **)
{
    twheel::config c;
    c.tick = 10ms; /* skynet's tick */
    c.lock = twheel::lock_kind::mutex;
    c.start_tick = 1000;
    twheel::wheel w(c);
    assert_true(w.tick() == 10ms);
    assert_int_equal(w.now(), 1000);
    assert_int_equal(w.stats().tick_us, 10000);

    twheel::wheel none(single_threaded(250us));
    assert_true(none.tick() == 250us);

#if __cplusplus >= 202002L
    twheel::wheel designated({.tick = 5ms, .lock = twheel::lock_kind::none});
    assert_true(designated.tick() == 5ms);
#endif
}

static void test_bad_config_throws(void **)
{
    twheel::config c;
    c.tick = 0us;
    assert_int_equal(error_of([&] { twheel::wheel w(c); }), EINVAL);
    c.tick = -5ms;
    assert_int_equal(error_of([&] { twheel::wheel w(c); }), EINVAL);
    c.tick = std::chrono::hours(2); /* above TW_MAX_TICK_US */
    assert_int_equal(error_of([&] { twheel::wheel w(c); }), EINVAL);
    /* 2^32 + 1000 µs must not wrap to a valid 1000 µs */
    c.tick = std::chrono::microseconds((std::int64_t{1} << 32) + 1000);
    assert_int_equal(error_of([&] { twheel::wheel w(c); }), EINVAL);
    c.tick = std::chrono::hours(1); /* TW_MAX_TICK_US itself is fine */
    assert_int_equal(error_of([&] { twheel::wheel w(c); }), 0);
    c = twheel::config{};
    c.lock = static_cast<twheel::lock_kind>(42);
    assert_int_equal(error_of([&] { twheel::wheel w(c); }), EINVAL);
}

/* Ticks a delay is rounded to, observed through when the timer fires. */
static std::uint64_t fired_after(twheel::wheel &w, std::function<twheel::timer(int &)> add)
{
    int runs = 0;
    const std::uint64_t start = w.now();
    twheel::timer t = add(runs);
    for (std::uint64_t i = 0; i < 100; ++i) {
        w.advance(i == 0 ? 0 : 1);
        if (runs)
            return w.now() - start;
    }
    return UINT64_MAX;
}

static void test_rounding_up(void **)
{
    twheel::wheel w(single_threaded(1ms));
    assert_int_equal(w.ticks(0ms), 0);
    assert_int_equal(w.ticks(1ms), 1);
    assert_int_equal(w.ticks(1us), 1);
    assert_int_equal(w.ticks(1ns), 1);
    assert_int_equal(w.ticks(999us), 1);
    assert_int_equal(w.ticks(1001us), 2);
    assert_int_equal(w.ticks(1500us), 2);
    assert_int_equal(w.ticks(2ms), 2);
    assert_int_equal(w.ticks(2000001ns), 3);
    assert_int_equal(w.ticks(1s), 1000);
    assert_int_equal(w.ticks(std::chrono::minutes(1)), 60000);
    assert_int_equal(w.ticks(-3ms), 0);
    assert_int_equal(w.ticks(std::chrono::nanoseconds::min()), 0);
    assert_int_equal(w.ticks(std::chrono::duration<double>(0.0015)), 2);
    assert_int_equal(w.ticks(std::chrono::duration<double, std::milli>(2.0)), 2);
    assert_int_equal(w.ticks(std::chrono::duration<double>(-1.0)), 0);
    assert_int_equal(w.ticks(std::chrono::duration<float, std::milli>(0.25f)), 1);
    /* overflowing representations saturate instead of wrapping */
    assert_true(w.ticks(std::chrono::hours::max()) == UINT64_MAX);
    assert_true(w.ticks(std::chrono::duration<double>(1e300)) == UINT64_MAX);
    assert_true(w.ticks(std::chrono::duration<double>(std::nan(""))) == UINT64_MAX);
    /* an odd period: 1/3 s = 333.33.. ms -> 334 ticks */
    assert_int_equal(w.ticks(std::chrono::duration<int, std::ratio<1, 3>>(1)), 334);

    twheel::wheel coarse(single_threaded(10ms));
    assert_int_equal(coarse.ticks(10ms), 1);
    assert_int_equal(coarse.ticks(11ms), 2);
    assert_int_equal(coarse.ticks(1ns), 1);
    assert_int_equal(coarse.ticks(1s), 100);

    /* and the timers really fire on those ticks: never early */
    assert_int_equal(fired_after(w, [&](int &n) { return w.after(1500us, [&] { ++n; }); }), 2);
    assert_int_equal(fired_after(w, [&](int &n) { return w.after(1ns, [&] { ++n; }); }), 1);
    assert_int_equal(fired_after(w, [&](int &n) { return w.after(0ms, [&] { ++n; }); }), 0);
    assert_int_equal(fired_after(w, [&](int &n) { return w.after(-1s, [&] { ++n; }); }), 0);
    assert_int_equal(fired_after(coarse, [&](int &n) { return coarse.after(25ms, [&] { ++n; }); }), 3);
}

static void test_after_fires_once(void **)
{
    std::uint64_t clock_us = 0; /* timeout_ms() reads the wheel's clock */
    twheel::config c = single_threaded();
    c.clock_fn = fake_clock;
    c.clock_context = &clock_us;
    twheel::wheel w(c);
    int runs = 0;
    std::uint64_t at = 0;
    twheel::timer t = w.after(5ms, [&] { ++runs; at = w.now(); });
    assert_true(t.pending());
    assert_true(static_cast<bool>(t));
    assert_int_not_equal(t.id(), 0);
    assert_int_equal(w.size(), 1);
    assert_true(w.next_expiry() == 5ms);
    assert_true(t.remaining() == 5ms);
    assert_int_equal(w.timeout_ms(), 5);
    assert_int_equal(w.advance(4), 0);
    assert_int_equal(runs, 0);
    assert_true(w.next_expiry() == 1ms);
    assert_int_equal(w.advance(1), 1);
    assert_int_equal(runs, 1);
    assert_int_equal(at, 5);
    assert_false(t.pending());
    assert_false(t.remaining().has_value());
    assert_int_equal(w.size(), 0);
    assert_int_equal(w.advance(100), 0);
    assert_int_equal(runs, 1);
    assert_false(t.cancel()); /* already fired */
    assert_false(t.reschedule(1ms));
}

static void test_zero_delay_runs_on_next_call(void **)
{
    twheel::wheel w(single_threaded());
    int runs = 0;
    twheel::timer t = w.after(0s, [&] { ++runs; });
    assert_int_equal(runs, 0); /* never inside the call that added it */
    assert_true(w.next_expiry() == 0ms);
    assert_int_equal(w.timeout_ms(), 0);
    assert_int_equal(w.advance(0), 1);
    assert_int_equal(runs, 1);
    assert_int_equal(w.now(), 0);
}

static void test_every_fixed_rate(void **)
{
    twheel::wheel w(single_threaded());
    std::vector<std::uint64_t> at;
    twheel::timer t = w.every(2ms, 3ms, [&] { at.push_back(w.now()); });
    assert_true(t.pending());
    w.advance(11);
    assert_true((at == std::vector<std::uint64_t>{2, 5, 8, 11}));
    assert_true(t.pending());
    assert_int_equal(w.size(), 1);
    /* a driver that fell behind runs every missed firing, in order */
    at.clear();
    w.advance(10);
    assert_true((at == std::vector<std::uint64_t>{14, 17, 20}));
    assert_true(t.cancel());
    assert_false(t.pending());
    assert_int_equal(w.size(), 0);
    w.advance(100);
    assert_int_equal(at.size(), 3);

    /* first 0: the first run is due now; interval rounds up (1.5 ms -> 2) */
    at.clear();
    twheel::timer u = w.every(0ms, 1500us, [&] { at.push_back(w.now()); });
    const std::uint64_t base = w.now();
    w.advance(4);
    assert_true((at == std::vector<std::uint64_t>{base, base + 2, base + 4}));
}

static void test_every_bad_interval(void **)
{
    twheel::wheel w(single_threaded());
    life l;
    assert_int_equal(error_of([&] { auto t = w.every(1ms, 0ms, [k = token(&l)] {}); }), EINVAL);
    assert_int_equal(error_of([&] { auto t = w.every(1ms, -1ms, [k = token(&l)] {}); }), EINVAL);
    assert_int_equal(error_of([&] { w.every_detached(1ms, 0s, [k = token(&l)] {}); }), EINVAL);
    assert_int_equal(w.size(), 0);
    assert_int_equal(l.made, 3);
    assert_int_equal(l.destroyed, 3);
}

static void test_range_error(void **)
{
    twheel::wheel w(single_threaded());
    life l;
    const auto max = std::chrono::milliseconds(TW_MAX_DELAY);
    assert_int_equal(error_of([&] { auto t = w.after(max + 1ms, [k = token(&l)] {}); }), ERANGE);
    assert_int_equal(error_of([&] { auto t = w.after(std::chrono::hours::max(), [k = token(&l)] {}); }), ERANGE);
    assert_int_equal(error_of([&] { auto t = w.every(1ms, max + 1us, [k = token(&l)] {}); }), ERANGE);
    assert_int_equal(error_of([&] { w.after_detached(std::chrono::hours(24 * 60), [k = token(&l)] {}); }), ERANGE);
    assert_int_equal(l.made, 4);
    assert_int_equal(l.destroyed, 4); /* a refused closure is destroyed once */
    assert_int_equal(w.size(), 0);

    /* the longest delay is accepted */
    twheel::timer t = w.after(max, [k = token(&l)] {});
    assert_true(t.pending());
    assert_true(t.remaining() == max);
    /* reschedule out of range throws and leaves the timer untouched */
    assert_int_equal(error_of([&] { t.reschedule(max + 1ms); }), ERANGE);
    assert_true(t.pending());
    assert_true(t.remaining() == max);
    assert_true(t.reschedule(3ms));
    assert_true(t.remaining() == 3ms);
}

static void test_cap_enospc(void **)
{
    twheel::config c = single_threaded();
    c.max_timers = 3;
    twheel::wheel w(c);
    life l;
    std::vector<twheel::timer> ts;
    for (int i = 0; i < 3; ++i)
        ts.push_back(w.after(std::chrono::milliseconds(i + 1), [k = token(&l)] {}));
    assert_int_equal(error_of([&] { ts.push_back(w.after(1ms, [k = token(&l)] {})); }), ENOSPC);
    assert_int_equal(ts.size(), 3);
    assert_int_equal(w.size(), 3);
    assert_int_equal(l.alive(), 3); /* nothing already scheduled was touched */
    assert_true(ts[0].cancel());
    ts.push_back(w.after(1ms, [k = token(&l)] {})); /* room again */
    assert_int_equal(w.size(), 3);
    w.advance(10);
    assert_int_equal(l.alive(), 0);
    assert_int_equal(l.made, 5); /* the refused one included */
}

static int oom_budget;
static void *limited_realloc(void *p, std::size_t n, void *)
{
    if (n == 0) {
        std::free(p);
        return nullptr;
    }
    if (oom_budget-- <= 0)
        return nullptr;
    return std::realloc(p, n);
}

static void test_allocation_failure(void **)
{
    twheel::config c = single_threaded();
    c.realloc_fn = limited_realloc;
    oom_budget = 1; /* the wheel itself, then nothing */
    twheel::wheel w(c);
    life l;
    assert_int_equal(error_of([&] { auto t = w.after(1ms, [k = token(&l)] {}); }), ENOMEM);
    assert_int_equal(l.alive(), 0);
    oom_budget = 1000; /* the wheel stays usable */
    int runs = 0;
    twheel::timer t = w.after(1ms, [&runs, k = token(&l)] { ++runs; });
    w.advance(1);
    assert_int_equal(runs, 1);
    assert_int_equal(l.alive(), 0);

    oom_budget = 0;
    assert_int_equal(error_of([&] { twheel::wheel x(c); }), ENOMEM);
}

static void test_reschedule(void **)
{
    twheel::wheel w(single_threaded());
    std::vector<std::uint64_t> at;
    twheel::timer t = w.after(10ms, [&] { at.push_back(w.now()); });
    w.advance(5);
    assert_true(t.reschedule(10ms)); /* heartbeat: push it out again */
    assert_true(t.remaining() == 10ms);
    w.advance(9);
    assert_true(at.empty());
    w.advance(1);
    assert_true((at == std::vector<std::uint64_t>{15}));
    assert_false(t.reschedule(1ms)); /* fired: nothing to move */

    twheel::timer p = w.every(1ms, 5ms, [&] { at.push_back(w.now()); });
    at.clear();
    w.advance(1); /* 16 */
    assert_true(p.reschedule(2ms)); /* next at 18, then every 5 */
    w.advance(10);
    assert_true((at == std::vector<std::uint64_t>{16, 18, 23}));
}

static void test_moves(void **)
{
    twheel::wheel w(single_threaded());
    int a = 0, b = 0;
    twheel::timer ta = w.after(1ms, [&] { ++a; });
    twheel::timer moved(std::move(ta));
    assert_false(ta.pending());
    assert_false(static_cast<bool>(ta));
    assert_int_equal(ta.id(), 0);
    assert_false(ta.cancel());
    assert_true(moved.pending());

    /* assigning over a pending handle cancels what it held */
    twheel::timer tb = w.after(1ms, [&] { ++b; });
    moved = std::move(tb);
    assert_int_equal(w.size(), 1);
    w.advance(1);
    assert_int_equal(a, 0);
    assert_int_equal(b, 1);

    /* self-move leaves a handle working */
    twheel::timer tc = w.after(1ms, [&] { ++a; });
    twheel::timer &alias = tc;
    tc = std::move(alias);
    assert_true(tc.pending());

    /* moving the wheel keeps its timers and their handles */
    twheel::wheel w2(std::move(w));
    assert_null(w.native_handle());
    assert_false(static_cast<bool>(w));
    assert_int_equal(w.size(), 0);
    assert_int_equal(error_of([&] { auto t = w.after(1ms, [] {}); }), EINVAL);
    assert_int_equal(error_of([&] { w.advance(1); }), EINVAL);
    assert_true(tc.pending());
    assert_int_equal(w2.advance(1), 1);
    assert_int_equal(a, 1);

    twheel::wheel w3(single_threaded());
    twheel::timer td = w2.after(1ms, [&] { ++a; });
    w3 = std::move(w2);
    assert_true(td.pending());
    w3.advance(1);
    assert_int_equal(a, 2);
}

static void test_expire_with_fake_clock(void **)
{
    std::uint64_t clock_us = 1000000;
    twheel::config c = single_threaded();
    c.clock_fn = fake_clock;
    c.clock_context = &clock_us;
    twheel::wheel w(c);
    int runs = 0;
    twheel::timer t = w.after(3ms, [&] { ++runs; });
    twheel::timer p = w.every(1ms, 1ms, [&] { ++runs; });
    assert_int_equal(w.expire(), 0);
    clock_us += 2500; /* 2 whole ticks, 500 µs carried */
    assert_int_equal(w.expire(), 2);
    assert_int_equal(w.now(), 2);
    clock_us += 500;
    assert_int_equal(w.expire(), 2); /* tick 3: the one-shot and the periodic */
    assert_int_equal(runs, 4);
    assert_int_equal(w.now(), 3);
}

static void test_native_interop(void **)
{
    twheel::wheel w(single_threaded());
    life l;
    int runs = 0;
    twheel::timer t = w.after(5ms, [&runs, k = token(&l)] { ++runs; });
    assert_true(tw_remaining(w.native_handle(), t.id()) == 5);
    assert_int_equal(tw_check(w.native_handle()), 0);
    /* a cancel through the C API still frees the closure exactly once */
    tw_id id = w.after_detached(2ms, [&runs, k = token(&l)] { ++runs; });
    assert_int_not_equal(id, 0);
    assert_int_equal(tw_cancel(w.native_handle(), id), 1);
    assert_int_equal(l.destroyed, 1);
    assert_int_equal(tw_cancel(w.native_handle(), t.id()), 1);
    assert_int_equal(l.destroyed, 2);
    assert_false(t.pending()); /* the handle notices */
    assert_false(t.cancel());
    w.advance(10);
    assert_int_equal(runs, 0);
    assert_int_equal(l.alive(), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults),
        cmocka_unit_test(test_config),
        cmocka_unit_test(test_bad_config_throws),
        cmocka_unit_test(test_rounding_up),
        cmocka_unit_test(test_after_fires_once),
        cmocka_unit_test(test_zero_delay_runs_on_next_call),
        cmocka_unit_test(test_every_fixed_rate),
        cmocka_unit_test(test_every_bad_interval),
        cmocka_unit_test(test_range_error),
        cmocka_unit_test(test_cap_enospc),
        cmocka_unit_test(test_allocation_failure),
        cmocka_unit_test(test_reschedule),
        cmocka_unit_test(test_moves),
        cmocka_unit_test(test_expire_with_fake_clock),
        cmocka_unit_test(test_native_interop),
    };
    return RUN_TESTS(tests);
}
