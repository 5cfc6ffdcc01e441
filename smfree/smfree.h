/* smfree: the SM-saving side of the product.  For now only the tuner policy
 * lives here; the copy-engine engine joins it with the GPU data path. */
#ifndef SYMMEM_SMFREE_H
#define SYMMEM_SMFREE_H

#include <stddef.h>

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

#endif
