/*
 * The operation interpreter shared by test_model.c and fuzz_wheel.c: runs a
 * program on twheel and on the reference model side by side and compares
 * everything they report (see interp.h).
 */
#include "interp.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "model.h"
#include <twheel/timer.h>

uint64_t interp_max_step = UINT64_MAX;

/* ---- small helpers ------------------------------------------------------ */

static uint64_t mix64(uint64_t x)
{
    x += UINT64_C(0x9e3779b97f4a7c15);
    x = (x ^ (x >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    x = (x ^ (x >> 27)) * UINT64_C(0x94d049bb133111eb);
    return x ^ (x >> 31);
}

static void *xrealloc(void *p, size_t n)
{
    void *q = realloc(p, n ? n : 1);
    if (!q) {
        fprintf(stderr, "twheel model test: out of memory\n");
        abort();
    }
    return q;
}

/* The fake clock stays below this (no overflow in the tick arithmetic). */
#define CLOCK_LIMIT (UINT64_C(1) << 62)
/* Callbacks stop creating timers past these (identically on both sides). */
#define SPAWN_FIRES 100000u
#define SPAWN_RECS 200000u
/* More callbacks than this in one operation means a timer never stops. */
#define RUNAWAY_FIRES 3000000u
#define BULK_MAX 6000u

void program_init(struct program *p)
{
    memset(p, 0, sizeof *p);
    p->cfg.tick_us = 1000;
    p->cfg.lock = TW_LOCK_NONE;
}

void program_free(struct program *p)
{
    free(p->ops);
    p->ops = NULL;
    p->n = p->cap = 0;
}

void program_push(struct program *p, const struct op *op)
{
    if (p->n == p->cap) {
        p->cap = p->cap ? 2 * p->cap : 64;
        p->ops = xrealloc(p->ops, p->cap * sizeof *p->ops);
    }
    p->ops[p->n++] = *op;
}

void program_copy(struct program *dst, const struct program *src)
{
    dst->cfg = src->cfg;
    dst->n = 0;
    for (size_t i = 0; i < src->n; i++)
        program_push(dst, &src->ops[i]);
}

/* ---- events ------------------------------------------------------------- */

enum ev_type {
    EV_CREATE,   /* x = created */
    EV_ADD,      /* h, x = got an id, y = errno when not */
    EV_FIRE,     /* h, x = tw_now() in the callback, y = anomaly bits */
    EV_RELEASE,  /* h, x = which hook, y = anomaly bits */
    EV_CANCEL,   /* h, x = result */
    EV_RESCHED,  /* h, x = result */
    EV_REMAIN,   /* h, x = tw_remaining */
    EV_ADVANCE,  /* x = result */
    EV_EXPIRE,   /* x = result, y = fake clock */
    EV_BUSY,     /* x = which call, y = result (from a callback) */
    EV_COUNT,    /* x = tw_count */
    EV_NOW,      /* x = tw_now */
    EV_NEXT,     /* x = exact next expiry, y = tw_next_expiry was a valid bound */
    EV_TIMEOUT,  /* x = tw_timeout_ms */
    EV_STAT,     /* x = field, y = value */
    EV_CHECK,    /* x = 1 when consistent (tw_check, byte accounting) */
    EV_NULL,     /* x = call, y = result, for a NULL wheel */
    EV_DESTROY,  /* x = result */
    EV_FINAL,    /* h, x = release count at the end (anomaly) */
    EV_LEAK,     /* x = bytes still allocated after destroy */
    EV_EARLY,    /* h, x = fake clock, y = when it was due (twheel side) */
    EV_LATE,     /* h, x = fake clock, y = when it was due (twheel side) */
    EV_TYPES
};

static const char *const ev_names[EV_TYPES] = {
    "create", "add", "FIRE", "release", "cancel", "reschedule", "remaining",
    "advance", "expire", "busy", "count", "now", "next_expiry", "timeout_ms",
    "stat", "check", "null", "destroy", "final", "leak",
    "EARLY by the clock", "LATE by the clock"};

static const char *const stat_names[] = {
    "now", "pending", "pending_due", "added", "fired",
    "cancelled", "rescheduled", "rebases", "bytes_match"};

struct ev {
    uint32_t type;
    uint32_t h;
    uint64_t x, y;
};

static const char *const op_names[OP_KINDS] = {
    "ADD", "PERIODIC", "ADD_EX", "CANCEL", "CANCEL0", "RESCHEDULE",
    "ADVANCE", "EXPIRE", "BULK", "MASS_CANCEL", "BAD", "PROBE", "CLOCK"};

/* ---- the two sides ------------------------------------------------------ */

struct world;

struct rec { /* one add attempt; the timer's user data */
    struct world *w;
    uint32_t h;
    uint32_t seed;
    uint64_t id;
    uint32_t budget; /* a periodic timer cancels itself at this firing */
    uint32_t fired;
    uint32_t released;
    uint8_t periodic;
    uint8_t relkind; /* 0 none, 1 release_a, 2 release_b */
    /* when the last add or reschedule armed it, for the clock rule */
    uint8_t armed, armed_undriven, settled;
    uint32_t armed_fired; /* `fired` then */
    uint32_t armed_epoch; /* world clock_epoch then */
    uint64_t armed_us, armed_delay, interval;
};

struct backend {
    const char *name;
    int (*create)(struct world *w, const struct prog_config *c);
    int (*destroy)(struct world *w);
    uint64_t (*add)(struct world *w, uint64_t delay, struct rec *r, int nullcb);
    uint64_t (*add_periodic)(struct world *w, uint64_t first,
                             uint64_t interval, struct rec *r);
    uint64_t (*add_ex)(struct world *w, uint64_t delay, uint64_t interval,
                       struct rec *r);
    int (*cancel)(struct world *w, uint64_t id);
    int (*reschedule)(struct world *w, uint64_t id, uint64_t delay);
    uint64_t (*remaining)(struct world *w, uint64_t id);
    int64_t (*advance)(struct world *w, uint64_t ticks);
    int64_t (*expire)(struct world *w);
    uint64_t (*next_expiry)(struct world *w);
    int32_t (*timeout_ms)(struct world *w);
    uint64_t (*now)(struct world *w);
    uint64_t (*count)(struct world *w);
    int (*check)(struct world *w);
    void (*stats)(struct world *w, uint64_t out[9]);
    void (*null_calls)(struct world *w);
};

struct world {
    const struct backend *be;
    void *impl;
    const struct prog_config *cfg;
    uint64_t clock; /* the fake clock */
    struct rec **recs;
    size_t nrecs, caprecs;
    struct ev *log;
    size_t nlog, caplog;
    uint64_t fires_in_op;
    uint64_t last_fast; /* tw_next_expiry's answer, as the last call saw it */
    struct rec *running;
    int destroying;
    /* what the program did to the wheel's drive mode: TW_DRIVE_*, starting
     * from the config; `advanced`: tw_advance ran, so the wheel may be
     * ahead of its clock; `epoch` moves when the clock goes back or the
     * wheel moves without it */
    int drive, advanced, in_expire;
    uint32_t clock_epoch;
    /* allocator accounting (twheel side) */
    uint64_t alloc_bytes, alloc_blocks;
};

static const struct program *current_program;

static void logev(struct world *w, uint32_t type, uint32_t h, uint64_t x,
                  uint64_t y)
{
    if (w->nlog == w->caplog) {
        w->caplog = w->caplog ? 2 * w->caplog : 256;
        w->log = xrealloc(w->log, w->caplog * sizeof *w->log);
    }
    w->log[w->nlog++] = (struct ev){type, h, x, y};
}

static uint64_t world_clock(void *context)
{
    const struct world *w = context;
    return w->clock;
}

static struct rec *new_rec(struct world *w, uint32_t seed, int periodic,
                           int relkind)
{
    if (w->nrecs == w->caprecs) {
        w->caprecs = w->caprecs ? 2 * w->caprecs : 256;
        w->recs = xrealloc(w->recs, w->caprecs * sizeof *w->recs);
    }
    struct rec *r = xrealloc(NULL, sizeof *r);
    memset(r, 0, sizeof *r);
    r->w = w;
    r->h = (uint32_t)w->nrecs;
    r->seed = seed;
    r->periodic = (uint8_t)periodic;
    r->relkind = (uint8_t)relkind;
    r->budget = 1 + (uint32_t)(mix64(seed) % 6);
    w->recs[w->nrecs++] = r;
    return r;
}

static void on_fire(struct rec *r, uint64_t id, int same_wheel);
static void on_release(struct rec *r, int kind);

static void release_a(void *user_data)
{
    on_release(user_data, 1);
}

static void release_b(void *user_data)
{
    on_release(user_data, 2);
}

static tw_release *const releases[3] = {NULL, release_a, release_b};

/* -- twheel -- */

static void *world_realloc(void *p, size_t n, void *context)
{
    struct world *w = context;
    /* a header remembers each block's size, so the test knows what the
       wheel holds and can compare it with its stats */
    const size_t hdr = 16;
    if (p) {
        unsigned char *b = (unsigned char *)p - hdr;
        size_t old;
        memcpy(&old, b, sizeof old);
        if (n == 0) {
            w->alloc_bytes -= old;
            w->alloc_blocks--;
            free(b);
            return NULL;
        }
        unsigned char *nb = realloc(b, hdr + n);
        if (!nb)
            return NULL;
        memcpy(nb, &n, sizeof n);
        w->alloc_bytes = w->alloc_bytes - old + n;
        return nb + hdr;
    }
    if (n == 0)
        return NULL;
    unsigned char *b = malloc(hdr + n);
    if (!b)
        return NULL;
    memcpy(b, &n, sizeof n);
    w->alloc_bytes += n;
    w->alloc_blocks++;
    return b + hdr;
}

/* The staging cases the programs reach on the twheel side (see interp.h),
 * told apart by where a timer's due tick lies from the operation's tick,
 * by timer.c's geometry (it only reads the public API to find out). */
static struct staging_reach staging_reach;

struct staging_reach interp_staging_reach(void)
{
    return staging_reach;
}

/* The level (0..3) of the slot being staged that a timer due at `due`
 * belongs to at tick `now`, or -1: adds file it at the level of the
 * highest bit in which due and now differ, and that level stages the slot
 * after the one now is in (its timers may already have moved down). */
static int staging_level(uint64_t now, uint64_t due)
{
    uint32_t expire = (uint32_t)due, time = (uint32_t)now, differ = expire ^ time;
    if (due <= now || due - now > TW_MAX_DELAY || differ <= 0xff)
        return -1;
    int level = (31 - __builtin_clz(differ) - 8) / 6;
    unsigned shift = 8 + 6 * (unsigned)level;
    return (((expire >> shift) - (time >> shift)) & (UINT32_MAX >> shift)) == 1 ? level : -1;
}

/* Counts what a pending timer's due tick says about the slot it is in. */
static void reach_timer(struct world *w, uint64_t id, uint64_t counts[4])
{
    uint64_t remaining = tw_remaining(w->impl, id);
    if (remaining == TW_NEVER)
        return;
    uint64_t now = tw_now(w->impl);
    int level = staging_level(now, now + remaining);
    if (level >= 0)
        counts[level]++;
}

/* A walk from `from` to `to` that passes a staging deadline (the tick by
 * which a level's next slot must have moved down) of some level. */
static void reach_walk(uint64_t from, uint64_t to, uint64_t pending)
{
    if (to <= from + 1 || pending == 0)
        return;
    for (unsigned level = 0; level < 4; level++) {
        unsigned shift = 8 + 6 * level;
        uint64_t lead = level ? UINT64_C(1) << (shift - 6) : 0;
        uint64_t deadline = (((from >> shift) + 1) << shift) - lead;
        if (deadline <= from)
            deadline += UINT64_C(1) << shift;
        if (deadline < to) /* strictly inside: the walk goes on past it */
            staging_reach.jump_past_deadline[level]++;
    }
    if ((from >> 32) != (to >> 32))
        staging_reach.wrap++;
}

static void tw_fire(tw_wheel *wheel, tw_id id, void *user_data)
{
    struct rec *r = user_data;
    if (r->periodic && wheel == r->w->impl) {
        uint64_t now = tw_now(wheel);
        int level = staging_level(now, now + r->interval);
        if (level >= 0)
            staging_reach.periodic_rearm[level]++;
    }
    on_fire(r, id, wheel == r->w->impl);
}

static int tw_b_create(struct world *w, const struct prog_config *c)
{
    struct tw_config tc;
    tw_config_init(&tc);
    tc.tick_us = c->tick_us;
    tc.lock = (int)c->lock;
    tc.clock_fn = world_clock;
    tc.clock_context = w;
    tc.realloc_fn = world_realloc;
    tc.alloc_context = w;
    tc.max_timers = c->max_timers;
    tc.start_tick = c->start_tick;
    tc.drive = (int)c->drive;
    w->impl = tw_create(&tc);
    return w->impl ? 0 : -errno;
}

static int tw_b_destroy(struct world *w)
{
    uint64_t staged[4] = {0, 0, 0, 0};
    for (size_t i = 0; i < w->nrecs; i++)
        if (w->recs[i]->id)
            reach_timer(w, w->recs[i]->id, staged);
    if (staged[0] + staged[1] + staged[2] + staged[3])
        staging_reach.destroy++;
    return tw_destroy(w->impl);
}

static uint64_t tw_b_add(struct world *w, uint64_t d, struct rec *r, int nullcb)
{
    uint64_t id = tw_add(w->impl, d, nullcb ? NULL : tw_fire, r);
    if (id)
        reach_timer(w, id, staging_reach.add);
    return id;
}

static uint64_t tw_b_add_periodic(struct world *w, uint64_t first,
                                  uint64_t interval, struct rec *r)
{
    uint64_t id = tw_add_periodic(w->impl, first, interval, tw_fire, r);
    if (id)
        reach_timer(w, id, staging_reach.add);
    return id;
}

static uint64_t tw_b_add_ex(struct world *w, uint64_t d, uint64_t interval,
                            struct rec *r)
{
    uint64_t id = tw_add_ex(w->impl, d, interval, tw_fire, releases[r->relkind], r);
    if (id)
        reach_timer(w, id, staging_reach.add);
    return id;
}

static int tw_b_cancel(struct world *w, uint64_t id)
{
    reach_timer(w, id, staging_reach.cancel);
    return tw_cancel(w->impl, id);
}

static int tw_b_reschedule(struct world *w, uint64_t id, uint64_t d)
{
    reach_timer(w, id, staging_reach.reschedule_from);
    int result = tw_reschedule(w->impl, id, d);
    if (result == 1)
        reach_timer(w, id, staging_reach.reschedule_into);
    return result;
}

static uint64_t tw_b_remaining(struct world *w, uint64_t id)
{
    return tw_remaining(w->impl, id);
}

static int64_t tw_b_advance(struct world *w, uint64_t t)
{
    uint64_t from = tw_now(w->impl);
    reach_walk(from, t > UINT64_MAX - from ? UINT64_MAX : from + t, tw_count(w->impl));
    return tw_advance(w->impl, t);
}

static int64_t tw_b_expire(struct world *w)
{
    uint64_t from = tw_now(w->impl), pending = tw_count(w->impl);
    int64_t ran = tw_expire(w->impl);
    reach_walk(from, tw_now(w->impl), pending);
    return ran;
}

/* tw_next_expiry may answer early (a lower bound, see timer.h), which the
 * model does not predict: it depends on which timers left which slot. So
 * the twheel side reports the exact figure (tw_stats.next_expiry_exact) and
 * hands its fast answer over to the model side, which runs the same calls
 * in the same order right after it, to check the bound against the model's
 * exact answer and to turn it into the milliseconds tw_timeout_ms must give. */
static uint64_t *fast_queue;
static size_t fast_pushed, fast_popped, fast_capacity;

static void fast_push(struct world *w, uint64_t ticks)
{
    if (fast_popped == fast_pushed)
        fast_popped = fast_pushed = 0;
    if (fast_pushed == fast_capacity) {
        fast_capacity = fast_capacity ? 2 * fast_capacity : 256;
        fast_queue = xrealloc(fast_queue, fast_capacity * sizeof *fast_queue);
    }
    fast_queue[fast_pushed++] = ticks;
    w->last_fast = ticks;
}

static uint64_t fast_pop(struct world *w)
{
    /* an empty queue means the logs have already diverged */
    w->last_fast = fast_popped < fast_pushed ? fast_queue[fast_popped++]
                                             : TW_NEVER - 1;
    return w->last_fast;
}

static uint64_t early_answers;

uint64_t interp_early_answers(void)
{
    return early_answers;
}

/* 1 when `fast` is a valid answer of tw_next_expiry for this exact one,
 * with `pending` timers in the wheel. timer.h allows an early answer only
 * from a slot holding more than 32 pending timers, so with 32 or fewer in
 * the whole wheel the answer must be exact. */
static uint64_t fast_ok(uint64_t fast, uint64_t exact, uint64_t pending)
{
    early_answers += fast < exact; /* called on the model's side only */
    if (pending <= 32 && fast != exact)
        return 0;
    return fast <= exact && (fast == 0) == (exact == 0) &&
           (fast == TW_NEVER) == (exact == TW_NEVER);
}

static uint64_t tw_b_next_expiry(struct world *w)
{
    struct tw_stats s;
    memset(&s, 0, sizeof s);
    s.size = sizeof s;
    fast_push(w, tw_next_expiry(w->impl));
    if (tw_get_stats(w->impl, &s) != 0)
        return TW_NEVER - 2;
    return s.next_expiry_exact;
}

static int32_t tw_b_timeout_ms(struct world *w)
{
    fast_push(w, tw_next_expiry(w->impl));
    return tw_timeout_ms(w->impl);
}

static uint64_t tw_b_now(struct world *w)
{
    return tw_now(w->impl);
}

static uint64_t tw_b_count(struct world *w)
{
    return tw_count(w->impl);
}

static int tw_b_check(struct world *w)
{
    return tw_check(w->impl);
}

static void tw_b_stats(struct world *w, uint64_t out[9])
{
    struct tw_stats s;
    memset(&s, 0, sizeof s);
    s.size = sizeof s;
    if (tw_get_stats(w->impl, &s) != 0) {
        memset(out, 0xff, 9 * sizeof *out);
        return;
    }
    out[0] = s.now;
    out[1] = s.pending;
    out[2] = s.pending_due;
    out[3] = s.added;
    out[4] = s.fired;
    out[5] = s.cancelled;
    out[6] = s.rescheduled;
    out[7] = s.rebases;
    out[8] = s.bytes == w->alloc_bytes;
}

static void tw_b_null_calls(struct world *w)
{
    logev(w, EV_NULL, 0, 0, (uint64_t)tw_cancel(NULL, 1));
    logev(w, EV_NULL, 0, 1, (uint64_t)tw_reschedule(NULL, 1, 1));
    logev(w, EV_NULL, 0, 2, (uint64_t)tw_advance(NULL, 1));
    logev(w, EV_NULL, 0, 3, (uint64_t)tw_expire(NULL));
    logev(w, EV_NULL, 0, 4, tw_next_expiry(NULL));
    logev(w, EV_NULL, 0, 5, tw_remaining(NULL, 1));
    logev(w, EV_NULL, 0, 6, tw_count(NULL));
    logev(w, EV_NULL, 0, 7, tw_now(NULL));
    errno = 0;
    logev(w, EV_NULL, 0, 8, tw_add(NULL, 1, tw_fire, NULL));
    logev(w, EV_NULL, 0, 9, (uint64_t)errno);
    logev(w, EV_NULL, 0, 10, (uint64_t)tw_timeout_ms(NULL));
}

static const struct backend wheel_backend = {
    "twheel",        tw_b_create,     tw_b_destroy,    tw_b_add,
    tw_b_add_periodic, tw_b_add_ex,   tw_b_cancel,     tw_b_reschedule,
    tw_b_remaining,  tw_b_advance,    tw_b_expire,     tw_b_next_expiry,
    tw_b_timeout_ms, tw_b_now,        tw_b_count,      tw_b_check,
    tw_b_stats,      tw_b_null_calls,
};

/* -- the reference -- */

static void m_fire(struct model *m, uint64_t id, void *user_data)
{
    struct rec *r = user_data;
    on_fire(r, id, m == r->w->impl);
}

static int m_create(struct world *w, const struct prog_config *c)
{
    struct model_config mc;
    memset(&mc, 0, sizeof mc);
    mc.start_tick = c->start_tick;
    mc.tick_us = c->tick_us;
    mc.max_timers = c->max_timers;
    mc.clock_fn = world_clock;
    mc.clock_context = w;
    mc.drive = (int)c->drive;
    w->impl = model_create(&mc);
    return w->impl ? 0 : -errno;
}

static int m_destroy(struct world *w)
{
    return model_destroy(w->impl);
}

static uint64_t m_add(struct world *w, uint64_t d, struct rec *r, int nullcb)
{
    return model_add(w->impl, d, nullcb ? NULL : m_fire, r);
}

static uint64_t m_add_periodic(struct world *w, uint64_t first,
                               uint64_t interval, struct rec *r)
{
    return model_add_periodic(w->impl, first, interval, m_fire, r);
}

static uint64_t m_add_ex(struct world *w, uint64_t d, uint64_t interval,
                         struct rec *r)
{
    return model_add_ex(w->impl, d, interval, m_fire, releases[r->relkind], r);
}

static int m_cancel(struct world *w, uint64_t id)
{
    return model_cancel(w->impl, id);
}

static int m_reschedule(struct world *w, uint64_t id, uint64_t d)
{
    return model_reschedule(w->impl, id, d);
}

static uint64_t m_remaining(struct world *w, uint64_t id)
{
    return model_remaining(w->impl, id);
}

static int64_t m_advance(struct world *w, uint64_t t)
{
    return model_advance(w->impl, t);
}

static int64_t m_expire(struct world *w)
{
    return model_expire(w->impl);
}

static uint64_t m_next_expiry(struct world *w)
{
    (void)fast_pop(w);
    return model_next_expiry(w->impl);
}

static int32_t m_timeout_ms(struct world *w)
{
    return model_timeout_ms_for(w->impl, fast_pop(w));
}

static uint64_t m_now(struct world *w)
{
    return model_now(w->impl);
}

static uint64_t m_count(struct world *w)
{
    return model_count(w->impl);
}

static int m_check(struct world *w)
{
    return model_check(w->impl);
}

static void m_stats(struct world *w, uint64_t out[9])
{
    struct model_stats s;
    model_get_stats(w->impl, &s);
    out[0] = s.now;
    out[1] = s.pending;
    out[2] = s.pending_due;
    out[3] = s.added;
    out[4] = s.fired;
    out[5] = s.cancelled;
    out[6] = s.rescheduled;
    out[7] = s.rebases;
    out[8] = 1;
}

static void m_null_calls(struct world *w)
{
    logev(w, EV_NULL, 0, 0, (uint64_t)model_cancel(NULL, 1));
    logev(w, EV_NULL, 0, 1, (uint64_t)model_reschedule(NULL, 1, 1));
    logev(w, EV_NULL, 0, 2, (uint64_t)model_advance(NULL, 1));
    logev(w, EV_NULL, 0, 3, (uint64_t)model_expire(NULL));
    logev(w, EV_NULL, 0, 4, model_next_expiry(NULL));
    logev(w, EV_NULL, 0, 5, model_remaining(NULL, 1));
    logev(w, EV_NULL, 0, 6, model_count(NULL));
    logev(w, EV_NULL, 0, 7, model_now(NULL));
    errno = 0;
    logev(w, EV_NULL, 0, 8, model_add(NULL, 1, m_fire, NULL));
    logev(w, EV_NULL, 0, 9, (uint64_t)errno);
    logev(w, EV_NULL, 0, 10, (uint64_t)-1); /* timeout_ms(NULL) is -1 */
}

static const struct backend model_backend = {
    "model",      m_create,       m_destroy,    m_add,
    m_add_periodic, m_add_ex,     m_cancel,     m_reschedule,
    m_remaining,  m_advance,      m_expire,     m_next_expiry,
    m_timeout_ms, m_now,          m_count,      m_check,
    m_stats,      m_null_calls,
};

/* ---- resolving tick values ---------------------------------------------- */

static const unsigned boundary_shift[5] = {8, 14, 20, 26, 32};

/* V_BOUND: v bits 0..2 pick s = boundary_shift[], bit 3 measures from the start
 * tick instead of from 0, bits 8..15 add that many more 2^s, bits 16..47 are
 * a signed offset. */
static uint64_t resolve(struct world *w, struct val v)
{
    int64_t off = (int64_t)v.v;
    uint64_t base;
    switch (v.mode) {
    case V_BOUND: {
        unsigned s = boundary_shift[(v.v & 7) % 5];
        uint64_t pos = w->be->now(w);
        if (v.v & 8)
            pos -= w->cfg->start_tick;
        uint64_t unit = UINT64_C(1) << s;
        base = unit - (pos & (unit - 1)) + ((v.v >> 8) & 0xff) * unit;
        off = (int32_t)(uint32_t)(v.v >> 16);
        break;
    }
    case V_MAX:
        base = TW_MAX_DELAY;
        break;
    case V_NEXT:
        base = w->be->next_expiry(w);
        if (base == TW_NEVER)
            base = 0;
        break;
    default:
        return v.v;
    }
    if (off < 0 && (uint64_t)-(off + 1) >= base)
        return 0;
    return base + (uint64_t)off;
}

/* EV_NEXT: the exact figure, and whether tw_next_expiry's fast answer was
 * a valid bound for it, judged on the model's side against the model's
 * exact answer (the twheel side logs 1: a bad bound is then a mismatch). */
static void log_next(struct world *w)
{
    uint64_t exact = w->be->next_expiry(w);
    logev(w, EV_NEXT, 0, exact,
          w->be == &wheel_backend ? 1
                                  : fast_ok(w->last_fast, exact, w->be->count(w)));
}

/* ---- callbacks ---------------------------------------------------------- */

static struct rec *pick(struct world *w, uint64_t sel, const struct rec *not)
{
    if (w->nrecs == 0)
        return NULL;
    size_t i;
    if ((sel & 3) == 0) {
        i = (size_t)((sel >> 2) % w->nrecs);
    } else {
        size_t span = w->nrecs < 24 ? w->nrecs : 24;
        i = w->nrecs - 1 - (size_t)((sel >> 2) % span);
    }
    return w->recs[i] == not ? NULL : w->recs[i];
}

/* A delay a callback asks for. */
static uint64_t cb_delay(struct world *w, uint64_t h)
{
    uint64_t r = h >> 8;
    switch (h & 7) {
    case 0:
        return 0;
    case 1:
    case 2:
        return 1 + r % 4;
    case 3:
    case 4:
        return 1 + r % 300;
    case 5:
        return r % 70000;
    case 6: {
        int off = (int)((r >> 3) % 5) - 2;
        struct val v = {V_BOUND, r % 5 | (uint64_t)(uint32_t)off << 16};
        return resolve(w, v);
    }
    default:
        return (r & 1) ? r % (UINT64_C(1) << 27) : TW_MAX_DELAY - (r >> 1) % 3;
    }
}

static uint64_t cb_interval(uint64_t h)
{
    switch (h & 3) {
    case 0:
        return 1 + (h >> 8) % 3;
    case 1:
    case 2:
        return 1 + (h >> 8) % 300;
    default:
        return 1 + (h >> 8) % 100000;
    }
}

/* ---- the clock rule ------------------------------------------------------
 * Checked on the twheel side only, against the fake clock: this is the
 * promise itself, not a comparison with the model. */

static uint64_t saturating_mul(uint64_t a, uint64_t b)
{
    return b && a > UINT64_MAX / b ? UINT64_MAX : a * b;
}

static uint64_t saturating_add(uint64_t a, uint64_t b)
{
    return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

/* An add or reschedule of r with `delay` succeeded just now. */
static void arm(struct world *w, struct rec *r, uint64_t delay, uint64_t interval)
{
    r->armed = 1;
    r->armed_undriven = w->drive == TW_DRIVE_AUTO;
    r->armed_fired = r->fired;
    r->armed_epoch = w->clock_epoch;
    r->armed_us = w->clock;
    r->armed_delay = delay;
    r->interval = interval;
}

/* When r's next firing is due by the clock: `delay` (then k intervals)
 * whole ticks after the call that armed it. A periodic timer armed with
 * delay 0 keeps the grid of the tick that call fell in: its later firings
 * may come less than a tick sooner (timer.h). */
static uint64_t due_by_clock(const struct world *w, const struct rec *r)
{
    uint64_t k = r->fired - r->armed_fired;
    uint64_t ticks = saturating_add(r->armed_delay, saturating_mul(k, r->interval));
    uint64_t due = saturating_add(r->armed_us, saturating_mul(ticks, w->cfg->tick_us));
    if (r->armed_delay == 0 && k > 0)
        due -= w->cfg->tick_us - 1;
    return due;
}

static struct clock_rule_counts clock_rule_counts;

struct clock_rule_counts interp_clock_rule_counts(void)
{
    return clock_rule_counts;
}

static int clock_rule_applies(const struct world *w, const struct rec *r)
{
    return w->be == &wheel_backend && w->drive == TW_DRIVE_CLOCK && r->armed &&
           r->armed_epoch == w->clock_epoch;
}

/* After a tw_expire that ran: a one-shot armed on the driven wheel whose
 * delay plus one tick (the rounding up to a tick boundary) has passed by
 * the clock must have run. */
static void check_not_late(struct world *w)
{
    if (w->be != &wheel_backend || w->advanced)
        return;
    for (size_t i = 0; i < w->nrecs; i++) {
        struct rec *r = w->recs[i];
        if (r->periodic || r->fired || r->settled || r->id == 0 ||
            r->armed_undriven || !clock_rule_applies(w, r))
            continue;
        uint64_t due = due_by_clock(w, r);
        clock_rule_counts.pending++;
        if (saturating_add(due, w->cfg->tick_us) > w->clock)
            continue;
        if (w->be->remaining(w, r->id) == TW_NEVER)
            r->settled = 1; /* cancelled */
        else
            logev(w, EV_LATE, r->h, w->clock, due);
    }
}

static int resched(struct world *w, struct rec *r, uint64_t id, uint64_t delay)
{
    int result = w->be->reschedule(w, id, delay);
    if (result == 1)
        arm(w, r, delay, r->interval);
    return result;
}

static void add_one(struct world *w, uint64_t delay, uint64_t interval,
                    int how, uint32_t seed)
{
    /* how: 0 tw_add, 1 tw_add_periodic, 2 tw_add_ex */
    int relkind = how == 2 ? (int)(seed % 5) % 3 : 0; /* 0, 1 or 2 */
    struct rec *r = new_rec(w, seed, interval != 0, relkind);
    errno = 0;
    uint64_t id;
    if (how == 0)
        id = w->be->add(w, delay, r, 0);
    else if (how == 1)
        id = w->be->add_periodic(w, delay, interval, r);
    else
        id = w->be->add_ex(w, delay, interval, r);
    r->id = id;
    logev(w, EV_ADD, r->h, id != 0, id ? 0 : (uint64_t)errno);
    if (id)
        arm(w, r, delay, interval);
}

static void on_fire(struct rec *r, uint64_t id, int same_wheel)
{
    struct world *w = r->w;
    uint64_t anomaly = (uint64_t)(id != r->id) | (uint64_t)(r->released != 0) << 1 |
                       (uint64_t)(!r->periodic && r->fired) << 2 |
                       (uint64_t)(w->running != NULL) << 3 |
                       (uint64_t)!same_wheel << 4 | (uint64_t)w->destroying << 5;
    logev(w, EV_FIRE, r->h, w->be->now(w), anomaly);
    if (w->in_expire && clock_rule_applies(w, r)) {
        clock_rule_counts.firings++;
        if (w->clock < due_by_clock(w, r))
            logev(w, EV_EARLY, r->h, w->clock, due_by_clock(w, r));
    }
    r->fired++;
    if (++w->fires_in_op > RUNAWAY_FIRES) {
        fprintf(stderr, "%s: over %u callbacks in one operation; program:\n",
                w->be->name, RUNAWAY_FIRES);
        if (current_program)
            program_print(stderr, current_program, ";");
        fprintf(stderr, "\n");
        abort();
    }
    if (w->running)
        return;
    w->running = r;

    uint64_t h = mix64(((uint64_t)r->seed << 32) ^ r->fired);
    if (r->periodic && r->fired >= r->budget) {
        logev(w, EV_CANCEL, r->h, (uint64_t)w->be->cancel(w, id), 0);
        w->running = NULL;
        return;
    }
    int nact = 0;
    if (w->fires_in_op < SPAWN_FIRES && w->nrecs < SPAWN_RECS) {
        static const int table[16] = {0, 0, 0, 0, 0, 0, 0, 0,
                                      0, 1, 1, 1, 1, 2, 2, 3};
        nact = table[h & 15];
    }
    for (int a = 0; a < nact; a++) {
        h = mix64(h);
        uint64_t h2 = mix64(h ^ 0x5555);
        uint32_t child = (uint32_t)(h2 >> 32);
        struct rec *o;
        switch ((h >> 4) % 32) {
        case 0: case 1: case 2: case 3: case 4:
            add_one(w, cb_delay(w, h2), 0, 0, child);
            break;
        case 5: case 6: case 7:
            add_one(w, cb_delay(w, h2),
                    (h2 >> 40) % 4 == 0 ? cb_interval(h2 >> 3) : 0, 2, child);
            break;
        case 8:
            add_one(w, (h2 >> 40) % 3 == 0 ? 0 : cb_delay(w, h2),
                    cb_interval(h2 >> 3), 1, child);
            break;
        case 9: case 10: case 11: case 12: case 13:
            if ((o = pick(w, h2, r)) != NULL)
                logev(w, EV_CANCEL, o->h, (uint64_t)w->be->cancel(w, o->id), 0);
            break;
        case 14: case 15: case 16: case 17:
            if ((o = pick(w, h2, r)) != NULL)
                logev(w, EV_RESCHED, o->h,
                      (uint64_t)resched(w, o, o->id, cb_delay(w, h2 >> 5)), 0);
            break;
        case 18: case 19: case 20:
            logev(w, EV_RESCHED, r->h, (uint64_t)resched(w, r, id, cb_delay(w, h2)), 0);
            break;
        case 21: case 22:
            logev(w, EV_CANCEL, r->h, (uint64_t)w->be->cancel(w, id), 0);
            break;
        case 23:
            logev(w, EV_BUSY, 0, 0, (uint64_t)w->be->advance(w, h2 % 2));
            logev(w, EV_BUSY, 0, 1, (uint64_t)w->be->expire(w));
            /* tw_destroy from a callback really destroys the wheel (a
             * shutdown timer): tests/unit/test_lifecycle.c covers it */
            break;
        case 24: case 25: case 26:
            logev(w, EV_COUNT, 0, w->be->count(w), 0);
            if ((o = pick(w, h2, r)) != NULL)
                logev(w, EV_REMAIN, o->h, w->be->remaining(w, o->id), 0);
            logev(w, EV_NOW, 0, w->be->now(w), 0);
            log_next(w);
            logev(w, EV_REMAIN, r->h, w->be->remaining(w, id), 0);
            break;
        case 27:
            logev(w, EV_CANCEL, UINT32_MAX, (uint64_t)w->be->cancel(w, 0), 0);
            break;
        case 28: /* an old, usually stale id */
            if ((o = pick(w, h2 & ~UINT64_C(3), r)) != NULL)
                logev(w, EV_CANCEL, o->h, (uint64_t)w->be->cancel(w, o->id), 0);
            break;
        case 29:
            if (w->nrecs < 200)
                logev(w, EV_CHECK, 1, w->be->check(w) == 0, 0);
            break;
        default:
            add_one(w, cb_delay(w, h2 | 6), 0, 0, child);
            break;
        }
    }
    w->running = NULL;
}

static void on_release(struct rec *r, int kind)
{
    struct world *w = r->w;
    uint64_t anomaly = (uint64_t)(r->released != 0) | (uint64_t)(r->id == 0) << 1 |
                       (uint64_t)(kind != r->relkind) << 2 |
                       (uint64_t)(w->running == r && !r->periodic) << 3;
    logev(w, EV_RELEASE, r->h, (uint64_t)kind, anomaly);
    r->released++;
    if (w->destroying && (w->cfg->flags & PF_ADD_IN_RELEASE) && (r->seed & 1)) {
        struct rec *n = new_rec(w, r->seed + 1, 0, 0);
        errno = 0;
        n->id = w->be->add(w, 1, n, 0);
        logev(w, EV_ADD, n->h, n->id != 0, n->id ? 0 : (uint64_t)errno);
    }
}

/* ---- running a program -------------------------------------------------- */

static void probe_remaining(struct world *w, uint64_t sel)
{
    struct rec *o = pick(w, sel, NULL);
    if (o)
        logev(w, EV_REMAIN, o->h, w->be->remaining(w, o->id), 0);
}

/* After each operation. The full invariant check walks every queue and
 * the whole pool (at least a chunk of 1024 nodes), so on long programs it
 * runs after the first 4 operations, then after every 8th (every 64th
 * past 4096 timers) and after the last: a broken invariant is still caught
 * a few operations later, and the shrinker brings the program down to
 * where it breaks. Both sides decide alike: their counts are compared
 * first. */
static void probes(struct world *w, size_t index, int last)
{
    uint64_t count = w->be->count(w);
    size_t every = count <= 4096 ? 8 : 64;
    logev(w, EV_NOW, 0, w->be->now(w), 0);
    logev(w, EV_COUNT, 0, count, 0);
    log_next(w);
    logev(w, EV_TIMEOUT, 0, (uint64_t)(int64_t)w->be->timeout_ms(w), 0);
    if (index < 4 || index % every == every - 1 || last)
        logev(w, EV_CHECK, 0, w->be->check(w) == 0, 0);
    uint64_t s[9];
    w->be->stats(w, s);
    for (uint64_t i = 0; i < 9; i++)
        logev(w, EV_STAT, 0, i, s[i]);
    probe_remaining(w, 1 + 4 * (uint64_t)index);
    probe_remaining(w, mix64(index) & ~UINT64_C(3));
}

/* OP_EXPIRE and OP_CLOCK: the fake clock moves forward (mode 0) or back. */
static void move_clock(struct world *w, struct val step)
{
    uint64_t a;
    if (step.mode == 0) {
        a = step.v < CLOCK_LIMIT - w->clock ? step.v : CLOCK_LIMIT - w->clock;
        if (interp_max_step < UINT64_MAX && a / w->cfg->tick_us > interp_max_step)
            a = interp_max_step * w->cfg->tick_us;
        w->clock += a;
    } else {
        a = step.v < w->clock ? step.v : w->clock;
        w->clock -= a;
        w->clock_epoch += a != 0;
    }
}

static void exec_op(struct world *w, const struct op *op, size_t index)
{
    const struct backend *be = w->be;
    struct rec *o;
    uint64_t a, b;
    w->fires_in_op = 0;
    switch (op->kind) {
    case OP_ADD:
        add_one(w, resolve(w, op->a), 0, 0, op->seed);
        break;
    case OP_PERIODIC:
        a = resolve(w, op->a);
        add_one(w, a, resolve(w, op->b), 1, op->seed);
        break;
    case OP_ADD_EX: {
        a = resolve(w, op->a);
        b = resolve(w, op->b);
        struct rec *r = new_rec(w, op->seed, b != 0, (int)(op->n % 3));
        errno = 0;
        r->id = be->add_ex(w, a, b, r);
        logev(w, EV_ADD, r->h, r->id != 0, r->id ? 0 : (uint64_t)errno);
        if (r->id)
            arm(w, r, a, b);
        break;
    }
    case OP_CANCEL:
        if ((o = pick(w, op->seed, NULL)) != NULL) {
            logev(w, EV_CANCEL, o->h, (uint64_t)be->cancel(w, o->id), 0);
            if (op->n & 1)
                logev(w, EV_CANCEL, o->h, (uint64_t)be->cancel(w, o->id), 0);
        }
        break;
    case OP_CANCEL_ZERO:
        logev(w, EV_CANCEL, UINT32_MAX, (uint64_t)be->cancel(w, 0), 0);
        break;
    case OP_RESCHEDULE:
        if ((o = pick(w, op->seed, NULL)) != NULL) {
            a = resolve(w, op->a);
            if (a > TW_MAX_DELAY) {
                /* -ERANGE for a live timer; for a dead one both 0 and
                   -ERANGE would be defensible, so only ask when live */
                uint64_t left = be->remaining(w, o->id);
                logev(w, EV_REMAIN, o->h, left, 0);
                if (left == TW_NEVER)
                    break;
            }
            logev(w, EV_RESCHED, o->h, (uint64_t)resched(w, o, o->id, a), 0);
        }
        break;
    case OP_ADVANCE:
        a = resolve(w, op->a);
        if (a > interp_max_step)
            a = interp_max_step;
        logev(w, EV_ADVANCE, 0, (uint64_t)be->advance(w, a), 0);
        if (w->drive == TW_DRIVE_AUTO)
            w->drive = TW_DRIVE_TICKS;
        /* the wheel moved without its clock: the timers it has run ahead
           of no longer count by the clock, and later ones count from a
           tw_now() that may be ahead of it (no lateness bound) */
        w->advanced = 1;
        w->clock_epoch++;
        break;
    case OP_EXPIRE: {
        move_clock(w, op->b);
        if (w->drive == TW_DRIVE_AUTO)
            w->drive = TW_DRIVE_CLOCK;
        w->in_expire = 1;
        int64_t ran = be->expire(w);
        w->in_expire = 0;
        logev(w, EV_EXPIRE, 0, (uint64_t)ran, w->clock);
        if (ran >= 0)
            check_not_late(w);
        break;
    }
    case OP_CLOCK:
        move_clock(w, op->b);
        break;
    case OP_BULK_ADD: {
        uint64_t base = resolve(w, op->a);
        uint32_t n = op->n % (BULK_MAX + 1);
        for (uint32_t i = 0; i < n; i++) {
            uint64_t d = (base + (uint64_t)i * op->b.v) % (TW_MAX_DELAY + 1);
            uint32_t seed = op->seed + i;
            switch ((op->seed >> 8) % 4) {
            case 0:
                add_one(w, d, 0, 0, seed);
                break;
            case 1:
                add_one(w, d, 0, 2, seed);
                break;
            default:
                if (i % 4 == 3)
                    add_one(w, d % 1000, 1 + d % 5000, 1, seed);
                else
                    add_one(w, d, 0, (int)(i % 3 == 1) * 2, seed);
            }
        }
        break;
    }
    case OP_MASS_CANCEL: {
        size_t step = 1 + op->n % 4;
        size_t n = w->nrecs;
        for (size_t i = op->seed % step; i < n; i += step)
            if (w->recs[i]->id)
                logev(w, EV_CANCEL, (uint32_t)i,
                      (uint64_t)be->cancel(w, w->recs[i]->id), 0);
        break;
    }
    case OP_BAD: {
        const uint64_t over = TW_MAX_DELAY + 1 + op->n % 3;
        switch (op->seed % 9) {
        case 0: { /* NULL callback */
            struct rec *r = new_rec(w, op->seed, 0, 0);
            errno = 0;
            r->id = be->add(w, 5, r, 1);
            logev(w, EV_ADD, r->h, r->id != 0, r->id ? 0 : (uint64_t)errno);
            break;
        }
        case 1:
            add_one(w, over, 0, 0, op->seed);
            break;
        case 2:
            add_one(w, op->n % 10, 0, 1, op->seed); /* interval 0 */
            break;
        case 3:
            add_one(w, over, 5, 1, op->seed);
            break;
        case 4:
            add_one(w, 0, over, 1, op->seed);
            break;
        case 5:
            add_one(w, 5, over, 2, op->seed);
            break;
        case 6:
            if ((o = pick(w, op->seed >> 4, NULL)) != NULL) {
                uint64_t left = be->remaining(w, o->id);
                logev(w, EV_REMAIN, o->h, left, 0);
                if (left != TW_NEVER) {
                    logev(w, EV_RESCHED, o->h,
                          (uint64_t)be->reschedule(w, o->id, over), 0);
                    logev(w, EV_REMAIN, o->h, be->remaining(w, o->id), 0);
                }
            }
            break;
        case 7:
            if ((o = pick(w, op->seed >> 4, NULL)) != NULL) {
                logev(w, EV_CANCEL, o->h, (uint64_t)be->cancel(w, o->id), 0);
                logev(w, EV_CANCEL, o->h, (uint64_t)be->cancel(w, o->id), 0);
                logev(w, EV_RESCHED, o->h, (uint64_t)resched(w, o, o->id, 1), 0);
            }
            break;
        default:
            be->null_calls(w);
        }
        break;
    }
    case OP_PROBE:
        for (uint32_t i = 0; i < 4; i++)
            probe_remaining(w, mix64(op->seed + i));
        break;
    default:
        break;
    }
    probes(w, index, index + 1 == current_program->n);
}

static int ev_cmp(const void *pa, const void *pb)
{
    const struct ev *a = pa, *b = pb;
    if (a->type != b->type)
        return a->type < b->type ? -1 : 1;
    if (a->h != b->h)
        return a->h < b->h ? -1 : 1;
    if (a->x != b->x)
        return a->x < b->x ? -1 : 1;
    if (a->y != b->y)
        return a->y < b->y ? -1 : 1;
    return 0;
}

static void exec_destroy(struct world *w)
{
    w->fires_in_op = 0;
    w->destroying = 1;
    logev(w, EV_DESTROY, 0, (uint64_t)w->be->destroy(w), 0);
    w->impl = NULL;
    /* release order at destroy is unspecified */
    qsort(w->log, w->nlog, sizeof *w->log, ev_cmp);
    for (size_t i = 0; i < w->nrecs; i++) {
        const struct rec *r = w->recs[i];
        uint32_t want = r->id != 0 && r->relkind != 0;
        if (r->released != want)
            logev(w, EV_FINAL, r->h, r->released, want);
    }
    if (w->alloc_bytes || w->alloc_blocks)
        logev(w, EV_LEAK, 0, w->alloc_bytes, w->alloc_blocks);
}

static void world_free(struct world *w)
{
    if (w->impl) {
        w->destroying = 1;
        w->be->destroy(w);
    }
    for (size_t i = 0; i < w->nrecs; i++)
        free(w->recs[i]);
    free(w->recs);
    free(w->log);
}

static int format_ev(char *out, size_t len, const struct ev *e)
{
    if (e->type == EV_STAT)
        return snprintf(out, len, "stat %s = %" PRIu64,
                        e->x < 9 ? stat_names[e->x] : "?", e->y);
    char h[16] = "";
    if (e->h != 0 || e->type == EV_ADD || e->type == EV_FIRE ||
        e->type == EV_RELEASE || e->type == EV_CANCEL ||
        e->type == EV_RESCHED || e->type == EV_REMAIN)
        snprintf(h, sizeof h, e->h == UINT32_MAX ? " id0" : " #%u", e->h);
    return snprintf(out, len, "%s%s x=%" PRIu64 " (%" PRId64 ") y=%" PRIu64,
                    e->type < EV_TYPES ? ev_names[e->type] : "?", h, e->x,
                    (int64_t)e->x, e->y);
}

static int compare(struct world *real, struct world *ref, long index,
                   const struct op *op, struct failure *f)
{
    size_t n = real->nlog < ref->nlog ? real->nlog : ref->nlog;
    size_t i = 0;
    while (i < n && memcmp(&real->log[i], &ref->log[i], sizeof real->log[i]) == 0)
        i++;
    if (i == n && real->nlog == ref->nlog) {
        real->nlog = ref->nlog = 0;
        return 0;
    }
    f->op = index;
    f->kind = (i < ref->nlog ? ref->log[i].type : EV_TYPES) << 8 |
              (i < real->nlog ? real->log[i].type : EV_TYPES);
    int len = 0;
    size_t cap = sizeof f->text;
    char what[160];
    if (op)
        snprintf(what, sizeof what, "%s %u:%" PRIu64 " %u:%" PRIu64 " %" PRIu32 " %" PRIu32,
                 op->kind < OP_KINDS ? op_names[op->kind] : "?", op->a.mode, op->a.v,
                 op->b.mode, op->b.v, op->seed, op->n);
    else
        snprintf(what, sizeof what, index < 0 ? "create" : "destroy");
    len += snprintf(f->text + len, cap - (size_t)len,
                    "twheel and the model disagree at operation %ld (%s), "
                    "event %zu; 'model' is what tests/model/SEMANTICS.md expects\n",
                    index, what, i);
    /* TWHEEL_VERBOSE=1 shows every event of that operation */
    int verbose = getenv("TWHEEL_VERBOSE") != NULL;
    size_t from = i > 12 && !verbose ? i - 12 : 0;
    size_t to = verbose ? (real->nlog > ref->nlog ? real->nlog : ref->nlog) : i + 6;
    for (size_t k = from; k < to && (size_t)len < cap - 200; k++) {
        char a[160] = "-", b[160] = "-";
        if (k < ref->nlog)
            format_ev(b, sizeof b, &ref->log[k]);
        if (k < real->nlog)
            format_ev(a, sizeof a, &real->log[k]);
        len += snprintf(f->text + len, cap - (size_t)len, "%c %4zu model: %-44s twheel: %s\n",
                        k == i ? '>' : ' ', k, b, a);
    }
    return 1;
}

int interp_run(const struct program *p, struct failure *f)
{
    struct world real, ref;
    memset(&real, 0, sizeof real);
    memset(&ref, 0, sizeof ref);
    real.be = &wheel_backend;
    ref.be = &model_backend;
    real.cfg = ref.cfg = &p->cfg;
    real.clock = ref.clock = p->cfg.clock0;
    real.drive = ref.drive = (int)p->cfg.drive;
    f->op = -1;
    f->text[0] = 0;
    const struct program *saved = current_program;
    current_program = p;
    fast_pushed = fast_popped = 0;

    int bad = 0;
    int rc_real = real.be->create(&real, &p->cfg);
    int rc_ref = ref.be->create(&ref, &p->cfg);
    logev(&real, EV_CREATE, 0, (uint64_t)rc_real, 0);
    logev(&ref, EV_CREATE, 0, (uint64_t)rc_ref, 0);
    if (rc_real == 0)
        probes(&real, 0, 1);
    if (rc_ref == 0)
        probes(&ref, 0, 1);
    bad = compare(&real, &ref, -1, NULL, f);
    for (size_t i = 0; !bad && rc_real == 0 && i < p->n; i++) {
        exec_op(&real, &p->ops[i], i);
        exec_op(&ref, &p->ops[i], i);
        bad = compare(&real, &ref, (long)i, &p->ops[i], f);
    }
    if (!bad && rc_real == 0) {
        exec_destroy(&real);
        exec_destroy(&ref);
        bad = compare(&real, &ref, (long)p->n, NULL, f);
    }
    world_free(&real);
    world_free(&ref);
    current_program = saved;
    return bad;
}

/* ---- text form ---------------------------------------------------------- */

void program_print(FILE *out, const struct program *p, const char *sep)
{
    fprintf(out, "cfg %" PRIu64 " %" PRIu32 " %" PRIu32 " %" PRIu64 " %" PRIu64
                 " %" PRIu32 " %" PRIu32 "%s",
            p->cfg.start_tick, p->cfg.tick_us, p->cfg.lock, p->cfg.max_timers,
            p->cfg.clock0, p->cfg.flags, p->cfg.drive, sep);
    for (size_t i = 0; i < p->n; i++) {
        const struct op *o = &p->ops[i];
        fprintf(out, "%s %u:%" PRIu64 " %u:%" PRIu64 " %" PRIu32 " %" PRIu32 "%s",
                o->kind < OP_KINDS ? op_names[o->kind] : "?", o->a.mode, o->a.v,
                o->b.mode, o->b.v, o->seed, o->n, sep);
    }
}

int program_parse(struct program *p, const char *text)
{
    program_init(p);
    const char *s = text;
    char name[32];
    int used = 0;
    if (sscanf(s, " cfg %" SCNu64 " %" SCNu32 " %" SCNu32 " %" SCNu64 " %" SCNu64
                  " %" SCNu32 "%n",
               &p->cfg.start_tick, &p->cfg.tick_us, &p->cfg.lock,
               &p->cfg.max_timers, &p->cfg.clock0, &p->cfg.flags, &used) != 6)
        return -1;
    s += used;
    if (sscanf(s, " %" SCNu32 "%n", &p->cfg.drive, &used) == 1) /* optional */
        s += used;
    for (;;) {
        while (*s == ';' || *s == ' ' || *s == '\n' || *s == '\t' || *s == '\r')
            s++;
        if (!*s)
            return 0;
        struct op o;
        unsigned am, bm;
        memset(&o, 0, sizeof o);
        if (sscanf(s, "%31s %u:%" SCNu64 " %u:%" SCNu64 " %" SCNu32 " %" SCNu32 "%n",
                   name, &am, &o.a.v, &bm, &o.b.v, &o.seed, &o.n, &used) != 7)
            return -1;
        s += used;
        o.a.mode = (uint8_t)am;
        o.b.mode = (uint8_t)bm;
        o.kind = OP_KINDS;
        for (int k = 0; k < OP_KINDS; k++)
            if (strcmp(name, op_names[k]) == 0)
                o.kind = (uint8_t)k;
        if (o.kind == OP_KINDS || am >= V_MODES || bm >= V_MODES)
            return -1;
        program_push(p, &o);
    }
}

/* ---- shrinking ---------------------------------------------------------- */

void program_shrink(struct program *p, size_t max_runs)
{
    struct failure *f = xrealloc(NULL, sizeof *f);
    struct program t;
    program_init(&t);
    size_t runs = 0;
    if (!interp_run(p, f))
        goto out;
    runs++;
    const uint32_t kind = f->kind;
    if (f->op >= 0 && (size_t)f->op < p->n)
        p->n = (size_t)f->op + 1;
    for (size_t chunk = p->n / 2 ? p->n / 2 : 1;; chunk = chunk / 2 ? chunk / 2 : 1) {
        int progress = 0;
        for (size_t start = 0; start < p->n && runs < max_runs;) {
            size_t len = chunk < p->n - start ? chunk : p->n - start;
            program_copy(&t, p);
            memmove(t.ops + start, t.ops + start + len,
                    (t.n - start - len) * sizeof *t.ops);
            t.n -= len;
            runs++;
            if (interp_run(&t, f) && f->kind == kind) {
                if (f->op >= 0 && (size_t)f->op < t.n)
                    t.n = (size_t)f->op + 1;
                program_copy(p, &t);
                progress = 1;
            } else {
                start += len;
            }
        }
        if (runs >= max_runs || (chunk == 1 && !progress))
            break;
    }
    /* smaller bulk operations and simpler arguments */
    for (size_t i = 0; i < p->n && runs < max_runs; i++) {
        for (int pass = 0; pass < 16 && runs < max_runs; pass++) {
            program_copy(&t, p);
            struct op *o = &t.ops[i];
            if (o->kind == OP_BULK_ADD && o->n > 1)
                o->n /= 2;
            else if (o->kind == OP_MASS_CANCEL && o->n % 4 != 0)
                o->n -= o->n % 4;
            else
                break;
            runs++;
            if (!interp_run(&t, f) || f->kind != kind)
                break;
            program_copy(p, &t);
        }
    }
out:
    program_free(&t);
    free(f);
}

/* ---- generating programs ------------------------------------------------ */

struct rng {
    uint64_t s;
};

static uint64_t next(struct rng *r)
{
    r->s += UINT64_C(0x9e3779b97f4a7c15);
    return mix64(r->s);
}

static uint64_t below(struct rng *r, uint64_t n)
{
    return n ? next(r) % n : 0;
}

static struct val lit(uint64_t v)
{
    return (struct val){V_LIT, v};
}

static struct val bound(struct rng *r, unsigned level, int off)
{
    uint64_t v = level | (below(r, 6) == 0 ? 8u : 0u);
    v |= (below(r, 4) == 0 ? below(r, 3) : 0) << 8;
    v |= (uint64_t)(uint32_t)off << 16;
    return (struct val){V_BOUND, v};
}

static const uint64_t edges[] = {
    255, 256, 257, 511, 512, 16383, 16384, 16385, 32768,
    (1u << 20) - 1, 1u << 20, (1u << 20) + 1, (1u << 26) - 1, 1u << 26,
    (1u << 26) + 1, UINT64_C(1) << 31, TW_MAX_DELAY - 1, TW_MAX_DELAY};

static struct val gen_delay(struct rng *r, enum scenario sc)
{
    uint64_t k = below(r, 100);
    if (sc == SC_LEVELS && k < 50)
        return bound(r, (unsigned)below(r, 5), (int)below(r, 7) - 3);
    if (sc == SC_MAXDELAY && k < 45)
        return (struct val){V_MAX, (uint64_t)-(int64_t)below(r, 1u << (below(r, 4) * 8))};
    if (sc == SC_POOL && k < 40)
        return lit(below(r, 5000));
    if (k < 12)
        return lit(0);
    if (k < 30)
        return lit(1 + below(r, 8));
    if (k < 45)
        return lit(1 + below(r, 300));
    if (k < 52)
        return lit(below(r, 70000));
    if (k < 64)
        return bound(r, (unsigned)below(r, 5), (int)below(r, 7) - 3);
    if (k < 69)
        return (struct val){V_MAX, below(r, 10) == 0 ? 1 + below(r, 3)
                                                     : (uint64_t)-(int64_t)below(r, 1000)};
    if (k < 78)
        return lit(below(r, TW_MAX_DELAY + 1));
    if (k < 88)
        return lit(below(r, UINT64_C(1) << (8 + below(r, 19))));
    return lit(edges[below(r, sizeof edges / sizeof edges[0])]);
}

static struct val gen_interval(struct rng *r, enum scenario sc)
{
    uint64_t k = below(r, 100);
    if (k < 15)
        return lit(1 + below(r, 3));
    if (k < 60)
        return lit(1 + below(r, 300));
    if (k < 80)
        return lit(1 + below(r, 100000));
    if (k < 90 || sc == SC_MAXDELAY)
        return lit(edges[below(r, sizeof edges / sizeof edges[0])]);
    return lit(1 + below(r, TW_MAX_DELAY));
}

static struct val gen_advance(struct rng *r, enum scenario sc)
{
    uint64_t k = below(r, 100);
    if (sc == SC_LEVELS && k < 40)
        return bound(r, (unsigned)below(r, 5), (int)below(r, 5) - 2);
    if (sc == SC_MAXDELAY && k < 30)
        return lit((UINT64_C(1) << 32) * (1 + below(r, 3)) + below(r, 5) - 2);
    if (sc == SC_WRAP && k < 40)
        return lit(below(r, 700));
    if (k < 18)
        return lit(0);
    if (k < 36)
        return lit(1 + below(r, 4));
    if (k < 50)
        return lit(1 + below(r, 300));
    if (k < 62)
        return (struct val){V_NEXT, (uint64_t)((int64_t)below(r, 3) - 1)};
    if (k < 74)
        return bound(r, (unsigned)below(r, 5), (int)below(r, 5) - 2);
    if (k < 86)
        return lit(below(r, UINT64_C(1) << (10 + below(r, 18))));
    if (k < 94)
        return lit((UINT64_C(1) << 32) + below(r, 7) - 3);
    return lit(below(r, UINT64_C(1) << 36));
}

static const uint32_t tick_choices[] = {1, 3, 7, 10, 1000, 1000, 1000, 10000,
                                        250, 3600000000u};

static void gen_config(struct prog_config *c, struct rng *r, enum scenario sc)
{
    c->tick_us = tick_choices[below(r, sizeof tick_choices / sizeof tick_choices[0])];
    c->lock = (uint32_t)below(r, 3);
    c->clock0 = below(r, UINT64_C(1) << 40);
    c->flags = below(r, 4) == 0 ? PF_ADD_IN_RELEASE : 0;
    c->max_timers = below(r, 8) == 0 ? 1 + below(r, 40) : 0;
    c->drive = (uint32_t)below(r, 3);
    if (sc == SC_CLOCK) /* AUTO becomes clock-driven at the first EXPIRE */
        c->drive = below(r, 4) ? TW_DRIVE_CLOCK : TW_DRIVE_AUTO;
    switch (below(r, 6)) {
    case 0:
        c->start_tick = 0;
        break;
    case 1:
        c->start_tick = (UINT64_C(1) << 32) - 1 - below(r, 3000);
        break;
    case 2:
        c->start_tick = (UINT64_C(1) << 32) - (UINT64_C(1) << 26) - 1500 + below(r, 3000);
        break;
    case 3:
        c->start_tick = below(r, UINT64_C(1) << 40);
        break;
    case 4:
        c->start_tick = (1 + below(r, 1000)) * (UINT64_C(1) << 32) - below(r, 300);
        break;
    default:
        c->start_tick = (UINT64_C(1) << (8 + 6 * below(r, 5))) - below(r, 4);
        break;
    }
    if (below(r, 8) == 0) /* a 2^46-tick epoch: the due queues' tick bits */
        c->start_tick = (1 + below(r, 4)) * (UINT64_C(1) << 46) - 1 - below(r, 600);
    if (below(r, 20) == 0) /* the end of time: -ERANGE */
        c->start_tick = TW_MAX_TICK - below(r, UINT64_C(1) << (10 + below(r, 26)));
    if (sc == SC_WRAP)
        c->start_tick = (1 + below(r, 3)) * (UINT64_C(1) << 32) - 1 - below(r, 600);
    if (sc == SC_POOL)
        c->max_timers = below(r, 4) == 0 ? 1000 + below(r, 3000) : 0;
}

void program_generate(struct program *p, uint64_t seed, size_t nops,
                      enum scenario sc)
{
    struct rng r = {mix64(seed)};
    program_init(p);
    gen_config(&p->cfg, &r, sc);
    /* weights per operation kind */
    static const unsigned w_mix[OP_KINDS] = {18, 6, 8, 10, 1, 10, 22, 8, 1, 1, 2, 2, 3};
    static const unsigned w_pool[OP_KINDS] = {10, 3, 5, 10, 1, 8, 15, 3, 6, 4, 1, 3, 1};
    static const unsigned w_clock[OP_KINDS] = {18, 6, 8, 8, 1, 8, 0, 24, 0, 1, 1, 2, 14};
    const unsigned *wt = sc == SC_POOL ? w_pool : sc == SC_CLOCK ? w_clock : w_mix;
    unsigned total = 0;
    for (int k = 0; k < OP_KINDS; k++)
        total += wt[k];
    for (size_t i = 0; i < nops; i++) {
        struct op o;
        memset(&o, 0, sizeof o);
        unsigned x = (unsigned)below(&r, total);
        int k = 0;
        while (x >= wt[k])
            x -= wt[k++];
        o.kind = (uint8_t)k;
        o.seed = (uint32_t)next(&r);
        o.n = (uint32_t)next(&r);
        switch (k) {
        case OP_ADD:
        case OP_RESCHEDULE:
            o.a = gen_delay(&r, sc);
            break;
        case OP_PERIODIC:
            o.a = below(&r, 4) == 0 ? lit(0) : gen_delay(&r, sc);
            o.b = gen_interval(&r, sc);
            break;
        case OP_ADD_EX:
            o.a = gen_delay(&r, sc);
            o.b = below(&r, 3) == 0 ? gen_interval(&r, sc) : lit(0);
            break;
        case OP_ADVANCE:
            o.a = gen_advance(&r, sc);
            break;
        case OP_EXPIRE:
        case OP_CLOCK: {
            uint64_t t = p->cfg.tick_us, j = below(&r, 100);
            if (j < 50)
                o.b = lit(below(&r, 6) * t + below(&r, t));
            else if (j < 62)
                o.b = lit(below(&r, UINT64_C(1) << (8 + below(&r, 28))) * t);
            else if (j < 67)
                o.b = lit(0);
            else if (sc == SC_CLOCK && j < 97) /* backwards steps end the rule's
                                                  checks: keep them rare */
                o.b = lit(below(&r, 3) * t + below(&r, t));
            else
                o.b = (struct val){1, below(&r, 10) * t + below(&r, t) + 1};
            break;
        }
        case OP_BULK_ADD:
            o.a = gen_delay(&r, sc);
            o.b = lit(below(&r, 2) ? below(&r, 64) : below(&r, UINT64_C(1) << 26));
            o.n = sc == SC_POOL ? 500 + (uint32_t)below(&r, BULK_MAX - 500)
                                : (uint32_t)below(&r, 1500);
            break;
        default:
            break;
        }
        program_push(p, &o);
    }
}

const char *const scenario_names[SC_COUNT] = {"mix", "wrap", "levels",
                                              "maxdelay", "pool", "clock"};

/* ---- fuzzer input ------------------------------------------------------- */

struct bytes {
    const uint8_t *p;
    size_t n;
};

static uint64_t take(struct bytes *b, unsigned count)
{
    uint64_t v = 0;
    for (unsigned i = 0; i < count; i++) {
        v = v << 8 | (b->n ? *b->p : 0);
        if (b->n) {
            b->p++;
            b->n--;
        }
    }
    return v;
}

/* A tick value: one byte picks the shape, then 0..8 bytes of payload. */
static struct val take_val(struct bytes *b)
{
    unsigned sel = (unsigned)take(b, 1);
    switch (sel % 12) {
    case 0:
        return lit(0);
    case 1:
    case 2:
        return lit(take(b, 1) % 16);
    case 3:
        return lit(take(b, 2));
    case 4:
        return lit(take(b, 4));
    case 5: /* up to 2^44: beyond 2^46 ticks timer.c coalesces catch-ups */
        return lit(take(b, 8) >> 20);
    case 6:
    case 7: {
        uint64_t x = take(b, 2);
        return (struct val){V_BOUND, (x & 0xff) | (x >> 8 & 3) << 8 |
                                         (uint64_t)(uint32_t)((int)(x >> 10) - 32) << 16};
    }
    case 8:
        return (struct val){V_MAX, (uint64_t)((int64_t)take(b, 1) - 250)};
    case 9:
        return (struct val){V_NEXT, (uint64_t)((int64_t)take(b, 1) % 3 - 1)};
    case 10:
        return lit(edges[take(b, 1) % (sizeof edges / sizeof edges[0])]);
    default:
        return lit((UINT64_C(1) << 32) + take(b, 1) - 128);
    }
}

void program_from_bytes(struct program *p, const uint8_t *data, size_t size,
                        size_t max_ops)
{
    struct bytes b = {data, size};
    program_init(p);
    unsigned c = (unsigned)take(&b, 1);
    switch (c % 8) {
    case 0:
        p->cfg.start_tick = 0;
        break;
    case 1:
        p->cfg.start_tick = (UINT64_C(1) << 32) - 1 - take(&b, 2);
        break;
    case 2:
        p->cfg.start_tick = (UINT64_C(1) << 32) - (UINT64_C(1) << 26) - 32768 + take(&b, 2);
        break;
    case 3:
        p->cfg.start_tick = take(&b, 5);
        break;
    case 4:
        p->cfg.start_tick = (UINT64_C(1) << (8 + 6 * (take(&b, 1) % 5))) - take(&b, 1) % 4;
        break;
    case 5:
        p->cfg.start_tick = (1 + take(&b, 1)) * (UINT64_C(1) << 32) - take(&b, 1);
        break;
    case 6: /* a 2^46-tick epoch: the due queues keep 46 bits of a tick */
        p->cfg.start_tick = (1 + take(&b, 1) % 4) * (UINT64_C(1) << 46) - 1 - take(&b, 2) % 1024;
        break;
    default:
        p->cfg.start_tick = TW_MAX_TICK - take(&b, 5);
    }
    c >>= 3;
    p->cfg.lock = c % 3;
    p->cfg.flags = (c / 3) & 1 ? PF_ADD_IN_RELEASE : 0;
    p->cfg.drive = (c / 6) % 3;
    unsigned t = (unsigned)take(&b, 1);
    p->cfg.tick_us = tick_choices[t % (sizeof tick_choices / sizeof tick_choices[0])];
    p->cfg.max_timers = t >= 0xe0 ? 1 + (t & 31) : 0;
    p->cfg.clock0 = take(&b, 3) * 1000;
    while (b.n > 0 && p->n < max_ops) {
        struct op o;
        memset(&o, 0, sizeof o);
        unsigned k = (unsigned)take(&b, 1);
        o.kind = (uint8_t)(k % OP_KINDS);
        o.seed = (uint32_t)take(&b, 2) * 0x9e3779b1u;
        o.n = (uint32_t)(k / OP_KINDS);
        switch (o.kind) {
        case OP_ADD:
        case OP_RESCHEDULE:
        case OP_ADVANCE:
            o.a = take_val(&b);
            break;
        case OP_PERIODIC:
        case OP_ADD_EX:
            o.a = take_val(&b);
            o.b = take_val(&b);
            break;
        case OP_EXPIRE:
        case OP_CLOCK: {
            uint64_t x = take(&b, 2);
            o.b.mode = (uint8_t)(x >> 15);
            o.b.v = (x & 0x3fff) * p->cfg.tick_us / 16;
            if (x & 0x4000)
                o.b.v <<= 16;
            break;
        }
        case OP_BULK_ADD:
            o.a = take_val(&b);
            o.b = lit(take(&b, 2));
            o.n = (uint32_t)take(&b, 1) * 4;
            break;
        default:
            break;
        }
        program_push(p, &o);
    }
}
