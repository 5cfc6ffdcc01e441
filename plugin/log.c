/* NCCL's logger is handed to us in init; until then (and in tests that
 * pass none) warnings go to stderr so they are never lost. */
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>

#include "log.h"
#include "symmem.h"

static _Atomic(ncclDebugLogger_t) nccl_logger;

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
