/*
 * twheel for Lua: `require "twheel"` on Lua 5.1/LuaJIT, 5.3 and 5.4, from
 * this one file plus timer.c (docs/lua.md is the user's page).
 *
 * A wheel is a full userdata holding its tw_wheel. Its user value is a
 * table, the wheel's closures: a pending timer's function sits at a slot
 * number that is the timer's user data, and the release hook clears that
 * slot. So a closure is referenced exactly while its timer is pending, and
 * a wheel that becomes garbage takes its closures with it even when they
 * capture the wheel (a registry reference would keep that cycle alive).
 *
 * Nothing raised in Lua may unwind through timer.c (it would leave the
 * wheel marked as driven, or a hook half run). Callbacks run under
 * lua_pcall; everything else done inside a callback or a release hook is
 * API calls that cannot raise: pushes of values that exist, into stack
 * space the C function already has (LUA_MINSTACK), reads of tables, and
 * writes to keys that are already present.
 */
#include "timer.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lauxlib.h"
#include "lua.h"

/* luaopen_twheel is the one name the module exports: dllexport on Windows
 * (MinGW and MSVC alike), default visibility elsewhere, where everything
 * else is hidden. */
#if defined(_WIN32)
#define TWL_EXPORT __declspec(dllexport)
#elif defined(__GNUC__) || defined(__clang__)
#define TWL_EXPORT __attribute__((visibility("default")))
#else
#define TWL_EXPORT
#endif

#if defined(__STDC_VERSION__) && __STDC_VERSION__ >= 201112L
#define TWL_THREAD_LOCAL _Thread_local
#elif defined(__GNUC__) || defined(__clang__)
#define TWL_THREAD_LOCAL __thread
#elif defined(_MSC_VER)
#define TWL_THREAD_LOCAL __declspec(thread)
#else
#error "twheel's Lua module needs thread-local storage (C11, GNU C or MSVC)"
#endif

/* ---- Lua versions --------------------------------------------------------
 * 5.3 and 5.4 have 64-bit integers: an id is the C id. 5.1 and LuaJIT have
 * doubles only (exact to 2^53): see "ids on 5.1" below. Only the 5.1 API
 * is used on 5.1, so the module built with LuaJIT's headers also loads in
 * PUC Lua 5.1, and the other way round. */
#if LUA_VERSION_NUM >= 503
#define TWL_INTEGER_IDS 1
#else
#define TWL_INTEGER_IDS 0
#endif

#if LUA_VERSION_NUM >= 502
#define get_closures(L, i) ((void)lua_getuservalue((L), (i)))
#define set_closures(L, i) ((void)lua_setuservalue((L), (i)))
#else
#define get_closures(L, i) lua_getfenv((L), (i))
#define set_closures(L, i) ((void)lua_setfenv((L), (i)))
#define lua_rawlen(L, i) lua_objlen((L), (i))
#endif

/* Sets each function of l into the table at index t (absolute) as a
 * closure whose upvalues are the nup values on top of the stack, then pops
 * them (luaL_setfuncs, which 5.1 lacks). */
static void set_funcs(lua_State *L, int t, const luaL_Reg *l, int nup)
{
    int i;
    for (; l->name; l++) {
        for (i = 0; i < nup; i++)
            lua_pushvalue(L, -nup);
        lua_pushcclosure(L, l->func, nup);
        lua_setfield(L, t, l->name);
    }
    lua_pop(L, nup);
}

/* ---- the wheel ---------------------------------------------------------- */

/* The userdata. Slot numbers come from free[] (last freed first) or count
 * up from 1; free[] always has room for every slot ever handed out, so the
 * release hook can give one back without allocating. */
struct lwheel {
    const char *tag;  /* &wheel_tag: see to_wheel */
    tw_wheel *tw;     /* NULL once closed */
    uint32_t *free;   /* slots ready for reuse */
    uint32_t nfree;   /* how many of them */
    uint32_t nslots;  /* slots ever handed out: 1..nslots */
    uint32_t cap;     /* room in free[], >= nslots */
    int driving;      /* advance/expire calls under way: a close from a
                         callback leaves free[] for the drive to free */
#if !TWL_INTEGER_IDS
    lua_Number aliases; /* the last alias id handed out is -aliases (see
                           "ids on 5.1"); starts at alias_start() */
#endif
};

