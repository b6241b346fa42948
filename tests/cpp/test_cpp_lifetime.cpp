/* Every closure is destroyed exactly once, at the documented moment, and a
 * timer handle stays safe after its timer fired and after its wheel is gone.
 * Run under ASan to catch any touch of freed memory. */
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "helpers.hpp"

static void test_one_shot_destroyed_after_run(void **)
{
    life l;
    twheel::wheel w(single_threaded());
    int seen_alive = -1;
    {
        twheel::timer t = w.after(1ms, [&, k = token(&l)] { seen_alive = l.alive(); });
        assert_int_equal(l.made, 1);
        w.advance(1);
        assert_int_equal(seen_alive, 1);  /* alive while it runs */
        assert_int_equal(l.destroyed, 1); /* gone before advance() returned */
        assert_false(t.pending());
    } /* the handle dies after the firing: nothing more happens */
    assert_int_equal(l.destroyed, 1);
    assert_int_equal(l.made, 1);
}

static void test_cancel_destroys_now(void **)
{
    life l;
    twheel::wheel w(single_threaded());
    int runs = 0;
    twheel::timer t = w.after(1ms, [&runs, k = token(&l)] { ++runs; });
    assert_true(t.cancel());
    assert_int_equal(l.destroyed, 1);
    assert_false(t.cancel());
    assert_false(t.pending());
    w.advance(5);
    assert_int_equal(runs, 0);
    assert_int_equal(l.destroyed, 1);
    assert_int_equal(l.made, 1);
}

static void test_handle_destructor_cancels(void **)
{
    life l;
    twheel::wheel w(single_threaded());
    int runs = 0;
    {
        twheel::timer t = w.after(1ms, [&runs, k = token(&l)] { ++runs; });
        twheel::timer p = w.every(1ms, 1ms, [&runs, k = token(&l)] { ++runs; });
        assert_int_equal(w.size(), 2);
    }
    assert_int_equal(l.destroyed, 2);
    assert_int_equal(w.size(), 0);
    w.advance(5);
    assert_int_equal(runs, 0);
    /* a handle that was never used */
    twheel::timer empty;
    assert_false(empty.pending());
    assert_false(empty.cancel());
    assert_int_equal(empty.detach(), 0);
}

static void test_detach(void **)
{
    life l;
    twheel::wheel w(single_threaded());
    int runs = 0;
    {
        twheel::timer t = w.after(2ms, [&runs, k = token(&l)] { ++runs; });
        tw_id id = t.detach();
        assert_int_not_equal(id, 0);
        assert_false(t.pending());
        assert_int_equal(t.id(), 0);
    }
    assert_int_equal(l.destroyed, 0);
    w.advance(2);
    assert_int_equal(runs, 1);
    assert_int_equal(l.destroyed, 1);
    assert_int_equal(l.made, 1);

    tw_id a = w.after_detached(1ms, [&runs, k = token(&l)] { ++runs; });
    assert_int_not_equal(a, 0);
    w.advance(1);
    assert_int_equal(runs, 2);
    assert_int_equal(l.destroyed, 2);
}

static void test_wheel_destroyed_with_pending(void **)
{
    life l;
    int runs = 0;
    twheel::timer one, periodic, detached; /* empty handles */
    {
        twheel::wheel w(single_threaded());
        one = w.after(1ms, [&runs, k = token(&l)] { ++runs; });
        periodic = w.every(0ms, 1ms, [&runs, k = token(&l)] { ++runs; });
        detached = w.after(5ms, [&runs, k = token(&l)] { ++runs; });
        detached.detach();
        w.after_detached(1h, [&runs, k = token(&l)] { ++runs; });
        w.every_detached(1ms, 1ms, [&runs, k = token(&l)] { ++runs; });
        assert_int_equal(l.alive(), 5);
    } /* pending timers never fire at destruction; closures are destroyed */
    assert_int_equal(runs, 0);
    assert_int_equal(l.made, 5);
    assert_int_equal(l.destroyed, 5);
    /* handles outliving the wheel: every member is safe and inert */
    assert_false(one.pending());
    assert_false(periodic.pending());
    assert_false(one.remaining().has_value());
    assert_false(one.reschedule(1ms));
    assert_false(periodic.cancel());
    one = twheel::timer();
    periodic = twheel::timer();
    detached = twheel::timer();
    assert_int_equal(l.destroyed, 5);
}

