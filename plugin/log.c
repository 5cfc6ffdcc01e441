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

/* The last few WARN texts.  When a peer dies, each of NCCL's channels has
 * its own connection to it and each fails with the same text (16-32 lines
 * per process on 4 x H200): the first is the WARN, a repeat within a
 * minute goes to INFO. */
#define RECENT_WARNS 8
#define REPEAT_NS (60ull * 1000000000ull)

static pthread_mutex_t recent_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
	char text[1024];	/* log_msg's line */
	uint64_t ns;
} recent[RECENT_WARNS];
static unsigned recent_next;

/* 1 when the same text was a WARN within REPEAT_NS; remembers it if not. */
static int warned_lately(const char *text)
{
	uint64_t now = sm_now_ns();
	int seen = 0;

	pthread_mutex_lock(&recent_lock);
	for (int i = 0; i < RECENT_WARNS && !seen; i++)
		seen = recent[i].ns && now - recent[i].ns < REPEAT_NS &&
		       strncmp(recent[i].text, text, sizeof(recent[i].text) - 1) == 0;
	if (!seen) {
		snprintf(recent[recent_next].text, sizeof(recent[0].text), "%s", text);
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

void log_msg(ncclDebugLogLevel level, unsigned long flags, const char *file, int line,
	     const char *fmt, ...)
{
	ncclDebugLogger_t logger = atomic_load(&nccl_logger);
	char buf[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	if (level == NCCL_LOG_WARN && warned_lately(buf)) {
		if (logger)
			logger(NCCL_LOG_INFO, NCCL_INIT | NCCL_NET, file, line, "again: %s", buf);
		return;
	}
	if (logger)
		logger(level, flags, file, line, "%s", buf);
	else if (level == NCCL_LOG_WARN)
		fprintf(stderr, "NCCL WARN %s\n", buf);
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
	LOG_WARN("NET/symmem: %s: %s", what, sm_last_error());
	return log_result(status);
}
