/* Grouped receives on this plugin's own connections.
 *
 * With an inner net plugin NCCL sees its maxRecvs (path_inner.c), and
 * NCCL takes one maxRecvs per device for every connection of it, so a
 * connection inside the host may get an irecv of several buffers too.
 * NCCL groups the receives of one shared comm, tagged with the sending
 * rank; NCCL's IB plugin hands a send with tag T the first unfilled buffer
 * of tag T in the oldest group, so where every tag of a group is the same
 * that is simply the order of the sends.  This plugin's transport keeps
 * that order, so such a group is its buffers posted one by one, and done
 * when all are.  A group with different tags cannot be told apart that
 * way (the transport carries no tag) and is refused with one WARN: NCCL
 * makes those only for PXN, which needs P2P, which a job that routes this
 * host's traffic through the plugin has turned off. */
#ifndef SYMMEM_PLUGIN_RECV_GROUP_H
#define SYMMEM_PLUGIN_RECV_GROUP_H

#include <stddef.h>

/* The most buffers one grouped receive takes: NCCL's IB plugin's. */
#define RECV_GROUP_MAX 8

struct tp_req;

struct recv_group {
	int n;				/* buffers */
	int posted;			/* of those, posted so far */
	void *first;			/* data[0]: the retry of a partly posted group */
	struct tp_req *req[RECV_GROUP_MAX];	/* NULL once done */
	size_t size[RECV_GROUP_MAX];
	struct recv_group *next;	/* free list */
};

/* A free group, or NULL when all are in flight (NCCL asks again). */
struct recv_group *recv_group_get(void);
void recv_group_put(struct recv_group *g);
/* 1 if `p` is a group recv_group_get() handed out; by address only. */
int recv_group_owned(const void *p);

#endif
