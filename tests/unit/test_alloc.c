/* The allocator hook: every allocation goes through realloc_fn and is given
 * back; failing the k-th allocation, for every k, makes exactly that call
 * fail with ENOMEM and leaves the wheel fully usable; failing everything
 * from some point on still lets free nodes be reused; tw_get_stats().bytes
 * matches what the hook handed out. */
#include "helpers.h"

/* ---- a counting allocator with injectable failures ---------------------- */

typedef union {
    max_align_t align;
    size_t size;
} header;

struct alloc {
    unsigned long requests; /* calls with size > 0 */
    unsigned long fail_at;  /* fail this request (1-based); 0 = never */
    int fail_after;         /* also fail every request after fail_at */
    unsigned long failures;
    size_t live_bytes;
    size_t live_blocks;
};

static void *hook(void *pointer, size_t size, void *context)
{
    struct alloc *a = context;
    header *h = pointer ? (header *)pointer - 1 : NULL;
    if (size == 0) {
        if (h) {
            a->live_bytes -= h->size;
            a->live_blocks--;
            free(h);
        }
        return NULL;
    }
    a->requests++;
    if (a->fail_at && (a->requests == a->fail_at ||
                       (a->fail_after && a->requests > a->fail_at))) {
        a->failures++;
        return NULL;
    }
    size_t old = h ? h->size : 0;
    header *n = realloc(h, sizeof(header) + size);
    if (n == NULL)
        return NULL;
    if (!h)
        a->live_blocks++;
    a->live_bytes = a->live_bytes - old + size;
    n->size = size;
    return n + 1;
}

static tw_wheel *hooked(struct alloc *a)
{
    struct tw_config c;
    tw_config_init(&c);
    c.lock = TW_LOCK_NONE;
    c.realloc_fn = hook;
    c.alloc_context = a;
    return tw_create(&c);
}

/* ---- one scenario: mixed adds over many chunks ------------------------- */

#define M (20 * 1024 + 5)
static uint64_t fire_tick[M];
static int fires[M];
static int releases[M];

static void note_fire(tw_wheel *w, tw_id id, void *user_data)
{
    (void)id;
    int i = UNTAG(user_data);
    fires[i]++;
    fire_tick[i] = tw_now(w);
}

static void note_release(void *user_data)
{
    releases[UNTAG(user_data)]++;
}

static uint64_t delay_of(int i)
{
    return (uint64_t)(i * 37 % 70000) + 1;
}

static tw_id add_kind(tw_wheel *w, int i)
{
    switch (i % 3) {
    case 0: return tw_add(w, delay_of(i), note_fire, TAG(i));
    case 1: return tw_add_periodic(w, delay_of(i), 1000000, note_fire, TAG(i));
    default:
        return tw_add_ex(w, delay_of(i), 0, note_fire, note_release, TAG(i));
    }
}

/* Runs the scenario with allocation number fail_at failing (0: none).
 * Returns the number of allocation requests made. */
