/* Shared host memory between the plugin's processes: an anonymous memfd,
 * sized and mapped, whose descriptor travels to the peer (SCM_RIGHTS) or
 * the copy helper.  The shared-memory rings, the host staging, the TCP
 * bounce slots and the copy helper's request ring are all made here.
 *
 * Each is sealed against shrinking once sized: a process that maps
 * another's memfd would take SIGBUS on the first touch past a shrunk end,
 * so the one that maps it checks the seal (sm_memfd_check) and can then
 * trust the size it checked. */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "symmem.h"

int sm_memfd_map(const char *name, uint64_t size, uint64_t map_len, int *fd, void **map)
{
	void *p;
	int rc;

	*fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (*fd < 0)
		return sm_fail(SM_ERR_SYSTEM, "memfd_create for %s: %s", name, strerror(errno));
	if (ftruncate(*fd, (off_t)size) != 0) {
		rc = sm_fail(SM_ERR_SYSTEM, "sizing %llu bytes of %s: %s", (unsigned long long)size,
			     name, strerror(errno));
		goto fail;
	}
	if (fcntl(*fd, F_ADD_SEALS, F_SEAL_SHRINK) != 0) {
		rc = sm_fail(SM_ERR_SYSTEM, "sealing %s against shrinking: %s", name,
			     strerror(errno));
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

int sm_memfd_check(int fd, uint64_t size, int exact, const char *what)
{
	struct stat st;
	int seals;

	if (fstat(fd, &st) != 0)
		return sm_fail(SM_ERR_SYSTEM, "%s: %s", what, strerror(errno));
	if (st.st_size < 0 || (exact ? (uint64_t)st.st_size != size : (uint64_t)st.st_size < size))
		return sm_fail(SM_ERR_INVALID, "%s is %lld bytes, not %s%llu", what,
			       (long long)st.st_size, exact ? "" : "at least ",
			       (unsigned long long)size);
	seals = fcntl(fd, F_GET_SEALS);
	if (seals < 0 || !(seals & F_SEAL_SHRINK))
		return sm_fail(SM_ERR_INVALID, "%s is not sealed against shrinking (made by "
			       "another build of the plugin, or not by the plugin)", what);
	return SM_OK;
}
