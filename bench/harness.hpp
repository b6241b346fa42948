// What every part of twheel_bench shares: the clock, the PRNG, the fixed
// constants of the input, what a firing does, the options, the progress line,
// the store of results, the cross-check and the allocator's state.
#ifndef BENCH_HARNESS_HPP
#define BENCH_HARNESS_HPP

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <ctime>
#include <string>
#include <vector>

namespace bench {

// ---- clock, PRNG, hashing --------------------------------------------------

inline uint64_t now_ns()
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

inline uint64_t mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    return z ^ (z >> 31);
}

struct splitmix {
    uint64_t s;
    explicit splitmix(uint64_t seed) : s(seed) {}
    uint64_t next() { return mix64(s += UINT64_C(0x9e3779b97f4a7c15)); }
    // uniform in [0, n) for n < 2^32, by multiply-shift (no division)
    uint32_t below(uint32_t n) { return (uint32_t)(((next() >> 32) * n) >> 32); }
};

constexpr uint64_t SEED = UINT64_C(0x74776865656c2121); // "twheel!!"
constexpr uint32_t MAX_DELAY = 60000;                     // ticks
constexpr uint32_t HB_RESCHEDULES = 20;
constexpr uint64_t NEVER = UINT64_MAX;
constexpr int QUERIES = 1000; // next_expiry calls per timed batch

// ---- what a firing does -----------------------------------------------------
// Every structure calls fire(arg) for a due timer. The (timer, tick) pair goes
// into an order-independent hash (a sum of mixed values) and a count; during
// the heartbeat run the connection is marked dead as well. Inline, so that an
// adapter that calls it directly pays no call.

inline uint64_t g_tick;       // the tick being dispatched (set by the driver loop)
inline uint64_t g_fire_hash;  // sum of mix64(timer << 32 ^ tick)
inline uint64_t g_fired;
inline uint8_t *g_state;      // heartbeat: state byte of connection 0, or null
inline size_t g_state_stride; // bytes from one connection's state to the next
inline volatile uint64_t g_sink; // keeps results observable
inline std::atomic<uint64_t> g_mt_sink;
inline void sink_add(uint64_t v) { g_mt_sink.fetch_add(v, std::memory_order_relaxed); }

inline void fire(void *arg)
{
    uint64_t idx = (uint64_t)(uintptr_t)arg;
    g_fire_hash += mix64((idx << 32) ^ g_tick);
    g_fired++;
    if (g_state)
        g_state[idx * g_state_stride] = 0;
}

inline void *arg_of(size_t i) { return (void *)(uintptr_t)i; }

// ---- options ----------------------------------------------------------------

struct options {
    bool quick = false;
    std::vector<size_t> ns;
    int reps_override = 0;
    std::string csv;
    std::vector<std::string> only;
    bool contended = true;
    std::vector<int> hogs{0, 2, 4}; // busy processes beside the contended runs
    bool hogs_given = false;        // --hog was on the command line
    bool single = true; // the single-threaded workloads
    bool idle = true;
    bool facade = true; // the C++ facade against the C API
    bool tick = true;   // tick latency: the time of every single advance(1)
    bool idle_timeout = true; // session idle timeouts (workload_idle_timeout.hpp)
    std::string count; // --count STAGE: untimed, for cachegrind
    size_t hb_cap = 0;           // heartbeat ops per run (cap)
    double contended_seconds = 0; // per contended measurement
    // wall time after which a structure that scans (skynet's next-expiry)
    // stops a far-away timers loop or churn early
    uint64_t scan_budget_ns = 0;

    int reps(size_t n) const
    {
        if (reps_override > 0)
            return reps_override;
        if (quick)
            return n <= 20000 ? 3 : 1;
        return n <= 20000 ? 7 : n <= 2000000 ? 5 : 1;
    }
    bool wants(const std::string &name) const
    {
        if (only.empty())
            return true;
        for (auto &o : only)
            if (name.compare(0, o.size(), o) == 0)
                return true;
        return false;
    }
};

[[noreturn]] void die(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

// ---- progress (stderr, only on a terminal) ------------------------------------

struct progress_t {
    bool on = false;
    bool warm_up = false;
    int done = 0, total = 0;
    uint64_t start = 0;
    void step(const char *what, const char *who, size_t n, int rep, int reps);
    void finish();
};
inline progress_t progress;

// ---- results ------------------------------------------------------------------
// One series of samples per (structure, N, workload); N = 0 for the figures
// that do not depend on N. The unit goes to the CSV.

void record(const std::string &structure, size_t n, const std::string &workload, double v,
            const char *unit = "ns/op");
bool median_of(const std::string &structure, size_t n, const std::string &workload,
               double *out, double *lo = nullptr, double *hi = nullptr,
               size_t *count = nullptr);

struct series_ref {
    const std::string &structure;
    size_t n;
    const std::string &workload;
    const char *unit;
};
// Every series, ordered by structure, N, workload.
std::vector<series_ref> all_series();

// ---- cross-check ----------------------------------------------------------------

struct outcome {
    uint64_t fired = 0, hash = 0;
};

// The first structure to report (N, what) sets the expected outcome; any other
// that differs stops the program.
void cross_check(size_t n, const char *what, const char *who, outcome o);

// ---- per-N input data (the same for every structure) ------------------------------

struct data {
    size_t n;
    std::vector<uint32_t> delay;     // add delays, [1, MAX_DELAY]
    std::vector<uint32_t> perm;      // random permutation: first half cancelled
    std::vector<uint32_t> rdelay;    // new delays for the second half
    std::vector<uint8_t> hb_state;   // initial heartbeat stage of each survivor
};

data make_data(size_t n);

// ---- the allocator's state ------------------------------------------------------
// Operation costs are measured in a steady state, as in a long-running server
// whose memory has been obtained from the kernel already: glibc is told never
// to give memory back and never to mmap, and before each N the heap is grown
// and touched once (prefault), so no timed part takes page faults for fresh
// memory. Between runs the free lists are consolidated (a large malloc does
// that), so no structure pays inside its timed part for the millions of
// small chunks the previous one left in glibc's fast bins.

void setup_malloc();
void prefault(size_t bytes);
// Bytes a structure holds from the allocator, measured the same way for
// every one of them: glibc's in-use bytes (chunk headers included) after,
// minus before. Everything else the harness allocates is set up outside.
int64_t heap_in_use();
void settle_malloc();

} // namespace bench

#endif
