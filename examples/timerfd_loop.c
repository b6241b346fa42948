/*
 * timerfd_loop: a twheel wheel as one file descriptor, a Linux timerfd that
 * is readable when the wheel's next timer is due.
 *
 * In a loop you own, call epoll_wait(epfd, ..., tw_timeout_ms(w)) and be
 * done (examples/heartbeat.c): no fd, no extra system call. A timerfd is
 * for loops that can only wait on file descriptors, or are not yours: hand
 * the fd to a foreign loop (GLib's g_unix_fd_add(), an io_uring poll, a
 * library that takes fds to watch, a parent epoll holding several wheels)
 * and the wheel is one more source among its others. Here the loop is a
 * plain epoll_wait(..., -1), whose only timeout is the timerfd, so it shows
 * what such a loop needs and nothing more:
 *
 *   arm()            after every turn: set the timerfd to the clock plus
 *                    tw_timeout_ms(), only when that is earlier than what
 *                    it is set to (a system call per change, not per turn),
 *                    or disarm it when the wheel is empty;
 *   on_wheel_fd()    the timerfd is readable: read it, tw_expire(), arm();
 *   on_readable()    an I/O callback: handle the data (it adds and
 *                    reschedules timers), then arm().
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
 *   usage: timerfd_loop [--check | --help]
 */
#define _GNU_SOURCE /* epoll, timerfd: Linux only */

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <twheel/timer.h>

#include "loop_app.h"

struct app {
    int epfd, tfd, pipe_rd;
    uint64_t armed_us; /* CLOCK_MONOTONIC deadline the timerfd holds; 0: none */
    uint64_t settimes; /* timerfd_settime calls, for the summary */
    struct lc_app app; /* the wheel, and what the packets do to it */
};

/* ---- the pattern -------------------------------------------------------- */

static void set_timerfd(struct app *a, uint64_t deadline_us)
{
    struct itimerspec its;
    memset(&its, 0, sizeof its); /* all zero disarms */
    its.it_value.tv_sec = (time_t)(deadline_us / 1000000);
    its.it_value.tv_nsec = (long)(deadline_us % 1000000) * 1000;
    if (timerfd_settime(a->tfd, TFD_TIMER_ABSTIME, &its, NULL) != 0)
        lc_error(&a->app.lc, strerror(errno));
    a->armed_us = deadline_us;
    a->settimes++;
}

/* Call after every turn: after tw_expire() and after any callback that may
 * have added, cancelled or rescheduled a timer. */
static void arm(struct app *a)
{
    int32_t ms = tw_timeout_ms(a->app.wheel); /* by the clock; never late */
    if (ms < 0) { /* nothing pending: the fd stays quiet */
        if (a->armed_us)
            set_timerfd(a, 0);
        return;
    }
    /* An absolute deadline on CLOCK_MONOTONIC, the wheel's clock (a wheel
     * with its own clock_fn needs that clock's time here), so it stands
     * however late the fd is read. tw_timeout_ms() is rounded up to a
     * whole millisecond: not early, whatever time it is now. */
    uint64_t deadline = tw_gettime() + (uint64_t)ms * 1000;
    /* Set it only when it moves earlier. One that moves later (the
     * earliest timer was cancelled or rescheduled) is left alone: the fd
     * wakes the loop once early, tw_expire() finds nothing due, and the
     * re-arm sets the later time. That spares a system call per cancel. */
    if (a->armed_us == 0 || deadline < a->armed_us)
        set_timerfd(a, deadline);
}

static void on_wheel_fd(struct app *a)
{
    uint64_t expirations;
    lc_timer_wakeup(&a->app.lc);
    /* Read it, or it stays readable. EAGAIN: re-armed since it fired. */
    if (read(a->tfd, &expirations, sizeof expirations) < 0 && errno != EAGAIN)
        lc_error(&a->app.lc, strerror(errno));
    a->armed_us = 0;
    int64_t ran = tw_expire(a->app.wheel); /* every timer now due, in order */
    lc_expired(&a->app.lc, ran);
    arm(a);
}

/* ---- I/O ---------------------------------------------------------------- */

static void on_readable(struct app *a)
{
    struct lc_packet buf[512];
    lc_io_wakeup(&a->app.lc);
    for (;;) {
        ssize_t n = read(a->pipe_rd, buf, sizeof buf);
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
        epoll_ctl(a->epfd, EPOLL_CTL_DEL, a->pipe_rd, NULL);
        close(a->pipe_rd);
        a->pipe_rd = -1;
        break;
    }
    arm(a); /* the packets added timers: one may be due before the fd */
}

/* ---- setup, the loop, shutdown ------------------------------------------ */

static int watch(struct app *a, int fd)
{
    struct epoll_event ev;
    memset(&ev, 0, sizeof ev);
    ev.events = EPOLLIN;
    ev.data.fd = fd;
    return epoll_ctl(a->epfd, EPOLL_CTL_ADD, fd, &ev);
}

int main(int argc, char **argv)
{
    const int status = lc_parse_args(argc, argv, "timerfd_loop");
    if (status >= 0)
        return status;
    struct app *a = calloc(1, sizeof *a);
    if (!a || lc_init(&a->app.lc, "timerfd_loop", &a->app) != 0)
        return 1;
    a->pipe_rd = a->app.lc.pipe_rd;
    a->app.lc.pipe_rd = -1; /* ours now: closed at its end of file */

    /* One thread drives and uses the wheel: no lock. TW_DRIVE_CLOCK: delays
     * count from the clock at each call from the first add on (the default,
     * AUTO, decides at the first tw_expire() and would get the same here). */
    struct tw_config cfg;
    tw_config_init(&cfg);
    cfg.tick_us = LC_TICK_US;
    cfg.lock = TW_LOCK_NONE;
    cfg.drive = TW_DRIVE_CLOCK;
    a->app.wheel = tw_create(&cfg);
    a->epfd = epoll_create1(EPOLL_CLOEXEC);
    a->tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    if (!a->app.wheel || a->epfd < 0 || a->tfd < 0 || watch(a, a->tfd) != 0 ||
        watch(a, a->pipe_rd) != 0) {
        lc_error(&a->app.lc, "setup failed");
        return lc_finish(&a->app.lc, "epoll + timerfd");
    }

    lc_app_start(&a->app);
    lc_start_traffic(&a->app.lc);
    arm(a); /* timers were added outside the loop: arm before it starts */

    /* No timeout: the timerfd is the loop's only clock. It ends when there
     * is nothing left to wait for: the pipe closed, the timerfd disarmed
     * because the wheel is empty. */
    while (a->pipe_rd >= 0 || a->armed_us != 0) {
        struct epoll_event ev[8];
        int n = epoll_wait(a->epfd, ev, 8, -1);
        if (n < 0 && errno != EINTR) {
            lc_error(&a->app.lc, strerror(errno));
            break;
        }
        for (int i = 0; i < n; i++) {
            if (ev[i].data.fd == a->tfd)
                on_wheel_fd(a);
            else if (ev[i].data.fd == a->pipe_rd)
                on_readable(a);
        }
    }
    close(a->tfd);
    close(a->epfd);
    if (a->pipe_rd >= 0)
        close(a->pipe_rd);
    tw_destroy(a->app.wheel);

    printf("timerfd_settime: %" PRIu64 " calls for %" PRIu64 " loop wake-ups\n",
           a->settimes, a->app.lc.wakeups);
    int rc = lc_finish(&a->app.lc, "epoll + timerfd");
    free(a);
    return rc;
}
