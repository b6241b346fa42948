// std::multimap timer baseline; see tree_map.hpp.
#include "tree_map.hpp"

#include <utility>

namespace bench {

tree_map::tree_map()
    : map_(std::less<uint64_t>(),
           counting_allocator<std::pair<const uint64_t, payload>>(&bytes_))
{
}

tree_map::handle tree_map::add(uint64_t delay, callback *cb, void *arg)
{
    // Keys are mostly in the future: insert at the upper bound of equal keys.
    return map_.emplace(now_ + delay, payload{cb, arg});
}

int tree_map::cancel(handle h)
{
    map_.erase(h);
    return 1;
}

int tree_map::reschedule(handle &h, uint64_t delay)
{
    auto node = map_.extract(h);
    node.key() = now_ + delay;
    h = map_.insert(std::move(node));
    return 1;
}

uint64_t tree_map::advance(uint64_t ticks)
{
    uint64_t fired = 0;
    now_ += ticks;
    while (!map_.empty()) {
        auto it = map_.begin();
        if (it->first > now_)
            break;
        payload p = it->second;
        map_.erase(it);
        p.cb(p.arg);
        fired++;
    }
    return fired;
}

uint64_t tree_map::next_expiry() const
{
    if (map_.empty())
        return UINT64_MAX;
    uint64_t at = map_.begin()->first;
    return at <= now_ ? 0 : at - now_;
}

} // namespace bench