#define MAX_SLOTS 0x7fffffffu /* lua_rawseti takes an int on 5.1 */

static const char wheel_tag = 0;

/* A binding call that may run callbacks or release hooks (advance, expire,
 * cancel, close, __gc), innermost first. The release hook is given only
 * its user data (a slot number): this is how it finds its wheel's table
 * and a lua_State. Calls nest (a callback cancels, closes another wheel,
 * drives another wheel) but never interleave: a callback cannot yield. */
struct call {
    struct call *outer;
    lua_State *L;
    struct lwheel *lw;
    int closures;    /* stack index of the wheel's closure table */
    /* drives only: stack indices */
    int self;        /* the wheel, passed to callbacks */
    int handler;     /* adds the traceback */
    int on_error;    /* the wheel's on_error, or nil */
    int first_error; /* the first error to raise after the batch */
    int failed;      /* first_error holds one (it may be nil) */
};

static TWL_THREAD_LOCAL struct call *current;

static void begin_call(struct call *c, lua_State *L, struct lwheel *lw,
                       int closures)
{
    memset(c, 0, sizeof *c);
    c->outer = current;
    c->L = L;
    c->lw = lw;
    c->closures = closures;
    current = c;
}

static void end_call(struct call *c)
{
    current = c->outer;
}

/* The wheel at argument 1: a full userdata of a wheel's size that starts
 * with the address of wheel_tag, which only l_new writes there. Every
 * call pays this check, and it touches neither the stack nor the
 * metatable (light userdata have no size, so their pointer is never read). */
static struct lwheel *to_wheel(lua_State *L)
{
    struct lwheel *lw = lua_touserdata(L, 1);
    if (!lw || lua_rawlen(L, 1) != sizeof *lw || lw->tag != &wheel_tag)
        luaL_argerror(L, 1, lua_pushfstring(L, "twheel wheel expected, got %s",
                                            luaL_typename(L, 1)));
    return lw;
}

static struct lwheel *open_wheel(lua_State *L)
{
    struct lwheel *lw = to_wheel(L);
    if (!lw->tw)
        luaL_error(L, "twheel: the wheel is closed");
    return lw;
}

/* A slot for a new timer, not taken yet (take_slot, once tw_add worked).
 * Raises before anything changed when free[] cannot grow. */
static uint32_t peek_slot(lua_State *L, struct lwheel *lw)
{
    if (lw->nfree)
        return lw->free[lw->nfree - 1];
    if (lw->nslots == lw->cap) {
        uint32_t cap = lw->cap ? lw->cap * 2 : 64;
        uint32_t *grown;
        if (lw->nslots == MAX_SLOTS)
            luaL_error(L, "twheel: too many timers");
        cap = cap < MAX_SLOTS ? cap : MAX_SLOTS;
        grown = realloc(lw->free, (size_t)cap * sizeof *grown);
        if (!grown)
            luaL_error(L, "twheel: not enough memory");
        lw->free = grown;
        lw->cap = cap;
    }
    return lw->nslots + 1;
}

static void take_slot(struct lwheel *lw, uint32_t slot)
{
    if (slot > lw->nslots)
        lw->nslots = slot;
    else
        lw->nfree--;
}

static void free_slots(struct lwheel *lw)
{
    free(lw->free);
    lw->free = NULL;
    lw->nfree = lw->nslots = lw->cap = 0;
}

/* ---- ids -----------------------------------------------------------------
 * On 5.3 and 5.4 an id is the C id as an integer. On 5.1 and LuaJIT the C
 * id (generation << 32 | index) stops being exact as a double once a
 * node's generation reaches 2^21, which a node reused over and over (last
 * freed, first reused) reaches after 2M timers. There an id is
 *   generation * 2^22 + index     for a node index below 2^22:
 * exact for every generation (31 bits), and as unique as the C id. A
 * wheel's node indexes count up from 1, so only a wheel that has held
 * more than 4,194,303 timers at once has nodes past that; their timers get
 * alias ids -(s + 1), -(s + 2), ... (never reused), kept in the alias
 * table closures[0]: alias -> the C id as an 8-byte string, and slot ->
 * alias, both cleared when the timer is released. Each wheel draws its own
 * s below 2^52, so an alias of another wheel names none of this wheel's
 * timers (as the tag in a C id does), unless the two wheels' runs of
 * aliases overlap: about 2k in 2^52 for wheels that hand out k each. */
