/* The tuner that ships in the same library (NCCL finds it there when
 * NCCL_TUNER_PLUGIN is unset), exported as tuner v2 to v7, each table a
 * thin adapter over the one implementation below.  Three levers, all from
 * smfree/policy.c:
 * - the channel count, only under NCCL_PASS_SM=1;
 * - on the intra-host copy-engine path (config_ll128_chunk()), Ring LL128 in
 *   place of the Ring Simple NCCL's model picked for a mid-size all_gather,
 *   reduce_scatter or all_reduce;
 * - between hosts (config_ll_max()), Simple in place of the LL NCCL's model
 *   picked for an all_reduce or broadcast past NCCL_SYMMEM_LL_MAX.
 * It never writes a cell NCCL ruled out (-1: impossible, or excluded by
 * NCCL_ALGO / NCCL_PROTO), never changes the algorithm, and a NCCL_PROTO
 * the user set leaves every protocol choice to NCCL. */
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

/* `hinted`: NCCL gives the net plugin its connection hints (2.28 on,
 * which asks for tuner v5 first), so the plugin can decline ring
 * registrations; older NCCL keeps them all. */
static ncclResult_t tuner_start(size_t nRanks, size_t nNodes, ncclDebugLogger_t logFunction,
				int hinted, void **ctx)
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
	t->policy.ll128_chunk = config_ll128_chunk(cfg);
	t->policy.ring_channels = config_ring_channels(cfg);
	t->policy.ll_max = config_ll_max(cfg);
	t->policy.ring_register = !hinted || config_coll_register(cfg);
	t->nranks = nRanks;
	t->nnodes = nNodes;
	if (cfg->pass_sm)
		log_msg(NCCL_LOG_INFO, NCCL_INIT | NCCL_TUNING, __FILE__, __LINE__,
			"TUNER/symmem NCCL_PASS_SM=1: collectives capped at %d channel(s) "
			"(%zu ranks, %zu nodes)", t->policy.channels, nRanks, nNodes);
	if (t->policy.ll128_chunk && nRanks > 1)
		log_msg(NCCL_LOG_INFO, NCCL_INIT | NCCL_TUNING, __FILE__, __LINE__,
			"TUNER/symmem: ring all_gather, reduce_scatter and all_reduce with at most "
			"%llu bytes per rank and channel (%d channels) run LL128 where NCCL's model "
			"picks Simple (NCCL_SYMMEM_LL128_CHUNK, copy-engine path)",
			(unsigned long long)t->policy.ll128_chunk, t->policy.ring_channels);
	if (t->policy.ll_max && nNodes > 1)
		log_msg(NCCL_LOG_INFO, NCCL_INIT | NCCL_TUNING, __FILE__, __LINE__,
			"TUNER/symmem: all_reduce and broadcast of more than %llu bytes run Simple "
			"where NCCL's model picks LL (NCCL_SYMMEM_LL_MAX, %zu nodes)",
			(unsigned long long)t->policy.ll_max, nNodes);
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
	return tuner_start(nRanks, nNodes, logFunction, 1, ctx);
}

/* v7: v5's init with a fifth compute-capability row in the constants,
 * which stay NCCL's as well. */
static ncclResult_t tuner_v7_init(void **ctx, uint64_t commId, size_t nRanks, size_t nNodes,
				  ncclDebugLogger_t logFunction, ncclNvlDomainInfo_v5_t *nvl,
				  ncclTunerConstants_v7_t *constants)
{
	(void)commId;
	(void)nvl;
	(void)constants;
	return tuner_start(nRanks, nNodes, logFunction, 1, ctx);
}

static ncclResult_t tuner_v4_init(size_t nRanks, size_t nNodes, ncclDebugLogger_t logFunction,
				  void **ctx)
{
	return tuner_start(nRanks, nNodes, logFunction, 0, ctx);
}

/* NCCL's cost table: a row-major float[algorithm][protocol] passed as
 * float **.  NCCL takes its smallest cell that is not negative. */
typedef float cost_row[NCCL_NUM_PROTOCOLS];

/* The table as rows, with NCCL's pick in *algo, *proto; NULL for a layout
 * this code was not written for or a table with no open cell. */
static cost_row *cheapest(float **cost_table, int nalgo, int nproto, int *algo, int *proto)
{
	cost_row *cost = (cost_row *)(void *)cost_table;

	*algo = -1;
	*proto = -1;
	if (!cost_table || nalgo != NCCL_NUM_ALGORITHMS || nproto != NCCL_NUM_PROTOCOLS)
		return NULL;
	for (int a = 0; a < nalgo; a++) {
		for (int p = 0; p < nproto; p++) {
			if (cost[a][p] < 0.0f)
				continue;
			if (*algo < 0 || cost[a][p] < cost[*algo][*proto]) {
				*algo = a;
				*proto = p;
			}
		}
	}
	return *algo < 0 ? NULL : cost;
}

