/*
 * twheel for Lua: `require "twheel"` on Lua 5.1/LuaJIT, 5.3 and 5.4, from
 * this one file plus timer.c (docs/lua.md is the user's page).
 *
 * A wheel is a full userdata holding its tw_wheel. Its user value is a
 * table, the wheel's closures: a pending timer's function (and, once the
 * wheel has had a timer with arguments, its arguments beside it) at its
 * slot's index (function_index, arguments_index), the slot number being
 * the timer's user data, and the release hook clears them. So a closure
 * is referenced exactly while its timer is pending, and
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
#include <stdio.h>
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
    int raise;        /* errors = "raise": a callback's error is raised
                         from the drive, else written to stderr */
    int paired;       /* the closure table's layout: see function_index */
    int reading;      /* now() is running (lua_clock): it must not call the
                         wheel, which is inside one of its own calls */
    /* memory: the wheel's and free[] come from the allocator of the
     * lua_State that made the wheel, so that a host counting what its
     * states allocate (skynet's per-service figure) sees them */
    lua_Alloc alloc;
    void *alloc_ud;
    /* the service clock (see "the service's clock"): seconds, not ticks */
    lua_Number tick_seconds; /* 0: delays are whole ticks */
    uint32_t tick_us;
    lua_State *L;     /* the state of the method running, for now() */
    uint64_t last_us; /* now()'s last good reading, in µs */
#if !TWL_INTEGER_IDS
    lua_Number aliases; /* the last alias id handed out is -aliases (see
                           "ids on 5.1"); starts at alias_start() */
#endif
};

/* lua_rawseti takes an int on 5.1, and a slot takes two indices */
#define MAX_SLOTS 0x3fffffffu

/* Where a slot's function is in the closure table. Until the wheel's
 * first timer with arguments, at the slot's number: one entry per timer,
 * as small as a table of functions gets. From then on (pair_slots) the
 * function and its arguments are neighbours in the table's array part, in
 * one cache line: a fired timer with an argument reads one line, not two
 * (a separate arguments table cost a cache miss more per fired timer at
 * 1M timers). Every slot handed out keeps its keys (false when it holds
 * no timer or no arguments): the array part stays full (half empty, Lua
 * would move the integer keys to its hash part), and the release hook and
 * pair_slots's moves only overwrite keys, which allocates nothing. */
#define function_index(lw, slot) ((lw)->paired ? (int)(2 * (slot) - 1) : (int)(slot))
#define arguments_index(slot) ((int)(2 * (slot)))

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
    if (lw->reading) /* raised into now()'s pcall: a failed reading */
        luaL_error(L, "twheel: now() called its own wheel (a wheel's now must not)");
    return lw;
}

static struct lwheel *open_wheel(lua_State *L)
{
    struct lwheel *lw = to_wheel(L);
    if (!lw->tw)
        luaL_error(L, "twheel: the wheel is closed");
    lw->L = L; /* what now() runs in, if timer.c reads the clock */
    return lw;
}

/* The wheel's allocator for timer.c (tw_config.realloc_fn): Lua's, with
 * the size each block was asked for kept in a header in front of it, since
 * a lua_Alloc is told a block's old size and timer.c does not say it. The
 * header is 16 bytes per allocation; timer.c allocates in chunks of a
 * thousand nodes or more, so it costs nothing per timer. */
#define HEADER 16

static void *lua_realloc(void *pointer, size_t size, void *context)
{
    struct lwheel *lw = context;
    unsigned char *block = pointer ? (unsigned char *)pointer - HEADER : NULL;
    size_t old = block ? *(size_t *)(void *)block + HEADER : 0;
    if (size > (size_t)-1 - HEADER)
        return NULL;
    block = lw->alloc(lw->alloc_ud, block, old, size ? size + HEADER : 0);
    if (!block)
        return NULL;
    *(size_t *)(void *)block = size;
    return block + HEADER;
}

/* free[] resized to `cap` slots (0 frees it) through Lua's allocator, which
 * knows its old size from lw->cap. */
static uint32_t *resize_free(struct lwheel *lw, uint32_t cap)
{
    return lw->alloc(lw->alloc_ud, lw->free, (size_t)lw->cap * sizeof *lw->free,
                     (size_t)cap * sizeof *lw->free);
}

