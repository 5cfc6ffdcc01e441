/* The staging pool's bookkeeping (symmem/pool.c) over a host backend: real
 * anonymous memory with the segment calls counted, so each NCCL_CUMEM_*
 * rule (initial size, prealloc, growth, cap, trim, granularity) shows in
 * what the backend was asked for.  The GPU backend (pool_cumem.c) runs on
 * the GPU hosts (scripts/gpu_check.sh paths). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <string.h>
#include <sys/mman.h>
#include <cmocka.h>

#include "symmem.h"

#define MIB (1024ull * 1024ull)
#define GRAN (2 * MIB)

struct host_backend {
	int allocs, frees, fail_next;
	uint64_t live;
	uint64_t last_size;
};

static int host_alloc(void *arg, uint64_t size, void **base, uint64_t *cookie)
{
	struct host_backend *hb = arg;
	void *p;

	if (hb->fail_next) {
		hb->fail_next = 0;
		return sm_fail(SM_ERR_SYSTEM, "backend refused");
	}
	assert_int_equal(size % GRAN, 0);
	p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	assert_true(p != MAP_FAILED);
	hb->allocs++;
	hb->live += size;
	hb->last_size = size;
	*base = p;
	*cookie = size;
	return SM_OK;
}

static void host_free(void *arg, void *base, uint64_t size, uint64_t cookie)
{
	struct host_backend *hb = arg;

	assert_int_equal(size, cookie);
	munmap(base, size);
	hb->frees++;
	hb->live -= size;
}

static struct sm_pool *make_pool(struct host_backend *hb, uint64_t initial, double growth,
				 uint64_t max, uint64_t trim, int prealloc, int *rc)
{
	struct sm_pool_backend be = { .alloc = host_alloc, .free = host_free,
				      .granularity = GRAN, .arg = hb, .what = "test host" };
	struct sm_pool_config cfg = { .initial = initial, .prealloc = prealloc, .growth = growth,
				      .max = max, .trim = trim };
	struct sm_pool *p = NULL;

	memset(hb, 0, sizeof(*hb));
	*rc = sm_pool_create(&be, &cfg, &p);
	return p;
}

static struct sm_pool *pool_ok(struct host_backend *hb, uint64_t initial, double growth,
			       uint64_t max, uint64_t trim, int prealloc)
{
	int rc;
	struct sm_pool *p = make_pool(hb, initial, growth, max, trim, prealloc, &rc);

	assert_int_equal(rc, SM_OK);
	assert_non_null(p);
	return p;
}

/* Without prealloc nothing is allocated until the first piece; the first
 * segment is the initial size rounded up to the granularity, and later
 * pieces share it. */
static void test_initial_segment_is_lazy_and_shared(void **state)
{
	struct host_backend hb;
	struct sm_pool *p = pool_ok(&hb, 3 * MIB, 2.0, 64 * MIB, 64 * MIB, 0);
	struct sm_pool_piece a, b;

	(void)state;
	assert_int_equal(hb.allocs, 0);
	assert_int_equal(sm_pool_alloc(p, 1000, &a), SM_OK);
	assert_int_equal(hb.allocs, 1);
	assert_int_equal(hb.last_size, 4 * MIB);
	assert_int_equal(a.size, 65536);
	assert_ptr_equal(a.ptr, a.seg_base);
	assert_int_equal(sm_pool_alloc(p, 65537, &b), SM_OK);
	assert_int_equal(hb.allocs, 1);
	assert_ptr_equal(b.seg_base, a.seg_base);
	assert_ptr_equal(b.ptr, a.ptr + 65536);
	assert_int_equal(b.size, 2 * 65536);
	sm_pool_destroy(p);
	assert_int_equal(hb.frees, 1);
	assert_int_equal(hb.live, 0);
}

/* Each new segment is growth x the previous one; a piece larger than that
 * gets a segment of its own size. */
