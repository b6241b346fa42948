/* ==== clock: where a delay counts from ===================================
 * Guarantees: no timer fires before its delay has passed by a clock that
 * only moved forward since the call; remainders of ticks carry over. Owns
 * w->clock (readings, the reference point, the drive mode) and
 * w->rebases; moves w->now up only for an empty wheel whose clock ran past
 * it (due_of_call).
 *
 * Where a delay counts from. On a tick-driven wheel: `now`, exact in
 * ticks. On a clock-driven wheel `now` only moves when the driver runs, so
 * it can lag the clock by any amount (an event loop adding timers before
 * its tw_expire, a busy timer thread); the delay then counts from the
 * clock reading the call took, rounded up to the next tick boundary, so
 * the timer never runs before `delay` whole ticks of the clock have passed;
 * rounding up costs at most one tick of lateness. Delay 0 is due at the
 * tick the clock is in, rounded down, so the next tw_expire runs it. A
 * periodic timer's grid starts from its first due tick: never early after
 * a delay of 1 or more, and less than a tick early after a delay of 0.
 *
 * The clock's interface: call_clock (the reading a call needs, taken
 * before the lock), due_for (the due tick of an add or reschedule, for a
 * delay in ticks or in microseconds),
 * expire_target_relock (where tw_expire walks to), the drive mode and its
 * changes, and tick_start_us / ticks_after_us (ticks back to readings,
 * for deadlines). Nothing else writes the clock's fields; tw_timeout_ms,
 * tw_tick_us, tw_get_stats and the checker read some. */

#define NO_READING UINT64_MAX

static unsigned clock_mode(const tw_wheel *w)
{
    return spin_load(&w->clock.mode);
}

/* The two questions the mode answers. A delay counts from a clock reading
 * in modes AUTO (not driven yet) and CLOCK; once ticks drive it, from
 * `now`. */
static HOT_INLINE int delays_read_clock(unsigned mode)
{
    return mode < MODE_TICKS;
}

/* The reference point says when each tick starts, unless only tw_advance
 * ever drove the wheel: then nothing ties its ticks to the clock. */
static int ticks_have_times(unsigned mode)
{
    return mode != MODE_TICKS;
}

/* The mode after a driving call, by the mode before: tw_expire and the
 * timer thread drive by the clock, tw_advance by ticks. Lock held. */
static const unsigned char mode_after_expire[] = {
    MODE_CLOCK, MODE_CLOCK, MODE_TICKS_CLOCKED, MODE_TICKS_CLOCKED};
static const unsigned char mode_after_advance[] = {
    MODE_TICKS, MODE_CLOCK, MODE_TICKS, MODE_TICKS_CLOCKED};

/* Written only when it changes (at most twice in a wheel's life): adds on
 * other threads read the word before taking the lock, and a store on every
 * drive would take its cache line from them each time. */
static void set_mode(tw_wheel *w, const unsigned char *mode_after)
{
    unsigned mode = clock_mode(w);
    if (mode_after[mode] != mode)
        spin_store(&w->clock.mode, mode_after[mode]);
}

static uint64_t read_clock(const tw_wheel *w)
{
    if (w->clock.fn)
        return w->clock.fn(w->clock.context);
    return monotonic_us(w->clock.coarse); /* tried at creation */
}

/* The clock reading an add or reschedule needs, taken before the lock (a
 * clock_fn may be slow); NO_READING when it needs none. The drive mode can
 * only change from AUTO, and the reading is then still right or unused. */
static HOT_INLINE uint64_t call_clock(const tw_wheel *w)
{
    if (!delays_read_clock(clock_mode(w)))
        return NO_READING;
    return read_clock(w);
}

/* The clock read lower than the wheel's last reading (seen by tw_expire,
 * or first by an add or reschedule): the wheel's ticks move back by the
 * step, so tick `now` keeps the part of it already gone (a clock that
 * jitters back by a microsecond costs that microsecond, not the tick, and
 * cannot stall the wheel), a tw_advance lead is kept (timers it has not
 * reached do not become due early), and every pending timer keeps the
 * time it had left. The wheel's time never goes back. Lock held. */
