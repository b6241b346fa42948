/* User data is handed back exactly once: right after a one-shot's callback,
 * inside a successful cancel, right after the callback of a periodic that
 * cancelled itself, at destroy for everything pending (never fired), and
 * never for a failed add. An event log checks the order. */
#include "helpers.h"

/* ---- event log ---------------------------------------------------------- */

enum { EV_FIRE = 1, EV_RELEASE = 2 };
struct event {
    int kind;
    int tag;
    uint64_t tick; /* tw_now() for fires */
};
#define EV_CAP 4096
static struct event evs[EV_CAP];
static size_t nev;
static int fired[EV_CAP], released[EV_CAP];

static void log_event(int kind, int tag, uint64_t tick)
{
    if (nev < EV_CAP)
        evs[nev] = (struct event){kind, tag, tick};
    nev++;
    if (tag >= 0 && tag < EV_CAP) {
        if (kind == EV_FIRE)
            fired[tag]++;
        else
            released[tag]++;
    }
}

static void fire_cb(tw_wheel *w, tw_id id, void *user_data)
{
    (void)id;
    log_event(EV_FIRE, UNTAG(user_data), tw_now(w));
}

static void release_cb(void *user_data)
{
    log_event(EV_RELEASE, UNTAG(user_data), 0);
}

static void reset_log(void)
{
    nev = 0;
    memset(fired, 0, sizeof fired);
    memset(released, 0, sizeof released);
}

#define ASSERT_EVENT(i, k, t)                                                 \
    do {                                                                      \
        assert_true((size_t)(i) < nev);                                       \
        assert_int_equal(evs[(i)].kind, (k));                                 \
        assert_int_equal(evs[(i)].tag, (t));                                  \
    } while (0)

static tw_id add(tw_wheel *w, uint64_t delay, uint64_t interval, int tag)
{
    tw_id id = tw_add_ex(w, delay, interval, fire_cb, release_cb, TAG(tag));
    assert_int_not_equal(id, 0);
    return id;
}

/* ---- one-shots ---------------------------------------------------------- */

static void test_oneshot_released_right_after_callback(void **state)
{
    (void)state;
    reset_log();
    tw_wheel *w = new_wheel(0);
    add(w, 5, 0, 1);
    add(w, 5, 0, 2);
    add(w, 6, 0, 3);
    assert_int_equal(tw_advance(w, 4), 0);
    assert_int_equal(nev, 0);
    assert_int_equal(tw_advance(w, 10), 3);
    assert_int_equal(nev, 6);
    ASSERT_EVENT(0, EV_FIRE, 1);
    ASSERT_EVENT(1, EV_RELEASE, 1);
    ASSERT_EVENT(2, EV_FIRE, 2);
    ASSERT_EVENT(3, EV_RELEASE, 2);
    ASSERT_EVENT(4, EV_FIRE, 3);
    ASSERT_EVENT(5, EV_RELEASE, 3);
    drop(w);
    assert_int_equal(nev, 6);
}

static void test_cancel_releases_before_returning(void **state)
{
    (void)state;
    reset_log();
    tw_wheel *w = new_wheel(0);
    tw_id a = add(w, 5, 0, 1);
    tw_id p = add(w, 3, 7, 2);
    tw_id d = add(w, 0, 0, 3);
    assert_int_equal(tw_cancel(w, a), 1);
    assert_int_equal(released[1], 1);
    assert_int_equal(tw_cancel(w, d), 1);
    assert_int_equal(released[3], 1);
    assert_int_equal(tw_advance(w, 20), 3); /* p at 3, 10 and 17 */
    assert_int_equal(released[2], 0);
    assert_int_equal(tw_cancel(w, p), 1);
    assert_int_equal(released[2], 1);
    assert_int_equal(tw_cancel(w, p), 0);
    assert_int_equal(tw_cancel(w, a), 0);
    assert_int_equal(tw_advance(w, 100), 0);
    drop(w);
    assert_int_equal(fired[1], 0);
    assert_int_equal(fired[2], 3);
    assert_int_equal(fired[3], 0);
    for (int t = 1; t <= 3; t++)
        assert_int_equal(released[t], 1);
}

/* Reschedule keeps ownership; the final firing releases once. */
static void test_reschedule_does_not_release(void **state)
{
    (void)state;
    reset_log();
    tw_wheel *w = new_wheel(0);
    tw_id a = add(w, 5, 0, 1);
    for (int i = 0; i < 10; i++)
        assert_int_equal(tw_reschedule(w, a, 100 + (uint64_t)i * 1000), 1);
    assert_int_equal(nev, 0);
    assert_int_equal(tw_advance(w, 10000), 1);
    assert_int_equal(fired[1], 1);
    assert_int_equal(released[1], 1);
    assert_int_equal(evs[0].tick, 9100);
    drop(w);
    assert_int_equal(released[1], 1);
}

/* ---- destroy ------------------------------------------------------------ */

