/* Inspection: tw_count (a running one-shot is not counted, a running
 * periodic is), tw_now, tw_tick_us, every tw_stats field (including the
 * cascade counter and partial fills by size), and tw_check staying 0
 * through a long pseudo-random workload checked against a simple model. */
#include <stddef.h>

#include "helpers.h"

static void test_count_and_now(void **state)
{
    (void)state;
    tw_wheel *w = new_wheel(500);
    assert_int_equal(tw_count(w), 0);
    assert_int_equal(tw_now(w), 500);
    tw_id a = tw_add(w, 10, rec_cb, NULL);
    assert_int_not_equal(tw_add(w, 20, rec_cb, NULL), 0);
    assert_int_not_equal(tw_add_periodic(w, 5, 5, rec_cb, NULL), 0);
    assert_int_equal(tw_count(w), 3);
    assert_int_equal(tw_cancel(w, a), 1);
    assert_int_equal(tw_count(w), 2);
    assert_int_equal(tw_advance(w, 19), 3);
    assert_int_equal(tw_now(w), 519);
    assert_int_equal(tw_count(w), 2);
    assert_int_equal(tw_advance(w, 1), 2);
    assert_int_equal(tw_count(w), 1);
    assert_int_equal(tw_now(w), 520);
    drop(w);
}

/* tw_count seen from inside callbacks. */
static uint64_t count_inside[4];

static void count_cb(tw_wheel *w, tw_id id, void *user_data)
{
    count_inside[UNTAG(user_data)] = tw_count(w);
    if (UNTAG(user_data) == 2) /* the periodic stops itself */
        tw_cancel(w, id);
    if (UNTAG(user_data) == 3)
        count_inside[0] = tw_count(w);
}

static void test_count_inside_callbacks(void **state)
{
    (void)state;
    tw_wheel *w = new_wheel(0);
    assert_int_not_equal(tw_add(w, 5, count_cb, TAG(1)), 0);
    assert_int_not_equal(tw_add_periodic(w, 6, 6, count_cb, TAG(2)), 0);
    assert_int_not_equal(tw_add(w, 7, count_cb, TAG(3)), 0);
    assert_int_not_equal(tw_add(w, 100, rec_cb, NULL), 0);
    assert_int_equal(tw_advance(w, 10), 3);
    assert_int_equal(count_inside[1], 3); /* itself not counted */
    assert_int_equal(count_inside[2], 3); /* running periodic counted */
    assert_int_equal(count_inside[3], 1); /* periodic gone after cancel */
    assert_int_equal(count_inside[0], 1);
    assert_int_equal(tw_count(w), 1);
    drop(w);
}

static void test_tick_us(void **state)
{
    (void)state;
    struct tw_config c;
    tw_config_init(&c);
    c.lock = TW_LOCK_NONE;
    c.tick_us = 10000;
    tw_wheel *w = new_wheel_cfg(&c);
    assert_int_equal(tw_tick_us(w), 10000);
    assert_int_equal(get_stats(w).tick_us, 10000);
    drop(w);
}

