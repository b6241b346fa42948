/* Slots are queues of node indices; a cancel or a reschedule leaves a stale
 * entry behind. These tests pin down what that must not cost: memory stays
 * bounded under any churn (a queue with no live entry gives its blocks back,
 * one whose stale entries outnumber twice its live ones is compacted), and
 * neither compaction nor stale entries change what fires, when, or in which
 * order. */
#include "helpers.h"

/* Bytes may grow by this much over a churn of 200 000 operations that would
 * otherwise leave 200 000 stale entries (800 KB) behind. */
#define CHURN 200000
#define SLACK (64 * 1024)

/* add + cancel in a slot that keeps a live timer, so it is never emptied:
 * only compaction bounds it. */
static void test_cancel_churn_is_bounded(void **state)
{
    (void)state;
    tw_wheel *w = new_wheel(0);
    tw_id anchor = tw_add(w, 50000, rec_cb, TAG(1));
    assert_int_not_equal(anchor, 0);
    assert_int_not_equal(tw_add(w, 50001, rec_cb, TAG(2)), 0);
    uint64_t before = get_stats(w).bytes;
    for (int i = 0; i < CHURN; i++) {
        tw_id id = tw_add(w, 50000 + (uint64_t)(i % 100), rec_cb, TAG(9));
        assert_int_not_equal(id, 0);
        assert_int_equal(tw_cancel(w, id), 1);
        if (i % 20000 == 0)
            CHECK(w);
    }
    CHECK(w);
    assert_true(get_stats(w).bytes <= before + SLACK);
    assert_int_equal(tw_count(w), 2);
    assert_int_equal(tw_next_expiry(w), 50000);
    assert_int_equal(tw_advance(w, 50001), 2);
    ASSERT_NFIRES(2);
    ASSERT_FIRE(0, 50000, 1);
    ASSERT_FIRE(1, 50001, 2);
    CHECK(w);
}

/* add + cancel where each cancel empties the slot: the blocks go back at
 * once. */
static void test_emptied_slot_gives_blocks_back(void **state)
{
    (void)state;
    tw_wheel *w = new_wheel(0);
    assert_int_not_equal(tw_add(w, 1, rec_cb, TAG(0)), 0);
    uint64_t before = get_stats(w).bytes;
    for (int i = 0; i < CHURN; i++) {
        tw_id id = tw_add(w, 3000000, rec_cb, TAG(9));
        assert_int_equal(tw_cancel(w, id), 1);
    }
    CHECK(w);
    assert_true(get_stats(w).bytes <= before + SLACK);
    assert_int_equal(tw_advance(w, 4000000), 1);
    ASSERT_NFIRES(1);
}

/* Timers moved back and forth inside one slot: every move leaves a stale
 * entry in the same queue. Each fires once, at its last due tick, ordered
 * by its last move. */
static void test_reschedule_churn_is_bounded(void **state)
{
    (void)state;
    tw_wheel *w = new_wheel(0);
    tw_id ids[100];
    for (int i = 0; i < 100; i++) {
        ids[i] = tw_add(w, 40000, rec_cb, TAG(i));
        assert_int_not_equal(ids[i], 0);
    }
    uint64_t before = get_stats(w).bytes;
    for (int round = 0; round < CHURN / 100; round++)
        for (int i = 0; i < 100; i++)
            assert_int_equal(tw_reschedule(w, ids[i], 40000 + (uint64_t)(round & 1)), 1);
    CHECK(w);
    assert_true(get_stats(w).bytes <= before + SLACK);
    /* the last round (odd) moved everything to 40001, in index order; now
     * move the odd ones to 40000, in reverse */
    for (int i = 99; i >= 0; i--)
        if (i & 1)
            assert_int_equal(tw_reschedule(w, ids[i], 40000), 1);
    assert_int_equal(tw_advance(w, 40001), 100);
    ASSERT_NFIRES(100);
    int k = 0;
    for (int i = 99; i >= 0; i--)
        if (i & 1)
            {
            ASSERT_FIRE(k, 40000, i);
            k++;
        }
    for (int i = 0; i < 100; i++)
        if (!(i & 1))
            {
            ASSERT_FIRE(k, 40001, i);
            k++;
        }
    CHECK(w);
}

/* Cancelling most timers of one tick compacts their slot; the survivors and
 * timers added later still fire in insertion order. */
static void test_compaction_keeps_order(void **state)
{
    (void)state;
    tw_wheel *w = new_wheel(0);
    tw_id ids[300];
    for (int i = 0; i < 300; i++)
        ids[i] = tw_add(w, 30000, rec_cb, TAG(i));
    for (int i = 0; i < 300; i++)
        if (i % 5 != 0)
            assert_int_equal(tw_cancel(w, ids[i]), 1);
    CHECK(w);
    for (int i = 300; i < 310; i++)
        assert_int_not_equal(tw_add(w, 30000, rec_cb, TAG(i)), 0);
    /* and a second wave of cancels, after the first compaction */
    for (int i = 0; i < 300; i += 10)
        assert_int_equal(tw_cancel(w, ids[i]), 1);
    CHECK(w);
    assert_int_equal(tw_advance(w, 30000), 30 + 10);
    int k = 0;
    for (int i = 5; i < 300; i += 10, k++)
        ASSERT_FIRE(k, 30000, i);
    for (int i = 300; i < 310; i++, k++)
        ASSERT_FIRE(k, 30000, i);
    ASSERT_NFIRES(40);
}

