/* What a release hook costs tw_cancel: every timer of the Lua module has
 * one (it drops the timer's function from the wheel's table), and
 * tw_cancel's inline fast path takes only timers without one. Adds N
 * timers with or without a hook and, if asked, cancels them all; the
 * instructions of a cancel are the difference between the two runs,
 * counted by cachegrind (docs/lua.md, "Performance"):
 *
 *   for hook in 0 1; do for cancel in 0 1; do
 *     valgrind --tool=cachegrind --cache-sim=no --cachegrind-out-file=/dev/null \
 *       build/lua/bench/release_hook_cost $hook 200000 $cancel
 *   done; done
 */
#include <stdio.h>
#include <stdlib.h>

#include <twheel/timer.h>

static void fire(tw_wheel *wheel, tw_id id, void *user_data)
{
    (void)wheel;
    (void)id;
    (void)user_data;
}

static void release(void *user_data)
{
    (void)user_data;
}

int main(int argc, char **argv)
{
    struct tw_config config;
    tw_wheel *wheel;
    tw_id *ids;
    long count, i;
    int hook, cancel;
    unsigned state = 1;
    if (argc != 4) {
        fprintf(stderr, "usage: release_hook_cost HOOK(0|1) N CANCEL(0|1)\n");
        return 2;
    }
    hook = atoi(argv[1]);
    count = atol(argv[2]);
    cancel = atoi(argv[3]);
    tw_config_init(&config);
    config.drive = TW_DRIVE_TICKS;
    wheel = tw_create(&config);
    ids = malloc((size_t)count * sizeof *ids);
    if (!wheel || !ids)
        return 1;
    for (i = 0; i < count; i++) {
        state = state * 1103515245u + 12345u;
        ids[i] = tw_add_ex(wheel, 1 + (state >> 8) % 60000, 0, fire, hook ? release : NULL, NULL);
    }
    if (cancel)
        for (i = 0; i < count; i++)
            if (tw_cancel(wheel, ids[i]) != 1)
                return 1;
    printf("%ld pending\n", (long)tw_count(wheel));
    tw_destroy(wheel);
    free(ids);
    return 0;
}