#if TWL_INTEGER_IDS

static void push_id(lua_State *L, int closures, tw_id id, uint32_t slot)
{
    (void)closures;
    (void)slot;
    lua_pushinteger(L, (lua_Integer)id);
}

/* The C id named by the number at arg (checked by the caller); 0 for a
 * number that names no timer. */
static tw_id to_id(lua_State *L, int arg, int closures)
{
    int is_integer;
    lua_Integer v = lua_tointegerx(L, arg, &is_integer);
    (void)closures;
    return is_integer && v > 0 ? (tw_id)v : 0;
}

static void forget_alias(lua_State *L, int closures, uint32_t slot)
{
    (void)L;
    (void)closures;
    (void)slot;
}

#else

#ifndef TWL_DIRECT_BITS
#define TWL_DIRECT_BITS 22 /* tests build a copy with a few bits */
#endif
#define DIRECT_LIMIT (UINT64_C(1) << TWL_DIRECT_BITS)
#define ALIAS_TABLE 0

static int is_direct(tw_id id)
{
    return (uint32_t)id < DIRECT_LIMIT;
}

/* Pushes the alias table, or nil when the wheel never needed one. */
static void push_aliases(lua_State *L, int closures)
{
    lua_rawgeti(L, closures, ALIAS_TABLE);
}

static void push_id(lua_State *L, int closures, tw_id id, uint32_t slot)
{
    if (is_direct(id)) {
        lua_pushnumber(L, (lua_Number)(id >> 32) * (lua_Number)DIRECT_LIMIT +
                              (lua_Number)(uint32_t)id);
        return;
    }
    push_aliases(L, closures);
    lua_rawgeti(L, -1, (int)slot);
    lua_remove(L, -2);
}

static tw_id to_id(lua_State *L, int arg, int closures)
{
    lua_Number x = lua_tonumber(L, arg);
    tw_id id = 0;
    if (x != floor(x)) /* NaN too */
        return 0;
    if (x >= 1 && x < 9007199254740992.0) { /* 2^53 */
        uint64_t v = (uint64_t)x;
        return (v / DIRECT_LIMIT) << 32 | (v % DIRECT_LIMIT);
    }
    if (x < 0 && x >= -9007199254740992.0) {
        push_aliases(L, closures);
        if (lua_istable(L, -1)) {
            lua_pushnumber(L, x);
            lua_rawget(L, -2);
            size_t length = 0;
            const char *bytes = lua_tolstring(L, -1, &length);
            if (bytes && length == sizeof id)
                memcpy(&id, bytes, sizeof id);
            lua_pop(L, 1);
        }
        lua_pop(L, 1);
    }
    return id;
}

/* A wheel's first alias, from its address and the clock, mixed. */
static lua_Number alias_start(const struct lwheel *lw)
{
    uint64_t x = (uint64_t)(uintptr_t)lw ^ tw_gettime() << 16;
    x = (x ^ x >> 31) * UINT64_C(0x7fb5d329728ea185);
    x = (x ^ x >> 27) * UINT64_C(0x81dadef4bc2dd44d);
    return (lua_Number)(x >> 12); /* below 2^52 */
}

/* Under lua_pcall from w_add, which has added a timer: records the alias
 * of its id, given as two halves (arguments 2 and 3: high, low), for its
 * slot (argument 4) of the closure table (argument 1); returns the alias.
 * The wheel is argument 5. */
