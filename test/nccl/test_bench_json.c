/* nccl_bench -j's rows (bench_json.c): what bench/e2e/rows.py reads. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "bench_json.h"

/* The row as one string, through a memory stream as through a file. */
static char *written(const struct bench_json_run *run, const struct bench_json_row *row)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	assert_non_null(f);
	assert_int_equal(bench_json_row(f, run, row), 0);
	assert_int_equal(fclose(f), 0);
	return buf;
}

static void both_phases(void **state)
{
	char *env[] = { "NCCL_PASS_SM=1" };
	struct bench_json_run run = {
		.nccl_version = "2.28.9", .route = "env-plugin", .ranks = 4, .iters = 20,
		.plugin_env = env, .nplugin_env = 1,
	};
	struct bench_json_row row = {
		.op = "all_reduce", .dtype = "float", .redop = "sum", .bytes = 1048576,
		.ran = { 1, 1 }, .us = { 41.25, 55.5 }, .busbw = { 38.1234, 28.3333333 },
	};
	char *s = written(&run, &row);

	(void)state;
	assert_string_equal(s,
		"{\"op\":\"all_reduce\",\"ranks\":4,\"bytes\":1048576,\"dtype\":\"float\","
		"\"redop\":\"sum\",\"native_us\":41.250,\"native_busbw\":38.1234,"
		"\"plugin_us\":55.500,\"plugin_busbw\":28.3333,\"errors\":0,"
		"\"nccl_version\":\"2.28.9\",\"route\":\"env-plugin\",\"iters\":20,\"graph\":0,"
		"\"registered\":0,\"cumem_bufs\":0,\"hosts\":0,\"plugin_env\":[\"NCCL_PASS_SM=1\"]}\n");
	free(s);
}

/* -m plugin: the native phase's fields are null, not zero. */
static void phase_not_run(void **state)
{
	struct bench_json_run run = { .nccl_version = "2.28.9", .route = "net-plugin", .ranks = 2 };
	struct bench_json_row row = {
		.op = "sendrecv", .dtype = "float", .redop = "sum", .bytes = 8,
		.ran = { 0, 1 }, .us = { 0, 20 }, .busbw = { 0, 1.6384e-06 }, .errors = 3,
	};
	char *s = written(&run, &row);

	(void)state;
	assert_non_null(strstr(s, "\"native_us\":null,\"native_busbw\":null,"));
	assert_non_null(strstr(s, "\"plugin_us\":20.000,\"plugin_busbw\":1.6384e-06,\"errors\":3,"));
	assert_non_null(strstr(s, "\"plugin_env\":[]}\n"));
	free(s);
}

/* A value JSON cannot hold (NaN, infinity) is null too. */
static void not_finite(void **state)
{
	struct bench_json_run run = { .nccl_version = "2.28.9", .route = "net-plugin", .ranks = 2 };
	struct bench_json_row row = {
		.op = "alltoall", .dtype = "float", .redop = "sum", .bytes = 64,
		.ran = { 1, 1 }, .us = { NAN, 1 }, .busbw = { 1, INFINITY },
	};
	char *s = written(&run, &row);

	(void)state;
	assert_non_null(strstr(s, "\"native_us\":null,\"native_busbw\":1,"));
	assert_non_null(strstr(s, "\"plugin_us\":1.000,\"plugin_busbw\":null,"));
	free(s);
}

/* Settings are the user's text: quotes, backslashes and control
 * characters must not break the line or the object. */
static void escaped(void **state)
{
	char *env[] = { "NCCL_THREAD_THRESHOLDS=a \"b\"\\c\td\n", "X=1" };
	struct bench_json_run run = {
		.nccl_version = "2.28.9", .route = "net-plugin", .ranks = 2,
		.plugin_env = env, .nplugin_env = 2,
	};
	struct bench_json_row row = { .op = "sendrecv", .dtype = "float", .redop = "sum" };
	char *s = written(&run, &row);

	(void)state;
	assert_non_null(strstr(s, "\"plugin_env\":[\"NCCL_THREAD_THRESHOLDS=a \\\"b\\\"\\\\c"
				  "\\u0009d\\u000a\",\"X=1\"]}\n"));
	/* One line: the only newline is the last character. */
	assert_ptr_equal(strchr(s, '\n'), s + strlen(s) - 1);
	free(s);
}

/* A stream that cannot be written reports it. */
static void write_error(void **state)
{
	struct bench_json_run run = { .nccl_version = "2.28.9", .route = "net-plugin", .ranks = 2 };
	struct bench_json_row row = { .op = "sendrecv", .dtype = "float", .redop = "sum" };
	FILE *f = fopen("/dev/null", "r");

	(void)state;
	assert_non_null(f);
	assert_int_equal(bench_json_row(f, &run, &row), -1);
	fclose(f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(both_phases),
		cmocka_unit_test(phase_not_run),
		cmocka_unit_test(not_finite),
		cmocka_unit_test(escaped),
		cmocka_unit_test(write_error),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
