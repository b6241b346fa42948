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

/* Adds n timers with the delays of seed 1; returns ns per add. */
static double fill(tw_wheel *w, tw_id *ids, uint32_t n)
{
    double start;
    uint32_t i;
    seed(1);
    start = cpu_ns();
    for (i = 0; i < n; i++)
        ids[i] = tw_add_ex(w, draw(1, MAX_DELAY), 0, on_fire, on_release,
                           (void *)(uintptr_t)(i + 1));
    return (cpu_ns() - start) / n;
}

static double run(const char *op, uint32_t n, tw_id *ids, uint32_t *order)
{
    tw_wheel *w = new_wheel();
    double start, ns = fill(w, ids, n);
    uint32_t i;
    if (op[0] == 'c') { /* cancel, in an order drawn by Fisher-Yates */
        seed(2);
        for (i = 0; i < n; i++)
            order[i] = i;
        for (i = n; i > 1; i--) {
            uint32_t j = (uint32_t)draw(1, i) - 1, t = order[i - 1];
            order[i - 1] = order[j];
            order[j] = t;
        }
        start = cpu_ns();
        for (i = 0; i < n; i++)
            tw_cancel(w, ids[order[i]]);
        ns = (cpu_ns() - start) / n;
    } else if (op[0] == 'r') { /* reschedule n random timers */
        seed(3);
        start = cpu_ns();
        for (i = 0; i < n; i++) {
            uint32_t k = (uint32_t)draw(1, n) - 1;
            tw_reschedule(w, ids[k], draw(1, MAX_DELAY));
        }
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
    uint32_t *order = malloc(sizeof *order * n);
    if (!ids || !order || n == 0)
        return 1;
    for (op = 0; op < 4; op++) {
        double best = 0;
        for (r = 0; r < reps; r++) {
            double ns = run(ops[op], n, ids, order);
            best = r == 0 || ns < best ? ns : best;
        }
        printf("%s %.1f\n", ops[op], best);
    }
    free(ids);
    free(order);
    return 0;
}
