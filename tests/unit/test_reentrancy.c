/*
 * The re-entrancy contract (timer.h "re-entrancy", README "Re-entrancy"),
 * cell by cell: every wheel function called from inside a callback and from
 * inside release hooks run by the driver, by tw_cancel and by tw_destroy.
 * The calls made from another thread while those run are in
 * tests/threads/test_reentrancy_threads.c.
 *
 * Each cell builds a fresh wheel with two timers: "self", the timer whose
 * callback or hook makes the call, and "other", a live timer due later. The
 * probe records what the call returned; the test thread compares it with
 * the table, then checks that the wheel still works and that every user
 * datum came back exactly once.
 */
#include "helpers.h"

#include <limits.h>
#include <stdio.h>

/* ---- the contexts and the calls ----------------------------------------- */

enum context {
    IN_ONESHOT_CALLBACK,   /* a one-shot's callback, inside tw_advance */
    IN_PERIODIC_CALLBACK,  /* a periodic timer's first callback */
    IN_CANCEL_HOOK,        /* release hook run by tw_cancel from plain code */
    IN_ONESHOT_END_HOOK,   /* release hook after a one-shot's callback */
    IN_SELF_CANCEL_HOOK,   /* hook of a periodic cancelled in its callback */
    IN_DESTROY_HOOK,       /* release hook run by tw_destroy */
    CONTEXTS
};

static const char *const context_names[CONTEXTS] = {
    "one-shot callback", "periodic callback", "hook run by tw_cancel",
    "hook after a one-shot", "hook of a periodic cancelled in its callback",
    "hook run by tw_destroy",
};

enum call {
    CALL_ADD, CALL_ADD_PERIODIC, CALL_ADD_EX,
    CALL_CANCEL_OTHER, CALL_CANCEL_OWN,
    CALL_RESCHEDULE_OWN, CALL_RESCHEDULE_OTHER,
    CALL_REMAINING_OWN,
    CALL_ADVANCE, CALL_EXPIRE,
    CALL_NEXT_EXPIRY, CALL_TIMEOUT_MS, CALL_NOW, CALL_COUNT, CALL_TICK_US,
    CALL_GET_STATS, CALL_CHECK,
    CALL_DESTROY, CALL_THREAD_START, CALL_THREAD_STOP,
    CALL_NO_WHEEL, /* config_init, create, strerror, version, get_api, gettime */
    CALLS
};

static const char *const call_names[CALLS] = {
    "tw_add", "tw_add_periodic", "tw_add_ex", "tw_cancel(other)",
    "tw_cancel(own)", "tw_reschedule(own)", "tw_reschedule(other)",
    "tw_remaining(own)", "tw_advance", "tw_expire", "tw_next_expiry",
    "tw_timeout_ms", "tw_now", "tw_count", "tw_tick_us", "tw_get_stats",
    "tw_check", "tw_destroy", "tw_thread_start", "tw_thread_stop",
    "wheel-less calls",
};

/* ---- expected results --------------------------------------------------- */

enum expect_kind {
    EXPECT_ID,         /* a valid id: the new timer is live */
    EXPECT_EBUSY_ID,   /* 0 with errno EBUSY, user data not released */
    EXPECT_EQUAL,      /* == value */
    EXPECT_NON_NEGATIVE,
    EXPECT_FINITE      /* != TW_NEVER */
};

struct expect {
    enum expect_kind kind;
    int64_t value;
};

#define ID {EXPECT_ID, 0}
#define BUSY_ID {EXPECT_EBUSY_ID, 0}
#define EQ(v) {EXPECT_EQUAL, (int64_t)(v)}
#define NONNEG {EXPECT_NON_NEGATIVE, 0}
#define FINITE {EXPECT_FINITE, 0}
#define NEVER EQ(TW_NEVER)

/* The periodic "self" runs every PERIOD ticks from tick 1; "other" is due at
 * OTHER_DUE. The contract's table, one column per context above. */
#define PERIOD 5
#define OTHER_DUE 1000
#define TICK_US 1000

