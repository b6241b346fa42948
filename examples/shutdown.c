/*
 * shutdown: a timer thread that shuts its own wheel down, and the caller
 * that waits until the wheel is gone.
 *
 * A server drives its wheel from the timer thread (tw_thread_start()). One
 * of its timers is a shutdown timer: its callback, on the timer thread,
 * calls tw_destroy() on the wheel it runs on. tw_destroy() cannot join the
 * thread it runs on, so it releases every pending timer (each release hook
 * once), returns 0, and leaves the rest to the thread: when the callback
 * returns, the thread frees the wheel, detaches itself and exits. Nobody
 * joins it, and tw_thread_stop() on the freed wheel would be a
 * use-after-free.
 *
 * What tells the caller that the wheel is gone is tw_config.on_destroy: it
 * runs once, right after the wheel has been freed and every release hook has
 * run. Here it sets a flag under a mutex and signals a condition variable;
 * main() waits on that, and only then frees what the callbacks and release
 * hooks used (the server, its sessions). Without the wait, main() would free
 * them while the timer thread may still be releasing sessions.
 *
 * on_destroy runs on the timer thread, which still returns through the
 * library afterwards. A host that loaded twheel with dlopen() must therefore
 * not dlclose() it from on_destroy or right after this wait: it destroys
 * such wheels from its own thread (tw_destroy() there joins the timer
 * thread) before unloading.
 *
 * Exits 0 when every session had exactly one fate (its timer fired, or it
 * was released by the shutdown without firing), no timer ran after the
 * shutdown, and on_destroy ran once; 1 otherwise.
 *
 *   usage: shutdown [--sessions N] [--shutdown-ms MS]
 */
#define _POSIX_C_SOURCE 200809L /* pthread_condattr_setclock() */

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <twheel/timer.h>

struct server;

struct session {
    struct server *srv;
    int fired;    /* times its idle timer ran */
    int released; /* times the wheel handed it back */
};

struct server {
    tw_wheel *wheel;
    struct session *sessions;
    int nsessions;
    /* written on the timer thread only, read by main() after the wait */
    int shut_down;          /* the shutdown callback has run */
    int ran_after_shutdown; /* callbacks after it: must stay 0 */
    /* the wait: on_destroy sets `gone` under `lock` and signals `done` */
    pthread_mutex_t lock;
    pthread_cond_t done;
    clockid_t done_clock; /* the clock the wait's deadline is read on */
    int gone;
};

static void on_idle(tw_wheel *w, tw_id id, void *data)
{
    struct session *s = data;
    (void)w, (void)id;
    if (s->srv->shut_down)
        s->srv->ran_after_shutdown++;
    s->fired++;
}

/* The release hook: a real server would close and free the session here. */
static void on_release(void *data)
{
    struct session *s = data;
    s->released++;
}

/* The shutdown timer, on the timer thread: the wheel is destroyed under its
 * own callback. Every pending session is released inside this call; the
 * wheel itself is freed by the timer thread once the callback returns. */
static void on_shutdown(tw_wheel *w, tw_id id, void *data)
{
    struct server *srv = data;
    (void)id;
    srv->shut_down = 1;
    if (tw_destroy(w) != 0)
        fprintf(stderr, "tw_destroy from the shutdown timer failed\n");
}

/* tw_config.on_destroy: the wheel has been freed, every hook has run. */
static void on_gone(void *context)
{
    struct server *srv = context;
    pthread_mutex_lock(&srv->lock);
    srv->gone++;
    pthread_cond_signal(&srv->done);
    pthread_mutex_unlock(&srv->lock);
}

/* Waits until on_destroy has run; 0 if it did not within `seconds` (a bug:
 * the program then reports it rather than hanging). */
