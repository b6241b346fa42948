// timeout_wheel (timeout_wheel.c) behind the benchmark's common interface;
// see structures.hpp for the interface.
//
// timeout.c's records belong to the caller (a connection embeds its own);
// here they come from the same kind of pool as the heaps' records, and the
// record of a timer that fired goes back to it before the harness sees it.
#ifndef BENCH_TIMEOUT_WHEEL_ADAPTER_HPP
#define BENCH_TIMEOUT_WHEEL_ADAPTER_HPP

#include <cstdint>

#include "bench_pool.h"
#include "timeout_wheel.h"

namespace bench {

template <void (*Fire)(void *)> struct timeout_wheel_adapter {
    struct record {
        tc_timeout t;
        void *arg;
    };
    using handle = record *;
    static constexpr bool exact_next_expiry = false; // timeouts_timeout: a bound
    const char *name = "timeout_wheel";
    tc_wheel *w = nullptr;
    int64_t pool_bytes = 0;
    bench_pool pool;
    static inline bench_pool *current; // the pool a firing record goes back to

    static void trampoline(void *p)
    {
        record *r = (record *)p;
        void *arg = r->arg;
        bench_pool_put(current, r);
        Fire(arg);
    }
    void create()
    {
        w = tc_create();
        bench_pool_init(&pool, sizeof(record), &pool_bytes);
        current = &pool;
    }
    void destroy()
    {
        tc_destroy(w);
        bench_pool_destroy(&pool);
        w = nullptr;
    }
    handle add(uint64_t d, void *arg)
    {
        record *r = (record *)bench_pool_get(&pool);
        r->arg = arg;
        tc_add(w, &r->t, d, trampoline, r);
        return r;
    }
    int cancel(handle &r)
    {
        if (!tc_cancel(w, &r->t))
            return 0;
        bench_pool_put(&pool, r);
        return 1;
    }
    int reschedule(handle &r, uint64_t d, void *) { return tc_reschedule(w, &r->t, d); }
    void advance(uint64_t ticks) { tc_advance(w, ticks); }
    uint64_t next_expiry() { return tc_next_expiry(w); }
};

} // namespace bench

#endif
