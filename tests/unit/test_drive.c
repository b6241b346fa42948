/*
 * Where a delay counts from (tw_config.drive, timer.h at tw_add): on a
 * clock-driven wheel from the clock reading of the call, so an event loop
 * that adds timers before its tw_expire() never sees one fire early; on a
 * tick-driven wheel from tw_now(), exactly. All on a fake clock, 1 ms ticks.
 */
#include "helpers.h"

#define MS 1000u /* fake clock units (µs) per tick */

/* The clock the wheels of this file read, and what it said at each firing. */
static struct fake_clock clk;
static uint64_t fired_at[64];

static void clock_cb(tw_wheel *w, tw_id id, void *user_data)
{
    if (rec.n < 64)
        fired_at[rec.n] = clk.us;
    rec_push(w, id, user_data);
}

static tw_wheel *clock_wheel(int drive)
{
    return new_fake_clock_wheel_driven(&clk, drive); /* MS-long ticks */
}

/* Moves the fake clock to `us` and runs tw_expire(). */
static int64_t expire_at(tw_wheel *w, uint64_t us)
{
    clk.us = us;
    return tw_expire(w);
}

/* The report: the README's epoll loop handles events, then calls
 * tw_expire(). A 500 ms heartbeat added by an event handler after a 300 ms
 * idle wait fired 200 ms after it was added. */
static void test_add_after_idle_wait(void **state)
{
    (void)state;
    clk.us = 1000000;
    tw_wheel *w = clock_wheel(TW_DRIVE_AUTO);
    assert_int_equal(expire_at(w, 1000000), 0); /* the loop's first turn */
    clk.us += 300 * MS;                          /* epoll_wait: idle 300 ms */
    assert_int_not_equal(tw_add(w, 500, clock_cb, TAG(1)), 0);
    assert_int_equal(tw_now(w), 0); /* the stale tick the old code counted from */
    assert_int_equal(expire_at(w, 1000000 + 300 * MS), 0);
    assert_int_equal(expire_at(w, 1000000 + 800 * MS - 1), 0); /* 1 µs short */
    assert_int_equal(expire_at(w, 1000000 + 800 * MS), 1);
    assert_int_equal(fired_at[0], 1000000 + 800 * MS);
    CHECK(w);
}

/* A frame loop: the clock is 956 µs into a tick when a 1-tick timer is
 * added; it must wait a whole tick of the clock (the old code fired it
 * 44 µs later), and at most one more. */
static void test_add_mid_tick(void **state)
{
    (void)state;
    clk.us = 0;
    tw_wheel *w = clock_wheel(TW_DRIVE_CLOCK);
    assert_int_equal(expire_at(w, 5 * MS), 0);
    clk.us = 5 * MS + 956;
    assert_int_not_equal(tw_add(w, 1, clock_cb, TAG(1)), 0);
    assert_int_equal(expire_at(w, 6 * MS), 0);
    assert_int_equal(expire_at(w, 6 * MS + 955), 0);
    assert_int_equal(expire_at(w, 7 * MS), 1); /* the tick after: bounded */
    assert_true(fired_at[0] >= 5 * MS + 956 + MS);
    assert_true(fired_at[0] <= 5 * MS + 956 + 2 * MS);
    CHECK(w);
}

/* Reschedule counts from the clock too; so does an add from a callback
 * that runs while the driver catches up, long after its due tick. */
static void test_reschedule_and_callback_count_from_clock(void **state)
{
    (void)state;
    clk.us = 0;
    tw_wheel *w = clock_wheel(TW_DRIVE_AUTO);
    assert_int_equal(expire_at(w, 0), 0);
    tw_id id = tw_add(w, 10, clock_cb, TAG(1));
    assert_int_not_equal(id, 0);
    clk.us = 40 * MS + 500;
    assert_int_equal(tw_reschedule(w, id, 10), 1);
    assert_int_equal(expire_at(w, 50 * MS + 499), 0);
    assert_int_equal(expire_at(w, 51 * MS), 1);
    assert_int_equal(fired_at[0], 51 * MS);
    CHECK(w);
}

