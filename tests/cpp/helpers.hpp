/* Shared helpers for the C++ facade tests: CMocka from C++, a captured object
 * that counts its own destruction, and exception checks. */
#ifndef TW_TEST_CPP_HELPERS_HPP
#define TW_TEST_CPP_HELPERS_HPP

/* Every standard header first: cmocka.h defines macros such as fail() that
 * clash with names in the C++ library (std::ios::fail). Test files include
 * their own standard headers before this one. */
#include <twheel/timer.hpp>

#include <chrono>
#include <ios>
#include <string>
#include <system_error>
#include <utility>

#include <cstdarg>
#include <cstddef>
#include <cstdint>
#include <csetjmp>
extern "C" { /* cmocka.h 1.1.5 has no C++ guard */
#include <cmocka.h>
}

using namespace std::chrono_literals;

/* Counts what happened to the closure objects of one test. */
struct life {
    int made = 0;      /* owning tokens constructed (first or copied) */
    int destroyed = 0; /* owning tokens destroyed */
    int alive() const { return made - destroyed; }
};

/* Captured by value in a closure. Moves hand ownership over, so `destroyed`
 * counts the closure's destruction, whatever the facade does with moves.
 * Destroying the same object twice fails the test at once. */
class token {
public:
    explicit token(life *l) : l_(l) { ++l_->made; }
    token(const token &o) : l_(o.l_) { ++l_->made; }
    token(token &&o) noexcept : l_(std::exchange(o.l_, nullptr)) {}
    token &operator=(const token &) = delete;
    token &operator=(token &&) = delete;
    ~token()
    {
        assert_int_equal(magic_, 0x7e57);
        magic_ = 0xdead;
        if (l_)
            ++l_->destroyed;
    }
    life *counts() const { return l_; }

private:
    life *l_;
    unsigned magic_ = 0x7e57;
};

/* The std::system_error code thrown by f(), 0 if it returned, -1 for another
 * exception. */
template <class F>
int error_of(F &&f)
{
    try {
        std::forward<F>(f)();
    } catch (const std::system_error &e) {
        assert_true(e.code().category() == std::generic_category());
        return e.code().value();
    } catch (...) {
        return -1;
    }
    return 0;
}

/* Fake clock for expire(): microseconds the test sets. */
inline std::uint64_t fake_clock(void *context)
{
    return *static_cast<std::uint64_t *>(context);
}

inline twheel::config single_threaded(std::chrono::microseconds tick = 1ms)
{
    twheel::config c;
    c.tick = tick;
    c.lock = twheel::lock_kind::none;
    return c;
}

#define RUN_TESTS(tests) cmocka_run_group_tests(tests, nullptr, nullptr)

#endif
