// Tick latency: how long each single advance(1) takes, and the tail of those
// times.
//
// N timers, all added at tick 0, then one advance(1) call per tick until all
// have fired, every call timed on its own. The expire row divides the whole
// drive by the timers fired, which hides the tick at which a wheel re-files
// an upper level's slot (a cascade): at 1M timers that one call moves tens of
// thousands of timers, and an event loop waits for all of it. Two inputs:
//   far      delays uniform in [30000, 60000): the far-away timers of
//            workload_far.hpp (every timer starts in an upper level);
//   uniform  delays uniform in [1, 60000]: the expire row's timers (make_data).
// Each structure drives each input TICK_RUNS times, re-created every time,
// the runs interleaved across structures. Per tick index the fastest run's
// time is kept: a preemption or an interrupt hits a random tick of one run,
// a cascade the same tick of every run, so the minimum keeps the cascade and
// drops the noise. From those minima: p50, p99, p99.9, the worst tick and its
// index, their sum; and the whole drive, the median of the runs' sums.
//
// `--count tick:K` (workload_counts.hpp) runs the far drive untimed up to
// tick K and exits, `tick_uniform:K` the uniform one: cachegrind of K minus
// K - 1 is tick K alone (bench/cachegrind.sh --tick).
#ifndef BENCH_WORKLOAD_TICK_HPP
#define BENCH_WORKLOAD_TICK_HPP

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "workload.hpp"
#include "workload_far.hpp"

namespace bench {

constexpr int TICK_RUNS = 3;
constexpr uint64_t TICK_DRIVE = MAX_DELAY; // ticks: every timer of either input is due by then
// Above this N (at 10M) only the structures below run: all seven take 8.5
// minutes there on a 2-core machine (42 drives of 10M timers; timeout_wheel's
// alone last 13 s each), which the full run cannot afford for one workload.
constexpr size_t TICK_EVERY_STRUCTURE_UP_TO = 2000000;
inline const char *const tick_large_n_structures[] = {"twheel", "twheel-none", "heap_binary",
                                                      "skynet"};

struct tick_input {
    const char *name;  // in the CSV's workload names: tick_NAME_FIGURE
    const char *delays; // for the tables
};
inline const tick_input tick_inputs[] = {
    {"far", "delays uniform in [30000, 60000)"},
    {"uniform", "delays uniform in [1, 60000]"},
};

// The delays of an input, from the harness's fixed-seed PRNG: the same
// timers for every structure, and the same as the far and expire rows'.
inline std::vector<uint32_t> tick_delays(const std::string &input, size_t n)
{
    if (input == "far") {
        splitmix r = far_prng(n);
        return make_far(r, n).delay;
    }
    return make_data(n).delay;
}

inline std::string tick_workload(const tick_input &in, const char *figure)
{
    return std::string("tick_") + in.name + "_" + figure;
}

// Adds the timers at tick 0 and drives ticks 1 .. last, one advance(1)
// each. With `ns`, ns[t - 1] is the time of tick t: between two clock reads,
// so it holds the call, the loop's bookkeeping and one read (a floor of some
// 25 ns). The caller destroys the structure.
template <class S>
void tick_drive(S &s, const std::vector<uint32_t> &delay, uint64_t last, uint64_t *ns)
{
    s.create();
    g_tick = 0;
    g_state = nullptr;
    g_fire_hash = 0;
    g_fired = 0;
    for (size_t i = 0; i < delay.size(); i++)
        s.add(delay[i], arg_of(i));
    if (!ns) { // the counts: no clock read in the counted code
        for (uint64_t t = 1; t <= last; t++) {
            g_tick = t;
            s.advance(1);
        }
        return;
    }
    uint64_t before = now_ns();
    for (uint64_t t = 1; t <= last; t++) {
        g_tick = t;
        s.advance(1);
        uint64_t after = now_ns();
        ns[t - 1] = after - before;
        before = after;
    }
}

// `--count tick:K` / `tick_uniform:K`: the input and K, or false for
// another stage. K = 0 stops after the adds.
inline bool parse_tick_stage(const std::string &stage, std::string *input, uint64_t *last)
{
    std::string number;
    if (stage.compare(0, 5, "tick:") == 0) {
        *input = "far";
        number = stage.substr(5);
    } else if (stage.compare(0, 13, "tick_uniform:") == 0) {
        *input = "uniform";
        number = stage.substr(13);
    } else {
        return false;
    }
    char *end = nullptr;
    unsigned long long k = std::strtoull(number.c_str(), &end, 10);
    if (number.empty() || *end || k > TICK_DRIVE)
        die("--count %s: the tick must be 0 .. %" PRIu64, stage.c_str(), TICK_DRIVE);
    *last = k;
    return true;
}

// The untimed drive up to tick `last`, then exit without teardown (see
// workload_counts.hpp). Its "operations" are the timers fired so far: K
// minus K - 1 is what tick K fired.
template <class S>
[[noreturn]] void tick_count(S &s, const std::string &input, size_t n, uint64_t last)
{
    const std::vector<uint32_t> delay = tick_delays(input, n);
    tick_drive(s, delay, last, nullptr);
    std::printf("count %s tick:%" PRIu64 " %" PRIu64 "\n", s.name, last, g_fired);
    std::fflush(stdout);
    std::_Exit(0);
}

struct tick_latency {
    static constexpr schedule when = schedule::each_n;
    static bool enabled(const options &opt) { return opt.tick; }
    // --quick: the far input only (the one every timer of which cascades)
    static int inputs(const options &opt) { return opt.quick ? 1 : 2; }
    static int progress_steps(const options &opt) { return inputs(opt) * TICK_RUNS; }

