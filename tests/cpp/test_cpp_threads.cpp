/* The facade with the C library's timer thread: handles used from another
 * thread than the one running the callbacks, and closures still destroyed
 * exactly once. */
#include <atomic>
#include <cerrno>
#include <cstdint>
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_timer_thread_runs_callbacks),
        cmocka_unit_test(test_destroy_wheel_with_thread_running),
        cmocka_unit_test(test_reschedule_from_other_thread),
        cmocka_unit_test(test_destructor_waits_for_running_callback),
        cmocka_unit_test(test_handles_from_many_threads),
        cmocka_unit_test(test_stop_thread_from_callback),
    };
    return RUN_TESTS(tests);
}
