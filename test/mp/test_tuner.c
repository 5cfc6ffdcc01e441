/* The tuner tables exported by the built library.  They must never revive
 * a -1 cell or change the algorithm.  The channel count changes only with
 * NCCL_PASS_SM=1 (EXPECT_CHANNELS: the cap, 8 by default or
 * NCCL_SYMMEM_PASS_SM_CHANNELS=5; 0 without it).  The protocol changes only
 * on the intra-host path (NCCL_P2P_DISABLE=1) with NCCL_PROTO left to
 * NCCL: Ring Simple becomes Ring LL128 for all_gather, reduce_scatter and
 * all_reduce with at most EXPECT_LL128 bytes per rank and channel (0: the
 * table stays as NCCL filled it).  Both count NCCL's ring channels as
 * EXPECT_RING_CHANNELS (32 unless a user's NCCL_MAX_CTAS or the like
 * lowers them), and the cap never exceeds them.  Between nodes, with P2P
 * on and NCCL_PROTO left to NCCL, LL becomes Simple of the same algorithm
 * for all_reduce and broadcast larger than EXPECT_LL_MAX bytes (0: never).
 * Meson runs it in each of these environments. */
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
static size_t expect_ll128;
static size_t expect_ll_max;
static int expect_ring = 32;
/* EXPECT_RING_REGISTER=1: the plugin keeps user buffers registered on rings
 * (NCCL_SYMMEM_COLL_REGISTER), so registered collectives stay Simple. */
static int expect_ring_register;

/* The NCCL_PASS_SM cap as the tuner applies it. */
static int expect_cap(void)
{
	return expect_channels < expect_ring ? expect_channels : expect_ring;
}

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
	return mib < (size_t)expect_cap() ? (int)mib : expect_cap();
}

/* What *nChannels holds before the call: a value no rule produces, so a
 * tuner that writes it without cause (a 0 meaning "NCCL decides") shows. */
#define NCH_BEFORE 77

/* *nChannels after the call: the answer, or NCH_BEFORE left alone. */
static int expected_nch(size_t bytes)
{
	int n = expected(bytes);

	return n ? n : NCH_BEFORE;
}

/* Whether the tuner must turn Ring Simple into Ring LL128: the rule of
 * smfree_ring_ll128(), over the channels NCCL runs on (its ring channels,
 * or the NCCL_PASS_SM cap). */
static int expected_ll128(int coll, size_t bytes, size_t nranks, int regbuf)
{
	size_t channels = expect_channels ? (size_t)expect_cap() : (size_t)expect_ring;

	if (!expect_ll128 || nranks < 2 || (regbuf && expect_ring_register))
		return 0;
	if (coll != ncclFuncAllGather && coll != ncclFuncReduceScatter && coll != ncclFuncAllReduce)
		return 0;
	return bytes / nranks / channels <= expect_ll128;
}

static void fill_table(float t[NCCL_NUM_ALGORITHMS][NCCL_NUM_PROTOCOLS])
{
	for (int a = 0; a < NCCL_NUM_ALGORITHMS; a++)
		for (int p = 0; p < NCCL_NUM_PROTOCOLS; p++)
			t[a][p] = (a + p) % 3 == 0 ? NCCL_ALGO_PROTO_IGNORE : 10.0f * (float)(a + 1) + (float)p;
}

/* A table as NCCL fills it on the plugin's path for a mid-size
 * collective: LL off (the plugin's NCCL_PROTO=^LL), PAT off, Ring Simple
 * the cheapest, Ring LL128 open.  `ll128` < 0 closes Ring LL128 as well;
 * `tree_first` makes Tree Simple the cheapest instead. */
static void fill_ring_table(float t[NCCL_NUM_ALGORITHMS][NCCL_NUM_PROTOCOLS], float ll128,
			    int tree_first)
{
	for (int a = 0; a < NCCL_NUM_ALGORITHMS; a++)
		for (int p = 0; p < NCCL_NUM_PROTOCOLS; p++)
			t[a][p] = NCCL_ALGO_PROTO_IGNORE;
	t[NCCL_ALGO_TREE][NCCL_PROTO_LL128] = 260.0f;
	t[NCCL_ALGO_TREE][NCCL_PROTO_SIMPLE] = tree_first ? 150.0f : 240.0f;
	t[NCCL_ALGO_RING][NCCL_PROTO_LL128] = ll128;
	t[NCCL_ALGO_RING][NCCL_PROTO_SIMPLE] = 180.0f;
}

