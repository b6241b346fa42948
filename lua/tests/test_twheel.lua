-- The Lua module's behaviour, one test per rule of docs/lua.md. Runs under
-- every Lua meson found (suite 'lua'), also under valgrind in CI: small
-- sizes only; the 1M-timer runs are in test_big.lua.
--
--   LUA_PATH='lua/tests/?.lua' LUA_CPATH='build/lua/5.4/?.so' lua5.4 lua/tests/test_twheel.lua
--
-- With TWHEEL_TEST_ALIASES=1 it expects a module built with 2 direct index
-- bits (meson builds one for 5.1): most ids are then aliases.
local h = require "harness"
local twheel = require "twheel"
local test, eq, ok, raises = h.test, h.eq, h.ok, h.raises

local integer_ids = math.type ~= nil -- 5.3 and 5.4
local aliases = os.getenv("TWHEEL_TEST_ALIASES") == "1"
local getuservalue = debug.getuservalue or debug.getfenv

-- The wheel's closure table, and how many functions it holds: at index s
-- for slot s, or at 2s - 1 (arguments at 2s) once the wheel has had a timer
-- with arguments (`paired`); false where a slot holds nothing.
local function closure_table(w)
  return (getuservalue(w))
end
local function closures(w, paired)
  local n = 0
  for k, v in pairs(closure_table(w)) do
    if type(k) == "number" and k > 0 and v ~= false and (not paired or k % 2 == 1) then
      n = n + 1
    end
  end
  return n
end

local function ticks(options)
  options = options or {}
  options.drive = options.drive or "ticks"
  return twheel.new(options)
end

local function nothing() end

test("module", function()
  ok(string.match(twheel.version, "^%d+%.%d+%.%d+$"), "version " .. tostring(twheel.version))
  eq(twheel.max_delay, 4227858432, "max_delay")
  eq(type(twheel.new), "function", "new")
end)

test("a new wheel is empty", function()
  local w = twheel.new()
  eq(w:count(), 0, "count")
  eq(w:now(), 0, "now")
  eq(w:next_expiry(), nil, "next_expiry")
  eq(w:timeout_ms(), -1, "timeout_ms")
  ok(string.find(tostring(w), "0 pending", 1, true), tostring(w))
end)

test("tick length: tick_ms and tick_us", function()
  local w = ticks { tick_ms = 10 }
  w:add(3, nothing)
  eq(w:timeout_ms(), 30, "3 ticks of 10 ms")
  w = ticks { tick_us = 2500 }
  w:add(4, nothing)
  eq(w:timeout_ms(), 10, "4 ticks of 2.5 ms")
  w = ticks()
  w:add(7, nothing)
  eq(w:timeout_ms(), 7, "the default tick is 1 ms")
end)

test("new rejects bad options", function()
  raises("tick_ms must be a whole number from 1 to 3600000", twheel.new, { tick_ms = 0 })
  raises("tick_ms must be a whole number", twheel.new, { tick_ms = 1.5 })
  raises("tick_ms must be a whole number", twheel.new, { tick_ms = "10" })
  raises("tick_ms must be a whole number", twheel.new, { tick_ms = 3600001 })
  raises("tick_us must be a whole number from 1", twheel.new, { tick_us = 0 })
  raises("tick_us must be a whole number", twheel.new, { tick_us = -5 })
  raises("give one of tick, tick_ms and tick_us", twheel.new, { tick_ms = 10, tick_us = 10 })
  raises("give one of tick, tick_ms and tick_us", twheel.new, { tick_ms = 10, tick = 0.1 })
  raises("tick must be a number of seconds from 0.000001 to 3600", twheel.new, { tick = 0 })
  raises("tick must be a number of seconds", twheel.new, { tick = "0.1" })
  raises("tick must be a number of seconds", twheel.new, { tick = 3601 })
  raises("now must be a function", twheel.new, { now = 5 })
  raises("leave drive out", twheel.new, { now = os.clock, drive = "ticks" })
  raises("now() must answer a number of seconds", twheel.new, { now = function() return "x" end })
  raises("now() must answer a number of seconds", twheel.new, { now = function() return -1 end })
  raises('errors must be "log" or "raise"', twheel.new, { errors = "ignore" })
  raises("call it with a dot", function() return twheel:new { tick_ms = 10 } end)
  raises("call it with a dot", function() return twheel:new {} end)
  raises('lock must be "none", "adaptive", "spin" or "mutex"', twheel.new, { lock = "fast" })
  raises("lock must be", twheel.new, { lock = 1 })
  raises('drive must be "auto", "clock" or "ticks"', twheel.new, { drive = "wall" })
  raises("on_error must be a function", twheel.new, { on_error = "print" })
  raises("cap must be a whole number", twheel.new, { cap = -1 })
  raises("unknown option 'colour'", twheel.new, { colour = "red" })
  raises("unknown option 'ticks'", twheel.new, { ticks = 10 })
  raises("option names are strings", twheel.new, { 10 })
  raises("takes a table of options, got number", twheel.new, 10)
  -- what works
  twheel.new {}
  twheel.new { tick_ms = 3600000, lock = "mutex", drive = "clock", cap = 0, on_error = nothing }
  twheel.new { tick = 1 / 3, now = os.clock, errors = "raise" }
  twheel.new { on_error = setmetatable({}, { __call = nothing }) }
end)

