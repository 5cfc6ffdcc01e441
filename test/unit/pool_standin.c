/* symmem's GPU staging pools (symmem/pool_cumem.c) without a GPU, for the
 * shared-memory cases of test_copy_timeout.c: one pool for the process,
 * its segments from malloc, made by the real pool code (symmem/pool.c).
 * It defines every symbol pool_cumem.c does, so that file is never linked
 * beside it. */
#include <stdio.h>
#include <stdlib.h>

#include "symmem.h"

static struct sm_pool *pool;
static int refs;

static int heap_alloc(void *arg, uint64_t size, void **base, uint64_t *cookie)
{
	(void)arg;
	*cookie = 0;
	*base = malloc(size);
	return *base ? SM_OK : sm_fail(SM_ERR_SYSTEM, "out of memory");
}

static void heap_free(void *arg, void *base, uint64_t size, uint64_t cookie)
{
	(void)arg;
	(void)size;
	(void)cookie;
	free(base);
}

int sm_pool_gpu_get(const struct sm_pool_config *cfg, struct sm_pool **out)
{
	static const struct sm_pool_backend be = {
		.alloc = heap_alloc, .free = heap_free, .granularity = 1 << 16, .what = "stand-in",
	};
	int rc;

	*out = NULL;
	if (!pool) {
		rc = sm_pool_create(&be, cfg, &pool);
		if (rc)
			return rc;
	}
	refs++;
	*out = pool;
	return SM_OK;
}

void sm_pool_gpu_put(struct sm_pool *p)
{
	if (!p || p != pool || --refs > 0)
		return;
	sm_pool_destroy(pool);
	pool = NULL;
}

int sm_pool_gpu_count(void)
{
	return pool != NULL;
}

void sm_pool_gpu_describe(char *buf, size_t len)
{
	snprintf(buf, len, "%s", pool ? "stand-in pool" : "");
}
