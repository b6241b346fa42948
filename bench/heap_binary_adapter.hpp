// heap_binary (heap_binary.c) behind the benchmark's common interface; see
// structures.hpp for the interface.
#ifndef BENCH_HEAP_BINARY_ADAPTER_HPP
#define BENCH_HEAP_BINARY_ADAPTER_HPP

#include <cstdint>

#include "heap_binary.h"

namespace bench {

template <void (*Fire)(void *)> struct heap_binary_adapter {
    using handle = hb_timer *;
    static constexpr bool exact_next_expiry = true;
    const char *name = "heap_binary";
    hb_heap *h = nullptr;
    void create() { h = hb_create(); }
    void destroy() { hb_destroy(h); h = nullptr; }
    handle add(uint64_t d, void *arg) { return hb_add(h, d, Fire, arg); }
    int cancel(handle &t) { return hb_cancel(h, t); }
    int reschedule(handle &t, uint64_t d, void *) { return hb_reschedule(h, t, d); }
    void advance(uint64_t ticks) { hb_advance(h, ticks); }
    uint64_t next_expiry() { return hb_next_expiry(h); }
};

} // namespace bench

#endif