static uint64_t child_added_at;

static void spawn_cb(tw_wheel *w, tw_id id, void *user_data)
{
    clock_cb(w, id, user_data);
    child_added_at = clk.us;
    assert_int_not_equal(tw_add(w, 3, clock_cb, TAG(2)), 0);
}

static void test_add_from_late_callback(void **state)
{
    (void)state;
    clk.us = 0;
    tw_wheel *w = clock_wheel(TW_DRIVE_CLOCK);
    assert_int_not_equal(tw_add(w, 2, spawn_cb, TAG(1)), 0);
    /* the driver comes 100 ms late: the callback runs at tw_now() 2, but the
       child's 3 ticks count from the clock, 100 ms */
    assert_int_equal(expire_at(w, 100 * MS), 1);
    assert_int_equal(rec.f[0].tick, 2);
    assert_int_equal(expire_at(w, 102 * MS + 999), 0);
    assert_int_equal(expire_at(w, 103 * MS), 1);
    assert_int_equal(rec.f[1].tag, 2);
    assert_true(fired_at[1] >= child_added_at + 3 * MS);
    CHECK(w);
}

/* Delay 0 on a clock-driven wheel whose tw_now() lags: the next tw_expire
 * runs it, as for any wheel. */
static void test_delay_zero_next_expire(void **state)
{
    (void)state;
    clk.us = 0;
    tw_wheel *w = clock_wheel(TW_DRIVE_CLOCK);
    clk.us = 30 * MS + 700;
    assert_int_not_equal(tw_add(w, 0, clock_cb, TAG(1)), 0);
    assert_int_equal(tw_timeout_ms(w), 0);
    assert_int_equal(expire_at(w, 30 * MS + 700), 1);
    CHECK(w);
}

/* A periodic timer started while tw_now() lags the clock by 350 ms: the
 * grid starts at the call, so there is no burst of "missed" firings. */
static void test_periodic_no_burst(void **state)
{
    (void)state;
    clk.us = 0;
    tw_wheel *w = clock_wheel(TW_DRIVE_AUTO);
    assert_int_equal(expire_at(w, 0), 0);
    clk.us = 350 * MS + 200;
    assert_int_not_equal(tw_add_periodic(w, 100, 100, clock_cb, TAG(1)), 0);
    assert_int_not_equal(tw_add_periodic(w, 0, 100, clock_cb, TAG(2)), 0);
    assert_int_equal(expire_at(w, 350 * MS + 200), 1); /* first = 0: once */
    assert_int_equal(expire_at(w, 450 * MS + 199), 1); /* TAG 2's grid: tick 450 */
    assert_int_equal(rec.f[1].tag, 2);
    assert_int_equal(expire_at(w, 451 * MS), 1); /* TAG 1: 100 ms after the call */
    assert_int_equal(rec.f[2].tag, 1);
    assert_true(fired_at[2] >= 450 * MS + 200);
    for (uint64_t k = 1; k <= 4; k++) /* then every 100 ms, one firing each */
        assert_int_equal(expire_at(w, (451 + 100 * k) * MS), 2);
    CHECK(w);
}

