/* Adding and firing: exact due ticks, never early, never in the adding call,
 * delay 0, FIFO within a tick, order across ticks, timers added by
 * callbacks, tw_next_expiry and tw_remaining. */
#include "helpers.h"

static void test_fires_exactly_at_due_tick(void **state)
{
    (void)state;
    const uint64_t delays[] = {1, 2, 3, 17, 100, 254};
    for (size_t i = 0; i < sizeof delays / sizeof delays[0]; i++) {
        rec_reset();
        tw_wheel *w = new_wheel(0);
        tw_id id = tw_add(w, delays[i], rec_cb, TAG(5));
        assert_int_not_equal(id, 0);
        assert_int_equal(tw_count(w), 1);
        assert_int_equal(tw_remaining(w, id), delays[i]);
        assert_int_equal(tw_next_expiry(w), delays[i]);
        /* Never early. */
        assert_int_equal(tw_advance(w, delays[i] - 1), 0);
        ASSERT_NFIRES(0);
        assert_int_equal(tw_remaining(w, id), 1);
        assert_int_equal(tw_next_expiry(w), 1);
        CHECK(w);
        assert_int_equal(tw_advance(w, 1), 1);
        ASSERT_NFIRES(1);
        ASSERT_FIRE(0, delays[i], 5);
        assert_int_equal(rec.f[0].id, id);
        assert_int_equal(tw_count(w), 0);
        assert_int_equal(tw_remaining(w, id), TW_NEVER);
        assert_int_equal(tw_next_expiry(w), TW_NEVER);
        /* Never twice. */
        assert_int_equal(tw_advance(w, 1000), 0);
        ASSERT_NFIRES(1);
        CHECK(w);
        drop(w);
    }
}

/* Same thing ticking one by one. */
static void test_tick_by_tick(void **state)
{
    (void)state;
    tw_wheel *w = new_wheel(0);
    for (int d = 1; d <= 600; d += 7)
        assert_int_not_equal(tw_add(w, (uint64_t)d, rec_cb, TAG(d)), 0);
    for (int t = 1; t <= 700; t++) {
        int64_t expect = (t <= 600 && (t - 1) % 7 == 0) ? 1 : 0;
        assert_int_equal(tw_advance(w, 1), expect);
        if (expect)
            ASSERT_FIRE(rec.n - 1, (uint64_t)t, t);
    }
    ASSERT_NFIRES(86);
    CHECK(w);
    drop(w);
}

static void test_delay_zero_fires_on_next_call_even_zero_ticks(void **state)
{
    (void)state;
    tw_wheel *w = new_wheel(40);
    tw_id id = tw_add(w, 0, rec_cb, TAG(1));
    assert_int_not_equal(id, 0);
    assert_int_equal(tw_next_expiry(w), 0);
    assert_int_equal(tw_remaining(w, id), 0);
    assert_int_equal(tw_timeout_ms(w), 0);
    ASSERT_NFIRES(0);
    assert_int_equal(tw_advance(w, 0), 1);
    ASSERT_NFIRES(1);
    ASSERT_FIRE(0, 40, 1);
    assert_int_equal(tw_now(w), 40);
    assert_int_equal(tw_advance(w, 0), 0);
    CHECK(w);
    drop(w);
}

/* Already-due timers run first, with tw_now() still the start tick. */
static void test_delay_zero_runs_before_later_ticks(void **state)
{
    (void)state;
    tw_wheel *w = new_wheel(0);
    assert_int_not_equal(tw_add(w, 1, rec_cb, TAG(1)), 0);
    assert_int_not_equal(tw_add(w, 0, rec_cb, TAG(2)), 0);
    assert_int_not_equal(tw_add(w, 0, rec_cb, TAG(3)), 0);
    assert_int_equal(tw_advance(w, 5), 3);
    ASSERT_FIRE(0, 0, 2);
    ASSERT_FIRE(1, 0, 3);
    ASSERT_FIRE(2, 1, 1);
    drop(w);
}

static void test_order_across_ticks(void **state)
{
    (void)state;
    tw_wheel *w = new_wheel(0);
    for (int d = 50; d >= 1; d--)
        assert_int_not_equal(tw_add(w, (uint64_t)d * 13, rec_cb, TAG(d)), 0);
    assert_int_equal(tw_advance(w, 1000), 50);
    for (int i = 0; i < 50; i++)
        ASSERT_FIRE(i, (uint64_t)(i + 1) * 13, i + 1);
    drop(w);
}

/* FIFO by insertion within one tick, including timers inserted at
 * different times and at different levels that meet at the same tick. */
