/* Unit tests for the value parser, plugin/config/config_parse.c: the public
 * config_parse_size() and config_parse_bool(), and config_parse_value()
 * on rows made up here, so each form's edges are tried apart from the
 * variables that use it (test_config.c tries those). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "bool_words.h"
#include "config.h"
#include "config_parse.h"

/* ---- booleans ---------------------------------------------------------- */

static void test_parse_bool_words(void **state)
{
	char buf[32];

	(void)state;
	for (size_t w = 0; w < 4; w++) {
		for (int how = 0; how < 5; how++) {
			int v = 42;

			spell(bool_true[w], how, buf, sizeof(buf));
			if (config_parse_bool(buf, &v) != 0)
				fail_msg("'%s' rejected", buf);
			assert_int_equal(v, 1);

			v = 42;
			spell(bool_false[w], how, buf, sizeof(buf));
			if (config_parse_bool(buf, &v) != 0)
				fail_msg("'%s' rejected", buf);
			assert_int_equal(v, 0);
		}
	}
}

static void test_parse_bool_rejects(void **state)
{
	static const char *const bad[] = {
		"maybe", "2", "", "   ", "tru", "truee", "yess", "o", "of", "1 0", "y", "n",
		"t", "f", "enable", "-1", "01", "on1", "0x1", "true false", "\"1\"",
	};

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int v = 42;

		if (config_parse_bool(bad[i], &v) != -1)
			fail_msg("'%s' accepted", bad[i]);
		assert_int_equal(v, 42);
	}
}

/* ---- sizes ------------------------------------------------------------- */

static void test_parse_size_units(void **state)
{
	static const struct {
		const char *s;
		uint64_t want;
	} cases[] = {
		{ "0", 0 }, { "1", 1 }, { "4096", 4096 }, { "00012K", 12ULL << 10 },
		{ "64K", 64ULL << 10 }, { "64k", 64ULL << 10 }, { "64KB", 64ULL << 10 },
		{ "64kB", 64ULL << 10 }, { "64Kb", 64ULL << 10 }, { "64kb", 64ULL << 10 },
		{ "64KiB", 64ULL << 10 }, { "64kib", 64ULL << 10 }, { "64KIB", 64ULL << 10 },
		{ "2M", 2ULL << 20 }, { "2m", 2ULL << 20 }, { "2MB", 2ULL << 20 }, { "2mb", 2ULL << 20 },
		{ "2MiB", 2ULL << 20 }, { "2mib", 2ULL << 20 }, { "2MIB", 2ULL << 20 },
		{ "4G", 4ULL << 30 }, { "4g", 4ULL << 30 }, { "4GB", 4ULL << 30 }, { "4gb", 4ULL << 30 },
		{ "4GiB", 4ULL << 30 }, { "4gIb", 4ULL << 30 },
		{ "1T", 1ULL << 40 }, { "1t", 1ULL << 40 }, { "1TB", 1ULL << 40 }, { "1tb", 1ULL << 40 },
		{ "1TiB", 1ULL << 40 }, { "1TIB", 1ULL << 40 },
		/* One space between number and unit is allowed. */
		{ "64 K", 64ULL << 10 }, { "64 MiB", 64ULL << 20 }, { "3 gb", 3ULL << 30 },
		/* Surrounding whitespace is tolerated. */
		{ " 64K ", 64ULL << 10 }, { "\t8M\n", 8ULL << 20 }, { "64 ", 64 },
		{ "18446744073709551615", UINT64_MAX },
		{ "16777215T", 16777215ULL << 40 },
		{ "17179869183G", 17179869183ULL << 30 },
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		uint64_t v = 42;

		if (config_parse_size(cases[i].s, &v) != 0)
			fail_msg("'%s' rejected", cases[i].s);
		if (v != cases[i].want)
			fail_msg("'%s' gave %llu, want %llu", cases[i].s, (unsigned long long)v,
				 (unsigned long long)cases[i].want);
	}
}

static void test_parse_size_rejects(void **state)
{
	static const char *const bad[] = {
		"banana", "", "   ", "-1", "+5", "1.5M", "0.5", "64  K", "64\tK", "K", "KiB", "64X",
		"64KBB", "64B", "64KiBs", "64Ki", "64 K B", "6 4K", "64P", "64E", "0x10", "1e3",
		"18446744073709551616", "99999999999999999999", "16777216T", "17179869184G",
		"99999999999999999999K", "64,5K", "64K-", "- 1",
	};

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		uint64_t v = 42;

		if (config_parse_size(bad[i], &v) != -1)
			fail_msg("'%s' accepted", bad[i]);
		assert_true(v == 42);
	}
}

