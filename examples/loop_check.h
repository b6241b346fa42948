/*
 * loop_check.h: the test bench shared by the event-loop examples
 * (uv_loop.c, event_loop.c, timerfd_loop.c, asio_loop.cpp; the C ones also
 * share loop_app.h, what the packets do to the wheel). It is not part
 * of the pattern those files show; copy the example, not this.
 *
 * It plays a client and a stopwatch:
 *   - a thread writes LC_PACKETS small packets into a pipe at random
 *     intervals (0..10 ms): the loop's real I/O source, whose handler adds
 *     and reschedules timers between two tw_expire() calls;
 *   - every timer the example adds carries a struct lc_timer that remembers
 *     the CLOCK_MONOTONIC reading taken just before the add (or reschedule),
 *     so its callback can check it did not run before its delay had passed
 *     (an error) and record how late it ran (reported; failed only past
 *     LC_LATE_LIMIT_US, so a loaded machine cannot make the check flake);
 *   - once the traffic is over and the wheel has drained, two stretches,
 *     each with one lone timer (lc_next_stretch()):
 *     quiet: the timer is LC_QUIET_MS away, and LC_LATE_PACKET_MS into that
 *       sleep the client sends one last packet, whose handler adds a short
 *       timer: a loop that does not re-arm after I/O runs it hundreds of
 *       milliseconds late, past the limit;
 *     idle: the timer is LC_IDLE_MS away, the pipe is closed: more than
 *       LC_IDLE_WAKEUP_LIMIT wake-ups of the loop meanwhile mean it spins.
 *
 * C11 and C++17 alike. Single-threaded apart from the writer, which touches
 * nothing but its end of the pipe.
 */
#ifndef LOOP_CHECK_H
#define LOOP_CHECK_H

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <twheel/timer.h>

#define LC_TICK_US 1000u            /* 1 ms ticks: delays are ticks and ms */
#define LC_PACKETS 150              /* ~750 ms of traffic */
#define LC_KICK_MS 100              /* idle kick, pushed back by every packet */
#define LC_HEARTBEAT_MS 20          /* periodic, until the traffic ends */
#define LC_QUIET_MS 400             /* the quiet stretch's lone timer ... */
#define LC_LATE_PACKET_MS 50        /* ... and when the last packet comes */
#define LC_IDLE_MS 500              /* the idle stretch's lone timer */
#define LC_IDLE_WAKEUP_LIMIT 5      /* more wake-ups than this: spinning */
#define LC_LATE_LIMIT_US 200000     /* hard limit; lateness is reported */
#define LC_MAX_TIMERS 4096
#define LC_RUN_LIMIT_S 30           /* a loop that never wakes is killed */

/* What the client sends: a request wanting a timer delay_ms from now, whose
 * callback adds a follow-up timer follow_ms away (none when negative). */
struct lc_packet {
    uint32_t seq;
    uint16_t delay_ms;
    int16_t follow_ms;
};

/* The command line of every loop example: [--check] (what the test passes;
 * the checks always run) or --help. Returns -1 to go on, or the status to
 * exit with. */
static inline int lc_parse_args(int argc, char **argv, const char *name)
{
    if (argc == 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
        printf("usage: %s [--check]\n"
               "  runs a simulated client against the loop for about 1.8 s, then\n"
               "  checks that no timer ran early or was left waiting after I/O and\n"
               "  that the loop did not spin while idle; prints lateness, exits 1\n"
               "  if a check failed (--check changes nothing: the checks always run)\n",
               name);
        return 0;
    }
    if (argc > 2 || (argc == 2 && strcmp(argv[1], "--check") != 0)) {
        fprintf(stderr, "usage: %s [--check | --help | -h]\n", name);
        return 2;
    }
    return -1;
}

struct loop_check;

struct lc_timer {
    struct loop_check *lc;
    uint64_t armed_us;  /* CLOCK_MONOTONIC just before the add/reschedule */
    uint64_t delay_us;  /* the first run is due at armed + delay */
    uint64_t period_us; /* periodic: run k is due at armed + delay + k*period */
    uint32_t runs;
    int follow_ms;      /* >= 0: the callback adds a follow-up timer */
    int cancelled;      /* not expected to run (again) */
};

