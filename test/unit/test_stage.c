/* The host-staging ring of a sending connection (transport/stage.c): the
 * span arithmetic that decides where a send from host memory is staged for
 * the copy helper.  A wrong answer here either overwrites bytes the helper
 * has not copied yet or stalls a connection forever, so each edge has a
 * case.  The copies themselves need a GPU (scripts/gpu_check.sh). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "internal.h"

#define AREA 4096u

/* An empty message still reserves a span: its end is what frees it, and
 * an end equal to the start would read as "nothing staged" and be retried
 * for ever (seen on the GPU hosts: 0-byte sends never left). */
static void test_empty_message_takes_room(void **state)
{
	uint64_t off = 99, end = 0;

	(void)state;
	assert_true(stage_span(0, 0, AREA, 0, &off, &end));
	assert_int_equal(off, 0);
	assert_true(end > 0);
	assert_true(stage_span(end, 0, AREA, 0, &off, &end));
	assert_int_equal(off, 64);
	assert_int_equal(end, 128);
}

static void test_spans_are_aligned_and_consecutive(void **state)
{
	uint64_t off, end;

	(void)state;
	assert_true(stage_span(0, 0, AREA, 1, &off, &end));
	assert_int_equal(off, 0);
	assert_int_equal(end, 64);
	assert_true(stage_span(end, 0, AREA, 65, &off, &end));
	assert_int_equal(off, 64);
	assert_int_equal(end, 64 + 128);
}

/* A span never wraps: the rest of the area is skipped and counted, so the
 * tail moving past it later frees it too. */
static void test_no_span_wraps(void **state)
{
	uint64_t off, end;

	(void)state;
	/* 4032 bytes used and released; 256 more do not fit before the end. */
	assert_true(stage_span(4032, 4032, AREA, 256, &off, &end));
	assert_int_equal(off, 0);
	assert_int_equal(end, 4096 + 256);
}

/* Full means full: no span overlaps bytes not yet released. */
static void test_full_until_released(void **state)
{
	uint64_t off = 7, end = 7;

	(void)state;
	assert_false(stage_span(4096, 0, AREA, 1, &off, &end));
	assert_false(stage_span(4032, 0, AREA, 128, &off, &end));
	assert_true(stage_span(4032, 0, AREA, 64, &off, &end));
	assert_int_equal(off, 4032);
	/* Wrapping needs the skipped tail and the span at the start free. */
	assert_false(stage_span(4032, 64, AREA, 128, &off, &end));
	assert_true(stage_span(4032, 4032, AREA, 128, &off, &end));
	assert_int_equal(off, 0);
}

/* An empty area takes any span up to its size, wherever the last one
 * ended: nothing in flight means no landing will ever free more (a 3 KiB
 * send after 2 KiB had landed used to be refused for ever). */
static void test_empty_area_takes_any_span(void **state)
{
	uint64_t off, end;

	(void)state;
	for (uint64_t pos = 0; pos < 3 * AREA; pos += 64) {
		for (uint64_t n = 0; n <= AREA; n += 64) {
			assert_true(stage_span(pos, pos, AREA, n, &off, &end));
			assert_true(end > pos);
			assert_true(off + n <= AREA);
		}
	}
	assert_true(stage_span(2048, 2048, AREA, 3072, &off, &end));
	assert_int_equal(off, 0);
	assert_int_equal(end, AREA + 3072);
}

static void test_larger_than_area(void **state)
{
	uint64_t off, end;

	(void)state;
	assert_true(stage_span(0, 0, AREA, AREA, &off, &end));
	assert_false(stage_span(0, 0, AREA, AREA + 1, &off, &end));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_empty_message_takes_room),
		cmocka_unit_test(test_spans_are_aligned_and_consecutive),
		cmocka_unit_test(test_no_span_wraps),
		cmocka_unit_test(test_full_until_released),
		cmocka_unit_test(test_empty_area_takes_any_span),
		cmocka_unit_test(test_larger_than_area),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
