/* Where the facade's delays count from (#13; timer.h: tw_drive_kind, tw_add).
 *
 * On a clock-driven wheel (drive_kind::clock, or automatic once expire() ran
 * or start_thread() was called) after(d)/every()/reschedule(d) count d from
 * the wheel's clock at the call, rounded up to the next tick boundary (delay
 * 0: the tick the clock is in), however stale now() is: f never runs before
 * d has passed by the clock, and runs at the first expire() that reads the
 * clock at or past (call rounded up to a tick) + d. On a tick-driven wheel
 * delays are exact in ticks from now(). An automatic wheel not driven yet
 * counts from now() and restarts its clock at the add.
 *
 * All on a fake clock (µs), 1 ms ticks; the wheels are created with the
 * clock at T0, so tick k starts at T0 + k ms. Every clock-driven test here
 * fails when delays count from now(), the behaviour before #13. */
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "helpers.hpp"

namespace {

constexpr std::uint64_t TICK = 1000;    /* µs per tick */
constexpr std::uint64_t T0 = 1000000;   /* the fake clock at creation */

/* A fake clock the wheel reads from several threads (adds and reschedules
 * read it too, not only expire()). Reads from any thread other than the one
 * that made it are counted: the timer thread reads it once per tw_expire(),
 * and nothing else on that thread reads it in these tests. */
struct fake_time {
    explicit fake_time(std::uint64_t start) : us(start) {}
    std::atomic<std::uint64_t> us;
    std::atomic<std::uint64_t> foreign_reads{0};
    const std::thread::id owner = std::this_thread::get_id();
};

std::uint64_t read_fake_time(void *context)
{
    auto *t = static_cast<fake_time *>(context);
    if (std::this_thread::get_id() != t->owner)
        t->foreign_reads.fetch_add(1);
    return t->us.load();
}

twheel::config clock_config(fake_time &t, twheel::drive_kind drive,
                            twheel::lock_kind lock = twheel::lock_kind::none)
{
    twheel::config c;
    c.tick = std::chrono::microseconds(TICK);
    c.lock = lock;
    c.clock_fn = read_fake_time;
    c.clock_context = &t;
    c.drive = drive;
    return c;
}

/* Tick boundaries of a wheel whose clock starts at T0. */
std::uint64_t floor_tick(std::uint64_t us) { return us - (us - T0) % TICK; }
std::uint64_t ceil_tick(std::uint64_t us) { return floor_tick(us + TICK - 1); }

/* The first clock reading at which the rule lets a timer added at `at` with
 * a delay of `ticks` run: the call rounded up to a tick boundary plus the
 * delay; delay 0: the tick the call falls in. */
std::uint64_t due_by_rule(std::uint64_t at, std::uint64_t ticks)
{
    return ticks == 0 ? floor_tick(at) : ceil_tick(at) + ticks * TICK;
}

std::uint64_t ticks_of(std::uint64_t us) { return (us + TICK - 1) / TICK; }

/* The fake clock readings at which callbacks ran, in order. */
struct firings {
    explicit firings(const fake_time &t) : clock(&t) {}
    const fake_time *clock;
    std::vector<std::uint64_t> at;
    auto recorder()
    {
        return [this] { at.push_back(clock->us.load()); };
    }
};

/* Calls expire() with the clock at every reading from `from` to `to`, one
 * every `step` µs, until `f` has recorded `until` firings. Returns the most
 * callbacks a single expire() ran (1 for a timer that never bursts). */
std::size_t sweep(twheel::wheel &w, fake_time &t, std::uint64_t from, std::uint64_t to,
                  std::uint64_t step, const firings &f, std::size_t until)
{
    std::size_t most = 0;
    for (std::uint64_t us = from; us <= to && f.at.size() < until; us += step) {
        t.us = us;
        most = std::max(most, w.expire());
    }
    return most;
}

/* A one-shot of `delay_us` (a whole number of ticks) armed with the clock
 * at `at`, the next timer `f` records: expire() every microsecond from
 * `from` (default: `at`) on. It must not run before `at + delay_us`, and
 * must run at the first reading at or past due_by_rule(): at most one tick
 * late. Returns the reading at which it ran. */
std::uint64_t expect_one_shot(twheel::wheel &w, fake_time &t, const firings &f,
                              std::uint64_t at, std::uint64_t delay_us,
                              std::uint64_t from = 0)
{
    const std::size_t n = f.at.size();
    sweep(w, t, from ? from : at, at + delay_us + 3 * TICK, 1, f, n + 1);
    assert_int_equal(f.at.size(), n + 1);
    const std::uint64_t fired = f.at[n];
    assert_true(fired >= at + delay_us);         /* never early by the clock */
    assert_true(fired <= at + delay_us + TICK);  /* at most one tick late */
    assert_int_equal(fired, due_by_rule(at, ticks_of(delay_us)));
    return fired;
}

} // namespace

