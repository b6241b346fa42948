/* Wheel lifetime: config defaults, create with every lock and clock kind,
 * start_tick, independence of wheels, destroy with pending timers, and the
 * calls that are refused while the wheel is being driven. */
#include "helpers.h"

static void test_config_defaults(void **state)
{
    (void)state;
    struct tw_config c;
    memset(&c, 0x5a, sizeof c);
    tw_config_init(&c);
    assert_int_equal(c.size, sizeof(struct tw_config));
    assert_int_equal(c.tick_us, 1000);
    assert_int_equal(c.lock, TW_LOCK_ADAPTIVE);
    assert_int_equal(c.clock, TW_CLOCK_MONOTONIC);
    assert_null(c.clock_fn);
    assert_null(c.clock_context);
    assert_null(c.realloc_fn);
    assert_null(c.alloc_context);
    assert_int_equal(c.max_timers, 0);
    assert_int_equal(c.start_tick, 0);
}

static void test_create_null_config_defaults(void **state)
{
    (void)state;
    tw_wheel *w = new_wheel_cfg(NULL);
    assert_int_equal(tw_tick_us(w), 1000);
    assert_int_equal(tw_now(w), 0);
    assert_int_equal(tw_count(w), 0);
    assert_int_equal(tw_next_expiry(w), TW_NEVER);
    assert_int_equal(tw_timeout_ms(w), -1);
    CHECK(w);
    drop(w);
}

/* Each lock kind works for single-threaded use. */
static void test_every_lock_kind(void **state)
{
    (void)state;
    const int kinds[] = {TW_LOCK_SPIN, TW_LOCK_MUTEX, TW_LOCK_NONE, TW_LOCK_ADAPTIVE};
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
        rec_reset();
        struct tw_config c;
        tw_config_init(&c);
        c.lock = kinds[k];
        tw_wheel *w = new_wheel_cfg(&c);
        assert_int_not_equal(tw_add(w, 3, rec_cb, TAG(1)), 0);
        assert_int_not_equal(tw_add(w, 1, rec_cb, TAG(2)), 0);
        assert_int_equal(tw_advance(w, 5), 2);
        ASSERT_NFIRES(2);
        ASSERT_FIRE(0, 1, 2);
        ASSERT_FIRE(1, 3, 1);
        CHECK(w);
        drop(w);
    }
}

static void test_every_clock_kind(void **state)
{
    (void)state;
    const int kinds[] = {TW_CLOCK_MONOTONIC, TW_CLOCK_MONOTONIC_COARSE};
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
        struct tw_config c;
        tw_config_init(&c);
        c.lock = TW_LOCK_NONE;
        c.clock = kinds[k];
        tw_wheel *w = new_wheel_cfg(&c);
        /* The real clock may or may not have moved a tick: only the sign of
         * the result is fixed. */
        assert_true(tw_expire(w) >= 0);
        assert_true(tw_now(w) < 1000000);
        CHECK(w);
        drop(w);
    }
}

static void test_tick_length_is_kept(void **state)
{
    (void)state;
    const uint32_t lengths[] = {TW_MIN_TICK_US, 1000, 10000, TW_MAX_TICK_US};
    for (size_t k = 0; k < sizeof lengths / sizeof lengths[0]; k++) {
        struct tw_config c;
        tw_config_init(&c);
        c.tick_us = lengths[k];
        tw_wheel *w = new_wheel_cfg(&c);
        assert_int_equal(tw_tick_us(w), lengths[k]);
        drop(w);
    }
}

