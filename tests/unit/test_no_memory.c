/*
 * tw_reschedule and tw_reschedule_ex never fail for memory (timer.c,
 * move_now_unlock and compact_whole). A move that needs a new queue entry grows
 * the block pool when the allocator allows; when it refuses, the queue the
 * timer leaves is compacted at once, which takes back at least the entry
 * it left there. What must hold, with every allocation refused and the
 * block pool at its reserve (one more add would need a new block):
 *
 *   - every kind of move succeeds: earlier, within the near window, from
 *     one near slot to another, out of the level slot the staging is
 *     moving down, repeated a thousand times over;
 *   - the compacted queue keeps its other timers, in order: timers due at
 *     one tick still fire in the order of their last add or reschedule;
 *   - a periodic timer's callback may move another timer and then its own,
 *     which takes the entry kept for its re-arm;
 *   - a callback's moves with a delay of 0, onto the due queue, and off it
 *     again, keep their order;
 *   - random moves of many timers fire each at its last due tick, in order,
 *     and tw_check holds throughout.
 *
 * This program compiles timer.c in, to bring the pool to its reserve.
 */
#include "../../timer.c"

#include "helpers.h"
#include "pool_reserve.h"

#define FILLER 9999 /* tag of the timers that only fill the pool */

/* Far-away timers that only fill the pool. */
static int fill(tw_wheel *w)
{
    return fill_to_reserve(w, 1000000, rec_cb, TAG(FILLER));
}

/* The firings so far, fillers left out, must be these (tick, tag) pairs. */
static void assert_fired(const uint64_t (*expected)[2], size_t count)
{
    size_t i, seen = 0;
    for (i = 0; i < rec.n && i < REC_CAP; i++) {
        if (rec.f[i].tag == FILLER)
            continue;
        assert_true(seen < count);
        assert_int_equal(rec.f[i].tick, expected[seen][0]);
        assert_int_equal(rec.f[i].tag, (int)expected[seen][1]);
        seen++;
    }
    assert_int_equal(seen, count);
}

static void test_moves_need_no_memory(void **state)
{
    tw_wheel *w = switchable_wheel();
    tw_id id[9];
    uint64_t blocks;
    int i;
    static const uint64_t expected[][2] = {
        {50, 1}, {50, 4}, {50, 5}, {50, 6}, {50, 3}, {60, 7}, {80, 2}, {4000, 8}};
    (void)state;
    for (i = 1; i <= 4; i++) /* one near slot: A B C D */
        id[i] = tw_add(w, 50, rec_cb, TAG(i));
    id[5] = tw_add(w, 3000, rec_cb, TAG(5));
    id[6] = tw_add(w, 700, rec_cb, TAG(6));
    id[7] = tw_add(w, 100, rec_cb, TAG(7));
    id[8] = tw_add(w, 5000, rec_cb, TAG(8));
    assert_true(fill(w) > 0);
    blocks = block_count(w);
    alloc_refused = 1;
    assert_int_equal(tw_reschedule(w, id[2], 80), 1);   /* near to near */
    assert_int_equal(tw_reschedule(w, id[5], 50), 1);   /* level to near */
    assert_int_equal(tw_reschedule(w, id[6], 50), 1);
    assert_int_equal(tw_reschedule(w, id[8], 4000), 1); /* level, earlier */
    assert_int_equal(tw_reschedule(w, id[3], 50), 1);   /* same tick: last */
    for (i = 0; i < 1000; i++) /* later inside near: moves now, each time */
        assert_int_equal(tw_reschedule_ex(w, id[7], 60 + (uint64_t)(i & 1), 0), 1);
    assert_int_equal(tw_reschedule(w, id[7], 60), 1);
    assert_int_equal(block_count(w), blocks); /* nothing was allocated */
    assert_true(w->entries <= w->entries_supported);
    CHECK(w);
    assert_int_equal(tw_advance(w, 4000), 8);
    assert_fired(expected, 8);
    CHECK(w);
    alloc_refused = 0;
    drop(w);
}

/* The level slot the staging is moving down is read from its head a share
 * per tick; a timer still in it moved earlier compacts it all the same. */
static void test_staged_slot_move_needs_no_memory(void **state)
{
    tw_wheel *w = switchable_wheel();
    static tw_id ids[200];
    uint64_t expected[200][2];
    uint64_t due[200];
    size_t i, count = 0;
    (void)state;
    for (i = 0; i < 200; i++) { /* level 0's slot for [256, 512): staged now */
        due[i] = 300 + i;
        ids[i] = tw_add(w, due[i], rec_cb, TAG(i));
    }
    assert_int_equal(tw_advance(w, 100), 0); /* part of it staged */
    assert_int_equal(list_of(node_at(w, (uint32_t)ids[190])), staged_slot(w, 0));
    assert_int_not_equal(list_of(node_at(w, (uint32_t)ids[0])), staged_slot(w, 0));
    fill(w);
    alloc_refused = 1;
    assert_int_equal(tw_reschedule(w, ids[190], 170), 1); /* due 270 */
    due[190] = 270;
    assert_int_equal(tw_reschedule(w, ids[195], 280), 1); /* due 380: after 80 */
    due[195] = 380;
    assert_true(w->entries <= w->entries_supported);
    CHECK(w);
    assert_int_equal(tw_advance(w, 400), 200);
    /* by tick; at 380, the timer added for it first, then the one moved */
    for (uint64_t tick = 0; tick < 500; tick++) {
        if (tick == 380) {
            expected[count][0] = tick, expected[count++][1] = 80;
            expected[count][0] = tick, expected[count++][1] = 195;
            continue;
        }
        for (i = 0; i < 200; i++)
            if (due[i] == tick)
                expected[count][0] = tick, expected[count++][1] = i;
    }
    assert_int_equal(count, 200);
    assert_fired((const uint64_t(*)[2])expected, count);
    CHECK(w);
    alloc_refused = 0;
    drop(w);
}

