#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"

ncclNet_v11_t *net;

static atomic_int warn_count;
static atomic_int repeat_count;	/* INFO "again: " lines: WARNs shown once */
static char last_warn[1024];

#define INFO_KEEP 256
static pthread_mutex_t info_lock = PTHREAD_MUTEX_INITIALIZER;
static char info_lines[INFO_KEEP][1024];
static unsigned info_next;

static void keep_info(const char *line)
{
	pthread_mutex_lock(&info_lock);
	snprintf(info_lines[info_next % INFO_KEEP], sizeof(info_lines[0]), "%s", line);
	info_next++;
	pthread_mutex_unlock(&info_lock);
}

int harness_info_count(const char *needle)
{
	int n = 0;

	pthread_mutex_lock(&info_lock);
	for (unsigned i = 0; i < INFO_KEEP && i < info_next; i++)
		n += strstr(info_lines[i], needle) != NULL;
	pthread_mutex_unlock(&info_lock);
	return n;
}

void *harness_open(void)
{
	const char *path = getenv("SYMMEM_PLUGIN");
	void *lib;

	if (!path) {
		fprintf(stderr, "SYMMEM_PLUGIN is not set\n");
		return NULL;
	}
	lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!lib) {
		fprintf(stderr, "dlopen %s: %s\n", path, dlerror());
		return NULL;
	}
	net = dlsym(lib, "ncclNetPlugin_v11");
	return net ? lib : NULL;
}

void harness_logger(ncclDebugLogLevel level, unsigned long flags, const char *file, int line,
		    const char *fmt, ...)
{
	char buf[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	/* As NCCL_DEBUG=WARN prints them: a WARN whose flags miss NCCL's
	 * default subsystems is lost to the user, so it does not count. */
	if (level == NCCL_LOG_WARN && !(flags & NCCL_DEFAULT_SUBSYS))
		return;
	if (level == NCCL_LOG_WARN) {
		atomic_fetch_add(&warn_count, 1);
		snprintf(last_warn, sizeof(last_warn), "%s", buf);
		if (getenv("HARNESS_VERBOSE"))
			fprintf(stderr, "WARN %s:%d %s\n", file, line, buf);
	} else {
		if (strncmp(buf, "again: ", 7) == 0)
			atomic_fetch_add(&repeat_count, 1);
		keep_info(buf);
		if (getenv("HARNESS_VERBOSE"))
			fprintf(stderr, "INFO %s\n", buf);
	}
}

int harness_warn_count(void)
{
	return atomic_load(&warn_count);
}

int harness_repeat_count(void)
{
	return atomic_load(&repeat_count);
}

const char *harness_last_warn(void)
{
	return last_warn;
}

void harness_reset_warn(void)
{
	atomic_store(&warn_count, 0);
	atomic_store(&repeat_count, 0);
	last_warn[0] = '\0';
}

void *harness_init(void)
{
	ncclNetCommConfig_v11_t cfg = { .trafficClass = -1 };
	void *ctx = NULL;

	if (net->init(&ctx, 42, &cfg, harness_logger, NULL) != ncclSuccess)
		return NULL;
	return ctx;
}

int harness_pair(void *ctx, void **send, void **recv)
{
	char handle[NCCL_NET_HANDLE_MAXSIZE];
	void *lc = NULL;
	double end = harness_now() + 10;
	int rc;

	*send = *recv = NULL;
	rc = net->listen(ctx, 0, handle, &lc);
	if (rc)
		return rc;
	while ((!*send || !*recv) && harness_now() < end) {
		if (!*send && (rc = net->connect(ctx, 0, handle, send, NULL)))
			break;
		if (!*recv && (rc = net->accept(lc, recv, NULL)))
			break;
	}
	net->closeListen(lc);
	if (!rc && (!*send || !*recv))
		rc = ncclInternalError;
	return rc;
}

int harness_io(int fd, void *buf, size_t len, int writing, int polling)
{
	int flags = polling ? MSG_DONTWAIT : 0;
	uint8_t *p = buf;

	while (len) {
		ssize_t n = writing ? send(fd, p, len, flags | MSG_NOSIGNAL) : recv(fd, p, len, flags);

		if (n < 0 && (errno == EINTR || (polling && (errno == EAGAIN || errno == EWOULDBLOCK))))
			continue;
		if (n <= 0)
			return -1;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

int harness_send_all(int fd, const void *buf, size_t len)
{
	return harness_io(fd, (void *)buf, len, 1, 0);
}

int harness_recv_all(int fd, void *buf, size_t len)
{
	return harness_io(fd, buf, len, 0, 0);
}

static uint8_t pattern_byte(size_t i, uint64_t msg)
{
	uint64_t x = (i + 1) * 0x9e3779b97f4a7c15ull ^ (msg + 1) * 0xbf58476d1ce4e5b9ull;

	x ^= x >> 29;
	return (uint8_t)(x | 1);	/* never zero: zeros hide missing writes */
}

void pattern_fill(uint8_t *buf, size_t len, uint64_t msg)
{
	for (size_t i = 0; i < len; i++)
		buf[i] = pattern_byte(i, msg);
}

size_t pattern_check(const uint8_t *buf, size_t len, uint64_t msg)
{
	for (size_t i = 0; i < len; i++)
		if (buf[i] != pattern_byte(i, msg))
			return i;
	return len;
}

double harness_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int harness_isend(void *comm, void *buf, size_t size, void *mhandle, void **req, double seconds)
{
	double end = harness_now() + seconds;
	int rc;

	do {
		rc = net->isend(comm, buf, size, 0, mhandle, NULL, req);
		if (rc || *req)
			return rc;
	} while (harness_now() < end);
	fprintf(stderr, "isend of %zu bytes not taken after %.1f s\n", size, seconds);
	return ncclInternalError;
}

int harness_wait(void *req, int *size, double seconds)
{
	double end = harness_now() + seconds;
	int sizes[64] = { 0 };
	int done = 0, rc;

	while (!done) {
		rc = net->test(req, &done, sizes);
		if (rc)
			return rc;
		if (!done && harness_now() > end) {
			fprintf(stderr, "request %p not done after %.1f s\n", req, seconds);
			return ncclInternalError;
		}
	}
	if (size)
		*size = sizes[0];
	return ncclSuccess;
}

int harness_run_child(const char *argv0, const char *mode, const char *const *env)
{
	pid_t pid = fork();
	int status;

	if (pid == 0) {
		for (; *env; env += 2)
			setenv(env[0], env[1], 1);
		execl("/proc/self/exe", argv0, mode, (char *)NULL);
		_exit(99);
	}
	if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status))
		return -1;
	return WEXITSTATUS(status);
}
