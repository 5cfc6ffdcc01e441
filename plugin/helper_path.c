/* Where the copy helper (symmem-copyd) lives.  An explicit
 * NCCL_SYMMEM_COPY_HELPER_PATH wins; otherwise the helper is looked for
 * next to this library (a build tree, or a copy of both files anywhere),
 * then in the libexec directory the build was configured for. */
#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "helper_path.h"
#include "log.h"

#define HELPER_NAME "symmem-copyd"

static pthread_once_t once = PTHREAD_ONCE_INIT;
static const struct config *once_cfg;
static char found[PATH_MAX];
static const char *result;
/* Any object of this library: dladdr() names the file that holds it. */
static const char anchor;

static int try_dir(const char *dir)
{
	if ((size_t)snprintf(found, sizeof(found), "%s/%s", dir, HELPER_NAME) >= sizeof(found))
		return 0;
	return access(found, X_OK) == 0;
}

static void find(void)
{
	const struct config *cfg = once_cfg;
	char dir[PATH_MAX];
	Dl_info info;

	if (!cfg->copy_helper)
		return;
	if (cfg->copy_helper_path[0]) {
		if (access(cfg->copy_helper_path, X_OK) == 0) {
			snprintf(found, sizeof(found), "%s", cfg->copy_helper_path);
			result = found;
		} else {
			LOG_WARN("NET/symmem: NCCL_SYMMEM_COPY_HELPER_PATH=%s is not an executable "
				 "file; copies run in the NCCL process", cfg->copy_helper_path);
		}
		return;
	}
	if (dladdr(&anchor, &info) && info.dli_fname &&
	    strlen(info.dli_fname) < sizeof(dir)) {
		char *slash;

		snprintf(dir, sizeof(dir), "%s", info.dli_fname);
		slash = strrchr(dir, '/');
		if (slash) {
			*slash = '\0';
			if (try_dir(dir)) {
				result = found;
				return;
			}
		}
	}
	if (try_dir(SYMMEM_LIBEXECDIR)) {
		result = found;
		return;
	}
	LOG_WARN("NET/symmem: %s not found next to the library nor in %s; copies run in the NCCL "
		 "process (set NCCL_SYMMEM_COPY_HELPER_PATH, or NCCL_SYMMEM_COPY_HELPER=0 to "
		 "silence this)", HELPER_NAME, SYMMEM_LIBEXECDIR);
}

const char *helper_path_find(const struct config *cfg)
{
	once_cfg = cfg;
	pthread_once(&once, find);
	return result;
}
