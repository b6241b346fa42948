// twheel behind the benchmark's common interface: add(delay) -> handle,
// cancel, reschedule, advance(ticks), next_expiry. Every call is the plain
// public C API. The bench drives its wheels with tw_advance, so they are
// TW_DRIVE_TICKS, as a tick-driven user configures them: an AUTO wheel
// would read the clock on every add made before its first advance.
#ifndef BENCH_TWHEEL_ADAPTER_HPP
#define BENCH_TWHEEL_ADAPTER_HPP

#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include <twheel/timer.h>

namespace bench {

// The lock a wheel gets when its config says nothing: the headline rows.
inline int default_lock()
{
    struct tw_config c;
    tw_config_init(&c);
    return c.lock;
}

template <void (*Fire)(void *)> struct twheel_adapter {
    using handle = tw_id;
    // a lower bound when the earliest timer of a big far slot has left
    static constexpr bool exact_next_expiry = false;
    const char *name;
    int lock;
    int drive; // enum tw_drive_kind
    int clock; // enum tw_clock_kind: the clock a clock-driven wheel reads
    tw_wheel *w = nullptr;

    twheel_adapter(const char *n, int lock_kind, int drive_kind = TW_DRIVE_TICKS,
                   int clock_kind = TW_CLOCK_MONOTONIC)
        : name(n), lock(lock_kind), drive(drive_kind), clock(clock_kind)
    {
    }

    static void trampoline(tw_wheel *, tw_id, void *arg) { Fire(arg); }

    void create()
    {
        struct tw_config c;
        tw_config_init(&c);
        c.lock = lock;
        c.drive = drive;
        c.clock = clock;
        w = tw_create(&c);
        if (!w) {
            std::perror("tw_create");
            std::exit(2);
        }
    }
    void destroy()
    {
        tw_destroy(w);
        w = nullptr;
    }
    handle add(uint64_t delay, void *arg) { return tw_add(w, delay, trampoline, arg); }
    int cancel(handle &h) { return tw_cancel(w, h); }
    int reschedule(handle &h, uint64_t delay, void *) { return tw_reschedule(w, h, delay); }
    void advance(uint64_t ticks) { tw_advance(w, ticks); }
    uint64_t next_expiry() { return tw_next_expiry(w); }
};

} // namespace bench

#endif
