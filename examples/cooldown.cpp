/*
 * Skill cooldowns and connection heartbeats for a few thousand players with
 * the C++ facade (cpp/timer.hpp).
 *
 * Every player owns its timers as RAII handles:
 *   - a heartbeat: each packet pushes it out again (reschedule), and when a
 *     player stays silent for 5 s it fires and kicks the player;
 *   - one cooldown per skill: a skill can be cast again when its timer no
 *     longer is pending.
 * Removing a player (logout or kick, even from inside its own heartbeat
 * callback) destroys its handles, which cancels whatever was still pending:
 * no callback ever runs for a player that is gone.
 *
 * The simulation drives the wheel frame by frame with advance(), so the output
 * is the same on every run; a real server calls expire() from its loop and
 * sleeps for next_expiry() or timeout_ms().
 */
#include <twheel/timer.hpp>

#include <array>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <unordered_map>

using namespace std::chrono_literals;

namespace {

struct skill {
    const char *name;
    std::chrono::duration<double> cooldown; /* any chrono type will do */
};

constexpr std::array<skill, 3> skills{{
    {"fireball", 1500ms},
    {"blink", 8s},
    {"heal", std::chrono::duration<double>(12.25)},
}};

constexpr auto heartbeat_timeout = 5s;
constexpr auto frame = 100ms;

struct player {
    int id = 0;
    twheel::timer heartbeat;
    std::array<twheel::timer, skills.size()> cooldown;
};

struct counters {
    long casts = 0, rejected = 0, ready_again = 0, cut_short = 0;
    long kicked = 0, logged_out = 0, packets = 0;
};

class server {
public:
    explicit server(twheel::wheel &w) : wheel_(w) {}

    void join(int id)
    {
        auto p = std::make_unique<player>();
        p->id = id;
        /* [this, id] and not the player: the callback looks the player up, and
         * the player's destruction cancels it anyway */
        p->heartbeat = wheel_.after(heartbeat_timeout, [this, id] {
            ++stats.kicked;
            if (stats.kicked <= 3)
                std::printf("  t=%6.1fs  player %d silent for %llds: kicked\n", seconds(),
                            id, static_cast<long long>(heartbeat_timeout.count()));
            leave(id); /* destroys this very timer's handle: allowed */
        });
        players_.emplace(id, std::move(p));
    }

    void leave(int id)
    {
        auto it = players_.find(id);
        if (it == players_.end())
            return;
        for (const auto &c : it->second->cooldown)
            stats.cut_short += c.pending() ? 1 : 0;
        players_.erase(it); /* handles cancel their timers here */
    }

    void packet(player &p)
    {
        ++stats.packets;
        p.heartbeat.reschedule(heartbeat_timeout);
    }

    void cast(player &p, std::size_t s)
    {
        if (p.cooldown[s].pending()) {
            ++stats.rejected;
            return;
        }
        ++stats.casts;
        p.cooldown[s] = wheel_.after(skills[s].cooldown, [this] { ++stats.ready_again; });
    }

    player *find(int id)
    {
        auto it = players_.find(id);
        return it == players_.end() ? nullptr : it->second.get();
    }
    std::size_t online() const { return players_.size(); }
    double seconds() const
    {
        return std::chrono::duration<double>(wheel_.tick() * wheel_.now()).count();
    }

    counters stats;

private:
    twheel::wheel &wheel_;
    std::unordered_map<int, std::unique_ptr<player>> players_;
};

} // namespace