enum { LC_BUSY, LC_QUIET, LC_IDLE, LC_DONE };

struct loop_check {
    const char *name;
    void *owner;                /* the example's state, for its callbacks */
    int pipe_rd, pipe_wr;       /* pipe_wr is the writer thread's */
    pthread_t writer;
    int writer_started;
    sem_t quiet;                /* posted when the quiet stretch begins */
    int stretch;                /* LC_BUSY .. LC_DONE */
    struct lc_timer *lone;      /* the current stretch's timer */
    uint64_t start_us, idle_from_us, idle_us, quiet_late_us;
    struct lc_timer timers[LC_MAX_TIMERS];
    uint32_t ntimers;
    uint64_t late_us[LC_MAX_TIMERS * 4];
    uint32_t nlate;
    uint64_t firings, early, packets;
    uint64_t wakeups, wakeups_io, wakeups_empty, idle_wakeups;
    int errors;
};

static inline uint64_t lc_now(void) { return tw_gettime(); }

static inline void lc_error(struct loop_check *lc, const char *what)
{
    fprintf(stderr, "%s: %s\n", lc->name, what);
    lc->errors++;
}

static inline void lc_alarm(int sig)
{
    static const char msg[] = "loop_check: the run took too long: the loop "
                              "stopped waking up\n";
    (void)sig;
    if (write(2, msg, sizeof msg - 1) < 0) { /* nothing more to do */ }
    _exit(1);
}

/* The pipe, read end non-blocking (every loop reads until EAGAIN). */
static inline int lc_init(struct loop_check *lc, const char *name, void *owner)
{
    int fds[2];
    memset(lc, 0, sizeof *lc);
    lc->name = name;
    lc->owner = owner;
    lc->pipe_rd = lc->pipe_wr = -1;
    sem_init(&lc->quiet, 0, 0);
    signal(SIGPIPE, SIG_IGN); /* a reader gone early: EPIPE, not death */
    signal(SIGALRM, lc_alarm);
    alarm(LC_RUN_LIMIT_S);
    if (pipe(fds) != 0) {
        perror("pipe");
        return -1;
    }
    lc->pipe_rd = fds[0];
    lc->pipe_wr = fds[1];
    fcntl(fds[0], F_SETFL, fcntl(fds[0], F_GETFL) | O_NONBLOCK);
    fcntl(fds[0], F_SETFD, FD_CLOEXEC);
    fcntl(fds[1], F_SETFD, FD_CLOEXEC);
    lc->start_us = lc_now();
    return 0;
}

static inline void lc_send(struct loop_check *lc, uint32_t seq,
                           uint16_t delay_ms, int16_t follow_ms)
{
    struct lc_packet p;
    p.seq = seq;
    p.delay_ms = delay_ms;
    p.follow_ms = follow_ms;
    /* 8 bytes < PIPE_BUF: atomic, so the reader sees whole packets */
    while (write(lc->pipe_wr, &p, sizeof p) < 0 && errno == EINTR) {
    }
}

static inline void *lc_writer(void *arg)
{
    struct loop_check *lc = (struct loop_check *)arg;
    uint64_t rng = UINT64_C(0x9e3779b97f4a7c15);
    for (uint32_t i = 0; i < LC_PACKETS; i++) {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        struct timespec gap = {0, (long)(rng % 10000) * 1000}; /* 0..10 ms */
        nanosleep(&gap, NULL);
        lc_send(lc, i, (uint16_t)((rng >> 20) % 61),  /* 0..60 ms, 0 too */
                (int16_t)((rng >> 40) % 4 == 0 ? (int)((rng >> 44) % 41) : -1));
    }
    /* The late packet, once the loop sleeps on the quiet stretch's timer. */
    while (sem_wait(&lc->quiet) != 0 && errno == EINTR) {
    }
    struct timespec late = {0, LC_LATE_PACKET_MS * 1000000L};
    nanosleep(&late, NULL);
    lc_send(lc, LC_PACKETS, 10, -1);
    close(lc->pipe_wr); /* the reader sees EOF: the client is gone */
    return NULL;
}

