-- A skynet service's timers on one twheel: a player is kicked after 2.5 s
-- without a message, heals every second while logged in, and is saved to a
-- database service when kicked.
--
--   LUA_CPATH='build/lua/5.4/?.so' lua5.4 examples/lua/skynet_service.lua
--
-- Under skynet this file is a service (it calls a ".db" service that
-- answers "save"). Elsewhere a stand-in skynet below runs it on a simulated
-- clock; the service checks its own outcome, and a failed check raises, so
-- the interpreter exits 1.
local twheel = require "twheel"
local unpack = unpack or table.unpack

-- ---- a stand-in for skynet, only outside skynet ---------------------------
local found, skynet = pcall(require, "skynet")
if not found then
  -- Each coroutine runs until it yields the centiseconds it waits, as
  -- skynet.sleep and skynet.call do; the clock then jumps to the next wake.
  local clock, queue, order = 0, {}, 0
  local function schedule(wake, co, ...)
    order = order + 1 -- equal wakes run in the order they were queued
    local values = { n = select("#", ...), ... } -- what the coroutine is resumed with
    queue[#queue + 1] = { wake = wake, order = order, co = co, values = values }
  end
  local services = { [".db"] = function(command, name, hp) return command == "save" end }
  skynet = {}
  function skynet.now() return clock end
  function skynet.error(...)
    local parts = { ... }
    for i = 1, select("#", ...) do parts[i] = tostring(parts[i]) end
    print(string.format("[%5.2f s] %s", clock / 100, table.concat(parts, " ")))
  end
  function skynet.fork(fn, ...) schedule(clock, coroutine.create(fn), ...) end
  function skynet.sleep(centiseconds) coroutine.yield(centiseconds) end
  -- the answer comes back 3 cs later, to the suspended caller
  function skynet.call(address, protocol, ...)
    return coroutine.yield(3, services[address](...))
  end
  function skynet.exit() queue = {}; coroutine.yield() end
  local function settle(co, ok, wait, ...)
    if not ok then error(debug.traceback(co, wait), 0) end
    if wait and coroutine.status(co) == "suspended" then schedule(clock + wait, co, ...) end
  end
  function skynet.start(init)
    skynet.fork(init)
    while #queue > 0 do
      table.sort(queue, function(a, b)
        return a.wake < b.wake or (a.wake == b.wake and a.order < b.order)
      end)
      local entry = table.remove(queue, 1)
      clock = entry.wake
      settle(entry.co, coroutine.resume(entry.co, unpack(entry.values, 1, entry.values.n)))
    end
  end
end

-- ---- the service ------------------------------------------------------------
local IDLE = 2.5 -- seconds without a message before a player is kicked
local players, failed_timers = {}, 0
local wheel
wheel = twheel.new {
  tick = 0.01, -- skynet's own unit of time
  -- skynet.now() counts centiseconds since the node started; the wheel
  -- counts every delay from this clock, so no timer runs early by it
  now = function() return skynet.now() / 100 end,
  -- One broken callback must not stop the others nor the timer loop: the
  -- wheel catches its error and hands it here. Cancelling the timer keeps
  -- a broken periodic timer from filling the log every second.
  on_error = function(err, id)
    failed_timers = failed_timers + 1
    skynet.error("timer failed and was cancelled:", err)
    if id then wheel:cancel(id) end -- nil: the now function failed
  end,
}

-- The player is the timer's argument: one table per player, no closure
-- per timer.
local function heal(_, _, player)
  player.hp = player.hp + player.regen
  player.heals = player.heals + 1
end

-- Saving waits for the database service: skynet.call suspends the calling
-- coroutine until the answer comes.
local function save(player)
  player.saved = skynet.call(".db", "lua", "save", player.name, player.hp)
  player.saved_at = skynet.now()
  skynet.error(player.name, "kicked at", player.kicked_at / 100, "s,",
               "saved at", player.saved_at / 100, "s")
end

local function kick(_, _, player)
  player.kicked_at = skynet.now()
  wheel:cancel(player.heal)
  -- A callback runs inside wheel:step(), a C function, and a coroutine
  -- cannot yield across a C call: skynet.call or skynet.sleep here would
  -- raise "attempt to yield across a C-call boundary". A coroutine of its
  -- own may wait; the callback returns at once.
  skynet.fork(save, player)
end

local function login(name, regen)
  local player = { name = name, hp = 100, regen = regen, heals = 0, last_message = skynet.now() }
  player.heal = wheel:every(1, 1, heal, player)
  player.idle = wheel:after(IDLE, kick, player)
  players[name] = player
end

-- Each message from the player's client puts the kick off again.
local function on_message(name)
  players[name].last_message = skynet.now()
  wheel:reschedule(players[name].idle, IDLE)
end

skynet.start(function()
  -- The timer loop: skynet.sleep suspends this coroutine for one tick, and
  -- the service handles its messages meanwhile.
  skynet.fork(function()
    while true do
      skynet.sleep(1)
      wheel:step()
    end
  end)

  -- What clients would send, scripted. Carol's record lacks its regen
  -- rate, so her heal fails; she logs in first, so her timer runs first in
  -- the tick it shares with the others' heals.
  login("carol", nil)
  login("alice", 5)
  login("bob", 3)
  for _ = 1, 6 do -- alice talks until 2.4 s: kicked at 4.9 s
    skynet.sleep(40)
    on_message("alice")
  end
  skynet.sleep(300)

  assert(failed_timers == 1, "carol's failing heal was reported once, then cancelled")
  assert(players.alice.heals == 4 and players.alice.hp == 120, "alice healed at 1, 2, 3 and 4 s")
  assert(players.bob.heals == 2 and players.bob.hp == 106, "bob healed at 1 and 2 s")
  for name, player in pairs(players) do
    -- in centiseconds: never early, late by at most a tick plus the loop's sleep
    local due = player.last_message + IDLE * 100
    assert(player.kicked_at and player.kicked_at >= due and player.kicked_at <= due + 2,
           name .. " kicked on time")
    assert(player.saved and player.saved_at >= player.kicked_at, name .. " saved after the kick")
  end
  assert(wheel:count() == 0, "no timer left")
  skynet.error("all checks passed")
  skynet.exit()
end)
