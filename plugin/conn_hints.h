/* What NCCL's traffic hints say about the connection being made, and which
 * buffer registrations on a ring connection the plugin declines.
 *
 * NCCL (net v11, 2.28 on) calls setNetAttr on its proxy service thread
 * right before each connect and accept, with the operations the new
 * connection will carry: send/recv, alltoall, scatter and gather for the
 * connections of point-to-point operations, "undefined" for those of
 * rings and trees (net.cc, populateCommNetAttrs).  Its progress thread
 * calls it too, with each transfer's operation, so a hint is kept per
 * thread: connect and accept read the one their own thread left.
 *
 * Why it matters: with P2P off NCCL counts every GPU as a node of its
 * own, and a ring all_gather or broadcast whose user buffers it could
 * register with the net runs on one channel (coll_reg.cc, isOneRPN).
 * When the registration fails, NCCL runs the collective on its own buffers
 * with all its channels; send/recv and alltoall register on their own
 * connections and stay zero-copy.
 *
 * NCCL registers its own buffers on a connection too, and must not be
 * refused those.  A registration counts as a user buffer only when two
 * tests agree: it is not in the allocation first registered on the
 * connection, and the connection is no longer being set up. */
#ifndef SYMMEM_PLUGIN_CONN_HINTS_H
#define SYMMEM_PLUGIN_CONN_HINTS_H

#include <stdint.h>

enum conn_kind {
	CONN_UNHINTED = 0,	/* no hint (NCCL before 2.28, v10 and older tables) */
	CONN_P2P,		/* send/recv-type operations only */
	CONN_RING,		/* rings and trees: the collectives */
};

/* setNetAttr: `op` is NCCL's bitmask of 1 << ncclFunc_t, all ones for
 * "undefined".  Remembered for the calling thread. */
void hints_note(uint32_t op);

/* The kind of the connection this thread is making, from its last hint;
 * the hint is used up, so a later connection without one is unhinted. */
enum conn_kind hints_take(void);

const char *conn_kind_name(enum conn_kind kind);

/* The comm this thread made last, while NCCL registers its own buffers
 * with it: NCCL does so in the call that made it (net.cc's proxy connect,
 * after connect or accept and closeListen), before its service thread
 * turns to anything else.  Begun when a comm is made, ended when the
 * thread enters setNetAttr, listen, connect or accept again. */
void conn_setup_begin(const void *comm);
void conn_setup_end(void);
int conn_in_setup(const void *comm);

/* A ring connection's own buffers: the GPU allocation that holds the
 * first device memory registered on it (NCCL's buffers for all
 * protocols, one allocation). */
struct staging_alloc {
	uintptr_t lo, hi;	/* [lo, hi); hi == 0: none seen yet */
};

/* Whether device memory registered on a ring connection, lying in the
 * allocation [lo, hi), is a user buffer: 0 for the first allocation (which
 * becomes the connection's staging allocation), for that allocation again
 * and for anything registered while the connection is still being set up
 * (`in_setup`), 1 for any other.  Both tests must call it a user buffer:
 * declining one of NCCL's own buffers would fail the connection. */
int staging_is_user_buffer(struct staging_alloc *s, int in_setup, uintptr_t lo, uintptr_t hi);

/* Device memory NCCL registers on a connection. */
struct reg_case {
	enum conn_kind kind;	/* the connection's */
	int p2p_off;		/* NCCL_P2P_DISABLE: every GPU is a node of its own */
	int keep_rings;		/* ring registrations kept (config_coll_register()) */
	int in_setup;		/* conn_in_setup() of the connection */
	uintptr_t lo, hi;	/* the allocation holding the memory */
};

/* Whether regMr may decline memory on such a connection at all: a ring or
 * tree connection of a job with P2P off, ring registrations not kept.
 * Whatever the connection's backend: NCCL picks a registered ring's
 * channel count on each rank from whether all of that rank's ring
 * registrations succeeded (one channel, else all), so every rank must get
 * the same answer; a rank whose ring neighbours all sit on other hosts
 * would otherwise run on one channel against its neighbours' many.  Needs
 * none of lo and hi, so a caller can ask before it asks the driver. */
int conn_may_decline(const struct reg_case *r);

/* Whether regMr declines it (1): a user buffer where conn_may_decline().
 * `s` is the connection's staging allocation, recorded on the way. */
int conn_declines(struct staging_alloc *s, const struct reg_case *r);

#endif
