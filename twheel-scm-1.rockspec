-- `luarocks make` builds the Lua module from this tree: lua/twheel_lua.c
-- with timer.c compiled in (docs/lua.md, "Install with LuaRocks").
rockspec_format = "3.0"
package = "twheel"
version = "scm-1"
-- Built from a checkout with `luarocks make`, which does not fetch: the
-- project names no public repository, so the source is this directory.
source = {
  url = "file://.",
}
description = {
  summary = "A hierarchical timing wheel: O(1) timers with safe ids, for Lua 5.1/LuaJIT, 5.3 and 5.4",
  detailed = [[
    require "twheel" gives skynet's near[256] + t[4][64] timing wheel with
    O(1) add, cancel and reschedule by id, a next-expiry answer for the
    event loop, and callback errors that never unwind through the wheel.
  ]],
  license = "MIT",
}
dependencies = {
  "lua >= 5.1, < 5.5",
}
build = {
  type = "builtin",
  modules = {
    twheel = {
      sources = { "lua/twheel_lua.c", "timer.c" },
      incdirs = { "." },
      -- timer.c's tw_ functions stay inside the module: only
      -- luaopen_twheel is exported
      defines = { 'TW_EXPORT=__attribute__((visibility("hidden")))' },
      libraries = { "pthread", "m" },
    },
  },
  -- On Windows (MinGW or MSVC) the DLL exports what is marked dllexport,
  -- luaopen_twheel alone; the wheel needs the Win32 synchronization and
  -- multimedia-timer libraries.
  platforms = {
    windows = {
      modules = {
        twheel = {
          sources = { "lua/twheel_lua.c", "timer.c" },
          incdirs = { "." },
          defines = { "TW_EXPORT=" },
          libraries = { "synchronization", "winmm" },
        },
      },
    },
  },
}