int main(int argc, char **argv)
{
    if (argc > 1) {
        const bool help = argc == 2 && (std::strcmp(argv[1], "--help") == 0 ||
                                        std::strcmp(argv[1], "-h") == 0);
        std::fprintf(help ? stdout : stderr,
                     "usage: cooldown\n"
                     "  simulates skill cooldowns and heartbeats for 3000 players on\n"
                     "  one wheel (10 ms ticks) and prints what fired; no options\n");
        return help ? 0 : 2;
    }
    twheel::config cfg;
    cfg.tick = 10ms; /* skynet's tick */
    cfg.lock = twheel::lock_kind::none; /* one thread owns the wheel */
    twheel::wheel wheel(cfg);
    server srv(wheel);

    constexpr int n_players = 3000;
    for (int id = 0; id < n_players; ++id)
        srv.join(id);
    std::printf("%d players joined: %zu heartbeat timers pending\n", n_players, wheel.size());

    /* a server-wide report every 10 s of game time */
    twheel::timer report = wheel.every(10s, 10s, [&] {
        std::printf("  t=%6.1fs  online %4zu  timers %5zu  casts %6ld  rejected %6ld  kicked %3ld\n",
                    srv.seconds(), srv.online(), wheel.size(), srv.stats.casts,
                    srv.stats.rejected, srv.stats.kicked);
    });

    std::mt19937 rng(20261122);
    std::uniform_real_distribution<double> roll(0.0, 1.0);
    std::uniform_int_distribution<std::size_t> pick_skill(0, skills.size() - 1);
    /* players 0..149 stop sending at some point (a lost connection) */
    std::array<long, 150> goes_silent_at{};
    for (auto &frame_no : goes_silent_at)
        frame_no = static_cast<long>(roll(rng) * 400);

    const long frames = 600; /* one minute of game time */
    for (long f = 0; f < frames; ++f) {
        for (int id = 0; id < n_players; ++id) {
            player *p = srv.find(id);
            if (!p)
                continue;
            const bool silent =
                id < static_cast<int>(goes_silent_at.size()) && f >= goes_silent_at[static_cast<std::size_t>(id)];
            if (silent)
                continue;
            if (roll(rng) < 0.3)
                srv.packet(*p);
            if (roll(rng) < 0.05)
                srv.cast(*p, pick_skill(rng));
            if (id >= 2900 && roll(rng) < 0.002) {
                srv.leave(id); /* logout: its pending timers are cancelled */
                ++srv.stats.logged_out;
            }
        }
        wheel.advance(wheel.ticks(frame)); /* a real server: wheel.expire() */
    }

    const counters &s = srv.stats;
    std::printf("after %.0f s of game time:\n", srv.seconds());
    std::printf("  %ld packets, %ld casts, %ld rejected while on cooldown\n", s.packets,
                s.casts, s.rejected);
    std::printf("  %ld cooldowns ran out, %ld cut short by a logout or kick\n", s.ready_again,
                s.cut_short);
    std::printf("  %ld players kicked by their heartbeat, %ld logged out, %zu online\n",
                s.kicked, s.logged_out, srv.online());
    if (auto next = wheel.next_expiry())
        std::printf("  %zu timers pending, next one due in %lld ms\n", wheel.size(),
                    static_cast<long long>(std::chrono::duration_cast<std::chrono::milliseconds>(*next).count()));

    /* Every player that went silent was kicked by its heartbeat timer, and
     * no cooldown still pending has longer to go than its skill lasts. */
    int silent_online = 0, too_long = 0;
    for (int id = 0; id < n_players; ++id) {
        const player *p = srv.find(id);
        if (!p)
            continue;
        silent_online += id < static_cast<int>(goes_silent_at.size()) ? 1 : 0;
        for (std::size_t k = 0; k < skills.size(); ++k) {
            const auto left = p->cooldown[k].remaining();
            too_long += left && *left > wheel.tick() * wheel.ticks(skills[k].cooldown) ? 1 : 0;
        }
    }

    /* shutting down: every remaining handle cancels its timer */
    for (int id = 0; id < n_players; ++id)
        srv.leave(id);
    report.cancel();
    std::printf("everyone left: %zu timers pending\n", wheel.size());
    /* Each cooldown either ran out or was cut short by its player leaving:
     * a cooldown timer that vanished without firing would break the sum. */
    const bool ok = wheel.size() == 0 && silent_online == 0 && too_long == 0 &&
                    s.casts == s.ready_again + s.cut_short;
    if (!ok)
        std::printf("FAILED: %d silent players never kicked; %d cooldowns longer than"
                    " their skill; %ld casts, %ld + %ld ended\n",
                    silent_online, too_long, s.casts, s.ready_again, s.cut_short);
    return ok ? 0 : 1;
}
