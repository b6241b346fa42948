// Contended: 4 threads add/cancel while one drives, quiet and beside busy
// processes.
//
// Each worker owns a ring of n/4 timers: every iteration cancels the timer in
// the next ring slot (fired or not) and adds a new one there (delay uniform in
// [1, 60000]), for a fixed wall-clock time. The driver advances one tick,
// sleeps ~20 µs, repeats, until the workers stop. Figure: wall time / (cancels
// + adds of all workers), so a lock that collapses cannot stretch the run.
//
// These runs call each structure's own C API from several threads, not the
// common interface (which the single-threaded harness drives): a structure
// takes part here through its entry in `contenders` below.
#ifndef BENCH_WORKLOAD_CONTENDED_HPP
#define BENCH_WORKLOAD_CONTENDED_HPP

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <malloc.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "skynet_wheel.h"
#include "workload.hpp"

namespace bench {

constexpr int WORKERS = 4;

struct mt_result {
    double ns_per_op;
    uint64_t ticks, fired;
};

inline std::atomic<uint64_t> mt_fired;
inline void mt_fire(void *) { mt_fired.fetch_add(1, std::memory_order_relaxed); }

inline void driver_sleep()
{
    struct timespec ts = {0, 20000};
    nanosleep(&ts, nullptr);
}

template <class Setup, class Work, class Tick>
mt_result run_contended(double seconds, Setup setup, Work work, Tick tick)
{
    std::atomic<int> go(0), done(0), stop(0);
    std::atomic<uint64_t> ops(0);
    uint64_t ticks = 0;
    setup();
    std::vector<std::thread> ws;
    for (int w = 0; w < WORKERS; w++)
        ws.emplace_back([&, w] {
            while (!go.load(std::memory_order_acquire))
                std::this_thread::yield();
            ops.fetch_add(work(w, stop), std::memory_order_relaxed);
            done.fetch_add(1, std::memory_order_release);
        });
    std::thread drv([&] {
        prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
        while (!go.load(std::memory_order_acquire))
            std::this_thread::yield();
        while (done.load(std::memory_order_acquire) < WORKERS) {
            tick();
            ticks++;
            driver_sleep();
        }
    });
    uint64_t t0 = now_ns();
    go.store(1, std::memory_order_release);
    struct timespec ts = {(time_t)seconds, (long)((seconds - (double)(time_t)seconds) * 1e9)};
    nanosleep(&ts, nullptr);
    stop.store(1, std::memory_order_relaxed);
    for (auto &t : ws)
        t.join();
    uint64_t t1 = now_ns();
    drv.join();
    // each iteration is one cancel and one add
    return mt_result{(double)(t1 - t0) / (double)(2 * std::max<uint64_t>(1, ops.load())),
                     ticks, mt_fired.load()};
}

// Busy processes at normal priority, beside a contended run: the machine a
// server shares with other work. Each spins on arithmetic until killed, and
// dies with the bench if the bench dies first.
class hog_group {
public:
    explicit hog_group(int count)
    {
        const pid_t parent = getpid();
        for (int i = 0; i < count; i++) {
            pid_t pid = fork();
            if (pid == 0) {
                prctl(PR_SET_PDEATHSIG, SIGKILL);
                if (getppid() != parent) // the bench died before prctl
                    _exit(0);
                volatile uint64_t x = 1;
                for (;;)
                    x = x * 6364136223846793005u + 1442695040888963407u;
            }
            if (pid < 0)
                die("fork for a hog failed: %s", std::strerror(errno));
            pids_.push_back(pid);
        }
    }
    hog_group(const hog_group &) = delete;
    hog_group &operator=(const hog_group &) = delete;
    ~hog_group()
    {
        for (pid_t pid : pids_)
            kill(pid, SIGKILL);
        for (pid_t pid : pids_)
            waitpid(pid, nullptr, 0);
    }

private:
    std::vector<pid_t> pids_;
};

// The workload's name for a hog count: "contended" quiet (as before hogs
// existed), "contended_hog2" with two.
inline std::string contended_workload(int hogs, const char *suffix = "")
{
    std::string w = hogs ? "contended_hog" + std::to_string(hogs) : "contended";
    return w + suffix;
}

inline mt_result contended_twheel(int lock, size_t n, double seconds)
{
    struct tw_config c;
    tw_config_init(&c);
    c.lock = lock;
    c.drive = TW_DRIVE_TICKS; // driven by tw_advance: no clock read per add
    tw_wheel *w = tw_create(&c);
    if (!w)
        die("tw_create failed");
    size_t ring = std::max<size_t>(1, n / WORKERS);
    std::vector<std::vector<tw_id>> ids(WORKERS, std::vector<tw_id>(ring));
    auto cb = [](tw_wheel *, tw_id, void *) { mt_fire(nullptr); };
    mt_fired = 0;
    auto setup = [&] {
        splitmix r(SEED);
        for (auto &v : ids)
            for (auto &id : v)
                id = tw_add(w, 1 + r.below(MAX_DELAY), cb, nullptr);
    };
    auto work = [&](int me, std::atomic<int> &stop) -> uint64_t {
        splitmix r(SEED + (uint64_t)me + 1);
        std::vector<tw_id> &v = ids[me];
        uint64_t i = 0, sink = 0;
        for (size_t j = 0; !stop.load(std::memory_order_relaxed); i++) {
            sink += (uint64_t)tw_cancel(w, v[j]);
            v[j] = tw_add(w, 1 + r.below(MAX_DELAY), cb, nullptr);
            sink += v[j];
            if (++j == ring)
                j = 0;
        }
        sink_add(sink);
        return i;
    };
    auto tick = [&] { tw_advance(w, 1); };
    mt_result res = run_contended(seconds, setup, work, tick);
    tw_destroy(w);
    return res;
}

// skynet has no cancel: a skynet service cancels by forgetting the session,
// and ignores the response when it comes. Here each ring slot carries a
// session generation; cancel bumps it, a node whose generation is stale is
// dropped by the dispatch function. No lock is taken for a cancel.
inline std::vector<std::unique_ptr<std::atomic<uint32_t>[]>> sk_sessions;

inline void sk_mt_fire(void *arg)
{
    uint64_t a = (uint64_t)(uintptr_t)arg;
    uint32_t gen = (uint32_t)a, slot = (uint32_t)((a >> 32) & 0x0fffffff);
    int w = (int)(a >> 60);
    if (sk_sessions[w][slot].load(std::memory_order_relaxed) == gen)
        mt_fire(nullptr);
}

inline mt_result contended_skynet(size_t n, double seconds)
{
    sk_timer *T = sk_create(sk_mt_fire);
    size_t ring = std::max<size_t>(1, n / WORKERS);
    sk_sessions.clear();
    for (int w = 0; w < WORKERS; w++) {
        sk_sessions.emplace_back(new std::atomic<uint32_t>[ring]);
        for (size_t i = 0; i < ring; i++)
            sk_sessions[w][i].store(0);
    }
    auto encode = [](uint64_t w, uint64_t slot, uint32_t gen) {
        return (void *)(uintptr_t)((w << 60) | (slot << 32) | gen);
    };
    mt_fired = 0;
    auto setup = [&] {
        splitmix r(SEED);
        for (int w = 0; w < WORKERS; w++)
            for (size_t i = 0; i < ring; i++)
                sk_add(T, 1 + r.below(MAX_DELAY), encode((uint64_t)w, i, 0));
    };
    auto work = [&](int me, std::atomic<int> &stop) -> uint64_t {
        splitmix r(SEED + (uint64_t)me + 1);
        std::atomic<uint32_t> *sess = sk_sessions[me].get();
        uint64_t i = 0, sink = 0;
        for (size_t j = 0; !stop.load(std::memory_order_relaxed); i++) {
            uint32_t gen = sess[j].load(std::memory_order_relaxed) + 1;
            sess[j].store(gen, std::memory_order_relaxed); // cancel
            sink += (uintptr_t)sk_add(T, 1 + r.below(MAX_DELAY), encode((uint64_t)me, j, gen));
            if (++j == ring)
                j = 0;
        }
        sink_add(sink);
        return i;
    };
    auto tick = [&] { sk_advance(T, 1); };
    mt_result res = run_contended(seconds, setup, work, tick);
    sk_destroy(T);
    return res;
}

// The contended runs, in the order they run and their rows print; `selected_by`
// is the structure name --only matches.
struct contender {
    const char *name;
    const char *selected_by;
    mt_result (*run)(size_t n, double seconds);
};

inline const contender contenders[] = {
    {"twheel", "twheel",
     [](size_t n, double s) { return contended_twheel(default_lock(), n, s); }},
    {"twheel-spin", "twheel",
     [](size_t n, double s) { return contended_twheel(TW_LOCK_SPIN, n, s); }},
    {"twheel-mutex", "twheel",
     [](size_t n, double s) { return contended_twheel(TW_LOCK_MUTEX, n, s); }},
    {"skynet", "skynet", contended_skynet},
};

struct contended {
    static constexpr schedule when = schedule::each_n;
    static bool enabled(const options &opt) { return opt.contended; }
    static int progress_steps(const options &opt) { return (int)opt.hogs.size(); }

