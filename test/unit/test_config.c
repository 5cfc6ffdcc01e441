/* Unit tests for the config module through config.h: each variable of
 * the table, loading, describing, the NCCL defaults and the env plugin's
 * routing (the value forms alone: test_config_parse.c).
 *
 * config_parse() and config_describe() are driven through a table-backed
 * getenv so every case states its whole environment.  config_get() and
 * config_unknown_vars() read the real environment and config_get() parses
 * only once per process, so those run in a fork()ed child that reports
 * through its exit status (cmocka's asserts must not run in the child: a
 * failure would longjmp into the child's copy of the test runner). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bool_words.h"
#include "config.h"
#include "smfree.h"

#define ERRLEN 512

/* The accepted-form fragments each error message must carry. */
#define BOOL_FORM "0/1, true/false, yes/no, on/off"
#define TRI_FORM "<0 auto, 0 off, >0 on"
#define SIZE_FORM "4096, 64K, 2MB, 4GB, 1GiB"
#define FACTOR_FORM "1..16"
#define SECONDS_FORM "> 0 and <= 86400"
#define BACKEND_FORM "auto, shm, tcp, ib"
#define HCA_FORM "[^][=]name[:port]"
#define IFNAME_FORM "[^][=]prefix[,prefix...]"

struct kv {
	const char *name;
	const char *value;
};

/* Every variable, listed here independently of config_vars.h so that a
 * variable dropped from that table shows up as a failure. */
static const char *const all_names[] = {
	"NCCL_PASS_SM",
	"NCCL_CUMEM_ENABLE",
	"NCCL_CUMEM_HOST_ENABLE",
	"NCCL_CUMEM_POOL_SIZE",
	"NCCL_CUMEM_MAX_SIZE",
	"NCCL_CUMEM_TRIM_THRESHOLD",
	"NCCL_CUMEM_PREALLOC",
	"NCCL_CUMEM_GROWTH_FACTOR",
	"NCCL_CUMEM_MONITOR",
	"NCCL_CUMEM_MONITOR_INTERVAL",
	"NCCL_SM_FREE_VERBOSE",
	"NCCL_ZERO_COPY",
	"NCCL_DMA_ENABLE",
	"NCCL_DIRECT_PATH",
	"NCCL_ENABLE_FAULT_TOLERANCE",
	"NCCL_IB_HCA",
	"NCCL_IB_GID_INDEX",
	"NCCL_IB_TIMEOUT",
	"NCCL_IB_RETRY_CNT",
	"NCCL_IB_SL",
	"NCCL_IB_TC",
	"NCCL_SOCKET_IFNAME",
	"NCCL_SYMMEM_STREAMS",
	"NCCL_SYMMEM_CHUNK_SIZE",
	"NCCL_SYMMEM_SPLIT_SIZE",
	"NCCL_SYMMEM_COPY_DEPTH",
	"NCCL_SYMMEM_MERGE_SIZE",
	"NCCL_SYMMEM_BATCH",
	"NCCL_SYMMEM_PHASE_US",
	"NCCL_SYMMEM_LANDING_WORDS",
	"NCCL_SYMMEM_HOST_IN_PLACE",
	"NCCL_SYMMEM_HOST_RING_SIZE",
	"NCCL_SYMMEM_CONNECT_TIMEOUT",
	"NCCL_SYMMEM_STALL_REPORT",
	"NCCL_SYMMEM_COPY_TIMEOUT",
	"NCCL_SYMMEM_TRACE_US",
	"NCCL_SYMMEM_BACKEND",
	"NCCL_SYMMEM_PASS_SM_CHANNELS",
	"NCCL_SYMMEM_LL128_CHUNK",
	"NCCL_SYMMEM_LL_MAX",
	"NCCL_SYMMEM_NCCL_DEFAULTS",
	"NCCL_SYMMEM_COPY_HELPER",
	"NCCL_SYMMEM_COPY_HELPER_PATH",
	"NCCL_SYMMEM_HELPER_ALL_GPUS",
	"NCCL_SYMMEM_COLL_REGISTER",
	"NCCL_SYMMEM_INNER_NET",
};

#define NNAMES (sizeof(all_names) / sizeof(all_names[0]))

static const struct {
	const char *name;
	size_t off;
	int def;
} bool_vars[] = {
	{ "NCCL_PASS_SM", offsetof(struct config, pass_sm), 0 },
	{ "NCCL_CUMEM_PREALLOC", offsetof(struct config, pool_prealloc), 0 },
	{ "NCCL_CUMEM_MONITOR", offsetof(struct config, monitor), 0 },
	{ "NCCL_SM_FREE_VERBOSE", offsetof(struct config, verbose), 0 },
	{ "NCCL_ZERO_COPY", offsetof(struct config, zero_copy), 1 },
	{ "NCCL_DMA_ENABLE", offsetof(struct config, dma_enable), 1 },
	{ "NCCL_DIRECT_PATH", offsetof(struct config, direct_path), 1 },
	{ "NCCL_ENABLE_FAULT_TOLERANCE", offsetof(struct config, fault_tolerance), 0 },
	{ "NCCL_SYMMEM_HELPER_ALL_GPUS", offsetof(struct config, helper_all_gpus), 1 },
};

#define NBOOLS (sizeof(bool_vars) / sizeof(bool_vars[0]))

/* ---- helpers ---------------------------------------------------------- */

/* `arg` is an array of kv ending with a NULL name. */
static const char *table_get(const char *name, void *arg)
{
	const struct kv *kv = arg;

	for (; kv && kv->name; kv++) {
		if (strcmp(kv->name, name) == 0)
			return kv->value;
	}
	return NULL;
}

static int parse_one(const char *name, const char *value, struct config *cfg, char *err)
{
	struct kv env[] = { { name, value }, { NULL, NULL } };

	return config_parse(cfg, table_get, env, err, ERRLEN);
}

static void assert_contains(const char *hay, const char *needle)
{
	if (!strstr(hay, needle))
		fail_msg("expected \"%s\" in \"%s\"", needle, hay);
}

static void assert_lacks(const char *hay, const char *needle)
{
	if (strstr(hay, needle))
		fail_msg("did not expect \"%s\" in \"%s\"", needle, hay);
}

static int field_int(const struct config *cfg, size_t off)
{
	return *(const int *)((const char *)cfg + off);
}

/* Parses NAME=VALUE alone and insists it succeeds. */
static void accept_one(const char *name, const char *value, struct config *cfg)
{
	char err[ERRLEN];

	if (parse_one(name, value, cfg, err) != 0)
		fail_msg("%s='%s' rejected: %s", name, value, err);
	assert_string_equal(err, "");
}

/* Parses NAME=VALUE alone and insists it fails with one line naming the
 * variable, the value as given, and the accepted form. */
static void reject_one(const char *name, const char *value, const char *form)
{
	struct config cfg;
	char err[ERRLEN], quoted[ERRLEN];

	if (parse_one(name, value, &cfg, err) != -1)
		fail_msg("%s='%s' accepted, expected an error", name, value);
	snprintf(quoted, sizeof(quoted), "'%s'", value);
	assert_contains(err, name);
	assert_contains(err, quoted);
	assert_contains(err, "(accepted: ");
	assert_contains(err, form);
	assert_null(strchr(err, '\n'));
}

/* Same as reject_one, and also checks what was said to be wrong. */
static void reject_why(const char *name, const char *value, const char *form, const char *why)
{
	struct config cfg;
	char err[ERRLEN];

	reject_one(name, value, form);
	assert_int_equal(parse_one(name, value, &cfg, err), -1);
	assert_contains(err, why);
}

/* NCCL's own NAME=VALUE alone: never an error, since NCCL runs with it;
 * cfg->warnings (one WARN at init) names it with `warn`, or is empty
 * where `warn` is NULL. */
static void accept_nccl(const char *name, const char *value, struct config *cfg, const char *warn)
{
	accept_one(name, value, cfg);
	if (!warn) {
		if (cfg->warnings[0])
			fail_msg("%s='%s': unexpected warning \"%s\"", name, value, cfg->warnings);
		return;
	}
	assert_contains(cfg->warnings, name);
	assert_contains(cfg->warnings, warn);
}

/* An integer variable takes both ends of its range and refuses one past
 * each and a word; `off` is its field in struct config. */
static void int_bounds(const char *name, size_t off, int lo, int hi)
{
	struct config cfg;
	char value[32], form[64];

	snprintf(form, sizeof(form), "an integer %d..%d", lo, hi);
	snprintf(value, sizeof(value), "%d", lo);
	accept_one(name, value, &cfg);
	assert_int_equal(*(const int *)((const char *)&cfg + off), lo);
	snprintf(value, sizeof(value), "%d", hi);
	accept_one(name, value, &cfg);
	assert_int_equal(*(const int *)((const char *)&cfg + off), hi);
	snprintf(value, sizeof(value), "%d", lo - 1);
	reject_why(name, value, form, "is out of range");
	snprintf(value, sizeof(value), "%d", hi + 1);
	reject_why(name, value, form, "is out of range");
	reject_why(name, "deep", form, "is not an integer");
}

struct lines {
	int n;
	char line[64][512];
};

static void collect(const char *line, void *arg)
{
	struct lines *l = arg;

	assert_true(l->n < 64);
	assert_true(strlen(line) < sizeof(l->line[0]));
	strcpy(l->line[l->n++], line);
}

static int count_line(const struct lines *l, const char *want)
{
	int hits = 0;

	for (int i = 0; i < l->n; i++)
		hits += strcmp(l->line[i], want) == 0;
	return hits;
}

static void assert_line(const struct lines *l, const char *want)
{
	int hits = count_line(l, want);

	if (hits != 1)
		fail_msg("line \"%s\" appears %d times, expected once", want, hits);
}

/* The lines config_describe gives for `env`: every variable (`all`) or
 * only those set. */
static void describe_lines(struct kv *env, int all, struct lines *l)
{
	struct config cfg;
	char err[ERRLEN];

	if (config_parse(&cfg, table_get, env, err, sizeof(err)) != 0)
		fail_msg("parse failed: %s", err);
	config_describe(&cfg, table_get, env, all, collect, l);
}

/* The value part of the line for `name`, as described for `env`. */
static void describe_value(struct kv *env, const char *name, char *out, size_t len)
{
	struct lines l = { 0 };
	size_t n = strlen(name);

	describe_lines(env, 1, &l);
	for (int i = 0; i < l.n; i++) {
		char *sp;

		if (strncmp(l.line[i], name, n) != 0 || l.line[i][n] != '=')
			continue;
		snprintf(out, len, "%s", l.line[i] + n + 1);
		sp = strrchr(out, ' ');
		assert_non_null(sp);
		*sp = '\0';
		return;
	}
	fail_msg("no line for %s", name);
}

/* The line for `name`, described for `env` with only set ones listed,
 * is absent: the variable counts as unset. */
static void describe_line_is_default(struct kv *env, const char *name)
{
	struct lines l = { 0 };
	size_t n = strlen(name);

	describe_lines(env, 0, &l);
	for (int i = 0; i < l.n; i++)
		if (!strncmp(l.line[i], name, n) && l.line[i][n] == '=')
			fail_msg("%s described as set: %s", name, l.line[i]);
}

/* Runs fn in a child and returns its exit status (or 255 on a signal). */
static int run_in_child(int (*fn)(void))
{
	pid_t pid;
	int status;

	fflush(stdout);
	fflush(stderr);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0)
		_exit(fn());
	assert_int_equal(waitpid(pid, &status, 0), pid);
	if (!WIFEXITED(status))
		return 255;
	return WEXITSTATUS(status);
}

/* ---- defaults ---------------------------------------------------------- */

static void check_defaults(const struct config *cfg)
{
	assert_int_equal(cfg->pass_sm, 0);
	assert_int_equal(cfg->cumem_enable, CONFIG_AUTO);
	assert_int_equal(cfg->cumem_host_enable, CONFIG_AUTO);
	assert_true(cfg->pool_size == 64ULL << 20);
	assert_int_equal(cfg->pool_prealloc, 0);
	assert_true(cfg->pool_growth == 2.0);
	assert_true(cfg->pool_max == 4ULL << 30);
	assert_true(cfg->pool_trim == 256ULL << 20);
	assert_int_equal(cfg->monitor, 0);
	assert_true(cfg->monitor_interval == 10.0);
	assert_int_equal(cfg->verbose, 0);
	assert_int_equal(cfg->zero_copy, 1);
	assert_int_equal(cfg->dma_enable, 1);
	assert_int_equal(cfg->direct_path, 1);
	assert_int_equal(cfg->fault_tolerance, 0);
	assert_string_equal(cfg->ib_hca, "");
	assert_string_equal(cfg->socket_ifname, "");
	assert_int_equal(cfg->streams, 1);
	assert_true(cfg->chunk_size == 512ULL << 10);
	assert_true(cfg->host_ring_size == 4ULL << 20);
	assert_true(cfg->connect_timeout == 120.0);
	assert_true(cfg->copy_timeout == 60.0);
	assert_int_equal(cfg->backend, CONFIG_BACKEND_AUTO);
	assert_int_equal(cfg->pass_sm_channels, 16);
}

static void test_defaults(void **state)
{
	struct kv env[] = { { "UNRELATED", "x" }, { NULL, NULL } };
	struct config cfg;
	char err[ERRLEN] = "stale";

	(void)state;
	/* Garbage first, so a default that is never written shows up. */
	memset(&cfg, 0xa5, sizeof(cfg));
	assert_int_equal(config_parse(&cfg, table_get, env, err, sizeof(err)), 0);
	assert_string_equal(err, "");
	check_defaults(&cfg);

	memset(&cfg, 0x5a, sizeof(cfg));
	assert_int_equal(config_parse(&cfg, NULL, NULL, err, sizeof(err)), 0);
	check_defaults(&cfg);
}

/* ---- booleans ---------------------------------------------------------- */

static void test_bool_vars_accept(void **state)
{
	struct config cfg;
	char buf[32];

	(void)state;
	for (size_t b = 0; b < NBOOLS; b++) {
		for (size_t w = 0; w < 4; w++) {
			for (int how = 0; how < 5; how++) {
				spell(bool_true[w], how, buf, sizeof(buf));
				accept_one(bool_vars[b].name, buf, &cfg);
				assert_int_equal(field_int(&cfg, bool_vars[b].off), 1);

				spell(bool_false[w], how, buf, sizeof(buf));
				accept_one(bool_vars[b].name, buf, &cfg);
				assert_int_equal(field_int(&cfg, bool_vars[b].off), 0);
			}
		}
		/* Unset gives the default. */
		assert_int_equal(parse_one("OTHER", "1", &cfg, NULL), 0);
		assert_int_equal(field_int(&cfg, bool_vars[b].off), bool_vars[b].def);
	}
}

static void test_bool_vars_reject(void **state)
{
	static const char *const bad[] = { "maybe", "2", "-1", "yes please", "nope", "1.0" };

	(void)state;
	for (size_t b = 0; b < NBOOLS; b++) {
		for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
			reject_why(bool_vars[b].name, bad[i], BOOL_FORM, "is not a boolean");
		reject_why(bool_vars[b].name, "", BOOL_FORM, "is empty");
	}
}

/* ---- CUDA_VISIBLE_DEVICES ----------------------------------------------- */

/* Whole GPUs listed, one or more: the helper may drop the variable.  A MIG
 * instance, or an entry CUDA stops at (negative, empty), keeps it. */
static void test_visible_gpus(void **state)
{
	static const struct {
		const char *cvd;
		int n;
	} cases[] = {
		{ "0", 1 }, { "3", 1 }, { " 2 ", 1 },
		{ "GPU-7834e710-eedb-2b83-68a2-4d08a8f6c4d4", 1 },
		{ "0,1", 2 }, { "2, 3", 2 }, { "0,1,2,3,4,5,6,7", 8 },
		{ "GPU-7834e710-eedb-2b83-68a2-4d08a8f6c4d4,GPU-c6d6e6f2-1c5b-5c53-9a4b-6f8d3f7c0a11", 2 },
		{ "", 0 }, { "  ", 0 }, { "-1", 0 }, { "-1,0", 0 }, { "0,-1", 0 },
		{ "0,,1", 0 }, { "0,", 0 }, { ",0", 0 },
		{ "MIG-GPU-7834e710-eedb-2b83-68a2-4d08a8f6c4d4/1/0", 0 },
		{ "MIG-c6d6e6f2-1c5b-5c53-9a4b-6f8d3f7c0a11", 0 },
		{ "0, MIG-c6d6e6f2-1c5b-5c53-9a4b-6f8d3f7c0a11", 0 },
	};
	struct kv env[] = { { "CUDA_VISIBLE_DEVICES", "5" }, { NULL, NULL } };
	struct config cfg;
	char err[ERRLEN];

	(void)state;
	assert_int_equal(config_visible_gpus(NULL), 0);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		if (config_visible_gpus(cases[i].cvd) != cases[i].n)
			fail_msg("CUDA_VISIBLE_DEVICES=\"%s\": %d GPUs, expected %d", cases[i].cvd,
				 config_visible_gpus(cases[i].cvd), cases[i].n);
	}

	/* config_parse keeps the value for the log line, "" otherwise. */
	assert_int_equal(config_parse(&cfg, table_get, env, err, sizeof(err)), 0);
	assert_string_equal(cfg.gpus_visible, "5");
	assert_int_equal(cfg.ngpus_visible, 1);
	env[0].value = "0,1,2,3";
	assert_int_equal(config_parse(&cfg, table_get, env, err, sizeof(err)), 0);
	assert_string_equal(cfg.gpus_visible, "0,1,2,3");
	assert_int_equal(cfg.ngpus_visible, 4);
	env[0].value = "MIG-c6d6e6f2-1c5b-5c53-9a4b-6f8d3f7c0a11";
	assert_int_equal(config_parse(&cfg, table_get, env, err, sizeof(err)), 0);
	assert_string_equal(cfg.gpus_visible, "");
	assert_int_equal(cfg.ngpus_visible, 0);
	env[0].name = NULL;
	assert_int_equal(config_parse(&cfg, table_get, env, err, sizeof(err)), 0);
	assert_string_equal(cfg.gpus_visible, "");
	assert_int_equal(cfg.ngpus_visible, 0);
	assert_int_equal(cfg.helper_all_gpus, 1);
}

