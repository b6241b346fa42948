/*
 * The plugin ABI, from the host's side: the library is only ever reached
 * through dlopen() and tw_get_api(). Covers the table's header and wiring,
 * refused versions, dlopen -> use -> dlclose -> dlopen again, and two copies
 * of the library loaded at once with RTLD_LOCAL, each with its own wheels.
 *
 *   test_plugin path/to/libtwheel.so
 *
 * Run under ASan (sanitized build) or valgrind, this also shows that loading,
 * using and unloading the library leaks nothing.
 */
#define _GNU_SOURCE /* dladdr, RTLD_NOLOAD */

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include <twheel/timer.h>

static const char *lib_path;      /* argv[1] */
static char copy_dir[1024];       /* temporary folder for the copies */
static char copy_a[1072];         /* copy_dir/a/libtwheel.so.1 */
static char copy_b[1072];         /* copy_dir/b/libtwheel.so.1 */

/* ---- loading ------------------------------------------------------------- */

typedef const struct tw_api *get_api_fn(uint32_t version);

static void *open_lib(const char *path)
{
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (h == NULL)
        fail_msg("dlopen %s: %s", path, dlerror());
    return h;
}

/* dlsym gives void *; ISO C has no cast to a function pointer, so copy. */
static get_api_fn *find_get_api(void *h)
{
    get_api_fn *f;
    void *sym = dlsym(h, "tw_get_api");
    assert_non_null(sym);
    memcpy(&f, &sym, sizeof f);
    return f;
}

static const struct tw_api *api_of(void *h)
{
    const struct tw_api *api = find_get_api(h)(TW_API_VERSION);
    assert_non_null(api);
    return api;
}

/* True while some object loaded from `path` is still mapped. */
static int is_loaded(const char *path)
{
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
    if (h == NULL)
        return 0;
    dlclose(h);
    return 1;
}

static void copy_file(const char *from, const char *to)
{
    char buf[65536];
    size_t n;
    FILE *in = fopen(from, "rb");
    FILE *out = fopen(to, "wb");
    assert_non_null(in);
    assert_non_null(out);
    while ((n = fread(buf, 1, sizeof buf, in)) > 0)
        assert_int_equal(fwrite(buf, 1, n, out), n);
    assert_int_equal(ferror(in), 0);
    fclose(in);
    assert_int_equal(fclose(out), 0);
}

/* ---- what a host does with the table ------------------------------------ */

struct counter {
    int fired;
    int released;
    uint64_t last_tick;
    const struct tw_api *api;
};

static void count_cb(tw_wheel *w, tw_id id, void *user_data)
{
    struct counter *c = user_data;
    (void)id;
    c->fired++;
    c->last_tick = c->api->now(w);
}

static void count_release(void *user_data)
{
    struct counter *c = user_data;
    c->released++;
}

/* create, add, advance, fire, cancel, reschedule, inspect, destroy: every
 * step through `api` only. */
static void exercise(const struct tw_api *api)
{
    struct tw_config config;
    struct counter once = {0, 0, 0, api};
    struct counter every = {0, 0, 0, api};
    struct counter dropped = {0, 0, 0, api};
    struct tw_stats stats;
    tw_wheel *w;
    tw_id a, b, c, d;

    api->config_init(&config);
    assert_int_equal(config.size, sizeof config);
    config.lock = TW_LOCK_MUTEX;
    w = api->create(&config);
    assert_non_null(w);
    assert_int_equal(api->tick_us(w), 1000);

    a = api->add_ex(w, 10, 0, count_cb, count_release, &once);
    b = api->add_ex(w, 5, 5, count_cb, count_release, &every);
    c = api->add(w, 7, count_cb, &dropped);
    d = api->add_ex(w, 1000, 0, count_cb, count_release, &dropped);
    assert_true(a && b && c && d);
    assert_int_equal(api->count(w), 4);
    assert_int_equal(api->next_expiry(w), 5);
    assert_int_equal(api->remaining(w, a), 10);

    assert_int_equal(api->cancel(w, c), 1);
    assert_int_equal(api->cancel(w, c), 0);
    assert_int_equal(api->reschedule(w, a, 12), 1);
    assert_int_equal(api->advance(w, 11), 2); /* periodic at 5 and 10 */
    assert_int_equal(once.fired, 0);
    assert_int_equal(api->advance(w, 1), 1);
    assert_int_equal(once.fired, 1);
    assert_int_equal(once.released, 1);
    assert_int_equal(once.last_tick, 12);
    assert_int_equal(api->cancel(w, a), 0); /* fired: stale id */

    assert_int_equal(api->advance(w, 8), 2); /* periodic at 15 and 20 */
    assert_int_equal(every.fired, 4);
    assert_int_equal(every.last_tick, 20);
    assert_int_equal(api->cancel(w, b), 1);
    assert_int_equal(every.released, 1);
    assert_int_equal(dropped.fired, 0);
    assert_int_equal(api->now(w), 20);
    assert_int_equal(api->check(w), 0);

    memset(&stats, 0, sizeof stats);
    stats.size = sizeof stats;
    assert_int_equal(api->get_stats(w, &stats), 0);
    assert_int_equal(stats.fired, 5);
    assert_int_equal(stats.cancelled, 2);
    assert_int_equal(stats.pending, 1);

    assert_int_equal(api->add(w, TW_MAX_DELAY + 1, count_cb, &once), 0);
    assert_int_equal(errno, ERANGE);
    assert_string_equal(api->strerror(-ERANGE), api->strerror(ERANGE));
    assert_true(api->gettime() > 0);
    assert_in_range(api->timeout_ms(w), 0, 1000); /* d, by the wall clock */
    assert_true(api->expire(w) >= 0);

    assert_int_equal(api->destroy(w), 0); /* d is released, never fired */
    assert_int_equal(dropped.fired, 0);
    assert_int_equal(dropped.released, 1);
}

