-- What running each callback in a coroutine would add to a fired timer:
-- ns per call of a trivial callback by pcall (what the module does), by a
-- new coroutine per call, and by one coroutine resumed per call.
--
--   lua5.4 lua/bench/coroutine_cost.lua [N]
local N = tonumber(arg[1]) or 1000000
local sink = 0
local function cb(w, id, a) sink = sink + id end
local function best(f)
  local b = math.huge
  for _ = 1, 3 do
    collectgarbage() collectgarbage()
    local t0 = os.clock() f() local t = os.clock() - t0
    if t < b then b = t end
  end
  return b * 1e9 / N
end
local p = best(function() for i = 1, N do pcall(cb, nil, i, nil) end end)
local c = best(function()
  for i = 1, N do coroutine.resume(coroutine.create(cb), nil, i, nil) end end)
local worker = coroutine.create(function(w, id, a)
  while true do cb(w, id, a); w, id, a = coroutine.yield() end end)
local r = best(function() for i = 1, N do coroutine.resume(worker, nil, i, nil) end end)
print(string.format("%s: pcall %.1f ns, new coroutine %.1f ns (%.1fx), pooled coroutine %.1f ns (%.1fx)",
  _VERSION .. (jit and " " .. jit.version or ""), p, c, c / p, r, r / p))
