/*
 * Rescheduling in place (timer.c, moves_in_place, "staging" and "order"):
 * a timer waiting in a level slot and rescheduled later keeps its entry
 * there, and the staging that reaches the slot files it by its new tick.
 * What must hold:
 *
 *   - such a reschedule adds no queue entry, however often it is made,
 *     with an allocator that fails everything;
 *   - the timer fires exactly at its new tick, never at the old one;
 *   - timers due at one tick still fire in the order of their last add,
 *     reschedule or re-arm: a timer filed late by the staging is sorted
 *     into its place, without memory (the allocator failing changes
 *     nothing), whatever the order of arrival;
 *   - tw_next_expiry stays exact for a small wheel whose first level slot
 *     holds only timers rescheduled past its span;
 *   - tw_check accepts a timer past its slot's span only when it was
 *     rescheduled there, and a near slot out of stamp order only when it
 *     is marked for sorting.
 *
 * This program compiles timer.c in, to look at entries and stamps.
 */
#include "../../timer.c"

#include "helpers.h"
#include "pool_reserve.h"

#include <inttypes.h>

static uint32_t index_of(tw_id id)
{
    return (uint32_t)id;
}

static struct node *node_of_id(tw_wheel *w, tw_id id)
{
    return node_at(w, index_of(id));
}


/* ---- the move itself ----------------------------------------------------- */

static void test_later_keeps_its_entry(void **state)
{
    tw_wheel *w = new_wheel(0);
    tw_id id = tw_add(w, 1000, rec_cb, TAG(1)); /* level 0: [768, 1024) */
    struct node *n = node_of_id(w, id);
    unsigned list = list_of(n);
    uint32_t entries = w->entries, position = n->position;
    (void)state;
    assert_true(is_level_slot(list));
    assert_int_equal(tw_reschedule(w, id, 5000), 1);
    assert_int_equal(list_of(n), list); /* still there, */
    assert_int_equal(n->position, position); /* in the same entry */
    assert_int_equal(w->entries, entries); /* no new entry, no stale one */
    assert_int_equal(tw_remaining(w, id), 5000);
    CHECK(w);
    /* nothing at the old tick; the staging files it by its new one */
    assert_int_equal(tw_advance(w, 1000), 0);
    assert_int_not_equal(list_of(n), list);
    CHECK(w);
    assert_int_equal(tw_advance(w, 3999), 0);
    assert_int_equal(tw_advance(w, 1), 1);
    ASSERT_FIRE(0, 5000, 1);
    drop(w);
}

/* Earlier, or inside the near window, the timer moves at once. */
static void test_other_moves_are_eager(void **state)
{
    tw_wheel *w = new_wheel(0);
    tw_id far_id = tw_add(w, 5000, rec_cb, TAG(1)), near_id = tw_add(w, 100, rec_cb, TAG(2));
    unsigned far_list = list_of(node_of_id(w, far_id));
    (void)state;
    assert_int_equal(tw_reschedule(w, far_id, 3000), 1);
    assert_int_not_equal(list_of(node_of_id(w, far_id)), far_list);
    assert_int_equal(tw_reschedule(w, near_id, 200), 1);
    assert_int_equal(list_of(node_of_id(w, near_id)), 200);
    CHECK(w);
    assert_int_equal(tw_advance(w, 3000), 2);
    ASSERT_FIRE(0, 200, 2);
    ASSERT_FIRE(1, 3000, 1);
    drop(w);
}

/* With every allocation failing and the block pool exactly at its reserve,
 * a move in place adds no entry, however often it is made (a move that
 * needs one makes room: see test_no_memory). */
static void test_in_place_needs_no_memory(void **state)
{
    tw_wheel *w = switchable_wheel();
    tw_id id = tw_add(w, 1000, rec_cb, TAG(1));
    uint32_t entries;
    int k;
    (void)state;
    fill_to_reserve(w, 300, rec_cb, TAG(2));
    alloc_refused = 1;
    entries = w->entries;
    for (k = 1; k <= 1000; k++)
        assert_int_equal(tw_reschedule(w, id, 1000 + (uint64_t)k), 1);
    assert_int_equal(w->entries, entries);
    assert_int_equal(tw_remaining(w, id), 2000);
    CHECK(w);
    alloc_refused = 0;
    drop(w);
}

/* A delay of 0 from a callback waits for the next call, even on a
 * clock-driven wheel whose clock is ahead of the drive, where its due tick
 * (the clock's) is later than the waiting timer's: it never moves in
 * place. */
static tw_id waiting;
static void push_now_cb(tw_wheel *w, tw_id id, void *user_data)
{
    rec_push(w, id, user_data);
    assert_int_equal(tw_reschedule(w, waiting, 0), 1);
}

