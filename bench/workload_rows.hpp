// The single-threaded rows: add, expire tick by tick, next-expiry at
// checkpoints of that drive, bytes per timer; then cancel half, reschedule
// the rest, heartbeat, drain. See bench/README.md for what each measures.
#ifndef BENCH_WORKLOAD_ROWS_HPP
#define BENCH_WORKLOAD_ROWS_HPP

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <vector>

#include "workload.hpp"

namespace bench {

// ---- add, bytes, expire tick by tick, next-expiry checkpoints ----------------------

constexpr uint64_t CHECKPOINT_EVERY = 1000; // ticks

template <class S> void phase_a(S &s, const data &d, bool keep)
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

// ---- cancel half, reschedule the rest, heartbeat, drain -----------------------------

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
// adds a new one, see fire()). The counts (workload_counts.hpp) replay it.
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

struct single_rows {
    static constexpr schedule when = schedule::each_repetition;
    static bool enabled(const options &opt) { return opt.single; }

    template <class S> static void run(S &s, const pass &p, const options &opt)
    {
        progress.step("add/expire/next-expiry", s.name, p.d.n, p.rep, p.reps);
        phase_a(s, p.d, p.keep);
        settle_malloc();
        progress.step("cancel/reschedule/heartbeat", s.name, p.d.n, p.rep, p.reps);
        phase_b(s, p.d, p.keep, opt);
        settle_malloc();
    }

    static void report(const options &opt, const std::vector<std::string> &structs)
    {
        std::printf("\nns per operation (expire: per timer fired), median of the "
                    "repetitions; B/timer: bytes held from the allocator (glibc's "
                    "in-use bytes, the same measure for every structure) per live "
                    "timer after adding N.\n");
        print_table(opt, structs,
                    {
                        {"add", "add"},
                        {"cancel", "cancel"},
                        {"expire", "expire"},
                        {"next_expiry", "next-exp"},
                        {"reschedule", "resched"},
                        {"heartbeat", "heartbeat"},
                        {"bytes_per_timer", "B/timer"},
                    });
    }
};

} // namespace bench

#endif