/* Tick-driven wheels keep delays exact in ticks whatever the clock does. */
static void test_tick_driven_exact(void **state)
{
    (void)state;
    static const int drives[] = {TW_DRIVE_TICKS, TW_DRIVE_AUTO};
    for (int i = 0; i < 2; i++) {
        rec_reset();
        clk.us = 0;
        tw_wheel *w = clock_wheel(drives[i]);
        assert_int_equal(tw_advance(w, 1), 0); /* AUTO: tick-driven from here */
        clk.us = 7 * MS + 300;
        assert_int_not_equal(tw_add(w, 5, clock_cb, TAG(1)), 0);
        tw_id id = tw_add(w, 9, clock_cb, TAG(2));
        assert_int_equal(tw_reschedule(w, id, 6), 1);
        assert_int_equal(tw_advance(w, 4), 0);
        assert_int_equal(tw_advance(w, 1), 1);
        assert_int_equal(tw_advance(w, 1), 1);
        ASSERT_FIRE(0, 6, 1);
        ASSERT_FIRE(1, 7, 2);
        /* the timeout is in ticks: the clock says nothing about tw_advance */
        assert_int_not_equal(tw_add(w, 40, clock_cb, TAG(3)), 0);
        clk.us = 1000 * MS;
        assert_int_equal(tw_timeout_ms(w), 40);
        drop(w);
    }
}

/* AUTO before its first driving call counts in ticks and restarts its
 * clock at each add, so setup-time timers are not early by the clock
 * either: here the first of them is late by the 100 ms between the adds. */
static void test_auto_setup_before_first_expire(void **state)
{
    (void)state;
    clk.us = 0;
    tw_wheel *w = clock_wheel(TW_DRIVE_AUTO);
    clk.us = 100 * MS;
    assert_int_not_equal(tw_add(w, 50, clock_cb, TAG(1)), 0);
    clk.us = 200 * MS;
    assert_int_not_equal(tw_add(w, 50, clock_cb, TAG(2)), 0);
    assert_int_equal(tw_timeout_ms(w), 50);
    assert_int_equal(expire_at(w, 250 * MS - 1), 0);
    assert_int_equal(expire_at(w, 250 * MS), 2);
    assert_int_equal(tw_now(w), 50);
    CHECK(w);
}

/* A callback that re-adds itself with delay 0 while the driver catches up
 * runs once per call: its due tick is the clock's, which the call is walking
 * to, but it waits for the next call like any delay 0 made during one. */
static int readds_left;

static void readd_cb(tw_wheel *w, tw_id id, void *user_data)
{
    clock_cb(w, id, user_data);
    if (readds_left-- > 0)
        assert_int_not_equal(tw_add(w, 0, readd_cb, user_data), 0);
}

static void test_delay_zero_from_callback_waits(void **state)
{
    (void)state;
    clk.us = 0;
    tw_wheel *w = clock_wheel(TW_DRIVE_CLOCK);
    readds_left = 3;
    assert_int_not_equal(tw_add(w, 5, readd_cb, TAG(1)), 0);
    assert_int_equal(expire_at(w, 100 * MS + 500), 1); /* not 4 */
    assert_int_equal(tw_next_expiry(w), 0);
    assert_int_equal(expire_at(w, 100 * MS + 500), 1); /* same clock: next call */
    ASSERT_FIRE(1, 100, 1);
    assert_int_equal(expire_at(w, 100 * MS + 600), 1);
    assert_int_equal(expire_at(w, 100 * MS + 600), 1);
    assert_int_equal(expire_at(w, 100 * MS + 600), 0);
    CHECK(w);
}

/* A custom clock that now and then reads 1 µs lower: each re-base keeps the
 * part of the tick already gone, so the wheel does not stall (it used to
 * restart the tick at every step back, and never reached tick 1). */
static void test_jittery_clock_keeps_going(void **state)
{
    (void)state;
    clk.us = 0;
    tw_wheel *w = clock_wheel(TW_DRIVE_CLOCK);
    assert_int_not_equal(tw_add(w, 10, clock_cb, TAG(1)), 0);
    int turns = 0;
    while (rec.n == 0 && turns < 1000) {
        turns++;
        assert_true(expire_at(w, clk.us + 600) >= 0);
        assert_true(expire_at(w, clk.us - 1) >= 0);
        clk.us += 1;
    }
    ASSERT_NFIRES(1);
    assert_true(fired_at[0] >= 10 * MS);
    assert_true(turns <= 19); /* 10 ms of clock in 600 µs turns, give or take */
    assert_true(get_stats(w).rebases >= 16);
    CHECK(w);
}

