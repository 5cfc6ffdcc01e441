/* The env plugin, libnccl-env-symmem.so: NCCL_ENV_PLUGIN=symmem routes a
 * job through the net plugin beside it (libnccl-net-symmem.so) with that
 * one variable.  A library of its own, holding this file and the config
 * module only: a second name for the net plugin's file would not be found
 * once installed (ldconfig caches one name per file).
 *
 * Why an env plugin at all: NCCL reads NCCL_NCHANNELS_PER_NET_PEER before
 * it loads a net plugin, so the net plugin's own defaults come too late
 * for it, and without it send/recv and alltoall run far below their speed
 * on the copy-engine path (docs/performance.md).  NCCL loads the env
 * plugin first, before it reads anything.
 *
 * The defaults go into the process environment (config_route.c, only where
 * the user left a variable unset), so NCCL, the net plugin's config and a
 * copy helper started later all read the same values; getEnv then just
 * reads the environment, as NCCL's built-in one does. */
#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "nccl_abi.h"

#define EXPORT __attribute__((visibility("default")))
#define NET_PLUGIN_FILE "libnccl-net-symmem.so"

/* Any object of this library: dladdr() names the file it was loaded from. */
static const char anchor;

/* The net plugin beside this library, links resolved, so that
 * NCCL_NET_PLUGIN opens that very file wherever the two lie; "" when the
 * loader does not say or it is not there (config_route.c then gives the
 * name). */
static void net_plugin_path(char *out, size_t len)
{
	char *real = NULL, *slash;
	Dl_info info;

	out[0] = '\0';
	if (!dladdr(&anchor, &info) || !info.dli_fname)
		return;
	real = realpath(info.dli_fname, NULL);
	slash = real ? strrchr(real, '/') : NULL;
	if (slash) {
		*slash = '\0';		/* the directory */
		if ((size_t)snprintf(out, len, "%s/%s", real, NET_PLUGIN_FILE) >= len ||
		    access(out, R_OK) != 0)
			out[0] = '\0';
	}
	free(real);
}

/* Sets the defaults; how many. */
static int apply_defaults(void)
{
	char net_plugin[PATH_MAX];

	net_plugin_path(net_plugin, sizeof(net_plugin));
	return config_apply_env_plugin_defaults(net_plugin);
}

static ncclResult_t env_init(uint8_t major, uint8_t minor, uint8_t patch, const char *suffix)
{
	(void)major;
	(void)minor;
	(void)patch;
	(void)suffix;
	apply_defaults();
	return ncclSuccess;
}

/* v2: the same, and the list goes to NCCL's log at once.  The net plugin
 * logs it again at its init in its own words (v1's init has no logger,
 * and NCCL 2.28.9 knows v1 only, so that line is the one every NCCL
 * shows). */
static ncclResult_t env_init_v2(uint8_t major, uint8_t minor, uint8_t patch, const char *suffix,
				ncclDebugLogger_t logger)
{
	int n;

	(void)major;
	(void)minor;
	(void)patch;
	(void)suffix;
	n = apply_defaults();
	if (logger)	/* a list inherited from a parent process is not this one's */
		logger(NCCL_LOG_INFO, NCCL_INIT | NCCL_ENV, __FILE__, __LINE__,
		       "ENV/Plugin symmem set what the user left unset: %s",
		       n > 0 ? config_env_plugin_applied() : "nothing");
	return ncclSuccess;
}

static ncclResult_t env_finalize(void)
{
	return ncclSuccess;
}

static const char *env_get(const char *name)
{
	return getenv(name);
}

EXPORT ncclEnv_v2_t ncclEnvPlugin_v2 = {
	.name = "symmem",
	.init = env_init_v2,
	.finalize = env_finalize,
	.getEnv = env_get,
};

EXPORT ncclEnv_v1_t ncclEnvPlugin_v1 = {
	.name = "symmem",
	.init = env_init,
	.finalize = env_finalize,
	.getEnv = env_get,
};
