/* Exporting this process's GPU memory to peers on the same host.
 *
 * A registration names a range; what can be shared is the allocation that
 * holds it.  cuMem allocations made with a POSIX-fd handle type (NCCL's
 * default buffers) are exported as an fd; cudaMalloc memory (NCCL with
 * NCCL_CUMEM_ENABLE=0, most user buffers) as a legacy IPC handle.  One
 * record per allocation, refcounted, so registering the same memory again
 * costs a lookup. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "symmem.h"

struct sm_export {
	struct sm_export *next;
	CUdeviceptr base;
	size_t size;
	int refs;
	int fd;				/* POSIX-fd exports, else -1 */
	struct sm_share_info info;
};

static pthread_mutex_t export_lock = PTHREAD_MUTEX_INITIALIZER;
static struct sm_export *exports;
static uint64_t next_alloc_id = 1;
static int export_live;

uint64_t sm_alloc_id_new(void)
{
	uint64_t id;

	pthread_mutex_lock(&export_lock);
	id = next_alloc_id++;
	pthread_mutex_unlock(&export_lock);
	return id;
}

static int export_fd(const struct sm_cuda_api *cu, struct sm_export *e)
{
	CUmemGenericAllocationHandle h;
	CUmemAllocationProp prop;
	CUresult rc;
	int fd = -1, status = SM_OK;

	rc = cu->mem_retain_allocation_handle(&h, (void *)e->base);
	if (rc != CUDA_SUCCESS)
		return sm_cuda_fail(rc, "cuMemRetainAllocationHandle");
	memset(&prop, 0, sizeof(prop));
	rc = cu->mem_get_allocation_properties(&prop, h);
	if (rc != CUDA_SUCCESS) {
		status = sm_cuda_fail(rc, "cuMemGetAllocationPropertiesFromHandle");
		goto out;
	}
	if (!(prop.requestedHandleTypes & CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)) {
		status = sm_fail(SM_ERR_USAGE, "cuMem allocation at 0x%llx was created without the "
				 "POSIX file-descriptor handle type, so no other process can map it",
				 (unsigned long long)e->base);
		goto out;
	}
	rc = cu->mem_export(&fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0);
	if (rc != CUDA_SUCCESS) {
		status = sm_cuda_fail(rc, "cuMemExportToShareableHandle");
		goto out;
	}
	e->fd = fd;
	e->info.kind = SM_SHARE_POSIX_FD;
out:
	/* The fd holds its own reference to the allocation. */
	cu->mem_release(h);
	return status;
}

/* Copy engines move cudaMalloc memory whose size is not a multiple of
 * 64 KiB at about two thirds of full speed once another process maps it
 * through its legacy IPC handle, as the copy helper and the peers do; the
 * same memory copies at full speed in its own process, and so do multiples
 * of 64 KiB (bench/results/coalesce.md, section 4).  Native
 * NCCL's SM copies do not slow down, so users would blame the plugin: say
 * so once per allocation. */
#define LEGACY_FAST_MULTIPLE ((size_t)64 << 10)

static int export_ipc(const struct sm_cuda_api *cu, struct sm_export *e)
{
	CUipcMemHandle h;
	CUresult rc;

	rc = cu->ipc_get_mem_handle(&h, e->base);
	if (rc != CUDA_SUCCESS)
		return sm_cuda_fail(rc, "memory at 0x%llx is neither a shareable cuMem allocation "
				    "nor cudaMalloc memory; cuIpcGetMemHandle",
				    (unsigned long long)e->base);
	_Static_assert(sizeof(h) == sizeof(e->info.ipc), "IPC handle fits the share info");
	memcpy(e->info.ipc, &h, sizeof(h));
	e->info.kind = SM_SHARE_LEGACY_IPC;
	return SM_OK;
}

/* Said once, when the allocation is first exported, and outside
 * export_lock: the log write can block. */
static void note_slow_size(const struct sm_share_info *info)
{
	if (info->kind == SM_SHARE_LEGACY_IPC && info->alloc_size % LEGACY_FAST_MULTIPLE)
		sm_info("registered cudaMalloc allocation 0x%llx is %llu bytes, not a multiple of "
			"64 KiB: copy engines move such memory, legacy-IPC-mapped, at about two "
			"thirds of full speed; allocate whole 2 MiB pages (as PyTorch's caching "
			"allocator does) for full speed", (unsigned long long)info->addr,
			(unsigned long long)info->alloc_size);
}

