// The C++ facade against the C API it wraps, on an aged wheel: N timers
// added, half cancelled in random order, the rest fired, after a full pass
// of N timers has scattered the free lists (and the facade's closure pool)
// in firing order. Three rows, default lock:
//   c_api          tw_add_ex with a release hook, user data a 16-byte context
//   facade         wheel::after with a 16-byte closure (a pooled slot)
//   facade_inline  wheel::after with an 8-byte closure (carried in user data)
// The closures do what the C callback does. Every row fires the same timers
// (cross-checked by count and by the contexts' sums). Up to N = 1M: at 10M
// a row takes a minute and says nothing new.
#ifndef BENCH_WORKLOAD_FACADE_HPP
#define BENCH_WORKLOAD_FACADE_HPP

#include <algorithm>
#include <cstdio>
#include <vector>

#include <twheel/timer.hpp>

#include "workload.hpp"

namespace bench {

struct facade_context {
    uint64_t fired;
    uint64_t released;
};

inline void facade_c_fire(tw_wheel *, tw_id, void *user_data)
{
    static_cast<facade_context *>(user_data)->fired++;
}
inline void facade_c_release(void *user_data) { static_cast<facade_context *>(user_data)->released++; }

// The delays of one pass and the cancel order, the same for every row.
struct facade_input {
    std::vector<uint32_t> delay_age, delay;
    std::vector<uint32_t> cancel_order; // indices of the timers cancelled
};

inline facade_input make_facade_input(size_t n)
{
    facade_input in;
    splitmix r(SEED ^ 0xfacade);
    in.delay_age.resize(n);
    in.delay.resize(n);
    for (size_t i = 0; i < n; i++) {
        in.delay_age[i] = 1 + r.below(MAX_DELAY);
        in.delay[i] = 1 + r.below(MAX_DELAY);
    }
    in.cancel_order.resize(n);
    for (size_t i = 0; i < n; i++)
        in.cancel_order[i] = (uint32_t)i;
    for (size_t i = n; i > 1; i--)
        std::swap(in.cancel_order[i - 1], in.cancel_order[r.below((uint32_t)i)]);
    in.cancel_order.resize(n / 2);
    return in;
}

struct facade_times {
    double add, cancel, fire; // ns per operation
    uint64_t fired, sum;      // cross-check
};

inline facade_times facade_c_api(const facade_input &in, std::vector<facade_context> &ctx)
{
    const size_t n = in.delay.size();
    struct tw_config c;
    tw_config_init(&c);
    c.drive = TW_DRIVE_TICKS;
    tw_wheel *w = tw_create(&c);
    if (!w)
        die("tw_create failed");
    for (size_t i = 0; i < n; i++)
        tw_add_ex(w, in.delay_age[i], 0, facade_c_fire, facade_c_release, &ctx[i]);
    tw_advance(w, MAX_DELAY + 1);
    std::vector<tw_id> ids(n);
    facade_times t{};
    uint64_t t0 = now_ns();
    for (size_t i = 0; i < n; i++)
        ids[i] = tw_add_ex(w, in.delay[i], 0, facade_c_fire, facade_c_release, &ctx[i]);
    uint64_t t1 = now_ns();
    for (uint32_t k : in.cancel_order)
        tw_cancel(w, ids[k]);
    uint64_t t2 = now_ns();
    int64_t fired = tw_advance(w, MAX_DELAY + 1);
    uint64_t t3 = now_ns();
    tw_destroy(w);
    t.add = double(t1 - t0) / double(n);
    t.cancel = double(t2 - t1) / double(in.cancel_order.size());
    t.fire = double(t3 - t2) / double(fired);
    t.fired = uint64_t(fired);
    return t;
}

// The closure a facade row schedules: 8 bytes (inline) or 16 (pooled),
// doing what facade_c_fire does.
template <bool Inline> auto facade_closure(facade_context *p)
{
    if constexpr (Inline)
        return [p] { p->fired++; };
    else
        return [p, step = uint64_t(1)] { p->fired += step; };
}

template <bool Inline>
facade_times facade_cpp(const facade_input &in, std::vector<facade_context> &ctx)
{
    const size_t n = in.delay.size();
    twheel::config c;
    c.drive = twheel::drive_kind::ticks;
    twheel::wheel w(c);
    for (size_t i = 0; i < n; i++)
        w.after_detached(std::chrono::milliseconds(in.delay_age[i]), facade_closure<Inline>(&ctx[i]));
    w.advance(MAX_DELAY + 1);
    std::vector<twheel::timer> handles(n);
    facade_times t{};
    uint64_t t0 = now_ns();
    for (size_t i = 0; i < n; i++)
        handles[i] = w.after(std::chrono::milliseconds(in.delay[i]), facade_closure<Inline>(&ctx[i]));
    uint64_t t1 = now_ns();
    for (uint32_t k : in.cancel_order)
        handles[k].cancel();
    uint64_t t2 = now_ns();
    size_t fired = w.advance(MAX_DELAY + 1);
    uint64_t t3 = now_ns();
    t.add = double(t1 - t0) / double(n);
    t.cancel = double(t2 - t1) / double(in.cancel_order.size());
    t.fire = double(t3 - t2) / double(fired);
    t.fired = fired;
    return t;
}

struct facade_rows {
    static constexpr schedule when = schedule::each_n;
    static bool enabled(const options &opt) { return opt.facade; }
    static int progress_steps(const options &opt) { return opt.quick ? 3 : 5; }

