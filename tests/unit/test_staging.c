/*
 * Staging: each level slot moves one level down a share per tick while the
 * slot before it is current, instead of all at once when time enters it
 * (timer.c, "staging"). What must hold at every level, across the 2^32 wrap
 * and whether the wheel ticks or jumps:
 *
 *   - no advance moves more than its share of a slot (what is left, over
 *     the ticks left to the slot's deadline), and the slot is empty by the
 *     deadline; stale entries count in the share, so they do not hold the
 *     live timers back;
 *   - a walk stops at every deadline: a jump past one leaves the wheel as
 *     stopping there would;
 *   - cancels in a slot being staged leave it about three entries per
 *     timer, as compaction leaves any other slot, and tw_next_expiry stays
 *     exact while it holds 32 timers or fewer, whatever the staging took;
 *   - timers fire exactly at their tick, those of one tick in the order of
 *     their last add, reschedule or periodic re-arm, whether they were
 *     moved down before or after that call;
 *   - tw_next_expiry never answers late, and the exact figure is exact;
 *   - tw_destroy mid-staging releases every timer once;
 *   - tw_check rejects a timer in a slot staging could not have put it in.
 *
 * This program compiles timer.c in, to look at the slot being staged and
 * to misplace timers; everything else goes through the public API.
 */
#include "../../timer.c"

#include "helpers.h"

#define P2(n) (UINT64_C(1) << (n))

/* The span of one slot of `level`, and how long before its start staging
 * must be done (timer.c's stage_lead). */
static uint64_t span(int level)
{
    return P2(8 + 6 * level);
}

static uint64_t lead(int level)
{
    return level ? span(level - 1) : 0;
}

/* Timers in level `level`'s slots, by tw_get_stats (without its exact
 * next-expiry figure, which may read a slot). */
static uint64_t at_level(tw_wheel *w, int level)
{
    struct tw_stats s;
    s.size = (uint32_t)offsetof(struct tw_stats, pool_capacity);
    assert_int_equal(tw_get_stats(w, &s), 0);
    return s.pending_level[level];
}

/* ---- a recorder that checks tick and order as timers fire ---------------- */

#define MAX_TIMERS 40000

static struct {
    uint64_t due[MAX_TIMERS];   /* by tag: the tick it must fire at */
    uint64_t order[MAX_TIMERS]; /* by tag: when it was last armed */
    int pending[MAX_TIMERS];
    tw_id id[MAX_TIMERS];
    uint64_t interval[MAX_TIMERS];
    uint64_t armed; /* arms so far */
    uint64_t fired, wrong_tick, wrong_order, last_tick, last_order;
    uint64_t released[MAX_TIMERS];
} book;

static void book_reset(void)
{
    memset(&book, 0, sizeof book);
}

static void check_cb(tw_wheel *w, tw_id id, void *data)
{
    int tag = UNTAG(data);
    uint64_t now = tw_now(w);
    (void)id;
    book.fired++;
    if (now != book.due[tag])
        book.wrong_tick++;
    if (now == book.last_tick && book.order[tag] < book.last_order)
        book.wrong_order++;
    book.last_tick = now;
    book.last_order = book.order[tag];
    if (book.interval[tag]) { /* re-armed as it returns: newest now */
        book.due[tag] = now + book.interval[tag];
        book.order[tag] = ++book.armed;
    } else {
        book.pending[tag] = 0;
    }
}

static void count_release(void *data)
{
    book.released[UNTAG(data)]++;
}

static void arm(tw_wheel *w, int tag, uint64_t delay, uint64_t interval)
{
    book.due[tag] = tw_now(w) + delay;
    book.order[tag] = ++book.armed;
    book.interval[tag] = interval;
    book.pending[tag] = 1;
    book.id[tag] = tw_add_ex(w, delay, interval, check_cb, count_release, TAG(tag));
    assert_int_not_equal(book.id[tag], 0);
}

static void rearm(tw_wheel *w, int tag, uint64_t delay)
{
    book.due[tag] = tw_now(w) + delay;
    book.order[tag] = ++book.armed;
    assert_int_equal(tw_reschedule(w, book.id[tag], delay), 1);
}

static void expect_clean(uint64_t fired)
{
    assert_int_equal(book.fired, fired);
    assert_int_equal(book.wrong_tick, 0);
    assert_int_equal(book.wrong_order, 0);
}

