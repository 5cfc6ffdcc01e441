/* symmem's import of peers' GPU memory (symmem/import.c) without a GPU,
 * for test_copy_timeout.c's copies issued in NCCL's process: a peer's
 * export (export_standin.c names a buffer by its address in this process)
 * "maps" at that address, and live mappings are counted, so a test can
 * see when the transport unmaps one.  It defines every symbol import.c
 * does, so that file is never linked beside it. */
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include "symmem.h"

struct sm_mapping {
	uint8_t *base;
};

static int live;

int sm_import_get(int owner_pid, const struct sm_share_info *info, int fd,
		  struct sm_mapping **out)
{
	struct sm_mapping *m;

	(void)owner_pid;
	*out = NULL;
	if (fd >= 0)
		close(fd);
	m = calloc(1, sizeof(*m));
	if (!m)
		return sm_fail(SM_ERR_SYSTEM, "out of memory");
	m->base = (uint8_t *)(uintptr_t)info->addr;
	live++;
	*out = m;
	return SM_OK;
}

uint8_t *sm_mapping_base(const struct sm_mapping *m)
{
	return m->base;
}

void sm_import_put(struct sm_mapping *m)
{
	if (!m)
		return;
	live--;
	free(m);
}

int sm_import_count(void)
{
	return live;
}
