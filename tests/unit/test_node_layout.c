/*
 * The node's layout (timer.c, "geometry and types" and "pool"): a node is 32
 * bytes and never straddles two cache lines, so a cancel or reschedule
 * touches one line of its own; its call (callback and user data) lives
 * beside the chunk's nodes; the interval is read only for timers marked
 * PERIODIC in the generation's top bit; the generation keeps the other 31
 * bits and a node whose generation would wrap is retired.
 *
 * This program compiles timer.c in to look at nodes and to put a node's
 * generation at its last value without 2^31 adds; what it checks beyond
 * the layout goes through the public API.
 */
#include "../../timer.c"

#include "helpers.h"

static uint32_t index_of(tw_id id)
{
    return (uint32_t)id;
}

/* Nodes of several chunks (the allocator aligns each differently) each sit
 * inside one 64-byte line. */
static void test_nodes_never_straddle_a_line(void **state)
{
    enum { TIMERS = 5 * CHUNK_NODES };
    tw_wheel *w = new_wheel(0);
    int i;
    (void)state;
    for (i = 0; i < TIMERS; i++) {
        tw_id id = tw_add(w, 1 + (uint64_t)i, rec_cb, TAG(i));
        uintptr_t address;
        assert_int_not_equal(id, 0);
        address = (uintptr_t)node_at(w, index_of(id));
        assert_true((address & 63) + sizeof(struct node) <= 64);
    }
    assert_int_equal(sizeof(struct node), 32);
    drop(w);
}

static void test_interval_and_call(void **state)
{
    tw_wheel *w = new_wheel(0);
    tw_id periodic, once, reused;
    (void)state;
    rec_reset();
    periodic = tw_add_periodic(w, 5, 7, rec_cb, TAG(1));
    once = tw_add(w, 5, rec_cb, TAG(2));
    assert_true(is_periodic(node_at(w, index_of(periodic))));
    assert_int_equal(node_at(w, index_of(periodic))->interval, 7);
    assert_false(is_periodic(node_at(w, index_of(once))));
    /* the call sits apart from the node, in the chunk's array of calls */
    assert_ptr_equal(call_at(w, index_of(once))->user_data, TAG(2));
    assert_ptr_equal(call_at(w, index_of(once))->callback, rec_cb);
    /* the flag shares the word with the generation: ids are unchanged */
    assert_int_equal(make_id(w, index_of(periodic),
                             generation_of(node_at(w, index_of(periodic)))), periodic);
    assert_int_equal(tw_advance(w, 5 + 7 + 7), 4); /* 5, 12, 19 and the one-shot */
    assert_int_equal(rec.n, 4);

    /* a new interval, then none: a one-shot from then on */
    assert_int_equal(tw_reschedule_ex(w, periodic, 3, 11), 1);
    assert_int_equal(node_at(w, index_of(periodic))->interval, 11);
    assert_int_equal(tw_reschedule_ex(w, periodic, 3, 0), 1);
    assert_false(is_periodic(node_at(w, index_of(periodic))));
    assert_int_equal(tw_advance(w, 3 + 11 + 11), 1);
    assert_int_equal(tw_count(w), 0);

    /* a periodic timer cancelled: the one-shot that reuses its node (the
     * free list is LIFO) is not periodic and fires once */
    periodic = tw_add_periodic(w, 2, 2, rec_cb, TAG(3));
    assert_int_equal(tw_cancel(w, periodic), 1);
    reused = tw_add(w, 2, rec_cb, TAG(4));
    assert_int_equal(index_of(reused), index_of(periodic));
    assert_false(is_periodic(node_at(w, index_of(reused))));
    assert_int_equal(tw_advance(w, 10), 1);
    assert_int_equal(tw_count(w), 0);
    assert_int_equal(tw_check(w), 0);
    drop(w);
}

/* A node whose 31-bit generation is at its last value is retired when
 * freed, periodic or not: never handed out again, so no id repeats. */
static void test_generation_wraps_into_retirement(void **state)
{
    int periodic;
    (void)state;
    for (periodic = 0; periodic <= 1; periodic++) {
        tw_wheel *w = new_wheel(0);
        tw_id first = periodic ? tw_add_periodic(w, 5, 5, rec_cb, TAG(1))
                               : tw_add(w, 5, rec_cb, TAG(1));
        uint32_t index = index_of(first);
        struct node *n = node_at(w, index);
        tw_id last, next;
        /* as if 2^31 - 2 timers had used this node before */
        n->generation = GENERATION_MASK | (n->generation & PERIODIC);
        last = make_id(w, index, GENERATION_MASK);
        assert_int_equal(tw_cancel(w, first), 0); /* its generation is gone */
        assert_int_equal(tw_remaining(w, last), 5);
        assert_int_equal(tw_cancel(w, last), 1);
        assert_int_equal(tw_cancel(w, last), 0);
        next = tw_add(w, 5, rec_cb, TAG(2));
        assert_int_not_equal(next, 0);
        assert_int_not_equal(index_of(next), index); /* retired, not reused */
        assert_int_equal(generation_of(node_at(w, index_of(next))), 1);
        assert_int_equal(tw_check(w), 0);
        drop(w);
    }
}

/* A chunk table grows by doubling up to its limit, and no further: the
 * limit keeps node indices below NIL and block numbers inside a position. */
static void test_chunk_table_limit(void **state)
{
    tw_wheel *w = new_wheel(0);
    struct chunk_table t = {NULL, 0, 0};
    uint64_t bytes = w->bytes;
    int made = 0, i;
    (void)state;
    for (i = 0; i < 8; i++)
        made += add_chunk(w, &t, 4, 5, 64) != NULL;
    assert_int_equal(made, 5);
    assert_int_equal(t.count, 5);
    assert_int_equal(t.capacity, 5);
    assert_true(w->bytes > bytes);
    free_chunks(w, &t);
    drop(w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_nodes_never_straddle_a_line, setup_test,
                                        teardown_test),
        cmocka_unit_test_setup_teardown(test_interval_and_call, setup_test,
                                        teardown_test),
        cmocka_unit_test_setup_teardown(test_generation_wraps_into_retirement,
                                        setup_test, teardown_test),
        cmocka_unit_test_setup_teardown(test_chunk_table_limit, setup_test,
                                        teardown_test),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
