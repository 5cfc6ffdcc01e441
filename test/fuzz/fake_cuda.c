/* A CUDA driver without a GPU, for the copy helper's fuzz target: built
 * as libcuda.so.1 beside it (found through the target's run path), so
 * symmem/cuda_driver.c opens it exactly as it opens the real one.
 *
 * One device, whose copy engine copies at once between host memory
 * registered with cuMemHostRegister.  Its one check is the one a GPU
 * makes: a copy that touches memory outside every registration aborts
 * (on a GPU it faults and poisons the context).  Imports of other
 * processes' GPU memory are refused, as a driver refuses a handle it
 * cannot open. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <cuda.h>

/* The stubs below keep the driver's signatures, and most ignore their
 * arguments. */
#pragma GCC diagnostic ignored "-Wunused-parameter"

#define EXPORT __attribute__((visibility("default")))
#define BUS_ID "0000:01:00.0"
#define MAX_REGS 256

static struct {
	const char *p;
	size_t len;
} regs[MAX_REGS];
static int nregs;
static char token;		/* what contexts, streams and events point at */
static CUcontext current;

/* The registration holding [a, a + len), or -1. */
static int reg_of(CUdeviceptr a, size_t len)
{
	for (int i = 0; i < nregs; i++) {
		CUdeviceptr base = (CUdeviceptr)(uintptr_t)regs[i].p;

		if (a >= base && len <= regs[i].len && a - base <= regs[i].len - len)
			return i;
	}
	return -1;
}

static void copy(CUdeviceptr dst, CUdeviceptr src, size_t len)
{
	if (reg_of(dst, len) < 0 || reg_of(src, len) < 0) {
		fprintf(stderr, "fake copy engine: %zu bytes from %#llx to %#llx lie outside "
			"every registered range\n", len, (unsigned long long)src,
			(unsigned long long)dst);
		abort();
	}
	memmove((void *)(uintptr_t)dst, (const void *)(uintptr_t)src, len);
}

static CUresult init(unsigned int flags)
{
	return CUDA_SUCCESS;
}

static CUresult driver_version(int *v)
{
	*v = 13000;
	return CUDA_SUCCESS;
}

static CUresult device_count(int *n)
{
	*n = 1;
	return CUDA_SUCCESS;
}

static CUresult error_string(CUresult rc, const char **s)
{
	*s = "fake driver error";
	return CUDA_SUCCESS;
}

static CUresult device_get(CUdevice *d, int ordinal)
{
	*d = 0;
	return ordinal == 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
}

static CUresult bus_id(char *s, int len, CUdevice d)
{
	snprintf(s, (size_t)len, "%s", BUS_ID);
	return CUDA_SUCCESS;
}

static CUresult by_bus_id(CUdevice *d, const char *s)
{
	*d = 0;
	return strcasecmp(s, BUS_ID) ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}

static CUresult attribute(int *v, CUdevice_attribute a, CUdevice d)
{
	*v = 0;
	return CUDA_SUCCESS;
}

static CUresult ctx_retain(CUcontext *c, CUdevice d)
{
	*c = (CUcontext)(void *)&token;
	return CUDA_SUCCESS;
}

static CUresult ctx_release(CUdevice d)
{
	return CUDA_SUCCESS;
}

static CUresult ctx_get(CUcontext *c)
{
	*c = current;
	return CUDA_SUCCESS;
}

static CUresult ctx_set(CUcontext c)
{
	current = c;
	return CUDA_SUCCESS;
}

static CUresult ctx_device(CUdevice *d)
{
	*d = 0;
	return CUDA_SUCCESS;
}

static CUresult peer_access(CUcontext c, unsigned int f)
{
	return CUDA_SUCCESS;
}

static CUresult pointer_attribute(void *v, CUpointer_attribute a, CUdeviceptr p)
{
	return CUDA_ERROR_INVALID_VALUE;
}

static CUresult address_range(CUdeviceptr *b, size_t *s, CUdeviceptr p)
{
	return CUDA_ERROR_INVALID_VALUE;
}

static CUresult retain_handle(CUmemGenericAllocationHandle *h, void *p)
{
	return CUDA_ERROR_INVALID_VALUE;
}