/* A table as NCCL fills it between hosts for a mid-size collective: Ring
 * LL the cheapest, Ring Simple `simple` (< 0: closed), LL128 closed (NCCL
 * keeps it off on a path through the network at the CPU); `tree_first`
 * makes Tree LL the cheapest instead. */
static void fill_ll_table(float t[NCCL_NUM_ALGORITHMS][NCCL_NUM_PROTOCOLS], float simple,
			  int tree_first)
{
	for (int a = 0; a < NCCL_NUM_ALGORITHMS; a++)
		for (int p = 0; p < NCCL_NUM_PROTOCOLS; p++)
			t[a][p] = NCCL_ALGO_PROTO_IGNORE;
	t[NCCL_ALGO_TREE][NCCL_PROTO_LL] = tree_first ? 50.0f : 200.0f;
	t[NCCL_ALGO_TREE][NCCL_PROTO_SIMPLE] = 250.0f;
	t[NCCL_ALGO_RING][NCCL_PROTO_LL] = 100.0f;
	t[NCCL_ALGO_RING][NCCL_PROTO_SIMPLE] = simple;
}

/* Whether the tuner must move an LL choice to Simple: the rule of
 * smfree_leave_ll(). */
static int expected_leave_ll(int coll, size_t bytes, size_t nnodes)
{
	if (!expect_ll_max || nnodes < 2)
		return 0;
	if (coll != ncclFuncAllReduce && coll != ncclFuncBroadcast)
		return 0;
	return bytes > expect_ll_max;
}

/* The cell NCCL takes: the smallest that is not negative. */
static void pick(float t[NCCL_NUM_ALGORITHMS][NCCL_NUM_PROTOCOLS], int *algo, int *proto)
{
	*algo = -1;
	*proto = -1;
	for (int a = 0; a < NCCL_NUM_ALGORITHMS; a++) {
		for (int p = 0; p < NCCL_NUM_PROTOCOLS; p++) {
			if (t[a][p] < 0.0f)
				continue;
			if (*algo < 0 || t[a][p] < t[*algo][*proto]) {
				*algo = a;
				*proto = p;
			}
		}
	}
}

static void check_v5(void **state)
{
	ncclTuner_v5_t *t = dlsym(lib, "ncclTunerPlugin_v5");
	ncclTunerConstants_v5_t consts, before;
	float table[NCCL_NUM_ALGORITHMS][NCCL_NUM_PROTOCOLS], orig[NCCL_NUM_ALGORITHMS][NCCL_NUM_PROTOCOLS];
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
			int nch = NCH_BEFORE;

			fill_table(table);
			memcpy(orig, table, sizeof(table));
			assert_int_equal(t->getCollInfo(ctx, (ncclFunc_t)coll, bytes, 1, (float **)(void *)table,
							 NCCL_NUM_ALGORITHMS, NCCL_NUM_PROTOCOLS, 0, &nch),
					 ncclSuccess);
			assert_memory_equal(table, orig, sizeof(table));
			assert_int_equal(nch, expected_nch(bytes));
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
	void *ctx = NULL;
	int nch = NCH_BEFORE;

	(void)state;
	assert_non_null(t4);
	assert_non_null(t3);
	fill_table(table);
	memcpy(orig, table, sizeof(table));
	assert_int_equal(t4->init(4, 1, harness_logger, &ctx), ncclSuccess);	/* ctx last in v4 */
	assert_int_equal(t4->getCollInfo(ctx, ncclFuncAllGather, 64 << 20, 1, (float **)(void *)table,
					 NCCL_NUM_ALGORITHMS, NCCL_NUM_PROTOCOLS, 1, &nch), ncclSuccess);
	assert_memory_equal(table, orig, sizeof(table));
	assert_int_equal(nch, expected_nch(64 << 20));
	assert_int_equal(t4->destroy(ctx), ncclSuccess);

	nch = NCH_BEFORE;
	assert_int_equal(t3->init(4, 1, harness_logger, &ctx), ncclSuccess);
	assert_int_equal(t3->getCollInfo(ctx, ncclFuncReduceScatter, 3 << 20, 1, (float **)(void *)table,
					 NCCL_NUM_ALGORITHMS, NCCL_NUM_PROTOCOLS, &nch), ncclSuccess);
	assert_memory_equal(table, orig, sizeof(table));
	assert_int_equal(nch, expected_nch(3 << 20));
	assert_int_equal(t3->destroy(ctx), ncclSuccess);
}

