/* The tuner tables exported by the built library: they must keep every
 * cost-table cell as NCCL filled it (never revive a -1 cell, never pick an
 * algorithm or protocol) and touch only the channel count, and only when
 * NCCL_PASS_SM=1.  Run three times by meson: with the default environment
 * (EXPECT_CHANNELS=0) and with NCCL_PASS_SM=1 (EXPECT_CHANNELS: the cap,
 * 8 by default or NCCL_SYMMEM_PASS_SM_CHANNELS=5). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

static void *lib;
static int expect_channels;

/* What the tuner must answer for a collective of this size: nothing
 * without NCCL_PASS_SM, else one channel per MiB up to the cap, as NCCL
 * would open them under the plugin's NCCL_THREAD_THRESHOLDS. */
static int expected(size_t bytes)
{
	size_t mib = bytes >> 20;

	if (!expect_channels)
		return 0;
	if (mib < 1)
		return 1;
	return mib < (size_t)expect_channels ? (int)mib : expect_channels;
}

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
			assert_int_equal(nch, expected(bytes));
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
	assert_int_equal(t4->getCollInfo(ctx, ncclFuncAllGather, 64 << 20, 1, (float **)(void *)&rows,
					 NCCL_NUM_ALGORITHMS, NCCL_NUM_PROTOCOLS, 1, &nch), ncclSuccess);
	assert_memory_equal(table, orig, sizeof(table));
	assert_int_equal(nch, expected(64 << 20));
	assert_int_equal(t4->destroy(ctx), ncclSuccess);

	nch = 0;
	assert_int_equal(t3->init(4, 1, harness_logger, &ctx), ncclSuccess);
	assert_int_equal(t3->getCollInfo(ctx, ncclFuncReduceScatter, 3 << 20, 1, (float **)(void *)&rows,
					 NCCL_NUM_ALGORITHMS, NCCL_NUM_PROTOCOLS, &nch), ncclSuccess);
	assert_memory_equal(table, orig, sizeof(table));
	assert_int_equal(nch, expected(3 << 20));
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

/* Every decision over 1-64 ranks on 1-8 nodes, each collective and a size
 * sweep, one line each, through the v5 table as NCCL 2.28 calls it. */
static void decisions(FILE *out)
{
	static const size_t ranks[] = { 1, 2, 3, 4, 8, 16, 32, 64 };
	static const size_t nodes[] = { 1, 2, 4, 8 };
	static const size_t sizes[] = { 0, 8, 65536, 1048576, 4194304, 67108864, 1073741824 };
	static const char *const colls[] = { "broadcast", "reduce", "all_gather", "reduce_scatter",
					     "all_reduce" };
	ncclTuner_v5_t *t = dlsym(lib, "ncclTunerPlugin_v5");

	for (size_t n = 0; n < sizeof(nodes) / sizeof(nodes[0]); n++) {
		for (size_t r = 0; r < sizeof(ranks) / sizeof(ranks[0]); r++) {
			void *ctx = NULL;

			if (ranks[r] < nodes[n] || ranks[r] % nodes[n])
				continue;
			if (t->init(&ctx, 1, ranks[r], nodes[n], harness_logger, NULL, NULL) != ncclSuccess) {
				fprintf(out, "%zu ranks %zu nodes: init failed\n", ranks[r], nodes[n]);
				continue;
			}
			for (int coll = 0; coll < 5; coll++) {
				for (size_t b = 0; b < sizeof(sizes) / sizeof(sizes[0]); b++) {
					float table[NCCL_NUM_ALGORITHMS][NCCL_NUM_PROTOCOLS];
					float orig[NCCL_NUM_ALGORITHMS][NCCL_NUM_PROTOCOLS];
					float *rows = &table[0][0];
					int nch = 0;
					ncclResult_t rc;

					fill_table(table);
					memcpy(orig, table, sizeof(table));
					rc = t->getCollInfo(ctx, (ncclFunc_t)coll, sizes[b], 1,
							    (float **)(void *)&rows, NCCL_NUM_ALGORITHMS,
							    NCCL_NUM_PROTOCOLS, 0, &nch);
					fprintf(out, "%zu ranks %zu nodes %s %zu B: rc %d channels %d, cost "
						"table %s\n", ranks[r], nodes[n], colls[coll], sizes[b],
						(int)rc, nch,
						memcmp(table, orig, sizeof(table)) ? "CHANGED" : "kept");
				}
			}
			t->finalize(ctx);
		}
	}
}

/* The decisions match the reviewed golden file named by $GOLDEN
 * (test/mp/golden/; scripts/tuner_golden.sh rewrites them after a policy
 * change, and the diff is what a reviewer reads). */
static void golden(void **state)
{
	const char *path = getenv("GOLDEN");
	char *got = NULL, *want = NULL;
	size_t got_len = 0, want_len = 0;
	FILE *g, *w;

	(void)state;
	assert_non_null(path);
	g = open_memstream(&got, &got_len);
	assert_non_null(g);
	decisions(g);
	fclose(g);
	w = fopen(path, "r");
	if (!w)
		fail_msg("cannot read golden file %s", path);
	want = malloc(got_len + 2);
	assert_non_null(want);
	want_len = fread(want, 1, got_len + 1, w);
	fclose(w);
	if (want_len != got_len || memcmp(want, got, got_len)) {
		size_t i = 0;

		while (i < got_len && i < want_len && got[i] == want[i])
			i++;
		fail_msg("tuner decisions differ from %s at byte %zu: got \"%.80s\"", path, i,
			 got + (i > 20 ? i - 20 : 0));
	}
	free(got);
	free(want);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(check_v5),
		cmocka_unit_test(check_v4_v3),
		cmocka_unit_test(single_rank_untouched),
		cmocka_unit_test(golden),
	};
	const char *e = getenv("EXPECT_CHANNELS");

	lib = harness_open();
	if (!lib)
		return 1;
	if (argc > 1 && !strcmp(argv[1], "--print")) {
		decisions(stdout);
		return 0;
	}
	if (!e)
		return 1;
	expect_channels = atoi(e);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