static CUresult handle_properties(CUmemAllocationProp *p, CUmemGenericAllocationHandle h)
{
	return CUDA_ERROR_INVALID_VALUE;
}

static CUresult mem_export(void *s, CUmemGenericAllocationHandle h, CUmemAllocationHandleType t,
			   unsigned long long f)
{
	return CUDA_ERROR_NOT_SUPPORTED;
}

static CUresult mem_import(CUmemGenericAllocationHandle *h, void *s, CUmemAllocationHandleType t)
{
	return CUDA_ERROR_NOT_SUPPORTED;
}

static CUresult reserve(CUdeviceptr *p, size_t s, size_t a, CUdeviceptr addr,
			unsigned long long f)
{
	return CUDA_ERROR_NOT_SUPPORTED;
}

static CUresult address_free(CUdeviceptr p, size_t s)
{
	return CUDA_SUCCESS;
}

static CUresult mem_map(CUdeviceptr p, size_t s, size_t o, CUmemGenericAllocationHandle h,
			unsigned long long f)
{
	return CUDA_ERROR_NOT_SUPPORTED;
}

static CUresult mem_unmap(CUdeviceptr p, size_t s)
{
	return CUDA_SUCCESS;
}

static CUresult set_access(CUdeviceptr p, size_t s, const CUmemAccessDesc *d, size_t n)
{
	return CUDA_ERROR_NOT_SUPPORTED;
}

static CUresult mem_release(CUmemGenericAllocationHandle h)
{
	return CUDA_SUCCESS;
}

static CUresult mem_alloc(CUdeviceptr *p, size_t s)
{
	return CUDA_ERROR_OUT_OF_MEMORY;
}

static CUresult mem_free(CUdeviceptr p)
{
	return CUDA_SUCCESS;
}

static CUresult mem_create(CUmemGenericAllocationHandle *h, size_t s,
			   const CUmemAllocationProp *p, unsigned long long f)
{
	return CUDA_ERROR_OUT_OF_MEMORY;
}

static CUresult granularity(size_t *g, const CUmemAllocationProp *p,
			    CUmemAllocationGranularity_flags f)
{
	*g = 2u << 20;
	return CUDA_SUCCESS;
}

static CUresult ipc_get(CUipcMemHandle *h, CUdeviceptr p)
{
	return CUDA_ERROR_NOT_SUPPORTED;
}

static CUresult ipc_open(CUdeviceptr *p, CUipcMemHandle h, unsigned int f)
{
	return CUDA_ERROR_NOT_SUPPORTED;
}

static CUresult ipc_close(CUdeviceptr p)
{
	return CUDA_SUCCESS;
}

static CUresult stream_create(CUstream *s, unsigned int f)
{
	*s = (CUstream)(void *)&token;
	return CUDA_SUCCESS;
}

static CUresult stream_done(CUstream s)
{
	return CUDA_SUCCESS;
}

static CUresult event_create(CUevent *e, unsigned int f)
{
	*e = (CUevent)(void *)&token;
	return CUDA_SUCCESS;
}

static CUresult event_record(CUevent e, CUstream s)
{
	return CUDA_SUCCESS;
}

static CUresult event_done(CUevent e)
{
	return CUDA_SUCCESS;
}

static CUresult memcpy_async(CUdeviceptr dst, CUdeviceptr src, size_t len, CUstream s)
{
	copy(dst, src, len);
	return CUDA_SUCCESS;
}

static CUresult memcpy_2d(const CUDA_MEMCPY2D *c, CUstream s)
{
	for (size_t row = 0; row < c->Height; row++)
		copy(c->dstDevice + row * c->dstPitch, c->srcDevice + row * c->srcPitch,
		     c->WidthInBytes);
	return CUDA_SUCCESS;
}

static CUresult memcpy_batch(CUdeviceptr *dst, CUdeviceptr *src, size_t *len, size_t n,
			     CUmemcpyAttributes *attr, size_t *idx, size_t nattr, CUstream s)
{
	for (size_t i = 0; i < n; i++)
		copy(dst[i], src[i], len[i]);
	return CUDA_SUCCESS;
}

static CUresult host_register(void *p, size_t len, unsigned int f)
{
	if (nregs == MAX_REGS)
		return CUDA_ERROR_OUT_OF_MEMORY;
	regs[nregs].p = p;
	regs[nregs].len = len;
	nregs++;
	return CUDA_SUCCESS;
}