/* tw_advance moved a clock-driven wheel 10 ticks ahead of its clock, then
 * the clock stepped back: the re-base keeps that lead, so a timer the
 * advance did not reach still waits for its delay by the clock. */
static void test_rebase_keeps_advance_lead(void **state)
{
    (void)state;
    clk.us = 1000 * MS;
    tw_wheel *w = clock_wheel(TW_DRIVE_CLOCK);
    assert_int_not_equal(tw_add(w, 20, clock_cb, TAG(1)), 0);
    assert_int_equal(tw_advance(w, 10), 0);
    assert_int_equal(expire_at(w, 1000 * MS - 1), 0); /* back 1 µs: re-base */
    assert_int_equal(get_stats(w).rebases, 1);
    assert_int_equal(expire_at(w, 1010 * MS), 0); /* the old re-base fired it */
    assert_int_equal(tw_now(w), 10);
    assert_int_equal(expire_at(w, 1020 * MS - 2), 0);
    assert_int_equal(expire_at(w, 1020 * MS), 1); /* 1 µs sooner: the step back */
    CHECK(w);
}

/* TW_DRIVE_CLOCK counts from the clock from creation on. */
static void test_clock_from_creation(void **state)
{
    (void)state;
    clk.us = 0;
    tw_wheel *w = clock_wheel(TW_DRIVE_CLOCK);
    clk.us = 300 * MS;
    assert_int_not_equal(tw_add(w, 500, clock_cb, TAG(1)), 0);
    assert_int_equal(tw_timeout_ms(w), 500);
    assert_int_equal(expire_at(w, 800 * MS - 1), 0);
    assert_int_equal(expire_at(w, 800 * MS), 1);
    CHECK(w);
}

/* After a backwards step, until the tw_expire that re-bases, the timeout
 * is the tick count: that expire restarts the clock at the current tick. */
static void test_timeout_after_backwards_step(void **state)
{
    (void)state;
    clk.us = 50 * MS;
    tw_wheel *w = clock_wheel(TW_DRIVE_CLOCK);
    assert_int_equal(expire_at(w, 60 * MS), 0);
    assert_int_not_equal(tw_add(w, 5, clock_cb, TAG(1)), 0);
    assert_int_equal(tw_timeout_ms(w), 5);
    clk.us = 20 * MS; /* 40 ms back */
    assert_int_equal(tw_timeout_ms(w), 5);
    assert_int_equal(expire_at(w, 20 * MS), 0); /* re-based at tick 10 */
    assert_int_equal(tw_timeout_ms(w), 5);
    assert_int_equal(expire_at(w, 25 * MS), 1);
    CHECK(w);
}

/* The clock steps back between two calls: the first call that reads it
 * (here an add, before any tw_expire) re-bases, so its delay counts from
 * its own reading. tw_expire 999 µs into tick 10, back to 5 000 µs, then
 * tw_add(1) and tw_expire every µs: the old code counted the delay from
 * tick 10 in the old timeline, and once the next tw_expire re-based, the
 * timer fired at 5 001 µs, 999 µs early. */
static void test_step_back_before_add(void **state)
{
    (void)state;
    clk.us = 0;
    tw_wheel *w = clock_wheel(TW_DRIVE_CLOCK);
    assert_int_equal(expire_at(w, 10 * MS + 999), 0);
    clk.us = 5 * MS;
    assert_int_not_equal(tw_add(w, 1, clock_cb, TAG(1)), 0);
    assert_int_equal(get_stats(w).rebases, 1); /* seen by the add */
    assert_int_equal(tw_now(w), 10);           /* time never goes back */
    while (rec.n == 0 && clk.us < 9 * MS)
        assert_true(expire_at(w, clk.us + 1) >= 0);
    ASSERT_NFIRES(1);
    assert_true(fired_at[0] >= 5 * MS + MS);     /* never early */
    assert_true(fired_at[0] <= 5 * MS + 2 * MS); /* at most a tick late */
    CHECK(w);
}

