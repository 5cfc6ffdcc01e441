/* The exported env plugin table: NCCL_ENV_PLUGIN=symmem (the install puts
 * libnccl-env-symmem.so beside the library, a link to it) routes a job
 * through this library with that one variable.
 *
 * Why an env plugin at all: NCCL reads NCCL_NCHANNELS_PER_NET_PEER before
 * it loads a net plugin, so the net plugin's own defaults come too late
 * for it, and without it send/recv and alltoall run at an eighth of their
 * speed on the copy-engine path.  NCCL loads the env plugin first, before
 * it reads anything.
 *
 * The defaults go into the process environment (config.c, only where the
 * user left a variable unset), so NCCL, this library's own config and a
 * copy helper started later all read the same values; getEnv then just
 * reads the environment, as NCCL's built-in one does. */
#include <dlfcn.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "nccl_abi.h"

#define EXPORT __attribute__((visibility("default")))

/* Any object of this library: dladdr() names the file it was loaded from. */
static const char anchor;

/* The library's own file, links resolved, so NCCL_NET_PLUGIN opens this
 * very file wherever it lies ("" when the loader does not say). */
static void own_path(char *out, size_t len)
{
	Dl_info info;
	char *real;

	out[0] = '\0';
	if (!dladdr(&anchor, &info) || !info.dli_fname)
		return;
	real = realpath(info.dli_fname, NULL);
	if (real && strlen(real) < len)
		memcpy(out, real, strlen(real) + 1);
	free(real);
}

static ncclResult_t env_init(uint8_t major, uint8_t minor, uint8_t patch, const char *suffix)
{
	char self[PATH_MAX];

	(void)major;
	(void)minor;
	(void)patch;
	(void)suffix;
	own_path(self, sizeof(self));
	config_apply_env_plugin_defaults(self);
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

EXPORT ncclEnv_v1_t ncclEnvPlugin_v1 = {
	.name = "symmem",
	.init = env_init,
	.finalize = env_finalize,
	.getEnv = env_get,
};
