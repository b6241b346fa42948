/* harness.h: the workloads and main(), the same for every design;
 * included last by a design's file (see common.h).
 *
 *   PROGRAM [--n N] [--seed S] [--cancel PERCENT] [--only build|expire|cancel|resched]
 *
 * Prints one line of name=value pairs: ns per timer fired by a walk over
 * a full wheel (expire); ns per cancel of a random share of the timers
 * (cancel; --cancel PERCENT, default 50) and per timer fired by the walk
 * after it; ns per reschedule of a random half to a random later slot
 * (resched) and per timer fired by the walk after it; and `check`, a hash
 * of what the three walks fired. Seed 1 unless --seed says otherwise.
 * Each walk is checked against a count and a sum worked out from the
 * workload alone: a design that fires other timers exits with status 1.
 *
 * --only STAGE (for cachegrind): builds the wheel, then runs STAGE alone
 * (build: nothing more) and prints ops=K, the operations it made. */

#ifndef DESIGN
#error "define DESIGN, the design's name, before including harness.h"
#endif
#ifdef NO_PREFETCH
#define NAME DESIGN "-nopf"
#else
#define NAME DESIGN
#endif

_Static_assert(sizeof(struct node) == 32, "a node is 32 bytes, as in twheel");

static inline void node_free(uint32_t index)
{
    struct node *n = node_at(index);
    n->state = NODE_FREE;
    n->link = pool.free;
    pool.free = index;
}

static uint64_t key(uint32_t id, uint32_t due)
{
    return (id * UINT64_C(0x9e3779b97f4a7c15)) ^ due;
}

static inline void fire(struct node *n, uint32_t index, unsigned slot, struct tally *t)
{
    t->count++;
    t->sum += key(n->id, n->due);
    t->misfiled += slot_of(n->due) != slot;
    node_free(index);
}

/* ---- fixed-seed randomness ---------------------------------------------- */

static uint64_t rng_state;

static uint64_t rng(void) /* splitmix64 */
{
    uint64_t z = (rng_state += UINT64_C(0x9e3779b97f4a7c15));
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    return z ^ (z >> 31);
}

static uint32_t below(uint32_t bound) /* in [0, bound) */
{
    return (uint32_t)(((rng() >> 32) * bound) >> 32);
}

static uint32_t *shuffled(uint32_t n) /* a random permutation of 0..n-1 */
{
    uint32_t *a = malloc((size_t)n * sizeof *a), i;
    if (!a) {
        perror("malloc");
        exit(2);
    }
    for (i = 0; i < n; i++)
        a[i] = i;
    for (i = n; i > 1; i--) {
        uint32_t j = below(i), x = a[i - 1];
        a[i - 1] = a[j];
        a[j] = x;
    }
    return a;
}

/* ---- the workload --------------------------------------------------------
 * Timer t (0..n-1) is due at due[t] and gets node perm[t], a random
 * permutation: in a long-running wheel the free list hands nodes out in an
 * order that has nothing to do with their slots. cancel[] names the nodes
 * of a random share of the timers (half by default), in random order;
 * move[] those of a random half, drawn apart, and move_due[] their new due
 * ticks, in a later slot. */
struct workload {
    uint32_t n, cancels, moves;
    uint32_t *due, *perm, *cancel, *move, *move_due;
    struct tally all, after_cancel, after_move; /* what the walks must fire */
};

static void expect(struct tally *t, uint32_t id, uint32_t due)
{
    t->count++;
    t->sum += key(id, due);
}

