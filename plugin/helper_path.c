/* Where the copy helper (symmem-copyd) lives.  An explicit
 * NCCL_SYMMEM_COPY_HELPER_PATH wins; otherwise the helper is looked for
 * next to this library (a build tree, or a copy of both files anywhere),
 * then in the libexec directory the build was configured for. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "helper_path.h"
#include "log.h"

#define HELPER_NAME "symmem-copyd"

/* Any object of this library: dladdr() names the file that holds it. */
static const char anchor;

/* access(X_OK) alone passes a directory, which posix_spawn then refuses. */
static int executable_file(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0 && S_ISREG(st.st_mode) && access(path, X_OK) == 0;
}

static int try_dir(const char *dir, char *out, size_t len)
{
	if ((size_t)snprintf(out, len, "%s/%s", dir, HELPER_NAME) >= len)
		return 0;
	return executable_file(out);
}

static int library_dir(char *dir, size_t len)
{
	Dl_info info;
	char *slash;

	if (!dladdr(&anchor, &info) || !info.dli_fname || strlen(info.dli_fname) >= len)
		return 0;
	snprintf(dir, len, "%s", info.dli_fname);
	slash = strrchr(dir, '/');
	if (!slash)
		return 0;
	*slash = '\0';
	return 1;
}

enum helper_where helper_path_lookup(const struct config *cfg, const char *libdir,
				     const char *libexec, char *out, size_t len)
{
	if (cfg->copy_helper_path[0]) {
		if (!executable_file(cfg->copy_helper_path))
			return HELPER_NOT_FOUND;
		snprintf(out, len, "%s", cfg->copy_helper_path);
		return HELPER_EXPLICIT;
	}
	if (libdir && try_dir(libdir, out, len))
		return HELPER_BESIDE_LIBRARY;
	if (try_dir(libexec, out, len))
		return HELPER_LIBEXEC;
	return HELPER_NOT_FOUND;
}

const char *helper_path_resolve(const struct config *cfg, const char *libexec, char *out,
				size_t len)
{
	char dir[HELPER_PATH_MAX];
	int have_dir;

	if (!cfg->copy_helper)
		return NULL;
	have_dir = library_dir(dir, sizeof(dir));
	if (helper_path_lookup(cfg, have_dir ? dir : NULL, libexec, out, len) != HELPER_NOT_FOUND)
		return out;
	if (cfg->copy_helper_path[0])
		LOG_WARN("NET/symmem: NCCL_SYMMEM_COPY_HELPER_PATH=%s is not an executable "
			 "file; copies run in the NCCL process", cfg->copy_helper_path);
	else
		LOG_WARN("NET/symmem: %s not found next to the library nor in %s; copies run in "
			 "the NCCL process (set NCCL_SYMMEM_COPY_HELPER_PATH, or "
			 "NCCL_SYMMEM_COPY_HELPER=0 to silence this)", HELPER_NAME, libexec);
	return NULL;
}

static pthread_once_t once = PTHREAD_ONCE_INIT;
static const struct config *once_cfg;
static char found[HELPER_PATH_MAX];
static const char *result;

static void find_once(void)
{
	result = helper_path_resolve(once_cfg, SYMMEM_LIBEXECDIR, found, sizeof(found));
}

const char *helper_path_find(const struct config *cfg)
{
	once_cfg = cfg;
	pthread_once(&once, find_once);
	return result;
}
