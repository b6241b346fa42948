/* Level boundaries and the 32-bit wrap: near[256] / t[0..3][64] placement
 * (skynet's masks), exact firing at every boundary delay from many start
 * ticks, and crossing 2^32 (start_tick near it) one tick at a time and in
 * jumps. */
#include "helpers.h"

#define P2(n) (UINT64_C(1) << (n))

/* Where a timer sits right after tw_add: 0 = due list, 1 = near,
 * 2..5 = t[0..3]. */
static int placement(tw_wheel *w)
{
    struct tw_stats s = get_stats(w);
    assert_int_equal(s.pending, 1);
    int where = -1, hits = 0;
    if (s.pending_due) { where = 0; hits++; }
    if (s.pending_near) { where = 1; hits++; }
    for (int i = 0; i < 4; i++) {
        if (s.pending_level[i]) { where = 2 + i; hits++; }
    }
    assert_int_equal(hits, 1);
    return where;
}

static int where_after_add(uint64_t start, uint64_t delay)
{
    tw_wheel *w = new_wheel(start);
    assert_int_not_equal(tw_add(w, delay, rec_cb, NULL), 0);
    CHECK(w);
    int where = placement(w);
    drop(w);
    return where;
}

static void test_placement_from_tick_zero(void **state)
{
    (void)state;
    assert_int_equal(where_after_add(0, 0), 0);
    assert_int_equal(where_after_add(0, 1), 1);
    assert_int_equal(where_after_add(0, 255), 1);
    assert_int_equal(where_after_add(0, 256), 2);
    assert_int_equal(where_after_add(0, P2(14) - 1), 2);
    assert_int_equal(where_after_add(0, P2(14)), 3);
    assert_int_equal(where_after_add(0, P2(20) - 1), 3);
    assert_int_equal(where_after_add(0, P2(20)), 4);
    assert_int_equal(where_after_add(0, P2(26) - 1), 4);
    assert_int_equal(where_after_add(0, P2(26)), 5);
    assert_int_equal(where_after_add(0, TW_MAX_DELAY), 5);
}

/* The level depends on which bits of the expire tick differ from the
 * current tick, not on the delay alone (skynet's add_node). */
static void test_placement_by_expire_bits(void **state)
{
    (void)state;
    assert_int_equal(where_after_add(200, 55), 1);  /* 255: same window */
    assert_int_equal(where_after_add(200, 56), 2);  /* 256: next window */
    assert_int_equal(where_after_add(P2(14) - 10, 9), 1);
    assert_int_equal(where_after_add(P2(14) - 10, 10), 3); /* bit 14 */
    assert_int_equal(where_after_add(P2(20) - 1, 1), 4);   /* bit 20 */
    assert_int_equal(where_after_add(P2(26) - 1, 1), 5);   /* bit 26 */
    assert_int_equal(where_after_add(P2(32) - 1, 1), 5);   /* wrap */
}

static const uint64_t boundary_delays[] = {
    1, 2, 255, 256, 257, 511, 512,
    P2(14) - 1, P2(14), P2(14) + 1,
    P2(20) - 1, P2(20), P2(20) + 1,
    P2(26) - 1, P2(26), P2(26) + 1,
    P2(31), P2(32) - P2(26) - 1, TW_MAX_DELAY,
};
#define N_DELAYS (sizeof boundary_delays / sizeof boundary_delays[0])

static const uint64_t start_ticks[] = {
    0, 1, 255, 256, 12345, P2(14) - 1, P2(20) - 3, P2(26) - 7,
    P2(32) - P2(26), P2(32) - 300, P2(32) - 5, P2(32) - 1, P2(32),
    P2(32) + P2(31) + 77, P2(33) - 2, P2(40) + 3,
};
#define N_STARTS (sizeof start_ticks / sizeof start_ticks[0])

/* One timer of each boundary delay from each start: never early, exactly on
 * time, once. */
