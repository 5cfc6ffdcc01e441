/* Connection pairs for the transport tests: one process drives both
 * ends of a real connection (sockets, shared memory or RDMA).
 * tp_pair_open() makes the usual pair from a few options; options(),
 * make_pair() and drive_pair() underneath serve the tests that set other
 * tp_options, expect the connection to fail or drive their own listener. */
#ifndef SYMMEM_TEST_TP_PAIR_H
#define SYMMEM_TEST_TP_PAIR_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "transport.h"

/* A pair as a test asks for it; a field left 0 takes the plugin's default
 * (and a 1 MiB ring of 64 KiB chunks). */
struct tp_pair_opts {
	int backend;		/* enum tp_backend */
	int gpu;		/* GPU buffers come: the copy engine (a stand-in in
				 * these tests) is taken at setup, and the staging
				 * pool may grow to 64 MiB */
	int staged;		/* GPU receives land in the staging pool first
				 * (NCCL_ZERO_COPY=0) */
	double copy_limit_s;	/* seconds a started copy may take (0: the
				 * transport's own limit) */
	int host_in_place;	/* NCCL_SYMMEM_HOST_IN_PLACE */
	int landing;		/* NCCL_SYMMEM_LANDING_WORDS */
};

struct tp_pair {
	struct tp_comm *s, *r;	/* sender, receiver */
};

/* Connects both ends as `opts` asks, or fails the test with the
 * transport's message. */
void tp_pair_open(struct tp_pair *p, const struct tp_pair_opts *opts);
/* Closes both ends; one the test closed already is NULL. */
void tp_pair_close(struct tp_pair *p);

/* Options as the plugin sets them by default, with this backend and ring. */
struct tp_options options(int backend, uint64_t ring, uint64_t chunk);
/* Required ibverbs on the devices NCCL_IB_HCA-style `hca` selects. */
struct tp_options ib_options(const char *hca);
double now(void);
/* The handle of a listener at 127.0.0.1:40000, socket name and all, with
 * no RDMA offer: a start for tests that change one field. */
void sample_handle_info(struct tp_handle_info *info);
/* Connects and accepts on one thread until both ends exist (10 s). */
int drive_pair(const struct tp_options *o, struct tp_listener *l, const uint8_t *h,
	       struct tp_comm **s, struct tp_comm **r);
int make_pair(const struct tp_options *o, struct tp_comm **s, struct tp_comm **r);
/* Tests both requests until done (failing the test past `end`, or on an
 * error, which it prints); returns the bytes the receive reports. */
size_t complete_both(struct tp_req *sr, struct tp_req *rr, double end);
/* Tests `r` until it is done and returns the bytes it reports; fails the
 * test past `end` or on an error. */
size_t wait_done(struct tp_req *r, double end);
/* Tests `r` until it fails and returns that error, SM_OK if `end` came
 * first; fails the test if `r` completes instead. */
int wait_failure(struct tp_req *r, double end);
/* Retries isend (from registration `reg`, or none) until the peer's
 * receive is posted, as NCCL's proxy does; fails the test past `end`. */
struct tp_req *isend_when_posted(struct tp_comm *s, const void *src, size_t size,
				 const struct tp_region *reg, double end);
/* The real connector beside attackers: a child that connects with handle
 * `h` and sends `msg` (64 bytes); it exits 0 once the message was received,
 * 1 if it could not connect within `seconds`, 2 if the send did not end. */
pid_t fork_connector(const struct tp_options *o, const uint8_t *h, const char *msg,
		     double seconds);
/* The automatic choice between (posed) hosts: see tp_pair.c. */
void auto_between_hosts(const char *hca, int offers_ib, const char *want);

#endif
