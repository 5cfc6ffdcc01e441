/* Where the plugin looks for its copy helper (plugin/helper_path.c): the
 * explicit NCCL_SYMMEM_COPY_HELPER_PATH, else next to the library, else the
 * configured libexec directory; a helper that is asked for but missing is
 * one WARN and no path, never a crash or a silent fallback. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config.h"
#include "helper_path.h"
#include "log.h"

static int warns;
static char last_warn[1024];

static void capture(ncclDebugLogLevel level, unsigned long flags, const char *file, int line,
		    const char *fmt, ...)
{
	va_list ap;

	(void)flags;
	(void)file;
	(void)line;
	if (level != NCCL_LOG_WARN)
		return;
	warns++;
	va_start(ap, fmt);
	vsnprintf(last_warn, sizeof(last_warn), fmt, ap);
	va_end(ap);
}

static char dir[] = "/tmp/helper-path-XXXXXX";

static void make_file(const char *name, mode_t mode, char *path, size_t len)
{
	FILE *f;

	snprintf(path, len, "%s/%s", dir, name);
	f = fopen(path, "w");
	assert_non_null(f);
	fputs("#!/bin/sh\nexit 0\n", f);
	fclose(f);
	assert_int_equal(chmod(path, mode), 0);
}

static int setup(void **state)
{
	(void)state;
	log_set_logger(capture);
	return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
	char path[256];

	(void)state;
	snprintf(path, sizeof(path), "%s/symmem-copyd", dir);
	unlink(path);
	snprintf(path, sizeof(path), "%s/not-executable", dir);
	unlink(path);
	return rmdir(dir);
}

static struct config defaults(void)
{
	struct config cfg;

	memset(&cfg, 0, sizeof(cfg));
	cfg.copy_helper = 1;
	return cfg;
}

static void test_disabled(void **state)
{
	struct config cfg = defaults();
	char out[HELPER_PATH_MAX];

	(void)state;
	warns = 0;
	cfg.copy_helper = 0;
	snprintf(cfg.copy_helper_path, sizeof(cfg.copy_helper_path), "/bin/true");
	assert_null(helper_path_resolve(&cfg, dir, out, sizeof(out)));
	assert_int_equal(warns, 0);	/* asked not to: nothing to warn about */
}

static void test_explicit_path_wins(void **state)
{
	struct config cfg = defaults();
	char out[HELPER_PATH_MAX], other[256];

	(void)state;
	warns = 0;
	make_file("symmem-copyd", 0700, other, sizeof(other));
	make_file("explicit", 0700, cfg.copy_helper_path, sizeof(cfg.copy_helper_path));
	assert_string_equal(helper_path_resolve(&cfg, dir, out, sizeof(out)), cfg.copy_helper_path);
	assert_int_equal(warns, 0);
	unlink(cfg.copy_helper_path);
}

static void test_explicit_not_executable(void **state)
{
	struct config cfg = defaults();
	char out[HELPER_PATH_MAX];

	(void)state;
	warns = 0;
	make_file("not-executable", 0600, cfg.copy_helper_path, sizeof(cfg.copy_helper_path));
	assert_null(helper_path_resolve(&cfg, dir, out, sizeof(out)));
	assert_int_equal(warns, 1);
	assert_non_null(strstr(last_warn, "NCCL_SYMMEM_COPY_HELPER_PATH="));
	assert_non_null(strstr(last_warn, "is not an executable file"));
}

/* A directory passes access(X_OK) but cannot be started: it is no
 * helper, named explicitly or found where the helper would be. */
static void test_directory_is_no_helper(void **state)
{
	struct config cfg = defaults();
	char out[HELPER_PATH_MAX], lib[256], sub[300];

	(void)state;
	warns = 0;
	snprintf(cfg.copy_helper_path, sizeof(cfg.copy_helper_path), "%s", dir);
	assert_null(helper_path_resolve(&cfg, dir, out, sizeof(out)));
	assert_int_equal(warns, 1);
	assert_non_null(strstr(last_warn, "is not an executable file"));
	cfg.copy_helper_path[0] = '\0';
	snprintf(lib, sizeof(lib), "%s/lib", dir);
	snprintf(sub, sizeof(sub), "%s/symmem-copyd", lib);
	assert_int_equal(mkdir(lib, 0700), 0);
	assert_int_equal(mkdir(sub, 0700), 0);
	assert_int_equal(helper_path_lookup(&cfg, lib, lib, out, sizeof(out)), HELPER_NOT_FOUND);
	assert_int_equal(rmdir(sub), 0);
	assert_int_equal(rmdir(lib), 0);
}

/* Not next to this program (the test binary stands in for the library):
 * found in the libexec directory. */
static void test_libexec(void **state)
{
	struct config cfg = defaults();
	char out[HELPER_PATH_MAX], want[256];

	(void)state;
	warns = 0;
	make_file("symmem-copyd", 0700, want, sizeof(want));
	assert_string_equal(helper_path_resolve(&cfg, dir, out, sizeof(out)), want);
	assert_int_equal(warns, 0);
}

static void test_missing_everywhere(void **state)
{
	struct config cfg = defaults();
	char out[HELPER_PATH_MAX];

	(void)state;
	warns = 0;
	assert_null(helper_path_resolve(&cfg, "/nonexistent/libexec", out, sizeof(out)));
	assert_int_equal(warns, 1);
	assert_non_null(strstr(last_warn, "symmem-copyd not found"));
	assert_non_null(strstr(last_warn, "/nonexistent/libexec"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_disabled),
		cmocka_unit_test(test_explicit_path_wins),
		cmocka_unit_test(test_explicit_not_executable),
		cmocka_unit_test(test_directory_is_no_helper),
		cmocka_unit_test(test_libexec),
		cmocka_unit_test(test_missing_everywhere),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