/* ---- the share per tick, at every level ---------------------------------- */

/* K timers in the slot after time's at `level` (its staging starts now),
 * driven in steps of `step` ticks: each step moves at most its share, the
 * slot is empty by its deadline, and nothing stalls: no step moves more
 * than a whole slot's share of a step plus one. The broken alternative, a
 * cascade when time enters the slot, moves all K in one step. */
static void share_per_step(int level, uint64_t step, int count)
{
    tw_wheel *w = new_wheel(0);
    uint64_t seed = 7 + (uint64_t)level, deadline = span(level) - lead(level);
    uint64_t most = 0, fair = ((uint64_t)count * step + deadline - 1) / deadline + 1;
    int64_t fired = 0; /* level 0's deadline is its slot's first tick */
    book_reset();
    for (int i = 0; i < count; i++)
        arm(w, i, span(level) + rng_next(&seed) % span(level), 0);
    assert_int_equal(at_level(w, level), (uint64_t)count);
    CHECK(w);
    while (tw_now(w) < deadline) {
        uint64_t now = tw_now(w), before = at_level(w, level), moved, share;
        uint64_t walk = step < deadline - now ? step : deadline - now;
        fired += tw_advance(w, walk);
        moved = before - at_level(w, level);
        share = now + walk >= deadline ? before
                                       : (before * walk + (deadline - now) - 1) / (deadline - now);
        if (moved > share)
            fail_msg("level %d: %llu moved in the step from %llu, share %llu", level,
                     (unsigned long long)moved, (unsigned long long)now,
                     (unsigned long long)share);
        if (moved > most)
            most = moved;
        if (now % 4096 == 0)
            CHECK(w);
    }
    assert_int_equal(at_level(w, level), 0);
    if (most > fair)
        fail_msg("level %d: a step moved %llu timers; a fair share is %llu", level,
                 (unsigned long long)most, (unsigned long long)fair);
    CHECK(w);
    assert_true(fired == 0 || level == 0);
    assert_int_equal(fired + tw_advance(w, 2 * span(level)), count);
    expect_clean((uint64_t)count);
    CHECK(w);
    drop(w);
}

static void test_share_per_tick(void **state)
{
    (void)state;
    share_per_step(0, 1, 3000);
    share_per_step(1, 1, 20000);
    share_per_step(2, 64, 20000);
    share_per_step(3, 4096, 20000);
}

/* The same with stale entries: of 3 * `live` timers in the slot, two in
 * three are cancelled (too few for the slot to be rotated, see
 * compact_some). A share is counted in entries, live or stale, so the live
 * timers still move down evenly. Counted in live timers only, each share
 * would spend most of itself passing over stale entries, and a pile of
 * live timers would be left for the deadline. */
static void share_with_stale(int level, uint64_t step, int live)
{
    tw_wheel *w = new_wheel(0);
    uint64_t seed = 11 + (uint64_t)level, deadline = span(level) - lead(level);
    uint64_t most = 0, fair = ((uint64_t)live * step + deadline - 1) / deadline + 1;
    int64_t fired = 0;
    book_reset();
    for (int i = 0; i < 3 * live; i++)
        arm(w, i, span(level) + rng_next(&seed) % span(level), 0);
    for (int i = 0; i < 3 * live; i++)
        if (i % 3) {
            assert_int_equal(tw_cancel(w, book.id[i]), 1);
            book.pending[i] = 0;
        }
    assert_int_equal(at_level(w, level), (uint64_t)live);
    CHECK(w);
    while (tw_now(w) < deadline) {
        uint64_t now = tw_now(w), before = at_level(w, level), moved;
        fired += tw_advance(w, step < deadline - now ? step : deadline - now);
        moved = before - at_level(w, level);
        if (moved > most)
            most = moved;
    }
    assert_int_equal(at_level(w, level), 0);
    if (most > 2 * fair)
        fail_msg("level %d, stale entries: a step moved %llu timers; a fair share is %llu",
                 level, (unsigned long long)most, (unsigned long long)fair);
    CHECK(w);
    assert_int_equal(fired + tw_advance(w, 2 * span(level)), live);
    expect_clean((uint64_t)live);
    CHECK(w);
    drop(w);
}

static void test_share_counts_stale_entries(void **state)
{
    (void)state;
    share_with_stale(0, 1, 3000);
    share_with_stale(1, 64, 3000);
    share_with_stale(2, 4096, 3000);
}

