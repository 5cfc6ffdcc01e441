/* The CUDA driver API, opened at run time.
 *
 * Linking libcuda would make the plugin fail to load on a host without a
 * GPU driver, and NCCL would silently fall back to another network.  So the
 * driver is dlopen()ed once and every entry point is fetched through
 * cuGetProcAddress, which also picks the right ABI version of each call. */
#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda.h>

#include "symmem.h"

typedef CUresult (*get_proc_fn)(const char *symbol, void **pfn, int version, cuuint64_t flags,
				CUdriverProcAddressQueryResult *status);
typedef CUresult (*init_fn)(unsigned int flags);
typedef CUresult (*driver_version_fn)(int *version);
typedef CUresult (*device_count_fn)(int *count);

static pthread_once_t cuda_once = PTHREAD_ONCE_INIT;
static struct sm_cuda_info cuda_info;
static void *cuda_lib;
static get_proc_fn get_proc;
static struct sm_cuda_api api;
static int api_ready;

/* Stores the entry point for `name` into the function pointer at `fnp`
 * (memcpy: ISO C has no cast between object and function pointers). */
static int cuda_symbol_of(const char *name, int version, void *fnp)
{
	CUdriverProcAddressQueryResult status;
	void *fn = NULL;

	if (get_proc(name, &fn, version, CU_GET_PROC_ADDRESS_DEFAULT, &status) != CUDA_SUCCESS ||
	    status != CU_GET_PROC_ADDRESS_SUCCESS || !fn)
		return -1;
	memcpy(fnp, &fn, sizeof(fn));
	return 0;
}

/* The ABI of CUDA 12.0, which every entry point in the table has. */
static int cuda_symbol(const char *name, void *fnp)
{
	return cuda_symbol_of(name, 12000, fnp);
}

struct api_entry {
	const char *name;
	size_t off;
};

#define API(field, sym) { sym, offsetof(struct sm_cuda_api, field) }
static const struct api_entry api_entries[] = {
	API(get_error_string, "cuGetErrorString"),
	API(device_get, "cuDeviceGet"),
	API(device_get_pci_bus_id, "cuDeviceGetPCIBusId"),
	API(device_get_by_pci_bus_id, "cuDeviceGetByPCIBusId"),
	API(device_get_attribute, "cuDeviceGetAttribute"),
	API(primary_ctx_retain, "cuDevicePrimaryCtxRetain"),
	API(primary_ctx_release, "cuDevicePrimaryCtxRelease"),
	API(ctx_get_current, "cuCtxGetCurrent"),
	API(ctx_set_current, "cuCtxSetCurrent"),
	API(ctx_get_device, "cuCtxGetDevice"),
	API(ctx_enable_peer_access, "cuCtxEnablePeerAccess"),
	API(pointer_get_attribute, "cuPointerGetAttribute"),
	API(mem_get_address_range, "cuMemGetAddressRange"),
	API(mem_retain_allocation_handle, "cuMemRetainAllocationHandle"),
	API(mem_get_allocation_properties, "cuMemGetAllocationPropertiesFromHandle"),
	API(mem_export, "cuMemExportToShareableHandle"),
	API(mem_import, "cuMemImportFromShareableHandle"),
	API(mem_address_reserve, "cuMemAddressReserve"),
	API(mem_address_free, "cuMemAddressFree"),
	API(mem_map, "cuMemMap"),
	API(mem_unmap, "cuMemUnmap"),
	API(mem_set_access, "cuMemSetAccess"),
	API(mem_release, "cuMemRelease"),
	API(mem_alloc, "cuMemAlloc"),
	API(mem_free, "cuMemFree"),
	API(mem_create, "cuMemCreate"),
	API(mem_get_allocation_granularity, "cuMemGetAllocationGranularity"),
	API(ipc_get_mem_handle, "cuIpcGetMemHandle"),
	API(ipc_open_mem_handle, "cuIpcOpenMemHandle"),
	API(ipc_close_mem_handle, "cuIpcCloseMemHandle"),
	API(stream_create, "cuStreamCreate"),
	API(stream_destroy, "cuStreamDestroy"),
	API(stream_synchronize, "cuStreamSynchronize"),
	API(stream_query, "cuStreamQuery"),
	API(event_create, "cuEventCreate"),
	API(event_record, "cuEventRecord"),
	API(event_query, "cuEventQuery"),
	API(event_destroy, "cuEventDestroy"),
	API(memcpy_async, "cuMemcpyAsync"),
	API(memcpy_2d_async, "cuMemcpy2DAsync"),
	API(mem_host_register, "cuMemHostRegister"),
	API(mem_host_unregister, "cuMemHostUnregister"),
	API(mem_host_get_device_pointer, "cuMemHostGetDevicePointer"),
};

/* Fills the table; a driver missing any entry point serves host memory only. */
static int resolve_api(char *missing, size_t len)
{
	for (size_t i = 0; i < sizeof(api_entries) / sizeof(api_entries[0]); i++) {
		if (cuda_symbol(api_entries[i].name, (char *)&api + api_entries[i].off)) {
			snprintf(missing, len, "%s", api_entries[i].name);
			return -1;
		}
	}
	return 0;
}

