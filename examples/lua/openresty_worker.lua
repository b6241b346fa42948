-- An OpenResty-style per-worker wheel: every timer of the worker lives in
-- one twheel, driven by a single recurring ngx.timer, so the worker holds
-- tens of thousands of timers while nginx counts one pending timer against
-- lua_max_pending_timers (1024 by default, where ngx.timer.at starts to
-- answer "too many pending timers").
--
--   LUA_CPATH='build/lua/5.4/?.so' lua5.4 examples/lua/openresty_worker.lua
--
-- In OpenResty the module part below goes into a Lua module of your own and
--
--   init_worker_by_lua_block {
--     local timers = require "worker_timers"
--     assert(ngx.timer.every(0.01, timers.tick))
--   }
--
-- Handlers then call timers.after(seconds, fn, ...) instead of
-- ngx.timer.at(). One difference: the callback runs inside the recurring
-- timer's handler, not in a light thread of its own, so a callback that
-- needs cosockets spawns one with ngx.timer.at(0, ...) or ngx.thread.spawn.
--
-- Outside OpenResty a stand-in for ngx (simulated time, a loop that runs
-- the recurring timer every 10 ms) runs the same code: 20 000 upstream
-- keepalive connections that time out when idle, requests that push those
-- timeouts out, and retries with exponential backoff. It checks that no
-- timer runs before its time or more than 20 ms after it, and exits 1
-- when a check fails.
local twheel = require "twheel"

