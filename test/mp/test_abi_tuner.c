/* Every tuner table the built library exports, read through the layouts
 * NCCL declares (abi_layouts.h), never through the plugin's own header.
 * Per version: which slots are set, init with that version's constants
 * (canary bytes around them, the v7 buffer five rows wide: the tuner keeps
 * NCCL's values and writes nothing), getCollInfo through the version's own
 * parameter list giving the answers the v5 table gives (v2, which has no
 * cost table: its channel counts, algorithm and protocol left to NCCL),
 * finalize.  Meson
 * runs it where the tuner's rules act (NCCL_P2P_DISABLE=1, NCCL_PASS_SM=1),
 * so equal answers are not equal because nothing changed. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "abi_layouts.h"

#define CANARY 64
#define NRANKS 4
#define NNODES 1

static void *lib;
static int warns;

static void logger(int level, unsigned long flags, const char *file, int line, const char *fmt,
		   ...)
{
	(void)flags;
	(void)file;
	(void)line;
	(void)fmt;
	warns += level == ABI_LOG_WARN;
}

typedef float cost_table[ABI_NUM_ALGOS][ABI_NUM_PROTOS];

/* ---- calls through each version's own signatures ---------------------- */

struct version {
	int v;
	size_t constants_size;	/* 0: init takes none */
	int has_regbuf;
	int has_table;	/* 0: v2, which answers algorithm and protocol instead */
	abi_rc (*init)(const void *t, void *constants, void **ctx);
	abi_rc (*coll)(const void *t, void *ctx, int coll, size_t bytes, cost_table table,
		       int regbuf, int *nch);
	abi_rc (*finish)(const void *t, void *ctx);
	void *(*chunk_slot)(const void *t);	/* NULL before v6 */
	size_t slots[3];	/* init, getCollInfo, finalize (destroy before v5) */
	const void *table;
};

static struct abi_nvl_info nvl = { 1, NRANKS, NRANKS };

static abi_rc v2_init(const void *t, void *constants, void **ctx)
{
	(void)constants;
	return ((const struct abi_tuner_v2 *)t)->init(NRANKS, NNODES, logger, ctx);
}

/* NCCL 2.21 passes both as UNDEF; an answer in either would override its
 * model, NCCL_ALGO and NCCL_PROTO (plugin/tuner.c says why it never does). */
static abi_rc v2_coll(const void *t, void *ctx, int coll, size_t bytes, cost_table table,
		      int regbuf, int *nch)
{
	int algo = ABI_ALGO_UNDEF, proto = ABI_PROTO_UNDEF;
	abi_rc rc;

	(void)table;
	(void)regbuf;
	rc = ((const struct abi_tuner_v2 *)t)->getCollInfo(ctx, coll, bytes, 1, 1, 1, &algo,
							   &proto, nch);
	assert_int_equal(algo, ABI_ALGO_UNDEF);
	assert_int_equal(proto, ABI_PROTO_UNDEF);
	return rc;
}

static abi_rc v2_finish(const void *t, void *ctx)
{
	return ((const struct abi_tuner_v2 *)t)->destroy(ctx);
}

static abi_rc v3_init(const void *t, void *constants, void **ctx)
{
	(void)constants;
	return ((const struct abi_tuner_v3 *)t)->init(NRANKS, NNODES, logger, ctx);
}

static abi_rc v3_coll(const void *t, void *ctx, int coll, size_t bytes, cost_table table,
		      int regbuf, int *nch)
{
	(void)regbuf;
	return ((const struct abi_tuner_v3 *)t)->getCollInfo(ctx, coll, bytes, 1,
							    (float **)(void *)table, ABI_NUM_ALGOS,
							    ABI_NUM_PROTOS, nch);
}

static abi_rc v3_finish(const void *t, void *ctx)
{
	return ((const struct abi_tuner_v3 *)t)->destroy(ctx);
}

static abi_rc v4_init(const void *t, void *constants, void **ctx)
{
	(void)constants;
	return ((const struct abi_tuner_v4 *)t)->init(NRANKS, NNODES, logger, ctx);
}

static abi_rc v4_finish(const void *t, void *ctx)
{
	return ((const struct abi_tuner_v4 *)t)->destroy(ctx);
}