static const struct expect table[CALLS][CONTEXTS] = {
    /*                       1-shot cb  periodic cb  cancel hook  1-shot end  self-cancel  destroy hook */
    [CALL_ADD] =            {ID,        ID,          ID,          ID,         ID,          BUSY_ID},
    [CALL_ADD_PERIODIC] =   {ID,        ID,          ID,          ID,         ID,          BUSY_ID},
    [CALL_ADD_EX] =         {ID,        ID,          ID,          ID,         ID,          BUSY_ID},
    [CALL_CANCEL_OTHER] =   {EQ(1),     EQ(1),       EQ(1),       EQ(1),      EQ(1),       EQ(1)},
    [CALL_CANCEL_OWN] =     {EQ(0),     EQ(1),       EQ(0),       EQ(0),      EQ(0),       EQ(0)},
    [CALL_RESCHEDULE_OWN] = {EQ(0),     EQ(1),       EQ(0),       EQ(0),      EQ(0),       EQ(0)},
    [CALL_RESCHEDULE_OTHER]={EQ(1),     EQ(1),       EQ(1),       EQ(1),      EQ(1),       EQ(0)},
    [CALL_REMAINING_OWN] =  {NEVER,     EQ(PERIOD),  NEVER,       NEVER,      NEVER,       NEVER},
    [CALL_ADVANCE] =        {EQ(-EBUSY),EQ(-EBUSY),  NONNEG,      EQ(-EBUSY), EQ(-EBUSY),  EQ(-EBUSY)},
    [CALL_EXPIRE] =         {EQ(-EBUSY),EQ(-EBUSY),  NONNEG,      EQ(-EBUSY), EQ(-EBUSY),  EQ(-EBUSY)},
    [CALL_NEXT_EXPIRY] =    {FINITE,    FINITE,      FINITE,      FINITE,     FINITE,      FINITE},
    [CALL_TIMEOUT_MS] =     {NONNEG,    NONNEG,      NONNEG,      NONNEG,     NONNEG,      NONNEG},
    [CALL_NOW] =            {EQ(1),     EQ(1),       EQ(0),       EQ(1),      EQ(1),       EQ(0)},
    [CALL_COUNT] =          {EQ(1),     EQ(2),       EQ(1),       EQ(1),      EQ(1),       EQ(1)},
    [CALL_TICK_US] =        {EQ(TICK_US),EQ(TICK_US),EQ(TICK_US), EQ(TICK_US),EQ(TICK_US), EQ(TICK_US)},
    [CALL_GET_STATS] =      {EQ(0),     EQ(0),       EQ(0),       EQ(0),      EQ(0),       EQ(0)},
    [CALL_CHECK] =          {EQ(0),     EQ(0),       EQ(0),       EQ(0),      EQ(0),       EQ(0)},
    [CALL_DESTROY] =        {EQ(0),     EQ(0),       EQ(0),       EQ(0),      EQ(0),       EQ(-EBUSY)},
    [CALL_THREAD_START] =   {EQ(0),     EQ(0),       EQ(0),       EQ(0),      EQ(0),       EQ(-EBUSY)},
    [CALL_THREAD_STOP] =    {EQ(0),     EQ(0),       EQ(0),       EQ(0),      EQ(0),       EQ(0)},
    [CALL_NO_WHEEL] =       {EQ(1),     EQ(1),       EQ(1),       EQ(1),      EQ(1),       EQ(1)},
};

/* ---- one cell ----------------------------------------------------------- */

/* User data: which timer a datum belongs to, released how many times. */
enum datum { SELF, OTHER, ADDED, DATUMS };

static struct cell {
    tw_wheel *wheel;
    enum context context;
    enum call call;
    tw_id self, other;
    int probed;     /* the call has been made */
    int64_t result; /* what it returned (ids as 0 / 1 for "an id") */
    int error;      /* errno after an id-returning call */
    tw_id added;    /* the id it returned */
    int releases[DATUMS];
    int thread_started;
    int wheel_gone; /* the call destroyed the wheel (deferred destroy) */
} cell;

static uint64_t fake_clock_us;
static uint64_t fake_clock(void *context)
{
    (void)context;
    return fake_clock_us;
}

static void noop_cb(tw_wheel *w, tw_id id, void *user_data)
{
    (void)w, (void)id, (void)user_data;
}

static void count_release(void *user_data)
{
    cell.releases[UNTAG(user_data)]++;
}

