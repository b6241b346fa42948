/*
 * The reference timer for the differential test (tests/model/test_model.c)
 * and the fuzz target (tests/fuzz_wheel.c).
 *
 * It is written to be obviously right, not fast: a textbook binary heap of
 * the live timers ordered by (due tick, insertion sequence). Due ticks are
 * plain uint64 counts; there is no wheel, no 32-bit tick, no slot and no
 * cascade. It shares no code with timer.c and includes timer.h only for the
 * public constants.
 *
 * The API mirrors twheel's (model_add <-> tw_add, ...) with the same return
 * values and errno codes, following timer.h and notes/SEMANTICS.md:
 *  - a call to model_advance/model_expire first runs, FIFO, the timers that
 *    were already due when it started, with the clock left at the call's
 *    starting tick; then it walks forward and runs each timer at its due tick,
 *    by (due tick, insertion sequence);
 *  - add, reschedule and a periodic timer's re-arm are insertions (they take
 *    a new sequence number); an add or reschedule made during a call whose
 *    due tick is not after the current tick (delay 0) waits for the next
 *    call; a periodic re-arm that is still not after the current tick (the
 *    timer is catching up) runs in the same call, after those already due;
 *  - where a delay d counts from (timer.h, tw_add): on a tick-driven
 *    wheel from now; on a clock-driven one from the first tick boundary at
 *    or after the clock reading of the call (never before now), so the
 *    timer is due no earlier than d whole ticks of the clock after the
 *    call; for d = 0, from the tick that reading falls in; an AUTO wheel not driven yet counts from now and moves its
 *    clock's reference point to the call. A due tick more than
 *    TW_MAX_DELAY past now is -ERANGE, unless the wheel is empty and not
 *    driving: then now first moves up to the clock;
 *  - a one-shot's id dies when its callback starts; its release hook runs
 *    right after the callback; a periodic timer re-arms at due + interval
 *    after its callback returns, unless the callback rescheduled or
 *    cancelled it (then its release runs right after the callback); while
 *    that callback runs, model_remaining() and model_next_expiry() count
 *    with that next firing.
 */
#ifndef TWHEEL_TEST_MODEL_H
#define TWHEEL_TEST_MODEL_H

#include <stddef.h>
#include <stdint.h>

struct model;

typedef void model_callback(struct model *model, uint64_t id, void *user_data);
typedef void model_release(void *user_data);
typedef uint64_t model_clock_fn(void *context);

struct model_config {
    uint64_t start_tick;
    uint32_t tick_us;
    uint64_t max_timers;      /* 0 = no cap */
    model_clock_fn *clock_fn; /* read at creation, by model_expire, and by
                                 adds and reschedules that count from it */
    void *clock_context;
    int drive; /* enum tw_drive_kind */
};

struct model_stats {
    uint64_t now;
    uint64_t pending;     /* model_count() */
    uint64_t pending_due; /* pending timers whose due tick is <= now */
    uint64_t added;
    uint64_t fired;
    uint64_t cancelled;
    uint64_t rescheduled;
    uint64_t rebases;
};

/* NULL with errno ENOMEM on allocation failure. */
struct model *model_create(const struct model_config *config);
/* Releases every pending timer's user data; -EBUSY from a callback. */
int model_destroy(struct model *model);

uint64_t model_add(struct model *model, uint64_t delay,
                   model_callback *callback, void *user_data);
uint64_t model_add_periodic(struct model *model, uint64_t first,
                            uint64_t interval, model_callback *callback,
                            void *user_data);
uint64_t model_add_ex(struct model *model, uint64_t delay, uint64_t interval,
                      model_callback *callback, model_release *release,
                      void *user_data);
int model_cancel(struct model *model, uint64_t id);
int model_reschedule(struct model *model, uint64_t id, uint64_t delay);
uint64_t model_remaining(struct model *model, uint64_t id);

int64_t model_advance(struct model *model, uint64_t ticks);
int64_t model_expire(struct model *model);
uint64_t model_next_expiry(struct model *model);
int32_t model_timeout_ms(struct model *model);
/* What tw_timeout_ms() answers when the next expiry is `ticks` away. */
int32_t model_timeout_ms_for(struct model *model, uint64_t ticks);

uint64_t model_now(struct model *model);
uint64_t model_count(struct model *model);
void model_get_stats(struct model *model, struct model_stats *stats);
/* 0 when the model's own bookkeeping is consistent, -1 otherwise. */
int model_check(struct model *model);

#endif
