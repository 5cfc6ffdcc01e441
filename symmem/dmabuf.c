/* GPU memory as a DMA-BUF file descriptor, for RDMA devices to register
 * (GPUDirect RDMA without the nvidia-peermem kernel module).
 *
 * The driver hands out a descriptor for a range of device memory whose
 * start and length are multiples of the host page size; the RDMA device
 * registers the descriptor and maps the GPU's pages itself. */
#include <stdio.h>
#include <unistd.h>

#include "symmem.h"

int sm_dmabuf_gpu_supported(int ordinal, char *why, size_t len)
{
	const struct sm_cuda_api *cu = sm_cu();
	CUdevice dev;
	CUresult rc;
	int attr = 0;

	if (!cu) {
		snprintf(why, len, "no CUDA driver (%s)", sm_cuda_load()->reason);
		return 0;
	}
	if (!cu->mem_get_handle_for_address_range) {
		snprintf(why, len, "the CUDA driver has no cuMemGetHandleForAddressRange "
			 "(older than 11.7)");
		return 0;
	}
	rc = cu->device_get(&dev, ordinal);
	if (rc == CUDA_SUCCESS)
		rc = cu->device_get_attribute(&attr, CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED, dev);
	if (rc != CUDA_SUCCESS) {
		snprintf(why, len, "GPU %d: querying CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED failed "
			 "(CUDA error %d)", ordinal, (int)rc);
		return 0;
	}
	if (!attr) {
		snprintf(why, len, "GPU %d does not support DMA-BUF "
			 "(CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED is 0)", ordinal);
		return 0;
	}
	why[0] = '\0';
	return 1;
}

int sm_dmabuf_fd(const void *ptr, size_t size, int *fd, uintptr_t *base, size_t *span)
{
	const struct sm_cuda_api *cu = sm_cu();
	uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
	uintptr_t start = (uintptr_t)ptr & ~(page - 1);
	uintptr_t end = (uintptr_t)ptr + size;
	CUresult rc;
	int got = -1;

	*fd = -1;
	if (!size || end < (uintptr_t)ptr || end > UINTPTR_MAX - page)
		return sm_fail(SM_ERR_INVALID, "no DMA-BUF handle for %zu bytes at %p", size, ptr);
	end = (end + page - 1) & ~(page - 1);
	if (!cu || !cu->mem_get_handle_for_address_range)
		return sm_fail(SM_ERR_CUDA, "no DMA-BUF handle for GPU memory at %p: the CUDA "
			       "driver has no cuMemGetHandleForAddressRange", ptr);
	rc = cu->mem_get_handle_for_address_range(&got, (CUdeviceptr)start, end - start,
						  CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0);
	if (rc != CUDA_SUCCESS)
		return sm_cuda_fail(rc, "cuMemGetHandleForAddressRange(0x%lx, %lu bytes, DMA-BUF)",
				    (unsigned long)start, (unsigned long)(end - start));
	if (got < 0)
		return sm_fail(SM_ERR_CUDA, "cuMemGetHandleForAddressRange gave no descriptor for "
			       "0x%lx", (unsigned long)start);
	*fd = got;
	*base = start;
	*span = end - start;
	return SM_OK;
}
