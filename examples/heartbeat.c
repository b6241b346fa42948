/*
 * heartbeat: a single-threaded game-server loop driven by epoll and twheel.
 *
 * Every session of a game server typically owns a handful of timers:
 *
 *   - a heartbeat, fired every 50 ms (a periodic timer), where the server
 *     would push state or a keepalive to the client;
 *   - an idle kick, a one-shot that is pushed back (tw_reschedule) every time
 *     the client shows a sign of life and disconnects it when it stays quiet;
 *   - skill cooldowns, one-shots added when a skill is used: while one is
 *     pending the skill is refused.
 *
 * The loop is the classic one: epoll_wait() sleeps until a socket is readable
 * or the next timer is due (tw_timeout_ms() is that timeout), tw_expire()
 * runs whatever came due, then the events are handled. The wheel is driven
 * by its clock, so a timer a handler adds counts from the clock at that
 * moment, in either order; running the timers first keeps tw_now() fresh for
 * the handlers (tw_remaining() of a cooldown is then what the player sees). There is no real network here: the "clients" write
 * packets into a pipe registered in epoll, so the loop really waits on a file
 * descriptor exactly as it would on sockets.
 *
 * By default it simulates 100 000 sessions for 5 seconds and prints one line
 * per second: live timers, callbacks fired in that second, the worst lateness
 * of a callback (wall time when it ran minus wall time of the tick it was due
 * at) and the CPU time the process used in that second.
 *
 *   usage: heartbeat [--sessions N] [--seconds S]
 */
#define _GNU_SOURCE /* pipe2(), epoll: this example is Linux-only */

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <unistd.h>

#include <twheel/timer.h>

/* One tick is one millisecond (the wheel's default), so every delay below is
 * in ticks and milliseconds at once. skynet uses 10 ms ticks; with those the
 * numbers below would have to be divided by 10. */
#define TICK_US 1000u
#define HEARTBEAT_MS 50u
/* Real servers kick after 30..120 s of silence; 2 s lets kicks show up in a
 * 5-second run. */
#define IDLE_KICK_MS 2000u
#define SKILLS 4
static const uint32_t skill_cooldown_ms[SKILLS] = {300, 1000, 2500, 6000};

/* Client behaviour: each session sends PACKETS_PER_SEC packets per second on
 * average (Poisson-like: random sessions are picked), one in SKILL_ODDS of
 * which is a skill use. With 2 packets/s and a 2 s idle limit, about e^-4 of
 * the sessions go quiet long enough to be kicked each idle period. */
#define PACKETS_PER_SEC 2u
#define SKILL_ODDS 8u

/* What a client sends. Fixed size, so whole packets can be read back. */
struct packet {
    uint32_t session;
    uint16_t kind; /* PACKET_MOVE or PACKET_SKILL */
    uint16_t skill;
};
enum { PACKET_MOVE = 0, PACKET_SKILL = 1 };

struct server;

struct cooldown {
    struct session *owner; /* user data of the cooldown timer */
    tw_id id;              /* 0 while the skill is ready */
};

struct session {
    struct server *srv;
    tw_id heartbeat; /* periodic */
    uint64_t first_beat, beats; /* its first due tick; how many ran */
    tw_id idle;      /* one-shot, rescheduled on every packet */
    struct cooldown skill[SKILLS];
};

/* Counters for the current one-second window and for the whole run. */
struct window {
    uint64_t fired;
    uint64_t worst_late_us;
    uint64_t kicks;
};

struct server {
    tw_wheel *wheel;
    struct session *sessions;
    uint32_t nsessions;
    uint32_t seconds;       /* how many reports before the run ends */
    tw_id traffic;          /* the simulated clients' timer */
    int pipe_rd, pipe_wr, epfd;
    bool running;
    int errors;             /* library calls that failed unexpectedly */
    uint64_t rng;           /* xorshift64* state */
    uint64_t start_us;      /* wall time of tick 0 (see main) */
    uint64_t packet_carry;  /* fractional packets owed, in 1/1000 */
    uint64_t last_cpu_us;   /* for the per-second CPU figure */
    uint32_t second;        /* report number */
    struct window win;      /* reset by every report */
    /* whole run */
    uint64_t fired, heartbeats, kicks, cooldowns_done;
    uint64_t packets_sent, packets_dropped, packets_read;
    uint64_t skills_used, skills_refused;
    uint64_t late_sum_us, worst_late_us, early, beats_off;
    uint64_t turns, turns_io, peak_live;
};