static inline int lc_start_traffic(struct loop_check *lc)
{
    if (pthread_create(&lc->writer, NULL, lc_writer, lc) != 0) {
        lc_error(lc, "pthread_create failed");
        return -1;
    }
    lc->writer_started = 1;
    return 0;
}

/* A record for a timer about to be added; call it right before the add.
 * NULL (and an error) when the bench's table is full. */
static inline struct lc_timer *lc_new(struct loop_check *lc, uint32_t delay_ms,
                                      uint32_t period_ms, int follow_ms)
{
    if (lc->ntimers == LC_MAX_TIMERS) {
        lc_error(lc, "too many timers for the bench");
        return NULL;
    }
    struct lc_timer *t = &lc->timers[lc->ntimers++];
    t->lc = lc;
    t->delay_us = (uint64_t)delay_ms * 1000;
    t->period_us = (uint64_t)period_ms * 1000;
    t->follow_ms = follow_ms;
    t->armed_us = lc_now();
    return t;
}

/* A reschedule that returned 1: its delay counts from `before`, a reading
 * taken right before that call. */
static inline void lc_moved(struct lc_timer *t, uint64_t before, uint32_t delay_ms)
{
    t->armed_us = before;
    t->delay_us = (uint64_t)delay_ms * 1000;
}

/* Call first thing in every timer callback. */
static inline void lc_fired(struct lc_timer *t)
{
    struct loop_check *lc = t->lc;
    uint64_t now = lc_now();
    uint64_t due = t->armed_us + t->delay_us + t->runs * t->period_us;
    if (t->period_us == 0 && t->runs > 0)
        lc_error(lc, "a one-shot timer ran twice");
    t->runs++;
    lc->firings++;
    if (now < due) {
        lc->early++;
        fprintf(stderr, "%s: EARLY: a %" PRIu64 " ms timer ran %" PRIu64
                        " us before its delay had passed\n",
                lc->name, t->delay_us / 1000, due - now);
    } else {
        if (lc->nlate < sizeof lc->late_us / sizeof lc->late_us[0])
            lc->late_us[lc->nlate++] = now - due;
        if (lc->stretch == LC_QUIET && t != lc->lone && now - due > lc->quiet_late_us)
            lc->quiet_late_us = now - due;
    }
    if (t == lc->lone && lc->stretch == LC_IDLE)
        lc->idle_us = now - lc->idle_from_us;
    if (t == lc->lone)
        lc->lone = NULL; /* the stretch is over once the wheel drains */
}

/* Call first thing in the loop's timer callback and in every I/O callback;
 * then lc_expired() with what tw_expire() returned. */
static inline void lc_timer_wakeup(struct loop_check *lc)
{
    lc->wakeups++;
    lc->idle_wakeups += lc->stretch == LC_IDLE && lc->lone;
}
static inline void lc_io_wakeup(struct loop_check *lc)
{
    lc_timer_wakeup(lc);
    lc->wakeups_io++;
}
static inline void lc_expired(struct loop_check *lc, int64_t ran)
{
    if (ran < 0)
        lc_error(lc, tw_strerror((int)ran));
    lc->wakeups_empty += ran == 0;
}

/* Call when the wheel is empty (tw_count() 0, from the end of a timer
 * callback). Returns the record of the next stretch's lone timer, for the
 * example to add (its delay is delay_us / 1000 ms), or NULL: traffic still
 * flowing, or the stretches done. */
static inline struct lc_timer *lc_next_stretch(struct loop_check *lc)
{
    if (lc->lone || lc->stretch == LC_DONE)
        return NULL;
    switch (lc->stretch) {
    case LC_BUSY:
        if (lc->packets < LC_PACKETS)
            return NULL;
        lc->stretch = LC_QUIET;
        lc->lone = lc_new(lc, LC_QUIET_MS, 0, -1);
        sem_post(&lc->quiet); /* the writer sends its late packet */
        return lc->lone;
    case LC_QUIET:
        if (lc->packets <= LC_PACKETS) /* the late packet has not come yet */
            return NULL;
        lc->stretch = LC_IDLE;
        lc->idle_from_us = lc_now();
        lc->lone = lc_new(lc, LC_IDLE_MS, 0, -1);
        return lc->lone;
    default:
        lc->stretch = LC_DONE;
        return NULL;
    }
}

