// Idle catch-up: one advance over an hour of 1 ms ticks with nothing due, and
// with one timer due after it (a wheel jumps, cascading at the boundaries; a
// structure that loops per tick pays for every one).
#ifndef BENCH_WORKLOAD_IDLE_HPP
#define BENCH_WORKLOAD_IDLE_HPP

#include <cinttypes>
#include <cstdio>
#include <vector>

#include "workload.hpp"

namespace bench {

constexpr uint64_t IDLE_TICKS = 3600000;         // one hour of 1 ms ticks
constexpr uint64_t FAR_DELAY = 3600000 + 30000;  // one hour and 30 s

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

struct idle_catch_up {
    static constexpr schedule when = schedule::once;
    static bool enabled(const options &opt) { return opt.idle; }

    template <class S> static void run(S &s, const options &opt)
    {
        const int reps = opt.quick ? 3 : 7;
        progress.step("idle catch-up", s.name, 0, 0, reps);
        idle(s, false, false);
        for (int rep = 0; rep < reps; rep++) {
            idle(s, false, true);
            idle(s, true, true);
        }
    }

    static void report(const options &, const std::vector<std::string> &structs)
    {
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
};

} // namespace bench

#endif
