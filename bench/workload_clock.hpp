// Clock-driven add and reschedule (twheel only): what the clock read costs.
//
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
#ifndef BENCH_WORKLOAD_CLOCK_HPP
#define BENCH_WORKLOAD_CLOCK_HPP

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <type_traits>
#include <vector>

#include "workload.hpp"

namespace bench {

constexpr size_t CLOCK_RESCHEDULE_MAX_N = 1000000;

inline void clock_run(const twheel_s &base, const data &d, bool keep, int clock,
                      const char *suffix, bool resched)
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

struct clock_driven {
    static constexpr schedule when = schedule::each_repetition;
    static bool enabled(const options &opt) { return opt.single; }

    template <class S> static void run(S &s, const pass &p, const options &)
    {
        if constexpr (std::is_same_v<S, twheel_s>) {
            progress.step("add/reschedule, clock-driven", s.name, p.d.n, p.rep, p.reps);
            clock_run(s, p.d, p.keep, TW_CLOCK_MONOTONIC, "_clock",
                      p.d.n <= CLOCK_RESCHEDULE_MAX_N);
            settle_malloc();
            if (s.lock != TW_LOCK_NONE) {
                clock_run(s, p.d, p.keep, TW_CLOCK_MONOTONIC_COARSE, "_clock_coarse", false);
                settle_malloc();
            }
        }
    }

    // Clock-driven add and reschedule beside the tick-driven rows of the same
    // run: the ratio, and the difference, which is what one clock read costs.
    static void report(const options &opt, const std::vector<std::string> &structs)
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
            std::printf("\nN = %-18s%-16s%9s%9s%9s%9s%9s%9s\n", fmt_n(n).c_str(), "drive",
                        "add", "x ticks", "+ns", "resched", "x ticks", "+ns");
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
};

} // namespace bench

#endif
