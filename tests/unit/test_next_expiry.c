/* tw_next_expiry and tw_timeout_ms in the cases that used to need a scan:
 * every timer far away (in an upper level) and churn of the earliest timer.
 * The answer is O(1): exact while each slot's cached least tick is exact,
 * otherwise never later than the earliest timer, never 0 when nothing is
 * due, and exact again once the early tick has been reached. */
#include "helpers.h"

static uint64_t exact(tw_wheel *w)
{
    return get_stats(w).next_expiry_exact;
}

/* 10 000 timers, all 30 000 .. 59 999 ticks away (idle kicks of a server):
 * the earliest sits in a level slot of thousands; the answer is exact. */
static void test_far_only_is_exact(void **state)
{
    (void)state;
    tw_wheel *w = new_wheel(0);
    uint64_t seed = 7, least = TW_NEVER;
    for (int i = 0; i < 10000; i++) {
        uint64_t delay = 30000 + rng_next(&seed) % 30000;
        assert_int_not_equal(tw_add(w, delay, rec_cb, TAG(i)), 0);
        if (delay < least)
            least = delay;
        assert_int_equal(tw_next_expiry(w), least);
    }
    assert_int_equal(exact(w), least);
    CHECK(w);
    for (uint64_t t = 1; t < 20000; t += 997) {
        assert_int_equal(tw_advance(w, 997), 0);
        assert_int_equal(tw_next_expiry(w), least - tw_now(w));
    }
    int64_t ran = tw_advance(w, least - tw_now(w));
    assert_true(ran >= 1);
    ASSERT_NFIRES((size_t)ran);
    assert_int_equal(rec.f[0].tick, least);
    CHECK(w);
}

/* The earliest timer keeps leaving a big far slot (requests answered in
 * order, their timeouts cancelled oldest first): the answer may be the tick
 * of a timer that left, never later than the earliest, never 0; a wheel
 * advanced to it fires nothing and then answers exactly. */
static void test_earliest_churn_bound(void **state)
{
    (void)state;
    tw_wheel *w = new_wheel(0);
    enum { COUNT = 2000 };
    static tw_id ids[COUNT];
    int early = 0;
    /* due 40 000 + i: one level-1 slot (16 384 ticks wide) holds them all */
    for (int i = 0; i < COUNT; i++) {
        ids[i] = tw_add(w, 40000 + (uint64_t)i, rec_cb, TAG(i));
        assert_int_not_equal(ids[i], 0);
    }
    assert_int_equal(tw_next_expiry(w), 40000);
    for (int i = 0; i < COUNT / 2; i++) {
        assert_int_equal(tw_cancel(w, ids[i]), 1);
        uint64_t fast = tw_next_expiry(w), real = exact(w);
        assert_int_equal(real, 40000 + (uint64_t)i + 1);
        assert_true(fast <= real);
        assert_true(fast >= 40000); /* within the slot, never 0 */
        early += fast < real;
        CHECK(w);
    }
    assert_true(early > 0); /* the case this test is about happened */
    uint64_t fast = tw_next_expiry(w);
    assert_true(fast < exact(w));
    assert_int_equal(tw_advance(w, fast), 0); /* early: nothing due */
    assert_int_equal(tw_next_expiry(w), exact(w));
    assert_int_equal(tw_next_expiry(w) + tw_now(w), 40000 + COUNT / 2);
    assert_int_equal(tw_advance(w, tw_next_expiry(w)), 1);
    ASSERT_FIRE(0, 40000 + COUNT / 2, COUNT / 2);
    assert_int_equal(tw_next_expiry(w), 1);
    CHECK(w);
}

/* Moving the earliest timer later is the same case (heartbeats): a bound.
 * Adding a timer earlier than the bound makes the answer exact again. */
static void test_earliest_moved_later(void **state)
{
    (void)state;
    tw_wheel *w = new_wheel(0);
    tw_id first = tw_add(w, 30000, rec_cb, TAG(1));
    for (int i = 0; i < 100; i++)
        assert_int_not_equal(tw_add(w, 31000 + (uint64_t)i, rec_cb, TAG(2)), 0);
    assert_int_equal(tw_next_expiry(w), 30000);
    assert_int_equal(tw_reschedule(w, first, 45000), 1);
    assert_int_equal(exact(w), 31000);
    assert_true(tw_next_expiry(w) <= 31000 && tw_next_expiry(w) >= 30000);
    assert_int_not_equal(tw_add(w, 29500, rec_cb, TAG(3)), 0);
    assert_int_equal(tw_next_expiry(w), 29500);
    CHECK(w);
    assert_int_equal(tw_advance(w, 29500), 1);
    ASSERT_FIRE(0, 29500, 3);
    assert_int_equal(tw_next_expiry(w), exact(w));
    assert_int_equal(exact(w), 1500);
    CHECK(w);
}

/* A slot of at most 32 pending timers is read again when its earliest
 * leaves, so a small wheel always gets exact answers. */
static void test_small_slot_stays_exact(void **state)
{
    (void)state;
    tw_wheel *w = new_wheel(0);
    tw_id ids[10];
    for (int i = 0; i < 10; i++)
        ids[i] = tw_add(w, 20000 + 7 * (uint64_t)i, rec_cb, TAG(i));
    for (int i = 0; i < 9; i++) {
        assert_int_equal(tw_cancel(w, ids[i]), 1);
        assert_int_equal(tw_next_expiry(w), 20000 + 7 * (uint64_t)(i + 1));
    }
    assert_int_equal(tw_reschedule(w, ids[9], 25000), 1);
    assert_int_equal(tw_next_expiry(w), 25000);
    CHECK(w);
}

