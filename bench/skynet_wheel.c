/*
 * skynet's timing wheel, written from skynet_timer.c's description. The
 * geometry, add_node, move_list, timer_shift, timer_execute and timer_update
 * follow the published code step by step; the differences are the ones named
 * in skynet_wheel.h (a struct instead of the global TI, a dispatch function
 * instead of skynet_context_push, the cancel flag, byte counting).
 */
#include "skynet_wheel.h"

#include <stdatomic.h>
#include <stddef.h>

#include "bench_alloc.h"

#define TIME_NEAR_SHIFT 8
#define TIME_NEAR (1 << TIME_NEAR_SHIFT)
#define TIME_LEVEL_SHIFT 6
#define TIME_LEVEL (1 << TIME_LEVEL_SHIFT)
#define TIME_NEAR_MASK (TIME_NEAR - 1)
#define TIME_LEVEL_MASK (TIME_LEVEL - 1)

/* skynet's spinlock.h (the C11 atomics variant): test-and-test-and-set. */
struct spinlock {
    atomic_int lock;
};

static inline void cpu_pause(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

static inline void spinlock_lock(struct spinlock *l)
{
    for (;;) {
        if (!atomic_exchange_explicit(&l->lock, 1, memory_order_acquire))
            return;
        while (atomic_load_explicit(&l->lock, memory_order_relaxed))
            cpu_pause();
    }
}

static inline void spinlock_unlock(struct spinlock *l)
{
    atomic_store_explicit(&l->lock, 0, memory_order_release);
}

/* skynet: struct timer_node { next; uint32_t expire; } followed by the
 * 8-byte timer_event payload. The cancel flag fits in the padding after
 * expire, so a node is still a 24-byte malloc, as in skynet. */
struct sk_node {
    struct sk_node *next;
    uint32_t expire;
    uint32_t cancelled;
    void *arg; /* the payload (skynet: struct timer_event) */
};

struct link_list {
    struct sk_node head;
    struct sk_node *tail;
};

struct sk_timer {
    struct link_list near[TIME_NEAR];
    struct link_list t[4][TIME_LEVEL];
    struct spinlock lock;
    uint32_t time;
    sk_dispatch *dispatch;
    int64_t bytes;
    int64_t node_bytes; /* what malloc really holds per node, measured once */
};

static inline struct sk_node *link_clear(struct link_list *list)
{
    struct sk_node *ret = list->head.next;
    list->head.next = 0;
    list->tail = &(list->head);
    return ret;
}

static inline void link(struct link_list *list, struct sk_node *node)
{
    list->tail->next = node;
    list->tail = node;
    node->next = 0;
}

static void add_node(struct sk_timer *T, struct sk_node *node)
{
    uint32_t time = node->expire;
    uint32_t current_time = T->time;

    if ((time | TIME_NEAR_MASK) == (current_time | TIME_NEAR_MASK)) {
        link(&T->near[time & TIME_NEAR_MASK], node);
    } else {
        int i;
        uint32_t mask = TIME_NEAR << TIME_LEVEL_SHIFT;
        for (i = 0; i < 3; i++) {
            if ((time | (mask - 1)) == (current_time | (mask - 1)))
                break;
            mask <<= TIME_LEVEL_SHIFT;
        }
        link(&T->t[i][((time >> (TIME_NEAR_SHIFT + i * TIME_LEVEL_SHIFT)) &
                       TIME_LEVEL_MASK)],
             node);
    }
}

sk_node *sk_add(sk_timer *T, uint32_t delay, void *arg)
{
    /* skynet: skynet_malloc(sizeof(*node) + sz); memcpy(node + 1, arg, sz) */
    struct sk_node *node = (struct sk_node *)malloc(sizeof *node);
    if (!node)
        return NULL;
    node->arg = arg;
    node->cancelled = 0;

    spinlock_lock(&T->lock);
    T->bytes += T->node_bytes; /* under the lock: adds may come from any thread */
    node->expire = delay + T->time;
    add_node(T, node);
    spinlock_unlock(&T->lock);
    return node;
}

int sk_cancel(sk_timer *T, sk_node *node)
{
    (void)T;
    node->cancelled = 1;
    return 1;
}

sk_node *sk_reschedule(sk_timer *T, sk_node *node, uint32_t delay, void *arg)
{
    node->cancelled = 1;
    return sk_add(T, delay, arg);
}

static void move_list(struct sk_timer *T, int level, int idx)
{
    struct sk_node *current = link_clear(&T->t[level][idx]);
    while (current) {
        struct sk_node *temp = current->next;
        add_node(T, current);
        current = temp;
    }
}

static void timer_shift(struct sk_timer *T)
{
    int mask = TIME_NEAR;
    uint32_t ct = ++T->time;
    if (ct == 0) {
        move_list(T, 3, 0);
    } else {
        uint32_t time = ct >> TIME_NEAR_SHIFT;
        int i = 0;
        while ((ct & (mask - 1)) == 0) {
            int idx = time & TIME_LEVEL_MASK;
            if (idx != 0) {
                move_list(T, i, idx);
                break;
            }
            mask <<= TIME_LEVEL_SHIFT;
            time >>= TIME_LEVEL_SHIFT;
            ++i;
        }
    }
}

/* Runs without the lock, as skynet's dispatch_list does; returns the nodes
 * freed so the caller can count their bytes once it holds the lock again. */
static int64_t dispatch_list(struct sk_timer *T, struct sk_node *current)
{
    int64_t freed = 0;
    do {
        if (!current->cancelled)
            T->dispatch(current->arg);
        struct sk_node *temp = current;
        current = current->next;
        free(temp);
        freed++;
    } while (current);
    return freed;
}

static inline void timer_execute(struct sk_timer *T)
{
    int idx = T->time & TIME_NEAR_MASK;
    while (T->near[idx].head.next) {
        struct sk_node *current = link_clear(&T->near[idx]);
        spinlock_unlock(&T->lock);
        int64_t freed = dispatch_list(T, current);
        spinlock_lock(&T->lock);
        T->bytes -= freed * T->node_bytes;
    }
}

static void timer_update(struct sk_timer *T)
{
    spinlock_lock(&T->lock);
    /* try to dispatch timeout 0 (rare condition) */
    timer_execute(T);
    /* shift time first, and then dispatch timer message */
    timer_shift(T);
    timer_execute(T);
    spinlock_unlock(&T->lock);
}

void sk_advance(sk_timer *T, uint64_t ticks)
{
    for (uint64_t i = 0; i < ticks; i++)
        timer_update(T);
}

sk_timer *sk_create(sk_dispatch *dispatch)
{
    int64_t bytes = 0;
    struct sk_timer *r = (struct sk_timer *)ca_malloc(&bytes, sizeof *r);
    if (!r)
        return NULL;
    int i, j;
    for (i = 0; i < TIME_NEAR; i++)
        link_clear(&r->near[i]);
    for (i = 0; i < 4; i++)
        for (j = 0; j < TIME_LEVEL; j++)
            link_clear(&r->t[i][j]);
    atomic_init(&r->lock.lock, 0);
    r->time = 0;
    r->dispatch = dispatch;
    r->bytes = bytes;
    /* every node is one malloc of the same size: measure that size once */
    void *probe = malloc(sizeof(struct sk_node));
    r->node_bytes = probe ? (int64_t)(malloc_usable_size(probe) + CA_CHUNK_OVERHEAD) : 0;
    free(probe);
    return r;
}

static void free_list(struct link_list *list)
{
    struct sk_node *n = link_clear(list);
    while (n) {
        struct sk_node *next = n->next;
        free(n);
        n = next;
    }
}

void sk_destroy(sk_timer *T)
{
    if (!T)
        return;
    int i, j;
    for (i = 0; i < TIME_NEAR; i++)
        free_list(&T->near[i]);
    for (i = 0; i < 4; i++)
        for (j = 0; j < TIME_LEVEL; j++)
            free_list(&T->t[i][j]);
    free(T);
}

/* Ticks until the earliest node not flagged cancelled: the near slots from
 * the current one on, then each level's slots after its current index (a
 * level's current slot is always empty: it was cascaded when time entered
 * it), taking the minimum over the first slot holding a live node. Not part
 * of skynet; it is what a skynet user would write to compute a poll timeout. */
static int slot_min(struct link_list *list, uint32_t ct, uint32_t *best)
{
    int found = 0;
    for (struct sk_node *n = list->head.next; n; n = n->next) {
        if (n->cancelled)
            continue;
        uint32_t d = n->expire - ct;
        if (!found || d < *best)
            *best = d;
        found = 1;
    }
    return found;
}

uint64_t sk_next_expiry(sk_timer *T)
{
    uint64_t r = UINT64_MAX;
    uint32_t best = 0;
    spinlock_lock(&T->lock);
    uint32_t ct = T->time;
    for (int idx = ct & TIME_NEAR_MASK; idx < TIME_NEAR; idx++) {
        if (T->near[idx].head.next && slot_min(&T->near[idx], ct, &best)) {
            r = best;
            goto out;
        }
    }
    for (int i = 0; i < 4; i++) {
        int shift = TIME_NEAR_SHIFT + i * TIME_LEVEL_SHIFT;
        int cur = (ct >> shift) & TIME_LEVEL_MASK;
        /* level 3 may hold timers past the 32-bit wrap in slots <= cur */
        int stop = i == 3 ? cur + TIME_LEVEL : TIME_LEVEL;
        for (int k = cur + 1; k < stop; k++) {
            struct link_list *l = &T->t[i][k & TIME_LEVEL_MASK];
            if (l->head.next && slot_min(l, ct, &best)) {
                r = best;
                goto out;
            }
        }
    }
out:
    spinlock_unlock(&T->lock);
    return r;
}

int64_t sk_bytes(const sk_timer *T) { return T->bytes; }
