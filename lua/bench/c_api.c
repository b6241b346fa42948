/*
 * The C API under the workload of lua/bench/bench.lua, for the Lua
 * binding's cost per call: the same delays, cancel order and reschedules
 * (the same Park-Miller draws), the same wheel (tick-driven, no lock) and
 * the same shape of timer (tw_add_ex with a callback and a release hook, as
 * the binding adds them). bench.lua runs it with --c and prints both.
 *
 *   c_api N REPS   ->  lines "add 41.2", "cancel ...", ... (ns per
 *                      operation, the best of REPS runs, CPU time)
 */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include <twheel/timer.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define MAX_DELAY 60000

static uint64_t state;

static void seed(uint64_t s)
{
    state = s;
}

/* Park-Miller, as harness.lua's random(): low + x % (high - low + 1) */
static uint64_t draw(uint64_t low, uint64_t high)
{
    state = state * 16807 % 2147483647;
    return low + state % (high - low + 1);
}

static double cpu_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

static uint64_t fired;

static void on_fire(tw_wheel *w, tw_id id, void *data)
{
    (void)w;
    (void)id;
    (void)data;
    fired++;
}

static void on_release(void *data)
{
    (void)data;
}

static tw_wheel *new_wheel(void)
{
    struct tw_config config;
    tw_config_init(&config);
    config.lock = TW_LOCK_NONE;
    config.drive = TW_DRIVE_TICKS;
    return tw_create(&config);
}

/* The draws, made before the clock starts (as bench.lua makes them). */
struct workload {
    uint64_t *delays;      /* seed 1: the delays to add */
    uint32_t *order;       /* seed 2: the order to cancel in (Fisher-Yates) */
    uint32_t *moved;       /* seed 3: the timer and the delay of each */
    uint64_t *moved_delay; /*         reschedule */
};

static int draw_workload(struct workload *d, uint32_t n)
{
    uint32_t i;
    d->delays = malloc(sizeof *d->delays * n);
    d->order = malloc(sizeof *d->order * n);
    d->moved = malloc(sizeof *d->moved * n);
    d->moved_delay = malloc(sizeof *d->moved_delay * n);
    if (!d->delays || !d->order || !d->moved || !d->moved_delay)
        return -1;
    seed(1);
    for (i = 0; i < n; i++)
        d->delays[i] = draw(1, MAX_DELAY);
    seed(2);
    for (i = 0; i < n; i++)
        d->order[i] = i;
    for (i = n; i > 1; i--) {
        uint32_t j = (uint32_t)draw(1, i) - 1, t = d->order[i - 1];
        d->order[i - 1] = d->order[j];
        d->order[j] = t;
    }
    seed(3);
    for (i = 0; i < n; i++) {
        d->moved[i] = (uint32_t)draw(1, n) - 1;
        d->moved_delay[i] = draw(1, MAX_DELAY);
    }
    return 0;
}

/* Adds the n timers; returns ns per add. */
static double fill(tw_wheel *w, tw_id *ids, const struct workload *d, uint32_t n)
{
    double start = cpu_ns();
    uint32_t i;
    for (i = 0; i < n; i++)
        ids[i] = tw_add_ex(w, d->delays[i], 0, on_fire, on_release,
                           (void *)(uintptr_t)(i + 1));
    return (cpu_ns() - start) / n;
}

static double run(const char *op, uint32_t n, tw_id *ids, const struct workload *d)
{
    tw_wheel *w = new_wheel();
    double start, ns = fill(w, ids, d, n);
    uint32_t i;
    if (op[0] == 'c') {
        start = cpu_ns();
        for (i = 0; i < n; i++)
            tw_cancel(w, ids[d->order[i]]);
        ns = (cpu_ns() - start) / n;
    } else if (op[0] == 'r') {
        start = cpu_ns();
        for (i = 0; i < n; i++)
            tw_reschedule(w, ids[d->moved[i]], d->moved_delay[i]);
        ns = (cpu_ns() - start) / n;
    } else if (op[0] == 'e') { /* tick by tick until every timer fired */
        fired = 0;
        start = cpu_ns();
        while (tw_count(w))
            tw_advance(w, 1);
        ns = (cpu_ns() - start) / n;
        if (fired != n) {
            fprintf(stderr, "c_api: %llu of %u timers fired\n",
                    (unsigned long long)fired, n);
            exit(1);
        }
    }
    tw_destroy(w);
    return ns;
}

int main(int argc, char **argv)
{
    static const char *const ops[] = {"add", "cancel", "reschedule", "expire"};
    uint32_t n = argc > 1 ? (uint32_t)strtoul(argv[1], NULL, 10) : 1000000;
    int reps = argc > 2 ? atoi(argv[2]) : 3, r;
    size_t op;
    tw_id *ids = malloc(sizeof *ids * n);
    struct workload d;
    if (n == 0 || !ids || draw_workload(&d, n) != 0)
        return 1;
    for (op = 0; op < 4; op++) {
        double best = 0;
        for (r = 0; r < reps; r++) {
            double ns = run(ops[op], n, ids, &d);
            best = r == 0 || ns < best ? ns : best;
        }
        printf("%s %.1f\n", ops[op], best);
    }
    free(ids);
    free(d.delays);
    free(d.order);
    free(d.moved);
    free(d.moved_delay);
    return 0;
}