/* ---- small helpers ------------------------------------------------------ */

static uint32_t rnd(struct server *srv, uint32_t n) /* uniform in [0, n) */
{
    srv->rng ^= srv->rng >> 12;
    srv->rng ^= srv->rng << 25;
    srv->rng ^= srv->rng >> 27;
    uint64_t x = srv->rng * UINT64_C(2685821657736338717);
    return (uint32_t)(((x >> 32) * n) >> 32);
}

static uint64_t cpu_time_us(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (uint64_t)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000u +
           (uint64_t)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
}

/* Called at the top of every callback. Inside a callback tw_now() is the tick
 * the timer was due at, so its wall-clock due time is start + tick * tick
 * length, and the difference with the clock is how late we are: the cost of
 * the tick granularity, of epoll's millisecond timeout, and of everything
 * else the loop did first. */
static void note_fired(struct server *srv)
{
    uint64_t due_us = srv->start_us + tw_now(srv->wheel) * TICK_US;
    uint64_t now_us = tw_gettime();
    uint64_t late_us = 0;

    if (now_us < due_us)
        srv->early++; /* a timer must never fire early: counted as an error */
    else
        late_us = now_us - due_us;
    srv->fired++;
    srv->win.fired++;
    srv->late_sum_us += late_us;
    if (late_us > srv->win.worst_late_us)
        srv->win.worst_late_us = late_us;
    if (late_us > srv->worst_late_us)
        srv->worst_late_us = late_us;
}

static void check_id(struct server *srv, tw_id id, const char *what)
{
    if (id == 0) {
        fprintf(stderr, "heartbeat: adding %s failed: %s\n", what,
                tw_strerror(errno));
        srv->errors++;
    }
}

/* ---- sessions ----------------------------------------------------------- */

static void on_heartbeat(tw_wheel *w, tw_id id, void *data);
static void on_idle(tw_wheel *w, tw_id id, void *data);
static void on_cooldown(tw_wheel *w, tw_id id, void *data);

/* The tick a delay counts from on this clock-driven wheel: the clock's,
 * rounded up, which runs ahead of tw_now() while the logins (or a long loop
 * turn) keep tw_expire() from running. Counted from start_us, read just
 * before tw_create(), it is the wheel's own or a little later. */
static uint64_t clock_tick(struct server *srv)
{
    uint64_t tick = (tw_gettime() - srv->start_us + TICK_US - 1) / TICK_US;
    return tick > tw_now(srv->wheel) ? tick : tw_now(srv->wheel);
}

/* A client connects into slot s: its heartbeat starts and its idle timer
 * starts counting.
 *
 * Heartbeats are spread over the 50 ms period (100 000 sessions beating on
 * the same tick would make every 50th millisecond a spike), and the phase
 * comes from the slot number rather than from chance: the ~2000 sessions that
 * beat on one tick then sit next to each other in memory, and the callbacks
 * walk them with the cache's help instead of taking a miss per session. On a
 * big session table that halves the CPU time of the loop. */
static void session_open(struct server *srv, struct session *s,
                         uint32_t idle_ms)
{
    uint64_t slot = (uint64_t)(s - srv->sessions);
    uint64_t phase = slot * HEARTBEAT_MS / srv->nsessions; /* 0..49 */
    uint64_t now = clock_tick(srv);
    /* first beat on the next tick T > now with T % HEARTBEAT_MS == phase */
    uint64_t first = (phase + HEARTBEAT_MS - now % HEARTBEAT_MS) % HEARTBEAT_MS;
    if (first == 0)
        first = HEARTBEAT_MS;

    s->srv = srv;
    s->heartbeat = tw_add_periodic(srv->wheel, first, HEARTBEAT_MS, on_heartbeat, s);
    check_id(srv, s->heartbeat, "a heartbeat");
    /* Where the wheel put it (count_beats checks the firings against it):
     * no later than `first` ticks from the clock read after the call, since
     * the wheel read it in between (a thread preempted there sees the phase
     * drift, not an error). */
    s->first_beat = tw_now(srv->wheel) + tw_remaining(srv->wheel, s->heartbeat);
    s->beats = 0;
    if (s->first_beat > clock_tick(srv) + first)
        srv->beats_off++;
    s->idle = tw_add(srv->wheel, idle_ms, on_idle, s);
    check_id(srv, s->idle, "an idle timer");
    for (int k = 0; k < SKILLS; k++) {
        s->skill[k].owner = s;
        s->skill[k].id = 0;
    }
}

