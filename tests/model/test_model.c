/*
 * Differential model test: random operation programs run on twheel and on
 * the reference in model.c, side by side (see interp.h for what is compared).
 *
 * Seeds: without TWHEEL_SEED a run uses the fixed seed 1 and one fresh
 * seed, drawn from the system and printed before anything runs, so every
 * run tries programs no run tried before and a failure can be replayed.
 *
 * Environment:
 *   TWHEEL_SEED    run this master seed only (the failing seed is printed)
 *   TWHEEL_OPS     operations in total over all scenarios (default below)
 *   TWHEEL_REPLAY  a program in the text form printed on failure
 *                  ("cfg ...;ADD 0:5 0:0 7 0;..."): runs only that program
 *   TWHEEL_VERBOSE show every event of the failing operation
 *   TWHEEL_MAX_STEP  cap on the ticks one advance/expire may move (to keep
 *                  a known bug out of the way while hunting others)
 *
 * A failure prints the seed, the scenario and program number, the events
 * where the two sides part, then a shortened program that still fails, in
 * the TWHEEL_REPLAY form.
 */
#define _POSIX_C_SOURCE 200809L
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "interp.h"

#define DEFAULT_OPS 150000u

static uint64_t env_u64(const char *name, uint64_t fallback)
{
    const char *s = getenv(name);
    if (!s || !*s)
        return fallback;
    char *end;
    unsigned long long v = strtoull(s, &end, 0);
    /* allow 10_000_000 */
    if (*end == '_') {
        v = 0;
        for (const char *c = s; *c; c++)
            if (*c >= '0' && *c <= '9')
                v = v * 10 + (unsigned)(*c - '0');
    }
    return (uint64_t)v;
}

static uint64_t seed_of(uint64_t seed, int scenario, uint64_t index)
{
    uint64_t x = seed * UINT64_C(0x9e3779b97f4a7c15) + (uint64_t)scenario * 1000003u + index;
    x ^= x >> 31;
    x *= UINT64_C(0xbf58476d1ce4e5b9);
    return x ^ (x >> 29);
}

static void report(const struct program *p, const struct failure *f,
                   const char *where)
{
    fprintf(stderr, "%s\n%s", where, f->text);
    struct program s;
    program_init(&s);
    program_copy(&s, p);
    fprintf(stderr, "shrinking %zu operations...\n", s.n);
    program_shrink(&s, 20000);
    struct failure *g = malloc(sizeof *g);
    if (g && interp_run(&s, g)) {
        fprintf(stderr, "shortest failing program found (%zu operations):\n", s.n);
        program_print(stderr, &s, "\n");
        fprintf(stderr, "%s", g->text);
        fprintf(stderr, "replay with:\nTWHEEL_REPLAY='");
        program_print(stderr, &s, ";");
        fprintf(stderr, "'\n");
    }
    free(g);
    program_free(&s);
}

/* Program lengths: mostly short (failures shrink fast), some long. */
static size_t program_length(uint64_t x, enum scenario sc)
{
    if (sc == SC_POOL)
        return 10 + (size_t)(x % 60);
    switch (x % 4) {
    case 0:
        return 1 + (size_t)(x >> 8) % 20;
    case 1:
    case 2:
        return 20 + (size_t)(x >> 8) % 300;
    default:
        return 300 + (size_t)(x >> 8) % 3000;
    }
}

/* The master seeds of this run (see the top of the file). */
static uint64_t seeds[2];
static size_t seed_count;

static uint64_t fresh_seed(void)
{
    uint64_t seed = 0;
    FILE *random = fopen("/dev/urandom", "rb");
    if (random) {
        if (fread(&seed, sizeof seed, 1, random) != 1)
            seed = 0;
        fclose(random);
    }
    if (seed == 0) {
        struct timespec now;
        clock_gettime(CLOCK_REALTIME, &now);
        seed = (uint64_t)now.tv_sec * 1000000007u ^ (uint64_t)now.tv_nsec ^
               (uint64_t)getpid() << 32;
    }
    return seed % 1000000000000u + 2; /* short to type; never the fixed 1 */
}

static void choose_seeds(void)
{
    if (getenv("TWHEEL_SEED") && *getenv("TWHEEL_SEED")) {
        seeds[0] = env_u64("TWHEEL_SEED", 1);
        seed_count = 1;
        return;
    }
    seeds[0] = 1;
    seeds[1] = fresh_seed();
    seed_count = 2;
}