static void test_start_tick(void **state)
{
    (void)state;
    const uint64_t starts[] = {1, 255, UINT64_C(1) << 32,
                               (UINT64_C(1) << 32) - 1, TW_MAX_TICK - 1000,
                               TW_MAX_TICK};
    for (size_t k = 0; k < sizeof starts / sizeof starts[0]; k++) {
        rec_reset();
        tw_wheel *w = new_wheel(starts[k]);
        assert_int_equal(tw_now(w), starts[k]);
        CHECK(w);
        if (starts[k] <= TW_MAX_TICK - 10) {
            assert_int_not_equal(tw_add(w, 7, rec_cb, TAG(1)), 0);
            assert_int_equal(tw_advance(w, 10), 1);
            ASSERT_FIRE(0, starts[k] + 7, 1);
            assert_int_equal(tw_now(w), starts[k] + 10);
        }
        drop(w);
    }
}

/* The config is copied: changing it after tw_create changes nothing. */
static void test_config_is_copied(void **state)
{
    (void)state;
    struct tw_config c;
    tw_config_init(&c);
    c.lock = TW_LOCK_NONE;
    c.tick_us = 250;
    tw_wheel *w = new_wheel_cfg(&c);
    c.tick_us = 999;
    c.max_timers = 1;
    assert_int_equal(tw_tick_us(w), 250);
    assert_int_not_equal(tw_add(w, 1, rec_cb, TAG(1)), 0);
    assert_int_not_equal(tw_add(w, 1, rec_cb, TAG(2)), 0);
    drop(w);
}

/* No shared state: driving one wheel never fires another wheel's timers. */
static void test_wheels_are_independent(void **state)
{
    (void)state;
    tw_wheel *a = new_wheel(0);
    tw_wheel *b = new_wheel(1000);
    assert_int_not_equal(tw_add(a, 5, rec_cb, TAG(1)), 0);
    assert_int_not_equal(tw_add(b, 5, rec_cb, TAG(2)), 0);
    assert_int_equal(tw_advance(b, 10), 1);
    ASSERT_NFIRES(1);
    ASSERT_FIRE(0, 1005, 2);
    assert_int_equal(tw_now(a), 0);
    assert_int_equal(tw_count(a), 1);
    assert_int_equal(tw_count(b), 0);
    assert_int_equal(tw_advance(a, 5), 1);
    ASSERT_FIRE(1, 5, 1);
    drop(a);
    drop(b);
}

/* Destroy never fires pending timers, whatever their level. */
static void test_destroy_with_pending_fires_nothing(void **state)
{
    (void)state;
    tw_wheel *w = new_wheel(0);
    const uint64_t delays[] = {0, 1, 255, 256, 1u << 14, 1u << 20, 1u << 26,
                               TW_MAX_DELAY};
    for (size_t i = 0; i < sizeof delays / sizeof delays[0]; i++)
        assert_int_not_equal(tw_add(w, delays[i], rec_cb, TAG(i)), 0);
    assert_int_not_equal(tw_add_periodic(w, 3, 5, rec_cb, TAG(99)), 0);
    assert_int_equal(tw_count(w), 9);
    drop(w);
    ASSERT_NFIRES(0);
}

static void test_destroy_null(void **state)
{
    (void)state;
    assert_int_equal(tw_destroy(NULL), 0);
}

/* ---- calls refused while driving --------------------------------------- */

static struct {
    int64_t advance_ret;
    int64_t expire_ret;
    int calls;
} inside;

static void reentrant_cb(tw_wheel *w, tw_id id, void *user_data)
{
    (void)id;
    (void)user_data;
    inside.calls++;
    inside.advance_ret = tw_advance(w, 1);
    inside.expire_ret = tw_expire(w);
}

static void test_drive_from_callback_is_busy(void **state)
{
    (void)state;
    memset(&inside, 0, sizeof inside);
    tw_wheel *w = new_wheel(0);
    assert_int_not_equal(tw_add(w, 2, reentrant_cb, NULL), 0);
    assert_int_not_equal(tw_add(w, 4, rec_cb, TAG(7)), 0);
    assert_int_equal(tw_advance(w, 3), 1);
    assert_int_equal(inside.calls, 1);
    assert_int_equal(inside.advance_ret, -EBUSY);
    assert_int_equal(inside.expire_ret, -EBUSY);
    /* Nothing moved: the refused advance did not run the tick-4 timer. */
    assert_int_equal(tw_now(w), 3);
    ASSERT_NFIRES(0);
    assert_int_equal(tw_count(w), 1);
    CHECK(w);
    assert_int_equal(tw_advance(w, 1), 1);
    ASSERT_FIRE(0, 4, 7);
    drop(w);
}

