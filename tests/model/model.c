/*
 * The reference timer. See model.h for the rules it implements; nothing here
 * is shared with timer.c, only the public constants of timer.h are used.
 *
 * Storage is a textbook binary min-heap on (due tick, insertion sequence)
 * with an id -> heap position map, plus a FIFO list of the timers inserted
 * during the current call that are already due (they wait for the next
 * call). A periodic timer whose callback runs is in neither.
 */
#include "model.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <twheel/timer.h>

enum { FREE, QUEUED, DEFERRED, RUNNING };

struct mtimer { /* indexed by id; ids are never reused */
    uint64_t due;      /* absolute tick, never wraps */
    uint64_t seq;      /* insertion order: add, reschedule, re-arm */
    uint64_t interval; /* 0 = one-shot */
    model_callback *callback;
    model_release *release;
    void *user_data;
    int state;
    size_t slot; /* position in the heap when QUEUED */
};

struct model {
    struct model_config config;
    struct mtimer *timers; /* [0] unused */
    size_t timers_capacity;
    uint64_t *heap; /* ids */
    size_t heap_count, heap_capacity;
    uint64_t *deferred; /* ids, FIFO */
    size_t deferred_count, deferred_capacity;
    uint64_t live; /* what model_count() reports */
    uint64_t next_id;
    uint64_t seq;
    uint64_t now;
    uint64_t target; /* while driving: the tick the call walks to */
    int driving, destroying;
    /* the periodic timer whose callback is running, if any */
    uint64_t running_id;
    int running_cancelled, running_rescheduled;
    /* the clock of model_expire */
    uint64_t base_us, base_tick, last_us;
    int drive;      /* TW_DRIVE_*: AUTO until the first advance or expire */
    int ticks_only; /* tick-driven, never driven by the clock */
    struct model_stats stats;
};

static void *grow(void *array, size_t *capacity, size_t need, size_t size)
{
    size_t n = *capacity ? *capacity : 64;
    while (n < need)
        n *= 2;
    if (n == *capacity)
        return array;
    void *p = realloc(array, n * size);
    if (!p)
        abort(); /* the reference has no error path for this */
    *capacity = n;
    return p;
}

/* ---- the heap ----------------------------------------------------------- */

static int earlier(const struct model *m, uint64_t a, uint64_t b)
{
    const struct mtimer *x = &m->timers[a], *y = &m->timers[b];
    return x->due < y->due || (x->due == y->due && x->seq < y->seq);
}

static void heap_set(struct model *m, size_t i, uint64_t id)
{
    m->heap[i] = id;
    m->timers[id].slot = i;
}

static void heap_up(struct model *m, size_t i)
{
    uint64_t id = m->heap[i];
    while (i > 0 && earlier(m, id, m->heap[(i - 1) / 2])) {
        heap_set(m, i, m->heap[(i - 1) / 2]);
        i = (i - 1) / 2;
    }
    heap_set(m, i, id);
}

static void heap_down(struct model *m, size_t i)
{
    uint64_t id = m->heap[i];
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= m->heap_count)
            break;
        if (c + 1 < m->heap_count && earlier(m, m->heap[c + 1], m->heap[c]))
            c++;
        if (!earlier(m, m->heap[c], id))
            break;
        heap_set(m, i, m->heap[c]);
        i = c;
    }
    heap_set(m, i, id);
}

static void heap_push(struct model *m, uint64_t id)
{
    m->heap = grow(m->heap, &m->heap_capacity, m->heap_count + 1, sizeof *m->heap);
    m->heap[m->heap_count++] = id;
    heap_up(m, m->heap_count - 1);
}

static void heap_remove(struct model *m, size_t i)
{
    uint64_t last = m->heap[--m->heap_count];
    if (i == m->heap_count)
        return;
    heap_set(m, i, last);
    heap_up(m, i);
    heap_down(m, m->timers[last].slot);
}

/* ---- timers ------------------------------------------------------------- */

static struct mtimer *find(struct model *m, uint64_t id)
{
    if (id == 0 || id >= m->next_id || m->timers[id].state == FREE)
        return NULL;
    return &m->timers[id];
}

/* Takes timer id out of the heap or the deferred list. */
static void unqueue(struct model *m, uint64_t id)
{
    struct mtimer *t = &m->timers[id];
    if (t->state == QUEUED) {
        heap_remove(m, t->slot);
    } else if (t->state == DEFERRED) {
        size_t i = 0;
        while (m->deferred[i] != id)
            i++;
        memmove(&m->deferred[i], &m->deferred[i + 1],
                (m->deferred_count - i - 1) * sizeof *m->deferred);
        m->deferred_count--;
    }
}

/* Queues timer id (out of every queue) at tick `due`: a new insertion.
 * An add or reschedule made during a call that is due at once waits for the
 * next call; a periodic re-arm that is still behind (catching up) does not,
 * it runs in this call, after the others already due. */
