/* ==== pool: nodes and ids =================================================
 * Guarantees: nodes come from chunks of CHUNK_NODES that never move, so a
 * node pointer stays valid while the lock is dropped; no allocation but a
 * new chunk. A node's generation (31 bits) is bumped on every free; a node
 * whose generation would wrap is retired instead of reused, so an id
 * (index, generation) is never handed out twice, and the wheel's tag in
 * its ids makes another wheel's ids name none of its timers.
 *
 * Owns: the node chunks (w->node_chunks), w->used (the nodes ever handed
 * out: a high-water mark), the free list (w->free_head, w->free_count) and
 * w->bytes, which every chunk the allocator hands out adds to (src/api.c
 * starts it at the wheel's own size). The tag (w->id_tag) is drawn by
 * src/api.c at creation; this part applies it to ids. While a node is
 * placed, its position belongs to src/queue.c and its list and state to
 * the parts that place, take out and sort it (slots, staging, order). */

static void *wheel_alloc(tw_wheel *w, void *pointer, size_t size)
{
    return w->realloc_fn(pointer, size, w->alloc_context);
}

static void *libc_realloc(void *pointer, size_t size, void *context)
{
    (void)context;
    if (size == 0) {
        free(pointer);
        return NULL;
    }
    return realloc(pointer, size);
}

static struct node *node_at(const tw_wheel *w, uint32_t index)
{
    return (struct node *)w->node_chunks.chunks[index >> CHUNK_BITS].start +
           (index & (CHUNK_NODES - 1));
}

static uint32_t generation_of(const struct node *n)
{
    return n->generation & GENERATION_MASK;
}

static int is_periodic(const struct node *n)
{
    return (n->generation & PERIODIC) != 0;
}

/* A node's call, in the array that follows its chunk's nodes. */
static struct call *call_at(const tw_wheel *w, uint32_t index)
{
    struct node *nodes = w->node_chunks.chunks[index >> CHUNK_BITS].start;
    struct call *calls = (struct call *)(void *)(nodes + CHUNK_NODES);
    return &calls[index & (CHUNK_NODES - 1)];
}

/* The interval is read only for a node marked PERIODIC. */
static void set_interval(struct node *n, uint32_t interval)
{
    n->interval = interval;
    n->generation = generation_of(n) | (interval ? PERIODIC : 0);
}

/* An id is the node's index and its generation XORed with the wheel's tag,
 * so that another wheel's ids name none of this wheel's timers (but for a
 * chance of about 2^-31 per id, see guarantees.md). Node 0 is never handed
 * out, so no id is 0 whatever its generation half. */
static tw_id make_id(const tw_wheel *w, uint32_t index, uint32_t generation)
{
    return (((uint64_t)generation << 32) | index) ^ w->id_tag;
}

/* The node named by id if it has not been freed yet, else NULL; the caller
 * looks at its state to see whether the timer is still live. */
static struct node *node_of(const tw_wheel *w, tw_id id, uint32_t *index_out)
{
    uint32_t index = (uint32_t)id;
    uint32_t generation = (uint32_t)((id ^ w->id_tag) >> 32);
    struct node *n;
    if (index >= w->used)
        return NULL;
    n = node_at(w, index);
    if (generation_of(n) != generation || n->state == NODE_FREE)
        return NULL;
    *index_out = index;
    return n;
}

/* Adds a chunk of `size` bytes to a table, doubling the table first when
 * it is full (to `initial` entries the first time, at most `limit`
 * chunks); its aligned start, or NULL with nothing changed. */
static COLD void *add_chunk(tw_wheel *w, struct chunk_table *t, uint32_t initial,
                            uint32_t limit, size_t size)
{
    unsigned char *memory;
    struct chunk *chunk;
    if (t->count == limit)
        return NULL;
    if (t->count == t->capacity) {
        uint32_t wanted = t->capacity ? t->capacity * 2 : initial;
        struct chunk *grown;
        wanted = wanted < limit ? wanted : limit;
        grown = wheel_alloc(w, t->chunks, (size_t)wanted * sizeof *grown);
        if (!grown)
            return NULL;
        w->bytes += (uint64_t)(wanted - t->capacity) * sizeof *grown;
        t->chunks = grown;
        t->capacity = wanted;
    }
    memory = wheel_alloc(w, NULL, size + CACHE_LINE - 1);
    if (!memory)
        return NULL;
    w->bytes += size + CACHE_LINE - 1;
    chunk = &t->chunks[t->count++];
    chunk->memory = memory;
    chunk->start = memory + (-(uintptr_t)memory & (CACHE_LINE - 1));
    return chunk->start;
}

/* Adds a chunk of nodes; the first one's node 0 is retired at once (see
 * make_id). 0 when the allocator failed. */
static COLD int add_node_chunk(tw_wheel *w)
{
    struct node *nodes = add_chunk(w, &w->node_chunks, NODE_TABLE_START, MAX_CHUNKS,
                                   CHUNK_NODES * (sizeof(struct node) + sizeof(struct call)));
    if (nodes && w->used == 0) {
        nodes->state = NODE_FREE;
        nodes->list = LIST_NONE;
        nodes->generation = 0;
        w->used = 1;
    }
    return nodes != NULL;
}

/* Returns a node index, or NIL when the allocator failed. */
static HOT_INLINE uint32_t node_alloc(tw_wheel *w)
{
    uint32_t index;
    if (w->free_head != NIL) {
        index = w->free_head;
        w->free_head = node_at(w, index)->link;
        w->free_count--;
        return index;
    }
    if (w->used == w->node_chunks.count * CHUNK_NODES && !add_node_chunk(w))
        return NIL;
    index = w->used++;
    node_at(w, index)->generation = 1;
    return index;
}

static HOT_INLINE void node_free(tw_wheel *w, struct node *n, uint32_t index)
{
    n->state = NODE_FREE;
    n->list = LIST_NONE;
    n->generation = (n->generation + 1) & GENERATION_MASK; /* and one-shot */
    if (n->generation == 0)
        return; /* retired: 2^31 - 1 timers have used this node */
    n->link = w->free_head;
    w->free_head = index;
    w->free_count++;
}
