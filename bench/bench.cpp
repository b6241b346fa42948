// twheel_bench: twheel against the timer structures people use instead, in one
// run. See bench/README.md for the workloads, the output and the command lines.
//
// Every structure sits behind the same small interface (structures.hpp) and
// runs the same timers: delays and orders come from a fixed-seed PRNG, shared by all. The
// harness checks that every structure fires the same (timer, tick) pairs, so a
// broken baseline cannot look fast.
#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cinttypes>
#include <cmath>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include <malloc.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.hpp"
#include "report.hpp"
#include "skynet_wheel.h"
#include "structures.hpp"

using namespace bench;

namespace {

constexpr uint64_t IDLE_TICKS = 3600000;         // one hour of 1 ms ticks
constexpr uint64_t FAR_DELAY = 3600000 + 30000;  // one hour and 30 s

// ---- workload A: add, bytes, expire tick by tick, next-expiry checkpoints ----------

constexpr uint64_t CHECKPOINT_EVERY = 1000; // ticks

template <class S> void phase_a(S &s, const data &d, bool keep, const options &)
{
    const size_t n = d.n;
    std::vector<typename S::handle> h(n);
    int64_t heap0 = heap_in_use();
    s.create();
    g_tick = 0;
    g_state = nullptr;

    uint64_t t0 = now_ns();
    for (size_t i = 0; i < n; i++)
        h[i] = s.add(d.delay[i], arg_of(i));
    uint64_t t1 = now_ns();
    int64_t bytes = heap_in_use() - heap0;

    g_fire_hash = 0;
    g_fired = 0;
    uint64_t cp_hash = 0, q_ns = 0, q_count = 0, exp_ns = 0;
    // Each checkpoint times three batches of QUERIES calls and keeps the
    // fastest: a batch lasts microseconds, so one preemption would otherwise
    // swamp it. The figure is the mean over checkpoints of those batches.
    auto query = [&]() {
        uint64_t v = s.next_expiry(), best = UINT64_MAX;
        for (int batch = 0; batch < 3; batch++) {
            uint64_t a = now_ns(), acc = 0;
            for (int q = 0; q < QUERIES; q++)
                acc += s.next_expiry();
            uint64_t b = now_ns();
            if (acc != v * QUERIES)
                die("%s: next_expiry is not stable between calls", s.name);
            best = std::min(best, b - a);
            g_sink = g_sink + acc;
        }
        cp_hash = mix64(cp_hash ^ v) + 1;
        q_ns += best;
        q_count += QUERIES;
    };
    query();
    uint64_t seg = now_ns();
    for (uint64_t t = 1; t <= MAX_DELAY; t++) {
        g_tick = t;
        s.advance(1);
        if (t % CHECKPOINT_EVERY == 0 && t < MAX_DELAY) {
            exp_ns += now_ns() - seg;
            query();
            seg = now_ns();
        }
    }
    exp_ns += now_ns() - seg;
    if (s.next_expiry() != NEVER)
        die("%s: timers left after driving past the longest delay", s.name);

    cross_check(n, "expire (timer, tick) pairs", s.name, outcome{g_fired, g_fire_hash});
    if (exact_next(s)) // a lower bound is checked where its exact value is known (phase_far)
        cross_check(n, "next-expiry values at checkpoints", s.name, outcome{q_count / QUERIES, cp_hash});
    if (g_fired != n)
        die("%s: %" PRIu64 " of %zu timers fired", s.name, g_fired, n);
    s.destroy();

    if (keep) {
        record(s.name, n, "add", (double)(t1 - t0) / (double)n);
        record(s.name, n, "bytes_per_timer", (double)bytes / (double)n, "bytes");
        record(s.name, n, "expire", (double)exp_ns / (double)n, "ns/fired");
        record(s.name, n, "next_expiry", (double)q_ns / (double)q_count);
    }
}

// ---- workload B: cancel half, reschedule the rest, heartbeat, drain -----------------

// One record per timer, as a server keeps the handle in its connection.
template <class H> struct conn {
    H h;
    uint8_t state; // heartbeat: 0 dead, 1..21 alive with state-1 reschedules done
};

// Heartbeat: each connection is at a random stage of its life (add, 20
// reschedules, cancel, then a new connection on that slot). Each of `ops`
// steps picks one of `live` connections (c[slot[j]]) at random and does its
// next operation; the driver advances one tick every live/1024 steps, so a
// connection is touched about every 1024 ticks while delays are uniform in
// [1, 60000]; a timer that fires ends its connection (the next step on it
// adds a new one, see fire()).
template <class S>
void heartbeat_steps(S &s, std::vector<conn<typename S::handle>> &c,
                     const uint32_t *slot, size_t live, size_t ops, uint64_t seed)
{
    size_t per_tick = std::max<size_t>(1, live / 1024), tick_ctr = 0;
    splitmix r(seed);
    for (size_t k = 0; k < ops; k++) {
        uint64_t x = r.next();
        uint32_t i = slot[((x & 0xffffffffu) * live) >> 32];
        uint32_t delay = 1 + (uint32_t)(((x >> 32) * MAX_DELAY) >> 32);
        conn<typename S::handle> &cc = c[i];
        if (cc.state == 0) {
            cc.h = s.add(delay, arg_of(i));
            cc.state = 1;
        } else if (cc.state <= HB_RESCHEDULES) {
            s.reschedule(cc.h, delay, arg_of(i));
            cc.state++;
        } else {
            s.cancel(cc.h);
            cc.state = 0;
        }
        if (++tick_ctr == per_tick) {
            tick_ctr = 0;
            g_tick++;
            s.advance(1);
        }
    }
}

template <class S> void phase_b(S &s, const data &d, bool keep, const options &opt)
{
    const size_t n = d.n, half = n / 2, live = n - half;
    std::vector<conn<typename S::handle>> c(n);
    int64_t heap0 = heap_in_use();
    s.create();
    g_tick = 0;
    g_state = nullptr;
    g_fire_hash = 0;
    g_fired = 0;
    for (size_t i = 0; i < n; i++)
        c[i].h = s.add(d.delay[i], arg_of(i));

    uint64_t rc = 0;
    uint64_t t0 = now_ns();
    for (size_t j = 0; j < half; j++)
        rc += (uint64_t)s.cancel(c[d.perm[j]].h);
    uint64_t t1 = now_ns();
    for (size_t j = half; j < n; j++)
        rc += (uint64_t)s.reschedule(c[d.perm[j]].h, d.rdelay[j - half], arg_of(d.perm[j]));
    uint64_t t2 = now_ns();
    if (rc != n)
        die("%s: %" PRIu64 " of %zu cancels/reschedules succeeded", s.name, rc, n);
    int64_t bytes_after = heap_in_use() - heap0;

    // Heartbeat on the survivors (see heartbeat_steps)
    const uint32_t *slot = d.perm.data() + half;
    for (size_t j = 0; j < live; j++)
        c[slot[j]].state = d.hb_state[j];
    g_state = &c[0].state;
    g_state_stride = sizeof c[0];
    size_t ops = std::min(live * (HB_RESCHEDULES + 2), opt.hb_cap);
    uint64_t t3 = now_ns();
    heartbeat_steps(s, c, slot, live, ops, SEED + n);
    uint64_t t4 = now_ns();
    g_state = nullptr;
    for (uint64_t end = g_tick + MAX_DELAY; g_tick < end;) {
        g_tick++;
        s.advance(1);
    }
    if (s.next_expiry() != NEVER)
        die("%s: timers left after the drain", s.name);
    cross_check(n, "cancel/reschedule/heartbeat (timer, tick) pairs", s.name,
                outcome{g_fired, g_fire_hash});
    s.destroy();

    if (keep) {
        record(s.name, n, "cancel", (double)(t1 - t0) / (double)half);
        record(s.name, n, "reschedule", (double)(t2 - t1) / (double)live);
        record(s.name, n, "heartbeat", (double)(t4 - t3) / (double)ops);
        record(s.name, n, "bytes_per_live_after_cancel", (double)bytes_after / (double)live,
               "bytes");
    }
}

// ---- far-away timers: next-expiry, a loop iteration, earliest-timer churn ----------
// A server whose only timers are 30-60 s idle kicks: N timers with delays
// uniform in [FAR_MIN, FAR_MIN + FAR_SPAN), so none is due in the first
// 30 000 ticks. Figures:
//   far_next_expiry  one next_expiry call (batches, as in workload A);
//   far_loop         an epoll-style iteration: advance(1) + next_expiry();
//   churn_step       the earliest timer moves to the back (reschedule),
//                    then next_expiry (requests answered oldest first);
//   churn_next_expiry  one next_expiry call on the wheel those steps left
//                    (its earliest slot lost its earliest timers);
//   bytes_per_timer_resched  bytes held per timer after every timer was
//                    rescheduled once more (N reschedules).
// A structure whose next_expiry is a lower bound (S::exact_next_expiry is
// false) must answer at most the exact value and never 0; the others exactly.

constexpr uint32_t FAR_MIN = 30000, FAR_SPAN = 30000;
constexpr uint64_t FAR_LOOP_TICKS = FAR_MIN - 1;
constexpr uint64_t FAR_LOOP_BUDGET_NS = 1500000000; // a scanning structure stops early
constexpr size_t CHURN_STEPS = 40000, CHURN_BLOCK = 250; // steps, checked every block


// N far-away delays, and the timers' indices ordered by due tick (then
// index): order[k] is the earliest timer once the k before it have gone.
struct far_input {
    std::vector<uint32_t> delay, order;
};

far_input make_far(splitmix &r, size_t n)
{
    far_input f;
    f.delay.resize(n);
    f.order.resize(n);
    for (size_t i = 0; i < n; i++) {
        f.delay[i] = FAR_MIN + r.below(FAR_SPAN);
        f.order[i] = (uint32_t)i;
    }
    std::sort(f.order.begin(), f.order.end(), [&](uint32_t a, uint32_t b) {
        return f.delay[a] != f.delay[b] ? f.delay[a] < f.delay[b] : a < b;
    });
    return f;
}

template <class S> void check_next(const S &s, uint64_t got, uint64_t want, const char *where)
{
    bool ok = exact_next(s) ? got == want : got <= want && got > 0;
    if (!ok)
        die("%s: %s: next_expiry %" PRIu64 ", exact %" PRIu64, s.name, where, got, want);
}

// ns per next_expiry call: the fastest of three batches of QUERIES (a
// scanning structure's batch stops early).
template <class S> double query_batches(S &s)
{
    double best = 1e300;
    for (int batch = 0; batch < 3; batch++) {
        uint64_t a = now_ns(), acc = 0, b = a;
        int q = 0;
        while (q < QUERIES && b - a < FAR_LOOP_BUDGET_NS / 8) {
            for (int i = 0; i < 16; i++, q++)
                acc += s.next_expiry();
            b = now_ns();
        }
        best = std::min(best, (double)(b - a) / q);
        g_sink = g_sink + acc;
    }
    return best;
}

template <class S> void phase_far(S &s, size_t n, bool keep)
{
    splitmix r(SEED ^ 0xfa7 ^ n);
    const far_input far = make_far(r, n);
    const std::vector<uint32_t> &delay = far.delay, &order = far.order;
    std::vector<typename S::handle> h(n);
    int64_t heap0 = heap_in_use();
    s.create();
    g_tick = 0;
    g_state = nullptr;
    g_fired = 0;
    for (size_t i = 0; i < n; i++)
        h[i] = s.add(delay[i], arg_of(i));

    // next-expiry with every timer far away
    uint64_t want = delay[order[0]];
    check_next(s, s.next_expiry(), want, "far");
    double far_next = query_batches(s);

    // the event loop's iteration: nothing fires in these ticks
    uint64_t t0 = now_ns(), acc = 0, ticks = 0;
    while (ticks < FAR_LOOP_TICKS) {
        g_tick = ++ticks;
        s.advance(1);
        acc += s.next_expiry();
        if ((ticks & 63) == 0 && now_ns() - t0 > FAR_LOOP_BUDGET_NS)
            break;
    }
    double loop = (double)(now_ns() - t0) / (double)ticks;
    g_sink = g_sink + acc;
    if (g_fired != 0)
        die("%s: a far timer fired early", s.name);
    check_next(s, s.next_expiry(), want - ticks, "far, after the loop");

    // earliest-timer churn: time stands still; each step sends the earliest
    // timer behind all others, so the next one in `order` becomes earliest
    size_t steps = std::min(CHURN_STEPS, n - 1), k = 0;
    uint64_t churn_start = now_ns();
    while (k < steps) {
        if (now_ns() - churn_start > FAR_LOOP_BUDGET_NS)
            break; // a scanning structure: enough steps
        size_t end = std::min(steps, k + CHURN_BLOCK);
        for (; k < end; k++) {
            uint32_t i = order[k];
            s.reschedule(h[i], FAR_MIN + FAR_SPAN + (k & 1023), arg_of(i));
            acc += s.next_expiry();
        }
        check_next(s, s.next_expiry(), delay[order[k]] - ticks, "earliest-timer churn");
    }
    double step = (double)(now_ns() - churn_start) / (double)k;
    g_sink = g_sink + acc;
    // next-expiry on the churned wheel: its earliest slot lost its earliest
    // timers (for twheel, the slot's least tick is stale)
    double churn_next = query_batches(s);

    // every timer rescheduled once more: what stale state costs in memory
    for (size_t i = 0; i < n; i++)
        s.reschedule(h[i], FAR_MIN + r.below(FAR_SPAN), arg_of(i));
    int64_t bytes_resched = heap_in_use() - heap0;
    s.destroy();

    if (keep) {
        record(s.name, n, "far_next_expiry", far_next);
        record(s.name, n, "far_loop", loop);
        record(s.name, n, "churn_step", step);
        record(s.name, n, "churn_next_expiry", churn_next);
        record(s.name, n, "bytes_per_timer_resched", (double)bytes_resched / (double)n,
               "bytes");
    }
}

// ---- clock-driven add and reschedule: what the clock read costs -------------------
// On a wheel that is not TW_DRIVE_TICKS every tw_add and tw_reschedule reads
// the wheel's clock before taking the lock, so that a delay counts from the
// call. Here the "add" and "reschedule" workloads run once more, same
// delays and order, on a TW_DRIVE_CLOCK wheel: never driven, it reads the
// clock all the same. The tick-driven figures are the "add" and
// "reschedule" rows of the same repetition, which are these operations on
// the same input. Workloads add_clock / reschedule_clock read
// TW_CLOCK_MONOTONIC; add_clock_coarse (default lock only) reads
// TW_CLOCK_MONOTONIC_COARSE. Reschedule only up to CLOCK_RESCHEDULE_MAX_N:
// beyond, a reschedule is hundreds of ns of cache misses, one repetition
// cannot show a read of tens of ns in it, and its cancel/reschedule pass
// would add seconds to the run.

constexpr size_t CLOCK_RESCHEDULE_MAX_N = 1000000;

template <class S> void phase_clock(S &, const data &, bool) {} // not a twheel

void clock_run(const twheel_s &base, const data &d, bool keep, int clock, const char *suffix,
               bool resched)
{
    twheel_s s(base.name, base.lock, TW_DRIVE_CLOCK, clock);
    const size_t n = d.n, half = n / 2, live = n - half;
    std::vector<twheel_s::handle> h(n);
    s.create();
    uint64_t t0 = now_ns();
    for (size_t i = 0; i < n; i++)
        h[i] = s.add(d.delay[i], arg_of(i));
    uint64_t t1 = now_ns();
    // as in phase_b; a failed add left id 0, which no cancel or reschedule takes
    uint64_t rc = 0, t2 = 0, t3 = 0;
    if (resched) {
        for (size_t j = 0; j < half; j++)
            rc += (uint64_t)s.cancel(h[d.perm[j]]);
        t2 = now_ns();
        for (size_t j = half; j < n; j++)
            rc += (uint64_t)s.reschedule(h[d.perm[j]], d.rdelay[j - half], arg_of(d.perm[j]));
        t3 = now_ns();
    } else {
        rc = n - (size_t)std::count(h.begin(), h.end(), twheel_s::handle(0));
    }
    s.destroy();
    if (rc != n)
        die("%s, clock-driven: %" PRIu64 " of %zu adds/cancels/reschedules succeeded",
            s.name, rc, n);
    if (keep) {
        record(s.name, n, std::string("add") + suffix, (double)(t1 - t0) / (double)n);
        if (resched)
            record(s.name, n, std::string("reschedule") + suffix, (double)(t3 - t2) / (double)live);
    }
}

void phase_clock(twheel_s &s, const data &d, bool keep)
{
    clock_run(s, d, keep, TW_CLOCK_MONOTONIC, "_clock", d.n <= CLOCK_RESCHEDULE_MAX_N);
    settle_malloc();
    if (s.lock != TW_LOCK_NONE) {
        clock_run(s, d, keep, TW_CLOCK_MONOTONIC_COARSE, "_clock_coarse", false);
        settle_malloc();
    }
}

// ---- counts: the workloads once more, untimed, for cachegrind ------------------------
// `--count STAGE` runs the workloads in a fixed order, untimed, and exits
// right after STAGE. cachegrind (valgrind 3.19 has no way to collect a part
// of a run) counts the whole process, so bench/cachegrind.sh runs each prefix
// and takes differences: the events of one stage, divided by its operations.
// Instruction counts and simulated cache misses do not move with the
// machine's noise.

const char *const count_stages[] = {"start", "add", "next_expiry", "cancel",
                                    "reschedule", "expire", "far_setup",
                                    "far_next_expiry", "far_churn", "churn_next_expiry",
                                    "hb_setup", "heartbeat", "clock_setup", "add_clock"};
constexpr int COUNTED_QUERIES = 10000;
// far-away next-expiry calls: enough that a run's layout noise (a few
// hundred misses) vanishes per call; a structure whose call scans (skynet's
// walks a slot) gets fewer (its counts are in the millions per call anyway)
constexpr int COUNTED_FAR_QUERIES = 10000, COUNTED_FAR_QUERIES_SCANNING = 100;
constexpr size_t COUNTED_HEARTBEATS = 1000000;
constexpr size_t COUNTED_CHURN = 10000;

// --count's clock-driven stages; false for a structure without a clock
template <class S> bool make_clock_driven(S &) { return false; }
bool make_clock_driven(twheel_s &s)
{
    s.drive = TW_DRIVE_CLOCK;
    return true;
}

template <class S> void count_run(S &s, const data &d, const std::string &stop)
{
    std::vector<typename S::handle> h(d.n);
    uint64_t acc = 0;
    size_t ops = 0;
    auto stage_done = [&](const char *name) {
        if (stop != name)
            return;
        std::printf("count %s %s %zu\n", s.name, name, ops);
        std::fflush(stdout);
        std::_Exit(0); // no teardown: the next prefix's difference is the stage
    };
    auto query = [&](int calls) { // a next-expiry stage
        for (int q = 0; q < calls; q++)
            acc += s.next_expiry();
        g_sink = g_sink + acc;
        ops = (size_t)calls;
    };
    s.create();
    g_tick = 0;
    g_state = nullptr;
    g_fired = 0;
    stage_done("start");
    for (size_t i = 0; i < d.n; i++)
        h[i] = s.add(d.delay[i], arg_of(i));
    ops = d.n;
    stage_done("add");
    query(COUNTED_QUERIES);
    stage_done("next_expiry");
    for (size_t j = 0; j < d.n / 2; j++)
        s.cancel(h[d.perm[j]]);
    ops = d.n / 2;
    stage_done("cancel");
    for (size_t j = d.n / 2; j < d.n; j++)
        s.reschedule(h[d.perm[j]], d.rdelay[j - d.n / 2], arg_of(d.perm[j]));
    ops = d.n - d.n / 2;
    stage_done("reschedule");
    for (uint64_t t = 1; t <= MAX_DELAY; t++) {
        g_tick = t;
        s.advance(1);
    }
    if (g_fired != d.n - d.n / 2)
        die("%s: %" PRIu64 " timers fired, expected %zu", s.name, g_fired, d.n - d.n / 2);
    ops = g_fired;
    stage_done("expire");
    s.destroy();
    // every timer far away: next-expiry answers from an upper-level slot
    splitmix r(SEED ^ 0xfa7 ^ d.n);
    const far_input far = make_far(r, d.n);
    const std::vector<uint32_t> &order = far.order;
    s.create();
    for (size_t i = 0; i < d.n; i++)
        h[i] = s.add(far.delay[i], arg_of(i));
    const int far_queries =
        scans_for_next<S>::value ? COUNTED_FAR_QUERIES_SCANNING : COUNTED_FAR_QUERIES;
    ops = 0;
    stage_done("far_setup");
    query(far_queries);
    stage_done("far_next_expiry");
    // earliest-timer churn, then next-expiry on the wheel it left
    for (size_t k = 0; k < COUNTED_CHURN && k + 1 < d.n; k++)
        s.reschedule(h[order[k]], FAR_MIN + FAR_SPAN + (k & 1023), arg_of(order[k]));
    ops = 0;
    stage_done("far_churn");
    query(far_queries);
    stage_done("churn_next_expiry");
    s.destroy();

    // heartbeat, as in workload B: N/2 connections at random stages
    const size_t live = d.n - d.n / 2;
    std::vector<conn<typename S::handle>> c(live);
    std::vector<uint32_t> slot(live);
    s.create();
    g_tick = 0;
    for (size_t j = 0; j < live; j++) {
        c[j].h = s.add(d.delay[j], arg_of(j));
        c[j].state = d.hb_state[j];
        slot[j] = (uint32_t)j;
    }
    g_state = &c[0].state;
    g_state_stride = sizeof c[0];
    ops = 0;
    stage_done("hb_setup");
    heartbeat_steps(s, c, slot.data(), live, COUNTED_HEARTBEATS, SEED + d.n);
    ops = COUNTED_HEARTBEATS;
    stage_done("heartbeat");
    g_state = nullptr;
    s.destroy();

    // twheel only: the add stage once more on a TW_DRIVE_CLOCK wheel, whose
    // every add reads the clock. Against "add": twheel's code around the
    // read and glibc's wrapper (valgrind hides the vDSO: a system call)
    if (!make_clock_driven(s))
        die("--count %s: twheel structures only", stop.c_str());
    s.create();
    ops = 0;
    stage_done("clock_setup");
    for (size_t i = 0; i < d.n; i++)
        h[i] = s.add(d.delay[i], arg_of(i));
    ops = d.n;
    stage_done("add_clock");
    s.destroy();
}

// ---- idle catch-up: one hour of 1 ms ticks with nothing due ------------------------

template <class S> void idle(S &s, bool far, bool keep)
{
    s.create();
    g_state = nullptr;
    uint64_t fired0 = g_fired;
    if (far)
        s.add(FAR_DELAY, arg_of(0));
    uint64_t t0 = now_ns();
    s.advance(IDLE_TICKS);
    uint64_t t1 = now_ns();
    uint64_t want = far ? FAR_DELAY - IDLE_TICKS : NEVER;
    uint64_t got = s.next_expiry();
    bool ok = exact_next(s) ? got == want : got <= want && got > 0;
    if (!ok || g_fired != fired0)
        die("%s: after idle catch-up next_expiry is %" PRIu64 ", expected %" PRIu64,
            s.name, got, want);
    s.destroy();
    if (keep)
        record(s.name, 0, far ? "idle_far_us" : "idle_empty_us", (double)(t1 - t0) / 1e3, "us");
}

// ---- contended: 4 threads add/cancel while one drives --------------------------------
// Each worker owns a ring of n/4 timers: every iteration cancels the timer in
// the next ring slot (fired or not) and adds a new one there (delay uniform in
// [1, 60000]), for a fixed wall-clock time. The driver advances one tick,
// sleeps ~20 µs, repeats, until the workers stop. Figure: wall time / (cancels
// + adds of all workers), so a lock that collapses cannot stretch the run.

constexpr int WORKERS = 4;

struct mt_result {
    double ns_per_op;
    uint64_t ticks, fired;
};

std::atomic<uint64_t> mt_fired;
void mt_fire(void *) { mt_fired.fetch_add(1, std::memory_order_relaxed); }

void driver_sleep()
{
    struct timespec ts = {0, 20000};
    nanosleep(&ts, nullptr);
}

template <class Setup, class Work, class Tick>
mt_result run_contended(double seconds, Setup setup, Work work, Tick tick)
{
    std::atomic<int> go(0), done(0), stop(0);
    std::atomic<uint64_t> ops(0);
    uint64_t ticks = 0;
    setup();
    std::vector<std::thread> ws;
    for (int w = 0; w < WORKERS; w++)
        ws.emplace_back([&, w] {
            while (!go.load(std::memory_order_acquire))
                std::this_thread::yield();
            ops.fetch_add(work(w, stop), std::memory_order_relaxed);
            done.fetch_add(1, std::memory_order_release);
        });
    std::thread drv([&] {
        prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
        while (!go.load(std::memory_order_acquire))
            std::this_thread::yield();
        while (done.load(std::memory_order_acquire) < WORKERS) {
            tick();
            ticks++;
            driver_sleep();
        }
    });
    uint64_t t0 = now_ns();
    go.store(1, std::memory_order_release);
    struct timespec ts = {(time_t)seconds, (long)((seconds - (double)(time_t)seconds) * 1e9)};
    nanosleep(&ts, nullptr);
    stop.store(1, std::memory_order_relaxed);
    for (auto &t : ws)
        t.join();
    uint64_t t1 = now_ns();
    drv.join();
    // each iteration is one cancel and one add
    return mt_result{(double)(t1 - t0) / (double)(2 * std::max<uint64_t>(1, ops.load())),
                     ticks, mt_fired.load()};
}

// Busy processes at normal priority, beside a contended run: the machine a
// server shares with other work. Each spins on arithmetic until killed, and
// dies with the bench if the bench dies first.
class hog_group {
public:
    explicit hog_group(int count)
    {
        const pid_t parent = getpid();
        for (int i = 0; i < count; i++) {
            pid_t pid = fork();
            if (pid == 0) {
                prctl(PR_SET_PDEATHSIG, SIGKILL);
                if (getppid() != parent) // the bench died before prctl
                    _exit(0);
                volatile uint64_t x = 1;
                for (;;)
                    x = x * 6364136223846793005u + 1442695040888963407u;
            }
            if (pid < 0)
                die("fork for a hog failed: %s", std::strerror(errno));
            pids_.push_back(pid);
        }
    }
    hog_group(const hog_group &) = delete;
    hog_group &operator=(const hog_group &) = delete;
    ~hog_group()
    {
        for (pid_t pid : pids_)
            kill(pid, SIGKILL);
        for (pid_t pid : pids_)
            waitpid(pid, nullptr, 0);
    }

private:
    std::vector<pid_t> pids_;
};

// The workload's name for a hog count: "contended" quiet (as before hogs
// existed), "contended_hog2" with two.
std::string contended_workload(int hogs, const char *suffix = "")
{
    std::string w = hogs ? "contended_hog" + std::to_string(hogs) : "contended";
    return w + suffix;
}

mt_result contended_twheel(int lock, size_t n, double seconds)
{
    struct tw_config c;
    tw_config_init(&c);
    c.lock = lock;
    c.drive = TW_DRIVE_TICKS; // driven by tw_advance: no clock read per add
    tw_wheel *w = tw_create(&c);
    if (!w)
        die("tw_create failed");
    size_t ring = std::max<size_t>(1, n / WORKERS);
    std::vector<std::vector<tw_id>> ids(WORKERS, std::vector<tw_id>(ring));
    auto cb = [](tw_wheel *, tw_id, void *) { mt_fire(nullptr); };
    mt_fired = 0;
    auto setup = [&] {
        splitmix r(SEED);
        for (auto &v : ids)
            for (auto &id : v)
                id = tw_add(w, 1 + r.below(MAX_DELAY), cb, nullptr);
    };
    auto work = [&](int me, std::atomic<int> &stop) -> uint64_t {
        splitmix r(SEED + (uint64_t)me + 1);
        std::vector<tw_id> &v = ids[me];
        uint64_t i = 0, sink = 0;
        for (size_t j = 0; !stop.load(std::memory_order_relaxed); i++) {
            sink += (uint64_t)tw_cancel(w, v[j]);
            v[j] = tw_add(w, 1 + r.below(MAX_DELAY), cb, nullptr);
            sink += v[j];
            if (++j == ring)
                j = 0;
        }
        sink_add(sink);
        return i;
    };
    auto tick = [&] { tw_advance(w, 1); };
    mt_result res = run_contended(seconds, setup, work, tick);
    tw_destroy(w);
    return res;
}

// skynet has no cancel: a skynet service cancels by forgetting the session,
// and ignores the response when it comes. Here each ring slot carries a
// session generation; cancel bumps it, a node whose generation is stale is
// dropped by the dispatch function. No lock is taken for a cancel.
std::vector<std::unique_ptr<std::atomic<uint32_t>[]>> sk_sessions;

void sk_mt_fire(void *arg)
{
    uint64_t a = (uint64_t)(uintptr_t)arg;
    uint32_t gen = (uint32_t)a, slot = (uint32_t)((a >> 32) & 0x0fffffff);
    int w = (int)(a >> 60);
    if (sk_sessions[w][slot].load(std::memory_order_relaxed) == gen)
        mt_fire(nullptr);
}

mt_result contended_skynet(size_t n, double seconds)
{
    sk_timer *T = sk_create(sk_mt_fire);
    size_t ring = std::max<size_t>(1, n / WORKERS);
    sk_sessions.clear();
    for (int w = 0; w < WORKERS; w++) {
        sk_sessions.emplace_back(new std::atomic<uint32_t>[ring]);
        for (size_t i = 0; i < ring; i++)
            sk_sessions[w][i].store(0);
    }
    auto encode = [](uint64_t w, uint64_t slot, uint32_t gen) {
        return (void *)(uintptr_t)((w << 60) | (slot << 32) | gen);
    };
    mt_fired = 0;
    auto setup = [&] {
        splitmix r(SEED);
        for (int w = 0; w < WORKERS; w++)
            for (size_t i = 0; i < ring; i++)
                sk_add(T, 1 + r.below(MAX_DELAY), encode((uint64_t)w, i, 0));
    };
    auto work = [&](int me, std::atomic<int> &stop) -> uint64_t {
        splitmix r(SEED + (uint64_t)me + 1);
        std::atomic<uint32_t> *sess = sk_sessions[me].get();
        uint64_t i = 0, sink = 0;
        for (size_t j = 0; !stop.load(std::memory_order_relaxed); i++) {
            uint32_t gen = sess[j].load(std::memory_order_relaxed) + 1;
            sess[j].store(gen, std::memory_order_relaxed); // cancel
            sink += (uintptr_t)sk_add(T, 1 + r.below(MAX_DELAY), encode((uint64_t)me, j, gen));
            if (++j == ring)
                j = 0;
        }
        sink_add(sink);
        return i;
    };
    auto tick = [&] { sk_advance(T, 1); };
    mt_result res = run_contended(seconds, setup, work, tick);
    sk_destroy(T);
    return res;
}

// ---- the tables ----------------------------------------------------------------------

const std::vector<column> table_cols = {
    {"add", "add"},
    {"cancel", "cancel"},
    {"expire", "expire"},
    {"next_expiry", "next-exp"},
    {"reschedule", "resched"},
    {"heartbeat", "heartbeat"},
    {"bytes_per_timer", "B/timer"},
};

const std::vector<column> far_cols = {
    {"far_next_expiry", "next-exp"},
    {"far_loop", "loop iter"},
    {"churn_next_expiry", "churn n-e"},
    {"churn_step", "churn step"},
    {"bytes_per_timer_resched", "B/t resch"},
};

// Clock-driven add and reschedule beside the tick-driven rows of the same
// run: the ratio, and the difference, which is what one clock read costs.
void print_clock_table(const options &opt, const std::vector<std::string> &structs)
{
    struct row {
        const char *who, *drive, *suffix;
    };
    const row rows[] = {{"twheel", "ticks", ""},
                        {"twheel", "clock", "_clock"},
                        {"twheel", "clock coarse", "_clock_coarse"},
                        {"twheel-none", "ticks", ""},
                        {"twheel-none", "clock", "_clock"}};
    if (std::none_of(structs.begin(), structs.end(), is_twheel))
        return;
    std::printf("\nclock-driven add and reschedule: the add and resched workloads on a "
                "TW_DRIVE_CLOCK wheel, whose every add and reschedule reads the clock "
                "(CLOCK_MONOTONIC; coarse: CLOCK_MONOTONIC_COARSE, add only) before "
                "taking the lock; resched up to N = %s; ticks: the rows above "
                "(TW_DRIVE_TICKS, no read). ns per operation, median; x ticks: clock / "
                "ticks in this run; +ns: the difference.\n",
                fmt_n(CLOCK_RESCHEDULE_MAX_N).c_str());
    for (size_t n : opt.ns) {
        std::printf("\nN = %-18s%-16s%9s%9s%9s%9s%9s%9s\n", fmt_n(n).c_str(), "drive", "add",
                    "x ticks", "+ns", "resched", "x ticks", "+ns");
        for (auto &r : rows) {
            if (std::find(structs.begin(), structs.end(), r.who) == structs.end())
                continue;
            std::printf("%-22s%-16s", r.who, r.drive);
            for (const char *base : {"add", "reschedule"}) {
                std::string w = std::string(base) + r.suffix;
                double v, t;
                std::string cell = "-", ratio, diff;
                if (median_of(r.who, n, w, &v)) {
                    cell = fmt_v(v);
                    if (*r.suffix && median_of(r.who, n, base, &t) && t > 0) {
                        char b[32];
                        std::snprintf(b, sizeof b, "%.3fx", v / t);
                        ratio = b;
                        std::snprintf(b, sizeof b, "%+.2f", v - t);
                        diff = b;
                    }
                }
                std::printf("%9s%9s%9s", cell.c_str(), ratio.c_str(), diff.c_str());
            }
            std::printf("\n");
        }
    }
}

void print_tables(const options &opt, const std::vector<std::string> &structs)
{
    if (opt.single) {
        std::printf("\nns per operation (expire: per timer fired), median of the "
                    "repetitions; B/timer: bytes held from the allocator (glibc's "
                    "in-use bytes, the same measure for every structure) per live "
                    "timer after adding N.\n");
        print_table(opt, structs, table_cols);
        std::printf("\nfar-away timers: N timers due in [%u, %u) ticks. next-exp: one "
                    "call; loop iter: advance(1) + next_expiry(), nothing due; churn "
                    "step: the earliest timer is rescheduled behind all others, then "
                    "next_expiry(); churn n-e: one next_expiry() call on the wheel those "
                    "steps left; B/t resch: bytes per timer after every timer was "
                    "rescheduled once more (N reschedules). ns per operation, median.\n",
                    FAR_MIN, FAR_MIN + FAR_SPAN);
        print_table(opt, structs, far_cols);
        print_clock_table(opt, structs);
    }

    if (opt.idle) {
        std::printf("\nidle catch-up: one advance over 3,600,000 ticks (1 h of 1 ms "
                    "ticks), microseconds; far: one timer due at 1 h + 30 s\n");
        std::printf("%-22s%14s%14s\n", "structure", "empty (us)", "far (us)");
        for (auto &s : structs) {
            double a, b;
            bool ha = median_of(s, 0, "idle_empty_us", &a), hb = median_of(s, 0, "idle_far_us", &b);
            if (!ha && !hb)
                continue;
            std::printf("%-22s%14s%14s\n", s.c_str(), ha ? fmt_v(a).c_str() : "-",
                        hb ? fmt_v(b).c_str() : "-");
        }
        for (auto &b : baselines()) {
            std::string label = "twheel / " + b;
            std::string r1 = fmt_ratio("twheel", b, 0, "idle_empty_us");
            std::string r2 = fmt_ratio("twheel", b, 0, "idle_far_us");
            if (r1 != "-" || r2 != "-")
                std::printf("%-22s%14s%14s\n", label.c_str(), r1.c_str(), r2.c_str());
        }
    }

    if (opt.contended) {
        static const char *const mts[] = {"twheel", "twheel-spin", "twheel-mutex", "skynet"};
        for (int hogs : opt.hogs) {
            const std::string w = contended_workload(hogs);
            const std::string ticks = contended_workload(hogs, "_ticks");
            std::printf("\ncontended, %s: %d threads cancel+add (ring of N/%d timers "
                        "each) while one thread advances a tick every ~20 us; ns per "
                        "operation (wall time / all operations), median [worst "
                        "repetition]; ticks/s: the driver's ticks per second, median\n",
                        hogs ? (std::to_string(hogs) + " busy processes beside it").c_str()
                             : "quiet",
                        WORKERS, WORKERS);
            std::printf("%-22s", "structure");
            for (size_t n : opt.ns)
                std::printf("%20s%10s", ("N=" + fmt_n(n)).c_str(), "ticks/s");
            std::printf("\n");
            for (const char *s : mts) {
                std::printf("%-22s", s);
                for (size_t n : opt.ns) {
                    double v, lo, hi, t;
                    std::string cell = "-", tick = "-";
                    if (median_of(s, n, w, &v, &lo, &hi))
                        cell = fmt_v(v) + " [" + fmt_v(hi) + "]";
                    if (median_of(s, n, ticks, &t))
                        tick = std::to_string((long long)t);
                    std::printf("%20s%10s", cell.c_str(), tick.c_str());
                }
                std::printf("\n");
            }
            for (const char *b : {"twheel-mutex", "skynet"}) {
                std::string label = std::string("twheel / ") + b;
                std::printf("%-22s", label.c_str());
                for (size_t n : opt.ns)
                    std::printf("%20s%10s", fmt_ratio("twheel", b, n, w.c_str()).c_str(), "");
                std::printf("\n");
            }
            std::printf("%-22s", "twheel worst / median");
            for (size_t n : opt.ns) {
                double v, lo, hi;
                char buf[32] = "-";
                if (median_of("twheel", n, w, &v, &lo, &hi) && v > 0)
                    std::snprintf(buf, sizeof buf, "%.2fx", hi / v);
                std::printf("%20s%10s", buf, "");
            }
            std::printf("\n");
        }
    }
}

std::string default_csv()
{
    char buf[4096];
    ssize_t len = readlink("/proc/self/exe", buf, sizeof buf - 1);
    if (len <= 0)
        return "twheel_bench.csv";
    buf[len] = 0;
    std::string p(buf);
    size_t slash = p.rfind('/');
    return (slash == std::string::npos ? std::string(".") : p.substr(0, slash)) + "/results.csv";
}

void usage(FILE *f)
{
    std::fprintf(f,
        "usage: twheel_bench [--quick] [--csv PATH] [--n N,N,...] [--reps K]\n"
        "                    [--only NAME,...] [--no-contended] [--no-idle]\n"
        "                    [--contended-only] [--hog K,K,...] [--count STAGE]\n"
        "  --quick          N = 10k and 1M, fewer repetitions (< 1 min on 2 cores)\n"
        "  --csv PATH       CSV output (default: results.csv beside the program)\n"
        "  --n LIST         timer counts, e.g. 10000,1000000 (default 10k,1M,10M)\n"
        "  --reps K         repetitions per figure (default 7 / 5 / 1 by N)\n");
    const std::string indent(19, ' ');
    std::string line = "  --only LIST      structures to run (prefixes):";
    std::vector<std::string> names = structure_names();
    for (size_t i = 0; i < names.size(); i++) {
        std::string word = names[i] + (i + 1 < names.size() ? "," : "");
        if (line.size() + 1 + word.size() > 72) {
            std::fprintf(f, "%s\n", line.c_str());
            line = indent + word;
        } else {
            line += " " + word;
        }
    }
    std::fprintf(f, "%s\n", line.c_str());
    std::fprintf(f,
        "  --hog LIST       busy processes beside the contended runs, one run\n"
        "                   per entry (default 0,2,4; 0 = quiet)\n"
        "  --count STAGE    run the workloads untimed up to STAGE and exit (one\n"
        "                   --n, one --only); for bench/cachegrind.sh\n");
}

std::vector<std::string> split(const char *s)
{
    std::vector<std::string> out;
    std::string cur;
    for (const char *p = s;; p++) {
        if (*p == ',' || !*p) {
            if (!cur.empty())
                out.push_back(cur);
            cur.clear();
            if (!*p)
                break;
        } else {
            cur += *p;
        }
    }
    return out;
}

size_t parse_count(const std::string &s)
{
    char *end = nullptr;
    double v = std::strtod(s.c_str(), &end);
    if (end && (*end == 'k' || *end == 'K'))
        v *= 1e3;
    else if (end && (*end == 'm' || *end == 'M'))
        v *= 1e6;
    if (!(v >= 2 && v <= 1e8))
        die("bad timer count '%s' (2 .. 100M)", s.c_str());
    return (size_t)v;
}

} // namespace