/* The boundary of that rule: a slot left with exactly 32 pending timers
 * after its earliest was cancelled is read again (exact answer); one left
 * with 33 may answer with the departed timer's tick, never later. */
static void test_slot_of_32_is_exact(void **state)
{
    (void)state;
    for (int left = 32; left <= 33; left++) {
        tw_wheel *w = new_wheel(0);
        tw_id first = 0;
        for (int i = 0; i <= left; i++) { /* one level-1 slot: 16384 ticks */
            tw_id id = tw_add(w, 20000 + 3 * (uint64_t)i, rec_cb, TAG(i));
            assert_int_not_equal(id, 0);
            if (i == 0)
                first = id;
        }
        assert_int_equal(tw_next_expiry(w), 20000);
        assert_int_equal(tw_cancel(w, first), 1);
        assert_int_equal(exact(w), 20003);
        if (left == 32)
            assert_int_equal(tw_next_expiry(w), 20003);
        else
            assert_in_range(tw_next_expiry(w), 20000, 20003);
        CHECK(w);
    }
}

/* The limit counts pending timers, not queue entries: a small wheel whose
 * earliest timer keeps moving later (leaving stale entries behind in its
 * slot) still answers exactly. */
static void test_small_wheel_churn_stays_exact(void **state)
{
    (void)state;
    tw_wheel *w = new_wheel(0);
    tw_id ids[8];
    uint64_t due[8];
    for (int i = 0; i < 8; i++) {
        due[i] = 300 + (uint64_t)i;
        ids[i] = tw_add(w, due[i], rec_cb, TAG(i));
    }
    for (int round = 0; round < 200; round++) {
        int first = 0;
        for (int i = 1; i < 8; i++)
            if (due[i] < due[first])
                first = i;
        due[first] += 8; /* later, mostly within the same level-0 slot */
        assert_int_equal(tw_reschedule(w, ids[first], due[first]), 1);
        uint64_t least = due[0];
        for (int i = 1; i < 8; i++)
            if (due[i] < least)
                least = due[i];
        assert_int_equal(tw_next_expiry(w), least);
    }
    CHECK(w);
}

/* tw_destroy releases pending timers one by one, also out of upper-level
 * slots; a release hook that looks at the wheel meanwhile must find it
 * consistent and the answer never later than what is left (it was left
 * claiming the released timer's tick as exact, and tw_check failed). */
static tw_wheel *hook_wheel;
static int hook_checks_failed, hook_calls;
static uint64_t hook_answers[4];

static void check_in_release(void *user_data)
{
    (void)user_data;
    if (tw_check(hook_wheel) != 0)
        hook_checks_failed++;
    if (hook_calls < 4)
        hook_answers[hook_calls] = tw_next_expiry(hook_wheel);
    hook_calls++;
}

static void test_destroy_hooks_see_true_least(void **state)
{
    (void)state;
    struct tw_config c;
    tw_config_init(&c);
    c.lock = TW_LOCK_NONE;
    hook_wheel = tw_create(&c);
    assert_non_null(hook_wheel);
    hook_checks_failed = hook_calls = 0;
    for (int i = 0; i < 3; i++) /* one level-1 slot */
        assert_int_not_equal(tw_add_ex(hook_wheel, 40000 + (uint64_t)i, 0, rec_cb,
                                       check_in_release, TAG(i)), 0);
    assert_int_equal(tw_destroy(hook_wheel), 0);
    assert_int_equal(hook_calls, 3);
    assert_int_equal(hook_checks_failed, 0);
    /* while the first two hooks run, 40001 then 40002 are left */
    assert_int_equal(hook_answers[0], 40001);
    assert_int_equal(hook_answers[1], 40002);
    assert_int_equal(hook_answers[2], TW_NEVER);
}

/* tw_timeout_ms follows the O(1) answer: with a fake clock and 1 ms ticks
 * it is that answer in milliseconds, early case included. */
static void test_timeout_ms_follows(void **state)
{
    (void)state;
    struct fake_clock clk = {5000000, 0};
    tw_wheel *w = new_fake_clock_wheel(&clk);
    static tw_id ids[200];
    for (int i = 0; i < 200; i++)
        ids[i] = tw_add(w, 40000 + (uint64_t)i, rec_cb, TAG(i));
    assert_int_equal(tw_timeout_ms(w), 40000);
    for (int i = 0; i < 100; i++)
        assert_int_equal(tw_cancel(w, ids[i]), 1);
    uint64_t fast = tw_next_expiry(w);
    assert_true(fast < exact(w));
    assert_int_equal(tw_timeout_ms(w), (int32_t)fast);
    clk.us += fast * 1000;
    assert_int_equal(tw_expire(w), 0);
    assert_int_equal(tw_timeout_ms(w), (int32_t)(40100 - fast));
    CHECK(w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_far_only_is_exact),
        T(test_earliest_churn_bound),
        T(test_earliest_moved_later),
        T(test_small_slot_stays_exact),
        T(test_slot_of_32_is_exact),
        T(test_small_wheel_churn_stays_exact),
        T(test_destroy_hooks_see_true_least),
        T(test_timeout_ms_follows),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
