-- A small runner for the twheel Lua suites, the same on Lua 5.1, LuaJIT,
-- 5.3 and 5.4. test(name, fn) runs fn protected; done() prints each failure,
-- then "N passed, N failed", and raises when one failed, so the interpreter
-- exits 1 after closing its state (which runs every __gc: valgrind sees it).
local M = {}
local passed, failed = 0, 0

function M.test(name, fn)
  local ok, err = xpcall(fn, debug.traceback)
  if ok then
    passed = passed + 1
  else
    failed = failed + 1
    io.stderr:write("FAIL ", name, ": ", tostring(err), "\n")
  end
end

function M.eq(actual, expected, what)
  if actual ~= expected then
    error(string.format("%s: expected %s, got %s", what or "value",
                        tostring(expected), tostring(actual)), 2)
  end
end

function M.ok(condition, what)
  if not condition then error(what or "assertion failed", 2) end
end

-- Calls fn(...), which must raise an error whose text contains pattern
-- (plain text, not a Lua pattern); returns the error value.
function M.raises(pattern, fn, ...)
  local ok, err = pcall(fn, ...)
  if ok then error("did not raise (expected: " .. tostring(pattern) .. ")", 2) end
  if pattern and not string.find(tostring(err), pattern, 1, true) then
    error(string.format("raised %q, which does not contain %q", tostring(err), pattern), 2)
  end
  return err
end

-- Two full cycles: on 5.1 a finalized userdata is freed on the cycle after
-- its __gc ran, and what it referenced only then becomes garbage.
function M.collect()
  collectgarbage("collect")
  collectgarbage("collect")
  collectgarbage("collect")
end

-- Entries left in a weak table after a full collection.
function M.alive(weak)
  M.collect()
  local n = 0
  for _ in pairs(weak) do n = n + 1 end
  return n
end

function M.weak()
  return setmetatable({}, { __mode = "kv" })
end

-- Lua 5.1's numbers: a Park-Miller generator is exact in doubles, so every
-- Lua and the C baseline draw the same sequence.
function M.random(seed)
  local x = seed or 1
  return function(low, high)
    x = (x * 16807) % 2147483647
    return low + x % (high - low + 1)
  end
end

function M.done()
  print(string.format("%d passed, %d failed", passed, failed))
  if failed > 0 then error("some tests failed", 0) end
end

return M
