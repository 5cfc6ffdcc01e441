/* symmem's import of a peer's GPU memory (symmem/import.c) without a GPU,
 * for fuzzing what a receiving peer announces: an fd export "maps" as a
 * heap buffer of exactly the bytes the peer claims, so a copy that runs
 * past what the sender checked is caught by AddressSanitizer on its first
 * byte (on a GPU it would fault and poison the context).  Like the
 * driver, it refuses a mapping larger than the allocation behind the fd.
 * It defines every symbol import.c does, which is never linked beside it. */
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "symmem.h"

/* Larger announced allocations are refused: memory is finite. */
#define MAP_MAX (16ull << 20)

struct sm_mapping {
	uint8_t *base;
};

static int live;

int sm_import_get(int owner_pid, const struct sm_share_info *info, int fd,
		  struct sm_mapping **out)
{
	struct sm_mapping *m;
	struct stat st;
	int rc = SM_OK;

	(void)owner_pid;
	*out = NULL;
	if (info->kind != SM_SHARE_POSIX_FD || fd < 0)
		rc = sm_fail(SM_ERR_CUDA, "the stand-in imports fd exports only");
	else if (!info->alloc_size || info->alloc_size > MAP_MAX || fstat(fd, &st) != 0 ||
		 (uint64_t)st.st_size < info->alloc_size)
		rc = sm_fail(SM_ERR_CUDA, "cannot map %llu bytes of that export",
			     (unsigned long long)info->alloc_size);
	if (fd >= 0)
		close(fd);
	if (rc)
		return rc;
	m = calloc(1, sizeof(*m));
	if (m)
		m->base = malloc(info->alloc_size);
	if (!m || !m->base) {
		free(m);
		return sm_fail(SM_ERR_SYSTEM, "out of memory");
	}
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
	free(m->base);
	live--;
	free(m);
}

int sm_import_count(void)
{
	return live;
}
