/*
 * uv_loop: a twheel wheel inside a libuv loop.
 *
 * libuv's own timers (uv_timer_t) sit in a binary heap, one handle each. A
 * server with a heartbeat, an idle kick and a few cooldowns per session puts
 * those on a wheel instead and gives libuv one uv_timer_t, due when the
 * wheel's earliest timer is. Three functions are the whole pattern:
 *
 *   arm()            after every turn: start the uv timer for tw_timeout_ms(),
 *                    or stop it when the wheel is empty (so an idle loop
 *                    sleeps on I/O alone, and uv_run() can return);
 *   on_wheel_timer() the uv timer's callback: tw_expire(), then arm();
 *   on_read()        an I/O callback: handle the data (it adds and
 *                    reschedules timers), then arm(), since a timer it just
 *                    added may be due before the uv timer.
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
 *   usage: uv_loop [--check | --help]
 */
#define _POSIX_C_SOURCE 200809L

#include <stdio.h>
#include <stdlib.h>

#include <uv.h>

#include <twheel/timer.h>

#include "loop_app.h"

struct app {
    uv_loop_t loop;
    uv_timer_t wheel_timer; /* due when the wheel's earliest timer is */
    uv_pipe_t pipe;         /* the client's packets */
    struct lc_packet buf[512];
    struct lc_app app; /* the wheel, and what the packets do to it */
};

static void on_wheel_timer(uv_timer_t *handle);

/* ---- the pattern -------------------------------------------------------- */

/* Call after every turn: after tw_expire() and after any callback that may
 * have added, cancelled or rescheduled a timer. */
static void arm(struct app *a)
{
    int32_t ms = tw_timeout_ms(a->app.wheel); /* by the clock; never late */
    if (ms < 0) {
        uv_timer_stop(&a->wheel_timer); /* nothing pending: sleep on I/O */
        return;
    }
    /* libuv counts a timeout from its loop time, read when the loop last
     * woke. Refresh it, or the uv timer comes due early by however long
     * this turn took, wakes the loop with nothing due on the wheel, and
     * costs a turn. (libuv before 1.48 runs a 0 ms timer started from its
     * own callback again in the same pass, without polling I/O: issue
     * #4245. tw_expire() keeps a delay-0 timer added by one of its callbacks
     * for the next call, so that costs one more turn per such generation;
     * only a callback that re-adds itself with delay 0 forever would starve
     * I/O on those versions.) */
    uv_update_time(&a->loop);
    uv_timer_start(&a->wheel_timer, on_wheel_timer, (uint64_t)ms, 0);
}

static void on_wheel_timer(uv_timer_t *handle)
{
    struct app *a = handle->data;
    lc_timer_wakeup(&a->app.lc);
    int64_t ran = tw_expire(a->app.wheel); /* every timer now due, in order */
    lc_expired(&a->app.lc, ran);
    arm(a);
}

/* ---- I/O ---------------------------------------------------------------- */

static void on_alloc(uv_handle_t *handle, size_t hint, uv_buf_t *buf)
{
    struct app *a = handle->data;
    (void)hint;
    *buf = uv_buf_init((char *)a->buf, sizeof a->buf);
}

static void on_read(uv_stream_t *stream, ssize_t n, const uv_buf_t *buf)
{
    struct app *a = stream->data;
    (void)buf;
    if (n == 0)
        return; /* EAGAIN: nothing happened */
    lc_io_wakeup(&a->app.lc);
    if (n > 0) {
        /* Writes of whole packets under PIPE_BUF are atomic: whole reads. */
        for (size_t i = 0; i < (size_t)n / sizeof a->buf[0]; i++)
            lc_app_packet(&a->app, &a->buf[i]);
    } else {
        if (n != UV_EOF)
            lc_error(&a->app.lc, uv_strerror((int)n));
        uv_close((uv_handle_t *)&a->pipe, NULL); /* the client is gone */
    }
    arm(a); /* the packets added timers: one may be due before the uv timer */
}

/* ---- setup and shutdown ------------------------------------------------- */

int main(int argc, char **argv)
{
    const int status = lc_parse_args(argc, argv, "uv_loop");
    if (status >= 0)
        return status;
    char version[64];
    snprintf(version, sizeof version, "libuv %s", uv_version_string());
    struct app *a = calloc(1, sizeof *a);
    if (!a || lc_init(&a->app.lc, "uv_loop", &a->app) != 0)
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
    if (!a->app.wheel || uv_loop_init(&a->loop) != 0) {
        lc_error(&a->app.lc, "setup failed");
        return lc_finish(&a->app.lc, version);
    }
    uv_timer_init(&a->loop, &a->wheel_timer);
    a->wheel_timer.data = a;
    uv_pipe_init(&a->loop, &a->pipe, 0);
    a->pipe.data = a;
    if (uv_pipe_open(&a->pipe, a->app.lc.pipe_rd) == 0) {
        a->app.lc.pipe_rd = -1; /* libuv owns it now; uv_close() closes it */
        uv_read_start((uv_stream_t *)&a->pipe, on_alloc, on_read);
    } else {
        lc_error(&a->app.lc, "uv_pipe_open failed");
    }

    lc_app_start(&a->app);
    lc_start_traffic(&a->app.lc);
    arm(a); /* timers were added outside the loop: arm before it starts */

    /* Returns when nothing is left to wait for: the pipe closed and the
     * uv timer stopped because the wheel is empty. A server's listening
     * socket keeps it running; to stop one, close its handles and destroy
     * the wheel (pending timers are dropped, never run). */
    uv_run(&a->loop, UV_RUN_DEFAULT);
    uv_close((uv_handle_t *)&a->wheel_timer, NULL);
    if (!uv_is_closing((uv_handle_t *)&a->pipe))
        uv_close((uv_handle_t *)&a->pipe, NULL);
    uv_run(&a->loop, UV_RUN_DEFAULT); /* runs the close callbacks */
    if (uv_loop_close(&a->loop) != 0)
        lc_error(&a->app.lc, "uv_loop_close: handles left open");
    tw_destroy(a->app.wheel);

    int rc = lc_finish(&a->app.lc, version);
    free(a);
    return rc;
}
