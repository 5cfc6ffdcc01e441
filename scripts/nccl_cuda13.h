/* NCCL 2.21-2.26 built with CUDA 13.  scripts/nccl_build.sh copies this
 * file into the exported tree's src/include and includes it from
 * cudawrap.h right after cudaTypedefs.h; nothing else includes it.
 *
 * Those sources declare their driver entry points with the unversioned
 * PFN_cu* types, which CUDA 13's cudaTypedefs.h no longer has, and load
 * them with cudaGetDriverEntryPoint, which under CUDA 13 hands out each
 * symbol's newest ABI (cuCtxCreate_v4, cuCtxGetDevice_v2): not the one the
 * call sites pass arguments for.  So each type is pinned here to the ABI
 * the call sites use, the versions NCCL 2.27 pins (its call sites are
 * those of 2.21-2.26; the compiler checks each call against the type),
 * and the loader asks for exactly that version.  Below them, the
 * graph-capture calls CUDA 13 renamed or changed. */
#ifndef NCCL_CUDA13_COMPAT_H
#define NCCL_CUDA13_COMPAT_H

#include <string.h>
#include <cuda_runtime.h>
#include <cudaTypedefs.h>

/* Every entry point NCCL 2.21-2.26 loads, and the driver ABI it calls. */
#define NCCL_CUDA13_PFNS(X)                                                  \
	X(cuGetErrorString, 6000) X(cuGetErrorName, 6000)                    \
	X(cuDeviceGet, 2000) X(cuDeviceGetAttribute, 2000)                   \
	X(cuMemGetAddressRange, 3020) X(cuCtxCreate, 11040)                  \
	X(cuCtxDestroy, 4000) X(cuCtxGetCurrent, 4000)                       \
	X(cuCtxSetCurrent, 4000) X(cuCtxGetDevice, 2000)                     \
	X(cuLaunchKernel, 4000) X(cuLaunchKernelEx, 11060)                   \
	X(cuMemAddressReserve, 10020) X(cuMemAddressFree, 10020)             \
	X(cuMemCreate, 10020) X(cuMemGetAllocationGranularity, 10020)        \
	X(cuMemExportToShareableHandle, 10020)                               \
	X(cuMemImportFromShareableHandle, 10020) X(cuMemMap, 10020)          \
	X(cuMemRelease, 10020) X(cuMemRetainAllocationHandle, 11000)         \
	X(cuMemSetAccess, 10020) X(cuMemUnmap, 10020)                        \
	X(cuMemGetAllocationPropertiesFromHandle, 10020)                     \
	X(cuPointerGetAttribute, 4000)                                       \
	X(cuMemGetHandleForAddressRange, 11070)                              \
	X(cuMulticastAddDevice, 12010) X(cuMulticastBindMem, 12010)          \
	X(cuMulticastBindAddr, 12010) X(cuMulticastCreate, 12010)            \
	X(cuMulticastGetGranularity, 12010) X(cuMulticastUnbind, 12010)

#define NCCL_CUDA13_TYPE(sym, ver) typedef PFN_##sym##_v##ver PFN_##sym;
NCCL_CUDA13_PFNS(NCCL_CUDA13_TYPE)
#undef NCCL_CUDA13_TYPE

/* cudaGetDriverEntryPoint as the old loader calls it, for the version
 * above; a symbol not listed is reported not found (the loader WARNs
 * unless that symbol is optional). */
static inline cudaError_t ncclCuda13EntryPoint(const char *sym, void **fn,
					       unsigned long long flags,
					       cudaDriverEntryPointQueryResult *status)
{
#define NCCL_CUDA13_LOAD(s, ver)                                             \
	if (strcmp(sym, #s) == 0)                                            \
		return cudaGetDriverEntryPointByVersion(sym, fn, ver, flags, status);
	NCCL_CUDA13_PFNS(NCCL_CUDA13_LOAD)
#undef NCCL_CUDA13_LOAD
	*fn = NULL;
	if (status)
		*status = cudaDriverEntryPointSymbolNotFound;
	return cudaSuccess;
}

/* CUDA 13 removed cudaStreamGetCaptureInfo_v2 / _v3,
 * cudaStreamUpdateCaptureDependencies_v2 and cudaGraphAddDependencies_v2,
 * and gave the unsuffixed calls the edge-data parameter of the suffixed
 * ones.  An old-style unsuffixed call can still compile against the new
 * signature with another meaning (in
 * cudaStreamUpdateCaptureDependencies(s, nullptr, 0, flags) the 0 becomes
 * the edge data and the flags the count), so every old name is routed to
 * a wrapper with the old parameters.  No edge data given is what the old
 * calls meant: default edges, or cudaErrorLossyQuery where the graph has
 * others, which the sources that use _v3 already handle. */
static inline cudaError_t ncclCuda13CaptureInfoV2(cudaStream_t s,
						  enum cudaStreamCaptureStatus *status,
						  unsigned long long *id, cudaGraph_t *graph,
						  const cudaGraphNode_t **deps, size_t *n)
{
	return cudaStreamGetCaptureInfo(s, status, id, graph, deps, NULL, n);
}

static inline cudaError_t ncclCuda13UpdateDeps(cudaStream_t s, cudaGraphNode_t *deps, size_t n,
					       unsigned int flags)
{
	return cudaStreamUpdateCaptureDependencies(s, deps, NULL, n, flags);
}

static inline cudaError_t ncclCuda13UpdateDepsV2(cudaStream_t s, cudaGraphNode_t *deps,
						 const cudaGraphEdgeData *edges, size_t n,
						 unsigned int flags)
{
	return cudaStreamUpdateCaptureDependencies(s, deps, edges, n, flags);
}

static inline cudaError_t ncclCuda13AddDeps(cudaGraph_t g, const cudaGraphNode_t *from,
					    const cudaGraphNode_t *to, size_t n)
{
	return cudaGraphAddDependencies(g, from, to, NULL, n);
}

static inline cudaError_t ncclCuda13AddDepsV2(cudaGraph_t g, const cudaGraphNode_t *from,
					      const cudaGraphNode_t *to,
					      const cudaGraphEdgeData *edges, size_t n)
{
	return cudaGraphAddDependencies(g, from, to, edges, n);
}

#define cudaStreamGetCaptureInfo_v2 ncclCuda13CaptureInfoV2
#define cudaStreamGetCaptureInfo_v3 cudaStreamGetCaptureInfo
#define cudaStreamUpdateCaptureDependencies ncclCuda13UpdateDeps
#define cudaStreamUpdateCaptureDependencies_v2 ncclCuda13UpdateDepsV2
#define cudaGraphAddDependencies ncclCuda13AddDeps
#define cudaGraphAddDependencies_v2 ncclCuda13AddDepsV2

#endif
