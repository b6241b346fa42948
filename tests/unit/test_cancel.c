/* Cancellation: pending at every level, stale ids (fired, cancelled, reused
 * node), double cancel, id 0 and garbage ids, cancel from callbacks (own
 * one-shot, own periodic, other timers), cancel of a timer already taken
 * into the batch being dispatched, and memory bounded by live timers. */
#include "helpers.h"

static void test_cancel_pending(void **state)
{
    (void)state;
    tw_wheel *w = new_wheel(0);
    tw_id a = tw_add(w, 10, rec_cb, TAG(1));
    tw_id b = tw_add(w, 10, rec_cb, TAG(2));
    assert_int_equal(tw_count(w), 2);
    assert_int_equal(tw_cancel(w, a), 1);
    assert_int_equal(tw_count(w), 1);
    assert_int_equal(tw_remaining(w, a), TW_NEVER);
    CHECK(w);
    assert_int_equal(tw_cancel(w, a), 0); /* twice */
    assert_int_equal(tw_advance(w, 20), 1);
    ASSERT_NFIRES(1);
    ASSERT_FIRE(0, 10, 2);
    assert_int_equal(tw_cancel(w, b), 0); /* already fired */
    assert_int_equal(tw_cancel(w, a), 0);
    struct tw_stats s = get_stats(w);
    assert_int_equal(s.cancelled, 1);
    assert_int_equal(s.fired, 1);
    CHECK(w);
    drop(w);
}

static void test_cancel_due_now(void **state)
{
    (void)state;
    tw_wheel *w = new_wheel(0);
    tw_id a = tw_add(w, 0, rec_cb, TAG(1));
    assert_int_not_equal(tw_add(w, 0, rec_cb, TAG(2)), 0);
    assert_int_equal(tw_cancel(w, a), 1);
    assert_int_equal(tw_next_expiry(w), 0);
    assert_int_equal(tw_advance(w, 0), 1);
    ASSERT_FIRE(0, 0, 2);
    assert_int_equal(tw_next_expiry(w), TW_NEVER);
    CHECK(w);
    drop(w);
}

/* Cancel every other timer across all levels; the rest fire on time. */
static void test_cancel_at_every_level(void **state)
{
    (void)state;
    const uint64_t delays[] = {1, 100, 255, 256, 300, 16383, 16384, 20000,
                               (1u << 20) - 1, 1u << 20, 5000000,
                               (1u << 26) - 1, 1u << 26, 100000000,
                               TW_MAX_DELAY - 1, TW_MAX_DELAY};
    const size_t n = sizeof delays / sizeof delays[0];
    for (int parity = 0; parity < 2; parity++) {
        rec_reset();
        tw_wheel *w = new_wheel(7);
        tw_id ids[sizeof delays / sizeof delays[0]];
        for (size_t i = 0; i < n; i++)
            ids[i] = tw_add(w, delays[i], rec_cb, TAG(i));
        for (size_t i = (size_t)parity; i < n; i += 2) {
            assert_int_equal(tw_cancel(w, ids[i]), 1);
            CHECK(w);
        }
        assert_int_equal(tw_count(w), n / 2);
        assert_int_equal(tw_next_expiry(w), delays[1 - parity]);
        assert_int_equal(tw_advance(w, TW_MAX_DELAY), (int64_t)(n / 2));
        size_t k = 0;
        for (size_t i = 1 - (size_t)parity; i < n; i += 2, k++)
            ASSERT_FIRE(k, 7 + delays[i], (int)i);
        for (size_t i = 0; i < n; i++)
            assert_int_equal(tw_cancel(w, ids[i]), 0);
        CHECK(w);
        drop(w);
    }
}

static int is_live(const tw_id *ids, size_t n, tw_id id)
{
    for (size_t i = 0; i < n; i++)
        if (ids[i] == id)
            return 1;
    return 0;
}