static void insert_at(struct model *m, uint64_t id, uint64_t due, int rearm,
                      int delay_zero)
{
    struct mtimer *t = &m->timers[id];
    t->due = due;
    t->seq = ++m->seq;
    if (m->driving && (due <= m->now || delay_zero) && !rearm) {
        t->state = DEFERRED;
        m->deferred = grow(m->deferred, &m->deferred_capacity,
                           m->deferred_count + 1, sizeof *m->deferred);
        m->deferred[m->deferred_count++] = id;
    } else {
        t->state = QUEUED;
        heap_push(m, id);
    }
}

struct model *model_create(const struct model_config *config)
{
    struct model *m = calloc(1, sizeof *m);
    if (!m) {
        errno = ENOMEM;
        return NULL;
    }
    m->config = *config;
    m->next_id = 1;
    m->now = config->start_tick;
    m->base_tick = config->start_tick;
    m->base_us = config->clock_fn(config->clock_context);
    m->last_us = m->base_us;
    m->drive = config->drive;
    m->ticks_only = config->drive == TW_DRIVE_TICKS;
    return m;
}

/* The clock read lower than the last reading (by an expire, or first by an
 * add or reschedule): re-base at this reading, keeping where tick `now`
 * starts against the clock: tick now began (now - base_tick) ticks after
 * base_us, which was (last_us - base_us) before the last reading. */
static void model_rebase(struct model *m, uint64_t us)
{
    __extension__ typedef __int128 wide;
    wide start = (wide)(m->now - m->base_tick) * m->config.tick_us -
                 ((wide)m->last_us - (wide)m->base_us) + (wide)us;
    m->base_us = start < 0 ? 0 : start > (wide)UINT64_MAX ? UINT64_MAX
                                                           : (uint64_t)start;
    m->base_tick = m->now;
    m->last_us = us;
    m->stats.rebases++;
}

/* The tick a delay counts from, for an add or reschedule now (see model.h);
 * TW_NEVER when the due tick would be out of range. */
static uint64_t delay_start(struct model *m, uint64_t delay)
{
    if (m->drive == TW_DRIVE_TICKS)
        return m->now;
    uint64_t us = m->config.clock_fn(m->config.clock_context);
    if (us < m->last_us)
        model_rebase(m, us); /* the clock stepped back: seen here first */
    m->last_us = us;        /* every reading becomes the last one */
    if (m->drive == TW_DRIVE_AUTO) { /* tick now restarts at this call */
        m->base_us = us;
        m->base_tick = m->now;
        return m->now;
    }
    uint64_t start = m->now;
    if (us > m->base_us) {
        uint64_t tick = m->config.tick_us;
        /* rounded up, but delay 0 is due in the tick the clock is in */
        uint64_t ticks = (us - m->base_us + (delay ? tick - 1 : 0)) / tick;
        uint64_t at = ticks > TW_MAX_TICK - m->base_tick ? TW_MAX_TICK
                                                         : m->base_tick + ticks;
        if (at > start)
            start = at;
    }
    /* delay 0 during a call waits for the next one, due no later than the
       tick this call walks to */
    if (delay == 0 && m->driving && start > m->target)
        start = m->target;
    if (start + delay - m->now > TW_MAX_DELAY) {
        if (m->live > 0 || m->driving)
            return TW_NEVER;
        m->now = start; /* as an expire would, firing nothing */
    }
    return start;
}

int model_destroy(struct model *m)
{
    if (!m)
        return 0;
    if (m->driving)
        return -EBUSY;
    m->destroying = 1;
    for (size_t i = 0; i < m->heap_count; i++) {
        const struct mtimer *t = &m->timers[m->heap[i]];
        if (t->release)
            t->release(t->user_data);
    }
    free(m->timers);
    free(m->heap);
    free(m->deferred);
    free(m);
    return 0;
}

uint64_t model_add_ex(struct model *m, uint64_t delay, uint64_t interval,
                      model_callback *callback, model_release *release,
                      void *user_data)
{
    if (!m || !callback) {
        errno = EINVAL;
        return 0;
    }
    if (delay > TW_MAX_DELAY || interval > TW_MAX_DELAY) {
        errno = ERANGE;
        return 0;
    }
    if (m->destroying) {
        errno = EBUSY;
        return 0;
    }
    if (m->config.max_timers && m->live >= m->config.max_timers) {
        errno = ENOSPC;
        return 0;
    }
    uint64_t start = delay_start(m, delay);
    if (start == TW_NEVER) {
        errno = ERANGE;
        return 0;
    }
    uint64_t id = m->next_id++;
    m->timers = grow(m->timers, &m->timers_capacity, (size_t)id + 1,
                     sizeof *m->timers);
    struct mtimer *t = &m->timers[id];
    memset(t, 0, sizeof *t);
    t->interval = interval;
    t->callback = callback;
    t->release = release;
    t->user_data = user_data;
    insert_at(m, id, start + delay, 0, delay == 0);
    m->live++;
    m->stats.added++;
    return id;
}

