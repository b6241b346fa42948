/* The facade with the C library's timer thread: handles used from another
 * thread than the one running the callbacks, and closures still destroyed
 * exactly once. */
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <system_error>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "helpers.hpp"

namespace {

struct counted {
    explicit counted(std::atomic<int> *d) : destroyed(d) {}
    counted(counted &&o) noexcept : destroyed(std::exchange(o.destroyed, nullptr)) {}
    counted(const counted &) = delete;
    ~counted()
    {
        if (destroyed)
            destroyed->fetch_add(1);
    }
    std::atomic<int> *destroyed;
};

/* A captured object whose destructor takes a while. */
struct slow_to_die {
    explicit slow_to_die(std::atomic<bool> *g) : gone(g) {}
    slow_to_die(slow_to_die &&o) noexcept : gone(std::exchange(o.gone, nullptr)) {}
    slow_to_die(const slow_to_die &) = delete;
    ~slow_to_die()
    {
        if (!gone)
            return;
        std::this_thread::sleep_for(30ms);
        gone->store(true);
    }
    std::atomic<bool> *gone;
};

/* Waits for something that must happen eventually: only a hang fails, never
 * slowness (30 s covers a loaded machine under ThreadSanitizer). */
template <class P>
bool wait_for(P done, std::chrono::milliseconds limit = 30s)
{
    const auto end = std::chrono::steady_clock::now() + limit;
    while (!done()) {
        if (std::chrono::steady_clock::now() > end)
            return false;
        std::this_thread::sleep_for(1ms);
    }
    return true;
}

} // namespace

static void test_timer_thread_runs_callbacks(void **)
{
    std::atomic<int> runs{0}, destroyed{0};
    {
        twheel::wheel w; /* spinlock by default */
        w.start_thread(500us);
        std::vector<twheel::timer> ts;
        for (int i = 0; i < 200; ++i)
            ts.push_back(w.after(std::chrono::milliseconds(1 + i % 20),
                                 [&runs, c = counted(&destroyed)] { runs.fetch_add(1); }));
        /* cancel every other one from this thread while the timer thread fires */
        int stopped = 0;
        for (std::size_t i = 0; i < ts.size(); i += 2)
            stopped += ts[i].cancel() ? 1 : 0;
        assert_true(wait_for([&] { return runs.load() + stopped == 200; }));
        assert_true(wait_for([&] { return destroyed.load() == 200; }));
        assert_int_equal(w.size(), 0);
        w.stop_thread();
        w.stop_thread(); /* safe twice */
    }
    assert_int_equal(destroyed.load(), 200);
}

static void test_destroy_wheel_with_thread_running(void **)
{
    std::atomic<int> runs{0}, destroyed{0};
    std::vector<twheel::timer> outlive;
    {
        twheel::wheel w;
        w.start_thread(200us);
        twheel::timer p = w.every(0ms, 1ms, [&runs, c = counted(&destroyed)] { runs.fetch_add(1); });
        outlive.push_back(w.after(1h, [c = counted(&destroyed)] {}));
        outlive.push_back(w.every(1ms, 1ms, [c = counted(&destroyed)] {}));
        assert_true(wait_for([&] { return runs.load() >= 3; }));
        p.detach();
    } /* joins the thread, then destroys the pending closures */
    assert_int_equal(destroyed.load(), 3);
    for (auto &t : outlive)
        assert_false(t.pending());
    outlive.clear();
}

/* The timer thread reads a fake clock that only this test moves: the
 * verdict does not depend on how fast the machine runs either thread. */
static std::atomic<std::uint64_t> fake_us{1000000};

static std::uint64_t read_fake_us(void *)
{
    return fake_us.load();
}