static int make_alias(lua_State *L)
{
    struct lwheel *lw = lua_touserdata(L, 5);
    lua_Number high = lua_tonumber(L, 2), low = lua_tonumber(L, 3);
    tw_id id = (tw_id)high << 32 | (tw_id)low;
    lua_pushlstring(L, (const char *)&id, sizeof id);
    lua_replace(L, 2);
    lua_rawgeti(L, 1, ALIAS_TABLE);
    if (lua_isnil(L, -1)) {
        lua_pop(L, 1);
        lua_newtable(L);
        lua_pushvalue(L, -1);
        lua_rawseti(L, 1, ALIAS_TABLE);
    }
    lua_pushnumber(L, -(lw->aliases + 1));
    lua_pushvalue(L, 2);
    lua_rawset(L, -3); /* alias -> C id */
    lua_pushnumber(L, -(lw->aliases + 1));
    lua_rawseti(L, -2, (int)lua_tointeger(L, 4)); /* slot -> alias */
    lw->aliases += 1; /* only now: the writes above may have raised */
    lua_pushnumber(L, -lw->aliases);
    return 1;
}

/* From the release hook: writes nil to keys that exist, no allocation. */
static void forget_alias(lua_State *L, int closures, uint32_t slot)
{
    push_aliases(L, closures);
    if (lua_istable(L, -1)) {
        lua_rawgeti(L, -1, (int)slot);
        if (!lua_isnil(L, -1)) {
            lua_pushnil(L);
            lua_rawset(L, -3);
            lua_pushnil(L);
            lua_rawseti(L, -2, (int)slot);
        } else {
            lua_pop(L, 1);
        }
    }
    lua_pop(L, 1);
}

#endif

/* ---- callbacks and release ---------------------------------------------- */

/* The message handler: a string (or number) gets the traceback; any other
 * error value (a table, say) is handed on unchanged. */
static int traceback(lua_State *L)
{
    int type = lua_type(L, 1);
    if (type != LUA_TSTRING && type != LUA_TNUMBER)
        return 1;
#if LUA_VERSION_NUM >= 502
    luaL_traceback(L, L, lua_tostring(L, 1), 1);
#else
    lua_getfield(L, LUA_GLOBALSINDEX, "debug");
    if (lua_istable(L, -1))
        lua_getfield(L, -1, "traceback");
    if (!lua_isfunction(L, -1)) { /* no debug library: the message alone */
        lua_settop(L, 1);
        return 1;
    }
    lua_pushvalue(L, 1);
    lua_pushinteger(L, 2); /* skip this handler */
    lua_call(L, 2, 1);
#endif
    return 1;
}

/* A callback raised (its error on top): on_error gets it, or it is kept as
 * the batch's first error. */
static void callback_failed(struct call *c, tw_id id, uint32_t slot)
{
    lua_State *L = c->L;
    if (!lua_isnil(L, c->on_error)) {
        lua_pushvalue(L, c->on_error);
        lua_insert(L, -2);
        push_id(L, c->closures, id, slot);
        if (lua_pcall(L, 2, 0, c->handler) == 0)
            return;
    }
    if (!c->failed) {
        lua_replace(L, c->first_error);
        c->failed = 1;
    } else {
        lua_pop(L, 1);
    }
}

/* Runs on the driver, inside the drive's binding call (current). */
static void on_fire(tw_wheel *tw, tw_id id, void *user_data)
{
    struct call *c = current;
    lua_State *L = c->L;
    uint32_t slot = (uint32_t)(uintptr_t)user_data;
    (void)tw;
    lua_rawgeti(L, c->closures, (int)slot);
    lua_pushvalue(L, c->self);
    push_id(L, c->closures, id, slot);
    if (lua_pcall(L, 2, 0, c->handler) != 0)
        callback_failed(c, id, slot);
}

/* The wheel is done with a timer: drop its closure, free its slot. */
static void on_release(void *user_data)
{
    struct call *c = current;
    lua_State *L = c->L;
    uint32_t slot = (uint32_t)(uintptr_t)user_data;
    lua_pushnil(L);
    lua_rawseti(L, c->closures, (int)slot);
    forget_alias(L, c->closures, slot);
    c->lw->free[c->lw->nfree++] = slot;
}

/* ---- arguments ---------------------------------------------------------- */

/* A count of ticks: a number with a whole value, 0 or more. One too large
 * for any wheel comes back as UINT64_MAX, for timer.c to refuse (ERANGE). */
