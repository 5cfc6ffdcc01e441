/* Putting a cuMem allocation at an address of this process: reserve,
 * map, grant access, and undo whatever was done when a step fails.  Used
 * for peers' imports, the staging pool's segments and cuMem host memory. */
#include "symmem.h"

int sm_cumem_map(CUmemGenericAllocationHandle h, size_t size, size_t align,
		 const CUmemAccessDesc *access, int naccess, const char *what, CUdeviceptr *out)
{
	const struct sm_cuda_api *cu = sm_cu();
	CUdeviceptr va = 0;
	CUresult rc;
	int status;

	rc = cu->mem_address_reserve(&va, size, align, 0, 0);
	if (rc != CUDA_SUCCESS)
		return sm_cuda_fail(rc, "cuMemAddressReserve of %zu bytes for %s", size, what);
	rc = cu->mem_map(va, size, 0, h, 0);
	if (rc != CUDA_SUCCESS) {
		status = sm_cuda_fail(rc, "cuMemMap of %zu bytes of %s", size, what);
		goto unreserve;
	}
	rc = cu->mem_set_access(va, size, access, (size_t)naccess);
	if (rc != CUDA_SUCCESS) {
		status = sm_cuda_fail(rc, "cuMemSetAccess of %s for GPU %d", what, access[0].location.id);
		goto unmap;
	}
	*out = va;
	return SM_OK;
unmap:
	cu->mem_unmap(va, size);
unreserve:
	cu->mem_address_free(va, size);
	return status;
}

void sm_cumem_unmap(CUdeviceptr va, size_t size)
{
	const struct sm_cuda_api *cu = sm_cu();

	cu->mem_unmap(va, size);
	cu->mem_address_free(va, size);
}
