/* Tuner policy: how many CTAs NCCL may use for a collective.
 *
 * Without NCCL_PASS_SM the answer is always 0 (NCCL decides).  With it,
 * the cap is the configured channel count, by default the one with the best
 * measured makespan beside a GEMM (8 of 2/4/8/16 on 2 x H200, 128 MiB
 * all_gather and all_reduce; bench/results/overlap.md).  Below
 * cap x SMFREE_CHANNEL_BYTES it is one channel per SMFREE_CHANNEL_BYTES, as
 * NCCL itself would choose under the plugin's NCCL_THREAD_THRESHOLDS: the
 * tuner's count replaces NCCL's, so a flat cap would give a 4 KiB
 * collective 8 channels where NCCL opens 1. */
#include "smfree.h"

int smfree_channels(const struct smfree_policy *p, int coll, size_t bytes, size_t nranks,
		    size_t nnodes)
{
	size_t by_size;

	(void)coll;
	(void)nnodes;
	if (!p->pass_sm || nranks < 2)
		return 0;
	by_size = bytes / SMFREE_CHANNEL_BYTES;
	if (by_size < 1)
		return 1;
	if (by_size < (size_t)p->channels)
		return (int)by_size;
	return p->channels;
}