static uint64_t check_ticks(lua_State *L, int arg, const char *what)
{
    lua_Number d;
#if TWL_INTEGER_IDS
    if (lua_isinteger(L, arg)) { /* the common case, first */
        lua_Integer v = lua_tointeger(L, arg);
        if (v < 0)
            luaL_argerror(L, arg, lua_pushfstring(L, "%s must not be negative", what));
        return (uint64_t)v;
    }
#endif
    if (lua_type(L, arg) != LUA_TNUMBER)
        luaL_argerror(L, arg, lua_pushfstring(L, "%s must be a number of ticks, got %s",
                                              what, luaL_typename(L, arg)));
    d = lua_tonumber(L, arg);
    if (d != floor(d))
        luaL_argerror(L, arg, lua_pushfstring(L, "%s must be a whole number of ticks", what));
    if (d < 0)
        luaL_argerror(L, arg, lua_pushfstring(L, "%s must not be negative", what));
    return d < 18446744073709551616.0 ? (uint64_t)d : UINT64_MAX; /* 2^64 */
}

static uint64_t opt_interval(lua_State *L, int arg)
{
    return lua_isnoneornil(L, arg) ? 0 : check_ticks(L, arg, "interval");
}

/* Raises for an ERANGE from an add or a reschedule, naming the argument. */
static int range_error(lua_State *L, uint64_t delay, int delay_arg,
                       uint64_t interval, int interval_arg)
{
    if (interval > TW_MAX_DELAY)
        return luaL_argerror(L, interval_arg, "interval out of range (at most twheel.max_delay)");
    if (delay > TW_MAX_DELAY)
        return luaL_argerror(L, delay_arg, "delay out of range (at most twheel.max_delay)");
    return luaL_error(L, "twheel: the due tick lies more than twheel.max_delay ticks past now()"
                         " (on a clock-driven wheel now() lags the clock until an expire)");
}

/* ---- methods -------------------------------------------------------------
 * Stack layout in every method: 1 the wheel, then the arguments; the
 * closure table is pushed after them where the method needs it. */

/* w:add(delay, fn [, interval]) -> id, or nil and a message at the cap */
static int w_add(lua_State *L)
{
    struct lwheel *lw = open_wheel(L);
    uint64_t delay = check_ticks(L, 2, "delay");
    uint64_t interval;
    uint32_t slot;
    int closures, error;
    tw_id id;
    luaL_checktype(L, 3, LUA_TFUNCTION);
    interval = opt_interval(L, 4);
    slot = peek_slot(L, lw);
    get_closures(L, 1);
    closures = lua_gettop(L);
    lua_pushvalue(L, 3);
    lua_rawseti(L, closures, (int)slot); /* may raise: nothing taken yet */
    id = tw_add_ex(lw->tw, delay, interval, on_fire, on_release,
                   (void *)(uintptr_t)slot);
    if (!id) {
        error = errno;
        lua_pushnil(L);
        lua_rawseti(L, closures, (int)slot);
        if (error == ERANGE)
            return range_error(L, delay, 2, interval, 4);
        if (error == ENOSPC) {
            lua_pushnil(L);
            lua_pushliteral(L, "twheel: too many pending timers (the wheel's cap)");
            return 2;
        }
        return luaL_error(L, "twheel: add: %s", tw_strerror(error));
    }
    take_slot(lw, slot);
#if !TWL_INTEGER_IDS
    if (!is_direct(id)) {
        /* pushes that cannot raise, then everything else protected */
        lua_pushvalue(L, lua_upvalueindex(1)); /* make_alias */
        lua_pushvalue(L, closures);
        lua_pushnumber(L, (lua_Number)(id >> 32));
        lua_pushnumber(L, (lua_Number)(uint32_t)id);
        lua_pushnumber(L, (lua_Number)slot);
        lua_pushvalue(L, 1);
        if (lua_pcall(L, 5, 1, 0) != 0) {
            /* out of memory: undo the add (the hook frees the slot) */
            struct call c;
            begin_call(&c, L, lw, closures);
            tw_cancel(lw->tw, id);
            end_call(&c);
            return lua_error(L);
        }
        return 1;
    }
#endif
    push_id(L, closures, id, slot);
    return 1;
}