static void test_handle_outlives_wheel_after_firing(void **)
{
    life l;
    twheel::timer t;
    {
        twheel::wheel w(single_threaded());
        t = w.after(1ms, [k = token(&l)] {});
        w.advance(1);
    }
    assert_false(t.pending());
    assert_false(t.cancel());
    assert_int_equal(l.destroyed, 1);
}

static void test_wheel_move_assign_destroys_old(void **)
{
    life l;
    twheel::wheel a(single_threaded());
    twheel::wheel b(single_threaded());
    twheel::timer ta = a.after(1ms, [k = token(&l)] {});
    twheel::timer tb = b.after(1ms, [k = token(&l)] {});
    a = std::move(b); /* a's old wheel is destroyed with ta pending */
    assert_int_equal(l.destroyed, 1);
    assert_false(ta.pending());
    assert_true(tb.pending());
    assert_int_equal(a.advance(1), 1);
    assert_int_equal(l.destroyed, 2);
}

/* A closure that owns handles: releasing it destroys them, which cancels
 * their timers from inside the library's release path. */
static void test_closure_owning_handles(void **)
{
    life l;
    int runs = 0;
    twheel::wheel w(single_threaded());
    auto other = std::make_shared<twheel::timer>(w.after(10ms, [&runs, k = token(&l)] { ++runs; }));
    twheel::timer owner = w.after(5ms, [&runs, other, k = token(&l)] { ++runs; });
    other.reset();
    /* cancelling the owner destroys its closure, whose handle cancels `other` */
    assert_true(owner.cancel());
    assert_int_equal(l.destroyed, 2);
    assert_int_equal(w.size(), 0);

    /* the same on firing */
    other = std::make_shared<twheel::timer>(w.after(10ms, [&runs, k = token(&l)] { ++runs; }));
    owner = w.after(5ms, [&runs, other, k = token(&l)] { ++runs; });
    other.reset();
    w.advance(5);
    assert_int_equal(runs, 1);
    assert_int_equal(l.destroyed, 4);
    assert_int_equal(w.size(), 0);
    w.advance(10);
    assert_int_equal(runs, 1);

    /* and at wheel destruction, for handles of the same and of another wheel */
    twheel::wheel w2(single_threaded());
    {
        twheel::wheel w1(single_threaded());
        auto same = std::make_shared<twheel::timer>(w1.after(10ms, [k = token(&l)] {}));
        auto foreign = std::make_shared<twheel::timer>(w2.after(10ms, [k = token(&l)] {}));
        w1.after_detached(5ms, [same, foreign, k = token(&l)] {});
        w1.after_detached(20ms, [same, k = token(&l)] {});
        same.reset();
        foreign.reset();
        assert_int_equal(w2.size(), 1);
    }
    assert_int_equal(w2.size(), 0); /* the foreign timer was cancelled */
    assert_int_equal(l.made, 8);
    assert_int_equal(l.destroyed, 8);
}

/* A closure holding its own handle: a cycle the wheel breaks when it is done
 * with the timer. */
static void test_closure_owning_its_own_handle(void **)
{
    life l;
    int runs = 0;
    twheel::wheel w(single_threaded());
    auto self = std::make_shared<twheel::timer>();
    *self = w.after(1ms, [&runs, self, k = token(&l)] { ++runs; });
    self.reset();
    w.advance(1);
    assert_int_equal(runs, 1);
    assert_int_equal(l.destroyed, 1);

    auto p = std::make_shared<twheel::timer>();
    *p = w.every(1ms, 1ms, [&runs, p, k = token(&l)] { ++runs; });
    p.reset();
    w.advance(3);
    assert_int_equal(runs, 4);
    assert_int_equal(l.destroyed, 1); /* runs until the wheel goes */
}

struct move_only_fn {
    std::unique_ptr<int> step;
    int *total;
    token k;
    void operator()() { *total += *step; }
};

static int plain_runs;
static void plain_function() { ++plain_runs; }

