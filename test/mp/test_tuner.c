/* The tuner tables exported by the built library: they must keep every
 * cost-table cell as NCCL filled it (never revive a -1 cell, never pick an
 * algorithm or protocol) and touch only the channel count, and only when
 * NCCL_PASS_SM=1.  Run twice by meson: with the default environment
 * (EXPECT_CHANNELS=0) and with NCCL_PASS_SM=1 (EXPECT_CHANNELS=2). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

static void *lib;
static int expect_channels;

static void fill_table(float t[NCCL_NUM_ALGORITHMS][NCCL_NUM_PROTOCOLS])
{
	for (int a = 0; a < NCCL_NUM_ALGORITHMS; a++)
		for (int p = 0; p < NCCL_NUM_PROTOCOLS; p++)
			t[a][p] = (a + p) % 3 == 0 ? NCCL_ALGO_PROTO_IGNORE : 10.0f * (float)(a + 1) + (float)p;
}

static void check_v5(void **state)
{
	ncclTuner_v5_t *t = dlsym(lib, "ncclTunerPlugin_v5");
	ncclTunerConstants_v5_t consts, before;
	float table[NCCL_NUM_ALGORITHMS][NCCL_NUM_PROTOCOLS], orig[NCCL_NUM_ALGORITHMS][NCCL_NUM_PROTOCOLS];
	float *rows = &table[0][0];
	void *ctx = NULL;

	(void)state;
	assert_non_null(t);
	for (size_t i = 0; i < sizeof(consts) / sizeof(double); i++)
		((double *)&consts)[i] = (double)i * 0.5 + 1;
	before = consts;
	assert_int_equal(t->init(&ctx, 7, 8, 2, harness_logger, NULL, &consts), ncclSuccess);
	assert_non_null(ctx);
	assert_memory_equal(&consts, &before, sizeof(consts));
	for (int coll = ncclFuncBroadcast; coll <= ncclFuncAllReduce; coll++) {
		for (size_t bytes = 1; bytes <= (1ull << 32); bytes <<= 4) {
			int nch = 0;

			fill_table(table);
			memcpy(orig, table, sizeof(table));
			assert_int_equal(t->getCollInfo(ctx, (ncclFunc_t)coll, bytes, 1, (float **)(void *)&rows,
							 NCCL_NUM_ALGORITHMS, NCCL_NUM_PROTOCOLS, 0, &nch),
					 ncclSuccess);
			assert_memory_equal(table, orig, sizeof(table));
			assert_int_equal(nch, expect_channels);
		}
	}
	assert_int_equal(t->finalize(ctx), ncclSuccess);
	assert_int_equal(t->finalize(ctx), ncclInternalError);	/* twice */
}

static void check_v4_v3(void **state)
{
	ncclTuner_v4_t *t4 = dlsym(lib, "ncclTunerPlugin_v4");
	ncclTuner_v3_t *t3 = dlsym(lib, "ncclTunerPlugin_v3");
	float table[NCCL_NUM_ALGORITHMS][NCCL_NUM_PROTOCOLS], orig[NCCL_NUM_ALGORITHMS][NCCL_NUM_PROTOCOLS];
	float *rows = &table[0][0];
	void *ctx = NULL;
	int nch = 0;

	(void)state;
	assert_non_null(t4);
	assert_non_null(t3);
	fill_table(table);
	memcpy(orig, table, sizeof(table));
	assert_int_equal(t4->init(4, 1, harness_logger, &ctx), ncclSuccess);	/* ctx last in v4 */
	assert_int_equal(t4->getCollInfo(ctx, ncclFuncAllGather, 1 << 20, 1, (float **)(void *)&rows,
					 NCCL_NUM_ALGORITHMS, NCCL_NUM_PROTOCOLS, 1, &nch), ncclSuccess);
	assert_memory_equal(table, orig, sizeof(table));
	assert_int_equal(nch, expect_channels);
	assert_int_equal(t4->destroy(ctx), ncclSuccess);

	nch = 0;
	assert_int_equal(t3->init(4, 1, harness_logger, &ctx), ncclSuccess);
	assert_int_equal(t3->getCollInfo(ctx, ncclFuncReduceScatter, 1 << 20, 1, (float **)(void *)&rows,
					 NCCL_NUM_ALGORITHMS, NCCL_NUM_PROTOCOLS, &nch), ncclSuccess);
	assert_memory_equal(table, orig, sizeof(table));
	assert_int_equal(nch, expect_channels);
	assert_int_equal(t3->destroy(ctx), ncclSuccess);
}

/* A single rank has nobody to talk to: nothing to cap. */
static void single_rank_untouched(void **state)
{
	ncclTuner_v4_t *t4 = dlsym(lib, "ncclTunerPlugin_v4");
	float table[NCCL_NUM_ALGORITHMS][NCCL_NUM_PROTOCOLS];
	float *rows = &table[0][0];
	void *ctx = NULL;
	int nch = 0;

	(void)state;
	fill_table(table);
	assert_int_equal(t4->init(1, 1, harness_logger, &ctx), ncclSuccess);
	assert_int_equal(t4->getCollInfo(ctx, ncclFuncAllReduce, 1 << 20, 1, (float **)(void *)&rows,
					 NCCL_NUM_ALGORITHMS, NCCL_NUM_PROTOCOLS, 0, &nch), ncclSuccess);
	assert_int_equal(nch, 0);
	assert_int_equal(t4->destroy(ctx), ncclSuccess);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(check_v5),
		cmocka_unit_test(check_v4_v3),
		cmocka_unit_test(single_rank_untouched),
	};
	const char *e = getenv("EXPECT_CHANNELS");

	lib = harness_open();
	if (!lib || !e)
		return 1;
	expect_channels = atoi(e);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
