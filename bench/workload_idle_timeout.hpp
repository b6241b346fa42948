// Idle timeout: a game server's session idle kicks, the heartbeat as a
// server lives it (each packet pushes its session's timer to now + 30 000
// while the clock runs).
//
// N sessions, each with one timer, set up untimed at random delays in
// [1, IDLE_TIMEOUT] (every slot up to 30 000 ticks out holds timers from the
// start). Then each step is one packet on a session drawn uniformly at
// random, and the clock advances one tick every N/1000 steps (advance(1),
// firing what is due), so a session hears from its client about every 1000
// ticks. The packet does what the session's state asks:
//   talking  reschedule its timer to now + IDLE_TIMEOUT;
//   silent   nothing: the packet is dropped. A tenth of the sessions are
//            silent (exactly N/10 at the start), so timers keep firing;
//   closed   its timer fired (fire() zeroes the state: the session was
//            kicked): reopen it, adding a new timer at now + IDLE_TIMEOUT,
//            silent again with probability 1/10.
// In the first few thousand ticks talking sessions fire too: those whose
// setup delay runs out before their first packet (about 1000 / 30 000 of
// them).
// Every draw comes from one fixed-seed PRNG, one value per step, whatever
// the step does, so every structure sees the same packets; what differs
// between them could only be the firings, which the cross-check holds equal.
//
// The run lasts IDLE_RUN_TICKS ticks: in a skynet-shaped wheel (twheel,
// skynet) a timer 30 000 ticks out sits in t[1], whose slots of 16 384 ticks
// come due at multiples of 16 384; the run crosses two of them (16 384 and
// 32 768). The figure is the whole run's time over its steps, ticks and
// firings included.
//
// `--count idle_setup` / `idle_timeout` (workload_counts.hpp) run the setup
// and then IDLE_COUNTED_TICKS ticks' steps untimed, for cachegrind: past
// the first 16 384-tick boundary, so the count holds a whole t[1] slot's
// staging, with the re-files of the timers pushed past it.
#ifndef BENCH_WORKLOAD_IDLE_TIMEOUT_HPP
#define BENCH_WORKLOAD_IDLE_TIMEOUT_HPP

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "workload.hpp"