/* ---- a shutdown timer: tw_destroy from a callback ----------------------- */

enum { SHUTDOWN_DATUMS = 8 };

static struct {
    tw_wheel *wheel;
    int destroy_ret;
    tw_id add_after;      /* tw_add after the destroy, same callback */
    int add_errno;
    int cancel_after;     /* tw_cancel of a neighbour after the destroy */
    int released_at_destroy; /* releases done when tw_destroy returned */
    int reschedule_after; /* tw_reschedule of a neighbour after it */
    tw_id neighbour;
    int ran[SHUTDOWN_DATUMS];
    int released[SHUTDOWN_DATUMS];
    int released_before_destroyed; /* releases counted when on_destroy ran */
    int destroyed;        /* on_destroy calls */
} shutdown;

static void shutdown_release(void *user_data)
{
    shutdown.released[UNTAG(user_data)]++;
}

static void shutdown_destroyed(void *context)
{
    int i;
    assert_ptr_equal(context, &shutdown);
    shutdown.destroyed++;
    for (i = 0; i < SHUTDOWN_DATUMS; i++)
        shutdown.released_before_destroyed += shutdown.released[i];
}

static void shutdown_plain_cb(tw_wheel *w, tw_id id, void *user_data)
{
    (void)w, (void)id;
    shutdown.ran[UNTAG(user_data)]++;
}

/* Destroys its wheel, then uses it as the rest of a server's teardown
 * would (members' destructors cancelling and scheduling). */
static void shutdown_cb(tw_wheel *w, tw_id id, void *user_data)
{
    (void)id;
    shutdown.ran[UNTAG(user_data)]++;
    shutdown.destroy_ret = tw_destroy(w);
    for (int i = 0; i < SHUTDOWN_DATUMS; i++)
        shutdown.released_at_destroy += shutdown.released[i];
    errno = 0;
    shutdown.add_after = tw_add_ex(w, 1, 0, shutdown_plain_cb, shutdown_release, TAG(7));
    shutdown.add_errno = errno;
    shutdown.reschedule_after = tw_reschedule(w, shutdown.neighbour, 5);
    shutdown.cancel_after = tw_cancel(w, shutdown.neighbour);
}

static struct fake_clock shutdown_clock;

static tw_wheel *shutdown_wheel(int drive)
{
    struct tw_config c;
    memset(&shutdown, 0, sizeof shutdown);
    tw_config_init(&c);
    c.drive = drive;
    c.clock_fn = read_fake_clock;
    c.clock_context = &shutdown_clock;
    shutdown_clock.us = 0;
    c.on_destroy = shutdown_destroyed;
    c.context = &shutdown;
    shutdown.wheel = tw_create(&c);
    assert_non_null(shutdown.wheel);
    return shutdown.wheel;
}

/* The batch stops after the destroying callback, every other pending datum
 * comes back once inside tw_destroy, the running one's after its callback,
 * and the wheel is freed as the driving call returns. */
