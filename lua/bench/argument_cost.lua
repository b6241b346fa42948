-- Memory and add time per timer by number of arguments (0 to 3), at N =
-- 200 000: the collector's count plus the C side (w:stats()), per timer;
-- then what a wheel holding N timers without arguments pays, once, at its
-- first timer with one (the closure table goes from one entry per timer
-- to two).
--
--   LUA_CPATH='build/lua/5.4/?.so' lua5.4 lua/bench/argument_cost.lua
local twheel = require "twheel"
local N = 200000
local e = {}
for i = 1, N do e[i] = { id = i } end
local function nothing() end
local function bytes(k)
  collectgarbage() collectgarbage()
  local w = twheel.new { drive = "ticks" }
  local before = collectgarbage("count") * 1024
  local t0 = os.clock()
  for i = 1, N do
    local x = e[i]
    if k == 0 then w:add(1 + i % 60000, nothing)
    elseif k == 1 then w:after(1 + i % 60000, nothing, x)
    elseif k == 2 then w:after(1 + i % 60000, nothing, x, i)
    else w:after(1 + i % 60000, nothing, x, i, true) end
  end
  local t = (os.clock() - t0) / N * 1e9
  collectgarbage() collectgarbage()
  local st = w:stats()
  local b = (collectgarbage("count") * 1024 - before + st.bytes + st.binding_bytes) / N
  w:close()
  return b, t
end
for k = 0, 3 do
  local b, t = bytes(k)
  print(string.format("%s %d argument(s): %.1f B/timer, add %.0f ns", jit and "LuaJIT" or _VERSION, k, b, t))
end
do
  collectgarbage() collectgarbage()
  local w = twheel.new { drive = "ticks" }
  for i = 1, N do w:add(1 + i % 60000, nothing) end
  local t0 = os.clock()
  w:after(1, nothing, e[1])
  local t = os.clock() - t0
  print(string.format("%s the first argument on a wheel of %d timers without: %.1f ms",
                      jit and "LuaJIT" or _VERSION, N, t * 1e3))
  w:close()
end