static void test_reschedule_from_other_thread(void **)
{
    std::atomic<int> runs{0};
    twheel::config c;
    c.clock_fn = read_fake_us;
    twheel::wheel w(c);
    w.start_thread(200us);
    twheel::timer hb = w.after(200ms, [&] { runs.fetch_add(1); });
    /* keep pushing the heartbeat out, 1 ms of the clock at a time, while
       the timer thread expires: it must not fire while we do */
    for (int i = 0; i < 40; ++i) {
        fake_us += 1000;
        assert_true(hb.reschedule(200ms));
        std::this_thread::yield();
    }
    assert_int_equal(runs.load(), 0);
    fake_us += 199000; /* 1 ms short of the last push's 200 ms... */
    std::this_thread::sleep_for(2ms);
    assert_int_equal(runs.load(), 0);
    fake_us += 2000; /* ...and past it */
    assert_true(wait_for([&] { return runs.load() == 1; }));
    assert_false(hb.pending());
    w.stop_thread();
}

/* Once a handle's destructor returned, its callback is not running on the
 * timer thread and its closure is gone: captured references may die next. */
static void test_destructor_waits_for_running_callback(void **)
{
    std::atomic<int> destroyed{0};
    twheel::wheel w;
    w.start_thread(200us);
    for (int periodic = 0; periodic < 2; ++periodic) {
        std::atomic<bool> started{false}, finished{false}, slow_gone{false};
        {
            auto body = [&started, &finished, s = slow_to_die(&slow_gone),
                         c = counted(&destroyed)] {
                if (started.exchange(true))
                    return;
                std::this_thread::sleep_for(50ms);
                finished = true;
            };
            twheel::timer t = periodic ? w.every(1ms, 1ms, std::move(body))
                                       : w.after(1ms, std::move(body));
            assert_true(wait_for([&] { return started.load(); }));
        } /* destroyed while the callback sleeps on the timer thread */
        assert_true(finished.load());
        assert_true(slow_gone.load()); /* the closure's destructor finished too */
        assert_int_equal(destroyed.load(), periodic + 1);
    }
    w.stop_thread();
}

static void test_handles_from_many_threads(void **)
{
    std::atomic<int> made{0}, destroyed{0}, runs{0};
    {
        twheel::wheel w;
        w.start_thread(100us);
        auto worker = [&](unsigned seed) {
            std::vector<twheel::timer> keep;
            for (int i = 0; i < 1500; ++i) {
                seed = seed * 1103515245u + 12345u;
                const auto delay = std::chrono::microseconds((seed >> 8) % 3000);
                made.fetch_add(1);
                twheel::timer t = (seed >> 20) % 5 == 0
                                      ? w.every(delay, 1ms, [&runs, c = counted(&destroyed)] { runs.fetch_add(1); })
                                      : w.after(delay, [&runs, c = counted(&destroyed)] { runs.fetch_add(1); });
                switch ((seed >> 16) % 4) {
                case 0: break;                                  /* destructor cancels */
                case 1: static_cast<void>(t.cancel()); break;
                case 2: static_cast<void>(t.reschedule(delay / 2)); keep.push_back(std::move(t)); break;
                default: if (!t.pending()) break; t.detach(); break;
                }
                if (keep.size() > 50)
                    keep.erase(keep.begin(), keep.begin() + 25);
            }
        };
        std::thread a(worker, 1u), b(worker, 2u);
        a.join();
        b.join();
        assert_int_equal(tw_check(w.native_handle()), 0);
    } /* pending detached timers go with the wheel */
    assert_int_equal(made.load(), 3000);
    assert_int_equal(destroyed.load(), 3000);
}

static void test_stop_thread_from_callback(void **)
{
    std::atomic<int> code{-1};
    twheel::wheel w;
    w.start_thread(200us);
    /* callbacks on the timer thread must not let exceptions escape */
    w.after_detached(1ms, [&] { code = error_of([&] { w.stop_thread(); }); });
    assert_true(wait_for([&] { return code.load() != -1; }));
    assert_int_equal(code.load(), EDEADLK);
    assert_int_equal(error_of([&] { w.start_thread(1ms); }), EBUSY);
    w.stop_thread();

    twheel::wheel single(single_threaded());
    assert_int_equal(error_of([&] { single.start_thread(1ms); }), EINVAL);
}