static void cuda_open(void)
{
	struct sm_cuda_info *ci = &cuda_info;
	driver_version_fn driver_version;
	device_count_fn device_count;
	init_fn init;
	char missing[64];
	void *sym;
	CUresult rc;

	cuda_lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!cuda_lib) {
		snprintf(ci->reason, sizeof(ci->reason), "libcuda.so.1: %s", dlerror());
		return;
	}
	/* cuGetProcAddress_v2 exists from CUDA 12.0 on; older drivers are not
	 * supported (the v2 ABI is what this build's headers describe). */
	sym = dlsym(cuda_lib, "cuGetProcAddress_v2");
	if (!sym) {
		snprintf(ci->reason, sizeof(ci->reason),
			 "libcuda.so.1 has no cuGetProcAddress_v2 (driver older than CUDA 12)");
		goto fail;
	}
	memcpy(&get_proc, &sym, sizeof(sym));
	if (cuda_symbol("cuInit", &init) || cuda_symbol("cuDriverGetVersion", &driver_version) ||
	    cuda_symbol("cuDeviceGetCount", &device_count)) {
		snprintf(ci->reason, sizeof(ci->reason), "libcuda.so.1 lacks basic entry points");
		goto fail;
	}
	rc = init(0);
	if (rc != CUDA_SUCCESS) {
		snprintf(ci->reason, sizeof(ci->reason), "cuInit failed with CUDA error %d", (int)rc);
		goto fail;
	}
	if (driver_version(&ci->driver_version) != CUDA_SUCCESS ||
	    device_count(&ci->device_count) != CUDA_SUCCESS) {
		snprintf(ci->reason, sizeof(ci->reason), "cannot query the CUDA driver");
		goto fail;
	}
	if (resolve_api(missing, sizeof(missing))) {
		snprintf(ci->reason, sizeof(ci->reason), "libcuda.so.1 lacks %s", missing);
		goto fail;
	}
	/* Optional: the CUDA 13 form of the batch call (12.8's has one more
	 * argument); without it every copy is its own call. */
	if (cuda_symbol_of("cuMemcpyBatchAsync", 13000, &api.memcpy_batch_async))
		api.memcpy_batch_async = NULL;
	/* Optional: stream memory operations, with which the copy helper
	 * reports a landing by a write into host memory (copyd.c). */
	if (cuda_symbol("cuStreamWriteValue32", &api.stream_write_value32) ||
	    cuda_symbol("cuStreamWaitValue32", &api.stream_wait_value32)) {
		api.stream_write_value32 = NULL;
		api.stream_wait_value32 = NULL;
	}
	if (!api.stream_write_value32 ||
	    cuda_symbol("cuStreamBatchMemOp", &api.stream_batch_mem_op))
		api.stream_batch_mem_op = NULL;
	/* Optional: DMA-BUF handles (CUDA 11.7 on) for GPUDirect RDMA; without
	 * it GPU buffers between hosts are staged in host memory. */
	if (cuda_symbol_of("cuMemGetHandleForAddressRange", 11070,
			   &api.mem_get_handle_for_address_range))
		api.mem_get_handle_for_address_range = NULL;
	api_ready = 1;
	ci->loaded = 1;
	return;

fail:
	/* Keep the library mapped: unloading libcuda after a partial init is
	 * not safe, and it is opened at most once per process anyway. */
	get_proc = NULL;
}

const struct sm_cuda_info *sm_cuda_load(void)
{
	pthread_once(&cuda_once, cuda_open);
	return &cuda_info;
}

const struct sm_cuda_api *sm_cu(void)
{
	return sm_cuda_load()->loaded && api_ready ? &api : NULL;
}

int sm_cuda_symbol(const char *name, void *fnp)
{
	if (!sm_cu())
		return -1;
	return cuda_symbol(name, fnp);
}

int sm_cuda_fail(CUresult rc, const char *fmt, ...)
{
	const char *name = NULL;
	char what[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	if (api_ready)
		api.get_error_string(rc, &name);
	return sm_fail(SM_ERR_CUDA, "%s: %s (CUDA error %d)", what, name ? name : "unknown error",
		       (int)rc);
}

int sm_ctx_enter(int ordinal, int *device, CUcontext *ctx)
{
	const struct sm_cuda_api *cu = sm_cu();
	CUcontext cur = NULL;
	CUdevice dev;
	CUresult rc;

	if (!cu)
		return sm_fail(SM_ERR_CUDA, "no CUDA driver: %s", sm_cuda_load()->reason);
	rc = cu->ctx_get_current(&cur);
	if (rc != CUDA_SUCCESS)
		return sm_cuda_fail(rc, "cuCtxGetCurrent");
	if (!cur) {
		rc = cu->device_get(&dev, ordinal);
		if (rc != CUDA_SUCCESS)
			return sm_cuda_fail(rc, "cuDeviceGet(%d)", ordinal);
		rc = cu->primary_ctx_retain(&cur, dev);
		if (rc != CUDA_SUCCESS)
			return sm_cuda_fail(rc, "cuDevicePrimaryCtxRetain(%d)", ordinal);
		rc = cu->ctx_set_current(cur);
		if (rc != CUDA_SUCCESS)
			return sm_cuda_fail(rc, "cuCtxSetCurrent");
	}
	rc = cu->ctx_get_device(&dev);
	if (rc != CUDA_SUCCESS)
		return sm_cuda_fail(rc, "cuCtxGetDevice");
	if (device)
		*device = (int)dev;
	if (ctx)
		*ctx = cur;
	return SM_OK;
}
