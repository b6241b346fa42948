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
 * loop_app.h (what the packets do to the wheel) and loop_check.h (the
 * client thread and the checks) are the bench around it
 * (no timer early, lateness, timers added by I/O not left waiting, no
 * spinning while idle). Runs ~1.8 s, prints a summary, exits 1 on a
 * failed check.
 *
 *   usage: event_loop [--check | --help]
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>

#include <twheel/timer.h>

#include "loop_app.h"

struct app {
    struct event_base *base;
    struct event *wheel_timer; /* due when the wheel's earliest timer is */
    struct event *readable;    /* the client's packets */
    struct lc_app app; /* the wheel, and what the packets do to it */
};

/* ---- the pattern -------------------------------------------------------- */

/* Call after every turn: after tw_expire() and after any callback that may
 * have added, cancelled or rescheduled a timer. */
static void arm(struct app *a)
{
    int32_t ms = tw_timeout_ms(a->app.wheel); /* by the clock; never late */
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
    lc_timer_wakeup(&a->app.lc);
    int64_t ran = tw_expire(a->app.wheel); /* every timer now due, in order */
    lc_expired(&a->app.lc, ran);
    arm(a);
}

/* ---- I/O ---------------------------------------------------------------- */

static void on_readable(evutil_socket_t fd, short what, void *arg)
{
    struct app *a = arg;
    struct lc_packet buf[512];
    (void)what;
    lc_io_wakeup(&a->app.lc);
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
                lc_app_packet(&a->app, &buf[i]);
            continue;
        }
        if (n < 0)
            lc_error(&a->app.lc, strerror(errno));
        /* End of file: the client is gone. */
        event_del(a->readable);
        break;
    }
    arm(a); /* the packets added timers: one may be due before the event */
}

/* ---- setup and shutdown ------------------------------------------------- */

int main(int argc, char **argv)
{
    const int status = lc_parse_args(argc, argv, "event_loop");
    if (status >= 0)
        return status;
    char version[64];
    snprintf(version, sizeof version, "libevent %s", event_get_version());
    struct app *a = calloc(1, sizeof *a);
    if (!a || lc_init(&a->app.lc, "event_loop", &a->app) != 0)
        return 1;

    /* One thread drives and uses the wheel: no lock. TW_DRIVE_CLOCK: delays
     * count from the clock at each call from the first add on (the default,
     * AUTO, decides at the first tw_expire() and would get the same here). */
    struct tw_config cfg;
    tw_config_init(&cfg);
    cfg.tick_us = LC_TICK_US;
    cfg.lock = TW_LOCK_NONE;
    cfg.drive = TW_DRIVE_CLOCK;
    a->app.wheel = tw_create(&cfg);

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
        a->readable = event_new(a->base, a->app.lc.pipe_rd, EV_READ | EV_PERSIST,
                                on_readable, a);
    }
    if (!a->app.wheel || !a->wheel_timer || !a->readable ||
        event_add(a->readable, NULL) != 0) {
        lc_error(&a->app.lc, "setup failed");
        return lc_finish(&a->app.lc, version);
    }

    lc_app_start(&a->app);
    lc_start_traffic(&a->app.lc);
    arm(a); /* timers were added outside the loop: arm before it starts */

    /* Returns when no event is left: the pipe's deleted at its end, the
     * timer event because the wheel is empty. A server's listening socket
     * keeps it running; to stop one, event_base_loopbreak(), free the
     * events and destroy the wheel (pending timers are dropped, never run). */
    if (event_base_loop(a->base, 0) < 0)
        lc_error(&a->app.lc, "event_base_loop failed");
    event_free(a->readable);
    event_free(a->wheel_timer);
    event_base_free(a->base);
    tw_destroy(a->app.wheel);

    int rc = lc_finish(&a->app.lc, version);
    free(a);
    return rc;
}
