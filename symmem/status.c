/* Per-thread error messages and the informational log hook. */
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>

#include "symmem.h"

static _Thread_local char last_error[512];
static _Atomic(sm_log_sink) log_sink;

int sm_fail(int status, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(last_error, sizeof(last_error), fmt, ap);
	va_end(ap);
	return status;
}

const char *sm_last_error(void)
{
	return last_error[0] ? last_error : "unknown error";
}

void sm_set_log_sink(sm_log_sink sink)
{
	atomic_store(&log_sink, sink);
}

void sm_info(const char *fmt, ...)
{
	sm_log_sink sink = atomic_load(&log_sink);
	char line[512];
	va_list ap;

	if (!sink)
		return;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	sink(line);
}
