/* Shared host memory between the plugin's processes: an anonymous memfd,
 * sized and mapped, whose descriptor travels to the peer (SCM_RIGHTS) or
 * the copy helper.  The shared-memory rings, the host staging, the TCP
 * bounce slots and the copy helper's request ring are all made here. */
#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "symmem.h"

int sm_memfd_map(const char *name, uint64_t size, uint64_t map_len, int *fd, void **map)
{
	void *p;
	int rc;

	*fd = memfd_create(name, MFD_CLOEXEC);
	if (*fd < 0)
		return sm_fail(SM_ERR_SYSTEM, "memfd_create for %s: %s", name, strerror(errno));
	if (ftruncate(*fd, (off_t)size) != 0) {
		rc = sm_fail(SM_ERR_SYSTEM, "sizing %llu bytes of %s: %s", (unsigned long long)size,
			     name, strerror(errno));
		goto fail;
	}
	p = mmap(NULL, map_len, PROT_READ | PROT_WRITE, MAP_SHARED, *fd, 0);
	if (p == MAP_FAILED) {
		rc = sm_fail(SM_ERR_SYSTEM, "mapping %llu bytes of %s: %s",
			     (unsigned long long)map_len, name, strerror(errno));
		goto fail;
	}
	*map = p;
	return SM_OK;
fail:
	close(*fd);
	*fd = -1;
	return rc;
}