    static constexpr size_t MAX_N = 1000000;

    static void run(size_t n, int, const options &opt)
    {
        const int reps = progress_steps(opt);
        if (n > MAX_N) {
            progress.done += reps;
            return;
        }
        facade_input in = make_facade_input(n);
        std::vector<facade_context> ctx(n);
        const char *names[3] = {"c_api", "facade", "facade_inline"};
        for (int rep = 0; rep < reps; rep++) {
            progress.step("facade", "", n, rep, reps);
            for (int row = 0; row < 3; row++) { // interleaved: drift hits all alike
                std::fill(ctx.begin(), ctx.end(), facade_context{0, 0});
                facade_times t = row == 0   ? facade_c_api(in, ctx)
                                 : row == 1 ? facade_cpp<false>(in, ctx)
                                            : facade_cpp<true>(in, ctx);
                uint64_t fired = 0;
                for (auto &c : ctx)
                    fired += c.fired;
                // the aging pass fired n, the measured pass n - n/2
                if (t.fired != n - n / 2 || fired != n + t.fired)
                    die("facade %s: fired %llu (contexts %llu), expected %zu", names[row],
                        (unsigned long long)t.fired, (unsigned long long)fired, n - n / 2);
                record(names[row], n, "facade_add", t.add, "ns");
                record(names[row], n, "facade_cancel", t.cancel, "ns");
                record(names[row], n, "facade_fire", t.fire, "ns");
            }
            progress.done++;
        }
    }

    static void report(const options &opt, const std::vector<std::string> &)
    {
        for (size_t n : opt.ns) {
            if (n > MAX_N)
                continue;
            std::printf("\nC++ facade vs the C API, aged wheel (a full pass of N timers "
                        "first), default lock, N = %s, ns per operation\n",
                        fmt_n(n).c_str());
            std::printf("%-22s%12s%12s%12s\n", "row", "add", "cancel", "fire");
            for (const char *row : {"c_api", "facade", "facade_inline"}) {
                double a, c, f;
                if (!median_of(row, n, "facade_add", &a) || !median_of(row, n, "facade_cancel", &c) ||
                    !median_of(row, n, "facade_fire", &f))
                    continue;
                std::printf("%-22s%12s%12s%12s\n", row, fmt_v(a).c_str(), fmt_v(c).c_str(),
                            fmt_v(f).c_str());
            }
            for (const char *row : {"facade", "facade_inline"}) {
                std::string label = std::string(row) + " / c_api";
                std::printf("%-22s%12s%12s%12s\n", label.c_str(),
                            fmt_ratio(row, "c_api", n, "facade_add").c_str(),
                            fmt_ratio(row, "c_api", n, "facade_cancel").c_str(),
                            fmt_ratio(row, "c_api", n, "facade_fire").c_str());
            }
        }
    }
};

} // namespace bench

#endif
