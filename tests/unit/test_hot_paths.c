/*
 * tw_cancel and tw_reschedule take a fast path inline when their lock try
 * succeeds (every uncontended adaptive or spin lock, and TW_LOCK_NONE), and
 * a path out of line otherwise (a lock taken by another thread, and always
 * the mutex, which has no try without a call). Both paths must give the
 * same results. Single-threaded, so each kind's path is fixed:
 *
 *   - a periodic timer's callback that moves its own timer (placed again
 *     while the callback still runs) and then cancels it: the cancel
 *     returns 1 and the node is freed once, when the callback returns,
 *     not at the cancel as well (tw_check sees a node freed twice);
 *   - timers due at one tick fire in the order of their last add or
 *     reschedule, whichever path the reschedule took (tw_reschedule_ex
 *     always takes the one out of line), moved now or in place;
 *   - a clock-driven wheel's reschedule counts from the clock reading
 *     taken before the lock, on the mutex's path too, not from `now`;
 *   - a wheel not yet driven (TW_DRIVE_AUTO) on a clock: a reschedule takes
 *     the clock's reading as the reference point, as an add does, so that
 *     a first tw_expire long after creation does not find the moved timer
 *     due early.
 */
#include "helpers.h"

static const int kinds[] = {TW_LOCK_NONE, TW_LOCK_ADAPTIVE, TW_LOCK_SPIN, TW_LOCK_MUTEX};
#define KINDS (sizeof kinds / sizeof kinds[0])

static tw_wheel *kind_wheel(int kind)
{
    struct tw_config c;
    tw_config_init(&c);
    c.lock = kind;
    return new_wheel_cfg(&c);
}

/* ---- a running timer, moved and then cancelled by its own callback ----- */

static struct {
    int calls;
    int moved, cancelled, cancelled_again; /* the calls' results */
} own;

static void move_then_cancel_cb(tw_wheel *w, tw_id id, void *user_data)
{
    rec_push(w, id, user_data);
    if (own.calls++)
        return;
    own.moved = tw_reschedule(w, id, 5);      /* placed again: it is live */
    own.cancelled = tw_cancel(w, id);         /* its callback still runs */
    own.cancelled_again = tw_cancel(w, id);
}

static void test_cancel_own_moved_timer(void **state)
{
    size_t k;
    (void)state;
    for (k = 0; k < KINDS; k++) {
        tw_wheel *w = kind_wheel(kinds[k]);
        tw_id a, b;
        struct tw_stats s;
        rec_reset();
        memset(&own, 0, sizeof own);
        assert_int_not_equal(tw_add_periodic(w, 10, 10, move_then_cancel_cb, TAG(1)), 0);
        assert_int_not_equal(tw_add(w, 30, rec_cb, TAG(2)), 0);
        assert_int_equal(tw_advance(w, 10), 1);
        assert_int_equal(own.moved, 1);
        assert_int_equal(own.cancelled, 1);
        assert_int_equal(own.cancelled_again, 0);
        CHECK(w); /* the node was freed once */
        assert_int_equal(tw_count(w), 1);
        s = get_stats(w);
        assert_int_equal(s.cancelled, 1);
        assert_int_equal(s.pool_free, s.pool_capacity - 2); /* and node 0 */
        /* the freed node serves one new timer, not two */
        a = tw_add(w, 3, rec_cb, TAG(3));
        b = tw_add(w, 4, rec_cb, TAG(4));
        assert_int_not_equal(a, 0);
        assert_int_not_equal(b, 0);
        assert_int_not_equal((uint32_t)a, (uint32_t)b);
        CHECK(w);
        assert_int_equal(tw_advance(w, 40), 3);
        ASSERT_NFIRES(4);
        ASSERT_FIRE(0, 10, 1);
        ASSERT_FIRE(1, 13, 3);
        ASSERT_FIRE(2, 14, 4);
        ASSERT_FIRE(3, 30, 2);
        assert_int_equal(own.calls, 1);
        CHECK(w);
        drop(w);
    }
}

/* ---- the order of one tick's timers, on every path --------------------- */

