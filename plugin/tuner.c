/* The tuner that ships in the same library (NCCL finds it there when
 * NCCL_TUNER_PLUGIN is unset).  It never edits the cost table, so it
 * cannot revive a combination NCCL ruled out (a -1 cell, or one excluded by
 * NCCL_ALGO / NCCL_PROTO); its only lever is the channel count, and only
 * under NCCL_PASS_SM=1. */
#include <stdlib.h>

#include "config.h"
#include "log.h"
#include "nccl_abi.h"
#include "registry.h"
#include "smfree.h"

#define EXPORT __attribute__((visibility("default")))

struct tuner_ctx {
	struct smfree_policy policy;
	size_t nranks;
	size_t nnodes;
};

static ncclResult_t tuner_start(size_t nRanks, size_t nNodes, ncclDebugLogger_t logFunction,
				void **ctx)
{
	const struct config *cfg;
	struct tuner_ctx *t;

	log_set_logger(logFunction);
	*ctx = NULL;
	cfg = config_get();
	if (!cfg) {
		LOG_WARN("TUNER/symmem: %s", config_error());
		return ncclInvalidUsage;
	}
	t = calloc(1, sizeof(*t));
	if (!t || registry_add(t, OBJ_TUNER)) {
		free(t);
		LOG_WARN("TUNER/symmem: out of memory in init");
		return ncclSystemError;
	}
	t->policy.pass_sm = cfg->pass_sm;
	t->policy.channels = cfg->pass_sm_channels;
	t->nranks = nRanks;
	t->nnodes = nNodes;
	if (cfg->pass_sm)
		log_msg(NCCL_LOG_INFO, NCCL_INIT | NCCL_TUNING, __FILE__, __LINE__,
			"TUNER/symmem NCCL_PASS_SM=1: collectives capped at %d channel(s) "
			"(%zu ranks, %zu nodes)", t->policy.channels, nRanks, nNodes);
	*ctx = t;
	return ncclSuccess;
}

static ncclResult_t tuner_v5_init(void **ctx, uint64_t commId, size_t nRanks, size_t nNodes,
				  ncclDebugLogger_t logFunction, ncclNvlDomainInfo_v5_t *nvl,
				  ncclTunerConstants_v5_t *constants)
{
	(void)commId;
	(void)nvl;
	(void)constants;	/* NCCL's model constants stay as they are */
	return tuner_start(nRanks, nNodes, logFunction, ctx);
}

static ncclResult_t tuner_v4_init(size_t nRanks, size_t nNodes, ncclDebugLogger_t logFunction,
				  void **ctx)
{
	return tuner_start(nRanks, nNodes, logFunction, ctx);
}

static ncclResult_t tuner_get_coll_info(void *ctx, ncclFunc_t collType, size_t nBytes,
					int numPipeOps, float **collCostTable, int numAlgo,
					int numProto, int regBuff, int *nChannels)
{
	struct tuner_ctx *t = ctx;
	int n;

	(void)numPipeOps;
	(void)collCostTable;
	(void)numAlgo;
	(void)numProto;
	(void)regBuff;
	if (!t || !nChannels)
		return ncclSuccess;	/* an error here would fail the collective */
	n = smfree_channels(&t->policy, (int)collType, nBytes, t->nranks, t->nnodes);
	if (n > 0)
		*nChannels = n;
	return ncclSuccess;
}

static ncclResult_t tuner_v3_get_coll_info(void *ctx, ncclFunc_t collType, size_t nBytes,
					   int numPipeOps, float **collCostTable, int numAlgo,
					   int numProto, int *nChannels)
{
	return tuner_get_coll_info(ctx, collType, nBytes, numPipeOps, collCostTable, numAlgo,
				   numProto, 0, nChannels);
}

static ncclResult_t tuner_finish(void *ctx)
{
	if (!ctx)
		return ncclSuccess;
	if (registry_take(ctx, OBJ_TUNER, "tuner finalize"))
		return ncclInternalError;
	free(ctx);
	return ncclSuccess;
}

EXPORT ncclTuner_v5_t ncclTunerPlugin_v5 = {
	.name = "symmem",
	.init = tuner_v5_init,
	.getCollInfo = tuner_get_coll_info,
	.finalize = tuner_finish,
};

EXPORT ncclTuner_v4_t ncclTunerPlugin_v4 = {
	.name = "symmem",
	.init = tuner_v4_init,
	.getCollInfo = tuner_get_coll_info,
	.destroy = tuner_finish,
};

EXPORT ncclTuner_v3_t ncclTunerPlugin_v3 = {
	.name = "symmem",
	.init = tuner_v4_init,
	.getCollInfo = tuner_v3_get_coll_info,
	.destroy = tuner_finish,
};
