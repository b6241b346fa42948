// What a workload is to the driver (bench.cpp). The list of workloads is in
// workloads.hpp.
//
// A workload is a class of static members:
//
//   static constexpr schedule when;        where the driver runs it (below)
//   static bool enabled(const options &);  whether this run wants it
//   static void report(const options &, const std::vector<std::string> &structures);
//                                          its tables, from the recorded
//                                          figures (report.hpp), after every
//                                          run, in the order of the list
//
// and, by its schedule, one of
//
//   each_repetition:  template <class S> static void run(S &, const pass &, const options &);
//   once:             template <class S> static void run(S &, const options &);
//   each_n:           static void run(size_t n, int reps, const options &);
//                     static int progress_steps(const options &);
//   alone:            [[noreturn]] static void run(structures &, const options &);
//
// A workload measures, checks its answers (die() on a wrong one; cross_check
// for what every structure must agree on) and record()s its figures.
#ifndef BENCH_WORKLOAD_HPP
#define BENCH_WORKLOAD_HPP

#include <string>
#include <vector>

#include "harness.hpp"
#include "report.hpp"
#include "structures.hpp"

namespace bench {

enum class schedule {
    // per N and repetition, on every structure in turn (each structure runs
    // every such workload before the next structure starts, so that drift of
    // the machine hits all alike), and once in the warm-up on a small input
    each_repetition,
    // once per N, after its repetitions; brings its own structures
    each_n,
    // on every structure, after every N
    once,
    // instead of every other workload, and exits
    alone,
};

// One repetition of one N, as the driver hands it to a workload.
struct pass {
    const data &d;
    bool keep; // false in the warm-up: figures thrown away
    int rep, reps;
};

} // namespace bench

#endif