static void test_reschedule_order_on_every_path(void **state)
{
    size_t k;
    (void)state;
    for (k = 0; k < KINDS; k++) {
        tw_wheel *w = kind_wheel(kinds[k]);
        tw_id a, b, c, d, e;
        rec_reset();
        a = tw_add(w, 10, rec_cb, TAG(1)); /* one near slot: a b c */
        b = tw_add(w, 10, rec_cb, TAG(2));
        c = tw_add(w, 10, rec_cb, TAG(3));
        d = tw_add(w, 4990, rec_cb, TAG(4)); /* one level slot */
        e = tw_add(w, 5000, rec_cb, TAG(5));
        assert_true(a && b && c && d && e);
        assert_int_equal(tw_reschedule_ex(w, a, 10, 0), 1); /* b c a */
        assert_int_equal(tw_reschedule(w, b, 10), 1);       /* c a b */
        assert_int_equal(tw_reschedule_ex(w, d, 5000, 0), 1); /* later: e d */
        CHECK(w);
        assert_int_equal(tw_advance(w, 5000), 5);
        ASSERT_NFIRES(5);
        ASSERT_FIRE(0, 10, 3);
        ASSERT_FIRE(1, 10, 1);
        ASSERT_FIRE(2, 10, 2);
        ASSERT_FIRE(3, 5000, 5);
        ASSERT_FIRE(4, 5000, 4);
        CHECK(w);
        drop(w);
    }
}

/* ---- the clock reading, on every path ----------------------------------- */

/* A clock-driven wheel whose driver has not run for 50 ticks: a reschedule
 * by 20 ticks is due 20 ticks after the clock, not after `now`. */
static void test_reschedule_counts_from_clock(void **state)
{
    size_t k;
    (void)state;
    for (k = 0; k < KINDS; k++) {
        struct fake_clock clock = {1000000, 0};
        tw_wheel *w = new_fake_clock_wheel_locked(&clock, TW_DRIVE_CLOCK, kinds[k]);
        tw_id id;
        rec_reset();
        id = tw_add(w, 100, rec_cb, TAG(1));
        assert_int_not_equal(id, 0);
        clock.us += 50000; /* tick 50, not driven */
        assert_int_equal(tw_reschedule(w, id, 20), 1); /* due at 70 */
        assert_int_equal(tw_now(w), 0);
        assert_int_equal(tw_expire(w), 0);
        assert_int_equal(tw_now(w), 50);
        clock.us += 19000;
        assert_int_equal(tw_expire(w), 0); /* 69 */
        clock.us += 1000;
        assert_int_equal(tw_expire(w), 1); /* 70 */
        ASSERT_NFIRES(1);
        ASSERT_FIRE(0, 70, 1);
        /* and tw_reschedule_ex, which always takes the path out of line */
        id = tw_add(w, 100, rec_cb, TAG(2));
        clock.us += 30000; /* tick 100 */
        assert_int_equal(tw_reschedule_ex(w, id, 20, 0), 1); /* due at 120 */
        clock.us += 19000;
        assert_int_equal(tw_expire(w), 0); /* 119 */
        clock.us += 1000;
        assert_int_equal(tw_expire(w), 1); /* 120 */
        ASSERT_NFIRES(2);
        ASSERT_FIRE(1, 120, 2);
        CHECK(w);
        drop(w);
    }
}

/* A wheel not yet driven counts from `now`, and moves its clock reference
 * point to the call's reading: a reschedule made long after creation keeps
 * the first tw_expire from finding its timer due at once. */
static void test_undriven_reschedule_takes_reference(void **state)
{
    size_t k;
    (void)state;
    for (k = 0; k < KINDS; k++) {
        struct fake_clock clock = {1000000, 0};
        tw_wheel *w = new_fake_clock_wheel_locked(&clock, TW_DRIVE_AUTO, kinds[k]);
        tw_id id;
        rec_reset();
        id = tw_add(w, 1000, rec_cb, TAG(1)); /* reference: 1 s */
        assert_int_not_equal(id, 0);
        clock.us += 500000; /* 500 ticks later, nothing driven */
        assert_int_equal(tw_reschedule(w, id, 10), 1); /* tick 10 of now */
        assert_int_equal(tw_now(w), 0);
        clock.us += 9000;
        assert_int_equal(tw_expire(w), 0); /* 9 ticks since the reschedule */
        assert_int_equal(tw_now(w), 9);
        clock.us += 1000;
        assert_int_equal(tw_expire(w), 1);
        ASSERT_NFIRES(1);
        ASSERT_FIRE(0, 10, 1);
        CHECK(w);
        drop(w);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_cancel_own_moved_timer),
        T(test_reschedule_order_on_every_path),
        T(test_reschedule_counts_from_clock),
        T(test_undriven_reschedule_takes_reference),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