/* ---- order of one tick across staging ------------------------------------ */

/* At `level`, timers all due at one tick e of the slot being staged, armed
 * in this order: A and D (moved down early), B (added into the slot while
 * A and D sit below), A again (rescheduled: newest), D cancelled, P (a
 * periodic timer whose re-arm lands on e), C (added after the slot's
 * deadline, so it waits a tick in the slot), B again. They fire as A, P,
 * C, B. */
static void order_at(int level, uint64_t start)
{
    tw_wheel *w = new_wheel(start);
    uint64_t s = span(level), base = start + s - start % s; /* next slot */
    uint64_t e = base + s / 4 + 7, deadline = base - lead(level);
    uint64_t p_first = (base - s) + s / 2;
    enum { A, D, B, P, C };
    book_reset();
    if (start % s > s / 8) /* room for the steps below */
        fail_msg("start %llu too late in its slot", (unsigned long long)start);
    arm(w, A, e - tw_now(w), 0);
    arm(w, D, e - tw_now(w), 0);
    arm(w, P, p_first - tw_now(w), e - p_first);
    assert_int_equal(tw_advance(w, 1), 0);
    assert_int_equal(tw_advance(w, 1), 0);
    assert_int_equal(at_level(w, level), 0); /* A and D went down */
    CHECK(w);
    assert_int_equal(tw_advance(w, base - s + s / 4 - tw_now(w)), 0);
    arm(w, B, e - tw_now(w), 0);
    rearm(w, A, e - tw_now(w));
    assert_int_equal(tw_cancel(w, book.id[D]), 1);
    book.pending[D] = 0;
    CHECK(w);
    assert_int_equal(tw_advance(w, p_first - tw_now(w)), 1); /* P re-arms to e */
    assert_int_equal(book.due[P], e);
    CHECK(w);
    /* just past the deadline: C is filed in the slot, moved on the next tick */
    assert_int_equal(tw_advance(w, deadline + 3 - tw_now(w)), 0);
    arm(w, C, e - tw_now(w), 0);
    CHECK(w);
    assert_int_equal(tw_advance(w, 1), 0);
    rearm(w, B, e - tw_now(w));
    CHECK(w);
    assert_int_equal(tw_advance(w, e - tw_now(w)), 4);
    assert_int_equal(tw_cancel(w, book.id[P]), 1);
    expect_clean(5); /* P once before, then A, P, C, B */
    CHECK(w);
    drop(w);
}

static void test_order_of_one_tick(void **state)
{
    (void)state;
    for (int level = 0; level < 4; level++) {
        order_at(level, 0);
        order_at(level, span(level) * 5 + 3);
    }
    /* level 3's next slot across 2^32 (index 63 to 0) */
    order_at(3, P2(32) - P2(26));
    order_at(2, P2(32) - P2(20) + 1);
}

/* ---- jumps that cross deadlines mid-staging ------------------------------ */

/* Timers over the next three slots of every level; a few single ticks,
 * then jumps that end just before, at and after deadlines of every level,
 * and long ones: every timer fires at its tick, in order. */
static void jumps_from(uint64_t start)
{
    tw_wheel *w = new_wheel(start);
    uint64_t seed = start | 1;
    int count = 0;
    book_reset();
    for (int level = 0; level < 4; level++)
        for (int i = 0; i < 600; i++, count++) {
            uint64_t delay = span(level) + rng_next(&seed) % (3 * span(level));
            if (delay > TW_MAX_DELAY)
                delay = TW_MAX_DELAY;
            /* a few periodic ones, re-arming into far slots being staged
             * (short periods would fire millions of times over the jumps) */
            arm(w, count, delay, i % 50 == 0 ? P2(20) + rng_next(&seed) % P2(26) : 0);
        }
    for (int i = 0; i < 20; i++)
        tw_advance(w, 1);
    CHECK(w);
    for (int round = 0; round < 400; round++) {
        int level = (int)(rng_next(&seed) % 4);
        uint64_t now = tw_now(w), s = span(level);
        uint64_t deadline = now - now % s + s - lead(level);
        int64_t off = (int64_t)(rng_next(&seed) % 3) - 1;
        uint64_t target = (deadline <= now ? deadline + s : deadline) + (uint64_t)off;
        if (round % 7 == 6)
            target = now + rng_next(&seed) % (4 * s);
        if (target <= now)
            target = now + 1;
        tw_advance(w, target - now);
        if (round % 16 == 0)
            CHECK(w);
    }
    CHECK(w);
    for (int i = 0; i < count; i++)
        if (book.interval[i] && book.pending[i]) {
            assert_int_equal(tw_cancel(w, book.id[i]), 1);
            book.pending[i] = 0;
        }
    tw_advance(w, 4 * P2(26) + TW_MAX_DELAY);
    assert_int_equal(tw_count(w), 0);
    assert_int_equal(book.wrong_tick, 0);
    assert_int_equal(book.wrong_order, 0);
    for (int i = 0; i < count; i++)
        assert_int_equal(book.pending[i], 0);
    CHECK(w);
    drop(w);
}

