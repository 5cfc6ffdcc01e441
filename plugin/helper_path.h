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

#endif