/* Ids that name no live timer return 0 and touch nothing. */
static void test_garbage_ids(void **state)
{
    (void)state;
    tw_wheel *w = new_wheel(0);
    tw_id ids[64];
    for (int i = 0; i < 64; i++)
        ids[i] = tw_add(w, (uint64_t)i + 1, rec_cb, TAG(i));
    assert_int_equal(tw_cancel(w, 0), 0);
    const tw_id fixed[] = {1, 2, 3, 64, 65, 1024, UINT32_MAX,
                           (tw_id)UINT32_MAX + 1, UINT64_MAX, UINT64_MAX - 1,
                           UINT64_C(1) << 63};
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++) {
        if (!is_live(ids, 64, fixed[i]))
            assert_int_equal(tw_cancel(w, fixed[i]), 0);
    }
    for (int i = 0; i < 64; i++) {
        const tw_id variants[] = {ids[i] ^ (UINT64_C(1) << 32),
                                  ids[i] ^ (UINT64_C(1) << 40),
                                  ids[i] ^ (UINT64_C(1) << 63),
                                  ids[i] + (UINT64_C(1) << 48)};
        for (size_t v = 0; v < 4; v++) {
            if (!is_live(ids, 64, variants[v]))
                assert_int_equal(tw_cancel(w, variants[v]), 0);
        }
    }
    assert_int_equal(tw_count(w), 64);
    CHECK(w);
    assert_int_equal(tw_advance(w, 64), 64);
    for (int i = 0; i < 64; i++)
        ASSERT_FIRE(i, (uint64_t)i + 1, i);
    drop(w);
}

/* An old id never reaches the timer that reuses its node. */
static void test_stale_id_after_node_reuse(void **state)
{
    (void)state;
    tw_wheel *w = new_wheel(0);
    tw_id old[1000];
    for (int round = 0; round < 1000; round++) {
        old[round] = tw_add(w, 5, rec_cb, TAG(round));
        assert_int_not_equal(old[round], 0);
        if (round % 2 == 0)
            assert_int_equal(tw_cancel(w, old[round]), 1);
        else
            assert_int_equal(tw_advance(w, 5), 1);
        /* The new timer most likely takes the node just freed. */
        tw_id fresh = tw_add(w, 3, rec_cb, TAG(5000 + round));
        assert_int_not_equal(fresh, 0);
        for (int k = 0; k <= round; k++) {
            assert_int_not_equal(fresh, old[k]);
            assert_int_equal(tw_cancel(w, old[k]), 0);
            assert_int_equal(tw_reschedule(w, old[k], 1), 0);
            assert_int_equal(tw_remaining(w, old[k]), TW_NEVER);
        }
        assert_int_equal(tw_remaining(w, fresh), 3);
        assert_int_equal(tw_cancel(w, fresh), 1);
        CHECK(w);
    }
    assert_int_equal(rec.n, 500);
    assert_int_equal(tw_count(w), 0);
    drop(w);
}

static void test_cancel_null_wheel(void **state)
{
    (void)state;
    assert_int_equal(tw_cancel(NULL, 1), -EINVAL);
    assert_int_equal(tw_cancel(NULL, 0), -EINVAL);
}

/* ---- cancel from callbacks --------------------------------------------- */

#define MAX_TARGETS 4
static struct {
    tw_id target[MAX_TARGETS]; /* cancelled by the tagged callback */
    size_t ntargets;
    int ret[16];
    size_t nret;
    tw_id self;
} cb;

/* Records, then cancels every id in cb.target and remembers the results. */
static void cancel_targets_cb(tw_wheel *w, tw_id id, void *user_data)
{
    rec_push(w, id, user_data);
    for (size_t i = 0; i < cb.ntargets && cb.nret < 16; i++)
        cb.ret[cb.nret++] = tw_cancel(w, cb.target[i]);
}

/* Records, then cancels and reschedules itself. */
static void cancel_self_cb(tw_wheel *w, tw_id id, void *user_data)
{
    rec_push(w, id, user_data);
    cb.self = id;
    cb.ret[cb.nret++] = tw_cancel(w, id);
    cb.ret[cb.nret++] = tw_reschedule(w, id, 5);
    cb.ret[cb.nret++] = tw_cancel(w, id);
}

static void setup_cb(void)
{
    memset(&cb, 0, sizeof cb);
}

