/* Reschedule: later, earlier, to 0, across levels, the heartbeat pattern,
 * FIFO position after a move, ERANGE leaving the timer untouched, stale and
 * bad ids, from callbacks (other timers, a timer already in the batch, own
 * one-shot, own periodic), and periodic timers continuing from the new due
 * tick. */
#include "helpers.h"

static void test_move_later_and_earlier(void **state)
{
    (void)state;
    tw_wheel *w = new_wheel(100);
    tw_id a = tw_add(w, 10, rec_cb, TAG(1));
    tw_id b = tw_add(w, 100000, rec_cb, TAG(2));
    assert_int_equal(tw_advance(w, 3), 0);
    assert_int_equal(tw_reschedule(w, a, 20), 1); /* 110 -> 123 */
    assert_int_equal(tw_remaining(w, a), 20);
    assert_int_equal(tw_reschedule(w, b, 5), 1);  /* level 1 -> 108 */
    assert_int_equal(tw_remaining(w, b), 5);
    assert_int_equal(tw_next_expiry(w), 5);
    CHECK(w);
    assert_int_equal(tw_advance(w, 1000), 2);
    ASSERT_NFIRES(2);
    ASSERT_FIRE(0, 108, 2);
    ASSERT_FIRE(1, 123, 1);
    assert_int_equal(get_stats(w).rescheduled, 2);
    CHECK(w);
    drop(w);
}

static void test_move_to_zero_runs_next_call(void **state)
{
    (void)state;
    tw_wheel *w = new_wheel(0);
    tw_id a = tw_add(w, 5000, rec_cb, TAG(1));
    assert_int_not_equal(tw_add(w, 1, rec_cb, TAG(2)), 0);
    assert_int_equal(tw_reschedule(w, a, 0), 1);
    assert_int_equal(tw_remaining(w, a), 0);
    assert_int_equal(tw_next_expiry(w), 0);
    assert_int_equal(tw_advance(w, 10000), 2);
    ASSERT_FIRE(0, 0, 1);
    ASSERT_FIRE(1, 1, 2);
    drop(w);
}

/* A moved timer goes to the back of its new tick's queue. */
static void test_reschedule_is_new_insertion(void **state)
{
    (void)state;
    tw_wheel *w = new_wheel(0);
    tw_id a = tw_add(w, 30, rec_cb, TAG(1));
    assert_int_not_equal(tw_add(w, 30, rec_cb, TAG(2)), 0);
    tw_id c = tw_add(w, 400, rec_cb, TAG(3));
    assert_int_equal(tw_advance(w, 10), 0);
    assert_int_equal(tw_reschedule(w, a, 20), 1); /* same tick 30 */
    assert_int_equal(tw_reschedule(w, c, 20), 1);
    assert_int_equal(tw_advance(w, 20), 3);
    ASSERT_FIRE(0, 30, 2);
    ASSERT_FIRE(1, 30, 1);
    ASSERT_FIRE(2, 30, 3);
    drop(w);
}

/* Out-of-range delay: -ERANGE and the timer keeps its due tick and its
 * place in the queue. */
static void test_erange_leaves_timer_untouched(void **state)
{
    (void)state;
    tw_wheel *w = new_wheel(0);
    tw_id a = tw_add(w, 50, rec_cb, TAG(1));
    assert_int_not_equal(tw_add(w, 50, rec_cb, TAG(2)), 0);
    assert_int_equal(tw_reschedule(w, a, TW_MAX_DELAY + 1), -ERANGE);
    assert_int_equal(tw_reschedule(w, a, UINT64_MAX), -ERANGE);
    assert_int_equal(tw_remaining(w, a), 50);
    assert_int_equal(get_stats(w).rescheduled, 0);
    CHECK(w);
    assert_int_equal(tw_advance(w, 50), 2);
    ASSERT_FIRE(0, 50, 1);
    ASSERT_FIRE(1, 50, 2);
    drop(w);
}

static void test_max_delay_reschedule(void **state)
{
    (void)state;
    tw_wheel *w = new_wheel(12345);
    tw_id a = tw_add(w, 1, rec_cb, TAG(1));
    assert_int_equal(tw_reschedule(w, a, TW_MAX_DELAY), 1);
    assert_int_equal(tw_remaining(w, a), TW_MAX_DELAY);
    assert_int_equal(tw_advance(w, TW_MAX_DELAY - 1), 0);
    assert_int_equal(tw_advance(w, 1), 1);
    ASSERT_FIRE(0, 12345 + TW_MAX_DELAY, 1);
    drop(w);
}

