/* "GPU memory" the CPU cannot touch, for the stand-in inner plugin's GPU
 * mode: pages fake_dev_alloc() hands out with no access, as a GPU's
 * memory is to the CPU.  A stand-in that sent or received through such a
 * pointer instead of copying faults the socket call (EFAULT); only the
 * copies open the pages, for a moment and under the lock, so that no
 * other thread's copy closes them under it. */
#include <pthread.h>
#include <string.h>
#include <sys/mman.h>

#include "fake.h"

#define MAX_DEV 16

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
	uintptr_t va;
	size_t size;
} devs[MAX_DEV];
static int ndevs;

FAKE_EXPORT void *fake_dev_alloc(size_t size)
{
	void *p = NULL;

	pthread_mutex_lock(&lock);
	if (ndevs < MAX_DEV)
		p = mmap(NULL, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p && p != MAP_FAILED) {
		devs[ndevs].va = (uintptr_t)p;
		devs[ndevs].size = size;
		ndevs++;
	}
	pthread_mutex_unlock(&lock);
	return p == MAP_FAILED ? NULL : p;
}

static int find(uintptr_t p, size_t len)
{
	for (int i = 0; i < ndevs; i++)
		if (fake_inside(devs[i].va, devs[i].size, p, len))
			return i;
	return -1;
}

int fake_dev_find(CUdeviceptr p, size_t len)
{
	int i;

	pthread_mutex_lock(&lock);
	i = find((uintptr_t)p, len);
	pthread_mutex_unlock(&lock);
	return i;
}

/* memmove with [dev, dev + len) opened; 0, or -1 when it is not wholly
 * inside one region. */
static int dev_copy(void *dst, const void *src, uintptr_t dev, size_t len)
{
	int i;

	pthread_mutex_lock(&lock);
	i = find(dev, len);
	if (i >= 0) {
		mprotect((void *)devs[i].va, devs[i].size, PROT_READ | PROT_WRITE);
		memmove(dst, src, len);
		mprotect((void *)devs[i].va, devs[i].size, PROT_NONE);
	}
	pthread_mutex_unlock(&lock);
	return i < 0 ? -1 : 0;
}

/* The test's look at "GPU memory", as cuMemcpy would give it. */
FAKE_EXPORT void fake_dev_read(void *dst, const void *dev, size_t len)
{
	dev_copy(dst, dev, (uintptr_t)dev, len);
}

FAKE_EXPORT void fake_dev_write(void *dev, const void *src, size_t len)
{
	dev_copy(dev, src, (uintptr_t)dev, len);
}

/* The stand-in's copies, by name: only between its "GPU memory" and the
 * host, on a stream this driver made. */
FAKE_EXPORT CUresult cuMemcpyDtoHAsync_v2(void *dst, CUdeviceptr src, size_t len, CUstream s)
{
	if (!s || fake_stream_check(s))
		return CUDA_ERROR_INVALID_HANDLE;
	if (dev_copy(dst, (const void *)(uintptr_t)src, (uintptr_t)src, len))
		return CUDA_ERROR_INVALID_VALUE;
	return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void *src, size_t len, CUstream s)
{
	if (!s || fake_stream_check(s))
		return CUDA_ERROR_INVALID_HANDLE;
	if (dev_copy((void *)(uintptr_t)dst, src, (uintptr_t)dst, len))
		return CUDA_ERROR_INVALID_VALUE;
	return CUDA_SUCCESS;
}
