/*
 * Ids carry their wheel (timer.c, "pool": make_id and node_of): a wheel
 * refuses the ids of another wheel as it refuses stale ones, every call
 * that takes an id answering as it does for a stale id, and nothing of its
 * own timers changes. Two wheels with the same history hold the same
 * generations at the same indices, so only the tag tells their ids apart:
 * the TW_TEST_WHEEL_TAG hook gives each wheel the tag this program wants
 * (a control run with equal tags shows the ids would otherwise match).
 *
 * Also: no id is 0, even when a node's generation equals the tag (node 0
 * is never handed out), and wheels created one after another at the same
 * address draw different tags.
 */
static unsigned forced_tag; /* 0: the tag the wheel draws */
#define TW_TEST_WHEEL_TAG(w, tag) (forced_tag ? forced_tag : (tag))
#include "../../timer.c"

#include "helpers.h"

enum {
    TIMERS = 1000,
    ROUNDS = 1000 /* TIMERS * ROUNDS = 1M ids of each wheel tried on the other */
};

static tw_wheel *tagged_wheel(uint32_t tag)
{
    tw_wheel *w;
    forced_tag = tag;
    w = new_wheel(0);
    forced_tag = 0;
    return w;
}

/* The same history on both wheels: TIMERS timers, delays 1..TIMERS. */
static void add_all(tw_wheel *w, tw_id *ids)
{
    int i;
    for (i = 0; i < TIMERS; i++) {
        ids[i] = tw_add_ex(w, 1 + (uint64_t)i, (uint64_t)(i % 3), rec_cb, NULL, TAG(i));
        assert_int_not_equal(ids[i], 0);
    }
}

/* Every id-taking call of `w` refuses `id`, as for a stale id. */
static int refused(tw_wheel *w, tw_id id)
{
    return tw_cancel(w, id) == 0 && tw_reschedule(w, id, 7) == 0 &&
           tw_reschedule_ex(w, id, 7, 3) == 0 && tw_remaining(w, id) == TW_NEVER &&
           tw_deadline_us(w, id) == TW_NEVER;
}

/* Each of `w`'s own timers is as add_all left it. */
static void assert_untouched(tw_wheel *w, const tw_id *ids)
{
    int i;
    assert_int_equal(tw_count(w), TIMERS);
    for (i = 0; i < TIMERS; i++)
        assert_int_equal(tw_remaining(w, ids[i]), 1 + (uint64_t)i);
}

static void test_another_wheels_ids_are_refused(void **state)
{
    static tw_id a_ids[TIMERS], b_ids[TIMERS];
    tw_wheel *a = tagged_wheel(0x12345678u & GENERATION_MASK);
    tw_wheel *b = tagged_wheel(0x0badf00du);
    uint64_t tried = 0, bad = 0;
    int round, i;
    (void)state;
    for (round = 0; round < ROUNDS; round++) {
        add_all(a, a_ids);
        add_all(b, b_ids);
        for (i = 0; i < TIMERS; i++) {
            bad += !refused(b, a_ids[i]);
            bad += !refused(a, b_ids[i]);
            tried += 2;
        }
        if (bad)
            fail_msg("round %d: %llu ids of one wheel acted on the other", round,
                     (unsigned long long)bad);
        if (round % 100 == 0) {
            assert_untouched(a, a_ids);
            assert_untouched(b, b_ids);
            CHECK(a);
            CHECK(b);
        }
        /* a new generation on every node, the same on both wheels */
        for (i = 0; i < TIMERS; i++) {
            assert_int_equal(tw_cancel(a, a_ids[i]), 1);
            assert_int_equal(tw_cancel(b, b_ids[i]), 1);
        }
    }
    assert_int_equal(tried, 2 * (uint64_t)TIMERS * ROUNDS);
    drop(a);
    drop(b);
}

/* The control: with the same tag, the same history gives the same ids, so
 * the tag is all that tells the wheels above apart. */
static void test_equal_tags_give_equal_ids(void **state)
{
    static tw_id a_ids[TIMERS], b_ids[TIMERS];
    tw_wheel *a = tagged_wheel(0x2468aceu);
    tw_wheel *b = tagged_wheel(0x2468aceu);
    int i;
    (void)state;
    add_all(a, a_ids);
    add_all(b, b_ids);
    for (i = 0; i < TIMERS; i++) {
        assert_int_equal(a_ids[i], b_ids[i]);
        assert_int_equal(tw_remaining(b, a_ids[i]), 1 + (uint64_t)i);
    }
    drop(a);
    drop(b);
}

/* A tag equal to a node's generation makes the id's generation half 0:
 * the id is still not 0 (node 0 is never used) and still names its timer;
 * an id naming node 0 is refused whatever its generation half. */
static void test_generation_equal_to_the_tag(void **state)
{
    tw_wheel *w = tagged_wheel(1); /* a fresh node's generation */
    tw_id id;
    uint32_t half;
    (void)state;
    rec_reset();
    id = tw_add(w, 5, rec_cb, TAG(1));
    assert_int_equal(id >> 32, 0);
    assert_int_not_equal(id, 0);
    assert_int_equal(tw_remaining(w, id), 5);
    assert_int_equal(tw_reschedule(w, id, 6), 1);
    for (half = 0; half < 4; half++)
        assert_true(refused(w, (tw_id)half << 32));
    assert_int_equal(tw_advance(w, 6), 1);
    ASSERT_FIRE(0, 6, 1);
    assert_int_equal(rec.f[0].id, id);
    CHECK(w);
    drop(w);
}

/* Wheels made one after another, each freed before the next (so most get
 * the same address), draw different tags: the clock feeds the tag. The
 * chance that two of them meet by luck is about 120 in 2^31. */
static void test_wheels_draw_different_tags(void **state)
{
    enum { WHEELS = 16 };
    uint32_t tags[WHEELS];
    int i, j;
    (void)state;
    for (i = 0; i < WHEELS; i++) {
        tw_wheel *w = new_wheel(0);
        tags[i] = (uint32_t)(w->id_tag >> 32);
        assert_int_not_equal(tags[i], 0);
        assert_int_equal(tags[i] & ~GENERATION_MASK, 0);
        drop(w);
    }
    for (i = 0; i < WHEELS; i++)
        for (j = 0; j < i; j++)
            assert_int_not_equal(tags[i], tags[j]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_another_wheels_ids_are_refused),
        cmocka_unit_test(test_equal_tags_give_equal_ids),
        cmocka_unit_test(test_generation_equal_to_the_tag),
        cmocka_unit_test(test_wheels_draw_different_tags),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