static void test_jumps_mid_staging(void **state)
{
    (void)state;
    jumps_from(0);
    jumps_from(12345);
    jumps_from(P2(32) - P2(26) - 5000); /* across 2^32 */
    jumps_from(P2(33) - 300);
}

/* ---- next expiry during staging ------------------------------------------ */

/* Ticking through a level-1 slot being staged, with timers below, in it
 * and above: the exact figure equals the earliest due tick, and
 * tw_next_expiry is never later than it. */
static void test_next_expiry_while_staging(void **state)
{
    (void)state;
    tw_wheel *w = new_wheel(100);
    uint64_t seed = 99;
    const int count = 300;
    book_reset();
    for (int i = 0; i < count; i++) {
        uint64_t delay = i % 3 == 0   ? 1 + rng_next(&seed) % 60000
                         : i % 3 == 1 ? span(1) + rng_next(&seed) % span(1)
                                      : span(2) + rng_next(&seed) % span(2);
        arm(w, i, delay, 0);
    }
    for (uint64_t t = 0; t < 3 * span(1); t++) {
        uint64_t now = tw_now(w), earliest = TW_NEVER;
        for (int i = 0; i < count; i++)
            if (book.pending[i] && book.due[i] - now < earliest)
                earliest = book.due[i] - now;
        assert_int_equal(get_stats(w).next_expiry_exact, earliest);
        assert_true(tw_next_expiry(w) <= earliest);
        assert_true(tw_next_expiry(w) > 0);
        tw_advance(w, 1);
        if (t % 2048 == 0)
            CHECK(w);
    }
    assert_int_equal(book.wrong_tick, 0);
    drop(w);
}

/* ---- stale entries of a slot being staged -------------------------------- */

/* A slot being staged is read from its head a share per tick, so it is not
 * compacted in place: past the stale threshold it is rotated (timer.c,
 * "Stale entries"), its stale entries dropped and its live timers put back
 * at its tail. Here the slot (level 2's next) has 300 timers at its head
 * that stay and 3000 behind them, all but the last 10 cancelled in order:
 * the slot ends with about three entries per timer, as a compacted one
 * would. (Staged ahead instead, the head's live timers would take those
 * steps and over 2000 stale entries would stay behind them.) */
static void test_cancels_in_a_staged_slot_leave_it_bounded(void **state)
{
    (void)state;
    tw_wheel *w = new_wheel(0);
    uint64_t seed = 21;
    const int head = 300, tail = 3000, kept = 10;
    unsigned list = level_list(2) + 1;
    const struct queue *q = &w->queues[list];
    book_reset();
    for (int i = 0; i < head + tail; i++)
        arm(w, i, span(2) + rng_next(&seed) % span(2), 0);
    assert_int_equal(q->count, (uint32_t)(head + tail));
    assert_int_equal(staged_slot(w, 2), list);
    for (int i = head; i < head + tail - kept; i++) {
        assert_int_equal(tw_cancel(w, book.id[i]), 1);
        book.pending[i] = 0;
    }
    assert_int_equal(q->count, (uint32_t)(head + kept));
    if (q->entries > 3 * q->count + BLOCK_ENTRIES + COMPACT_STEP)
        fail_msg("%u entries for %u timers", q->entries, q->count);
    CHECK(w);
    assert_int_equal(tw_advance(w, 2 * span(2)), head + kept);
    expect_clean((uint64_t)(head + kept));
    CHECK(w);
    drop(w);
}

