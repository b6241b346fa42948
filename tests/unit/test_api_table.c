/* The plugin ABI: tw_get_api(1) is a constant table whose members are the
 * direct functions, versions 0 and TW_API_VERSION + 1 give NULL, and the
 * run-time version functions match the header. */
#include "helpers.h"

static void test_table_members_are_the_functions(void **state)
{
    (void)state;
    const struct tw_api *api = tw_get_api(1);
    assert_non_null(api);
    assert_int_equal(api->size, sizeof(struct tw_api));
    assert_int_equal(api->version, TW_API_VERSION);
    assert_true(api->version_hex == tw_version);
    assert_true(api->version_string == tw_version_string);
    assert_true(api->strerror == tw_strerror);
    assert_true(api->config_init == tw_config_init);
    assert_true(api->create == tw_create);
    assert_true(api->destroy == tw_destroy);
    assert_true(api->add == tw_add);
    assert_true(api->add_periodic == tw_add_periodic);
    assert_true(api->add_ex == tw_add_ex);
    assert_true(api->cancel == tw_cancel);
    assert_true(api->reschedule == tw_reschedule);
    assert_true(api->remaining == tw_remaining);
    assert_true(api->gettime == tw_gettime);
    assert_true(api->expire == tw_expire);
    assert_true(api->advance == tw_advance);
    assert_true(api->next_expiry == tw_next_expiry);
    assert_true(api->timeout_ms == tw_timeout_ms);
    assert_true(api->thread_start == tw_thread_start);
    assert_true(api->thread_stop == tw_thread_stop);
    assert_true(api->now == tw_now);
    assert_true(api->count == tw_count);
    assert_true(api->tick_us == tw_tick_us);
    assert_true(api->get_stats == tw_get_stats);
    assert_true(api->check == tw_check);
    assert_true(api->reschedule_ex == tw_reschedule_ex);
    assert_true(api->clock_us == tw_clock_us);
    assert_true(api->deadline_us == tw_deadline_us);
    assert_true(api->next_deadline_us == tw_next_deadline_us);
    assert_true(api->context == tw_context);
    assert_true(api->last_error == tw_last_error);
    assert_true(api->add_us == tw_add_us);
    assert_true(api->reschedule_us == tw_reschedule_us);
}

static void test_table_is_constant(void **state)
{
    (void)state;
    const struct tw_api *a = tw_get_api(1);
    const struct tw_api *b = tw_get_api(TW_API_VERSION);
    assert_non_null(a);
    assert_ptr_equal(a, tw_get_api(1));
    assert_non_null(b);
    assert_int_equal(b->version, TW_API_VERSION);
}

static void test_unknown_versions(void **state)
{
    (void)state;
    assert_null(tw_get_api(0));
    assert_null(tw_get_api(TW_API_VERSION + 1));
    assert_null(tw_get_api(1000));
    assert_null(tw_get_api(UINT32_MAX));
}

static void test_version_functions(void **state)
{
    (void)state;
    assert_int_equal(TW_VERSION_HEX, 0x010400);
    assert_int_equal(tw_version(), TW_VERSION_HEX);
    assert_non_null(tw_version_string());
    assert_string_equal(tw_version_string(), TW_VERSION_STRING);
    assert_string_equal(TW_VERSION_STRING, "1.4.0");
}

/* What docs/embedding.md tells a host it may check of tw_get_api(v): the
 * table's version is v or newer (the library hands out its one table, so a
 * host asking for 1 gets the newest, and a check of version == v would
 * refuse a library that works), and its size reaches past the last member
 * of version v, each of which is set. */
static void test_what_a_host_may_check(void **state)
{
    /* where each version's members end: its last member's end */
    static const size_t version_end[TW_API_VERSION + 1] = {
        0,
        offsetof(struct tw_api, check) + sizeof(int (*)(tw_wheel *)),
        offsetof(struct tw_api, context) + sizeof(void *(*)(tw_wheel *)),
        offsetof(struct tw_api, reschedule_us) + sizeof(int (*)(tw_wheel *, tw_id, uint64_t)),
    };
    (void)state;
    assert_int_equal(version_end[TW_API_VERSION], sizeof(struct tw_api));
    for (uint32_t v = 1; v <= TW_API_VERSION; v++) {
        const struct tw_api *api = tw_get_api(v);
        assert_non_null(api);
        assert_true(api->version >= v);
        assert_true(api->size >= version_end[v]);
        /* every member up to that end is set */
        for (size_t at = offsetof(struct tw_api, version_hex); at < version_end[v];
             at += sizeof(void (*)(void))) {
            void (*member)(void);
            memcpy(&member, (const char *)api + at, sizeof member);
            assert_non_null(member);
        }
    }
    assert_int_equal(tw_get_api(1)->version, TW_API_VERSION);
    assert_true(TW_API_VERSION > 1); /* so version 1 gets a newer table */
}

/* A host driving a wheel only through the table. */
static void test_use_through_table(void **state)
{
    (void)state;
    const struct tw_api *api = tw_get_api(1);
    assert_non_null(api);
    struct tw_config c;
    api->config_init(&c);
    c.lock = TW_LOCK_NONE;
    tw_wheel *w = track(api->create(&c));
    tw_id a = api->add(w, 3, rec_cb, TAG(1));
    tw_id p = api->add_periodic(w, 2, 2, rec_cb, TAG(2));
    tw_id e = api->add_ex(w, 1, 0, rec_cb, NULL, TAG(3));
    assert_true(a && p && e);
    assert_int_equal(api->count(w), 3);
    assert_int_equal(api->remaining(w, a), 3);
    assert_int_equal(api->next_expiry(w), 1);
    assert_int_equal(api->reschedule(w, a, 4), 1);
    assert_int_equal(api->advance(w, 4), 4);
    ASSERT_FIRE(0, 1, 3);
    ASSERT_FIRE(1, 2, 2);
    ASSERT_FIRE(2, 4, 1); /* moved at tick 0, before p re-armed at 2 */
    ASSERT_FIRE(3, 4, 2);
    assert_int_equal(api->cancel(w, p), 1);
    assert_int_equal(api->now(w), 4);
    assert_int_equal(api->tick_us(w), 1000);
    assert_int_equal(api->check(w), 0);
    struct tw_stats s;
    memset(&s, 0, sizeof s);
    s.size = sizeof s;
    assert_int_equal(api->get_stats(w, &s), 0);
    assert_int_equal(s.fired, 4);
    assert_int_equal(api->expire(w), 0);
    assert_int_equal(api->timeout_ms(w), -1);
    assert_int_equal(api->thread_stop(w), 0);
    assert_int_equal(api->thread_start(w, 1000), -EINVAL); /* LOCK_NONE */
    assert_true(api->gettime() > 0);
    assert_non_null(api->strerror(-EINVAL));
    untrack(w);
    assert_int_equal(api->destroy(w), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_table_members_are_the_functions),
        T(test_table_is_constant),
        T(test_unknown_versions),
        T(test_version_functions),
        T(test_what_a_host_may_check),
        T(test_use_through_table),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
