/* The ownership patterns C++ servers write, each under ASan/UBSan/LSan in
 * .ci/run: a closure owning its own handle, the shared_from_this idiom, a
 * handle inside an object its own callback destroys, closure destructors
 * that schedule or cancel while the wheel is destroyed, and the wheel's
 * owner destroyed from one of the wheel's callbacks (a shutdown timer).
 * Each test failed (use after free, std::terminate, a leak or a callback
 * run after the shutdown) before the facade took a handle's timer out of
 * the handle before cancelling and the C library deferred tw_destroy from
 * a callback. */
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "helpers.hpp"

/* ---- a closure owning its own handle ------------------------------------ */

/* The closure holds the only reference to the object that holds its handle:
 * cancelling, move-assigning or destroying that handle from plain code
 * destroys the closure, the object and the handle inside the call. */
struct owner_of_handle {
    twheel::timer handle;
    life *counts;
    explicit owner_of_handle(life *l) : counts(l) { ++counts->made; }
    ~owner_of_handle() { ++counts->destroyed; }
};

static std::shared_ptr<owner_of_handle> arm(twheel::wheel &w, life *l, int *runs)
{
    auto o = std::make_shared<owner_of_handle>(l);
    o->handle = w.after(5ms, [o, runs] { ++*runs; });
    return o;
}

static void test_closure_owns_its_handle_cancel(void **)
{
    life l;
    int runs = 0;
    twheel::wheel w(single_threaded());
    owner_of_handle *raw = arm(w, &l, &runs).get(); /* only the closure owns it now */
    assert_int_equal(l.alive(), 1);
    assert_true(raw->handle.cancel()); /* destroys raw itself */
    assert_int_equal(l.alive(), 0);
    w.advance(10);
    assert_int_equal(runs, 0);
}

static void test_closure_owns_its_handle_move_assign(void **)
{
    life l;
    int runs = 0, other_runs = 0;
    twheel::wheel w(single_threaded());
    owner_of_handle *raw = arm(w, &l, &runs).get();
    /* the old timer's cancel destroys *raw, handle included, while the
     * assignment runs; the new timer then dies with it */
    raw->handle = w.after(1ms, [&other_runs] { ++other_runs; });
    assert_int_equal(l.alive(), 0);
    assert_int_equal(w.size(), 0);
    w.advance(10);
    assert_int_equal(runs + other_runs, 0);
}

/* The closure owns its handle directly; the handle is destroyed when the
 * closure is: after the one-shot ran, or by the wheel's destruction. */
static void test_closure_owns_its_handle_destroy(void **)
{
    life l;
    int runs = 0;
    {
        twheel::wheel w(single_threaded());
        auto fired = std::make_shared<twheel::timer>();
        *fired = w.after(1ms, [fired, &runs, k = token(&l)] { ++runs; });
        auto pending = std::make_shared<twheel::timer>();
        *pending = w.every(1ms, [pending, k = token(&l)] {});
        auto detached = std::make_shared<twheel::timer>();
        *detached = w.after(50ms, [detached, k = token(&l)] {});
        fired.reset();
        pending.reset();
        detached.reset();
        assert_int_equal(w.advance(1), 2);
        assert_int_equal(runs, 1);
        assert_int_equal(l.alive(), 2); /* the periodic and the far one */
    } /* the wheel releases them; each destroys its own handle */
    assert_int_equal(l.alive(), 0);
}

static void test_closure_owns_its_handle_reschedule(void **)
{
    life l;
    int runs = 0;
    twheel::wheel w(single_threaded());
    owner_of_handle *raw = arm(w, &l, &runs).get();
    assert_true(raw->handle.reschedule(2ms));
    assert_true((raw->handle.remaining() == twheel::duration(2ms)));
    w.advance(2); /* fires; the closure, the object and its handle go */
    assert_int_equal(runs, 1);
    assert_int_equal(l.alive(), 0);
}

/* ---- the shared_from_this idiom ----------------------------------------- */

struct session : std::enable_shared_from_this<session> {
    twheel::wheel &wheel;
    std::map<int, std::shared_ptr<session>> &sessions;
    int id;
    life *counts;
    twheel::timer idle;
    int kicked = 0;

    session(twheel::wheel &w, std::map<int, std::shared_ptr<session>> &all, int n, life *l)
        : wheel(w), sessions(all), id(n), counts(l)
    {
        ++counts->made;
    }
    ~session() { ++counts->destroyed; }