    // Per hog count, the hogs run for the whole block and the repetitions
    // are interleaved across structures.
    static void run(size_t n, int reps, const options &opt)
    {
        for (int hogs : opt.hogs) {
            const std::string w = contended_workload(hogs);
            const std::string ticks = contended_workload(hogs, "_ticks");
            const double secs = opt.contended_seconds;
            const int mt_reps = std::max(reps, opt.quick ? 3 : 5);
            hog_group load(hogs);
            for (int rep = 0; rep < mt_reps; rep++) {
                progress.step(w.c_str(), "twheel and skynet", n, rep, mt_reps);
                for (const contender &c : contenders) {
                    if (!opt.wants(c.selected_by))
                        continue;
                    mt_result r = c.run(n, secs);
                    record(c.name, n, w, r.ns_per_op);
                    record(c.name, n, ticks, (double)r.ticks / secs, "ticks/s");
                    // Threads other than main allocate from glibc's
                    // per-thread arenas, which settle_malloc() does not
                    // reach: malloc_trim consolidates them all, so no run
                    // inherits another's free lists (skynet leaves millions
                    // of freed nodes behind; a wheel whose next allocation
                    // consolidated them stalled every thread for
                    // milliseconds while holding its lock).
                    malloc_trim(0);
                    settle_malloc();
                }
            }
            progress.done++;
        }
    }

