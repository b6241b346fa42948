/*
 * timer_thread: worker threads scheduling work on one shared wheel, driven by
 * a dedicated timer thread, the way skynet does it.
 *
 * skynet's timer thread wakes every 2.5 ms, turns the elapsed time into ticks
 * and runs whatever came due, while any worker may add timers at any moment.
 * twheel gives you that thread with tw_thread_start(); workers just call
 * tw_add_ex() and tw_cancel(), which are thread-safe, and callbacks run on the
 * timer thread with the wheel's lock released.
 *
 * For a few seconds each worker adds one-shot timers with random delays and
 * cancels some of them again. Every timer carries a small "job" record; at the
 * end the program checks that each job had exactly one fate (fired once, or
 * cancelled once with tw_cancel() returning 1), that the wheel handed every
 * job back exactly once through the release hook, and prints throughput and
 * lateness percentiles. Exits 0 when everything adds up, 1 when a timer was
 * lost or doubled.
 *
 * --hog K starts K busy processes beside it for the run: the machine a
 * server shares with other work, where locks that spin fall apart.
 *
 *   usage: timer_thread [--threads N] [--seconds S] [--rate R] [--max-delay MS]
 *                       [--lock adaptive|spin|mutex] [--hog K] [--strict]
 */
#define _POSIX_C_SOURCE 200809L /* nanosleep() */

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <twheel/timer.h>

#if defined(__linux__)
#include <sys/prctl.h>
static void prctl_death_signal(void)
{
    prctl(PR_SET_PDEATHSIG, SIGKILL);
}
#else
static void prctl_death_signal(void)
{
}
#endif

#define TICK_US 1000u         /* 1 ms ticks: delays below are milliseconds */
#define DRIVER_PERIOD_US 2500 /* skynet's timer thread sleeps 2.5 ms */
#define BATCH 64              /* adds between two looks at the clock */
#define RECENT 1024           /* ids a worker remembers, to cancel some */
#define CANCEL_ODDS 4         /* one add in 4 is followed by a cancel */

/* Lateness histogram, log-linear like HdrHistogram: exact below 64 µs, then
 * 32 buckets per power of two (about 3% wide), so it costs a few kilobytes
 * and covers microseconds to hours. */
#define HIST_SUB 32u
#define HIST_BUCKETS (64u + 58u * HIST_SUB)

/* What the program knows about the run; callbacks reach it through their
 * job. The fields below "timer thread only" are written by callbacks alone,
 * and callbacks all run on the timer thread, so they need no atomics; the
 * main thread reads them after tw_thread_stop() has joined that thread. */
struct shared {
    tw_wheel *wheel;
    uint64_t start_us;   /* wall time of tick 0 */
    uint64_t deadline_us; /* workers stop adding */
    uint32_t max_delay;  /* ms */
    uint32_t rate;       /* adds per second per worker, 0 = flat out */
    int destroying;      /* set by main once every other thread is joined */
    /* timer thread only */
    uint64_t fired;
    uint64_t early;      /* callbacks that ran before their due tick: a bug */
    uint64_t worst_late_us;
    uint64_t hist[HIST_BUCKETS];
};

/* The work a timer stands for. A real program would put its payload here
 * and free the job in the release hook; this one keeps every job until the
 * end so that it can check afterwards what happened to each of them. The
 * three counters are separate bytes because different threads write them:
 * `fired` the timer thread, `cancelled` the worker, `released` whichever
 * thread the wheel hands the job back on. */
struct job {
    struct shared *sh;
    uint8_t fired;     /* times the callback ran */
    uint8_t cancelled; /* times tw_cancel() returned 1 for it */
    uint8_t released;  /* times the release hook got it */
    uint8_t dropped;   /* released by tw_destroy(), still pending then */
};

/* Jobs live in chunks that never move, because the timer thread holds
 * pointers to them while the worker keeps allocating. */
#define CHUNK_JOBS 65536u
#define MAX_CHUNKS 256u /* 16 M jobs per worker, then it stops adding */