static void run_seed(enum scenario sc, uint64_t budget, uint64_t seed)
{
    struct failure *f = malloc(sizeof *f);
    assert_non_null(f);
    struct program p;
    program_init(&p);
    uint64_t done = 0, programs = 0;
    for (uint64_t i = 0; done < budget; i++) {
        uint64_t ps = seed_of(seed, (int)sc, i);
        size_t len = program_length(ps, sc);
        program_free(&p);
        program_generate(&p, ps, len, sc);
        if (interp_run(&p, f)) {
            char where[256];
            snprintf(where, sizeof where,
                     "FAILED: TWHEEL_SEED=%" PRIu64 " scenario %s, program %" PRIu64
                     " (%zu operations)",
                     seed, scenario_names[sc], i, p.n);
            report(&p, f, where);
            program_free(&p);
            free(f);
            fail_msg("twheel disagrees with the model; replay the seed with "
                     "TWHEEL_SEED=%" PRIu64 " build/tests/model/test_model, or "
                     "the program with the TWHEEL_REPLAY line above", seed);
        }
        done += len;
        programs++;
    }
    struct clock_rule_counts rule = interp_clock_rule_counts();
    printf("[ model    ] %-8s seed %" PRIu64 ": %" PRIu64 " programs, %" PRIu64
           " operations agree (so far: %" PRIu64 " early next-expiry answers, "
           "%" PRIu64 " firings and %" PRIu64 " pending timers checked by the clock)\n",
           scenario_names[sc], seed, programs, done, interp_early_answers(),
           rule.firings, rule.pending);
    program_free(&p);
    free(f);
}

static void run_scenario(enum scenario sc, uint64_t budget)
{
    for (size_t i = 0; i < seed_count; i++)
        run_seed(sc, budget, seeds[i]);
}

static uint64_t total_ops(void)
{
    return env_u64("TWHEEL_OPS", DEFAULT_OPS);
}

/* The mixed scenario gets 40% of TWHEEL_OPS, the others 12% each. */
static void test_mix(void **state)
{
    (void)state;
    run_scenario(SC_MIX, total_ops() * 4 / 10);
}

static void test_wrap(void **state)
{
    (void)state;
    run_scenario(SC_WRAP, total_ops() * 12 / 100);
}

static void test_levels(void **state)
{
    (void)state;
    run_scenario(SC_LEVELS, total_ops() * 12 / 100);
}

static void test_maxdelay(void **state)
{
    (void)state;
    run_scenario(SC_MAXDELAY, total_ops() * 12 / 100);
}

static void test_pool(void **state)
{
    (void)state;
    run_scenario(SC_POOL, total_ops() * 12 / 100);
}

static void test_clock(void **state)
{
    (void)state;
    run_scenario(SC_CLOCK, total_ops() * 12 / 100);
}

/* The programs above reached every staging case (interp.h), at every level
 * where one exists: a case the generator stopped reaching would leave its
 * code untested without failing anything. Asserted for the default budget;
 * a smaller TWHEEL_OPS only prints the counts. */
static void test_staging_reached(void **state)
{
    (void)state;
    struct staging_reach r = interp_staging_reach();
    const struct {
        const char *name;
        const uint64_t *per_level;
    } cases[] = {
        {"add into", r.add},
        {"cancel in", r.cancel},
        {"reschedule out of", r.reschedule_from},
        {"reschedule into", r.reschedule_into},
        {"periodic re-arm into", r.periodic_rearm},
        {"walk past the deadline of", r.jump_past_deadline},
    };
    int enforce = total_ops() >= DEFAULT_OPS;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        printf("[ model    ] %-26s a slot being staged, levels 0-3: %" PRIu64
               " %" PRIu64 " %" PRIu64 " %" PRIu64 "\n",
               cases[i].name, cases[i].per_level[0], cases[i].per_level[1],
               cases[i].per_level[2], cases[i].per_level[3]);
        for (int level = 0; level < 4 && enforce; level++)
            if (cases[i].per_level[level] == 0)
                fail_msg("no %s a slot being staged at level %d", cases[i].name, level);
    }
    printf("[ model    ] destroys with timers in slots being staged: %" PRIu64
           "; walks across a multiple of 2^32: %" PRIu64 "\n", r.destroy, r.wrap);
    if (enforce) {
        assert_true(r.destroy > 0);
        assert_true(r.wrap > 0);
    }
}