static unsigned long scenario(unsigned long fail_at)
{
    struct alloc a;
    memset(&a, 0, sizeof a);
    a.fail_at = fail_at;
    memset(fires, 0, sizeof fires);
    memset(releases, 0, sizeof releases);

    errno = 0;
    tw_wheel *w = hooked(&a);
    if (w == NULL) {
        assert_int_equal(errno, ENOMEM);
        assert_int_equal(a.failures, 1);
        assert_int_equal(a.live_blocks, 0);
        /* A retry succeeds. */
        w = hooked(&a);
    }
    track(w);
    assert_int_equal(get_stats(w).bytes, a.live_bytes);

    for (int i = 0; i < M; i++) {
        errno = 0;
        tw_id id = add_kind(w, i);
        if (id == 0) {
            /* Exactly the injected failure, reported as ENOMEM, with the
             * wheel untouched and usable. */
            assert_int_equal(errno, ENOMEM);
            assert_int_equal(a.failures, 1);
            assert_int_equal(tw_count(w), (uint64_t)i);
            assert_int_equal(releases[i], 0);
            CHECK(w);
            assert_int_equal(get_stats(w).bytes, a.live_bytes);
            id = add_kind(w, i);
        }
        assert_int_not_equal(id, 0);
    }
    CHECK(w);
    struct tw_stats s = get_stats(w);
    assert_int_equal(s.bytes, a.live_bytes);
    assert_int_equal(s.pending, M);
    assert_int_equal(s.pool_capacity, 21 * 1024);
    assert_true(s.bytes >= s.pool_capacity * 40);

    assert_int_equal(tw_advance(w, 70000), M);
    for (int i = 0; i < M; i++) {
        assert_int_equal(fires[i], 1);
        assert_int_equal(fire_tick[i], delay_of(i));
        assert_int_equal(releases[i], i % 3 == 2 ? 1 : 0);
    }
    assert_int_equal(tw_count(w), M / 3 + (M % 3 > 1 ? 1 : 0));
    CHECK(w);
    unsigned long requests = a.requests;
    drop(w);
    assert_int_equal(a.live_bytes, 0);
    assert_int_equal(a.live_blocks, 0);
    assert_int_equal(a.failures, fail_at && fail_at <= requests ? 1 : 0);
    return requests;
}

static void test_fail_every_allocation_once(void **state)
{
    (void)state;
    unsigned long n = scenario(0);
    /* The wheel, the chunk table (with growth) and 21 chunks at least. */
    assert_true(n >= 1 + 1 + 21);
    for (unsigned long k = 1; k <= n + 1; k++)
        scenario(k);
}

/* Timers the first chunk of nodes holds: its 1024 nodes but node 0, which
 * is never handed out (so that no id is 0). */
#define FIRST_CHUNK 1023

/* From some point on nothing can be allocated: adds that need a new chunk
 * fail, nodes freed by cancel or firing are still reused, everything
 * pending fires on time. */
static void test_allocator_exhausted(void **state)
{
    (void)state;
    struct alloc a;
    memset(&a, 0, sizeof a);
    tw_wheel *w = track(hooked(&a));
    tw_id ids[FIRST_CHUNK];
    for (int i = 0; i < FIRST_CHUNK; i++) {
        ids[i] = tw_add(w, (uint64_t)i + 1, rec_cb, TAG(i));
        assert_int_not_equal(ids[i], 0);
    }
    a.fail_at = a.requests + 1;
    a.fail_after = 1;
    for (int round = 0; round < 3; round++)
        ASSERT_FAILS_ERRNO(tw_add(w, 5, rec_cb, TAG(9999)), ENOMEM);
    assert_int_equal(tw_count(w), FIRST_CHUNK);
    CHECK(w);
    assert_int_equal(tw_cancel(w, ids[FIRST_CHUNK - 1]), 1);
    assert_int_not_equal(tw_add(w, 5000, rec_cb, TAG(5000)), 0);
    ASSERT_FAILS_ERRNO(tw_add(w, 5, rec_cb, TAG(9999)), ENOMEM);
    assert_int_equal(tw_advance(w, 10), 10);
    for (int i = 0; i < 10; i++)
        assert_int_not_equal(tw_add(w, 1, rec_cb, TAG(2000 + i)), 0);
    assert_int_equal(tw_advance(w, 5000), (FIRST_CHUNK - 1) - 10 + 10 + 1);
    ASSERT_NFIRES(FIRST_CHUNK + 10);
    for (int i = 0; i < 10; i++)
        ASSERT_FIRE(i, (uint64_t)i + 1, i);
    ASSERT_FIRE(10, 11, 10);
    ASSERT_FIRE(11, 11, 2000);
    ASSERT_FIRE(FIRST_CHUNK + 9, 5000, 5000);
    CHECK(w);
    drop(w);
    assert_int_equal(a.live_blocks, 0);
}