struct worker {
    pthread_t thread;
    struct shared *sh;
    uint64_t rng;
    struct job *chunk[MAX_CHUNKS];
    uint64_t njobs;
    struct {
        tw_id id;
        struct job *job;
    } recent[RECENT];
    /* results, read by main after pthread_join */
    uint64_t adds, add_failed, cancels, cancel_late, cancel_errors;
    uint64_t start_us, end_us;
};

static uint32_t rnd(uint64_t *state, uint32_t n) /* uniform in [0, n) */
{
    *state ^= *state >> 12;
    *state ^= *state << 25;
    *state ^= *state >> 27;
    uint64_t x = *state * UINT64_C(2685821657736338717);
    return (uint32_t)(((x >> 32) * n) >> 32);
}

static uint32_t hist_bucket(uint64_t us)
{
    if (us < 64)
        return (uint32_t)us;
    uint32_t e = 6; /* us >> e is 1: e is the index of the top bit */
    while (us >> e > 1)
        e++;
    return 64u + (e - 6u) * HIST_SUB + (uint32_t)((us >> (e - 5u)) & 31u);
}

/* The largest value that falls into bucket b. */
static uint64_t hist_upper(uint32_t b)
{
    if (b < 64)
        return b;
    uint32_t e = 6u + (b - 64u) / HIST_SUB, m = (b - 64u) % HIST_SUB;
    return ((uint64_t)(HIST_SUB + m + 1) << (e - 5u)) - 1;
}