static void make_workload(struct workload *wl, uint32_t n, uint64_t seed, uint32_t percent)
{
    uint32_t t, k, *order, *final_due;
    memset(wl, 0, sizeof *wl);
    rng_state = seed;
    wl->n = n;
    wl->due = malloc((size_t)n * sizeof *wl->due);
    final_due = malloc((size_t)n * sizeof *final_due);
    if (!wl->due || !final_due) {
        perror("malloc");
        exit(2);
    }
    for (t = 0; t < n; t++)
        wl->due[t] = final_due[t] = 1 + below(MAX_DUE);
    wl->perm = shuffled(n);

    order = shuffled(n);
    wl->cancels = (uint32_t)((uint64_t)n * percent / 100);
    wl->cancel = malloc((size_t)wl->cancels * sizeof *wl->cancel + 1);
    for (k = 0; k < wl->cancels; k++)
        wl->cancel[k] = wl->perm[order[k]];
    for (k = wl->cancels; k < n; k++)
        expect(&wl->after_cancel, order[k], wl->due[order[k]]);
    free(order);

    order = shuffled(n);
    wl->moves = n / 2;
    wl->move = malloc((size_t)wl->moves * sizeof *wl->move + 1);
    wl->move_due = malloc((size_t)wl->moves * sizeof *wl->move_due + 1);
    for (k = 0; k < wl->moves; k++) {
        uint32_t from = (slot_of(wl->due[order[k]]) + 1) << SLOT_SHIFT;
        wl->move[k] = wl->perm[order[k]];
        wl->move_due[k] = final_due[order[k]] = from + below((SLOTS << SLOT_SHIFT) - from);
    }
    free(order);
    for (t = 0; t < n; t++) {
        expect(&wl->all, t, wl->due[t]);
        expect(&wl->after_move, t, final_due[t]);
    }
    free(final_due);
}

static void free_workload(struct workload *wl)
{
    free(wl->due);
    free(wl->perm);
    free(wl->cancel);
    free(wl->move);
    free(wl->move_due);
}

/* ---- the pool, the build, the cache scrub -------------------------------- */

static void pool_setup(uint32_t n)
{
    uint32_t c, count = (n + CHUNK_NODES - 1) / CHUNK_NODES;
    pool.chunks = malloc(count * sizeof *pool.chunks);
    for (c = 0; pool.chunks && c < count; c++)
        if (!(pool.chunks[c] = aligned_alloc(64, CHUNK_NODES * sizeof(struct node))))
            break;
    if (!pool.chunks || c < count) {
        perror("malloc");
        exit(2);
    }
    pool.nodes = n;
}

static void pool_free(void)
{
    uint32_t c;
    for (c = 0; c < (pool.nodes + CHUNK_NODES - 1) / CHUNK_NODES; c++)
        free(pool.chunks[c]);
    free(pool.chunks);
}

/* Every node cleared; the free list, which fire() and the cancels push
 * onto, empty. */
static void pool_reset(void)
{
    uint32_t c;
    for (c = 0; c < (pool.nodes + CHUNK_NODES - 1) / CHUNK_NODES; c++)
        memset(pool.chunks[c], 0, CHUNK_NODES * sizeof(struct node));
    pool.free = NIL;
}

/* Hands timer t node perm[t], as a free list in that order would, without
 * chasing one (a miss per add, which would make the build slow). */
static struct wheel *build(const struct workload *wl)
{
    struct wheel *w = wheel_new();
    uint32_t t;
    pool_reset();
    for (t = 0; t < wl->n; t++) {
        uint32_t index = wl->perm[t];
        struct node *n = node_at(index);
        n->due = wl->due[t];
        n->id = t;
        n->state = NODE_LINKED;
        wheel_add(w, index);
    }
    return w;
}

/* Writes a line in every 64 bytes of 64 MiB, twice this machine's last
 * level cache, so that a stage starts with the nodes out of cache as
 * they are when a large wheel's timers come due. Not timed. */
static unsigned char *scrub_buffer;

static void scrub(void)
{
    unsigned char *buffer = scrub_buffer;
    size_t size = (size_t)64 << 20, i;
    if (!buffer && !(buffer = scrub_buffer = calloc(size, 1))) {
        perror("calloc");
        exit(2);
    }
    for (i = 0; i < size; i += 64)
        buffer[i]++;
}

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static void verify(const char *walk, const struct tally *got, const struct tally *want)
{
    if (got->count == want->count && got->sum == want->sum && !got->misfiled)
        return;
    fprintf(stderr,
            "%s: FAIL: %s fired %llu timers (checksum %016llx, %llu in a wrong slot); "
            "expected %llu (checksum %016llx)\n",
            NAME, walk, (unsigned long long)got->count, (unsigned long long)got->sum,
            (unsigned long long)got->misfiled, (unsigned long long)want->count,
            (unsigned long long)want->sum);
    exit(1);
}

/* The timed stages; each returns ns per operation. */
static double timed_expire(struct wheel *w, struct tally *t)
{
    double start = now_ns();
    wheel_expire(w, t);
    return t->count ? (now_ns() - start) / (double)t->count : 0;
}