static void rebase(tw_wheel *w, uint64_t clock)
{
    struct wheel_clock *c = &w->clock;
    /* where tick `now` starts, relative to the last reading, in µs:
     * ahead_us - behind_us (saturating; the lead can be any tw_advance) */
    uint64_t ahead_us = saturated_product(w->now - c->base_tick, c->tick_us), behind_us = 0;
    if (c->last_us >= c->base_us)
        behind_us = c->last_us - c->base_us;
    else
        ahead_us = saturated_sum(ahead_us, c->base_us - c->last_us);
    if (ahead_us >= behind_us)
        c->base_us = saturated_sum(clock, ahead_us - behind_us);
    else
        c->base_us = behind_us - ahead_us > clock ? 0 : clock - (behind_us - ahead_us);
    c->base_tick = w->now;
    c->last_us = clock;
    w->rebases++;
}

/* Every reading a call counts from passes here, lock held, and becomes
 * the wheel's last reading, so a step back from any of them is seen. A
 * reading below the last one was either taken before the lock while
 * another thread's newer reading got in first (the call is still in
 * progress, so reading again now is as good a moment of it), or the clock
 * stepped back. A reading taken under the lock tells them apart: on a
 * clock that only moves forward it cannot lie below the last one. A step
 * back re-bases at once, so the call that saw it counts from the clock as
 * it now reads. */
static uint64_t settle_reading(tw_wheel *w, uint64_t clock)
{
    if (clock < w->clock.last_us) {
        clock = read_clock(w);
        if (clock < w->clock.last_us)
            rebase(w, clock);
    }
    w->clock.last_us = clock;
    return clock;
}

/* The tick `clock` falls in by the wheel's reference point, or the next
 * tick boundary when round_up and it falls inside a tick; never before
 * now; TW_NEVER past TW_MAX_TICK. Lock held. */
static uint64_t clock_tick(const tw_wheel *w, uint64_t clock, int round_up)
{
    const struct wheel_clock *c = &w->clock;
    uint64_t elapsed, ticks;
    if (clock <= c->base_us) /* a reading older than the reference point */
        return w->now;
    elapsed = clock - c->base_us;
    ticks = elapsed / c->tick_us + (round_up && elapsed % c->tick_us != 0);
    if (ticks > TW_MAX_TICK - c->base_tick)
        return TW_NEVER;
    ticks += c->base_tick;
    return ticks > w->now ? ticks : w->now;
}

/* The reading `ticks` tick lengths after `start_us`, saturated below
 * UINT64_MAX (TW_NEVER). */
static uint64_t ticks_after_us(const tw_wheel *w, uint64_t start_us, uint64_t ticks)
{
    const uint64_t latest = UINT64_MAX - 1;
    uint64_t reading = saturated_sum(start_us, saturated_product(ticks, w->clock.tick_us));
    return reading < latest ? reading : latest;
}

/* The reading at which the tick `ticks` from now begins by the reference
 * point, so the first tw_expire() reading it reaches that tick; lock held,
 * a clock-driven wheel (base_tick <= now always). */
static uint64_t tick_start_us(const tw_wheel *w, uint64_t ticks)
{
    return ticks_after_us(w, w->clock.base_us, w->now + ticks - w->clock.base_tick);
}

/* The due tick of a timer added or rescheduled now, from a clock reading;
 * lock held. Not only a question: it settles the reading (which may
 * re-base the clock), moves the reference point on a wheel not driven
 * yet, and moves an empty wheel's `now` up to a clock that ran far past
 * it. TW_NEVER when the clock has run so far past `now` (no driver ran for
 * about TW_MAX_DELAY ticks, with timers pending) that the wheel cannot
 * hold it. Out of line, so that the tick-driven add stays short. */
static NOINLINE uint64_t due_of_call(tw_wheel *w, uint64_t delay, uint64_t clock)
{
    unsigned mode = clock_mode(w);
    uint64_t start;
    if (!delays_read_clock(mode)) /* decided since the reading was taken */
        return w->now + delay;
    clock = settle_reading(w, clock);
    if (mode == MODE_AUTO) {
        /* Not driven yet, so perhaps by tw_advance, which needs delays
         * exact in ticks. Count from `now`, and move the clock's reference
         * point here: tick `now` then starts no earlier than this call,
         * and a first tw_expire cannot find the timer due early. The
         * reading is the latest (settle_reading re-based a lower one). */
        w->clock.base_us = clock;
        w->clock.base_tick = w->now;
        return w->now + delay;
    }
    start = clock_tick(w, clock, delay != 0);
    if (start > TW_MAX_TICK) /* the clock is past the last tick: tw_expire */
        start = TW_MAX_TICK; /* will say so; the timer waits at the end */
    if (delay == 0 && w->drive && start > w->drive->target)
        start = w->drive->target; /* on the due queue: see schedule_call */
    if (start - w->now > TW_MAX_DELAY - delay) {
        if (w->live || w->drive)
            return TW_NEVER;
        w->now = start; /* empty: what a tw_expire would do, firing nothing */
    }
    return start + delay;
}