/* ---- tristates --------------------------------------------------------- */

/* NCCL_CUMEM_ENABLE and _HOST_ENABLE are NCCL's: read as NCCL's
 * ncclLoadParam reads them (strtoll base 0, text after the number ignored,
 * no number 0, past 64 bits the default, empty unset), so the plugin's
 * legacy-IPC choice agrees with the buffers NCCL made, and never refused. */
static void test_nccl_tristate(void **state)
{
	static const struct {
		const char *value;
		int want;
		const char *warn;
	} cases[] = {
		{ "-1", CONFIG_AUTO, NULL }, { "-5", CONFIG_AUTO, NULL }, { "-0x1", CONFIG_AUTO, NULL },
		{ "0", CONFIG_OFF, NULL }, { "-0", CONFIG_OFF, NULL }, { "000", CONFIG_OFF, NULL },
		{ "0x0", CONFIG_OFF, NULL }, { "08", CONFIG_OFF, NULL },
		{ "1", CONFIG_ON, NULL }, { "2", CONFIG_ON, NULL }, { "+7", CONFIG_ON, NULL },
		{ "010", CONFIG_ON, NULL }, { "0x10", CONFIG_ON, NULL }, { "0XfF", CONFIG_ON, NULL },
		{ " 1 ", CONFIG_ON, NULL }, { "\t-1\n", CONFIG_AUTO, NULL },
		/* Text after the number ignored. */
		{ "1 # on", CONFIG_ON, NULL }, { "1x", CONFIG_ON, NULL }, { "1.5", CONFIG_ON, NULL },
		{ "0x", CONFIG_OFF, NULL }, { "1e3", CONFIG_ON, NULL },
		/* Empty: unset. */
		{ "", CONFIG_AUTO, NULL },
		/* Past 64 bits: NCCL's default (auto). */
		{ "99999999999999999999999", CONFIG_AUTO, "does not fit 64 bits" },
		{ "-100000000000000000000000000", CONFIG_AUTO, "does not fit 64 bits" },
		/* No number: NCCL reads 0, words included. */
		{ "true", CONFIG_OFF, "holds no number" }, { "on", CONFIG_OFF, "holds no number" },
		{ "banana", CONFIG_OFF, "holds no number" }, { " ", CONFIG_OFF, "holds no number" },
		{ "- 1", CONFIG_OFF, "holds no number" },
	};
	struct config cfg;

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		accept_nccl("NCCL_CUMEM_ENABLE", cases[i].value, &cfg, cases[i].warn);
		if (cfg.cumem_enable != cases[i].want)
			fail_msg("NCCL_CUMEM_ENABLE='%s' gave %d, want %d", cases[i].value,
				 cfg.cumem_enable, cases[i].want);
		assert_int_equal(cfg.cumem_host_enable, CONFIG_AUTO);

		accept_nccl("NCCL_CUMEM_HOST_ENABLE", cases[i].value, &cfg, cases[i].warn);
		if (cfg.cumem_host_enable != cases[i].want)
			fail_msg("NCCL_CUMEM_HOST_ENABLE='%s' gave %d, want %d", cases[i].value,
				 cfg.cumem_host_enable, cases[i].want);
		assert_int_equal(cfg.cumem_enable, CONFIG_AUTO);
	}
}

/* The plugin's own tristate (NCCL_SYMMEM_COLL_REGISTER) stays strict:
 * an integer or a boolean word, nothing after it. */
static void test_tristate_strict(void **state)
{
	static const struct {
		const char *value;
		int want;
	} ok[] = {
		{ "-1", CONFIG_AUTO }, { "0x0", CONFIG_OFF }, { "+7", CONFIG_ON }, { " 1 ", CONFIG_ON },
		{ "true", CONFIG_ON }, { "No", CONFIG_OFF }, { "99999999999999999999999", CONFIG_ON },
		/* strtoll, which NCCL reads its switches with, takes 0X too. */
		{ "0X1", CONFIG_ON }, { "0X0", CONFIG_OFF },
	};
	static const char *const bad[] = {
		"banana", "1x", "-", "+", "1.5", "auto", "0x", "0xg", "- 1", "1 2", "--1", "1e3", "maybe",
		"1 # on",
	};
	struct config cfg;

	(void)state;
	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		accept_one("NCCL_SYMMEM_COLL_REGISTER", ok[i].value, &cfg);
		assert_int_equal(cfg.coll_register, ok[i].want);
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		reject_why("NCCL_SYMMEM_COLL_REGISTER", bad[i], TRI_FORM, "is not an integer");
	reject_why("NCCL_SYMMEM_COLL_REGISTER", "", TRI_FORM, "is empty");
}

/* ---- sizes ------------------------------------------------------------- */

static void test_size_vars(void **state)
{
	struct config cfg;
	char err[ERRLEN];

	(void)state;
	accept_one("NCCL_CUMEM_POOL_SIZE", "1G", &cfg);
	assert_true(cfg.pool_size == 1ULL << 30);
	accept_one("NCCL_CUMEM_POOL_SIZE", "0", &cfg);
	assert_true(cfg.pool_size == 0);
	accept_one("NCCL_CUMEM_MAX_SIZE", "16 GiB", &cfg);
	assert_true(cfg.pool_max == 16ULL << 30);
	accept_one("NCCL_CUMEM_TRIM_THRESHOLD", "1mb", &cfg);
	assert_true(cfg.pool_trim == 1ULL << 20);
	accept_one("NCCL_CUMEM_TRIM_THRESHOLD", "0", &cfg);
	assert_true(cfg.pool_trim == 0);
	accept_one("NCCL_SYMMEM_MERGE_SIZE", "0", &cfg);	/* no merging */
	assert_true(cfg.merge_max == 0);
	accept_one("NCCL_SYMMEM_MERGE_SIZE", "64MiB", &cfg);
	assert_true(cfg.merge_max == 64ULL << 20);
	reject_why("NCCL_SYMMEM_MERGE_SIZE", "2GiB", "within 0..1GiB", "is out of range");
	accept_one("NCCL_SYMMEM_LL128_CHUNK", "0", &cfg);	/* NCCL's protocols */
	assert_true(cfg.ll128_chunk == 0);
	accept_one("NCCL_SYMMEM_LL128_CHUNK", "1MiB", &cfg);
	assert_true(cfg.ll128_chunk == 1ULL << 20);
	reject_why("NCCL_SYMMEM_LL128_CHUNK", "2GiB", "within 0..1GiB", "is out of range");
	reject_why("NCCL_SYMMEM_LL128_CHUNK", "half", SIZE_FORM, "is not a size");

	/* The message the brief quotes, word for word. */
	assert_int_equal(parse_one("NCCL_CUMEM_POOL_SIZE", "banana", &cfg, err), -1);
	assert_string_equal(err, "NCCL_CUMEM_POOL_SIZE='banana' is not a size "
				 "(accepted: 4096, 64K, 2MB, 4GB, 1GiB)");

	reject_why("NCCL_CUMEM_POOL_SIZE", "-64M", SIZE_FORM, "is not a size");
	reject_why("NCCL_CUMEM_POOL_SIZE", "1.5G", SIZE_FORM, "is not a size");
	reject_why("NCCL_CUMEM_POOL_SIZE", "16777216T", SIZE_FORM, "does not fit in 64 bits");
	reject_why("NCCL_CUMEM_MAX_SIZE", "lots", SIZE_FORM, "is not a size");
	reject_why("NCCL_CUMEM_MAX_SIZE", "99999999999999999999", SIZE_FORM, "does not fit in 64 bits");
	reject_why("NCCL_CUMEM_TRIM_THRESHOLD", "256MBs", SIZE_FORM, "is not a size");
	reject_why("NCCL_CUMEM_TRIM_THRESHOLD", "", SIZE_FORM, "is empty");
}

static void test_chunk_ring_ranges(void **state)
{
	struct kv env[3] = { { NULL, NULL } };
	struct config cfg;
	char err[ERRLEN];

	(void)state;
	accept_one("NCCL_SYMMEM_CHUNK_SIZE", "4K", &cfg);
	assert_true(cfg.chunk_size == 4096);
	accept_one("NCCL_SYMMEM_CHUNK_SIZE", "4096", &cfg);
	assert_true(cfg.chunk_size == 4096);
	accept_one("NCCL_SYMMEM_CHUNK_SIZE", "1M", &cfg);
	assert_true(cfg.chunk_size == 1ULL << 20);
	accept_one("NCCL_SYMMEM_HOST_RING_SIZE", "1G", &cfg);
	assert_true(cfg.host_ring_size == 1ULL << 30);
	accept_one("NCCL_SYMMEM_HOST_RING_SIZE", "512K", &cfg);
	assert_true(cfg.host_ring_size == 512ULL << 10);

	/* Both ends of both ranges, with the other variable out of the way. */
	env[0] = (struct kv){ "NCCL_SYMMEM_CHUNK_SIZE", "1G" };
	env[1] = (struct kv){ "NCCL_SYMMEM_HOST_RING_SIZE", "1G" };
	assert_int_equal(config_parse(&cfg, table_get, env, err, sizeof(err)), 0);
	assert_true(cfg.chunk_size == 1ULL << 30 && cfg.host_ring_size == 1ULL << 30);
	env[0] = (struct kv){ "NCCL_SYMMEM_CHUNK_SIZE", "4K" };
	env[1] = (struct kv){ "NCCL_SYMMEM_HOST_RING_SIZE", "64K" };
	assert_int_equal(config_parse(&cfg, table_get, env, err, sizeof(err)), 0);
	assert_true(cfg.chunk_size == 4096 && cfg.host_ring_size == 65536);

	reject_why("NCCL_SYMMEM_CHUNK_SIZE", "4095", "4KiB..1GiB", "is out of range");
	reject_why("NCCL_SYMMEM_CHUNK_SIZE", "0", "4KiB..1GiB", "is out of range");
	reject_why("NCCL_SYMMEM_CHUNK_SIZE", "1073741825", "4KiB..1GiB", "is out of range");
	reject_why("NCCL_SYMMEM_CHUNK_SIZE", "2G", "4KiB..1GiB", "is out of range");
	reject_why("NCCL_SYMMEM_CHUNK_SIZE", "512Q", SIZE_FORM, "is not a size");
	reject_why("NCCL_SYMMEM_HOST_RING_SIZE", "65535", "64KiB..1GiB", "is out of range");
	reject_why("NCCL_SYMMEM_HOST_RING_SIZE", "1025M", "64KiB..1GiB", "is out of range");
	reject_why("NCCL_SYMMEM_HOST_RING_SIZE", "4 M B", SIZE_FORM, "is not a size");
}

/* ---- decimals ---------------------------------------------------------- */

static void test_growth_factor(void **state)
{
	static const struct {
		const char *value;
		double want;
	} ok[] = {
		{ "1", 1.0 }, { "1.0", 1.0 }, { "1.5", 1.5 }, { "2.5", 2.5 }, { "16", 16.0 },
		{ "16.0", 16.0 }, { "+1.25", 1.25 }, { " 3 ", 3.0 }, { "01.50", 1.5 },
		{ "15.999", 15.999 },
	};
	static const char *const range[] = { "-2", "0.5", "0", "16.01", "17", "-0", "99999999" };
	static const char *const bad[] = {
		"nan", "NaN", "inf", "2x", "1e1", ".5", "1.", "0x2", "1,5", "2 .5", "two", "--2", "1.2.3",
	};
	struct config cfg;

	(void)state;
	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		accept_one("NCCL_CUMEM_GROWTH_FACTOR", ok[i].value, &cfg);
		if (cfg.pool_growth != ok[i].want)
			fail_msg("'%s' gave %.17g", ok[i].value, cfg.pool_growth);
	}
	for (size_t i = 0; i < sizeof(range) / sizeof(range[0]); i++)
		reject_why("NCCL_CUMEM_GROWTH_FACTOR", range[i], FACTOR_FORM, "is out of range");
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		reject_why("NCCL_CUMEM_GROWTH_FACTOR", bad[i], FACTOR_FORM, "is not a decimal number");
}

static void check_seconds(const char *name, size_t off)
{
	static const struct {
		const char *value;
		double want;
	} ok[] = {
		{ "0.5", 0.5 }, { "10", 10.0 }, { "86400", 86400.0 }, { "0.001", 0.001 },
		{ " 30 ", 30.0 }, { "86400.0", 86400.0 },
	};
	static const char *const range[] = { "0", "0.0", "-1", "86400.5", "100000" };
	static const char *const bad[] = { "abc", "nan", "10s", "1e2", "inf", "1:00" };
	struct config cfg;

	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		double got;

		accept_one(name, ok[i].value, &cfg);
		got = *(const double *)((const char *)&cfg + off);
		if (got != ok[i].want)
			fail_msg("%s='%s' gave %.17g", name, ok[i].value, got);
	}
	for (size_t i = 0; i < sizeof(range) / sizeof(range[0]); i++)
		reject_why(name, range[i], SECONDS_FORM, "is out of range");
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		reject_why(name, bad[i], SECONDS_FORM, "is not a decimal number");
}

static void test_seconds(void **state)
{
	(void)state;
	check_seconds("NCCL_CUMEM_MONITOR_INTERVAL", offsetof(struct config, monitor_interval));
	check_seconds("NCCL_SYMMEM_CONNECT_TIMEOUT", offsetof(struct config, connect_timeout));
	check_seconds("NCCL_SYMMEM_STALL_REPORT", offsetof(struct config, stall_report));
	check_seconds("NCCL_SYMMEM_COPY_TIMEOUT", offsetof(struct config, copy_timeout));
}

/* ---- device lists ------------------------------------------------------ */

static void test_ib_hca_accepts(void **state)
{
	static const char *const ok[] = {
		"mlx5_0", "mlx5_0:1", "mlx5_0:1,mlx5_1:2", "^mlx5_0", "=mlx5_0:1",
		"^=mlx5_0,mlx5_1", "a.b-c_D9", "mlx5", "mlx5_0:255", "mlx5_0:01", "x,y,z:3",
	};
	struct config cfg;
	char longest[256];

	(void)state;
	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		accept_one("NCCL_IB_HCA", ok[i], &cfg);
		assert_string_equal(cfg.ib_hca, ok[i]);
		assert_string_equal(cfg.socket_ifname, "");
	}
	/* 255 characters fill the buffer exactly. */
	memset(longest, 'a', sizeof(longest) - 1);
	longest[sizeof(longest) - 1] = '\0';
	accept_one("NCCL_IB_HCA", longest, &cfg);
	assert_string_equal(cfg.ib_hca, longest);
}

/* Lists as NCCL's parseStringList reads them: empty entries skipped (and
 * dropped from the list the transport gets), no entry at all unset (all
 * devices), an empty value unset.  An exclusion of nothing is unset too,
 * with a warning: NCCL's own transport would leave every device out. */
static void test_nccl_lists(void **state)
{
	static const struct {
		const char *value, *want, *warn;
	} cases[] = {
		{ "mlx5_0,", "mlx5_0", NULL }, { ",mlx5_0", "mlx5_0", NULL },
		{ "mlx5_0,,mlx5_1", "mlx5_0,mlx5_1", NULL }, { "a,,b", "a,b", NULL },
		{ "^mlx5_0,,x:2,", "^mlx5_0,x:2", NULL }, { "=,mlx5_0:1", "=mlx5_0:1", NULL },
		{ "", "", NULL }, { ",", "", NULL }, { ",,,", "", NULL }, { "=", "", NULL },
		{ "=,", "", NULL },
		{ "^", "", "names nothing to leave out" }, { "^=", "", "names nothing to leave out" },
		{ "^,", "", "names nothing to leave out" },
	};
	struct config cfg;

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		accept_nccl("NCCL_IB_HCA", cases[i].value, &cfg, cases[i].warn);
		assert_string_equal(cfg.ib_hca, cases[i].want);
		/* Interface prefixes take ':' as a name character, so the
		 * port-carrying case reads the same. */
		accept_nccl("NCCL_SOCKET_IFNAME", cases[i].value, &cfg, cases[i].warn);
		assert_string_equal(cfg.socket_ifname, cases[i].want);
	}
}

static void test_ib_hca_rejects(void **state)
{
	static const struct {
		const char *value;
		const char *why;
	} bad[] = {
		{ "mlx5_0:", "entry 1: missing port after ':'" },
		{ ",mlx5_0:", "entry 2: missing port after ':'" },
		{ "mlx5_0:,mlx5_1", "entry 1: missing port after ':'" },
		{ "mlx5_0:x", "entry 1: port is not a positive integer" },
		{ "mlx5_0:-1", "entry 1: port is not a positive integer" },
		{ "mlx5_0:1:2", "entry 1: port is not a positive integer" },
		{ "mlx5_0:1x", "entry 1: port is not a positive integer" },
		{ "mlx5_0:0", "entry 1: port is out of range" },
		{ "mlx5_0:256", "entry 1: port is out of range" },
		{ "mlx5_0:99999999999999999999", "entry 1: port is out of range" },
		{ ":1", "entry 1 has a port but no name" },
		{ "mlx5 0", "bad character ' '" }, { "mlx5_0;", "bad character ';'" },
		{ "=^mlx5_0", "bad character '^'" }, { "^^mlx5_0", "bad character '^'" },
		{ " mlx5_0", "bad character ' '" }, { "mlx5_0 ", "bad character ' '" },
		{ "mlx5/0", "bad character '/'" }, { "mlx5_0,mlx5_1:y", "entry 2" },
	};
	char toolong[257], err[ERRLEN];
	struct config cfg;

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		reject_why("NCCL_IB_HCA", bad[i].value, HCA_FORM, bad[i].why);
	reject_why("NCCL_IB_HCA", "  ", HCA_FORM, "bad character ' '");

	memset(toolong, 'a', sizeof(toolong) - 1);
	toolong[sizeof(toolong) - 1] = '\0';
	assert_int_equal(parse_one("NCCL_IB_HCA", toolong, &cfg, err), -1);
	assert_contains(err, "NCCL_IB_HCA='aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa");
	assert_contains(err, "is too long");
	assert_contains(err, "at most 255 characters");
	assert_contains(err, HCA_FORM);
}