/* The PCI bus id of GPU `ordinal` of this process, "" when the driver will
 * not say; only the copy helper's scheduling depends on it. */
static void bus_id_of(const struct sm_cuda_api *cu, int ordinal, char *out, int len)
{
	CUdevice dev;

	if (ordinal < 0 || cu->device_get(&dev, ordinal) != CUDA_SUCCESS ||
	    cu->device_get_pci_bus_id(out, len, dev) != CUDA_SUCCESS)
		out[0] = '\0';
	out[len - 1] = '\0';
}

static struct sm_export *export_find(CUdeviceptr base, size_t size)
{
	for (struct sm_export *e = exports; e; e = e->next)
		if (e->base == base && e->size == size)
			return e;
	return NULL;
}

static int export_create(const struct sm_cuda_api *cu, CUdeviceptr base, size_t size,
			 struct sm_export **out)
{
	CUmemGenericAllocationHandle probe;
	struct sm_export *e;
	int ordinal = -1, rc;

	e = calloc(1, sizeof(*e));
	if (!e)
		return sm_fail(SM_ERR_SYSTEM, "out of memory exporting an allocation");
	e->base = base;
	e->size = size;
	e->fd = -1;
	cu->pointer_get_attribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, base);
	/* Asking for the allocation handle is how one tells cuMem memory
	 * from cudaMalloc memory. */
	if (cu->mem_retain_allocation_handle(&probe, (void *)base) == CUDA_SUCCESS) {
		cu->mem_release(probe);
		rc = export_fd(cu, e);
	} else {
		rc = export_ipc(cu, e);
	}
	if (rc) {
		free(e);
		return rc;
	}
	e->info.alloc_id = next_alloc_id++;	/* export_lock is held */
	e->info.alloc_size = size;
	e->info.device = ordinal;
	bus_id_of(cu, ordinal, e->info.bus_id, sizeof(e->info.bus_id));
	e->info.addr = (uint64_t)base;
	e->refs = 1;
	e->next = exports;
	exports = e;
	export_live++;
	*out = e;
	return SM_OK;
}

int sm_export_get(const void *ptr, size_t size, struct sm_export **out,
		  struct sm_share_info *info, uint64_t *offset, int *fd)
{
	const struct sm_cuda_api *cu = sm_cu();
	CUdeviceptr base = 0;
	size_t asize = 0;
	struct sm_export *e;
	CUresult crc;
	int rc = SM_OK, found;

	*out = NULL;
	if (!cu)
		return sm_fail(SM_ERR_CUDA, "no CUDA driver: %s", sm_cuda_load()->reason);
	crc = cu->mem_get_address_range(&base, &asize, (CUdeviceptr)ptr);
	if (crc != CUDA_SUCCESS)
		return sm_cuda_fail(crc, "%p is not GPU memory the CUDA driver knows; "
				    "cuMemGetAddressRange", ptr);
	if ((CUdeviceptr)ptr + size > base + asize)
		return sm_fail(SM_ERR_USAGE, "registration %p + %zu spans more than the allocation "
			       "0x%llx + %zu; it cannot be exported as one", ptr, size,
			       (unsigned long long)base, asize);
	pthread_mutex_lock(&export_lock);
	e = export_find(base, asize);
	found = e != NULL;
	if (e)
		e->refs++;
	else
		rc = export_create(cu, base, asize, &e);
	if (!rc) {
		*out = e;
		*info = e->info;
		*offset = (CUdeviceptr)ptr - base;
		*fd = e->fd;
	}
	pthread_mutex_unlock(&export_lock);
	if (!rc && !found)
		note_slow_size(info);
	return rc;
}

void sm_export_put(struct sm_export *e)
{
	struct sm_export **pp;

	if (!e)
		return;
	pthread_mutex_lock(&export_lock);
	if (--e->refs > 0) {
		pthread_mutex_unlock(&export_lock);
		return;
	}
	for (pp = &exports; *pp && *pp != e; pp = &(*pp)->next)
		;
	if (*pp)
		*pp = e->next;
	export_live--;
	pthread_mutex_unlock(&export_lock);
	if (e->fd >= 0)
		close(e->fd);
	free(e);
}

int sm_export_count(void)
{
	int n;

	pthread_mutex_lock(&export_lock);
	n = export_live;
	pthread_mutex_unlock(&export_lock);
	return n;
}