/* w:cancel(id) -> true when the timer was pending */
static int w_cancel(lua_State *L)
{
    struct lwheel *lw = open_wheel(L);
    struct call c;
    tw_id id;
    int result, closures;
    luaL_checktype(L, 2, LUA_TNUMBER);
    get_closures(L, 1);
    closures = lua_gettop(L);
    id = to_id(L, 2, closures);
    begin_call(&c, L, lw, closures);
    result = tw_cancel(lw->tw, id);
    end_call(&c);
    lua_pushboolean(L, result == 1);
    return 1;
}

/* w:reschedule(id, delay [, interval]) -> true when the timer was pending */
static int w_reschedule(lua_State *L)
{
    struct lwheel *lw = open_wheel(L);
    uint64_t delay = check_ticks(L, 3, "delay");
    int keep = lua_isnoneornil(L, 4);
    uint64_t interval = opt_interval(L, 4);
    tw_id id;
    int result;
    luaL_checktype(L, 2, LUA_TNUMBER);
    get_closures(L, 1);
    id = to_id(L, 2, lua_gettop(L));
    result = keep ? tw_reschedule(lw->tw, id, delay)
                  : tw_reschedule_ex(lw->tw, id, delay, interval);
    if (result == -ERANGE)
        return range_error(L, delay, 3, interval, 4);
    if (result < 0)
        return luaL_error(L, "twheel: reschedule: %s", tw_strerror(result));
    lua_pushboolean(L, result == 1);
    return 1;
}

static void push_ticks(lua_State *L, uint64_t ticks)
{
#if TWL_INTEGER_IDS
    lua_pushinteger(L, (lua_Integer)ticks);
#else
    lua_pushnumber(L, (lua_Number)ticks);
#endif
}

/* w:remaining(id) -> ticks until it fires, or nil when not pending */
static int w_remaining(lua_State *L)
{
    struct lwheel *lw = open_wheel(L);
    uint64_t ticks;
    luaL_checktype(L, 2, LUA_TNUMBER);
    get_closures(L, 1);
    ticks = tw_remaining(lw->tw, to_id(L, 2, lua_gettop(L)));
    if (ticks == TW_NEVER)
        lua_pushnil(L);
    else
        push_ticks(L, ticks);
    return 1;
}

/* advance and expire: runs the batch, then raises its first error (when
 * there is no on_error) or returns the number of callbacks run. */
static int drive(lua_State *L, struct lwheel *lw, int by_clock, uint64_t ticks)
{
    struct call c;
    int64_t fired;
    int base = lua_gettop(L);
    get_closures(L, 1);
    lua_pushcfunction(L, traceback);
    lua_getfield(L, base + 1, "on_error");
    lua_pushnil(L);
    begin_call(&c, L, lw, base + 1);
    c.self = 1;
    c.handler = base + 2;
    c.on_error = base + 3;
    c.first_error = base + 4;
    lw->driving++;
    fired = by_clock ? tw_expire(lw->tw) : tw_advance(lw->tw, ticks);
    lw->driving--;
    end_call(&c);
    if (!lw->tw && !lw->driving)
        free_slots(lw); /* a callback closed the wheel */
    if (c.failed) {
        lua_pushvalue(L, c.first_error);
        return lua_error(L);
    }
    if (fired == -EBUSY)
        return luaL_error(L, "twheel: the wheel is already being driven"
                             " (advance or expire from one of its callbacks)");
    if (fired < 0)
        return luaL_error(L, "twheel: %s", tw_strerror((int)fired));
    push_ticks(L, (uint64_t)fired);
    return 1;
}

/* w:advance(ticks) -> callbacks run */
static int w_advance(lua_State *L)
{
    struct lwheel *lw = open_wheel(L);
    return drive(L, lw, 0, check_ticks(L, 2, "ticks"));
}

/* w:expire() -> callbacks run */
static int w_expire(lua_State *L)
{
    return drive(L, open_wheel(L), 1, 0);
}

/* w:next_expiry() -> ticks until the earliest timer, or nil */
static int w_next_expiry(lua_State *L)
{
    uint64_t ticks = tw_next_expiry(open_wheel(L)->tw);
    if (ticks == TW_NEVER)
        lua_pushnil(L);
    else
        push_ticks(L, ticks);
    return 1;
}

/* w:timeout_ms() -> ms until the earliest timer by the clock, -1 if none */
static int w_timeout_ms(lua_State *L)
{
    lua_pushinteger(L, tw_timeout_ms(open_wheel(L)->tw));
    return 1;
}