static void test_socket_ifname(void **state)
{
	static const char *const ok[] = {
		"eth0", "^docker,lo", "=eth0", "^=ib0,eth1", "eth0:1", "en", "br-1a2b.100", "a_b",
		/* Alias interfaces: what follows ':' is a name, not an IB port. */
		"eth0:", "eth0:db", "^lo,eth0:",
	};
	static const struct {
		const char *value;
		const char *why;
	} bad[] = {
		{ "eth 0", "bad character ' '" }, { ",eth 0", "entry 2: bad character ' '" },
		{ "eth0/1", "bad character '/'" }, { "eth*", "bad character '*'" },
		{ " eth0", "bad character ' '" },
		{ "=^eth0", "bad character '^'" }, { "eth0\x01", "bad character 0x01" },
		{ "eth0\x7f", "bad character 0x7f" },
	};
	char longest[256], toolong[257], err[ERRLEN];
	struct config cfg;

	(void)state;
	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		accept_one("NCCL_SOCKET_IFNAME", ok[i], &cfg);
		assert_string_equal(cfg.socket_ifname, ok[i]);
		assert_string_equal(cfg.ib_hca, "");
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(parse_one("NCCL_SOCKET_IFNAME", bad[i].value, &cfg, err), -1);
		assert_contains(err, "NCCL_SOCKET_IFNAME='");
		assert_contains(err, IFNAME_FORM);
		assert_contains(err, bad[i].why);
	}
	reject_why("NCCL_SOCKET_IFNAME", "eth0,eth/1", IFNAME_FORM, "entry 2");

	memset(longest, 'e', sizeof(longest) - 1);
	longest[sizeof(longest) - 1] = '\0';
	accept_one("NCCL_SOCKET_IFNAME", longest, &cfg);
	assert_string_equal(cfg.socket_ifname, longest);
	memset(toolong, 'e', sizeof(toolong) - 1);
	toolong[sizeof(toolong) - 1] = '\0';
	assert_int_equal(parse_one("NCCL_SOCKET_IFNAME", toolong, &cfg, err), -1);
	assert_contains(err, "NCCL_SOCKET_IFNAME='eeeeeeee");
	assert_contains(err, "is too long");
}

/* ---- integers and enums ------------------------------------------------ */

static void test_int_vars(void **state)
{
	static const char *const bad[] = { "2x", "1.5", "0x2", "two", "--1", "1 2", "+" };
	static const char *const streams_range[] = { "0", "17", "-1", "-0", "99999999999999999999" };
	static const char *const channels_range[] = { "0", "65", "-64", "1000" };
	struct config cfg;

	(void)state;
	accept_one("NCCL_SYMMEM_STREAMS", "1", &cfg);
	assert_int_equal(cfg.streams, 1);
	accept_one("NCCL_SYMMEM_STREAMS", "16", &cfg);
	assert_int_equal(cfg.streams, 16);
	accept_one("NCCL_SYMMEM_STREAMS", " 8 ", &cfg);
	assert_int_equal(cfg.streams, 8);
	accept_one("NCCL_SYMMEM_STREAMS", "+3", &cfg);
	assert_int_equal(cfg.streams, 3);
	accept_one("NCCL_SYMMEM_STREAMS", "007", &cfg);
	assert_int_equal(cfg.streams, 7);
	accept_one("NCCL_SYMMEM_PASS_SM_CHANNELS", "1", &cfg);
	assert_int_equal(cfg.pass_sm_channels, 1);
	accept_one("NCCL_SYMMEM_PASS_SM_CHANNELS", "64", &cfg);
	assert_int_equal(cfg.pass_sm_channels, 64);
	assert_int_equal(cfg.streams, 1);
	assert_int_equal(cfg.phase_us, 200);
	int_bounds("NCCL_SYMMEM_COPY_DEPTH", offsetof(struct config, copy_depth), 1, 1024);
	assert_int_equal(cfg.batch, 16);
	int_bounds("NCCL_SYMMEM_BATCH", offsetof(struct config, batch), 1, 64);
	reject_why("NCCL_SYMMEM_BATCH", "16x", "an integer 1..64", "is not an integer");
	int_bounds("NCCL_SYMMEM_TRACE_US", offsetof(struct config, trace_us), 0, 60000000);
	int_bounds("NCCL_SYMMEM_PHASE_US", offsetof(struct config, phase_us), 0, 100000);
	assert_int_equal(cfg.ib_gid_index, -1);
	assert_int_equal(cfg.ib_timeout, 20);
	assert_int_equal(cfg.ib_retry, 7);
	reject_why("NCCL_SYMMEM_PHASE_US", "200us", "an integer 0..100000", "is not an integer");

	for (size_t i = 0; i < sizeof(streams_range) / sizeof(streams_range[0]); i++)
		reject_why("NCCL_SYMMEM_STREAMS", streams_range[i], "an integer 1..16", "is out of range");
	for (size_t i = 0; i < sizeof(channels_range) / sizeof(channels_range[0]); i++)
		reject_why("NCCL_SYMMEM_PASS_SM_CHANNELS", channels_range[i], "an integer 1..64",
			   "is out of range");
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		reject_why("NCCL_SYMMEM_STREAMS", bad[i], "an integer 1..16", "is not an integer");
		reject_why("NCCL_SYMMEM_PASS_SM_CHANNELS", bad[i], "an integer 1..64", "is not an integer");
	}
}

/* NCCL's IB integers: one form after another as NCCL's ncclLoadParam reads
 * it, never an error; what ibverbs cannot take keeps NCCL's default with a
 * warning; the ends of the ibverbs range (timeout 0 included) as given. */
static void nccl_int_cases(const char *name, size_t off, int lo, int hi, int def)
{
	static const struct {
		const char *value;
		int want;	/* INT_MIN: the default */
		const char *warn;
	} cases[] = {
		{ "0x5", 5, NULL }, { "5 # five", 5, NULL }, { "5x", 5, NULL }, { " 5", 5, NULL },
		{ "05", 5, NULL }, { "", -1000, NULL },
		{ "five", 0, "holds no number" }, { " ", 0, "holds no number" },
		{ "99999999999999999999", -1000, "does not fit 64 bits" },
	};
	struct config cfg;
	char value[32];

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int want = cases[i].want == -1000 ? def : cases[i].want;

		if (want > hi)
			continue;
		accept_nccl(name, cases[i].value, &cfg, cases[i].warn);
		if (field_int(&cfg, off) != want)
			fail_msg("%s='%s' gave %d, want %d", name, cases[i].value, field_int(&cfg, off),
				 want);
	}
	snprintf(value, sizeof(value), "%d", lo);
	accept_nccl(name, value, &cfg, NULL);
	assert_int_equal(field_int(&cfg, off), lo);
	snprintf(value, sizeof(value), "%d", hi);
	accept_nccl(name, value, &cfg, NULL);
	assert_int_equal(field_int(&cfg, off), hi);
	snprintf(value, sizeof(value), "%d", lo - 1);
	accept_nccl(name, value, &cfg, "the range ibverbs takes");
	assert_int_equal(field_int(&cfg, off), def);
	snprintf(value, sizeof(value), "%#x", hi + 1);
	accept_nccl(name, value, &cfg, "NCCL's default");
	assert_int_equal(field_int(&cfg, off), def);
}

static void test_nccl_ints(void **state)
{
	struct config cfg;
	struct kv two_bad[] = { { "NCCL_IB_SL", "16" }, { "NCCL_IB_TIMEOUT", "32" },
				{ NULL, NULL } };
	char err[ERRLEN];

	(void)state;
	nccl_int_cases("NCCL_IB_GID_INDEX", offsetof(struct config, ib_gid_index), -1, 255, -1);
	nccl_int_cases("NCCL_IB_TIMEOUT", offsetof(struct config, ib_timeout), 0, 31, 20);
	nccl_int_cases("NCCL_IB_RETRY_CNT", offsetof(struct config, ib_retry), 0, 7, 7);
	nccl_int_cases("NCCL_IB_SL", offsetof(struct config, ib_sl), 0, 15, 0);
	nccl_int_cases("NCCL_IB_TC", offsetof(struct config, ib_tc), 0, 255, 0);
	/* The review's cases: a site's hex traffic class, NCCL's hex timeout,
	 * ibverbs' "no retry timer". */
	accept_nccl("NCCL_IB_TC", "0x68", &cfg, NULL);
	assert_int_equal(cfg.ib_tc, 0x68);
	accept_nccl("NCCL_IB_TIMEOUT", "0x16", &cfg, NULL);
	assert_int_equal(cfg.ib_timeout, 22);
	accept_nccl("NCCL_IB_TIMEOUT", "0", &cfg, NULL);
	assert_int_equal(cfg.ib_timeout, 0);
	/* Every unusable value is named, in one line. */
	assert_int_equal(config_parse(&cfg, table_get, two_bad, err, sizeof(err)), 0);
	assert_contains(cfg.warnings, "NCCL_IB_SL='16'");
	assert_contains(cfg.warnings, "NCCL_IB_TIMEOUT='32'");
	assert_null(strchr(cfg.warnings, '\n'));
	assert_int_equal(cfg.ib_sl, 0);
	assert_int_equal(cfg.ib_timeout, 20);
}

/* cfg->warnings becomes one WARN line: the first sentence starts it,
 * each later one follows "; ", so the log reads as sentences and never
 * begins with a separator. */
static void test_nccl_warnings_joined(void **state)
{
	static const char first[] = "NCCL_IB_TIMEOUT='32'";
	struct kv two_bad[] = { { "NCCL_IB_TIMEOUT", "32" }, { "NCCL_IB_SL", "16" },
				{ NULL, NULL } };
	struct config cfg;
	char err[ERRLEN];

	(void)state;
	accept_nccl("NCCL_IB_SL", "16", &cfg, "outside 0..15");
	assert_int_equal(strncmp(cfg.warnings, "NCCL_IB_SL='16'", 15), 0);
	assert_lacks(cfg.warnings, "; ");

	assert_int_equal(config_parse(&cfg, table_get, two_bad, err, sizeof(err)), 0);
	assert_int_equal(strncmp(cfg.warnings, first, sizeof(first) - 1), 0);
	assert_contains(cfg.warnings, "NCCL's default 20; NCCL_IB_SL='16'");
}

static void test_backend(void **state)
{
	static const struct {
		const char *value;
		int want;
	} ok[] = {
		{ "auto", CONFIG_BACKEND_AUTO }, { "shm", CONFIG_BACKEND_SHM },
		{ "tcp", CONFIG_BACKEND_TCP }, { "ib", CONFIG_BACKEND_IB },
		{ "AUTO", CONFIG_BACKEND_AUTO }, { "Shm", CONFIG_BACKEND_SHM },
		{ "tCp", CONFIG_BACKEND_TCP }, { "IB", CONFIG_BACKEND_IB }, { " ib\n", CONFIG_BACKEND_IB },
	};
	static const char *const bad[] = { "rdma", "i b", "ibv", "0", "shm,tcp", "autox", "sh" };
	struct config cfg;

	(void)state;
	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		accept_one("NCCL_SYMMEM_BACKEND", ok[i].value, &cfg);
		assert_int_equal(cfg.backend, ok[i].want);
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		reject_why("NCCL_SYMMEM_BACKEND", bad[i], BACKEND_FORM, "is not a backend");
}

/* The helper's path is taken verbatim, but only as an absolute name: a
 * relative one would depend on each rank's working directory. */
static void test_copy_helper_path(void **state)
{
	static const char form[] = "an absolute file name, at most 255 characters";
	char longest[300], err[ERRLEN];
	struct config cfg;

	(void)state;
	accept_one("NCCL_SYMMEM_COPY_HELPER_PATH", "/usr/libexec/symmem-copyd", &cfg);
	assert_string_equal(cfg.copy_helper_path, "/usr/libexec/symmem-copyd");
	reject_why("NCCL_SYMMEM_COPY_HELPER_PATH", "symmem-copyd", form,
		   "is not an absolute file name");
	reject_why("NCCL_SYMMEM_COPY_HELPER_PATH", "./build/symmem-copyd", form,
		   "is not an absolute file name");
	memset(longest, 'a', sizeof(longest) - 1);
	longest[0] = '/';
	longest[sizeof(longest) - 1] = '\0';
	/* Too long to be quoted whole: only the reason is checked. */
	assert_int_equal(parse_one("NCCL_SYMMEM_COPY_HELPER_PATH", longest, &cfg, err), -1);
	assert_contains(err, "is too long (299 characters)");
	accept_one("NCCL_SYMMEM_COPY_HELPER", "no", &cfg);
	assert_int_equal(cfg.copy_helper, 0);
}

/* The inner net plugin is named as NCCL_NET_PLUGIN is (dlopen resolves
 * it): a bare name or a path, relative too, but never with whitespace or a
 * control character in it, which can only be a typo. */
static void test_inner_net_name(void **state)
{
	static const char form[] =
		"a library name or file name without whitespace, at most 255 characters";
	static const char *const ok[] = { "ofi", "libnccl-net.so", "/opt/ofi/lib/libnccl-net-ofi.so",
					  "./libnccl-net-standin.so" };
	static const char why[] = "has whitespace or a control character in it";
	char longest[300], err[ERRLEN];
	struct config cfg;

	(void)state;
	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		accept_one("NCCL_SYMMEM_INNER_NET", ok[i], &cfg);
		assert_string_equal(cfg.inner_net, ok[i]);
	}
	reject_why("NCCL_SYMMEM_INNER_NET", "libnccl-net.so ", form, why);
	reject_why("NCCL_SYMMEM_INNER_NET", "lib nccl.so", form, why);
	reject_why("NCCL_SYMMEM_INNER_NET", "", form, "is empty");
	memset(longest, 'a', sizeof(longest) - 1);
	longest[sizeof(longest) - 1] = '\0';
	assert_int_equal(parse_one("NCCL_SYMMEM_INNER_NET", longest, &cfg, err), -1);
	assert_contains(err, "is too long (299 characters)");
}

/* ---- cross-checks and error reporting ---------------------------------- */

static void test_cross_check_pool(void **state)
{
	struct kv env[3] = { { NULL, NULL } };
	struct config cfg;
	char err[ERRLEN];

	(void)state;
	/* Default pool (64 MiB) above a set cap. */
	assert_int_equal(parse_one("NCCL_CUMEM_MAX_SIZE", "1M", &cfg, err), -1);
	assert_contains(err, "NCCL_CUMEM_MAX_SIZE=1MiB (set)");
	assert_contains(err, "NCCL_CUMEM_POOL_SIZE=64MiB (default)");
	assert_contains(err, "accepted: NCCL_CUMEM_MAX_SIZE >= NCCL_CUMEM_POOL_SIZE");
	assert_null(strchr(err, '\n'));

	/* Set pool above the default cap (4 GiB). */
	assert_int_equal(parse_one("NCCL_CUMEM_POOL_SIZE", "8G", &cfg, err), -1);
	assert_contains(err, "NCCL_CUMEM_MAX_SIZE=4GiB (default)");
	assert_contains(err, "NCCL_CUMEM_POOL_SIZE=8GiB (set)");

	env[0] = (struct kv){ "NCCL_CUMEM_POOL_SIZE", "128M" };
	env[1] = (struct kv){ "NCCL_CUMEM_MAX_SIZE", "128MiB" };
	assert_int_equal(config_parse(&cfg, table_get, env, err, sizeof(err)), 0);
	assert_true(cfg.pool_size == cfg.pool_max);

	env[1] = (struct kv){ "NCCL_CUMEM_MAX_SIZE", "134217727" };
	assert_int_equal(config_parse(&cfg, table_get, env, err, sizeof(err)), -1);
	assert_contains(err, "NCCL_CUMEM_MAX_SIZE=134217727 (set)");
	assert_contains(err, "NCCL_CUMEM_POOL_SIZE=128MiB (set)");
}

static void test_cross_check_ring(void **state)
{
	struct kv env[3] = { { NULL, NULL } };
	struct config cfg;
	char err[ERRLEN];

	(void)state;
	/* Set chunk above the default ring (4 MiB). */
	assert_int_equal(parse_one("NCCL_SYMMEM_CHUNK_SIZE", "8M", &cfg, err), -1);
	assert_contains(err, "NCCL_SYMMEM_HOST_RING_SIZE=4MiB (default)");
	assert_contains(err, "NCCL_SYMMEM_CHUNK_SIZE=8MiB (set)");
	assert_contains(err, "accepted: NCCL_SYMMEM_HOST_RING_SIZE >= NCCL_SYMMEM_CHUNK_SIZE");

	/* Set ring below the default chunk (512 KiB). */
	assert_int_equal(parse_one("NCCL_SYMMEM_HOST_RING_SIZE", "256K", &cfg, err), -1);
	assert_contains(err, "NCCL_SYMMEM_HOST_RING_SIZE=256KiB (set)");
	assert_contains(err, "NCCL_SYMMEM_CHUNK_SIZE=512KiB (default)");

	env[0] = (struct kv){ "NCCL_SYMMEM_CHUNK_SIZE", "4M" };
	assert_int_equal(config_parse(&cfg, table_get, env, err, sizeof(err)), 0);
	assert_true(cfg.chunk_size == cfg.host_ring_size);

	env[1] = (struct kv){ "NCCL_SYMMEM_HOST_RING_SIZE", "64K" };
	env[0] = (struct kv){ "NCCL_SYMMEM_CHUNK_SIZE", "128K" };
	assert_int_equal(config_parse(&cfg, table_get, env, err, sizeof(err)), -1);
	assert_contains(err, "NCCL_SYMMEM_HOST_RING_SIZE");
	assert_contains(err, "NCCL_SYMMEM_CHUNK_SIZE");
}