/* ---- config_parse_value() on made-up rows ------------------------------ */

/* Parses `val` for `v` into `cfg`; the problem, if any, into `problem`. */
static int parse(struct config *cfg, const struct config_var *v, const char *val,
		 char *problem, size_t len)
{
	problem[0] = '\0';
	return config_parse_value(cfg, v, val, problem, len);
}

/* An integer range below zero: both ends taken, anything past them (a
 * number too long for any int included) is out of range, not wrapped. */
static void test_int_range_below_zero(void **state)
{
	static const struct config_var v = {
		.name = "TEST_INT", .kind = CONFIG_KIND_INT,
		.off = offsetof(struct config, ib_gid_index), .imin = -5, .imax = -1,
	};
	static const char *const range[] = {
		"-6", "0", "1", "99999999999999999999", "-99999999999999999999", "-1000000000001",
	};
	static const char *const bad[] = { "+-1", "-", "--5", "-5-", "- 5", "-0x5" };
	struct config cfg = { 0 };
	char problem[96];

	(void)state;
	assert_int_equal(parse(&cfg, &v, "-5", problem, sizeof(problem)), 0);
	assert_int_equal(cfg.ib_gid_index, -5);
	assert_int_equal(parse(&cfg, &v, " -1 ", problem, sizeof(problem)), 0);
	assert_int_equal(cfg.ib_gid_index, -1);
	for (size_t i = 0; i < sizeof(range) / sizeof(range[0]); i++) {
		if (parse(&cfg, &v, range[i], problem, sizeof(problem)) != -1)
			fail_msg("'%s' accepted", range[i]);
		assert_string_equal(problem, "is out of range");
		assert_int_equal(cfg.ib_gid_index, -1);
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		if (parse(&cfg, &v, bad[i], problem, sizeof(problem)) != -1)
			fail_msg("'%s' accepted", bad[i]);
		assert_string_equal(problem, "is not an integer");
	}
}

/* A factor's minimum is taken, a seconds value's zero is not; both
 * maxima are taken and the least step past them refused. */
static void test_decimal_ends(void **state)
{
	static const struct config_var factor = {
		.name = "TEST_FACTOR", .kind = CONFIG_KIND_FACTOR,
		.off = offsetof(struct config, pool_growth), .dmin = 1.5, .dmax = 3.0,
	};
	static const struct config_var seconds = {
		.name = "TEST_SECONDS", .kind = CONFIG_KIND_SECONDS,
		.off = offsetof(struct config, copy_timeout), .dmax = 5.0,
	};
	struct config cfg = { 0 };
	char problem[96];

	(void)state;
	assert_int_equal(parse(&cfg, &factor, "1.5", problem, sizeof(problem)), 0);
	assert_true(cfg.pool_growth == 1.5);
	assert_int_equal(parse(&cfg, &factor, "3", problem, sizeof(problem)), 0);
	assert_true(cfg.pool_growth == 3.0);
	assert_int_equal(parse(&cfg, &factor, "1.4999999", problem, sizeof(problem)), -1);
	assert_string_equal(problem, "is out of range");
	assert_int_equal(parse(&cfg, &factor, "3.0000001", problem, sizeof(problem)), -1);
	assert_string_equal(problem, "is out of range");
	assert_true(cfg.pool_growth == 3.0);

	assert_int_equal(parse(&cfg, &seconds, "0.000001", problem, sizeof(problem)), 0);
	assert_true(cfg.copy_timeout == 0.000001);
	assert_int_equal(parse(&cfg, &seconds, "5.0", problem, sizeof(problem)), 0);
	assert_true(cfg.copy_timeout == 5.0);
	assert_int_equal(parse(&cfg, &seconds, "0.000", problem, sizeof(problem)), -1);
	assert_string_equal(problem, "is out of range");
	assert_int_equal(parse(&cfg, &seconds, "5.0000001", problem, sizeof(problem)), -1);
	assert_string_equal(problem, "is out of range");
	assert_true(cfg.copy_timeout == 5.0);
}