/* The shared_from_this idiom with a timer thread: idle kicks erase their
 * own session on the timer thread while this thread reschedules on
 * activity and logs sessions out (cancelling, with its own reference held).
 * Every session is destroyed exactly once, none is kicked after its
 * logout's cancel() returned. Run under ThreadSanitizer in .ci/run. */
namespace {
struct net_session : std::enable_shared_from_this<net_session> {
    std::mutex *lock;
    std::map<int, std::shared_ptr<net_session>> *all;
    std::atomic<int> *destroyed;
    int id;
    std::atomic<bool> logged_out{false};
    std::atomic<int> kicked_after_logout{0};
    twheel::timer idle;
    net_session(std::mutex *m, std::map<int, std::shared_ptr<net_session>> *a,
                std::atomic<int> *d, int n)
        : lock(m), all(a), destroyed(d), id(n)
    {
    }
    ~net_session() { destroyed->fetch_add(1); }
    void arm(twheel::wheel &w, std::chrono::microseconds after)
    {
        idle = w.after(after, [self = shared_from_this()] {
            if (self->logged_out)
                self->kicked_after_logout.fetch_add(1);
            std::lock_guard<std::mutex> held(*self->lock);
            self->all->erase(self->id);
        });
    }
};
} // namespace

static void test_sessions_across_threads(void **)
{
    constexpr int sessions = 2000;
    std::atomic<int> destroyed{0}, bad_kicks{0};
    std::mutex lock;
    std::map<int, std::shared_ptr<net_session>> all;
    {
        twheel::wheel w;
        w.start_thread(100us);
        std::vector<std::shared_ptr<net_session>> made;
        for (int i = 0; i < sessions; ++i) {
            auto s = std::make_shared<net_session>(&lock, &all, &destroyed, i);
            {
                std::lock_guard<std::mutex> held(lock);
                all[i] = s;
            }
            s->arm(w, std::chrono::microseconds(500 + (i * 37) % 5000));
            made.push_back(std::move(s));
        }
        unsigned seed = 7;
        for (int i = 0; i < sessions; ++i) {
            seed = seed * 1103515245u + 12345u;
            std::shared_ptr<net_session> s = std::move(made[static_cast<std::size_t>(i)]);
            switch ((seed >> 16) % 3) {
            case 0: /* activity: pushed later (a no-op once kicked) */
                s->idle.reschedule(std::chrono::microseconds(1000 + (seed >> 8) % 3000));
                break;
            case 1: { /* logout: out of the map, then cancel, reference held */
                {
                    std::lock_guard<std::mutex> held(lock);
                    all.erase(s->id);
                }
                s->idle.cancel(); /* waits for a kick running right now */
                s->logged_out = true;
                break;
            }
            default: /* silent: the idle kick will come */
                break;
            }
            bad_kicks.fetch_add(s->kicked_after_logout.load());
        }
        made.clear();
        assert_true(wait_for([&] {
            std::lock_guard<std::mutex> held(lock);
            return all.empty();
        }));
        assert_true(wait_for([&] { return destroyed.load() == sessions; }));
        w.stop_thread();
        assert_int_equal(w.size(), 0);
    }
    assert_int_equal(destroyed.load(), sessions);
    assert_int_equal(bad_kicks.load(), 0);
}

/* on_error receives exceptions thrown on the timer thread (without it the
 * process would terminate). */
static void test_on_error_on_timer_thread(void **)
{
    std::atomic<int> errors{0}, runs{0};
    twheel::wheel w;
    w.on_error([&](std::exception_ptr p) {
        try {
            std::rethrow_exception(p);
        } catch (const std::runtime_error &) {
            errors.fetch_add(1);
        }
    });
    w.start_thread(200us);
    for (int i = 0; i < 10; ++i)
        w.after_detached(std::chrono::microseconds(100 * i), [&runs] {
            runs.fetch_add(1);
            throw std::runtime_error("on the timer thread");
        });
    assert_true(wait_for([&] { return errors.load() == 10; }));
    assert_int_equal(runs.load(), 10);
    w.stop_thread();
}