static void test_delay_0_waits_for_the_next_call(void **state)
{
    struct fake_clock clock = {0, 0};
    tw_wheel *w = new_fake_clock_wheel_driven(&clock, TW_DRIVE_CLOCK);
    (void)state;
    assert_int_not_equal(tw_add(w, 10, push_now_cb, TAG(1)), 0);
    waiting = tw_add(w, 5000, rec_cb, TAG(2)); /* in a level slot */
    assert_true(is_level_slot(list_of(node_of_id(w, waiting))));
    clock.us = 6000 * 1000; /* the drive walks 0 .. 6000 */
    assert_int_equal(tw_expire(w), 1); /* only the pushing callback */
    ASSERT_NFIRES(1);
    assert_int_equal(tw_expire(w), 1); /* the pushed timer, in the next call */
    ASSERT_FIRE(1, 6000, 2);
    CHECK(w);
    drop(w);
}

/* ---- order ---------------------------------------------------------------- */

/* Records the firing, and checks the wheel from inside the dispatch: the
 * sorted slot is whole while its timers run. */
static void checking_cb(tw_wheel *w, tw_id id, void *user_data)
{
    rec_push(w, id, user_data);
    CHECK(w);
}

/* B and C are added for tick 5000; A, due at 1000, is rescheduled to 5000
 * between them, so it runs between them, although the staging files it
 * into their slot after both. */
static void one_tick_in_order(tw_wheel *w)
{
    tw_id b = tw_add(w, 5000, checking_cb, TAG(2)), a = tw_add(w, 1000, checking_cb, TAG(1)), c, d;
    uint32_t position = node_of_id(w, a)->position;
    assert_int_equal(tw_reschedule(w, a, 5000), 1);
    assert_int_equal(node_of_id(w, a)->position, position); /* in place */
    c = tw_add(w, 5000, checking_cb, TAG(3));
    d = tw_add(w, 5000, checking_cb, TAG(4));
    assert_int_not_equal(b, 0);
    assert_int_not_equal(c, 0);
    assert_int_equal(tw_advance(w, 4999), 0);
    assert_int_equal(tw_cancel(w, d), 1); /* a stale entry in the slot */
    CHECK(w);
    assert_true((w->unsorted[(5000 & NEAR_RING_MASK) >> 6] >> (5000 & 63)) & 1);
    assert_int_equal(tw_advance(w, 1), 3);
    ASSERT_FIRE(0, 5000, 2);
    ASSERT_FIRE(1, 5000, 1);
    ASSERT_FIRE(2, 5000, 3);
    CHECK(w);
}

static void test_order_after_move_in_place(void **state)
{
    tw_wheel *w = new_wheel(0);
    (void)state;
    one_tick_in_order(w);
    drop(w);
}

static void test_order_without_memory(void **state)
{
    tw_wheel *w = switchable_wheel();
    (void)state;
    assert_int_not_equal(tw_add(w, 20000, rec_cb, TAG(9)), 0); /* blocks to spare */
    alloc_refused = 1;
    one_tick_in_order(w);
    alloc_refused = 0;
    drop(w);
}

/* A periodic timer re-armed behind a timer added before the re-arm runs
 * after it: the re-arm is its last arming. */
static void test_rearm_takes_a_new_stamp(void **state)
{
    tw_wheel *w = new_wheel(0);
    (void)state;
    assert_int_not_equal(tw_add_periodic(w, 10, 10, rec_cb, TAG(1)), 0);
    assert_int_equal(tw_advance(w, 5), 0);
    assert_int_not_equal(tw_add(w, 15, rec_cb, TAG(2)), 0); /* due at 20 */
    assert_int_equal(tw_advance(w, 15), 3);
    ASSERT_FIRE(0, 10, 1);
    ASSERT_FIRE(1, 20, 2);
    ASSERT_FIRE(2, 20, 1);
    CHECK(w);
    drop(w);
}

/* A marked slot emptied by cancels starts afresh: unmarked, no stamp. */
static void test_emptied_slot_forgets_its_order(void **state)
{
    tw_wheel *w = new_wheel(0);
    tw_id a = tw_add(w, 100, rec_cb, TAG(1)), b = tw_add(w, 100, rec_cb, TAG(2));
    (void)state;
    w->unsorted[100 >> 6] |= UINT64_C(1) << (100 & 63);
    assert_int_equal(tw_cancel(w, a), 1);
    assert_int_equal(tw_cancel(w, b), 1);
    assert_false((w->unsorted[100 >> 6] >> (100 & 63)) & 1);
    assert_int_equal(w->near_stamp[100], 0);
    CHECK(w);
    drop(w);
}