    void start() { arm(); }
    void arm()
    {
        idle = wheel.after(30ms, [self = shared_from_this()] {
            self->kicked++;
            self->sessions.erase(self->id); /* erases its own player */
        });
    }
    void on_packet() { idle.reschedule(30ms); }
};

static void test_shared_from_this_cancel_after_erase(void **)
{
    life l;
    twheel::wheel w(single_threaded());
    std::map<int, std::shared_ptr<session>> sessions;
    auto s = std::make_shared<session>(w, sessions, 1, &l);
    sessions[1] = s;
    s->start();
    session *raw = s.get();
    s.reset();
    sessions.erase(1); /* the closure holds the last reference */
    assert_int_equal(l.alive(), 1);
    /* logout: cancels the idle timer, which destroys the closure, the
     * session and the handle being cancelled */
    assert_true(raw->idle.cancel());
    assert_int_equal(l.alive(), 0);
    assert_int_equal(w.size(), 0);
}

static void test_shared_from_this_rearm_after_erase(void **)
{
    life l;
    twheel::wheel w(single_threaded());
    std::map<int, std::shared_ptr<session>> sessions;
    auto s = std::make_shared<session>(w, sessions, 1, &l);
    s->start();
    session *raw = s.get();
    s.reset();
    /* re-arming by move-assignment: the new closure holds the session, the
     * old one's release drops the other reference */
    raw->arm();
    assert_int_equal(l.alive(), 1);
    assert_int_equal(w.size(), 1);
    raw->on_packet();
    w.advance(30);
    assert_int_equal(l.alive(), 0); /* kicked: its closure was the last owner */
    assert_int_equal(w.size(), 0);
}

static void test_shared_from_this_idle_kick_erases_itself(void **)
{
    life l;
    twheel::wheel w(single_threaded());
    std::map<int, std::shared_ptr<session>> sessions;
    for (int i = 0; i < 100; i++) {
        auto s = std::make_shared<session>(w, sessions, i, &l);
        sessions[i] = s;
        s->start();
    }
    w.advance(10);
    for (int i = 0; i < 100; i += 2)
        sessions[i]->on_packet(); /* half of them talk at tick 10 */
    w.advance(20);                /* the silent half is kicked at 30 */
    assert_int_equal(sessions.size(), 50);
    w.advance(20); /* the rest at 40 */
    assert_int_equal(sessions.size(), 0);
    assert_int_equal(l.alive(), 0);
    assert_int_equal(w.size(), 0);
}

/* ---- a handle inside an object destroyed by its own callback ------------- */

static void test_object_destroyed_by_its_own_callback(void **)
{
    life l;
    twheel::wheel w(single_threaded());
    std::unique_ptr<owner_of_handle> o = std::make_unique<owner_of_handle>(&l);
    int runs = 0;
    o->handle = w.every(1ms, 1ms, [&] {
        ++runs;
        o.reset(); /* destroys the handle of the running periodic timer */
    });
    w.advance(5);
    assert_int_equal(runs, 1); /* the handle's destruction cancelled it */
    assert_int_equal(l.alive(), 0);
    assert_int_equal(w.size(), 0);
}

/* ---- closure destructors during the wheel's destruction ------------------ */

/* A ~Player that books a save: it schedules on the wheel being destroyed,
 * and cancels a neighbour's timer. Neither throws nor terminates: the add
 * schedules nothing (its closure is destroyed at once), the cancel works. */
struct player {
    twheel::wheel *wheel;
    twheel::timer *neighbour;
    int *saves_scheduled;
    life *counts;
    player(twheel::wheel *w, twheel::timer *n, int *saves, life *l)
        : wheel(w), neighbour(n), saves_scheduled(saves), counts(l)
    {
        ++counts->made;
    }
    player(const player &) = delete;
    ~player()
    {
        ++counts->destroyed;
        twheel::timer save = wheel->after(1ms, [k = token(counts)] {});
        if (save.id() != 0)
            ++*saves_scheduled;
        if (neighbour)
            neighbour->cancel();
        tw_id detached = wheel->after_detached(1ms, [k = token(counts)] {});
        if (detached != 0)
            ++*saves_scheduled;
    }
};

static void test_closure_destructor_schedules_during_destruction(void **)
{
    life l;
    int saves = 0;
    twheel::timer neighbour;
    {
        twheel::wheel w(single_threaded());
        neighbour = w.after(50ms, [k = token(&l)] {});
        auto p = std::make_shared<player>(&w, &neighbour, &saves, &l);
        twheel::timer t = w.after(10ms, [p] {});
        t.detach();
        p.reset();
    } /* the wheel's destructor releases the player's closure */
    assert_int_equal(saves, 0); /* nothing scheduled on a dying wheel */
    assert_int_equal(l.alive(), 0);
    assert_false(neighbour.pending());
}