static void test_every_boundary_from_every_start(void **state)
{
    (void)state;
    for (size_t s = 0; s < N_STARTS; s++) {
        for (size_t d = 0; d < N_DELAYS; d++) {
            const uint64_t start = start_ticks[s], delay = boundary_delays[d];
            rec_reset();
            tw_wheel *w = new_wheel(start);
            tw_id id = tw_add(w, delay, rec_cb, TAG(d));
            assert_int_not_equal(id, 0);
            assert_int_equal(tw_next_expiry(w), delay);
            assert_int_equal(tw_advance(w, delay - 1), 0);
            CHECK(w);
            assert_int_equal(tw_now(w), start + delay - 1);
            assert_int_equal(tw_next_expiry(w), 1);
            assert_int_equal(tw_remaining(w, id), 1);
            assert_int_equal(tw_advance(w, 1), 1);
            ASSERT_NFIRES(1);
            ASSERT_FIRE(0, start + delay, (int)d);
            assert_int_equal(tw_advance(w, P2(33)), 0);
            assert_int_equal(tw_count(w), 0);
            CHECK(w);
            drop(w);
        }
    }
}

/* Approach the due tick one tick at a time for the last few ticks. */
static void test_boundaries_last_ticks_one_by_one(void **state)
{
    (void)state;
    for (size_t s = 0; s < N_STARTS; s++) {
        for (size_t d = 0; d < N_DELAYS; d++) {
            const uint64_t start = start_ticks[s], delay = boundary_delays[d];
            const uint64_t lead = delay < 3 ? delay : 3;
            rec_reset();
            tw_wheel *w = new_wheel(start);
            assert_int_not_equal(tw_add(w, delay, rec_cb, TAG(d)), 0);
            assert_int_equal(tw_advance(w, delay - lead), 0);
            for (uint64_t k = 0; k < lead + 2; k++) {
                int64_t expect = (k == lead - 1) ? 1 : 0;
                assert_int_equal(tw_advance(w, 1), expect);
            }
            ASSERT_NFIRES(1);
            ASSERT_FIRE(0, start + delay, (int)d);
            CHECK(w);
            drop(w);
        }
    }
}

/* All boundary delays at once, one big jump: every timer in due order. */
static void test_all_levels_in_one_jump(void **state)
{
    (void)state;
    for (size_t s = 0; s < N_STARTS; s++) {
        const uint64_t start = start_ticks[s];
        rec_reset();
        tw_wheel *w = new_wheel(start);
        for (size_t d = N_DELAYS; d-- > 0;)
            assert_int_not_equal(tw_add(w, boundary_delays[d], rec_cb, TAG(d)),
                                 0);
        struct tw_stats st = get_stats(w);
        assert_int_equal(st.pending, N_DELAYS);
        assert_int_equal(st.pending_due + st.pending_near +
                             st.pending_level[0] + st.pending_level[1] +
                             st.pending_level[2] + st.pending_level[3],
                         N_DELAYS);
        CHECK(w);
        assert_int_equal(tw_advance(w, TW_MAX_DELAY), (int64_t)N_DELAYS);
        ASSERT_NFIRES(N_DELAYS);
        for (size_t d = 0; d < N_DELAYS; d++)
            ASSERT_FIRE(d, start + boundary_delays[d], (int)d);
        CHECK(w);
        drop(w);
    }
}

