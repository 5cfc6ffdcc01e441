/* Which waiting requests the copy helper merges into one copy
 * (smfree/copyd_merge.c).  A wrong merge writes bytes a request never
 * asked for, or into the wrong buffer, so only exact continuations may
 * join: same two mappings, the next bytes on both sides.  The copies
 * themselves need a GPU (scripts/gpu_check.sh). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "copyd_proto.h"

#define MIB (1ull << 20)

/* Request `slot`: `len` bytes from src_id:src_off to dst_id:dst_off. */
static struct cd_pending req(uint32_t slot, uint32_t src_id, uint64_t src_off, uint32_t dst_id,
			     uint64_t dst_off, uint64_t len)
{
	struct cd_pending p = { .slot = slot, .src_id = src_id, .dst_id = dst_id,
				.src_off = src_off, .dst_off = dst_off, .len = len };
	return p;
}

static void test_nothing_waiting(void **state)
{
	struct cd_pending p[1] = { req(0, 1, 0, 2, 0, 8) };
	int member[CD_MERGE_MAX];
	uint64_t len = 7;

	(void)state;
	assert_int_equal(cd_merge(p, 0, 64 * MIB, member, &len), 0);
}

static void test_alone(void **state)
{
	struct cd_pending p[] = { req(5, 1, 0, 2, 4096, 3 * MIB) };
	int member[CD_MERGE_MAX];
	uint64_t len = 0;

	(void)state;
	assert_int_equal(cd_merge(p, 1, 64 * MIB, member, &len), 1);
	assert_int_equal(member[0], 0);
	assert_int_equal(len, 3 * MIB);
}

/* NCCL's steps 0..3 of one connection, with another connection's step
 * between them: the four join, the stranger stays. */
static void test_consecutive_steps_join(void **state)
{
	struct cd_pending p[] = {
		req(0, 1, 0, 2, 0, 2 * MIB), req(1, 1, 2 * MIB, 2, 2 * MIB, 2 * MIB),
		req(2, 3, 0, 4, 0, 2 * MIB), req(3, 1, 4 * MIB, 2, 4 * MIB, 2 * MIB),
		req(4, 1, 6 * MIB, 2, 6 * MIB, 1 * MIB),
	};
	int member[CD_MERGE_MAX];
	uint64_t len = 0;

	(void)state;
	assert_int_equal(cd_merge(p, 5, 64 * MIB, member, &len), 4);
	assert_int_equal(member[0], 0);
	assert_int_equal(member[1], 1);
	assert_int_equal(member[2], 3);
	assert_int_equal(member[3], 4);
	assert_int_equal(len, 7 * MIB);
}

/* Found whatever order they wait in. */
static void test_chain_out_of_order(void **state)
{
	struct cd_pending p[] = {
		req(0, 1, 0, 2, 100, 10), req(1, 1, 20, 2, 120, 10), req(2, 1, 10, 2, 110, 10),
	};
	int member[CD_MERGE_MAX];
	uint64_t len = 0;

	(void)state;
	assert_int_equal(cd_merge(p, 3, 64 * MIB, member, &len), 3);
	assert_int_equal(member[1], 2);
	assert_int_equal(member[2], 1);
	assert_int_equal(len, 30);
}

/* Contiguous on one side only, or in other mappings: never joined. */
static void test_only_exact_continuations(void **state)
{
	struct cd_pending p[] = {
		req(0, 1, 0, 2, 0, 64),
		req(1, 1, 64, 2, 128, 64),	/* destination gap */
		req(2, 1, 128, 2, 64, 64),	/* source gap */
		req(3, 9, 64, 2, 64, 64),	/* other source mapping */
		req(4, 1, 64, 9, 64, 64),	/* other destination mapping */
		req(5, 1, 32, 2, 32, 64),	/* overlaps the lead */
	};
	int member[CD_MERGE_MAX];
	uint64_t len = 0;

	(void)state;
	assert_int_equal(cd_merge(p, 6, 64 * MIB, member, &len), 1);
	assert_int_equal(len, 64);
}

/* The size cap: members join while the total fits; a lead larger than the
 * cap still goes, alone. */
static void test_size_cap(void **state)
{
	struct cd_pending p[] = {
		req(0, 1, 0, 2, 0, 2 * MIB), req(1, 1, 2 * MIB, 2, 2 * MIB, 2 * MIB),
		req(2, 1, 4 * MIB, 2, 4 * MIB, 2 * MIB),
	};
	struct cd_pending big[] = { req(0, 1, 0, 2, 0, 9 * MIB), req(1, 1, 9 * MIB, 2, 9 * MIB, 1) };
	int member[CD_MERGE_MAX];
	uint64_t len = 0;

	(void)state;
	assert_int_equal(cd_merge(p, 3, 5 * MIB, member, &len), 2);
	assert_int_equal(len, 4 * MIB);
	assert_int_equal(cd_merge(big, 2, 5 * MIB, member, &len), 1);
	assert_int_equal(len, 9 * MIB);
}

/* At most CD_MERGE_MAX requests per copy, searched among the oldest
 * CD_MERGE_WINDOW only. */
static void test_count_and_window_limits(void **state)
{
	static struct cd_pending p[CD_MERGE_WINDOW + 8];
	int member[CD_MERGE_MAX];
	uint64_t len = 0;

	(void)state;
	for (uint32_t i = 0; i < 2 * CD_MERGE_MAX; i++)
		p[i] = req(i, 1, 8 * i, 2, 8 * i, 8);
	assert_int_equal(cd_merge(p, 2 * CD_MERGE_MAX, 64 * MIB, member, &len), CD_MERGE_MAX);
	assert_int_equal(len, 8 * CD_MERGE_MAX);

	for (uint32_t i = 0; i < CD_MERGE_WINDOW + 8; i++)
		p[i] = req(i, 3, 1000 * i, 4, 1000 * i, 8);	/* none continues another */
	p[CD_MERGE_WINDOW + 1] = req(9, 3, 8, 4, 8, 8);		/* continues p[0], too late */
	assert_int_equal(cd_merge(p, CD_MERGE_WINDOW + 8, 64 * MIB, member, &len), 1);
	assert_int_equal(len, 8);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_nothing_waiting),
		cmocka_unit_test(test_alone),
		cmocka_unit_test(test_consecutive_steps_join),
		cmocka_unit_test(test_chain_out_of_order),
		cmocka_unit_test(test_only_exact_continuations),
		cmocka_unit_test(test_size_cap),
		cmocka_unit_test(test_count_and_window_limits),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