/* Many timers of a few ticks, rescheduled in place, eagerly and cancelled
 * at random while the wheel ticks: each fires at its tick, and those of a
 * tick in the order of their last add or reschedule. Run with and without
 * memory for the sort buffer. */
#define MANY 3000
static struct {
    uint64_t due[MANY], armed[MANY], last_tick, last_armed;
    tw_id id[MANY];
    int pending[MANY];
    uint64_t fired, clock;
} many;

static void many_cb(tw_wheel *w, tw_id id, void *user_data)
{
    int i = UNTAG(user_data);
    (void)id;
    assert_true(many.pending[i]);
    assert_int_equal(tw_now(w), many.due[i]);
    if (many.last_tick == tw_now(w))
        assert_true(many.armed[i] > many.last_armed);
    many.last_tick = tw_now(w);
    many.last_armed = many.armed[i];
    many.pending[i] = 0;
    many.fired++;
}

static void run_many(tw_wheel *w, uint64_t seed)
{
    uint64_t r = seed, step;
    int i;
    memset(&many, 0, sizeof many);
    many.last_tick = UINT64_MAX;
    for (step = 0; step < 40000; step++) {
        uint64_t x = rng_next(&r);
        i = (int)(x % MANY);
        /* a few target ticks, so that many timers share one */
        uint64_t due = tw_now(w) + 1 + ((x >> 20) % 12) * 1111 + ((x >> 40) % 3);
        if (!many.pending[i]) {
            many.id[i] = tw_add(w, due - tw_now(w), many_cb, TAG(i));
            if (!many.id[i])
                fail_msg("add failed: %s (live %" PRIu64 ", entries %u of %" PRIu64 ")",
                         strerror(errno), tw_count(w), w->entries, w->entries_supported);
            many.pending[i] = 1;
        } else if ((x >> 8) % 8 == 0) {
            assert_int_equal(tw_cancel(w, many.id[i]), 1);
            many.pending[i] = 0;
            continue;
        } else {
            assert_int_equal(tw_reschedule(w, many.id[i], due - tw_now(w)), 1);
        }
        many.due[i] = due;
        many.armed[i] = ++many.clock;
        if (step % 16 == 0)
            tw_advance(w, 1 + (x >> 60));
        if (step % 4096 == 0)
            CHECK(w);
    }
    tw_advance(w, 20000);
    for (i = 0; i < MANY; i++)
        assert_false(many.pending[i]);
    assert_true(many.fired > MANY);
    CHECK(w);
}

static void test_random_order(void **state)
{
    (void)state;
    for (uint64_t seed = 1; seed <= 4; seed++) {
        tw_wheel *w = switchable_wheel();
        run_many(w, seed);
        drop(w);
    }
}

static void test_random_order_without_memory(void **state)
{
    (void)state;
    for (uint64_t seed = 5; seed <= 6; seed++) {
        tw_wheel *w = switchable_wheel();
        /* the nodes and blocks for every timer first, then no memory */
        for (int i = 0; i < MANY; i++)
            many.id[i] = tw_add(w, 5 + (uint64_t)i, rec_cb, NULL);
        for (int i = 0; i < MANY; i++)
            assert_int_equal(tw_cancel(w, many.id[i]), 1);
        assert_int_equal(grow_blocks(w, 64 * MANY), 0);
        alloc_refused = 1;
        run_many(w, seed);
        alloc_refused = 0;
        drop(w);
    }
}

/* 2000 timers of one tick, pushed there in place from 32 level-0 slots
 * that the staging reaches in the reverse of their stamps (it files them
 * in 32 runs of 64, the newest run first), among 2000 added there
 * directly: all 4000 fire in stamp order. */
static void test_big_slot_in_reverse(void **state)
{
    enum { HALF = 2000 };
    static tw_id moved[HALF];
    tw_wheel *w = new_wheel(0);
    int i;
    (void)state;
    rec_reset();
    /* moved[i] waits in a level-0 slot at a tick that comes later for
     * smaller i, so the staging reaches the highest i first */
    for (i = 0; i < HALF; i++)
        moved[i] = tw_add(w, 8500 - 4 * (uint64_t)i, rec_cb, TAG(i));
    for (i = 0; i < HALF; i++) {
        assert_int_equal(tw_reschedule(w, moved[i], 9000), 1);
        assert_int_not_equal(tw_add(w, 9000, rec_cb, TAG(HALF + i)), 0);
    }
    assert_int_equal(tw_advance(w, 8999), 0);
    CHECK(w);
    assert_int_equal(tw_advance(w, 1), 2 * HALF);
    for (i = 0; i < HALF && i < REC_CAP / 2; i++) {
        ASSERT_FIRE(2 * i, 9000, i);
        ASSERT_FIRE(2 * i + 1, 9000, HALF + i);
    }
    CHECK(w);
    drop(w);
}