/* v2 (NCCL 2.21): the channel count as every table gives it, on every
 * collective; algorithm and protocol always left to NCCL's model, whatever
 * the environment (plugin/tuner.c says why). */
static void check_v2(void **state)
{
	ncclTuner_v2_t *t = dlsym(lib, "ncclTunerPlugin_v2");
	void *ctx = NULL;

	(void)state;
	assert_non_null(t);
	assert_int_equal(t->init(4, 1, harness_logger, &ctx), ncclSuccess);	/* ctx last */
	for (int coll = ncclFuncBroadcast; coll <= ncclFuncAllReduce; coll++) {
		for (size_t bytes = 4096; bytes <= (64u << 20); bytes <<= 2) {
			int algo = NCCL_ALGO_UNDEF, proto = NCCL_PROTO_UNDEF, nch = NCH_BEFORE;

			assert_int_equal(t->getCollInfo(ctx, (ncclFunc_t)coll, bytes, 0, 1, 1, &algo,
							&proto, &nch), ncclSuccess);
			assert_int_equal(algo, NCCL_ALGO_UNDEF);
			assert_int_equal(proto, NCCL_PROTO_UNDEF);
			assert_int_equal(nch, expected_nch(bytes));
		}
	}
	assert_int_equal(t->destroy(ctx), ncclSuccess);
	assert_int_equal(t->destroy(ctx), ncclInternalError);	/* twice */
}

/* Asserts that `t` is `orig` except cell (algo, proto), which is `v`. */
static void assert_table_but(float t[NCCL_NUM_ALGORITHMS][NCCL_NUM_PROTOCOLS],
			     float orig[NCCL_NUM_ALGORITHMS][NCCL_NUM_PROTOCOLS], int algo, int proto,
			     float v)
{
	for (int a = 0; a < NCCL_NUM_ALGORITHMS; a++) {
		for (int p = 0; p < NCCL_NUM_PROTOCOLS; p++) {
			if (a == algo && p == proto)
				assert_true(t[a][p] == v);
			else
				assert_true(t[a][p] == orig[a][p]);
		}
	}
}

/* One getCollInfo through the v5 table, as NCCL 2.28 calls it. */
static void ask_v5(ncclTuner_v5_t *t, void *ctx, int coll, size_t bytes, int regbuf,
		   float table[NCCL_NUM_ALGORITHMS][NCCL_NUM_PROTOCOLS])
{
	int nch = 0;

	assert_int_equal(t->getCollInfo(ctx, (ncclFunc_t)coll, bytes, 1, (float **)(void *)table,
					NCCL_NUM_ALGORITHMS, NCCL_NUM_PROTOCOLS, regbuf, &nch),
			 ncclSuccess);
}

/* The same, for a table the tuner must leave as it is. */
static void ask_v5_unchanged(ncclTuner_v5_t *t, void *ctx, int coll, size_t bytes, int regbuf,
			     float table[NCCL_NUM_ALGORITHMS][NCCL_NUM_PROTOCOLS])
{
	float orig[NCCL_NUM_ALGORITHMS][NCCL_NUM_PROTOCOLS];

	memcpy(orig, table, sizeof(orig));
	ask_v5(t, ctx, coll, bytes, regbuf, table);
	assert_memory_equal(table, orig, sizeof(orig));
}

