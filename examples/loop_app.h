/*
 * loop_app.h: the application the C event-loop examples run (uv_loop.c,
 * event_loop.c, timerfd_loop.c): what the client's packets do to the
 * wheel. Like loop_check.h it is the bench around the pattern, not part of
 * it; the loop-specific part (arm, the loop's timer callback, the I/O
 * callback) is in each example. asio_loop.cpp does the same through the
 * C++ facade.
 */
#ifndef LOOP_APP_H
#define LOOP_APP_H

#include <errno.h>

#include <twheel/timer.h>

#include "loop_check.h"

struct lc_app {
    tw_wheel *wheel;
    tw_id heartbeat, kick;
    struct lc_timer *heartbeat_t, *kick_t;
    struct loop_check lc;
};

static void lc_app_on_request(tw_wheel *w, tw_id id, void *data);

static tw_id lc_app_add(struct lc_app *a, struct lc_timer *t, tw_callback *cb)
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
static void lc_app_drained(struct lc_app *a)
{
    struct lc_timer *t;
    if (tw_count(a->wheel) == 0 && (t = lc_next_stretch(&a->lc)) != NULL)
        lc_app_add(a, t, lc_app_on_request);
}

static void lc_app_on_request(tw_wheel *w, tw_id id, void *data)
{
    struct lc_timer *t = data;
    struct lc_app *a = t->lc->owner;
    (void)w, (void)id;
    lc_fired(t);
    /* A timer added from a callback counts from the clock at this call
     * too; the loop re-arms after tw_expire(). */
    if (t->follow_ms >= 0)
        lc_app_add(a, lc_new(&a->lc, (uint32_t)t->follow_ms, 0, -1),
                   lc_app_on_request);
    lc_app_drained(a);
}

static void lc_app_on_kick(tw_wheel *w, tw_id id, void *data)
{
    struct lc_timer *t = data;
    (void)w, (void)id;
    lc_fired(t); /* a real server would drop the session here */
    lc_app_drained(t->lc->owner);
}

static void lc_app_on_heartbeat(tw_wheel *w, tw_id id, void *data)
{
    (void)w, (void)id;
    lc_fired(data);
}

/* Before the loop starts: the heartbeat and the idle kick. */
static void lc_app_start(struct lc_app *a)
{
    a->heartbeat_t = lc_new(&a->lc, LC_HEARTBEAT_MS, LC_HEARTBEAT_MS, -1);
    a->heartbeat = lc_app_add(a, a->heartbeat_t, lc_app_on_heartbeat);
    a->kick = lc_app_add(a, a->kick_t = lc_new(&a->lc, LC_KICK_MS, 0, -1),
                         lc_app_on_kick);
}

/* One packet from the client, handled between two tw_expire() calls. */
static void lc_app_packet(struct lc_app *a, const struct lc_packet *p)
{
    if (++a->lc.packets == LC_PACKETS && tw_cancel(a->wheel, a->heartbeat) == 1)
        a->heartbeat_t->cancelled = 1; /* the busy part is over */
    /* A sign of life: push the idle kick back, LC_KICK_MS from now. */
    uint64_t before = lc_now();
    int r = tw_reschedule(a->wheel, a->kick, LC_KICK_MS);
    if (r == 1)
        lc_moved(a->kick_t, before, LC_KICK_MS);
    else if (r == 0) /* it ran: the client was quiet too long, and is back */
        a->kick = lc_app_add(a, a->kick_t = lc_new(&a->lc, LC_KICK_MS, 0, -1),
                             lc_app_on_kick);
    else
        lc_error(&a->lc, tw_strerror(r));
    lc_app_add(a, lc_new(&a->lc, p->delay_ms, 0, p->follow_ms), lc_app_on_request);
}

#endif