/* The same for a reschedule, and for a timer armed before the step: it
 * keeps the time it had left (the wheel's ticks move back with the clock). */
static void test_step_back_before_reschedule(void **state)
{
    (void)state;
    clk.us = 0;
    tw_wheel *w = clock_wheel(TW_DRIVE_CLOCK);
    tw_id moved = tw_add(w, 50, clock_cb, TAG(1));
    assert_int_not_equal(tw_add(w, 8, clock_cb, TAG(2)), 0); /* due at 8 ms */
    assert_int_equal(expire_at(w, 3 * MS + 400), 0);
    clk.us = 2 * MS + 100; /* 1 300 µs back */
    assert_int_equal(tw_reschedule(w, moved, 2), 1);
    assert_int_equal(get_stats(w).rebases, 1);
    while (rec.n < 2 && clk.us < 20 * MS)
        assert_true(expire_at(w, clk.us + 1) >= 0);
    ASSERT_NFIRES(2);
    assert_int_equal(rec.f[0].tag, 1);
    assert_true(fired_at[0] >= 2 * MS + 100 + 2 * MS);
    assert_true(fired_at[0] <= 2 * MS + 100 + 3 * MS);
    assert_int_equal(rec.f[1].tag, 2); /* 8 ms less the 1 300 µs step */
    assert_int_equal(fired_at[1], 8 * MS - 1300);
    CHECK(w);
}

/* Every call's reading counts as the wheel's last one, not only
 * tw_expire's: a step back below an add's reading is seen, and the timer
 * that add armed keeps the time it had left (it used to keep its place in
 * the old timeline and run 47 ms late by the clock). */
static void test_step_back_below_an_add_reading(void **state)
{
    (void)state;
    const uint64_t T0 = 1000000000;
    clk.us = T0;
    tw_wheel *w = clock_wheel(TW_DRIVE_CLOCK);
    assert_int_equal(expire_at(w, T0), 0);
    clk.us = T0 + 50 * MS;
    assert_int_not_equal(tw_add(w, 1, clock_cb, TAG(1)), 0); /* 1 ms left */
    clk.us = T0 + 3 * MS;
    assert_int_not_equal(tw_add(w, 2, clock_cb, TAG(2)), 0);
    assert_int_equal(get_stats(w).rebases, 1);
    assert_int_equal(expire_at(w, T0 + 4 * MS - 1), 0);
    assert_int_equal(expire_at(w, T0 + 4 * MS), 1); /* the 1 ms it had left */
    assert_int_equal(rec.f[0].tag, 1);
    assert_int_equal(expire_at(w, T0 + 5 * MS), 1); /* 2 ms from its call */
    assert_int_equal(rec.f[1].tag, 2);
    CHECK(w);
}

/* The same on a TW_DRIVE_AUTO wheel before its first drive: an add that
 * reads the clock below an earlier add's reading re-bases (its tick
 * restarts at this add), so the first tw_expire finds both timers due on
 * time instead of seeing a step and letting no tick pass. */
static void test_step_back_between_auto_adds(void **state)
{
    (void)state;
    const uint64_t T0 = 1000000000;
    clk.us = T0 + 50 * MS;
    tw_wheel *w = clock_wheel(TW_DRIVE_AUTO);
    assert_int_not_equal(tw_add(w, 1, clock_cb, TAG(1)), 0);
    clk.us = T0 + 3 * MS;
    assert_int_not_equal(tw_add(w, 2, clock_cb, TAG(2)), 0);
    assert_int_equal(get_stats(w).rebases, 1);
    assert_int_equal(expire_at(w, T0 + 40 * MS), 2);
    assert_int_equal(get_stats(w).rebases, 1);
    CHECK(w);
}