/* NCCL's own variables, which NCCL reads as unset when empty. */
static int nccl_owned(const char *name)
{
	static const char *const names[] = {
		"NCCL_CUMEM_ENABLE", "NCCL_CUMEM_HOST_ENABLE", "NCCL_IB_HCA", "NCCL_IB_GID_INDEX",
		"NCCL_IB_TIMEOUT", "NCCL_IB_RETRY_CNT", "NCCL_IB_SL", "NCCL_IB_TC",
		"NCCL_SOCKET_IFNAME",
	};

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (!strcmp(names[i], name))
			return 1;
	return 0;
}

/* An empty value is an error for the plugin's own variables, and unset
 * (the default, described as such) for NCCL's. */
static void test_empty_values(void **state)
{
	static const char *const empties[] = { "", " ", "\t\n" };
	struct config cfg, def;
	char err[ERRLEN], quoted[16];
	int nccl = 0;

	(void)state;
	assert_int_equal(config_parse(&def, table_get, NULL, err, sizeof(err)), 0);
	for (size_t i = 0; i < NNAMES; i++) {
		if (nccl_owned(all_names[i])) {
			struct kv env[] = { { all_names[i], "" }, { NULL, NULL } };

			nccl++;
			accept_nccl(all_names[i], "", &cfg, NULL);
			assert_memory_equal(&cfg, &def, sizeof(cfg));
			describe_line_is_default(env, all_names[i]);
			continue;
		}
		for (size_t e = 0; e < sizeof(empties) / sizeof(empties[0]); e++) {
			if (parse_one(all_names[i], empties[e], &cfg, err) != -1)
				fail_msg("%s='%s' accepted", all_names[i], empties[e]);
			assert_contains(err, all_names[i]);
			assert_contains(err, "is empty (accepted: ");
			assert_null(strchr(err, '\n'));
		}
		assert_int_equal(parse_one(all_names[i], "", &cfg, err), -1);
		snprintf(quoted, sizeof(quoted), "='' ");
		assert_contains(err, quoted);
	}
	assert_int_equal(nccl, 9);
}

static void test_first_error_wins(void **state)
{
	struct kv two_bad[] = {
		{ "NCCL_SYMMEM_STREAMS", "0" }, { "NCCL_PASS_SM", "maybe" }, { NULL, NULL },
	};
	struct kv bad_and_cross[] = {
		{ "NCCL_CUMEM_MAX_SIZE", "1M" }, { "NCCL_SYMMEM_BACKEND", "rdma" }, { NULL, NULL },
	};
	struct config cfg;
	char err[ERRLEN];

	(void)state;
	/* One message about one variable, not a pile-up. */
	assert_int_equal(config_parse(&cfg, table_get, two_bad, err, sizeof(err)), -1);
	assert_true((strstr(err, "NCCL_SYMMEM_STREAMS") != NULL) !=
		    (strstr(err, "NCCL_PASS_SM") != NULL));

	/* A malformed value is reported before any cross-check. */
	assert_int_equal(config_parse(&cfg, table_get, bad_and_cross, err, sizeof(err)), -1);
	assert_contains(err, "NCCL_SYMMEM_BACKEND='rdma'");
	assert_lacks(err, "NCCL_CUMEM_MAX_SIZE");
}

static void test_error_one_line(void **state)
{
	struct config cfg;
	char err[ERRLEN], big[2000];

	(void)state;
	/* Control characters in a value must not break the message. */
	assert_int_equal(parse_one("NCCL_PASS_SM", "ma\nybe\r", &cfg, err), -1);
	assert_null(strchr(err, '\n'));
	assert_null(strchr(err, '\r'));
	assert_contains(err, "NCCL_PASS_SM='ma?ybe?'");
	assert_contains(err, BOOL_FORM);
	/* DEL is a control character too: a terminal would act on it. */
	assert_int_equal(parse_one("NCCL_PASS_SM", "on\x7f", &cfg, err), -1);
	assert_null(strchr(err, '\x7f'));
	assert_contains(err, "NCCL_PASS_SM='on?'");

	/* A huge value is cut, but the name and accepted form survive. */
	memset(big, '7', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	assert_int_equal(parse_one("NCCL_CUMEM_GROWTH_FACTOR", big, &cfg, err), -1);
	assert_contains(err, "NCCL_CUMEM_GROWTH_FACTOR='7777777777");
	assert_contains(err, "...'");
	assert_contains(err, FACTOR_FORM);
	assert_true(strlen(err) < 400);
}

static void test_error_buffer(void **state)
{
	struct config cfg;
	char err[16], full[ERRLEN];

	(void)state;
	memset(err, 'x', sizeof(err));
	assert_int_equal(parse_one("NCCL_PASS_SM", "maybe", &cfg, full), -1);
	{
		struct kv env[] = { { "NCCL_PASS_SM", "maybe" }, { NULL, NULL } };

		assert_int_equal(config_parse(&cfg, table_get, env, err, sizeof(err)), -1);
		assert_int_equal(strlen(err), sizeof(err) - 1);
		assert_memory_equal(err, full, sizeof(err) - 1);

		/* No buffer at all is allowed too. */
		assert_int_equal(config_parse(&cfg, table_get, env, NULL, 0), -1);
		err[0] = 'x';
		assert_int_equal(config_parse(&cfg, table_get, env, err, 0), -1);
		assert_int_equal(err[0], 'x');
	}
}

/* ---- describe ---------------------------------------------------------- */

static void test_describe_set_only(void **state)
{
	struct kv env[] = {
		{ "NCCL_PASS_SM", "yes" },
		{ "NCCL_CUMEM_POOL_SIZE", "128M" },
		{ "NCCL_SYMMEM_BACKEND", "TCP" },
		{ "NCCL_CUMEM_GROWTH_FACTOR", "1.5" },
		{ "NCCL_CUMEM_ENABLE", "0" },
		{ "NCCL_IB_HCA", "^=mlx5_0:1" },
		{ "NOT_OURS", "1" },
		{ NULL, NULL },
	};
	struct kv none[] = { { NULL, NULL } };
	struct config cfg;
	struct lines l = { 0 };
	char err[ERRLEN];

	(void)state;
	assert_int_equal(config_parse(&cfg, table_get, env, err, sizeof(err)), 0);
	config_describe(&cfg, table_get, env, 0, collect, &l);
	assert_int_equal(l.n, 6);
	assert_line(&l, "NCCL_PASS_SM=1 (set)");
	assert_line(&l, "NCCL_CUMEM_POOL_SIZE=128MiB (set)");
	assert_line(&l, "NCCL_SYMMEM_BACKEND=tcp (set)");
	assert_line(&l, "NCCL_CUMEM_GROWTH_FACTOR=1.5 (set)");
	assert_line(&l, "NCCL_CUMEM_ENABLE=0 (set)");
	assert_line(&l, "NCCL_IB_HCA=^=mlx5_0:1 (set)");

	/* Nothing set, nothing listed. */
	assert_int_equal(config_parse(&cfg, table_get, none, err, sizeof(err)), 0);
	l.n = 0;
	config_describe(&cfg, table_get, none, 0, collect, &l);
	assert_int_equal(l.n, 0);
}

static void test_describe_all(void **state)
{
	static const char *const want[] = {
		"NCCL_PASS_SM=0 (default)",
		"NCCL_CUMEM_ENABLE=-1 (default)",
		"NCCL_CUMEM_HOST_ENABLE=-1 (default)",
		"NCCL_CUMEM_POOL_SIZE=64MiB (default)",
		"NCCL_CUMEM_MAX_SIZE=4GiB (default)",
		"NCCL_CUMEM_TRIM_THRESHOLD=256MiB (default)",
		"NCCL_CUMEM_PREALLOC=0 (default)",
		"NCCL_CUMEM_GROWTH_FACTOR=2 (default)",
		"NCCL_CUMEM_MONITOR=0 (default)",
		"NCCL_CUMEM_MONITOR_INTERVAL=10 (default)",
		"NCCL_SM_FREE_VERBOSE=0 (default)",
		"NCCL_ZERO_COPY=1 (default)",
		"NCCL_DMA_ENABLE=1 (default)",
		"NCCL_DIRECT_PATH=1 (default)",
		"NCCL_ENABLE_FAULT_TOLERANCE=0 (default)",
		"NCCL_IB_HCA= (default)",
		"NCCL_IB_GID_INDEX=-1 (default)",
		"NCCL_IB_TIMEOUT=20 (default)",
		"NCCL_IB_RETRY_CNT=7 (default)",
		"NCCL_IB_SL=0 (default)",
		"NCCL_IB_TC=0 (default)",
		"NCCL_SOCKET_IFNAME= (default)",
		"NCCL_SYMMEM_STREAMS=1 (default)",
		"NCCL_SYMMEM_CHUNK_SIZE=512KiB (default)",
		"NCCL_SYMMEM_SPLIT_SIZE=0 (default)",
		"NCCL_SYMMEM_COPY_DEPTH=2 (default)",
		"NCCL_SYMMEM_MERGE_SIZE=64MiB (default)",
		"NCCL_SYMMEM_BATCH=16 (default)",
		"NCCL_SYMMEM_PHASE_US=200 (default)",
		"NCCL_SYMMEM_LANDING_WORDS=1 (default)",
		"NCCL_SYMMEM_HOST_IN_PLACE=0 (default)",
		"NCCL_SYMMEM_HOST_RING_SIZE=4MiB (default)",
		"NCCL_SYMMEM_CONNECT_TIMEOUT=120 (default)",
		"NCCL_SYMMEM_STALL_REPORT=60 (default)",
		"NCCL_SYMMEM_COPY_TIMEOUT=60 (default)",
		"NCCL_SYMMEM_TRACE_US=0 (default)",
		"NCCL_SYMMEM_BACKEND=auto (default)",
		"NCCL_SYMMEM_PASS_SM_CHANNELS=16 (default)",
		"NCCL_SYMMEM_LL128_CHUNK=512KiB (default)",
		"NCCL_SYMMEM_LL_MAX=32KiB (default)",
		"NCCL_SYMMEM_NCCL_DEFAULTS=1 (default)",
		"NCCL_SYMMEM_COPY_HELPER=1 (default)",
		"NCCL_SYMMEM_COPY_HELPER_PATH= (default)",
		"NCCL_SYMMEM_HELPER_ALL_GPUS=1 (default)",
		"NCCL_SYMMEM_COLL_REGISTER=-1 (default)",
		"NCCL_SYMMEM_INNER_NET= (default)",
	};
	struct kv none[] = { { NULL, NULL } };
	struct kv one[] = { { "NCCL_SYMMEM_STREAMS", "4" }, { NULL, NULL } };
	struct config cfg;
	struct lines l = { 0 };
	char err[ERRLEN];

	(void)state;
	assert_int_equal(sizeof(want) / sizeof(want[0]), NNAMES);
	assert_int_equal(config_parse(&cfg, table_get, none, err, sizeof(err)), 0);
	config_describe(&cfg, table_get, none, 1, collect, &l);
	assert_int_equal(l.n, NNAMES);
	for (size_t i = 0; i < NNAMES; i++)
		assert_line(&l, want[i]);

	/* A set variable says so among the defaults. */
	assert_int_equal(config_parse(&cfg, table_get, one, err, sizeof(err)), 0);
	l.n = 0;
	config_describe(&cfg, table_get, one, 1, collect, &l);
	assert_int_equal(l.n, NNAMES);
	assert_line(&l, "NCCL_SYMMEM_STREAMS=4 (set)");
	assert_int_equal(count_line(&l, "NCCL_SYMMEM_STREAMS=1 (default)"), 0);
	assert_line(&l, "NCCL_SYMMEM_PASS_SM_CHANNELS=16 (default)");
}

static void test_describe_size_format(void **state)
{
	static const struct {
		const char *set;
		const char *shown;
	} cases[] = {
		{ "0", "0" }, { "1", "1" }, { "1000", "1000" }, { "1536", "1536" }, { "4097", "4097" },
		{ "1K", "1KiB" }, { "1024", "1KiB" }, { "1025K", "1025KiB" }, { "1536K", "1536KiB" },
		{ "1048576K", "1GiB" }, { "1536M", "1536MiB" }, { "3G", "3GiB" }, { "1T", "1TiB" },
		{ "2048T", "2048TiB" }, { "16777215T", "16777215TiB" },
		{ "18446744073709551615", "18446744073709551615" },
	};
	struct kv env[3] = {
		{ "NCCL_CUMEM_MAX_SIZE", "18446744073709551615" },
		{ "NCCL_CUMEM_POOL_SIZE", NULL },
		{ NULL, NULL },
	};
	char got[300];

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		uint64_t a, b;

		env[1].value = cases[i].set;
		describe_value(env, "NCCL_CUMEM_POOL_SIZE", got, sizeof(got));
		if (strcmp(got, cases[i].shown) != 0)
			fail_msg("'%s' shown as '%s', want '%s'", cases[i].set, got, cases[i].shown);
		/* What is printed parses back to the same number. */
		assert_int_equal(config_parse_size(cases[i].set, &a), 0);
		assert_int_equal(config_parse_size(got, &b), 0);
		assert_true(a == b);
	}
}

/* Everything describe prints, fed back in, gives the same configuration. */
static void test_describe_roundtrip(void **state)
{
	struct kv env[] = {
		{ "NCCL_PASS_SM", "on" },
		{ "NCCL_CUMEM_ENABLE", "5" },
		{ "NCCL_CUMEM_HOST_ENABLE", "false" },
		{ "NCCL_CUMEM_POOL_SIZE", "96 MB" },
		{ "NCCL_CUMEM_MAX_SIZE", "1T" },
		{ "NCCL_CUMEM_TRIM_THRESHOLD", "12345" },
		{ "NCCL_CUMEM_PREALLOC", "YES" },
		{ "NCCL_CUMEM_GROWTH_FACTOR", "1.0000001" },
		{ "NCCL_CUMEM_MONITOR", "1" },
		{ "NCCL_CUMEM_MONITOR_INTERVAL", "0.25" },
		{ "NCCL_SM_FREE_VERBOSE", "true" },
		{ "NCCL_ZERO_COPY", "0" },
		{ "NCCL_DMA_ENABLE", "off" },
		{ "NCCL_DIRECT_PATH", "no" },
		{ "NCCL_ENABLE_FAULT_TOLERANCE", "On" },
		{ "NCCL_IB_HCA", "^mlx5_0:1,mlx5_1" },
		{ "NCCL_IB_GID_INDEX", "3" },
		{ "NCCL_IB_TIMEOUT", "22" },
		{ "NCCL_IB_RETRY_CNT", "0" },
		{ "NCCL_IB_SL", "15" },
		{ "NCCL_IB_TC", "106" },
		{ "NCCL_SOCKET_IFNAME", "=eth0,ib" },
		{ "NCCL_SYMMEM_STREAMS", "5" },
		{ "NCCL_SYMMEM_CHUNK_SIZE", "64k" },
		{ "NCCL_SYMMEM_SPLIT_SIZE", "32M" },
		{ "NCCL_SYMMEM_COPY_DEPTH", "1024" },
		{ "NCCL_SYMMEM_MERGE_SIZE", "0" },
		{ "NCCL_SYMMEM_BATCH", "1" },
		{ "NCCL_SYMMEM_PHASE_US", "0" },
		{ "NCCL_SYMMEM_LANDING_WORDS", "0" },
		{ "NCCL_SYMMEM_HOST_IN_PLACE", "on" },
		{ "NCCL_SYMMEM_HOST_RING_SIZE", "8 MiB" },
		{ "NCCL_SYMMEM_CONNECT_TIMEOUT", "86399.9999" },
		{ "NCCL_SYMMEM_STALL_REPORT", "2.5" },
		{ "NCCL_SYMMEM_COPY_TIMEOUT", "0.75" },
		{ "NCCL_SYMMEM_TRACE_US", "2000" },
		{ "NCCL_SYMMEM_BACKEND", "SHM" },
		{ "NCCL_SYMMEM_PASS_SM_CHANNELS", "64" },
		{ "NCCL_SYMMEM_LL128_CHUNK", "96K" },
		{ "NCCL_SYMMEM_LL_MAX", "48k" },
		{ "NCCL_SYMMEM_NCCL_DEFAULTS", "0" },
		{ "NCCL_SYMMEM_COPY_HELPER", "off" },
		{ "NCCL_SYMMEM_COPY_HELPER_PATH", "/opt/symmem/libexec/symmem-copyd" },
		{ "NCCL_SYMMEM_HELPER_ALL_GPUS", "0" },
		{ "NCCL_SYMMEM_COLL_REGISTER", "1" },
		{ "NCCL_SYMMEM_INNER_NET", "libnccl-net-ofi.so" },
		{ NULL, NULL },
	};
	struct kv back[NNAMES + 1];
	char store[NNAMES][512];
	struct config a, b;
	struct lines l = { 0 };
	char err[ERRLEN];

	(void)state;
	assert_int_equal(sizeof(env) / sizeof(env[0]), NNAMES + 1);
	assert_int_equal(config_parse(&a, table_get, env, err, sizeof(err)), 0);
	config_describe(&a, table_get, env, 0, collect, &l);
	assert_int_equal(l.n, NNAMES);
	for (int i = 0; i < l.n; i++) {
		char *eq, *tail;

		tail = strstr(l.line[i], " (set)");
		assert_non_null(tail);
		strcpy(store[i], l.line[i]);
		eq = strchr(store[i], '=');
		assert_non_null(eq);
		*eq = '\0';
		store[i][tail - l.line[i]] = '\0';
		back[i] = (struct kv){ store[i], eq + 1 };
	}
	back[l.n] = (struct kv){ NULL, NULL };

	if (config_parse(&b, table_get, back, err, sizeof(err)) != 0)
		fail_msg("described output does not parse: %s", err);
	assert_int_equal(a.pass_sm, b.pass_sm);
	assert_int_equal(a.cumem_enable, CONFIG_ON);
	assert_int_equal(a.cumem_enable, b.cumem_enable);
	assert_int_equal(a.cumem_host_enable, b.cumem_host_enable);
	assert_true(a.pool_size == b.pool_size && a.pool_size == 96ULL << 20);
	assert_true(a.pool_max == b.pool_max);
	assert_true(a.pool_trim == b.pool_trim && a.pool_trim == 12345);
	assert_int_equal(a.pool_prealloc, b.pool_prealloc);
	assert_true(a.pool_growth == b.pool_growth && a.pool_growth == 1.0000001);
	assert_int_equal(a.monitor, b.monitor);
	assert_true(a.monitor_interval == b.monitor_interval);
	assert_int_equal(a.verbose, b.verbose);
	assert_int_equal(a.zero_copy, b.zero_copy);
	assert_int_equal(a.dma_enable, b.dma_enable);
	assert_int_equal(a.direct_path, b.direct_path);
	assert_int_equal(a.fault_tolerance, b.fault_tolerance);
	assert_string_equal(a.ib_hca, b.ib_hca);
	assert_string_equal(a.socket_ifname, b.socket_ifname);
	assert_int_equal(a.streams, b.streams);
	assert_true(a.chunk_size == b.chunk_size);
	assert_true(a.host_ring_size == b.host_ring_size);
	assert_true(a.connect_timeout == b.connect_timeout && a.connect_timeout == 86399.9999);
	assert_true(a.stall_report == b.stall_report && a.stall_report == 2.5);
	assert_true(a.copy_timeout == b.copy_timeout && a.copy_timeout == 0.75);
	assert_true(a.trace_us == b.trace_us && a.trace_us == 2000);
	assert_int_equal(a.backend, b.backend);
	assert_int_equal(a.pass_sm_channels, b.pass_sm_channels);
}

