-- An OpenResty worker's idle timeouts, one per connection, on one twheel
-- driven by a single ngx.timer.every: nginx counts one pending timer against
-- lua_max_pending_timers however many connections the worker holds.
--
--   LUA_CPATH='build/lua/5.4/?.so' lua5.4 examples/lua/openresty_worker.lua
--
-- In OpenResty this file is a module required from init_worker_by_lua_block
-- (it returns open and touch). Elsewhere a stand-in ngx runs it with 2 000
-- connections, on a clock that moves by uneven steps as nginx's cached clock
-- does, checks the outcome and exits 1 when a check fails.
local twheel = require "twheel"
local unpack = unpack or table.unpack

-- ---- a stand-in for ngx, only outside OpenResty ----------------------------
local simulate
if not ngx then
  local ms, timers, seed = 0, {}, 7 -- the clock in whole milliseconds, as ngx.now() has
  local function random(n) seed = seed * 16807 % 2147483647; return 1 + seed % n end
  -- nginx runs each timer's handler in a light thread of its own, which a
  -- cosocket suspends: a coroutine here, resumed once its wait is over
  local function start(delay, fn, ...)
    local args = { n = select("#", ...) + 1, false, ... } -- premature, then the arguments
    timers[#timers + 1] = { at = ms + delay * 1000, co = coroutine.create(fn), args = args }
    return true
  end
  local function resume(timer)
    local ok, wait = coroutine.resume(timer.co, unpack(timer.args, 1, timer.args.n))
    if not ok then error(debug.traceback(timer.co, wait), 0) end
    timer.args = { n = 0 } -- started: resumed from now on with no values
    if coroutine.status(timer.co) == "suspended" then
      timer.at = ms + wait * 1000
      timers[#timers + 1] = timer
    end
  end
  ngx = {
    ERR = "error",
    now = function() return 1700000000 + ms / 1000 end,
    log = function(_, ...) io.stderr:write(table.concat({ ... }), "\n") end, -- strings and numbers
    sleep = function(seconds) coroutine.yield(seconds) end,
    timer = { at = start },
    socket = { tcp = function() -- a peer 2 ms away
      return { settimeout = function() end, setkeepalive = function() end,
               connect = function() ngx.sleep(0.002); return true end,
               send = function(_, data) ngx.sleep(0.002); return #data end }
    end },
  }
  function ngx.timer.every(interval, fn)
    local function run(premature) if not premature then start(interval, run) end fn(premature) end
    return start(interval, run)
  end
  -- The event loop: each turn the clock moves 1 to 40 ms, requests come in,
  -- then the timers whose time has come run. At the end the worker exits:
  -- timers not started yet run with premature = true.
  function simulate(seconds, requests)
    local stop = ms + seconds * 1000
    while ms < stop do
      ms = ms + random(40)
      requests(random)
      local due = timers
      timers = {} -- what the due timers start or resume runs from the next turn
      for _, timer in ipairs(due) do
        if timer.at > ms then timers[#timers + 1] = timer else resume(timer) end
      end
    end
    for _, timer in ipairs(timers) do
      if timer.args.n > 0 then timer.args[1] = true; resume(timer) end -- not started yet
    end
  end
end

-- ---- the worker ---------------------------------------------------------------
local TICK, IDLE = 0.1, 5 -- seconds
local connections = {}

-- The wheel counts in seconds on nginx's clock: a delay counts from
-- ngx.now() at the call, and wheel:step() runs what that clock says is due.
local wheel = twheel.new {
  tick = TICK,
  now = ngx.now,
  -- a failing callback is caught and the other timers still run: log it
  -- to nginx's error log (a worker's stderr may go nowhere)
  on_error = function(err, id) ngx.log(ngx.ERR, "timer ", id, " failed: ", err) end,
}

-- Runs in a light thread of its own (ngx.timer.at), where cosockets work.
local function report_idle(premature, conn)
  if premature then return end
  local sock = ngx.socket.tcp()
  sock:settimeout(1000)
  local ok, err = sock:connect("127.0.0.1", 9000)
  if not ok then return ngx.log(ngx.ERR, "idle report: ", err) end
  sock:send("idle " .. conn.id .. "\n")
  sock:setkeepalive()
  conn.reported_at = ngx.now()
end

-- The connection is the timer's argument: no closure per connection.
local function on_idle(_, _, conn)
  conn.closed_at = ngx.now()
  connections[conn.id] = nil
  -- This runs inside wheel:step(), a C function, and a light thread cannot
  -- yield across a C call, so no cosocket here: a zero-delay nginx timer
  -- gives the report a light thread of its own.
  local ok, err = ngx.timer.at(0, report_idle, conn)
  if not ok then ngx.log(ngx.ERR, "idle report: ", err) end
end

local function open(id)
  local conn = { id = id, last = ngx.now() }
  conn.idle = wheel:after(IDLE, on_idle, conn)
  connections[id] = conn
  return conn
end

-- On each request of the connection: the idle timeout starts over.
local function touch(conn)
  conn.last = ngx.now()
  wheel:reschedule(conn.idle, IDLE)
end

assert(ngx.timer.every(TICK, function(premature)
  if premature then return wheel:close() end -- the worker exits: drop the rest
  wheel:step()
end))

-- ---- the check, with the stand-in -------------------------------------------
if not simulate then return { open = open, touch = touch } end
local CONNECTIONS, TRAFFIC = 2000, 10 -- requests stop after 10 s: all go idle
-- the longest gap between two steps: the every-timer's period, and the
-- stand-in runs it up to one turn of its loop (40 ms) late
local CADENCE = TICK + 0.040
local all = {}
for id = 1, CONNECTIONS do all[id] = open(id) end
local started = ngx.now()
simulate(TRAFFIC + IDLE + 1, function(random)
  if ngx.now() - started >= TRAFFIC then return end
  for _ = 1, 10 do
    local conn = connections[random(CONNECTIONS)]
    if conn then touch(conn) end
  end
end)

-- Each connection was closed once idle: never before now() reached its
-- last request + IDLE (to the microsecond, the wheel's resolution: a sum of
-- floats may be off by less), never later than a tick plus the longest gap
-- between two steps; and its report ran after that, in a light thread.
local failures, latest = 0, 0
for _, conn in ipairs(all) do
  local late = conn.closed_at and conn.closed_at - (conn.last + IDLE)
  if not late or late < -1e-6 or late > TICK + CADENCE + 1e-6
      or not (conn.reported_at and conn.reported_at > conn.closed_at) then
    failures = failures + 1
    io.stderr:write("connection ", conn.id, ": closed ", tostring(late), " s after its idle timeout,",
                    " reported at ", tostring(conn.reported_at), "\n")
  else
    latest = math.max(latest, late)
  end
end
-- the worker's exit ran the driver with premature = true: the wheel is closed
if pcall(wheel.count, wheel) then failures = failures + 1; io.stderr:write("the wheel is open\n") end
print(string.format("%d connections closed when idle, at most %.3f s late (bound %.3f s); %d failures",
                    CONNECTIONS, latest, TICK + CADENCE, failures))
os.exit(failures == 0 and 0 or 1)
