/*
 * A wall-clock shim for the fault campaign (ci/faults.sh), loaded with LD_PRELOAD.
 *
 * It adds an offset in milliseconds to the wall clock the process reads:
 * clock_gettime(CLOCK_REALTIME, CLOCK_REALTIME_COARSE, CLOCK_REALTIME_ALARM),
 * gettimeofday and time. Monotonic clocks are left alone (libfaketime also
 * moves those and hangs a librdkafka consumer; see
 * ../shared/spec/fault-injection-facts.md).
 *
 * Absolute deadlines on the wall clock are translated back before they reach
 * the kernel: cnd_timedwait, mtx_timedlock (C11, TIME_UTC) and
 * clock_nanosleep(CLOCK_REALTIME, TIMER_ABSTIME). librdkafka computes its
 * condition-variable deadlines from clock_gettime(CLOCK_REALTIME) (tinycthread's
 * timespec_get) and waits with cnd_timedwait; without the translation every
 * such wait would last the offset longer (a shim artefact: after a real step
 * the kernel's clock moves too), and a step of +20 s stalls the producer's
 * retries for 20 s. What the shim does not model: a wait already in progress
 * when a real clock steps ends early (forward) or late (back).
 * pthread_cond_timedwait is left alone (its clock is set per condition
 * variable); neither the member nor librdkafka imports it.
 *
 * The offset is a decimal integer (milliseconds, may be negative) in the file
 * named by KRABKA_FAULTS_CLOCK_FILE. The file is read again at most every
 * 100 ms of the monotonic clock; a missing or unreadable file means 0.
 *
 * Build: cc -shared -fPIC -O2 -o clockshim.so clockshim.c -ldl
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/time.h>
#include <threads.h>
#include <time.h>
#include <unistd.h>

#define REREAD_NS 100000000LL

typedef int (*clock_gettime_fn)(clockid_t, struct timespec *);
typedef int (*cnd_timedwait_fn)(cnd_t *, mtx_t *, const struct timespec *);
typedef int (*mtx_timedlock_fn)(mtx_t *, const struct timespec *);
typedef int (*clock_nanosleep_fn)(clockid_t, int, const struct timespec *, struct timespec *);

static clock_gettime_fn real_clock_gettime;
static int64_t offset_ms;         /* accessed with __atomic builtins */
static int64_t next_read_ns = -1; /* monotonic ns of the next read of the file */

static clock_gettime_fn real(void) {
    clock_gettime_fn f = __atomic_load_n(&real_clock_gettime, __ATOMIC_ACQUIRE);
    if (f == NULL) {
        f = (clock_gettime_fn)dlsym(RTLD_NEXT, "clock_gettime");
        __atomic_store_n(&real_clock_gettime, f, __ATOMIC_RELEASE);
    }
    return f;
}

/* Reads the offset file; keeps the last value when the file cannot be parsed. */
static void read_offset(void) {
    const char *path = getenv("KRABKA_FAULTS_CLOCK_FILE");
    if (path == NULL || path[0] == '\0') return;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        __atomic_store_n(&offset_ms, 0, __ATOMIC_RELAXED);
        return;
    }
    char buf[32];
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0) {
        __atomic_store_n(&offset_ms, 0, __ATOMIC_RELAXED);
        return;
    }
    buf[n] = '\0';
    char *end;
    long long v = strtoll(buf, &end, 10);
    if (end != buf) __atomic_store_n(&offset_ms, (int64_t)v, __ATOMIC_RELAXED);
}

/* The current offset in ms, read again from the file when 100 ms have passed. */
static int64_t current_offset_ms(void) {
    struct timespec mono;
    clock_gettime_fn f = real();
    if (f != NULL && f(CLOCK_MONOTONIC_COARSE, &mono) == 0) {
        int64_t now = (int64_t)mono.tv_sec * 1000000000LL + mono.tv_nsec;
        int64_t next = __atomic_load_n(&next_read_ns, __ATOMIC_RELAXED);
        /* one thread re-reads; the others keep the value they see */
        if (now >= next &&
            __atomic_compare_exchange_n(&next_read_ns, &next, now + REREAD_NS, 0,
                                        __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
            read_offset();
        }
    }
    return __atomic_load_n(&offset_ms, __ATOMIC_RELAXED);
}

static void shift(struct timespec *ts, int64_t ms) {
    int64_t ns = (int64_t)ts->tv_nsec + (ms % 1000) * 1000000LL;
    int64_t sec = (int64_t)ts->tv_sec + ms / 1000;
    while (ns < 0) {
        ns += 1000000000LL;
        sec -= 1;
    }
    while (ns >= 1000000000LL) {
        ns -= 1000000000LL;
        sec += 1;
    }
    ts->tv_sec = (time_t)sec;
    ts->tv_nsec = (long)ns;
}

static int is_realtime(clockid_t id) {
    return id == CLOCK_REALTIME || id == CLOCK_REALTIME_COARSE
#ifdef CLOCK_REALTIME_ALARM
           || id == CLOCK_REALTIME_ALARM
#endif
        ;
}

int clock_gettime(clockid_t id, struct timespec *ts) {
    clock_gettime_fn f = real();
    if (f == NULL) return -1;
    int rc = f(id, ts);
    if (rc == 0 && is_realtime(id)) {
        int64_t ms = current_offset_ms();
        if (ms != 0) shift(ts, ms);
    }
    return rc;
}

int gettimeofday(struct timeval *tv, void *tz) {
    (void)tz;
    struct timespec ts;
    if (clock_gettime(CLOCK_REALTIME, &ts) != 0) return -1;
    tv->tv_sec = ts.tv_sec;
    tv->tv_usec = ts.tv_nsec / 1000;
    return 0;
}

time_t time(time_t *out) {
    struct timespec ts;
    if (clock_gettime(CLOCK_REALTIME, &ts) != 0) return (time_t)-1;
    if (out != NULL) *out = ts.tv_sec;
    return ts.tv_sec;
}

/* A wall-clock deadline the process computed with the shifted clock, on the kernel's clock. */
static struct timespec unshift(const struct timespec *at) {
    struct timespec real_at = *at;
    int64_t ms = current_offset_ms();
    if (ms != 0) shift(&real_at, -ms);
    return real_at;
}

int cnd_timedwait(cnd_t *cond, mtx_t *mtx, const struct timespec *at) {
    static cnd_timedwait_fn f;
    if (f == NULL) f = (cnd_timedwait_fn)dlsym(RTLD_NEXT, "cnd_timedwait");
    struct timespec real_at = unshift(at);
    return f(cond, mtx, &real_at);
}

int mtx_timedlock(mtx_t *mtx, const struct timespec *at) {
    static mtx_timedlock_fn f;
    if (f == NULL) f = (mtx_timedlock_fn)dlsym(RTLD_NEXT, "mtx_timedlock");
    struct timespec real_at = unshift(at);
    return f(mtx, &real_at);
}

int clock_nanosleep(clockid_t id, int flags, const struct timespec *req, struct timespec *rem) {
    static clock_nanosleep_fn f;
    if (f == NULL) f = (clock_nanosleep_fn)dlsym(RTLD_NEXT, "clock_nanosleep");
    if ((flags & TIMER_ABSTIME) && is_realtime(id)) {
        struct timespec real_at = unshift(req);
        return f(id, flags, &real_at, rem);
    }
    return f(id, flags, req, rem);
}
