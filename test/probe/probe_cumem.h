// Shared by the probes: driver-call checking and peer access to cuMem
// memory (each probe is its own program; this header keeps one copy).
#ifndef PROBE_CUMEM_H
#define PROBE_CUMEM_H

#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CUCK(x) do { CUresult r_ = (x); if (r_ != CUDA_SUCCESS) { const char *m_ = "?"; \
	cuGetErrorString(r_, &m_); fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, m_); \
	exit(2); } } while (0)

#define PROBE_MAX_GPUS 8

// Memory as ncclMemAlloc makes it on GPU dev: cuMem, POSIX-fd exportable,
// GPUDirect RDMA capable.  Returns the recommended granularity.
static inline size_t probe_cumem_prop(int dev, CUmemAllocationProp *prop)
{
	size_t gran;

	memset(prop, 0, sizeof(*prop));
	prop->type = CU_MEM_ALLOCATION_TYPE_PINNED;
	prop->location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	prop->location.id = dev;
	prop->requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
	prop->allocFlags.gpuDirectRDMACapable = 1;
	CUCK(cuMemGetAllocationGranularity(&gran, prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED));
	return gran;
}

// Read-write access to [va, va + size) for GPUs 0..n-1.
static inline void grant_gpus(CUdeviceptr va, size_t size, int n)
{
	CUmemAccessDesc acc[PROBE_MAX_GPUS];

	for (int g = 0; g < n; g++) {
		acc[g].location.type = CU_MEM_LOCATION_TYPE_DEVICE;
		acc[g].location.id = g;
		acc[g].flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
	}
	CUCK(cuMemSetAccess(va, size, acc, n));
}

#endif
