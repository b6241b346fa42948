/* Callbacks using the wheel and timer handles, themselves included, and the
 * exception policy: no exception crosses a C frame; every exception thrown
 * by the callbacks of a batch reaches the on_error handler or, after the
 * whole batch ran, the caller of expire()/advance() in a callback_error. */
#include <cerrno>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "helpers.hpp"

static void test_callback_adds_timers(void **)
{
    twheel::wheel w(single_threaded());
    std::vector<std::string> log;
    std::vector<twheel::timer> spawned;
    twheel::timer t = w.after(1ms, [&] {
        log.push_back("first@" + std::to_string(w.now()));
        spawned.push_back(w.after(2ms, [&] { log.push_back("child@" + std::to_string(w.now())); }));
        spawned.push_back(w.after(0ms, [&] { log.push_back("zero@" + std::to_string(w.now())); }));
        w.after_detached(1ms, [&] { log.push_back("detached@" + std::to_string(w.now())); });
    });
    /* a child due within the same advance fires in it; delay 0 waits for the
     * next call */
    assert_int_equal(w.advance(5), 3);
    assert_true((log == std::vector<std::string>{"first@1", "detached@2", "child@3"}));
    assert_int_equal(w.advance(0), 1);
    assert_string_equal(log.back().c_str(), "zero@5");
}

static void test_callback_cancels_and_reschedules_others(void **)
{
    life l;
    twheel::wheel w(single_threaded());
    std::vector<int> ran;
    twheel::timer b, c, d;
    /* a, b, c are due on the same tick, in this order */
    twheel::timer a = w.after(1ms, [&] {
        ran.push_back(1);
        assert_true(b.cancel()); /* already in the batch, not started */
        assert_int_equal(l.destroyed, 1);
        assert_true(c.reschedule(2ms));
        d = twheel::timer(); /* destroying a pending handle cancels */
    });
    b = w.after(1ms, [&, k = token(&l)] { ran.push_back(2); });
    c = w.after(1ms, [&] { ran.push_back(3); });
    d = w.after(2ms, [&, k = token(&l)] { ran.push_back(4); });
    w.advance(1);
    assert_true((ran == std::vector<int>{1}));
    assert_int_equal(l.destroyed, 2);
    w.advance(1);
    assert_true((ran == std::vector<int>{1}));
    w.advance(1);
    assert_true((ran == std::vector<int>{1, 3}));
    assert_int_equal(w.size(), 0);
}

static void test_one_shot_uses_its_own_handle(void **)
{
    life l;
    twheel::wheel w(single_threaded());
    std::optional<twheel::timer> t;
    bool checked = false;
    t = w.after(1ms, [&, k = token(&l)] {
        /* a one-shot that started is no longer pending */
        assert_false(t->pending());
        assert_false(t->remaining().has_value());
        assert_false(t->reschedule(5ms));
        assert_false(t->cancel());
        t.reset(); /* destroying its own handle inside the callback */
        assert_int_equal(l.destroyed, 0); /* its closure is still running */
        checked = true;
    });
    w.advance(1);
    assert_true(checked);
    assert_false(t.has_value());
    assert_int_equal(l.destroyed, 1);
    assert_int_equal(w.size(), 0);

    /* destroy the handle without cancel() first */
    int runs = 0;
    t = w.after(1ms, [&, k = token(&l)] {
        ++runs;
        t.reset();
    });
    w.advance(1);
    assert_int_equal(runs, 1);
    assert_int_equal(l.destroyed, 2);
}

static void test_periodic_cancels_itself(void **)
{
    life l;
    twheel::wheel w(single_threaded());
    std::optional<twheel::timer> t;
    int runs = 0;
    t = w.every(1ms, 1ms, [&, k = token(&l)] {
        assert_true(t->pending()); /* a running periodic timer is live */
        if (++runs == 3) {
            assert_true(t->cancel());
            assert_int_equal(l.destroyed, 0); /* not under its own feet */
        }
    });
    w.advance(10);
    assert_int_equal(runs, 3);
    assert_int_equal(l.destroyed, 1);
    assert_int_equal(w.size(), 0);
    assert_false(t->pending());
}

static void test_periodic_destroys_its_own_handle(void **)
{
    life l;
    twheel::wheel w(single_threaded());
    auto holder = std::make_unique<twheel::timer>();
    int runs = 0;
    *holder = w.every(1ms, 2ms, [&, k = token(&l)] {
        if (++runs == 2)
            holder.reset(); /* handle destructor cancels from inside */
        assert_int_equal(l.destroyed, 0);
    });
    w.advance(20);
    assert_int_equal(runs, 2);
    assert_int_equal(l.destroyed, 1);
    assert_int_equal(w.size(), 0);
}

