// The structures twheel_bench measures, and the one interface they sit
// behind. Each is an adapter, one file each (NAME_adapter.hpp), templated on
// the function a due timer calls, so it depends on nothing but its structure:
//
//   using handle = ...;                   what add returns, cancel takes
//   static constexpr bool exact_next_expiry;  false: next_expiry may answer
//                                         a lower bound (never 0 while
//                                         nothing is due)
//   static constexpr bool next_expiry_scans;  optional, default false: a call
//                                         walks the timers (fewer calls are
//                                         counted)
//   const char *name;                     its rows' label
//   void create(); void destroy();        an empty structure; all freed
//   handle add(uint64_t delay, void *arg);      Fire(arg) when due
//   int cancel(handle &);                 1 if the timer was pending
//   int reschedule(handle &, uint64_t delay, void *arg);  the same timer,
//                                         due delay ticks from now (arg: for a
//                                         structure that has to add anew)
//   void advance(uint64_t ticks);         fires what falls due, in tick order
//   uint64_t next_expiry();               ticks until the earliest, NEVER
//                                         when empty
//
// Every workload runs every structure through this interface, with the same
// timers; the harness checks that they all fire the same (timer, tick) pairs.
#ifndef BENCH_STRUCTURES_HPP
#define BENCH_STRUCTURES_HPP

#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include "harness.hpp"
#include "heap_binary_adapter.hpp"
#include "heap_quad_adapter.hpp"
#include "skynet_adapter.hpp"
#include "timeout_wheel_adapter.hpp"
#include "tree_map_adapter.hpp"
#include "twheel_adapter.hpp"

namespace bench {

using twheel_s = twheel_adapter<fire>;

// The structures, in the order they run and their rows print. Adding a
// structure: its NAME_adapter.hpp, included above and made here (its source,
// if it brings one, goes into meson.build). A name that starts with "twheel"
// is this library; the others are the baselines its ratios are taken against.
inline auto make_structures()
{
    return std::make_tuple(twheel_s("twheel", default_lock()),
                           twheel_s("twheel-none", TW_LOCK_NONE),
                           heap_binary_adapter<fire>(),
                           heap_quad_adapter<fire>(),
                           tree_map_adapter<fire>(),
                           skynet_adapter<fire>(),
                           timeout_wheel_adapter<fire>());
}
using structures = decltype(make_structures());

// f(s) for every structure of the list, in its order.
template <class F> void for_each_structure(structures &all, F &&f)
{
    std::apply([&](auto &...s) { (f(s), ...); }, all);
}

inline std::vector<std::string> structure_names()
{
    structures all = make_structures();
    std::vector<std::string> names;
    for_each_structure(all, [&](auto &s) { names.push_back(s.name); });
    return names;
}

inline bool is_twheel(const std::string &name) { return name.compare(0, 6, "twheel") == 0; }

template <class S> constexpr bool exact_next(const S &) { return S::exact_next_expiry; }

template <class S, class = void> struct scans_for_next : std::false_type {};
template <class S>
struct scans_for_next<S, std::void_t<decltype(S::next_expiry_scans)>>
    : std::bool_constant<S::next_expiry_scans> {};

} // namespace bench

#endif
