/*
 * Operation programs for the differential test and the fuzz target.
 *
 * A program is a wheel configuration plus a list of operations. interp_run()
 * executes it twice, side by side: once on twheel (through timer.h only) and
 * once on the reference in model.c. Every call, its result, every callback
 * (which timer, at which tw_now(), with which id), every release hook call,
 * and after each operation tw_now/tw_count/tw_next_expiry/tw_timeout_ms/
 * tw_remaining/the stats counters/tw_check are written to an event log per
 * side; after each operation the two logs must be identical.
 *
 * On a clock-driven wheel the twheel side also checks timer.h's rule by
 * the fake clock, independently of the model: no timer fires in a
 * tw_expire before its delay has passed since the call that armed it, and
 * none is still pending after a tw_expire that comes a tick later than
 * that (see check_not_late).
 *
 * Callbacks act on the wheel themselves (add, cancel, reschedule their own
 * and other timers, try to re-enter the driver); what they do is a pure
 * function of the timer's seed and how often it fired, so both sides act
 * alike as long as they agree.
 */
#ifndef TWHEEL_TEST_INTERP_H
#define TWHEEL_TEST_INTERP_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

enum op_kind {
    OP_ADD,         /* tw_add(A) */
    OP_PERIODIC,    /* tw_add_periodic(A, B) */
    OP_ADD_EX,      /* tw_add_ex(A, B, release n % 3) */
    OP_CANCEL,      /* tw_cancel(handle picked by seed), twice if n & 1 */
    OP_CANCEL_ZERO, /* tw_cancel(0) */
    OP_RESCHEDULE,  /* tw_reschedule(handle picked by seed, A) */
    OP_ADVANCE,     /* tw_advance(A) */
    OP_EXPIRE,      /* fake clock += B.v (B.mode 0) or -= B.v, then tw_expire */
    OP_BULK_ADD,    /* n timers, delay (A + i * B.v) mod (TW_MAX_DELAY + 1) */
    OP_MASS_CANCEL, /* cancel every (1 + n % 4)-th handle */
    OP_BAD,         /* a rejected call, variant seed % 9 */
    OP_PROBE,       /* tw_remaining of a few handles */
    OP_CLOCK,       /* fake clock += B.v (B.mode 0) or -= B.v; no call */
    OP_KINDS
};

/* A tick count, resolved when the operation runs (so that it can aim at a
 * wheel boundary relative to the current tick). */
enum val_mode {
    V_LIT,   /* v */
    V_BOUND, /* ticks to the next multiple of 2^s, see interp.c */
    V_MAX,   /* TW_MAX_DELAY + (int64_t)v, at least 0 */
    V_NEXT,  /* tw_next_expiry() + (int64_t)v, at least 0 */
    V_MODES
};

struct val {
    uint8_t mode;
    uint64_t v;
};

struct op {
    uint8_t kind;
    struct val a, b;
    uint32_t seed;
    uint32_t n;
};

#define PF_ADD_IN_RELEASE 1u /* release hooks call tw_add during destroy */

struct prog_config {
    uint64_t start_tick;
    uint32_t tick_us;
    uint32_t lock;
    uint64_t max_timers;
    uint64_t clock0;
    uint32_t flags;
    uint32_t drive; /* enum tw_drive_kind */
};

struct program {
    struct prog_config cfg;
    struct op *ops;
    size_t n, cap;
};

struct failure {
    long op; /* index of the first operation where the sides disagree;
                n = at destroy; -1 = no failure */
    uint32_t kind; /* which events differ (model's, twheel's): shrinking
                      keeps this, so that it stays on the same bug */
    char text[8192];
};

void program_init(struct program *p);
void program_free(struct program *p);
void program_push(struct program *p, const struct op *op);
void program_copy(struct program *dst, const struct program *src);

enum scenario {
    SC_MIX,      /* everything */
    SC_WRAP,     /* start just below a multiple of 2^32 */
    SC_LEVELS,   /* delays and steps aimed at 2^8, 2^14, 2^20, 2^26, 2^32 */
    SC_MAXDELAY, /* delays near TW_MAX_DELAY, steps beyond 2^32 */
    SC_POOL,     /* thousands of timers, mass cancel, re-add, stale ids */
    SC_CLOCK,    /* clock-driven: the fake clock jumps both ways, between
                    calls and at tw_expire */
    SC_COUNT
};
extern const char *const scenario_names[SC_COUNT];

/* A random program of nops operations. */
void program_generate(struct program *p, uint64_t seed, size_t nops,
                      enum scenario scenario);
/* Decodes fuzzer bytes into a program (at most max_ops operations). */
void program_from_bytes(struct program *p, const uint8_t *data, size_t size,
                        size_t max_ops);

/* Runs p on both sides. Returns 0 when they agree, 1 otherwise (f filled). */
int interp_run(const struct program *p, struct failure *f);

/* How many early (lower-bound) answers of tw_next_expiry the runs so far
 * have checked against the model's exact one. */
uint64_t interp_early_answers(void);

/* How often the runs so far have applied the clock rule on the twheel side:
 * firings checked for "not early", and pending one-shots checked for "not
 * late" after a tw_expire. */
struct clock_rule_counts {
    uint64_t firings, pending;
};
struct clock_rule_counts interp_clock_rule_counts(void);

/* The staging cases twheel met (timer.c, "staging"): per level 0..3, the
 * calls whose timer was due in the slot that level is moving down at the
 * time (adds, cancels, reschedules out of and into it, periodic re-arms),
 * and the advances and expires that walked past a staging deadline with
 * timers pending; destroys with timers in such slots, and walks across a
 * multiple of 2^32 ticks. */
struct staging_reach {
    uint64_t add[4], cancel[4], reschedule_from[4], reschedule_into[4];
    uint64_t periodic_rearm[4], jump_past_deadline[4];
    uint64_t destroy, wrap;
};
struct staging_reach interp_staging_reach(void);

/* Shortens a failing program in place (truncation, then dropping runs of
 * operations, then simplifying bulk sizes), at most max_runs replays. */
void program_shrink(struct program *p, size_t max_runs);

/* Replayable text form: "cfg ...;ADD 0:5 0:0 123 0;..." and its parser
 * (returns 0, or -1 on a syntax error). */
void program_print(FILE *out, const struct program *p, const char *sep);
int program_parse(struct program *p, const char *text);

/* Longest single step of OP_ADVANCE / OP_EXPIRE in ticks (default: no
 * limit); test_model.c sets it from TWHEEL_MAX_STEP to isolate bugs. */
extern uint64_t interp_max_step;

#endif