/* The shares take live timers off the head of the slot being staged. With
 * its stale entries all behind them, the slot would be left with a few
 * timers and hundreds of stale entries, too many for tw_next_expiry to
 * re-read: the answer would stay a departed timer's tick, early, though
 * timer.h allows that only for a slot of more than 32 timers. So in the
 * slot (level `level`'s next) 200 timers due late in its span are armed
 * first, then 415 due early in it are cancelled (just short of the
 * threshold), and the wheel walks to the slot's deadline `step` ticks at a
 * time, each timer cancelled as soon as the staging has moved it down: the
 * answer must be exact whenever the slot holds 32 or fewer, and after
 * every step the slot holds about three entries per timer (plus 15, and
 * one rotation step), as any compacted slot does. Steps of many ticks make
 * shares that move many timers at once, which the rotation after each
 * share must keep up with. */
static void staged_slot_stays_exact(int level, uint64_t step)
{
    tw_wheel *w = new_wheel(0);
    const int stay = 200, gone = 2 * stay + BLOCK_ENTRIES;
    unsigned list = level_list((unsigned)level) + 1;
    const struct queue *q = &w->queues[list];
    uint64_t deadline = span(level) - lead(level), checked = 0;
    book_reset();
    for (int i = 0; i < stay; i++)
        arm(w, i, 2 * span(level) - 1 - (uint64_t)(i % 8), 0);
    for (int i = stay; i < stay + gone; i++)
        arm(w, i, span(level) + (uint64_t)(i % 8), 0);
    for (int i = stay; i < stay + gone; i++) {
        assert_int_equal(tw_cancel(w, book.id[i]), 1);
        book.pending[i] = 0;
    }
    assert_int_equal(q->count, (uint32_t)stay);
    assert_int_equal(q->entries, (uint32_t)(stay + gone));
    while (tw_now(w) < deadline) {
        tw_advance(w, step < deadline - tw_now(w) ? step : deadline - tw_now(w));
        if (q->entries > 3 * q->count + BLOCK_ENTRIES + COMPACT_STEP)
            fail_msg("level %d, step %llu, tick %llu: %u entries for %u timers", level,
                     (unsigned long long)step, (unsigned long long)tw_now(w), q->entries,
                     q->count);
        for (int i = 0; i < stay; i++) {
            uint32_t index;
            struct node *n = book.pending[i] ? node_of(w, book.id[i], &index) : NULL;
            if (n && list_of(n) != list) { /* moved down */
                assert_int_equal(tw_cancel(w, book.id[i]), 1);
                book.pending[i] = 0;
            }
        }
        if (q->count > 0 && q->count <= RESCAN_PENDING) {
            if (tw_next_expiry(w) != get_stats(w).next_expiry_exact)
                fail_msg("level %d, step %llu, tick %llu: next expiry %llu, exact %llu, the "
                         "slot holding %u timers in %u entries", level,
                         (unsigned long long)step, (unsigned long long)tw_now(w),
                         (unsigned long long)tw_next_expiry(w),
                         (unsigned long long)get_stats(w).next_expiry_exact, q->count,
                         q->entries);
            checked++;
        }
    }
    assert_true(checked > 0);
    assert_int_equal(tw_count(w), 0);
    CHECK(w);
    drop(w);
}

static void test_next_expiry_exact_in_a_staged_slot(void **state)
{
    (void)state;
    static const uint64_t steps[2][4] = {{1, 16, 71, 80}, {1, 64, 4544, 5120}};
    (void)state;
    for (int level = 0; level < 2; level++)
        for (int k = 0; k < 4; k++)
            staged_slot_stays_exact(level, steps[level][k]);
}

/* A cancel that leaves the slot being staged too stale rotates it one
 * step: COMPACT_STEP entries read, here all stale (the cancelled timers
 * sit at its head), so exactly that many leave. */
static void test_a_cancel_rotates_one_step(void **state)
{
    tw_wheel *w = new_wheel(0);
    const int stale = 215, live = 100;
    unsigned list = level_list(1) + 1;
    const struct queue *q = &w->queues[list];
    uint32_t before;
    (void)state;
    book_reset();
    for (int i = 0; i < stale + live; i++)
        arm(w, i, span(1) + 100 + (uint64_t)i, 0);
    assert_int_equal(staged_slot(w, 1), list);
    for (int i = 0; i < stale; i++) /* up to the threshold: 2 * 100 + 15 */
        assert_int_equal(tw_cancel(w, book.id[i]), 1);
    assert_int_equal(q->entries, (uint32_t)(stale + live));
    before = q->entries;
    assert_int_equal(tw_cancel(w, book.id[stale]), 1); /* 216 > 2 * 99 + 15 */
    assert_int_equal(before - q->entries, COMPACT_STEP);
    CHECK(w);
    drop(w);
}

