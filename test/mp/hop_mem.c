/* Buffers for the hop benchmark, made as NCCL 2.28 makes its own, and the
 * pattern fill and check that every message goes through. */
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "hop.h"

int hop_buf_alloc(struct hop_buf *b, int gpu, size_t size)
{
	int device;

	if (!sm_cu() || sm_ctx_enter(0, &device, NULL))
		return -1;
	return hop_buf_alloc_on(b, gpu, size, device, -1);
}

int hop_buf_alloc_on(struct hop_buf *b, int gpu, size_t size, int device, int peer)
{
	const struct sm_cuda_api *cu = sm_cu();
	CUmemGenericAllocationHandle h;
	CUmemAllocationProp prop;
	CUmemAccessDesc access[2];
	CUdeviceptr va = 0;
	size_t gran = 0;
	int n = 1;

	memset(b, 0, sizeof(*b));
	b->gpu = gpu;
	b->size = size;
	if (!cu)
		return -1;
	if (!gpu) {
		if (sm_host_cumem_alloc(size, &b->host))
			return -1;
		b->ptr = b->host.ptr;
		return 0;
	}
	memset(&prop, 0, sizeof(prop));
	prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
	prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	prop.location.id = device;
	prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
	if (cu->mem_get_allocation_granularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED) ||
	    !gran)
		return -1;
	b->granted = (size + gran - 1) / gran * gran;
	if (cu->mem_create(&h, b->granted, &prop, 0) != CUDA_SUCCESS)
		return -1;
	memset(access, 0, sizeof(access));
	access[0].location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	access[0].location.id = device;
	access[0].flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
	if (peer >= 0 && peer != device) {
		access[1] = access[0];
		access[1].location.id = peer;
		n = 2;
	}
	if (sm_cumem_map(h, b->granted, gran, access, n, "a benchmark buffer", &va)) {
		cu->mem_release(h);
		return -1;
	}
	cu->mem_release(h);	/* the mapping keeps it */
	b->ptr = (uint8_t *)(uintptr_t)va;
	return 0;
}

void hop_buf_free(struct hop_buf *b)
{
	if (b->gpu && b->ptr)
		sm_cumem_unmap((CUdeviceptr)(uintptr_t)b->ptr, b->granted);
	else if (!b->gpu)
		sm_host_cumem_free(&b->host);
	memset(b, 0, sizeof(*b));
}

/* A synchronous copy on a stream of its own: cuMemcpy would wait for the
 * legacy stream, the hog's kernel included. */
static int sync_copy(void *dst, const void *src, size_t len)
{
	const struct sm_cuda_api *cu = sm_cu();
	CUstream st;
	int rc;

	if (cu->stream_create(&st, CU_STREAM_NON_BLOCKING) != CUDA_SUCCESS)
		return -1;
	rc = cu->memcpy_async((CUdeviceptr)(uintptr_t)dst, (CUdeviceptr)(uintptr_t)src, len, st) ||
	     cu->stream_synchronize(st);
	cu->stream_destroy(st);
	return rc ? -1 : 0;
}

int hop_buf_fill(struct hop_buf *b, size_t stride, int n, size_t len, uint64_t first)
{
	size_t bytes = stride * (size_t)n;
	uint8_t *tmp = b->gpu ? malloc(bytes ? bytes : 1) : b->ptr;
	int rc = 0;

	if (!tmp)
		return -1;
	for (int i = 0; i < n; i++)
		pattern_fill(tmp + stride * (size_t)i, len, first + (uint64_t)i);
	if (b->gpu) {
		rc = sync_copy(b->ptr, tmp, bytes);
		free(tmp);
	}
	return rc;
}

int hop_buf_check(struct hop_buf *b, size_t stride, int n, size_t len, uint64_t first)
{
	size_t bytes = stride * (size_t)n;
	uint8_t *tmp = b->gpu ? malloc(bytes ? bytes : 1) : b->ptr;
	int bad = 0;

	if (!tmp)
		return -1;
	if (b->gpu && sync_copy(tmp, b->ptr, bytes)) {
		free(tmp);
		return -1;
	}
	for (int i = 0; i < n; i++)
		bad += pattern_check(tmp + stride * (size_t)i, len, first + (uint64_t)i) != len;
	if (b->gpu)
		free(tmp);
	return bad;
}

int hop_buf_poison(struct hop_buf *b, size_t bytes)
{
	uint8_t *tmp;
	int rc;

	if (!b->gpu) {
		memset(b->ptr, 0, bytes);
		return 0;
	}
	tmp = calloc(1, bytes ? bytes : 1);
	if (!tmp)
		return -1;
	rc = sync_copy(b->ptr, tmp, bytes);
	free(tmp);
	return rc;
}