static int w_now(lua_State *L)
{
    push_ticks(L, tw_now(open_wheel(L)->tw));
    return 1;
}

static int w_count(lua_State *L)
{
    push_ticks(L, tw_count(open_wheel(L)->tw));
    return 1;
}

/* Destroys the wheel at argument 1: every pending closure is released,
 * none runs. From a callback the C library defers the free to the end of
 * the drive (tw_destroy's shutdown case), and the drive frees free[]. */
static void close_wheel(lua_State *L, struct lwheel *lw)
{
    tw_wheel *tw = lw->tw;
    struct call c;
    if (!tw)
        return;
    lw->tw = NULL; /* closed for every call from here on */
    get_closures(L, 1);
    begin_call(&c, L, lw, lua_gettop(L));
    tw_destroy(tw);
    end_call(&c);
    lua_pop(L, 1);
    if (!lw->driving)
        free_slots(lw);
}

/* w:close(), also __close: safe to call twice */
static int w_close(lua_State *L)
{
    close_wheel(L, to_wheel(L));
    return 0;
}

static int w_gc(lua_State *L)
{
    struct lwheel *lw = to_wheel(L);
    close_wheel(L, lw);
    free_slots(lw);
    return 0;
}

static int w_tostring(lua_State *L)
{
    struct lwheel *lw = to_wheel(L);
    if (lw->tw)
        lua_pushfstring(L, "twheel wheel (%p): %d pending", (void *)lw,
                        (int)tw_count(lw->tw));
    else
        lua_pushfstring(L, "twheel wheel (%p): closed", (void *)lw);
    return 1;
}

/* ---- twheel.new ---------------------------------------------------------- */

/* The option value on top must be one of names; returns its position.
 * choices spells the names out for the error. */
static int option_name(lua_State *L, const char *option,
                       const char *const names[], const char *choices)
{
    const char *value = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : NULL;
    int i;
    for (i = 0; value && names[i]; i++)
        if (strcmp(value, names[i]) == 0)
            return i;
    return luaL_error(L, "twheel.new: %s must be %s", option, choices);
}

/* The option value on top must be a whole number in [low, high]. */
static uint64_t option_number(lua_State *L, const char *option, lua_Number low,
                              lua_Number high, const char *range)
{
    lua_Number d = lua_tonumber(L, -1);
    if (lua_type(L, -1) != LUA_TNUMBER || d != floor(d) || d < low || d > high)
        luaL_error(L, "twheel.new: %s must be a whole number %s", option, range);
    return (uint64_t)d;
}

static const char *const lock_names[] = {"none", "adaptive", "spin", "mutex", NULL};
static const int lock_kinds[] = {TW_LOCK_NONE, TW_LOCK_ADAPTIVE, TW_LOCK_SPIN,
                                 TW_LOCK_MUTEX};
static const char *const drive_names[] = {"auto", "clock", "ticks", NULL};
static const int drive_kinds[] = {TW_DRIVE_AUTO, TW_DRIVE_CLOCK, TW_DRIVE_TICKS};

/* Reads the option table at index 1 into config; the on_error function,
 * if any, is left at index 2 (nil otherwise). */
