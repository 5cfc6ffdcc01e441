/* Logging through NCCL's logger.  INFO lines carry the NET subsystem flag
 * and the "NET/symmem" prefix; WARN lines also become NCCL's last error.
 * A WARN whose text was a WARN within the last minute is logged as INFO
 * "again: ..." (log.c), and so is a connection failure of a peer process
 * that failed another connection within that minute. */
#ifndef SYMMEM_PLUGIN_LOG_H
#define SYMMEM_PLUGIN_LOG_H

#include "nccl_abi.h"

void log_set_logger(ncclDebugLogger_t logger);
void log_msg(ncclDebugLogLevel level, unsigned long flags, const char *file, int line,
	     const char *fmt, ...) __attribute__((format(printf, 5, 6)));

/* NCCL_ALL as NCCL's own WARN: NCCL prints a line only when its flags meet
 * the subsystem mask, which is INIT, BOOTSTRAP and ENV unless the user sets
 * NCCL_DEBUG_SUBSYS, so a WARN flagged NET alone vanished under the usual
 * NCCL_DEBUG=WARN. */
#define LOG_WARN(...) log_msg(NCCL_LOG_WARN, NCCL_ALL, __FILE__, __LINE__, __VA_ARGS__)
#define LOG_INFO(...) log_msg(NCCL_LOG_INFO, NCCL_INIT | NCCL_NET, __FILE__, __LINE__, __VA_ARGS__)

/* Maps a lower-layer sm_status to the NCCL result. */
ncclResult_t log_result(int status);

/* WARNs "NET/symmem: <what>: <sm_last_error()>" and returns the mapped
 * code; a remote error that names its peer ("(peer process N)", from
 * comm_fail) is a repeat of any earlier one naming the same peer. */
ncclResult_t log_fail(int status, const char *what);

#endif
