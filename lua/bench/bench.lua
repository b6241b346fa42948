-- The Lua module against the timers Lua programs write for themselves, in
-- one run: ns per add, cancel, reschedule and expire (per timer fired) at
-- N timers with delays uniform in 1..60000 ticks, for
--   twheel     require "twheel", a tick-driven wheel
--   lua heap   a binary min-heap of timer tables with their positions kept
--              in them (cancel and reschedule in O(log n)), ties by add order
--   lua wheel  a hashed wheel of 4096 slots, each a set of timer tables,
--              every timer of the slot looked at when the slot comes round
-- and, with --c PATH (the c_api program meson builds beside it), the C
-- API on the same workload, and the binding's cost per call over it. With
-- --baseline PATH, another build of the module (an older version, say),
-- opened beside this one (not through require), runs as one more
-- structure: the two versions then meet in one process, on one heap.
--
--   LUA_CPATH='build/lua/5.4/?.so' lua5.4 lua/bench/bench.lua [N] [--reps R] [--c build/lua/bench/c_api]
--                                                        [--baseline OTHER/twheel.so]
--
-- Times are CPU time (os.clock), the best of R runs (default 3), each run
-- on a fresh structure after a full garbage collection; the random draws
-- are made before, so a timed loop is the calls and an array read or two. Every structure
-- must fire every timer on its tick: the run stops if one does not.
local twheel = require "twheel"

local N, REPS, C_API, BASELINE = 1000000, 3, nil, nil
do
  local i = 1
  while arg[i] do
    if arg[i] == "--reps" then REPS = tonumber(arg[i + 1]); i = i + 1
    elseif arg[i] == "--c" then C_API = arg[i + 1]; i = i + 1
    elseif arg[i] == "--baseline" then BASELINE = arg[i + 1]; i = i + 1
    else N = tonumber(arg[i]) end
    i = i + 1
  end
end
local MAX_DELAY = 60000
local floor = math.floor

-- Park-Miller, as lua/tests/harness.lua and c_api.c draw it.
local state
local function seed(s) state = s end
local function draw(low, high)
  state = (state * 16807) % 2147483647
  return low + state % (high - low + 1)
end

-- ---- a binary heap, as Lua programs write one ----------------------------
local Heap = {}
Heap.__index = Heap

function Heap.new()
  return setmetatable({ n = 0, tick = 0, seq = 0 }, Heap)
end

local function before(a, b)
  return a.due < b.due or (a.due == b.due and a.seq < b.seq)
end

function Heap:up(t, i)
  while i > 1 do
    local p = floor(i / 2)
    local parent = self[p]
    if not before(t, parent) then break end
    self[i] = parent
    parent.pos = i
    i = p
  end
  self[i] = t
  t.pos = i
end

function Heap:down(t, i)
  local n = self.n
  while true do
    local c = 2 * i
    if c > n then break end
    local child = self[c]
    if c < n and before(self[c + 1], child) then
      c = c + 1
      child = self[c]
    end
    if not before(child, t) then break end
    self[i] = child
    child.pos = i
    i = c
  end
  self[i] = t
  t.pos = i
end

function Heap:add(delay, fn)
  self.seq = self.seq + 1
  local t = { due = self.tick + delay, seq = self.seq, fn = fn, pos = 0 }
  self.n = self.n + 1
  self:up(t, self.n)
  return t
end

function Heap:remove(t)
  local i, last = t.pos, self[self.n]
  self[self.n] = nil
  self.n = self.n - 1
  t.pos = 0
  if last ~= t then
    if i > 1 and before(last, self[floor(i / 2)]) then self:up(last, i) else self:down(last, i) end
  end
end

function Heap:cancel(t)
  if t.pos == 0 then return false end
  self:remove(t)
  return true
end

function Heap:reschedule(t, delay)
  if t.pos == 0 then return false end
  self:remove(t)
  self.seq = self.seq + 1
  t.due, t.seq = self.tick + delay, self.seq
  self.n = self.n + 1
  self:up(t, self.n)
  return true
end

function Heap:advance(ticks)
  self.tick = self.tick + ticks
  local fired = 0
  while self.n > 0 and self[1].due <= self.tick do
    local t = self[1]
    self:remove(t)
    t.fn(self, t)
    fired = fired + 1
  end
  return fired
end

function Heap:count() return self.n end
function Heap:now() return self.tick end

-- ---- a hashed wheel, as Lua programs write one ---------------------------
local Wheel = {}
Wheel.__index = Wheel
local SLOTS = 4096

function Wheel.new()
  local w = setmetatable({ tick = 0, n = 0, slots = {} }, Wheel)
  for i = 0, SLOTS - 1 do w.slots[i] = {} end
  return w
end