static void test_callable_kinds(void **)
{
    life l;
    twheel::wheel w(single_threaded());
    int runs = 0;
    /* move-only lambda and functor */
    int total = 0;
    twheel::timer a = w.after(1ms, [&total, p = std::make_unique<int>(1), k = token(&l)] { total += *p; });
    twheel::timer b = w.after(1ms, move_only_fn{std::make_unique<int>(10), &total, token(&l)});
    /* mutable lambda keeps its state between periodic runs */
    std::vector<int> counts;
    twheel::timer c = w.every(1ms, 1ms, [&counts, n = 0, k = token(&l)]() mutable { counts.push_back(++n); });
    /* std::function, copied lvalue, function pointer */
    std::function<void()> f = [&runs, k = token(&l)] { ++runs; };
    twheel::timer d = w.after(1ms, f);
    twheel::timer e = w.after(1ms, &plain_function);
    twheel::timer g = w.after(1ms, plain_function);
    /* a callable returning a value: the value is ignored */
    twheel::timer h = w.after(1ms, [&runs] { return ++runs; });
    w.advance(3);
    assert_int_equal(total, 11);
    assert_int_equal(runs, 2);
    assert_int_equal(plain_runs, 2);
    assert_true((counts == std::vector<int>{1, 2, 3}));
    assert_int_equal(l.alive(), 2); /* c, and the caller's copy f */
    c.cancel();
    assert_int_equal(l.alive(), 1);
}

static void test_many_timers_all_paths(void **)
{
    life l;
    {
        twheel::wheel w(single_threaded());
        std::vector<twheel::timer> ts;
        for (int i = 0; i < 3000; ++i) {
            auto d = std::chrono::milliseconds(i % 97);
            switch (i % 4) {
            case 0: ts.push_back(w.after(d, [k = token(&l)] {})); break;
            case 1: ts.push_back(w.every(d, 7ms, [k = token(&l)] {})); break;
            case 2: w.after(d, [k = token(&l)] {}).detach(); break;
            default: w.after_detached(d + 1h, [k = token(&l)] {}); break;
            }
        }
        for (std::size_t i = 0; i < ts.size(); i += 3)
            ts[i].cancel();
        w.advance(50);
        for (std::size_t i = 1; i < ts.size(); i += 5)
            static_cast<void>(ts[i].reschedule(3ms));
        w.advance(50);
        ts.erase(ts.begin(), ts.begin() + static_cast<std::ptrdiff_t>(ts.size() / 2));
        assert_int_equal(tw_check(w.native_handle()), 0);
    }
    assert_int_equal(l.made, 3000);
    assert_int_equal(l.destroyed, 3000);
}

/* Issue 11, defect 1 through the facade: a closure holding the last
 * shared_ptr to its own wheel, cancelled from plain code. The closure's
 * destructor destroys the wheel from inside the release hook; tw_cancel
 * finishes that destroy after the hook (it used to touch the freed wheel).
 * ASan and LeakSanitizer check that nothing is touched after free and
 * nothing leaks; the counts check that every closure died exactly once. */
static void test_closure_holding_last_wheel_reference(void **)
{
    for (twheel::config c : {single_threaded(), twheel::config{}}) {
        life l;
        auto w = std::make_shared<twheel::wheel>(c);
        twheel::timer other = w->after(1s, [k = token(&l)] {});
        twheel::timer self = w->after(1s, [w, k = token(&l)] {});
        twheel::timer third = w->every(1s, 1s, [k = token(&l)] {});
        w.reset(); /* the closure of `self` now owns the wheel */
        assert_true(self.cancel());
        assert_int_equal(l.made, 3);
        assert_int_equal(l.destroyed, 3); /* the wheel's destroy released the rest */
        assert_false(other.pending());
        assert_false(third.pending());
        assert_false(other.cancel()); /* handles outlive their wheel */
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_one_shot_destroyed_after_run),
        cmocka_unit_test(test_cancel_destroys_now),
        cmocka_unit_test(test_handle_destructor_cancels),
        cmocka_unit_test(test_detach),
        cmocka_unit_test(test_wheel_destroyed_with_pending),
        cmocka_unit_test(test_handle_outlives_wheel_after_firing),
        cmocka_unit_test(test_wheel_move_assign_destroys_old),
        cmocka_unit_test(test_closure_owning_handles),
        cmocka_unit_test(test_closure_owning_its_own_handle),
        cmocka_unit_test(test_callable_kinds),
        cmocka_unit_test(test_many_timers_all_paths),
        cmocka_unit_test(test_closure_holding_last_wheel_reference),
    };
    return RUN_TESTS(tests);
}
