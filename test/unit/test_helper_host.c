/* Which send buffers go to the copy helper (transport/helper.c), and what
 * the plugin says about those that cannot: malloc'd host memory is never
 * the helper's and is worth no line, a GPU buffer the helper cannot map
 * is (its copies stay in NCCL's process).
 *
 * helper.c is included whole; what it calls is stood in for below.  The
 * stand-in driver knows two allocations: `gpu` (GPU memory that cannot be
 * exported, as one without a shareable handle) and `pinned` (host memory
 * that can, as NCCL's cuMem host buffers).  For anything else it answers
 * CUDA_ERROR_NOT_FOUND, as the real driver does for malloc'd memory.
 * status.c (errors, the log) is the real one. */
#include "../../transport/helper.c"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#define ALLOC 65536

static uint8_t gpu[ALLOC], pinned[ALLOC];

struct sm_export {
	int unused;
};

static struct sm_export one_export;

static struct {
	int ranges;		/* named to the helper */
	int holds;		/* engine references taken */
	char lines[8][512];	/* INFO lines, in order */
	int nlines;
} seen;

static CUresult f_address_range(CUdeviceptr *base, size_t *size, CUdeviceptr p)
{
	uint8_t *const known[] = { gpu, pinned };

	for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++) {
		if (p >= (CUdeviceptr)known[i] && p < (CUdeviceptr)known[i] + ALLOC) {
			*base = (CUdeviceptr)known[i];
			*size = ALLOC;
			return CUDA_SUCCESS;
		}
	}
	return CUDA_ERROR_NOT_FOUND;
}

static const struct sm_cuda_api fake = {
	.mem_get_address_range = f_address_range,
};

const struct sm_cuda_api *sm_cu(void)
{
	return &fake;
}

/* symmem/export.c's first step, and its words when it fails. */
int sm_export_get(const void *ptr, size_t size, struct sm_export **out,
		  struct sm_share_info *info, uint64_t *offset, int *fd)
{
	CUdeviceptr base;
	size_t len;
	CUresult rc;

	(void)size;
	*out = NULL;
	rc = f_address_range(&base, &len, (CUdeviceptr)ptr);
	if (rc != CUDA_SUCCESS)
		return sm_fail(SM_ERR_CUDA, "%p is not GPU memory the CUDA driver knows; "
			       "cuMemGetAddressRange: named symbol not found (CUDA error %d)",
			       ptr, (int)rc);
	if (base == (CUdeviceptr)gpu)
		return sm_fail(SM_ERR_CUDA, "cuIpcGetMemHandle: invalid argument (CUDA error 1)");
	memset(info, 0, sizeof(*info));
	info->kind = SM_SHARE_POSIX_FD;
	info->alloc_size = len;
	info->addr = base;
	*offset = (CUdeviceptr)ptr - base;
	*fd = -1;
	*out = &one_export;
	return SM_OK;
}

void sm_export_put(struct sm_export *e)
{
	(void)e;
}

int smf_range_add(struct smf_engine *e, int owner_pid, const struct sm_share_info *info, int fd,
		  uint32_t *id)
{
	(void)e;
	(void)owner_pid;
	(void)info;
	(void)fd;
	seen.ranges++;
	*id = 7;
	return SM_OK;
}

void smf_range_del(struct smf_engine *e, uint32_t id)
{
	(void)e;
	assert_int_equal(id, 7);
	seen.ranges--;
}

void smf_engine_hold(struct smf_engine *e)
{
	(void)e;
	seen.holds++;
}

int sm_memfd_map(const char *name, uint64_t size, uint64_t map_len, int *fd, void **map)
{
	(void)name;
	(void)size;
	(void)map_len;
	*fd = -1;
	*map = NULL;
	return sm_fail(SM_ERR_SYSTEM, "not in this test");
}

static void keep_lines(int warn, const char *msg)
{
	assert_false(warn);
	if (seen.nlines < 8)
		snprintf(seen.lines[seen.nlines], sizeof(seen.lines[0]), "%s", msg);
	seen.nlines++;
}

static int setup(void **state)
{
	(void)state;
	memset(&seen, 0, sizeof(seen));
	atomic_store(&in_process_logged, 0);
	sm_set_log_sink(keep_lines);
	return 0;
}

/* One sender's registration of [base, base + size) as memory of kind mem. */
static struct helper_range own(int verbose, void *base, size_t size, int mem)
{
	struct tp_comm c = { .is_send = 1, .verbose = verbose };
	struct tp_region r = { .base = (uintptr_t)base, .size = size, .mem = mem };
	struct helper_range h;

	memset(&h, 0, sizeof(h));
	helper_own_buffer(&c, &r, &h);
	return h;
}

/* malloc'd host memory: copied in this process as it always is, and not a
 * word about it, not even the driver's "named symbol not found". */
static void test_malloc_host_buffer_is_quiet(void **state)
{
	size_t size = 1 << 20;
	void *buf = malloc(size);

	(void)state;
	assert_non_null(buf);
	for (int verbose = 0; verbose <= 1; verbose++) {
		struct helper_range h = own(verbose, buf, size, TP_MEM_HOST);

		assert_int_equal(h.hid, 0);
		assert_null(h.exp);
	}
	for (int i = 0; i < seen.nlines && i < 8; i++)
		print_message("unexpected line: %s\n", seen.lines[i]);
	assert_int_equal(seen.nlines, 0);
	assert_int_equal(seen.ranges, 0);
	free(buf);
}

/* Host memory the driver allocated and can export still goes to the
 * helper, silently (NCCL's cuMem host buffers). */
static void test_exportable_host_buffer_goes_to_helper(void **state)
{
	struct helper_range h = own(0, pinned + 4096, 8192, TP_MEM_HOST);

	(void)state;
	assert_int_equal(h.hid, 7);
	assert_int_equal(h.offset, 4096);
	assert_int_equal(seen.ranges, 1);
	assert_int_equal(seen.holds, 1);
	assert_int_equal(seen.nlines, 0);
	helper_range_drop(&h);
	assert_int_equal(seen.ranges, 0);
}

/* A GPU buffer the helper cannot map is said once per process, with the
 * driver's reason; NCCL_SM_FREE_VERBOSE=1 names every one. */
static void test_gpu_buffer_the_helper_cannot_map_is_said(void **state)
{
	struct helper_range h;

	(void)state;
	h = own(0, gpu, ALLOC, TP_MEM_CUDA);
	assert_int_equal(h.hid, 0);
	assert_int_equal(seen.nlines, 1);
	assert_non_null(strstr(seen.lines[0], "stays with in-process copies"));
	assert_non_null(strstr(seen.lines[0], "cuIpcGetMemHandle"));
	assert_non_null(strstr(seen.lines[0], "NCCL_SM_FREE_VERBOSE=1"));
	own(0, gpu, ALLOC, TP_MEM_CUDA);
	assert_int_equal(seen.nlines, 1);
	own(1, gpu, ALLOC, TP_MEM_CUDA);
	assert_int_equal(seen.nlines, 2);
	assert_int_equal(seen.ranges, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup(test_malloc_host_buffer_is_quiet, setup),
		cmocka_unit_test_setup(test_exportable_host_buffer_goes_to_helper, setup),
		cmocka_unit_test_setup(test_gpu_buffer_the_helper_cannot_map_is_said, setup),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
