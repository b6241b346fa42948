/*
 * tw_check names the invariant it finds broken (tw_stats.broken_invariant),
 * one checker per part of the wheel. This program compiles timer.c in to
 * break one invariant at a time behind the API's back, checks that
 * tw_check answers -EFAULT with that invariant's name, repairs it, and
 * checks that the next tw_check passes and clears the name.
 */
#include "../../timer.c"

#include "helpers.h"

static const char *broken_of(tw_wheel *w)
{
    struct tw_stats s;
    memset(&s, 0, sizeof s);
    s.size = sizeof s;
    assert_int_equal(tw_get_stats(w, &s), 0);
    return s.broken_invariant;
}

/* tw_check fails naming `what`; after `repair` (undoing the break) it
 * passes and the name is gone. */
#define EXPECT_BROKEN(w, what)                                                \
    do {                                                                      \
        assert_int_equal(tw_check(w), -EFAULT);                               \
        assert_non_null(broken_of(w));                                        \
        assert_string_equal(broken_of(w), (what));                            \
    } while (0)

#define EXPECT_WHOLE(w)                                                       \
    do {                                                                      \
        assert_int_equal(tw_check(w), 0);                                     \
        assert_null(broken_of(w));                                            \
    } while (0)

/* A wheel with timers in near slots, in every level and on a due queue. */
static tw_wheel *populated(void)
{
    tw_wheel *w = new_wheel(0);
    uint64_t delays[] = {0, 3, 200, 300, 20000, 2000000, 300000000};
    size_t i;
    for (i = 0; i < sizeof delays / sizeof delays[0]; i++)
        assert_int_not_equal(tw_add(w, delays[i], rec_cb, TAG(i)), 0);
    EXPECT_WHOLE(w);
    return w;
}

static uint32_t index_of(tw_id id)
{
    return (uint32_t)id;
}

static void test_counts(void **state)
{
    tw_wheel *w = populated();
    (void)state;
    w->live++;
    EXPECT_BROKEN(w, "the live count is the placed timers and a periodic one re-arming");
    w->live--;
    EXPECT_WHOLE(w);
    w->free_count++;
    EXPECT_BROKEN(w, "the free list is as long as free_count says");
    w->free_count--;
    EXPECT_WHOLE(w);
    w->entries++;
    EXPECT_BROKEN(w, "the entry count is the queues' entries");
    w->entries--;
    EXPECT_WHOLE(w);
    drop(w);
}

static void test_slots(void **state)
{
    tw_wheel *w = populated();
    tw_id gone = tw_add(w, 40, rec_cb, TAG(8)), id = tw_add(w, 40, rec_cb, TAG(9));
    struct node *n = node_at(w, index_of(id));
    unsigned list = list_of(n), empty = (list + 1) & NEAR_RING_MASK;
    uint32_t expire = n->expire;
    (void)state;
    assert_int_equal(tw_cancel(w, gone), 1); /* its entry stays, stale */
    EXPECT_WHOLE(w);
    /* a set bit beside a live one, in the same word: the summary holds */
    assert_int_equal(w->queues[empty].count, 0);
    w->occupied[empty >> 6] |= UINT64_C(1) << (empty & 63);
    EXPECT_BROKEN(w, "a slot's occupancy bit is set exactly when it holds a live entry");
    w->occupied[empty >> 6] &= ~(UINT64_C(1) << (empty & 63));
    EXPECT_WHOLE(w);
    n->expire = expire + 1; /* no longer its slot's tick */
    EXPECT_BROKEN(w, "a slot holds only timers its span (or the staging into it) allows, "
                     "or timers rescheduled past its span while they waited in it");
    n->expire = expire;
    EXPECT_WHOLE(w);
    assert_int_equal(w->queues[list].entries, 2);
    w->queues[list].count++; /* as many as its entries, one of them stale */
    EXPECT_BROKEN(w, "a queue's live count is its live entries");
    w->queues[list].count--;
    EXPECT_WHOLE(w);
    drop(w);
}

/* The near slot of now holds timers only while a drive dispatches it: a
 * timer due now put there outside a drive would never run (the walk looks
 * past now's slot). */
static void test_near_slot_of_now(void **state)
{
    tw_wheel *w = populated();
    tw_id id = tw_add(w, 3, rec_cb, TAG(9));
    uint32_t index = index_of(id);
    struct node *n = node_at(w, index);
    (void)state;
    EXPECT_WHOLE(w);
    unlink_node(w, n);
    n->expire = (uint32_t)w->now;
    link_tail(w, (unsigned)w->now & NEAR_RING_MASK, index, n);
    EXPECT_BROKEN(w, "the near slot of now holds only timers due now, while driving");
    unlink_node(w, n);
    schedule(w, index, n, w->now + 3);
    EXPECT_WHOLE(w);
    drop(w);
}