/* The same set, driven in pseudo-random chunks: same firings. */
static void test_all_levels_random_chunks(void **state)
{
    (void)state;
    uint64_t seed = 0x9e3779b97f4a7c15u;
    for (size_t s = 0; s < N_STARTS; s++) {
        const uint64_t start = start_ticks[s];
        rec_reset();
        tw_wheel *w = new_wheel(start);
        for (size_t d = 0; d < N_DELAYS; d++)
            assert_int_not_equal(tw_add(w, boundary_delays[d], rec_cb, TAG(d)),
                                 0);
        const uint64_t end = start + TW_MAX_DELAY;
        while (tw_now(w) < end) {
            /* Mix tiny steps with steps up to 2^27 ticks. */
            uint64_t r = rng_next(&seed);
            uint64_t step = (r & 3) == 0 ? (r >> 8) % 4 : (r >> 8) % P2(27);
            uint64_t left = end - tw_now(w);
            assert_true(tw_advance(w, step < left ? step : left) >= 0);
        }
        ASSERT_NFIRES(N_DELAYS);
        for (size_t d = 0; d < N_DELAYS; d++)
            ASSERT_FIRE(d, start + boundary_delays[d], (int)d);
        CHECK(w);
        drop(w);
    }
}

/* Cross 2^32 one tick at a time with a timer due at every third tick. */
static void test_wrap_tick_by_tick(void **state)
{
    (void)state;
    const uint64_t starts[] = {P2(32) - 2000, 2 * P2(32) - 2000};
    for (size_t s = 0; s < 2; s++) {
        rec_reset();
        const uint64_t start = starts[s];
        tw_wheel *w = new_wheel(start);
        for (int d = 1; d <= 4000; d += 3)
            assert_int_not_equal(tw_add(w, (uint64_t)d, rec_cb, TAG(d)), 0);
        for (int t = 1; t <= 4100; t++) {
            int64_t expect = (t <= 4000 && (t - 1) % 3 == 0) ? 1 : 0;
            assert_int_equal(tw_advance(w, 1), expect);
            if (expect)
                ASSERT_FIRE(rec.n - 1, start + (uint64_t)t, t);
        }
        ASSERT_NFIRES(1334);
        CHECK(w);
        drop(w);
    }
}

/* Timers whose 32-bit expire wraps past 0 while they sit in t[3]. */
static void test_wrap_from_top_level(void **state)
{
    (void)state;
    const uint64_t start = P2(32) - 100;
    const uint64_t delays[] = {99, 100, 101, 356, P2(14) + 3, P2(20) + 5,
                               P2(26) - 50, P2(26) + 150, P2(27),
                               TW_MAX_DELAY - 1, TW_MAX_DELAY};
    const size_t n = sizeof delays / sizeof delays[0];
    tw_wheel *w = new_wheel(start);
    for (size_t i = 0; i < n; i++)
        assert_int_not_equal(tw_add(w, delays[i], rec_cb, TAG(i)), 0);
    for (size_t i = 0; i < n; i++) {
        uint64_t due = start + delays[i];
        assert_int_equal(tw_next_expiry(w), due - tw_now(w));
        assert_int_equal(tw_advance(w, due - 1 - tw_now(w)), 0);
        CHECK(w);
        assert_int_equal(tw_advance(w, 1), 1);
        ASSERT_FIRE(i, due, (int)i);
    }
    ASSERT_NFIRES(n);
    drop(w);
}

/* Cross the wrap several times with a long-running periodic timer and
 * one-shots re-added after each wrap. */
static void test_many_wraps(void **state)
{
    (void)state;
    tw_wheel *w = new_wheel(P2(32) - 3);
    const uint64_t interval = P2(31) + 12345;
    assert_int_not_equal(tw_add_periodic(w, interval, interval, rec_cb,
                                         TAG(1)), 0);
    for (int k = 1; k <= 6; k++) {
        assert_int_equal(tw_advance(w, interval), 1);
        ASSERT_FIRE(k - 1, P2(32) - 3 + (uint64_t)k * interval, 1);
        CHECK(w);
    }
    drop(w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_placement_from_tick_zero),
        T(test_placement_by_expire_bits),
        T(test_every_boundary_from_every_start),
        T(test_boundaries_last_ticks_one_by_one),
        T(test_all_levels_in_one_jump),
        T(test_all_levels_random_chunks),
        T(test_wrap_tick_by_tick),
        T(test_wrap_from_top_level),
        T(test_many_wraps),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
