/* The few driver calls the stand-in inner net plugin's GPU mode makes
 * (test/mp/standin_gpu.c), for a machine without a GPU: built as
 * libcuda.so.1 in a directory of its own, which only test_standin_gpu
 * puts on its LD_LIBRARY_PATH.
 *
 * "GPU memory" is pages that fake_dev_alloc() hands out with no access,
 * as a GPU's memory is to the CPU: a stand-in that sent or received
 * through such a pointer instead of copying faults the socket call
 * (EFAULT), and only the copies here open the pages for a moment. */
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>

#define EXPORT __attribute__((visibility("default")))
#define MAX_DEV 16

typedef unsigned long long CUdeviceptr;

static struct {
	uint8_t *p;
	size_t len;
} devs[MAX_DEV];
static int ndev;
static int ctx_token;

EXPORT void *fake_dev_alloc(size_t len)
{
	void *p;

	if (ndev == MAX_DEV)
		return NULL;
	p = mmap(NULL, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return NULL;
	devs[ndev].p = p;
	devs[ndev].len = len;
	ndev++;
	return p;
}

static int find(const void *p, size_t n)
{
	const uint8_t *b = p;

	for (int i = 0; i < ndev; i++)
		if (b >= devs[i].p && b + n <= devs[i].p + devs[i].len)
			return i;
	return -1;
}

/* The test's look at "GPU memory", as cuMemcpy would give it. */
EXPORT void fake_dev_read(void *dst, const void *dev, size_t n)
{
	int i = find(dev, n);

	mprotect(devs[i].p, devs[i].len, PROT_READ | PROT_WRITE);
	memcpy(dst, dev, n);
	mprotect(devs[i].p, devs[i].len, PROT_NONE);
}

EXPORT void fake_dev_write(void *dev, const void *src, size_t n)
{
	int i = find(dev, n);

	mprotect(devs[i].p, devs[i].len, PROT_READ | PROT_WRITE);
	memcpy(dev, src, n);
	mprotect(devs[i].p, devs[i].len, PROT_NONE);
}

EXPORT int cuPointerGetAttribute(void *out, int attr, CUdeviceptr p)
{
	if (attr != 1 || find((void *)(uintptr_t)p, 1) < 0)
		return 1;	/* CUDA_ERROR_INVALID_VALUE: not GPU memory */
	*(void **)out = &ctx_token;
	return 0;
}

EXPORT int cuCtxPushCurrent_v2(void *ctx)
{
	return ctx == &ctx_token ? 0 : 201;
}

EXPORT int cuCtxPopCurrent_v2(void **ctx)
{
	*ctx = &ctx_token;
	return 0;
}

EXPORT int cuStreamCreate(void **s, unsigned flags)
{
	*s = flags == 1 ? &ctx_token : NULL;	/* the stand-in asks for a non-blocking one */
	return flags == 1 ? 0 : 1;
}

EXPORT int cuStreamSynchronize(void *s)
{
	return s == &ctx_token ? 0 : 400;
}

EXPORT int cuMemcpyDtoHAsync_v2(void *dst, CUdeviceptr src, size_t n, void *s)
{
	if (find((void *)(uintptr_t)src, n) < 0 || s != &ctx_token)
		return 1;
	fake_dev_read(dst, (void *)(uintptr_t)src, n);
	return 0;
}

EXPORT int cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void *src, size_t n, void *s)
{
	if (find((void *)(uintptr_t)dst, n) < 0 || s != &ctx_token)
		return 1;
	fake_dev_write((void *)(uintptr_t)dst, src, n);
	return 0;
}