static int64_t make_call(tw_wheel *w)
{
    struct tw_stats stats;
    struct tw_config config;
    tw_id id = 0;
    errno = 0;
    switch (cell.call) {
    case CALL_ADD:
        id = tw_add(w, 3, noop_cb, TAG(ADDED));
        break;
    case CALL_ADD_PERIODIC:
        id = tw_add_periodic(w, 3, 7, noop_cb, TAG(ADDED));
        break;
    case CALL_ADD_EX:
        id = tw_add_ex(w, 3, 0, noop_cb, count_release, TAG(ADDED));
        break;
    case CALL_CANCEL_OTHER:
        return tw_cancel(w, cell.other);
    case CALL_CANCEL_OWN:
        return tw_cancel(w, cell.self);
    case CALL_RESCHEDULE_OWN:
        return tw_reschedule(w, cell.self, 9);
    case CALL_RESCHEDULE_OTHER:
        return tw_reschedule(w, cell.other, 9);
    case CALL_REMAINING_OWN:
        return (int64_t)tw_remaining(w, cell.self);
    case CALL_ADVANCE:
        return tw_advance(w, 1);
    case CALL_EXPIRE:
        return tw_expire(w);
    case CALL_NEXT_EXPIRY:
        return (int64_t)tw_next_expiry(w);
    case CALL_TIMEOUT_MS:
        return tw_timeout_ms(w);
    case CALL_NOW:
        return (int64_t)tw_now(w);
    case CALL_COUNT:
        return (int64_t)tw_count(w);
    case CALL_TICK_US:
        return tw_tick_us(w);
    case CALL_GET_STATS:
        stats.size = sizeof stats;
        return tw_get_stats(w, &stats);
    case CALL_CHECK:
        return tw_check(w);
    case CALL_DESTROY: {
        int r = tw_destroy(w);
        cell.wheel_gone = r == 0;
        return r;
    }
    case CALL_THREAD_START: {
        int r = tw_thread_start(w, 200);
        cell.thread_started = r == 0;
        return r;
    }
    case CALL_THREAD_STOP:
        return tw_thread_stop(w);
    case CALL_NO_WHEEL: {
        tw_wheel *another;
        tw_config_init(&config);
        another = tw_create(&config);
        return another && tw_destroy(another) == 0 && tw_strerror(-EBUSY) &&
               tw_version() == TW_VERSION_HEX && tw_get_api(1) &&
               tw_gettime() > 0;
    }
    case CALLS:
        break;
    }
    cell.error = errno;
    cell.added = id;
    return id != 0;
}

static void probe(tw_wheel *w)
{
    if (cell.probed)
        return;
    cell.probed = 1;
    cell.result = make_call(w);
}

static void probe_cb(tw_wheel *w, tw_id id, void *user_data)
{
    (void)id, (void)user_data;
    probe(w);
}

static void cancel_self_cb(tw_wheel *w, tw_id id, void *user_data)
{
    (void)user_data;
    tw_cancel(w, id);
}

/* The hook of "self" counts its release, then makes the call. */
static void probe_release(void *user_data)
{
    count_release(user_data);
    probe(cell.wheel);
}

/* Builds the wheel and the two timers, and enters the context. */
static void run_cell(enum context context, enum call call)
{
    struct tw_config config;
    tw_wheel *w;
    int r;
    memset(&cell, 0, sizeof cell);
    cell.context = context;
    cell.call = call;
    fake_clock_us = 0;
    tw_config_init(&config);
    config.tick_us = TICK_US;
    config.clock_fn = fake_clock;
    w = cell.wheel = tw_create(&config);
    assert_non_null(w);
    cell.other = tw_add_ex(w, OTHER_DUE, 0, noop_cb, count_release, TAG(OTHER));
    assert_int_not_equal(cell.other, 0);
    switch (context) {
    case IN_ONESHOT_CALLBACK:
        cell.self = tw_add_ex(w, 1, 0, probe_cb, count_release, TAG(SELF));
        break;
    case IN_PERIODIC_CALLBACK:
        cell.self = tw_add_ex(w, 1, PERIOD, probe_cb, count_release, TAG(SELF));
        break;
    case IN_CANCEL_HOOK:
        cell.self = tw_add_ex(w, 10, 0, noop_cb, probe_release, TAG(SELF));
        break;
    case IN_ONESHOT_END_HOOK:
        cell.self = tw_add_ex(w, 1, 0, noop_cb, probe_release, TAG(SELF));
        break;
    case IN_SELF_CANCEL_HOOK:
        cell.self = tw_add_ex(w, 1, PERIOD, cancel_self_cb, probe_release, TAG(SELF));
        break;
    case IN_DESTROY_HOOK: /* due before "other", so released before it */
        cell.self = tw_add_ex(w, 10, 0, noop_cb, probe_release, TAG(SELF));
        break;
    case CONTEXTS:
        break;
    }
    assert_int_not_equal(cell.self, 0);
    if (context == IN_CANCEL_HOOK) {
        assert_int_equal(tw_cancel(w, cell.self), 1);
    } else if (context == IN_DESTROY_HOOK) {
        assert_int_equal(tw_destroy(w), 0);
        cell.wheel_gone = 1;
    } else {
        r = (int)tw_advance(w, 1);
        assert_int_equal(r, 1); /* self fired once; a re-entrant advance is refused */
    }
    assert_true(cell.probed);
}

