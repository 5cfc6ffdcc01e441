/* The config module (plugin/config/config.h): every variable's value parsing,
 * with the environment taken from the input.
 *
 * Input: lines of NAME=VALUE, the environment config_parse() sees (the
 * first line for a name wins; names are matched with strcmp, which
 * libFuzzer watches, so it learns the names the parser asks for).  Each
 * value also goes through the size and boolean parsers and the
 * CUDA_VISIBLE_DEVICES reading on its own. */
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "fuzz.h"

#define MAX_VARS 64

struct env {
	const char *name[MAX_VARS];
	const char *value[MAX_VARS];
	int n;
};

static const char *lookup(const char *name, void *arg)
{
	const struct env *e = arg;

	for (int i = 0; i < e->n; i++)
		if (!strcmp(e->name[i], name))
			return e->value[i];
	return NULL;
}

/* Splits text (NUL-terminated, modified) into the environment. */
static void split(char *text, struct env *e)
{
	char *save = NULL;

	e->n = 0;
	for (char *line = strtok_r(text, "\n", &save); line && e->n < MAX_VARS;
	     line = strtok_r(NULL, "\n", &save)) {
		char *eq = strchr(line, '=');

		if (!eq)
			continue;
		*eq = '\0';
		e->name[e->n] = line;
		e->value[e->n] = eq + 1;
		e->n++;
	}
}

static void check_line(const char *line, void *arg)
{
	(void)arg;
	FZ_CHECK(line && strchr(line, '=') && !strchr(line, '\n'));
}

static void ignore_advice(const char *name, const char *value, const char *why, void *arg)
{
	(void)arg;
	FZ_CHECK(name && value && why);
}

/* The ranges config.h promises for a configuration that parsed. */
static void check_ranges(const struct config *c)
{
	FZ_CHECK(c->pool_growth >= 1.0);
	FZ_CHECK(c->monitor_interval > 0);
	FZ_CHECK(c->streams >= 1 && c->streams <= 16);
	FZ_CHECK(c->ib_timeout >= 0 && c->ib_timeout <= 31);
	FZ_CHECK(c->ib_retry >= 0 && c->ib_retry <= 7);
	FZ_CHECK(c->ib_sl >= 0 && c->ib_sl <= 15);
	FZ_CHECK(c->ib_tc >= 0 && c->ib_tc <= 255);
	FZ_CHECK(c->ib_gid_index >= -1);
	FZ_CHECK(c->pass_sm_channels >= 1 && c->pass_sm_channels <= 64);
	FZ_CHECK(c->backend >= CONFIG_BACKEND_AUTO && c->backend <= CONFIG_BACKEND_IB);
	FZ_CHECK(c->user_min_channels >= -1 && c->user_min_channels <= 64);
	FZ_CHECK(c->user_min_ctas >= 0 && c->user_min_ctas <= 64);
	FZ_CHECK(c->user_max_channels >= 0 && c->user_max_channels <= 64);
	FZ_CHECK(c->user_min_p2p_channels >= 0 && c->user_min_p2p_channels <= 64);
	FZ_CHECK(c->ngpus_visible >= 0);
	FZ_CHECK(memchr(c->ib_hca, '\0', sizeof(c->ib_hca)));
	FZ_CHECK(memchr(c->socket_ifname, '\0', sizeof(c->socket_ifname)));
	FZ_CHECK(memchr(c->copy_helper_path, '\0', sizeof(c->copy_helper_path)));
	FZ_CHECK(memchr(c->gpus_visible, '\0', sizeof(c->gpus_visible)));
	FZ_CHECK(memchr(c->warnings, '\0', sizeof(c->warnings)));
	FZ_CHECK(config_coll_register(c) == 0 || config_coll_register(c) == 1);
	FZ_CHECK(config_ib_mode(c) >= 0 && config_ib_mode(c) <= 2);
	FZ_CHECK(config_ring_channels(c) >= 1 && config_ring_channels(c) <= 64);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	fz_quiet();
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text = malloc(size + 1), err[256];
	struct config cfg;
	struct env env;

	if (!text)
		return 0;
	memcpy(text, data, size);
	text[size] = '\0';
	split(text, &env);
	for (int i = 0; i < env.n; i++) {
		uint64_t bytes;
		int b;

		config_parse_size(env.value[i], &bytes);
		if (config_parse_bool(env.value[i], &b) == 0)
			FZ_CHECK(b == 0 || b == 1);
		FZ_CHECK(config_visible_gpus(env.value[i]) >= 0);
	}
	memset(err, 'x', sizeof(err));
	if (config_parse(&cfg, lookup, &env, err, sizeof(err)) != 0) {
		/* One line naming what was wrong. */
		FZ_CHECK(memchr(err, '\0', sizeof(err)) && err[0] && !strchr(err, '\n'));
	} else {
		check_ranges(&cfg);
		config_describe(&cfg, lookup, &env, 1, check_line, NULL);
		config_ll128_chunk(&cfg);
		config_ll_max(&cfg);
		config_rdma_passed_over(&cfg);
		config_nccl_advice(&cfg, ignore_advice, NULL);
	}
	free(text);
	return 0;
}