/* A client goes away: every timer it owns is cancelled. tw_cancel is O(1)
 * and frees the node at once, so a server churning through connections never
 * accumulates dead timers. */
static void session_close(struct server *srv, struct session *s)
{
    if (tw_cancel(srv->wheel, s->heartbeat) != 1)
        srv->errors++; /* a heartbeat stays live until cancelled */
    tw_cancel(srv->wheel, s->idle); /* 0 (harmless) when called from on_idle */
    for (int k = 0; k < SKILLS; k++) {
        if (s->skill[k].id != 0 && tw_cancel(srv->wheel, s->skill[k].id) != 1)
            srv->errors++; /* a pending cooldown must be cancellable */
        s->skill[k].id = 0;
    }
    s->heartbeat = s->idle = 0;
}

static void on_heartbeat(tw_wheel *w, tw_id id, void *data)
{
    struct session *s = data;
    (void)w;
    (void)id;
    note_fired(s->srv);
    s->srv->heartbeats++; /* a real server would send a keepalive here */
    s->beats++;
}

static void on_idle(tw_wheel *w, tw_id id, void *data)
{
    struct session *s = data;
    struct server *srv = s->srv;
    (void)w;
    (void)id;
    note_fired(srv);
    srv->kicks++;
    srv->win.kicks++;
    /* Callbacks run with the wheel unlocked, so they may cancel and add
     * timers freely, their own included. The kicked client's slot is taken
     * over by a new client straight away, which keeps the population steady. */
    session_close(srv, s);
    session_open(srv, s, IDLE_KICK_MS);
}

static void on_cooldown(tw_wheel *w, tw_id id, void *data)
{
    struct cooldown *c = data;
    (void)w;
    (void)id;
    note_fired(c->owner->srv);
    c->owner->srv->cooldowns_done++;
    c->id = 0; /* the skill is ready again */
}

/* A packet arrived from a session: it is alive, so its idle kick moves back
 * to IDLE_KICK_MS from now. tw_reschedule is O(1): this is the "1 insert,
 * K updates, 1 delete" pattern of connection timeouts. */
static void handle_packet(struct server *srv, const struct packet *p)
{
    if (p->session >= srv->nsessions)
        return;
    struct session *s = &srv->sessions[p->session];

    if (tw_reschedule(srv->wheel, s->idle, IDLE_KICK_MS) != 1)
        srv->errors++; /* every session always has a pending idle timer */
    if (p->kind == PACKET_SKILL && p->skill < SKILLS) {
        struct cooldown *c = &s->skill[p->skill];
        if (c->id != 0) {
            srv->skills_refused++; /* still cooling down */
        } else {
            c->id = tw_add(srv->wheel, skill_cooldown_ms[p->skill],
                           on_cooldown, c);
            check_id(srv, c->id, "a cooldown");
            srv->skills_used++;
        }
    }
}

/* ---- the simulated network ---------------------------------------------- */

/* Stand-in for the clients, fired every millisecond by the wheel itself: it
 * writes the packets that random sessions "sent" during that millisecond into
 * the pipe. In a real server these bytes would arrive on sockets. */
static void on_traffic(tw_wheel *w, tw_id id, void *data)
{
    struct server *srv = data;
    struct packet buf[PIPE_BUF / sizeof(struct packet)];
    size_t n = 0;
    (void)w;
    (void)id;

    note_fired(srv);
    srv->packet_carry += (uint64_t)srv->nsessions * PACKETS_PER_SEC;
    uint64_t due = srv->packet_carry / 1000; /* packets per millisecond */
    srv->packet_carry %= 1000;

    while (due > 0) {
        struct packet *p = &buf[n++];
        p->session = rnd(srv, srv->nsessions);
        p->kind = rnd(srv, SKILL_ODDS) == 0 ? PACKET_SKILL : PACKET_MOVE;
        p->skill = (uint16_t)rnd(srv, SKILLS);
        due--;
        if (n == sizeof buf / sizeof buf[0] || due == 0) {
            /* Writes of at most PIPE_BUF bytes are atomic: all or nothing.
             * If the server fell so far behind that the pipe is full, the
             * packets are dropped, like a socket buffer overflowing. */
            ssize_t r = write(srv->pipe_wr, buf, n * sizeof buf[0]);
            if (r < 0) {
                if (errno != EAGAIN) {
                    perror("heartbeat: write");
                    srv->errors++;
                }
                srv->packets_dropped += n;
            } else {
                srv->packets_sent += n;
            }
            n = 0;
        }
    }
}