static void check_result(enum context context, enum call call)
{
    const struct expect *e = &table[call][context];
    char where[160];
    snprintf(where, sizeof where, "%s in %s: returned %lld",
             call_names[call], context_names[context], (long long)cell.result);
    switch (e->kind) {
    case EXPECT_ID:
        if (cell.result != 1)
            fail_msg("%s, want an id (errno %d)", where, cell.error);
        break;
    case EXPECT_EBUSY_ID:
        if (cell.result != 0 || cell.error != EBUSY)
            fail_msg("%s (errno %d), want 0 with EBUSY", where, cell.error);
        if (cell.releases[ADDED] != 0)
            fail_msg("%s: refused add released the caller's data", where);
        break;
    case EXPECT_EQUAL:
        if (cell.result != e->value)
            fail_msg("%s, want %lld", where, (long long)e->value);
        break;
    case EXPECT_NON_NEGATIVE:
        if (cell.result < 0)
            fail_msg("%s, want >= 0", where);
        break;
    case EXPECT_FINITE:
        if ((uint64_t)cell.result == TW_NEVER)
            fail_msg("%s, want a finite number of ticks", where);
        break;
    }
}

/* After the cell: the wheel still works (unless the call destroyed it),
 * and once destroyed, every datum has come back exactly once. */
static void finish_cell(enum context context, enum call call)
{
    tw_wheel *w = cell.wheel;
    int i;
    if (!cell.wheel_gone) {
        if (cell.thread_started)
            assert_int_equal(tw_thread_stop(w), 0);
        assert_int_equal(tw_check(w), 0);
        assert_int_not_equal(tw_add(w, 2, noop_cb, NULL), 0);
        assert_true(tw_advance(w, 3) >= 1);
        assert_int_equal(tw_check(w), 0);
        assert_int_equal(tw_destroy(w), 0);
    }
    for (i = 0; i < DATUMS; i++) {
        int want = i == ADDED ? (cell.added != 0 && call == CALL_ADD_EX) : 1;
        if (cell.releases[i] != want)
            fail_msg("%s in %s: datum %d released %d times, want %d",
                     call_names[call], context_names[context], i,
                     cell.releases[i], want);
    }
}

/* One test per call, over every context, so a failure names its row. */
static void test_row(void **state)
{
    enum call call = (enum call)(intptr_t)*state;
    int context;
    for (context = 0; context < CONTEXTS; context++) {
        run_cell((enum context)context, call);
        check_result((enum context)context, call);
        finish_cell((enum context)context, call);
    }
}

/* ---- regressions named after the defects -------------------------------- */

/* Issue 11, defect 1: tw_destroy from a release hook that tw_cancel runs
 * returned 0, then tw_cancel touched the freed wheel (ASan: use after
 * free). Now the destroy is deferred to that tw_cancel. */
static void test_destroy_in_cancel_release_hook(void **state)
{
    (void)state;
    run_cell(IN_CANCEL_HOOK, CALL_DESTROY);
    assert_int_equal(cell.result, 0);
    assert_int_equal(cell.releases[SELF], 1);
    assert_int_equal(cell.releases[OTHER], 1); /* released by the teardown */
}

/* Nested: a cancel's hook cancels another timer whose hook destroys the
 * wheel. Only the outermost tw_cancel may finish the destroy. */
static tw_id nested_inner;
static void nested_outer_release(void *user_data)
{
    count_release(user_data);
    tw_cancel(cell.wheel, nested_inner); /* its hook destroys the wheel */
    /* the wheel is still alive here: the outer tw_cancel frees it */
    cell.result = (int64_t)tw_count(cell.wheel);
}

static void nested_inner_release(void *user_data)
{
    count_release(user_data);
    cell.error = tw_destroy(cell.wheel);
}

static void test_destroy_in_nested_cancel_hooks(void **state)
{
    (void)state;
    memset(&cell, 0, sizeof cell);
    cell.wheel = tw_create(NULL);
    assert_non_null(cell.wheel);
    cell.self = tw_add_ex(cell.wheel, 5, 0, noop_cb, nested_outer_release, TAG(SELF));
    nested_inner = tw_add_ex(cell.wheel, 6, 0, noop_cb, nested_inner_release, TAG(OTHER));
    assert_int_not_equal(tw_add_ex(cell.wheel, 7, 0, noop_cb, count_release, TAG(ADDED)), 0);
    assert_int_equal(tw_cancel(cell.wheel, cell.self), 1);
    assert_int_equal(cell.error, 0);  /* deferred */
    assert_int_equal(cell.result, 1); /* the third timer, still pending */
    assert_int_equal(cell.releases[SELF], 1);
    assert_int_equal(cell.releases[OTHER], 1);
    assert_int_equal(cell.releases[ADDED], 1);
}

