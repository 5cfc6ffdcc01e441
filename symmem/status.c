/* Per-thread error messages, the log hook and what may go through it,
 * and the one clock. */
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "symmem.h"

static _Thread_local char last_error[512];
static _Atomic(sm_log_sink) log_sink;

int sm_fail(int status, const char *fmt, ...)
{
	char line[sizeof(last_error)];
	va_list ap;

	/* Callers often wrap the previous message ("...: %s", sm_last_error()):
	 * format aside first, never into the buffer being read. */
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	memcpy(last_error, line, sizeof(line));
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

static void emit(int warn, const char *fmt, va_list ap)
{
	sm_log_sink sink = atomic_load(&log_sink);
	char line[512];

	if (!sink && !warn)
		return;
	vsnprintf(line, sizeof(line), fmt, ap);
	if (sink)
		sink(warn, line);
	else
		fprintf(stderr, "NET/symmem WARN %s\n", line);
}

void sm_info(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	emit(0, fmt, ap);
	va_end(ap);
}

void sm_warn(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	emit(1, fmt, ap);
	va_end(ap);
}

/* A peer's words reach NCCL's log: a newline there would start a line
 * the peer wrote, an escape sequence would rewrite the terminal. */
char *sm_escape(char *out, size_t len, const char *in, size_t in_len)
{
	static const char hex[] = "0123456789abcdef";
	size_t o = 0;

	if (!len)
		return out;
	for (size_t i = 0; i < in_len && in[i]; i++) {
		unsigned char ch = (unsigned char)in[i];
		char esc[4];
		size_t n = 0;

		if (ch == '\\') {
			esc[n++] = '\\';
			esc[n++] = '\\';
		} else if (ch >= 0x20 && ch < 0x7f) {
			esc[n++] = (char)ch;
		} else {
			esc[n++] = '\\';
			esc[n++] = 'x';
			esc[n++] = hex[ch >> 4];
			esc[n++] = hex[ch & 15];
		}
		if (o + n >= len)
			break;
		memcpy(out + o, esc, n);
		o += n;
	}
	out[o] = '\0';
	return out;
}

uint64_t sm_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}
