/* Durations to ticks without a 128-bit integer type: this program is built
 * with TWHEEL_NO_INT128, so the facade takes the portable arithmetic that
 * MSVC compiles, and its answers are checked against a 128-bit reference
 * (the compiler's own unsigned __int128 here) for counts past 2^53
 * nanoseconds, where a 64-bit double (MSVC's long double) is no longer
 * exact, and for the ratios a std::chrono duration can carry. */
#include <cstdint>
#include <random>

#include "helpers.hpp"

#ifndef TWHEEL_NO_INT128
#error "build this test with -DTWHEEL_NO_INT128"
#endif

__extension__ typedef unsigned __int128 u128;

/* ceil(count * num / (den * tick)), saturated: the reference. */
static std::uint64_t reference(std::uint64_t count, std::uint64_t num, std::uint64_t den,
                               std::uint32_t tick)
{
    const u128 x = static_cast<u128>(count) * num, d = static_cast<u128>(den) * tick;
    const u128 t = x / d + (x % d != 0);
    return t > UINT64_MAX ? UINT64_MAX : static_cast<std::uint64_t>(t);
}

template <class Period>
static void check_period(std::mt19937_64 &random, std::uint64_t low, int trials)
{
    using r = std::ratio_divide<Period, std::micro>;
    for (int i = 0; i < trials; i++) {
        const std::uint64_t count = low + random() % (INT64_MAX - low);
        const auto tick = static_cast<std::uint32_t>(1 + random() % 1000000);
        const std::chrono::duration<std::int64_t, Period> d(static_cast<std::int64_t>(count));
        const std::uint64_t got = twheel::detail::to_ticks(d, tick);
        const std::uint64_t want = reference(count, r::num, r::den, tick);
        if (got != want)
            fail_msg("%llu * %lld/%lld us on %u us ticks: %llu, not %llu",
                     static_cast<unsigned long long>(count), static_cast<long long>(r::num),
                     static_cast<long long>(r::den), tick,
                     static_cast<unsigned long long>(got),
                     static_cast<unsigned long long>(want));
    }
}

/* Nanosecond counts from 2^53 (about 104 days) up, on ticks of 3 ms and
 * more, where the delay is in the wheel's range: exact. */
static void test_nanoseconds_past_2_53(void **)
{
    std::mt19937_64 random(53);
    const std::uint64_t start = UINT64_C(1) << 53;
    for (std::uint64_t k = 0; k < 100000; k++) {
        const std::uint64_t count = start + k * 7919 + random() % 1000;
        const auto tick = static_cast<std::uint32_t>(3000 + random() % 20000);
        const std::chrono::nanoseconds d(static_cast<std::int64_t>(count));
        const std::uint64_t got = twheel::detail::to_ticks(d, tick);
        assert_int_equal(got, reference(count, 1, 1000, tick));
    }
    /* one past a whole tick is a tick more; exactly a whole tick is not */
    const std::uint64_t whole = (UINT64_C(1) << 53) / 3000000 * 3000000;
    assert_int_equal(twheel::detail::to_ticks(std::chrono::nanoseconds(whole), 3000),
                     whole / 3000000);
    assert_int_equal(twheel::detail::to_ticks(std::chrono::nanoseconds(whole + 1), 3000),
                     whole / 3000000 + 1);
}

/* Every kind of ratio, over the whole range of counts, products past 2^64
 * included: exact, and saturated where the ticks do not fit. */
static void test_every_ratio(void **)
{
    std::mt19937_64 random(64);
    check_period<std::nano>(random, 1, 20000);
    check_period<std::micro>(random, 1, 20000);
    check_period<std::milli>(random, 1, 20000);
    check_period<std::ratio<1>>(random, 1, 20000);
    check_period<std::ratio<3600>>(random, 1, 20000);
    check_period<std::ratio<7, 3>>(random, 1, 20000);
    check_period<std::ratio<1, 3>>(random, 1, 20000);
    check_period<std::atto>(random, 1, 20000);
    check_period<std::ratio<86400 * 365>>(random, 1, 20000);
}

/* Through the wheel: a delay of 2^53 + 1 ns on a 3 ms tick waits the
 * ticks that cover it, never fewer. */
static void test_a_wheel_waits_the_exact_ticks(void **)
{
    twheel::config c;
    c.tick = std::chrono::milliseconds(3);
    c.drive = twheel::drive_kind::ticks;
    twheel::wheel w(c);
    const std::chrono::nanoseconds d((INT64_C(1) << 53) + 1);
    twheel::timer t = w.after(d, [] {});
    const std::uint64_t ticks = reference((UINT64_C(1) << 53) + 1, 1, 1000, 3000);
    assert_int_equal(tw_remaining(w.native_handle(), t.id()), ticks);
}

int main()
{
    const CMUnitTest tests[] = {
        cmocka_unit_test(test_nanoseconds_past_2_53),
        cmocka_unit_test(test_every_ratio),
        cmocka_unit_test(test_a_wheel_waits_the_exact_ticks),
    };
    return cmocka_run_group_tests(tests, nullptr, nullptr);
}