static void sleep_us(uint64_t us)
{
    struct timespec ts = {(time_t)(us / 1000000), (long)(us % 1000000) * 1000};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

/* ---- callbacks: run on the timer thread ---------------------------------- */

static void on_fire(tw_wheel *w, tw_id id, void *data)
{
    struct job *job = data;
    struct shared *sh = job->sh;
    (void)id;

    /* tw_now() is the tick this timer was due at; its wall time is
     * start + tick * tick length. The timer thread only looks every 2.5 ms,
     * so lateness up to about that much is the design, not a fault. */
    uint64_t due_us = sh->start_us + tw_now(w) * TICK_US;
    uint64_t now_us = tw_gettime();
    uint64_t late_us = 0;
    if (now_us < due_us)
        sh->early++;
    else
        late_us = now_us - due_us;

    job->fired++;
    sh->fired++;
    sh->hist[hist_bucket(late_us)]++;
    if (late_us > sh->worst_late_us)
        sh->worst_late_us = late_us;
}

/* The wheel hands each job back exactly once: after its callback returned,
 * or inside the tw_cancel() that stopped it (on the cancelling thread), or
 * at tw_destroy() if it was still pending then. */
static void on_release(void *data)
{
    struct job *job = data;
    job->released++;
    job->dropped = (uint8_t)job->sh->destroying;
}

/* ---- workers ------------------------------------------------------------- */

static struct job *new_job(struct worker *wk)
{
    uint64_t c = wk->njobs / CHUNK_JOBS;
    if (c >= MAX_CHUNKS)
        return NULL;
    if (!wk->chunk[c]) {
        wk->chunk[c] = calloc(CHUNK_JOBS, sizeof(struct job));
        if (!wk->chunk[c])
            return NULL;
    }
    struct job *job = &wk->chunk[c][wk->njobs % CHUNK_JOBS];
    job->sh = wk->sh;
    wk->njobs++;
    return job;
}

static void *worker_main(void *arg)
{
    struct worker *wk = arg;
    struct shared *sh = wk->sh;
    uint64_t now = tw_gettime();

    wk->start_us = now;
    while (now < sh->deadline_us) {
        for (int i = 0; i < BATCH; i++) {
            struct job *job = new_job(wk);
            if (!job)
                goto out; /* job table full: stop early */
            uint32_t delay = rnd(&wk->rng, sh->max_delay + 1);
            tw_id id = tw_add_ex(sh->wheel, delay, 0, on_fire, on_release, job);
            if (id == 0) {
                /* Nothing was scheduled and the job is still ours: give it
                 * back (a capped wheel would say ENOSPC here). */
                wk->add_failed++;
                wk->njobs--;
                continue;
            }
            wk->adds++;

            /* Remember the id in a random slot; the one it replaces may be
             * cancelled. It may have fired already: then tw_cancel() returns
             * 0 and does nothing, since an id never names another timer. */
            uint32_t slot = rnd(&wk->rng, RECENT);
            tw_id old = wk->recent[slot].id;
            struct job *old_job = wk->recent[slot].job;
            wk->recent[slot].id = id;
            wk->recent[slot].job = job;
            if (old != 0 && rnd(&wk->rng, CANCEL_ODDS) == 0) {
                int r = tw_cancel(sh->wheel, old);
                if (r == 1) {
                    old_job->cancelled++; /* released already, by tw_cancel */
                    wk->cancels++;
                } else if (r == 0) {
                    wk->cancel_late++;
                } else {
                    wk->cancel_errors++;
                }
            }
        }
        now = tw_gettime();
        if (sh->rate != 0) {
            /* Pace to `rate` adds per second, as a worker that also does
             * real work would. */
            uint64_t target = wk->start_us + wk->adds * 1000000u / sh->rate;
            if (target > now) {
                sleep_us(target - now);
                now = tw_gettime();
            }
        }
    }
out:
    wk->end_us = tw_gettime();
    return NULL;
}

/* ---- reporting and checking ---------------------------------------------- */

/* The lateness below which a fraction q of the firings fell, in ms. */
static double percentile_ms(const struct shared *sh, double q)
{
    uint64_t want = (uint64_t)(q * (double)sh->fired);
    uint64_t seen = 0;
    if (want >= sh->fired && sh->fired > 0)
        want = sh->fired - 1;
    for (uint32_t b = 0; b < HIST_BUCKETS; b++) {
        seen += sh->hist[b];
        if (seen > want) {
            uint64_t us = hist_upper(b);
            if (us > sh->worst_late_us)
                us = sh->worst_late_us;
            return (double)us / 1000.0;
        }
    }
    return 0.0;
}

/* Every job must have had exactly one fate and have been released once.
 * "Unfired" jobs were still pending when the program stopped waiting and
 * were handed back, unfired, by tw_destroy: the driver was behind (adding
 * flat out can outrun it), not a loss. A job handed back before that
 * without firing or being cancelled is lost. */
static void check_jobs(const struct worker *wk, uint64_t *ok_fired,
                       uint64_t *ok_cancelled, uint64_t *unfired,
                       uint64_t *lost, uint64_t *doubled)
{
    for (uint64_t i = 0; i < wk->njobs; i++) {
        const struct job *job = &wk->chunk[i / CHUNK_JOBS][i % CHUNK_JOBS];
        if (job->released == 1 && job->fired == 1 && job->cancelled == 0)
            ++*ok_fired;
        else if (job->released == 1 && job->fired == 0 && job->cancelled == 1)
            ++*ok_cancelled;
        else if (job->released == 1 && job->fired == 0 && job->cancelled == 0 &&
                 job->dropped)
            ++*unfired;
        else if (job->fired + job->cancelled == 0 || job->released == 0)
            ++*lost;
        else
            ++*doubled;
    }
}

/* K busy processes at normal priority until stop_hogs(); each dies with us
 * if we die first. */
static pid_t hogs[64];
static uint32_t nhogs;

static void start_hogs(uint32_t count)
{
    pid_t parent = getpid();
    for (nhogs = 0; nhogs < count; nhogs++) {
        pid_t pid = fork();
        if (pid == 0) {
            volatile uint64_t x = 1;
            prctl_death_signal();
            if (getppid() != parent)
                _exit(0);
            for (;;)
                x = x * 6364136223846793005u + 1442695040888963407u;
        }
        if (pid < 0) {
            perror("timer_thread: fork");
            break;
        }
        hogs[nhogs] = pid;
    }
}

static void stop_hogs(void)
{
    for (uint32_t i = 0; i < nhogs; i++)
        kill(hogs[i], SIGKILL);
    for (uint32_t i = 0; i < nhogs; i++)
        waitpid(hogs[i], NULL, 0);
    nhogs = 0;
}

static int parse_u32(const char *arg, const char *name, uint32_t min,
                     uint32_t max, uint32_t *out)
{
    char *end;
    errno = 0;
    unsigned long v = arg ? strtoul(arg, &end, 10) : 0;
    if (!arg || errno || *end || arg[0] == '-' || v < min || v > max) {
        fprintf(stderr, "timer_thread: %s wants a number from %" PRIu32
                        " to %" PRIu32 "\n", name, min, max);
        return -1;
    }
    *out = (uint32_t)v;
    return 0;
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: timer_thread [--threads N] [--seconds S] [--rate R]"
            " [--max-delay MS] [--lock KIND] [--hog K]\n"
            "  --threads N     worker threads (default 4)\n"
            "  --seconds S     how long workers add timers (default 3)\n"
            "  --rate R        adds per second per worker, 0 = as fast as"
            " possible (default 100000)\n"
            "  --max-delay MS  delays are uniform in 0..MS (default 500)\n"
            "  --lock KIND     adaptive (the library's default), spin or"
            " mutex\n"
            "  --mutex         same as --lock mutex\n"
            "  --hog K         K busy processes beside the run (default 0)\n"
            "  --strict        also fail if timers are still pending when the\n"
            "                  program stops waiting (--max-delay + 2 s after\n"
            "                  the workers stop): a timer that never came due\n");
}

