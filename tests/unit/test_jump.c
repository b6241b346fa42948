/* Jumps: advancing far in one call gives exactly the firings of ticking one
 * by one. Jumps of more than 2^32 ticks with timers pending, idle jumps
 * (an hour, 2^40 ticks, up to TW_MAX_TICK), timers added by callbacks
 * during a jump, and tw_next_expiry after jumps. */
#include "helpers.h"

#define P2(n) (UINT64_C(1) << (n))

/* Timers pending on every level, then one jump of more than 2^32. */
static void test_jump_past_2_32_with_timers(void **state)
{
    (void)state;
    const uint64_t delays[] = {0, 1, 255, 256, 300, P2(14), P2(14) + 9,
                               P2(20), P2(20) + 1234, P2(26), P2(26) + 99999,
                               P2(31) + 5, TW_MAX_DELAY - 1, TW_MAX_DELAY};
    const size_t n = sizeof delays / sizeof delays[0];
    const uint64_t starts[] = {0, 999, P2(32) - 7, P2(35) + 123456};
    const uint64_t jump = P2(32) + 12345;
    for (size_t s = 0; s < sizeof starts / sizeof starts[0]; s++) {
        const uint64_t start = starts[s];
        rec_reset();
        tw_wheel *w = new_wheel(start);
        for (size_t i = 0; i < n; i++)
            assert_int_not_equal(tw_add(w, delays[i], rec_cb, TAG(i)), 0);
        tw_id p = tw_add_periodic(w, P2(30), P2(30), rec_cb, TAG(100));
        assert_int_equal(tw_advance(w, jump), (int64_t)n + 4);
        assert_int_equal(tw_now(w), start + jump);
        ASSERT_NFIRES(n + 4);
        /* Merge the periodic's four firings into the expected order. */
        size_t k = 0, pi = 1;
        for (size_t i = 0; i < n; i++) {
            while (pi <= 4 && pi * P2(30) < delays[i]) {
                ASSERT_FIRE(k, start + pi * P2(30), 100);
                k++, pi++;
            }
            ASSERT_FIRE(k, start + delays[i], (int)i);
            k++;
        }
        for (; pi <= 4; pi++, k++)
            ASSERT_FIRE(k, start + pi * P2(30), 100);
        assert_int_equal(k, n + 4);
        assert_int_equal(tw_count(w), 1);
        assert_int_equal(tw_remaining(w, p), 5 * P2(30) - jump);
        CHECK(w);

        /* The wheel is still exact after the jump. */
        rec_reset();
        const uint64_t after[] = {1, 256, P2(14) + 1, P2(26) + 3};
        for (size_t i = 0; i < 4; i++)
            assert_int_not_equal(tw_add(w, after[i], rec_cb, TAG(i)), 0);
        assert_int_equal(tw_cancel(w, p), 1);
        assert_int_equal(tw_next_expiry(w), 1);
        assert_int_equal(tw_advance(w, P2(27)), 4);
        for (size_t i = 0; i < 4; i++)
            ASSERT_FIRE(i, start + jump + after[i], (int)i);
        CHECK(w);
        drop(w);
    }
}

static void test_idle_jumps(void **state)
{
    (void)state;
    tw_wheel *w = new_wheel(0);
    const uint64_t jumps[] = {3600000, P2(32) - 1, P2(32), P2(32) + 1, 3,
                              P2(40), 255, P2(33) + 77};
    uint64_t now = 0;
    for (size_t i = 0; i < sizeof jumps / sizeof jumps[0]; i++) {
        assert_int_equal(tw_advance(w, jumps[i]), 0);
        now += jumps[i];
        assert_int_equal(tw_now(w), now);
        assert_int_equal(tw_next_expiry(w), TW_NEVER);
        CHECK(w);
        /* After every idle jump a new timer is exact at every level. */
        const uint64_t delays[] = {1, 300, P2(20) + 1, P2(26) + 2};
        for (size_t d = 0; d < 4; d++) {
            rec_reset();
            assert_int_not_equal(tw_add(w, delays[d], rec_cb, TAG(d)), 0);
            assert_int_equal(tw_next_expiry(w), delays[d]);
            assert_int_equal(tw_advance(w, delays[d] - 1), 0);
            assert_int_equal(tw_advance(w, 1), 1);
            ASSERT_FIRE(0, now + delays[d], (int)d);
            now += delays[d];
        }
    }
    drop(w);
}

/* An hour of 1 ms ticks with only far timers pending: nothing fires, the
 * far timers keep their exact due ticks. */
static void test_idle_hour_with_far_timers(void **state)
{
    (void)state;
    tw_wheel *w = new_wheel(0);
    tw_id a = tw_add(w, TW_MAX_DELAY, rec_cb, TAG(1));
    tw_id b = tw_add(w, 3600001, rec_cb, TAG(2));
    assert_int_equal(tw_advance(w, 3600000), 0);
    assert_int_equal(tw_remaining(w, a), TW_MAX_DELAY - 3600000);
    assert_int_equal(tw_remaining(w, b), 1);
    assert_int_equal(tw_next_expiry(w), 1);
    CHECK(w);
    assert_int_equal(tw_advance(w, 1), 1);
    ASSERT_FIRE(0, 3600001, 2);
    assert_int_equal(tw_next_expiry(w), TW_MAX_DELAY - 3600001);
    assert_int_equal(tw_advance(w, TW_MAX_DELAY), 1);
    ASSERT_FIRE(1, TW_MAX_DELAY, 1);
    drop(w);
}

