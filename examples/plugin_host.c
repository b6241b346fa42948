/*
 * A host that loads twheel as a plugin: load the shared library by path
 * (dlopen, or LoadLibrary on Windows), take the function table from
 * tw_get_api(), run a few timers through it, unload. Nothing here links
 * against libtwheel: timer.h is used only for the types, and every call
 * goes through the table.
 *
 *   plugin_host [path/to/libtwheel.so.1 | path\to\libtwheel-1.dll]
 *
 * Without an argument it tries the build tree (the library in the folder
 * above this program's), then the system's search path. Exits 0 when
 * every step behaved as documented.
 *
 * Build by hand: cc -std=c11 -I<dir of timer.h> plugin_host.c -ldl
 * (on Windows: no library to link; the DLL is found at run time).
 */
#if !defined(_WIN32) && (!defined(_POSIX_C_SOURCE) || _POSIX_C_SOURCE < 200809L)
#undef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <twheel/timer.h>

/* The last table member this host calls. A library whose table is shorter
 * (an older one) is refused; a longer one (newer) is fine: tables only grow. */
#define HOST_NEEDS_API_SIZE                                                   \
    (offsetof(struct tw_api, check) + sizeof(((struct tw_api *)0)->check))

typedef const struct tw_api *get_api_fn(uint32_t version);

/* ---- loading a library: dlopen, or LoadLibrary ---------------------------- */

#if defined(_WIN32)
#define WIN32_LEAN_AND_MEAN
#include <windows.h>
typedef HMODULE library;
#define DEFAULT_NAME "libtwheel-1.dll" /* meson's MinGW name; MSVC: twheel-1.dll */

static library library_open(const char *path) { return LoadLibraryA(path); }
static void *library_symbol(library lib, const char *name)
{
    FARPROC f = GetProcAddress(lib, name);
    void *p;
    memcpy(&p, &f, sizeof p); /* a function pointer's bits, as below */
    return p;
}
static int library_close(library lib) { return FreeLibrary(lib) ? 0 : -1; }
static const char *library_error(void)
{
    static char text[32];
    snprintf(text, sizeof text, "error %lu", (unsigned long)GetLastError());
    return text;
}
/* The folder this program is in, with a trailing separator. */
static int program_folder(char *out, size_t size)
{
    DWORD n = GetModuleFileNameA(NULL, out, (DWORD)size);
    char *slash;
    if (n == 0 || n >= size)
        return -1;
    slash = strrchr(out, '\\');
    if (slash == NULL)
        return -1;
    slash[1] = '\0';
    return 0;
}
#else
#include <dlfcn.h>
#include <unistd.h>
typedef void *library;
#define DEFAULT_NAME "libtwheel.so.1"

static library library_open(const char *path) { return dlopen(path, RTLD_NOW | RTLD_LOCAL); }
static void *library_symbol(library lib, const char *name) { return dlsym(lib, name); }
static int library_close(library lib) { return dlclose(lib); }
static const char *library_error(void) { return dlerror(); }
static int program_folder(char *out, size_t size)
{
    ssize_t n = readlink("/proc/self/exe", out, size - 1);
    char *slash;
    if (n <= 0)
        return -1;
    out[n] = '\0';
    slash = strrchr(out, '/');
    if (slash == NULL)
        return -1;
    slash[1] = '\0';
    return 0;
}
#endif

struct plugin {
    library handle;
    const struct tw_api *api;
};

/* The symbol is a void *; ISO C has no conversion to a function pointer,
 * so copy the bits (what POSIX guarantees to work, and Windows too). */
static int plugin_open(struct plugin *p, const char *path)
{
    get_api_fn *get_api;
    void *symbol;

    p->handle = library_open(path);
    if (p->handle == NULL) {
        fprintf(stderr, "load %s: %s\n", path, library_error());
        return -1;
    }
    symbol = library_symbol(p->handle, "tw_get_api");
    if (symbol == NULL) {
        fprintf(stderr, "%s: no tw_get_api: %s\n", path, library_error());
        library_close(p->handle);
        return -1;
    }
    memcpy(&get_api, &symbol, sizeof get_api);

    p->api = get_api(TW_API_VERSION);
    if (p->api == NULL || p->api->size < HOST_NEEDS_API_SIZE) {
        fprintf(stderr, "%s: API version %d not offered\n", path,
                TW_API_VERSION);
        library_close(p->handle);
        return -1;
    }
    printf("loaded %s: twheel %s, API v%u, table of %u bytes\n", path,
           p->api->version_string(), (unsigned)p->api->version,
           (unsigned)p->api->size);
    return 0;
}

/* Default: the library of the build tree this program was built in (in
 * the folder above this program's), else the system's search path. */
static int plugin_open_default(struct plugin *p)
{
    char path[4096];
    if (program_folder(path, sizeof path - 64) == 0) {
        FILE *f;
        strcat(path, "../" DEFAULT_NAME);
        f = fopen(path, "rb");
        if (f != NULL) {
            fclose(f);
            return plugin_open(p, path);
        }
    }
    return plugin_open(p, DEFAULT_NAME);
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

    /* a failure read through the library: its errno may be another C
     * runtime's than this host's */
    if (api->size > offsetof(struct tw_api, last_error)) {
        api->config_init(&config);
        config.tick_us = 0; /* refused */
        EXPECT(api->create(&config) == NULL);
        EXPECT(api->last_error() == EINVAL);
    }

    api->config_init(&config);
    config.tick_us = 10000; /* skynet's 10 ms tick */
    config.lock = TW_LOCK_NONE;
    w = api->create(&config);
    if (w == NULL) {
        /* errno does not cross C runtimes (a DLL built with another one):
         * the library's own record of it does, from API version 3 */
        fprintf(stderr, "create: %s\n",
                api->strerror(api->size > offsetof(struct tw_api, last_error)
                                  ? api->last_error()
                                  : errno));
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
                "  loads the library (default: the one built beside\n"
                "  this program), uses every function through tw_get_api(), and\n"
                "  unloads it; prints ok or FAILED\n");
        return help ? 0 : 2;
    }
    if ((argc > 1 ? plugin_open(&p, argv[1]) : plugin_open_default(&p)) != 0)
        return 2;
    failures = run(p.api);
    if (library_close(p.handle) != 0) {
        fprintf(stderr, "unload: %s\n", library_error());
        failures++;
    }
    printf("%s\n", failures == 0 ? "ok" : "FAILED");
    return failures == 0 ? 0 : 1;
}
