/* GPU staging pools: one per GPU and process, refcounted.
 *
 * Segments are cuMem allocations on the current context's GPU, created
 * with the POSIX-fd handle type so export.c can hand them to peers and to
 * the copy helper like any NCCL buffer, rounded to the driver's
 * recommended granularity, mapped read-write for this GPU.  With
 * NCCL_CUMEM_ENABLE=0 (cfg->legacy) the pool follows NCCL and takes
 * cuMemAlloc memory, which export.c shares as legacy IPC handles. */
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "symmem.h"

struct gpu_pool {
	struct gpu_pool *next;
	int device;
	int refs;
	struct sm_pool *pool;
};

static pthread_mutex_t gpu_pools_lock = PTHREAD_MUTEX_INITIALIZER;
static struct gpu_pool *gpu_pools;

static void gpu_prop(CUmemAllocationProp *prop, int device)
{
	memset(prop, 0, sizeof(*prop));
	prop->type = CU_MEM_ALLOCATION_TYPE_PINNED;
	prop->location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	prop->location.id = device;
	prop->requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
}

static int gpu_alloc(void *arg, uint64_t size, void **base, uint64_t *cookie)
{
	const struct sm_cuda_api *cu = sm_cu();
	int device = (int)(intptr_t)arg;
	CUmemGenericAllocationHandle h;
	CUmemAllocationProp prop;
	CUmemAccessDesc access;
	CUdeviceptr va = 0;
	CUresult rc;
	int status;

	if (!cu)
		return sm_fail(SM_ERR_CUDA, "no CUDA driver: %s", sm_cuda_load()->reason);
	gpu_prop(&prop, device);
	rc = cu->mem_create(&h, size, &prop, 0);
	if (rc != CUDA_SUCCESS)
		return sm_cuda_fail(rc, "cuMemCreate of %" PRIu64 " bytes on GPU %d", size, device);
	memset(&access, 0, sizeof(access));
	access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	access.location.id = device;
	access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
	status = sm_cumem_map(h, size, 0, &access, 1, "a staging-pool segment", &va);
	if (status) {
		cu->mem_release(h);
		return status;
	}
	*base = (void *)va;
	*cookie = (uint64_t)h;
	return SM_OK;
}

static void gpu_free(void *arg, void *base, uint64_t size, uint64_t cookie)
{
	const struct sm_cuda_api *cu = sm_cu();

	(void)arg;
	if (!cu)
		return;
	sm_cumem_unmap((CUdeviceptr)base, size);
	cu->mem_release((CUmemGenericAllocationHandle)cookie);
}

/* Legacy segments: the allocation is its own handle. */
static int legacy_alloc(void *arg, uint64_t size, void **base, uint64_t *cookie)
{
	const struct sm_cuda_api *cu = sm_cu();
	CUdeviceptr p = 0;
	CUresult rc;

	if (!cu)
		return sm_fail(SM_ERR_CUDA, "no CUDA driver: %s", sm_cuda_load()->reason);
	rc = cu->mem_alloc(&p, size);
	if (rc != CUDA_SUCCESS)
		return sm_cuda_fail(rc, "cuMemAlloc of %" PRIu64 " bytes on GPU %d", size,
				    (int)(intptr_t)arg);
	*base = (void *)p;
	*cookie = 0;
	return SM_OK;
}

static void legacy_free(void *arg, void *base, uint64_t size, uint64_t cookie)
{
	const struct sm_cuda_api *cu = sm_cu();

	(void)arg;
	(void)size;
	(void)cookie;
	if (cu)
		cu->mem_free((CUdeviceptr)base);
}

/* cuMemAlloc has no granularity to ask for; 2 MiB keeps segments in
 * whole large pages. */
#define LEGACY_GRANULARITY (2u << 20)