static void test_segments_grow_by_the_factor(void **state)
{
	struct host_backend hb;
	struct sm_pool *p = pool_ok(&hb, 4 * MIB, 2.0, 1024 * MIB, 1024 * MIB, 0);
	struct sm_pool_piece x;
	struct sm_pool_stats st;

	(void)state;
	assert_int_equal(sm_pool_alloc(p, 4 * MIB, &x), SM_OK);
	assert_int_equal(hb.last_size, 4 * MIB);
	assert_int_equal(sm_pool_alloc(p, 1 * MIB, &x), SM_OK);
	assert_int_equal(hb.last_size, 8 * MIB);
	assert_int_equal(sm_pool_alloc(p, 7 * MIB, &x), SM_OK);	/* fits the 8 MiB one */
	assert_int_equal(hb.allocs, 2);
	assert_int_equal(sm_pool_alloc(p, 40 * MIB, &x), SM_OK);	/* more than 16 */
	assert_int_equal(hb.last_size, 40 * MIB);
	assert_int_equal(x.seg_size, 40 * MIB);
	sm_pool_get_stats(p, &st);
	assert_int_equal(st.segments, 3);
	assert_int_equal(st.size, 52 * MIB);
	assert_int_equal(st.used, 52 * MIB);
	assert_int_equal(st.peak, 52 * MIB);
	sm_pool_destroy(p);
	assert_int_equal(hb.live, 0);
}

/* The cap is never passed: growth that would pass it takes only the room
 * left, and a piece that does not fit fails with a message naming the
 * variable, leaving the pieces already out untouched. */
static void test_cap_is_a_clear_error(void **state)
{
	struct host_backend hb;
	struct sm_pool *p = pool_ok(&hb, 8 * MIB, 4.0, 16 * MIB, 64 * MIB, 0);
	struct sm_pool_piece a, b, c;
	struct sm_pool_stats st;

	(void)state;
	assert_int_equal(sm_pool_alloc(p, 8 * MIB, &a), SM_OK);
	memset(a.ptr, 0x5a, 8 * MIB);
	assert_int_equal(sm_pool_alloc(p, 2 * MIB, &b), SM_OK);
	assert_int_equal(hb.last_size, 8 * MIB);	/* 32 wanted, 8 left under the cap */
	assert_int_equal(sm_pool_alloc(p, 7 * MIB, &c), SM_ERR_USAGE);
	assert_non_null(strstr(sm_last_error(), "NCCL_CUMEM_MAX_SIZE"));
	assert_non_null(strstr(sm_last_error(), "exhausted"));
	assert_null(c.ptr);
	sm_pool_get_stats(p, &st);
	assert_int_equal(st.size, 16 * MIB);
	assert_int_equal(st.failures, 1);
	assert_int_equal(st.spans, 2);
	assert_int_equal(a.ptr[0], 0x5a);
	assert_int_equal(a.ptr[8 * MIB - 1], 0x5a);
	/* What still fits is still served. */
	assert_int_equal(sm_pool_alloc(p, 6 * MIB, &c), SM_OK);
	assert_int_equal(hb.allocs, 2);
	sm_pool_destroy(p);
	assert_int_equal(hb.live, 0);
}

/* Idle whole segments go back while more than the threshold is idle; a
 * segment with any piece out stays. */
static void test_trim_returns_idle_segments(void **state)
{
	struct host_backend hb;
	struct sm_pool *p = pool_ok(&hb, 4 * MIB, 1.0, 64 * MIB, 4 * MIB, 0);
	struct sm_pool_piece a, b, c;
	struct sm_pool_stats st;

	(void)state;
	assert_int_equal(sm_pool_alloc(p, 4 * MIB, &a), SM_OK);
	assert_int_equal(sm_pool_alloc(p, 4 * MIB, &b), SM_OK);
	assert_int_equal(sm_pool_alloc(p, 4 * MIB, &c), SM_OK);
	assert_int_equal(hb.allocs, 3);
	assert_int_equal(sm_pool_free(p, b.ptr), SM_OK);	/* 4 MiB idle: at the threshold */
	assert_int_equal(hb.frees, 0);
	assert_int_equal(sm_pool_free(p, c.ptr), SM_OK);	/* 8 idle: one segment goes */
	assert_int_equal(hb.frees, 1);
	sm_pool_get_stats(p, &st);
	assert_int_equal(st.size, 8 * MIB);
	assert_int_equal(st.trims, 1);
	assert_int_equal(sm_pool_free(p, a.ptr), SM_OK);
	sm_pool_get_stats(p, &st);
	assert_int_equal(st.size, 4 * MIB);
	assert_int_equal(st.used, 0);
	assert_int_equal(hb.frees, 2);
	sm_pool_destroy(p);
	assert_int_equal(hb.live, 0);
}

