// clockshim: LD_PRELOAD library that shifts the wall clock of one process.
//
// The file named by DLOCK_CLOCK_FILE holds "offset_ms [rate_ppm anchor_ns]".
// The faked wall clock is
//     real + offset_ms + (real - anchor_ns) * (rate_ppm - 1e6) / 1e6
// so a rate of 1e6 ppm (or no rate at all) is a plain offset. The file is
// re-read on every call, so a test moves the clock by rewriting it.
//
// Only CLOCK_REALTIME(_COARSE), gettimeofday and time are shifted: the
// monotonic clocks stay real. The kernel is called through raw syscall(), and
// nothing here allocates or calls dlsym: redis-server's jemalloc asks for the
// time while it initialises, and re-entering it deadlocks.
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static long long parse(const char **p) {
	const char *s = *p;
	long long v = 0, sign = 1;
	while (*s == ' ' || *s == '\t' || *s == '\n') s++;
	if (*s == '-') { sign = -1; s++; }
	while (*s >= '0' && *s <= '9') v = v * 10 + (*s++ - '0');
	*p = s;
	return sign * v;
}

// shift returns the nanoseconds to add to the real wall clock at real_ns.
static long long shift(long long real_ns) {
	const char *path = getenv("DLOCK_CLOCK_FILE");
	if (!path) return 0;
	char buf[96];
	long fd = syscall(SYS_openat, AT_FDCWD, path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) return 0;
	long n = syscall(SYS_read, fd, buf, sizeof buf - 1);
	syscall(SYS_close, fd);
	if (n <= 0) return 0;
	buf[n] = 0;
	const char *p = buf;
	long long off = parse(&p) * 1000000LL;
	long long ppm = parse(&p), anchor = parse(&p);
	if (ppm <= 0 || ppm == 1000000) return off;
	return off + (long long)((double)(real_ns - anchor) * (double)(ppm - 1000000) / 1e6);
}

static int real_clock(clockid_t id, struct timespec *ts) {
	return (int)syscall(SYS_clock_gettime, id, ts);
}

static void add_ns(struct timespec *ts, long long d) {
	long long ns = (long long)ts->tv_sec * 1000000000LL + ts->tv_nsec + d;
	ts->tv_sec = ns / 1000000000LL;
	ts->tv_nsec = ns % 1000000000LL;
	if (ts->tv_nsec < 0) { ts->tv_nsec += 1000000000LL; ts->tv_sec--; }
}

int clock_gettime(clockid_t id, struct timespec *ts) {
	int r = real_clock(id, ts);
	if (r == 0 && (id == CLOCK_REALTIME || id == CLOCK_REALTIME_COARSE))
		add_ns(ts, shift((long long)ts->tv_sec * 1000000000LL + ts->tv_nsec));
	return r;
}

int gettimeofday(struct timeval *tv, void *tz) {
	(void)tz;
	struct timespec ts;
	int r = clock_gettime(CLOCK_REALTIME, &ts);
	if (r == 0) {
		tv->tv_sec = ts.tv_sec;
		tv->tv_usec = ts.tv_nsec / 1000;
	}
	return r;
}

time_t time(time_t *t) {
	struct timespec ts;
	if (clock_gettime(CLOCK_REALTIME, &ts) != 0) return (time_t)-1;
	if (t) *t = ts.tv_sec;
	return ts.tv_sec;
}