/* A verbatim value fills its buffer to the last byte but one (the NUL). */
static void test_verbatim_length(void **state)
{
	static const struct config_var path = {
		.name = "TEST_PATH", .kind = CONFIG_KIND_PATH,
		.off = offsetof(struct config, copy_helper_path),
		.len = sizeof(((struct config *)0)->copy_helper_path),
	};
	static const struct config_var hca = {
		.name = "TEST_HCA", .kind = CONFIG_KIND_HCA_LIST,
		.off = offsetof(struct config, ib_hca), .len = sizeof(((struct config *)0)->ib_hca),
	};
	char value[sizeof(((struct config *)0)->copy_helper_path) + 1], problem[96];
	struct config cfg = { 0 };
	size_t most = sizeof(cfg.copy_helper_path) - 1;

	(void)state;
	memset(value, 'a', sizeof(value));
	value[0] = '/';
	value[most] = '\0';
	assert_int_equal(parse(&cfg, &path, value, problem, sizeof(problem)), 0);
	assert_string_equal(cfg.copy_helper_path, value);
	value[most] = 'a';
	value[most + 1] = '\0';
	assert_int_equal(parse(&cfg, &path, value, problem, sizeof(problem)), -1);
	assert_string_equal(problem, "is too long (256 characters)");
	assert_int_equal(strlen(cfg.copy_helper_path), most);	/* unchanged */

	value[0] = 'm';
	value[most] = '\0';
	assert_int_equal(parse(&cfg, &hca, value, problem, sizeof(problem)), 0);
	assert_string_equal(cfg.ib_hca, value);
	value[most] = 'a';
	assert_int_equal(parse(&cfg, &hca, value, problem, sizeof(problem)), -1);
	assert_string_equal(problem, "is too long (256 characters)");
}

/* However many of NCCL's values the plugin cannot use, their sentences
 * stay within cfg->warnings, whole from the first on, one line. */
static void test_warnings_bounded(void **state)
{
	static const struct config_var v = {
		.name = "TEST_NCCL_INT", .kind = CONFIG_KIND_INT, .nccl = 1,
		.off = offsetof(struct config, ib_retry), .idef = 7, .imin = 0, .imax = 7,
	};
	static const char first[] = "TEST_NCCL_INT='8' is outside 0..7";
	char value[200], problem[96];
	struct config cfg = { 0 };

	(void)state;
	cfg.ib_retry = 7;
	assert_int_equal(parse(&cfg, &v, "8", problem, sizeof(problem)), 0);
	assert_int_equal(cfg.ib_retry, 7);
	memset(value, '9', sizeof(value) - 1);
	value[sizeof(value) - 1] = '\0';
	for (int i = 0; i < 20; i++) {
		assert_int_equal(parse(&cfg, &v, i % 2 ? value : "x", problem, sizeof(problem)), 0);
		assert_true(strlen(cfg.warnings) < sizeof(cfg.warnings));
	}
	assert_int_equal(strncmp(cfg.warnings, first, sizeof(first) - 1), 0);
	assert_non_null(strstr(cfg.warnings, "; TEST_NCCL_INT='x' holds no number"));
	assert_null(strchr(cfg.warnings, '\n'));
}

/* A backend the table does not name is written as its number. */
static void test_format_backend(void **state)
{
	static const struct config_var v = {
		.name = "TEST_BACKEND", .kind = CONFIG_KIND_BACKEND,
		.off = offsetof(struct config, backend),
	};
	struct config cfg = { 0 };
	char buf[32], problem[96];

	(void)state;
	assert_int_equal(parse(&cfg, &v, "Tcp", problem, sizeof(problem)), 0);
	config_format_value(&cfg, &v, buf, sizeof(buf));
	assert_string_equal(buf, "tcp");
	cfg.backend = 7;
	config_format_value(&cfg, &v, buf, sizeof(buf));
	assert_string_equal(buf, "7");
	cfg.backend = -1;
	config_format_value(&cfg, &v, buf, sizeof(buf));
	assert_string_equal(buf, "-1");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse_bool_words),
		cmocka_unit_test(test_parse_bool_rejects),
		cmocka_unit_test(test_parse_size_units),
		cmocka_unit_test(test_parse_size_rejects),
		cmocka_unit_test(test_int_range_below_zero),
		cmocka_unit_test(test_decimal_ends),
		cmocka_unit_test(test_verbatim_length),
		cmocka_unit_test(test_warnings_bounded),
		cmocka_unit_test(test_format_backend),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