uint64_t model_add(struct model *m, uint64_t delay, model_callback *callback,
                   void *user_data)
{
    return model_add_ex(m, delay, 0, callback, NULL, user_data);
}

uint64_t model_add_periodic(struct model *m, uint64_t first, uint64_t interval,
                            model_callback *callback, void *user_data)
{
    if (m && callback && interval == 0) {
        errno = EINVAL;
        return 0;
    }
    return model_add_ex(m, first, interval, callback, NULL, user_data);
}

int model_cancel(struct model *m, uint64_t id)
{
    if (!m)
        return -EINVAL;
    struct mtimer *t = find(m, id);
    if (!t)
        return 0;
    unqueue(m, id);
    t->state = FREE;
    m->live--;
    m->stats.cancelled++;
    if (id == m->running_id)
        m->running_cancelled = 1; /* released when its callback returns */
    else if (t->release)
        t->release(t->user_data);
    return 1;
}

int model_reschedule(struct model *m, uint64_t id, uint64_t delay)
{
    if (!m)
        return -EINVAL;
    if (delay > TW_MAX_DELAY) /* arguments first, as model_add_ex does */
        return -ERANGE;
    struct mtimer *t = find(m, id);
    if (!t)
        return 0;
    uint64_t start = delay_start(m, delay);
    if (start == TW_NEVER)
        return -ERANGE;
    unqueue(m, id);
    insert_at(m, id, start + delay, 0, delay == 0);
    if (id == m->running_id)
        m->running_rescheduled = 1;
    m->stats.rescheduled++;
    return 1;
}

uint64_t model_remaining(struct model *m, uint64_t id)
{
    if (!m)
        return TW_NEVER;
    struct mtimer *t = find(m, id);
    if (!t)
        return TW_NEVER;
    if (t->state == DEFERRED)
        return 0; /* runs at the next call, whatever its due tick */
    uint64_t due = t->state == RUNNING ? t->due + t->interval : t->due;
    return due <= m->now ? 0 : due - m->now;
}

/* ---- driving ------------------------------------------------------------ */

/* Runs timer id's callback (it is out of every queue) at tick m->now. */
static void fire(struct model *m, uint64_t id)
{
    struct mtimer *t = &m->timers[id];
    uint64_t due = t->due;
    model_callback *callback = t->callback;
    model_release *release = t->release;
    void *user_data = t->user_data;
    int periodic = t->interval != 0;
    if (periodic) {
        t->state = RUNNING;
        m->running_id = id;
        m->running_cancelled = 0;
        m->running_rescheduled = 0;
    } else {
        t->state = FREE; /* a one-shot's id dies as its callback starts */
        m->live--;
    }
    m->stats.fired++;
    callback(m, id, user_data); /* may grow m->timers: t is stale now */
    if (!periodic) {
        if (release)
            release(user_data);
        return;
    }
    m->running_id = 0;
    if (m->running_cancelled) {
        if (release)
            release(user_data);
    } else if (!m->running_rescheduled) {
        insert_at(m, id, due + m->timers[id].interval, 1, 0);
    }
}

/* The heap entry due by now with the lowest sequence (0 if none): a
   depth-first walk of the part of the heap that is due. */
static uint64_t first_due(const struct model *m, size_t i)
{
    if (i >= m->heap_count || m->timers[m->heap[i]].due > m->now)
        return 0;
    uint64_t best = m->heap[i];
    for (size_t c = 2 * i + 1; c <= 2 * i + 2; c++) {
        uint64_t x = first_due(m, c);
        if (x && m->timers[x].seq < m->timers[best].seq)
            best = x;
    }
    return best;
}

int64_t model_advance(struct model *m, uint64_t ticks)
{
    if (!m)
        return -EINVAL;
    if (m->driving)
        return -EBUSY;
    if (m->drive == TW_DRIVE_AUTO) {
        m->drive = TW_DRIVE_TICKS;
        m->ticks_only = 1;
    }
    if (ticks > TW_MAX_TICK - m->now)
        return -ERANGE;
    uint64_t target = m->now + ticks;
    m->target = target;
    int64_t ran = 0;
    m->driving = 1;

    /* 1. what was already due when the call started, FIFO, clock unchanged */
    for (uint64_t id; (id = first_due(m, 0)) != 0; ran++) {
        heap_remove(m, m->timers[id].slot);
        fire(m, id);
    }

    /* 2. walk to the target: by due tick, then by insertion */
    while (m->heap_count > 0 && m->timers[m->heap[0]].due <= target) {
        uint64_t id = m->heap[0];
        heap_remove(m, 0);
        m->now = m->timers[id].due;
        fire(m, id);
        ran++;
    }

    m->now = target;
    m->driving = 0;
    for (size_t i = 0; i < m->deferred_count; i++) { /* for the next call */
        m->timers[m->deferred[i]].state = QUEUED;
        heap_push(m, m->deferred[i]);
    }
    m->deferred_count = 0;
    return ran;
}

