/* Copies, streams and events.  Every copy and stream write happens when
 * it is queued, in the calling thread, so one stream and one event serve
 * every caller: a stream is always idle, an event always complete. */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fake.h"

static int stream_token, event_token;

/* Strict mode: what a GPU's copy engine would fault on. */
static void check(CUdeviceptr p, size_t len, const char *what)
{
	if (!fake_strict || !len || fake_reachable(p, len))
		return;
	fprintf(stderr, "fake copy engine: %s of %zu bytes at %#llx lies outside every "
		"registered range and mapping\n", what, len, (unsigned long long)p);
	abort();
}

static void copy(CUdeviceptr dst, CUdeviceptr src, size_t len)
{
	check(src, len, "a copy's source");
	check(dst, len, "a copy's destination");
	memmove((void *)(uintptr_t)dst, (const void *)(uintptr_t)src, len);
}

CUresult fake_stream_check(CUstream s)
{
	return !s || s == (CUstream)&stream_token ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

FAKE_EXPORT CUresult cuStreamCreate(CUstream *s, unsigned int flags)
{
	if (flags != CU_STREAM_DEFAULT && flags != CU_STREAM_NON_BLOCKING)
		return CUDA_ERROR_INVALID_VALUE;
	*s = (CUstream)&stream_token;
	return CUDA_SUCCESS;
}

/* Synchronizing, querying, destroying: nothing to wait for. */
FAKE_EXPORT CUresult cuStreamSynchronize(CUstream s)
{
	return fake_stream_check(s);
}

static CUresult event_create(CUevent *e, unsigned int flags)
{
	(void)flags;
	*e = (CUevent)&event_token;
	return CUDA_SUCCESS;
}

static CUresult event_record(CUevent e, CUstream s)
{
	if (e != (CUevent)&event_token)
		return CUDA_ERROR_INVALID_HANDLE;
	return fake_stream_check(s);
}

static CUresult event_done(CUevent e)
{
	return e == (CUevent)&event_token ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

static CUresult memcpy_async(CUdeviceptr dst, CUdeviceptr src, size_t len, CUstream s)
{
	(void)s;
	copy(dst, src, len);
	return CUDA_SUCCESS;
}

static CUresult memcpy_2d(const CUDA_MEMCPY2D *c, CUstream s)
{
	(void)s;
	if (c->srcMemoryType != CU_MEMORYTYPE_UNIFIED || c->dstMemoryType != CU_MEMORYTYPE_UNIFIED)
		return CUDA_ERROR_NOT_SUPPORTED;
	for (size_t r = 0; r < c->Height; r++)
		copy(c->dstDevice + r * c->dstPitch, c->srcDevice + r * c->srcPitch,
		     c->WidthInBytes);
	return CUDA_SUCCESS;
}

static CUresult memcpy_batch(CUdeviceptr *dst, CUdeviceptr *src, size_t *len, size_t n,
			     CUmemcpyAttributes *attr, size_t *idx, size_t nattr, CUstream s)
{
	(void)attr;
	(void)idx;
	(void)nattr;
	(void)s;
	for (size_t i = 0; i < n; i++)
		copy(dst[i], src[i], len[i]);
	return CUDA_SUCCESS;
}

/* The synchronous copies and memset of symmem-info's checks. */
static CUresult htod(CUdeviceptr dst, const void *src, size_t len)
{
	check(dst, len, "a copy's destination");
	memmove((void *)(uintptr_t)dst, src, len);
	return CUDA_SUCCESS;
}

static CUresult dtoh(void *dst, CUdeviceptr src, size_t len)
{
	check(src, len, "a copy's source");
	memmove(dst, (const void *)(uintptr_t)src, len);
	return CUDA_SUCCESS;
}

static CUresult dtod(CUdeviceptr dst, CUdeviceptr src, size_t len)
{
	copy(dst, src, len);
	return CUDA_SUCCESS;
}

static CUresult memset_d8(CUdeviceptr dst, unsigned char v, size_t len)
{
	check(dst, len, "a memset");
	memset((void *)(uintptr_t)dst, v, len);
	return CUDA_SUCCESS;
}

static CUresult write_value(CUstream s, CUdeviceptr addr, cuuint32_t v, unsigned int flags)
{
	(void)s;
	(void)flags;
	check(addr, sizeof(v), "a stream write");
	atomic_store_explicit((_Atomic uint32_t *)(uintptr_t)addr, v, memory_order_release);
	return CUDA_SUCCESS;
}

/* A wait that would block a stream for ever blocks no one here: the
 * plugin never queues one; a caller that does is told so. */
static CUresult wait_value(CUstream s, CUdeviceptr addr, cuuint32_t v, unsigned int flags)
{
	(void)s;
	(void)flags;
	check(addr, sizeof(v), "a stream wait");
	return (int32_t)(atomic_load((_Atomic uint32_t *)(uintptr_t)addr) - v) >= 0 ?
		       CUDA_SUCCESS : CUDA_ERROR_NOT_SUPPORTED;
}

/* Writes in order, at once; a wait, as above, only if already met. */
static CUresult batch_mem_op(CUstream s, unsigned int n, CUstreamBatchMemOpParams *ops,
			     unsigned int flags)
{
	if (flags || n > 255 || (n && !ops))
		return CUDA_ERROR_INVALID_VALUE;
	for (unsigned int i = 0; i < n; i++) {
		CUstreamBatchMemOpParams *o = &ops[i];
		CUresult rc;

		if (o->operation == CU_STREAM_MEM_OP_WRITE_VALUE_32)
			rc = write_value(s, o->writeValue.address, o->writeValue.value,
					 o->writeValue.flags);
		else if (o->operation == CU_STREAM_MEM_OP_WAIT_VALUE_32)
			rc = wait_value(s, o->waitValue.address, o->waitValue.value,
					o->waitValue.flags);
		else
			rc = CUDA_ERROR_NOT_SUPPORTED;
		if (rc != CUDA_SUCCESS)
			return rc;
	}
	return fake_stream_check(s);
}

const struct fake_entry fake_copy_entries[] = {
	FAKE_ENTRY("cuStreamCreate", cuStreamCreate),
	FAKE_ENTRY("cuStreamDestroy", fake_stream_check),
	FAKE_ENTRY("cuStreamSynchronize", cuStreamSynchronize),
	FAKE_ENTRY("cuStreamQuery", fake_stream_check),
	FAKE_ENTRY("cuEventCreate", event_create),
	FAKE_ENTRY("cuEventRecord", event_record),
	FAKE_ENTRY("cuEventQuery", event_done),
	FAKE_ENTRY("cuEventDestroy", event_done),
	FAKE_ENTRY("cuStreamBatchMemOp", batch_mem_op),
	FAKE_ENTRY("cuMemcpyAsync", memcpy_async),
	FAKE_ENTRY("cuMemcpy2DAsync", memcpy_2d),
	FAKE_ENTRY("cuMemcpyBatchAsync", memcpy_batch),
	FAKE_ENTRY("cuMemcpyHtoD", htod),
	FAKE_ENTRY("cuMemcpyDtoH", dtoh),
	FAKE_ENTRY("cuMemcpyDtoD", dtod),
	FAKE_ENTRY("cuMemsetD8", memset_d8),
	FAKE_ENTRY("cuStreamWriteValue32", write_value),
	FAKE_ENTRY("cuStreamWaitValue32", wait_value),
	{ NULL, NULL },
};