/* A count that a waiting thread sleeps on (a condition variable), for
 * what happens on the timer thread after nobody can join it. */
struct latch {
    std::mutex m;
    std::condition_variable cv;
    int count = 0;
    void add()
    {
        std::lock_guard<std::mutex> held(m);
        ++count;
        cv.notify_all();
    }
    /* false only on a hang: 30 s covers a loaded machine under TSan */
    bool wait_until(int n)
    {
        std::unique_lock<std::mutex> held(m);
        return cv.wait_for(held, 30s, [&] { return count >= n; });
    }
};

/* Counts its destruction on a latch, as `counted` does on an atomic. */
struct signals {
    explicit signals(latch *l) : on(l) {}
    signals(signals &&o) noexcept : on(std::exchange(o.on, nullptr)) {}
    signals(const signals &) = delete;
    ~signals()
    {
        if (on)
            on->add();
    }
    latch *on;
};

/* A shutdown timer on the timer thread: the callback destroys the object
 * that owns the wheel; every other closure is released then, none runs.
 * The timer thread detaches itself, so the test waits, on a condition
 * variable, for what a user's code last sees of the wheel: the destruction
 * of its closures (the running one's right after its callback returns).
 * The facade has no on_destroy of its own; the C program
 * examples/shutdown.c waits for tw_config.on_destroy the same way. */
static void test_shutdown_on_timer_thread(void **)
{
    struct server {
        twheel::wheel wheel;
        std::vector<twheel::timer> timers;
    };
    latch destroyed;
    std::atomic<int> late_runs{0};
    std::atomic<bool> shut{false};
    auto srv = std::make_unique<server>();
    server *raw = srv.get();
    std::mutex owner_lock; /* the test thread reads srv; the callback resets it */
    raw->timers.push_back(raw->wheel.every(1ms, [c = signals(&destroyed)] {}));
    raw->timers.push_back(raw->wheel.after(500ms, [&late_runs, c = signals(&destroyed)] {
        late_runs.fetch_add(1);
    }));
    raw->timers.push_back(raw->wheel.after(2ms, [&, c = signals(&destroyed)] {
        std::lock_guard<std::mutex> held(owner_lock);
        srv.reset(); /* ~server: handles cancel, the wheel is destroyed */
        shut = true;
    }));
    raw->wheel.start_thread(200us);
    assert_true(destroyed.wait_until(3));
    assert_true(shut.load());
    std::lock_guard<std::mutex> held(owner_lock);
    assert_null(srv.get());
    assert_int_equal(late_runs.load(), 0);
    assert_int_equal(destroyed.count, 3);
}

/* The thread rules the header states, each exercised while a thread drives
 * the wheel with expire() (not the timer thread) and a second thread tries
 * to drive it too:
 *  - one wheel object is shared: several threads call after()/every()/
 *    size()/next_expiry()/timeout_ms() on it at once; of two concurrent
 *    drivers one gets EBUSY;
 *  - distinct handles are independent: each thread cancels, reschedules,
 *    detaches and destroys its own handles;
 *  - one handle's const members (pending(), remaining(), deadline(), id())
 *    may be called from several threads at once;
 *  - a handle handed to another thread goes through a lock (here a mutex
 *    around a vector), as any object's would.
 * What the rules forbid (cancel() or reschedule() of one handle object from
 * two threads without a lock) is not exercised: it is a data race. Run
 * under ThreadSanitizer in .ci/run, where a race inside the facade fails. */