/* A compaction under way in a slot that then becomes the one being staged,
 * before any share has read it: the rotation a cancel there makes ends the
 * compaction first, whose cursors would no longer match the queue. */
static void test_rotation_ends_a_compaction(void **state)
{
    tw_wheel *w = new_wheel(0);
    const int count = 1000;
    unsigned list = level_list(0) + 2;
    const struct queue *q = &w->queues[list];
    (void)state;
    book_reset();
    for (int i = 0; i < count; i++)
        arm(w, i, 512 + (uint64_t)(i % 256), 0); /* level 0's slot 2 */
    for (int i = 0; i < 673; i++)
        assert_int_equal(tw_cancel(w, book.id[i]), 1);
    assert_int_not_equal(q->compact_read, NO_POSITION); /* under way */
    assert_int_equal(tw_advance(w, 256), 0);
    assert_int_equal(staged_slot(w, 0), list);
    assert_int_not_equal(q->compact_read, NO_POSITION); /* no share read it yet */
    assert_int_equal(tw_cancel(w, book.id[673]), 1);
    CHECK(w);
    assert_int_equal(tw_advance(w, 512), count - 674);
    CHECK(w);
    drop(w);
}

/* ---- the walk stops at every deadline ------------------------------------ */

/* next_event stops a walk at each level slot's deadline, and the staging
 * runs at every stop: so a jump past a deadline leaves every level as a
 * jump to the deadline and a step on from there does. (A walk that did not
 * stop would still fire right, since a slot left past its start is drained
 * there; only the shares of the slots above, which round up at every stop,
 * tell.) One timer in `level`'s next slot sets the deadline; 100 in the
 * next slot of the level above are being staged meanwhile. */
static void test_walk_stops_at_deadlines(void **state)
{
    (void)state;
    for (int level = 1; level < 3; level++) {
        uint64_t deadline = span(level) - lead(level);
        struct tw_stats a, b;
        tw_wheel *one = new_wheel(0), *two = new_wheel(0);
        book_reset();
        for (int k = 0; k < 2; k++) {
            tw_wheel *w = k ? two : one;
            uint64_t seed = 5;
            arm(w, 0, span(level) + 100, 0);
            for (int i = 1; i <= 100; i++)
                arm(w, i, span(level + 1) + rng_next(&seed) % span(level + 1), 0);
            assert_int_equal(at_level(w, level), 1);
            assert_int_equal(at_level(w, level + 1), 100);
        }
        assert_int_equal(tw_advance(one, deadline + 1), 0);
        assert_int_equal(tw_advance(two, deadline), 0);
        assert_int_equal(tw_advance(two, 1), 0);
        a = get_stats(one);
        b = get_stats(two);
        for (int l = 0; l < 4; l++)
            if (a.pending_level[l] != b.pending_level[l])
                fail_msg("past level %d's deadline: %llu timers at level %d after one "
                         "jump, %llu after stopping at the deadline",
                         level, (unsigned long long)a.pending_level[l], l,
                         (unsigned long long)b.pending_level[l]);
        assert_int_equal(a.pending_near, b.pending_near);
        assert_int_equal(a.cascaded, b.cascaded);
        CHECK(one);
        CHECK(two);
        drop(one);
        drop(two);
    }
}

/* ---- destroy mid-staging ------------------------------------------------- */

static void test_destroy_mid_staging(void **state)
{
    (void)state;
    for (int level = 0; level < 4; level++) {
        tw_wheel *w = new_wheel(0);
        uint64_t seed = 3;
        const int count = 2000;
        book_reset();
        for (int i = 0; i < count; i++)
            arm(w, i, span(level) + rng_next(&seed) % span(level), 0);
        /* partly moved down: some below, some still in the slot */
        tw_advance(w, (span(level) - lead(level)) / 2);
        assert_true(at_level(w, level) > 0);
        assert_true(at_level(w, level) < (uint64_t)count);
        untrack(w);
        tw_destroy(w);
        for (int i = 0; i < count; i++)
            assert_int_equal(book.released[i], 1);
        assert_int_equal(book.fired, 0);
    }
}

