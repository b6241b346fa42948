// heap_quad (heap_quad.c) behind the benchmark's common interface; see
// structures.hpp for the interface.
#ifndef BENCH_HEAP_QUAD_ADAPTER_HPP
#define BENCH_HEAP_QUAD_ADAPTER_HPP

#include <cstdint>

#include "heap_quad.h"

namespace bench {

template <void (*Fire)(void *)> struct heap_quad_adapter {
    using handle = hq_timer *;
    static constexpr bool exact_next_expiry = true;
    const char *name = "heap_quad";
    hq_heap *h = nullptr;
    void create() { h = hq_create(); }
    void destroy() { hq_destroy(h); h = nullptr; }
    handle add(uint64_t d, void *arg) { return hq_add(h, d, Fire, arg); }
    int cancel(handle &t) { return hq_cancel(h, t); }
    int reschedule(handle &t, uint64_t d, void *) { return hq_reschedule(h, t, d); }
    void advance(uint64_t ticks) { hq_advance(h, ticks); }
    uint64_t next_expiry() { return hq_next_expiry(h); }
};

} // namespace bench

#endif