/* The pipe is readable: drain it, as a server drains a socket. */
static void read_packets(struct server *srv)
{
    struct packet buf[256];

    for (;;) {
        ssize_t r = read(srv->pipe_rd, buf, sizeof buf);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            if (errno != EAGAIN) {
                perror("heartbeat: read");
                srv->errors++;
            }
            return;
        }
        /* Every write was a whole number of packets and atomic, so a read of
         * a multiple of sizeof(struct packet) returns whole packets. */
        size_t n = (size_t)r / sizeof buf[0];
        for (size_t i = 0; i < n; i++)
            handle_packet(srv, &buf[i]);
        srv->packets_read += n;
        if ((size_t)r < sizeof buf)
            return;
    }
}

/* ---- reporting ---------------------------------------------------------- */

/* The once-per-second report is a periodic timer like any other: fixed rate,
 * so the k-th report is due at exactly k seconds however late the previous
 * one ran. The last one also ends the run. */
static void on_report(tw_wheel *w, tw_id id, void *data)
{
    struct server *srv = data;

    note_fired(srv);
    uint64_t cpu = cpu_time_us();
    uint64_t live = tw_count(w);
    if (live > srv->peak_live)
        srv->peak_live = live;
    srv->second++;
    printf("%3" PRIu32 "  %11" PRIu64 "  %9" PRIu64 "  %13.3f  %6.1f  %5" PRIu64 "\n",
           srv->second, live, srv->win.fired,
           (double)srv->win.worst_late_us / 1000.0,
           (double)(cpu - srv->last_cpu_us) / 1000.0, srv->win.kicks);
    fflush(stdout);
    srv->last_cpu_us = cpu;
    memset(&srv->win, 0, sizeof srv->win);

    if (srv->second == srv->seconds) {
        /* A periodic timer may cancel itself from its own callback. If the
         * loop had fallen behind, the rest of this tw_expire() call still
         * runs the heartbeats that are due, but nothing more is printed. */
        tw_cancel(w, id);
        tw_cancel(w, srv->traffic);
        srv->running = false; /* the loop exits after this tw_expire() */
    }
}

/* ---- setup and the loop ------------------------------------------------- */

static int parse_u32(const char *arg, const char *name, uint32_t min,
                     uint32_t max, uint32_t *out)
{
    char *end;
    errno = 0;
    unsigned long v = arg ? strtoul(arg, &end, 10) : 0;
    if (!arg || errno || *end || arg[0] == '-' || v < min || v > max) {
        fprintf(stderr, "heartbeat: %s wants a number from %" PRIu32
                        " to %" PRIu32 "\n", name, min, max);
        return -1;
    }
    *out = (uint32_t)v;
    return 0;
}

static void usage(FILE *f)
{
    fprintf(f, "usage: heartbeat [--sessions N] [--seconds S]\n"
               "  --sessions N  simulated client sessions (default 100000)\n"
               "  --seconds S   how long to run (default 5)\n");
}

