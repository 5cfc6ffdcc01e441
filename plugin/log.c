/* NCCL's logger is handed to us in init; until then (and in tests that
 * pass none) warnings go to stderr so they are never lost. */
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "log.h"
#include "symmem.h"

static _Atomic(ncclDebugLogger_t) nccl_logger;

/* The last few WARNs, by key.  When a peer dies, each of NCCL's channels
 * has its own connection to it and each fails (16-32 lines per process on
 * 4 x H200): the first is the WARN, a repeat within a minute goes to INFO.
 * The key is the text itself, or for a connection's failure the peer it
 * names (log_fail): send and receive connections to one dead peer fail
 * with different texts.  A pid names a process on its own host, so two
 * peers on different hosts with the same pid failing within the minute
 * get one WARN; the second one's lines are INFO. */
#define RECENT_WARNS 8
#define REPEAT_NS (60ull * 1000000000ull)

static pthread_mutex_t recent_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
	char key[1024];		/* the line, or "(peer process N)" */
	uint64_t ns;
} recent[RECENT_WARNS];
static unsigned recent_next;

/* 1 when a WARN of the same key was logged within REPEAT_NS; remembers
 * the key if not. */
static int warned_lately(const char *key)
{
	uint64_t now = sm_now_ns();
	int seen = 0;

	pthread_mutex_lock(&recent_lock);
	for (int i = 0; i < RECENT_WARNS && !seen; i++)
		seen = recent[i].ns && now - recent[i].ns < REPEAT_NS &&
		       strncmp(recent[i].key, key, sizeof(recent[i].key) - 1) == 0;
	if (!seen) {
		snprintf(recent[recent_next].key, sizeof(recent[0].key), "%s", key);
		recent[recent_next].ns = now;
		recent_next = (recent_next + 1) % RECENT_WARNS;
	}
	pthread_mutex_unlock(&recent_lock);
	return seen;
}

static void lower_layer_line(int warn, const char *msg)
{
	if (warn)
		LOG_WARN("NET/symmem: %s", msg);
	else
		LOG_INFO("NET/symmem %s", msg);
}

void log_set_logger(ncclDebugLogger_t logger)
{
	if (!logger)
		return;
	atomic_store(&nccl_logger, logger);
	sm_set_log_sink(lower_layer_line);
}

static void log_line(ncclDebugLogLevel level, unsigned long flags, const char *file, int line,
		     const char *key, const char *buf)
{
	ncclDebugLogger_t logger = atomic_load(&nccl_logger);

	if (level == NCCL_LOG_WARN && warned_lately(key)) {
		if (logger)
			logger(NCCL_LOG_INFO, NCCL_INIT | NCCL_NET, file, line, "again: %s", buf);
		return;
	}
	if (logger)
		logger(level, flags, file, line, "%s", buf);
	else if (level == NCCL_LOG_WARN)
		fprintf(stderr, "NCCL WARN %s\n", buf);
}

void log_msg(ncclDebugLogLevel level, unsigned long flags, const char *file, int line,
	     const char *fmt, ...)
{
	char buf[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	log_line(level, flags, file, line, buf, buf);
}

ncclResult_t log_result(int status)
{
	switch (status) {
	case SM_OK:
		return ncclSuccess;
	case SM_ERR_INTERNAL:
		return ncclInternalError;
	case SM_ERR_INVALID:
		return ncclInvalidArgument;
	case SM_ERR_USAGE:
		return ncclInvalidUsage;
	case SM_ERR_REMOTE:
		return ncclRemoteError;
	case SM_ERR_CUDA:
		return ncclUnhandledCudaError;
	default:
		return ncclSystemError;
	}
}

ncclResult_t log_fail(int status, const char *what)
{
	const char *err = sm_last_error();
	const char *peer = status == SM_ERR_REMOTE ? strstr(err, "(peer process ") : NULL;
	char buf[1024];

	snprintf(buf, sizeof(buf), "NET/symmem: %s: %s", what, err);
	log_line(NCCL_LOG_WARN, NCCL_ALL, __FILE__, __LINE__, peer ? peer : buf, buf);
	return log_result(status);
}