static void test_own_oneshot_cancel_in_callback_returns_0(void **state)
{
    (void)state;
    setup_cb();
    tw_wheel *w = new_wheel(0);
    tw_id a = tw_add(w, 4, cancel_self_cb, TAG(1));
    assert_int_equal(tw_advance(w, 100), 1);
    assert_int_equal(cb.self, a);
    assert_int_equal(cb.nret, 3);
    assert_int_equal(cb.ret[0], 0);
    assert_int_equal(cb.ret[1], 0);
    assert_int_equal(cb.ret[2], 0);
    ASSERT_NFIRES(1);
    ASSERT_FIRE(0, 4, 1);
    assert_int_equal(tw_count(w), 0);
    assert_int_equal(get_stats(w).cancelled, 0);
    CHECK(w);
    drop(w);
}

static void test_own_periodic_cancel_in_callback_returns_1(void **state)
{
    (void)state;
    setup_cb();
    tw_wheel *w = new_wheel(0);
    assert_int_not_equal(tw_add_periodic(w, 3, 10, rec_cb, TAG(1)), 0);
    tw_id p = tw_add_periodic(w, 5, 10, cancel_self_cb, TAG(2));
    assert_int_not_equal(p, 0);
    assert_int_equal(tw_advance(w, 100), 11);
    /* p fired once at 5 and cancelled itself (1), then reschedule and a
     * second cancel found nothing (0, 0). */
    assert_int_equal(cb.self, p);
    assert_int_equal(cb.ret[0], 1);
    assert_int_equal(cb.ret[1], 0);
    assert_int_equal(cb.ret[2], 0);
    size_t p_fires = 0;
    for (size_t i = 0; i < rec.n; i++) {
        if (rec.f[i].tag == 2) {
            p_fires++;
            assert_int_equal(rec.f[i].tick, 5);
        }
    }
    assert_int_equal(p_fires, 1);
    assert_int_equal(tw_count(w), 1);
    assert_int_equal(get_stats(w).cancelled, 1);
    CHECK(w);
    drop(w);
}

/* A callback cancels a timer due later: it never runs. */
static void test_cancel_other_later_timer(void **state)
{
    (void)state;
    setup_cb();
    tw_wheel *w = new_wheel(0);
    assert_int_not_equal(tw_add(w, 5, cancel_targets_cb, TAG(1)), 0);
    cb.target[0] = tw_add(w, 6, rec_cb, TAG(2));          /* near */
    cb.target[1] = tw_add(w, 70000, rec_cb, TAG(3));      /* level 1 */
    cb.target[2] = tw_add_periodic(w, 2, 2, rec_cb, TAG(4)); /* fired 2, 4 */
    cb.ntargets = 3;
    assert_int_not_equal(tw_add(w, 7, rec_cb, TAG(5)), 0);
    assert_int_equal(tw_advance(w, 100000), 4);
    assert_int_equal(cb.nret, 3);
    assert_int_equal(cb.ret[0], 1);
    assert_int_equal(cb.ret[1], 1);
    assert_int_equal(cb.ret[2], 1);
    ASSERT_NFIRES(4);
    ASSERT_FIRE(0, 2, 4);
    ASSERT_FIRE(1, 4, 4);
    ASSERT_FIRE(2, 5, 1);
    ASSERT_FIRE(3, 7, 5);
    assert_int_equal(tw_count(w), 0);
    CHECK(w);
    drop(w);
}

/* Same tick: the first callback cancels the third (already in the batch,
 * not started): it does not run. Cancelling the one that already ran
 * returns 0. */
static void test_cancel_in_batch(void **state)
{
    (void)state;
    const uint64_t delays[] = {0, 1, 9, 300, 20000};
    for (size_t d = 0; d < sizeof delays / sizeof delays[0]; d++) {
        setup_cb();
        rec_reset();
        tw_wheel *w = new_wheel(0);
        tw_id first = tw_add(w, delays[d], cancel_targets_cb, TAG(1));
        assert_int_not_equal(tw_add(w, delays[d], rec_cb, TAG(2)), 0);
        cb.target[0] = tw_add(w, delays[d], rec_cb, TAG(3));
        assert_int_not_equal(tw_add(w, delays[d], rec_cb, TAG(4)), 0);
        cb.target[1] = first;
        cb.ntargets = 2;
        assert_int_equal(tw_advance(w, delays[d] + 5), 3);
        assert_int_equal(cb.nret, 2);
        assert_int_equal(cb.ret[0], 1);
        assert_int_equal(cb.ret[1], 0);
        ASSERT_NFIRES(3);
        ASSERT_FIRE(0, delays[d], 1);
        ASSERT_FIRE(1, delays[d], 2);
        ASSERT_FIRE(2, delays[d], 4);
        assert_int_equal(tw_count(w), 0);
        assert_int_equal(get_stats(w).cancelled, 1);
        assert_int_equal(get_stats(w).fired, 3);
        CHECK(w);
        drop(w);
    }
}

