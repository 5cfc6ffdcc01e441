/* Tuner policy: how many CTAs NCCL may use for a collective, and which
 * ring protocol suits the copy engines.
 *
 * Channels: without NCCL_PASS_SM the answer is always 0 (NCCL decides).
 * With it, the cap is the configured channel count, by default the one
 * with the best measured makespan beside a GEMM (16: level with 8 on
 * 128 MiB batches, and a batch of 1 GiB all_reduces 1.00 x native's
 * makespan against 8's 1.54 x on 4 x H200; bench/results/overlap.md).
 * Below cap x SMFREE_CHANNEL_BYTES it is one channel per
 * SMFREE_CHANNEL_BYTES, as NCCL itself would choose under the plugin's
 * NCCL_THREAD_THRESHOLDS: the tuner's count replaces NCCL's, so a flat cap
 * would give a 4 KiB collective 16 channels where NCCL opens 1.
 *
 * Protocol: every Simple step is a copy the receiving proxy must see land
 * and pass on to its GPU before the next hop starts; LL128 lines carry
 * their own flags, so the receiving kernel reads them as they land.  On
 * the copy engines that made ring collectives up to 2 x faster while each
 * rank's share per channel stayed within 512 KiB, and slower past it, on
 * 2, 3 and 4 GPUs and with 8 or 32 channels (bench/results/mid-size.md).
 * NCCL's model, made for NICs, moves to Simple at 2-16 MiB.
 *
 * Between hosts the plugin leaves the protocols to NCCL (no NCCL_PROTO),
 * and NCCL's model keeps all_reduce and broadcast on LL up to 1 MiB and
 * beyond.  LL's send buffers are host memory its kernel writes line by
 * line; through the plugin Simple was 1.3-4 x faster from 128 KiB and LL
 * faster from 32 KiB down (2 x 2 H200 posed as two hosts, over TCP and
 * over the copy engines; all_gather and reduce_scatter about even;
 * bench/results/hosts.md). */
#include "smfree.h"

/* The NCCL_PASS_SM cap, never above the channels NCCL has (a user's
 * NCCL_MAX_CTAS of 4 stays 4). */
static int cap(const struct smfree_policy *p)
{
	if (p->ring_channels > 0 && p->ring_channels < p->channels)
		return p->ring_channels;
	return p->channels;
}

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
	if (by_size < (size_t)cap(p))
		return (int)by_size;
	return cap(p);
}

int smfree_ring_ll128(const struct smfree_policy *p, int coll, size_t bytes, size_t nranks,
		      int regbuf)
{
	uint64_t channels = p->pass_sm ? (uint64_t)cap(p) : (uint64_t)p->ring_channels;

	if (channels < 1)
		channels = SMFREE_RING_CHANNELS;	/* a policy without a ring count */
	/* Registered buffers go zero-copy with Simple, unless the plugin
	 * declines their registration on rings. */
	if (!p->ll128_chunk || nranks < 2 || (regbuf && p->ring_register))
		return 0;
	/* Broadcast and reduce were faster with Simple at almost every size
	 * (bench/results/small-channels.md, section 2). */
	if (coll != SMFREE_ALLGATHER && coll != SMFREE_REDUCESCATTER && coll != SMFREE_ALLREDUCE)
		return 0;
	/* Below channels x SMFREE_CHANNEL_BYTES NCCL opens fewer channels,
	 * but the share per channel is then SMFREE_CHANNEL_BYTES / nranks,
	 * below any chunk worth setting. */
	return (uint64_t)bytes / nranks / channels <= p->ll128_chunk;
}

int smfree_leave_ll(const struct smfree_policy *p, int coll, size_t bytes, size_t nnodes)
{
	if (!p->ll_max || nnodes < 2)
		return 0;
	if (coll != SMFREE_ALLREDUCE && coll != SMFREE_BROADCAST)
		return 0;
	return (uint64_t)bytes > p->ll_max;
}