static const char *lock_name(int kind)
{
    return kind == TW_LOCK_ADAPTIVE ? "adaptive lock"
           : kind == TW_LOCK_MUTEX  ? "mutex"
           : kind == TW_LOCK_SPIN   ? "spinlock"
                                    : "no lock";
}

int main(int argc, char **argv)
{
    uint32_t nthreads = 4, seconds = 3, rate = 100000, max_delay = 500;
    uint32_t hog_count = 0;
    int strict = 0;
    struct tw_config cfg;
    tw_config_init(&cfg);
    int lock_kind = cfg.lock;

    for (int i = 1; i < argc; i++) {
        int bad = 0;
        if (strcmp(argv[i], "--threads") == 0)
            bad = parse_u32(argv[++i], "--threads", 1, 256, &nthreads);
        else if (strcmp(argv[i], "--seconds") == 0)
            bad = parse_u32(argv[++i], "--seconds", 1, 3600, &seconds);
        else if (strcmp(argv[i], "--rate") == 0)
            bad = parse_u32(argv[++i], "--rate", 0, 100000000, &rate);
        else if (strcmp(argv[i], "--max-delay") == 0)
            bad = parse_u32(argv[++i], "--max-delay", 0, 3600000, &max_delay);
        else if (strcmp(argv[i], "--mutex") == 0)
            lock_kind = TW_LOCK_MUTEX;
        else if (strcmp(argv[i], "--strict") == 0)
            strict = 1;
        else if (strcmp(argv[i], "--hog") == 0)
            bad = parse_u32(argv[++i], "--hog", 0, 64, &hog_count);
        else if (strcmp(argv[i], "--lock") == 0) {
            const char *kind = argv[++i];
            if (kind && strcmp(kind, "adaptive") == 0)
                lock_kind = TW_LOCK_ADAPTIVE;
            else if (kind && strcmp(kind, "spin") == 0)
                lock_kind = TW_LOCK_SPIN;
            else if (kind && strcmp(kind, "mutex") == 0)
                lock_kind = TW_LOCK_MUTEX;
            else {
                fprintf(stderr, "timer_thread: --lock wants adaptive, spin or mutex\n");
                return 2;
            }
        }
        else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            usage(stdout);
            return 0;
        } else {
            usage(stderr);
            return 2;
        }
        if (bad)
            return 2;
    }

    struct shared *sh = calloc(1, sizeof *sh);
    struct worker *workers = calloc(nthreads, sizeof *workers);
    if (!sh || !workers) {
        fprintf(stderr, "timer_thread: out of memory\n");
        free(sh);
        free(workers);
        return 1;
    }
    sh->max_delay = max_delay;
    sh->rate = rate;

    /* Several threads touch the wheel, so it needs a lock: the default
     * adaptive lock, or the one --lock names. The clock is read just
     * before tw_create(), which takes its reference point: tick 0's wall
     * time is then at most a few µs early, never late, so measured lateness
     * is never understated. */
    cfg.tick_us = TICK_US;
    cfg.lock = lock_kind;
    sh->start_us = tw_gettime();
    sh->wheel = tw_create(&cfg);
    if (!sh->wheel) {
        fprintf(stderr, "timer_thread: tw_create: %s\n", tw_strerror(errno));
        free(sh);
        free(workers);
        return 1;
    }

    int rc = tw_thread_start(sh->wheel, DRIVER_PERIOD_US);
    if (rc != 0) {
        fprintf(stderr, "timer_thread: tw_thread_start: %s\n",
                tw_strerror(rc));
        tw_destroy(sh->wheel);
        free(sh);
        free(workers);
        return 1;
    }

    printf("twheel %s timer_thread: %" PRIu32 " workers for %" PRIu32
           " s, delays 0..%" PRIu32 " ms, ",
           tw_version_string(), nthreads, seconds, max_delay);
    if (rate)
        printf("%" PRIu32 " adds/s per worker", rate);
    else
        printf("adding as fast as possible");
    printf(", %s, timer thread every %.1f ms, %" PRIu32 " busy processes\n",
           lock_name(lock_kind), DRIVER_PERIOD_US / 1000.0, hog_count);
    fflush(stdout);
    start_hogs(hog_count);

    uint64_t t0 = tw_gettime();
    sh->deadline_us = t0 + (uint64_t)seconds * 1000000u;
    uint32_t started = 0;
    for (; started < nthreads; started++) {
        struct worker *wk = &workers[started];
        wk->sh = sh;
        wk->rng = UINT64_C(0x9e3779b97f4a7c15) * (started + 1);
        int e = pthread_create(&wk->thread, NULL, worker_main, wk);
        if (e != 0) {
            fprintf(stderr, "timer_thread: pthread_create: %s\n", strerror(e));
            break;
        }
    }
    for (uint32_t i = 0; i < started; i++)
        pthread_join(workers[i].thread, NULL);
    uint64_t t_work = tw_gettime();

    struct tw_stats st;
    memset(&st, 0, sizeof st);
    st.size = sizeof st;
    tw_get_stats(sh->wheel, &st); /* thread-safe: the timer thread still runs */
    uint64_t fired_during_work = st.fired;
    uint64_t live_at_end = st.pending;

    /* Let the timer thread run the rest: nothing pending can be due later
     * than max_delay from now. Give it a generous margin, then stop waiting:
     * whatever is still pending then is released unfired by tw_destroy. */
    uint64_t give_up = tw_gettime() + (uint64_t)max_delay * 1000u + 2000000u;
    if (tw_count(sh->wheel) > 0 && max_delay > 5000)
        printf("  draining   %" PRIu64 " timers pending; waiting up to %.0f s"
               " (--max-delay + 2 s) for the timer thread to run them\n",
               tw_count(sh->wheel), (double)max_delay / 1000.0 + 2.0);
    while (tw_count(sh->wheel) > 0 && tw_gettime() < give_up)
        sleep_us(10000);
    uint64_t t_drained = tw_gettime();
    stop_hogs();

    /* Joins the timer thread: after this, its writes (sh->fired, the
     * histogram, job->fired) are visible here. Safe to call twice. */
    rc = tw_thread_stop(sh->wheel);
    if (rc != 0)
        fprintf(stderr, "timer_thread: tw_thread_stop: %s\n", tw_strerror(rc));
    tw_get_stats(sh->wheel, &st);
    /* Releases (never fires) anything still pending: "unfired" below. */
    sh->destroying = 1;
    if (tw_destroy(sh->wheel) != 0 && rc == 0)
        rc = -EBUSY;

    uint64_t adds = 0, add_failed = 0, cancels = 0, cancel_late = 0;
    uint64_t cancel_errors = 0, ok_fired = 0, ok_cancelled = 0, lost = 0;
    uint64_t doubled = 0, unfired = 0;
    for (uint32_t i = 0; i < started; i++) {
        struct worker *wk = &workers[i];
        adds += wk->adds;
        add_failed += wk->add_failed;
        cancels += wk->cancels;
        cancel_late += wk->cancel_late;
        cancel_errors += wk->cancel_errors;
        check_jobs(wk, &ok_fired, &ok_cancelled, &unfired, &lost, &doubled);
    }

    double work_s = (double)(t_work - t0) / 1e6;
    printf("  added      %12" PRIu64 "  %10.0f adds/s  (%" PRIu64
           " failed)\n", adds, (double)adds / work_s, add_failed);
    printf("  cancelled  %12" PRIu64 "  (%" PRIu64
           " more cancels came too late: already fired)\n",
           cancels, cancel_late);
    printf("  fired      %12" PRIu64 "  %10.0f fires/s while adding; %" PRIu64
           " live when workers stopped, drained in %.0f ms\n",
           sh->fired, (double)fired_during_work / work_s, live_at_end,
           (double)(t_drained - t_work) / 1000.0);
    /* A timer is due at a tick boundary; the timer thread looks every
     * period, and a callback may wait behind the others of its batch: two
     * ticks plus one period is the lateness a healthy driver stays under. */
    double bound_ms = (2.0 * TICK_US + DRIVER_PERIOD_US) / 1000.0;
    double p99 = percentile_ms(sh, 0.99);
    printf("  lateness   p50 %.2f  p90 %.2f  p99 %.2f  p99.9 %.2f  max %.2f ms"
           " (how long after its due tick\n             began, by the clock, each"
           " callback ran)\n",
           percentile_ms(sh, 0.50), percentile_ms(sh, 0.90), p99,
           percentile_ms(sh, 0.999), (double)sh->worst_late_us / 1000.0);
    printf("             p99 %s 2 ticks + the driver's period = %.1f ms%s\n",
           p99 <= bound_ms ? "within" : "OVER", bound_ms,
           p99 <= bound_ms ? "" : " (reported, not checked: the check below is"
                                  " each timer's fate; with --rate 0 the workers"
                                  " can add faster than one thread fires)");
    printf("  wheel      %" PRIu64 " fired, %" PRIu64 " cancelled, pool %"
           PRIu64 " nodes\n", st.fired, st.cancelled, st.pool_capacity);

    int failed = 0;
    if (lost || doubled || cancel_errors || sh->early ||
        ok_fired + ok_cancelled + unfired != adds || ok_fired != sh->fired ||
        ok_cancelled != cancels || rc != 0 || started < nthreads ||
        (strict && unfired != 0))
        failed = 1;
    printf("  check      %" PRIu64 " fired once + %" PRIu64
           " cancelled once + %" PRIu64 " still pending at the drain deadline"
           " (released unfired by tw_destroy) = %" PRIu64 " of %" PRIu64
           " added; lost %" PRIu64 ", doubled %" PRIu64 ", early %" PRIu64
           ": %s\n",
           ok_fired, ok_cancelled, unfired, ok_fired + ok_cancelled + unfired,
           adds, lost, doubled, sh->early, failed ? "FAILED" : "ok");

    for (uint32_t i = 0; i < nthreads; i++) {
        for (uint32_t c = 0; c < MAX_CHUNKS; c++)
            free(workers[i].chunk[c]);
    }
    free(workers);
    free(sh);
    return failed;
}
