-- The Lua module at scale (suites 'lua' and 'lua-big'; not under valgrind):
-- 1M timers fire each on its tick, once; 100 000 heartbeat sessions with
-- 20 packets each; one node reused more than 2^21 times, past the point
-- where a C id stops being exact as a Lua 5.1 number.
local h = require "harness"
local twheel = require "twheel"
local test, eq, ok = h.test, h.eq, h.ok

local integer_ids = math.type ~= nil
local getuservalue = debug.getuservalue or debug.getfenv

-- Functions in the wheel's closure table (one per slot, false where a
-- slot holds none: these wheels have no timers with arguments).
local function closures(w)
  local n = 0
  for k, v in pairs((getuservalue(w))) do
    if type(k) == "number" and k > 0 and v ~= false then n = n + 1 end
  end
  return n
end

test("1M timers: each fires on its tick, once, in tick order", function()
  local n = 1000000
  local w = twheel.new { drive = "ticks" }
  local random = h.random(12345)
  local due = {}     -- id -> due tick
  local fired = 0
  local late, twice, order = 0, 0, 0
  local last = 0
  local function fire(wheel, id)
    local now = wheel:now()
    if due[id] ~= now then late = late + 1 end
    if due[id] == false then twice = twice + 1 end
    if now < last then order = order + 1 end
    last = now
    due[id] = false
    fired = fired + 1
  end
  for _ = 1, n do
    local delay = random(1, 60000)
    due[w:add(delay, fire)] = delay
  end
  eq(w:count(), n, "count")
  eq(closures(w), n, "closures")
  while w:next_expiry() do
    w:advance(1)
  end
  eq(fired, n, "fired")
  eq(late, 0, "timers off their tick")
  eq(twice, 0, "timers fired twice")
  eq(order, 0, "timers out of tick order")
  eq(w:count(), 0, "empty")
  eq(closures(w), 0, "every closure released")
end)

test("100 000 heartbeat sessions, 20 packets each, then closed", function()
  local sessions, packets, timeout = 100000, 20, 30000
  local w = twheel.new { drive = "ticks" }
  local random = h.random(99)
  local ids = {}
  local kicked = 0
  local function kick() kicked = kicked + 1 end
  for s = 1, sessions do ids[s] = w:add(timeout, kick) end
  for _ = 1, packets do
    w:advance(random(1, 500))
    for s = 1, sessions do
      if not w:reschedule(ids[s], timeout) then error("lost session " .. s) end
    end
  end
  eq(kicked, 0, "no busy session kicked")
  for s = 1, sessions, 2 do ok(w:cancel(ids[s]), "logout") end
  eq(w:count(), sessions / 2, "half logged out")
  w:advance(timeout)
  eq(kicked, sessions / 2, "the silent half kicked")
  eq(closures(w), 0, "closures")
end)

test("a stale id after more than 2^21 reuses of one node", function()
  local w = twheel.new { drive = "ticks" }
  local f = function() end
  local reuses = 2 ^ 21 + 100
  local early, wrapped -- ids from reuse 5 and 5 + 2^21 of the node
  local id
  for i = 1, reuses do
    id = w:add(10, f)
    if i == 5 then early = id end
    if i == 5 + 2 ^ 21 then wrapped = id end
    w:cancel(id)
  end
  local fired
  local live = w:add(10, function(_, got) fired = got end)
  if integer_ids then
    eq(math.type(live), "integer", "integer id")
    ok(live >= 2 ^ 53, "the generation passed 2^21: " .. live)
  else
    ok(live == math.floor(live) and live < 2 ^ 53, "an exact number: " .. live)
  end
  ok(live ~= early and live ~= wrapped and early ~= wrapped, "distinct ids")
  for _, stale in ipairs { early, wrapped, id } do
    eq(w:cancel(stale), false, "stale cancel")
    eq(w:reschedule(stale, 1), false, "stale reschedule")
    eq(w:remaining(stale), nil, "stale remaining")
  end
  eq(w:remaining(live), 10, "live")
  ok(w:reschedule(live, 3), "reschedule the live one")
  eq(w:advance(3), 1, "fired")
  eq(fired, live, "the callback gets the same id")
end)

h.done()