function Wheel:add(delay, fn)
  if delay < 1 then delay = 1 end
  local t = { due = self.tick + delay, fn = fn }
  local slot = self.slots[t.due % SLOTS]
  slot[t] = true
  t.slot = slot
  self.n = self.n + 1
  return t
end

function Wheel:cancel(t)
  if not t.slot then return false end
  t.slot[t] = nil
  t.slot = nil
  self.n = self.n - 1
  return true
end

function Wheel:reschedule(t, delay)
  if not t.slot then return false end
  t.slot[t] = nil
  t.due = self.tick + (delay < 1 and 1 or delay)
  local slot = self.slots[t.due % SLOTS]
  slot[t] = true
  t.slot = slot
  return true
end

function Wheel:advance(ticks)
  local fired = 0
  for _ = 1, ticks do
    self.tick = self.tick + 1
    local slot, due = self.slots[self.tick % SLOTS], nil
    for t in pairs(slot) do
      if t.due <= self.tick then
        due = due or {}
        due[#due + 1] = t
      end
    end
    if due then
      for i = 1, #due do
        local t = due[i]
        slot[t] = nil
        t.slot = nil
        self.n = self.n - 1
        t.fn(self, t)
      end
      fired = fired + #due
    end
  end
  return fired
end

function Wheel:count() return self.n end
function Wheel:now() return self.tick end

-- ---- the workload ---------------------------------------------------------
local structures = {
  { name = "twheel", new = function() return twheel.new { drive = "ticks" } end },
  { name = "lua heap", new = Heap.new },
  { name = "lua wheel", new = Wheel.new },
}
-- twheel with one argument per timer (w:after(delay, fn, entity)), when the
-- module has it: the entity is a table that exists before the timer (made
-- below, before any measurement), as a game's entity or a connection would.
local with_arg = twheel.new { drive = "ticks" }.after ~= nil
if with_arg then
  table.insert(structures, 2, { name = "twheel+arg", arg = true,
                                new = function() return twheel.new { drive = "ticks" } end })
end
-- The other build: its luaopen_twheel, called directly, so that it does
-- not replace this one in package.loaded. A build that files its
-- metatable in the registry (luaL_newmetatable) would fill this one's
-- with its own methods: the entry is taken away first, so that it makes
-- its own.
local baseline
if BASELINE then
  local registry = debug.getregistry()
  local saved = registry["twheel.wheel"]
  registry["twheel.wheel"] = nil
  baseline = assert(package.loadlib(BASELINE, "luaopen_twheel"))("twheel")
  registry["twheel.wheel"] = saved
  table.insert(structures, with_arg and 3 or 2, { name = "baseline",
                                new = function() return baseline.new { drive = "ticks" } end })
end

-- The timed runs' callback does as little as the C baseline's: it counts.
local fired = 0
local function on_fire() fired = fired + 1 end

-- Every draw is made before the clock starts, so that the timed loops are
-- the calls alone (as in c_api.c): delays to add, an order to cancel in
-- (Fisher-Yates), and the timers and delays of the reschedules.
local delays, order, moved, moved_delay = {}, {}, {}, {}
seed(1)
for i = 1, N do delays[i] = draw(1, MAX_DELAY) end
seed(2)
for i = 1, N do order[i] = i end
for i = N, 2, -1 do
  local j = draw(1, i)
  order[i], order[j] = order[j], order[i]
end
seed(3)
for i = 1, N do
  moved[i] = draw(1, N)
  moved_delay[i] = draw(1, MAX_DELAY)
end

local entities = {}
if with_arg then
  for i = 1, N do entities[i] = { id = i } end
end

local clock = os.clock
local ids = {}

local function fill(s, fn, arg)
  fn = fn or on_fire
  local start = clock()
  if arg then
    for i = 1, N do ids[i] = s:after(delays[i], fn, entities[i]) end
  else
    for i = 1, N do ids[i] = s:add(delays[i], fn) end
  end
  return (clock() - start) / N * 1e9
end

-- One run of op on a fresh structure; ns per operation.
local function run(structure, op)
  for i = 1, #ids do ids[i] = nil end
  collectgarbage("collect")
  local s = structure.new()
  local ns = fill(s, nil, structure.arg)
  if op == "cancel" then
    collectgarbage("collect")
    local start = clock()
    for i = 1, N do s:cancel(ids[order[i]]) end
    ns = (clock() - start) / N * 1e9
    assert(s:count() == 0, structure.name .. ": timers left after cancelling all")
  elseif op == "reschedule" then
    collectgarbage("collect")
    local start = clock()
    for i = 1, N do s:reschedule(ids[moved[i]], moved_delay[i]) end
    ns = (clock() - start) / N * 1e9
  elseif op == "expire" then
    collectgarbage("collect")
    fired = 0
    local start = clock()
    while s:count() > 0 do s:advance(1) end
    ns = (clock() - start) / N * 1e9
    assert(fired == N, structure.name .. ": " .. fired .. " of " .. N .. " fired")
  end
  if s.close then s:close() end
  return ns
end

-- Untimed: each structure fires each timer on its tick (the sum of the
-- ticks the callbacks see agrees with twheel's, and with the delays').
local function tick_sum(structure)
  local s, sum = structure.new(), 0
  fill(s, function(w, _, entity)
    if structure.arg then assert(entity and entity.id, "the argument reaches the callback") end
    sum = sum + w:now()
  end, structure.arg)
  while s:count() > 0 do s:advance(1) end
  if s.close then s:close() end
  return sum
end
do
  local expected = 0
  for i = 1, N do expected = expected + delays[i] end
  for _, structure in ipairs(structures) do
    assert(tick_sum(structure) == expected, structure.name .. " fired timers off their tick")
  end
end

local ops = { "add", "cancel", "reschedule", "expire" }
local results = {}
for _, op in ipairs(ops) do
  results[op] = {}
  for _, structure in ipairs(structures) do
    local best
    for _ = 1, REPS do
      local ns = run(structure, op)
      if not best or ns < best then best = ns end
    end
    results[op][structure.name] = best
  end
end

local c = {}
if C_API then
  local pipe = assert(io.popen(string.format("%q %d %d", C_API, N, REPS)))
  for line in pipe:lines() do
    local op, ns = line:match("^(%a+) ([%d.]+)$")
    if op then c[op] = tonumber(ns) end
  end
  pipe:close()
end

-- Memory per timer with N pending: what the collector counts, plus the C
-- side (the wheel's own bytes and the binding's slot list, allocated
-- through Lua's allocator but outside the collector's count), the
-- entities not counted (they exist before and after).
local memory = {}
for _, structure in ipairs(structures) do
  for i = 1, #ids do ids[i] = nil end
  collectgarbage("collect")
  collectgarbage("collect")
  local s = structure.new()
  local before = collectgarbage("count") * 1024
  fill(s, nil, structure.arg)
  collectgarbage("collect")
  collectgarbage("collect")
  local bytes = collectgarbage("count") * 1024 - before
  local c_side = 0
  if s.stats then
    local st = s:stats()
    c_side = st.bytes + (st.binding_bytes or 0)
  end
  memory[structure.name] = { lua = bytes / N, c = c_side / N,
                             known = s.stats ~= nil or structure.name:sub(1, 3) == "lua" }
  if s.close then s:close() end
end

local version = jit and jit.version or _VERSION
print(string.format("%s, N = %d, delays 1..%d ticks, best of %d runs, ns per operation (expire: per timer fired)",
                    version, N, MAX_DELAY, REPS))
local header = string.format("%-11s %9s %9s %9s %12s %13s", "op", "twheel", "lua heap", "lua wheel",
                             "twheel/heap", "twheel/wheel")
if C_API then header = header .. string.format(" %9s %14s", "C API", "Lua - C API") end
print(header)
for _, op in ipairs(ops) do
  local r = results[op]
  local line = string.format("%-11s %9.1f %9.1f %9.1f %11.3fx %12.3fx", op, r.twheel, r["lua heap"],
                             r["lua wheel"], r.twheel / r["lua heap"], r.twheel / r["lua wheel"])
  if C_API and c[op] then
    line = line .. string.format(" %9.1f %14.1f", c[op], r.twheel - c[op])
  end
  print(line)
  local a = r["twheel+arg"]
  if a then
    print(string.format("%-11s %9.1f %9s %9s %11.3fx %12.3fx", op .. " +arg", a, "", "",
                        a / r["lua heap"], a / r["lua wheel"]))
  end
  local b = r.baseline
  if b then
    print(string.format("%-11s %9.1f %9s %9s %11.3fx %12.3fx", op .. " base", b, "", "",
                        b / r["lua heap"], b / r["lua wheel"]))
  end
end
if baseline then
  print(string.format("%-11s %13s %13s", "against", "twheel/base", "+arg/base"))
  for _, op in ipairs(ops) do
    local r = results[op]
    print(string.format("%-11s %12.3fx %12s", op, r.twheel / r.baseline,
                        r["twheel+arg"] and string.format("%.3fx", r["twheel+arg"] / r.baseline) or "-"))
  end
end
print(string.format("%-11s %9s %9s %9s", "memory", "Lua B", "C B", "B/timer"))
for _, structure in ipairs(structures) do
  local m = memory[structure.name]
  print(string.format("%-11s %9.1f %9s %9s", structure.name, m.lua,
                      m.known and string.format("%.1f", m.c) or "?",
                      m.known and string.format("%.1f", m.lua + m.c) or "?"))
end