namespace bench {

constexpr uint32_t IDLE_TIMEOUT = 30000;          // ticks of silence before a kick
// ticks between two packets of a session, on average: one tick every
// N / IDLE_PACKET_INTERVAL steps
constexpr size_t IDLE_PACKET_INTERVAL = 1000;
constexpr uint64_t IDLE_RUN_TICKS = 40000;        // the run: past 2 x 16 384
constexpr uint64_t IDLE_COUNTED_TICKS = 17000;    // --count: past 16 384
// Above this N only the structures the targets name run: at 10M a run is
// 400M steps, minutes per structure (tree_map's would be the best part of
// an hour). Up to it every structure runs, so --quick (N up to 100k)
// cross-checks every structure's firings.
constexpr size_t IDLE_EVERY_STRUCTURE_UP_TO = 2000000;
inline const char *const idle_short_list[] = {"twheel", "twheel-none", "heap_binary",
                                              "timeout_wheel"};

// fire() writes 0 into the state of the session whose timer fired.
enum : uint8_t { IDLE_CLOSED = 0, IDLE_TALKING = 1, IDLE_SILENT = 2 };

template <class H> struct session {
    H h;
    uint8_t state;
};

inline size_t idle_steps_per_tick(size_t n)
{
    return std::max<size_t>(1, n / IDLE_PACKET_INTERVAL);
}
inline splitmix idle_prng(size_t n) { return splitmix(SEED ^ 0x1d1e ^ n); }
// uniform in [0, n) from 32 random bits, by multiply-shift
inline uint32_t scale32(uint64_t bits32, uint64_t n) { return (uint32_t)((bits32 * n) >> 32); }

// Adds the N timers and sets the sessions' states; exactly N/10 silent ones,
// by selection sampling (each session is picked with probability
// silent still to pick / sessions still to see).
template <class S>
void idle_setup(S &s, std::vector<session<typename S::handle>> &c, splitmix &r)
{
    const size_t n = c.size();
    size_t silent_left = n / 10;
    for (size_t i = 0; i < n; i++) {
        uint64_t x = r.next();
        bool silent = scale32(x & 0xffffffffu, n - i) < silent_left;
        silent_left -= silent;
        c[i].h = s.add(1 + scale32(x >> 32, IDLE_TIMEOUT), arg_of(i));
        c[i].state = silent ? IDLE_SILENT : IDLE_TALKING;
    }
    g_state = &c[0].state;
    g_state_stride = sizeof c[0];
}

// `steps` packets (see the top of the file). A failed reschedule (a talking
// session whose timer is not pending) stops the program. With `worst_ns`,
// each tick's advance is timed and the longest kept there.
template <class S>
void idle_steps(S &s, std::vector<session<typename S::handle>> &c, size_t steps, splitmix &r,
                uint64_t *worst_ns = nullptr)
{
    const size_t n = c.size(), per_tick = idle_steps_per_tick(n);
    size_t tick_ctr = 0, reschedules = 0, rescheduled = 0;
    for (size_t k = 0; k < steps; k++) {
        uint64_t x = r.next(); // low half: the session; high half: silence at reopen
        uint32_t i = scale32(x & 0xffffffffu, n);
        session<typename S::handle> &sc = c[i];
        if (sc.state == IDLE_TALKING) {
            rescheduled += s.reschedule(sc.h, IDLE_TIMEOUT, arg_of(i)) == 1;
            reschedules++;
        } else if (sc.state == IDLE_CLOSED) {
            sc.h = s.add(IDLE_TIMEOUT, arg_of(i));
            sc.state = scale32(x >> 32, 10) == 0 ? IDLE_SILENT : IDLE_TALKING;
        }
        if (++tick_ctr == per_tick) {
            tick_ctr = 0;
            g_tick++;
            if (worst_ns) {
                uint64_t t0 = now_ns();
                s.advance(1);
                *worst_ns = std::max(*worst_ns, now_ns() - t0);
            } else {
                s.advance(1);
            }
        }
    }
    if (rescheduled != reschedules)
        die("%s: idle timeout: %zu of %zu reschedules succeeded", s.name, rescheduled,
            reschedules);
}

// One timed run, from create to destroy.
template <class S> void idle_timeout_run(S &s, size_t n)
{
    std::vector<session<typename S::handle>> c(n);
    splitmix r = idle_prng(n);
    s.create();
    g_tick = 0;
    g_fired = 0;
    g_fire_hash = 0;
    idle_setup(s, c, r);
    const size_t steps = IDLE_RUN_TICKS * idle_steps_per_tick(n);
    uint64_t worst = 0, t0 = now_ns();
    idle_steps(s, c, steps, r, &worst);
    uint64_t t1 = now_ns();
    g_state = nullptr;
    if (g_fired == 0)
        die("%s: idle timeout: no timer fired in %zu steps", s.name, steps);
    cross_check(n, "idle timeout (timer, tick) pairs", s.name, outcome{g_fired, g_fire_hash});
    s.destroy();
    record(s.name, n, "idle_timeout", (double)(t1 - t0) / (double)steps, "ns/step");
    record(s.name, n, "idle_timeout_fired", (double)g_fired, "timers");
    record(s.name, n, "idle_timeout_worst_tick", (double)worst / 1e3, "us");
}

// `--count idle_setup` / `idle_timeout`: the setup, then IDLE_COUNTED_TICKS
// ticks' steps, untimed; exits after the stage asked for (see workload_counts.hpp).
// Nothing runs before them, so the two runs differ by the steps alone.
template <class S> [[noreturn]] void idle_timeout_count(S &s, size_t n, const std::string &stop)
{
    std::vector<session<typename S::handle>> c(n);
    splitmix r = idle_prng(n);
    s.create();
    g_tick = 0;
    g_fired = 0;
    idle_setup(s, c, r);
    size_t ops = n;
    if (stop != "idle_setup") {
        ops = IDLE_COUNTED_TICKS * idle_steps_per_tick(n);
        idle_steps(s, c, ops, r);
    }
    std::printf("count %s %s %zu fired %" PRIu64 "\n", s.name, stop.c_str(), ops, g_fired);
    std::fflush(stdout);
    std::_Exit(0);
}

struct idle_timeout {
    static constexpr schedule when = schedule::each_n;
    static bool enabled(const options &opt) { return opt.idle_timeout; }
    static int progress_steps(const options &) { return 1; }

