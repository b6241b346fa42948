// The run's header, the common table, the targets and the CSV: see report.hpp.
#include "report.hpp"

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>

#include <unistd.h>

#include "structures.hpp"

namespace bench {

std::string fmt_n(size_t n)
{
    char b[32];
    if (n >= 1000000 && n % 1000000 == 0)
        std::snprintf(b, sizeof b, "%zuM", n / 1000000);
    else if (n >= 1000 && n % 1000 == 0)
        std::snprintf(b, sizeof b, "%zuk", n / 1000);
    else
        std::snprintf(b, sizeof b, "%zu", n);
    return b;
}

std::string fmt_v(double v)
{
    char b[32];
    if (v >= 1000)
        std::snprintf(b, sizeof b, "%.0f", v);
    else if (v >= 100)
        std::snprintf(b, sizeof b, "%.1f", v);
    else if (v >= 1)
        std::snprintf(b, sizeof b, "%.2f", v);
    else
        std::snprintf(b, sizeof b, "%.3f", v);
    return b;
}

std::string fmt_ratio(const std::string &a, const std::string &b, size_t n, const char *w)
{
    double x, y;
    if (!median_of(a, n, w, &x) || !median_of(b, n, w, &y) || y <= 0)
        return "-";
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.3fx", x / y);
    return buf;
}

const std::vector<std::string> &baselines()
{
    static const std::vector<std::string> list = [] {
        std::vector<std::string> b;
        for (auto &name : structure_names())
            if (!is_twheel(name))
                b.push_back(name);
        return b;
    }();
    return list;
}

void print_table(const options &opt, const std::vector<std::string> &structs,
                 const std::vector<column> &cols)
{
    for (size_t n : opt.ns) {
        std::printf("\nN = %s (%d rep%s)\n", fmt_n(n).c_str(), opt.reps(n),
                    opt.reps(n) > 1 ? "s" : "");
        std::printf("%-22s", "structure");
        for (auto &c : cols)
            std::printf("%11s", c.title);
        std::printf("\n");
        for (auto &s : structs) {
            std::printf("%-22s", s.c_str());
            for (auto &c : cols) {
                double v;
                std::printf("%11s", median_of(s, n, c.workload, &v) ? fmt_v(v).c_str() : "-");
            }
            std::printf("\n");
        }
        for (auto &who : structs) {
            if (!is_twheel(who))
                continue;
            for (auto &b : baselines()) {
                if (std::find(structs.begin(), structs.end(), b) == structs.end())
                    continue;
                std::string label = who + " / " + b;
                std::printf("%-22s", label.c_str());
                for (auto &c : cols)
                    std::printf("%11s", fmt_ratio(who, b, n, c.workload).c_str());
                std::printf("\n");
            }
        }
    }
}

static void print_machine()
{
    std::string cpu = "unknown CPU";
    if (FILE *f = std::fopen("/proc/cpuinfo", "r")) {
        char line[512];
        while (std::fgets(line, sizeof line, f))
            if (std::strncmp(line, "model name", 10) == 0) {
                const char *p = std::strchr(line, ':');
                if (p) {
                    cpu = p + 2;
                    cpu.erase(cpu.find_last_not_of("\n ") + 1);
                }
                break;
            }
        std::fclose(f);
    }
    std::printf("machine: %s, %ld online CPUs; compiler: %s\n", cpu.c_str(),
                sysconf(_SC_NPROCESSORS_ONLN), __VERSION__);
}

void print_header(const options &opt)
{
    std::printf("twheel_bench: %s run, N = ", opt.quick ? "quick" : "full");
    for (size_t k = 0; k < opt.ns.size(); k++)
        std::printf("%s%s", k ? ", " : "", fmt_n(opt.ns[k]).c_str());
    std::printf("; delays uniform in [1, %u] ticks; seed %016" PRIx64 "\n", MAX_DELAY, SEED);
    print_machine();
}

// ---- targets -----------------------------------------------------------------------

static const char *lock_name(int lock)
{
    switch (lock) {
    case TW_LOCK_SPIN: return "TW_LOCK_SPIN";
    case TW_LOCK_MUTEX: return "TW_LOCK_MUTEX";
    case TW_LOCK_NONE: return "TW_LOCK_NONE";
    case TW_LOCK_ADAPTIVE: return "TW_LOCK_ADAPTIVE";
    default: return "unknown lock";
    }
}

struct target {
    const char *text;
    const char *who;
    const char *workload;
    const char *versus; // null: absolute
    double limit;
};

void print_targets(const options &opt)
{
    size_t n = 0;
    for (size_t x : opt.ns)
        if (x <= 1000000)
            n = x;
    if (!n)
        return;
    const target ts[] = {
        {"next-expiry <= 20 ns", "twheel", "next_expiry", nullptr, 20},
        {"next-expiry, far timers <= 20 ns", "twheel", "far_next_expiry", nullptr, 20},
        {"next-expiry under churn <= 20 ns", "twheel", "churn_next_expiry", nullptr, 20},
        {"loop iteration, far timers <= 100 ns", "twheel", "far_loop", nullptr, 100},
        {"idle_timeout <= 0.8x heap_binary", "twheel", "idle_timeout", "heap_binary", 0.8},
        {"idle_timeout <= 1.2x timeout_wheel", "twheel", "idle_timeout", "timeout_wheel", 1.2},
        {"idle_timeout (TW_LOCK_NONE) <= 0.7x heap_binary", "twheel-none", "idle_timeout", "heap_binary", 0.7},
        {"idle_timeout (TW_LOCK_NONE) <= 1.0x timeout_wheel", "twheel-none", "idle_timeout", "timeout_wheel", 1.0},
        {"idle_timeout worst tick <= 2x heap_binary", "twheel", "idle_timeout_worst_tick", "heap_binary", 2.0},
        {"worst tick, far timers <= 2x heap_binary", "twheel", "tick_far_worst", "heap_binary", 2.0},
        {"worst tick, uniform timers <= 2x heap_binary", "twheel", "tick_uniform_worst", "heap_binary", 2.0},
        {"reschedule <= 1.0x heap_binary", "twheel", "reschedule", "heap_binary", 1.0},
        {"cancel <= 0.8x heap_binary", "twheel", "cancel", "heap_binary", 0.8},
        {"expire <= 0.35x heap_binary", "twheel", "expire", "heap_binary", 0.35},
        {"expire <= 0.5x skynet", "twheel", "expire", "skynet", 0.5},
        {"add <= 0.5x skynet", "twheel", "add", "skynet", 0.5},
        {"<= 56 bytes per timer after N reschedules", "twheel", "bytes_per_timer_resched", nullptr, 56},
        {"idle 1 h catch-up <= 50 us", "twheel", "idle_empty_us", nullptr, 50},
        {"idle 1 h catch-up, far timer <= 50 us", "twheel", "idle_far_us", nullptr, 50},
    };
    std::printf("\ntargets at N = %s%s; twheel in its default "
                "configuration (%s) unless marked\n", fmt_n(n).c_str(),
                n == 1000000 ? "" : " (the targets are stated for N = 1M)",
                lock_name(default_lock()));
    for (auto &t : ts) {
        // the idle catch-up is not per N: its figures are recorded at N = 0
        bool catch_up = std::strcmp(t.workload, "idle_empty_us") == 0 ||
                        std::strcmp(t.workload, "idle_far_us") == 0;
        size_t nn = catch_up ? 0 : n;
        double a, b;
        if (!median_of(t.who, nn, t.workload, &a))
            continue;
        if (t.versus) {
            if (!median_of(t.versus, nn, t.workload, &b) || b <= 0)
                continue;
            std::printf("  %-47s %8.3fx  %s\n", t.text, a / b, a / b <= t.limit ? "met" : "MISSED");
        } else {
            std::printf("  %-47s %8s   %s\n", t.text, fmt_v(a).c_str(), a <= t.limit ? "met" : "MISSED");
        }
    }
}

// ---- CSV ------------------------------------------------------------------------------

void write_csv(const std::string &path)
{
    FILE *f = std::fopen(path.c_str(), "w");
    if (!f) {
        std::fprintf(stderr, "twheel_bench: cannot write %s: %s\n", path.c_str(),
                     std::strerror(errno));
        return;
    }
    std::fprintf(f, "structure,n,workload,unit,median,min,max,reps");
    for (auto &b : baselines())
        std::fprintf(f, ",twheel_vs_%s", b.c_str());
    std::fprintf(f, "\n");
    for (const series_ref &s : all_series()) {
        double med = 0, lo = 0, hi = 0;
        size_t cnt = 0;
        median_of(s.structure, s.n, s.workload, &med, &lo, &hi, &cnt);
        std::fprintf(f, "%s,%zu,%s,%s,%.4g,%.4g,%.4g,%zu", s.structure.c_str(), s.n,
                     s.workload.c_str(), s.unit, med, lo, hi, cnt);
        for (auto &b : baselines()) {
            double other;
            if (is_twheel(s.structure) && median_of(b, s.n, s.workload, &other) && other > 0)
                std::fprintf(f, ",%.4f", med / other);
            else
                std::fprintf(f, ",");
        }
        std::fprintf(f, "\n");
    }
    std::fclose(f);
    // on stderr: the text output is kept as results.txt, and a path on this
    // machine means nothing there
    std::fprintf(stderr, "CSV written to %s\n", path.c_str());
}

} // namespace bench
