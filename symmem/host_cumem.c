/* Host memory from the CUDA driver (NCCL_CUMEM_HOST_ENABLE=1): pinned
 * pages on the NUMA node nearest the current GPU, mapped for this
 * process's CPU and GPU, and exportable as a POSIX fd that another process
 * (the copy helper) maps like any cuMem allocation, with no host
 * registration on its side.  Used for the copy helper's host staging. */
#include <string.h>
#include <unistd.h>

#include "symmem.h"

int sm_host_cumem_alloc(uint64_t want, struct sm_host_cumem *out)
{
	const struct sm_cuda_api *cu = sm_cu();
	CUmemGenericAllocationHandle h;
	CUmemAllocationProp prop;
	CUmemAccessDesc access[2];
	CUdeviceptr va = 0;
	size_t gran = 0, size;
	int device, numa = -1, fd = -1, status;
	CUresult rc;

	memset(out, 0, sizeof(*out));
	out->fd = -1;
	status = sm_ctx_enter(0, &device, NULL);
	if (status)
		return status;
	rc = cu->device_get_attribute(&numa, CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID, device);
	if (rc != CUDA_SUCCESS || numa < 0)
		numa = 0;	/* no NUMA on this host: node 0 is all there is */
	memset(&prop, 0, sizeof(prop));
	prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
	prop.location.type = CU_MEM_LOCATION_TYPE_HOST_NUMA;
	prop.location.id = numa;
	prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
	rc = cu->mem_get_allocation_granularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED);
	if (rc != CUDA_SUCCESS || gran == 0)
		return sm_cuda_fail(rc, "cuMemGetAllocationGranularity (host NUMA node %d)", numa);
	size = (want + gran - 1) / gran * gran;
	rc = cu->mem_create(&h, size, &prop, 0);
	if (rc != CUDA_SUCCESS)
		return sm_cuda_fail(rc, "cuMemCreate of %zu bytes of host memory (NUMA node %d)",
				    size, numa);
	/* This GPU (its copy engine may read it too) and this process's CPU. */
	memset(access, 0, sizeof(access));
	access[0].location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	access[0].location.id = device;
	access[0].flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
	access[1].location.type = CU_MEM_LOCATION_TYPE_HOST_NUMA;
	access[1].location.id = numa;
	access[1].flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
	status = sm_cumem_map(h, size, gran, access, 2, "host memory (and the CPU)", &va);
	if (status)
		goto release;
	rc = cu->mem_export(&fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0);
	if (rc != CUDA_SUCCESS) {
		status = sm_cuda_fail(rc, "cuMemExportToShareableHandle of host memory");
		sm_cumem_unmap(va, size);
		goto release;
	}
	/* The mapping keeps the pages alive; the handle can go. */
	cu->mem_release(h);
	out->ptr = (uint8_t *)(uintptr_t)va;
	out->size = size;
	out->fd = fd;
	out->numa = numa;
	out->alloc_id = sm_alloc_id_new();
	return SM_OK;
release:
	cu->mem_release(h);
	return status;
}

void sm_host_cumem_free(struct sm_host_cumem *m)
{
	if (!m->ptr)
		return;
	sm_cumem_unmap((CUdeviceptr)(uintptr_t)m->ptr, m->size);
	if (m->fd >= 0)
		close(m->fd);
	memset(m, 0, sizeof(*m));
	m->fd = -1;
}