/* free[] doubled (peek_slot's slow path); raises when it cannot grow. */
static void grow_free(lua_State *L, struct lwheel *lw)
{
    uint32_t cap = lw->cap ? lw->cap * 2 : 64;
    uint32_t *grown;
    if (lw->nslots == MAX_SLOTS)
        luaL_error(L, "twheel: too many timers");
    cap = cap < MAX_SLOTS ? cap : MAX_SLOTS;
    grown = resize_free(lw, cap);
    if (!grown)
        luaL_error(L, "twheel: not enough memory");
    lw->free = grown;
    lw->cap = cap;
}

/* A slot for a new timer, not taken yet (take_slot, once tw_add worked).
 * Raises before anything changed when free[] cannot grow. */
static inline uint32_t peek_slot(lua_State *L, struct lwheel *lw)
{
    if (lw->nfree)
        return lw->free[lw->nfree - 1];
    if (lw->nslots == lw->cap)
        grow_free(L, lw);
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
    if (lw->free)
        resize_free(lw, 0);
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

/* Writes an error value to stderr after `what`: a string as it is, a
 * number as Lua prints one, anything else by its type (a table's __tostring is not
 * run: it could raise, and this runs inside timer.c's calls, where nothing
 * may). Allocates nothing, for the same reason. */
static void write_error(lua_State *L, int idx, const char *what)
{
    int type = lua_type(L, idx);
    if (type == LUA_TSTRING)
        fprintf(stderr, "%s%s\n", what, lua_tostring(L, idx));
    else if (type == LUA_TNUMBER)
        fprintf(stderr, "%s%.14g\n", what, (double)lua_tonumber(L, idx));
    else
        fprintf(stderr, "%s(error object is a %s value)\n", what, luaL_typename(L, idx));
    fflush(stderr);
}

/* A callback raised (its error on top, with its traceback): on_error gets
 * it. Without one, or when on_error itself raises (its error then takes
 * the place of the callback's), it is written to stderr and the drive goes
 * on, or, with errors = "raise", kept as the batch's first error. */
static void callback_failed(struct call *c, tw_id id, uint32_t slot)
{
    lua_State *L = c->L;
    char what[64];
    if (!lua_isnil(L, c->on_error)) {
        lua_pushvalue(L, c->on_error);
        lua_insert(L, -2);
        push_id(L, c->closures, id, slot);
        if (lua_pcall(L, 2, 0, c->handler) == 0)
            return;
    }
    if (!c->lw->raise) {
        push_id(L, c->closures, id, slot);
#if TWL_INTEGER_IDS
        snprintf(what, sizeof what, "twheel: timer " LUA_INTEGER_FMT " failed: ",
                 (LUAI_UACINT)lua_tointeger(L, -1));
#else /* in full: %g would give 1.46e+15 */
        snprintf(what, sizeof what, "twheel: timer %.0f failed: ", (double)lua_tonumber(L, -1));
#endif
        write_error(L, -2, what);
        lua_pop(L, 2);
        return;
    }
    if (!c->failed) {
        lua_replace(L, c->first_error);
        c->failed = 1;
    } else {
        lua_pop(L, 1);
    }
}

/* A timer's user data: its slot, and what its arguments are (kept in the
 * arguments table at the same slot, see "arguments"). */
#define ARGS_NONE 0 /* fn(w, id) */
#define ARGS_ONE 1  /* fn(w, id, a): a at arguments_index(slot) */
#define ARGS_MANY 2 /* fn(w, id, ...): {n = count, ...} there */
#define ARGS_BITS 2
#define user_data_of(slot, args) ((void *)(uintptr_t)((uintptr_t)(slot) << ARGS_BITS | (args)))
#define slot_of(user_data) ((uint32_t)((uintptr_t)(user_data) >> ARGS_BITS))
#define args_of(user_data) ((int)((uintptr_t)(user_data) & ((1u << ARGS_BITS) - 1)))

/* Pushes a timer's arguments; returns how many. */
static int push_args(lua_State *L, int closures, uint32_t slot, int args)
{
    int count, i;
    if (args == ARGS_NONE)
        return 0;
    lua_rawgeti(L, closures, arguments_index(slot));
    if (args == ARGS_ONE)
        return 1;
    lua_getfield(L, -1, "n"); /* a table made by the binding: no metatable */
    count = (int)lua_tointeger(L, -1);
    lua_pop(L, 1);
    if (!lua_checkstack(L, count)) { /* room was there when they were given */
        lua_pop(L, 1);
        return 0;
    }
    for (i = 1; i <= count; i++)
        lua_rawgeti(L, -i, i);
    lua_remove(L, -count - 1);
    return count;
}

/* Runs on the driver, inside the drive's binding call (current). */
static void on_fire(tw_wheel *tw, tw_id id, void *user_data)
{
    struct call *c = current;
    lua_State *L = c->L;
    uint32_t slot = slot_of(user_data);
    int count;
    (void)tw;
    lua_rawgeti(L, c->closures, function_index(c->lw, slot));
    lua_pushvalue(L, c->self);
    push_id(L, c->closures, id, slot);
    count = push_args(L, c->closures, slot, args_of(user_data));
    if (lua_pcall(L, 2 + count, 0, c->handler) != 0)
        callback_failed(c, id, slot);
}

/* Drops a slot's function and its arguments (`args`: their kind): false
 * takes their place (see function_index), over keys that exist, so this
 * allocates nothing and cannot raise. */
static void clear_slot(lua_State *L, const struct lwheel *lw, int closures, uint32_t slot,
                       int args)
{
    lua_pushboolean(L, 0);
    lua_rawseti(L, closures, function_index(lw, slot));
    if (args != ARGS_NONE) {
        lua_pushboolean(L, 0);
        lua_rawseti(L, closures, arguments_index(slot));
    }
}

/* The wheel is done with a timer: clear its slot and free it. */
static void on_release(void *user_data)
{
    struct call *c = current;
    lua_State *L = c->L;
    uint32_t slot = slot_of(user_data);
    clear_slot(L, c->lw, c->closures, slot, args_of(user_data));
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


/* ---- the service's clock ---------------------------------------------------
 * A wheel made with `tick` (in seconds) counts every delay and interval in
 * seconds, and with `now` reads the service's own clock (ngx.now, a scaled
 * skynet.now, a test's clock) through timer.c's clock_fn. Seconds become
 * microseconds rounded to the nearest one (a reading of 0.1 s is 100 000
 * µs, not 100 000.000000000001), and a delay then becomes whole ticks
 * rounded up: exact in integers, so a delay of 0.3 s on ticks of 0.1 s is
 * 3 ticks, not 4. timer.c counts a delay from the clock's reading at the
 * call, so no timer runs before now() has moved by its delay (to the
 * microsecond). A tick is a whole number of microseconds: `tick = 1/3`
 * is 333 333 µs. */

/* Seconds to microseconds, to the nearest one; -1 for what is not a time
 * (negative, NaN, beyond 2^63 µs). */
static int64_t seconds_to_us(lua_Number seconds)
{
    lua_Number us = floor(seconds * 1e6 + 0.5);
    return us >= 0 && us < 9223372036854775807.0 ? (int64_t)us : -1;
}

/* A delay or an interval in ticks from argument arg: whole ticks on a tick
 * wheel, seconds rounded up to whole ticks on a seconds wheel, whose
 * microseconds go to exact_us (when not NULL; 0 on a tick wheel). */
static uint64_t check_delay(lua_State *L, struct lwheel *lw, int arg, const char *what,
                            uint64_t *exact_us)
{
    int64_t us;
    if (exact_us)
        *exact_us = 0;
    if (!lw->tick_seconds)
        return check_ticks(L, arg, what);
    if (lua_type(L, arg) != LUA_TNUMBER)
        luaL_argerror(L, arg, lua_pushfstring(L, "%s must be a number of seconds, got %s",
                                              what, luaL_typename(L, arg)));
    us = seconds_to_us(lua_tonumber(L, arg));
    if (us < 0) {
        if (lua_tonumber(L, arg) >= 9e12) /* a time past any wheel: ERANGE */
            return UINT64_MAX;
        luaL_argerror(L, arg, lua_pushfstring(L, "%s must not be negative", what));
    }
    if (exact_us)
        *exact_us = (uint64_t)us;
    return (uint64_t)us / lw->tick_us + ((uint64_t)us % lw->tick_us != 0);
}

static void push_ticks(lua_State *L, uint64_t ticks)
{
#if TWL_INTEGER_IDS
    lua_pushinteger(L, (lua_Integer)ticks);
#else
    lua_pushnumber(L, (lua_Number)ticks);
#endif
}

/* Pushes a count of ticks in the wheel's unit: ticks, or seconds. Seconds
 * come from whole microseconds, so 3 ticks of 0.1 s answer 0.3, the double
 * nearest 300 000 µs, not 3 * 0.1. */
static void push_duration(lua_State *L, struct lwheel *lw, uint64_t ticks)
{
    if (lw->tick_seconds)
        lua_pushnumber(L, (lua_Number)(ticks * lw->tick_us) / 1e6);
    else
        push_ticks(L, ticks);
}

/* A failure of the service's clock (now() raised, or answered what is not
 * a time, its message on top): handed to on_error, else written to
 * stderr; never raised through timer.c. Pops the message: an add reads
 * the clock between counting its arguments and filing them. */
static void clock_failed(lua_State *L)
{
    get_closures(L, 1);
    lua_getfield(L, -1, "on_error"); /* nil, or callable: new checked it */
    if (!lua_isnil(L, -1)) {
        lua_pushvalue(L, -3);
        lua_pushnil(L);
        if (lua_pcall(L, 2, 0, 0) == 0) {
            lua_pop(L, 2);
            return;
        }
        lua_replace(L, -3); /* on_error's own error goes to stderr */
        lua_pushnil(L);
    }
    write_error(L, -3, "twheel: the wheel's now() failed: ");
    lua_pop(L, 3);
}

/* tw_config.clock_fn of a wheel made with `now`: the service's clock in
 * microseconds, read in the state of the method that runs (its argument 1
 * is the wheel, whose user value holds now). A reading that fails is
 * reported and the last good one answers (timer.c then sees no time
 * pass). */
static uint64_t lua_clock(void *context)
{
    struct lwheel *lw = context;
    lua_State *L = lw->L;
    int64_t us = -1;
    int status;
    if (!L || !lua_checkstack(L, 8))
        return lw->last_us;
    get_closures(L, 1);
    lua_getfield(L, -1, "now");
    lua_remove(L, -2);
    lw->reading = 1;
    status = lua_pcall(L, 0, 1, 0);
    lw->reading = 0;
    if (status == 0) {
        if (lua_type(L, -1) == LUA_TNUMBER)
            us = seconds_to_us(lua_tonumber(L, -1));
        if (us < 0) {
            lua_pop(L, 1);
            lua_pushliteral(L, "now() must answer a number of seconds, 0 or more and below 9.2e12");
        }
    }
    if (us < 0) {
        clock_failed(L);
        return lw->last_us;
    }
    lua_pop(L, 1);
    lw->last_us = (uint64_t)us;
    return lw->last_us;
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

/* Whether the value at idx can be called: a function, or a value whose
 * metatable's __call is a function (a callable table or userdata). Lua
 * 5.1 and LuaJIT call nothing else; a __call that is not a function would
 * fail only when the timer fires. */
static int is_callable(lua_State *L, int idx)
{
    int callable;
    if (lua_isfunction(L, idx))
        return 1;
    if (!luaL_getmetafield(L, idx, "__call"))
        return 0;
    callable = lua_isfunction(L, -1);
    lua_pop(L, 1);
    return callable;
}

static void check_callable(lua_State *L, int idx)
{
    if (!is_callable(L, idx))
        luaL_argerror(L, idx, lua_pushfstring(L, "function expected, got %s",
                                              luaL_typename(L, idx)));
}

/* The closure table from one entry per slot to two (see function_index),
 * at the wheel's first add with arguments: slot s's function moves from s
 * to 2s - 1, and 2s gets false. The keys past the old ones are made first:
 * there the table may grow, and raise (memory) with the old layout whole.
 * The moves then overwrite keys only, from the last slot down, so that
 * none lands on a slot not moved yet (2s - 1 >= s). Linear in the slots
 * ever handed out, once per wheel. */
static void pair_slots(lua_State *L, struct lwheel *lw, int closures)
{
    uint32_t s, n = lw->nslots;
    for (s = n + 1; s <= 2 * n; s++) {
        lua_pushboolean(L, 0);
        lua_rawseti(L, closures, (int)s);
    }
    for (s = n; s >= 1; s--) {
        lua_rawgeti(L, closures, (int)s);
        lua_pushboolean(L, 0);
        lua_rawseti(L, closures, arguments_index(s));
        lua_rawseti(L, closures, (int)(2 * s - 1));
    }
    lw->paired = 1;
}

/* Files the timer's arguments (`count` values from `first`) beside its
 * function (paired: add_timer saw to it); returns their kind. A new slot
 * of a paired wheel gets its false. May raise (memory): the caller has
 * taken nothing yet. */
static int store_args(lua_State *L, struct lwheel *lw, int closures, uint32_t slot,
                      int first, int count)
{
    int i;
    if (count == 0) {
        if (lw->paired && slot > lw->nslots) {
            lua_pushboolean(L, 0);
            lua_rawseti(L, closures, arguments_index(slot));
        }
        return ARGS_NONE;
    }
    if (count == 1) {
        lua_pushvalue(L, first);
    } else {
        lua_createtable(L, count, 1);
        for (i = 0; i < count; i++) {
            lua_pushvalue(L, first + i);
            lua_rawseti(L, -2, i + 1);
        }
        lua_pushinteger(L, count);
        lua_setfield(L, -2, "n");
    }
    lua_rawseti(L, closures, arguments_index(slot));
    return count == 1 ? ARGS_ONE : ARGS_MANY;
}

/* Adds a timer whose function is at fn_arg and whose arguments are the
 * `count` values after it; `top` is the stack's top (lua_gettop); pushes
 * its id (or nil and a message at the cap). Errors name the delay as argument 2 and the
 * interval as interval_arg. A delay in seconds goes to timer.c in
 * microseconds (delay_us, with `delay` its ticks rounded up): tw_add_us
 * runs it less than a tick after it has passed, where whole ticks could
 * take two. */
static int add_timer(lua_State *L, struct lwheel *lw, uint64_t delay, uint64_t delay_us,
                     uint64_t interval, int interval_arg, int fn_arg, int count, int top)
{
    uint32_t slot;
    int closures = top + 1, error, args;
    tw_id id;
    slot = peek_slot(L, lw);
    get_closures(L, 1);
    if (count && !lw->paired)
        pair_slots(L, lw, closures); /* may raise: nothing changed */
    lua_pushvalue(L, fn_arg);
    lua_rawseti(L, closures, function_index(lw, slot)); /* may raise: nothing taken yet */
    args = store_args(L, lw, closures, slot, fn_arg + 1, count);
    id = delay_us ? tw_add_us(lw->tw, delay_us, interval, on_fire, on_release,
                              user_data_of(slot, args))
                  : tw_add_ex(lw->tw, delay, interval, on_fire, on_release,
                              user_data_of(slot, args));
    if (!id) {
        error = errno;
        clear_slot(L, lw, closures, slot, args); /* what this add filled */
        if (error == ERANGE)
            return range_error(L, delay, 2, interval, interval_arg);
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

/* w:add(delay, fn [, interval]) -> id, or nil and a message at the cap */
static int w_add(lua_State *L)
{
    struct lwheel *lw = open_wheel(L);
    uint64_t delay_us;
    uint64_t delay = check_delay(L, lw, 2, "delay", &delay_us);
    uint64_t interval;
    check_callable(L, 3);
    interval = lua_isnoneornil(L, 4) ? 0 : check_delay(L, lw, 4, "interval", NULL);
    return add_timer(L, lw, delay, delay_us, interval, 4, 3, 0, lua_gettop(L));
}

/* w:after(delay, fn, ...) -> id: a one-shot that calls fn(w, id, ...) */
static int w_after(lua_State *L)
{
    struct lwheel *lw = open_wheel(L);
    uint64_t delay_us;
    uint64_t delay = check_delay(L, lw, 2, "delay", &delay_us);
    int top;
    check_callable(L, 3);
    top = lua_gettop(L);
    return add_timer(L, lw, delay, delay_us, 0, 0, 3, top - 3, top);
}

/* w:every(first, interval, fn, ...) -> id: fn(w, id, ...) at first, then
 * every interval until cancelled */
static int w_every(lua_State *L)
{
    struct lwheel *lw = open_wheel(L);
    uint64_t first_us;
    uint64_t first = check_delay(L, lw, 2, "first", &first_us);
    uint64_t interval = check_delay(L, lw, 3, "interval", NULL);
    int top;
    if (interval == 0)
        luaL_argerror(L, 3, "interval must be at least one tick");
    check_callable(L, 4);
    top = lua_gettop(L);
    return add_timer(L, lw, first, first_us, interval, 3, 4, top - 4, top);
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
    uint64_t delay_us;
    uint64_t delay = check_delay(L, lw, 3, "delay", &delay_us);
    int keep = lua_isnoneornil(L, 4);
    uint64_t interval = keep ? 0 : check_delay(L, lw, 4, "interval", NULL);
    tw_id id;
    int result;
    luaL_checktype(L, 2, LUA_TNUMBER);
    get_closures(L, 1);
    id = to_id(L, 2, lua_gettop(L));
    if (!keep) /* the interval first: a move in microseconds keeps it */
        result = tw_reschedule_ex(lw->tw, id, delay, interval);
    result = delay_us && (keep || result == 1) ? tw_reschedule_us(lw->tw, id, delay_us)
           : keep                              ? tw_reschedule(lw->tw, id, delay)
                                               : result;
    if (result == -ERANGE)
        return range_error(L, delay, 3, interval, 4);
    if (result < 0)
        return luaL_error(L, "twheel: reschedule: %s", tw_strerror(result));
    lua_pushboolean(L, result == 1);
    return 1;
}

/* w:remaining(id) -> ticks (or seconds) until it fires, or nil when not
 * pending */
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
        push_duration(L, lw, ticks);
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

/* w:expire() and w:step() -> callbacks run: the wheel driven to its clock
 * (now() for a wheel made with it) */
static int w_expire(lua_State *L)
{
    return drive(L, open_wheel(L), 1, 0);
}

/* w:next_expiry() -> ticks (or seconds) until the earliest timer, or nil */
static int w_next_expiry(lua_State *L)
{
    struct lwheel *lw = open_wheel(L);
    uint64_t ticks = tw_next_expiry(lw->tw);
    if (ticks == TW_NEVER)
        lua_pushnil(L);
    else
        push_duration(L, lw, ticks);
    return 1;
}

/* w:add_at(t, fn, ...) -> id: a one-shot at the service's time t (seconds
 * of now()): counted from now()'s reading at the call, so it never runs
 * before now() reaches t */
static int w_add_at(lua_State *L)
{
    struct lwheel *lw = open_wheel(L);
    lua_Number t = lua_tonumber(L, 2);
    int64_t at;
    uint64_t delay, delay_us, now_us;
    int has_now, top;
    get_closures(L, 1);
    lua_getfield(L, -1, "now");
    has_now = !lua_isnil(L, -1);
    lua_pop(L, 2);
    if (!has_now)
        return luaL_error(L, "twheel: add_at needs a wheel made with now (t is a time of"
                             " that clock)");
    if (lua_type(L, 2) != LUA_TNUMBER || t != t)
        luaL_argerror(L, 2, "a time in seconds expected");
    /* a time before 0 has passed as surely as any other (now() answers 0
     * or more): due at once */
    at = t < 0 ? 0 : seconds_to_us(t);
    if (at < 0) /* past 2^63 us: past any wheel's reach, ERANGE below */
        at = INT64_MAX;
    check_callable(L, 3);
    now_us = tw_clock_us(lw->tw); /* now()'s reading */
    delay_us = (uint64_t)at > now_us ? (uint64_t)at - now_us : 0;
    delay = delay_us / lw->tick_us + (delay_us % lw->tick_us != 0);
    top = lua_gettop(L);
    return add_timer(L, lw, delay, delay_us, 0, 0, 3, top - 3, top);
}

/* w:stats() -> a table of the wheel's counts (tw_get_stats) */
static int w_stats(lua_State *L)
{
    struct lwheel *lw = open_wheel(L);
    struct tw_stats st;
    memset(&st, 0, sizeof st);
    st.size = sizeof st;
    tw_get_stats(lw->tw, &st);
    const struct {
        const char *name;
        uint64_t value;
    } fields[] = {
        {"pending", st.pending},     {"bytes", st.bytes},
        {"added", st.added},         {"fired", st.fired},
        {"cancelled", st.cancelled}, {"rescheduled", st.rescheduled},
        {"binding_bytes", (uint64_t)lw->cap * sizeof *lw->free},
    };
    size_t i;
    lua_createtable(L, 0, (int)(sizeof fields / sizeof fields[0]));
    for (i = 0; i < sizeof fields / sizeof fields[0]; i++) {
        push_ticks(L, fields[i].value);
        lua_setfield(L, -2, fields[i].name);
    }
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
static const char *const error_names[] = {"log", "raise", NULL};

static int l_new(lua_State *L);

/* What twheel.new reads besides the C config. */
struct options {
    lua_Number tick_seconds; /* `tick`, or 0 */
    int raise;               /* errors = "raise" */
    int drive_given;
};

/* Reads the option table at index 1 into config and o; the on_error and
 * now functions, if any, are left at indices 2 and 3 (nil otherwise). */
static void read_options(lua_State *L, struct tw_config *config, struct options *o)
{
    int tick_given = 0;
    lua_settop(L, 1);
    lua_pushnil(L); /* on_error */
    lua_pushnil(L); /* now */
    if (lua_isnoneornil(L, 1))
        return;
    if (!lua_istable(L, 1))
        luaL_argerror(L, 1, lua_pushfstring(L, "twheel.new takes a table of options, got %s",
                                            luaL_typename(L, 1)));
    /* twheel:new{...}, a colon for a dot, passes the module first */
    lua_getfield(L, 1, "new");
    if (lua_tocfunction(L, -1) == l_new)
        luaL_error(L, "twheel.new: call it with a dot, twheel.new{...}, not twheel:new{...}");
    lua_pop(L, 1);
    lua_pushnil(L);
    while (lua_next(L, 1)) {
        const char *key = lua_type(L, -2) == LUA_TSTRING ? lua_tostring(L, -2) : NULL;
        if (!key) {
            luaL_error(L, "twheel.new: option names are strings (got a %s key)",
                       luaL_typename(L, -2));
        } else if (strcmp(key, "tick_ms") == 0) {
            if (tick_given++)
                luaL_error(L, "twheel.new: give one of tick, tick_ms and tick_us");
            config->tick_us = 1000u * (uint32_t)option_number(
                L, key, 1, TW_MAX_TICK_US / 1000, "from 1 to 3600000");
        } else if (strcmp(key, "tick_us") == 0) {
            if (tick_given++)
                luaL_error(L, "twheel.new: give one of tick, tick_ms and tick_us");
            config->tick_us = (uint32_t)option_number(
                L, key, TW_MIN_TICK_US, TW_MAX_TICK_US, "from 1 to 3600000000");
        } else if (strcmp(key, "lock") == 0) {
            config->lock = lock_kinds[option_name(
                L, key, lock_names, "\"none\", \"adaptive\", \"spin\" or \"mutex\"")];
        } else if (strcmp(key, "drive") == 0) {
            o->drive_given = 1;
            config->drive = drive_kinds[option_name(
                L, key, drive_names, "\"auto\", \"clock\" or \"ticks\"")];
        } else if (strcmp(key, "cap") == 0) {
            config->max_timers = option_number(L, key, 0, 9007199254740992.0,
                                               "(0 for no cap)");
        } else if (strcmp(key, "tick") == 0) {
            lua_Number tick = lua_tonumber(L, -1);
            int64_t us = seconds_to_us(tick);
            if (tick_given++)
                luaL_error(L, "twheel.new: give one of tick, tick_ms and tick_us");
            if (lua_type(L, -1) != LUA_TNUMBER || us < TW_MIN_TICK_US || us > TW_MAX_TICK_US)
                luaL_error(L, "twheel.new: tick must be a number of seconds from"
                              " 0.000001 to 3600");
            config->tick_us = (uint32_t)us;
            o->tick_seconds = (lua_Number)us / 1e6;
        } else if (strcmp(key, "now") == 0) {
            if (!is_callable(L, -1))
                luaL_error(L, "twheel.new: now must be a function (or a callable table)"
                              " answering seconds");
            lua_pushvalue(L, -1);
            lua_replace(L, 3);
        } else if (strcmp(key, "errors") == 0) {
            o->raise = option_name(L, key, error_names, "\"log\" or \"raise\"");
        } else if (strcmp(key, "on_error") == 0) {
            if (!is_callable(L, -1))
                luaL_error(L, "twheel.new: on_error must be a function (or a callable table)");
            lua_pushvalue(L, -1);
            lua_replace(L, 2);
        } else {
            luaL_error(L, "twheel.new: unknown option '%s'", key);
        }
        lua_pop(L, 1);
    }
}

/* twheel.new{tick_ms=, tick_us=, tick=, now=, lock=, drive=, cap=,
 * on_error=, errors=} -> wheel */
static int l_new(lua_State *L)
{
    struct tw_config config;
    struct options o = {0, 0, 0};
    struct lwheel *lw;
    tw_config_init(&config);
    config.lock = TW_LOCK_NONE; /* a Lua state runs on one thread at a time */
    read_options(L, &config, &o);
    if (!lua_isnil(L, 3) && o.drive_given)
        return luaL_error(L, "twheel.new: a wheel with now is driven by that clock:"
                             " leave drive out");
    if (!lua_isnil(L, 3) && !o.tick_seconds) /* now without tick: seconds */
        o.tick_seconds = (lua_Number)config.tick_us / 1e6;
    lw = lua_newuserdata(L, sizeof *lw); /* index 4 */
    memset(lw, 0, sizeof *lw);
    lw->tag = &wheel_tag;
    lw->raise = o.raise;
    lw->tick_seconds = o.tick_seconds;
    lw->tick_us = config.tick_us;
    lw->alloc = lua_getallocf(L, &lw->alloc_ud);
#if !TWL_INTEGER_IDS
    lw->aliases = alias_start(lw);
#endif
    lua_pushvalue(L, lua_upvalueindex(1));
    lua_setmetatable(L, 4);
    lua_createtable(L, 0, 2);
    lua_pushvalue(L, 2);
    lua_setfield(L, -2, "on_error");
    lua_pushvalue(L, 3);
    lua_setfield(L, -2, "now");
    set_closures(L, 4);
    if (!lua_isnil(L, 3)) {
        /* the service's clock: read once here (an error raises from new),
         * then by timer.c in the methods (lua_clock) */
        int64_t us;
        lua_pushvalue(L, 3);
        lua_call(L, 0, 1);
        us = lua_type(L, -1) == LUA_TNUMBER ? seconds_to_us(lua_tonumber(L, -1)) : -1;
        if (us < 0)
            return luaL_error(L, "twheel.new: now() must answer a number of seconds, 0 or more"
                              " and below 9.2e12");
        lua_pop(L, 1);
        lw->last_us = (uint64_t)us;
        config.clock_fn = lua_clock;
        config.clock_context = lw;
        config.drive = TW_DRIVE_CLOCK;
    }
    config.context = lw;
    config.realloc_fn = lua_realloc;
    config.alloc_context = lw;
    lw->tw = tw_create(&config);
    if (!lw->tw)
        return luaL_error(L, "twheel.new: %s", tw_strerror(tw_last_error()));
    return 1;
}

/* ---- the module ---------------------------------------------------------- */

static const luaL_Reg methods[] = {
    {"add", w_add},
    {"after", w_after},
    {"every", w_every},
    {"add_at", w_add_at},
    {"step", w_expire},
    {"stats", w_stats},
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
