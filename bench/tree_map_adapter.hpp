// tree_map (tree_map.cpp) behind the benchmark's common interface; see
// structures.hpp for the interface.
#ifndef BENCH_TREE_MAP_ADAPTER_HPP
#define BENCH_TREE_MAP_ADAPTER_HPP

#include <cstdint>
#include <memory>

#include "tree_map.hpp"

namespace bench {

template <void (*Fire)(void *)> struct tree_map_adapter {
    using handle = tree_map::handle;
    static constexpr bool exact_next_expiry = true;
    const char *name = "tree_map";
    std::unique_ptr<tree_map> m;
    void create() { m.reset(new tree_map()); }
    void destroy() { m.reset(); }
    handle add(uint64_t d, void *arg) { return m->add(d, Fire, arg); }
    int cancel(handle &t) { return m->cancel(t); }
    int reschedule(handle &t, uint64_t d, void *) { return m->reschedule(t, d); }
    void advance(uint64_t ticks) { m->advance(ticks); }
    uint64_t next_expiry() { return m->next_expiry(); }
};

} // namespace bench

#endif