static void check_shutdown(int64_t ran)
{
    int i;
    assert_int_equal(shutdown.destroy_ret, 0);
    assert_int_equal(ran, 2); /* the first timer of tick 2, then shutdown */
    assert_int_equal(shutdown.ran[0], 1);
    assert_int_equal(shutdown.ran[1], 1);
    for (i = 2; i < SHUTDOWN_DATUMS; i++)
        if (shutdown.ran[i])
            fail_msg("datum %d ran after the wheel was destroyed", i);
    assert_int_equal(shutdown.add_after, 0);
    assert_int_equal(shutdown.add_errno, EBUSY);
    assert_int_equal(shutdown.reschedule_after, 0);
    assert_int_equal(shutdown.cancel_after, 0); /* released already */
    /* everything but the running timer (1) and datum 0 (ran and released
     * before) was released inside tw_destroy, as a plain destroy does */
    assert_int_equal(shutdown.released_at_destroy, 6);
    for (i = 0; i < 7; i++)
        if (shutdown.released[i] != 1)
            fail_msg("datum %d released %d times, want once", i, shutdown.released[i]);
    assert_int_equal(shutdown.released[7], 0); /* the refused add's */
    assert_int_equal(shutdown.destroyed, 1);
    assert_int_equal(shutdown.released_before_destroyed, 7);
}

static void add_shutdown_timers(tw_wheel *w)
{
    /* tick 2: datum 0, the shutdown (1), datums 2 and 3 (same tick, after
     * it); later: a neighbour (4), a periodic (5), far away (6) */
    assert_int_not_equal(tw_add_ex(w, 2, 0, shutdown_plain_cb, shutdown_release, TAG(0)), 0);
    assert_int_not_equal(tw_add_ex(w, 2, 0, shutdown_cb, shutdown_release, TAG(1)), 0);
    assert_int_not_equal(tw_add_ex(w, 2, 0, shutdown_plain_cb, shutdown_release, TAG(2)), 0);
    assert_int_not_equal(tw_add_ex(w, 2, 0, shutdown_plain_cb, shutdown_release, TAG(3)), 0);
    shutdown.neighbour = tw_add_ex(w, 3, 0, shutdown_plain_cb, shutdown_release, TAG(4));
    assert_int_not_equal(shutdown.neighbour, 0);
    assert_int_not_equal(tw_add_ex(w, 1, 1, shutdown_plain_cb, shutdown_release, TAG(5)), 0);
    assert_int_not_equal(tw_add_ex(w, 100000, 0, shutdown_plain_cb, shutdown_release, TAG(6)), 0);
}

static void test_destroy_from_callback_advance(void **state)
{
    (void)state;
    tw_wheel *w = shutdown_wheel(TW_DRIVE_TICKS);
    add_shutdown_timers(w);
    /* datum 5 (every tick from tick 1) ran at tick 1: count it apart */
    int64_t ran = tw_advance(w, 10);
    assert_int_equal(shutdown.ran[5], 1);
    shutdown.ran[5] = 0;
    check_shutdown(ran - 1);
}

static void test_destroy_from_callback_expire(void **state)
{
    (void)state;
    tw_wheel *w = shutdown_wheel(TW_DRIVE_CLOCK);
    add_shutdown_timers(w);
    shutdown_clock.us = 10 * 1000; /* ten 1 ms ticks */
    int64_t ran = tw_expire(w);
    assert_int_equal(shutdown.ran[5], 1);
    shutdown.ran[5] = 0;
    check_shutdown(ran - 1);
}

/* From a release hook run by the driver (a one-shot's end): the same. */
static void shutdown_in_hook(void *user_data)
{
    shutdown_release(user_data);
    shutdown.destroy_ret = tw_destroy(shutdown.wheel);
}

static void test_destroy_from_driver_hook(void **state)
{
    (void)state;
    tw_wheel *w = shutdown_wheel(TW_DRIVE_TICKS);
    assert_int_not_equal(tw_add_ex(w, 1, 0, shutdown_plain_cb, shutdown_in_hook, TAG(0)), 0);
    assert_int_not_equal(tw_add_ex(w, 1, 0, shutdown_plain_cb, shutdown_release, TAG(1)), 0);
    assert_int_not_equal(tw_add_ex(w, 2, 0, shutdown_plain_cb, shutdown_release, TAG(2)), 0);
    assert_int_equal(tw_advance(w, 5), 1);
    assert_int_equal(shutdown.destroy_ret, 0);
    assert_int_equal(shutdown.ran[0], 1);
    assert_int_equal(shutdown.ran[1] + shutdown.ran[2], 0);
    assert_int_equal(shutdown.released[0] + shutdown.released[1] + shutdown.released[2], 3);
    assert_int_equal(shutdown.destroyed, 1);
}

