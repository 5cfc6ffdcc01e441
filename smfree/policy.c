/* Tuner policy: how many CTAs NCCL may use for a collective.
 *
 * Without NCCL_PASS_SM the answer is always 0 (NCCL decides).  With it,
 * the cap is the configured channel count, by default the one with the best
 * measured makespan beside a GEMM (8 of 2/4/8/16 on 2 x H200, 128 MiB
 * all_gather and all_reduce; bench/results/overlap.md).  The cap does not
 * depend on size or rank count yet: only those two collectives at one size
 * on 2 GPUs were measured. */
#include "smfree.h"

int smfree_channels(const struct smfree_policy *p, int coll, size_t bytes, size_t nranks,
		    size_t nnodes)
{
	(void)coll;
	(void)bytes;
	(void)nnodes;
	if (!p->pass_sm || nranks < 2)
		return 0;
	return p->channels;
}