/* The harness itself: a program fed through the text form runs the same. */
static void test_text_roundtrip(void **state)
{
    (void)state;
    struct program a, b;
    program_generate(&a, 42, 200, SC_MIX);
    FILE *tmp = tmpfile();
    assert_non_null(tmp);
    program_print(tmp, &a, ";");
    long len = ftell(tmp);
    assert_true(len > 0);
    char *buf = malloc((size_t)len + 1);
    assert_non_null(buf);
    rewind(tmp);
    assert_int_equal(fread(buf, 1, (size_t)len, tmp), (size_t)len);
    buf[len] = 0;
    fclose(tmp);
    assert_int_equal(program_parse(&b, buf), 0);
    assert_int_equal(a.n, b.n);
    assert_memory_equal(&a.cfg, &b.cfg, sizeof a.cfg);
    for (size_t i = 0; i < a.n; i++) {
        assert_int_equal(a.ops[i].kind, b.ops[i].kind);
        assert_int_equal(a.ops[i].a.mode, b.ops[i].a.mode);
        assert_int_equal(a.ops[i].a.v, b.ops[i].a.v);
        assert_int_equal(a.ops[i].b.mode, b.ops[i].b.mode);
        assert_int_equal(a.ops[i].b.v, b.ops[i].b.v);
        assert_int_equal(a.ops[i].seed, b.ops[i].seed);
        assert_int_equal(a.ops[i].n, b.ops[i].n);
    }
    free(buf);
    program_free(&a);
    program_free(&b);
}

/* Every program in regressions.txt (one "name: program" per line) agrees:
 * each once made the two sides disagree. */
static void test_regressions(void **state)
{
    (void)state;
    FILE *file = fopen(TWHEEL_REGRESSIONS, "r");
    if (!file)
        fail_msg("cannot open %s", TWHEEL_REGRESSIONS);
    static char line[65536];
    size_t ran = 0, failed = 0;
    while (fgets(line, sizeof line, file)) {
        char *colon = strstr(line, ": cfg ");
        if (line[0] == '#' || !colon)
            continue;
        *colon = 0;
        struct program p;
        if (program_parse(&p, colon + 2) != 0) {
            program_free(&p);
            fclose(file);
            fail_msg("regression %s does not parse", line);
        }
        struct failure *f = malloc(sizeof *f);
        assert_non_null(f);
        if (interp_run(&p, f)) {
            char where[512];
            snprintf(where, sizeof where, "FAILED: regression %.400s", line);
            report(&p, f, where);
            failed++;
        }
        ran++;
        free(f);
        program_free(&p);
    }
    fclose(file);
    printf("[ model    ] %zu regression programs, %zu disagree\n", ran, failed);
    assert_true(ran > 0);
    assert_int_equal(failed, 0);
}

static void test_replay(void **state)
{
    (void)state;
    const char *text = getenv("TWHEEL_REPLAY");
    struct program p;
    if (program_parse(&p, text) != 0) {
        program_free(&p);
        fail_msg("TWHEEL_REPLAY does not parse");
    }
    struct failure *f = malloc(sizeof *f);
    assert_non_null(f);
    int bad = interp_run(&p, f);
    if (bad)
        report(&p, f, "FAILED: TWHEEL_REPLAY program");
    else
        printf("[ model    ] replayed %zu operations: twheel agrees with the model\n", p.n);
    free(f);
    program_free(&p);
    assert_false(bad);
}

int main(void)
{
    setvbuf(stdout, NULL, _IONBF, 0);
    interp_max_step = env_u64("TWHEEL_MAX_STEP", UINT64_MAX);
    if (getenv("TWHEEL_REPLAY")) {
        const struct CMUnitTest replay[] = {cmocka_unit_test(test_replay)};
        return cmocka_run_group_tests(replay, NULL, NULL);
    }
    choose_seeds();
    for (size_t i = 0; i < seed_count; i++)
        printf("[ model    ] seed %" PRIu64 ", TWHEEL_OPS=%" PRIu64
               " per seed; alone: TWHEEL_SEED=%" PRIu64 " %s\n",
               seeds[i], total_ops(), seeds[i], "build/tests/model/test_model");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_text_roundtrip),
        cmocka_unit_test(test_regressions),
        cmocka_unit_test(test_wrap),
        cmocka_unit_test(test_levels),
        cmocka_unit_test(test_maxdelay),
        cmocka_unit_test(test_pool),
        cmocka_unit_test(test_clock),
        cmocka_unit_test(test_mix),
        cmocka_unit_test(test_staging_reached),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
