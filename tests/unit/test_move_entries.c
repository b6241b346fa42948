/*
 * The queue entries a reschedule takes (timer.c, move_now_unlock, compact_whole,
 * moves_in_place):
 *
 *   - a reschedule moved later within its level slot takes none: it keeps
 *     its entry there, on the path out of line too (the mutex, whose lock
 *     has no try, and tw_reschedule_ex, which may change the interval), as
 *     on the inline fast path (see test_moved_later.c);
 *   - a move now with the pool at its reserve takes one, and gives back
 *     the one it left, however long the queue it leaves (below);
 *   - the stale entries unlinks leave are taken back by a compaction that,
 *     once started, every later unlink from its queue drives a step
 *     (timer.c, take_out), even when adds meanwhile brought the queue's
 *     stale entries back under the share that starts one.
 *
 * A reschedule that moves its timer now while the block pool is at its
 * reserve and the allocator refuses compacts the whole queue the timer
 * leaves (timer.c, move_now_unlock and compact_whole), however long that queue:
 * the entry it left there comes back before the new one is taken, so the
 * entry kept for a periodic timer's re-arm stays kept (entries + 1 <=
 * entries_supported) and no block is ever taken beyond the pool.
 *
 * The queue here holds several compaction steps' worth of live entries
 * (COMPACT_STEP each), and the timers moved out are its last ones, so a
 * compaction that stopped after a step would not reach their entries.
 *
 * This program compiles timer.c in, to bring the pool to its reserve.
 */
#include "../../timer.c"

#include "helpers.h"
#include "pool_reserve.h"

#define FILLER 9999        /* tag of the timers that only fill the pool */
#define LONG_QUEUE 400     /* more than 6 compaction steps */
#define MOVED 8


static void test_move_out_of_long_queue_needs_no_memory(void **state)
{
    tw_wheel *w = switchable_wheel();
    static tw_id ids[LONG_QUEUE];
    unsigned list;
    uint64_t blocks;
    size_t i, seen = 0;
    int k;
    (void)state;
    for (i = 0; i < LONG_QUEUE; i++)
        ids[i] = tw_add(w, 5000, rec_cb, TAG(i));
    list = list_of(node_at(w, (uint32_t)ids[0]));
    assert_true(is_level_slot(list));
    assert_int_equal(list_of(node_at(w, (uint32_t)ids[LONG_QUEUE - 1])), list);
    assert_int_equal(w->queues[list].count, LONG_QUEUE);
    assert_true(LONG_QUEUE > 4 * COMPACT_STEP);
    fill_to_reserve(w, 1000000, rec_cb, TAG(FILLER));
    blocks = block_count(w);
    alloc_refused = 1;
    for (k = 0; k < MOVED; k++) { /* the queue's last timers, earlier */
        assert_int_equal(tw_reschedule(w, ids[LONG_QUEUE - 1 - k], 10 + (uint64_t)k), 1);
        assert_true((uint64_t)w->entries + 1 <= w->entries_supported);
        assert_int_equal(w->queues[list].count, LONG_QUEUE - 1 - k);
        assert_int_equal(w->queues[list].entries, LONG_QUEUE - 1 - k); /* no stale one */
        CHECK(w);
    }
    assert_int_equal(block_count(w), blocks); /* nothing was allocated */
    /* the moved ones at 10..17, last moved first; the rest at 5000 in order */
    assert_int_equal(tw_advance(w, 5000), LONG_QUEUE);
    for (i = 0; i < rec.n && i < REC_CAP; i++) {
        if (rec.f[i].tag == FILLER)
            continue;
        if (seen < MOVED) {
            assert_int_equal(rec.f[i].tick, 10 + seen);
            assert_int_equal(rec.f[i].tag, LONG_QUEUE - 1 - (int)seen);
        } else {
            assert_int_equal(rec.f[i].tick, 5000);
            assert_int_equal(rec.f[i].tag, (int)(seen - MOVED));
        }
        seen++;
    }
    assert_int_equal(seen, LONG_QUEUE);
    CHECK(w);
    alloc_refused = 0;
    drop(w);
}