static inline int lc_cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* Joins the writer, checks that every one-shot ran exactly once, prints the
 * summary. Returns the exit status. */
static inline int lc_finish(struct loop_check *lc, const char *loop_version)
{
    sem_post(&lc->quiet); /* a writer still waiting for it: let it end */
    if (lc->writer_started)
        pthread_join(lc->writer, NULL);
    sem_destroy(&lc->quiet);
    if (lc->pipe_rd >= 0)
        close(lc->pipe_rd);
    alarm(0);
    uint64_t lost = 0;
    for (uint32_t i = 0; i < lc->ntimers; i++) {
        const struct lc_timer *t = &lc->timers[i];
        if (!t->cancelled && (t->period_us ? t->runs == 0 : t->runs != 1))
            lost++;
    }
    qsort(lc->late_us, lc->nlate, sizeof lc->late_us[0], lc_cmp_u64);
    double med = lc->nlate ? (double)lc->late_us[lc->nlate / 2] / 1000 : 0;
    double max = lc->nlate ? (double)lc->late_us[lc->nlate - 1] / 1000 : 0;
    double p99 = lc->nlate ? (double)lc->late_us[lc->nlate * 99 / 100] / 1000 : 0;

    printf("%s (%s, twheel %s): %" PRIu64 " packets, %" PRIu32
           " timers, %" PRIu64 " firings in %.2f s\n",
           lc->name, loop_version, tw_version_string(), lc->packets,
           lc->ntimers, lc->firings, (double)(lc_now() - lc->start_us) / 1e6);
    printf("  on time   %" PRIu64 " early; late by median %.3f ms, p99 %.3f ms,"
           " max %.3f ms (limit %d ms)\n",
           lc->early, med, p99, max, LC_LATE_LIMIT_US / 1000);
    printf("  wake-ups  %" PRIu64 " (%" PRIu64 " for I/O, %" PRIu64
           " timer wake-ups with nothing due)\n",
           lc->wakeups, lc->wakeups_io, lc->wakeups_empty);
    printf("  re-arm    timers added by I/O %d ms into a %d ms sleep ran"
           " %.3f ms late at most\n",
           LC_LATE_PACKET_MS, LC_QUIET_MS, (double)lc->quiet_late_us / 1000);
    printf("  idle      %" PRIu64 " wake-up(s) in %.1f ms with one timer %d ms"
           " away (limit %d)\n",
           lc->idle_wakeups, (double)lc->idle_us / 1000, LC_IDLE_MS,
           LC_IDLE_WAKEUP_LIMIT);

    int ok = 1;
#define LC_FAIL(cond, ...)                                                    \
    do {                                                                      \
        if (cond) {                                                           \
            printf("  FAIL: " __VA_ARGS__);                                   \
            ok = 0;                                                           \
        }                                                                     \
    } while (0)
    LC_FAIL(lc->errors, "%d errors (see above)\n", lc->errors);
    LC_FAIL(lc->early, "timers ran before their delay had passed\n");
    LC_FAIL(lost, "%" PRIu64 " timers did not run exactly once\n", lost);
    LC_FAIL(lc->packets != LC_PACKETS + 1, "packets lost\n");
    LC_FAIL(max * 1000 > LC_LATE_LIMIT_US, "a timer was very late\n");
    LC_FAIL(lc->stretch != LC_DONE, "the run ended before its last stretch\n");
    LC_FAIL(lc->idle_wakeups > LC_IDLE_WAKEUP_LIMIT, "the loop spins\n");
#undef LC_FAIL
    printf("  %s\n", ok ? "OK" : "FAILED");
    return ok ? 0 : 1;
}

#endif /* LOOP_CHECK_H */