/* A large slot is compacted a few entries per cancel; here its compaction
 * is still under way when more timers join the slot and when the slot is
 * cascaded. Every survivor still fires once, on its tick, in insertion
 * order. */
static void test_compaction_interrupted(void **state)
{
    (void)state;
    tw_wheel *w = new_wheel(0);
    static tw_id ids[3000];
    for (int i = 0; i < 3000; i++)
        ids[i] = tw_add(w, 30000 + (uint64_t)(i % 50), rec_cb, TAG(i));
    /* compaction starts at the 2006th cancel and needs ~47 more */
    int cancelled = 0;
    for (int i = 0; i < 3000 && cancelled < 2020; i++)
        if (i % 4 != 0) {
            assert_int_equal(tw_cancel(w, ids[i]), 1);
            cancelled++;
        }
    CHECK(w);
    for (int k = 0; k < 10; k++)
        assert_int_not_equal(tw_add(w, 30000, rec_cb, TAG(5000 + k)), 0);
    CHECK(w);
    assert_int_equal(tw_advance(w, 16384), 0); /* the slot cascades */
    CHECK(w);
    assert_int_equal(tw_advance(w, 30049 - 16384), 3000 - cancelled + 10);
    size_t k = 0;
    for (int tick = 0; tick < 50; tick++) {
        /* survivors of this tick, in insertion order; the non-multiples of
         * 4 were cancelled in order, the first 2020 of them */
        int seen = 0;
        for (int i = tick; i < 3000; i += 50) {
            int survived = i % 4 == 0 || (i / 4) * 3 + (i % 4) > 2020;
            if (!survived)
                continue;
            ASSERT_FIRE(k, 30000 + (uint64_t)tick, i);
            k++;
            seen++;
        }
        if (tick == 0)
            for (int j = 0; j < 10; j++, k++)
                ASSERT_FIRE(k, 30000, 5000 + j);
        assert_true(seen > 0);
    }
    ASSERT_NFIRES(k);
    CHECK(w);
    /* The same level slot in use again, one 2^20-tick turn later: no trace
     * of the abandoned compaction may act on it. */
    rec_reset();
    assert_int_equal(tw_advance(w, (1u << 20) - tw_now(w)), 0);
    for (int i = 0; i < 100; i++)
        ids[i] = tw_add(w, 16384 + 5, rec_cb, TAG(i));
    for (int i = 0; i < 100; i += 2)
        assert_int_equal(tw_cancel(w, ids[i]), 1);
    CHECK(w);
    assert_int_equal(tw_advance(w, 16384 + 5), 50);
    for (int i = 1, j = 0; i < 100; i += 2, j++)
        ASSERT_FIRE(j, (1u << 20) + 16384 + 5, i);
    CHECK(w);
}

/* The same churn, scattered over many slots and every level, with firing in
 * between, against a plain count of what must still be pending. */
static void test_scattered_churn(void **state)
{
    (void)state;
    tw_wheel *w = new_wheel(0);
    static tw_id ids[4096];
    uint64_t seed = 12345;
    size_t fired_before = 0;
    for (int i = 0; i < 4096; i++)
        ids[i] = tw_add(w, 1 + rng_next(&seed) % 5000000, rec_cb, TAG(i));
    uint64_t before = get_stats(w).bytes;
    for (int step = 0; step < CHURN; step++) {
        int i = (int)(rng_next(&seed) % 4096);
        uint64_t delay = 1 + rng_next(&seed) % 5000000;
        if (tw_reschedule(w, ids[i], delay) != 1) {
            ids[i] = tw_add(w, delay, rec_cb, TAG(i)); /* it had fired */
            assert_int_not_equal(ids[i], 0);
        }
        if (step % 64 == 0)
            assert_true(tw_advance(w, 50) >= 0);
        if (step % 50000 == 0)
            CHECK(w);
    }
    CHECK(w);
    uint64_t pending = 0;
    for (int i = 0; i < 4096; i++)
        pending += tw_remaining(w, ids[i]) != TW_NEVER;
    assert_true(pending > 4000);
    assert_int_equal(tw_count(w), pending);
    assert_true(get_stats(w).bytes <= before + SLACK);
    fired_before = rec.n;
    assert_int_equal(tw_advance(w, 5000000), (int64_t)pending);
    assert_int_equal(rec.n, fired_before + pending);
    assert_int_equal(tw_count(w), 0);
    CHECK(w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_cancel_churn_is_bounded),
        T(test_emptied_slot_gives_blocks_back),
        T(test_reschedule_churn_is_bounded),
        T(test_compaction_keeps_order),
        T(test_compaction_interrupted),
        T(test_scattered_churn),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