static int gpu_pool_make(int device, const struct sm_pool_config *cfg, struct gpu_pool **out)
{
	const struct sm_cuda_api *cu = sm_cu();
	struct sm_pool_backend be;
	CUmemAllocationProp prop;
	struct gpu_pool *g;
	size_t gran = 0;
	CUresult rc;
	int status;

	memset(&be, 0, sizeof(be));
	if (cfg->legacy) {
		be.alloc = legacy_alloc;
		be.free = legacy_free;
		gran = LEGACY_GRANULARITY;
	} else {
		gpu_prop(&prop, device);
		rc = cu->mem_get_allocation_granularity(&gran, &prop,
							CU_MEM_ALLOC_GRANULARITY_RECOMMENDED);
		if (rc != CUDA_SUCCESS)
			return sm_cuda_fail(rc, "cuMemGetAllocationGranularity on GPU %d", device);
		be.alloc = gpu_alloc;
		be.free = gpu_free;
	}
	be.granularity = gran;
	be.arg = (void *)(intptr_t)device;
	snprintf(be.what, sizeof(be.what), "GPU %d%s", device, cfg->legacy ? " (cudaMalloc)" : "");
	g = calloc(1, sizeof(*g));
	if (!g)
		return sm_fail(SM_ERR_SYSTEM, "out of memory for a GPU pool record");
	status = sm_pool_create(&be, cfg, &g->pool);
	if (status) {
		free(g);
		return status;
	}
	g->device = device;
	*out = g;
	return SM_OK;
}

int sm_pool_gpu_get(const struct sm_pool_config *cfg, struct sm_pool **out)
{
	struct gpu_pool *g;
	int device, rc;

	*out = NULL;
	rc = sm_ctx_enter(0, &device, NULL);
	if (rc)
		return rc;
	pthread_mutex_lock(&gpu_pools_lock);
	for (g = gpu_pools; g; g = g->next)
		if (g->device == device)
			break;
	if (!g) {
		rc = gpu_pool_make(device, cfg, &g);
		if (!rc) {
			g->next = gpu_pools;
			gpu_pools = g;
		}
	}
	if (!rc) {
		g->refs++;
		*out = g->pool;
	}
	pthread_mutex_unlock(&gpu_pools_lock);
	return rc;
}

void sm_pool_gpu_put(struct sm_pool *p)
{
	struct gpu_pool **pp, *g = NULL;

	if (!p)
		return;
	pthread_mutex_lock(&gpu_pools_lock);
	for (pp = &gpu_pools; *pp; pp = &(*pp)->next) {
		if ((*pp)->pool != p)
			continue;
		g = *pp;
		if (--g->refs == 0)
			*pp = g->next;
		else
			g = NULL;
		break;
	}
	pthread_mutex_unlock(&gpu_pools_lock);
	if (!g)
		return;
	sm_pool_destroy(g->pool);
	free(g);
}

int sm_pool_gpu_count(void)
{
	const struct gpu_pool *g;
	int n = 0;

	pthread_mutex_lock(&gpu_pools_lock);
	for (g = gpu_pools; g; g = g->next)
		n++;
	pthread_mutex_unlock(&gpu_pools_lock);
	return n;
}

void sm_pool_gpu_describe(char *buf, size_t len)
{
	const struct gpu_pool *g;
	struct sm_pool_stats st;
	size_t at = 0;

	snprintf(buf, len, "none");
	pthread_mutex_lock(&gpu_pools_lock);
	for (g = gpu_pools; g && at < len; g = g->next) {
		int n;

		sm_pool_get_stats(g->pool, &st);
		n = snprintf(buf + at, len - at, "%sGPU %d: %.1f MiB in %u segment(s), %.1f MiB used "
			     "in %u piece(s), peak %.1f MiB, %" PRIu64 " grown, %" PRIu64 " trimmed, %"
			     PRIu64 " refused", at ? "; " : "", g->device, (double)st.size / 1048576.0,
			     st.segments, (double)st.used / 1048576.0, st.spans,
			     (double)st.peak / 1048576.0, st.grows, st.trims, st.failures);
		if (n < 0)
			break;
		at += (size_t)n;
	}
	pthread_mutex_unlock(&gpu_pools_lock);
}
