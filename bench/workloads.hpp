// The workloads twheel_bench runs (workload.hpp says what a workload is).
#ifndef BENCH_WORKLOADS_HPP
#define BENCH_WORKLOADS_HPP

#include <tuple>

#include "workload_clock.hpp"
#include "workload_contended.hpp"
#include "workload_counts.hpp"
#include "workload_facade.hpp"
#include "workload_far.hpp"
#include "workload_idle.hpp"
#include "workload_idle_timeout.hpp"
#include "workload_rows.hpp"
#include "workload_tick.hpp"

namespace bench {

// The workloads, in the order they run (within their schedule) and print
// their tables. Adding a workload: its workload_NAME.hpp, included above and
// named here.
using workloads = std::tuple<single_rows, far_timers, clock_driven, idle_catch_up, tick_latency,
                             idle_timeout, contended, facade_rows, counts>;

// f(W{}) for every workload W of the list, in its order.
template <class F> void for_each_workload(F &&f)
{
    std::apply([&](auto... w) { (f(w), ...); }, workloads{});
}

} // namespace bench

#endif