/* ---- 1. the issue --------------------------------------------------------- */

/* The issue: the loop's expire() ran, the loop then waited 50 ms for events,
 * and a handler's after(20ms) fired at the very next expire(), 90 µs later:
 * its 20 ticks counted from now(), 50 ticks stale. */
static void test_after_following_idle_wait(void **)
{
    fake_time t(T0);
    twheel::wheel w(clock_config(t, twheel::drive_kind::automatic));
    firings f(t);
    assert_int_equal(w.expire(), 0); /* the loop's last turn: clock-driven now */

    t.us = T0 + 50000; /* idle 50 ms in epoll_wait */
    twheel::timer a = w.after(20ms, f.recorder());
    assert_int_equal(w.now(), 0); /* the stale tick the old rule counted from */
    assert_int_equal(w.timeout_ms(), 20); /* by the clock */
    assert_int_equal(w.expire(), 0);      /* the loop's next turns: at once, */
    t.us = T0 + 50090;
    assert_int_equal(w.expire(), 0);      /* and 90 µs later (the old rule ran it) */
    assert_true(f.at.empty());
    expect_one_shot(w, t, f, T0 + 50000, 20000, T0 + 50090); /* not before T0+70 ms */
    assert_int_equal(f.at[0], T0 + 70000);
    assert_false(a.pending());

    /* the same mid-tick: 20 ms counted from 300 µs into a tick */
    t.us = T0 + 150300;
    twheel::timer b = w.after(20ms, f.recorder());
    assert_int_equal(w.timeout_ms(), 21); /* 20.7 ms to T0 + 171 ms, rounded up */
    expect_one_shot(w, t, f, T0 + 150300, 20000);
    assert_int_equal(f.at[1], T0 + 171000);
}

/* The second case: after(1ms) right after an expire() that read the
 * clock 820 µs into a tick fired 180 µs later (the next tick boundary). */
static void test_after_1ms_mid_tick(void **)
{
    fake_time t(T0);
    twheel::wheel w(clock_config(t, twheel::drive_kind::automatic));
    firings f(t);
    std::uint64_t at = T0;
    for (std::uint64_t into : {820u, 400u, 1u, 999u, 0u, 500u}) {
        at = floor_tick(at) + 5 * TICK + into;
        t.us = at;
        assert_int_equal(w.expire(), 0);
        const std::size_t n = f.at.size();
        twheel::timer x = w.after(1ms, f.recorder());
        twheel::timer y = w.after(1us, f.recorder()); /* one tick as well */
        sweep(w, t, at, at + 3 * TICK, 1, f, n + 2);
        assert_int_equal(f.at.size(), n + 2); /* both in one expire() */
        const std::uint64_t fired = f.at[n];
        assert_int_equal(f.at[n + 1], fired);
        assert_true(fired >= at + TICK);        /* never early */
        assert_true(fired <= at + 2 * TICK);    /* at most one tick late */
        assert_int_equal(fired, due_by_rule(at, 1));
        assert_false(x.pending());
        assert_false(y.pending());
    }
}

/* An automatic wheel before its first driving call: delays count from now()
 * and each add restarts the wheel's clock, so timers set up long after the
 * wheel was created are not early by the first expire() either. */