/* ---- the real environment, in children --------------------------------- */

static int child_unknown_vars(void)
{
	char out[256], small[23], tiny[5];
	int n;

	if (clearenv() != 0)
		return 1;
	/* clearenv() may leave environ NULL. */
	if (config_unknown_vars(out, sizeof(out)) != 0 || out[0] != '\0')
		return 2;

	setenv("NCCL_SYMMEM_STREAMS", "4", 1);		/* known */
	setenv("NCCL_SYMMEM_BACKEND", "shm", 1);	/* known */
	setenv("NCCL_SYMMEM_STREAM", "4", 1);		/* typo */
	setenv("NCCL_SYMMEM_CHUNKSIZE", "1M=2", 1);	/* typo, '=' in value */
	setenv("NCCL_SYMMEMX", "1", 1);			/* not under the prefix */
	setenv("NCCL_PASS_SM", "1", 1);			/* known, other prefix */
	setenv("XNCCL_SYMMEM_FOO", "1", 1);		/* prefix not at the start */
	setenv("nccl_symmem_streamz", "1", 1);		/* names are case-sensitive */
	/* The plugins' notes of what they set, which a child process
	 * inherits: not the user's, so never reported as typos. */
	setenv("NCCL_SYMMEM_NCCL_DEFAULTS_SET", "NCCL_PROTO=^LL", 1);
	setenv("NCCL_SYMMEM_ENV_PLUGIN_SET", "NCCL_NET=symmem", 1);

	n = config_unknown_vars(out, sizeof(out));
	if (n != 2) {
		fprintf(stderr, "count %d: '%s'\n", n, out);
		return 3;
	}
	if (strcmp(out, "NCCL_SYMMEM_STREAM NCCL_SYMMEM_CHUNKSIZE") != 0 &&
	    strcmp(out, "NCCL_SYMMEM_CHUNKSIZE NCCL_SYMMEM_STREAM") != 0) {
		fprintf(stderr, "out '%s'\n", out);
		return 4;
	}

	/* Room for one name only: whole names, never a torn one. */
	if (config_unknown_vars(small, sizeof(small)) != 2)
		return 5;
	if (strcmp(small, "NCCL_SYMMEM_STREAM") != 0 && strcmp(small, "NCCL_SYMMEM_CHUNKSIZE") != 0) {
		fprintf(stderr, "small '%s'\n", small);
		return 6;
	}
	if (config_unknown_vars(tiny, sizeof(tiny)) != 2 || tiny[0] != '\0')
		return 7;
	if (config_unknown_vars(NULL, 0) != 2)
		return 8;

	/* Exactly full: the name and its NUL fit, one byte less and nothing
	 * is written; the byte past `outlen` is never touched. */
	unsetenv("NCCL_SYMMEM_CHUNKSIZE");
	memset(out, '#', sizeof(out));
	if (config_unknown_vars(out, 19) != 1 || strcmp(out, "NCCL_SYMMEM_STREAM") != 0 ||
	    out[19] != '#')
		return 9;
	memset(out, '#', sizeof(out));
	if (config_unknown_vars(out, 18) != 1 || out[0] != '\0' || out[18] != '#')
		return 10;

	unsetenv("NCCL_SYMMEM_STREAM");
	if (config_unknown_vars(out, sizeof(out)) != 0 || out[0] != '\0')
		return 11;

	/* A fixed environ, for a known order: once a long name does not fit,
	 * a shorter one after it is not written either.  Also an entry with
	 * no '=' and a known name whose value looks like a variable. */
	{
		static char e0[] = "NCCL_SYMMEM_A_VERY_LONG_TYPO=1";
		static char e1[] = "NCCL_SYMMEM_X=1";
		static char e2[] = "NCCL_SYMMEM_NOEQ";
		static char e3[] = "NCCL_SYMMEM_STREAMS=NCCL_SYMMEM_Y";
		static char *fake[] = { e0, e1, e2, e3, NULL };

		environ = fake;
		if (config_unknown_vars(out, 20) != 3 || out[0] != '\0')
			return 12;
		if (config_unknown_vars(out, sizeof(out)) != 3 ||
		    strcmp(out, "NCCL_SYMMEM_A_VERY_LONG_TYPO NCCL_SYMMEM_X NCCL_SYMMEM_NOEQ") != 0)
			return 13;
	}
	return 0;
}

static void test_unknown_vars(void **state)
{
	(void)state;
	assert_int_equal(run_in_child(child_unknown_vars), 0);
}

static void *get_from_thread(void *arg)
{
	(void)arg;
	return (void *)config_get();
}

static int child_config_get_ok(void)
{
	const struct config *c;
	pthread_t t[8];
	void *r[8];

	if (clearenv() != 0)
		return 1;
	setenv("NCCL_SYMMEM_STREAMS", "4", 1);
	setenv("NCCL_CUMEM_POOL_SIZE", "1G", 1);
	setenv("NCCL_CUMEM_MAX_SIZE", "8G", 1);
	setenv("NCCL_SYMMEM_BACKEND", "ib", 1);
	setenv("NCCL_IB_HCA", "^mlx5_1:1", 1);

	/* First use races from several threads: one parse, one answer. */
	for (int i = 0; i < 8; i++) {
		if (pthread_create(&t[i], NULL, get_from_thread, NULL) != 0)
			return 2;
	}
	for (int i = 0; i < 8; i++) {
		if (pthread_join(t[i], &r[i]) != 0)
			return 3;
	}
	c = config_get();
	if (!c)
		return 4;
	for (int i = 0; i < 8; i++) {
		if (r[i] != c)
			return 5;
	}
	if (c->streams != 4 || c->pool_size != 1ULL << 30 || c->pool_max != 8ULL << 30 ||
	    c->backend != CONFIG_BACKEND_IB || strcmp(c->ib_hca, "^mlx5_1:1") != 0)
		return 6;
	/* Untouched variables keep their defaults. */
	if (c->pass_sm_channels != 16 || c->zero_copy != 1 || c->cumem_enable != CONFIG_AUTO)
		return 7;
	if (!config_error() || config_error()[0] != '\0')
		return 8;

	/* Parsed once: later changes to the environment are not seen. */
	setenv("NCCL_SYMMEM_STREAMS", "8", 1);
	setenv("NCCL_SYMMEM_BACKEND", "banana", 1);
	if (config_get() != c || c->streams != 4)
		return 9;
	return 0;
}

static void test_config_get_ok(void **state)
{
	(void)state;
	assert_int_equal(run_in_child(child_config_get_ok), 0);
}

static int child_config_get_error(void)
{
	const char *e;

	if (clearenv() != 0)
		return 1;
	setenv("NCCL_SYMMEM_STREAMS", "99", 1);

	/* The reason is available even before config_get() is called. */
	e = config_error();
	if (!e || !strstr(e, "NCCL_SYMMEM_STREAMS='99'") || !strstr(e, "1..16")) {
		fprintf(stderr, "error '%s'\n", e ? e : "(null)");
		return 2;
	}
	if (config_get() != NULL)
		return 3;
	/* And the failure sticks: the environment is read once. */
	setenv("NCCL_SYMMEM_STREAMS", "4", 1);
	if (config_get() != NULL || !strstr(config_error(), "'99'"))
		return 4;
	return 0;
}

static void test_config_get_error(void **state)
{
	(void)state;
	assert_int_equal(run_in_child(child_config_get_error), 0);
}

static int child_config_get_defaults(void)
{
	const struct config *c;

	if (clearenv() != 0)
		return 1;
	c = config_get();
	if (!c)
		return 2;
	if (c->streams != 1 || c->pool_size != 64ULL << 20 || c->chunk_size != 512ULL << 10 ||
	    c->connect_timeout != 120.0 || c->ib_hca[0] != '\0' || c->dma_enable != 1)
		return 3;
	return 0;
}

static void test_config_get_defaults(void **state)
{
	(void)state;
	assert_int_equal(run_in_child(child_config_get_defaults), 0);
}

static void unset_channel_defaults(void)
{
	unsetenv("NCCL_MIN_NCHANNELS");
	unsetenv("NCCL_NCHANNELS_PER_NET_PEER");
	unsetenv("NCCL_BUFFSIZE");
	unsetenv("NCCL_P2P_NET_CHUNKSIZE");
	unsetenv("NCCL_THREAD_THRESHOLDS");
	unsetenv("NCCL_GRAPH_REGISTER");
	unsetenv("NCCL_ALGO");
	unsetenv("NCCL_SYMMEM_NCCL_DEFAULTS_SET");
}

/* A default configuration and none of the variables the plugin may set
 * for NCCL (nor NCCL_P2P_DISABLE, which decides some of them). */
static void defaults_start(struct config *cfg)
{
	char err[ERRLEN];
	struct kv none[] = { { NULL, NULL } };

	assert_int_equal(config_parse(cfg, table_get, none, err, sizeof(err)), 0);
	unsetenv("NCCL_NET_GDR_LEVEL");
	unsetenv("NCCL_PROTO");
	unsetenv("NCCL_P2P_DISABLE");
	unset_channel_defaults();
}

/* Leaves none of them set for the next test. */
static void defaults_end(void)
{
	unset_channel_defaults();
	unsetenv("NCCL_NET_GDR_LEVEL");
	unsetenv("NCCL_PROTO");
	unsetenv("NCCL_P2P_DISABLE");
}

struct applied {
	int calls, set;
	char last[64];
	char proto[64];		/* what NCCL_PROTO was reported as */
	char proto_why[512];	/* and why, "" for none */
};

/* A default set comes with why; one left alone only with why not. */
static void note_default(const char *name, const char *value, int applied, const char *why,
			 void *arg)
{
	struct applied *a = arg;

	if (applied)
		assert_non_null(why);
	if (strcmp(name, "NCCL_PROTO") == 0)
		snprintf(a->proto_why, sizeof(a->proto_why), "%s", why ? why : "");
	else if (!applied)
		assert_null(why);
	a->calls++;
	a->set += applied;
	snprintf(a->last, sizeof(a->last), "%s", value);
	if (strcmp(name, "NCCL_PROTO") == 0)
		snprintf(a->proto, sizeof(a->proto), "%s", value);
}

/* The NCCL variables the GPU path needs are set only where the user left
 * them unset, and not at all with NCCL_SYMMEM_NCCL_DEFAULTS=0. */
static void test_nccl_defaults(void **state)
{
	struct config cfg;
	struct applied a = { 0 };

	(void)state;
	defaults_start(&cfg);
	cfg.nccl_defaults = 0;
	assert_int_equal(config_apply_nccl_defaults(&cfg, 0, note_default, &a), 0);
	assert_null(getenv("NCCL_NET_GDR_LEVEL"));
	assert_null(getenv("NCCL_PROTO"));
	assert_int_equal(a.set, 0);
	assert_int_equal(a.calls, 8);
	assert_string_equal(a.last, "(unset)");

	/* A job that uses the plugin between hosts only (P2P on) gets
	 * nothing: any NCCL_PROTO would force LL128 onto its intra-host
	 * paths, past NCCL's own safety rule, and NCCL's own host staging
	 * beat GPU buffers through the plugin's TCP slots. */
	memset(&a, 0, sizeof(a));
	cfg.nccl_defaults = 1;
	assert_int_equal(config_apply_nccl_defaults(&cfg, 0, note_default, &a), 0);
	assert_null(getenv("NCCL_NET_GDR_LEVEL"));
	assert_null(getenv("NCCL_PROTO"));
	assert_string_equal(a.proto, "(unset)");
	assert_int_equal(a.set, 0);
	assert_int_equal(a.calls, 8);

	/* ... unless NCCL_PASS_SM=1 wants its registered send/recv to go
	 * zero-copy, which needs NCCL to hand the plugin GPU buffers. */
	memset(&a, 0, sizeof(a));
	cfg.pass_sm = 1;
	assert_int_equal(config_apply_nccl_defaults(&cfg, 0, note_default, &a), 1);
	assert_string_equal(getenv("NCCL_NET_GDR_LEVEL"), "SYS");
	assert_null(getenv("NCCL_PROTO"));
	cfg.pass_sm = 0;
	unsetenv("NCCL_NET_GDR_LEVEL");

	/* GPU traffic of one host through the plugin: GPUDirect on, LL off. */
	setenv("NCCL_P2P_DISABLE", "1", 1);
	memset(&a, 0, sizeof(a));
	config_apply_nccl_defaults(&cfg, 0, note_default, &a);
	assert_string_equal(getenv("NCCL_NET_GDR_LEVEL"), "SYS");
	assert_string_equal(getenv("NCCL_PROTO"), "^LL");
	assert_string_equal(a.proto, "^LL");
	unset_channel_defaults();
	unsetenv("NCCL_NET_GDR_LEVEL");
	unsetenv("NCCL_PROTO");

	/* With an inner net plugin NCCL sees real NICs, and its own GPU-NIC
	 * distance rule stays theirs: no SYS, with P2P off or PASS_SM. */
	snprintf(cfg.inner_net, sizeof(cfg.inner_net), "libnccl-net.so");
	cfg.pass_sm = 1;
	memset(&a, 0, sizeof(a));
	config_apply_nccl_defaults(&cfg, 0, note_default, &a);
	assert_null(getenv("NCCL_NET_GDR_LEVEL"));
	cfg.pass_sm = 0;
	cfg.inner_net[0] = '\0';
	unset_channel_defaults();
	unsetenv("NCCL_PROTO");

	/* The user's values win, each on its own. */
	memset(&a, 0, sizeof(a));
	setenv("NCCL_NET_GDR_LEVEL", "PHB", 1);
	setenv("NCCL_PROTO", "LL", 1);
	config_apply_nccl_defaults(&cfg, 0, note_default, &a);
	assert_string_equal(getenv("NCCL_NET_GDR_LEVEL"), "PHB");
	assert_string_equal(getenv("NCCL_PROTO"), "LL");
	assert_string_equal(a.proto, "LL");
	unsetenv("NCCL_PROTO");
	config_apply_nccl_defaults(&cfg, 0, note_default, &a);
	assert_string_equal(getenv("NCCL_PROTO"), "^LL");
	assert_string_equal(getenv("NCCL_NET_GDR_LEVEL"), "PHB");
	unset_channel_defaults();
	unsetenv("NCCL_NET_GDR_LEVEL");
	unsetenv("NCCL_PROTO");
	unsetenv("NCCL_P2P_DISABLE");
	/* Without NCCL_P2P_DISABLE=1 NCCL's channel sizing is left alone. */
	config_apply_nccl_defaults(&cfg, 0, note_default, &a);
	assert_null(getenv("NCCL_MIN_NCHANNELS"));
	assert_null(getenv("NCCL_BUFFSIZE"));
	unsetenv("NCCL_NET_GDR_LEVEL");
}

