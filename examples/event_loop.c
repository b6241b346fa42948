/*
 * event_loop: a twheel wheel inside a libevent loop.
 *
 * libevent keeps its timeouts in a min-heap, one struct event each. A server
 * with a heartbeat, an idle kick and a few cooldowns per session puts those
 * on a wheel instead and gives libevent one timer event, due when the
 * wheel's earliest timer is. Three functions are the whole pattern:
 *
 *   arm()            after every turn: add the timer event for
 *                    tw_timeout_ms(), or delete it when the wheel is empty
 *                    (so an idle loop sleeps on I/O alone, and
 *                    event_base_loop() can return);
 *   on_wheel_timer() the timer event's callback: tw_expire(), then arm();
 *   on_readable()    an I/O callback: handle the data (it adds and
 *                    reschedules timers), then arm(), since a timer it just
 *                    added may be due before the timer event.
 *
 * The wheel is driven by its clock (tw_expire), so a delay counts from the
 * clock reading of the call that adds the timer, in an I/O callback as in a
 * timer callback, however long ago tw_expire() last ran: no timer is early.
 *
 * The I/O source is a pipe that a client thread writes packets into; each
 * packet pushes the client's idle kick back (tw_reschedule) and asks for a
 * request timer (tw_add), some of whose callbacks add a follow-up timer.
 * loop_check.h is the bench around it: the client thread and the checks
 * (no timer early, lateness, timers added by I/O not left waiting, no
 * spinning while idle). Runs ~1.8 s, prints a summary, exits 1 on a
 * failed check.
 *
 *   usage: event_loop [--check]
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>

#include <twheel/timer.h>

#include "loop_check.h"

struct app {
    struct event_base *base;
    struct event *wheel_timer; /* due when the wheel's earliest timer is */
    struct event *readable;    /* the client's packets */
    tw_wheel *wheel;
    tw_id heartbeat, kick;
    struct lc_timer *heartbeat_t, *kick_t;
    struct loop_check lc;
};

/* ---- the pattern -------------------------------------------------------- */

/* Call after every turn: after tw_expire() and after any callback that may
 * have added, cancelled or rescheduled a timer. */
static void arm(struct app *a)
{
    int32_t ms = tw_timeout_ms(a->wheel); /* by the clock; never late */
    if (ms < 0) {
        evtimer_del(a->wheel_timer); /* nothing pending: sleep on I/O */
        return;
    }
    struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
    /* libevent counts a timeout from the time it cached when the loop last
     * woke, before this turn's callbacks ran. Its next sleep is measured
     * from that same time, so that alone comes out right; but if another
     * event wakes the loop in the last moments before the deadline, the
     * timer event counts as due up to this turn's length early, finds
     * nothing due on the wheel and costs a turn. Refreshing costs a clock
     * read. */
    event_base_update_cache_time(a->base);
    evtimer_add(a->wheel_timer, &tv); /* re-adding moves a pending event */
}

static void on_wheel_timer(evutil_socket_t fd, short what, void *arg)
{
    struct app *a = arg;
    (void)fd, (void)what;
    lc_timer_wakeup(&a->lc);
    int64_t ran = tw_expire(a->wheel); /* every timer now due, in order */
    lc_expired(&a->lc, ran);
    arm(a);
}

/* ---- timers ------------------------------------------------------------- */

static void on_request(tw_wheel *w, tw_id id, void *data);

static tw_id add(struct app *a, struct lc_timer *t, tw_callback *cb)
{
    if (!t)
        return 0;
    tw_id id = tw_add_ex(a->wheel, t->delay_us / 1000, t->period_us / 1000,
                         cb, NULL, t);
    if (id == 0) {
        lc_error(&a->lc, tw_strerror(errno));
        t->cancelled = 1;
    }
    return id;
}

/* Whenever the wheel runs empty, the bench may want one lone timer for
 * its quiet and idle stretches (loop_check.h). */
static void drained(struct app *a)
{
    struct lc_timer *t;
    if (tw_count(a->wheel) == 0 && (t = lc_next_stretch(&a->lc)) != NULL)
        add(a, t, on_request);
}

static void on_request(tw_wheel *w, tw_id id, void *data)
{
    struct lc_timer *t = data;
    struct app *a = t->lc->owner;
    (void)w, (void)id;
    lc_fired(t);
    /* A timer added from a callback counts from the clock at this call
     * too; on_wheel_timer() re-arms after tw_expire(). */
    if (t->follow_ms >= 0)
        add(a, lc_new(&a->lc, (uint32_t)t->follow_ms, 0, -1), on_request);
    drained(a);
}

static void on_kick(tw_wheel *w, tw_id id, void *data)
{
    struct lc_timer *t = data;
    (void)w, (void)id;
    lc_fired(t); /* a real server would drop the session here */
    drained(t->lc->owner);
}

static void on_heartbeat(tw_wheel *w, tw_id id, void *data)
{
    (void)w, (void)id;
    lc_fired(data);
}