static int run(struct server *srv)
{
    struct epoll_event ev = {.events = EPOLLIN, .data.fd = srv->pipe_rd};
    if (epoll_ctl(srv->epfd, EPOLL_CTL_ADD, srv->pipe_rd, &ev) != 0) {
        perror("heartbeat: epoll_ctl");
        return -1;
    }

    /* Every client logs in at once, before the loop's first tw_expire().
     * The wheel is clock-driven from creation (main), so each login's
     * timers count from the clock at its own tw_add: none is early, and the
     * lateness measured against tick 0 is true lateness. */
    uint64_t t0 = tw_gettime();
    for (uint32_t i = 0; i < srv->nsessions; i++)
        session_open(srv, &srv->sessions[i], IDLE_KICK_MS);
    srv->traffic = tw_add_periodic(srv->wheel, 1, 1, on_traffic, srv);
    check_id(srv, srv->traffic, "the traffic generator");
    check_id(srv, tw_add_periodic(srv->wheel, 1000, 1000, on_report, srv),
             "the report timer");
    if (srv->errors)
        return -1;

    printf("%" PRIu32 " sessions logged in (%" PRIu64 " timers) in %.1f ms\n\n"
           "late: how long after its due tick began, by the clock, a callback"
           " ran; up to one\ntick (%.1f ms) is on time, more is time the loop"
           " spent elsewhere (the first\nsecond includes the log-in burst)."
           " Counted from the call that added the timer,\nadd up to one more"
           " tick: the call is rounded up to the next tick.\n"
           "kicks: sessions idle too long, closed.\n\n"
           "sec  live timers  fired/sec  worst late ms  cpu ms  kicks\n",
           srv->nsessions, tw_count(srv->wheel),
           (double)(tw_gettime() - t0) / 1000.0,
           (double)tw_tick_us(srv->wheel) / 1000.0);
    srv->last_cpu_us = cpu_time_us();
    srv->running = true;
    while (srv->running) {
        struct epoll_event events[16];
        /* How long may we sleep? Until the next timer is due (rounded up to
         * a millisecond, so never early), -1 if no timer is pending. */
        int timeout = tw_timeout_ms(srv->wheel);
        int n = epoll_wait(srv->epfd, events, 16, timeout);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            perror("heartbeat: epoll_wait");
            return -1;
        }
        srv->turns++;
        if (n > 0)
            srv->turns_io++;
        /* Run every timer whose tick has passed on the wheel's clock. */
        int64_t ran = tw_expire(srv->wheel);
        if (ran < 0) {
            fprintf(stderr, "heartbeat: tw_expire: %s\n",
                    tw_strerror((int)ran));
            return -1;
        }
        for (int i = 0; i < n; i++) {
            if (events[i].data.fd == srv->pipe_rd)
                read_packets(srv);
        }
    }
    return 0;
}

/* After the last tw_expire() every heartbeat due up to tw_now() has run, and
 * none later: a periodic timer runs once per interval from its first due
 * tick, however late the loop was. A count that differs means a firing was
 * lost or doubled. */
static void count_beats(struct server *srv)
{
    uint64_t end = tw_now(srv->wheel);
    for (uint32_t i = 0; i < srv->nsessions; i++) {
        const struct session *s = &srv->sessions[i];
        uint64_t due = end >= s->first_beat
                           ? (end - s->first_beat) / HEARTBEAT_MS + 1 : 0;
        if (s->beats != due)
            srv->beats_off++;
    }
}

static void summary(struct server *srv, uint32_t seconds)
{
    struct tw_stats st;
    memset(&st, 0, sizeof st);
    st.size = sizeof st;
    tw_get_stats(srv->wheel, &st);
    uint64_t cpu = cpu_time_us();

    printf("\nsummary: %" PRIu32 " sessions for %" PRIu32 " s, %" PRIu64
           " loop turns (%" PRIu64 " woken by packets)\n",
           srv->nsessions, seconds, srv->turns, srv->turns_io);
    printf("  callbacks  %" PRIu64 ": heartbeats %" PRIu64 ", idle kicks %"
           PRIu64 ", cooldowns ended %" PRIu64 "\n",
           srv->fired, srv->heartbeats, srv->kicks, srv->cooldowns_done);
    printf("  packets    %" PRIu64 " read of %" PRIu64 " sent (%" PRIu64
           " dropped); skills used %" PRIu64 ", refused %" PRIu64 "\n",
           srv->packets_read, srv->packets_sent, srv->packets_dropped,
           srv->skills_used, srv->skills_refused);
    printf("  lateness   worst %.3f ms, mean %.3f ms (after the due tick"
           " began; up to a tick is on time,\n             and from the call"
           " that added a timer up to two ticks)\n",
           (double)srv->worst_late_us / 1000.0,
           srv->fired ? (double)srv->late_sum_us / (double)srv->fired / 1000.0
                      : 0.0);
    double wall = (double)(tw_gettime() - srv->start_us) / 1e6;
    printf("  cpu        %.2f s in %.2f s (%.0f%% of one core)\n",
           (double)cpu / 1e6, wall, 100.0 * (double)cpu / 1e6 / wall);
    printf("  wheel      peak live %" PRIu64 ", %" PRIu64 " live at exit, pool %"
           PRIu64 " nodes, %" PRIu64 " KiB\n"
           "             %" PRIu64 " cascaded: moved down from an upper level"
           " as their time came\n             near (each timer due more than"
           " 256 ticks ahead moves once or more)\n",
           srv->peak_live, st.pending, st.pool_capacity, st.bytes / 1024,
           st.cascaded);
    if (srv->early)
        printf("  ERROR: %" PRIu64 " callbacks ran before their due time\n",
               srv->early);
    if (srv->beats_off)
        printf("  ERROR: %" PRIu64 " heartbeats scheduled off their tick, or"
               " run another number of times than were due\n", srv->beats_off);
    if (srv->errors)
        printf("  ERROR: %d library calls failed unexpectedly\n",
               srv->errors);
}

