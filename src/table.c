/* ==== table: errors, versions and the function table =====================
 * Guarantees: the plugin table only ever grows at its end; a version this
 * library does not know gets NULL. Owns constant data only. */

static const struct {
    int code;
    const char *text;
} error_texts[] = {
    {0, "success"},
    {EINVAL, "invalid argument"},
    {ERANGE, "delay, interval or tick out of range"},
    {ENOSPC, "pending timer cap reached"},
    {ENOMEM, "out of memory"},
    {EBUSY, "wheel is busy: being driven or destroyed"},
    {EDEADLK, "would deadlock: called from the timer thread"},
    {EMFILE, "too many distinct release functions on one wheel"},
    {EFAULT, "wheel invariant broken"},
};

TW_EXPORT const char *tw_strerror(int error)
{
    size_t i;
    for (i = 0; i < sizeof error_texts / sizeof error_texts[0]; i++)
        if (error_texts[i].code == error || -error_texts[i].code == error)
            return error_texts[i].text;
    return "unknown error";
}

TW_EXPORT int tw_last_error(void)
{
    return last_error;
}

TW_EXPORT uint32_t tw_version(void)
{
    return TW_VERSION_HEX;
}

TW_EXPORT const char *tw_version_string(void)
{
    return TW_VERSION_STRING;
}

/* One constant table per library; it only ever grows at its end, so a host
 * built against version N can use any library of version >= N. */

static const struct tw_api api_table = {
    sizeof(struct tw_api),
    TW_API_VERSION,
    tw_version,
    tw_version_string,
    tw_strerror,
    tw_config_init,
    tw_create,
    tw_destroy,
    tw_add,
    tw_add_periodic,
    tw_add_ex,
    tw_cancel,
    tw_reschedule,
    tw_remaining,
    tw_gettime,
    tw_expire,
    tw_advance,
    tw_next_expiry,
    tw_timeout_ms,
    tw_thread_start,
    tw_thread_stop,
    tw_now,
    tw_count,
    tw_tick_us,
    tw_get_stats,
    tw_check,
    tw_reschedule_ex,
    tw_clock_us,
    tw_deadline_us,
    tw_next_deadline_us,
    tw_context,
    tw_last_error,
    tw_add_us,
    tw_reschedule_us,
};

TW_EXPORT const struct tw_api *tw_get_api(uint32_t version)
{
    if (version == 0 || version > TW_API_VERSION)
        return NULL;
    return &api_table;
}