/* A periodic timer's callback, the first time: brings the pool to its
 * reserve, moves another timer (whose old queue is compacted), brings it
 * there again and moves its own timer (which has no entry while it runs). */
static tw_id other;
static int rearm_calls;
static void move_both_cb(tw_wheel *w, tw_id id, void *user_data)
{
    rec_push(w, id, user_data);
    if (rearm_calls++)
        return;
    fill(w);
    assert_int_equal(tw_reschedule(w, other, 10), 1);  /* 500 -> 20 */
    fill(w);
    assert_int_equal(tw_reschedule(w, id, 5), 1);      /* next at 15 */
    assert_true(w->entries <= w->entries_supported);
}

static void test_rearm_move_needs_no_memory(void **state)
{
    tw_wheel *w = switchable_wheel();
    static const uint64_t expected[][2] = {{10, 1}, {15, 1}, {20, 2}, {25, 1}};
    (void)state;
    rearm_calls = 0;
    assert_int_not_equal(tw_add_periodic(w, 10, 10, move_both_cb, TAG(1)), 0);
    other = tw_add(w, 500, rec_cb, TAG(2));
    alloc_refused = 1;
    assert_int_equal(tw_advance(w, 29), 4);
    assert_fired(expected, 4);
    CHECK(w);
    alloc_refused = 0;
    drop(w);
}

/* A callback moves timers with a delay of 0, onto the due queue for the
 * next call, then moves one of them again: the due queue it leaves is
 * compacted, and the two run in the order of their last moves. */
static tw_id due_a, due_b;
static void move_to_due_cb(tw_wheel *w, tw_id id, void *user_data)
{
    rec_push(w, id, user_data);
    fill(w);
    assert_int_equal(tw_reschedule(w, due_a, 0), 1);
    fill(w);
    assert_int_equal(tw_reschedule(w, due_b, 0), 1);
    fill(w);
    assert_int_equal(tw_reschedule(w, due_a, 0), 1);
    assert_true(w->entries <= w->entries_supported);
}

static void test_due_queue_move_needs_no_memory(void **state)
{
    tw_wheel *w = switchable_wheel();
    static const uint64_t expected[][2] = {{10, 1}, {10, 3}, {10, 2}};
    (void)state;
    assert_int_not_equal(tw_add(w, 10, move_to_due_cb, TAG(1)), 0);
    due_a = tw_add(w, 5000, rec_cb, TAG(2));
    due_b = tw_add(w, 100, rec_cb, TAG(3));
    alloc_refused = 1;
    assert_int_equal(tw_advance(w, 10), 1);
    CHECK(w);
    assert_int_equal(tw_advance(w, 0), 2);
    assert_fired(expected, 3);
    CHECK(w);
    alloc_refused = 0;
    drop(w);
}

/* Random moves of many timers, the allocator refusing throughout: each
 * fires at the tick of its last move, timers of one tick in the order of
 * their last move. */
#define RANDOM_TIMERS 2000
static uint64_t random_due[RANDOM_TIMERS], random_order[RANDOM_TIMERS];
static uint64_t last_tick, last_order;
static size_t random_fired;
static void random_cb(tw_wheel *w, tw_id id, void *user_data)
{
    int i = UNTAG(user_data);
    (void)id;
    if (i == FILLER)
        return;
    assert_int_equal(tw_now(w), random_due[i]);
    if (tw_now(w) == last_tick)
        assert_true(random_order[i] > last_order);
    last_tick = tw_now(w);
    last_order = random_order[i];
    random_fired++;
}

static void test_random_moves_need_no_memory(void **state)
{
    tw_wheel *w = switchable_wheel();
    static tw_id ids[RANDOM_TIMERS];
    uint64_t seed = 0x5eed, order = 0;
    int i, round;
    (void)state;
    last_tick = UINT64_MAX;
    random_fired = 0;
    for (i = 0; i < RANDOM_TIMERS; i++) {
        uint64_t delay = 1 + rng_next(&seed) % 20000;
        ids[i] = tw_add(w, delay, random_cb, TAG(i));
        random_due[i] = delay;
        random_order[i] = ++order;
    }
    fill_to_reserve(w, 1000000, random_cb, TAG(FILLER));
    alloc_refused = 1;
    for (round = 0; round < 200; round++) {
        for (int k = 0; k < 100; k++) {
            i = (int)(rng_next(&seed) % RANDOM_TIMERS);
            if (random_due[i] <= tw_now(w))
                continue; /* fired already */
            uint64_t delay = 1 + rng_next(&seed) % (k & 1 ? 300 : 20000);
            assert_int_equal(tw_reschedule(w, ids[i], delay), 1);
            random_due[i] = tw_now(w) + delay;
            random_order[i] = ++order;
        }
        assert_true(w->entries <= w->entries_supported);
        tw_advance(w, 1 + rng_next(&seed) % 50);
        CHECK(w);
    }
    tw_advance(w, 40000);
    assert_int_equal(random_fired, RANDOM_TIMERS);
    CHECK(w);
    alloc_refused = 0;
    drop(w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_moves_need_no_memory),
        T(test_staged_slot_move_needs_no_memory),
        T(test_rearm_move_needs_no_memory),
        T(test_due_queue_move_needs_no_memory),
        T(test_random_moves_need_no_memory),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