/* Ring Simple becomes Ring LL128 exactly where the rule says, by a 0 in
 * that cell alone; a closed LL128 cell stays closed, and a Tree choice
 * stays Tree. */
static void ring_protocol(void **state)
{
	static const size_t ranks[] = { 2, 3, 4, 8 };
	ncclTuner_v5_t *t = dlsym(lib, "ncclTunerPlugin_v5");
	int changed = 0;

	(void)state;
	for (size_t r = 0; r < sizeof(ranks) / sizeof(ranks[0]); r++) {
		void *ctx = NULL;

		assert_int_equal(t->init(&ctx, 3, ranks[r], ranks[r], harness_logger, NULL, NULL),
				 ncclSuccess);
		for (int coll = ncclFuncBroadcast; coll <= ncclFuncAllReduce; coll++) {
			for (size_t bytes = 1024; bytes <= (1ull << 30); bytes <<= 1) {
				for (int regbuf = 0; regbuf < 2; regbuf++) {
					float table[NCCL_NUM_ALGORITHMS][NCCL_NUM_PROTOCOLS];
					float orig[NCCL_NUM_ALGORITHMS][NCCL_NUM_PROTOCOLS];
					int want = expected_ll128(coll, bytes, ranks[r], regbuf);
					int algo, proto;

					fill_ring_table(table, 300.0f, 0);
					memcpy(orig, table, sizeof(table));
					ask_v5(t, ctx, coll, bytes, regbuf, table);
					pick(table, &algo, &proto);
					assert_int_equal(algo, NCCL_ALGO_RING);
					assert_int_equal(proto, want ? NCCL_PROTO_LL128 : NCCL_PROTO_SIMPLE);
					assert_table_but(table, orig, NCCL_ALGO_RING, NCCL_PROTO_LL128,
							 want ? 0.0f : 300.0f);
					changed += want;

					fill_ring_table(table, NCCL_ALGO_PROTO_IGNORE, 0);
					ask_v5_unchanged(t, ctx, coll, bytes, regbuf, table);
					fill_ring_table(table, 300.0f, 1);
					ask_v5_unchanged(t, ctx, coll, bytes, regbuf, table);
				}
			}
		}
		assert_int_equal(t->finalize(ctx), ncclSuccess);
	}
	/* The environments that expect the rule must see it act. */
	if (expect_ll128)
		assert_true(changed > 0);
	else
		assert_int_equal(changed, 0);
}

/* NCCL before 2.28 (tuner v4/v3) gives the net plugin no connection
 * hints, so nothing is declined and a registered collective keeps Simple
 * (zero-copy) there, while v5 follows the rule. */
static void registered_before_hints(void **state)
{
	ncclTuner_v4_t *t4 = dlsym(lib, "ncclTunerPlugin_v4");
	float table[NCCL_NUM_ALGORITHMS][NCCL_NUM_PROTOCOLS];
	float orig[NCCL_NUM_ALGORITHMS][NCCL_NUM_PROTOCOLS];
	size_t bytes = 16 << 20;	/* 1 MiB per rank and channel on 4 ranks: LL128's */
	void *ctx = NULL;
	int nch = 0, algo, proto;

	(void)state;
	assert_int_equal(t4->init(4, 4, harness_logger, &ctx), ncclSuccess);
	fill_ring_table(table, 300.0f, 0);
	memcpy(orig, table, sizeof(table));
	assert_int_equal(t4->getCollInfo(ctx, ncclFuncAllGather, bytes, 1, (float **)(void *)table,
					 NCCL_NUM_ALGORITHMS, NCCL_NUM_PROTOCOLS, 1, &nch), ncclSuccess);
	assert_memory_equal(table, orig, sizeof(table));
	assert_int_equal(t4->getCollInfo(ctx, ncclFuncAllGather, bytes, 1, (float **)(void *)table,
					 NCCL_NUM_ALGORITHMS, NCCL_NUM_PROTOCOLS, 0, &nch), ncclSuccess);
	pick(table, &algo, &proto);
	/* Unregistered, the rule acts where this environment has it. */
	assert_int_equal(proto, expected_ll128(ncclFuncAllGather, bytes, 4, 0) ?
				NCCL_PROTO_LL128 : NCCL_PROTO_SIMPLE);
	assert_int_equal(t4->destroy(ctx), ncclSuccess);
}