static void test_fifo_within_tick(void **state)
{
    (void)state;
    tw_wheel *w = new_wheel(0);
    for (int i = 0; i < 1000; i++)
        assert_int_not_equal(tw_add(w, 9, rec_cb, TAG(i)), 0);
    assert_int_equal(tw_advance(w, 9), 1000);
    for (int i = 0; i < 1000; i++)
        ASSERT_FIRE(i, 9, i);
    drop(w);
}

static void test_fifo_across_levels(void **state)
{
    (void)state;
    /* A sits at level 1 for a long time, B and C join it in near later. */
    const uint64_t due = 70000;
    const uint64_t steps[] = {1, 7, 70000};
    for (size_t s = 0; s < sizeof steps / sizeof steps[0]; s++) {
        rec_reset();
        tw_wheel *w = new_wheel(0);
        assert_int_not_equal(tw_add(w, due, rec_cb, TAG(1)), 0);
        assert_int_equal(tw_advance(w, 300), 0);
        assert_int_not_equal(tw_add(w, due - 300, rec_cb, TAG(2)), 0);
        assert_int_equal(tw_advance(w, due - 300 - 100), 0);
        assert_int_not_equal(tw_add(w, 100, rec_cb, TAG(3)), 0);
        assert_int_not_equal(tw_add(w, 100, rec_cb, TAG(4)), 0);
        CHECK(w);
        /* Move to the due tick in steps of steps[s]. */
        while (tw_now(w) < due + 10) {
            uint64_t left = due + 10 - tw_now(w);
            assert_true(tw_advance(w, left < steps[s] ? left : steps[s]) >= 0);
        }
        ASSERT_NFIRES(4);
        for (int i = 0; i < 4; i++)
            ASSERT_FIRE(i, due, i + 1);
        CHECK(w);
        drop(w);
    }
}

/* ---- timers added from callbacks --------------------------------------- */

static tw_id chain_id;
static int chain_left;

/* Re-adds itself with delay 1 until chain_left runs out. */
static void chain_cb(tw_wheel *w, tw_id id, void *user_data)
{
    rec_push(w, id, user_data);
    if (--chain_left > 0)
        chain_id = tw_add(w, 1, chain_cb, user_data);
}

static void test_callback_adds_delay_one_fires_same_call(void **state)
{
    (void)state;
    tw_wheel *w = new_wheel(0);
    chain_left = 100;
    assert_int_not_equal(tw_add(w, 1, chain_cb, TAG(1)), 0);
    assert_int_equal(tw_advance(w, 1000), 100);
    ASSERT_NFIRES(100);
    for (int i = 0; i < 100; i++)
        ASSERT_FIRE(i, (uint64_t)i + 1, 1);
    assert_int_equal(tw_count(w), 0);
    drop(w);
}

static uint64_t added_delay;

static void add_later_cb(tw_wheel *w, tw_id id, void *user_data)
{
    rec_push(w, id, user_data);
    tw_add(w, added_delay, rec_cb, TAG(UNTAG(user_data) + 100));
}

/* Added at T with delay d: due T + d, in this same call if within target. */
static void test_callback_adds_later_timer(void **state)
{
    (void)state;
    const uint64_t delays[] = {4, 300, 20000};
    for (size_t i = 0; i < sizeof delays / sizeof delays[0]; i++) {
        rec_reset();
        added_delay = delays[i];
        tw_wheel *w = new_wheel(0);
        assert_int_not_equal(tw_add(w, 3, add_later_cb, TAG(1)), 0);
        assert_int_equal(tw_advance(w, 3 + delays[i]), 2);
        ASSERT_FIRE(0, 3, 1);
        ASSERT_FIRE(1, 3 + delays[i], 101);
        assert_int_equal(tw_count(w), 0);
        CHECK(w);
        drop(w);
    }
}

/* A callback adding delay 0 makes it due now, but it runs only at the start
 * of the next call. */
static void test_callback_adds_delay_zero_runs_next_call(void **state)
{
    (void)state;
    added_delay = 0;
    tw_wheel *w = new_wheel(0);
    assert_int_not_equal(tw_add(w, 5, add_later_cb, TAG(1)), 0);
    assert_int_not_equal(tw_add(w, 8, rec_cb, TAG(2)), 0);
    assert_int_equal(tw_advance(w, 10), 2);
    ASSERT_NFIRES(2);
    ASSERT_FIRE(0, 5, 1);
    ASSERT_FIRE(1, 8, 2);
    assert_int_equal(tw_count(w), 1);
    assert_int_equal(tw_next_expiry(w), 0);
    CHECK(w);
    assert_int_equal(tw_advance(w, 0), 1);
    ASSERT_NFIRES(3);
    ASSERT_FIRE(2, 10, 101);
    assert_int_equal(tw_count(w), 0);
    drop(w);
}

