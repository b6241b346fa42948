// The output of twheel_bench: the run's header, the tables' common form, the
// targets and the CSV. Each workload prints its own tables (its report()),
// with these helpers, from the figures it recorded.
#ifndef BENCH_REPORT_HPP
#define BENCH_REPORT_HPP

#include <cstddef>
#include <string>
#include <vector>

#include "harness.hpp"

namespace bench {

// A table's column: the recorded workload and its title.
struct column {
    const char *workload;
    const char *title;
};

std::string fmt_n(size_t n);   // 10k, 1M
std::string fmt_v(double v);   // 3 or 4 significant digits
// a's median over b's, "-" if either is missing
std::string fmt_ratio(const std::string &a, const std::string &b, size_t n, const char *w);

// The structures twheel's ratios are taken against, in the list's order.
const std::vector<std::string> &baselines();

// One table per N: each structure's medians, then the ratios of every twheel
// structure to every baseline.
void print_table(const options &opt, const std::vector<std::string> &structs,
                 const std::vector<column> &cols);

void print_header(const options &opt);
void print_targets(const options &opt);
void write_csv(const std::string &path);

} // namespace bench

#endif