/* Threshold 0 gives everything back as soon as it is idle; the next piece
 * starts again from the initial size. */
static void test_trim_zero_empties_the_pool(void **state)
{
	struct host_backend hb;
	struct sm_pool *p = pool_ok(&hb, 2 * MIB, 2.0, 64 * MIB, 0, 0);
	struct sm_pool_piece a, b;
	struct sm_pool_stats st;

	(void)state;
	assert_int_equal(sm_pool_alloc(p, 2 * MIB, &a), SM_OK);
	assert_int_equal(sm_pool_alloc(p, 2 * MIB, &b), SM_OK);
	assert_int_equal(hb.last_size, 4 * MIB);
	assert_int_equal(sm_pool_free(p, a.ptr), SM_OK);
	assert_int_equal(sm_pool_free(p, b.ptr), SM_OK);
	assert_int_equal(hb.live, 0);
	sm_pool_get_stats(p, &st);
	assert_int_equal(st.segments, 0);
	assert_int_equal(st.peak, 4 * MIB);
	assert_int_equal(sm_pool_alloc(p, 1, &a), SM_OK);
	assert_int_equal(hb.last_size, 2 * MIB);
	sm_pool_destroy(p);
	assert_int_equal(hb.live, 0);
}

/* Prealloc makes the first segment at creation, never past the cap, and a
 * backend failure there is the creator's error. */
static void test_prealloc(void **state)
{
	struct host_backend hb;
	struct sm_pool *p = pool_ok(&hb, 5 * MIB, 2.0, 64 * MIB, 64 * MIB, 1);
	int rc;

	(void)state;
	assert_int_equal(hb.allocs, 1);
	assert_int_equal(hb.last_size, 6 * MIB);
	sm_pool_destroy(p);
	assert_int_equal(hb.live, 0);

	p = make_pool(&hb, 32 * MIB, 2.0, 16 * MIB, 0, 1, &rc);
	assert_int_equal(rc, SM_OK);
	assert_int_equal(hb.last_size, 16 * MIB);
	sm_pool_destroy(p);
	assert_int_equal(hb.live, 0);

	/* A backend failure at prealloc is the caller's error too. */
	memset(&hb, 0, sizeof(hb));
	{
		struct sm_pool_backend be = { .alloc = host_alloc, .free = host_free,
					      .granularity = GRAN, .arg = &hb, .what = "test host" };
		struct sm_pool_config cfg = { .initial = 2 * MIB, .prealloc = 1, .growth = 2.0,
					      .max = 64 * MIB, .trim = 0 };

		hb.fail_next = 1;
		assert_int_equal(sm_pool_create(&be, &cfg, &p), SM_ERR_SYSTEM);
		assert_non_null(strstr(sm_last_error(), "backend refused"));
	}
}

/* A freed gap is reused first fit; pieces never overlap. */
static void test_gaps_are_reused_without_overlap(void **state)
{
	struct host_backend hb;
	struct sm_pool *p = pool_ok(&hb, 8 * MIB, 2.0, 64 * MIB, 64 * MIB, 0);
	struct sm_pool_piece a, b, c, d;

	(void)state;
	assert_int_equal(sm_pool_alloc(p, 1 * MIB, &a), SM_OK);
	assert_int_equal(sm_pool_alloc(p, 2 * MIB, &b), SM_OK);
	assert_int_equal(sm_pool_alloc(p, 1 * MIB, &c), SM_OK);
	memset(a.ptr, 1, a.size);
	memset(c.ptr, 3, c.size);
	assert_int_equal(sm_pool_free(p, b.ptr), SM_OK);
	assert_int_equal(sm_pool_alloc(p, 2 * MIB, &d), SM_OK);
	assert_ptr_equal(d.ptr, b.ptr);
	memset(d.ptr, 4, d.size);
	assert_int_equal(a.ptr[a.size - 1], 1);
	assert_int_equal(c.ptr[0], 3);
	assert_int_equal(hb.allocs, 1);
	sm_pool_destroy(p);
}

