/*
 * For the white-box tests that compile timer.c in and need the block pool
 * at its reserve (include after timer.c and helpers.h): a wheel whose
 * allocator can be switched off, and the adds that bring its pool to the
 * point where one more entry would need a new block.
 */
#ifndef TW_TEST_POOL_RESERVE_H
#define TW_TEST_POOL_RESERVE_H

/* A single-threaded wheel on refusing_realloc, allocating for now. */
static inline tw_wheel *switchable_wheel(void)
{
    struct tw_config c;
    tw_config_init(&c);
    c.lock = TW_LOCK_NONE;
    c.realloc_fn = refusing_realloc;
    alloc_refused = 0;
    return new_wheel_cfg(&c);
}

/* Adds timers (callback, user_data) due `first` ticks from now and up to
 * 4999 more, until one more entry would need a block the pool does not
 * have; returns how many. */
static inline int fill_to_reserve(tw_wheel *w, uint64_t first, tw_callback *callback,
                                  void *user_data)
{
    int added = 0;
    while ((uint64_t)w->entries + 2 <= w->entries_supported) {
        assert_int_not_equal(tw_add(w, first + (uint64_t)(added % 5000), callback, user_data), 0);
        added++;
    }
    return added;
}

#endif
