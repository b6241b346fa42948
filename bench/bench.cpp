// twheel_bench: twheel against the timer structures people use instead, in one
// run. See bench/README.md for the workloads, the output and the command lines.
//
// Every structure sits behind the same small interface (structures.hpp) and
// runs the same timers: delays and orders come from a fixed-seed PRNG, shared
// by all. The harness checks that every structure fires the same (timer,
// tick) pairs, so a broken baseline cannot look fast.
//
// This file is the driver: the options, and the order in which the
// workloads (workloads.hpp) run on the structures, then the output.
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <unistd.h>

#include "harness.hpp"
#include "report.hpp"
#include "structures.hpp"
#include "workloads.hpp"

using namespace bench;

namespace {

std::string default_csv()
{
    char buf[4096];
    ssize_t len = readlink("/proc/self/exe", buf, sizeof buf - 1);
    if (len <= 0)
        return "twheel_bench.csv";
    buf[len] = 0;
    std::string p(buf);
    size_t slash = p.rfind('/');
    return (slash == std::string::npos ? std::string(".") : p.substr(0, slash)) + "/results.csv";
}

void usage(FILE *f)
{
    std::fprintf(f,
        "usage: twheel_bench [--quick] [--csv PATH] [--n N,N,...] [--reps K]\n"
        "                    [--only NAME,...] [--no-contended] [--no-idle]\n"
        "                    [--contended-only] [--no-facade] [--facade-only]\n"
        "                    [--no-tick] [--tick-only] [--no-idle-timeout]\n"
        "                    [--idle-timeout-only] [--hog K,K,...]\n"
        "                    [--count STAGE] [--list]\n"
        "  --quick          a smoke test: N = 10k and 100k, fewer repetitions, the\n"
        "                   contended runs quiet only (about 12 s on 2 cores)\n"
        "  --csv PATH       CSV output (default: results.csv beside the program)\n"
        "  --n LIST         timer counts, e.g. 10000,1000000 (default 10k,1M,10M)\n"
        "  --reps K         repetitions per figure (default 7 / 5 / 1 by N)\n");
    const std::string indent(19, ' ');
    std::string line = "  --only LIST      structures to run (prefixes):";
    std::vector<std::string> names = structure_names();
    for (size_t i = 0; i < names.size(); i++) {
        std::string word = names[i] + (i + 1 < names.size() ? "," : "");
        if (line.size() + 1 + word.size() > 72) {
            std::fprintf(f, "%s\n", line.c_str());
            line = indent + word;
        } else {
            line += " " + word;
        }
    }
    std::fprintf(f, "%s\n", line.c_str());
    std::fprintf(f,
        "  --facade-only    only the C++ facade against the C API (aged wheel)\n"
        "  --tick-only      only the tick latency (every advance(1) timed; --quick:\n"
        "                   the far timers only)\n"
        "  --idle-timeout-only  only the session idle timeouts (each packet\n"
        "                   reschedules its session's timer; about 2 min at 1M)\n"
        "  --hog LIST       busy processes beside the contended runs, one run\n"
        "                   per entry (default 0,2,4; 0 = quiet)\n"
        "  --count STAGE    run the workloads untimed up to STAGE and exit (one\n"
        "                   --n, one --only); for bench/cachegrind.sh. STAGE\n"
        "                   tick:K (tick_uniform:K): the tick latency drive of\n"
        "                   the far (uniform) timers up to tick K; idle_setup,\n"
        "                   idle_timeout: the idle timeout's setup, its steps\n"
        "  --list           print the structures' names, comma-separated, and exit\n");
}

std::vector<std::string> split(const char *s)
{
    std::vector<std::string> out;
    std::string cur;
    for (const char *p = s;; p++) {
        if (*p == ',' || !*p) {
            if (!cur.empty())
                out.push_back(cur);
            cur.clear();
            if (!*p)
                break;
        } else {
            cur += *p;
        }
    }
    return out;
}

size_t parse_count(const std::string &s)
{
    char *end = nullptr;
    double v = std::strtod(s.c_str(), &end);
    if (end && (*end == 'k' || *end == 'K'))
        v *= 1e3;
    else if (end && (*end == 'm' || *end == 'M'))
        v *= 1e6;
    if (!(v >= 2 && v <= 1e8))
        die("bad timer count '%s' (2 .. 100M)", s.c_str());
    return (size_t)v;
}

// The options; --help, --list and a bad option exit here.
options parse_options(int argc, char **argv)
{
    options opt;
    for (int i = 1; i < argc; i++) {
        std::string a = argv[i];
        auto value = [&]() -> const char * {
            if (i + 1 >= argc)
                die("%s needs a value", a.c_str());
            return argv[++i];
        };
        if (a == "--quick")
            opt.quick = true;
        else if (a == "--csv")
            opt.csv = value();
        else if (a == "--n")
            for (auto &x : split(value()))
                opt.ns.push_back(parse_count(x));
        else if (a == "--reps")
            opt.reps_override = std::atoi(value());
        else if (a == "--only")
            opt.only = split(value());
        else if (a == "--no-contended")
            opt.contended = false;
        else if (a == "--no-idle")
            opt.idle = false;
        else if (a == "--no-facade")
            opt.facade = false;
        else if (a == "--facade-only")
            opt.single = opt.idle = opt.contended = opt.tick = opt.idle_timeout = false;
        else if (a == "--no-tick")
            opt.tick = false;
        else if (a == "--tick-only")
            opt.single = opt.idle = opt.contended = opt.facade = opt.idle_timeout = false;
        else if (a == "--no-idle-timeout")
            opt.idle_timeout = false;
        else if (a == "--idle-timeout-only")
            opt.single = opt.idle = opt.contended = opt.facade = opt.tick = false;
        else if (a == "--count")
            opt.count = value(); // checked by the counts workload
        else if (a == "--contended-only")
            opt.single = opt.idle = opt.facade = opt.tick = opt.idle_timeout = false;
        else if (a == "--hog") {
            opt.hogs.clear();
            opt.hogs_given = true;
            for (auto &x : split(value())) {
                char *end = nullptr;
                long k = std::strtol(x.c_str(), &end, 10);
                if (!end || *end || k < 0 || k > 64)
                    die("bad hog count '%s' (0 .. 64)", x.c_str());
                opt.hogs.push_back((int)k);
            }
            if (opt.hogs.empty())
                die("--hog needs at least one count");
        }
        else if (a == "--list") {
            std::vector<std::string> names = structure_names();
            for (size_t k = 0; k < names.size(); k++)
                std::printf("%s%s", k ? "," : "", names[k].c_str());
            std::printf("\n");
            std::exit(0);
        }
        else if (a == "-h" || a == "--help") {
            usage(stdout);
            std::exit(0);
        } else {
            usage(stderr);
            std::exit(2);
        }
    }
    // --quick is a smoke test: every workload runs on every structure it
    // runs on in a full run, and every cross-check holds, in seconds.
    if (opt.ns.empty())
        opt.ns = opt.quick ? std::vector<size_t>{10000, 100000}
                           : std::vector<size_t>{10000, 1000000, 10000000};
    if (opt.csv.empty())
        opt.csv = default_csv();
    if (opt.quick && !opt.hogs_given)
        opt.hogs = {0};
    opt.hb_cap = opt.quick ? 500000 : 4000000;
    opt.contended_seconds = opt.quick ? 0.1 : 0.5;
    opt.scan_budget_ns = opt.quick ? 250000000 : 1500000000;
    return opt;
}

// Whether this run has any workload of schedule `when`.
bool any_enabled(const options &opt, schedule when)
{
    bool any = false;
    for_each_workload([&](auto w) {
        using W = decltype(w);
        any = any || (W::when == when && W::enabled(opt));
    });
    return any;
}

// Every each_repetition workload on one structure, in the list's order.
template <class S> void run_repetition(S &s, const pass &p, const options &opt)
{
    for_each_workload([&](auto w) {
        using W = decltype(w);
        if constexpr (W::when == schedule::each_repetition)
            if (W::enabled(opt))
                W::run(s, p, opt);
    });
}

} // namespace