static void test_least_tick(void **state)
{
    tw_wheel *w = new_wheel(0);
    tw_id id = tw_add(w, 5000, rec_cb, TAG(1));
    unsigned slot = list_of(node_at(w, index_of(id))) - LIST_LEVEL0;
    (void)state;
    assert_true(is_level_slot(slot + LIST_LEVEL0));
    EXPECT_WHOLE(w);
    w->least[slot]++;
    EXPECT_BROKEN(w, "a level slot's least tick is a lower bound on its timers, ahead of now");
    w->least[slot] -= 2;
    EXPECT_BROKEN(w, "a level slot's least tick is exact unless marked inexact");
    w->least_inexact[slot >> 6] |= UINT64_C(1) << (slot & 63); /* a bound: fine */
    EXPECT_WHOLE(w);
    drop(w);
}

static void test_clock_and_drive(void **state)
{
    tw_wheel *w = populated();
    (void)state;
    w->staged_tick = w->now + 1;
    EXPECT_BROKEN(w, "the staging is not ahead of now");
    w->staged_tick = w->now;
    w->clock.base_tick = w->now + 1;
    EXPECT_BROKEN(w, "the clock's reference tick is not ahead of now");
    w->clock.base_tick = w->now;
    w->due_list = LIST_DUE_B + 1;
    EXPECT_BROKEN(w, "the collecting due queue is one of the two");
    w->due_list = LIST_DUE_A;
    EXPECT_WHOLE(w);
    drop(w);
}

static void test_blocks(void **state)
{
    tw_wheel *w = populated();
    uint32_t first = w->free_block;
    (void)state;
    assert_int_not_equal(first, NIL);
    w->free_block = block_at(w, first)->next; /* a block lost */
    EXPECT_BROKEN(w, "every block is in one queue or free");
    w->free_block = first;
    EXPECT_WHOLE(w);
    drop(w);
}

/* A one-shot whose callback runs is ended, not detached: detached is only
 * the moment inside a call between taking a node out and settling it. */
static int checks_in_callback;

static void check_from_callback(tw_wheel *w, tw_id id, void *data)
{
    struct node *n = node_at(w, w->running);
    (void)id;
    (void)data;
    assert_int_equal(n->state, NODE_ENDED);
    EXPECT_WHOLE(w);
    n->state = NODE_DETACHED;
    EXPECT_BROKEN(w, "no node stays detached once the lock is free");
    n->state = NODE_ENDED;
    EXPECT_WHOLE(w);
    checks_in_callback++;
}

static void test_running_one_shot(void **state)
{
    tw_wheel *w = new_wheel(0);
    (void)state;
    checks_in_callback = 0;
    assert_int_not_equal(tw_add(w, 3, check_from_callback, NULL), 0);
    assert_int_not_equal(tw_add(w, 3, check_from_callback, NULL), 0);
    assert_int_equal(tw_advance(w, 3), 2);
    assert_int_equal(checks_in_callback, 2);
    EXPECT_WHOLE(w);
    drop(w);
}

/* The first broken invariant is the one named, and a caller whose
 * tw_stats ends before the field gets no write past its size. */
static void test_first_and_older_callers(void **state)
{
    tw_wheel *w = populated();
    unsigned char bytes[sizeof(struct tw_stats)];
    struct tw_stats *s = (struct tw_stats *)(void *)bytes;
    size_t old_size = offsetof(struct tw_stats, broken_invariant);
    (void)state;
    w->staged_tick = w->now + 1;
    w->live++;
    EXPECT_BROKEN(w, "the staging is not ahead of now");
    memset(bytes, 0xab, sizeof bytes);
    s->size = (uint32_t)old_size;
    assert_int_equal(tw_get_stats(w, s), 0);
    assert_int_equal(s->size, old_size);
    assert_int_equal(bytes[old_size], 0xab);
    w->staged_tick = w->now;
    w->live--;
    EXPECT_WHOLE(w);
    drop(w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_counts),
        T(test_slots),
        T(test_near_slot_of_now),
        T(test_least_tick),
        T(test_clock_and_drive),
        T(test_blocks),
        T(test_running_one_shot),
        T(test_first_and_older_callers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
