/* ==== platform: what the operating system provides ========================
 * Guarantees: the rest of the library names no operating-system call; it
 * uses these, which behave alike on POSIX and on Windows (8 or later):
 * mutexes and condition variables (a timed wait on the monotonic clock),
 * a thread to start, join or detach, and the identity of the calling
 * thread; the monotonic clock in microseconds; a word to sleep on until
 * another thread changes it (the Linux futex, WaitOnAddress; elsewhere a
 * short nap), and the pause, yield and nap of a waiting spin. Owns no
 * state: nothing is cached between calls.
 *
 * Windows' waits time out in whole milliseconds at the system timer's
 * resolution (15.6 ms by default), so the timer thread asks for 1 ms while
 * it runs (timeBeginPeriod) and gives it back as it ends. */

/* MSVC links what the Windows side needs by itself; MinGW links
 * -lsynchronization -lwinmm (meson, CMake and pkg-config say so). */
#if defined(TW_WINDOWS) && defined(_MSC_VER)
#pragma comment(lib, "synchronization.lib") /* WaitOnAddress */
#pragma comment(lib, "winmm.lib")           /* timeBeginPeriod */
#endif

/* ---- mutexes and condition variables ------------------------------------ */

#if defined(TW_WINDOWS)
static int mutex_init(sys_mutex *m)
{
    InitializeSRWLock(m);
    return 0;
}
static void mutex_destroy(sys_mutex *m) { (void)m; }
static void mutex_lock(sys_mutex *m) { AcquireSRWLockExclusive(m); }
static void mutex_unlock(sys_mutex *m) { ReleaseSRWLockExclusive(m); }
static int cond_init(sys_cond *c)
{
    InitializeConditionVariable(c);
    return 0;
}
static void cond_destroy(sys_cond *c) { (void)c; }
static void cond_broadcast(sys_cond *c) { WakeAllConditionVariable(c); }
static void cond_wait(sys_cond *c, sys_mutex *m)
{
    SleepConditionVariableSRW(c, m, INFINITE, 0);
}
#else
static int mutex_init(sys_mutex *m) { return pthread_mutex_init(m, NULL); }
static void mutex_destroy(sys_mutex *m) { pthread_mutex_destroy(m); }
static void mutex_lock(sys_mutex *m) { pthread_mutex_lock(m); }
static void mutex_unlock(sys_mutex *m) { pthread_mutex_unlock(m); }
/* Timed waits count on the monotonic clock, which a change of the date
 * does not move. */
static int cond_init(sys_cond *c)
{
    pthread_condattr_t attributes;
    int error = pthread_condattr_init(&attributes);
    if (error)
        return error;
    error = pthread_condattr_setclock(&attributes, CLOCK_MONOTONIC);
    if (!error)
        error = pthread_cond_init(c, &attributes);
    pthread_condattr_destroy(&attributes);
    return error;
}
static void cond_destroy(sys_cond *c) { pthread_cond_destroy(c); }
static void cond_broadcast(sys_cond *c) { pthread_cond_broadcast(c); }
static void cond_wait(sys_cond *c, sys_mutex *m) { pthread_cond_wait(c, m); }
#endif

/* ---- the monotonic clock ------------------------------------------------- */

/* Microseconds of the monotonic clock; `coarse`: its cheaper, coarser twin
 * where there is one (Linux), else the same. QueryPerformanceCounter's
 * count is turned into microseconds in two parts, whole seconds and the
 * rest, so that nothing overflows for centuries of uptime and the result
 * is exact. */
static uint64_t monotonic_us(int coarse)
{
#if defined(TW_WINDOWS)
    LARGE_INTEGER count, frequency;
    uint64_t ticks, hz;
    (void)coarse;
    QueryPerformanceCounter(&count);
    QueryPerformanceFrequency(&frequency); /* fixed at boot; a read of a
                                              shared page, no system call */
    ticks = (uint64_t)count.QuadPart;
    hz = (uint64_t)frequency.QuadPart;
    return ticks / hz * 1000000u + ticks % hz * 1000000u / hz;
#else
    struct timespec ts = {0, 0};
#if defined(CLOCK_MONOTONIC_COARSE)
    clock_gettime(coarse ? CLOCK_MONOTONIC_COARSE : CLOCK_MONOTONIC, &ts);
#else
    (void)coarse;
    clock_gettime(CLOCK_MONOTONIC, &ts);
#endif
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
#endif
}

/* The monotonic clock's finest count (nanoseconds on POSIX, the
 * performance counter on Windows): not a time, a value that moves between
 * any two calls, for the wheel's tag. */
static uint64_t monotonic_count(void)
{
#if defined(TW_WINDOWS)
    LARGE_INTEGER count;
    QueryPerformanceCounter(&count);
    return (uint64_t)count.QuadPart;
#else
    struct timespec ts = {0, 0};
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
#endif
}

/* Whether the system has a coarse monotonic clock that works. */
static int have_coarse_clock(void)
{
#if defined(CLOCK_MONOTONIC_COARSE) && !defined(TW_WINDOWS)
    struct timespec probe;
    return clock_gettime(CLOCK_MONOTONIC_COARSE, &probe) == 0;
#else
    return 0;
#endif
}

