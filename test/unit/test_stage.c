/* The host-staging ring of a sending connection (transport/shm_stage.c): the
 * span arithmetic that decides where a send from host memory is staged for
 * the copy helper.  A wrong answer here either overwrites bytes the helper
 * has not copied yet or stalls a connection forever, so each edge has a
 * case.  The copies themselves need a GPU (scripts/gpu_check.sh). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "shm.h"
#include "symmem.h"

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

/* The memfd behind staging, the rings and the TCP slots is shared: a
 * second mapping of its descriptor (what the peer or the copy helper
 * makes) sees the bytes written through the first. */
static void test_memfd_is_shared(void **state)
{
	void *a;
	uint8_t *b;
	int fd;

	(void)state;
	assert_int_equal(sm_memfd_map("test-memfd", 2 * AREA, AREA, &fd, &a), SM_OK);
	assert_true(fd >= 0);
	memset(a, 0x5c, AREA);
	b = mmap(NULL, 2 * AREA, PROT_READ, MAP_SHARED, fd, 0);
	assert_true(b != MAP_FAILED);
	assert_int_equal(b[0], 0x5c);
	assert_int_equal(b[AREA - 1], 0x5c);
	assert_int_equal(b[AREA], 0);	/* sized past the first mapping */
	munmap(b, 2 * AREA);
	munmap(a, AREA);
	close(fd);
}

/* A size the kernel refuses (past off_t) fails with the memory's name in the error and
 * leaves no descriptor open. */
static void test_memfd_refused_size(void **state)
{
	void *map = NULL;
	int fd = 7, lowest, probe;

	(void)state;
	lowest = open("/dev/null", O_RDONLY);	/* the descriptor memfd_create will take */
	assert_true(lowest >= 0);
	close(lowest);
	assert_int_equal(sm_memfd_map("test-too-big", ~0ull, AREA, &fd, &map), SM_ERR_SYSTEM);
	assert_int_equal(fd, -1);
	assert_null(map);
	assert_non_null(strstr(sm_last_error(), "test-too-big"));
	probe = open("/dev/null", O_RDONLY);
	assert_int_equal(probe, lowest);	/* it was closed again */
	close(probe);
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
		cmocka_unit_test(test_memfd_is_shared),
		cmocka_unit_test(test_memfd_refused_size),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
