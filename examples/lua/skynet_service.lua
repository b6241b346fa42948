-- A skynet-style game service: skill cooldowns and buffs for 2 000 players
-- on one wheel of 10 ms ticks (skynet's unit of time).
--
--   LUA_CPATH='build/lua/5.4/?.so' lua5.4 examples/lua/skynet_service.lua
--
-- Each player has
--   - a cooldown per skill: the skill can be cast again when its timer is no
--     longer pending (w:remaining(id) is nil);
--   - buffs: "regen" heals every second for 10 s (a periodic timer plus an
--     end timer), "shield" lasts 5 s and is refreshed by casting it again
--     (a reschedule, not a new timer).
-- A logout cancels whatever the player still has pending.
--
-- In a skynet service the wheel is driven by one coroutine:
--
--   skynet.fork(function()
--     while true do
--       skynet.sleep(1)          -- 1 = 10 ms
--       wheel:advance(1)         -- or twheel.new{tick_ms = 10} and wheel:expire()
--     end
--   end)
--
-- and the message handlers call cast()/logout(). Here a loop stands in for
-- skynet: each 10 ms frame delivers the frame's messages, then advances the
-- wheel one tick, so every run prints the same figures. The program checks
-- its own outcome (no cooldown ends early or late, no buff outlives its
-- player) and exits 1 when a check fails.
local twheel = require "twheel"

local PLAYERS = 2000
local FRAMES = 3000 -- 30 s
local TICKS_PER_SECOND = 100

local skills = {
  { name = "fireball", cooldown = 150 }, -- ticks
  { name = "blink", cooldown = 800 },
  { name = "regen", cooldown = 1500 },
  { name = "shield", cooldown = 300 },
}

local wheel = twheel.new { tick_ms = 10, drive = "ticks" }
local players = {}
local stats = { casts = 0, rejected = 0, ready = 0, heals = 0, regen_ended = 0,
                shields = 0, shield_refreshed = 0, shield_ended = 0, logouts = 0 }
local failures = 0

local function check(condition, message)
  if not condition then
    failures = failures + 1
    if failures <= 10 then io.stderr:write("check failed: ", message, "\n") end
  end
end

local function on_ready(player, skill, cast_at)
  return function(w)
    check(w:now() == cast_at + skill.cooldown, skill.name .. " ready off its tick")
    check(player.online, "a cooldown ended for a player who left")
    stats.ready = stats.ready + 1
  end
end

local buffs = {}

function buffs.regen(player)
  if player.regen then return end
  local regen = { heals = 0 }
  regen.heal = wheel:add(TICKS_PER_SECOND, function()
    check(player.online, "a heal for a player who left")
    player.hp = player.hp + 5
    regen.heals = regen.heals + 1
    stats.heals = stats.heals + 1
  end, TICKS_PER_SECOND)
  -- one tick after the tenth heal, which is due on the same tick as an end
  -- timer at 10 s would be (and might run after it)
  regen.ending = wheel:add(10 * TICKS_PER_SECOND + 1, function(w)
    check(w:cancel(regen.heal), "regen's heal timer was not pending")
    check(regen.heals == 10, "regen healed " .. regen.heals .. " times, not 10")
    player.regen = nil
    stats.regen_ended = stats.regen_ended + 1
  end)
  player.regen = regen
end

function buffs.shield(player)
  if player.shield then -- refresh: the same timer, 5 s from now
    wheel:reschedule(player.shield, 5 * TICKS_PER_SECOND)
    stats.shield_refreshed = stats.shield_refreshed + 1
    return
  end
  stats.shields = stats.shields + 1
  player.shield = wheel:add(5 * TICKS_PER_SECOND, function()
    check(player.online, "a shield ended for a player who left")
    player.shield = nil
    stats.shield_ended = stats.shield_ended + 1
  end)
end

-- The message handlers.
local function cast(player, index)
  local skill = skills[index]
  if player.cooldown[index] and wheel:remaining(player.cooldown[index]) then
    stats.rejected = stats.rejected + 1
    return false
  end
  stats.casts = stats.casts + 1
  player.cooldown[index] = wheel:add(skill.cooldown, on_ready(player, skill, wheel:now()))
  if buffs[skill.name] then buffs[skill.name](player) end
  return true
end

local function logout(player)
  player.online = false
  for _, id in pairs(player.cooldown) do wheel:cancel(id) end
  if player.regen then
    wheel:cancel(player.regen.heal)
    wheel:cancel(player.regen.ending)
  end
  if player.shield then wheel:cancel(player.shield) end
  stats.logouts = stats.logouts + 1
end

for i = 1, PLAYERS do
  players[i] = { id = i, hp = 100, online = true, cooldown = {} }
end

-- The same messages on every run: a Park-Miller generator.
local seed = 2024
local function random(n)
  seed = (seed * 16807) % 2147483647
  return 1 + seed % n
end

for frame = 1, FRAMES do
  for _ = 1, 20 do -- 20 messages a frame, 2 000 a second
    local player = players[random(PLAYERS)]
    if player.online then
      if random(1000) == 1 then logout(player) else cast(player, random(#skills)) end
    end
  end
  wheel:advance(1)
  if frame % 500 == 0 then
    print(string.format("t=%2d s  pending %6d  casts %6d  rejected %6d  heals %6d",
                        frame / TICKS_PER_SECOND, wheel:count(), stats.casts,
                        stats.rejected, stats.heals))
  end
end

-- Everyone logs out: nothing may be left pending.
for _, player in ipairs(players) do
  if player.online then logout(player) end
end
check(wheel:count() == 0, "timers left after every logout: " .. wheel:count())
check(stats.ready + stats.rejected > 0 and stats.heals > 0, "nothing happened")
wheel:close()

print(string.format("%d players, %d s: %d casts, %d rejected on cooldown, %d cooldowns ended",
                    PLAYERS, FRAMES / TICKS_PER_SECOND, stats.casts, stats.rejected, stats.ready))
print(string.format("regen: %d heals, %d ended; shield: %d raised, %d refreshed, %d ended; %d logouts",
                    stats.heals, stats.regen_ended, stats.shields, stats.shield_refreshed,
                    stats.shield_ended, stats.logouts))
if failures > 0 then
  io.stderr:write(failures, " checks failed\n")
  os.exit(1)
end