/* ---- the wheel's owner destroyed from one of its callbacks --------------- */

struct server {
    twheel::wheel wheel;
    std::vector<twheel::timer> timers;
    life *counts;
    explicit server(life *l, twheel::config c) : wheel(c), counts(l) { ++counts->made; }
    ~server() { ++counts->destroyed; }
};

static void test_shutdown_timer_destroys_the_owner(void **)
{
    life l;
    auto srv = std::make_unique<server>(&l, single_threaded());
    int after_shutdown = 0, saves = 0;
    twheel::wheel &w = srv->wheel;
    srv->timers.push_back(w.after(5ms, [&srv] { srv.reset(); })); /* shutdown */
    srv->timers.push_back(w.after(5ms, [&after_shutdown] { ++after_shutdown; }));
    srv->timers.push_back(w.after(9ms, [&after_shutdown] { ++after_shutdown; }));
    srv->timers.push_back(w.every(1ms, [k = token(&l)] {}));
    twheel::timer outside; /* a handle outliving everything */
    outside = w.after(100ms, [k = token(&l)] {});
    /* a player whose destructor books a save while the wheel goes */
    auto p = std::make_shared<player>(&w, nullptr, &saves, &l);
    w.after_detached(50ms, [p] {});
    p.reset();
    std::size_t ran = w.advance(20); /* w is gone once this returns */
    assert_null(srv.get());
    /* the periodic at 1..4, then the shutdown, first at tick 5 (the
     * periodic re-armed for 5 after it was added) */
    assert_int_equal(ran, 5);
    assert_int_equal(after_shutdown, 0);
    assert_int_equal(saves, 0);
    assert_int_equal(l.alive(), 0); /* every closure released, nothing leaks */
    assert_false(outside.pending());
    assert_false(outside.cancel());
}

static void test_shutdown_timer_by_expire(void **)
{
    life l;
    std::uint64_t clock_us = 0;
    twheel::config c = single_threaded();
    c.clock_fn = fake_clock;
    c.clock_context = &clock_us;
    auto srv = std::make_unique<server>(&l, c);
    int after_shutdown = 0;
    srv->timers.push_back(srv->wheel.after(2ms, [&srv] { srv.reset(); }));
    srv->timers.push_back(srv->wheel.after(2ms, [&after_shutdown] { ++after_shutdown; }));
    srv->timers.push_back(srv->wheel.after(3ms, [&after_shutdown] { ++after_shutdown; }));
    clock_us = 10000;
    twheel::wheel &w = srv->wheel;
    assert_int_equal(w.expire(), 1);
    assert_null(srv.get());
    assert_int_equal(after_shutdown, 0);
    assert_int_equal(l.alive(), 0);
}

/* The owner destroyed while a callback throws later in the same tick: the
 * batch stopped, so nothing else runs and the call returns normally. And a
 * callback that throws after destroying the owner: the error still comes
 * out of the driving call. */
static void test_shutdown_then_throw(void **)
{
    life l;
    auto srv = std::make_unique<server>(&l, single_threaded());
    twheel::wheel &w = srv->wheel;
    srv->timers.push_back(w.after(1ms, [&srv] {
        srv.reset();
        throw std::runtime_error("after shutdown");
    }));
    bool caught = false;
    try {
        w.advance(1);
    } catch (const twheel::callback_error &e) {
        caught = e.fired() == 1 && e.errors().size() == 1;
    }
    assert_true(caught);
    assert_int_equal(l.alive(), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_closure_owns_its_handle_cancel),
        cmocka_unit_test(test_closure_owns_its_handle_move_assign),
        cmocka_unit_test(test_closure_owns_its_handle_destroy),
        cmocka_unit_test(test_closure_owns_its_handle_reschedule),
        cmocka_unit_test(test_shared_from_this_cancel_after_erase),
        cmocka_unit_test(test_shared_from_this_rearm_after_erase),
        cmocka_unit_test(test_shared_from_this_idle_kick_erases_itself),
        cmocka_unit_test(test_object_destroyed_by_its_own_callback),
        cmocka_unit_test(test_closure_destructor_schedules_during_destruction),
        cmocka_unit_test(test_shutdown_timer_destroys_the_owner),
        cmocka_unit_test(test_shutdown_timer_by_expire),
        cmocka_unit_test(test_shutdown_then_throw),
    };
    return RUN_TESTS(tests);
}