static void test_stale_and_bad_ids(void **state)
{
    (void)state;
    tw_wheel *w = new_wheel(0);
    tw_id fired = tw_add(w, 1, rec_cb, TAG(1));
    tw_id cancelled = tw_add(w, 5, rec_cb, TAG(2));
    tw_id live = tw_add(w, 9, rec_cb, TAG(3));
    assert_int_equal(tw_advance(w, 1), 1);
    assert_int_equal(tw_cancel(w, cancelled), 1);
    assert_int_equal(tw_reschedule(w, fired, 3), 0);
    assert_int_equal(tw_reschedule(w, cancelled, 3), 0);
    assert_int_equal(tw_reschedule(w, 0, 3), 0);
    assert_int_equal(tw_reschedule(w, UINT64_MAX, 3), 0);
    assert_int_equal(tw_reschedule(NULL, live, 3), -EINVAL);
    assert_int_equal(tw_count(w), 1);
    assert_int_equal(tw_advance(w, 100), 1);
    ASSERT_NFIRES(2);
    ASSERT_FIRE(1, 9, 3);
    assert_int_equal(get_stats(w).rescheduled, 0);
    drop(w);
}

/* The heartbeat pattern: 2000 connections, each rescheduled 20 times to
 * pseudo-random delays over all levels; each fires once, at its last due
 * tick. */
static void test_heartbeat_pattern(void **state)
{
    (void)state;
    enum { N = 2000, K = 20 };
    static tw_id ids[N];
    static uint64_t due[N];
    uint64_t seed = 42;
    tw_wheel *w = new_wheel(1000);
    for (int i = 0; i < N; i++) {
        ids[i] = tw_add(w, rng_next(&seed) % 100000 + 1, rec_cb, TAG(i));
        assert_int_not_equal(ids[i], 0);
    }
    for (int k = 0; k < K; k++) {
        assert_int_equal(tw_advance(w, 0), 0);
        for (int i = 0; i < N; i++) {
            uint64_t r = rng_next(&seed);
            uint64_t max = (r & 7) == 0 ? (1u << 27) : 70000;
            uint64_t d = 100 + (r >> 8) % max; /* > 100: none fires early */
            assert_int_equal(tw_reschedule(w, ids[i], d), 1);
            due[i] = tw_now(w) + d;
        }
        CHECK(w);
        assert_int_equal(tw_advance(w, 99), 0);
    }
    ASSERT_NFIRES(0);
    uint64_t last = 0;
    for (int i = 0; i < N; i++)
        last = due[i] > last ? due[i] : last;
    assert_int_equal(tw_advance(w, last - tw_now(w)), N);
    ASSERT_NFIRES(N);
    for (size_t i = 0; i < rec.n; i++) {
        assert_int_equal(rec.f[i].tick, due[rec.f[i].tag]);
        if (i > 0)
            assert_true(rec.f[i].tick >= rec.f[i - 1].tick);
    }
    assert_int_equal(get_stats(w).rescheduled, N * K);
    CHECK(w);
    drop(w);
}

/* ---- from callbacks ---------------------------------------------------- */

static struct {
    tw_id target;
    uint64_t delay;
    int ret;
} rs;

static void reschedule_target_cb(tw_wheel *w, tw_id id, void *user_data)
{
    rec_push(w, id, user_data);
    rs.ret = tw_reschedule(w, rs.target, rs.delay);
}

/* A callback moves a timer due later, earlier or further. */
static void test_callback_moves_other_timer(void **state)
{
    (void)state;
    const uint64_t delays[] = {1, 3, 50, 500, 70000};
    for (size_t i = 0; i < sizeof delays / sizeof delays[0]; i++) {
        rec_reset();
        tw_wheel *w = new_wheel(0);
        assert_int_not_equal(tw_add(w, 10, reschedule_target_cb, TAG(1)), 0);
        rs.target = tw_add(w, 40, rec_cb, TAG(2));
        rs.delay = delays[i];
        rs.ret = -100;
        assert_int_equal(tw_advance(w, 100000), 2);
        assert_int_equal(rs.ret, 1);
        ASSERT_FIRE(0, 10, 1);
        ASSERT_FIRE(1, 10 + delays[i], 2);
        CHECK(w);
        drop(w);
    }
}

/* The target is in the batch of the tick being dispatched: it leaves the
 * batch and runs at its new due tick instead. */
static void test_callback_moves_timer_in_batch(void **state)
{
    (void)state;
    tw_wheel *w = new_wheel(0);
    assert_int_not_equal(tw_add(w, 10, reschedule_target_cb, TAG(1)), 0);
    rs.target = tw_add(w, 10, rec_cb, TAG(2));
    assert_int_not_equal(tw_add(w, 10, rec_cb, TAG(3)), 0);
    rs.delay = 4;
    rs.ret = -100;
    assert_int_equal(tw_advance(w, 20), 3);
    assert_int_equal(rs.ret, 1);
    ASSERT_NFIRES(3);
    ASSERT_FIRE(0, 10, 1);
    ASSERT_FIRE(1, 10, 3);
    ASSERT_FIRE(2, 14, 2);
    CHECK(w);
    drop(w);
}