/* A second tw_destroy in the same callback is refused, not run twice. */
static void destroy_twice_cb(tw_wheel *w, tw_id id, void *user_data)
{
    (void)id, (void)user_data;
    shutdown.destroy_ret = tw_destroy(w);
    shutdown.cancel_after = tw_destroy(w);
}

static void test_destroy_twice_from_callback(void **state)
{
    (void)state;
    tw_wheel *w = shutdown_wheel(TW_DRIVE_TICKS);
    assert_int_not_equal(tw_add(w, 1, destroy_twice_cb, NULL), 0);
    assert_int_equal(tw_advance(w, 1), 1);
    assert_int_equal(shutdown.destroy_ret, 0);
    assert_int_equal(shutdown.cancel_after, -EBUSY);
    assert_int_equal(shutdown.destroyed, 1);
}

/* A periodic timer that destroys the wheel: it runs once. Here it is due
 * behind schedule (added with first 0 during a call that went on to tick
 * 10), so the next call runs it at once and its re-arm lands in the batch
 * being dispatched: only the stop after the destroying callback keeps it
 * from running again in the same call. */
static int periodic_runs;
static void destroy_periodic_cb(tw_wheel *w, tw_id id, void *user_data)
{
    (void)id, (void)user_data;
    if (periodic_runs++ == 0)
        shutdown.destroy_ret = tw_destroy(w);
}

static void add_behind_schedule_cb(tw_wheel *w, tw_id id, void *user_data)
{
    (void)id, (void)user_data;
    assert_int_not_equal(tw_add_periodic(w, 0, 1, destroy_periodic_cb, NULL), 0);
}

static void test_destroy_from_periodic_callback(void **state)
{
    (void)state;
    tw_wheel *w = shutdown_wheel(TW_DRIVE_TICKS);
    periodic_runs = 0;
    assert_int_not_equal(tw_add(w, 1, add_behind_schedule_cb, NULL), 0);
    assert_int_equal(tw_advance(w, 10), 1);
    assert_int_equal(tw_advance(w, 1), 1); /* the periodic, once */
    assert_int_equal(periodic_runs, 1);
    assert_int_equal(shutdown.destroy_ret, 0);
    assert_int_equal(shutdown.destroyed, 1);

    /* and one on time, driven across many of its periods in one call */
    w = shutdown_wheel(TW_DRIVE_TICKS);
    periodic_runs = 0;
    assert_int_not_equal(tw_add_periodic(w, 1, 1, destroy_periodic_cb, NULL), 0);
    assert_int_equal(tw_advance(w, 10), 1);
    assert_int_equal(periodic_runs, 1);
    assert_int_equal(shutdown.destroyed, 1);
}

/* A periodic timer that moved itself, then destroyed the wheel, from its
 * callback: it is linked again while it runs, so the destroy finds it in a
 * slot; its user data must still come back once, after the callback. */
static tw_id moved_self;
static void move_then_destroy_cb(tw_wheel *w, tw_id id, void *user_data)
{
    (void)id;
    shutdown.ran[UNTAG(user_data)]++;
    assert_int_equal(tw_reschedule(w, moved_self, 5), 1);
    shutdown.destroy_ret = tw_destroy(w);
    shutdown.released_at_destroy = shutdown.released[UNTAG(user_data)];
}

static void test_destroy_from_periodic_that_moved_itself(void **state)
{
    (void)state;
    tw_wheel *w = shutdown_wheel(TW_DRIVE_TICKS);
    moved_self = tw_add_ex(w, 1, 3, move_then_destroy_cb, shutdown_release, TAG(2));
    assert_int_not_equal(moved_self, 0);
    assert_int_equal(tw_advance(w, 10), 1);
    assert_int_equal(shutdown.destroy_ret, 0);
    assert_int_equal(shutdown.released_at_destroy, 0); /* not while it runs */
    assert_int_equal(shutdown.released[2], 1);
    assert_int_equal(shutdown.destroyed, 1);
}