    static void report(const options &opt, const std::vector<std::string> &)
    {
        for (int hogs : opt.hogs) {
            const std::string w = contended_workload(hogs);
            const std::string ticks = contended_workload(hogs, "_ticks");
            std::printf("\ncontended, %s: %d threads cancel+add (ring of N/%d timers "
                        "each) while one thread advances a tick every ~20 us; ns per "
                        "operation (wall time / all operations), median [worst "
                        "repetition]; ticks/s: the driver's ticks per second, median\n",
                        hogs ? (std::to_string(hogs) + " busy processes beside it").c_str()
                             : "quiet",
                        WORKERS, WORKERS);
            std::printf("%-22s", "structure");
            for (size_t n : opt.ns)
                std::printf("%20s%10s", ("N=" + fmt_n(n)).c_str(), "ticks/s");
            std::printf("\n");
            for (const contender &c : contenders) {
                std::printf("%-22s", c.name);
                for (size_t n : opt.ns) {
                    double v, lo, hi, t;
                    std::string cell = "-", tick = "-";
                    if (median_of(c.name, n, w, &v, &lo, &hi))
                        cell = fmt_v(v) + " [" + fmt_v(hi) + "]";
                    if (median_of(c.name, n, ticks, &t))
                        tick = std::to_string((long long)t);
                    std::printf("%20s%10s", cell.c_str(), tick.c_str());
                }
                std::printf("\n");
            }
            for (const char *b : {"twheel-mutex", "skynet"}) {
                std::string label = std::string("twheel / ") + b;
                std::printf("%-22s", label.c_str());
                for (size_t n : opt.ns)
                    std::printf("%20s%10s", fmt_ratio("twheel", b, n, w.c_str()).c_str(), "");
                std::printf("\n");
            }
            std::printf("%-22s", "twheel worst / median");
            for (size_t n : opt.ns) {
                double v, lo, hi;
                char buf[32] = "-";
                if (median_of("twheel", n, w, &v, &lo, &hi) && v > 0)
                    std::snprintf(buf, sizeof buf, "%.2fx", hi / v);
                std::printf("%20s%10s", buf, "");
            }
            std::printf("\n");
        }
    }
};

} // namespace bench

#endif