int64_t model_expire(struct model *m)
{
    if (!m)
        return -EINVAL;
    if (m->driving)
        return -EBUSY;
    uint64_t us = m->config.clock_fn(m->config.clock_context);
    if (m->drive == TW_DRIVE_AUTO)
        m->drive = TW_DRIVE_CLOCK;
    m->ticks_only = 0;
    if (us < m->last_us)
        model_rebase(m, us); /* then walk to the clock's tick, as always */
    m->last_us = us;
    /* the reference point may lie ahead of the clock (an add before the
       first drive read a later time; a re-base kept an advance's lead) */
    uint64_t ticks = us > m->base_us ? (us - m->base_us) / m->config.tick_us : 0;
    if (ticks > TW_MAX_TICK - m->base_tick)
        return -ERANGE;
    uint64_t target = m->base_tick + ticks;
    return model_advance(m, target > m->now ? target - m->now : 0);
}

uint64_t model_next_expiry(struct model *m)
{
    if (!m)
        return TW_NEVER;
    if (m->deferred_count > 0)
        return 0;
    uint64_t due = TW_NEVER;
    if (m->heap_count > 0)
        due = m->timers[m->heap[0]].due;
    if (m->running_id && m->timers[m->running_id].state == RUNNING) {
        /* a periodic timer whose callback runs is due again at due +
           interval unless that callback moves or cancels it */
        const struct mtimer *t = &m->timers[m->running_id];
        if (t->due + t->interval < due)
            due = t->due + t->interval;
    }
    if (due == TW_NEVER)
        return TW_NEVER;
    return due <= m->now ? 0 : due - m->now;
}

int32_t model_timeout_ms(struct model *m)
{
    return model_timeout_ms_for(m, model_next_expiry(m));
}

int32_t model_timeout_ms_for(struct model *m, uint64_t left)
{
    if (left == TW_NEVER)
        return -1;
    if (left == 0)
        return 0;
    uint64_t tick = m->config.tick_us;
    uint64_t wait = left > UINT64_MAX / tick ? UINT64_MAX : left * tick;
    if (!m->ticks_only) {
        /* by the clock: until the due tick's first microsecond, unless the
           clock went back (the next expire re-bases: `left` whole ticks) */
        uint64_t us = m->config.clock_fn(m->config.clock_context);
        if (us >= m->last_us) {
            uint64_t ticks = m->now + left - m->base_tick; /* since the base */
            uint64_t start = ticks > (UINT64_MAX - m->base_us) / tick
                                 ? UINT64_MAX
                                 : m->base_us + ticks * tick;
            wait = start > us ? start - us : 0;
        }
    }
    wait = wait / 1000 + (wait % 1000 != 0);
    return wait > INT32_MAX ? INT32_MAX : (int32_t)wait;
}

/* ---- inspection --------------------------------------------------------- */

uint64_t model_now(struct model *m)
{
    return m ? m->now : 0;
}

uint64_t model_count(struct model *m)
{
    return m ? m->live : 0;
}

static uint64_t count_due(const struct model *m, size_t i)
{
    if (i >= m->heap_count || m->timers[m->heap[i]].due > m->now)
        return 0;
    return 1 + count_due(m, 2 * i + 1) + count_due(m, 2 * i + 2);
}

void model_get_stats(struct model *m, struct model_stats *s)
{
    *s = m->stats;
    s->now = m->now;
    s->pending = m->live;
    s->pending_due = count_due(m, 0) + m->deferred_count;
}

int model_check(struct model *m)
{
    for (size_t i = 0; i < m->heap_count; i++) {
        uint64_t id = m->heap[i];
        if (id == 0 || id >= m->next_id)
            return -1;
        const struct mtimer *t = &m->timers[id];
        if (t->state != QUEUED || t->slot != i)
            return -1;
        if (i > 0 && earlier(m, id, m->heap[(i - 1) / 2]))
            return -1;
    }
    for (size_t i = 0; i < m->deferred_count; i++)
        if (!m->driving || m->timers[m->deferred[i]].state != DEFERRED ||
            m->timers[m->deferred[i]].due > m->target)
            return -1;
    uint64_t running = m->running_id && !m->running_cancelled &&
                       m->timers[m->running_id].state == RUNNING;
    if (m->live != m->heap_count + m->deferred_count + running)
        return -1;
    if (m->config.max_timers && m->live > m->config.max_timers)
        return -1;
    return 0;
}