/* ---- next expiry ---------------------------------------------------------- */

/* The first occupied level-0 slot holds only a timer moved past its span;
 * the one after it holds the earliest timer. */
static void test_next_expiry_past_moved_timers(void **state)
{
    tw_wheel *w = new_wheel(0);
    tw_id a = tw_add(w, 1000, rec_cb, TAG(1));
    uint32_t position = node_of_id(w, a)->position;
    (void)state;
    assert_int_not_equal(tw_add(w, 5000, rec_cb, TAG(2)), 0);
    assert_int_equal(tw_next_expiry(w), 1000);
    assert_int_equal(tw_reschedule(w, a, 9000), 1);
    assert_int_equal(node_of_id(w, a)->position, position); /* in place */
    assert_int_equal(tw_next_expiry(w), 5000); /* not 1000, nor 9000 */
    assert_int_equal(get_stats(w).next_expiry_exact, 5000);
    assert_int_equal(tw_advance(w, 5000), 1);
    assert_int_equal(tw_next_expiry(w), 4000);
    drop(w);
}

/* The documented early case: a slot of more than 32 whose timers were all
 * pushed past it still remembers its departed earliest. The answer is
 * never late; a waiter woken at it finds nothing due, and the next answer
 * is exact. */
static void test_next_expiry_early_once(void **state)
{
    tw_wheel *w = new_wheel(0);
    tw_id ids[40];
    uint64_t first;
    int i;
    (void)state;
    for (i = 0; i < 40; i++)
        ids[i] = tw_add(w, 300 + (uint64_t)i, rec_cb, TAG(i)); /* [256, 512) */
    for (i = 0; i < 40; i++)
        assert_int_equal(tw_reschedule(w, ids[i], 5000), 1);
    assert_int_not_equal(tw_add(w, 1000, rec_cb, TAG(99)), 0);
    assert_int_equal(get_stats(w).next_expiry_exact, 1000);
    first = tw_next_expiry(w);
    assert_true(first >= 300 && first <= 1000);
    assert_int_equal(tw_advance(w, first), 0);
    assert_int_equal(tw_next_expiry(w), 1000 - first);
    drop(w);
}

/* ---- tw_check ------------------------------------------------------------- */

static void test_check_knows_moved_timers(void **state)
{
    tw_wheel *w = new_wheel(0);
    tw_id a = tw_add(w, 1000, rec_cb, TAG(1));
    tw_id b = tw_add(w, 100, rec_cb, TAG(2)), c = tw_add(w, 100, rec_cb, TAG(3));
    struct node *n = node_of_id(w, a);
    uint64_t stamp;
    (void)state;
    unsigned slot = list_of(n) - LIST_LEVEL0;
    assert_int_equal(tw_reschedule(w, a, 9000), 1);
    CHECK(w); /* past its slot's span: moved there in place */
    /* before the span of the slot that holds it: it would fire late */
    n->expire = 600;
    w->least[slot] = 600;
    assert_int_equal(tw_check(w), -EFAULT);
    assert_string_equal(get_stats(w).broken_invariant,
                        "a slot holds only timers its span (or the staging into it) allows, "
                        "or timers rescheduled past its span while they waited in it");
    n->expire = 9000;
    CHECK(w);
    /* two timers of one near slot out of stamp order */
    stamp = node_of_id(w, b)->stamp;
    node_of_id(w, b)->stamp = node_of_id(w, c)->stamp;
    node_of_id(w, c)->stamp = stamp;
    assert_int_equal(tw_check(w), -EFAULT);
    assert_string_equal(get_stats(w).broken_invariant,
                        "a near slot not marked unsorted holds its timers in stamp order");
    w->unsorted[100 >> 6] |= UINT64_C(1) << (100 & 63); /* marked: it is sorted */
    CHECK(w);
    assert_int_equal(tw_advance(w, 100), 2);
    ASSERT_FIRE(0, 100, 3);
    ASSERT_FIRE(1, 100, 2);
    drop(w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_later_keeps_its_entry),
        T(test_other_moves_are_eager),
        T(test_in_place_needs_no_memory),
        T(test_delay_0_waits_for_the_next_call),
        T(test_order_after_move_in_place),
        T(test_order_without_memory),
        T(test_rearm_takes_a_new_stamp),
        T(test_emptied_slot_forgets_its_order),
        T(test_random_order),
        T(test_random_order_without_memory),
        T(test_big_slot_in_reverse),
        T(test_next_expiry_past_moved_timers),
        T(test_next_expiry_early_once),
        T(test_check_knows_moved_timers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
