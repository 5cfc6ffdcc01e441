/* The stand-in's GPU copies (standin_gpu.h).  The driver's calls are
 * declared here by hand, as their ABI fixes them, so that no CUDA header
 * is needed either. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "standin_gpu.h"

typedef int CUresult;
typedef unsigned long long CUdeviceptr;
typedef void *CUcontext;
typedef void *CUstream;

#define CU_POINTER_ATTRIBUTE_CONTEXT 1
#define CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL 9
#define CU_STREAM_NON_BLOCKING 1
#define MAX_CTX 16

static struct {
	CUresult (*get_attr)(void *out, int attr, CUdeviceptr p);
	CUresult (*push)(CUcontext c);
	CUresult (*pop)(CUcontext *c);
	CUresult (*stream_create)(CUstream *s, unsigned flags);
	CUresult (*stream_sync)(CUstream s);
	CUresult (*dtoh)(void *dst, CUdeviceptr src, size_t n, CUstream s);
	CUresult (*htod)(CUdeviceptr dst, const void *src, size_t n, CUstream s);
	/* For memory no context owns (cuMem's, as NCCL allocates by default). */
	CUresult (*current)(CUcontext *c);
	CUresult (*device_get)(int *dev, int ordinal);
	CUresult (*primary)(CUcontext *c, int dev);
} cu;

static pthread_once_t once = PTHREAD_ONCE_INIT;
static int ready;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static CUcontext ctxs[MAX_CTX];
static CUstream streams[MAX_CTX];

static void *sym(void *lib, const char *name)
{
	void *f = dlsym(lib, name);

	if (!f)
		fprintf(stderr, "standin: libcuda.so.1 has no %s\n", name);
	return f;
}

static void load(void)
{
	const char *v = getenv("INNER_STANDIN_GPU");
	void *lib;

	if (!v || strcmp(v, "1"))
		return;
	lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!lib) {
		fprintf(stderr, "standin: INNER_STANDIN_GPU=1 but no libcuda.so.1: %s\n", dlerror());
		return;
	}
	*(void **)&cu.get_attr = sym(lib, "cuPointerGetAttribute");
	*(void **)&cu.push = sym(lib, "cuCtxPushCurrent_v2");
	*(void **)&cu.pop = sym(lib, "cuCtxPopCurrent_v2");
	*(void **)&cu.stream_create = sym(lib, "cuStreamCreate");
	*(void **)&cu.stream_sync = sym(lib, "cuStreamSynchronize");
	*(void **)&cu.dtoh = sym(lib, "cuMemcpyDtoHAsync_v2");
	*(void **)&cu.htod = sym(lib, "cuMemcpyHtoDAsync_v2");
	*(void **)&cu.current = dlsym(lib, "cuCtxGetCurrent");
	*(void **)&cu.device_get = dlsym(lib, "cuDeviceGet");
	*(void **)&cu.primary = dlsym(lib, "cuDevicePrimaryCtxRetain");
	ready = cu.get_attr && cu.push && cu.pop && cu.stream_create && cu.stream_sync &&
		cu.dtoh && cu.htod;
}

int standin_gpu_on(void)
{
	pthread_once(&once, load);
	return ready;
}

/* The stand-in's stream in context `c`, made the first time. */
static CUstream stream_of(CUcontext c)
{
	CUstream s = NULL;
	int i;

	pthread_mutex_lock(&lock);
	for (i = 0; i < MAX_CTX && ctxs[i]; i++)
		if (ctxs[i] == c)
			break;
	if (i < MAX_CTX && ctxs[i] == c) {
		s = streams[i];
	} else if (i < MAX_CTX && cu.stream_create(&s, CU_STREAM_NON_BLOCKING) == 0) {
		ctxs[i] = c;
		streams[i] = s;
	}
	pthread_mutex_unlock(&lock);
	return s;
}

/* The context to copy `d` in: the one that allocated it; for memory
 * mapped with cuMemMap, which no context owns, this thread's (NCCL's
 * proxy thread has its device's), else its device's primary context. */
static CUcontext context_of(CUdeviceptr d)
{
	CUcontext c = NULL;
	int ordinal = -1, dev;

	if (cu.get_attr(&c, CU_POINTER_ATTRIBUTE_CONTEXT, d) == 0 && c)
		return c;
	if (cu.current && cu.current(&c) == 0 && c)
		return c;
	if (cu.device_get && cu.primary &&
	    cu.get_attr(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, d) == 0 &&
	    cu.device_get(&dev, ordinal) == 0 && cu.primary(&c, dev) == 0)
		return c;
	return NULL;
}

static int copy(void *host, const void *dev, size_t n, int to_device)
{
	CUdeviceptr d = (CUdeviceptr)(uintptr_t)dev;
	CUcontext c = NULL, popped;
	CUstream s;
	CUresult rc;

	if (!n)
		return 0;
	if (!standin_gpu_on())
		return -1;
	c = context_of(d);
	if (!c) {
		fprintf(stderr, "standin: no CUDA context for %p (no GPU memory?)\n", dev);
		return -1;
	}
	if (cu.push(c))
		return -1;
	s = stream_of(c);
	rc = !s ? -1 : to_device ? cu.htod(d, host, n, s) : cu.dtoh(host, d, n, s);
	if (!rc)
		rc = cu.stream_sync(s);
	cu.pop(&popped);
	if (rc)
		fprintf(stderr, "standin: a copy of %zu bytes %s the GPU failed: CUDA error %d\n", n,
			to_device ? "to" : "from", rc);
	return rc ? -1 : 0;
}

int standin_gpu_to_host(void *host, const void *dev, size_t n)
{
	return copy(host, dev, n, 0);
}

int standin_gpu_to_device(void *dev, const void *host, size_t n)
{
	return copy((void *)host, dev, n, 1);
}