/* The due tick of an add or reschedule `delay` ticks from now, given the
 * reading call_clock took (a tick-driven wheel's is exact, inline). */
static HOT_INLINE uint64_t due_of(tw_wheel *w, uint64_t delay, uint64_t clock)
{
    return clock == NO_READING ? w->now + delay : due_of_call(w, delay, clock);
}

/* Whole ticks of `delay_us` microseconds, rounded up: the most a timer
 * for delay_us can need. */
static uint64_t ticks_of_us(const tw_wheel *w, uint64_t delay_us)
{
    return delay_us / w->clock.tick_us + (delay_us % w->clock.tick_us != 0);
}

/* The due tick of an add or reschedule `delay_us` microseconds of the
 * clock from the reading `clock` (delay_us > 0, its ticks within
 * TW_MAX_DELAY): the tick that begins at or after the reading plus the
 * delay, less than a tick past it. due_of_call with the delay in whole
 * ticks rounded up gives the latest it can be, and does everything else a
 * reading needs (settles it, re-bases, moves an empty wheel's now, checks
 * the range); by then the tick boundaries are where this call counts
 * from, so the first boundary past clock + delay_us is read off them. A
 * wheel not on the clock (tick-driven, or AUTO and not driven yet, where
 * the reading has just become the start of tick `now`) gets the whole
 * ticks, exact there. */
static uint64_t due_after_us(tw_wheel *w, uint64_t delay_us, uint64_t clock)
{
    uint64_t ticks = ticks_of_us(w, delay_us), due, earliest, from;
    unsigned mode;
    if (clock == NO_READING)
        return w->now + ticks;
    mode = clock_mode(w);
    due = due_of_call(w, ticks, clock);
    if (due == TW_NEVER || mode != MODE_CLOCK)
        return due;
    /* from the reading, or from the start of tick `now` when tw_advance
     * has moved `now` past the clock: delays count from the later */
    from = tick_start_us(w, 0);
    if (w->clock.last_us > from)
        from = w->clock.last_us;
    earliest = clock_tick(w, saturated_sum(from, delay_us), 1);
    return earliest < due ? earliest : due;
}

/* The due tick of an add or reschedule: `delay` whole ticks, or, when
 * delay_us is not 0, delay_us microseconds of which `delay` is the whole
 * ticks rounded up (tw_add_us, tw_reschedule_us). */
static HOT_INLINE uint64_t due_for(tw_wheel *w, uint64_t delay, uint64_t delay_us,
                                   uint64_t clock)
{
    return delay_us ? due_after_us(w, delay_us, clock) : due_of(w, delay, clock);
}

/* Where tw_expire walks to: the tick the clock is in. Called as the driver
 * with the lock held; drops it to read the clock (a clock_fn may be slow).
 * An add may record a newer reading meanwhile: ours then looks lower, and
 * settle_reading reads again under the lock. An add that re-based
 * meanwhile (it saw the clock step back) makes ours possibly from before
 * the step, higher than the clock now: read again after it. After a
 * re-base the clock lies in tick `now` when the last reading was this
 * driver's, further on when it was an add's (the wheel had not caught up
 * with it): either way, walk to it. A reference point ahead of the clock
 * (a re-base kept tw_advance's lead) means no tick yet. TW_NEVER past
 * TW_MAX_TICK. */
static uint64_t expire_target_relock(tw_wheel *w)
{
    uint64_t clock, rebases = w->rebases;
    unlock(w);
    clock = read_clock(w);
    lock_acquire(&w->lock, 1);
    if (w->rebases != rebases)
        clock = read_clock(w);
    set_mode(w, mode_after_expire);
    return clock_tick(w, settle_reading(w, clock), 0);
}

/* Lock not held: the wheel is being created. `now` is set. */
static void clock_init(tw_wheel *w, const struct tw_config *c)
{
    spin_init(&w->clock.mode);
    spin_store(&w->clock.mode, (unsigned)c->drive);
    w->clock.tick_us = c->tick_us;
    w->clock.fn = c->clock_fn;
    w->clock.context = c->clock_context;
    /* else the precise one */
    w->clock.coarse = c->clock == TW_CLOCK_MONOTONIC_COARSE && have_coarse_clock();
    w->clock.base_tick = w->now;
    w->clock.base_us = w->clock.last_us = read_clock(w);
}
