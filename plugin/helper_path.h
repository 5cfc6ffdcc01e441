/* Finding the copy helper executable (helper_path.c). */
#ifndef SYMMEM_PLUGIN_HELPER_PATH_H
#define SYMMEM_PLUGIN_HELPER_PATH_H

#include <stddef.h>

#include "config.h"

#define HELPER_PATH_MAX 4096

/* The helper to start, or NULL (NCCL_SYMMEM_COPY_HELPER=0, or not found:
 * one WARN).  Resolved once per process. */
const char *helper_path_find(const struct config *cfg);

/* The lookup itself, every time it is called: the explicit path, else next
 * to this library, else in `libexec`.  Writes into `out`, returns it or
 * NULL. */
const char *helper_path_resolve(const struct config *cfg, const char *libexec, char *out,
				size_t len);

/* Where helper_path_lookup() found the helper. */
enum helper_where {
	HELPER_NOT_FOUND = 0,
	HELPER_EXPLICIT,	/* NCCL_SYMMEM_COPY_HELPER_PATH */
	HELPER_BESIDE_LIBRARY,	/* in `libdir` */
	HELPER_LIBEXEC,		/* in `libexec` */
};

/* The same order for a library in `libdir` (NULL: skipped), whatever
 * NCCL_SYMMEM_COPY_HELPER says and without a log line, for symmem-info,
 * which describes a library it did not load itself. */
enum helper_where helper_path_lookup(const struct config *cfg, const char *libdir,
				     const char *libexec, char *out, size_t len);

#endif