/* Between nodes, an LL choice becomes Simple of the same algorithm exactly
 * where the rule says, by a 0 in that cell alone; a closed Simple cell
 * stays closed, and one node keeps every choice. */
static void ll_between_hosts(void **state)
{
	static const size_t nodes[] = { 1, 2, 4 };
	ncclTuner_v5_t *t = dlsym(lib, "ncclTunerPlugin_v5");
	int changed = 0;

	(void)state;
	for (size_t n = 0; n < sizeof(nodes) / sizeof(nodes[0]); n++) {
		void *ctx = NULL;

		assert_int_equal(t->init(&ctx, 5, 2 * nodes[n], nodes[n], harness_logger, NULL, NULL),
				 ncclSuccess);
		for (int coll = ncclFuncBroadcast; coll <= ncclFuncAllReduce; coll++) {
			for (size_t bytes = 1024; bytes <= (1ull << 30); bytes <<= 1) {
				float table[NCCL_NUM_ALGORITHMS][NCCL_NUM_PROTOCOLS];
				float orig[NCCL_NUM_ALGORITHMS][NCCL_NUM_PROTOCOLS];
				int want = expected_leave_ll(coll, bytes, nodes[n]);
				int algo, proto;

				for (int tree = 0; tree < 2; tree++) {
					int a = tree ? NCCL_ALGO_TREE : NCCL_ALGO_RING;

					fill_ll_table(table, 300.0f, tree);
					memcpy(orig, table, sizeof(table));
					ask_v5(t, ctx, coll, bytes, 0, table);
					pick(table, &algo, &proto);
					assert_int_equal(algo, a);
					assert_int_equal(proto, want ? NCCL_PROTO_SIMPLE : NCCL_PROTO_LL);
					assert_table_but(table, orig, a, NCCL_PROTO_SIMPLE,
							 want ? 0.0f : orig[a][NCCL_PROTO_SIMPLE]);
					changed += want;
				}
				fill_ll_table(table, NCCL_ALGO_PROTO_IGNORE, 0);
				ask_v5_unchanged(t, ctx, coll, bytes, 0, table);
			}
		}
		assert_int_equal(t->finalize(ctx), ncclSuccess);
	}
	if (expect_ll_max)
		assert_true(changed > 0);
	else
		assert_int_equal(changed, 0);
}

/* Choices the rules must not touch even where they act: NCCL's pick is
 * the first of equal cells (Tree before Ring), a pick that is not Ring
 * Simple (or not LL) stays, a table of a layout this code was not written
 * for stays, and a NULL nChannels is no crash.  Each question is asked
 * where the rule acts (4 ranks on 4 nodes, 1 MiB all_gather for LL128,
 * 1 GiB all_reduce for LL), and the environments that have the rule must
 * see the same call change the table of the right layout, so the
 * "unchanged" assertions below are not met by a rule that never acts. */
