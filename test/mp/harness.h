/* Shared helpers for tests that drive the built plugin through its exported
 * ncclNetPlugin_v11 table, as NCCL would. */
#ifndef SYMMEM_TEST_HARNESS_H
#define SYMMEM_TEST_HARNESS_H

#include <stddef.h>
#include <stdint.h>

#include "nccl_abi.h"

extern ncclNet_v11_t *net;

/* dlopen()s $SYMMEM_PLUGIN (set by meson) and resolves the v11 table. */
void *harness_open(void);

/* Logger handed to init: counts the WARN lines NCCL_DEBUG=WARN would show
 * (flags within NCCL's default subsystems) and keeps the last one. */
void harness_logger(ncclDebugLogLevel level, unsigned long flags, const char *file, int line,
		    const char *fmt, ...);
int harness_warn_count(void);
/* WARNs the plugin logged as INFO "again: ..." because the same text was a
 * WARN within the last minute. */
int harness_repeat_count(void);
const char *harness_last_warn(void);
void harness_reset_warn(void);
/* INFO lines seen so far (the last 256 kept) that contain `needle`. */
int harness_info_count(const char *needle);

/* init + one listen/connect/accept pair, all from this thread. */
void *harness_init(void);
int harness_pair(void *ctx, void **send, void **recv);

/* Runs this test program again as `argv0 mode` in a child with the
 * NAME, VALUE pairs of `env` (NULL-terminated) added to its environment;
 * its exit status, or -1 when it did not exit. */
int harness_run_child(const char *argv0, const char *mode, const char *const *env);

/* Handle exchange between forked processes over a real socketpair. */
int harness_send_all(int fd, const void *buf, size_t len);
int harness_recv_all(int fd, void *buf, size_t len);
/* All of len bytes sent (writing) or received, or -1; `polling` spins on
 * a non-blocking call instead of sleeping in the kernel, as NCCL's proxy
 * does. */
int harness_io(int fd, void *buf, size_t len, int writing, int polling);

/* Byte pattern that depends on message number and offset: any misplaced,
 * missing or stale byte shows. */
void pattern_fill(uint8_t *buf, size_t len, uint64_t msg);
size_t pattern_check(const uint8_t *buf, size_t len, uint64_t msg);	/* index of first bad byte or len */

/* Polls test() until done, or fails after `seconds`. Returns the ncclResult_t
 * (ncclInternalError + message on timeout). */
int harness_wait(void *req, int *size, double seconds);
/* Calls isend until it returns a request (the receiver posted), as NCCL's
 * proxy does; ncclInternalError + message past `seconds`. */
int harness_isend(void *comm, void *buf, size_t size, void *mhandle, void **req,
		  double seconds);
double harness_now(void);

#endif