static CUresult host_unregister(void *p)
{
	for (int i = 0; i < nregs; i++) {
		if (regs[i].p == p) {
			regs[i] = regs[--nregs];
			return CUDA_SUCCESS;
		}
	}
	return CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
}

static CUresult host_device_pointer(CUdeviceptr *d, void *p, unsigned int f)
{
	*d = (CUdeviceptr)(uintptr_t)p;
	return CUDA_SUCCESS;
}

#define ENTRY(name, fn) { name, (void (*)(void))(fn) }
static const struct {
	const char *name;
	void (*fn)(void);
} entries[] = {
	ENTRY("cuInit", init),
	ENTRY("cuDriverGetVersion", driver_version),
	ENTRY("cuDeviceGetCount", device_count),
	ENTRY("cuGetErrorString", error_string),
	ENTRY("cuDeviceGet", device_get),
	ENTRY("cuDeviceGetPCIBusId", bus_id),
	ENTRY("cuDeviceGetByPCIBusId", by_bus_id),
	ENTRY("cuDeviceGetAttribute", attribute),
	ENTRY("cuDevicePrimaryCtxRetain", ctx_retain),
	ENTRY("cuDevicePrimaryCtxRelease", ctx_release),
	ENTRY("cuCtxGetCurrent", ctx_get),
	ENTRY("cuCtxSetCurrent", ctx_set),
	ENTRY("cuCtxGetDevice", ctx_device),
	ENTRY("cuCtxEnablePeerAccess", peer_access),
	ENTRY("cuPointerGetAttribute", pointer_attribute),
	ENTRY("cuMemGetAddressRange", address_range),
	ENTRY("cuMemRetainAllocationHandle", retain_handle),
	ENTRY("cuMemGetAllocationPropertiesFromHandle", handle_properties),
	ENTRY("cuMemExportToShareableHandle", mem_export),
	ENTRY("cuMemImportFromShareableHandle", mem_import),
	ENTRY("cuMemAddressReserve", reserve),
	ENTRY("cuMemAddressFree", address_free),
	ENTRY("cuMemMap", mem_map),
	ENTRY("cuMemUnmap", mem_unmap),
	ENTRY("cuMemSetAccess", set_access),
	ENTRY("cuMemRelease", mem_release),
	ENTRY("cuMemAlloc", mem_alloc),
	ENTRY("cuMemFree", mem_free),
	ENTRY("cuMemCreate", mem_create),
	ENTRY("cuMemGetAllocationGranularity", granularity),
	ENTRY("cuIpcGetMemHandle", ipc_get),
	ENTRY("cuIpcOpenMemHandle", ipc_open),
	ENTRY("cuIpcCloseMemHandle", ipc_close),
	ENTRY("cuStreamCreate", stream_create),
	ENTRY("cuStreamDestroy", stream_done),
	ENTRY("cuStreamSynchronize", stream_done),
	ENTRY("cuStreamQuery", stream_done),
	ENTRY("cuEventCreate", event_create),
	ENTRY("cuEventRecord", event_record),
	ENTRY("cuEventQuery", event_done),
	ENTRY("cuEventDestroy", event_done),
	ENTRY("cuMemcpyAsync", memcpy_async),
	ENTRY("cuMemcpy2DAsync", memcpy_2d),
	ENTRY("cuMemcpyBatchAsync", memcpy_batch),
	ENTRY("cuMemHostRegister", host_register),
	ENTRY("cuMemHostUnregister", host_unregister),
	ENTRY("cuMemHostGetDevicePointer", host_device_pointer),
};

/* The one symbol the library looks up by name; it asks for every other. */
EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version,
				     cuuint64_t flags, CUdriverProcAddressQueryResult *status)
{
	for (size_t i = 0; i < sizeof(entries) / sizeof(entries[0]); i++) {
		if (!strcmp(entries[i].name, symbol)) {
			memcpy(pfn, &entries[i].fn, sizeof(*pfn));
			*status = CU_GET_PROC_ADDRESS_SUCCESS;
			return CUDA_SUCCESS;
		}
	}
	*pfn = NULL;
	*status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
	return CUDA_ERROR_NOT_FOUND;
}
