/* Importing a peer's legacy-IPC export (symmem/import.c): the size the
 * peer announces is what every later bounds check goes by, so it may not
 * exceed what the IPC handle actually opened, nor, on a cache hit, what
 * the first import checked.
 *
 * The driver calls cannot run here: import.c is included whole and the
 * few driver-facing functions it calls (cuda_driver.c's, cumem_map.c's)
 * are stand-ins below, with a fake IPC open that maps an allocation of
 * `alloc_bytes`.  status.c (errors, warnings) is the real one. */
#include "import.c"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <cmocka.h>

#define MIB (1ull << 20)
#define FAKE_VA 0x7f0000000000ull

static struct {
	size_t alloc_bytes;	/* what the fake IPC handle opens */
	int opened, closed;
} ipc;

static CUresult f_ipc_open(CUdeviceptr *va, CUipcMemHandle h, unsigned int flags)
{
	(void)h;
	(void)flags;
	ipc.opened++;
	*va = FAKE_VA;
	return CUDA_SUCCESS;
}

static CUresult f_ipc_close(CUdeviceptr va)
{
	assert_int_equal(va, FAKE_VA);
	ipc.closed++;
	return CUDA_SUCCESS;
}

static CUresult f_address_range(CUdeviceptr *base, size_t *size, CUdeviceptr p)
{
	assert_int_equal(p, FAKE_VA);
	*base = FAKE_VA;
	*size = ipc.alloc_bytes;
	return CUDA_SUCCESS;
}

static CUresult f_ctx(CUcontext *c)
{
	*c = NULL;
	return CUDA_SUCCESS;
}

static CUresult f_set_ctx(CUcontext c)
{
	(void)c;
	return CUDA_SUCCESS;
}

static const struct sm_cuda_api fake = {
	.ipc_open_mem_handle = f_ipc_open,
	.ipc_close_mem_handle = f_ipc_close,
	.mem_get_address_range = f_address_range,
	.ctx_get_current = f_ctx,
	.ctx_set_current = f_set_ctx,
};

const struct sm_cuda_api *sm_cu(void)
{
	return &fake;
}

int sm_ctx_enter(int ordinal, int *device, CUcontext *ctx)
{
	(void)ordinal;
	*device = 0;
	*ctx = NULL;
	return SM_OK;
}

int sm_cuda_fail(CUresult rc, const char *fmt, ...)
{
	(void)fmt;
	return sm_fail(SM_ERR_CUDA, "CUDA error %d", (int)rc);
}

int sm_cumem_map(CUmemGenericAllocationHandle h, size_t size, size_t align,
		 const CUmemAccessDesc *access, int naccess, const char *what, CUdeviceptr *out)
{
	(void)h;
	(void)size;
	(void)align;
	(void)access;
	(void)naccess;
	(void)what;
	(void)out;
	fail_msg("a legacy IPC import maps no cuMem handle");
	return SM_ERR_CUDA;
}

void sm_cumem_unmap(CUdeviceptr va, size_t size)
{
	(void)va;
	(void)size;
	fail_msg("a legacy IPC import maps no cuMem handle");
}

static char warned[512];

static void keep_warnings(int warn, const char *msg)
{
	if (warn)
		snprintf(warned, sizeof(warned), "%s", msg);
}

/* A peer process (not this one: its own exports are borrowed, not opened). */
static struct sm_share_info peer_export(uint64_t alloc_id, uint64_t size)
{
	struct sm_share_info info;

	memset(&info, 0, sizeof(info));
	info.kind = SM_SHARE_LEGACY_IPC;
	info.alloc_id = alloc_id;
	info.alloc_size = size;
	info.device = 1;
	return info;
}

static int setup(void **state)
{
	(void)state;
	memset(&ipc, 0, sizeof(ipc));
	warned[0] = '\0';
	sm_set_log_sink(keep_warnings);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	sm_set_log_sink(NULL);
	assert_int_equal(sm_import_count(), 0);
	return 0;
}

/* Announced as what the handle opens: imported, and a second import of
 * the same allocation shares the mapping. */
static void test_ipc_size_as_opened(void **state)
{
	struct sm_share_info info = peer_export(1, 8 * MIB);
	struct sm_mapping *m, *again;

	(void)state;
	ipc.alloc_bytes = 8 * MIB;
	assert_int_equal(sm_import_get(getpid() + 1, &info, -1, &m), SM_OK);
	assert_ptr_equal(sm_mapping_base(m), (uint8_t *)FAKE_VA);
	assert_int_equal(sm_import_get(getpid() + 1, &info, -1, &again), SM_OK);
	assert_ptr_equal(again, m);
	assert_int_equal(ipc.opened, 1);
	assert_string_equal(warned, "");
	sm_import_put(again);
	sm_import_put(m);
	assert_int_equal(ipc.closed, 1);
}

/* Announced larger than the allocation the handle opened: refused, the
 * handle closed again, and the reason in the error the caller hands NCCL
 * (one WARN there, none here). */
static void test_ipc_size_larger_than_opened(void **state)
{
	struct sm_share_info info = peer_export(2, 16 * MIB);
	struct sm_mapping *m = NULL;

	(void)state;
	ipc.alloc_bytes = 8 * MIB;
	assert_int_equal(sm_import_get(getpid() + 1, &info, -1, &m), SM_ERR_REMOTE);
	assert_null(m);
	assert_int_equal(ipc.opened, 1);
	assert_int_equal(ipc.closed, 1);
	assert_non_null(strstr(sm_last_error(), "16777216"));
	assert_non_null(strstr(sm_last_error(), "8388608"));
	assert_non_null(strstr(sm_last_error(), "refusing"));
	assert_string_equal(warned, "");
}

/* A later announcement of the same allocation cannot grow it: the cache
 * hit is refused, and the mapping it would have shared stays as it was. */
static void test_cache_hit_larger(void **state)
{
	struct sm_share_info info = peer_export(3, 8 * MIB), bigger = peer_export(3, 64 * MIB);
	struct sm_mapping *m, *m2 = NULL;

	(void)state;
	ipc.alloc_bytes = 8 * MIB;
	assert_int_equal(sm_import_get(getpid() + 1, &info, -1, &m), SM_OK);
	assert_int_equal(sm_import_get(getpid() + 1, &bigger, -1, &m2), SM_ERR_REMOTE);
	assert_null(m2);
	assert_non_null(strstr(sm_last_error(), "67108864"));
	assert_non_null(strstr(sm_last_error(), "refusing"));
	assert_string_equal(warned, "");
	assert_int_equal(m->refs, 1);
	sm_import_put(m);
	assert_int_equal(ipc.closed, 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_ipc_size_as_opened, setup, teardown),
		cmocka_unit_test_setup_teardown(test_ipc_size_larger_than_opened, setup, teardown),
		cmocka_unit_test_setup_teardown(test_cache_hit_larger, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