static void test_automatic_setup_before_first_expire(void **)
{
    fake_time t(T0);
    twheel::wheel w(clock_config(t, twheel::drive_kind::automatic));
    firings f(t);
    const std::uint64_t a1 = T0 + 100300; /* set-up took 100.3 ms */
    t.us = a1;
    twheel::timer x = w.after(20ms, f.recorder());
    const std::uint64_t a2 = a1 + 4000; /* a second add, 4 ms later */
    t.us = a2;
    twheel::timer y = w.after(10ms, f.recorder());
    assert_int_equal(w.now(), 0);
    assert_int_equal(w.timeout_ms(), 10);
    /* the first expire() makes it clock-driven; tick 0 began at a2 */
    sweep(w, t, a2, a2 + 30000, 1, f, 2);
    assert_int_equal(f.at.size(), 2);
    assert_int_equal(f.at[0], a2 + 10000); /* y: exactly 10 ms after its add */
    assert_int_equal(f.at[1], a2 + 20000); /* x: late by the 4 ms between the adds */
    assert_true(f.at[1] >= a1 + 20000);
}

/* A callback that runs while the driver catches up (100 ms late) adds a
 * timer: it counts from the clock, not from the tick being dispatched. */
static void test_after_from_late_callback(void **)
{
    fake_time t(T0);
    twheel::wheel w(clock_config(t, twheel::drive_kind::clock));
    firings f(t);
    std::uint64_t added_at = 0, added_in_tick = 0;
    twheel::timer child;
    twheel::timer parent = w.after(2ms, [&] {
        added_at = t.us.load();
        added_in_tick = w.now();
        child = w.after(3ms, f.recorder());
    });
    t.us = T0 + 100000;
    assert_int_equal(w.expire(), 1);
    assert_int_equal(added_in_tick, 2);
    assert_int_equal(added_at, T0 + 100000);
    assert_true(child.pending());
    expect_one_shot(w, t, f, T0 + 100000, 3000);
}

/* ---- 2. reschedule --------------------------------------------------------- */

/* timer::reschedule on a clock-driven wheel whose now() lags the clock:
 * drive_kind::clock from creation (never expired), and automatic after an
 * expire(). */
static void test_reschedule_counts_from_clock(void **)
{
    for (auto drive : {twheel::drive_kind::clock, twheel::drive_kind::automatic}) {
        fake_time t(T0);
        twheel::wheel w(clock_config(t, drive));
        firings f(t);
        if (drive == twheel::drive_kind::automatic)
            assert_int_equal(w.expire(), 0);
        twheel::timer x = w.after(10ms, f.recorder());
        t.us = T0 + 40500; /* 40.5 ms on, no expire() meanwhile */
        assert_true(x.reschedule(10ms));
        assert_int_equal(w.timeout_ms(), 11); /* 10.5 ms to T0 + 51 ms */
        expect_one_shot(w, t, f, T0 + 40500, 10000);
        assert_int_equal(f.at[0], T0 + 51000);
        assert_false(x.pending());

        /* moved again before it fires, from a reading on a tick boundary */
        twheel::timer y = w.after(5ms, f.recorder());
        t.us = T0 + 60000;
        assert_true(y.reschedule(7ms));
        expect_one_shot(w, t, f, T0 + 60000, 7000);
        assert_int_equal(f.at[1], T0 + 67000);
    }
}

/* A periodic timer rescheduled while the driver is 4 firings behind: the
 * new grid starts from the clock at the call, the missed firings are gone. */
static void test_reschedule_periodic_counts_from_clock(void **)
{
    fake_time t(T0);
    twheel::wheel w(clock_config(t, twheel::drive_kind::automatic));
    firings f(t);
    assert_int_equal(w.expire(), 0);
    twheel::timer p = w.every(5ms, 5ms, f.recorder());
    sweep(w, t, T0, T0 + 12000, 1, f, 99);
    assert_int_equal(f.at.size(), 2); /* T0 + 5 ms and T0 + 10 ms */
    assert_int_equal(w.now(), 12);

    const std::uint64_t at = T0 + 33700; /* 15, 20, 25 and 30 ms not run */
    t.us = at;
    assert_true(p.reschedule(3ms));
    const std::size_t most = sweep(w, t, at, at + 3000 + 3 * 5000 + TICK, 1, f, 6);
    assert_int_equal(most, 1); /* no catch-up burst */
    assert_int_equal(f.at.size(), 6);
    for (std::uint64_t k = 0; k < 4; ++k) {
        const std::uint64_t fired = f.at[2 + k];
        assert_true(fired >= at + 3000 + k * 5000);
        assert_true(fired <= at + 3000 + k * 5000 + TICK);
        assert_int_equal(fired, ceil_tick(at) + 3000 + k * 5000);
    }
}