/* NCCL_PROTO=^LL switches NCCL's LL128 safety gate off, so the plugin sets
 * it only where NCCL hands it GPU buffers that copy engines fill: P2P off,
 * not the ib backend, NCCL_NET_GDR_LEVEL PHB, SYS or a number (or unset,
 * which the plugin makes SYS).  Elsewhere on that path it stays unset and
 * the log says why; the tuner's LL128 rule goes with it. */
static const char *real_get(const char *name, void *arg)
{
	(void)arg;
	return getenv(name);
}

/* The plugin's own defaults, read back by a later parse of the same
 * environment (a child that inherits it, or the plugin loaded again), are
 * not the user's: NCCL_PROTO=^LL keeps the tuner's LL128 rule on and
 * NCCL_MIN_NCHANNELS=32 is no user minimum; a later init sets them again
 * as its own, a value the user changed is the user's, and a default that
 * no longer applies is taken back. */
static void test_own_defaults_not_the_users(void **state)
{
	struct applied a = { 0 };
	struct config cfg, again;
	char err[ERRLEN];

	(void)state;
	defaults_start(&cfg);
	setenv("NCCL_P2P_DISABLE", "1", 1);
	assert_int_equal(config_parse(&cfg, real_get, NULL, err, sizeof(err)), 0);
	assert_true(config_apply_nccl_defaults(&cfg, 1, note_default, &a) > 0);
	assert_string_equal(getenv("NCCL_PROTO"), "^LL");
	assert_string_equal(getenv("NCCL_MIN_NCHANNELS"), "32");
	assert_contains(getenv("NCCL_SYMMEM_NCCL_DEFAULTS_SET"), "NCCL_PROTO=^LL");

	assert_int_equal(config_parse(&again, real_get, NULL, err, sizeof(err)), 0);
	assert_int_equal(again.user_proto, 0);
	assert_int_equal(again.user_min_channels, -1);
	assert_true(config_ll128_chunk(&again) == 512 * 1024);
	memset(&a, 0, sizeof(a));
	assert_true(config_apply_nccl_defaults(&again, 1, note_default, &a) > 0);
	assert_string_equal(a.proto, "^LL");
	assert_contains(a.proto_why, "LL keeps its send buffers in host memory");

	setenv("NCCL_PROTO", "Simple", 1);
	assert_int_equal(config_parse(&again, real_get, NULL, err, sizeof(err)), 0);
	assert_int_equal(again.user_proto, 1);
	assert_true(config_ll128_chunk(&again) == 0);

	/* P2P on: none applies, and the earlier ones are taken back. */
	setenv("NCCL_PROTO", "^LL", 1);
	setenv("NCCL_P2P_DISABLE", "0", 1);
	assert_int_equal(config_parse(&again, real_get, NULL, err, sizeof(err)), 0);
	assert_int_equal(config_apply_nccl_defaults(&again, 1, note_default, &a), 0);
	assert_null(getenv("NCCL_PROTO"));
	assert_null(getenv("NCCL_MIN_NCHANNELS"));
	assert_null(getenv("NCCL_SYMMEM_NCCL_DEFAULTS_SET"));
	defaults_end();
}

/* The plugin's note of what it set (a child inherits it with the rest
 * of the environment) matches a value whole: a NCCL_MIN_NCHANNELS=3 of
 * the user's is not the plugin's 32, wherever 32 sits in the note, and
 * stays the user's. */
static void test_own_defaults_matched_whole(void **state)
{
	static const char *const notes[] = {
		"NCCL_MIN_NCHANNELS=32",
		"NCCL_PROTO=^LL;NCCL_MIN_NCHANNELS=32",
		"NCCL_MIN_NCHANNELS=32;NCCL_BUFFSIZE=16777216",
	};
	struct config cfg;
	char err[ERRLEN];

	(void)state;
	for (size_t i = 0; i < sizeof(notes) / sizeof(notes[0]); i++) {
		defaults_start(&cfg);
		setenv("NCCL_P2P_DISABLE", "1", 1);
		setenv("NCCL_SYMMEM_NCCL_DEFAULTS_SET", notes[i], 1);
		setenv("NCCL_MIN_NCHANNELS", "3", 1);
		assert_int_equal(config_parse(&cfg, real_get, NULL, err, sizeof(err)), 0);
		assert_int_equal(cfg.user_min_channels, 3);
		assert_int_equal(config_ring_channels(&cfg), 4);	/* NCCL's own */
		config_apply_nccl_defaults(&cfg, 0, NULL, NULL);
		if (strcmp(getenv("NCCL_MIN_NCHANNELS"), "3") != 0)
			fail_msg("note \"%s\": NCCL_MIN_NCHANNELS=%s, want the user's 3", notes[i],
				 getenv("NCCL_MIN_NCHANNELS"));
		defaults_end();
	}
}

static void test_proto_default(void **state)
{
	static const struct {
		const char *backend;	/* NCCL_SYMMEM_BACKEND, NULL: auto */
		const char *gdr;	/* the user's NCCL_NET_GDR_LEVEL, NULL: unset */
		int set;
		const char *why;	/* in the reason for leaving it, NULL: none */
	} rows[] = {
		{ NULL, NULL, 1, NULL },
		{ "shm", NULL, 1, NULL },
		{ "tcp", NULL, 1, NULL },
		{ NULL, "SYS", 1, NULL },
		{ NULL, "PHB", 1, NULL },
		{ NULL, "3", 1, NULL },
		{ "tcp", "SYS", 1, NULL },
		{ "ib", NULL, 0, "NCCL_SYMMEM_BACKEND=ib" },
		{ "ib", "SYS", 0, "NCCL_SYMMEM_BACKEND=ib" },
		{ NULL, "LOC", 0, "NCCL_NET_GDR_LEVEL" },
		{ NULL, "PIX", 0, "NCCL_NET_GDR_LEVEL" },
		{ NULL, "PXB", 0, "NCCL_NET_GDR_LEVEL" },
		{ NULL, "", 0, "NCCL_NET_GDR_LEVEL" },
		{ "tcp", "PXB", 0, "NCCL_NET_GDR_LEVEL" },
	};
	char err[ERRLEN];

	(void)state;
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		struct kv env[] = { { "NCCL_SYMMEM_BACKEND", rows[i].backend }, { NULL, NULL } };
		struct applied a = { 0 };
		struct config cfg;
		const char *proto;

		defaults_start(&cfg);
		assert_int_equal(config_parse(&cfg, table_get, rows[i].backend ? env : NULL, err,
					      sizeof(err)), 0);
		setenv("NCCL_P2P_DISABLE", "1", 1);
		if (rows[i].gdr)
			setenv("NCCL_NET_GDR_LEVEL", rows[i].gdr, 1);
		config_apply_nccl_defaults(&cfg, 0, note_default, &a);
		proto = getenv("NCCL_PROTO");
		if (rows[i].set != (proto && !strcmp(proto, "^LL")))
			fail_msg("row %zu (backend %s, gdr %s): NCCL_PROTO %s", i,
				 rows[i].backend ? rows[i].backend : "auto",
				 rows[i].gdr ? rows[i].gdr : "unset", proto ? proto : "unset");
		if (!rows[i].set) {
			assert_null(proto);
			assert_string_equal(a.proto, "(unset)");
			assert_contains(a.proto_why, rows[i].why);
			assert_contains(a.proto_why, "LL128");
			assert_true(config_ll128_chunk(&cfg) == 0);
		} else {
			assert_contains(a.proto_why, "LL keeps its send buffers in host memory");
		}
		/* The tuner's LL128 rule: copy engines (not tcp) and ^LL. */
		if (rows[i].set && !(rows[i].backend && !strcmp(rows[i].backend, "tcp")))
			assert_true(config_ll128_chunk(&cfg) == 512 * 1024);
		defaults_end();
	}

	/* Not the plugin's to set: P2P on, the defaults off, the user's own
	 * NCCL_PROTO; no reason given. */
	{
		struct applied a = { 0 };
		struct config cfg;

		defaults_start(&cfg);
		config_apply_nccl_defaults(&cfg, 0, note_default, &a);
		assert_null(getenv("NCCL_PROTO"));
		assert_string_equal(a.proto_why, "");
		setenv("NCCL_P2P_DISABLE", "1", 1);
		setenv("NCCL_NET_GDR_LEVEL", "LOC", 1);
		cfg.nccl_defaults = 0;
		config_apply_nccl_defaults(&cfg, 0, note_default, &a);
		assert_null(getenv("NCCL_PROTO"));
		assert_string_equal(a.proto_why, "");
		cfg.nccl_defaults = 1;
		setenv("NCCL_PROTO", "Simple", 1);
		config_apply_nccl_defaults(&cfg, 0, note_default, &a);
		assert_string_equal(getenv("NCCL_PROTO"), "Simple");
		assert_string_equal(a.proto_why, "");
		defaults_end();
	}
}

/* NCCL_THREAD_THRESHOLDS as NCCL parses it (tree LL, LL128, Simple, then
 * ring; -1 keeps NCCL's): threads x threshold must be the bytes per channel
 * the tuner's NCCL_PASS_SM cap assumes (SMFREE_CHANNEL_BYTES), within one
 * thread-threshold step, for the 512 Simple and 640 LL128 threads NCCL
 * gives a Hopper channel. */
static void test_thread_thresholds(void **state)
{
	static const long threads[3] = { 0, 640, 512 };	/* LL, LL128, Simple */
	struct config cfg;
	long t[6];
	const char *v;

	(void)state;
	defaults_start(&cfg);
	setenv("NCCL_P2P_DISABLE", "1", 1);
	assert_int_equal(config_apply_nccl_defaults(&cfg, 0, NULL, NULL), 8);
	v = getenv("NCCL_THREAD_THRESHOLDS");
	assert_non_null(v);
	assert_int_equal(sscanf(v, "%ld %ld %ld %ld %ld %ld", &t[0], &t[1], &t[2], &t[3], &t[4],
				&t[5]), 6);
	for (int i = 0; i < 6; i++) {
		int p = i % 3;

		if (p == 0) {
			assert_int_equal(t[i], -1);
			continue;
		}
		assert_true(t[i] * threads[p] <= SMFREE_CHANNEL_BYTES);
		assert_true((t[i] + 1) * threads[p] > SMFREE_CHANNEL_BYTES);
	}
	defaults_end();
}

static void note_advice(const char *name, const char *value, const char *why, void *arg)
{
	struct applied *a = arg;

	assert_non_null(why);
	a->calls++;
	snprintf(a->last, sizeof(a->last), "%s=%s", name, value);
}

/* NCCL_NCHANNELS_PER_NET_PEER is named in the log when GPU traffic of one
 * host goes through the plugin and the user left it unset; never set. */
static void test_nccl_advice(void **state)
{
	struct config cfg;
	struct applied a = { 0 };

	(void)state;
	defaults_start(&cfg);
	assert_int_equal(config_nccl_advice(&cfg, note_advice, &a), 0);	/* P2P on */
	setenv("NCCL_P2P_DISABLE", "1", 1);
	assert_int_equal(config_nccl_advice(&cfg, note_advice, &a), 1);
	assert_int_equal(a.calls, 1);
	assert_string_equal(a.last, "NCCL_NCHANNELS_PER_NET_PEER=16");
	assert_null(getenv("NCCL_NCHANNELS_PER_NET_PEER"));

	setenv("NCCL_NCHANNELS_PER_NET_PEER", "8", 1);
	assert_int_equal(config_nccl_advice(&cfg, note_advice, &a), 0);
	assert_string_equal(getenv("NCCL_NCHANNELS_PER_NET_PEER"), "8");
	unsetenv("NCCL_NCHANNELS_PER_NET_PEER");
	cfg.pass_sm = 1;		/* the user's call there: no WARN */
	assert_int_equal(config_nccl_advice(&cfg, NULL, NULL), 0);
	cfg.pass_sm = 0;
	cfg.nccl_defaults = 0;
	assert_int_equal(config_nccl_advice(&cfg, NULL, NULL), 0);
	unsetenv("NCCL_P2P_DISABLE");
}

/* Channel and step sizes are set only when GPU traffic of one host goes
 * through the plugin (NCCL_P2P_DISABLE=1), each only where unset. */
static void test_nccl_channel_defaults(void **state)
{
	struct config cfg;
	struct applied a = { 0 };

	(void)state;
	defaults_start(&cfg);
	setenv("NCCL_P2P_DISABLE", "0", 1);
	assert_int_equal(config_apply_nccl_defaults(&cfg, 0, note_default, &a), 0);
	assert_null(getenv("NCCL_NET_GDR_LEVEL"));
	assert_null(getenv("NCCL_PROTO"));
	assert_null(getenv("NCCL_MIN_NCHANNELS"));
	unsetenv("NCCL_NET_GDR_LEVEL");
	unsetenv("NCCL_PROTO");

	setenv("NCCL_P2P_DISABLE", "1", 1);
	setenv("NCCL_BUFFSIZE", "4194304", 1);
	memset(&a, 0, sizeof(a));
	assert_int_equal(config_apply_nccl_defaults(&cfg, 0, note_default, &a), 7);
	assert_string_equal(getenv("NCCL_MIN_NCHANNELS"), "32");
	assert_null(getenv("NCCL_NCHANNELS_PER_NET_PEER"));
	assert_string_equal(getenv("NCCL_P2P_NET_CHUNKSIZE"), "2097152");
	assert_string_equal(getenv("NCCL_BUFFSIZE"), "4194304");
	assert_non_null(getenv("NCCL_THREAD_THRESHOLDS"));

	/* NCCL_SYMMEM_BACKEND=tcp: sockets, not copy engines, carry it, so
	 * NCCL keeps its own channels and steps; what follows from P2P being
	 * off (each GPU its own node: PAT, registered rings) still applies. */
	unset_channel_defaults();
	unsetenv("NCCL_NET_GDR_LEVEL");
	unsetenv("NCCL_PROTO");
	cfg.backend = CONFIG_BACKEND_TCP;
	memset(&a, 0, sizeof(a));
	assert_int_equal(config_apply_nccl_defaults(&cfg, 0, note_default, &a), 4);
	assert_null(getenv("NCCL_MIN_NCHANNELS"));
	assert_null(getenv("NCCL_BUFFSIZE"));
	assert_null(getenv("NCCL_P2P_NET_CHUNKSIZE"));
	assert_null(getenv("NCCL_THREAD_THRESHOLDS"));
	assert_string_equal(getenv("NCCL_NET_GDR_LEVEL"), "SYS");
	assert_string_equal(getenv("NCCL_ALGO"), "^PAT");
	assert_string_equal(getenv("NCCL_GRAPH_REGISTER"), "0");
	assert_int_equal(config_ll128_chunk(&cfg), 0);
	assert_int_equal(config_nccl_advice(&cfg, NULL, NULL), 0);
	assert_int_equal(config_ring_channels(&cfg), 4);	/* NCCL's own */

	/* NCCL_SYMMEM_BACKEND=ib: RDMA loopback carries it, not the copy
	 * engines, so NCCL's channels and steps stay as with tcp; it stages
	 * in host memory, so NCCL_PROTO stays NCCL's too. */
	unset_channel_defaults();
	unsetenv("NCCL_NET_GDR_LEVEL");
	unsetenv("NCCL_PROTO");
	cfg.backend = CONFIG_BACKEND_IB;
	memset(&a, 0, sizeof(a));
	assert_int_equal(config_apply_nccl_defaults(&cfg, 0, note_default, &a), 3);
	assert_null(getenv("NCCL_MIN_NCHANNELS"));
	assert_null(getenv("NCCL_BUFFSIZE"));
	assert_null(getenv("NCCL_P2P_NET_CHUNKSIZE"));
	assert_null(getenv("NCCL_THREAD_THRESHOLDS"));
	assert_null(getenv("NCCL_PROTO"));
	assert_string_equal(getenv("NCCL_ALGO"), "^PAT");
	assert_int_equal(config_ll128_chunk(&cfg), 0);
	assert_int_equal(config_nccl_advice(&cfg, NULL, NULL), 0);
	assert_int_equal(config_ring_channels(&cfg), 4);	/* NCCL's own */
	cfg.backend = CONFIG_BACKEND_AUTO;

	/* NCCL_SYMMEM_NCCL_DEFAULTS=0 turns these off too, and NCCL's rings
	 * keep its own count. */
	unset_channel_defaults();
	unsetenv("NCCL_NET_GDR_LEVEL");
	unsetenv("NCCL_PROTO");
	cfg.nccl_defaults = 0;
	assert_int_equal(config_apply_nccl_defaults(&cfg, 0, note_default, &a), 0);
	assert_null(getenv("NCCL_MIN_NCHANNELS"));
	assert_int_equal(config_ring_channels(&cfg), 4);
	unsetenv("NCCL_P2P_DISABLE");
}

/* NCCL_GRAPH_REGISTER=0 and NCCL_ALGO=^PAT only for GPU traffic of one
 * host through the plugin; NCCL_GRAPH_REGISTER only without NCCL_PASS_SM,
 * whose send/recv need NCCL's registration of graph-captured buffers,
 * and only where ring registrations are kept (no hints from NCCL, or
 * NCCL_SYMMEM_COLL_REGISTER=1): declined ones make graph registration
 * harmless to rings.  NCCL_ALGO with NCCL_PASS_SM too (PAT is slow on this
 * path either way).  The user's values win. */