static void test_thread_rules(void **)
{
    constexpr int workers = 3, per_worker = 600;
    std::atomic<int> made{0}, destroyed{0}, runs{0}, busy{0}, other_errors{0};
    std::atomic<int> workers_done{0};
    {
        twheel::wheel w;
        made.fetch_add(1);
        twheel::timer beat = w.every(200us, [&runs, c = counted(&destroyed)] { runs.fetch_add(1); });
        const tw_id beat_id = beat.id();
        std::mutex handoff_lock;
        std::vector<twheel::timer> handoff;

        auto drive = [&] {
            while (workers_done.load() < workers) {
                try {
                    static_cast<void>(w.expire());
                } catch (const std::system_error &e) {
                    (e.code().value() == EBUSY ? busy : other_errors).fetch_add(1);
                }
                std::this_thread::yield();
            }
        };
        auto work = [&](unsigned seed) {
            std::vector<twheel::timer> mine;
            for (int i = 0; i < per_worker; ++i) {
                seed = seed * 1103515245u + 12345u;
                const auto delay = std::chrono::microseconds((seed >> 8) % 2000);
                made.fetch_add(1);
                auto body = [&runs, c = counted(&destroyed)] { runs.fetch_add(1); };
                mine.push_back((seed >> 20) % 4 == 0 ? w.every(delay, 500us, std::move(body))
                                                     : w.after(delay, std::move(body)));
                /* the shared handle, read from every worker at once */
                if (!beat.pending() || !beat.remaining() || !beat.deadline() ||
                    beat.id() != beat_id)
                    other_errors.fetch_add(1);
                static_cast<void>(w.size() + w.timeout_ms());
                static_cast<void>(w.next_expiry());
                twheel::timer &t = mine.back();
                switch ((seed >> 16) % 5) {
                case 0: static_cast<void>(t.cancel()); break;
                case 1: static_cast<void>(t.reschedule(delay / 2 + 100us)); break;
                case 2: static_cast<void>(t.detach()); break;
                case 3: { /* to whichever worker comes next, under the lock */
                    std::lock_guard<std::mutex> held(handoff_lock);
                    handoff.push_back(std::move(t));
                    break;
                }
                default: { /* one handed over by another worker: cancel it here */
                    twheel::timer taken;
                    {
                        std::lock_guard<std::mutex> held(handoff_lock);
                        if (!handoff.empty()) {
                            taken = std::move(handoff.back());
                            handoff.pop_back();
                        }
                    }
                    static_cast<void>(taken.cancel());
                    break;
                }
                }
                if (mine.size() > 64)
                    mine.erase(mine.begin(), mine.begin() + 32); /* destructors cancel */
            }
            mine.clear();
            workers_done.fetch_add(1);
        };

        std::thread driver(drive), second_driver(drive);
        std::vector<std::thread> ts;
        for (int k = 0; k < workers; ++k)
            ts.emplace_back(work, static_cast<unsigned>(k + 1));
        for (auto &t : ts)
            t.join();
        driver.join();
        second_driver.join();
        assert_int_equal(other_errors.load(), 0);
        assert_true(beat.pending());
        assert_true(beat.cancel());
        assert_int_equal(tw_check(w.native_handle()), 0);
    } /* detached and handed-over timers still pending go with the wheel */
    assert_int_equal(destroyed.load(), made.load());
    assert_int_equal(made.load(), 1 + workers * per_worker);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_timer_thread_runs_callbacks),
        cmocka_unit_test(test_destroy_wheel_with_thread_running),
        cmocka_unit_test(test_reschedule_from_other_thread),
        cmocka_unit_test(test_destructor_waits_for_running_callback),
        cmocka_unit_test(test_handles_from_many_threads),
        cmocka_unit_test(test_stop_thread_from_callback),
        cmocka_unit_test(test_sessions_across_threads),
        cmocka_unit_test(test_on_error_on_timer_thread),
        cmocka_unit_test(test_shutdown_on_timer_thread),
        cmocka_unit_test(test_thread_rules),
    };
    return RUN_TESTS(tests);
}