static int wait_until_gone(struct server *srv, int seconds)
{
    struct timespec until;
    int r = 0;
    clock_gettime(srv->done_clock, &until);
    until.tv_sec += seconds;
    pthread_mutex_lock(&srv->lock);
    while (!srv->gone && r != ETIMEDOUT)
        r = pthread_cond_timedwait(&srv->done, &srv->lock, &until);
    r = srv->gone;
    pthread_mutex_unlock(&srv->lock);
    return r;
}

static int arg_int(int argc, char **argv, const char *name, int fallback)
{
    for (int i = 1; i + 1 < argc; i++)
        if (strcmp(argv[i], name) == 0)
            return atoi(argv[i + 1]);
    return fallback;
}

int main(int argc, char **argv)
{
    struct server *srv = calloc(1, sizeof *srv);
    struct tw_config config;
    pthread_condattr_t attr;
    int shutdown_ms = arg_int(argc, argv, "--shutdown-ms", 50);
    int fired = 0, released = 0, bad = 0;

    if (srv == NULL)
        return 1;
    srv->nsessions = arg_int(argc, argv, "--sessions", 1000);
    if (srv->nsessions < 1 || shutdown_ms < 1) {
        fprintf(stderr, "usage: shutdown [--sessions N] [--shutdown-ms MS]\n");
        return 2;
    }
    srv->sessions = calloc((size_t)srv->nsessions, sizeof *srv->sessions);
    if (srv->sessions == NULL)
        return 1;
    pthread_mutex_init(&srv->lock, NULL);
    pthread_condattr_init(&attr);
    /* immune to date changes where the wait can use the monotonic clock
     * (winpthreads cannot: there the deadline is read on the date) */
    srv->done_clock = pthread_condattr_setclock(&attr, CLOCK_MONOTONIC) == 0
                          ? CLOCK_MONOTONIC
                          : CLOCK_REALTIME;
    pthread_cond_init(&srv->done, &attr);
    pthread_condattr_destroy(&attr);

    tw_config_init(&config); /* 1 ms ticks, the default lock */
    config.context = srv;
    config.on_destroy = on_gone;
    srv->wheel = tw_create(&config);
    if (srv->wheel == NULL)
        return 1;
    /* idle timers from 1 ms to twice the shutdown delay: about half fire
     * before the shutdown, the rest are released by it */
    for (int i = 0; i < srv->nsessions; i++) {
        struct session *s = &srv->sessions[i];
        s->srv = srv;
        if (tw_add_ex(srv->wheel, 1 + (uint64_t)i * 2 * (uint64_t)shutdown_ms / (uint64_t)srv->nsessions,
                      0, on_idle, on_release, s) == 0)
            return 1;
    }
    if (tw_add(srv->wheel, (uint64_t)shutdown_ms, on_shutdown, srv) == 0 ||
        tw_thread_start(srv->wheel, 1000) != 0)
        return 1;

    /* The main thread could serve clients here. It must not touch the wheel
     * once the shutdown may have run; it waits for on_destroy instead. */
    if (!wait_until_gone(srv, 30)) {
        fprintf(stderr, "on_destroy did not run within 30 s\n");
        return 1;
    }

    /* The wheel is gone and every hook has run: the sessions are ours. */
    for (int i = 0; i < srv->nsessions; i++) {
        const struct session *s = &srv->sessions[i];
        fired += s->fired;
        released += s->released;
        bad += s->released != 1 || s->fired > 1;
    }
    printf("shutdown after %d ms: %d sessions timed out, %d released by the shutdown; "
           "on_destroy ran %d time(s)\n",
           shutdown_ms, fired, released - fired, srv->gone);
    if (bad || srv->gone != 1 || !srv->shut_down || srv->ran_after_shutdown) {
        fprintf(stderr, "FAIL: %d sessions without exactly one fate, %d callbacks after "
                        "the shutdown\n", bad, srv->ran_after_shutdown);
        return 1;
    }
    pthread_cond_destroy(&srv->done);
    pthread_mutex_destroy(&srv->lock);
    free(srv->sessions);
    free(srv);
    return 0;
}
