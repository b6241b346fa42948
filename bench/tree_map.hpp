/*
 * Baseline: an ordered tree keyed by expiry tick, std::multimap (a red-black
 * tree), as nginx (ngx_event_timer_rbtree) and muduo (std::set of
 * (expiration, Timer*)) keep their timers. One node per timer from the
 * counting allocator; the handle is the iterator; the earliest timer is
 * begin() (libstdc++ caches the leftmost node); equal keys keep insertion
 * order; reschedule re-keys the same node through extract()/insert() without
 * freeing it.
 */
#ifndef BENCH_TREE_MAP_HPP
#define BENCH_TREE_MAP_HPP

#include <cstddef>
#include <cstdint>
#include <functional>
#include <cstdlib>
#include <map>
#include <new>

#include "bench_alloc.h"

namespace bench {

template <class T> struct counting_allocator {
    using value_type = T;
    int64_t *bytes;
    explicit counting_allocator(int64_t *b) noexcept : bytes(b) {}
    template <class U>
    counting_allocator(const counting_allocator<U> &o) noexcept : bytes(o.bytes) {}
    // The tree allocates nodes of one size: malloc_usable_size is asked once
    // per size, then the same figure is counted for every node.
    T *allocate(std::size_t n)
    {
        void *p = std::malloc(n * sizeof(T));
        if (!p)
            throw std::bad_alloc();
        *bytes += held(n, p);
        return static_cast<T *>(p);
    }
    void deallocate(T *p, std::size_t n) noexcept
    {
        *bytes -= held(n, p);
        std::free(p);
    }
    static int64_t held(std::size_t n, void *p) noexcept
    {
        static thread_local std::size_t last_n = 0;
        static thread_local int64_t last_bytes = 0;
        if (n != last_n) {
            last_bytes = (int64_t)(malloc_usable_size(p) + CA_CHUNK_OVERHEAD);
            last_n = n;
        }
        return last_bytes;
    }
    template <class U> bool operator==(const counting_allocator<U> &o) const noexcept
    {
        return bytes == o.bytes;
    }
    template <class U> bool operator!=(const counting_allocator<U> &o) const noexcept
    {
        return bytes != o.bytes;
    }
};

class tree_map {
public:
    using callback = void(void *arg);
    struct payload {
        callback *cb;
        void *arg;
    };
    using map_type = std::multimap<uint64_t, payload, std::less<uint64_t>,
        counting_allocator<std::pair<const uint64_t, payload>>>;
    using handle = map_type::iterator;

    tree_map();
    handle add(uint64_t delay, callback *cb, void *arg);
    int cancel(handle h);
    int reschedule(handle &h, uint64_t delay);
    uint64_t advance(uint64_t ticks);
    uint64_t next_expiry() const;
    int64_t bytes() const { return bytes_ + (int64_t)sizeof(*this); }
    uint64_t count() const { return map_.size(); }

private:
    int64_t bytes_ = 0;
    uint64_t now_ = 0;
    map_type map_;
};

} // namespace bench

#endif