static double timed_cancel(struct wheel *w, const struct workload *wl)
{
    double start = now_ns();
    uint32_t k;
    for (k = 0; k < wl->cancels; k++) {
        wheel_cancel(w, wl->cancel[k]);
        node_free(wl->cancel[k]);
    }
    return wl->cancels ? (now_ns() - start) / wl->cancels : 0;
}

static double timed_move(struct wheel *w, const struct workload *wl)
{
    double start = now_ns();
    uint32_t k;
    for (k = 0; k < wl->moves; k++)
        wheel_move(w, wl->move[k], wl->move_due[k]);
    return wl->moves ? (now_ns() - start) / wl->moves : 0;
}

static uint64_t mix(uint64_t h, uint64_t x)
{
    return (h ^ x) * UINT64_C(0x100000001b3);
}

/* The three timed stages, each on a fresh build; prints the line. */
static void run_all(const struct workload *wl)
{
    struct tally t1 = {0, 0, 0}, t2 = {0, 0, 0}, t3 = {0, 0, 0};
    uint64_t check = UINT64_C(0xcbf29ce484222325);
    double expire, cancel, expire2, move, expire3;
    struct wheel *w;

    w = build(wl);
    scrub();
    expire = timed_expire(w, &t1);
    verify("the walk over the full wheel", &t1, &wl->all);
    wheel_free(w);

    w = build(wl);
    scrub();
    cancel = timed_cancel(w, wl);
    scrub();
    expire2 = timed_expire(w, &t2);
    verify("the walk after the cancels", &t2, &wl->after_cancel);
    wheel_free(w);

    w = build(wl);
    scrub();
    move = timed_move(w, wl);
    scrub();
    expire3 = timed_expire(w, &t3);
    verify("the walk after the reschedules", &t3, &wl->after_move);
    wheel_free(w);

    check = mix(mix(mix(check, t1.sum), t2.sum), t3.sum);
    check = mix(mix(mix(check, t1.count), t2.count), t3.count);
    printf("design=%s n=%u expire=%.2f cancel=%.2f expire_after_cancel=%.2f "
           "resched=%.2f expire_after_resched=%.2f check=%016llx\n",
           NAME, wl->n, expire, cancel, expire2, move, expire3, (unsigned long long)check);
}

int main(int argc, char **argv)
{
    uint32_t n = 1000000, percent = 50;
    uint64_t seed = 1;
    const char *only = NULL;
    struct workload wl;
    int i;
    for (i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--n"))
            n = (uint32_t)strtoul(argv[i + 1], NULL, 10);
        else if (!strcmp(argv[i], "--seed"))
            seed = strtoull(argv[i + 1], NULL, 10);
        else if (!strcmp(argv[i], "--cancel"))
            percent = (uint32_t)strtoul(argv[i + 1], NULL, 10);
        else if (!strcmp(argv[i], "--only"))
            only = argv[i + 1];
        else
            break;
    }
    if (i != argc || n < 1 || n > 100000000 || percent > 100 ||
        (only && strcmp(only, "build") && strcmp(only, "expire") && strcmp(only, "cancel") &&
         strcmp(only, "resched"))) {
        fprintf(stderr,
                "usage: %s [--n N] [--seed S] [--cancel PERCENT] "
                "[--only build|expire|cancel|resched]\n",
                argv[0]);
        return 2;
    }
    make_workload(&wl, n, seed, percent);
    pool_setup(n);
    if (only) { /* one stage after a build, for cachegrind's difference */
        struct tally t = {0, 0, 0};
        struct wheel *w = build(&wl);
        uint64_t ops = 0;
        scrub();
        if (!strcmp(only, "expire")) {
            wheel_expire(w, &t);
            ops = t.count;
        } else if (!strcmp(only, "cancel")) {
            timed_cancel(w, &wl);
            ops = wl.cancels;
        } else if (!strcmp(only, "resched")) {
            timed_move(w, &wl);
            ops = wl.moves;
        }
        printf("design=%s n=%u only=%s ops=%llu\n", NAME, n, only, (unsigned long long)ops);
        wheel_free(w);
    } else {
        run_all(&wl);
    }
    free_workload(&wl);
    pool_free();
    free(scrub_buffer);
    return 0;
}