/* Moved to 0 from a callback: due at that tick, runs at the start of the
 * next call. */
static void test_callback_moves_timer_in_batch_to_zero(void **state)
{
    (void)state;
    tw_wheel *w = new_wheel(0);
    assert_int_not_equal(tw_add(w, 10, reschedule_target_cb, TAG(1)), 0);
    rs.target = tw_add(w, 10, rec_cb, TAG(2));
    assert_int_not_equal(tw_add(w, 12, rec_cb, TAG(3)), 0);
    rs.delay = 0;
    rs.ret = -100;
    assert_int_equal(tw_advance(w, 20), 2);
    assert_int_equal(rs.ret, 1);
    ASSERT_FIRE(0, 10, 1);
    ASSERT_FIRE(1, 12, 3);
    assert_int_equal(tw_count(w), 1);
    assert_int_equal(tw_next_expiry(w), 0);
    assert_int_equal(tw_advance(w, 5), 1);
    ASSERT_FIRE(2, 20, 2);
    CHECK(w);
    drop(w);
}

static void reschedule_self_cb(tw_wheel *w, tw_id id, void *user_data)
{
    rec_push(w, id, user_data);
    if (rec.n == 1)
        rs.ret = tw_reschedule(w, id, rs.delay);
}

static void test_own_oneshot_reschedule_returns_0(void **state)
{
    (void)state;
    tw_wheel *w = new_wheel(0);
    rs.delay = 5;
    rs.ret = -100;
    assert_int_not_equal(tw_add(w, 3, reschedule_self_cb, TAG(1)), 0);
    assert_int_equal(tw_advance(w, 100), 1);
    assert_int_equal(rs.ret, 0);
    ASSERT_NFIRES(1);
    assert_int_equal(tw_count(w), 0);
    drop(w);
}

/* A periodic moving itself: next firing at now + delay, then every
 * interval from there. */
static void test_own_periodic_reschedule(void **state)
{
    (void)state;
    tw_wheel *w = new_wheel(0);
    rs.delay = 4;
    rs.ret = -100;
    tw_id p = tw_add_periodic(w, 10, 10, reschedule_self_cb, TAG(1));
    assert_int_equal(tw_advance(w, 40), 4);
    assert_int_equal(rs.ret, 1);
    ASSERT_FIRE(0, 10, 1);
    ASSERT_FIRE(1, 14, 1);
    ASSERT_FIRE(2, 24, 1);
    ASSERT_FIRE(3, 34, 1);
    assert_int_equal(tw_remaining(w, p), 4);
    CHECK(w);
    drop(w);
}

/* From outside: a periodic moved between firings keeps its interval from
 * the new due tick. */
static void test_periodic_reschedule_from_outside(void **state)
{
    (void)state;
    tw_wheel *w = new_wheel(0);
    tw_id p = tw_add_periodic(w, 10, 10, rec_cb, TAG(1));
    assert_int_equal(tw_advance(w, 15), 1);
    assert_int_equal(tw_remaining(w, p), 5);
    assert_int_equal(tw_reschedule(w, p, 3), 1);
    assert_int_equal(tw_remaining(w, p), 3);
    assert_int_equal(tw_advance(w, 25), 3);
    ASSERT_FIRE(0, 10, 1);
    ASSERT_FIRE(1, 18, 1);
    ASSERT_FIRE(2, 28, 1);
    ASSERT_FIRE(3, 38, 1);
    assert_int_equal(tw_count(w), 1);
    assert_int_equal(tw_reschedule(w, p, 0), 1);
    assert_int_equal(tw_advance(w, 0), 1);
    ASSERT_FIRE(4, 40, 1);
    assert_int_equal(tw_remaining(w, p), 10);
    CHECK(w);
    drop(w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_move_later_and_earlier),
        T(test_move_to_zero_runs_next_call),
        T(test_reschedule_is_new_insertion),
        T(test_erange_leaves_timer_untouched),
        T(test_max_delay_reschedule),
        T(test_stale_and_bad_ids),
        T(test_heartbeat_pattern),
        T(test_callback_moves_other_timer),
        T(test_callback_moves_timer_in_batch),
        T(test_callback_moves_timer_in_batch_to_zero),
        T(test_own_oneshot_reschedule_returns_0),
        T(test_own_periodic_reschedule),
        T(test_periodic_reschedule_from_outside),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
