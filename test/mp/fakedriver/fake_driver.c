/* A CUDA driver for a machine without a GPU, with every call the plugin,
 * its copy helper and bench_hop make: built as libcuda.so.1 in a directory
 * of its own, which only the tests that ask for it put on their
 * LD_LIBRARY_PATH.  It lets the real plugin, the real symmem-copyd and
 * the landing words run end to end in CI.
 *
 * One device.  "GPU memory" and cuMem host memory are memfd pages, so an
 * export is a dup() of the memfd and an import maps it; every copy and
 * stream write happens at once, in the calling thread, so a stream is
 * always idle and an event always complete.  No timing through it means
 * anything about a GPU.  Only cuGetProcAddress_v2 is exported, as the
 * plugin fetches every entry point through it.  symmem-info's calls are
 * here too, so its self-test runs its GPU pair (one device, twice). */
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cuda.h>

#define GRANULARITY ((size_t)64 << 10)
#define MAX_MAPS 4096
#define BUS_ID "0000:00:00.0"

/* An allocation: a memfd and what it was created with. */
struct alloc {
	int fd;
	size_t size;
	CUmemAllocationProp prop;
	int refs;		/* handles plus mappings */
};

/* A mapped range of address space, and its allocation (NULL for
 * cuMemAlloc memory, which cannot be exported). */