/* Freeing twice or freeing what the pool never gave is an error that
 * changes nothing. */
static void test_bad_free(void **state)
{
	struct host_backend hb;
	struct sm_pool *p = pool_ok(&hb, 4 * MIB, 2.0, 64 * MIB, 64 * MIB, 0);
	struct sm_pool_piece a, b;
	struct sm_pool_stats st;
	int local;

	(void)state;
	assert_int_equal(sm_pool_alloc(p, 1 * MIB, &a), SM_OK);
	assert_int_equal(sm_pool_alloc(p, 1 * MIB, &b), SM_OK);
	assert_int_equal(sm_pool_free(p, a.ptr), SM_OK);
	assert_int_equal(sm_pool_free(p, a.ptr), SM_ERR_INTERNAL);
	assert_non_null(strstr(sm_last_error(), "freed twice"));
	assert_int_equal(sm_pool_free(p, &local), SM_ERR_INTERNAL);
	assert_int_equal(sm_pool_free(p, b.ptr + 4096), SM_ERR_INTERNAL);
	sm_pool_get_stats(p, &st);
	assert_int_equal(st.spans, 1);
	assert_int_equal(st.used, 1 * MIB);
	assert_int_equal(sm_pool_free(p, b.ptr), SM_OK);
	sm_pool_destroy(p);
	assert_int_equal(hb.live, 0);
}

/* A backend that cannot grow the pool fails the piece with its reason. */
static void test_backend_failure(void **state)
{
	struct host_backend hb;
	struct sm_pool *p = pool_ok(&hb, 4 * MIB, 2.0, 64 * MIB, 64 * MIB, 0);
	struct sm_pool_piece a;
	struct sm_pool_stats st;

	(void)state;
	hb.fail_next = 1;
	assert_int_equal(sm_pool_alloc(p, 1, &a), SM_ERR_SYSTEM);
	assert_non_null(strstr(sm_last_error(), "backend refused"));
	assert_non_null(strstr(sm_last_error(), "test host"));
	sm_pool_get_stats(p, &st);
	assert_int_equal(st.failures, 1);
	assert_int_equal(st.segments, 0);
	assert_int_equal(sm_pool_alloc(p, 1, &a), SM_OK);
	sm_pool_destroy(p);
	assert_int_equal(hb.live, 0);
}

/* The GPU pools: without a usable GPU (CI) taking one is a clear error and
 * leaves nothing behind; with one, a piece is real GPU memory. */
static void test_gpu_pool_without_gpu(void **state)
{
	struct sm_pool_config cfg = { .initial = 2 * MIB, .growth = 2.0, .max = 64 * MIB };
	const struct sm_cuda_info *ci = sm_cuda_load();
	struct sm_pool *p = NULL;
	struct sm_pool_piece a;
	int rc;

	(void)state;
	rc = sm_pool_gpu_get(&cfg, &p);
	if (ci->loaded && ci->device_count > 0) {
		assert_int_equal(rc, SM_OK);
		assert_int_equal(sm_pool_gpu_count(), 1);
		assert_int_equal(sm_pool_alloc(p, 1, &a), SM_OK);
		assert_int_equal(sm_pool_free(p, a.ptr), SM_OK);
		sm_pool_gpu_put(p);
	} else {
		assert_int_not_equal(rc, SM_OK);
		assert_null(p);
		assert_true(strlen(sm_last_error()) > 0);
	}
	assert_int_equal(sm_pool_gpu_count(), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_initial_segment_is_lazy_and_shared),
		cmocka_unit_test(test_segments_grow_by_the_factor),
		cmocka_unit_test(test_cap_is_a_clear_error),
		cmocka_unit_test(test_trim_returns_idle_segments),
		cmocka_unit_test(test_trim_zero_empties_the_pool),
		cmocka_unit_test(test_prealloc),
		cmocka_unit_test(test_gaps_are_reused_without_overlap),
		cmocka_unit_test(test_bad_free),
		cmocka_unit_test(test_backend_failure),
		cmocka_unit_test(test_gpu_pool_without_gpu),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