static void test_periodic_reschedules_itself(void **)
{
    twheel::wheel w(single_threaded());
    std::optional<twheel::timer> t;
    std::vector<std::uint64_t> at;
    t = w.every(1ms, 10ms, [&] {
        at.push_back(w.now());
        if (at.size() == 1)
            assert_true(t->reschedule(3ms)); /* next at now + 3, then every 10 */
    });
    w.advance(30);
    assert_true((at == std::vector<std::uint64_t>{1, 4, 14, 24}));
}

/* The exception a callback_error holds at `index`, rethrown into f. */
template <class F>
void inspect(const twheel::callback_error &e, std::size_t index, F &&f)
{
    assert_true(index < e.errors().size());
    try {
        std::rethrow_exception(e.errors()[index]);
    } catch (...) {
        std::forward<F>(f)();
    }
}

/* Runs drive() and returns the callback_error it threw (fails if none). */
template <class F>
twheel::callback_error batch_error_of(F &&drive)
{
    try {
        std::forward<F>(drive)();
    } catch (const twheel::callback_error &e) {
        return e;
    }
    fail_msg("no callback_error thrown");
    throw std::logic_error("unreachable");
}

static void test_driving_from_a_callback_is_ebusy(void **)
{
    twheel::wheel w(single_threaded());
    int code = 0;
    twheel::timer t = w.after(1ms, [&] {
        code = error_of([&] { w.advance(1); });
        assert_int_equal(error_of([&] { w.expire(); }), EBUSY);
    });
    w.advance(1);
    assert_int_equal(code, EBUSY);
    /* uncaught inside the callback, the error reaches the caller inside a
     * callback_error */
    twheel::timer u = w.after(1ms, [&] { w.advance(1); });
    const twheel::callback_error e = batch_error_of([&] { w.advance(1); });
    assert_int_equal(e.fired(), 1);
    inspect(e, 0, [] {
        try {
            throw;
        } catch (const std::system_error &x) {
            assert_int_equal(x.code().value(), EBUSY);
        }
    });
}

struct boom : std::runtime_error {
    int n;
    explicit boom(int v) : std::runtime_error("boom " + std::to_string(v)), n(v) {}
};

static int boom_at(const twheel::callback_error &e, std::size_t index)
{
    int n = -1;
    inspect(e, index, [&] {
        try {
            throw;
        } catch (const boom &b) {
            n = b.n;
        } catch (...) {
        }
    });
    return n;
}

static void test_every_exception_of_a_batch_reaches_the_caller(void **)
{
    life l;
    twheel::wheel w(single_threaded());
    std::vector<int> ran;
    twheel::timer a = w.after(1ms, [&] { ran.push_back(1); });
    twheel::timer b = w.after(1ms, [&, k = token(&l)] { ran.push_back(2); throw boom(2); });
    twheel::timer c = w.after(1ms, [&] { ran.push_back(3); });
    twheel::timer d = w.after(2ms, [&] { ran.push_back(4); throw boom(4); });
    twheel::timer e = w.after(3ms, [&] { ran.push_back(5); });
    const twheel::callback_error error = batch_error_of([&] { w.advance(5); });
    assert_int_equal(error.fired(), 5); /* the count is not lost */
    assert_int_equal(error.errors().size(), 2);
    assert_int_equal(boom_at(error, 0), 2);
    assert_int_equal(boom_at(error, 1), 4);
    assert_string_equal(error.what(), "twheel: 2 callbacks threw; first: boom 2");
    assert_true((ran == std::vector<int>{1, 2, 3, 4, 5})); /* the rest ran */
    assert_int_equal(l.destroyed, 1); /* the thrower's closure was released */
    assert_int_equal(w.now(), 5);
    assert_int_equal(w.size(), 0);
    assert_int_equal(tw_check(w.native_handle()), 0);

    /* the wheel is fine afterwards, and nothing is left over */
    twheel::timer f = w.after(1ms, [&] { ran.push_back(6); });
    assert_int_equal(w.advance(1), 1);
    assert_int_equal(ran.back(), 6);
}

/* With on_error, each exception goes to the handler as it happens and the
 * driving call returns normally. */
