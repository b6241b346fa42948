/*
 * A host that loads twheel as a plugin: dlopen the shared library by path,
 * take the function table from tw_get_api(), run a few timers through it,
 * unload. Nothing here links against libtwheel: timer.h is used only for the
 * types, and every call goes through the table.
 *
 *   plugin_host [path/to/libtwheel.so.1]
 *
 * Without an argument it tries the build tree (../libtwheel.so.1 next to this
 * program's folder), then the dynamic linker's search path. Exits 0 when every
 * step behaved as documented.
 *
 * Build by hand: cc -std=c11 -I<dir of timer.h> plugin_host.c -ldl
 */
#if !defined(_POSIX_C_SOURCE) || _POSIX_C_SOURCE < 200809L
#undef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif

#include <dlfcn.h>
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <twheel/timer.h>

/* The last table member this host calls. A library whose table is shorter
 * (an older one) is refused; a longer one (newer) is fine: tables only grow. */
#define HOST_NEEDS_API_SIZE                                                   \
    (offsetof(struct tw_api, check) + sizeof(((struct tw_api *)0)->check))

struct plugin {
    void *handle;
    const struct tw_api *api;
};

/* dlsym returns void *; ISO C has no conversion to a function pointer, so
 * copy the bits (what POSIX guarantees to work). */
static int plugin_open(struct plugin *p, const char *path)
{
    typedef const struct tw_api *get_api_fn(uint32_t version);
    get_api_fn *get_api;
    void *symbol;

    p->handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (p->handle == NULL) {
        fprintf(stderr, "dlopen %s: %s\n", path, dlerror());
        return -1;
    }
    symbol = dlsym(p->handle, "tw_get_api");
    if (symbol == NULL) {
        fprintf(stderr, "%s: no tw_get_api: %s\n", path, dlerror());
        dlclose(p->handle);
        return -1;
    }
    memcpy(&get_api, &symbol, sizeof get_api);

    p->api = get_api(TW_API_VERSION);
    if (p->api == NULL || p->api->size < HOST_NEEDS_API_SIZE) {
        fprintf(stderr, "%s: API version %d not offered\n", path,
                TW_API_VERSION);
        dlclose(p->handle);
        return -1;
    }
    printf("loaded %s: twheel %s, API v%u, table of %u bytes\n", path,
           p->api->version_string(), (unsigned)p->api->version,
           (unsigned)p->api->size);
    return 0;
}

/* Default: the library of the build tree this program was built in. */
static int plugin_open_default(struct plugin *p)
{
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 32);
    if (n > 0) {
        char *slash;
        self[n] = '\0';
        slash = strrchr(self, '/');
        if (slash != NULL) {
            strcpy(slash, "/../libtwheel.so.1");
            if (access(self, R_OK) == 0)
                return plugin_open(p, self);
        }
    }
    return plugin_open(p, "libtwheel.so.1");
}

/* ---- what the host does with the wheel ---------------------------------- */

struct session {
    const struct tw_api *api;
    const char *name;
    int fired;
};

static void on_timer(tw_wheel *w, tw_id id, void *user_data)
{
    struct session *s = user_data;
    (void)id;
    s->fired++;
    printf("  tick %4llu: %s\n", (unsigned long long)s->api->now(w), s->name);
}

static int released;

static void on_release(void *user_data)
{
    (void)user_data;
    released++;
}

#define EXPECT(cond)                                                          \
    do {                                                                      \
        if (!(cond)) {                                                        \
            fprintf(stderr, "%s:%d: expected %s\n", __FILE__, __LINE__,     \
                    #cond);                                                   \
            failures++;                                                       \
        }                                                                     \
    } while (0)

static int run(const struct tw_api *api)
{
    int failures = 0;
    struct tw_config config;
    struct session kick = {api, "kick idle session", 0};
    struct session beat = {api, "heartbeat", 0};
    struct session never = {api, "cancelled (must not fire)", 0};
    struct tw_stats stats;
    tw_wheel *w;
    tw_id kick_id, beat_id, never_id;
    int frame;

    api->config_init(&config);
    config.tick_us = 10000; /* skynet's 10 ms tick */
    config.lock = TW_LOCK_NONE;
    w = api->create(&config);
    if (w == NULL) {
        fprintf(stderr, "create: %s\n", api->strerror(errno));
        return 1;
    }

    kick_id = api->add_ex(w, 300, 0, on_timer, on_release, &kick);
    beat_id = api->add_periodic(w, 100, 100, on_timer, &beat);
    never_id = api->add_ex(w, 50, 0, on_timer, on_release, &never);
    EXPECT(kick_id != 0 && beat_id != 0 && never_id != 0);
    EXPECT(api->count(w) == 3);
    EXPECT(api->next_expiry(w) == 50);

    EXPECT(api->cancel(w, never_id) == 1); /* its release runs now */
    EXPECT(released == 1);
    EXPECT(api->cancel(w, never_id) == 0);
    EXPECT(api->reschedule(w, kick_id, 350) == 1);
    EXPECT(api->remaining(w, kick_id) == 350);

    for (frame = 0; frame < 40; frame++) /* 40 frames of 10 ticks */
        EXPECT(api->advance(w, 10) >= 0);

    EXPECT(kick.fired == 1);
    EXPECT(beat.fired == 4);
    EXPECT(never.fired == 0);
    EXPECT(released == 2);
    EXPECT(api->now(w) == 400);
    EXPECT(api->check(w) == 0);

    memset(&stats, 0, sizeof stats);
    stats.size = sizeof stats;
    EXPECT(api->get_stats(w, &stats) == 0);
    EXPECT(stats.fired == 5 && stats.cancelled == 1 && stats.pending == 1);
    printf("  fired %llu, cancelled %llu, pending %llu\n",
           (unsigned long long)stats.fired,
           (unsigned long long)stats.cancelled,
           (unsigned long long)stats.pending);

    EXPECT(api->add(w, TW_MAX_DELAY + 1, on_timer, &kick) == 0);
    EXPECT(api->destroy(w) == 0); /* the heartbeat is dropped, never fired */
    return failures;
}

int main(int argc, char **argv)
{
    struct plugin p;
    int failures;

    const int help = argc == 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0);
    if (help || argc > 2 || (argc == 2 && argv[1][0] == '-')) {
        fprintf(help ? stdout : stderr,
                "usage: plugin_host [PATH-TO-libtwheel.so]\n"
                "  loads the library with dlopen (default: the one built beside\n"
                "  this program), uses every function through tw_get_api(), and\n"
                "  unloads it; prints ok or FAILED\n");
        return help ? 0 : 2;
    }
    if ((argc > 1 ? plugin_open(&p, argv[1]) : plugin_open_default(&p)) != 0)
        return 2;
    failures = run(p.api);
    if (dlclose(p.handle) != 0) {
        fprintf(stderr, "dlclose: %s\n", dlerror());
        failures++;
    }
    printf("%s\n", failures == 0 ? "ok" : "FAILED");
    return failures == 0 ? 0 : 1;
}
