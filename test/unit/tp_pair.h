/* Connection pairs for the transport tests: one process drives both
 * ends of a real connection (sockets, shared memory or RDMA). */
#ifndef SYMMEM_TEST_TP_PAIR_H
#define SYMMEM_TEST_TP_PAIR_H

#include <stddef.h>
#include <stdint.h>

#include "transport.h"

/* Options as the plugin sets them by default, with this backend and ring. */
struct tp_options options(int backend, uint64_t ring, uint64_t chunk);
/* Required ibverbs on the devices NCCL_IB_HCA-style `hca` selects. */
struct tp_options ib_options(const char *hca);
double now(void);
/* Connects and accepts on one thread until both ends exist (10 s). */
int drive_pair(const struct tp_options *o, struct tp_listener *l, const uint8_t *h,
	       struct tp_comm **s, struct tp_comm **r);
int make_pair(const struct tp_options *o, struct tp_comm **s, struct tp_comm **r);
/* Tests both requests until done (failing the test past `end`, or on an
 * error, which it prints); returns the bytes the receive reports. */
size_t complete_both(struct tp_req *sr, struct tp_req *rr, double end);
/* Tests `r` until it is done; fails the test past `end` or on an error. */
void wait_done(struct tp_req *r, double end);
/* Retries isend (from registration `reg`, or none) until the peer's
 * receive is posted, as NCCL's proxy does; fails the test past `end`. */
struct tp_req *isend_when_posted(struct tp_comm *s, const void *src, size_t size,
				 const struct tp_region *reg, double end);
/* The automatic choice between (posed) hosts: see tp_pair.c. */
void auto_between_hosts(const char *hca, int offers_ib, const char *want);

#endif