/* getCollInfo has v4's parameters in v4-v7. */
#define COLL_V4(T)                                                                            \
	static abi_rc T##_coll(const void *t, void *ctx, int coll, size_t bytes,              \
			       cost_table table, int regbuf, int *nch)                        \
	{                                                                                     \
		return ((const struct abi_tuner_##T *)t)->getCollInfo(                        \
			ctx, coll, bytes, 1, (float **)(void *)table, ABI_NUM_ALGOS,          \
			ABI_NUM_PROTOS, regbuf, nch);                                         \
	}

/* init, finalize: the same in v5-v7 but for the constants' type. */
#define INIT_V5(T, constants_t)                                                               \
	static abi_rc T##_init(const void *t, void *constants, void **ctx)                    \
	{                                                                                     \
		constants_t *c = constants;                                                   \
                                                                                              \
		return ((const struct abi_tuner_##T *)t)->init(ctx, 7, NRANKS, NNODES, logger, \
							       &nvl, c);                      \
	}                                                                                     \
	static abi_rc T##_finish(const void *t, void *ctx)                                    \
	{                                                                                     \
		return ((const struct abi_tuner_##T *)t)->finalize(ctx);                      \
	}

#define CHUNK(T)                                                                              \
	static void *T##_chunk(const void *t)                                                 \
	{                                                                                     \
		void *p;                                                                      \
                                                                                              \
		memcpy(&p, (const char *)t + offsetof(struct abi_tuner_##T, getChunkSize),    \
		       sizeof(p));                                                            \
		return p;                                                                     \
	}

COLL_V4(v4)
COLL_V4(v5)
COLL_V4(v6)
COLL_V4(v7)
INIT_V5(v5, struct abi_tuner_constants_v5)
INIT_V5(v6, struct abi_tuner_constants_v5)
INIT_V5(v7, struct abi_tuner_constants_v7)
CHUNK(v6)
CHUNK(v7)

#define VERSION(T, N, csize, regbuf, chunk, fin)                                              \
	{ .v = N, .constants_size = csize, .has_regbuf = regbuf, .has_table = N > 2,          \
	  .init = T##_init,                                                                   \
	  .coll = T##_coll, .finish = T##_finish, .chunk_slot = chunk,                        \
	  .slots = { offsetof(struct abi_tuner_##T, init),                                    \
		     offsetof(struct abi_tuner_##T, getCollInfo),                             \
		     offsetof(struct abi_tuner_##T, fin) } }

static struct version versions[] = {
	VERSION(v7, 7, sizeof(struct abi_tuner_constants_v7), 1, v7_chunk, finalize),
	VERSION(v6, 6, sizeof(struct abi_tuner_constants_v5), 1, v6_chunk, finalize),
	VERSION(v5, 5, sizeof(struct abi_tuner_constants_v5), 1, NULL, finalize),
	VERSION(v4, 4, 0, 1, NULL, destroy),
	VERSION(v3, 3, 0, 0, NULL, destroy),
	VERSION(v2, 2, 0, 0, NULL, destroy),
};
#define NVERSIONS (sizeof(versions) / sizeof(versions[0]))

static struct version *find_version(int v)
{
	for (size_t i = 0; i < NVERSIONS; i++)
		if (versions[i].v == v)
			return &versions[i];
	return NULL;
}

/* Every ncclTunerPlugin_vN the library exports is one this test has
 * NCCL's layout for; v5 (the reference below), v6, v7 and v2 (the only
 * one NCCL 2.21 takes) are among them. */
static void exported_tables(void **state)
{
	(void)state;
	for (int v = 1; v <= 32; v++) {
		char sym[32];
		const void *t;

		snprintf(sym, sizeof(sym), "ncclTunerPlugin_v%d", v);
		t = dlsym(lib, sym);
		if (!t)
			continue;
		if (!find_version(v))
			fail_msg("%s is exported, but this test has no layout for it", sym);
		find_version(v)->table = t;
	}
	assert_non_null(find_version(5)->table);
	assert_non_null(find_version(6)->table);
	assert_non_null(find_version(7)->table);
	assert_non_null(find_version(2)->table);
}

/* ---- the questions ----------------------------------------------------- */

/* A table as NCCL fills it for a ring collective on the plugin's path:
 * Ring Simple the cheapest, Ring LL128 open, the rest mostly closed. */
static void fill_table(cost_table t)
{
	for (int a = 0; a < ABI_NUM_ALGOS; a++)
		for (int p = 0; p < ABI_NUM_PROTOS; p++)
			t[a][p] = ABI_CELL_IGNORE;
	t[0][1] = 260.0f;	/* Tree LL128 */
	t[0][2] = 240.0f;	/* Tree Simple */
	t[1][1] = 300.0f;	/* Ring LL128 */
	t[1][2] = 180.0f;	/* Ring Simple */
}

#define NSIZES 5
static const size_t sizes[NSIZES] = { 4096, 1 << 20, 16 << 20, 64 << 20, 1 << 30 };

struct answer {
	cost_table table;
	int nch;
	abi_rc rc;
};

/* Every collective NCCL tunes (0-4) at every size, registered or not. */
#define NQUESTIONS (5 * NSIZES * 2)

static void ask_all(const struct version *ver, void *ctx, struct answer *out)
{
	for (int coll = 0; coll < 5; coll++) {
		for (int s = 0; s < NSIZES; s++) {
			for (int regbuf = 0; regbuf < 2; regbuf++) {
				struct answer *a = &out[(coll * NSIZES + s) * 2 + regbuf];

				fill_table(a->table);
				a->nch = 0;	/* NCCL's "keep my choice" */
				a->rc = ver->coll(ver->table, ctx, coll, sizes[s], a->table, regbuf,
						  &a->nch);
			}
		}
	}
}

static struct answer reference[NQUESTIONS];

/* The v5 table's answers (test_tuner.c checks them against the rules);
 * they must change some table and some channel count here. */
static void reference_answers(void **state)
{
	const struct version *v5 = find_version(5);
	struct abi_tuner_constants_v5 c;
	int changed = 0, channels = 0;
	cost_table orig;
	void *ctx = NULL;

	(void)state;
	memset(&c, 0, sizeof(c));
	assert_int_equal(v5->init(v5->table, &c, &ctx), ABI_OK);
	ask_all(v5, ctx, reference);
	assert_int_equal(v5->finish(v5->table, ctx), ABI_OK);
	fill_table(orig);
	for (int q = 0; q < NQUESTIONS; q++) {
		assert_int_equal(reference[q].rc, ABI_OK);
		changed += memcmp(reference[q].table, orig, sizeof(orig)) != 0;
		channels += reference[q].nch != 0;
	}
	assert_true(changed > 0);
	assert_true(channels > 0);
}

/* init with the constants in the middle of canary bytes: all of it as it
 * was after the call. */
static void *start(const struct version *ver)
{
	_Alignas(16) unsigned char buf[CANARY + sizeof(struct abi_tuner_constants_v7) + CANARY];
	unsigned char before[sizeof(buf)];
	struct abi_nvl_info nvl_before = nvl;
	void *ctx = NULL;

	memset(buf, 0xc3, sizeof(buf));
	for (size_t i = 0; i < ver->constants_size / sizeof(double); i++) {
		double d = 1.0 + (double)i / 8;

		memcpy(buf + CANARY + i * sizeof(d), &d, sizeof(d));
	}
	memcpy(before, buf, sizeof(buf));
	assert_int_equal(ver->init(ver->table, buf + CANARY, &ctx), ABI_OK);
	assert_non_null(ctx);
	assert_memory_equal(buf, before, sizeof(buf));
	assert_memory_equal(&nvl, &nvl_before, sizeof(nvl));
	return ctx;
}

static void one_version(void **state)
{
	const struct version *ver = *state;
	struct answer got[NQUESTIONS];
	cost_table untouched;
	void *ctx;

	if (!ver->table)
		skip();		/* not exported */
	assert_string_equal(*(const char *const *)ver->table, "symmem");
	for (int i = 0; i < 3; i++) {
		void *p;

		memcpy(&p, (const char *)ver->table + ver->slots[i], sizeof(p));
		assert_non_null(p);
	}
	/* getChunkSize stays NULL: NCCL keeps its own chunk size then, with
	 * no call (plugin/tuner.c says why). */
	if (ver->chunk_slot)
		assert_null(ver->chunk_slot(ver->table));
	fill_table(untouched);
	warns = 0;
	ctx = start(ver);
	ask_all(ver, ctx, got);
	for (int q = 0; q < NQUESTIONS; q++) {
		int regbuf = q % 2;
		/* v3 has no regBuff: its questions are v5's unregistered ones. */
		const struct answer *want = &reference[ver->has_regbuf ? q : q - regbuf];

		/* v4 and older NCCL give no connection hints: registered
		 * collectives may be answered differently there. */
		if (ver->v == 4 && regbuf)
			continue;
		assert_int_equal(got[q].rc, ABI_OK);
		assert_int_equal(got[q].nch, want->nch);
		if (ver->has_table)
			assert_memory_equal(got[q].table, want->table, sizeof(cost_table));
		else
			assert_memory_equal(got[q].table, untouched, sizeof(cost_table));
	}
	assert_int_equal(ver->finish(ver->table, ctx), ABI_OK);
	assert_int_equal(warns, 0);
	assert_int_not_equal(ver->finish(ver->table, ctx), ABI_OK);	/* not twice */
}

int main(void)
{
	const char *path = getenv("SYMMEM_PLUGIN");
	struct CMUnitTest tests[2 + NVERSIONS];
	size_t n = 0;

	lib = path ? dlopen(path, RTLD_NOW | RTLD_LOCAL) : NULL;
	if (!lib) {
		fprintf(stderr, "SYMMEM_PLUGIN: %s\n", path ? dlerror() : "not set");
		return 1;
	}
	tests[n++] = (struct CMUnitTest)cmocka_unit_test(exported_tables);
	tests[n++] = (struct CMUnitTest)cmocka_unit_test(reference_answers);
	for (size_t i = 0; i < NVERSIONS; i++) {
		static char names[NVERSIONS][32];

		snprintf(names[i], sizeof(names[i]), "ncclTunerPlugin_v%d", versions[i].v);
		tests[n++] = (struct CMUnitTest){ .name = names[i], .test_func = one_version,
						   .initial_state = &versions[i] };
	}
	return _cmocka_run_group_tests("tuner ABI", tests, n, NULL, NULL);
}
