/* A user's translation unit that instantiates every template of the facade,
 * compiled by strict.sh with the warnings users turn into errors. Compiled
 * only, never run. */
#include <twheel/timer.hpp>

#include <array>
#include <chrono>
#include <memory>
#include <string>

using namespace std::chrono_literals;

namespace {
struct session : std::enable_shared_from_this<session> {
    twheel::timer idle;
    int packets = 0;
};
} // namespace

int main()
{
    twheel::config c;
    c.tick = 10ms;
    twheel::wheel w(c);
    w.on_error([](std::exception_ptr) {});
    auto s = std::make_shared<session>();
    int n = 0;
    int *p = &n;
    std::array<char, 100> big{};
    s->idle = w.after(30s, [self = s->shared_from_this()] { ++self->packets; });
    twheel::timer a = w.after(1.5ms, [p] { ++*p; });                     /* inline */
    twheel::timer b = w.every(250ms, [&n, name = std::string("x")] { n += int(name.size()); });
    twheel::timer d = w.every(std::chrono::duration<double>(0.5), 1min, [big] { (void)big; });
    twheel::timer e = w.at(w.clock_now() + 2s, [] {});
    w.after_detached(std::chrono::seconds(1), [] {});
    w.every_detached(1s, [] {});
    w.every_detached(1s, 2s, [] {});
    w.at_detached(twheel::time_point{} + 1h, [] {});
    s->idle.reschedule(30s);
    b.reschedule(1s, 500ms);
    std::optional<twheel::duration> left = a.remaining();
    std::optional<twheel::time_point> due = a.deadline();
    std::optional<twheel::time_point> next = w.next_deadline();
    std::optional<twheel::duration> ticks = w.next_expiry();
    std::size_t ran = w.advance(5) + w.advance(20ms) + w.expire();
    std::uint64_t t = w.ticks(std::chrono::nanoseconds(1500));
    int timeout = w.timeout_ms();
    bool pending = a.pending() || static_cast<bool>(e);
    tw_stats stats = w.stats();
    try {
        w.advance(1);
    } catch (const twheel::callback_error &error) {
        ran += error.fired() + error.errors().size();
    }
    tw_id id = d.detach();
    return static_cast<int>(ran + t + stats.pending + id) + timeout + pending +
           left.has_value() + due.has_value() + next.has_value() + ticks.has_value() + n;
}