static void test_on_error_handler(void **)
{
    twheel::wheel w(single_threaded());
    std::vector<std::string> log;
    w.on_error([&](std::exception_ptr p) {
        try {
            std::rethrow_exception(p);
        } catch (const boom &b) {
            log.push_back("error " + std::to_string(b.n));
        }
    });
    twheel::timer a = w.after(1ms, [&] { log.push_back("a"); throw boom(1); });
    twheel::timer b = w.after(1ms, [&] { log.push_back("b"); });
    twheel::timer c = w.after(1ms, [&] { log.push_back("c"); throw boom(3); });
    assert_int_equal(w.advance(1), 3);
    assert_true((log == std::vector<std::string>{"a", "error 1", "b", "c", "error 3"}));
    /* removed: collected again */
    w.on_error(nullptr);
    twheel::timer d = w.after(1ms, [] { throw boom(9); });
    assert_int_equal(boom_at(batch_error_of([&] { w.advance(1); }), 0), 9);
}

static void test_exception_from_periodic_and_expire(void **)
{
    std::uint64_t clock_us = 0;
    twheel::config c = single_threaded();
    c.clock_fn = fake_clock;
    c.clock_context = &clock_us;
    twheel::wheel w(c);
    int runs = 0;
    twheel::timer t = w.every(1ms, 1ms, [&] {
        if (++runs % 2 == 0)
            throw std::logic_error("even");
    });
    clock_us = 1000;
    assert_int_equal(w.expire(), 1);
    clock_us = 4000;
    const twheel::callback_error e = batch_error_of([&] { w.expire(); });
    assert_int_equal(e.fired(), 3);
    assert_int_equal(e.errors().size(), 2); /* runs 2 and 4 threw */
    assert_int_equal(runs, 4); /* ticks 2, 3, 4 all ran */
    assert_true(t.pending()); /* a periodic that threw keeps running */
    clock_us = 5000;
    assert_int_equal(w.expire(), 1);
    assert_int_equal(runs, 5);
}

static void test_exception_of_any_type(void **)
{
    twheel::wheel w(single_threaded());
    twheel::timer a = w.after(0ms, [] { throw 42; });
    int caught = 0;
    const twheel::callback_error e = batch_error_of([&] { w.advance(0); });
    inspect(e, 0, [&] {
        try {
            throw;
        } catch (int v) {
            caught = v;
        }
    });
    assert_int_equal(caught, 42);
    assert_string_equal(e.what(), "twheel: 1 callback threw: an exception not derived from std::exception");
}

static void test_exceptions_of_nested_wheels(void **)
{
    twheel::wheel outer(single_threaded());
    twheel::wheel inner(single_threaded());
    std::vector<std::string> log;
    twheel::timer i1 = inner.after(1ms, [&] { log.push_back("inner"); throw boom(1); });
    twheel::timer o1 = outer.after(1ms, [&] {
        try {
            inner.advance(1); /* inner's exception comes out here */
        } catch (const twheel::callback_error &e) {
            log.push_back("caught " + std::to_string(boom_at(e, 0)));
        }
        throw boom(7);
    });
    twheel::timer o2 = outer.after(1ms, [&] { inner.advance(0); log.push_back("o2"); });
    const twheel::callback_error e = batch_error_of([&] { outer.advance(1); });
    assert_int_equal(e.errors().size(), 1);
    assert_int_equal(boom_at(e, 0), 7);
    assert_true((log == std::vector<std::string>{"inner", "caught 1", "o2"}));
}

static void test_exception_then_handle_ops(void **)
{
    life l;
    twheel::wheel w(single_threaded());
    std::optional<twheel::timer> self;
    self = w.every(1ms, 1ms, [&, k = token(&l)] {
        self.reset(); /* cancel itself, then throw */
        throw boom(3);
    });
    const twheel::callback_error e = batch_error_of([&] { w.advance(5); });
    assert_int_equal(e.fired(), 1);
    assert_int_equal(boom_at(e, 0), 3);
    assert_int_equal(l.destroyed, 1);
    assert_int_equal(w.size(), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_callback_adds_timers),
        cmocka_unit_test(test_callback_cancels_and_reschedules_others),
        cmocka_unit_test(test_one_shot_uses_its_own_handle),
        cmocka_unit_test(test_periodic_cancels_itself),
        cmocka_unit_test(test_periodic_destroys_its_own_handle),
        cmocka_unit_test(test_periodic_reschedules_itself),
        cmocka_unit_test(test_driving_from_a_callback_is_ebusy),
        cmocka_unit_test(test_every_exception_of_a_batch_reaches_the_caller),
        cmocka_unit_test(test_on_error_handler),
        cmocka_unit_test(test_exception_from_periodic_and_expire),
        cmocka_unit_test(test_exception_of_any_type),
        cmocka_unit_test(test_exceptions_of_nested_wheels),
        cmocka_unit_test(test_exception_then_handle_ops),
    };
    return RUN_TESTS(tests);
}
