/*
 * asio_loop: a twheel wheel (the C++ facade) inside a standalone Asio
 * io_context.
 *
 * Asio's steady_timer is one object and one reactor entry per timeout. A
 * server with a heartbeat, an idle kick and a few cooldowns per session puts
 * those on a wheel instead and gives Asio one steady_timer, due when the
 * wheel's earliest timer is. Three members are the whole pattern:
 *
 *   arm()             after every turn: point the steady_timer at the clock
 *                     plus wheel.timeout_ms() when that is earlier than
 *                     where it points, or cancel it when the wheel is empty
 *                     (so an idle io_context sleeps on I/O alone, and run()
 *                     can return);
 *   on_wheel_timer()  its handler: wheel.expire(), then arm();
 *   read()'s handler  an I/O completion: handle the data (it adds and
 *                     reschedules timers), then arm(), since a timer it just
 *                     added may be due before the steady_timer.
 *
 * The wheel is driven by its clock (expire()), so a delay counts from the
 * clock at the call that adds the timer, in an I/O handler as in a timer
 * callback, however long ago expire() last ran: no timer is early.
 *
 * The I/O source is a pipe that a client thread writes packets into; each
 * packet pushes the client's idle kick back (timer::reschedule) and asks for
 * a request timer (wheel::after_detached), some of whose callbacks add a
 * follow-up timer. loop_check.h is the bench around it: the client thread
 * and the checks (no timer early, lateness, timers added by I/O not left
 * waiting, no spinning while idle). Runs ~1.8 s, prints a summary, exits 1
 * on a failed check.
 *
 *   usage: asio_loop [--check | --help]
 */
#include <asio.hpp>

#include <twheel/timer.hpp>

#include <array>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <system_error>

#include "loop_check.h"

using namespace std::chrono_literals;
using std::chrono::milliseconds;

namespace {

twheel::config wheel_config()
{
    twheel::config cfg;
    cfg.tick = std::chrono::microseconds(LC_TICK_US);
    cfg.lock = twheel::lock_kind::none; /* one thread drives and uses it */
    /* Delays count from the clock at each call from the first add on (the
     * default, automatic, decides at the first expire() and would get the
     * same here). */
    cfg.drive = twheel::drive_kind::clock;
    return cfg;
}

class server {
public:
    server(asio::io_context &io, loop_check &lc, int pipe_fd)
        : wheel_(wheel_config()), timer_(io), pipe_(io, pipe_fd), lc_(lc)
    {
    }

    void start()
    {
        lc_timer *t = lc_new(&lc_, LC_HEARTBEAT_MS, LC_HEARTBEAT_MS, -1);
        heartbeat_t_ = t;
        heartbeat_ = wheel_.every(milliseconds(LC_HEARTBEAT_MS),
                                  milliseconds(LC_HEARTBEAT_MS),
                                  [t] { lc_fired(t); });
        add_kick();
        read();
        arm(); /* timers were added outside the loop: arm before it runs */
    }

private:
    /* ---- the pattern ---------------------------------------------------- */

    /* Call after every turn: after expire() and after any handler that may
     * have added, cancelled or rescheduled a timer. */
    void arm()
    {
        const int ms = wheel_.timeout_ms(); /* by the clock; never late */
        if (ms < 0) { /* nothing pending: sleep on I/O alone */
            if (armed_)
                timer_.cancel(); /* its handler sees operation_aborted */
            armed_ = false;
            return;
        }
        /* steady_clock is CLOCK_MONOTONIC, the wheel's clock. */
        const auto deadline = std::chrono::steady_clock::now() + milliseconds(ms);
        /* Moving a steady_timer cancels its pending wait, whose handler then
         * runs just to see operation_aborted. So move it only when the
         * deadline comes earlier; one that moves later (the earliest timer
         * was cancelled or rescheduled) is left alone: it wakes the loop
         * once early, expire() finds nothing due, and arm() moves it. */
        if (armed_ && deadline >= timer_.expiry())
            return;
        timer_.expires_at(deadline);
        armed_ = true;
        timer_.async_wait([this](const std::error_code &ec) { on_wheel_timer(ec); });
    }

    void on_wheel_timer(const std::error_code &ec)
    {
        if (ec == asio::error::operation_aborted)
            return; /* moved or cancelled by arm(), which set what replaced it */
        armed_ = false;
        lc_timer_wakeup(&lc_);
        /* every timer now due, in order; rethrows what a callback threw */
        lc_expired(&lc_, static_cast<int64_t>(wheel_.expire()));
        arm();
    }