struct map {
	uintptr_t va;
	size_t size;
	struct alloc *a;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct map maps[MAX_MAPS];
static int nmaps;
static int ctx_token;
static _Thread_local CUcontext current;

static void alloc_put(struct alloc *a)
{
	if (a && --a->refs == 0) {
		close(a->fd);
		free(a);
	}
}

static struct map *map_at(uintptr_t p)
{
	for (int i = 0; i < nmaps; i++)
		if (p >= maps[i].va && p < maps[i].va + maps[i].size)
			return &maps[i];
	return NULL;
}

static CUresult add_map(uintptr_t va, size_t size, struct alloc *a)
{
	if (nmaps == MAX_MAPS)
		return CUDA_ERROR_OUT_OF_MEMORY;
	maps[nmaps++] = (struct map){ va, size, a };
	if (a)
		a->refs++;
	return CUDA_SUCCESS;
}

static void drop_map(struct map *m)
{
	alloc_put(m->a);
	*m = maps[--nmaps];
}

/* ---- the driver itself ---- */

static CUresult f_init(unsigned flags)
{
	(void)flags;
	return CUDA_SUCCESS;
}

static CUresult f_driver_version(int *v)
{
	*v = 13000;
	return CUDA_SUCCESS;
}

static CUresult f_device_count(int *n)
{
	*n = 1;
	return CUDA_SUCCESS;
}

static CUresult f_error_string(CUresult rc, const char **s)
{
	*s = rc == CUDA_SUCCESS ? "no error" : "fake driver error";
	return CUDA_SUCCESS;
}

static CUresult f_device_get(CUdevice *d, int ordinal)
{
	if (ordinal != 0)
		return CUDA_ERROR_INVALID_DEVICE;
	*d = 0;
	return CUDA_SUCCESS;
}

static CUresult f_bus_id(char *s, int len, CUdevice d)
{
	if (d != 0 || len < 1)
		return CUDA_ERROR_INVALID_VALUE;
	snprintf(s, (size_t)len, "%s", BUS_ID);
	return CUDA_SUCCESS;
}

static CUresult f_by_bus_id(CUdevice *d, const char *id)
{
	if (strcasecmp(id, BUS_ID) != 0)
		return CUDA_ERROR_INVALID_DEVICE;
	*d = 0;
	return CUDA_SUCCESS;
}

static CUresult f_attribute(int *v, CUdevice_attribute a, CUdevice d)
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

static CUresult f_device_name(char *name, int len, CUdevice d)
{
	if (d != 0 || len < 1)
		return CUDA_ERROR_INVALID_VALUE;
	snprintf(name, (size_t)len, "Fake GPU (no device)");
	return CUDA_SUCCESS;
}

static CUresult f_can_access_peer(int *can, CUdevice a, CUdevice b)
{
	*can = a == 0 && b == 0;
	return CUDA_SUCCESS;
}

static CUresult f_p2p_attribute(int *v, CUdevice_P2PAttribute attr, CUdevice a, CUdevice b)
{
	(void)attr;
	*v = a == 0 && b == 0;
	return CUDA_SUCCESS;
}

static CUresult f_ctx_retain(CUcontext *c, CUdevice d)
{
	if (d != 0)
		return CUDA_ERROR_INVALID_DEVICE;
	*c = (CUcontext)&ctx_token;
	return CUDA_SUCCESS;
}

static CUresult f_ctx_release(CUdevice d)
{
	return d == 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
}

static CUresult f_ctx_get(CUcontext *c)
{
	*c = current;
	return CUDA_SUCCESS;
}

static CUresult f_ctx_set(CUcontext c)
{
	current = c;
	return CUDA_SUCCESS;
}

static CUresult f_ctx_device(CUdevice *d)
{
	if (!current)
		return CUDA_ERROR_INVALID_CONTEXT;
	*d = 0;
	return CUDA_SUCCESS;
}

static CUresult f_peer_access(CUcontext c, unsigned flags)
{
	(void)c;
	(void)flags;
	return CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED;
}

static CUresult f_pointer_attribute(void *out, CUpointer_attribute attr, CUdeviceptr p)
{
	struct map *m;
	CUresult rc = CUDA_SUCCESS;

	pthread_mutex_lock(&lock);
	m = map_at((uintptr_t)p);
	if (!m)
		rc = CUDA_ERROR_INVALID_VALUE;
	else if (attr == CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL)
		*(int *)out = 0;
	else if (attr == CU_POINTER_ATTRIBUTE_CONTEXT)
		*(CUcontext *)out = (CUcontext)&ctx_token;
	else if (attr == CU_POINTER_ATTRIBUTE_MEMORY_TYPE)
		*(unsigned *)out = m->a && m->a->prop.location.type != CU_MEM_LOCATION_TYPE_DEVICE ?
				   CU_MEMORYTYPE_HOST : CU_MEMORYTYPE_DEVICE;
	else
		rc = CUDA_ERROR_NOT_SUPPORTED;
	pthread_mutex_unlock(&lock);
	return rc;
}

static CUresult f_address_range(CUdeviceptr *base, size_t *size, CUdeviceptr p)
{
	struct map *m;

	pthread_mutex_lock(&lock);
	m = map_at((uintptr_t)p);
	if (m) {
		*base = m->va;
		*size = m->size;
	}
	pthread_mutex_unlock(&lock);
	return m ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
}

static CUresult f_granularity(size_t *g, const CUmemAllocationProp *prop,
			      CUmemAllocationGranularity_flags option)
{
	(void)prop;
	(void)option;
	*g = GRANULARITY;
	return CUDA_SUCCESS;
}

static CUresult f_create(CUmemGenericAllocationHandle *h, size_t size,
			 const CUmemAllocationProp *prop, unsigned long long flags)
{
	struct alloc *a;

	(void)flags;
	if (!size || size % GRANULARITY)
		return CUDA_ERROR_INVALID_VALUE;
	a = calloc(1, sizeof(*a));
	if (!a)
		return CUDA_ERROR_OUT_OF_MEMORY;
	a->fd = memfd_create("fake-cumem", MFD_CLOEXEC);
	if (a->fd < 0 || ftruncate(a->fd, (off_t)size)) {
		if (a->fd >= 0)
			close(a->fd);
		free(a);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	a->size = size;
	a->prop = *prop;
	a->refs = 1;
	*h = (CUmemGenericAllocationHandle)(uintptr_t)a;
	return CUDA_SUCCESS;
}

static CUresult f_release(CUmemGenericAllocationHandle h)
{
	pthread_mutex_lock(&lock);
	alloc_put((struct alloc *)(uintptr_t)h);
	pthread_mutex_unlock(&lock);
	return CUDA_SUCCESS;
}

static CUresult f_retain(CUmemGenericAllocationHandle *h, void *p)
{
	struct map *m;

	pthread_mutex_lock(&lock);
	m = map_at((uintptr_t)p);
	if (m && m->a) {
		m->a->refs++;
		*h = (CUmemGenericAllocationHandle)(uintptr_t)m->a;
	}
	pthread_mutex_unlock(&lock);
	return m && m->a ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

static CUresult f_properties(CUmemAllocationProp *prop, CUmemGenericAllocationHandle h)
{
	*prop = ((struct alloc *)(uintptr_t)h)->prop;
	return CUDA_SUCCESS;
}

static CUresult f_export(void *out, CUmemGenericAllocationHandle h, CUmemAllocationHandleType t,
			 unsigned long long flags)
{
	struct alloc *a = (struct alloc *)(uintptr_t)h;
	int fd;

	(void)flags;
	if (t != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR ||
	    !(a->prop.requestedHandleTypes & CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR))
		return CUDA_ERROR_INVALID_VALUE;
	fd = fcntl(a->fd, F_DUPFD_CLOEXEC, 0);
	if (fd < 0)
		return CUDA_ERROR_OUT_OF_MEMORY;
	*(int *)out = fd;
	return CUDA_SUCCESS;
}

static CUresult f_import(CUmemGenericAllocationHandle *h, void *os, CUmemAllocationHandleType t)
{
	int fd = (int)(uintptr_t)os;
	struct alloc *a;
	struct stat st;

	if (t != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR || fstat(fd, &st) || st.st_size <= 0)
		return CUDA_ERROR_INVALID_VALUE;
	a = calloc(1, sizeof(*a));
	if (!a)
		return CUDA_ERROR_OUT_OF_MEMORY;
	a->fd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
	a->size = (size_t)st.st_size;
	a->prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
	a->prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	a->prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
	a->refs = 1;
	*h = (CUmemGenericAllocationHandle)(uintptr_t)a;
	return a->fd < 0 ? CUDA_ERROR_OUT_OF_MEMORY : CUDA_SUCCESS;
}

static CUresult f_reserve(CUdeviceptr *p, size_t size, size_t align, CUdeviceptr addr,
			  unsigned long long flags)
{
	void *v;

	(void)align;
	(void)addr;
	(void)flags;
	v = mmap(NULL, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (v == MAP_FAILED)
		return CUDA_ERROR_OUT_OF_MEMORY;
	*p = (CUdeviceptr)(uintptr_t)v;
	return CUDA_SUCCESS;
}

static CUresult f_address_free(CUdeviceptr p, size_t size)
{
	return munmap((void *)(uintptr_t)p, size) ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}

static CUresult f_map(CUdeviceptr p, size_t size, size_t offset, CUmemGenericAllocationHandle h,
		      unsigned long long flags)
{
	struct alloc *a = (struct alloc *)(uintptr_t)h;
	CUresult rc;

	(void)flags;
	if (offset + size > a->size)
		return CUDA_ERROR_INVALID_VALUE;
	if (mmap((void *)(uintptr_t)p, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, a->fd,
		 (off_t)offset) == MAP_FAILED)
		return CUDA_ERROR_OUT_OF_MEMORY;
	pthread_mutex_lock(&lock);
	rc = add_map((uintptr_t)p, size, a);
	pthread_mutex_unlock(&lock);
	return rc;
}

static CUresult f_unmap(CUdeviceptr p, size_t size)
{
	struct map *m;

	pthread_mutex_lock(&lock);
	m = map_at((uintptr_t)p);
	if (m)
		drop_map(m);
	pthread_mutex_unlock(&lock);
	if (!m)
		return CUDA_ERROR_INVALID_VALUE;
	mmap((void *)(uintptr_t)p, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
	return CUDA_SUCCESS;
}

static CUresult f_set_access(CUdeviceptr p, size_t size, const CUmemAccessDesc *d, size_t n)
{
	(void)p;
	(void)size;
	(void)d;
	(void)n;
	return CUDA_SUCCESS;
}

static CUresult f_alloc(CUdeviceptr *p, size_t size)
{
	void *v = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CUresult rc;

	if (v == MAP_FAILED)
		return CUDA_ERROR_OUT_OF_MEMORY;
	pthread_mutex_lock(&lock);
	rc = add_map((uintptr_t)v, size, NULL);
	pthread_mutex_unlock(&lock);
	*p = (CUdeviceptr)(uintptr_t)v;
	return rc;
}

static CUresult f_free(CUdeviceptr p)
{
	struct map *m;
	size_t size = 0;

	pthread_mutex_lock(&lock);
	m = map_at((uintptr_t)p);
	if (m && !m->a) {
		size = m->size;
		drop_map(m);
	}
	pthread_mutex_unlock(&lock);
	if (!size)
		return CUDA_ERROR_INVALID_VALUE;
	munmap((void *)(uintptr_t)p, size);
	return CUDA_SUCCESS;
}

/* Legacy IPC has no fd to carry here: the plugin's cuMem paths are the
 * ones this driver serves. */
static CUresult f_ipc_get(CUipcMemHandle *h, CUdeviceptr p)
{
	(void)h;
	(void)p;
	return CUDA_ERROR_NOT_SUPPORTED;
}

static CUresult f_ipc_open(CUdeviceptr *p, CUipcMemHandle h, unsigned flags)
{
	(void)p;
	(void)h;
	(void)flags;
	return CUDA_ERROR_NOT_SUPPORTED;
}

static CUresult f_ipc_close(CUdeviceptr p)
{
	(void)p;
	return CUDA_ERROR_INVALID_VALUE;
}

/* Streams and events: the work is done when it is queued, so one of
 * each serves every caller. */
static int stream_token, event_token;

static CUresult f_stream_create(CUstream *s, unsigned flags)
{
	(void)flags;
	*s = (CUstream)&stream_token;
	return CUDA_SUCCESS;
}

static CUresult f_event_create(CUevent *e, unsigned flags)
{
	(void)flags;
	*e = (CUevent)&event_token;
	return CUDA_SUCCESS;
}

/* Destroying, synchronizing, querying, recording: nothing to wait for. */
static CUresult f_nothing(void *handle)
{
	(void)handle;
	return CUDA_SUCCESS;
}

static CUresult f_event_record(CUevent e, CUstream s)
{
	(void)e;
	(void)s;
	return CUDA_SUCCESS;
}

static CUresult f_memcpy(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s)
{
	(void)s;
	memmove((void *)(uintptr_t)dst, (const void *)(uintptr_t)src, n);
	return CUDA_SUCCESS;
}

/* The synchronous copies (symmem-info's checks): at once, as all are. */
static CUresult f_htod(CUdeviceptr dst, const void *src, size_t n)
{
	memmove((void *)(uintptr_t)dst, src, n);
	return CUDA_SUCCESS;
}

static CUresult f_dtoh(void *dst, CUdeviceptr src, size_t n)
{
	memmove(dst, (const void *)(uintptr_t)src, n);
	return CUDA_SUCCESS;
}

static CUresult f_dtod(CUdeviceptr dst, CUdeviceptr src, size_t n)
{
	memmove((void *)(uintptr_t)dst, (const void *)(uintptr_t)src, n);
	return CUDA_SUCCESS;
}

static CUresult f_memset(CUdeviceptr dst, unsigned char v, size_t n)
{
	memset((void *)(uintptr_t)dst, v, n);
	return CUDA_SUCCESS;
}

static CUresult f_memcpy_2d(const CUDA_MEMCPY2D *c, CUstream s)
{
	(void)s;
	if (c->srcMemoryType != CU_MEMORYTYPE_UNIFIED || c->dstMemoryType != CU_MEMORYTYPE_UNIFIED)
		return CUDA_ERROR_NOT_SUPPORTED;
	for (size_t r = 0; r < c->Height; r++)
		memmove((void *)(uintptr_t)(c->dstDevice + r * c->dstPitch),
			(const void *)(uintptr_t)(c->srcDevice + r * c->srcPitch), c->WidthInBytes);
	return CUDA_SUCCESS;
}

static CUresult f_memcpy_batch(CUdeviceptr *dst, CUdeviceptr *src, size_t *len, size_t n,
			       CUmemcpyAttributes *attr, size_t *idx, size_t nattr, CUstream s)
{
	(void)attr;
	(void)idx;
	(void)nattr;
	for (size_t i = 0; i < n; i++)
		f_memcpy(dst[i], src[i], len[i], s);
	return CUDA_SUCCESS;
}

static CUresult f_host_register(void *p, size_t size, unsigned flags)
{
	(void)p;
	(void)size;
	(void)flags;
	return CUDA_SUCCESS;
}

static CUresult f_host_unregister(void *p)
{
	(void)p;
	return CUDA_SUCCESS;
}

static CUresult f_host_device_pointer(CUdeviceptr *d, void *p, unsigned flags)
{
	(void)flags;
	*d = (CUdeviceptr)(uintptr_t)p;
	return CUDA_SUCCESS;
}

static CUresult f_write_value(CUstream s, CUdeviceptr addr, cuuint32_t v, unsigned flags)
{
	(void)s;
	(void)flags;
	atomic_store_explicit((_Atomic uint32_t *)(uintptr_t)addr, v, memory_order_release);
	return CUDA_SUCCESS;
}

/* A wait that would block a stream for ever blocks no one here: the
 * plugin never queues one; a caller that does is told so. */
static CUresult f_wait_value(CUstream s, CUdeviceptr addr, cuuint32_t v, unsigned flags)
{
	(void)s;
	(void)flags;
	return (int32_t)(atomic_load((_Atomic uint32_t *)(uintptr_t)addr) - v) >= 0 ?
		       CUDA_SUCCESS : CUDA_ERROR_NOT_SUPPORTED;
}

#define FN(name, f) { name, (void (*)(void))f }
static const struct {
	const char *name;
	void (*fn)(void);
} table[] = {
	FN("cuInit", f_init),
	FN("cuDriverGetVersion", f_driver_version),
	FN("cuDeviceGetCount", f_device_count),
	FN("cuGetErrorString", f_error_string),
	FN("cuDeviceGet", f_device_get),
	FN("cuDeviceGetPCIBusId", f_bus_id),
	FN("cuDeviceGetByPCIBusId", f_by_bus_id),
	FN("cuDeviceGetAttribute", f_attribute),
	FN("cuDeviceGetName", f_device_name),
	FN("cuDeviceCanAccessPeer", f_can_access_peer),
	FN("cuDeviceGetP2PAttribute", f_p2p_attribute),
	FN("cuMemcpyHtoD", f_htod),
	FN("cuMemcpyDtoH", f_dtoh),
	FN("cuMemcpyDtoD", f_dtod),
	FN("cuMemsetD8", f_memset),
	FN("cuDevicePrimaryCtxRetain", f_ctx_retain),
	FN("cuDevicePrimaryCtxRelease", f_ctx_release),
	FN("cuCtxGetCurrent", f_ctx_get),
	FN("cuCtxSetCurrent", f_ctx_set),
	FN("cuCtxGetDevice", f_ctx_device),
	FN("cuCtxEnablePeerAccess", f_peer_access),
	FN("cuPointerGetAttribute", f_pointer_attribute),
	FN("cuMemGetAddressRange", f_address_range),
	FN("cuMemRetainAllocationHandle", f_retain),
	FN("cuMemGetAllocationPropertiesFromHandle", f_properties),
	FN("cuMemExportToShareableHandle", f_export),
	FN("cuMemImportFromShareableHandle", f_import),
	FN("cuMemAddressReserve", f_reserve),
	FN("cuMemAddressFree", f_address_free),
	FN("cuMemMap", f_map),
	FN("cuMemUnmap", f_unmap),
	FN("cuMemSetAccess", f_set_access),
	FN("cuMemRelease", f_release),
	FN("cuMemAlloc", f_alloc),
	FN("cuMemFree", f_free),
	FN("cuMemCreate", f_create),
	FN("cuMemGetAllocationGranularity", f_granularity),
	FN("cuIpcGetMemHandle", f_ipc_get),
	FN("cuIpcOpenMemHandle", f_ipc_open),
	FN("cuIpcCloseMemHandle", f_ipc_close),
	FN("cuStreamCreate", f_stream_create),
	FN("cuStreamDestroy", f_nothing),
	FN("cuStreamSynchronize", f_nothing),
	FN("cuStreamQuery", f_nothing),
	FN("cuEventCreate", f_event_create),
	FN("cuEventRecord", f_event_record),
	FN("cuEventQuery", f_nothing),
	FN("cuEventDestroy", f_nothing),
	FN("cuMemcpyAsync", f_memcpy),
	FN("cuMemcpy2DAsync", f_memcpy_2d),
	FN("cuMemcpyBatchAsync", f_memcpy_batch),
	FN("cuMemHostRegister", f_host_register),
	FN("cuMemHostUnregister", f_host_unregister),
	FN("cuMemHostGetDevicePointer", f_host_device_pointer),
	FN("cuStreamWriteValue32", f_write_value),
	FN("cuStreamWaitValue32", f_wait_value),
};

__attribute__((visibility("default")))
CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version, cuuint64_t flags,
			     CUdriverProcAddressQueryResult *status)
{
	(void)version;
	(void)flags;
	for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++) {
		if (strcmp(table[i].name, symbol) == 0) {
			memcpy(pfn, &table[i].fn, sizeof(table[i].fn));
			if (status)
				*status = CU_GET_PROC_ADDRESS_SUCCESS;
			return CUDA_SUCCESS;
		}
	}
	*pfn = NULL;
	if (status)
		*status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
	return CUDA_ERROR_NOT_FOUND;
}