/* ---- I/O ---------------------------------------------------------------- */

static void handle_packet(struct app *a, const struct lc_packet *p)
{
    if (++a->lc.packets == LC_PACKETS && tw_cancel(a->wheel, a->heartbeat) == 1)
        a->heartbeat_t->cancelled = 1; /* the busy part is over */
    /* A sign of life: push the idle kick back, LC_KICK_MS from now. */
    uint64_t before = lc_now();
    int r = tw_reschedule(a->wheel, a->kick, LC_KICK_MS);
    if (r == 1)
        lc_moved(a->kick_t, before, LC_KICK_MS);
    else if (r == 0) /* it ran: the client was quiet too long, and is back */
        a->kick = add(a, a->kick_t = lc_new(&a->lc, LC_KICK_MS, 0, -1), on_kick);
    else
        lc_error(&a->lc, tw_strerror(r));
    add(a, lc_new(&a->lc, p->delay_ms, 0, p->follow_ms), on_request);
}

static void on_readable(evutil_socket_t fd, short what, void *arg)
{
    struct app *a = arg;
    struct lc_packet buf[512];
    (void)what;
    lc_io_wakeup(&a->lc);
    for (;;) {
        ssize_t n = read(fd, buf, sizeof buf);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EAGAIN)
            break; /* drained: back to the loop */
        if (n > 0) {
            /* Writes of whole packets under PIPE_BUF are atomic: whole
             * reads. */
            for (size_t i = 0; i < (size_t)n / sizeof buf[0]; i++)
                handle_packet(a, &buf[i]);
            continue;
        }
        if (n < 0)
            lc_error(&a->lc, strerror(errno));
        /* End of file: the client is gone. */
        event_del(a->readable);
        break;
    }
    arm(a); /* the packets added timers: one may be due before the event */
}

/* ---- setup and shutdown ------------------------------------------------- */

int main(int argc, char **argv)
{
    if (argc > 2 || (argc == 2 && strcmp(argv[1], "--check") != 0)) {
        fprintf(stderr, "usage: event_loop [--check]\n");
        return 2;
    }
    char version[64];
    snprintf(version, sizeof version, "libevent %s", event_get_version());
    struct app *a = calloc(1, sizeof *a);
    if (!a || lc_init(&a->lc, "event_loop", a) != 0)
        return 1;

    /* One thread drives and uses the wheel: no lock. TW_DRIVE_CLOCK: delays
     * count from the clock at each call from the first add on (the default,
     * AUTO, decides at the first tw_expire() and would get the same here). */
    struct tw_config cfg;
    tw_config_init(&cfg);
    cfg.tick_us = LC_TICK_US;
    cfg.lock = TW_LOCK_NONE;
    cfg.drive = TW_DRIVE_CLOCK;
    a->wheel = tw_create(&cfg);

    /* libevent reads CLOCK_MONOTONIC_COARSE unless told otherwise: a
     * clock that moves once a jiffy (1-10 ms), behind the wheel's. The
     * loop then sleeps on until the coarse clock has caught up: on a
     * machine with 4 ms jiffies that made timers up to 5-8 ms late (median
     * 1.8 ms), against 2 ms (median 1.1) with this flag, which also gives
     * its epoll backend a timerfd for sub-millisecond timeouts. */
    struct event_config *ec = event_config_new();
    if (ec) {
        event_config_set_flag(ec, EVENT_BASE_FLAG_PRECISE_TIMER);
        a->base = event_base_new_with_config(ec);
        event_config_free(ec);
    }
    if (a->base) {
        a->wheel_timer = evtimer_new(a->base, on_wheel_timer, a);
        a->readable = event_new(a->base, a->lc.pipe_rd, EV_READ | EV_PERSIST,
                                on_readable, a);
    }
    if (!a->wheel || !a->wheel_timer || !a->readable ||
        event_add(a->readable, NULL) != 0) {
        lc_error(&a->lc, "setup failed");
        return lc_finish(&a->lc, version);
    }

    a->heartbeat_t = lc_new(&a->lc, LC_HEARTBEAT_MS, LC_HEARTBEAT_MS, -1);
    a->heartbeat = add(a, a->heartbeat_t, on_heartbeat);
    a->kick = add(a, a->kick_t = lc_new(&a->lc, LC_KICK_MS, 0, -1), on_kick);
    lc_start_traffic(&a->lc);
    arm(a); /* timers were added outside the loop: arm before it starts */

    /* Returns when no event is left: the pipe's deleted at its end, the
     * timer event because the wheel is empty. A server's listening socket
     * keeps it running; to stop one, event_base_loopbreak(), free the
     * events and destroy the wheel (pending timers are dropped, never run). */
    if (event_base_loop(a->base, 0) < 0)
        lc_error(&a->lc, "event_base_loop failed");
    event_free(a->readable);
    event_free(a->wheel_timer);
    event_base_free(a->base);
    tw_destroy(a->wheel);

    int rc = lc_finish(&a->lc, version);
    free(a);
    return rc;
}