/* A delay-0 self re-add cannot loop forever: one firing per call. */
static void readd_zero_cb(tw_wheel *w, tw_id id, void *user_data)
{
    rec_push(w, id, user_data);
    tw_add(w, 0, readd_zero_cb, user_data);
}

static void test_delay_zero_self_readd_no_loop(void **state)
{
    (void)state;
    tw_wheel *w = new_wheel(0);
    assert_int_not_equal(tw_add(w, 0, readd_zero_cb, TAG(1)), 0);
    for (int i = 0; i < 5; i++)
        assert_int_equal(tw_advance(w, i == 2 ? 3 : 0), 1);
    ASSERT_NFIRES(5);
    ASSERT_FIRE(0, 0, 1);
    ASSERT_FIRE(1, 0, 1);
    ASSERT_FIRE(2, 0, 1);
    ASSERT_FIRE(3, 3, 1);
    ASSERT_FIRE(4, 3, 1);
    assert_int_equal(tw_count(w), 1);
    drop(w);
}

/* Ids are distinct and non-zero; the callback gets its own id. */
static void test_ids_distinct_and_passed(void **state)
{
    (void)state;
    tw_wheel *w = new_wheel(0);
    tw_id ids[300];
    for (int i = 0; i < 300; i++) {
        ids[i] = tw_add(w, (uint64_t)(i % 3) + 1, rec_cb, TAG(i));
        assert_int_not_equal(ids[i], 0);
        for (int j = 0; j < i; j++)
            assert_int_not_equal(ids[i], ids[j]);
    }
    assert_int_equal(tw_advance(w, 3), 300);
    for (size_t k = 0; k < rec.n; k++)
        assert_int_equal(rec.f[k].id, ids[rec.f[k].tag]);
    /* Reused nodes get fresh ids. */
    for (int i = 0; i < 300; i++) {
        tw_id id = tw_add(w, 1, rec_cb, NULL);
        for (int j = 0; j < 300; j++)
            assert_int_not_equal(id, ids[j]);
    }
    drop(w);
}

static void test_next_expiry_tracks_earliest(void **state)
{
    (void)state;
    tw_wheel *w = new_wheel(1000);
    assert_int_equal(tw_next_expiry(w), TW_NEVER);
    tw_id far_id = tw_add(w, 100000, rec_cb, TAG(1));
    assert_int_equal(tw_next_expiry(w), 100000);
    tw_id mid = tw_add(w, 500, rec_cb, TAG(2));
    assert_int_equal(tw_next_expiry(w), 500);
    tw_id near_id = tw_add(w, 20, rec_cb, TAG(3));
    assert_int_equal(tw_next_expiry(w), 20);
    assert_int_equal(tw_advance(w, 19), 0);
    assert_int_equal(tw_next_expiry(w), 1);
    assert_int_equal(tw_advance(w, 1), 1);
    assert_int_equal(tw_next_expiry(w), 480);
    assert_int_equal(tw_remaining(w, mid), 480);
    assert_int_equal(tw_remaining(w, far_id), 100000 - 20);
    assert_int_equal(tw_remaining(w, near_id), TW_NEVER);
    assert_int_equal(tw_cancel(w, mid), 1);
    assert_int_equal(tw_next_expiry(w), 100000 - 20);
    assert_int_equal(tw_advance(w, 100000 - 20 - 1), 0);
    assert_int_equal(tw_next_expiry(w), 1);
    assert_int_equal(tw_advance(w, 1), 1);
    ASSERT_FIRE(1, 101000, 1);
    assert_int_equal(tw_next_expiry(w), TW_NEVER);
    CHECK(w);
    drop(w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_fires_exactly_at_due_tick),
        T(test_tick_by_tick),
        T(test_delay_zero_fires_on_next_call_even_zero_ticks),
        T(test_delay_zero_runs_before_later_ticks),
        T(test_order_across_ticks),
        T(test_fifo_within_tick),
        T(test_fifo_across_levels),
        T(test_callback_adds_delay_one_fires_same_call),
        T(test_callback_adds_later_timer),
        T(test_callback_adds_delay_zero_runs_next_call),
        T(test_delay_zero_self_readd_no_loop),
        T(test_ids_distinct_and_passed),
        T(test_next_expiry_tracks_earliest),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