/* ---- 3. every() ---------------------------------------------------------------- */

/* every(first, interval) on a clock-driven wheel whose now() is 350 ticks
 * stale: the k-th firing comes first + k * interval after the call (at
 * most a tick later), one per expire(), never a burst of "missed" ones. */
static void test_every_with_stale_now(void **)
{
    fake_time t(T0);
    twheel::wheel w(clock_config(t, twheel::drive_kind::automatic));
    firings f(t);
    assert_int_equal(w.expire(), 0);
    const std::uint64_t at = T0 + 350200;
    t.us = at;
    twheel::timer p = w.every(10ms, 25ms, f.recorder());
    assert_int_equal(w.now(), 0);
    assert_int_equal(w.timeout_ms(), 11); /* 10.8 ms to T0 + 361 ms */
    const std::size_t most = sweep(w, t, at, at + 10000 + 4 * 25000 + 2 * TICK, 1, f, 5);
    assert_int_equal(most, 1);
    assert_int_equal(f.at.size(), 5);
    for (std::uint64_t k = 0; k < 5; ++k) {
        const std::uint64_t due = at + 10000 + k * 25000;
        assert_true(f.at[k] >= due);        /* never early */
        assert_true(f.at[k] <= due + TICK); /* at most one tick late */
        assert_int_equal(f.at[k], ceil_tick(at) + 10000 + k * 25000);
    }
    assert_true(p.pending());
    assert_true(p.cancel());

    /* durations that are not whole ticks round up: 1.5 ms and 2.5 ms are 2
     * and 3 ticks, so still never early by what was asked */
    const std::uint64_t at2 = f.at.back() + 12345;
    t.us = at2;
    twheel::timer q = w.every(1500us, 2500us, f.recorder());
    assert_int_equal(sweep(w, t, at2, at2 + 2000 + 4 * 3000 + 2 * TICK, 1, f, 10), 1);
    assert_int_equal(f.at.size(), 10);
    for (std::uint64_t k = 0; k < 5; ++k) {
        assert_true(f.at[5 + k] >= at2 + 1500 + k * 2500);
        assert_int_equal(f.at[5 + k], ceil_tick(at2) + 2000 + k * 3000);
    }
}

/* first = 0 on a clock-driven wheel: the grid starts at the tick the clock is
 * in, so firing 0 runs at the next expire() and firing k comes less than one
 * tick before k intervals have passed (timer.h documents this); but one
 * firing per interval, no burst. */
static void test_every_first_zero(void **)
{
    fake_time t(T0);
    twheel::wheel w(clock_config(t, twheel::drive_kind::clock));
    firings f(t);
    const std::uint64_t at = T0 + 350600;
    t.us = at;
    twheel::timer p = w.every(0ms, 25ms, f.recorder());
    assert_int_equal(w.expire(), 1); /* firing 0, at once */
    assert_int_equal(f.at[0], at);
    const std::size_t most = sweep(w, t, at, at + 4 * 25000 + 2 * TICK, 1, f, 5);
    assert_int_equal(most, 1);
    assert_int_equal(f.at.size(), 5);
    for (std::uint64_t k = 1; k < 5; ++k) {
        assert_true(f.at[k] + TICK > at + k * 25000); /* less than a tick early */
        assert_true(f.at[k] <= at + k * 25000 + TICK);
        assert_int_equal(f.at[k], floor_tick(at) + k * 25000);
    }
}

/* ---- 4. tick-driven wheels --------------------------------------------------- */

/* drive_kind::ticks, and automatic with advance() as the first driving call:
 * delays are exact in ticks from now(), whatever the clock did. The same
 * script on an automatic wheel first driven by expire() counts from the
 * clock instead (the part of this test that the old rule fails). */
