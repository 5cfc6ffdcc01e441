/* GPU memory for the ibverbs backend: GPUDirect RDMA through DMA-BUF.
 *
 * The CUDA driver hands out a DMA-BUF descriptor for a range of device
 * memory, and ibv_reg_dmabuf_mr registers it with the RDMA device, which
 * then reads and writes the GPU's pages itself (no nvidia-peermem module).
 * Whether a device can is asked once, the way NCCL asks: a registration
 * of descriptor -1 fails with EBADF where the driver takes DMA-BUF memory
 * (it got as far as looking the descriptor up), and with EOPNOTSUPP,
 * EPROTONOSUPPORT or ENOSYS where it has no such registration (Soft-RoCE
 * answers EOPNOTSUPP: libibverbs' default for a provider without it). */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "ib.h"

#ifdef SYMMEM_HAVE_VERBS

#define GPU_ACCESS (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE)

static const char *errno_name(int e)
{
	switch (e) {
	case EBADF:
		return "EBADF";
	case EOPNOTSUPP:
		return "EOPNOTSUPP";
	case EPROTONOSUPPORT:
		return "EPROTONOSUPPORT";
	case ENOSYS:
		return "ENOSYS";
	case EINVAL:
		return "EINVAL";
	default:
		return "an unexpected error";
	}
}

int ib_dmabuf_probe(const struct ib_fns *f, struct ibv_pd *pd, char *why, size_t len)
{
	struct ibv_mr *mr;
	int e;

	if (!f->reg_dmabuf_mr) {
		snprintf(why, len, "libibverbs.so.1 has no ibv_reg_dmabuf_mr (older than "
			 "IBVERBS_1.12, rdma-core 34)");
		return 0;
	}
	errno = 0;
	mr = f->reg_dmabuf_mr(pd, 0, 0, 0, -1, 0);
	e = errno;
	if (mr) {
		/* Nothing sane registers no descriptor: trust no GPU memory to it. */
		f->dereg_mr(mr);
		snprintf(why, len, "the DMA-BUF probe (ibv_reg_dmabuf_mr of fd -1) succeeded, "
			 "which no driver should");
		return 0;
	}
	if (e == EBADF) {
		snprintf(why, len, "the DMA-BUF probe answered EBADF: GPU memory registers "
			 "through DMA-BUF");
		return 1;
	}
	if (e == EOPNOTSUPP || e == EPROTONOSUPPORT || e == ENOSYS)
		snprintf(why, len, "the DMA-BUF probe answered %s: its driver has no DMA-BUF "
			 "registration", errno_name(e));
	else
		snprintf(why, len, "the DMA-BUF probe answered %s (%s), not EBADF",
			 errno_name(e), e ? strerror(e) : "no errno");
	return 0;
}

int ib_gpu_mr(const struct ib_fns *f, const struct ib_dev *d, uintptr_t base, size_t size,
	      int fd, uint64_t offset, struct ibv_mr **out)
{
	uintptr_t start = base;
	size_t span = size;
	int own = -1, e, rc;

	*out = NULL;
	if (!d->dmabuf || !f->reg_dmabuf_mr)
		return sm_fail(SM_ERR_USAGE, "GPU memory on an ibverbs connection: %s cannot "
			       "register it (%s)", d->name, d->dmabuf_why);
	if (fd < 0) {
		/* The whole pages, as the driver hands them out; the keys
		 * then cover the range wherever it starts in its page. */
		rc = sm_dmabuf_fd((const void *)base, size, &own, &start, &span);
		if (rc)
			return sm_fail(rc, "registering GPU memory with %s: %s", d->name,
				       sm_last_error());
		fd = own;
		offset = 0;
	}
	*out = f->reg_dmabuf_mr(d->pd, offset, span, (uint64_t)start, fd, GPU_ACCESS);
	e = errno;
	/* The MR holds the memory now; the descriptor is not needed again. */
	if (own >= 0)
		close(own);
	if (!*out)
		return sm_fail(SM_ERR_SYSTEM, "registering %zu bytes of GPU memory at 0x%lx with %s "
			       "(ibv_reg_dmabuf_mr) failed: %s", size, (unsigned long)base, d->name,
			       strerror(e));
	return SM_OK;
}

#endif