static void test_graph_register_and_algo_defaults(void **state)
{
	struct config cfg;

	(void)state;
	defaults_start(&cfg);
	config_apply_nccl_defaults(&cfg, 0, NULL, NULL);
	assert_null(getenv("NCCL_GRAPH_REGISTER"));	/* P2P on */
	assert_null(getenv("NCCL_ALGO"));

	setenv("NCCL_P2P_DISABLE", "1", 1);
	cfg.pass_sm = 1;
	config_apply_nccl_defaults(&cfg, 0, NULL, NULL);
	assert_null(getenv("NCCL_GRAPH_REGISTER"));
	assert_string_equal(getenv("NCCL_ALGO"), "^PAT");
	assert_non_null(getenv("NCCL_THREAD_THRESHOLDS"));

	/* NCCL 2.28 on: ring registrations declined, graph registration kept. */
	cfg.pass_sm = 0;
	cfg.coll_register = CONFIG_AUTO;
	config_apply_nccl_defaults(&cfg, 1, NULL, NULL);
	assert_null(getenv("NCCL_GRAPH_REGISTER"));
	cfg.coll_register = CONFIG_OFF;
	config_apply_nccl_defaults(&cfg, 1, NULL, NULL);
	assert_null(getenv("NCCL_GRAPH_REGISTER"));

	/* ... but with the user keeping ring registrations, it goes. */
	cfg.coll_register = CONFIG_ON;
	config_apply_nccl_defaults(&cfg, 1, NULL, NULL);
	assert_string_equal(getenv("NCCL_GRAPH_REGISTER"), "0");
	unsetenv("NCCL_GRAPH_REGISTER");

	/* Older NCCL gives no hints: nothing is declined. */
	cfg.coll_register = CONFIG_AUTO;
	config_apply_nccl_defaults(&cfg, 0, NULL, NULL);
	assert_string_equal(getenv("NCCL_GRAPH_REGISTER"), "0");

	setenv("NCCL_GRAPH_REGISTER", "1", 1);
	setenv("NCCL_ALGO", "Ring", 1);
	config_apply_nccl_defaults(&cfg, 0, NULL, NULL);
	assert_string_equal(getenv("NCCL_GRAPH_REGISTER"), "1");
	assert_string_equal(getenv("NCCL_ALGO"), "Ring");

	defaults_end();
}

/* The tuner's LL128 rule is one of the intra-host defaults: on only with
 * NCCL_P2P_DISABLE=1 and the defaults on, and off when the user set
 * NCCL_PROTO, but not when the plugin set it; the channel count it assumes
 * is the plugin's NCCL_MIN_NCHANNELS. */
static void test_ll128_chunk(void **state)
{
	struct kv user_proto[] = { { "NCCL_PROTO", "LL128,Simple" }, { NULL, NULL } };
	struct kv chunk[] = { { "NCCL_SYMMEM_LL128_CHUNK", "96K" }, { NULL, NULL } };
	struct config cfg;
	char err[ERRLEN];

	(void)state;
	defaults_start(&cfg);
	assert_true(config_ll128_chunk(&cfg) == 0);	/* P2P on: NCCL's own path */
	setenv("NCCL_P2P_DISABLE", "1", 1);
	assert_true(config_ll128_chunk(&cfg) == 512 * 1024);
	config_apply_nccl_defaults(&cfg, 0, NULL, NULL);
	assert_string_equal(getenv("NCCL_PROTO"), "^LL");	/* the plugin's, not the user's */
	assert_true(config_ll128_chunk(&cfg) == 512 * 1024);
	assert_int_equal(atoi(getenv("NCCL_MIN_NCHANNELS")), SMFREE_RING_CHANNELS);

	cfg.nccl_defaults = 0;
	assert_true(config_ll128_chunk(&cfg) == 0);

	assert_int_equal(config_parse(&cfg, table_get, user_proto, err, sizeof(err)), 0);
	assert_true(config_ll128_chunk(&cfg) == 0);
	assert_int_equal(config_parse(&cfg, table_get, chunk, err, sizeof(err)), 0);
	assert_true(config_ll128_chunk(&cfg) == 96 * 1024);
	setenv("NCCL_P2P_DISABLE", "0", 1);
	assert_true(config_ll128_chunk(&cfg) == 0);
	defaults_end();
}

/* Ring registrations: declined by default, kept with NCCL_PASS_SM=1;
 * the variable wins either way, -1 is auto, a malformed value is refused
 * with the variable's name. */
static void test_coll_register(void **state)
{
	struct kv pass_sm[] = { { "NCCL_PASS_SM", "1" }, { NULL, NULL } };
	struct kv pass_sm_auto[] = { { "NCCL_PASS_SM", "1" }, { "NCCL_SYMMEM_COLL_REGISTER", "-1" },
				     { NULL, NULL } };
	struct kv pass_sm_off[] = { { "NCCL_PASS_SM", "1" }, { "NCCL_SYMMEM_COLL_REGISTER", "0" },
				    { NULL, NULL } };
	struct config cfg;
	char err[ERRLEN];

	(void)state;
	assert_int_equal(config_parse(&cfg, table_get, NULL, err, sizeof(err)), 0);
	assert_int_equal(cfg.coll_register, CONFIG_AUTO);
	assert_int_equal(config_coll_register(&cfg), 0);
	assert_int_equal(config_parse(&cfg, table_get, pass_sm, err, sizeof(err)), 0);
	assert_int_equal(config_coll_register(&cfg), 1);
	assert_int_equal(config_parse(&cfg, table_get, pass_sm_off, err, sizeof(err)), 0);
	assert_int_equal(config_coll_register(&cfg), 0);
	assert_int_equal(parse_one("NCCL_SYMMEM_COLL_REGISTER", "1", &cfg, err), 0);
	assert_int_equal(config_coll_register(&cfg), 1);
	assert_int_equal(parse_one("NCCL_SYMMEM_COLL_REGISTER", "-1", &cfg, err), 0);
	assert_int_equal(config_coll_register(&cfg), 0);
	assert_int_equal(config_parse(&cfg, table_get, pass_sm_auto, err, sizeof(err)), 0);
	assert_int_equal(config_coll_register(&cfg), 1);	/* -1 is auto, not off */
	assert_int_equal(parse_one("NCCL_SYMMEM_COLL_REGISTER", "sometimes", &cfg, err), -1);
	assert_contains(err, "NCCL_SYMMEM_COLL_REGISTER");
	assert_contains(err, "sometimes");
}

/* The tuner's LL limit between hosts: on only with P2P on (with P2P off
 * the plugin's NCCL_PROTO=^LL closes LL), the defaults on and NCCL_PROTO
 * left to NCCL; a malformed value is refused. */
static void test_ll_max(void **state)
{
	struct kv user_proto[] = { { "NCCL_PROTO", "LL,Simple" }, { NULL, NULL } };
	struct kv one_mib[] = { { "NCCL_SYMMEM_LL_MAX", "1MiB" }, { NULL, NULL } };
	struct kv off[] = { { "NCCL_SYMMEM_LL_MAX", "0" }, { NULL, NULL } };
	struct kv bad[] = { { "NCCL_SYMMEM_LL_MAX", "32 KiB please" }, { NULL, NULL } };
	struct config cfg;
	char err[ERRLEN];

	(void)state;
	defaults_start(&cfg);
	assert_true(config_ll_max(&cfg) == 32 * 1024);
	setenv("NCCL_P2P_DISABLE", "1", 1);
	assert_true(config_ll_max(&cfg) == 0);
	unsetenv("NCCL_P2P_DISABLE");
	cfg.nccl_defaults = 0;
	assert_true(config_ll_max(&cfg) == 0);

	assert_int_equal(config_parse(&cfg, table_get, user_proto, err, sizeof(err)), 0);
	assert_true(config_ll_max(&cfg) == 0);
	assert_int_equal(config_parse(&cfg, table_get, one_mib, err, sizeof(err)), 0);
	assert_true(config_ll_max(&cfg) == 1024 * 1024);
	assert_int_equal(config_parse(&cfg, table_get, off, err, sizeof(err)), 0);
	assert_true(config_ll_max(&cfg) == 0);
	assert_int_not_equal(config_parse(&cfg, table_get, bad, err, sizeof(err)), 0);
	assert_non_null(strstr(err, "NCCL_SYMMEM_LL_MAX"));
	defaults_end();
}

/* ibverbs between hosts: required with NCCL_SYMMEM_BACKEND=ib; where
 * both ends can under auto, unless NCCL_NET_GDR_LEVEL lets GPU buffers
 * through to the plugin's CPU-placed devices (PHB, SYS or a number),
 * which only the TCP path carries; never with tcp or shm. */
static void test_ib_mode(void **state)
{
	static const char *const host_staging[] = { "LOC", "PIX", "pxb", "" };
	static const char *const gpu_buffers[] = { "SYS", "phb", "3" };
	struct kv ib[] = { { "NCCL_SYMMEM_BACKEND", "ib" }, { NULL, NULL } };
	struct kv tcp[] = { { "NCCL_SYMMEM_BACKEND", "tcp" }, { NULL, NULL } };
	struct config cfg;
	char err[ERRLEN];

	(void)state;
	defaults_start(&cfg);
	assert_int_equal(config_ib_mode(&cfg), 1);
	assert_null(config_rdma_passed_over(&cfg));
	for (size_t i = 0; i < sizeof(host_staging) / sizeof(host_staging[0]); i++) {
		setenv("NCCL_NET_GDR_LEVEL", host_staging[i], 1);
		assert_int_equal(config_ib_mode(&cfg), 1);
		assert_null(config_rdma_passed_over(&cfg));
	}
	/* GPU buffers under auto: the devices are passed over, and the
	 * reason (the WARN at the first connection to another host) says so. */
	for (size_t i = 0; i < sizeof(gpu_buffers) / sizeof(gpu_buffers[0]); i++) {
		setenv("NCCL_NET_GDR_LEVEL", gpu_buffers[i], 1);
		assert_int_equal(config_ib_mode(&cfg), 0);
		assert_non_null(strstr(config_rdma_passed_over(&cfg), "NCCL_NET_GDR_LEVEL"));
	}
	/* A backend the user chose is no surprise: nothing to tell. */
	assert_int_equal(config_parse(&cfg, table_get, ib, err, sizeof(err)), 0);
	assert_int_equal(config_ib_mode(&cfg), 2);	/* even with SYS */
	assert_null(config_rdma_passed_over(&cfg));
	assert_int_equal(config_parse(&cfg, table_get, tcp, err, sizeof(err)), 0);
	assert_null(config_rdma_passed_over(&cfg));
	unsetenv("NCCL_NET_GDR_LEVEL");
	assert_int_equal(config_ib_mode(&cfg), 0);
	defaults_end();
}

/* NCCL's shared send/recv pool is p2p channels x 16 x the step, in an
 * int: with 64 p2p channels the plugin's 2 MiB steps overflow it, so any
 * minimum that makes NCCL open 64 (above 32: it rounds up to a power of
 * two) gets 1 MiB steps.  A step size of the user's stays. */
static void test_p2p_chunk_fits_nccl_pool(void **state)
{
	static const struct {
		const char *name[2], *value[2];
		const char *chunk;
	} rows[] = {
		{ { NULL, NULL }, { NULL, NULL }, "2097152" },
		{ { "NCCL_MIN_NCHANNELS", NULL }, { "32", NULL }, "2097152" },
		{ { "NCCL_MIN_NCHANNELS", NULL }, { "33", NULL }, "1048576" },
		{ { "NCCL_MIN_NCHANNELS", NULL }, { "64", NULL }, "1048576" },
		{ { "NCCL_MIN_NRINGS", NULL }, { "64", NULL }, "1048576" },
		/* NCCL's minimum beats its maximum. */
		{ { "NCCL_MIN_NCHANNELS", "NCCL_MAX_NCHANNELS" }, { "64", "8" }, "1048576" },
		{ { "NCCL_MIN_CTAS", NULL }, { "48", NULL }, "1048576" },
		/* ... but a minCTAs above maxCTAs is lowered to it. */
		{ { "NCCL_MIN_CTAS", "NCCL_MAX_CTAS" }, { "48", "16" }, "2097152" },
		{ { "NCCL_MIN_P2P_NCHANNELS", NULL }, { "64", NULL }, "1048576" },
		{ { "NCCL_MIN_P2P_NCHANNELS", NULL }, { "16", NULL }, "2097152" },
		{ { "NCCL_MIN_NCHANNELS", "NCCL_P2P_NET_CHUNKSIZE" }, { "64", "4194304" }, "4194304" },
	};
	char err[ERRLEN];

	(void)state;
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		struct kv env[3] = { { NULL, NULL } };
		struct config cfg;
		int n = 0;

		defaults_start(&cfg);
		for (int k = 0; k < 2 && rows[i].name[k]; k++) {
			env[n].name = rows[i].name[k];
			env[n++].value = rows[i].value[k];
		}
		assert_int_equal(config_parse(&cfg, table_get, env, err, sizeof(err)), 0);
		for (int k = 0; k < n; k++)
			setenv(env[k].name, env[k].value, 1);
		setenv("NCCL_P2P_DISABLE", "1", 1);
		config_apply_nccl_defaults(&cfg, 0, NULL, NULL);
		if (strcmp(getenv("NCCL_P2P_NET_CHUNKSIZE"), rows[i].chunk))
			fail_msg("row %zu: NCCL_P2P_NET_CHUNKSIZE=%s, expected %s", i,
				 getenv("NCCL_P2P_NET_CHUNKSIZE"), rows[i].chunk);
		for (int k = 0; k < n; k++)
			unsetenv(env[k].name);
		defaults_end();
	}
}

/* A user's bound on NCCL's channels, and the minimum the plugin sets:
 * NCCL applies its maximum first and then copies channels up to the
 * minimum, so the plugin's 32 must follow a lower cap of the user's.
 * Each row: the user's variables, the NCCL_MIN_NCHANNELS the plugin then
 * sets (NULL: leaves it alone) and the ring channels the tuner counts. */
static void test_channel_bounds(void **state)
{
	static const struct {
		const char *name[2], *value[2];
		const char *min_set;
		int ring;
	} rows[] = {
		{ { NULL, NULL }, { NULL, NULL }, "32", 32 },
		{ { "NCCL_MAX_CTAS", NULL }, { "8", NULL }, "8", 8 },
		{ { "NCCL_MAX_NCHANNELS", NULL }, { "16", NULL }, "16", 16 },
		{ { "NCCL_MAX_NRINGS", NULL }, { "12", NULL }, "12", 12 },
		/* The lower of the two caps; NCCL_MAX_NCHANNELS over _NRINGS. */
		{ { "NCCL_MAX_NCHANNELS", "NCCL_MAX_CTAS" }, { "16", "12" }, "12", 12 },
		{ { "NCCL_MAX_NCHANNELS", "NCCL_MAX_NRINGS" }, { "24", "2" }, "24", 24 },
		/* NCCL's own reading: base 0, trailing text ignored. */
		{ { "NCCL_MAX_CTAS", NULL }, { "0x8", NULL }, "8", 8 },
		{ { "NCCL_MAX_CTAS", NULL }, { "6 ctas", NULL }, "6", 6 },
		/* Not a number: NCCL keeps its default, so does the plugin. */
		{ { "NCCL_MAX_CTAS", NULL }, { "eight", NULL }, "32", 32 },
		{ { "NCCL_MAX_CTAS", NULL }, { "", NULL }, "32", 32 },
		/* Clamped as NCCL clamps: at most 64, at least 1. */
		{ { "NCCL_MAX_CTAS", NULL }, { "1000", NULL }, "32", 32 },
		{ { "NCCL_MAX_CTAS", NULL }, { "-3", NULL }, "1", 1 },
		{ { "NCCL_MAX_CTAS", NULL }, { "2", NULL }, "2", 2 },
		/* A cap above 32 leaves the plugin's minimum as it is. */
		{ { "NCCL_MAX_CTAS", NULL }, { "48", NULL }, "32", 32 },
		/* A minimum of the user's: the plugin sets none. */
		{ { "NCCL_MIN_NCHANNELS", NULL }, { "16", NULL }, "16", 16 },
		{ { "NCCL_MIN_NRINGS", NULL }, { "8", NULL }, NULL, 8 },
		/* 0 is a minimum too (NCCL's own 4 then): not overridden by 32. */
		{ { "NCCL_MIN_NRINGS", NULL }, { "0", NULL }, NULL, 4 },
		{ { "NCCL_MIN_NCHANNELS", NULL }, { "0", NULL }, "0", 4 },
		/* Below NCCL's own 4 the ring keeps NCCL's 4, unless capped. */
		{ { "NCCL_MIN_NCHANNELS", NULL }, { "1", NULL }, "1", 4 },
		{ { "NCCL_MIN_NCHANNELS", "NCCL_MAX_CTAS" }, { "1", "3" }, "1", 3 },
		/* NCCL_MIN_CTAS raises the minimum.  NCCL lowers a minCTAs
		 * above maxCTAs to it, but a NCCL_MIN_NCHANNELS above the cap
		 * wins. */
		{ { "NCCL_MIN_CTAS", NULL }, { "48", NULL }, "32", 48 },
		{ { "NCCL_MIN_CTAS", "NCCL_MAX_CTAS" }, { "16", "8" }, "8", 8 },
		{ { "NCCL_MIN_CTAS", "NCCL_MAX_NCHANNELS" }, { "16", "8" }, "8", 16 },
		{ { "NCCL_MIN_NCHANNELS", "NCCL_MAX_NCHANNELS" }, { "24", "8" }, "24", 24 },
	};
	char err[ERRLEN];

	(void)state;
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		struct kv env[3] = { { NULL, NULL }, { NULL, NULL }, { NULL, NULL } };
		struct config cfg;
		const char *min;

		defaults_start(&cfg);
		setenv("NCCL_P2P_DISABLE", "1", 1);
		for (int k = 0; k < 2 && rows[i].name[k]; k++) {
			env[k].name = rows[i].name[k];
			env[k].value = rows[i].value[k];
			setenv(rows[i].name[k], rows[i].value[k], 1);
		}
		assert_int_equal(config_parse(&cfg, table_get, env, err, sizeof(err)), 0);
		config_apply_nccl_defaults(&cfg, 0, NULL, NULL);
		min = getenv("NCCL_MIN_NCHANNELS");
		if (!rows[i].min_set)
			assert_null(min);
		else if (!min || strcmp(min, rows[i].min_set))
			fail_msg("row %zu: NCCL_MIN_NCHANNELS %s, want %s", i, min ? min : "unset",
				 rows[i].min_set);
		if (config_ring_channels(&cfg) != rows[i].ring)
			fail_msg("row %zu: %d ring channels, want %d", i, config_ring_channels(&cfg),
				 rows[i].ring);
		for (int k = 0; k < 2 && rows[i].name[k]; k++)
			unsetenv(rows[i].name[k]);
		defaults_end();
	}
}