static void choices_kept(void **state)
{
	ncclTuner_v5_t *t = dlsym(lib, "ncclTunerPlugin_v5");
	float table[NCCL_NUM_ALGORITHMS][NCCL_NUM_PROTOCOLS];
	float orig[NCCL_NUM_ALGORITHMS][NCCL_NUM_PROTOCOLS];
	/* One more algorithm than this ABI has: rows of the same width. */
	float wide[NCCL_NUM_ALGORITHMS + 1][NCCL_NUM_PROTOCOLS];
	float wide_orig[NCCL_NUM_ALGORITHMS + 1][NCCL_NUM_PROTOCOLS];
	size_t ll128_bytes = 1 << 20, ll_bytes = 1ull << 30;
	int ll128 = expected_ll128(ncclFuncAllGather, ll128_bytes, 4, 0);
	int leave_ll = expected_leave_ll(ncclFuncAllReduce, ll_bytes, 4);
	void *ctx = NULL;
	int nch = NCH_BEFORE;

	(void)state;
	assert_int_equal(t->init(&ctx, 9, 4, 4, harness_logger, NULL, NULL), ncclSuccess);

	/* The rules act here where the environment has them. */
	fill_ring_table(table, 300.0f, 0);
	memcpy(orig, table, sizeof(table));
	ask_v5(t, ctx, ncclFuncAllGather, ll128_bytes, 0, table);
	assert_int_equal(memcmp(table, orig, sizeof(table)) != 0, ll128);
	fill_ll_table(table, 300.0f, 0);
	memcpy(orig, table, sizeof(table));
	ask_v5(t, ctx, ncclFuncAllReduce, ll_bytes, 0, table);
	assert_int_equal(memcmp(table, orig, sizeof(table)) != 0, leave_ll);

	/* Tree Simple as cheap as Ring Simple: NCCL takes Tree (the first). */
	fill_ring_table(table, 300.0f, 0);
	table[NCCL_ALGO_TREE][NCCL_PROTO_SIMPLE] = table[NCCL_ALGO_RING][NCCL_PROTO_SIMPLE];
	ask_v5_unchanged(t, ctx, ncclFuncAllGather, ll128_bytes, 0, table);

	/* Ring LL picked on the LL128 path: not Ring Simple, so it stays. */
	fill_ring_table(table, 300.0f, 0);
	table[NCCL_ALGO_RING][NCCL_PROTO_LL] = 100.0f;
	ask_v5_unchanged(t, ctx, ncclFuncAllGather, ll128_bytes, 0, table);

	/* Ring Simple picked on the LL path: not LL, so it stays. */
	fill_ll_table(table, 50.0f, 0);
	ask_v5_unchanged(t, ctx, ncclFuncAllReduce, ll_bytes, 0, table);

	/* A table with an algorithm this ABI does not know. */
	for (int a = 0; a <= NCCL_NUM_ALGORITHMS; a++)
		for (int p = 0; p < NCCL_NUM_PROTOCOLS; p++)
			wide[a][p] = NCCL_ALGO_PROTO_IGNORE;
	fill_ring_table(wide, 300.0f, 0);
	memcpy(wide_orig, wide, sizeof(wide));
	assert_int_equal(t->getCollInfo(ctx, ncclFuncAllGather, ll128_bytes, 1, (float **)(void *)wide,
					NCCL_NUM_ALGORITHMS + 1, NCCL_NUM_PROTOCOLS, 0, &nch),
			 ncclSuccess);
	assert_memory_equal(wide, wide_orig, sizeof(wide));
	fill_ll_table(wide, 300.0f, 0);
	memcpy(wide_orig, wide, sizeof(wide));
	assert_int_equal(t->getCollInfo(ctx, ncclFuncAllReduce, ll_bytes, 1, (float **)(void *)wide,
					NCCL_NUM_ALGORITHMS + 1, NCCL_NUM_PROTOCOLS, 0, &nch),
			 ncclSuccess);
	assert_memory_equal(wide, wide_orig, sizeof(wide));

	/* No nChannels to write: the call succeeds and leaves the table. */
	fill_ring_table(table, 300.0f, 0);
	memcpy(orig, table, sizeof(table));
	assert_int_equal(t->getCollInfo(ctx, ncclFuncAllGather, ll128_bytes, 1,
					(float **)(void *)table, NCCL_NUM_ALGORITHMS,
					NCCL_NUM_PROTOCOLS, 0, NULL), ncclSuccess);
	assert_memory_equal(table, orig, sizeof(table));
	assert_int_equal(t->finalize(ctx), ncclSuccess);
}

