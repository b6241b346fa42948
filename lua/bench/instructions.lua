-- The workload lua/bench/instructions.sh counts: N timers with delays
-- uniform in 1..60000 ticks (drawn as bench.lua draws them), then the
-- stages in order, each letter one: f fill (w:add, or w:after with one
-- argument), c cancel all, e expire all, r reschedule each once. Exits
-- without closing the state, so that no stage pays for the wheel's end.
--
--   lua instructions.lua none|add|after N STAGES
local twheel = require "twheel"
local mode, N, stages = arg[1], tonumber(arg[2]), arg[3]
local state = 1
local function draw(low, high)
  state = (state * 16807) % 2147483647
  return low + state % (high - low + 1)
end
local entities, delays, ids = {}, {}, {}
for i = 1, N do
  entities[i] = { id = i }
  delays[i] = draw(1, 60000)
end
local function nothing() end
local w = twheel.new { drive = "ticks" }
for stage in stages:gmatch(".") do
  if mode == "none" then -- the setup alone
  elseif stage == "f" and mode == "add" then
    for i = 1, N do ids[i] = w:add(delays[i], nothing) end
  elseif stage == "f" then
    for i = 1, N do ids[i] = w:after(delays[i], nothing, entities[i]) end
  elseif stage == "c" then
    for i = 1, N do w:cancel(ids[(i * 7919) % N + 1]) end
  elseif stage == "e" then
    while w:count() > 0 do w:advance(1) end
  elseif stage == "r" then
    for i = 1, N do w:reschedule(ids[(i * 7919) % N + 1], delays[(i * 31) % N + 1]) end
  end
end
os.exit(0, false)
