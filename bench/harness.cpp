// The harness's parts that no timed loop calls: see harness.hpp.
#include "harness.hpp"

#include <algorithm>
#include <cinttypes>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <tuple>
#include <utility>

#include <malloc.h>

namespace bench {

void die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    std::fprintf(stderr, "\ntwheel_bench: ");
    std::vfprintf(stderr, fmt, ap);
    std::fprintf(stderr, "\n");
    va_end(ap);
    std::exit(3);
}

void progress_t::step(const char *what, const char *who, size_t n, int rep, int reps)
{
    if (!on)
        return;
    double el = (double)(now_ns() - start) / 1e9;
    std::fprintf(stderr, "\r\033[K[%3d/%3d %5.0fs] N=%zu rep %d/%d %s%s %s", done, total, el,
                 n, rep + 1, reps, warm_up ? "warm-up: " : "", what, who);
    std::fflush(stderr);
}

void progress_t::finish()
{
    if (on)
        std::fprintf(stderr, "\r\033[K");
}

// ---- results -------------------------------------------------------------------

namespace {

struct key {
    std::string structure;
    size_t n;
    std::string workload;
    bool operator<(const key &o) const
    {
        return std::tie(structure, n, workload) < std::tie(o.structure, o.n, o.workload);
    }
};

struct series {
    const char *unit;
    std::vector<double> samples;
};

std::map<key, series> results;

} // namespace

void record(const std::string &structure, size_t n, const std::string &workload, double v,
            const char *unit)
{
    series &s = results[key{structure, n, workload}];
    s.unit = unit;
    s.samples.push_back(v);
}

bool median_of(const std::string &structure, size_t n, const std::string &workload,
               double *out, double *lo, double *hi, size_t *count)
{
    auto it = results.find(key{structure, n, workload});
    if (it == results.end() || it->second.samples.empty())
        return false;
    std::vector<double> v = it->second.samples;
    std::sort(v.begin(), v.end());
    size_t m = v.size();
    *out = m % 2 ? v[m / 2] : (v[m / 2 - 1] + v[m / 2]) / 2;
    if (lo)
        *lo = v.front();
    if (hi)
        *hi = v.back();
    if (count)
        *count = m;
    return true;
}

std::vector<series_ref> all_series()
{
    std::vector<series_ref> out;
    for (auto &kv : results)
        out.push_back(series_ref{kv.first.structure, kv.first.n, kv.first.workload,
                                 kv.second.unit});
    return out;
}

// ---- cross-check -----------------------------------------------------------------

namespace {

struct check_slot {
    std::string who;
    outcome o;
    bool set = false;
};

std::map<std::pair<size_t, std::string>, check_slot> checks;

} // namespace

void cross_check(size_t n, const char *what, const char *who, outcome o)
{
    check_slot &c = checks[{n, what}];
    if (!c.set) {
        c.set = true;
        c.who = who;
        c.o = o;
        return;
    }
    if (c.o.fired != o.fired || c.o.hash != o.hash)
        die("CROSS-CHECK FAILED at N=%zu, %s: %s gives %" PRIu64
            " firings (hash %016" PRIx64 ") but %s gives %" PRIu64
            " (hash %016" PRIx64 "). The structures do not fire the same "
            "(timer, tick) pairs; no figure of this run can be trusted.",
            n, what, who, o.fired, o.hash, c.who.c_str(), c.o.fired, c.o.hash);
}

// ---- per-N input data ---------------------------------------------------------------

data make_data(size_t n)
{
    data d;
    d.n = n;
    splitmix r(SEED ^ (n * UINT64_C(0x100000001b3)));
    d.delay.resize(n);
    for (auto &x : d.delay)
        x = 1 + r.below(MAX_DELAY);
    d.perm.resize(n);
    for (size_t i = 0; i < n; i++)
        d.perm[i] = (uint32_t)i;
    for (size_t i = n - 1; i > 0; i--)
        std::swap(d.perm[i], d.perm[r.below((uint32_t)(i + 1))]);
    size_t half = n / 2;
    d.rdelay.resize(n - half);
    for (auto &x : d.rdelay)
        x = 1 + r.below(MAX_DELAY);
    d.hb_state.resize(n - half);
    for (auto &x : d.hb_state)
        x = (uint8_t)(1 + r.below(HB_RESCHEDULES + 1)); // 1..21
    return d;
}

// ---- the allocator's state ------------------------------------------------------

void setup_malloc()
{
    mallopt(M_TRIM_THRESHOLD, -1); // -1: never trim
    mallopt(M_MMAP_MAX, 0);        // everything from the (prefaulted) heap
}

void prefault(size_t bytes)
{
    const size_t block = size_t(64) << 20;
    std::vector<void *> blocks;
    for (size_t done = 0; done < bytes; done += block) {
        void *p = std::malloc(block);
        if (!p)
            break;
        std::memset(p, 1, block);
        blocks.push_back(p);
    }
    for (size_t i = blocks.size(); i-- > 0;)
        std::free(blocks[i]);
}

int64_t heap_in_use()
{
    return (int64_t)mallinfo2().uordblks;
}

void settle_malloc()
{
    void *p = std::malloc(size_t(1) << 16); // a large request consolidates fast bins
    g_sink = g_sink + (uintptr_t)p;
    std::free(p);
}

} // namespace bench