/* Every counter after a scripted sequence. */
static void test_stats_fields(void **state)
{
    (void)state;
    tw_wheel *w = new_wheel(0);
    struct tw_stats s = get_stats(w);
    assert_int_equal(s.size, sizeof s);
    assert_int_equal(s.tick_us, 1000);
    assert_int_equal(s.now, 0);
    assert_int_equal(s.pending, 0);
    assert_int_equal(s.pending_due, 0);
    assert_int_equal(s.pending_near, 0);
    for (int i = 0; i < 4; i++)
        assert_int_equal(s.pending_level[i], 0);
    assert_int_equal(s.pool_capacity, 0);
    assert_int_equal(s.pool_free, 0);
    assert_true(s.bytes > 0);
    assert_int_equal(s.added + s.fired + s.cancelled + s.rescheduled +
                         s.cascaded + s.rebases,
                     0);

    tw_id ids[8];
    ids[0] = tw_add(w, 0, rec_cb, NULL);
    ids[1] = tw_add(w, 10, rec_cb, NULL);
    ids[2] = tw_add(w, 255, rec_cb, NULL);
    ids[3] = tw_add(w, 256, rec_cb, NULL);
    ids[4] = tw_add(w, 1u << 14, rec_cb, NULL);
    ids[5] = tw_add(w, 1u << 20, rec_cb, NULL);
    ids[6] = tw_add(w, 1u << 26, rec_cb, NULL);
    ids[7] = tw_add_periodic(w, 3, 3, rec_cb, NULL);
    s = get_stats(w);
    assert_int_equal(s.pending, 8);
    assert_int_equal(s.pending_due, 1);
    assert_int_equal(s.pending_near, 3);
    assert_int_equal(s.pending_level[0], 1);
    assert_int_equal(s.pending_level[1], 1);
    assert_int_equal(s.pending_level[2], 1);
    assert_int_equal(s.pending_level[3], 1);
    assert_int_equal(s.added, 8);
    assert_int_equal(s.pool_capacity, 1024);
    assert_true(s.pool_free <= 1024 - 8);

    assert_int_equal(tw_reschedule(w, ids[1], 20), 1);
    assert_int_equal(tw_reschedule(w, ids[1], 30), 1);
    assert_int_equal(tw_reschedule(w, ids[0], TW_MAX_DELAY + 1), -ERANGE);
    assert_int_equal(tw_cancel(w, ids[2]), 1);
    assert_int_equal(tw_cancel(w, ids[2]), 0);
    assert_int_equal(tw_advance(w, 9), 4); /* ids[0]; periodic 3, 6, 9 */
    s = get_stats(w);
    assert_int_equal(s.now, 9);
    assert_int_equal(s.fired, 4);
    assert_int_equal(s.cancelled, 1);
    assert_int_equal(s.rescheduled, 2);
    assert_int_equal(s.pending, 6);
    assert_int_equal(s.pending_due, 0);
    /* ids[1] at 30, periodic at 12, and ids[3] (256). ids[3..6] each sit in
     * the slot after time's at their level, so staging has moved each one
     * level down (a share of at least one entry per tick). */
    assert_int_equal(s.pending_near, 3);
    assert_int_equal(s.pending_level[0], 1);
    assert_int_equal(s.pending_level[1], 1);
    assert_int_equal(s.pending_level[2], 1);
    assert_int_equal(s.pending_level[3], 0);
    assert_int_equal(s.cascaded, 4);
    assert_int_equal(s.rebases, 0);
    CHECK(w);
    drop(w);
}

/* A partial fill never writes past stats->size. */
static void test_stats_partial_size(void **state)
{
    (void)state;
    tw_wheel *w = new_wheel(77);
    union {
        struct tw_stats s;
        unsigned char b[sizeof(struct tw_stats)];
    } u;
    const size_t sizes[] = {8, 16, offsetof(struct tw_stats, pending_near),
                            sizeof(struct tw_stats) - 8};
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        memset(&u, 0xab, sizeof u);
        u.s.size = (uint32_t)sizes[k];
        assert_int_equal(tw_get_stats(w, &u.s), 0);
        assert_int_equal(u.s.tick_us, 1000);
        if (sizes[k] >= 16)
            assert_int_equal(u.s.now, 77);
        for (size_t i = sizes[k]; i < sizeof u.b; i++)
            assert_int_equal(u.b[i], 0xab);
    }
    drop(w);
}

/* Moves down: one per level a timer passes on its way to near (staging
 * moves a slot one level down), the same whether the wheel ticks one by
 * one or jumps. */
static void test_cascade_counter(void **state)
{
    (void)state;
    const struct {
        uint64_t delay;
        uint64_t moves;
    } cases[] = {
        {255, 0},
        {256, 1},
        {300, 1},
        {1u << 14, 2},
        {(1u << 14) + 256, 2},
        {(1u << 20) + 5, 3},
        {(1u << 26), 4},
        {(UINT64_C(1) << 26) + (1u << 20) + (1u << 14) + 256 + 5, 4},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        for (int mode = 0; mode < 2; mode++) {
            tw_wheel *w = new_wheel(0);
            assert_int_not_equal(tw_add(w, cases[i].delay, rec_cb, NULL), 0);
            if (mode == 0 && cases[i].delay < (1u << 21)) {
                for (uint64_t t = 0; t < cases[i].delay; t++)
                    tw_advance(w, 1);
            } else {
                assert_int_equal(tw_advance(w, cases[i].delay), 1);
            }
            assert_int_equal(tw_count(w), 0);
            assert_int_equal(get_stats(w).cascaded, cases[i].moves);
            drop(w);
        }
    }
    /* A timer cancelled before its slot comes due is never moved. */
    tw_wheel *w = new_wheel(0);
    tw_id id = tw_add(w, 70000, rec_cb, NULL);
    assert_int_equal(tw_cancel(w, id), 1);
    assert_int_equal(tw_advance(w, 100000), 0);
    assert_int_equal(get_stats(w).cascaded, 0);
    drop(w);
}

