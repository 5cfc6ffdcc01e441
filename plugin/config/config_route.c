/* The env plugin's routing (NCCL_ENV_PLUGIN=symmem, plugin/env_plugin.c):
 * the variables that send a job's GPU traffic through the net plugin,
 * set in the process environment before NCCL reads any of them, each only
 * where the user left it unset.  NCCL loads an env plugin before it reads
 * any variable (NCCL 2.28.7 and later), so from there even those it reads
 * before it loads the net plugin can be given. */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "config_internal.h"

/* What routes a job through the plugin, set where the user left it unset,
 * besides NCCL_NET_PLUGIN (the net plugin's path) and the variables of
 * config_nccl_advice() (where copy engines carry GPU traffic of one
 * host). */
static const struct {
	const char *name;
	const char *value;
	int intra_only;		/* only while GPU traffic of one host goes through the net */
} env_routing[] = {
	{ "NCCL_NET", "symmem", 0 },
	{ "NCCL_P2P_DISABLE", "1", 0 },
	/* A user's NCCL_P2P_DISABLE=0 (the plugin between hosts only) keeps
	 * NCCL's shared-memory path inside each host too. */
	{ "NCCL_SHM_DISABLE", "1", 1 },
	{ "NCCL_NET_PLUGIN_REF_COUNT", "1", 0 },
};

/* NCCL_NET_PLUGIN as NCCL resolves it: a bare name gets libnccl-net-
 * prefixed, a path or file name is opened as written.  A list (newer NCCL
 * takes several, comma-separated) is the user's own arrangement. */
static int names_this_plugin(const char *v)
{
	const char *base = strrchr(v, '/');

	if (strchr(v, ','))
		return 0;
	base = base ? base + 1 : v;
	return !strcmp(base, "symmem") || !strcmp(base, "libnccl-net-symmem.so") ||
	       !strcmp(base, "libnccl-env-symmem.so");
}

/* NCCL ignores a NCCL_NET_PLUGIN entry of 255 characters or more, cuts
 * names at 254, and newer NCCL splits the value at commas: a path like
 * that would load no plugin at all, so the name is given instead, which
 * NCCL looks up on the loader path as for NCCL_NET_PLUGIN=symmem. */
#define NCCL_PLUGIN_NAME_MAX 254

static const char *plugin_value(const char *path)
{
	if (!path || !*path || strlen(path) > NCCL_PLUGIN_NAME_MAX || strchr(path, ','))
		return "symmem";
	return path;
}

/* The list of what was set, "NAME=value ...", as it grows. */
struct set_list {
	/* Room for a NCCL_NET_PLUGIN of NCCL_PLUGIN_NAME_MAX and the rest. */
	char text[1024];
	size_t used;
	int full;
	int count;
};

/* Sets one variable the user left unset and adds it to the list. */
static void env_default(const char *name, const char *value, void *arg)
{
	struct set_list *list = arg;
	char item[NCCL_PLUGIN_NAME_MAX + 64];
	int n;

	if (getenv(name) || setenv(name, value, 0) != 0)
		return;
	list->count++;
	n = snprintf(item, sizeof(item), "%s=%s", name, value);
	if (n > 0)
		config_append_word(list->text, sizeof(list->text), &list->used, &list->full, item,
				   (size_t)n < sizeof(item) ? (size_t)n : sizeof(item) - 1);
}

int config_apply_env_plugin_defaults(const char *net_plugin)
{
	const char *net = getenv("NCCL_NET"), *plugin = getenv("NCCL_NET_PLUGIN");
	struct set_list list = { .text = "" };
	struct config cfg;
	char err[256];
	int parsed;

	/* The user picked another net: their job, left as it is. */
	if ((plugin && !names_this_plugin(plugin)) || (net && strcasecmp(net, "symmem") != 0))
		return 0;
	/* A malformed NCCL_SYMMEM_ variable still routes the job here, so the
	 * net plugin's init names it in a WARN and fails, instead of NCCL
	 * running quietly without the plugin.  NCCL_SYMMEM_NCCL_DEFAULTS=0
	 * keeps the routing (what NCCL_ENV_PLUGIN=symmem is asked for; v1's
	 * init has no logger to say it did nothing) and drops the tuning. */
	parsed = config_parse(&cfg, config_env_get, NULL, err, sizeof(err)) == 0;
	env_default("NCCL_NET_PLUGIN", plugin_value(net_plugin), &list);
	for (size_t i = 0; i < sizeof(env_routing) / sizeof(env_routing[0]); i++)
		if (!env_routing[i].intra_only || config_p2p_off())
			env_default(env_routing[i].name, env_routing[i].value, &list);
	if (!parsed || config_advice_wanted(&cfg))
		config_advice_each(env_default, &list);
	/* Nothing set here (a process that inherited all of it) keeps what
	 * its parent's env plugin set. */
	if (list.count)
		setenv(CONFIG_ENV_PLUGIN_SET, list.text, 1);
	return list.count;
}

const char *config_env_plugin_applied(void)
{
	const char *v = getenv(CONFIG_ENV_PLUGIN_SET);

	return v ? v : "";
}