/* The timer thread lives inside the library: it must be stopped and joined
 * before the library can go. */
static atomic_int thread_fired;

static void thread_cb(tw_wheel *w, tw_id id, void *user_data)
{
    (void)w;
    (void)id;
    (void)user_data;
    atomic_fetch_add(&thread_fired, 1);
}

static void exercise_thread(const struct tw_api *api)
{
    struct timespec pause = {0, 1000000};
    tw_wheel *w = api->create(NULL);
    int i;
    assert_non_null(w);
    atomic_store(&thread_fired, 0);
    assert_int_not_equal(api->add(w, 1, thread_cb, NULL), 0);
    assert_int_equal(api->thread_start(w, 500), 0);
    for (i = 0; i < 5000 && atomic_load(&thread_fired) == 0; i++)
        nanosleep(&pause, NULL);
    assert_int_equal(api->thread_stop(w), 0);
    assert_int_equal(api->thread_stop(w), 0);
    assert_int_equal(atomic_load(&thread_fired), 1);
    assert_int_equal(api->destroy(w), 0);
}

/* ---- tests --------------------------------------------------------------- */

/* The table starts with its size and version, every member is set, and each
 * one is the exported function of the same name. */
static void test_table_header_and_wiring(void **state)
{
    void *h = open_lib(lib_path);
    const struct tw_api *api = api_of(h);
    (void)state;

    assert_int_equal(api->size, sizeof(struct tw_api));
    assert_int_equal(api->version, TW_API_VERSION);
    assert_int_equal(offsetof(struct tw_api, size), 0);
    assert_int_equal(offsetof(struct tw_api, version), 4);
    assert_ptr_equal(find_get_api(h)(1), api); /* one constant table */

#define SAME(member, symbol)                                                  \
    do {                                                                      \
        void *sym_ = dlsym(h, symbol);                                        \
        void *mem_;                                                           \
        assert_non_null(api->member);                                         \
        memcpy(&mem_, &api->member, sizeof mem_);                             \
        if (sym_ != mem_)                                                     \
            fail_msg("table member %s is not %s", #member, symbol);           \
    } while (0)
    SAME(version_hex, "tw_version");
    SAME(version_string, "tw_version_string");
    SAME(strerror, "tw_strerror");
    SAME(config_init, "tw_config_init");
    SAME(create, "tw_create");
    SAME(destroy, "tw_destroy");
    SAME(add, "tw_add");
    SAME(add_periodic, "tw_add_periodic");
    SAME(add_ex, "tw_add_ex");
    SAME(cancel, "tw_cancel");
    SAME(reschedule, "tw_reschedule");
    SAME(remaining, "tw_remaining");
    SAME(gettime, "tw_gettime");
    SAME(expire, "tw_expire");
    SAME(advance, "tw_advance");
    SAME(next_expiry, "tw_next_expiry");
    SAME(timeout_ms, "tw_timeout_ms");
    SAME(thread_start, "tw_thread_start");
    SAME(thread_stop, "tw_thread_stop");
    SAME(now, "tw_now");
    SAME(count, "tw_count");
    SAME(tick_us, "tw_tick_us");
    SAME(get_stats, "tw_get_stats");
    SAME(check, "tw_check");
#undef SAME

    assert_int_equal(api->version_hex(), TW_VERSION_HEX);
    assert_string_equal(api->version_string(), TW_VERSION_STRING);
    assert_int_equal(dlclose(h), 0);
}

/* Version 0 and anything newer than the library are refused. */
static void test_unknown_versions_refused(void **state)
{
    void *h = open_lib(lib_path);
    get_api_fn *get_api = find_get_api(h);
    uint32_t v;
    (void)state;

    assert_null(get_api(0));
    assert_null(get_api(TW_API_VERSION + 1));
    assert_null(get_api(TW_API_VERSION + 1000));
    assert_null(get_api(UINT32_MAX));
    for (v = 1; v <= TW_API_VERSION; v++) {
        const struct tw_api *api = get_api(v);
        assert_non_null(api);
        assert_true(api->version >= v);
        assert_true(api->size >= offsetof(struct tw_api, check) +
                                    sizeof api->check);
    }
    assert_int_equal(dlclose(h), 0);
}

static void test_use_through_table(void **state)
{
    void *h = open_lib(lib_path);
    (void)state;
    exercise(api_of(h));
    exercise_thread(api_of(h));
    assert_int_equal(dlclose(h), 0);
}

/* dlclose really unmaps the library (nothing pins it), and a fresh load
 * works as the first one did: no state survives or is assumed. */
static void test_reload(void **state)
{
    int round;
    (void)state;
    for (round = 0; round < 3; round++) {
        void *h = open_lib(copy_a);
        const struct tw_api *api = api_of(h);
        exercise(api);
        exercise_thread(api);
        assert_int_equal(dlclose(h), 0);
        assert_false(is_loaded(copy_a));
    }
}

/* Two copies at two paths are two libraries with two tables; wheels of each
 * run side by side, interleaved, and one copy can go while the other stays. */
static void test_two_copies(void **state)
{
    void *ha = open_lib(copy_a);
    void *hb = open_lib(copy_b);
    const struct tw_api *a = api_of(ha);
    const struct tw_api *b = api_of(hb);
    struct counter ca = {0, 0, 0, a};
    struct counter cb = {0, 0, 0, b};
    Dl_info info;
    tw_wheel *wa, *wb;
    int i;
    (void)state;

    assert_ptr_not_equal(ha, hb);
    assert_ptr_not_equal(a, b);
    assert_non_null(strstr(copy_a, "/a/"));
    assert_int_not_equal(dladdr(a, &info), 0);
    assert_non_null(strstr(info.dli_fname, "/a/"));
    assert_int_not_equal(dladdr(b, &info), 0);
    assert_non_null(strstr(info.dli_fname, "/b/"));

    wa = a->create(NULL);
    wb = b->create(NULL);
    assert_non_null(wa);
    assert_non_null(wb);
    assert_int_not_equal(a->add_periodic(wa, 1, 1, count_cb, &ca), 0);
    assert_int_not_equal(b->add_periodic(wb, 2, 2, count_cb, &cb), 0);
    for (i = 0; i < 10; i++) {
        assert_int_equal(a->advance(wa, 1), 1);
        assert_true(b->advance(wb, 1) >= 0);
    }
    assert_int_equal(ca.fired, 10);
    assert_int_equal(cb.fired, 5);
    assert_int_equal(a->now(wa), 10);
    assert_int_equal(b->now(wb), 10);

    /* Each copy's own API, also while the other holds live wheels. */
    exercise(a);
    exercise(b);

    assert_int_equal(a->destroy(wa), 0);
    assert_int_equal(dlclose(ha), 0);
    assert_false(is_loaded(copy_a));

    assert_int_equal(b->advance(wb, 10), 5);
    assert_int_equal(cb.fired, 10);
    exercise_thread(b);
    assert_int_equal(b->destroy(wb), 0);
    assert_int_equal(dlclose(hb), 0);
    assert_false(is_loaded(copy_b));
}

/* ---- setup: two private copies of the library --------------------------- */

static int make_copies(void **state)
{
    const char *tmp = getenv("TMPDIR");
    char dir[1040];
    (void)state;

    snprintf(copy_dir, sizeof copy_dir, "%s/twheel-plugin-XXXXXX",
             tmp != NULL && *tmp != '\0' ? tmp : "/tmp");
    if (mkdtemp(copy_dir) == NULL)
        return -1;
    snprintf(dir, sizeof dir, "%s/a", copy_dir);
    if (mkdir(dir, 0700) != 0)
        return -1;
    snprintf(copy_a, sizeof copy_a, "%s/libtwheel.so.1", dir);
    snprintf(dir, sizeof dir, "%s/b", copy_dir);
    if (mkdir(dir, 0700) != 0)
        return -1;
    snprintf(copy_b, sizeof copy_b, "%s/libtwheel.so.1", dir);
    copy_file(lib_path, copy_a);
    copy_file(lib_path, copy_b);
    return 0;
}

static int remove_copies(void **state)
{
    char dir[1040];
    (void)state;
    unlink(copy_a);
    unlink(copy_b);
    snprintf(dir, sizeof dir, "%s/a", copy_dir);
    rmdir(dir);
    snprintf(dir, sizeof dir, "%s/b", copy_dir);
    rmdir(dir);
    return rmdir(copy_dir);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table_header_and_wiring),
        cmocka_unit_test(test_unknown_versions_refused),
        cmocka_unit_test(test_use_through_table),
        cmocka_unit_test(test_reload),
        cmocka_unit_test(test_two_copies),
    };
    if (argc != 2) {
        fprintf(stderr, "usage: %s path/to/libtwheel.so\n", argv[0]);
        return 2;
    }
    lib_path = argv[1];
    return cmocka_run_group_tests(tests, make_copies, remove_copies);
}