    static bool runs_at(const std::string &name, size_t n, const options &opt)
    {
        if (!opt.wants(name))
            return false;
        if (n <= TICK_EVERY_STRUCTURE_UP_TO)
            return true;
        return std::find(std::begin(tick_large_n_structures), std::end(tick_large_n_structures),
                         name) != std::end(tick_large_n_structures);
    }

    static void run(size_t n, int, const options &opt)
    {
        structures all = make_structures();
        std::vector<uint64_t> ns(TICK_DRIVE);
        for (int k = 0; k < inputs(opt); k++) {
            const tick_input &in = tick_inputs[k];
            const std::vector<uint32_t> delay = tick_delays(in.name, n);
            const std::string check = std::string("tick latency, ") + in.name +
                                      " timers, (timer, tick) pairs";
            std::map<std::string, std::vector<uint64_t>> fastest; // per tick, over the runs
            for (int rep = 0; rep < TICK_RUNS; rep++) {
                progress.step((std::string("tick latency, ") + in.name).c_str(), "", n, rep,
                              TICK_RUNS);
                for_each_structure(all, [&](auto &s) {
                    if (!runs_at(s.name, n, opt))
                        return;
                    tick_drive(s, delay, TICK_DRIVE, ns.data());
                    if (s.next_expiry() != NEVER || g_fired != n)
                        die("%s: tick latency, %s timers: %" PRIu64 " of %zu fired by tick %" PRIu64,
                            s.name, in.name, g_fired, n, TICK_DRIVE);
                    cross_check(n, check.c_str(), s.name, outcome{g_fired, g_fire_hash});
                    s.destroy();
                    settle_malloc();
                    uint64_t sum = 0;
                    for (uint64_t x : ns)
                        sum += x;
                    record(s.name, n, tick_workload(in, "drive"), (double)sum / 1e6, "ms");
                    std::vector<uint64_t> &f = fastest[s.name];
                    if (f.empty())
                        f = ns;
                    for (size_t t = 0; t < ns.size(); t++)
                        f[t] = std::min(f[t], ns[t]);
                });
                progress.done++;
            }
            for (auto &[name, f] : fastest)
                record_tail(name, n, in, f);
        }
    }

    // The figures of one structure's per-tick minima. Percentiles by nearest
    // rank: p99.9 of 60 000 ticks is the 60th slowest.
    static void record_tail(const std::string &name, size_t n, const tick_input &in,
                            const std::vector<uint64_t> &f)
    {
        std::vector<uint64_t> sorted = f;
        std::sort(sorted.begin(), sorted.end());
        auto rank = [&](double q) {
            size_t k = (size_t)std::ceil(q * (double)sorted.size());
            return (double)sorted[std::max<size_t>(k, 1) - 1] / 1e3;
        };
        size_t worst = (size_t)(std::max_element(f.begin(), f.end()) - f.begin());
        uint64_t sum = 0;
        for (uint64_t x : f)
            sum += x;
        record(name, n, tick_workload(in, "p50"), rank(0.5), "us");
        record(name, n, tick_workload(in, "p99"), rank(0.99), "us");
        record(name, n, tick_workload(in, "p999"), rank(0.999), "us");
        record(name, n, tick_workload(in, "worst"), (double)f[worst] / 1e3, "us");
        record(name, n, tick_workload(in, "worst_at"), (double)(worst + 1), "tick");
        record(name, n, tick_workload(in, "min_sum"), (double)sum / 1e6, "ms");
    }