/* ---- a long random workload against a model ---------------------------- */

#define NW 2000
static struct {
    tw_id id;
    int live;
    uint64_t due;
    uint64_t interval;
} model[NW];
static uint64_t model_fired;
static int model_bad;

static void model_cb(tw_wheel *w, tw_id id, void *user_data)
{
    int i = UNTAG(user_data);
    model_fired++;
    if (!model[i].live || model[i].id != id || model[i].due != tw_now(w)) {
        model_bad++;
        return;
    }
    if (model[i].interval)
        model[i].due += model[i].interval;
    else
        model[i].live = 0;
}

static void test_check_and_counters_under_random_workload(void **state)
{
    (void)state;
    memset(model, 0, sizeof model);
    model_fired = 0;
    model_bad = 0;
    uint64_t seed = 2024;
    uint64_t added = 0, cancelled = 0, rescheduled = 0;
    tw_wheel *w = new_wheel((UINT64_C(1) << 32) - 50000);
    for (int step = 0; step < 20000; step++) {
        uint64_t r = rng_next(&seed);
        int i = (int)((r >> 16) % NW);
        uint64_t d = (r >> 32) % ((r & 0x100) ? 300 : 200000);
        switch (r % 5) {
        case 0:
        case 1:
            if (!model[i].live) {
                uint64_t iv = (r & 0x200) ? 1 + d % 5000 : 0;
                tw_id id = iv ? tw_add_periodic(w, d, iv, model_cb, TAG(i))
                              : tw_add(w, d, model_cb, TAG(i));
                assert_int_not_equal(id, 0);
                model[i].id = id;
                model[i].live = 1;
                model[i].due = tw_now(w) + d;
                model[i].interval = iv;
                added++;
            }
            break;
        case 2:
            assert_int_equal(tw_cancel(w, model[i].id), model[i].live);
            cancelled += (uint64_t)model[i].live;
            model[i].live = 0;
            break;
        case 3:
            assert_int_equal(tw_reschedule(w, model[i].id, d), model[i].live);
            if (model[i].live) {
                model[i].due = tw_now(w) + d;
                rescheduled++;
            }
            break;
        default:
            assert_true(tw_advance(w, d % 500) >= 0);
            break;
        }
        if (step % 97 == 0) {
            CHECK(w);
            uint64_t live = 0;
            for (int k = 0; k < NW; k++)
                live += (uint64_t)model[k].live;
            struct tw_stats s = get_stats(w);
            assert_int_equal(tw_count(w), live);
            assert_int_equal(s.pending, live);
            assert_int_equal(s.pending_due + s.pending_near +
                                 s.pending_level[0] + s.pending_level[1] +
                                 s.pending_level[2] + s.pending_level[3],
                             live);
            assert_int_equal(s.added, added);
            assert_int_equal(s.cancelled, cancelled);
            assert_int_equal(s.rescheduled, rescheduled);
            assert_int_equal(s.fired, model_fired);
            assert_int_equal(s.now, tw_now(w));
            assert_true(s.pool_free + live <= s.pool_capacity);
            assert_int_equal(model_bad, 0);
        }
    }
    CHECK(w);
    assert_int_equal(model_bad, 0);
    drop(w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_count_and_now),
        T(test_count_inside_callbacks),
        T(test_tick_us),
        T(test_stats_fields),
        T(test_stats_partial_size),
        T(test_cascade_counter),
        T(test_check_and_counters_under_random_workload),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