/* Moved later inside a level slot: in place, on every path. */
static void test_in_place_on_every_path(void **state)
{
    static const int kinds[] = {TW_LOCK_NONE, TW_LOCK_ADAPTIVE, TW_LOCK_MUTEX};
    size_t k;
    (void)state;
    for (k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
        struct tw_config c;
        tw_wheel *w;
        tw_id a, b;
        struct node *na, *nb;
        unsigned list;
        uint32_t entries, pa, pb;
        tw_config_init(&c);
        c.lock = kinds[k];
        c.drive = TW_DRIVE_TICKS;
        w = new_wheel_cfg(&c);
        rec_reset();
        a = tw_add(w, 1000, rec_cb, TAG(1)); /* level 0: [768, 1024) */
        b = tw_add(w, 1000, rec_cb, TAG(2));
        na = node_at(w, (uint32_t)a);
        nb = node_at(w, (uint32_t)b);
        list = list_of(na);
        pa = na->position;
        pb = nb->position;
        entries = w->entries;
        assert_true(is_level_slot(list));
        assert_int_equal(tw_reschedule(w, a, 5000), 1);       /* tw_reschedule */
        assert_int_equal(tw_reschedule_ex(w, b, 3000, 0), 1); /* the _ex path */
        assert_int_equal(tw_reschedule_ex(w, b, 6000, 7), 1); /* periodic now */
        assert_int_equal(list_of(na), list);
        assert_int_equal(list_of(nb), list);
        assert_int_equal(na->position, pa); /* the same entries */
        assert_int_equal(nb->position, pb);
        assert_int_equal(w->entries, entries); /* none added, none stale */
        CHECK(w);
        assert_int_equal(tw_advance(w, 6000), 2);
        ASSERT_NFIRES(2);
        ASSERT_FIRE(0, 5000, 1);
        ASSERT_FIRE(1, 6000, 2);
        CHECK(w);
        drop(w);
    }
}

/* A compaction under way goes on with each unlink from its queue. */
static void test_compaction_goes_on_with_each_unlink(void **state)
{
    tw_wheel *w = new_wheel(0);
    static tw_id first[100], second[200];
    struct queue *q;
    unsigned list;
    uint32_t read, left;
    int i, cancelled = 0;
    (void)state;
    for (i = 0; i < 100; i++)
        first[i] = tw_add(w, 1000, rec_cb, TAG(1)); /* level 0: [768, 1024) */
    list = list_of(node_at(w, (uint32_t)first[0]));
    q = &w->queues[list];
    assert_true(is_level_slot(list));
    assert_int_not_equal(staged_slot(w, 0), list); /* compacted, not rotated */
    /* cancels from the head, until the stale entries start a compaction;
     * its first step passes over stale entries only */
    while (q->compact_read == NO_POSITION) {
        assert_true(cancelled < 100);
        assert_int_equal(tw_cancel(w, first[cancelled++]), 1);
    }
    assert_true(q->entries - q->count > 2 * q->count + BLOCK_ENTRIES);
    /* adds bring the stale entries back under their share */
    for (i = 0; i < 200; i++)
        second[i] = tw_add(w, 1000, rec_cb, TAG(2));
    assert_int_equal(list_of(node_at(w, (uint32_t)second[199])), list);
    assert_true(q->entries - q->count <= 2 * q->count + BLOCK_ENTRIES);
    assert_int_not_equal(q->compact_read, NO_POSITION); /* still under way */
    /* every unlink from the queue now drives it a step, to its end */
    read = q->compact_read;
    assert_int_equal(tw_cancel(w, second[199]), 1);
    assert_true(q->compact_read == NO_POSITION || q->compact_read != read);
    for (i = 198; i >= 190 && q->compact_read != NO_POSITION; i--)
        assert_int_equal(tw_cancel(w, second[i]), 1);
    assert_int_equal(q->compact_read, NO_POSITION);
    assert_int_equal(q->entries, q->count); /* every stale entry taken back */
    assert_int_equal(w->entries, q->entries);
    CHECK(w);
    left = q->count;
    assert_int_equal(tw_advance(w, 1000), left);
    CHECK(w);
    drop(w);
}

/* The threshold is exceeded, not reached: a near slot of 30 timers, 25 of
 * them cancelled, has exactly twice its 5 live entries plus 15 stale ones,
 * and is left as it is; the next cancel starts its compaction. */
static void test_compaction_starts_past_the_threshold(void **state)
{
    tw_wheel *w = new_wheel(0);
    tw_id ids[30];
    const struct queue *q = &w->queues[100];
    int i;
    (void)state;
    for (i = 0; i < 30; i++)
        ids[i] = tw_add(w, 100, rec_cb, TAG(i));
    for (i = 0; i < 25; i++)
        assert_int_equal(tw_cancel(w, ids[i]), 1);
    assert_int_equal(q->count, 5);
    assert_int_equal(q->entries, 30);
    assert_int_equal(q->compact_read, NO_POSITION);
    assert_int_equal(tw_cancel(w, ids[25]), 1); /* 26 > 2 * 4 + 15 */
    assert_int_equal(q->entries, q->count); /* one step took them all */
    CHECK(w);
    assert_int_equal(tw_advance(w, 100), 4);
    drop(w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_in_place_on_every_path),
        T(test_compaction_goes_on_with_each_unlink),
        T(test_move_out_of_long_queue_needs_no_memory),
        T(test_compaction_starts_past_the_threshold),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