/* Makes NCCL take Ring LL128 when it would take Ring Simple and LL128 is
 * open to it; any other choice stays. */
static void prefer_ring_ll128(float **cost_table, int nalgo, int nproto)
{
	int a, p;
	cost_row *cost = cheapest(cost_table, nalgo, nproto, &a, &p);

	if (!cost || a != NCCL_ALGO_RING || p != NCCL_PROTO_SIMPLE)
		return;
	if (cost[NCCL_ALGO_RING][NCCL_PROTO_LL128] < 0.0f)
		return;
	cost[NCCL_ALGO_RING][NCCL_PROTO_LL128] = 0.0f;
}

/* Makes NCCL take Simple when it would take LL, with the same algorithm,
 * if Simple is open to it; any other choice stays. */
static void prefer_simple_over_ll(float **cost_table, int nalgo, int nproto)
{
	int a, p;
	cost_row *cost = cheapest(cost_table, nalgo, nproto, &a, &p);

	if (!cost || p != NCCL_PROTO_LL || cost[a][NCCL_PROTO_SIMPLE] < 0.0f)
		return;
	cost[a][NCCL_PROTO_SIMPLE] = 0.0f;
}

static ncclResult_t tuner_get_coll_info(void *ctx, ncclFunc_t collType, size_t nBytes,
					int numPipeOps, float **collCostTable, int numAlgo,
					int numProto, int regBuff, int *nChannels)
{
	struct tuner_ctx *t = ctx;
	int n;

	(void)numPipeOps;
	if (!t || !nChannels)
		return ncclSuccess;	/* an error here would fail the collective */
	if (smfree_ring_ll128(&t->policy, (int)collType, nBytes, t->nranks, regBuff))
		prefer_ring_ll128(collCostTable, numAlgo, numProto);
	if (smfree_leave_ll(&t->policy, (int)collType, nBytes, t->nnodes))
		prefer_simple_over_ll(collCostTable, numAlgo, numProto);
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

/* v2 (NCCL 2.21): called before NCCL's model runs, with no cost table, and
 * answering the algorithm and protocol outright.  The LL128 and LL levers
 * only ever move NCCL's own pick to a cell NCCL left open; with no table
 * there is neither, and an answer here would bypass NCCL_ALGO, NCCL_PROTO
 * and what the communicator can run.  So *algorithm and *protocol stay
 * NCCL_ALGO_UNDEF / NCCL_PROTO_UNDEF (NCCL's model picks), and only the
 * NCCL_PASS_SM channel cap applies, as in every newer table. */
static ncclResult_t tuner_v2_get_coll_info(void *ctx, ncclFunc_t collType, size_t nBytes,
					   int collNetSupport, int nvlsSupport, int numPipeOps,
					   int *algorithm, int *protocol, int *nChannels)
{
	(void)collNetSupport;
	(void)nvlsSupport;
	(void)algorithm;
	(void)protocol;
	return tuner_get_coll_info(ctx, collType, nBytes, numPipeOps, NULL, 0, 0, 0, nChannels);
}

static ncclResult_t tuner_finish(void *ctx)
{
	if (!ctx)
		return ncclSuccess;
	if (registry_take(ctx, OBJ_TUNER, "tuner finalize"))
		return ncclInternalError;
	registry_retire(ctx);
	return ncclSuccess;
}

/* getChunkSize (v6, v7) stays NULL: nothing measured says a chunk size
 * other than NCCL's would serve the plugin's paths.  NULL is how NCCL 2.30
 * runs every v2-v5 tuner: its chunk size stays, with no call.  A function
 * that kept the value would give the same chunk, but cost a call per
 * collective, and any error it returned would fail the collective. */
EXPORT ncclTuner_v7_t ncclTunerPlugin_v7 = {
	.name = "symmem",
	.init = tuner_v7_init,
	.getCollInfo = tuner_get_coll_info,
	.finalize = tuner_finish,
	.getChunkSize = NULL,
};

EXPORT ncclTuner_v6_t ncclTunerPlugin_v6 = {
	.name = "symmem",
	.init = tuner_v5_init,
	.getCollInfo = tuner_get_coll_info,
	.finalize = tuner_finish,
	.getChunkSize = NULL,
};

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

EXPORT ncclTuner_v2_t ncclTunerPlugin_v2 = {
	.name = "symmem",
	.init = tuner_v4_init,
	.getCollInfo = tuner_v2_get_coll_info,
	.destroy = tuner_finish,
};
