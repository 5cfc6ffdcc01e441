/* Finding the copy helper executable (helper_path.c). */
#ifndef SYMMEM_PLUGIN_HELPER_PATH_H
#define SYMMEM_PLUGIN_HELPER_PATH_H

#include "config.h"

/* The helper to start, or NULL (NCCL_SYMMEM_COPY_HELPER=0, or not found:
 * one WARN).  Resolved once per process. */
const char *helper_path_find(const struct config *cfg);

#endif