int main(int argc, char **argv)
{
    const options opt = parse_options(argc, argv);
    progress.on = isatty(2);
    setup_malloc();
    progress.start = now_ns();

    structures all = make_structures();
    std::vector<std::string> structs;
    for_each_structure(all, [&](auto &s) {
        if (opt.wants(s.name))
            structs.push_back(s.name);
    });
    if (structs.empty())
        die("--only matched no structure");
    auto for_each_wanted = [&](auto &&f) {
        for_each_structure(all, [&](auto &s) {
            if (opt.wants(s.name))
                f(s);
        });
    };

    for_each_workload([&](auto w) {
        using W = decltype(w);
        if constexpr (W::when == schedule::alone)
            if (W::enabled(opt))
                W::run(all, opt);
    });

    const bool repetitions = any_enabled(opt, schedule::each_repetition);
    progress.total = 0;
    for (size_t n : opt.ns)
        progress.total += repetitions ? opt.reps(n) * (int)structs.size() : 0;
    for_each_workload([&](auto w) {
        using W = decltype(w);
        if constexpr (W::when == schedule::each_n)
            if (W::enabled(opt))
                progress.total += (int)opt.ns.size() * W::progress_steps(opt);
        if constexpr (W::when == schedule::once)
            if (W::enabled(opt))
                progress.total += (int)structs.size();
    });

    print_header(opt);
    std::fflush(stdout);

    // Warm-up: every workload once on a small input, results thrown away
    // (also checks every structure against the others before any timing).
    if (repetitions) {
        data d = make_data(4096);
        progress.warm_up = true;
        for_each_wanted([&](auto &s) { run_repetition(s, pass{d, false, 0, 1}, opt); });
        progress.warm_up = false;
    }

    for (size_t n : opt.ns) {
        data d = make_data(n);
        int reps = opt.reps(n);
        // peak heap of any run: ~100 bytes per timer (tree nodes, handles,
        // garbage skynet nodes) plus the heartbeat's garbage; with margin
        progress.step("prefault", "", n, 0, reps);
        prefault(n * 128 + (size_t(256) << 20));
        // Repetition-major: each rep runs every structure once, so slow drift
        // of the machine spreads over all structures alike.
        for (int rep = 0; rep < reps && repetitions; rep++)
            for_each_wanted([&](auto &s) {
                run_repetition(s, pass{d, true, rep, reps}, opt);
                progress.done++;
            });
        for_each_workload([&](auto w) {
            using W = decltype(w);
            if constexpr (W::when == schedule::each_n)
                if (W::enabled(opt))
                    W::run(n, reps, opt);
        });
    }

    for_each_workload([&](auto w) {
        using W = decltype(w);
        if constexpr (W::when == schedule::once)
            if (W::enabled(opt))
                for_each_wanted([&](auto &s) {
                    W::run(s, opt);
                    progress.done++;
                });
    });
    progress.finish();

    for_each_workload([&](auto w) {
        using W = decltype(w);
        if (W::enabled(opt))
            W::report(opt, structs);
    });
    if (opt.single || opt.idle_timeout)
        print_targets(opt);
    write_csv(opt.csv);
    std::printf("checksum %016" PRIx64 " (ignore; keeps the work observable)\n",
                (uint64_t)g_sink ^ g_mt_sink.load());
    return 0;
}