/* Two timers cancel each other at the same tick: only the first runs. */
static tw_id pair[2];
static int pair_ret[2];

static void pair_cb(tw_wheel *w, tw_id id, void *user_data)
{
    rec_push(w, id, user_data);
    int me = UNTAG(user_data);
    pair_ret[me] = tw_cancel(w, pair[1 - me]);
}

static void test_mutual_cancel_same_tick(void **state)
{
    (void)state;
    tw_wheel *w = new_wheel(0);
    pair_ret[0] = pair_ret[1] = -100;
    pair[0] = tw_add(w, 50, pair_cb, TAG(0));
    pair[1] = tw_add(w, 50, pair_cb, TAG(1));
    assert_int_equal(tw_advance(w, 50), 1);
    ASSERT_NFIRES(1);
    ASSERT_FIRE(0, 50, 0);
    assert_int_equal(pair_ret[0], 1);
    assert_int_equal(pair_ret[1], -100);
    CHECK(w);
    drop(w);
}

/* A timer added by a callback and due at the next call can be cancelled. */
static tw_id added_id;

static void add_zero_cb(tw_wheel *w, tw_id id, void *user_data)
{
    rec_push(w, id, user_data);
    added_id = tw_add(w, 0, rec_cb, TAG(9));
}

static void test_cancel_timer_added_due_by_callback(void **state)
{
    (void)state;
    tw_wheel *w = new_wheel(0);
    assert_int_not_equal(tw_add(w, 2, add_zero_cb, TAG(1)), 0);
    assert_int_equal(tw_advance(w, 4), 1);
    assert_int_not_equal(added_id, 0);
    assert_int_equal(tw_count(w), 1);
    assert_int_equal(tw_cancel(w, added_id), 1);
    assert_int_equal(tw_advance(w, 0), 0);
    ASSERT_NFIRES(1);
    CHECK(w);
    drop(w);
}

/* Cancelled nodes go back to the pool at once: churn does not grow it. */
static void test_cancel_returns_nodes(void **state)
{
    (void)state;
    tw_wheel *w = new_wheel(0);
    static tw_id ids[10000];
    for (int round = 0; round < 50; round++) {
        for (int i = 0; i < 10000; i++) {
            ids[i] = tw_add(w, (uint64_t)(i * 7919 % 100000) + 1, rec_cb,
                            NULL);
            assert_int_not_equal(ids[i], 0);
        }
        for (int i = 0; i < 10000; i++)
            assert_int_equal(tw_cancel(w, ids[i]), 1);
        assert_int_equal(tw_count(w), 0);
    }
    struct tw_stats s = get_stats(w);
    assert_int_equal(s.pool_capacity, 10 * 1024);
    assert_int_equal(s.cancelled, 50 * 10000);
    assert_int_equal(s.pending, 0);
    CHECK(w);
    assert_int_equal(tw_advance(w, 200000), 0);
    ASSERT_NFIRES(0);
    drop(w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_cancel_pending),
        T(test_cancel_due_now),
        T(test_cancel_at_every_level),
        T(test_garbage_ids),
        T(test_stale_id_after_node_reuse),
        T(test_cancel_null_wheel),
        T(test_own_oneshot_cancel_in_callback_returns_0),
        T(test_own_periodic_cancel_in_callback_returns_1),
        T(test_cancel_other_later_timer),
        T(test_cancel_in_batch),
        T(test_mutual_cancel_same_tick),
        T(test_cancel_timer_added_due_by_callback),
        T(test_cancel_returns_nodes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