static void test_destroy_releases_pending_once(void **state)
{
    (void)state;
    reset_log();
    tw_wheel *w = new_wheel((UINT64_C(1) << 32) - 100);
    const uint64_t delays[] = {0, 1, 200, 256, 5000, 1u << 14, 300000,
                               1u << 20, 1u << 26, TW_MAX_DELAY};
    const int n = (int)(sizeof delays / sizeof delays[0]);
    for (int i = 0; i < n; i++)
        add(w, delays[i], 0, i);
    for (int i = 0; i < n; i++)
        add(w, delays[i] < TW_MAX_DELAY ? delays[i] + 1 : delays[i], 50,
            100 + i); /* periodic */
    /* some fired already, some cancelled */
    assert_int_equal(tw_advance(w, 1), 3); /* tags 0, 1 and 100 */
    assert_int_equal(tw_cancel(w, add(w, 10, 0, 200)), 1);
    assert_int_equal(tw_count(w), (uint64_t)(2 * n - 2));
    size_t before = nev;
    drop(w);
    for (size_t i = before; i < nev; i++)
        assert_int_equal(evs[i].kind, EV_RELEASE);
    assert_int_equal(nev - before, (size_t)(2 * n - 2));
    for (int i = 0; i < n; i++) {
        assert_int_equal(released[i], 1);
        assert_int_equal(released[100 + i], 1);
        assert_int_equal(fired[i], i < 2 ? 1 : 0);
        assert_int_equal(fired[100 + i], i < 1 ? 1 : 0);
    }
    assert_int_equal(released[200], 1);
}

/* Timers a callback added (one due at the next call) are released at
 * destroy too. */
static void adder_cb(tw_wheel *w, tw_id id, void *user_data)
{
    fire_cb(w, id, user_data);
    tw_add_ex(w, 0, 0, fire_cb, release_cb, TAG(UNTAG(user_data) + 10));
    tw_add_ex(w, 1000, 0, fire_cb, release_cb, TAG(UNTAG(user_data) + 20));
}

static void test_destroy_releases_timers_added_by_callbacks(void **state)
{
    (void)state;
    reset_log();
    tw_wheel *w = new_wheel(0);
    assert_int_not_equal(tw_add_ex(w, 3, 0, adder_cb, release_cb, TAG(1)), 0);
    assert_int_equal(tw_advance(w, 5), 1);
    assert_int_equal(tw_count(w), 2);
    drop(w);
    assert_int_equal(fired[1], 1);
    assert_int_equal(released[1], 1);
    assert_int_equal(fired[11], 0);
    assert_int_equal(released[11], 1);
    assert_int_equal(fired[21], 0);
    assert_int_equal(released[21], 1);
}

/* ---- callbacks cancelling ---------------------------------------------- */

static struct {
    tw_id target;
    int ret[4];
    int released_seen; /* released[] of the target right after cancel */
    int calls;
} cc;

/* Cancels itself (periodic): release must wait for the callback to end. */
static void cancel_self_cb(tw_wheel *w, tw_id id, void *user_data)
{
    fire_cb(w, id, user_data);
    int tag = UNTAG(user_data);
    cc.ret[cc.calls++ & 3] = tw_cancel(w, id);
    cc.released_seen = released[tag];
    cc.ret[cc.calls++ & 3] = tw_cancel(w, id);
}

static void test_periodic_cancelled_in_own_callback(void **state)
{
    (void)state;
    reset_log();
    memset(&cc, 0, sizeof cc);
    tw_wheel *w = new_wheel(0);
    assert_int_not_equal(tw_add_ex(w, 4, 4, cancel_self_cb, release_cb,
                                   TAG(1)), 0);
    add(w, 4, 0, 2); /* same tick, after it */
    assert_int_equal(tw_advance(w, 100), 2);
    assert_int_equal(cc.ret[0], 1);
    assert_int_equal(cc.ret[1], 0);
    assert_int_equal(cc.released_seen, 0);
    assert_int_equal(nev, 4);
    ASSERT_EVENT(0, EV_FIRE, 1);
    ASSERT_EVENT(1, EV_RELEASE, 1);
    ASSERT_EVENT(2, EV_FIRE, 2);
    ASSERT_EVENT(3, EV_RELEASE, 2);
    assert_int_equal(tw_count(w), 0);
    drop(w);
    assert_int_equal(released[1], 1);
}

/* A one-shot cancelling itself gets 0, and is released once, after. */
static void test_oneshot_cancel_self_released_once(void **state)
{
    (void)state;
    reset_log();
    memset(&cc, 0, sizeof cc);
    tw_wheel *w = new_wheel(0);
    assert_int_not_equal(tw_add_ex(w, 4, 0, cancel_self_cb, release_cb,
                                   TAG(1)), 0);
    assert_int_equal(tw_advance(w, 100), 1);
    assert_int_equal(cc.ret[0], 0);
    assert_int_equal(cc.ret[1], 0);
    assert_int_equal(cc.released_seen, 0);
    assert_int_equal(released[1], 1);
    drop(w);
    assert_int_equal(released[1], 1);
}