/* ---- jump == tick by tick ---------------------------------------------- */

#define NT 600
static struct fire runs[3][NT];
static size_t run_n[3];

static void save_run(int r)
{
    assert_true(rec.n <= NT);
    memcpy(runs[r], rec.f, rec.n * sizeof rec.f[0]);
    run_n[r] = rec.n;
}

static void add_scattered(tw_wheel *w, uint64_t seed)
{
    for (int i = 0; i < NT; i++) {
        uint64_t r = rng_next(&seed);
        uint64_t d;
        switch (r & 3) {
        case 0: d = (r >> 8) % 300; break;                  /* near */
        case 1: d = (r >> 8) % 20000; break;                /* level 0/1 */
        case 2: d = 256 * ((r >> 8) % 1000); break;         /* on a boundary */
        default: d = 300000 - (r >> 8) % 64; break;         /* the far end */
        }
        assert_int_not_equal(tw_add(w, d, rec_cb, TAG(i)), 0);
    }
}

static void test_jump_equals_tick_by_tick(void **state)
{
    (void)state;
    const uint64_t starts[] = {0, P2(32) - 150000, P2(20) - 7};
    const uint64_t span = 300001;
    for (size_t s = 0; s < sizeof starts / sizeof starts[0]; s++) {
        const uint64_t start = starts[s];
        /* one by one */
        rec_reset();
        tw_wheel *w = new_wheel(start);
        add_scattered(w, 1234 + s);
        for (uint64_t t = 0; t < span; t++)
            assert_true(tw_advance(w, 1) >= 0);
        save_run(0);
        drop(w);
        /* one jump */
        rec_reset();
        w = new_wheel(start);
        add_scattered(w, 1234 + s);
        assert_int_equal(tw_advance(w, span), NT);
        save_run(1);
        drop(w);
        /* random chunks */
        rec_reset();
        w = new_wheel(start);
        add_scattered(w, 1234 + s);
        uint64_t seed = 5 + s;
        while (tw_now(w) < start + span) {
            uint64_t left = start + span - tw_now(w);
            uint64_t step = rng_next(&seed) % 5000;
            assert_true(tw_advance(w, step < left ? step : left) >= 0);
            CHECK(w);
        }
        save_run(2);
        drop(w);

        assert_int_equal(run_n[0], NT);
        for (int r = 1; r < 3; r++) {
            assert_int_equal(run_n[r], NT);
            for (size_t i = 0; i < NT; i++) {
                assert_int_equal(runs[r][i].tick, runs[0][i].tick);
                assert_int_equal(runs[r][i].tag, runs[0][i].tag);
            }
        }
        /* and the order is by due tick */
        for (size_t i = 1; i < NT; i++)
            assert_true(runs[0][i].tick >= runs[0][i - 1].tick);
    }
}

/* ---- callbacks adding timers during a jump ----------------------------- */

static int hops_left;

/* Re-adds itself 2^31 + 1 ticks later: crosses the 32-bit wrap. */
static void hop_cb(tw_wheel *w, tw_id id, void *user_data)
{
    rec_push(w, id, user_data);
    if (--hops_left > 0)
        tw_add(w, P2(31) + 1, hop_cb, user_data);
}

static void test_callbacks_add_during_jump(void **state)
{
    (void)state;
    tw_wheel *w = new_wheel(1000);
    hops_left = 5;
    assert_int_not_equal(tw_add(w, 10, hop_cb, TAG(1)), 0);
    assert_int_not_equal(tw_add(w, TW_MAX_DELAY, rec_cb, TAG(2)), 0);
    assert_int_equal(tw_advance(w, 5 * P2(31)), 6);
    ASSERT_FIRE(0, 1010, 1);
    ASSERT_FIRE(1, 1010 + P2(31) + 1, 1);
    ASSERT_FIRE(2, 1000 + TW_MAX_DELAY, 2);
    ASSERT_FIRE(3, 1010 + 2 * (P2(31) + 1), 1);
    ASSERT_FIRE(4, 1010 + 3 * (P2(31) + 1), 1);
    ASSERT_FIRE(5, 1010 + 4 * (P2(31) + 1), 1);
    assert_int_equal(tw_count(w), 0);
    CHECK(w);
    drop(w);
}

/* A callback at tick 10 starts a periodic with first == 0 (due at 10, run
 * at the start of the next call) and the same call then jumps more than
 * 2^32 ticks further. The next call runs every missed firing (10 and
 * 10 + iv), and the grid stays 10 + k * iv. */
static uint64_t late_interval;

