/* symmem's export of GPU allocations (symmem/export.c) without a GPU, for
 * test_tcp_bounce.c's and test_copy_timeout.c's copy-helper cases: any
 * buffer "exports" as itself,
 * named by its address, so the stand-in engine's helper can copy into and
 * out of it.  It defines every symbol export.c does, so that file is never
 * linked beside it. */
#include <stdlib.h>
#include <string.h>

#include "symmem.h"

struct sm_export {
	int refs;
};

static uint64_t next_alloc_id = 1;
static int live;

uint64_t sm_alloc_id_new(void)
{
	return next_alloc_id++;
}

int sm_export_get(const void *ptr, size_t size, struct sm_export **out,
		  struct sm_share_info *info, uint64_t *offset, int *fd)
{
	struct sm_export *e = calloc(1, sizeof(*e));

	*out = NULL;
	if (!e)
		return sm_fail(SM_ERR_SYSTEM, "out of memory");
	e->refs = 1;
	memset(info, 0, sizeof(*info));
	/* A legacy IPC handle needs no descriptor, as this stand-in has
	 * none: the peer's copy helper is handed the share as it came. */
	info->kind = SM_SHARE_LEGACY_IPC;
	info->alloc_id = sm_alloc_id_new();
	info->alloc_size = size;
	info->addr = (uint64_t)(uintptr_t)ptr;
	*offset = 0;
	*fd = -1;
	*out = e;
	live++;
	return SM_OK;
}

void sm_export_put(struct sm_export *e)
{
	if (!e || --e->refs > 0)
		return;
	live--;
	free(e);
}

int sm_export_count(void)
{
	return live;
}