/* Cancels cc.target and records whether it was released before returning. */
static void cancel_other_cb(tw_wheel *w, tw_id id, void *user_data)
{
    fire_cb(w, id, user_data);
    cc.ret[cc.calls++ & 3] = tw_cancel(w, cc.target);
    cc.released_seen = released[2];
}

/* The victim sits in the same tick's batch, or later, or is periodic. */
static void test_cancel_other_from_callback_releases_once(void **state)
{
    (void)state;
    const struct {
        uint64_t delay, interval;
    } victims[] = {{10, 0}, {11, 0}, {5000, 0}, {10, 3}, {2, 3}};
    for (size_t v = 0; v < sizeof victims / sizeof victims[0]; v++) {
        reset_log();
        memset(&cc, 0, sizeof cc);
        tw_wheel *w = new_wheel(0);
        assert_int_not_equal(tw_add_ex(w, 10, 0, cancel_other_cb, release_cb,
                                       TAG(1)), 0);
        cc.target = add(w, victims[v].delay, victims[v].interval, 2);
        int64_t ran = tw_advance(w, 10000);
        assert_int_equal(ran, 1 + fired[2]);
        assert_int_equal(cc.ret[0], 1);
        assert_int_equal(cc.released_seen, 1);
        /* periodic victim at 2, 5, 8 before the cancel at 10 */
        assert_int_equal(fired[2], victims[v].delay == 2 ? 3 : 0);
        drop(w);
        assert_int_equal(released[1], 1);
        assert_int_equal(released[2], 1);
    }
}

/* ---- free() as the release hook ----------------------------------------- */

/* Heap payloads with free(): ASan / valgrind catch a double free or leak. */
static void test_free_as_release(void **state)
{
    (void)state;
    tw_wheel *w = new_wheel(0);
    static tw_id ids[3000];
    uint64_t seed = 11;
    for (int i = 0; i < 3000; i++) {
        int *payload = malloc(sizeof *payload);
        assert_non_null(payload);
        *payload = i;
        uint64_t r = rng_next(&seed);
        ids[i] = tw_add_ex(w, r % 5000, (r >> 20) % 4 == 0 ? 1 + r % 700 : 0,
                           rec_cb, free, payload);
        assert_int_not_equal(ids[i], 0);
    }
    /* A failed add leaves the payload with the caller. */
    int *mine = malloc(sizeof *mine);
    assert_non_null(mine);
    ASSERT_FAILS_ERRNO(tw_add_ex(w, TW_MAX_DELAY + 1, 0, rec_cb, free, mine),
                       ERANGE);
    ASSERT_FAILS_ERRNO(tw_add_ex(w, 1, 0, NULL, free, mine), EINVAL);
    free(mine);
    for (int i = 0; i < 3000; i += 3)
        assert_int_equal(tw_cancel(w, ids[i]), 1);
    assert_true(tw_advance(w, 2500) > 0);
    for (int i = 1; i < 3000; i += 3)
        assert_true(tw_cancel(w, ids[i]) >= 0);
    CHECK(w);
    drop(w);
}

/* A periodic timer whose callback destroys the wheel is not re-armed: it
 * is released when the callback returns, and by then it no longer counts
 * as live: its hook sees an empty, consistent wheel. */
static tw_wheel *dying;
static int64_t count_in_hook = -1, check_in_hook = -1;

static void destroy_wheel_cb(tw_wheel *w, tw_id id, void *user_data)
{
    (void)id;
    log_event(EV_FIRE, UNTAG(user_data), tw_now(w));
    assert_int_equal(tw_destroy(w), 0);
}

static void inspect_release(void *user_data)
{
    log_event(EV_RELEASE, UNTAG(user_data), 0);
    count_in_hook = (int64_t)tw_count(dying);
    check_in_hook = tw_check(dying);
}

static void test_periodic_destroyed_by_its_callback(void **state)
{
    (void)state;
    reset_log();
    dying = new_wheel(0);
    untrack(dying); /* its own callback destroys it */
    assert_int_not_equal(tw_add_ex(dying, 1, 5, destroy_wheel_cb, inspect_release, TAG(1)), 0);
    assert_int_equal(tw_advance(dying, 1), 1); /* the wheel is gone after it */
    assert_int_equal(nev, 2);
    ASSERT_EVENT(0, EV_FIRE, 1);
    ASSERT_EVENT(1, EV_RELEASE, 1);
    assert_int_equal(count_in_hook, 0);
    assert_int_equal(check_in_hook, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_oneshot_released_right_after_callback),
        T(test_cancel_releases_before_returning),
        T(test_reschedule_does_not_release),
        T(test_destroy_releases_pending_once),
        T(test_destroy_releases_timers_added_by_callbacks),
        T(test_periodic_cancelled_in_own_callback),
        T(test_oneshot_cancel_self_released_once),
        T(test_cancel_other_from_callback_releases_once),
        T(test_free_as_release),
        T(test_periodic_destroyed_by_its_callback),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
