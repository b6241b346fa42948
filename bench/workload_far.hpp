// Far-away timers: next-expiry, an event loop's iteration and earliest-timer
// churn while every timer sits in an upper level.
//
// A server whose only timers are 30-60 s idle kicks: N timers with delays
// uniform in [FAR_MIN, FAR_MIN + FAR_SPAN), so none is due in the first
// 30 000 ticks. Figures:
//   far_next_expiry  one next_expiry call (batches, as in the rows' checkpoints);
//   far_loop         an epoll-style iteration: advance(1) + next_expiry();
//   churn_step       the earliest timer moves to the back (reschedule),
//                    then next_expiry (requests answered oldest first);
//   churn_next_expiry  one next_expiry call on the wheel those steps left
//                    (its earliest slot lost its earliest timers);
//   bytes_per_timer_resched  bytes held per timer after every timer was
//                    rescheduled once more (N reschedules).
// A structure whose next_expiry is a lower bound (S::exact_next_expiry is
// false) must answer at most the exact value and never 0; the others exactly.
#ifndef BENCH_WORKLOAD_FAR_HPP
#define BENCH_WORKLOAD_FAR_HPP

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <vector>

#include "workload.hpp"

namespace bench {

constexpr uint32_t FAR_MIN = 30000, FAR_SPAN = 30000;
constexpr uint64_t FAR_LOOP_TICKS = FAR_MIN - 1;
constexpr size_t CHURN_STEPS = 40000, CHURN_BLOCK = 250; // steps, checked every block

// N far-away delays, and the timers' indices ordered by due tick (then
// index): order[k] is the earliest timer once the k before it have gone.
// The counts (workload_counts.hpp) take the same input.
struct far_input {
    std::vector<uint32_t> delay, order;
};

inline far_input make_far(splitmix &r, size_t n)
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

inline splitmix far_prng(size_t n) { return splitmix(SEED ^ 0xfa7 ^ n); }

template <class S> void check_next(const S &s, uint64_t got, uint64_t want, const char *where)
{
    bool ok = exact_next(s) ? got == want : got <= want && got > 0;
    if (!ok)
        die("%s: %s: next_expiry %" PRIu64 ", exact %" PRIu64, s.name, where, got, want);
}

// ns per next_expiry call: the fastest of three batches of QUERIES (a
// scanning structure's batch stops after an eighth of `budget_ns`).
template <class S> double query_batches(S &s, uint64_t budget_ns)
{
    double best = 1e300;
    for (int batch = 0; batch < 3; batch++) {
        uint64_t a = now_ns(), acc = 0, b = a;
        int q = 0;
        while (q < QUERIES && b - a < budget_ns / 8) {
            for (int i = 0; i < 16; i++, q++)
                acc += s.next_expiry();
            b = now_ns();
        }
        best = std::min(best, (double)(b - a) / q);
        g_sink = g_sink + acc;
    }
    return best;
}

// budget_ns: the wall time after which a scanning structure stops the loop
// and the churn (options::scan_budget_ns).
template <class S> void phase_far(S &s, size_t n, bool keep, uint64_t budget_ns)
{
    splitmix r = far_prng(n);
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
    double far_next = query_batches(s, budget_ns);

    // the event loop's iteration: nothing fires in these ticks
    uint64_t t0 = now_ns(), acc = 0, ticks = 0;
    while (ticks < FAR_LOOP_TICKS) {
        g_tick = ++ticks;
        s.advance(1);
        acc += s.next_expiry();
        if ((ticks & 63) == 0 && now_ns() - t0 > budget_ns)
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
        if (now_ns() - churn_start > budget_ns)
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
    double churn_next = query_batches(s, budget_ns);

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

struct far_timers {
    static constexpr schedule when = schedule::each_repetition;
    static bool enabled(const options &opt) { return opt.single; }

    template <class S> static void run(S &s, const pass &p, const options &opt)
    {
        progress.step("far-away timers, churn", s.name, p.d.n, p.rep, p.reps);
        phase_far(s, p.d.n, p.keep, opt.scan_budget_ns);
        settle_malloc();
    }

    static void report(const options &opt, const std::vector<std::string> &structs)
    {
        std::printf("\nfar-away timers: N timers due in [%u, %u) ticks. next-exp: one "
                    "call; loop iter: advance(1) + next_expiry(), nothing due; churn "
                    "step: the earliest timer is rescheduled behind all others, then "
                    "next_expiry(); churn n-e: one next_expiry() call on the wheel those "
                    "steps left; B/t resch: bytes per timer after every timer was "
                    "rescheduled once more (N reschedules). ns per operation, median.\n",
                    FAR_MIN, FAR_MIN + FAR_SPAN);
        print_table(opt, structs,
                    {
                        {"far_next_expiry", "next-exp"},
                        {"far_loop", "loop iter"},
                        {"churn_next_expiry", "churn n-e"},
                        {"churn_step", "churn step"},
                        {"bytes_per_timer_resched", "B/t resch"},
                    });
    }
};

} // namespace bench

#endif
