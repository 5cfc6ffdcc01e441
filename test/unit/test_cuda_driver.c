/* The CUDA driver is optional: without it the loader says why, once, and
 * nothing else changes; with it the driver answers basic queries. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "symmem.h"

static void test_loader_reports_truthfully(void **state)
{
	const struct sm_cuda_info *a = sm_cuda_load(), *b = sm_cuda_load();
	void *probe = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);

	(void)state;
	assert_ptr_equal(a, b);		/* opened once per process */
	if (!probe) {
		/* No driver on this host (CI): not loaded, and the reason names it. */
		assert_int_equal(a->loaded, 0);
		assert_non_null(strstr(a->reason, "libcuda.so.1"));
		return;
	}
	dlclose(probe);
	/* A driver exists: either it initialised, or the reason says why not
	 * (a driver without devices fails cuInit). */
	if (a->loaded) {
		assert_true(a->driver_version >= 12000);
		assert_true(a->device_count >= 0);
	} else {
		assert_true(strlen(a->reason) > 0);
	}
}

static void test_error_messages_are_per_call(void **state)
{
	(void)state;
	assert_int_equal(sm_fail(SM_ERR_REMOTE, "peer %d died", 3), SM_ERR_REMOTE);
	assert_string_equal(sm_last_error(), "peer 3 died");
	assert_int_equal(sm_fail(SM_ERR_USAGE, "size %zu", (size_t)7), SM_ERR_USAGE);
	assert_string_equal(sm_last_error(), "size 7");
}

/* Importing consumes the fd whatever happens, so a failed import cannot
 * leak the peer's allocation. */
static void test_import_failure_consumes_fd(void **state)
{
	struct sm_share_info info;
	struct sm_mapping *m = (struct sm_mapping *)1;
	int fds[2];

	(void)state;
	assert_int_equal(pipe(fds), 0);
	memset(&info, 0, sizeof(info));
	info.kind = SM_SHARE_POSIX_FD;
	info.alloc_size = 1 << 21;
	info.alloc_id = 1;
	assert_int_not_equal(sm_import_get(12345, &info, fds[0], &m), SM_OK);
	assert_null(m);
	assert_int_equal(fcntl(fds[0], F_GETFD), -1);
	assert_int_equal(errno, EBADF);
	assert_int_equal(sm_import_count(), 0);
	close(fds[1]);
}

/* Host memory is not an exportable GPU allocation. */
static void test_export_of_host_memory_fails(void **state)
{
	struct sm_share_info info;
	struct sm_export *e = (struct sm_export *)1;
	uint64_t off;
	char buf[64] = "host";
	int fd = 7;

	(void)state;
	assert_int_equal(sm_export_get(buf, sizeof(buf), &e, &info, &off, &fd), SM_ERR_CUDA);
	assert_null(e);
	assert_int_equal(sm_export_count(), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_loader_reports_truthfully),
		cmocka_unit_test(test_error_messages_are_per_call),
		cmocka_unit_test(test_import_failure_consumes_fd),
		cmocka_unit_test(test_export_of_host_memory_fails),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
