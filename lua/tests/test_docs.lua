-- docs/lua.md's Lua programs print what the page says: every ```lua block
-- followed by "Output:" and a ```text block runs (with this build's module)
-- and must print exactly that text. Fails when the page has no such block.
--
--   test_docs.lua path/to/docs/lua.md
local h = require "harness"

local path = assert(arg[1], "usage: test_docs.lua docs/lua.md")
local lines = {}
for line in assert(io.open(path)):lines() do lines[#lines + 1] = line end

-- The block that opens at line i (its fence); returns its text and the
-- line after its closing fence.
local function block(i)
  local body = {}
  for j = i + 1, #lines do
    if lines[j]:match("^```") then return table.concat(body, "\n") .. "\n", j + 1 end
    body[#body + 1] = lines[j]
  end
  error(path .. ":" .. i .. ": a block that does not end")
end

local function run(code, name)
  local printed = {}
  local env = setmetatable({
    print = function(...)
      local parts = {}
      for k = 1, select("#", ...) do parts[k] = tostring((select(k, ...))) end
      printed[#printed + 1] = table.concat(parts, "\t") .. "\n"
    end,
  }, { __index = _G })
  local chunk
  if setfenv then
    chunk = assert(loadstring(code, name))
    setfenv(chunk, env)
  else
    chunk = assert(load(code, name, "t", env))
  end
  chunk()
  return table.concat(printed)
end

local checked = 0
local i = 1
while i <= #lines do
  if lines[i] == "```lua" then
    local start = i
    local code, after = block(i)
    local j = after
    while lines[j] == "" do j = j + 1 end
    if lines[j] == "Output:" then
      j = j + 1
      while lines[j] == "" do j = j + 1 end
      h.eq(lines[j], "```text", path .. ":" .. j .. ": the output block")
      local expected = block(j)
      h.test(path .. ":" .. start, function()
        h.eq(run(code, "=" .. path .. ":" .. start), expected, "printed")
      end)
      checked = checked + 1
    end
    i = after
  else
    i = i + 1
  end
end
h.test("the page has programs with their output", function()
  h.ok(checked > 0, "no ```lua block followed by Output: in " .. path)
end)
h.done()
