/* Memory an ibverbs connection moves: registrations with the connection's
 * device (host memory, GPU memory through DMA-BUF: ib_dmabuf.c), held
 * past the connection's close, and whether a device takes GPU memory. */
#include <stdio.h>

#include "ib.h"

#ifdef SYMMEM_HAVE_VERBS

int tp_ib_dmabuf(const struct tp_options *opt, char *desc, size_t len)
{
	struct ib_dev *d;
	int ok;

	if (ib_dev_get(opt->ib_hca, opt->dev, opt->gpu_pci, opt->ib_gid_index, NULL, &d)) {
		snprintf(desc, len, "no RDMA device (%s)", sm_last_error());
		return 0;
	}
	ok = d->dmabuf;
	snprintf(desc, len, "%s: %s", d->name, d->dmabuf_why);
	ib_dev_put(d);
	return ok;
}

int ib_region_register(struct tp_comm *c, struct tp_region *r, int dmabuf_fd,
		       uint64_t dmabuf_offset)
{
	const struct ib_fns *f = ib_fns();
	struct ib_dev *d = ib_of(c)->dev;
	struct ibv_mr *mr = NULL;
	int rc;

	if (r->mem == TP_MEM_CUDA && !d->dmabuf)
		return sm_fail(SM_ERR_USAGE, "GPU memory on an ibverbs connection: %s has no "
			       "GPUDirect RDMA (%s); leave NCCL_NET_GDR_LEVEL unset so that NCCL "
			       "stages in host memory between hosts, or set "
			       "NCCL_SYMMEM_BACKEND=tcp", d->name, d->dmabuf_why);
	if (!r->size)
		return SM_OK;	/* nothing to move: no key needed */
	if (r->mem == TP_MEM_CUDA) {
		rc = ib_gpu_mr(f, d, r->base, r->size, dmabuf_fd, dmabuf_offset, &mr);
		if (rc)
			return rc;
	} else {
		mr = f->reg_mr(d->pd, (void *)r->base, r->size,
			       IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
		if (!mr)
			return sm_fail(SM_ERR_SYSTEM, "registering %zu bytes at 0x%lx with %s "
				       "failed", r->size, (unsigned long)r->base, d->name);
	}
	ib_region_of(r)->mr = mr;
	/* The region may outlive the connection (NCCL deregisters after an
	 * abort): it holds the device, whose protection domain the memory
	 * region lives in. */
	ib_dev_hold(d);
	ib_region_of(r)->dev = d;
	return SM_OK;
}

void ib_region_release(struct tp_region *reg)
{
	struct ib_region *r = ib_region_of(reg);

	if (!r->mr)
		return;
	ib_fns()->dereg_mr(r->mr);
	r->mr = NULL;
	ib_dev_put(r->dev);
	r->dev = NULL;
}

/* A request's registration made for it alone (ib.c), once it completed. */
void ib_req_release(struct tp_req *r)
{
	if (ib_req_of(r)->mr)
		ib_fns()->dereg_mr(ib_req_of(r)->mr);
	ib_req_of(r)->mr = NULL;
}

#else	/* built without <infiniband/verbs.h> */

int tp_ib_dmabuf(const struct tp_options *opt, char *desc, size_t len)
{
	(void)opt;
	snprintf(desc, len, "this build has no ibverbs backend");
	return 0;
}

#endif