static void test_tick_driven_exact(void **)
{
    for (auto drive : {twheel::drive_kind::ticks, twheel::drive_kind::automatic}) {
        fake_time t(T0);
        twheel::wheel w(clock_config(t, drive));
        std::vector<std::pair<char, std::uint64_t>> ran; /* who, now() */
        assert_int_equal(w.advance(1), 0); /* automatic: tick-driven from here */
        t.us = T0 + 7300; /* the clock moves on: irrelevant */
        twheel::timer a = w.after(5ms, [&] { ran.emplace_back('a', w.now()); });
        twheel::timer b = w.after(9ms, [&] { ran.emplace_back('b', w.now()); });
        twheel::timer p = w.every(2ms, 3ms, [&] { ran.emplace_back('p', w.now()); });
        t.us = T0 + 500000;
        assert_true(b.reschedule(6ms));
        assert_int_equal(w.advance(2), 1); /* p at 3 */
        assert_int_equal(w.advance(2), 0);
        assert_int_equal(w.advance(1), 2); /* a and p at 6: a exactly 5 ticks */
        assert_int_equal(w.advance(1), 1); /* b at 7: 6 ticks from its reschedule */
        assert_int_equal(w.advance(2), 1); /* p at 9 */
        const std::vector<std::pair<char, std::uint64_t>> want = {
            {'p', 3}, {'a', 6}, {'p', 6}, {'b', 7}, {'p', 9}};
        assert_true(ran == want);
        /* the timeout is in ticks: the clock says nothing about advance() */
        assert_true(p.cancel());
        twheel::timer c = w.after(40ms, [] {});
        t.us = T0 + 1000000000;
        assert_int_equal(w.timeout_ms(), 40);
    }

    /* contrast: automatic, first driven by expire() */
    fake_time t(T0);
    twheel::wheel w(clock_config(t, twheel::drive_kind::automatic));
    firings f(t);
    assert_int_equal(w.expire(), 0);
    t.us = T0 + 7300;
    twheel::timer a = w.after(5ms, f.recorder());
    expect_one_shot(w, t, f, T0 + 7300, 5000);
    assert_int_equal(f.at[0], T0 + 13000);
}

/* ---- 5. the timer thread -------------------------------------------------------- */

namespace {

constexpr std::uint64_t MAX_STEP = 3 * TICK; /* the test moves the clock less */
constexpr std::size_t KEPT = 256;            /* firings kept per periodic timer */

/* One one-shot timer as armed from the test thread. */
struct armed {
    std::atomic<std::uint64_t> at{0};     /* clock at the add or reschedule */
    std::atomic<std::uint64_t> delay{0};  /* the duration asked for, µs */
    std::atomic<std::uint64_t> due{0};    /* due_by_rule() */
    std::atomic<std::uint64_t> fired{0};  /* clock when its callback ran */
    std::atomic<int> runs{0};
    bool checked = false;                 /* test thread only */
};

/* One periodic timer: first and interval in µs, and its firings. */
struct repeating {
    std::uint64_t at = 0, first = 0, interval = 0;
    std::atomic<std::uint64_t> fired[KEPT] = {};
    std::atomic<std::size_t> runs{0};
    std::size_t checked = 0;

    std::uint64_t due(std::uint64_t k) const
    {
        return due_by_rule(at, ticks_of(first)) + k * ticks_of(interval) * TICK;
    }
};

/* Returns once a tw_expire() of the timer thread that started after this
 * call has read the clock and returned (the timer thread reads the clock
 * once per tw_expire(): the second read from now on comes from the next
 * call). So every timer due by the clock's current reading has run, and
 * its callback saw that reading. false after 30 s of wall time (a hang,
 * not a speed check). */
bool settle(const fake_time &t)
{
    const std::uint64_t reads = t.foreign_reads.load();
    const auto limit = std::chrono::steady_clock::now() + 30s;
    while (t.foreign_reads.load() < reads + 2) {
        if (std::chrono::steady_clock::now() > limit)
            return false;
        std::this_thread::yield();
    }
    return true;
}

/* First problem found, reported once the timer thread is stopped (a cmocka
 * assert would leave it running over this test's stack). */
struct problems {
    int count = 0;
    std::string first;
    void note(bool ok, const char *what, std::uint64_t a = 0, std::uint64_t b = 0)
    {
        if (ok)
            return;
        if (count++ == 0) {
            char buffer[200];
            std::snprintf(buffer, sizeof buffer, "%s (%llu, %llu)", what,
                          static_cast<unsigned long long>(a),
                          static_cast<unsigned long long>(b));
            first = buffer;
        }
    }
};

} // namespace