/* Waits on `c` until woken or until the monotonic clock reaches
 * `deadline_us`: 0 when woken (perhaps spuriously), else the deadline has
 * passed. */
static int cond_wait_until(sys_cond *c, sys_mutex *m, uint64_t deadline_us)
{
#if defined(TW_WINDOWS)
    uint64_t now = monotonic_us(0), wait_ms;
    if (now >= deadline_us)
        return 1;
    wait_ms = (deadline_us - now + 999) / 1000;
    return !SleepConditionVariableSRW(c, m, wait_ms < INFINITE ? (DWORD)wait_ms : INFINITE - 1,
                                      0);
#else
    struct timespec deadline;
    deadline.tv_sec = (time_t)(deadline_us / 1000000u);
    deadline.tv_nsec = (long)(deadline_us % 1000000u) * 1000;
    return pthread_cond_timedwait(c, m, &deadline);
#endif
}

/* ---- threads --------------------------------------------------------------- */

#if defined(TW_WINDOWS)
#define THREAD_ENTRY(name, argument) static unsigned __stdcall name(void *argument)
#define THREAD_RETURN return 0
typedef unsigned __stdcall thread_entry(void *argument);

static int thread_start(struct sys_thread *t, thread_entry *entry, void *argument)
{
    unsigned id;
    uintptr_t handle = _beginthreadex(NULL, 0, entry, argument, 0, &id);
    if (!handle)
        return errno ? errno : EAGAIN;
    t->handle = (HANDLE)handle;
    t->id = id;
    return 0;
}
static void thread_join(struct sys_thread *t)
{
    WaitForSingleObject(t->handle, INFINITE);
    CloseHandle(t->handle);
}
static void thread_detach(struct sys_thread *t) { CloseHandle(t->handle); }
static thread_id thread_self(void) { return GetCurrentThreadId(); }
static int same_thread(thread_id a, thread_id b) { return a == b; }
static thread_id thread_of(const struct sys_thread *t) { return t->id; }
/* The system timer's resolution while the timer thread runs. */
static void timer_resolution(int fine)
{
    if (fine)
        timeBeginPeriod(1);
    else
        timeEndPeriod(1);
}
#else
#define THREAD_ENTRY(name, argument) static void *name(void *argument)
#define THREAD_RETURN return NULL
typedef void *thread_entry(void *argument);

static int thread_start(struct sys_thread *t, thread_entry *entry, void *argument)
{
    return pthread_create(&t->thread, NULL, entry, argument);
}
static void thread_join(struct sys_thread *t) { pthread_join(t->thread, NULL); }
static void thread_detach(struct sys_thread *t) { pthread_detach(t->thread); }
static thread_id thread_self(void) { return pthread_self(); }
static int same_thread(thread_id a, thread_id b) { return pthread_equal(a, b); }
static thread_id thread_of(const struct sys_thread *t) { return t->thread; }
static void timer_resolution(int fine) { (void)fine; }
#endif

/* ---- waiting on a word ---------------------------------------------------- */

/* A nap: short enough for a spin that waits for a preempted holder (20 µs
 * on POSIX; on Windows, the rest of the time slice, which is as short as
 * it sleeps). */
static void nap(void)
{
#if defined(TW_WINDOWS)
    Sleep(0);
#else
    struct timespec pause = {0, NAP_NS};
    nanosleep(&pause, NULL);
#endif
}

static void yield_cpu(void)
{
#if defined(TW_WINDOWS)
    SwitchToThread();
#else
    sched_yield();
#endif
}

static void cpu_pause(void)
{
#if defined(TW_GNU) && (defined(__x86_64__) || defined(__i386__))
    __builtin_ia32_pause();
#elif defined(TW_GNU) && (defined(__aarch64__) || defined(__arm__))
    __asm__ __volatile__("yield");
#elif defined(TW_WINDOWS)
    YieldProcessor();
#endif
}

/* Sleeps while *word == value (or for a short nap where there is no way to
 * sleep on a word); wakes up to `count` sleepers (1, or all for INT_MAX).
 * Both are hints: callers look again. */
static void park(spin_word *word, unsigned value)
{
#if defined(TW_HAVE_FUTEX)
    syscall(SYS_futex, (void *)word, FUTEX_WAIT_PRIVATE, value, NULL, NULL, 0);
#elif defined(TW_WINDOWS)
    LONG expected = (LONG)value;
    WaitOnAddress(word, &expected, sizeof expected, INFINITE);
#else
    (void)word;
    (void)value;
    nap();
#endif
}

static void unpark(spin_word *word, int count)
{
#if defined(TW_HAVE_FUTEX)
    syscall(SYS_futex, (void *)word, FUTEX_WAKE_PRIVATE, count, NULL, NULL, 0);
#elif defined(TW_WINDOWS)
    if (count == 1)
        WakeByAddressSingle((PVOID)word);
    else
        WakeByAddressAll((PVOID)word);
#else
    (void)word;
    (void)count;
#endif
}