    static void report(const options &opt, const std::vector<std::string> &structs)
    {
        static const column cols[] = {
            {"p50", "p50"},      {"p99", "p99"},           {"p999", "p99.9"},
            {"worst", "worst"},  {"worst_at", "at tick"},  {"drive", "drive ms"},
            {"min_sum", "min-sum ms"},
        };
        for (int k = 0; k < inputs(opt); k++) {
            const tick_input &in = tick_inputs[k];
            std::printf("\ntick latency, %s timers: N timers, %s, all added at tick 0, then "
                        "%" PRIu64 " advance(1) calls, each timed; per tick the fastest of %d "
                        "runs (a preemption hits one run, a cascade every run). p50 .. worst: "
                        "microseconds per tick over those minima; at tick: the worst one's "
                        "index; drive ms: the whole drive, median of the runs; min-sum ms: "
                        "the minima's sum.\n",
                        in.name, in.delays, TICK_DRIVE, TICK_RUNS);
            for (size_t n : opt.ns) {
                std::printf("\nN = %s", fmt_n(n).c_str());
                if (n > TICK_EVERY_STRUCTURE_UP_TO) {
                    std::printf(" (only");
                    for (const char *s : tick_large_n_structures)
                        std::printf("%s %s", s == tick_large_n_structures[0] ? "" : ",", s);
                    std::printf(": all seven would add minutes to the run)");
                }
                std::printf("\n%-22s", "structure");
                for (auto &c : cols)
                    std::printf("%11s", c.title);
                std::printf("\n");
                std::vector<std::string> present;
                for (auto &s : structs) {
                    double v;
                    if (!median_of(s, n, tick_workload(in, "worst"), &v))
                        continue;
                    present.push_back(s);
                    std::printf("%-22s", s.c_str());
                    for (auto &c : cols) {
                        bool has = median_of(s, n, tick_workload(in, c.workload), &v);
                        std::printf("%11s", !has ? "-"
                                            : std::string(c.workload) == "worst_at"
                                                ? std::to_string((uint64_t)v).c_str()
                                                : fmt_v(v).c_str());
                    }
                    std::printf("\n");
                }
                for (auto &who : present) {
                    if (!is_twheel(who))
                        continue;
                    for (auto &b : baselines()) {
                        if (std::find(present.begin(), present.end(), b) == present.end())
                            continue;
                        std::string label = who + " / " + b;
                        std::printf("%-22s", label.c_str());
                        for (auto &c : cols) {
                            std::string w = tick_workload(in, c.workload);
                            std::printf("%11s", std::string(c.workload) == "worst_at"
                                                    ? "-"
                                                    : fmt_ratio(who, b, n, w.c_str()).c_str());
                        }
                        std::printf("\n");
                    }
                }
            }
        }
        print_tick_targets(opt);
    }

    // The targets of the staged cascade: the worst tick against the binary
    // heap's and in absolute time, and the whole drive against the heap's.
    static void print_tick_targets(const options &opt)
    {
        struct tick_target {
            size_t n;
            const char *figure;
            const char *versus; // null: absolute, in microseconds
            double limit;
        };
        static const tick_target ts[] = {
            {1000000, "worst", "heap_binary", 2},
            {1000000, "worst", nullptr, 200},
            {10000000, "worst", nullptr, 2000},
            {1000000, "drive", "heap_binary", 0.25},
            {10000000, "drive", "heap_binary", 0.25},
        };
        bool header = false;
        for (int k = 0; k < inputs(opt); k++) {
            const tick_input &in = tick_inputs[k];
            for (auto &t : ts) {
                std::string w = tick_workload(in, t.figure);
                double a, b;
                if (!median_of("twheel", t.n, w, &a))
                    continue;
                if (t.versus && (!median_of(t.versus, t.n, w, &b) || b <= 0))
                    continue;
                if (!header) {
                    std::printf("\ntick latency targets; twheel in its default configuration\n");
                    header = true;
                }
                char text[96];
                std::string what = std::string(t.figure) == "worst" ? "worst tick" : "drive";
                if (t.versus)
                    std::snprintf(text, sizeof text, "%s, %s, %s <= %gx %s", what.c_str(),
                                  in.name, fmt_n(t.n).c_str(), t.limit, t.versus);
                else
                    std::snprintf(text, sizeof text, "%s, %s, %s <= %g us", what.c_str(),
                                  in.name, fmt_n(t.n).c_str(), t.limit);
                if (t.versus)
                    std::printf("  %-44s %8.3fx  %s\n", text, a / b,
                                a / b <= t.limit ? "met" : "MISSED");
                else
                    std::printf("  %-44s %8s   %s\n", text, fmt_v(a).c_str(),
                                a <= t.limit ? "met" : "MISSED");
            }
        }
    }
};

} // namespace bench

#endif
