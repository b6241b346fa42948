#!/usr/bin/env bash
# docs/lua.md's install block works as the page shows it: the ```sh block
# after the "<!-- install-block" line runs in a copy of the tree (luarocks
# make builds where it runs) with HOME a private folder, so that --local
# installs there. Then a fresh shell, outside that copy, runs the block's
# `luarocks path` line alone and must load twheel from that HOME: without
# the line, require finds nothing. The user's own Lua paths and LuaRocks
# configuration play no part.
#
#   install_block.sh SOURCE_ROOT
#
# Exit 0 pass, 1 fail, 77 skip (no luarocks or lua5.4).
set -uo pipefail
root=${1:?usage: install_block.sh SOURCE_ROOT}
page=$root/docs/lua.md
fail() {
    printf 'FAIL: %s\n' "$*"
    exit 1
}
for program in luarocks lua5.4; do
    command -v "$program" >/dev/null || { echo "SKIP: $program not found"; exit 77; }
done

block=$(awk '/^<!-- install-block/ { marked = 1; next }
             marked && /^```/ { if (inside) exit; inside = 1; next }
             inside { print }' "$page")
[[ -n $block ]] || fail "$page: no \`\`\`sh block after a '<!-- install-block' line"
if grep -q sudo <<<"$block"; then
    fail "$page: the install block uses sudo; it installs with --local"
fi
path_line=$(grep 'luarocks path' <<<"$block")
[[ -n $path_line ]] ||
    fail "$page: the install block has no \`luarocks path\` line: require does not search ~/.luarocks without it"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/home" "$work/tree/lua" "$work/elsewhere"
if ! { cp -R "$root/timer.c" "$root/timer.h" "$root/src" "$root"/twheel-*.rockspec "$work/tree/" &&
    cp "$root/lua/twheel_lua.c" "$work/tree/lua/"; }; then
    fail "could not copy the tree"
fi

clean=(env -u LUA_PATH -u LUA_CPATH -u LUA_PATH_5_4 -u LUA_CPATH_5_4 -u LUA_INIT
       -u LUA_INIT_5_4 -u LUAROCKS_CONFIG HOME="$work/home")
if ! (cd "$work/tree" && timeout 120 "${clean[@]}" bash -e -c "$block") >"$work/block.log" 2>&1; then
    tail -n 30 "$work/block.log"
    fail "the install block failed (its output above)"
fi
cat "$work/block.log"

# Lua 5.4's require returns the file it loaded, which must be the one the
# block installed, not one from a system tree.
check='local twheel, file = require "twheel"
local home = os.getenv("HOME")
assert(file:sub(1, #home + 1) == home .. "/",
    "twheel came from " .. file .. ", not from the --local tree in " .. home)
print("a fresh shell with the page'"'"'s path line loads twheel " .. twheel.version .. " from " .. file)'
if ! (cd "$work/elsewhere" &&
    timeout 30 "${clean[@]}" TWHEEL_CHECK="$check" bash -e -c "$path_line"$'\nlua5.4 -e "$TWHEEL_CHECK"'); then
    fail "after the page's line \`$path_line\`, require \"twheel\" fails in a new shell"
fi