    /* ---- I/O ------------------------------------------------------------ */

    void read()
    {
        pipe_.async_read_some(asio::buffer(buf_), [this](const std::error_code &ec,
                                                         std::size_t n) {
            lc_io_wakeup(&lc_);
            /* Writes of whole packets under PIPE_BUF are atomic: whole reads. */
            for (std::size_t i = 0; i < n / sizeof buf_[0]; i++)
                handle_packet(buf_[i]);
            if (!ec) {
                read();
            } else { /* end of file: the client is gone */
                if (ec != asio::error::eof)
                    lc_error(&lc_, ec.message().c_str());
                pipe_.close();
            }
            arm(); /* the packets added timers: one may be due before ours */
        });
    }

    void handle_packet(const lc_packet &p)
    {
        if (++lc_.packets == LC_PACKETS && heartbeat_.cancel())
            heartbeat_t_->cancelled = 1; /* the busy part is over */
        /* A sign of life: push the idle kick back, LC_KICK_MS from now. */
        const std::uint64_t before = lc_now();
        if (kick_.reschedule(milliseconds(LC_KICK_MS)))
            lc_moved(kick_t_, before, LC_KICK_MS);
        else /* it ran: the client was quiet too long, and is back */
            add_kick();
        add_request(lc_new(&lc_, p.delay_ms, 0, p.follow_ms));
    }

    /* ---- timers --------------------------------------------------------- */

    void add_kick()
    {
        lc_timer *t = kick_t_ = lc_new(&lc_, LC_KICK_MS, 0, -1);
        kick_ = wheel_.after(milliseconds(LC_KICK_MS), [this, t] {
            lc_fired(t); /* a real server would drop the session here */
            drained();
        });
    }

    void add_request(lc_timer *t)
    {
        if (!t)
            return;
        wheel_.after_detached(std::chrono::microseconds(t->delay_us), [this, t] {
            lc_fired(t);
            /* A timer added from a callback counts from the clock at this
             * call too; on_wheel_timer() re-arms after expire(). */
            if (t->follow_ms >= 0)
                add_request(lc_new(&lc_, static_cast<std::uint32_t>(t->follow_ms), 0, -1));
            drained();
        });
    }

    /* Whenever the wheel runs empty, the bench may want one lone timer for
     * its quiet and idle stretches (loop_check.h). */
    void drained()
    {
        lc_timer *t;
        if (wheel_.empty() && (t = lc_next_stretch(&lc_)) != nullptr)
            add_request(t);
    }

    twheel::wheel wheel_;
    asio::steady_timer timer_; /* due when the wheel's earliest timer is */
    bool armed_ = false;       /* an async_wait on timer_ is pending */
    asio::posix::stream_descriptor pipe_; /* the client's packets */
    std::array<lc_packet, 512> buf_{};
    twheel::timer heartbeat_, kick_; /* handles: destroying one cancels it */
    lc_timer *heartbeat_t_ = nullptr, *kick_t_ = nullptr;
    loop_check &lc_;
};

} // namespace

int main(int argc, char **argv)
{
    const int status = lc_parse_args(argc, argv, "asio_loop");
    if (status >= 0)
        return status;
    auto lc = std::make_unique<loop_check>();
    if (lc_init(lc.get(), "asio_loop", nullptr) != 0)
        return 1;
    const std::string version = "asio " + std::to_string(ASIO_VERSION / 100000) + "." +
                                std::to_string(ASIO_VERSION / 100 % 1000) + "." +
                                std::to_string(ASIO_VERSION % 100);
    try {
        asio::io_context io;
        const int fd = lc->pipe_rd;
        lc->pipe_rd = -1; /* the stream_descriptor owns and closes it */
        server srv(io, *lc, fd);
        srv.start();
        lc_start_traffic(lc.get());
        /* Returns when no work is left: the pipe closed at its end of file,
         * the steady_timer cancelled because the wheel is empty. A server's
         * acceptor keeps it running; to stop one, io.stop() or close its
         * I/O objects; destroying the wheel drops pending timers unrun. */
        io.run();
    } catch (const std::exception &e) {
        lc_error(lc.get(), e.what());
    }
    return lc_finish(lc.get(), version.c_str());
}
