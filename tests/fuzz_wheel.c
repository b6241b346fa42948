/*
 * libFuzzer target: the input bytes are an operation program (decoded by
 * program_from_bytes() in model/interp.c) run on twheel and on the reference
 * model side by side, exactly as tests/model/test_model.c does. Any
 * disagreement, broken invariant (tw_check), double or missing release, or
 * leak prints the program and traps.
 *
 *   CC=clang meson setup /tmp/build-fuzz -Dfuzz=true \
 *       -Db_sanitize=address,undefined -Db_lundef=false
 *   ninja -C /tmp/build-fuzz tests/fuzz_wheel
 *   /tmp/build-fuzz/tests/fuzz_wheel -max_total_time=60 tests/fuzz_corpus
 *
 * A crash file replays with `fuzz_wheel crash-...`; the program it prints
 * (after "replay with:") also runs as TWHEEL_REPLAY=... test_model.
 *
 * The meson target compiles this one file, so the shared interpreter and
 * the reference are included here as sources. So is timer.c itself: only
 * code compiled with -fsanitize=fuzzer gets coverage feedback, and the
 * library archive is not. Its definitions make the linker leave the
 * archive's copy out. Build with -DTWHEEL_FUZZ_LINKED_LIBRARY to fuzz the
 * linked library instead (when it is built with -fsanitize=fuzzer-no-link).
 */
#ifndef TWHEEL_FUZZ_LINKED_LIBRARY
#include "../timer.c"
#endif
#include "model/interp.c"
#include "model/model.c"

#define FUZZ_MAX_OPS 256

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* At exit (a -runs or -max_total_time run ends with exit()), the staging
 * cases the inputs reached, in the form test_model prints them; .ci/run
 * checks that its fuzz run reached each one. */
static void print_staging_reach(void)
{
    struct staging_reach r = interp_staging_reach();
    const uint64_t *per_level[] = {r.add, r.cancel, r.reschedule_from, r.reschedule_into,
                                   r.periodic_rearm, r.jump_past_deadline};
    const char *names[] = {"add", "cancel", "reschedule_from", "reschedule_into",
                           "periodic_rearm", "jump_past_deadline"};
    fprintf(stderr, "staging reached:");
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        fprintf(stderr, " %s=%llu,%llu,%llu,%llu", names[i],
                (unsigned long long)per_level[i][0], (unsigned long long)per_level[i][1],
                (unsigned long long)per_level[i][2], (unsigned long long)per_level[i][3]);
    fprintf(stderr, " destroy=%llu wrap=%llu\n", (unsigned long long)r.destroy,
            (unsigned long long)r.wrap);
}

/* TWHEEL_MAX_STEP caps the ticks of one advance/expire, as in test_model. */
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    atexit(print_staging_reach);
    const char *s = getenv("TWHEEL_MAX_STEP");
    if (s && *s)
        interp_max_step = strtoull(s, NULL, 0);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct failure failure;
    struct program p;
    program_from_bytes(&p, data, size, FUZZ_MAX_OPS);
    if (interp_run(&p, &failure)) {
        fprintf(stderr, "%s", failure.text);
        program_shrink(&p, 5000);
        if (interp_run(&p, &failure)) {
            fprintf(stderr, "shortest failing program (%zu operations):\n", p.n);
            program_print(stderr, &p, "\n");
            fprintf(stderr, "%s", failure.text);
        }
        fprintf(stderr, "replay with:\nTWHEEL_REPLAY='");
        program_print(stderr, &p, ";");
        fprintf(stderr, "'\n");
        __builtin_trap();
    }
    program_free(&p);
    return 0;
}
