/* The CUDA driver API, opened at run time.
 *
 * Linking libcuda would make the plugin fail to load on a host without a
 * GPU driver, and NCCL would silently fall back to another network.  So the
 * driver is dlopen()ed once and every entry point is fetched through
 * cuGetProcAddress, which also picks the right ABI version of each call. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
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

/* Stores the entry point for `name` into the function pointer at `fnp`
 * (memcpy: ISO C has no cast between object and function pointers). */
static int cuda_symbol(const char *name, void *fnp)
{
	CUdriverProcAddressQueryResult status;
	void *fn = NULL;

	if (get_proc(name, &fn, 12000, CU_GET_PROC_ADDRESS_DEFAULT, &status) != CUDA_SUCCESS ||
	    status != CU_GET_PROC_ADDRESS_SUCCESS || !fn)
		return -1;
	memcpy(fnp, &fn, sizeof(fn));
	return 0;
}

static void cuda_open(void)
{
	struct sm_cuda_info *ci = &cuda_info;
	driver_version_fn driver_version;
	device_count_fn device_count;
	init_fn init;
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