static void read_options(lua_State *L, struct tw_config *config)
{
    int tick_given = 0;
    lua_settop(L, 1);
    lua_pushnil(L); /* on_error */
    if (lua_isnoneornil(L, 1))
        return;
    luaL_checktype(L, 1, LUA_TTABLE);
    lua_pushnil(L);
    while (lua_next(L, 1)) {
        const char *key = lua_type(L, -2) == LUA_TSTRING ? lua_tostring(L, -2) : NULL;
        if (!key) {
            luaL_error(L, "twheel.new: option names are strings (got a %s key)",
                       luaL_typename(L, -2));
        } else if (strcmp(key, "tick_ms") == 0) {
            if (tick_given++)
                luaL_error(L, "twheel.new: give tick_ms or tick_us, not both");
            config->tick_us = 1000u * (uint32_t)option_number(
                L, key, 1, TW_MAX_TICK_US / 1000, "from 1 to 3600000");
        } else if (strcmp(key, "tick_us") == 0) {
            if (tick_given++)
                luaL_error(L, "twheel.new: give tick_ms or tick_us, not both");
            config->tick_us = (uint32_t)option_number(
                L, key, TW_MIN_TICK_US, TW_MAX_TICK_US, "from 1 to 3600000000");
        } else if (strcmp(key, "lock") == 0) {
            config->lock = lock_kinds[option_name(
                L, key, lock_names, "\"none\", \"adaptive\", \"spin\" or \"mutex\"")];
        } else if (strcmp(key, "drive") == 0) {
            config->drive = drive_kinds[option_name(
                L, key, drive_names, "\"auto\", \"clock\" or \"ticks\"")];
        } else if (strcmp(key, "cap") == 0) {
            config->max_timers = option_number(L, key, 0, 9007199254740992.0,
                                               "(0 for no cap)");
        } else if (strcmp(key, "on_error") == 0) {
            if (!lua_isfunction(L, -1))
                luaL_error(L, "twheel.new: on_error must be a function");
            lua_pushvalue(L, -1);
            lua_replace(L, 2);
        } else {
            luaL_error(L, "twheel.new: unknown option '%s'", key);
        }
        lua_pop(L, 1);
    }
}

/* twheel.new{tick_ms=, tick_us=, lock=, drive=, cap=, on_error=} -> wheel */
static int l_new(lua_State *L)
{
    struct tw_config config;
    struct lwheel *lw;
    tw_config_init(&config);
    config.lock = TW_LOCK_NONE; /* a Lua state runs on one thread at a time */
    read_options(L, &config);
    lw = lua_newuserdata(L, sizeof *lw); /* index 3 */
    memset(lw, 0, sizeof *lw);
    lw->tag = &wheel_tag;
#if !TWL_INTEGER_IDS
    lw->aliases = alias_start(lw);
#endif
    lua_pushvalue(L, lua_upvalueindex(1));
    lua_setmetatable(L, 3);
    lua_createtable(L, 0, 1);
    lua_pushvalue(L, 2);
    lua_setfield(L, -2, "on_error");
    set_closures(L, 3);
    config.context = lw;
    lw->tw = tw_create(&config);
    if (!lw->tw)
        return luaL_error(L, "twheel.new: %s", tw_strerror(errno));
    return 1;
}

/* ---- the module ---------------------------------------------------------- */

static const luaL_Reg methods[] = {
    {"add", w_add},
    {"cancel", w_cancel},
    {"reschedule", w_reschedule},
    {"remaining", w_remaining},
    {"advance", w_advance},
    {"expire", w_expire},
    {"next_expiry", w_next_expiry},
    {"timeout_ms", w_timeout_ms},
    {"now", w_now},
    {"count", w_count},
    {"close", w_close},
    {NULL, NULL},
};

static const luaL_Reg metamethods[] = {
    {"__gc", w_gc},
#if LUA_VERSION_NUM >= 504
    {"__close", w_close},
#endif
    {"__tostring", w_tostring},
    {NULL, NULL},
};

static const luaL_Reg functions[] = {
    {"new", l_new},
    {NULL, NULL},
};

TWL_EXPORT int luaopen_twheel(lua_State *L);

TWL_EXPORT int luaopen_twheel(lua_State *L)
{
    int metatable, table;
    luaL_newmetatable(L, "twheel.wheel");
    metatable = lua_gettop(L);
    lua_newtable(L); /* the methods */
    table = lua_gettop(L);
#if TWL_INTEGER_IDS
    set_funcs(L, table, methods, 0);
#else
    /* upvalue 1: make_alias, pushed here so that add pushes it without
     * allocating */
    lua_pushcfunction(L, make_alias);
    set_funcs(L, table, methods, 1);
#endif
    lua_setfield(L, metatable, "__index");
    set_funcs(L, metatable, metamethods, 0);

    lua_newtable(L); /* the module */
    table = lua_gettop(L);
    lua_pushvalue(L, metatable); /* upvalue 1 of new */
    set_funcs(L, table, functions, 1);
    lua_pushstring(L, tw_version_string());
    lua_setfield(L, table, "version");
    push_ticks(L, TW_MAX_DELAY);
    lua_setfield(L, table, "max_delay");
    return 1;
}