/* Deferred to a tw_cancel (its release hook destroyed the wheel): the rest
 * of that hook cannot add or reschedule either. */
static tw_id deferred_other;
static void destroy_then_add_release(void *user_data)
{
    shutdown_release(user_data);
    shutdown.destroy_ret = tw_destroy(shutdown.wheel);
    errno = 0;
    shutdown.add_after = tw_add(shutdown.wheel, 1, shutdown_plain_cb, NULL);
    shutdown.add_errno = errno;
    shutdown.reschedule_after = tw_reschedule(shutdown.wheel, deferred_other, 9);
}

static void test_destroy_deferred_to_cancel_refuses_adds(void **state)
{
    (void)state;
    tw_wheel *w = shutdown_wheel(TW_DRIVE_TICKS);
    tw_id self = tw_add_ex(w, 5, 0, shutdown_plain_cb, destroy_then_add_release, TAG(0));
    deferred_other = tw_add_ex(w, 6, 0, shutdown_plain_cb, shutdown_release, TAG(1));
    assert_int_equal(tw_cancel(w, self), 1); /* the wheel is gone after this */
    assert_int_equal(shutdown.destroy_ret, 0);
    assert_int_equal(shutdown.add_after, 0);
    assert_int_equal(shutdown.add_errno, EBUSY);
    assert_int_equal(shutdown.reschedule_after, 0);
    assert_int_equal(shutdown.released[0] + shutdown.released[1], 2);
    assert_int_equal(shutdown.destroyed, 1);
}

/* on_destroy from plain tw_destroy too, after every hook. */
static void test_on_destroy_plain(void **state)
{
    (void)state;
    tw_wheel *w = shutdown_wheel(TW_DRIVE_TICKS);
    assert_int_not_equal(tw_add_ex(w, 4, 0, shutdown_plain_cb, shutdown_release, TAG(0)), 0);
    assert_int_not_equal(tw_add_ex(w, 900, 3, shutdown_plain_cb, shutdown_release, TAG(1)), 0);
    assert_ptr_equal(tw_context(w), &shutdown);
    assert_null(tw_context(NULL));
    assert_int_equal(tw_destroy(w), 0);
    assert_int_equal(shutdown.destroyed, 1);
    assert_int_equal(shutdown.released_before_destroyed, 2);
}

/* A wheel can be created and destroyed many times without leaking (the
 * sanitizer and valgrind runs check the leak part). */
static void test_create_destroy_loop(void **state)
{
    (void)state;
    for (int i = 0; i < 200; i++) {
        tw_wheel *w = new_wheel((uint64_t)i);
        for (int j = 0; j < i; j++)
            assert_int_not_equal(tw_add(w, (uint64_t)j * 97, rec_cb, NULL),
                                 0);
        drop(w);
    }
    ASSERT_NFIRES(0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_config_defaults),
        T(test_create_null_config_defaults),
        T(test_every_lock_kind),
        T(test_every_clock_kind),
        T(test_tick_length_is_kept),
        T(test_start_tick),
        T(test_config_is_copied),
        T(test_wheels_are_independent),
        T(test_destroy_with_pending_fires_nothing),
        T(test_destroy_null),
        T(test_drive_from_callback_is_busy),
        T(test_destroy_from_callback_advance),
        T(test_destroy_from_callback_expire),
        T(test_destroy_from_driver_hook),
        T(test_destroy_twice_from_callback),
        T(test_destroy_from_periodic_callback),
        T(test_destroy_from_periodic_that_moved_itself),
        T(test_destroy_deferred_to_cancel_refuses_adds),
        T(test_on_destroy_plain),
        T(test_create_destroy_loop),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
