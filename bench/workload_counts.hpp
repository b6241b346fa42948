// Counts: the workloads once more, untimed, for cachegrind.
//
// `--count STAGE` runs the workloads in a fixed order, untimed, and exits
// right after STAGE. cachegrind (valgrind 3.19 has no way to collect a part
// of a run) counts the whole process, so bench/cachegrind.sh runs each prefix
// and takes differences: the events of one stage, divided by its operations.
// `--count tick:K` does the same for one tick of the tick latency drive.
// The idle timeout's stages (idle_setup, idle_timeout) run on their own: the
// setup, then a fixed number of steps (workload_idle_timeout.hpp); running
// every stage above before them would only make their two runs longer.
// Instruction counts and simulated cache misses do not move with the
// machine's noise.
#ifndef BENCH_WORKLOAD_COUNTS_HPP
#define BENCH_WORKLOAD_COUNTS_HPP

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <iterator>
#include <type_traits>
#include <string>
#include <vector>

#include "workload.hpp"
#include "workload_far.hpp"
#include "workload_idle_timeout.hpp"
#include "workload_rows.hpp"
#include "workload_tick.hpp"

namespace bench {

inline const char *const count_stages[] = {"start", "add", "next_expiry", "cancel",
                                           "reschedule", "expire", "far_setup",
                                           "far_next_expiry", "far_churn", "churn_next_expiry",
                                           "hb_setup", "heartbeat", "clock_setup", "add_clock",
                                           "idle_setup", "idle_timeout"};
constexpr int COUNTED_QUERIES = 10000;
// far-away next-expiry calls: enough that a run's layout noise (a few
// hundred misses) vanishes per call; a structure whose call scans (skynet's
// walks a slot) gets fewer (its counts are in the millions per call anyway)
constexpr int COUNTED_FAR_QUERIES = 10000, COUNTED_FAR_QUERIES_SCANNING = 100;
constexpr size_t COUNTED_HEARTBEATS = 1000000;
constexpr size_t COUNTED_CHURN = 10000;

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
    splitmix r = far_prng(d.n);
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

    // heartbeat, as in the rows: N/2 connections at random stages
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
    if constexpr (!std::is_same_v<S, twheel_s>) {
        die("--count %s: twheel structures only", stop.c_str());
    } else {
        s.drive = TW_DRIVE_CLOCK;
        s.create();
        ops = 0;
        stage_done("clock_setup");
        for (size_t i = 0; i < d.n; i++)
            h[i] = s.add(d.delay[i], arg_of(i));
        ops = d.n;
        stage_done("add_clock");
        s.destroy();
    }
}

struct counts {
    static constexpr schedule when = schedule::alone;
    static bool enabled(const options &opt) { return !opt.count.empty(); }

    [[noreturn]] static void run(structures &all, const options &opt)
    {
        std::string tick_input; // tick:K, tick_uniform:K: the tick latency drive (workload_tick.hpp)
        uint64_t tick = 0;
        const bool ticks = parse_tick_stage(opt.count, &tick_input, &tick);
        if (!ticks && std::find_if(std::begin(count_stages), std::end(count_stages),
                                   [&](const char *x) { return opt.count == x; }) ==
                          std::end(count_stages))
            die("--count: unknown stage '%s'", opt.count.c_str());
        if (opt.ns.size() != 1 || opt.only.size() != 1)
            die("--count needs one --n and one --only structure");
        // exact names: twheel and twheel-none share their functions
        for_each_structure(all, [&](auto &s) {
            if (opt.only[0] != s.name)
                return;
            if (ticks)
                tick_count(s, tick_input, opt.ns[0], tick);
            if (opt.count == "idle_setup" || opt.count == "idle_timeout")
                idle_timeout_count(s, opt.ns[0], opt.count);
            count_run(s, make_data(opt.ns[0]), opt.count);
        });
        die("--count: no structure named '%s'", opt.only[0].c_str());
    }

    static void report(const options &, const std::vector<std::string> &) {}
};

} // namespace bench

#endif
