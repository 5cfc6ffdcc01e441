/* Mapping peers' exported GPU memory into this process.
 *
 * A mapping is made once per (owner process, allocation, local GPU) and
 * shared by every connection that writes into that allocation: importing,
 * reserving address space and setting access cost tens of microseconds and
 * NCCL registers the same buffers on several connections. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "symmem.h"

struct sm_mapping {
	struct sm_mapping *next;
	int owner_pid;
	uint64_t alloc_id;
	int device;			/* local GPU the mapping was made for */
	uint32_t kind;
	CUdeviceptr va;
	size_t size;
	int refs;
	int borrowed;			/* same process: the exporter's own address */
	CUcontext ctx;
};

static pthread_mutex_t import_lock = PTHREAD_MUTEX_INITIALIZER;
static struct sm_mapping *mappings;
static int import_live;

static int map_posix_fd(const struct sm_cuda_api *cu, struct sm_mapping *m, int fd)
{
	CUmemGenericAllocationHandle h;
	CUmemAccessDesc access;
	CUresult rc;
	int status;

	rc = cu->mem_import(&h, (void *)(uintptr_t)fd, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
	if (rc != CUDA_SUCCESS)
		return sm_cuda_fail(rc, "cuMemImportFromShareableHandle");
	memset(&access, 0, sizeof(access));
	access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	access.location.id = m->device;
	access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
	status = sm_cumem_map(h, m->size, 0, &access, 1,
			      "a peer allocation (can this GPU reach the peer's?)", &m->va);
	/* The mapping keeps the physical memory alive; the handle can go. */
	cu->mem_release(h);
	return status;
}

static int enable_peer_access(const struct sm_cuda_api *cu, int local, int peer)
{
	CUcontext peer_ctx;
	CUdevice dev;
	CUresult rc;

	if (local == peer)
		return SM_OK;
	rc = cu->device_get(&dev, peer);
	if (rc == CUDA_SUCCESS)
		rc = cu->primary_ctx_retain(&peer_ctx, dev);
	if (rc != CUDA_SUCCESS)
		return sm_cuda_fail(rc, "primary context of GPU %d", peer);
	rc = cu->ctx_enable_peer_access(peer_ctx, 0);
	cu->primary_ctx_release(dev);
	if (rc != CUDA_SUCCESS && rc != CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED)
		return sm_cuda_fail(rc, "cuCtxEnablePeerAccess from GPU %d to GPU %d", local, peer);
	return SM_OK;
}

/* Every bounds check on a mapping (shm.c in the rank, covering() in the
 * copy helper) goes by m->size, the size the peer announced.  cuMemMap
 * refuses more than the allocation holds, but cuIpcOpenMemHandle maps the
 * whole allocation whatever was announced: a peer that announced more
 * would let copies run past the end of the mapping, into another one or
 * into a fault that poisons the context. */
static int map_legacy_ipc(const struct sm_cuda_api *cu, struct sm_mapping *m,
			  const struct sm_share_info *info)
{
	CUdeviceptr base;
	CUipcMemHandle h;
	size_t opened;
	CUresult rc;
	int status;

	if (m->owner_pid == (int)getpid()) {
		/* CUDA refuses to open its own IPC handles; the address is valid
		 * here already and only needs peer access. */
		m->va = (CUdeviceptr)info->addr;
		m->borrowed = 1;
		return enable_peer_access(cu, m->device, info->device);
	}
	memcpy(&h, info->ipc, sizeof(h));
	rc = cu->ipc_open_mem_handle(&m->va, h, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);
	if (rc != CUDA_SUCCESS)
		return sm_cuda_fail(rc, "cuIpcOpenMemHandle (allocation of GPU %d in process %d)",
				    info->device, m->owner_pid);
	rc = cu->mem_get_address_range(&base, &opened, m->va);
	if (rc != CUDA_SUCCESS) {
		status = sm_cuda_fail(rc, "cuMemGetAddressRange of an IPC mapping from process %d",
				      m->owner_pid);
		goto close;
	}
	/* The handle maps the allocation from its start; anything else
	 * counts as nothing opened. */
	opened = m->va >= base && m->va - base <= opened ? opened - (size_t)(m->va - base) : 0;
	/* No WARN of its own: the caller's failure carries this text to NCCL
	 * (or, from the copy helper, to the client that asked). */
	if (m->size > opened) {
		status = sm_fail(SM_ERR_REMOTE, "process %d announced an allocation of %zu bytes, "
				 "its IPC handle opened %zu: refusing it", m->owner_pid, m->size,
				 opened);
		goto close;
	}
	return SM_OK;
close:
	cu->ipc_close_mem_handle(m->va);
	return status;
}

static struct sm_mapping *mapping_find(int owner_pid, uint64_t alloc_id, int device)
{
	for (struct sm_mapping *m = mappings; m; m = m->next)
		if (m->owner_pid == owner_pid && m->alloc_id == alloc_id && m->device == device)
			return m;
	return NULL;
}

int sm_import_get(int owner_pid, const struct sm_share_info *info, int fd,
		  struct sm_mapping **out)
{
	const struct sm_cuda_api *cu = sm_cu();
	struct sm_mapping *m;
	CUcontext ctx;
	int device, rc;

	*out = NULL;
	rc = sm_ctx_enter(0, &device, &ctx);
	if (rc)
		goto out;
	if (info->kind != SM_SHARE_POSIX_FD && info->kind != SM_SHARE_LEGACY_IPC) {
		rc = sm_fail(SM_ERR_REMOTE, "peer sent an export of unknown kind %u", info->kind);
		goto out;
	}
	if (info->kind == SM_SHARE_POSIX_FD && fd < 0) {
		rc = sm_fail(SM_ERR_REMOTE, "peer's cuMem export arrived without its file descriptor");
		goto out;
	}
	if (info->alloc_size == 0) {
		rc = sm_fail(SM_ERR_REMOTE, "peer announced an empty allocation");
		goto out;
	}
	pthread_mutex_lock(&import_lock);
	m = mapping_find(owner_pid, info->alloc_id, device);
	if (m && info->alloc_size > m->size) {
		/* The size the first import checked is the one that counts. */
		pthread_mutex_unlock(&import_lock);
		rc = sm_fail(SM_ERR_REMOTE, "process %d announced %llu bytes for an allocation it "
			     "announced with %zu before: refusing it", owner_pid,
			     (unsigned long long)info->alloc_size, m->size);
		goto out;
	}
	if (m) {
		m->refs++;
		*out = m;
		pthread_mutex_unlock(&import_lock);
		goto out;
	}
	m = calloc(1, sizeof(*m));
	if (!m) {
		pthread_mutex_unlock(&import_lock);
		rc = sm_fail(SM_ERR_SYSTEM, "out of memory importing a peer allocation");
		goto out;
	}
	m->owner_pid = owner_pid;
	m->alloc_id = info->alloc_id;
	m->device = device;
	m->kind = info->kind;
	m->size = info->alloc_size;
	m->ctx = ctx;
	rc = info->kind == SM_SHARE_POSIX_FD ? map_posix_fd(cu, m, fd) : map_legacy_ipc(cu, m, info);
	if (rc) {
		pthread_mutex_unlock(&import_lock);
		free(m);
		goto out;
	}
	m->refs = 1;
	m->next = mappings;
	mappings = m;
	import_live++;
	*out = m;
	pthread_mutex_unlock(&import_lock);
out:
	if (fd >= 0)
		close(fd);
	return rc;
}

uint8_t *sm_mapping_base(const struct sm_mapping *m)
{
	return (uint8_t *)(uintptr_t)m->va;
}

static void unmap(const struct sm_cuda_api *cu, struct sm_mapping *m)
{
	CUcontext prev = NULL;

	if (m->borrowed)
		return;
	if (m->kind == SM_SHARE_POSIX_FD) {
		sm_cumem_unmap(m->va, m->size);
		return;
	}
	/* An IPC mapping belongs to the context that opened it. */
	cu->ctx_get_current(&prev);
	cu->ctx_set_current(m->ctx);
	cu->ipc_close_mem_handle(m->va);
	cu->ctx_set_current(prev);
}

void sm_import_put(struct sm_mapping *m)
{
	struct sm_mapping **pp;

	if (!m)
		return;
	pthread_mutex_lock(&import_lock);
	if (--m->refs > 0) {
		pthread_mutex_unlock(&import_lock);
		return;
	}
	for (pp = &mappings; *pp && *pp != m; pp = &(*pp)->next)
		;
	if (*pp)
		*pp = m->next;
	import_live--;
	pthread_mutex_unlock(&import_lock);
	unmap(sm_cu(), m);
	free(m);
}

int sm_import_count(void)
{
	int n;

	pthread_mutex_lock(&import_lock);
	n = import_live;
	pthread_mutex_unlock(&import_lock);
	return n;
}