/* A clock whose next reading (the one tw_expire takes before its lock)
 * is stale: while it is taken, an add on the same wheel sees the clock
 * step back and re-bases. That stands in for two threads: the driver reads
 * the clock, the clock steps back, a producer's add re-bases, then the
 * driver takes the lock with a reading from before the step. */
static struct {
    int armed;
    uint64_t stale;
    tw_wheel *wheel;
    tw_id id;
} interleave;

static uint64_t interleaving_clock(void *context)
{
    (void)context;
    if (interleave.armed) {
        interleave.armed = 0;
        interleave.id = tw_add(interleave.wheel, 1, clock_cb, TAG(1));
        return interleave.stale;
    }
    return clk.us;
}

static void test_stale_driver_reading_after_step_back(void **state)
{
    (void)state;
    struct tw_config c;
    tw_config_init(&c);
    c.lock = TW_LOCK_NONE;
    c.tick_us = MS;
    c.clock_fn = interleaving_clock;
    c.drive = TW_DRIVE_CLOCK;
    clk.us = 0;
    tw_wheel *w = new_wheel_cfg(&c);
    assert_int_equal(expire_at(w, 100 * MS), 0);
    interleave.wheel = w;
    interleave.stale = 100 * MS + 500; /* before the step */
    interleave.armed = 1;
    clk.us = 40 * MS; /* after it: 60 ms back */
    /* without a second reading the driver walks 60 ms ahead on the stale
       one and fires the timer in this very call, as it is added */
    assert_int_equal(tw_expire(w), 0);
    assert_int_not_equal(interleave.id, 0);
    assert_int_equal(get_stats(w).rebases, 1);
    assert_int_equal(tw_remaining(w, interleave.id), 1);
    while (rec.n == 0 && clk.us < 45 * MS)
        assert_true(expire_at(w, clk.us + 1) >= 0);
    ASSERT_NFIRES(1);
    assert_true(fired_at[0] >= 41 * MS && fired_at[0] <= 42 * MS);
    CHECK(w);
}

/* A callback of a clock-driven catch-up (the driver reached tick 10, the
 * callback runs at tw_now() 5) adds delay 0: it runs at the next call, so
 * tw_next_expiry and tw_remaining both say 0 (tw_remaining said 5, while
 * tw_next_expiry said 0: "never 0 unless something is due"). */
static tw_id zero_id;
static uint64_t zero_remaining, zero_next;

static void add_zero_cb(tw_wheel *w, tw_id id, void *user_data)
{
    clock_cb(w, id, user_data);
    zero_id = tw_add(w, 0, clock_cb, TAG(2));
    zero_remaining = tw_remaining(w, zero_id);
    zero_next = tw_next_expiry(w);
}

static void test_delay_zero_in_catch_up_is_due(void **state)
{
    (void)state;
    clk.us = 0;
    tw_wheel *w = clock_wheel(TW_DRIVE_CLOCK);
    assert_int_not_equal(tw_add(w, 5, add_zero_cb, TAG(1)), 0);
    assert_int_not_equal(tw_add(w, 30, clock_cb, TAG(3)), 0);
    assert_int_equal(expire_at(w, 10 * MS + 200), 1);
    ASSERT_FIRE(0, 5, 1);
    assert_int_not_equal(zero_id, 0);
    assert_int_equal(zero_next, 0);
    assert_int_equal(zero_remaining, 0);
    assert_int_equal(tw_remaining(w, zero_id), 0);
    assert_int_equal(tw_next_expiry(w), 0);
    assert_int_equal(expire_at(w, 10 * MS + 200), 1);
    assert_int_equal(rec.f[1].tag, 2);
    CHECK(w);
}

/* The wheel holds at most TW_MAX_DELAY ticks ahead of tw_now(): when no
 * tw_expire ran for longer than that, an add that would land past it fails
 * with ERANGE while timers are pending, and an empty wheel catches up. */
