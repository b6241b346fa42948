// skynet (skynet_wheel.c) behind the benchmark's common interface; see
// structures.hpp for the interface. skynet has no cancel, reschedule or
// next-expiry of its own: skynet_wheel.h says what stands in for them.
#ifndef BENCH_SKYNET_ADAPTER_HPP
#define BENCH_SKYNET_ADAPTER_HPP

#include <cstdint>

#include "skynet_wheel.h"

namespace bench {

template <void (*Fire)(void *)> struct skynet_adapter {
    using handle = sk_node *;
    static constexpr bool exact_next_expiry = true;
    // next_expiry walks the slots: the counts give it fewer calls
    static constexpr bool next_expiry_scans = true;
    const char *name = "skynet";
    sk_timer *T = nullptr;
    void create() { T = sk_create(Fire); }
    void destroy() { sk_destroy(T); T = nullptr; }
    handle add(uint64_t d, void *arg) { return sk_add(T, (uint32_t)d, arg); }
    int cancel(handle &n) { return sk_cancel(T, n); }
    // A skynet user keeps its own argument: the old node is only flagged.
    int reschedule(handle &n, uint64_t d, void *arg)
    {
        n = sk_reschedule(T, n, (uint32_t)d, arg);
        return n != nullptr;
    }
    void advance(uint64_t ticks) { sk_advance(T, ticks); }
    uint64_t next_expiry() { return sk_next_expiry(T); }
};

} // namespace bench

#endif
