/* The module's memory goes through the allocator of the lua_State that
 * made the wheel: a host that counts what its states allocate (skynet's
 * per-service figure) sees the wheel. A state made with a counting
 * allocator loads the module, adds 100 000 timers with one argument each,
 * and the bytes counted outside the collector's own count (raw allocator
 * calls, which collectgarbage("count") does not see) must be what the
 * wheel reports it holds (w:stats().bytes + binding_bytes), within 10 %;
 * after close they are given back. CMocka; run by meson with LUA_CPATH
 * pointing at the module built beside it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>
#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>

struct counter {
    size_t bytes; /* held now, by every allocation of the state */
};

static void *counting_alloc(void *ud, void *pointer, size_t old_size, size_t new_size)
{
    struct counter *counter = ud;
    /* old_size is a type tag, not a size, when pointer is NULL */
    size_t held = pointer ? old_size : 0;
    if (new_size == 0) {
        free(pointer);
        counter->bytes -= held;
        return NULL;
    }
    void *grown = realloc(pointer, new_size);
    if (grown)
        counter->bytes = counter->bytes - held + new_size;
    return grown;
}

/* Runs `chunk` and returns the number it leaves on top. */
static double run(lua_State *L, const char *chunk)
{
    if (luaL_dostring(L, chunk) != LUA_OK)
        fail_msg("%s", lua_tostring(L, -1));
    double value = lua_tonumber(L, -1);
    lua_pop(L, 1);
    return value;
}

static void test_wheel_memory_is_counted(void **state)
{
    (void)state;
    struct counter counter = {0};
    lua_State *L = lua_newstate(counting_alloc, &counter);
    assert_non_null(L);
    luaL_openlibs(L);
    run(L, "twheel = require 'twheel'; entities = {}"
           " for i = 1, 100000 do entities[i] = {} end"
           " collectgarbage('collect') return 0");
    size_t before = counter.bytes;
    double gc_before = run(L, "return collectgarbage('count') * 1024");
    run(L, "w = twheel.new { drive = 'ticks' }"
           " for i = 1, 100000 do w:after(i % 5000 + 1, print, entities[i]) end"
           " collectgarbage('collect') return 0");
    double gc_after = run(L, "return collectgarbage('count') * 1024");
    double reported = run(L, "local s = w:stats() return s.bytes + s.binding_bytes");
    double counted = (double)counter.bytes - (double)before;
    double outside_collector = counted - (gc_after - gc_before);
    print_message("counted %.0f B, of which the collector's %.0f; the wheel reports %.0f\n",
                  counted, gc_after - gc_before, reported);
    assert_true(reported > 100000 * 48.0); /* a node and its call, at least */
    assert_true(outside_collector >= reported * 0.9);
    assert_true(outside_collector <= reported * 1.1);

    /* closed: the wheel's memory is given back to the same allocator */
    size_t open_bytes = counter.bytes;
    run(L, "w:close() return 0");
    assert_true((double)(open_bytes - counter.bytes) >= reported * 0.9);
    lua_close(L);
    assert_int_equal(counter.bytes, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_wheel_memory_is_counted),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