/* A single rank has nobody to talk to: nothing to cap. */
static void single_rank_untouched(void **state)
{
	ncclTuner_v4_t *t4 = dlsym(lib, "ncclTunerPlugin_v4");
	float table[NCCL_NUM_ALGORITHMS][NCCL_NUM_PROTOCOLS];
	void *ctx = NULL;
	int nch = NCH_BEFORE;

	(void)state;
	fill_table(table);
	assert_int_equal(t4->init(1, 1, harness_logger, &ctx), ncclSuccess);
	assert_int_equal(t4->getCollInfo(ctx, ncclFuncAllReduce, 1 << 20, 1, (float **)(void *)table,
					 NCCL_NUM_ALGORITHMS, NCCL_NUM_PROTOCOLS, 0, &nch), ncclSuccess);
	assert_int_equal(nch, NCH_BEFORE);
	assert_int_equal(t4->destroy(ctx), ncclSuccess);
}

/* Every decision over 1-64 ranks on 1-8 nodes, each collective and a size
 * sweep, one line each, through the v5 table as NCCL 2.28 calls it. */
static void decisions(FILE *out)
{
	static const size_t ranks[] = { 1, 2, 3, 4, 8, 16, 32, 64 };
	static const size_t nodes[] = { 1, 2, 4, 8 };
	static const size_t sizes[] = { 0, 8, 65536, 1048576, 4194304, 33554432, 67108864,
					134217728, 1073741824 };
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
					int nch = 0, algo, proto;
					ncclResult_t rc;
					const char *kept;

					fill_table(table);
					memcpy(orig, table, sizeof(table));
					rc = t->getCollInfo(ctx, (ncclFunc_t)coll, sizes[b], 1,
							    (float **)(void *)table, NCCL_NUM_ALGORITHMS,
							    NCCL_NUM_PROTOCOLS, 0, &nch);
					kept = memcmp(table, orig, sizeof(table)) ? "CHANGED" : "kept";
					/* The same question where NCCL's model picked Ring Simple. */
					fill_ring_table(table, 300.0f, 0);
					nch = 0;
					t->getCollInfo(ctx, (ncclFunc_t)coll, sizes[b], 1,
						       (float **)(void *)table, NCCL_NUM_ALGORITHMS,
						       NCCL_NUM_PROTOCOLS, 0, &nch);
					pick(table, &algo, &proto);
					fprintf(out, "%zu ranks %zu nodes %s %zu B: rc %d channels %d, cost "
						"table %s, ring simple -> %s %s", ranks[r], nodes[n],
						colls[coll], sizes[b], (int)rc, nch, kept,
						algo == NCCL_ALGO_RING ? "ring" : "other",
						proto == NCCL_PROTO_LL128 ? "LL128" :
						proto == NCCL_PROTO_SIMPLE ? "simple" : "other");
					/* ... and where it picked Ring LL. */
					fill_ll_table(table, 300.0f, 0);
					t->getCollInfo(ctx, (ncclFunc_t)coll, sizes[b], 1,
						       (float **)(void *)table, NCCL_NUM_ALGORITHMS,
						       NCCL_NUM_PROTOCOLS, 0, &nch);
					pick(table, &algo, &proto);
					fprintf(out, ", ring LL -> %s %s\n",
						algo == NCCL_ALGO_RING ? "ring" : "other",
						proto == NCCL_PROTO_LL ? "LL" :
						proto == NCCL_PROTO_SIMPLE ? "simple" : "other");
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
		cmocka_unit_test(check_v2),
		cmocka_unit_test(registered_before_hints),
		cmocka_unit_test(ring_protocol),
		cmocka_unit_test(ll_between_hosts),
		cmocka_unit_test(choices_kept),
		cmocka_unit_test(single_rank_untouched),
		cmocka_unit_test(golden),
	};
	const char *e = getenv("EXPECT_CHANNELS");
	const char *l = getenv("EXPECT_LL128");
	const char *ring = getenv("EXPECT_RING_CHANNELS");
	const char *llmax = getenv("EXPECT_LL_MAX");
	const char *reg = getenv("EXPECT_RING_REGISTER");

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
	expect_ll128 = l ? strtoull(l, NULL, 10) : 0;
	expect_ll_max = llmax ? strtoull(llmax, NULL, 10) : 0;
	if (ring)
		expect_ring = atoi(ring);
	expect_ring_register = reg && atoi(reg) == 1;
	return cmocka_run_group_tests(tests, NULL, NULL);
}
