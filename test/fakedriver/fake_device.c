/* The device and its one context: what the plugin, symmem-info and the
 * stand-in ask about the GPU, and which context a thread is in. */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "fake.h"

#define CTX_DEPTH 8

int fake_ctx;
static _Thread_local CUcontext current;
static _Thread_local CUcontext pushed[CTX_DEPTH];
static _Thread_local int npushed;

static CUresult init(unsigned int flags)
{
	(void)flags;
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
	*s = rc == CUDA_SUCCESS ? "no error" : "fake driver error";
	return CUDA_SUCCESS;
}

static CUresult device_get(CUdevice *d, int ordinal)
{
	if (ordinal != 0)
		return CUDA_ERROR_INVALID_DEVICE;
	*d = 0;
	return CUDA_SUCCESS;
}

static CUresult bus_id(char *s, int len, CUdevice d)
{
	if (d != 0 || len < 1)
		return CUDA_ERROR_INVALID_VALUE;
	snprintf(s, (size_t)len, "%s", FAKE_BUS_ID);
	return CUDA_SUCCESS;
}

static CUresult by_bus_id(CUdevice *d, const char *id)
{
	if (strcasecmp(id, FAKE_BUS_ID))
		return CUDA_ERROR_INVALID_DEVICE;
	*d = 0;
	return CUDA_SUCCESS;
}

static CUresult attribute(int *v, CUdevice_attribute a, CUdevice d)
{
	if (d != 0)
		return CUDA_ERROR_INVALID_DEVICE;
	switch (a) {
	case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: *v = 9; break;
	case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: *v = 132; break;
	case CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT: *v = 3; break;
	case CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID: *v = 0; break;
	case CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED: *v = 0; break;
	default: *v = 1; break;	/* unified addressing, cuMem, stream memory ops ... */
	}
	return CUDA_SUCCESS;
}

static CUresult device_name(char *name, int len, CUdevice d)
{
	if (d != 0 || len < 1)
		return CUDA_ERROR_INVALID_VALUE;
	snprintf(name, (size_t)len, "Fake GPU (no device)");
	return CUDA_SUCCESS;
}

static CUresult can_access_peer(int *can, CUdevice a, CUdevice b)
{
	*can = a == 0 && b == 0;
	return CUDA_SUCCESS;
}

static CUresult p2p_attribute(int *v, CUdevice_P2PAttribute attr, CUdevice a, CUdevice b)
{
	(void)attr;
	*v = a == 0 && b == 0;
	return CUDA_SUCCESS;
}

static CUresult ctx_retain(CUcontext *c, CUdevice d)
{
	if (d != 0)
		return CUDA_ERROR_INVALID_DEVICE;
	*c = (CUcontext)&fake_ctx;
	return CUDA_SUCCESS;
}

static CUresult ctx_release(CUdevice d)
{
	return d == 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
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
	if (!current)
		return CUDA_ERROR_INVALID_CONTEXT;
	*d = 0;
	return CUDA_SUCCESS;
}

static CUresult peer_access(CUcontext c, unsigned int flags)
{
	(void)c;
	(void)flags;
	return CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED;
}

/* The stand-in's calls by name: it copies in the context that owns the
 * memory, pushed for the copy. */
FAKE_EXPORT CUresult cuCtxPushCurrent_v2(CUcontext c)
{
	if (c != (CUcontext)&fake_ctx)
		return CUDA_ERROR_INVALID_CONTEXT;
	if (npushed == CTX_DEPTH)
		return CUDA_ERROR_OUT_OF_MEMORY;
	pushed[npushed++] = current;
	current = c;
	return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuCtxPopCurrent_v2(CUcontext *c)
{
	if (!current)
		return CUDA_ERROR_INVALID_CONTEXT;
	if (c)
		*c = current;
	current = npushed ? pushed[--npushed] : NULL;
	return CUDA_SUCCESS;
}

const struct fake_entry fake_device_entries[] = {
	FAKE_ENTRY("cuInit", init),
	FAKE_ENTRY("cuDriverGetVersion", driver_version),
	FAKE_ENTRY("cuDeviceGetCount", device_count),
	FAKE_ENTRY("cuGetErrorString", error_string),
	FAKE_ENTRY("cuDeviceGet", device_get),
	FAKE_ENTRY("cuDeviceGetPCIBusId", bus_id),
	FAKE_ENTRY("cuDeviceGetByPCIBusId", by_bus_id),
	FAKE_ENTRY("cuDeviceGetAttribute", attribute),
	FAKE_ENTRY("cuDeviceGetName", device_name),
	FAKE_ENTRY("cuDeviceCanAccessPeer", can_access_peer),
	FAKE_ENTRY("cuDeviceGetP2PAttribute", p2p_attribute),
	FAKE_ENTRY("cuDevicePrimaryCtxRetain", ctx_retain),
	FAKE_ENTRY("cuDevicePrimaryCtxRelease", ctx_release),
	FAKE_ENTRY("cuCtxGetCurrent", ctx_get),
	FAKE_ENTRY("cuCtxSetCurrent", ctx_set),
	FAKE_ENTRY("cuCtxGetDevice", ctx_device),
	FAKE_ENTRY("cuCtxEnablePeerAccess", peer_access),
	FAKE_ENTRY("cuCtxPushCurrent", cuCtxPushCurrent_v2),
	FAKE_ENTRY("cuCtxPopCurrent", cuCtxPopCurrent_v2),
	{ NULL, NULL },
};