/* NCCL_NET_PLUGIN_REF_COUNT is NCCL's, read for one INFO line the way NCCL
 * reads its integers (strtoll base 0, trailing text ignored): a positive
 * value keeps the plugin loaded, anything else is as if unset, never an
 * error (NCCL, not the plugin, judges its own variable). */
static void test_plugin_ref_count(void **state)
{
	static const struct {
		const char *value;
		int kept;
	} cases[] = {
		{ "1", 1 }, { "3", 1 }, { "0", 0 }, { "-1", 0 }, { "", 0 }, { "one", 0 },
		{ "1x", 1 }, { "0x10", 1 }, { "99999999999999999999", 0 },
	};
	struct config cfg;
	char err[ERRLEN];

	(void)state;
	assert_int_equal(config_parse(&cfg, table_get, NULL, err, sizeof(err)), 0);
	assert_int_equal(cfg.kept_loaded, 0);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		assert_int_equal(parse_one("NCCL_NET_PLUGIN_REF_COUNT", cases[i].value, &cfg, err), 0);
		assert_int_equal(cfg.kept_loaded, cases[i].kept);
	}
}

/* config_p2p_off() reads NCCL_P2P_DISABLE as NCCL does (strtoll, any
 * base): regMr declines ring registrations on every connection when it is
 * on, so it must agree with NCCL's own reading on every rank. */
static void test_p2p_off(void **state)
{
	static const struct {
		const char *value;
		int off;
	} cases[] = {
		{ "1", 1 }, { "0x1", 1 }, { "01", 1 }, { "2", 1 }, { "0", 0 }, { "", 0 },
		{ "no", 0 }, { "00", 0 },
	};

	(void)state;
	unsetenv("NCCL_P2P_DISABLE");
	assert_int_equal(config_p2p_off(), 0);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		setenv("NCCL_P2P_DISABLE", cases[i].value, 1);
		if (config_p2p_off() != cases[i].off)
			fail_msg("NCCL_P2P_DISABLE=\"%s\": %d, want %d", cases[i].value,
				 config_p2p_off(), cases[i].off);
	}
	unsetenv("NCCL_P2P_DISABLE");
}

/* ---- the env plugin's defaults (NCCL_ENV_PLUGIN=symmem) ---------------- */

static const char *const env_plugin_vars[] = {
	"NCCL_NET_PLUGIN", "NCCL_NET", "NCCL_P2P_DISABLE", "NCCL_SHM_DISABLE",
	"NCCL_NET_PLUGIN_REF_COUNT", "NCCL_NCHANNELS_PER_NET_PEER", "NCCL_SYMMEM_NCCL_DEFAULTS",
	"NCCL_SYMMEM_BACKEND", "NCCL_SYMMEM_STREAMS", "NCCL_PASS_SM", "NCCL_SYMMEM_ENV_PLUGIN_SET",
};

static void env_plugin_clear(void)
{
	for (size_t i = 0; i < sizeof(env_plugin_vars) / sizeof(env_plugin_vars[0]); i++)
		unsetenv(env_plugin_vars[i]);
}

/* Nothing set by the user: the Quick start's variables, with the
 * library's path as NCCL_NET_PLUGIN, each named in the list net init
 * logs. */
static void test_env_plugin_sets_routing(void **state)
{
	char unknown[256];

	(void)state;
	env_plugin_clear();
	assert_int_equal(config_apply_env_plugin_defaults("/opt/x/libnccl-net-symmem.so"), 6);
	assert_string_equal(getenv("NCCL_NET_PLUGIN"), "/opt/x/libnccl-net-symmem.so");
	assert_string_equal(getenv("NCCL_NET"), "symmem");
	assert_string_equal(getenv("NCCL_P2P_DISABLE"), "1");
	assert_string_equal(getenv("NCCL_SHM_DISABLE"), "1");
	assert_string_equal(getenv("NCCL_NET_PLUGIN_REF_COUNT"), "1");
	assert_string_equal(getenv("NCCL_NCHANNELS_PER_NET_PEER"), "16");
	assert_string_equal(config_env_plugin_applied(),
			    "NCCL_NET_PLUGIN=/opt/x/libnccl-net-symmem.so NCCL_NET=symmem "
			    "NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_NET_PLUGIN_REF_COUNT=1 "
			    "NCCL_NCHANNELS_PER_NET_PEER=16");
	/* The list reaches the net plugin (another library) through the
	 * environment, and is not taken for a user's misspelt variable. */
	assert_string_equal(getenv("NCCL_SYMMEM_ENV_PLUGIN_SET"), config_env_plugin_applied());
	assert_int_equal(config_unknown_vars(unknown, sizeof(unknown)), 0);
	/* A process that inherited all of it sets nothing and keeps the list
	 * its parent's env plugin wrote. */
	assert_int_equal(config_apply_env_plugin_defaults("/opt/x/libnccl-net-symmem.so"), 0);
	assert_non_null(strstr(config_env_plugin_applied(), "NCCL_NCHANNELS_PER_NET_PEER=16"));
	/* No path from the loader: the name NCCL resolves on its own. */
	env_plugin_clear();
	assert_int_equal(config_apply_env_plugin_defaults(NULL), 6);
	assert_string_equal(getenv("NCCL_NET_PLUGIN"), "symmem");
	env_plugin_clear();
	/* P2P off in another spelling NCCL takes: the rest follows. */
	setenv("NCCL_P2P_DISABLE", "0x1", 1);
	assert_int_equal(config_apply_env_plugin_defaults(NULL), 5);
	assert_string_equal(getenv("NCCL_SHM_DISABLE"), "1");
	assert_string_equal(getenv("NCCL_NCHANNELS_PER_NET_PEER"), "16");
	env_plugin_clear();
}

/* A path NCCL could not use gives the plugin's name instead: empty (an
 * empty NCCL_NET_PLUGIN loads no external plugin at all), longer than
 * the 254 characters NCCL keeps, or with a comma (NCCL's list
 * separator).  One of 254 is kept, and the list still has every item. */
static void test_env_plugin_unusable_paths(void **state)
{
	char path[300];

	(void)state;
	memset(path, 'p', sizeof(path));
	path[0] = '/';
	memcpy(path + 255 - sizeof("/libnccl-net-symmem.so"), "/libnccl-net-symmem.so",
	       sizeof("/libnccl-net-symmem.so"));
	assert_int_equal(strlen(path), 254);
	env_plugin_clear();
	assert_int_equal(config_apply_env_plugin_defaults(path), 6);
	assert_string_equal(getenv("NCCL_NET_PLUGIN"), path);
	assert_non_null(strstr(config_env_plugin_applied(), path));
	assert_non_null(strstr(config_env_plugin_applied(), " NCCL_NCHANNELS_PER_NET_PEER=16"));

	path[254] = 'x';	/* 255 characters */
	path[255] = '\0';
	env_plugin_clear();
	assert_int_equal(config_apply_env_plugin_defaults(path), 6);
	assert_string_equal(getenv("NCCL_NET_PLUGIN"), "symmem");

	env_plugin_clear();
	assert_int_equal(config_apply_env_plugin_defaults(""), 6);
	assert_string_equal(getenv("NCCL_NET_PLUGIN"), "symmem");

	env_plugin_clear();
	assert_int_equal(config_apply_env_plugin_defaults("/a,b/libnccl-net-symmem.so"), 6);
	assert_string_equal(getenv("NCCL_NET_PLUGIN"), "symmem");
	env_plugin_clear();
}

/* The user's own values stay, and are not listed as set. */
static void test_env_plugin_keeps_user_values(void **state)
{
	(void)state;
	env_plugin_clear();
	setenv("NCCL_NCHANNELS_PER_NET_PEER", "8", 1);
	setenv("NCCL_NET_PLUGIN", "/usr/lib/libnccl-net-symmem.so", 1);
	assert_int_equal(config_apply_env_plugin_defaults("/x/libnccl-net-symmem.so"), 4);
	assert_string_equal(getenv("NCCL_NCHANNELS_PER_NET_PEER"), "8");
	assert_string_equal(getenv("NCCL_NET_PLUGIN"), "/usr/lib/libnccl-net-symmem.so");
	assert_null(strstr(config_env_plugin_applied(), "NCCL_NET_PLUGIN="));
	assert_null(strstr(config_env_plugin_applied(), "NCCL_NCHANNELS_PER_NET_PEER"));

	/* The plugin between hosts only: NCCL's P2P and SHM stay, and so
	 * does its channel count. */
	env_plugin_clear();
	setenv("NCCL_P2P_DISABLE", "0", 1);
	assert_int_equal(config_apply_env_plugin_defaults("/x/libnccl-net-symmem.so"), 3);
	assert_string_equal(getenv("NCCL_P2P_DISABLE"), "0");
	assert_null(getenv("NCCL_SHM_DISABLE"));
	assert_null(getenv("NCCL_NCHANNELS_PER_NET_PEER"));
	assert_string_equal(getenv("NCCL_NET"), "symmem");
	env_plugin_clear();
}

/* Another net chosen, or the NCCL defaults turned off: nothing is set. */
static void test_env_plugin_leaves_other_nets(void **state)
{
	static const char *const other[][2] = {
		{ "NCCL_NET_PLUGIN", "aws-ofi" },
		{ "NCCL_NET_PLUGIN", "/opt/libnccl-net-ofi.so" },
		{ "NCCL_NET", "IB" },
		{ "NCCL_NET", "Socket" },
		{ "NCCL_NET_PLUGIN", "none" },
		{ "NCCL_NET_PLUGIN", "symmem,aws-ofi" },	/* a list: the user's own */
		{ "NCCL_NET_PLUGIN", "aws-ofi,/x/libnccl-net-symmem.so" },
	};

	(void)state;
	for (size_t i = 0; i < sizeof(other) / sizeof(other[0]); i++) {
		env_plugin_clear();
		setenv(other[i][0], other[i][1], 1);
		assert_int_equal(config_apply_env_plugin_defaults("/x/libnccl-net-symmem.so"), 0);
		assert_string_equal(config_env_plugin_applied(), "");
		assert_string_equal(getenv(other[i][0]), other[i][1]);
		assert_null(getenv("NCCL_P2P_DISABLE"));
		assert_null(getenv("NCCL_NCHANNELS_PER_NET_PEER"));
	}
	/* Its own names, in any of NCCL's spellings, and NCCL_NET in any case. */
	env_plugin_clear();
	setenv("NCCL_NET_PLUGIN", "symmem", 1);
	setenv("NCCL_NET", "SYMMEM", 1);
	assert_int_equal(config_apply_env_plugin_defaults("/x/libnccl-net-symmem.so"), 4);
	env_plugin_clear();
	setenv("NCCL_NET_PLUGIN", "libnccl-env-symmem.so", 1);
	assert_int_equal(config_apply_env_plugin_defaults("/x/libnccl-net-symmem.so"), 5);
	env_plugin_clear();
}

/* NCCL_SYMMEM_NCCL_DEFAULTS=0 drops the tuning (the channels per peer)
 * and keeps the routing: NCCL_ENV_PLUGIN=symmem asked for it, and the env
 * plugin has no log to say it did nothing. */
static void test_env_plugin_without_nccl_defaults(void **state)
{
	(void)state;
	env_plugin_clear();
	setenv("NCCL_SYMMEM_NCCL_DEFAULTS", "0", 1);
	assert_int_equal(config_apply_env_plugin_defaults("/x/libnccl-net-symmem.so"), 5);
	assert_string_equal(getenv("NCCL_NET"), "symmem");
	assert_string_equal(getenv("NCCL_P2P_DISABLE"), "1");
	assert_null(getenv("NCCL_NCHANNELS_PER_NET_PEER"));
	env_plugin_clear();
}

/* Copy engines not in use (NCCL_SYMMEM_BACKEND=tcp or ib): routed, but
 * NCCL keeps its own channel count, which fits sockets better; so with
 * NCCL_PASS_SM=1, whose CTAs per peer the user picks.  A
 * malformed NCCL_SYMMEM_ variable still routes the job, so the net
 * plugin's init fails on it with a WARN rather than NCCL running quietly
 * without it. */
static void test_env_plugin_backend_and_bad_values(void **state)
{
	(void)state;
	/* Sockets or RDMA loopback, not copy engines: NCCL's channels per
	 * peer fit them. */
	static const char *const backends[] = { "tcp", "ib" };

	for (size_t i = 0; i < sizeof(backends) / sizeof(backends[0]); i++) {
		env_plugin_clear();
		setenv("NCCL_SYMMEM_BACKEND", backends[i], 1);
		assert_int_equal(config_apply_env_plugin_defaults("/x/libnccl-net-symmem.so"), 5);
		assert_string_equal(getenv("NCCL_P2P_DISABLE"), "1");
		assert_null(getenv("NCCL_NCHANNELS_PER_NET_PEER"));
	}

	/* NCCL_PASS_SM=1: the channels per peer stay the user's call. */
	env_plugin_clear();
	setenv("NCCL_PASS_SM", "1", 1);
	assert_int_equal(config_apply_env_plugin_defaults("/x/libnccl-net-symmem.so"), 5);
	assert_null(getenv("NCCL_NCHANNELS_PER_NET_PEER"));
	unsetenv("NCCL_PASS_SM");

	/* Malformed: all of it, whatever else is set, since nothing parsed
	 * can be trusted; the net plugin's init then fails on it. */
	static const char *const also[][2] = {
		{ NULL, NULL },
		{ "NCCL_PASS_SM", "1" },
		{ "NCCL_SYMMEM_NCCL_DEFAULTS", "0" },
	};

	for (size_t i = 0; i < sizeof(also) / sizeof(also[0]); i++) {
		env_plugin_clear();
		setenv("NCCL_SYMMEM_STREAMS", "many", 1);
		if (also[i][0])
			setenv(also[i][0], also[i][1], 1);
		assert_int_equal(config_apply_env_plugin_defaults("/x/libnccl-net-symmem.so"), 6);
		assert_string_equal(getenv("NCCL_NET"), "symmem");
		assert_string_equal(getenv("NCCL_NCHANNELS_PER_NET_PEER"), "16");
	}
	env_plugin_clear();
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_defaults),
		cmocka_unit_test(test_thread_thresholds),
		cmocka_unit_test(test_proto_default),
		cmocka_unit_test(test_own_defaults_not_the_users),
		cmocka_unit_test(test_own_defaults_matched_whole),
		cmocka_unit_test(test_nccl_advice),
		cmocka_unit_test(test_graph_register_and_algo_defaults),
		cmocka_unit_test(test_ll128_chunk),
		cmocka_unit_test(test_ll_max),
		cmocka_unit_test(test_coll_register),
		cmocka_unit_test(test_ib_mode),
		cmocka_unit_test(test_channel_bounds),
		cmocka_unit_test(test_p2p_chunk_fits_nccl_pool),
		cmocka_unit_test(test_bool_vars_accept),
		cmocka_unit_test(test_bool_vars_reject),
		cmocka_unit_test(test_nccl_tristate),
		cmocka_unit_test(test_tristate_strict),
		cmocka_unit_test(test_size_vars),
		cmocka_unit_test(test_chunk_ring_ranges),
		cmocka_unit_test(test_growth_factor),
		cmocka_unit_test(test_seconds),
		cmocka_unit_test(test_ib_hca_accepts),
		cmocka_unit_test(test_ib_hca_rejects),
		cmocka_unit_test(test_socket_ifname),
		cmocka_unit_test(test_nccl_lists),
		cmocka_unit_test(test_int_vars),
		cmocka_unit_test(test_nccl_ints),
		cmocka_unit_test(test_nccl_warnings_joined),
		cmocka_unit_test(test_backend),
		cmocka_unit_test(test_copy_helper_path),
		cmocka_unit_test(test_visible_gpus),
		cmocka_unit_test(test_cross_check_pool),
		cmocka_unit_test(test_cross_check_ring),
		cmocka_unit_test(test_empty_values),
		cmocka_unit_test(test_first_error_wins),
		cmocka_unit_test(test_error_one_line),
		cmocka_unit_test(test_error_buffer),
		cmocka_unit_test(test_describe_set_only),
		cmocka_unit_test(test_inner_net_name),
		cmocka_unit_test(test_describe_all),
		cmocka_unit_test(test_describe_size_format),
		cmocka_unit_test(test_describe_roundtrip),
		cmocka_unit_test(test_unknown_vars),
		cmocka_unit_test(test_config_get_ok),
		cmocka_unit_test(test_config_get_error),
		cmocka_unit_test(test_nccl_defaults),
		cmocka_unit_test(test_nccl_channel_defaults),
		cmocka_unit_test(test_config_get_defaults),
		cmocka_unit_test(test_plugin_ref_count),
		cmocka_unit_test(test_p2p_off),
		cmocka_unit_test(test_env_plugin_sets_routing),
		cmocka_unit_test(test_env_plugin_unusable_paths),
		cmocka_unit_test(test_env_plugin_without_nccl_defaults),
		cmocka_unit_test(test_env_plugin_keeps_user_values),
		cmocka_unit_test(test_env_plugin_leaves_other_nets),
		cmocka_unit_test(test_env_plugin_backend_and_bad_values),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
