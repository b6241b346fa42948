-- The release rockspec: `luarocks build` of this file fetches the v1.4.0
-- tag and compiles lua/twheel_lua.c with timer.c (docs/lua.md, "Install
-- with LuaRocks"); `luarocks pack` keeps that source in a .src.rock, whose
-- build fetches nothing.
rockspec_format = "3.0"
package = "twheel"
version = "1.4.0-1"
-- The repository the project will be published at: it does not exist yet,
-- so the upload to luarocks.org waits for it. CI packs a copy of this file
-- whose url points at a local clone (.ci/run, step 1b).
source = {
  url = "git+https://github.com/twheel/twheel.git",
  tag = "v1.4.0",
}
description = {
  summary = "A hierarchical timing wheel: O(1) timers with safe ids, for Lua 5.1/LuaJIT, 5.3 and 5.4",
  detailed = [[
    require "twheel" gives skynet's near[256] + t[4][64] timing wheel with
    O(1) add, cancel and reschedule by id, a next-expiry answer for the
    event loop, and callback errors that never unwind through the wheel.
  ]],
  homepage = "https://github.com/twheel/twheel",
  license = "MIT",
}
dependencies = {
  "lua >= 5.1, < 5.5",
}
build = {
  type = "builtin",
  modules = {
    twheel = {
      -- timer.c includes the src/*.c parts itself: compiling them apart
      -- would define everything twice
      sources = { "lua/twheel_lua.c", "timer.c" },
      incdirs = { "." },
      -- timer.c's tw_ functions stay inside the module: only
      -- luaopen_twheel is exported
      defines = { 'TW_EXPORT=__attribute__((visibility("hidden")))' },
    },
  },
  platforms = {
    -- The wheel's threads and the binding's floor(). On macOS both names
    -- resolve to the system library, so the same line links there.
    unix = {
      modules = {
        twheel = {
          libraries = { "pthread", "m" },
        },
      },
    },
    -- On Windows (MinGW or MSVC) the DLL exports what is marked dllexport,
    -- luaopen_twheel alone; the wheel needs the Win32 synchronization and
    -- multimedia-timer libraries.
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