/* start_thread() on an automatic wheel (clock-driven from there), the
 * default lock, a fake clock moved by this thread, timers added and moved
 * from this thread while the timer thread expires every 100 µs.
 *
 * Phase 1, the issue: the timer thread is held inside a callback at tick 2
 * while the clock runs 50 ms on; timers added meanwhile must not run when it
 * catches up. Phase 2: the clock moves in random steps (0 to 3 ticks, often
 * mid-tick); at each reading the test adds a timer, moves a pending one or
 * adds a periodic one, then waits until the timer thread has expired at
 * that reading (settle()). The clock only moves after that, so the checks
 * are in fake time and do not depend on the scheduler: each timer ran at
 * the first reading at or past due_by_rule(), never before its delay had
 * passed since the call, and at most its delay (in whole ticks) + one tick +
 * one clock step (< 3 ticks) after the call. */
static void test_timer_thread_counts_from_clock(void **)
{
    fake_time t(T0);
    std::deque<armed> records;
    std::deque<repeating> periodic;
    std::atomic<int> early{0};
    std::atomic<bool> blocker_running{false}, blocker_release{false};
    problems trouble;
    std::mt19937_64 rng(0x2026112213);

    twheel::wheel w(clock_config(t, twheel::drive_kind::automatic,
                                 twheel::lock_kind::adaptive));
    std::vector<twheel::timer> handles;  /* records[i]'s is handles[i] */
    std::vector<twheel::timer> repeaters;

    auto one_shot = [&](armed &r) {
        return [&r, &t, &early] {
            const std::uint64_t now = t.us.load();
            if (now < r.at.load() + r.delay.load())
                early.fetch_add(1);
            r.fired.store(now);
            r.runs.fetch_add(1);
        };
    };
    auto arm = [&](std::uint64_t delay_us) {
        armed &r = records.emplace_back();
        const std::uint64_t at = t.us.load();
        r.at = at;
        r.delay = delay_us;
        r.due = due_by_rule(at, ticks_of(delay_us));
        handles.push_back(w.after(std::chrono::microseconds(delay_us), one_shot(r)));
    };
    /* After settle() at the clock's current reading: what is due has run,
     * at this very reading; nothing else has. */
    auto verify = [&](std::uint64_t now) {
        for (armed &r : records) {
            if (r.checked)
                continue;
            if (r.due.load() <= now) {
                r.checked = true;
                trouble.note(r.runs.load() == 1, "one-shot did not run once", r.due, now);
                trouble.note(r.fired.load() == now, "not run at the first reading past due",
                             r.fired, now);
            } else {
                trouble.note(r.runs.load() == 0, "one-shot ran before due", r.due, r.fired);
            }
        }
        for (repeating &p : periodic) {
            std::size_t want = p.checked;
            while (p.due(want) <= now)
                ++want;
            trouble.note(p.runs.load() == want, "periodic firings", p.runs, want);
            for (; p.checked < want && p.checked < p.runs.load() && p.checked < KEPT;
                 ++p.checked) {
                const std::uint64_t k = p.checked;
                trouble.note(p.fired[k].load() == now, "periodic not at first reading",
                             p.fired[k], now);
                if (p.first != 0) /* first 0: less than a tick early by design */
                    trouble.note(p.fired[k].load() >= p.at + p.first + k * p.interval,
                                 "periodic early", p.fired[k], k);
            }
        }
    };

    /* holds the timer thread at tick 2 until released (or 30 s passed) */
    twheel::timer blocker = w.after(2ms, [&] {
        blocker_running = true;
        const auto limit = std::chrono::steady_clock::now() + 30s;
        while (!blocker_release.load() && std::chrono::steady_clock::now() < limit)
            std::this_thread::yield();
    });
    w.start_thread(100us);

    /* phase 1 */
    t.us = T0 + 2 * TICK;
    const auto limit = std::chrono::steady_clock::now() + 30s;
    while (!blocker_running.load() && std::chrono::steady_clock::now() < limit)
        std::this_thread::yield();
    trouble.note(blocker_running.load(), "blocker never ran");
    t.us = T0 + 52300; /* 50.3 ms later; the timer thread's now() is 2 */
    for (std::uint64_t i = 0; i < 8; ++i)
        arm((1 + 3 * i) * TICK); /* 1 .. 22 ms */
    arm(2500);                   /* 3 ticks */
    blocker_release = true;
    trouble.note(settle(t), "timer thread hangs");
    verify(t.us.load());
    for (const armed &r : records) /* nothing ran on catching up */
        trouble.note(r.runs.load() == 0, "ran on catching up", r.due, r.fired);

    /* phase 2 */
    for (int step = 0; step < 300 && trouble.count == 0; ++step) {
        const std::uint64_t now = t.us.load() + rng() % MAX_STEP;
        t.us = now;
        const unsigned what = static_cast<unsigned>(rng() % 10);
        if (what < 6) {
            arm(rng() % 20001); /* 0 .. 20 ms, mostly not whole ticks */
        } else if (what < 9) {
            /* move a timer that cannot run at this reading (so it cannot be
             * running now); record the new arming first: it may run at once */
            const std::size_t j = static_cast<std::size_t>(rng() % records.size());
            armed &r = records[j];
            if (!r.checked && r.due.load() > now) {
                const std::uint64_t delay_us = rng() % 20001;
                r.at = now;
                r.delay = delay_us;
                r.due = due_by_rule(now, ticks_of(delay_us));
                trouble.note(handles[j].reschedule(std::chrono::microseconds(delay_us)),
                             "reschedule of a pending timer failed", j, now);
            }
        } else if (periodic.size() < 4) {
            repeating &p = periodic.emplace_back();
            p.at = now;
            p.first = periodic.size() == 1 ? 0 : rng() % 8000;
            p.interval = MAX_STEP + 1 + rng() % 4000; /* > a step: one firing each */
            auto record = [&p, &t] {
                const std::size_t k = p.runs.load();
                if (k < KEPT)
                    p.fired[k].store(t.us.load());
                p.runs.fetch_add(1);
            };
            repeaters.push_back(w.every(std::chrono::microseconds(p.first),
                                        std::chrono::microseconds(p.interval), record));
        }
        trouble.note(settle(t), "timer thread hangs");
        verify(now);
    }
    /* let every one-shot run: small steps, a settle at each */
    const std::uint64_t end = t.us.load() + 21 * TICK;
    while (trouble.count == 0 && t.us.load() < end) {
        const std::uint64_t now = t.us.load() + 1 + rng() % (MAX_STEP - 1);
        t.us = now;
        trouble.note(settle(t), "timer thread hangs");
        verify(now);
    }
    w.stop_thread();

    if (trouble.count)
        std::fprintf(stderr, "%d problems, first: %s\n", trouble.count, trouble.first.c_str());
    assert_int_equal(trouble.count, 0);
    assert_int_equal(early.load(), 0);
    std::size_t one_shots = 0;
    for (const armed &r : records) {
        const std::uint64_t at = r.at, fired = r.fired;
        assert_true(r.checked);
        assert_int_equal(r.runs.load(), 1);
        assert_true(fired >= at + r.delay);                                /* never early */
        assert_true(fired < at + ticks_of(r.delay) * TICK + TICK + MAX_STEP); /* bounded */
        ++one_shots;
    }
    assert_true(one_shots > 100);
    std::size_t periodic_runs = 0;
    for (const repeating &p : periodic)
        periodic_runs += p.runs.load();
    assert_true(periodic.size() >= 2);
    assert_true(periodic_runs > 20);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_after_following_idle_wait),
        cmocka_unit_test(test_after_1ms_mid_tick),
        cmocka_unit_test(test_automatic_setup_before_first_expire),
        cmocka_unit_test(test_after_from_late_callback),
        cmocka_unit_test(test_reschedule_counts_from_clock),
        cmocka_unit_test(test_reschedule_periodic_counts_from_clock),
        cmocka_unit_test(test_every_with_stale_now),
        cmocka_unit_test(test_every_first_zero),
        cmocka_unit_test(test_tick_driven_exact),
        cmocka_unit_test(test_timer_thread_counts_from_clock),
    };
    return RUN_TESTS(tests);
}
