/* ==== order: one tick's timers in stamp order ============================
 * Guarantees: a near slot is dispatched in the order of its timers' last
 * add, reschedule or re-arm, without allocating. Owns nothing but the
 * sort; it clears a slot's unsorted mark (src/slots.c) as it sorts it,
 * and detaches and re-places the slot's nodes (their `state`).
 *
 * Timers due at one tick run in the order of their last add, reschedule
 * or re-arm, each of which hands the node the next stamp of a 64-bit
 * counter. Appends keep a near slot in that order (adds and re-arms carry
 * the newest stamp; staging moves a slot in order to the tails below; of
 * one tick's timers, those filed higher are newer), except when a timer
 * rescheduled in place, or rotated in the slot being staged (see
 * staging), arrives behind a newer one: note_order marks the slot then,
 * and the slot is sorted by stamp just before its dispatch.
 *
 * The sort needs no memory, so a dispatch never fails: the slot's live
 * nodes are detached and chained through their `link` fields, the
 * chain is merge sorted by its ascending runs (a slot is mostly one run
 * with a few late arrivals, which costs little more than a pass), and the
 * nodes are written back from the queue's head, its stale entries
 * dropped as a compaction would drop them. O(n log n) for n timers in the
 * slot, whatever their order. */

/* Merges two chains of detached nodes linked through `link`. */
static uint32_t merge_chains(tw_wheel *w, uint32_t a, uint32_t b)
{
    uint32_t head = NIL, *tail = &head;
    while (a != NIL && b != NIL) {
        struct node *x = node_at(w, a), *y = node_at(w, b);
        if (x->stamp < y->stamp) {
            *tail = a;
            tail = &x->link;
            a = x->link;
        } else {
            *tail = b;
            tail = &y->link;
            b = y->link;
        }
    }
    *tail = a != NIL ? a : b;
    return head;
}

/* Sorts a chain by stamp: each ascending run cut off its head is merged
 * into a binary counter of sorted chains (runs[k] holds about 2^k runs),
 * which the counter's 32 places hold for any count of runs below 2^32. */
static uint32_t sort_chain(tw_wheel *w, uint32_t chain)
{
    uint32_t runs[32], sorted = NIL;
    unsigned k;
    for (k = 0; k < 32; k++)
        runs[k] = NIL;
    while (chain != NIL) {
        uint32_t run = chain, last = chain, next;
        while ((next = node_at(w, last)->link) != NIL &&
               node_at(w, next)->stamp > node_at(w, last)->stamp)
            last = next;
        chain = next;
        node_at(w, last)->link = NIL;
        for (k = 0; runs[k] != NIL; k++) {
            run = merge_chains(w, runs[k], run);
            runs[k] = NIL;
        }
        runs[k] = run;
    }
    for (k = 0; k < 32; k++)
        if (runs[k] != NIL)
            sorted = merge_chains(w, runs[k], sorted);
    return sorted;
}

/* Sorts a near slot about to be dispatched, if note_order marked it: its
 * live nodes detached onto a chain, sorted, and written back from the
 * queue's head, the stale entries dropped. */
static void order_slot(tw_wheel *w, unsigned list)
{
    uint64_t bit = UINT64_C(1) << (list & 63);
    uint32_t chain = NIL, *tail = &chain, index, write;
    struct cursor c;
    if (!(w->unsorted[list >> 6] & bit))
        return;
    w->unsorted[list >> 6] &= ~bit;
    c = queue_walk(w, list);
    while (walk_next_live(w, &c, &index)) {
        struct node *n = node_at(w, index);
        n->state = NODE_DETACHED; /* a stale entry of it now reads stale */
        *tail = index;
        tail = &n->link;
    }
    *tail = NIL;
    write = queue_rewrite(w, list);
    for (index = sort_chain(w, chain); index != NIL;) {
        struct node *n = node_at(w, index);
        uint32_t next = n->link;
        rewrite_put(w, &write, index);
        n->state = NODE_LINKED;
        index = next;
    }
    queue_rewrite_end(w, list, write);
}