static void test_driver_gone_too_long(void **state)
{
    (void)state;
    struct tw_config c;
    tw_config_init(&c);
    c.lock = TW_LOCK_NONE;
    c.tick_us = 1;
    c.clock_fn = read_fake_clock;
    c.clock_context = &clk;
    c.drive = TW_DRIVE_CLOCK;
    clk.us = 0;
    tw_wheel *w = new_wheel_cfg(&c);
    tw_id pending = tw_add(w, 10, clock_cb, TAG(1));
    assert_int_not_equal(pending, 0);
    clk.us = TW_MAX_DELAY - 5;
    assert_int_not_equal(tw_add(w, 5, clock_cb, TAG(2)), 0); /* just fits */
    ASSERT_FAILS_ERRNO(tw_add(w, 6, clock_cb, TAG(3)), ERANGE);
    assert_int_equal(tw_reschedule(w, pending, 6), -ERANGE);
    assert_int_equal(tw_remaining(w, pending), 10); /* left as it was */
    assert_int_equal(tw_count(w), 2);
    CHECK(w);
    drop(w);

    clk.us = 0;
    w = new_wheel_cfg(&c);
    clk.us = UINT64_C(3) << 32;
    assert_int_not_equal(tw_add(w, 6, clock_cb, TAG(4)), 0);
    assert_int_equal(tw_now(w), UINT64_C(3) << 32); /* caught up, nothing run */
    assert_int_equal(expire_at(w, (UINT64_C(3) << 32) + 6), 1);
    ASSERT_FIRE(0, (UINT64_C(3) << 32) + 6, 4);
    CHECK(w);
}

/* A program built against 1.0's header passes a config that ends before
 * `drive`: it gets AUTO. Shorter than that, or an unknown drive: EINVAL. */
static void test_config_sizes(void **state)
{
    (void)state;
    struct {
        struct tw_config c;
        unsigned char junk[16];
    } old;
    memset(&old, 0xa5, sizeof old);
    tw_config_init(&old.c);
    old.c.size = (uint32_t)offsetof(struct tw_config, drive);
    old.c.lock = TW_LOCK_NONE;
    old.c.clock_fn = read_fake_clock;
    old.c.clock_context = &clk;
    memset(&old.c.drive, 0xa5, sizeof old.c.drive); /* not the caller's */
    clk.us = 0;
    tw_wheel *w = new_wheel_cfg(&old.c);
    assert_int_equal(expire_at(w, 0), 0); /* AUTO: now clock-driven */
    clk.us = 10 * MS + 1;
    assert_int_not_equal(tw_add(w, 1, clock_cb, TAG(1)), 0);
    assert_int_equal(expire_at(w, 11 * MS + 999), 0);
    assert_int_equal(expire_at(w, 12 * MS), 1);
    drop(w);

    struct tw_config c;
    tw_config_init(&c);
    c.size = (uint32_t)offsetof(struct tw_config, drive) - 1;
    errno = 0;
    assert_null(tw_create(&c));
    assert_int_equal(errno, EINVAL);
    tw_config_init(&c);
    c.drive = 3;
    errno = 0;
    assert_null(tw_create(&c));
    assert_int_equal(errno, EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_add_after_idle_wait),
        T(test_add_mid_tick),
        T(test_reschedule_and_callback_count_from_clock),
        T(test_add_from_late_callback),
        T(test_delay_zero_next_expire),
        T(test_periodic_no_burst),
        T(test_tick_driven_exact),
        T(test_auto_setup_before_first_expire),
        T(test_delay_zero_from_callback_waits),
        T(test_jittery_clock_keeps_going),
        T(test_rebase_keeps_advance_lead),
        T(test_clock_from_creation),
        T(test_timeout_after_backwards_step),
        T(test_step_back_before_add),
        T(test_step_back_before_reschedule),
        T(test_stale_driver_reading_after_step_back),
        T(test_step_back_below_an_add_reading),
        T(test_step_back_between_auto_adds),
        T(test_delay_zero_in_catch_up_is_due),
        T(test_driver_gone_too_long),
        T(test_config_sizes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
