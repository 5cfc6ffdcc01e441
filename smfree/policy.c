/* Tuner policy: how many CTAs NCCL may use for a collective.
 *
 * Without NCCL_PASS_SM the answer is always 0 (NCCL decides).  With it,
 * the cap is the configured channel count; the copy-engine data path that
 * makes a low cap pay off is not built yet, so this stays deliberately
 * simple until it can be measured. */
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
