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
 * values and errno codes. The rules it implements (order, where a delay
 * counts from, what a clock that steps back does, lifetime) are written
 * out in SEMANTICS.md, next to this file.
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
/* Releases every pending timer's user data; -EBUSY from a callback (the
 * interpreter never destroys from one: see interp.c). */
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