static void start_periodic_cb(tw_wheel *w, tw_id id, void *user_data)
{
    rec_push(w, id, user_data);
    tw_add_periodic(w, 0, late_interval, rec_cb, TAG(2));
}

static void test_due_periodic_waits_past_2_32(void **state)
{
    (void)state;
    late_interval = 3 * P2(30);
    tw_wheel *w = new_wheel(0);
    assert_int_not_equal(tw_add(w, 10, start_periodic_cb, TAG(1)), 0);
    assert_int_equal(tw_advance(w, P2(32) + 15), 1);
    ASSERT_FIRE(0, 10, 1);
    assert_int_equal(tw_count(w), 1);
    assert_int_equal(tw_next_expiry(w), 0);
    /* Due at 10 and at 10 + iv (both <= now): both run now, in order. */
    assert_int_equal(tw_advance(w, 0), 2);
    assert_int_equal(rec.f[1].tag, 2);
    assert_int_equal(rec.f[2].tag, 2);
    assert_int_equal(tw_next_expiry(w), 10 + 2 * late_interval - tw_now(w));
    assert_int_equal(tw_advance(w, 10 + 2 * late_interval - tw_now(w)), 1);
    ASSERT_FIRE(3, 10 + 2 * late_interval, 2);
    CHECK(w);
    drop(w);
}

/* Jumps landing exactly on a due tick, one short, one past. */
static void test_jump_end_boundaries(void **state)
{
    (void)state;
    tw_wheel *w = new_wheel(0);
    assert_int_not_equal(tw_add(w, P2(26), rec_cb, TAG(1)), 0);
    assert_int_not_equal(tw_add(w, P2(26) + 1, rec_cb, TAG(2)), 0);
    assert_int_not_equal(tw_add(w, P2(26) + 2, rec_cb, TAG(3)), 0);
    assert_int_equal(tw_advance(w, P2(26) - 1), 0);
    assert_int_equal(tw_advance(w, 1), 1);
    assert_int_equal(tw_advance(w, 2), 2);
    ASSERT_FIRE(0, P2(26), 1);
    ASSERT_FIRE(1, P2(26) + 1, 2);
    ASSERT_FIRE(2, P2(26) + 2, 3);
    drop(w);
}

/* tw_next_expiry stays exact for timers in upper levels after jumps that
 * leave the internal tick at odd positions. */
static void test_next_expiry_after_jumps(void **state)
{
    (void)state;
    tw_wheel *w = new_wheel(0);
    const uint64_t jumps[] = {P2(32) + 777, 12345, P2(26) - 1, 1};
    const uint64_t delays[] = {300, P2(14) + 5, P2(20) - 1, P2(27) + 5,
                               TW_MAX_DELAY};
    for (size_t j = 0; j < sizeof jumps / sizeof jumps[0]; j++) {
        assert_int_equal(tw_advance(w, jumps[j]), 0);
        for (size_t d = 0; d < sizeof delays / sizeof delays[0]; d++) {
            tw_id id = tw_add(w, delays[d], rec_cb, TAG(d));
            assert_int_equal(tw_next_expiry(w), delays[d]);
            assert_int_equal(tw_advance(w, delays[d] / 3), 0);
            assert_int_equal(tw_next_expiry(w), delays[d] - delays[d] / 3);
            assert_int_equal(tw_remaining(w, id), delays[d] - delays[d] / 3);
            assert_int_equal(tw_cancel(w, id), 1);
            assert_int_equal(tw_next_expiry(w), TW_NEVER);
        }
    }
    ASSERT_NFIRES(0);
    drop(w);
}

/* The 64-bit clock ends at TW_MAX_TICK. */
static void test_jump_to_max_tick(void **state)
{
    (void)state;
    tw_wheel *w = new_wheel(0);
    assert_int_equal(tw_advance(w, TW_MAX_TICK), 0);
    assert_int_equal(tw_now(w), TW_MAX_TICK);
    assert_int_equal(tw_advance(w, 0), 0);
    assert_int_equal(tw_advance(w, 1), -ERANGE);
    assert_int_equal(tw_advance(w, UINT64_MAX), -ERANGE);
    assert_int_equal(tw_now(w), TW_MAX_TICK);
    CHECK(w);
    drop(w);

    w = new_wheel(5);
    assert_int_equal(tw_advance(w, UINT64_MAX), -ERANGE);
    assert_int_equal(tw_advance(w, TW_MAX_TICK - 4), -ERANGE);
    CHECK(w);
    assert_int_equal(tw_advance(w, TW_MAX_TICK - 5), 0);
    assert_int_equal(tw_now(w), TW_MAX_TICK);
    drop(w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_jump_past_2_32_with_timers),
        T(test_idle_jumps),
        T(test_idle_hour_with_far_timers),
        T(test_jump_equals_tick_by_tick),
        T(test_callbacks_add_during_jump),
        T(test_due_periodic_waits_past_2_32),
        T(test_jump_end_boundaries),
        T(test_next_expiry_after_jumps),
        T(test_jump_to_max_tick),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