test("a timer fires on its tick, with (wheel, id), once", function()
  local w = ticks()
  local calls = {}
  local id = w:add(5, function(wheel, fired)
    calls[#calls + 1] = { wheel = wheel, id = fired, now = wheel:now() }
  end)
  eq(w:remaining(id), 5, "remaining")
  eq(w:next_expiry(), 5, "next_expiry")
  eq(w:advance(4), 0, "four ticks")
  eq(#calls, 0, "not early")
  eq(w:advance(1), 1, "the fifth tick")
  eq(#calls, 1, "fired once")
  ok(rawequal(calls[1].wheel, w), "the wheel is passed")
  eq(calls[1].id, id, "the id is passed")
  eq(calls[1].now, 5, "now() in the callback is the due tick")
  eq(w:advance(100), 0, "never again")
  eq(w:count(), 0, "count")
  eq(w:remaining(id), nil, "remaining after firing")
  if integer_ids then eq(math.type(id), "integer", "id type") end
end)

test("delay 0 runs in the next advance, even of 0 ticks", function()
  local w = ticks()
  local order = {}
  w:add(0, function(wheel)
    order[#order + 1] = "first"
    wheel:add(0, function() order[#order + 1] = "added by a callback" end)
  end)
  eq(w:advance(0), 1, "advance(0)")
  eq(#order, 1, "a delay 0 added by a callback waits for the next call")
  eq(w:advance(0), 1, "the next call")
  eq(order[2], "added by a callback", "it ran")
end)

test("timers due in one tick run in the order they were added or moved", function()
  local w = ticks()
  local order = {}
  local ids = {}
  for i = 1, 5 do
    ids[i] = w:add(3, function() order[#order + 1] = i end)
  end
  ok(w:reschedule(ids[2], 3), "reschedule")
  w:advance(3)
  eq(table.concat(order, ","), "1,3,4,5,2", "order")
end)

test("periodic timers: fixed rate, every missed firing runs", function()
  local w = ticks()
  local at = {}
  local id = w:add(3, function(wheel) at[#at + 1] = wheel:now() end, 2)
  eq(w:advance(10), 4, "firings in 10 ticks")
  eq(table.concat(at, ","), "3,5,7,9", "due ticks")
  eq(w:remaining(id), 1, "next at 11")
  eq(w:count(), 1, "still pending")
  ok(w:cancel(id), "cancel")
  eq(w:advance(10), 0, "no more")
  -- catch-up: one advance over many periods runs each firing in order
  at = {}
  w = ticks()
  w:add(1, function(wheel) at[#at + 1] = wheel:now() end, 3)
  w:advance(10)
  eq(table.concat(at, ","), "1,4,7,10", "missed firings")
end)

test("cancel: true once for a pending timer, false otherwise", function()
  local w = ticks()
  local ran = false
  local id = w:add(5, function() ran = true end)
  eq(w:cancel(id), true, "pending")
  eq(w:cancel(id), false, "twice")
  w:advance(10)
  eq(ran, false, "a cancelled timer never runs")
  local fired = w:add(1, nothing)
  w:advance(1)
  eq(w:cancel(fired), false, "fired one-shot")
  for _, bad in ipairs { 0, -1, 1.5, 2 ^ 60, 1e300, -1e300, 0 / 0, math.huge } do
    eq(w:cancel(bad), false, "unknown id " .. tostring(bad))
    eq(w:remaining(bad), nil, "remaining of unknown id " .. tostring(bad))
    eq(w:reschedule(bad, 1), false, "reschedule of unknown id " .. tostring(bad))
  end
  raises("number expected", w.cancel, w, "1")
  raises("number expected", w.cancel, w, nil)
  raises("number expected", w.cancel, w)
  raises("number expected", w.remaining, w, {})
  raises("number expected", w.reschedule, w, true, 1)
end)

test("reschedule moves a pending timer and may change its interval", function()
  local w = ticks()
  local at = {}
  local id = w:add(10, function(wheel) at[#at + 1] = wheel:now() end)
  eq(w:reschedule(id, 3), true, "pending")
  eq(w:remaining(id), 3, "remaining")
  w:advance(3)
  eq(table.concat(at, ","), "3", "fired at the new tick")
  eq(w:reschedule(id, 3), false, "fired one-shot")
  -- one-shot -> periodic
  at = {}
  id = w:add(10, function(wheel) at[#at + 1] = wheel:now() end) -- now 3
  eq(w:reschedule(id, 2, 5), true, "to periodic")
  w:advance(12)
  eq(table.concat(at, ","), "5,10,15", "periodic after reschedule")
  -- periodic -> one-shot
  eq(w:reschedule(id, 1, 0), true, "to one-shot")
  w:advance(10)
  eq(table.concat(at, ","), "5,10,15,16", "one more firing")
  eq(w:count(), 0, "done")
  -- periodic keeps its interval when none is given
  at = {}
  id = w:add(1, function(wheel) at[#at + 1] = wheel:now() end, 4) -- now 25
  w:reschedule(id, 2)
  w:advance(10)
  eq(table.concat(at, ","), "27,31,35", "interval kept")
end)

test("next_expiry, timeout_ms, count and now", function()
  local w = ticks { tick_ms = 10 }
  eq(w:next_expiry(), nil, "empty")
  local a = w:add(7, nothing)
  eq(w:next_expiry(), 7, "one timer")
  eq(w:timeout_ms(), 70, "ms")
  w:add(3, nothing)
  eq(w:next_expiry(), 3, "earlier timer")
  eq(w:count(), 2, "count")
  w:advance(3)
  eq(w:next_expiry(), 4, "after advancing")
  eq(w:now(), 3, "now")
  w:cancel(a)
  eq(w:next_expiry(), nil, "cancelled")
  eq(w:timeout_ms(), -1, "idle")
  w:advance(1234)
  eq(w:now(), 1237, "now after a jump")
end)

test("bad arguments raise and leave the wheel unchanged", function()
  local w = ticks()
  local id = w:add(10, nothing)
  local function unchanged(what)
    eq(w:count(), 1, what .. ": count")
    eq(w:next_expiry(), 10, what .. ": next_expiry")
    eq(w:remaining(id), 10, what .. ": remaining")
    eq(w:now(), 0, what .. ": now")
    eq(closures(w), 1, what .. ": closures")
  end
  local max = twheel.max_delay
  local gc = getmetatable(w).__gc
  local cases = {
    { "delay must not be negative", function() w:add(-1, nothing) end },
    { "delay must be a whole number", function() w:add(1.5, nothing) end },
    { "delay must be a whole number", function() w:add(0 / 0, nothing) end },
    { "delay must be a number of ticks, got string", function() w:add("5", nothing) end },
    { "delay must be a number of ticks, got nil", function() w:add(nil, nothing) end },
    { "function expected", function() w:add(1, nil) end },
    { "function expected", function() w:add(1, {}) end },
    { "interval must not be negative", function() w:add(1, nothing, -2) end },
    { "interval must be a whole number", function() w:add(1, nothing, 0.5) end },
    { "delay out of range", function() w:add(max + 1, nothing) end },
    { "delay out of range", function() w:add(math.huge, nothing) end },
    { "interval out of range", function() w:add(1, nothing, max + 1) end },
    { "ticks must not be negative", function() w:advance(-1) end },
    { "ticks must be a whole number", function() w:advance(0.5) end },
    { "ticks must be a number", function() w:advance("1") end },
    { "delay must not be negative", function() w:reschedule(id, -1) end },
    { "delay out of range", function() w:reschedule(id, max + 1) end },
    { "interval out of range", function() w:reschedule(id, 1, max + 1) end },
    { "twheel wheel expected, got nil", function() w.add(nil, 1, nothing) end },
    { "twheel wheel expected, got table", function() w.count({}) end },
    { "twheel wheel expected, got userdata", function() w.count(io.stdout) end },
    { "twheel wheel expected", function() gc({}) end },
  }
  for i, case in ipairs(cases) do
    raises(case[1], case[2])
    unchanged("case " .. i .. " (" .. case[1] .. ")")
  end
  -- the largest delay is accepted
  local far = w:add(max, nothing)
  eq(w:remaining(far), max, "max_delay")
end)

test("a closed wheel raises on every use but close", function()
  local w = ticks()
  local weak = h.weak()
  local ran = false
  local fn = function() ran = true end
  weak[1] = fn
  local id = w:add(1, fn)
  fn = nil
  w:close()
  eq(h.alive(weak), 0, "closing released the closure")
  for name, call in pairs {
    add = function() w:add(1, nothing) end, cancel = function() w:cancel(id) end,
    reschedule = function() w:reschedule(id, 1) end, remaining = function() w:remaining(id) end,
    advance = function() w:advance(1) end, expire = function() w:expire() end,
    next_expiry = function() w:next_expiry() end, timeout_ms = function() w:timeout_ms() end,
    now = function() w:now() end, count = function() w:count() end,
  } do
    raises("the wheel is closed", call)
    ok(name, name)
  end
  w:close()
  ok(string.find(tostring(w), "closed", 1, true), tostring(w))
  eq(ran, false, "close never runs a timer")
end)

test("errors = 'raise': a callback's error is raised after the batch, with a traceback", function()
  local w = ticks { errors = "raise" }
  local ran = {}
  w:add(1, function() ran[#ran + 1] = "a" end)
  w:add(1, function() error("boom") end)
  w:add(1, function() ran[#ran + 1] = "c" end)
  w:add(1, function() error("second") end)
  w:add(2, function() ran[#ran + 1] = "later" end)
  local err = raises("boom", w.advance, w, 1)
  ok(string.find(err, "stack traceback", 1, true), "traceback in: " .. err)
  ok(string.find(err, "test_twheel.lua", 1, true), "the callback's place in: " .. err)
  ok(not string.find(err, "second", 1, true), "only the first error")
  eq(table.concat(ran, ","), "a,c", "the other due timers ran")
  eq(w:count(), 1, "the failed ones are gone")
  eq(closures(w), 1, "and so are their closures")
  eq(w:advance(1), 1, "the wheel goes on")
  eq(ran[3], "later", "later timer")
  -- error values that are not strings are handed on unchanged
  local object = { code = 7 }
  w:add(0, function() error(object) end)
  local caught = raises(nil, w.advance, w, 0)
  ok(rawequal(caught, object), "the same table")
  w:add(0, function() error() end)
  local status = pcall(w.advance, w, 0)
  eq(status, false, "error(nil) still fails the advance")
end)

test("on_error gets (err, id) and the advance returns normally", function()
  local log = {}
  local w = ticks { on_error = function(err, id) log[#log + 1] = { err = err, id = id } end }
  local ok1 = w:add(1, nothing)
  local bad1 = w:add(1, function() error("first") end)
  local bad2 = w:add(1, function() error({ 42 }) end)
  eq(w:advance(1), 3, "callbacks run")
  eq(#log, 2, "two errors")
  eq(log[1].id, bad1, "id of the first")
  ok(string.find(log[1].err, "first", 1, true) and string.find(log[1].err, "traceback", 1, true),
     "message and traceback: " .. tostring(log[1].err))
  eq(log[2].id, bad2, "id of the second")
  eq(log[2].err[1], 42, "error object")
  -- on_error may close the wheel, as a callback may: the batch ends
  local later = 0
  local cw
  cw = ticks { on_error = function() cw:close() end }
  cw:add(1, function() error("x") end)
  cw:add(1, function() later = later + 1 end)
  cw:advance(1)
  eq(later, 0, "closed from on_error: the rest of the batch does not run")
  raises("the wheel is closed", cw.count, cw)
  -- a number gets the traceback as a string does (LuaJIT makes error(42)
  -- a string with its position already)
  local bad3 = w:add(1, function() error(42) end)
  w:advance(1)
  eq(log[3].id, bad3, "id of the number's")
  ok(type(log[3].err) == "string" and log[3].err:find("42", 1, true) and
     log[3].err:find("traceback", 1, true), "a number: as a string, with the traceback: " .. tostring(log[3].err))
  ok(ok1 ~= bad1, "ids differ")
  -- a handler that raises: with errors = "raise", its error is raised
  -- after the batch (by default it is written to stderr, see below)
  w = ticks { on_error = function() error("handler failed") end, errors = "raise" }
  local ran = false
  w:add(1, function() error("x") end)
  w:add(1, function() ran = true end)
  raises("handler failed", w.advance, w, 1)
  ok(ran, "the batch went on")
end)

test("callbacks may add, cancel and reschedule, themselves too", function()
  local w = ticks()
  local log = {}
  local b
  -- cancel a timer due in the same tick
  w:add(1, function(wheel) log[#log + 1] = "cancel b: " .. tostring(wheel:cancel(b)) end)
  b = w:add(1, function() log[#log + 1] = "b ran" end)
  -- a one-shot's own id died as it started
  w:add(1, function(wheel, id)
    log[#log + 1] = "own: " .. tostring(wheel:cancel(id)) .. " " .. tostring(wheel:reschedule(id, 5))
      .. " " .. tostring(wheel:remaining(id))
  end)
  w:advance(1)
  eq(table.concat(log, "; "), "cancel b: true; own: false false nil", "log")
  -- a periodic timer reschedules, then cancels itself
  local at = {}
  w:add(1, function(wheel, id)
    at[#at + 1] = wheel:now()
    if #at == 1 then eq(wheel:remaining(id), 2, "periodic remaining in callback: its next firing") end
    if #at == 1 then eq(wheel:reschedule(id, 5), true, "periodic reschedule in callback") end
    if #at == 3 then eq(wheel:cancel(id), true, "periodic cancel in callback") end
  end, 2)
  w:advance(20)
  eq(table.concat(at, ","), "2,7,9", "periodic")
  eq(w:count(), 0, "cancelled itself")
  eq(closures(w), 0, "closure released")
end)

test("advance from a callback of the same wheel raises there", function()
  local w = ticks { errors = "raise" }
  w:add(1, function(wheel) wheel:advance(1) end)
  raises("already being driven", w.advance, w, 1)
  w:add(1, function(wheel) wheel:expire() end)
  raises("already being driven", w.advance, w, 1)
end)

test("close from a callback: the batch stops, everything is released", function()
  local w = ticks()
  local weak = h.weak()
  local ran = {}
  local fns = {
    function(wheel) ran[#ran + 1] = 1; wheel:close() end,
    function() ran[#ran + 1] = 2 end,
    function() ran[#ran + 1] = 3 end,
  }
  w:add(1, fns[1])
  w:add(1, fns[2])
  w:add(5, fns[3], 1)
  for i = 1, 3 do weak[i] = fns[i] end
  fns = nil
  eq(w:advance(10), 1, "only the closing callback ran")
  eq(table.concat(ran, ","), "1", "ran")
  raises("closed", w.count, w)
  eq(h.alive(weak), 0, "every closure released")
  -- a callback that goes on using the wheel after closing it
  w = ticks { errors = "raise" }
  w:add(1, function(wheel) wheel:close(); wheel:add(1, nothing) end)
  raises("the wheel is closed", w.advance, w, 1)
end)

test("a closure is referenced exactly while its timer is pending", function()
  local w = ticks()
  local weak = h.weak()
  local function make(i) return function() return i end end
  local fired, cancelled, periodic, moved = make(1), make(2), make(3), make(4)
  weak.fired, weak.cancelled, weak.periodic, weak.moved = fired, cancelled, periodic, moved
  local c = w:add(5, cancelled)
  local p = w:add(1, periodic, 1)
  local m = w:add(3, moved)
  w:add(2, fired)
  fired, cancelled, periodic, moved = nil, nil, nil, nil
  eq(h.alive(weak), 4, "all pending")
  eq(closures(w), 4, "closure table")
  w:advance(2)
  h.collect()
  eq(weak.fired, nil, "released after firing")
  ok(weak.periodic and weak.moved and weak.cancelled, "the pending ones stay")
  w:cancel(c)
  h.collect()
  eq(weak.cancelled, nil, "released on cancel")
  w:reschedule(m, 10)
  w:advance(5)
  h.collect()
  ok(weak.moved, "a moved timer keeps its closure")
  w:cancel(p)
  h.collect()
  eq(weak.periodic, nil, "periodic released on cancel")
  eq(closures(w), w:count(), "closure table matches count")
  -- a failed add keeps nothing
  local capped = ticks { cap = 1 }
  capped:add(1, nothing)
  local f = make(5)
  weak.refused = f
  local id, message = capped:add(1, f)
  f = nil
  eq(id, nil, "refused at the cap")
  ok(string.find(message, "cap", 1, true), "message: " .. tostring(message))
  eq(capped:count(), 1, "count at the cap")
  h.collect()
  eq(weak.refused, nil, "a refused closure is not kept")
end)

test("a wheel that becomes garbage releases its closures, cycles included", function()
  local weak = h.weak()
  do
    local w = ticks()
    weak.wheel = w
    for i = 1, 10 do
      local f = function() return w, i end -- captures its wheel
      weak[i] = f
      w:add(i, f, i % 2)
    end
  end
  eq(h.alive(weak), 0, "wheel and closures collected")
end)

test("a wheel collected or closed while a callback runs is safe", function()
  local a = ticks()
  local weak = h.weak()
  local b = ticks()
  weak.b = b
  for i = 1, 5 do
    local f = function() return i end
    weak[i] = f
    b:add(i, f)
  end
  local order = {}
  a:add(1, function()
    b = nil
    h.collect() -- b's __gc runs inside a's callback
    order[#order + 1] = "collected"
  end)
  a:add(1, function() order[#order + 1] = "next" end)
  eq(a:advance(1), 2, "a's batch")
  eq(table.concat(order, ","), "collected,next", "order")
  eq(h.alive(weak), 0, "b and its closures are gone")
  -- a wheel closed and dropped by its own callback, then collected
  do
    local c = ticks()
    c:add(1, function(wheel) wheel:close(); h.collect() end)
    c:add(1, nothing)
    eq(c:advance(1), 1, "closed in its callback")
  end
  h.collect()
end)

test("a callback may drive or use another wheel", function()
  local outer, inner = ticks(), ticks()
  local log = {}
  local victim = inner:add(2, function() log[#log + 1] = "victim" end)
  inner:add(1, function() log[#log + 1] = "inner" end)
  outer:add(1, function()
    log[#log + 1] = "outer"
    eq(inner:advance(1), 1, "inner advance")
    eq(inner:cancel(victim), true, "inner cancel")
  end)
  outer:advance(1)
  inner:advance(5)
  eq(table.concat(log, ","), "outer,inner", "log")
end)

test("coroutines: drive from one, cancel from one, a yield is an error", function()
  local w = ticks()
  local ran = 0
  w:add(1, function() ran = ran + 1 end)
  local co = coroutine.wrap(function() return w:advance(1) end)
  eq(co(), 1, "advance inside a coroutine")
  local b = w:add(2, function() ran = ran + 10 end)
  w:add(1, function()
    coroutine.wrap(function(wheel) wheel:cancel(b) end)(w)
  end)
  w:advance(2)
  eq(ran, 1, "cancelled from a coroutine inside a callback")
  w = ticks { errors = "raise" }
  w:add(1, function() coroutine.yield() end)
  local driver = coroutine.create(function() return w:advance(1) end)
  local resumed, err = coroutine.resume(driver)
  eq(resumed, false, "a callback cannot yield")
  ok(string.find(tostring(err), "yield", 1, true), "error: " .. tostring(err))
end)

test("every lock kind works", function()
  for _, lock in ipairs { "none", "adaptive", "spin", "mutex" } do
    local w = ticks { lock = lock }
    local n = 0
    for i = 1, 100 do w:add(i % 7, function() n = n + 1 end) end
    eq(w:advance(10), 100, lock)
    eq(n, 100, lock .. " ran")
  end
end)

test("a clock-driven wheel: never early by the clock", function()
  local w = twheel.new { tick_ms = 1, drive = "clock" }
  local fired = false
  w:add(50, function() fired = true end)
  local timeout = w:timeout_ms()
  ok(timeout > 0 and timeout <= 51, "timeout_ms " .. timeout)
  eq(w:expire(), 0, "not due yet")
  local started = os.time()
  while not fired and os.time() - started < 10 do
    w:expire()
  end
  ok(fired, "fired within 10 s")
  eq(w:timeout_ms(), -1, "idle")
end)

test("the cap: add answers nil and a message, nothing changes", function()
  local w = ticks { cap = 2 }
  w:add(1, nothing)
  local id = w:add(2, nothing)
  local none, message = w:add(3, nothing)
  eq(none, nil, "refused")
  ok(string.find(message, "too many pending timers", 1, true), message)
  eq(w:count(), 2, "count")
  eq(closures(w), 2, "closures")
  w:cancel(id)
  ok(w:add(3, nothing), "room again")
end)

test("ids: another wheel's ids are refused as stale ones", function()
  -- the same history on both wheels: the same nodes and generations, so
  -- only each wheel's tag tells their ids apart
  local x, y = ticks(), ticks()
  local xs, ys = {}, {}
  for i = 1, 100 do
    xs[i] = x:add(i, nothing)
    ys[i] = y:add(i, nothing)
  end
  for i = 1, 100 do
    eq(y:cancel(xs[i]), false, "cancel of x's id on y")
    eq(y:reschedule(xs[i], 1), false, "reschedule of x's id on y")
    eq(y:remaining(xs[i]), nil, "remaining of x's id on y")
    eq(x:cancel(ys[i]), false, "cancel of y's id on x")
  end
  for i = 1, 100 do
    eq(y:remaining(ys[i]), i, "y's own timer " .. i .. " untouched")
    eq(x:remaining(xs[i]), i, "x's own timer " .. i .. " untouched")
  end
end)

test("ids: unique, and a stale id never acts on a newer timer", function()
  local w = ticks()
  local seen, stale = {}, {}
  for _ = 1, 1000 do
    local id = w:add(10, nothing)
    ok(not seen[id], "id handed out twice: " .. tostring(id))
    seen[id] = true
    stale[#stale + 1] = id
    eq(w:cancel(id), true, "cancel")
  end
  local live = w:add(10, nothing)
  for _, id in ipairs(stale) do
    eq(w:cancel(id), false, "stale cancel")
    eq(w:reschedule(id, 1), false, "stale reschedule")
    eq(w:remaining(id), nil, "stale remaining")
  end
  eq(w:remaining(live), 10, "the live timer is untouched")
  eq(w:count(), 1, "count")
  local largest = 0
  for k in pairs(closure_table(w)) do
    if type(k) == "number" and k > largest then largest = k end
  end
  ok(largest <= 3, "slots are reused: the largest index is " .. largest) -- slot 2's function
  if not aliases then
    eq(closure_table(w)[0], nil, "no alias table below 2^22 nodes")
  end
end)

if aliases then
  test("alias ids (a module with 2 direct index bits)", function()
    local w = ticks()
    local ids, got = {}, {}
    for i = 1, 20 do
      ids[i] = w:add(i % 3, function(_, id) got[i] = id end, i % 2 == 0 and 4 or nil)
    end
    local negative = 0
    for i = 1, 20 do
      if ids[i] < 0 then negative = negative + 1 end
      eq(w:remaining(ids[i]), i % 3, "remaining " .. i)
    end
    eq(negative, 17, "nodes 4..20 have aliases (node 0 is never used)")
    ok(w:reschedule(ids[20], 1), "reschedule an alias")
    ok(w:cancel(ids[19]), "cancel an alias")
    eq(w:cancel(ids[19]), false, "twice")
    w:advance(2)
    for i = 1, 20 do
      if i ~= 19 then eq(got[i], ids[i], "callback id " .. i) end
    end
    -- periodic ones (even i) are pending: cancel them all
    for i = 2, 20, 2 do ok(w:cancel(ids[i]), "cancel periodic " .. i) end
    eq(w:count(), 0, "empty")
    eq(next(closure_table(w)[0]), nil, "alias table emptied")
    -- nodes reused: new aliases, the old ones stay dead
    local fresh = {}
    for i = 1, 20 do fresh[i] = w:add(5, nothing) end
    for i = 1, 20 do
      eq(w:cancel(ids[i]), false, "old id " .. i)
      eq(w:remaining(fresh[i]), 5, "fresh id " .. i)
    end
  end)
end

test("heartbeats: silent sessions time out on their tick, busy ones never", function()
  local w = ticks { tick_ms = 10 }
  local random = h.random(7)
  local timeout = 300
  local sessions = {}
  local kicked = {}
  for s = 1, 2000 do
    local session = { last = 0, silent_after = random(0, 40) }
    session.id = w:add(timeout, function(wheel)
      kicked[#kicked + 1] = s
      eq(wheel:now(), session.last + timeout, "kicked on its tick")
    end)
    sessions[s] = session
  end
  for step = 1, 40 do
    w:advance(random(1, 20))
    for s = 1, 2000 do
      local session = sessions[s]
      if step < session.silent_after then -- a packet: push the timeout out
        eq(w:reschedule(session.id, timeout), true, "reschedule")
        session.last = w:now()
      end
    end
  end
  w:advance(timeout + 1)
  local expected = 0
  for s = 1, 2000 do
    if sessions[s].silent_after < 40 then expected = expected + 1 end
  end
  eq(#kicked, 2000, "every session timed out in the end")
  ok(expected > 0, "some went silent early")
  eq(w:count(), 0, "empty")
  eq(closures(w), 0, "closures")
end)

test("arguments: after, every and add_at pass them to the callback", function()
  local w = ticks()
  local seen = {}
  local entity = { name = "orc" }
  w:after(1, function(wheel, id, a) seen[#seen + 1] = { wheel = wheel, id = id, a = a } end, entity)
  local many = w:after(2, function(_, _, ...) seen[#seen + 1] = { n = select("#", ...), ... } end,
                       1, nil, "three", nil)
  w:after(3, function(...) seen[#seen + 1] = { n = select("#", ...) } end)
  local every = w:every(1, 2, function(_, _, a, b) seen[#seen + 1] = { a = a, b = b } end, "x", 9)
  eq(w:advance(1), 2, "tick 1: the one-argument timer and the first repeat")
  ok(rawequal(seen[1].a, entity) and seen[1].wheel == w, "one argument, the object itself")
  eq(seen[2].a, "x", "every's first argument")
  eq(seen[2].b, 9, "every's second argument")
  eq(w:advance(1), 1, "tick 2")
  eq(seen[3].n, 4, "trailing nils are kept")
  ok(seen[3][1] == 1 and seen[3][2] == nil and seen[3][3] == "three" and seen[3][4] == nil,
     "the values in order")
  eq(w:advance(1), 2, "tick 3: no arguments, and the repeat again")
  eq(seen[4].n, 2, "no arguments: (wheel, id)")
  eq(seen[5].a, "x", "the repeat keeps its arguments")
  ok(w:reschedule(every, 5), "reschedule")
  eq(w:advance(5), 1, "rescheduled")
  eq(seen[6].b, 9, "arguments survive a reschedule")
  ok(many ~= every, "ids")
  -- the add of a later version takes an interval third, never arguments
  local fired = 0
  w:add(1, function(_, _, extra) fired = fired + 1; eq(extra, nil, "add passes none") end, 0)
  w:advance(1)
  eq(fired, 1, "add(delay, fn, 0) is a one-shot")
end)

test("arguments are released with their timer: fired, cancelled, closed", function()
  local w = ticks()
  local weak = h.weak()
  local function make() local object = {}; weak[#weak + 1] = object; return object end
  w:after(1, nothing, make())
  local cancelled = w:after(5, nothing, make(), make())
  local repeating = w:every(1, 1, nothing, make())
  w:after(9, nothing, make())
  eq(h.alive(weak), 5, "held while pending")
  w:advance(1)
  eq(h.alive(weak), 4, "the fired one-shot's argument is released")
  ok(w:cancel(cancelled), "cancel")
  eq(h.alive(weak), 2, "the cancelled timer's two arguments are released")
  w:advance(3)
  eq(h.alive(weak), 2, "a repeating timer keeps its argument")
  ok(w:cancel(repeating), "cancel the repeat")
  eq(h.alive(weak), 1, "released")
  w:close()
  eq(h.alive(weak), 0, "close releases the rest")
end)

test("the closure table: one entry per timer until the first argument, then two; false where none", function()
  local w = ticks()
  local t = closure_table(w)
  local ids = {}
  for i = 1, 4 do ids[i] = w:add(1, nothing) end
  for s = 1, 4 do eq(t[s], nothing, "slot " .. s .. ": its function at its number") end
  eq(t[5], nil, "one entry per timer")
  w:cancel(ids[4])
  eq(t[4], false, "released: false, so the key stays")
  w:add(2, nothing)
  eq(t[4], nothing, "the slot reused")
  eq(t[5], nil, "no new slot")
  -- the first timer with an argument pairs the slots: function at 2s - 1,
  -- arguments (false: none) at 2s, the pending timers unchanged
  local arg = {}
  local fired = {}
  local id = w:after(1, function(_, _, a) fired[#fired + 1] = a end, arg)
  for s = 1, 4 do
    eq(t[2 * s - 1], nothing, "paired: slot " .. s .. "'s function moved")
    eq(t[2 * s], false, "paired: slot " .. s .. " without arguments")
  end
  ok(type(t[9]) == "function" and rawequal(t[10], arg), "the new timer: slot 5, function and argument")
  eq(w:count(), 5, "every timer still pending")
  eq(w:advance(1), 4, "the three at tick 1 and the new one fire")
  ok(rawequal(fired[1], arg), "with its argument")
  eq(t[10], false, "its argument dropped: false again")
  eq(t[9], false, "its function dropped")
  eq(closures(w, true), 1, "the timer at tick 2 remains")
  w:after(1, nothing)
  eq(w:advance(2), 2, "and fires, with the last add")
  eq(closures(w, true), 0, "nothing left")
  for k, v in pairs(t) do
    ok(type(k) ~= "number" or k <= 0 or v == false, "index " .. tostring(k) .. " false")
  end
end)

test("callable tables are callbacks, and on_error handlers", function()
  local w = ticks()
  local hits = {}
  local callable = setmetatable({ name = "c" }, { __call = function(self, wheel, id, arg)
    hits[#hits + 1] = self.name .. ":" .. tostring(arg)
  end })
  w:add(1, callable)
  w:after(1, callable, 7)
  w:every(2, 2, callable, "p")
  w:advance(2)
  eq(table.concat(hits, ","), "c:nil,c:7,c:p", "called with self, then (wheel, id, ...)")
  raises("function expected, got table", w.add, w, 1, {})
  raises("function expected, got table", w.after, w, 1, setmetatable({}, {}))
  -- a __call that is not a function would fail only when the timer fires
  local broken = setmetatable({}, { __call = 5 })
  local pending = w:count()
  raises("function expected, got table", w.after, w, 1, broken)
  raises("function expected, got table", w.every, w, 1, 1, broken)
  raises("on_error must be a function (or a callable table)", twheel.new, { on_error = broken })
  raises("now must be a function (or a callable table)", twheel.new, { tick = 0.1, now = broken })
  eq(w:count(), pending, "nothing added")
  local log = {}
  w = ticks { on_error = setmetatable({}, { __call = function(_, err) log[#log + 1] = err end }) }
  w:add(0, function() error("x") end)
  w:advance(0)
  eq(#log, 1, "a callable on_error")
end)

-- Runs `source` in a fresh interpreter (this one, with this LUA_PATH and
-- LUA_CPATH); returns its stdout and its stderr.
local function run_child(source)
  local interpreter = arg[-1]
  local i = -1
  while arg[i - 1] do i = i - 1; interpreter = arg[i] end
  local script, errors = os.tmpname(), os.tmpname()
  local file = assert(io.open(script, "w"))
  file:write(source)
  file:close()
  local pipe = assert(io.popen(string.format('"%s" "%s" 2>"%s"', interpreter, script, errors)))
  local out = pipe:read("*a")
  pipe:close()
  file = assert(io.open(errors))
  local err = file:read("*a")
  file:close()
  os.remove(script)
  os.remove(errors)
  return out, err
end

test("without on_error a failing callback is logged with its traceback, the drive goes on", function()
  -- a skynet-style tick loop: one advance per frame, every 7th firing fails
  local out, err = run_child([[
    local twheel = require "twheel"
    local w = twheel.new { drive = "ticks" }
    local firings, ran, advanced = 0, 0, 0
    local function work()
      firings = firings + 1
      if firings % 7 == 0 then error("frame failure " .. firings) end
      ran = ran + 1
    end
    for i = 1, 100 do w:add(i % 20, work) end
    w:every(1, 1, work)
    for frame = 1, 40 do
      w:advance(1)
      advanced = advanced + 1
    end
    io.write(firings, " ", ran, " ", advanced, " ", w:count(), "\n")
  ]])
  local firings, ran, advanced, pending = out:match("^(%d+) (%d+) (%d+) (%d+)")
  eq(tonumber(advanced), 40, "every frame's advance returned: " .. out .. err)
  eq(tonumber(firings), 140, "all 100 one-shots and 40 repeats fired")
  eq(tonumber(ran), 140 - 20, "only the 20 failing firings stopped early")
  eq(tonumber(pending), 1, "the repeat is still pending (it failed, it was not cancelled)")
  local _, tracebacks = err:gsub("stack traceback:", "")
  eq(tracebacks, 20, "one traceback per failure on stderr")
  ok(err:find("twheel: timer %-?%d+ failed: .-frame failure 7"), "the failure and its id: " .. err:sub(1, 300))
  ok(err:find("in method 'advance'", 1, true) or err:find("in function 'advance'", 1, true),
     "the traceback goes down to the drive: " .. err:sub(1, 300))
end)

test("an on_error that fails is logged too, by default", function()
  local out, err = run_child([[
    local twheel = require "twheel"
    local w = twheel.new { drive = "ticks", on_error = function() error("handler broke") end }
    local ran = false
    w:add(1, function() error("first") end)
    w:add(1, function() ran = true end)
    io.write(w:advance(1), " ", tostring(ran), "\n")
  ]])
  eq(out, "2 true\n", "the advance returned, the batch went on")
  ok(err:find("handler broke", 1, true), "stderr: " .. err)
end)

-- Seconds the binding's way: to the nearest microsecond.
local function us(seconds) return math.floor(seconds * 1e6 + 0.5) end

-- Drives a wheel of `tick` seconds from a fake clock moved by step() between
-- drives, adding `count` timers as it goes (delays in seconds, some given
-- as add_at times), and checks every firing: never before added + delay,
-- never a tick plus the step later.
local function clock_run(tick, step, count, seed)
  local random = h.random(seed)
  local t = 1000 + random(0, 999) / 1000
  local w = twheel.new { tick = tick, now = function() return t end }
  local fired, early, late, worst = 0, 0, 0, 0
  local largest_step = 0
  local added = 0
  local function check(_, _, due, when)
    fired = fired + 1
    if us(t) < due then early = early + 1 end
    local lateness = t - when
    if lateness > worst then worst = lateness end
    if lateness >= tick + largest_step + 1e-6 then late = late + 1 end
  end
  while fired < count do
    for _ = 1, 5 do
      if added < count then
        added = added + 1
        local delay
        local kind = random(1, 4)
        if kind == 1 then delay = random(0, 50) * tick            -- whole ticks
        elseif kind == 2 then delay = random(0, 5000) / 1000      -- ms
        elseif kind == 3 then delay = random(0, 3000) / 7000      -- no short form
        else delay = random(0, 4000) * 0.001 + 0.0000005 end      -- on a µs's edge
        if random(1, 5) == 1 then
          local at = t + delay
          w:add_at(at, check, us(at), at)
        else
          w:after(delay, check, us(t) + us(delay), t + delay)
        end
      end
    end
    local moved = step()
    if moved > largest_step then largest_step = moved end
    t = t + moved
    w:step()
  end
  return early, late, worst, w
end

test("a wheel on the service's clock: never early, late by less than a tick plus the drive's lag", function()
  local count = 10000
  local cases = {
    { 0.1, "0.1", function() return 0.1 end },
    { 0.1, "0.01", function() return 0.01 end },
    { 0.1, "1/3", function() return 1 / 3 end },
    { 1 / 3, "0.1", function() return 0.1 end },
    { 0.01, "1", function() return 1 end },
  }
  local jitter = h.random(99)
  cases[#cases + 1] = { 0.05, "jitter", function() return jitter(1, 80000) / 1e6 end }
  for i, case in ipairs(cases) do
    local early, late, worst = clock_run(case[1], case[3], count, 1000 + i)
    local what = string.format("tick %.4f s, steps of %s s", case[1], case[2])
    eq(early, 0, what .. ": timers early")
    eq(late, 0, what .. string.format(": timers late (worst %.6f s)", worst))
  end
end)

test("the 0.1 s case: a delay of k tenths on a clock stepped by 0.1 fires on the k-th step", function()
  -- floor((now - start) / 0.1) is k - 1 for 480 of 1 200 of these steps;
  -- the binding counts in microseconds, nearest first, so no step is lost
  local t = 0
  local w = twheel.new { tick = 0.1, now = function() return t end }
  local wrong = 0
  for k = 1, 1200 do
    local at_step
    w:after(0.1, function() at_step = k end)
    t = t + 0.1
    w:step()
    if at_step ~= k then wrong = wrong + 1 end
  end
  eq(wrong, 0, "timers that missed their step")
  -- and three tenths on a clock at 0.30000000000000004: due at 0.6, not 0.7
  local fired_at
  w:after(0.3, function() fired_at = t end)
  local start = t
  while not fired_at do t = t + 0.1; w:step() end
  ok(fired_at - start < 0.3 + 1e-9, string.format("fired %.17g s after", fired_at - start))
end)

test("a seconds wheel: delays, intervals, remaining and next_expiry in seconds", function()
  local t = 50
  local w = twheel.new { tick = 0.25, now = function() return t end }
  local log = {}
  local id = w:every(0.5, 1, function(_, _, name) log[#log + 1] = name .. "@" .. t end, "beat")
  eq(w:remaining(id), 0.5, "remaining in seconds")
  eq(w:next_expiry(), 0.5, "next_expiry in seconds")
  -- after advance(n) has moved the wheel past the clock, a delay counts
  -- from the wheel: never early by the clock
  local late = 0
  local ahead = twheel.new { tick = 0.1, now = function() return late end }
  ahead:advance(3)
  local fired_at
  local early = ahead:after(0.2, function() fired_at = late end)
  eq(ahead:remaining(early), 0.2, "after advance(3): remaining")
  late = 0.15; ahead:step()
  eq(fired_at, nil, "not fired 0.15 s into a 0.2 s delay")
  -- from whole microseconds: 3 ticks of 0.1 s are 0.3, not 3 * 0.1
  local tenths = twheel.new { tick = 0.1, now = function() return t end }
  eq(tenths:remaining(tenths:after(0.3, nothing)), 0.3, "0.3 s answers 0.3")
  eq(tenths:remaining(tenths:after(0.7, nothing)), 0.7, "0.7 s answers 0.7")
  t = 50.5; w:step()
  t = 51.5; w:step()
  eq(table.concat(log, ","), "beat@50.5,beat@51.5", "every second after the first half")
  ok(w:reschedule(id, 0.3), "reschedule in seconds")
  t = 51.75; w:step()
  eq(#log, 2, "0.3 s later has not come at 0.25 s")
  t = 51.8; w:step()
  eq(#log, 2, "0.3 s later, mid-tick: the tick that begins after it runs it")
  t = 52; w:step()
  eq(log[3], "beat@52", "at the first tick boundary past 0.3 s")
  raises("a number of seconds", w.after, w, "1", nothing)
  raises("must not be negative", w.after, w, -0.1, nothing)
  raises("add_at needs a wheel made with now", ticks().add_at, ticks(), 1, nothing)
  local tick_only = twheel.new { tick = 0.1 }
  raises("add_at needs a wheel made with now", tick_only.add_at, tick_only, 1, nothing)
  -- a time before 0 has passed: the next step runs it; NaN is no time
  local ran = 0
  w:add_at(-5, function() ran = ran + 1 end)
  w:step()
  eq(ran, 1, "add_at(-5) runs at the next step")
  raises("a time in seconds expected", w.add_at, w, 0 / 0, nothing)
  raises("a time in seconds expected", w.add_at, w, "1", nothing)
  raises("out of range", w.add_at, w, math.huge, nothing)
  -- without now: the monotonic clock, still in seconds
  local plain = twheel.new { tick = 0.001 }
  local left = plain:remaining(plain:after(0.25, nothing))
  ok(left >= 0.25 and left <= 0.252, "remaining " .. left)
end)

test("every on a seconds wheel: first > 0 is never early; first 0 starts its grid on the current tick", function()
  local t = 10.05 -- mid-tick: the case where the two differ
  local w = twheel.new { tick = 0.1, now = function() return t end }
  local zero, later = {}, {}
  w:every(0, 1, function() zero[#zero + 1] = t end)
  w:every(0.5, 1, function() later[#later + 1] = t end)
  while t < 13.5 do
    t = t + 0.01
    w:step()
  end
  eq(#zero, 4, "every(0, 1): at once, then three more by 13.5 s")
  eq(#later, 3, "every(0.5, 1): three by 13.5 s")
  local tick, slack = 0.1, 1e-9
  for k = 1, 3 do
    local since = zero[k + 1] - 10.05
    ok(since >= k - tick - slack, "every(0): firing " .. k .. " at most a tick early: " .. since)
  end
  ok(zero[2] - 10.05 < 1, "every(0): the grid is on the tick's boundary, before the reading: "
     .. (zero[2] - 10.05))
  for k = 0, 2 do
    local since = later[k + 1] - 10.05
    ok(since >= 0.5 + k - slack, "every(0.5): firing " .. k .. " not early: " .. since)
    ok(since < 0.5 + k + tick + 0.01 + slack, "every(0.5): firing " .. k .. " within a tick and a step")
  end
end)

test("a failing now() is reported, never raised through the wheel; the last reading stands", function()
  local t, fail = 10, false
  local reports = {}
  local w = twheel.new { tick = 0.1, now = function()
    if fail then error("clock broke") end
    return t
  end, on_error = function(err, id) reports[#reports + 1] = { err = err, id = id } end }
  local fired = 0
  w:after(0.2, function() fired = fired + 1 end)
  fail = true
  t = 11
  eq(w:step(), 0, "a failed reading: no time passes")
  ok(#reports >= 1 and tostring(reports[1].err):find("clock broke", 1, true), "reported to on_error")
  eq(reports[1].id, nil, "with no id")
  -- an add while it fails counts from the last good reading (10): due at
  -- 10.5, so the reading of 11 runs it
  w:after(0.5, function() fired = fired + 1 end)
  fail = false
  eq(w:step(), 2, "the clock back: both timers fire")
  -- without on_error: stderr
  local out, err = run_child([[
    local twheel = require "twheel"
    local n = 0
    local w = twheel.new { tick = 0.1, now = function() n = n + 1; if n > 1 then return "soon" end return 0 end }
    io.write(w:step(), "\n")
  ]])
  eq(out, "0\n", "the step returned")
  ok(err:find("now() must answer a number of seconds", 1, true), "stderr: " .. err)
  -- a reading past 2^63 microseconds is out of range, and the message says so
  local big = 0
  w = twheel.new { tick = 0.1, now = function() return big end,
                   on_error = function(e) reports[#reports + 1] = { err = e } end }
  big = 1e13
  w:step()
  ok(tostring(reports[#reports].err):find("below 9.2e12", 1, true),
     "1e13 s: " .. tostring(reports[#reports].err))
  raises("below 9.2e12", twheel.new, { tick = 0.1, now = function() return 1e13 end })
  -- an error value that is not a string is written as its type
  local out4, err4 = run_child([[
    local twheel = require "twheel"
    local n = 0
    local w = twheel.new { tick = 0.1, now = function() n = n + 1; if n > 1 then error({}) end return 0 end }
    w:step()
    local v = twheel.new { drive = "ticks" }
    v:add(0, function() error(setmetatable({}, { __tostring = function() error("not run") end })) end)
    v:advance(0)
    io.write("done\n")
  ]])
  eq(out4, "done\n", "both failures logged, the program went on")
  ok(err4:find("now() failed: (error object is a table value)", 1, true), "the clock's: " .. err4)
  ok(err4:find("twheel: timer %-?%d+ failed: %(error object is a table value%)") and
     not err4:find("not run", 1, true), "the callback's, its __tostring not run: " .. err4)
  -- a now() that calls its own wheel, inside one of the wheel's calls,
  -- is refused there (it reused the add's slot, and crashed)
  local calls, heard2 = 0, {}
  local own
  own = twheel.new { tick = 0.1, now = function()
    calls = calls + 1
    if calls > 1 then own:after(1, nothing) end
    return 0
  end, on_error = function(e) heard2[#heard2 + 1] = e end }
  local first = own:after(0.1, nothing)
  local second = own:after(0.2, nothing)
  ok(first and second and first ~= second, "both adds answered")
  eq(own:count(), 2, "the two adds, nothing from inside now()")
  ok(#heard2 >= 1 and tostring(heard2[1]):find("now() called its own wheel", 1, true),
     "reported as a failed reading: " .. tostring(heard2[1]))
  own:close()
  -- a failed reading inside an add leaves nothing behind: add_at counts
  -- its arguments after reading the clock
  local out5 = run_child([[
    local twheel = require "twheel"
    local fail = false
    local w = twheel.new { tick = 0.1, now = function() if fail then error("boom") end return 0 end }
    fail = true
    w:add_at(0, function(_, _, ...) io.write(select("#", ...), " ", tostring((...)), "\n") end, "x")
    fail = false
    w:step()
  ]])
  eq(out5, "1 x\n", "add_at with a failing now(): its own argument alone")
  -- a callable table as on_error hears of it too
  local heard = {}
  local handler = setmetatable({}, { __call = function(_, err, id)
    heard[#heard + 1] = { err = err, id = id }
  end })
  fail = false
  w = twheel.new { tick = 0.1, on_error = handler, now = function()
    if fail then error("clock broke") end
    return t
  end }
  fail = true
  eq(w:step(), 0, "callable on_error: the step returned")
  ok(#heard >= 1 and tostring(heard[1].err):find("clock broke", 1, true) and heard[1].id == nil,
     "a callable table as on_error is told of the clock's failure")
  -- errors = "raise" does not raise it: a reading fails inside any call
  -- that reads the clock, adds included, not only in a drive
  local out2, err2 = run_child([[
    local twheel = require "twheel"
    local fail = false
    local w = twheel.new { tick = 0.1, errors = "raise", now = function()
      if fail then error("clock broke") end
      return 0
    end }
    fail = true
    io.write(tostring(pcall(w.step, w)), "\n")
  ]])
  eq(out2, "true\n", "errors = raise: the step returned")
  ok(err2:find("clock broke", 1, true), "errors = raise: stderr has the clock's error: " .. err2)
end)

test("stats: the wheel's counts and its memory", function()
  local w = ticks()
  for i = 1, 100 do w:add(i, nothing) end
  w:cancel(w:add(1, nothing))
  local s = w:stats()
  eq(s.pending, 100, "pending")
  eq(s.added, 101, "added")
  eq(s.cancelled, 1, "cancelled")
  ok(s.bytes > 100 * 32, "bytes " .. s.bytes)
  ok(s.binding_bytes >= 101 * 4, "binding_bytes " .. s.binding_bytes)
end)

if _VERSION == "Lua 5.4" then
  test("to-be-closed variable closes the wheel", function()
    local chunk = assert(load([[
      local twheel, weak = ...
      local outer
      do
        local w <close> = twheel.new()
        outer = w
        local f = function() end
        weak[1] = f
        w:add(5, f)
      end
      return outer
    ]]))
    local weak = h.weak()
    local w = chunk(twheel, weak)
    raises("closed", w.count, w)
    eq(h.alive(weak), 0, "closure released")
  end)
end

h.done()