/* A release hook that cancels other timers of a slot being staged while
 * tw_destroy releases them: the cancels would compact that slot, which for
 * a slot being staged means moving entries down into queues the release
 * has already emptied. Every timer is released once, by tw_destroy called
 * from plain code and from a callback (a shutdown timer), and no callback
 * runs after that destroy. */
static tw_wheel *hook_wheel;
static int destroyed_by_callback, fired_after_destroy;

static void cancel_others_release(void *data)
{
    int tag = UNTAG(data);
    book.released[tag]++;
    if (tag == 5)
        for (int i = 199; i >= 50; i--)
            tw_cancel(hook_wheel, book.id[i]);
}

static void late_cb(tw_wheel *w, tw_id id, void *data)
{
    (void)w;
    (void)id;
    (void)data;
    if (destroyed_by_callback)
        fired_after_destroy++;
}

static void shutdown_cb(tw_wheel *w, tw_id id, void *data)
{
    (void)id;
    (void)data;
    destroyed_by_callback = 1;
    tw_destroy(w);
}

static void test_destroy_with_hooks_cancelling(void **state)
{
    (void)state;
    for (int by_callback = 0; by_callback < 2; by_callback++) {
        tw_wheel *w = new_wheel(0);
        book_reset();
        hook_wheel = w;
        destroyed_by_callback = fired_after_destroy = 0;
        for (int i = 0; i < 200; i++) { /* level 1's slot being staged */
            book.id[i] = tw_add_ex(w, span(1) + (uint64_t)i, 0, late_cb,
                                   cancel_others_release, TAG(i));
            assert_int_not_equal(book.id[i], 0);
        }
        untrack(w);
        if (by_callback) {
            assert_int_not_equal(tw_add(w, 1, shutdown_cb, NULL), 0);
            tw_advance(w, 2 * span(1)); /* frees the wheel as it returns */
        } else {
            tw_destroy(w);
        }
        for (int i = 0; i < 200; i++)
            assert_int_equal(book.released[i], 1);
        assert_int_equal(fired_after_destroy, 0);
    }
}

/* ---- tw_check knows where staging may put a timer ------------------------ */

/* Moves a pending timer to another slot behind the API's back. */
static void misplace(tw_wheel *w, tw_id id, unsigned list)
{
    uint32_t index;
    struct node *n = node_of(w, id, &index);
    assert_non_null(n);
    unlink_node(w, n);
    link_tail(w, list, index, n);
}

static void test_check_rejects_misplaced(void **state)
{
    (void)state;
    /* a level-1 timer in the level-0 slot after the one staging moves it
     * to (it would fire late), in the slot time is in at level 1, and in
     * near for a tick outside near's two windows. (In level 0's current
     * half, past that slot's span, it would be where a move in place
     * leaves a timer: that is allowed.) */
    uint64_t delay = span(1) + 3 * span(0) + 5;
    unsigned wrong[3];
    wrong[0] = level_list(0) + (unsigned)(((delay >> 8) + 1) & LEVEL_RING_MASK);
    wrong[1] = level_list(1);
    wrong[2] = (unsigned)(delay & NEAR_RING_MASK);
    for (int k = 0; k < 3; k++) {
        tw_wheel *w = new_wheel(0);
        tw_id id = tw_add(w, delay, rec_cb, NULL);
        CHECK(w);
        misplace(w, id, level_list(0) + (unsigned)((delay >> 8) & LEVEL_RING_MASK));
        CHECK(w); /* where staging puts it */
        misplace(w, id, wrong[k]);
        assert_int_equal(tw_check(w), -EFAULT);
        drop(w);
    }
    /* staging that claims to have run ahead of time */
    tw_wheel *w = new_wheel(0);
    w->staged_tick = w->now + 1;
    assert_int_equal(tw_check(w), -EFAULT);
    w->staged_tick = w->now;
    CHECK(w);
    drop(w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_share_per_tick),
        T(test_share_counts_stale_entries),
        T(test_order_of_one_tick),
        T(test_jumps_mid_staging),
        T(test_next_expiry_while_staging),
        T(test_cancels_in_a_staged_slot_leave_it_bounded),
        T(test_next_expiry_exact_in_a_staged_slot),
        T(test_a_cancel_rotates_one_step),
        T(test_rotation_ends_a_compaction),
        T(test_walk_stops_at_deadlines),
        T(test_destroy_mid_staging),
        T(test_destroy_with_hooks_cancelling),
        T(test_check_rejects_misplaced),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
