/* Memory: cuMem allocations as memfds (an export is a dup, an import a
 * mapping), cuMemAlloc pages, host registrations, and what the driver
 * says about a pointer. */
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fake.h"

#define GRANULARITY ((size_t)64 << 10)
#define MAX_MAPS 4096
#define MAX_REGS 4096

/* An allocation: a memfd and what it was created with. */
struct alloc {
	int fd;
	size_t size;
	CUmemAllocationProp prop;
	int refs;		/* handles plus mappings */
};

/* A mapped range of address space, and its allocation (NULL for
 * cuMemAlloc memory, which cannot be exported). */
struct map {
	uintptr_t va;
	size_t size;
	struct alloc *a;
};

/* Host memory registered with cuMemHostRegister; kept in strict mode
 * only, the one that checks copies against it. */
struct reg {
	uintptr_t va;
	size_t size;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct map maps[MAX_MAPS];
static int nmaps;
static struct reg regs[MAX_REGS];
static int nregs;

static void alloc_put(struct alloc *a)
{
	if (a && --a->refs == 0) {
		close(a->fd);
		free(a);
	}
}

static struct map *map_at(uintptr_t p)
{
	for (int i = 0; i < nmaps; i++)
		if (p >= maps[i].va && p < maps[i].va + maps[i].size)
			return &maps[i];
	return NULL;
}

static CUresult add_map(uintptr_t va, size_t size, struct alloc *a)
{
	if (nmaps == MAX_MAPS)
		return CUDA_ERROR_OUT_OF_MEMORY;
	maps[nmaps++] = (struct map){ va, size, a };
	if (a)
		a->refs++;
	return CUDA_SUCCESS;
}

static void drop_map(struct map *m)
{
	alloc_put(m->a);
	*m = maps[--nmaps];
}

int fake_reachable(CUdeviceptr p, size_t len)
{
	int found = 0;

	pthread_mutex_lock(&lock);
	for (int i = 0; i < nregs && !found; i++)
		found = fake_inside(regs[i].va, regs[i].size, (uintptr_t)p, len);
	for (int i = 0; i < nmaps && !found; i++)
		found = fake_inside(maps[i].va, maps[i].size, (uintptr_t)p, len);
	pthread_mutex_unlock(&lock);
	return found;
}

FAKE_EXPORT CUresult cuPointerGetAttribute(void *out, CUpointer_attribute attr, CUdeviceptr p)
{
	struct map *m;
	CUresult rc = CUDA_SUCCESS;

	/* fake_dev_alloc's pages: the stand-in asks which context owns them. */
	if (fake_dev_find(p, 1) >= 0) {
		if (attr == CU_POINTER_ATTRIBUTE_CONTEXT)
			*(CUcontext *)out = (CUcontext)&fake_ctx;
		else if (attr == CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL)
			*(int *)out = 0;
		else if (attr == CU_POINTER_ATTRIBUTE_MEMORY_TYPE)
			*(unsigned int *)out = CU_MEMORYTYPE_DEVICE;
		else
			return CUDA_ERROR_NOT_SUPPORTED;
		return CUDA_SUCCESS;
	}
	pthread_mutex_lock(&lock);
	m = map_at((uintptr_t)p);
	if (!m)
		rc = CUDA_ERROR_INVALID_VALUE;
	else if (attr == CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL)
		*(int *)out = 0;
	else if (attr == CU_POINTER_ATTRIBUTE_CONTEXT)
		*(CUcontext *)out = (CUcontext)&fake_ctx;
	else if (attr == CU_POINTER_ATTRIBUTE_MEMORY_TYPE)
		*(unsigned int *)out = m->a && m->a->prop.location.type != CU_MEM_LOCATION_TYPE_DEVICE ?
				       CU_MEMORYTYPE_HOST : CU_MEMORYTYPE_DEVICE;
	else
		rc = CUDA_ERROR_NOT_SUPPORTED;
	pthread_mutex_unlock(&lock);
	return rc;
}

static CUresult address_range(CUdeviceptr *base, size_t *size, CUdeviceptr p)
{
	struct map *m;

	pthread_mutex_lock(&lock);
	m = map_at((uintptr_t)p);
	if (m) {
		*base = m->va;
		*size = m->size;
	}
	pthread_mutex_unlock(&lock);
	return m ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
}

static CUresult granularity(size_t *g, const CUmemAllocationProp *prop,
			    CUmemAllocationGranularity_flags option)
{
	(void)prop;
	(void)option;
	*g = GRANULARITY;
	return CUDA_SUCCESS;
}

static CUresult create(CUmemGenericAllocationHandle *h, size_t size,
		       const CUmemAllocationProp *prop, unsigned long long flags)
{
	struct alloc *a;

	(void)flags;
	if (!size || size % GRANULARITY)
		return CUDA_ERROR_INVALID_VALUE;
	a = calloc(1, sizeof(*a));
	if (!a)
		return CUDA_ERROR_OUT_OF_MEMORY;
	a->fd = memfd_create("fake-cumem", MFD_CLOEXEC);
	if (a->fd < 0 || ftruncate(a->fd, (off_t)size)) {
		if (a->fd >= 0)
			close(a->fd);
		free(a);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	a->size = size;
	a->prop = *prop;
	a->refs = 1;
	*h = (CUmemGenericAllocationHandle)(uintptr_t)a;
	return CUDA_SUCCESS;
}

static CUresult release(CUmemGenericAllocationHandle h)
{
	pthread_mutex_lock(&lock);
	alloc_put((struct alloc *)(uintptr_t)h);
	pthread_mutex_unlock(&lock);
	return CUDA_SUCCESS;
}

static CUresult retain(CUmemGenericAllocationHandle *h, void *p)
{
	struct map *m;

	pthread_mutex_lock(&lock);
	m = map_at((uintptr_t)p);
	if (m && m->a) {
		m->a->refs++;
		*h = (CUmemGenericAllocationHandle)(uintptr_t)m->a;
	}
	pthread_mutex_unlock(&lock);
	return m && m->a ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

static CUresult properties(CUmemAllocationProp *prop, CUmemGenericAllocationHandle h)
{
	*prop = ((struct alloc *)(uintptr_t)h)->prop;
	return CUDA_SUCCESS;
}

static CUresult export(void *out, CUmemGenericAllocationHandle h, CUmemAllocationHandleType t,
		       unsigned long long flags)
{
	struct alloc *a = (struct alloc *)(uintptr_t)h;
	int fd;

	(void)flags;
	if (t != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR ||
	    !(a->prop.requestedHandleTypes & CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR))
		return CUDA_ERROR_INVALID_VALUE;
	fd = fcntl(a->fd, F_DUPFD_CLOEXEC, 0);
	if (fd < 0)
		return CUDA_ERROR_OUT_OF_MEMORY;
	*(int *)out = fd;
	return CUDA_SUCCESS;
}

/* Strict mode refuses, as a driver refuses a handle it cannot open: the
 * fuzz target's client hands any memfd over as GPU memory, and copies
 * then stay within what the helper registered. */
static CUresult import(CUmemGenericAllocationHandle *h, void *os, CUmemAllocationHandleType t)
{
	int fd = (int)(uintptr_t)os;
	struct alloc *a;
	struct stat st;

	if (fake_strict)
		return CUDA_ERROR_NOT_SUPPORTED;
	if (t != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR || fstat(fd, &st) || st.st_size <= 0)
		return CUDA_ERROR_INVALID_VALUE;
	a = calloc(1, sizeof(*a));
	if (!a)
		return CUDA_ERROR_OUT_OF_MEMORY;
	a->fd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
	a->size = (size_t)st.st_size;
	a->prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
	a->prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	a->prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
	a->refs = 1;
	*h = (CUmemGenericAllocationHandle)(uintptr_t)a;
	return a->fd < 0 ? CUDA_ERROR_OUT_OF_MEMORY : CUDA_SUCCESS;
}

static CUresult reserve(CUdeviceptr *p, size_t size, size_t align, CUdeviceptr addr,
			unsigned long long flags)
{
	void *v;

	(void)align;
	(void)addr;
	(void)flags;
	v = mmap(NULL, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (v == MAP_FAILED)
		return CUDA_ERROR_OUT_OF_MEMORY;
	*p = (CUdeviceptr)(uintptr_t)v;
	return CUDA_SUCCESS;
}

static CUresult address_free(CUdeviceptr p, size_t size)
{
	return munmap((void *)(uintptr_t)p, size) ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}

static CUresult map(CUdeviceptr p, size_t size, size_t offset, CUmemGenericAllocationHandle h,
		    unsigned long long flags)
{
	struct alloc *a = (struct alloc *)(uintptr_t)h;
	CUresult rc;

	(void)flags;
	if (offset + size > a->size)
		return CUDA_ERROR_INVALID_VALUE;
	if (mmap((void *)(uintptr_t)p, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, a->fd,
		 (off_t)offset) == MAP_FAILED)
		return CUDA_ERROR_OUT_OF_MEMORY;
	pthread_mutex_lock(&lock);
	rc = add_map((uintptr_t)p, size, a);
	pthread_mutex_unlock(&lock);
	return rc;
}

static CUresult unmap(CUdeviceptr p, size_t size)
{
	struct map *m;

	pthread_mutex_lock(&lock);
	m = map_at((uintptr_t)p);
	if (m)
		drop_map(m);
	pthread_mutex_unlock(&lock);
	if (!m)
		return CUDA_ERROR_INVALID_VALUE;
	mmap((void *)(uintptr_t)p, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
	return CUDA_SUCCESS;
}

static CUresult set_access(CUdeviceptr p, size_t size, const CUmemAccessDesc *d, size_t n)
{
	(void)p;
	(void)size;
	(void)d;
	(void)n;
	return CUDA_SUCCESS;
}

static CUresult mem_alloc(CUdeviceptr *p, size_t size)
{
	void *v = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CUresult rc;

	if (v == MAP_FAILED)
		return CUDA_ERROR_OUT_OF_MEMORY;
	pthread_mutex_lock(&lock);
	rc = add_map((uintptr_t)v, size, NULL);
	pthread_mutex_unlock(&lock);
	*p = (CUdeviceptr)(uintptr_t)v;
	return rc;
}

static CUresult mem_free(CUdeviceptr p)
{
	struct map *m;
	size_t size = 0;

	pthread_mutex_lock(&lock);
	m = map_at((uintptr_t)p);
	if (m && !m->a) {
		size = m->size;
		drop_map(m);
	}
	pthread_mutex_unlock(&lock);
	if (!size)
		return CUDA_ERROR_INVALID_VALUE;
	munmap((void *)(uintptr_t)p, size);
	return CUDA_SUCCESS;
}

/* Legacy IPC has no fd to carry here: the plugin's cuMem paths are the
 * ones this driver serves. */
static CUresult ipc_get(CUipcMemHandle *h, CUdeviceptr p)
{
	(void)h;
	(void)p;
	return CUDA_ERROR_NOT_SUPPORTED;
}

static CUresult ipc_open(CUdeviceptr *p, CUipcMemHandle h, unsigned int flags)
{
	(void)p;
	(void)h;
	(void)flags;
	return CUDA_ERROR_NOT_SUPPORTED;
}

static CUresult ipc_close(CUdeviceptr p)
{
	(void)p;
	return CUDA_ERROR_INVALID_VALUE;
}

static CUresult host_register(void *p, size_t size, unsigned int flags)
{
	CUresult rc = CUDA_SUCCESS;

	(void)flags;
	if (!fake_strict)
		return CUDA_SUCCESS;
	pthread_mutex_lock(&lock);
	if (nregs == MAX_REGS)
		rc = CUDA_ERROR_OUT_OF_MEMORY;
	else
		regs[nregs++] = (struct reg){ (uintptr_t)p, size };
	pthread_mutex_unlock(&lock);
	return rc;
}

static CUresult host_unregister(void *p)
{
	CUresult rc = CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;

	if (!fake_strict)
		return CUDA_SUCCESS;
	pthread_mutex_lock(&lock);
	for (int i = 0; i < nregs; i++) {
		if (regs[i].va == (uintptr_t)p) {
			regs[i] = regs[--nregs];
			rc = CUDA_SUCCESS;
			break;
		}
	}
	pthread_mutex_unlock(&lock);
	return rc;
}

static CUresult host_device_pointer(CUdeviceptr *d, void *p, unsigned int flags)
{
	(void)flags;
	*d = (CUdeviceptr)(uintptr_t)p;
	return CUDA_SUCCESS;
}

const struct fake_entry fake_mem_entries[] = {
	FAKE_ENTRY("cuPointerGetAttribute", cuPointerGetAttribute),
	FAKE_ENTRY("cuMemGetAddressRange", address_range),
	FAKE_ENTRY("cuMemRetainAllocationHandle", retain),
	FAKE_ENTRY("cuMemGetAllocationPropertiesFromHandle", properties),
	FAKE_ENTRY("cuMemExportToShareableHandle", export),
	FAKE_ENTRY("cuMemImportFromShareableHandle", import),
	FAKE_ENTRY("cuMemAddressReserve", reserve),
	FAKE_ENTRY("cuMemAddressFree", address_free),
	FAKE_ENTRY("cuMemMap", map),
	FAKE_ENTRY("cuMemUnmap", unmap),
	FAKE_ENTRY("cuMemSetAccess", set_access),
	FAKE_ENTRY("cuMemRelease", release),
	FAKE_ENTRY("cuMemAlloc", mem_alloc),
	FAKE_ENTRY("cuMemFree", mem_free),
	FAKE_ENTRY("cuMemCreate", create),
	FAKE_ENTRY("cuMemGetAllocationGranularity", granularity),
	FAKE_ENTRY("cuIpcGetMemHandle", ipc_get),
	FAKE_ENTRY("cuIpcOpenMemHandle", ipc_open),
	FAKE_ENTRY("cuIpcCloseMemHandle", ipc_close),
	FAKE_ENTRY("cuMemHostRegister", host_register),
	FAKE_ENTRY("cuMemHostUnregister", host_unregister),
	FAKE_ENTRY("cuMemHostGetDevicePointer", host_device_pointer),
	{ NULL, NULL },
};