int main(int argc, char **argv)
{
    uint32_t nsessions = 100000, seconds = 5;

    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--sessions") == 0) {
            if (parse_u32(argv[++i], "--sessions", 1, 10000000, &nsessions))
                return 2;
        } else if (strcmp(argv[i], "--seconds") == 0) {
            if (parse_u32(argv[++i], "--seconds", 1, 86400, &seconds))
                return 2;
        } else if (strcmp(argv[i], "--help") == 0 ||
                   strcmp(argv[i], "-h") == 0) {
            usage(stdout);
            return 0;
        } else {
            usage(stderr);
            return 2;
        }
    }

    struct server srv;
    memset(&srv, 0, sizeof srv);
    srv.nsessions = nsessions;
    srv.seconds = seconds;
    srv.rng = UINT64_C(0x9e3779b97f4a7c15) ^ (uint64_t)getpid();
    srv.pipe_rd = srv.pipe_wr = srv.epfd = -1;

    /* The whole program runs on one thread, so the wheel needs no lock at
     * all: TW_LOCK_NONE skips every atomic operation. TW_DRIVE_CLOCK: the
     * wheel is driven by tw_expire() only, so it counts from the clock it
     * read in tw_create() right away. (The default, TW_DRIVE_AUTO, counts in
     * ticks until the first tw_expire() and restarts its clock at every add
     * until then: tick 0 would be the last login, not tw_create().) */
    struct tw_config cfg;
    tw_config_init(&cfg);
    cfg.tick_us = TICK_US;
    cfg.lock = TW_LOCK_NONE;
    cfg.drive = TW_DRIVE_CLOCK;

    /* Reading the clock just before tw_create() gives a wall time for tick 0
     * that is at most a few microseconds early, so measured lateness is
     * never understated. */
    srv.start_us = tw_gettime();
    srv.wheel = tw_create(&cfg);
    srv.sessions = calloc(nsessions, sizeof *srv.sessions);
    int fds[2];
    if (!srv.wheel || !srv.sessions) {
        fprintf(stderr, "heartbeat: out of memory\n");
        srv.errors++;
    } else if (pipe2(fds, O_NONBLOCK | O_CLOEXEC) != 0) {
        perror("heartbeat: pipe2");
        srv.errors++;
    } else {
        srv.pipe_rd = fds[0];
        srv.pipe_wr = fds[1];
        /* A bigger buffer, like a socket's, so that a slow loop turn does
         * not drop packets at once (best effort: the default is 64 KiB). */
        (void)fcntl(srv.pipe_wr, F_SETPIPE_SZ, 1 << 20);
        srv.epfd = epoll_create1(EPOLL_CLOEXEC);
        if (srv.epfd < 0) {
            perror("heartbeat: epoll_create1");
            srv.errors++;
        }
    }

    printf("twheel %s heartbeat: %" PRIu32 " sessions, %" PRIu32
           " s; heartbeat %u ms, idle kick %u ms, %d skills, 1 ms ticks\n",
           tw_version_string(), nsessions, seconds, HEARTBEAT_MS,
           IDLE_KICK_MS, SKILLS);
    int rc = srv.errors == 0 && run(&srv) == 0 ? 0 : 1;
    if (rc == 0)
        count_beats(&srv);
    if (srv.wheel)
        summary(&srv, seconds);
    if (srv.errors || srv.early || srv.beats_off)
        rc = 1;

    /* tw_destroy() drops every pending timer without firing it. Our timers
     * have no release hook: their user data lives in srv.sessions, freed
     * right after. */
    if (tw_destroy(srv.wheel) != 0)
        rc = 1;
    free(srv.sessions);
    if (srv.epfd >= 0)
        close(srv.epfd);
    if (srv.pipe_rd >= 0)
        close(srv.pipe_rd);
    if (srv.pipe_wr >= 0)
        close(srv.pipe_wr);
    return rc;
}
