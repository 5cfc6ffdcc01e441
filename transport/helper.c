/* Buffers of this process for its copy helper (helper.h).  A buffer this
 * process's copy engine reads or writes is exported to the helper, so
 * copies need no CUDA call here: a sender's buffer on one host, either
 * side's GPU buffer over TCP (the bounce slots).  Memory that cannot be
 * exported (a stream-ordered pool, cuMem without a shareable handle,
 * cudaHostAlloc memory) is still fine: its copies run in this process. */
#include <stdatomic.h>
#include <unistd.h>

#include "helper.h"

void helper_log_range(const struct tp_comm *c, const char *what, int owner,
		      const struct sm_share_info *info, uint32_t hid, uint64_t ns)
{
	if (c->verbose && hid)
		sm_info("copy helper range %u: %s of pid %d at %#llx, %llu bytes, answered in "
			"%.0f us", hid, what, owner, (unsigned long long)info->addr,
			(unsigned long long)info->alloc_size, (double)ns / 1e3);
}

int helper_export(struct tp_comm *c, const void *ptr, size_t size, struct sm_export **exp,
		  uint64_t *offset, uint32_t *hid)
{
	struct sm_share_info info;
	uint64_t t0 = 0;
	int fd = -1, rc;

	*hid = 0;
	*exp = NULL;
	rc = sm_export_get(ptr, size, exp, &info, offset, &fd);
	if (!rc) {
		t0 = sm_now_ns();
		rc = smf_range_add(c->ce, getpid(), &info, fd, hid);
	}
	if (!rc)
		helper_log_range(c, c->is_send ? "send buffer" : "receive buffer", getpid(), &info,
				 *hid, sm_now_ns() - t0);
	if (rc && *exp) {
		sm_export_put(*exp);
		*exp = NULL;
	}
	return rc;
}

/* NCCL registers buffers the helper cannot map on every connection (on
 * 4 x H200, 512 KiB ones in memory without a shareable handle: the size of
 * its LL buffers, which the default NCCL_PROTO=^LL leaves unused), about 40
 * per rank: one line per process says so, NCCL_SM_FREE_VERBOSE=1 shows
 * each. */
static atomic_int in_process_logged;

int helper_log_in_process(const struct tp_comm *c)
{
	return c->verbose || !atomic_exchange(&in_process_logged, 1);
}

const char *helper_more_with_verbose(const struct tp_comm *c)
{
	return c->verbose ? "" : " (further buffers that stay are logged with NCCL_SM_FREE_VERBOSE=1)";
}

/* 1 if the CUDA driver allocated the memory at ptr (device or host);
 * malloc'd host memory it did not. */
static int driver_knows(const void *ptr)
{
	const struct sm_cuda_api *cu = sm_cu();
	CUdeviceptr base;
	size_t len;

	return cu && cu->mem_get_address_range(&base, &len, (CUdeviceptr)ptr) == CUDA_SUCCESS;
}

void helper_own_buffer(struct tp_comm *c, const struct tp_region *r, struct helper_range *h)
{
	/* Host memory the driver did not allocate (malloc) cannot be given to
	 * the helper: its bytes are copied in this process, which is how such
	 * a buffer always goes, so there is nothing to tell the user. */
	if (r->mem != TP_MEM_CUDA && !driver_knows((void *)r->base))
		return;
	if (helper_export(c, (void *)r->base, r->size, &h->exp, &h->offset, &h->hid)) {
		if (helper_log_in_process(c))
			sm_info("%s buffer %p (%zu bytes) stays with in-process copies: %s%s",
				c->is_send ? "send" : "receive", (void *)r->base, r->size,
				sm_last_error(), helper_more_with_verbose(c));
		return;
	}
	h->ce = c->ce;
	smf_engine_hold(h->ce);
}

void helper_range_drop(struct helper_range *h)
{
	sm_export_put(h->exp);
	h->exp = NULL;
	if (h->hid)
		smf_range_del(h->ce, h->hid);
	h->hid = 0;
}

int host_memfd_open(const char *name, uint64_t size, struct sm_share_info *info, int *fd,
		    uint8_t **buf)
{
	void *p;
	int rc = sm_memfd_map(name, size, size, fd, &p);

	if (rc)
		return rc;
	info->kind = SM_SHARE_HOST_FD;
	info->alloc_size = size;
	*buf = p;
	return SM_OK;
}
