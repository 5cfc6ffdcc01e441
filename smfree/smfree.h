/* smfree: the SM-saving side of the product.  The copy engine that moves
 * GPU bytes without a kernel (streams, events, splitting), and the channel
 * policy the tuner applies. */
#ifndef SYMMEM_SMFREE_H
#define SYMMEM_SMFREE_H

#include <stddef.h>
#include <stdint.h>

struct smfree_policy {
	int pass_sm;		/* NCCL_PASS_SM */
	int channels;		/* NCCL_SYMMEM_PASS_SM_CHANNELS */
};

/* Collective kinds as the tuner sees them (same numbering as ncclFunc_t). */
enum smfree_coll {
	SMFREE_BROADCAST = 0,
	SMFREE_REDUCE,
	SMFREE_ALLGATHER,
	SMFREE_REDUCESCATTER,
	SMFREE_ALLREDUCE,
};

/* Channel count the tuner should ask NCCL for, or 0 to keep NCCL's own.
 * The policy never changes algorithm or protocol choices. */
int smfree_channels(const struct smfree_policy *p, int coll, size_t bytes, size_t nranks,
		    size_t nnodes);

/* The copy engine of one sending connection: its own non-blocking streams
 * in the GPU context current when it was opened.  A copy is one
 * cuMemcpyAsync, or one per stream for large copies, each followed by an
 * event the host polls: no kernel, no SM. */
#define SMF_MAX_STREAMS 16

struct smf_engine;

struct smf_copy {
	int nev;
	int first_stream;
	void *ev[SMF_MAX_STREAMS];	/* CUevent, kept opaque here */
};

/* `split_min`: copies of at least this many bytes are cut into one piece
 * per stream (0 = never split). */
int smf_engine_open(int nstreams, uint64_t split_min, struct smf_engine **out);
/* Stops accepting work, waits for what is queued, frees the streams. */
void smf_engine_close(struct smf_engine *e);

int smf_copy_start(struct smf_engine *e, void *dst, const void *src, size_t n,
		   struct smf_copy *op);
/* *done = 1 once every piece landed; the events then go back to the pool. */
int smf_copy_test(struct smf_engine *e, struct smf_copy *op, int *done);
/* A copy that has fully landed when it returns, between any two addresses
 * the driver knows (one side a plain host buffer, the other GPU memory).
 * It runs on the engine's own non-blocking stream: cuMemcpy would use the
 * legacy stream, which waits for every blocking stream of the context,
 * NCCL's kernel included, and a pageable-to-device cuMemcpy may return
 * before the data reached the GPU. */
int smf_copy_sync(struct smf_engine *e, void *dst, const void *src, size_t n);

/* Forgets an unfinished copy (connection teardown after a failure). */
void smf_copy_abandon(struct smf_engine *e, struct smf_copy *op);

#endif