/* A reschedule that moves its timer leaves a stale entry behind and takes
 * a new one, so it may want a new block: when the allocator refuses, it
 * still succeeds (the queue it leaves is compacted to make room), and the
 * allocator is refused along the way, so the path ran. Every timer then
 * fires at the tick of its last move. */
static void test_reschedule_without_memory(void **state)
{
    (void)state;
    struct alloc a;
    memset(&a, 0, sizeof a);
    tw_wheel *w = track(hooked(&a));
    static tw_id ids[1000];
    for (int i = 0; i < 1000; i++) {
        ids[i] = tw_add(w, 20000 + (uint64_t)i, rec_cb, TAG(i));
        assert_int_not_equal(ids[i], 0);
    }
    a.fail_at = a.requests + 1;
    a.fail_after = 1;
    for (int j = 0; j < 5000; j++) {
        int i = j % 1000;
        uint64_t delay = j < 4000 ? 20999 - (uint64_t)j / 4 : 10000 + (uint64_t)i;
        assert_int_equal(tw_reschedule(w, ids[i], delay), 1);
        assert_int_equal(tw_remaining(w, ids[i]), delay);
    }
    assert_true(a.failures > 0);
    CHECK(w);
    assert_int_equal(tw_advance(w, 11000), 1000);
    for (int i = 0; i < 1000; i++)
        ASSERT_FIRE(i, 10000 + (uint64_t)i, i);
    CHECK(w);
    a.fail_at = 0;
    drop(w);
}

/* Bytes accounting as the pool grows and the wheel is emptied. */
static void test_bytes_accounting(void **state)
{
    (void)state;
    struct alloc a;
    memset(&a, 0, sizeof a);
    tw_wheel *w = track(hooked(&a));
    struct tw_stats s = get_stats(w);
    assert_true(a.live_bytes > 0);
    assert_int_equal(s.bytes, a.live_bytes);
    assert_int_equal(s.pool_capacity, 0);
    static tw_id ids[5000];
    for (int i = 0; i < 5000; i++) {
        ids[i] = tw_add(w, (uint64_t)i % 300 + 1, rec_cb, NULL);
        assert_int_not_equal(ids[i], 0);
        if (i == 0 || i == FIRST_CHUNK - 1 || i == FIRST_CHUNK || i == 4999) {
            s = get_stats(w);
            assert_int_equal(s.bytes, a.live_bytes);
            assert_int_equal(s.pool_capacity, (uint64_t)((i + 1) / 1024 + 1) * 1024);
            assert_true(s.pool_free <= s.pool_capacity - (uint64_t)(i + 1));
        }
    }
    for (int i = 0; i < 5000; i += 2)
        assert_int_equal(tw_cancel(w, ids[i]), 1);
    assert_int_equal(tw_advance(w, 300), 2500);
    s = get_stats(w);
    assert_int_equal(s.bytes, a.live_bytes);
    assert_int_equal(s.pending, 0);
    assert_int_equal(s.pool_capacity, 5 * 1024);
    drop(w);
    assert_int_equal(a.live_bytes, 0);
    assert_int_equal(a.live_blocks, 0);
}

/* The default allocator reports its bytes too. */
static void test_default_allocator_bytes(void **state)
{
    (void)state;
    tw_wheel *w = new_wheel(0);
    uint64_t before = get_stats(w).bytes;
    assert_true(before > 0);
    assert_int_not_equal(tw_add(w, 1, rec_cb, NULL), 0);
    struct tw_stats s = get_stats(w);
    assert_true(s.bytes >= before + 1024 * 40);
    assert_int_equal(s.pool_capacity, 1024);
    drop(w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_fail_every_allocation_once),
        T(test_allocator_exhausted),
        T(test_reschedule_without_memory),
        T(test_bytes_accounting),
        T(test_default_allocator_bytes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