/* Issue 11, defect 2: tw_thread_start from a release hook during
 * tw_destroy started a thread that outlived the wheel. */
static void test_thread_start_in_destroy_hook(void **state)
{
    (void)state;
    run_cell(IN_DESTROY_HOOK, CALL_THREAD_START);
    assert_int_equal(cell.result, -EBUSY);
    assert_false(cell.thread_started);
}

/* 300 distinct release functions: the table dedups by function pointer. */
#define RELEASE_FN(n)                                                         \
    static void release_##n(void *p) { (void)p; }
#define DIGITS(m, x) m(x##0) m(x##1) m(x##2) m(x##3) m(x##4) m(x##5) m(x##6) \
    m(x##7) m(x##8) m(x##9)
#define TENS(m, x) DIGITS(m, x##0) DIGITS(m, x##1) DIGITS(m, x##2)            \
    DIGITS(m, x##3) DIGITS(m, x##4) DIGITS(m, x##5) DIGITS(m, x##6)           \
    DIGITS(m, x##7) DIGITS(m, x##8) DIGITS(m, x##9)
#define RELEASE_NAME(n) release_##n,
TENS(RELEASE_FN, 1) TENS(RELEASE_FN, 2) TENS(RELEASE_FN, 3)
static tw_release *const distinct_releases[] = {
    TENS(RELEASE_NAME, 1) TENS(RELEASE_NAME, 2) TENS(RELEASE_NAME, 3)};
#define DISTINCT (sizeof distinct_releases / sizeof distinct_releases[0])

/* An add that failed with ENOMEM used up one of the 255 release-function
 * slots, so repeated failures ended in a false EMFILE. */
static void test_failed_add_keeps_release_slot(void **state)
{
    (void)state;
    struct tw_config config;
    tw_wheel *w;
    size_t i;
    tw_config_init(&config);
    config.realloc_fn = refusing_realloc;
    w = tw_create(&config);
    assert_non_null(w);
    /* 150 distinct functions whose adds fail, then 150 others that must
     * all fit in the 255 slots */
    alloc_refused = 1;
    for (i = 0; i < DISTINCT / 2; i++)
        ASSERT_FAILS_ERRNO(tw_add_ex(w, 1, 0, noop_cb, distinct_releases[i], NULL),
                           ENOMEM);
    alloc_refused = 0;
    for (i = DISTINCT / 2; i < DISTINCT; i++)
        assert_int_not_equal(tw_add_ex(w, 1, 0, noop_cb, distinct_releases[i], NULL), 0);
    assert_int_equal(tw_advance(w, 1), (int64_t)(DISTINCT - DISTINCT / 2));
    CHECK(w);
    assert_int_equal(tw_destroy(w), 0);
}

int main(void)
{
#define ROW(c) {"row/" #c, test_row, NULL, NULL, (void *)(intptr_t)(c)}
    const struct CMUnitTest tests[] = {
        ROW(CALL_ADD), ROW(CALL_ADD_PERIODIC), ROW(CALL_ADD_EX),
        ROW(CALL_CANCEL_OTHER), ROW(CALL_CANCEL_OWN),
        ROW(CALL_RESCHEDULE_OWN), ROW(CALL_RESCHEDULE_OTHER),
        ROW(CALL_REMAINING_OWN), ROW(CALL_ADVANCE), ROW(CALL_EXPIRE),
        ROW(CALL_NEXT_EXPIRY), ROW(CALL_TIMEOUT_MS), ROW(CALL_NOW),
        ROW(CALL_COUNT), ROW(CALL_TICK_US), ROW(CALL_GET_STATS),
        ROW(CALL_CHECK), ROW(CALL_DESTROY), ROW(CALL_THREAD_START),
        ROW(CALL_THREAD_STOP), ROW(CALL_NO_WHEEL),
        cmocka_unit_test(test_destroy_in_cancel_release_hook),
        cmocka_unit_test(test_destroy_in_nested_cancel_hooks),
        cmocka_unit_test(test_thread_start_in_destroy_hook),
        cmocka_unit_test(test_failed_add_keeps_release_slot),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