int main(int argc, char **argv)
{
    options opt;
    for (int i = 1; i < argc; i++) {
        std::string a = argv[i];
        auto value = [&]() -> const char * {
            if (i + 1 >= argc)
                die("%s needs a value", a.c_str());
            return argv[++i];
        };
        if (a == "--quick")
            opt.quick = true;
        else if (a == "--csv")
            opt.csv = value();
        else if (a == "--n")
            for (auto &x : split(value()))
                opt.ns.push_back(parse_count(x));
        else if (a == "--reps")
            opt.reps_override = std::atoi(value());
        else if (a == "--only")
            opt.only = split(value());
        else if (a == "--no-contended")
            opt.contended = false;
        else if (a == "--no-idle")
            opt.idle = false;
        else if (a == "--count") {
            opt.count = value();
            if (std::find_if(std::begin(count_stages), std::end(count_stages),
                             [&](const char *x) { return opt.count == x; }) ==
                std::end(count_stages))
                die("--count: unknown stage '%s'", opt.count.c_str());
        }
        else if (a == "--contended-only")
            opt.single = opt.idle = false;
        else if (a == "--hog") {
            opt.hogs.clear();
            for (auto &x : split(value())) {
                char *end = nullptr;
                long k = std::strtol(x.c_str(), &end, 10);
                if (!end || *end || k < 0 || k > 64)
                    die("bad hog count '%s' (0 .. 64)", x.c_str());
                opt.hogs.push_back((int)k);
            }
            if (opt.hogs.empty())
                die("--hog needs at least one count");
        }
        else if (a == "-h" || a == "--help") {
            usage(stdout);
            return 0;
        } else {
            usage(stderr);
            return 2;
        }
    }
    if (opt.ns.empty())
        opt.ns = opt.quick ? std::vector<size_t>{10000, 1000000}
                           : std::vector<size_t>{10000, 1000000, 10000000};
    if (opt.csv.empty())
        opt.csv = default_csv();
    opt.hb_cap = opt.quick ? 500000 : 4000000;
    opt.contended_seconds = opt.quick ? 0.25 : 0.5;
    progress.on = isatty(2);
    setup_malloc();
    progress.start = now_ns();

    structures all = make_structures();
    std::vector<std::string> structs;
    for_each_structure(all, [&](auto &s) {
        if (opt.wants(s.name))
            structs.push_back(s.name);
    });
    if (structs.empty())
        die("--only matched no structure");
    // every structure this run wants
    auto for_each = [&](auto &&f) {
        for_each_structure(all, [&](auto &s) {
            if (opt.wants(s.name))
                f(s);
        });
    };

    if (!opt.count.empty()) {
        if (opt.ns.size() != 1 || opt.only.size() != 1)
            die("--count needs one --n and one --only structure");
        for (size_t n : opt.ns) {
            data d = make_data(n);
            // exact names: twheel and twheel-none share their functions
            for_each([&](auto &s) {
                if (opt.only.empty() ||
                    std::find(opt.only.begin(), opt.only.end(), s.name) != opt.only.end())
                    count_run(s, d, opt.count);
            });
        }
        die("--count: no structure named '%s'", opt.only[0].c_str());
    }

    progress.total = 0;
    for (size_t n : opt.ns)
        progress.total += (opt.single ? opt.reps(n) * (int)structs.size() : 0) +
                          (opt.contended ? (int)opt.hogs.size() : 0);
    progress.total += opt.idle ? (int)structs.size() : 0;

    print_header(opt);
    std::fflush(stdout);

    // Warm-up: every workload once on a small input, results thrown away
    // (also checks every structure against the others before any timing).
    if (opt.single) {
        data d = make_data(4096);
        for_each([&](auto &s) {
            progress.step("warm-up", s.name, d.n, 0, 1);
            phase_a(s, d, false, opt);
            settle_malloc();
            phase_b(s, d, false, opt);
            settle_malloc();
            phase_clock(s, d, false);
            phase_far(s, d.n, false);
            settle_malloc();
        });
    }

    for (size_t n : opt.ns) {
        data d = make_data(n);
        int reps = opt.reps(n);
        // peak heap of any run: ~100 bytes per timer (tree nodes, handles,
        // garbage skynet nodes) plus the heartbeat's garbage; with margin
        progress.step("prefault", "", n, 0, reps);
        prefault(n * 128 + (size_t(256) << 20));
        // Repetition-major: each rep runs every structure once, so slow drift
        // of the machine spreads over all structures alike.
        for (int rep = 0; rep < reps && opt.single; rep++)
            for_each([&](auto &s) {
                progress.step("add/expire/next-expiry", s.name, n, rep, reps);
                phase_a(s, d, true, opt);
                settle_malloc();
                progress.step("cancel/reschedule/heartbeat", s.name, n, rep, reps);
                phase_b(s, d, true, opt);
                settle_malloc();
                // next to the tick-driven add and reschedule it is read against
                progress.step("add/reschedule, clock-driven", s.name, n, rep, reps);
                phase_clock(s, d, true);
                progress.step("far-away timers, churn", s.name, n, rep, reps);
                phase_far(s, n, true);
                settle_malloc();
                progress.done++;
            });
        // Contended: per hog count, the hogs run for the whole block and the
        // repetitions are interleaved across structures.
        for (int hogs : opt.contended ? opt.hogs : std::vector<int>{}) {
            const std::string w = contended_workload(hogs);
            const std::string ticks = contended_workload(hogs, "_ticks");
            const double secs = opt.contended_seconds;
            const int mt_reps = std::max(reps, opt.quick ? 3 : 5);
            hog_group load(hogs);
            // Threads other than main allocate from glibc's per-thread
            // arenas, which settle_malloc() does not reach: malloc_trim
            // consolidates them all, so no run inherits another's free lists
            // (skynet leaves millions of freed nodes behind; a wheel whose
            // next allocation consolidated them stalled every thread for
            // milliseconds while holding its lock).
            auto one = [&](const char *name, mt_result r) {
                record(name, n, w, r.ns_per_op);
                record(name, n, ticks, (double)r.ticks / secs, "ticks/s");
                malloc_trim(0);
                settle_malloc();
            };
            for (int rep = 0; rep < mt_reps; rep++) {
                progress.step(w.c_str(), "twheel and skynet", n, rep, mt_reps);
                if (opt.wants("twheel")) {
                    one("twheel", contended_twheel(default_lock(), n, secs));
                    one("twheel-spin", contended_twheel(TW_LOCK_SPIN, n, secs));
                    one("twheel-mutex", contended_twheel(TW_LOCK_MUTEX, n, secs));
                }
                if (opt.wants("skynet"))
                    one("skynet", contended_skynet(n, secs));
            }
            progress.done++;
        }
    }

    if (opt.idle) {
        const int reps = opt.quick ? 3 : 7;
        for_each([&](auto &s) {
            progress.step("idle catch-up", s.name, 0, 0, reps);
            idle(s, false, false);
            for (int rep = 0; rep < reps; rep++) {
                idle(s, false, true);
                idle(s, true, true);
            }
            progress.done++;
        });
    }
    progress.finish();

    print_tables(opt, structs);
    if (opt.single)
        print_targets(opt);
    write_csv(opt.csv);
    std::printf("checksum %016" PRIx64 " (ignore; keeps the work observable)\n",
                (uint64_t)g_sink ^ g_mt_sink.load());
    return 0;
}