-- ---- the stand-in, only when there is no real ngx ------------------------
local simulated = ngx == nil
local run_stand_in
if simulated then
  local epoch, ms, recurring = 1700000000, 0, {} -- time in whole ms: no drift
  ngx = {
    now = function() return epoch + ms / 1000 end,
    update_time = function() end,
    timer = {
      every = function(interval, handler)
        local period = math.floor(interval * 1000 + 0.5)
        recurring[#recurring + 1] = { period = period, handler = handler, next = ms + period }
        return true
      end,
    },
    log = function(_, ...) io.stderr:write(table.concat({ ... }), "\n") end,
    ERR = "error",
  }
  -- Runs simulated time for `seconds` in 1 ms steps; events(now) is called
  -- at each step, then each recurring timer whose time has come.
  function run_stand_in(seconds, events)
    for _ = 1, seconds * 1000 do
      ms = ms + 1
      events(ngx.now())
      for _, r in ipairs(recurring) do
        if ms >= r.next then
          r.next = r.next + r.period
          r.handler(false)
        end
      end
    end
    for _, r in ipairs(recurring) do r.handler(true) end -- the worker exits
  end
end

-- ---- the module: worker_timers ------------------------------------------
local timers = {}
local TICK = 0.01 -- seconds: ngx.timer.every's period and the wheel's tick

local wheel = twheel.new {
  tick_ms = TICK * 1000,
  drive = "ticks", -- the wheel counts ngx.now()'s time, like ngx.timer
  on_error = function(err, id)
    ngx.log(ngx.ERR, "timer ", tostring(id), " failed: ", tostring(err))
  end,
}
local started = ngx.now()

local function ticks(seconds)
  return math.ceil(seconds / TICK - 1e-9)
end

-- A delay counts from ngx.now(), not from the wheel's now(), which lags it
-- by up to one period of the recurring timer: the due tick is rounded up
-- from ngx.now() + seconds, so no timer runs early.
local function ticks_from_now(seconds)
  return math.ceil((ngx.now() - started + seconds) / TICK - 1e-9) - wheel:now()
end

-- The recurring timer's handler: runs what is due by ngx.now().
function timers.tick(premature)
  if premature then -- the worker is exiting: release every closure
    wheel:close()
    return
  end
  ngx.update_time()
  local target = math.floor((ngx.now() - started) / TICK + 1e-9)
  if target > wheel:now() then wheel:advance(target - wheel:now()) end
end

-- timers.after(seconds, fn, ...) -> id: fn(...) runs once after `seconds`.
function timers.after(seconds, fn, ...)
  local n, args = select("#", ...), { ... }
  return wheel:add(ticks_from_now(seconds), function() fn(unpack(args, 1, n)) end)
end

-- timers.every(seconds, fn) -> id: fn() runs every `seconds`.
function timers.every(seconds, fn)
  return wheel:add(ticks_from_now(seconds), function() fn() end, ticks(seconds))
end

function timers.postpone(id, seconds) return wheel:reschedule(id, ticks_from_now(seconds)) end
function timers.cancel(id) return wheel:cancel(id) end
function timers.pending() return wheel:count() end

unpack = unpack or table.unpack

-- ---- the worker's traffic (simulated) ------------------------------------
if not simulated then return timers end

assert(ngx.timer.every(TICK, timers.tick))

local CONNECTIONS, IDLE, SECONDS = 20000, 5.0, 20
local failures, stats = 0, { closed = 0, requests = 0, retries = 0, gave_up = 0, stats = 0 }
local function check(condition, message)
  if not condition then
    failures = failures + 1
    if failures <= 10 then io.stderr:write("check failed: ", message, "\n") end
  end
end
-- Runs after `seconds` from now: never before, at most 20 ms after (the
-- tick's rounding up plus the recurring timer's period).
local function on_time(due, what)
  local late = ngx.now() - due
  check(late > -1e-6 and late <= 0.02 + 1e-6,
        string.format("%s ran %.3f s after its time", what, late))
end

local seed = 77
local function random(n)
  seed = (seed * 16807) % 2147483647
  return 1 + seed % n
end

-- keepalive connections: closed after IDLE seconds without a request
local connections = {}
local function idle_close(c)
  on_time(c.last + IDLE, "an idle close")
  connections[c.index] = nil
  stats.closed = stats.closed + 1
end
for i = 1, CONNECTIONS do
  local c = { index = i, last = ngx.now() }
  c.timer = timers.after(IDLE, idle_close, c)
  connections[i] = c
end

-- a retry with exponential backoff: 0.1, 0.2, 0.4 ... s, five tries
local function attempt(job)
  if job.due then on_time(job.due, "a retry") end
  if random(4) == 1 or job.tries == 5 then -- success, or give up
    if job.tries == 5 then stats.gave_up = stats.gave_up + 1 end
    return
  end
  local delay = 0.1 * 2 ^ job.tries
  job.tries = job.tries + 1
  job.due = ngx.now() + delay
  stats.retries = stats.retries + 1
  timers.after(delay, attempt, job)
end

local per_second, reported = 0, false
timers.every(1, function() per_second = 0; stats.stats = stats.stats + 1 end)

run_stand_in(SECONDS, function(now)
  for _ = 1, 5 do -- 5 000 requests a second on random connections
    local c = connections[random(CONNECTIONS)]
    if c and now - started < SECONDS - IDLE - 1 then
      c.last = now
      check(timers.postpone(c.timer, IDLE), "a live connection's timer was gone")
      stats.requests = stats.requests + 1
      per_second = per_second + 1
      if random(50) == 1 then attempt { tries = 0 } end
    end
  end
  if not reported and now - started >= 1 then
    reported = true
    print(string.format("1 s in: %d timers pending in the wheel, 1 ngx timer", timers.pending()))
  end
end)

check(stats.closed == CONNECTIONS, "connections closed: " .. stats.closed)
check(stats.stats == SECONDS, "per-second timer ran " .. stats.stats .. " times")
check(pcall(timers.pending) == false, "the wheel is closed when the worker exits")
print(string.format("%d s: %d requests, %d connections closed when idle, %d retries (%d gave up)",
                    SECONDS, stats.requests, stats.closed, stats.retries, stats.gave_up))
if failures > 0 then
  io.stderr:write(failures, " checks failed\n")
  os.exit(1)
end