    // A run lasts seconds at 1M (40M steps), so one per structure; at small
    // N, where a run lasts milliseconds, the median of the usual repetitions.
    static int runs(size_t n, const options &opt)
    {
        return opt.reps_override > 0 ? opt.reps_override : n <= 20000 ? opt.reps(n) : 1;
    }

    static bool runs_at(const std::string &name, size_t n, const options &opt)
    {
        if (!opt.wants(name))
            return false;
        if (n <= IDLE_EVERY_STRUCTURE_UP_TO)
            return true;
        return std::find(std::begin(idle_short_list), std::end(idle_short_list), name) !=
               std::end(idle_short_list);
    }

    static void run(size_t n, int, const options &opt)
    {
        structures all = make_structures();
        const int k = runs(n, opt);
        for (int rep = 0; rep < k; rep++) // interleaved: drift hits every structure alike
            for_each_structure(all, [&](auto &s) {
                if (!runs_at(s.name, n, opt))
                    return;
                progress.step("idle timeout", s.name, n, rep, k);
                idle_timeout_run(s, n);
                settle_malloc();
            });
        progress.done++;
    }

    static void report(const options &opt, const std::vector<std::string> &structs)
    {
        static const char *const versus[] = {"heap_binary", "timeout_wheel"};
        std::printf("\nidle timeout: N sessions, each kicked after %u ticks without a packet; "
                    "each step a packet on a random session: its timer rescheduled to now + "
                    "%u, dropped on the silent tenth, a new timer (add) for a kicked one; "
                    "one tick every N/%zu steps, %" PRIu64 " ticks. ns per step (the whole "
                    "run over its steps, ticks and firings included), median of the runs; "
                    "fired: the timers that fired (cross-checked).\n",
                    IDLE_TIMEOUT, IDLE_TIMEOUT, IDLE_PACKET_INTERVAL, IDLE_RUN_TICKS);
        for (size_t n : opt.ns) {
            const int k = runs(n, opt);
            std::printf("\nN = %s: %zu steps, %d run%s", fmt_n(n).c_str(),
                        (size_t)IDLE_RUN_TICKS * idle_steps_per_tick(n), k, k > 1 ? "s" : "");
            if (n > IDLE_EVERY_STRUCTURE_UP_TO)
                std::printf(" (only the structures the targets name)");
            std::printf("\n%-22s%11s", "structure", "ns/step");
            for (const char *b : versus)
                std::printf("%16s", (std::string("/ ") + b).c_str());
            std::printf("%11s\n", "fired");
            for (auto &s : structs) {
                double v, fired;
                if (!median_of(s, n, "idle_timeout", &v) ||
                    !median_of(s, n, "idle_timeout_fired", &fired))
                    continue;
                std::printf("%-22s%11s", s.c_str(), fmt_v(v).c_str());
                for (const char *b : versus)
                    std::printf("%16s", fmt_ratio(s, b, n, "idle_timeout").c_str());
                std::printf("%11.0f\n", fired);
            }
        }
    }
};

} // namespace bench

#endif
