/* Registrations: the part every backend shares (checks, the comm it
 * belongs to, freeing); each backend's region_register op does the rest
 * (shm_region.c, tcp.c, ib_region.c).  Requests check their buffers
 * against them in comm.c. */
#include <stdlib.h>

#include "comm.h"

/* Everything a registration holds, also one that failed half way. */
static void region_release(struct tp_region *r)
{
	if (r->ops->region_release)
		r->ops->region_release(r);
}

/* tp_register, and with `dmabuf_fd` >= 0 NCCL's DMA-BUF of the memory. */
static int region_register(struct tp_comm *c, void *data, size_t size, int mem, int dmabuf_fd,
			   uint64_t dmabuf_offset, struct tp_region **out)
{
	struct tp_region *r;
	int rc = SM_OK;

	*out = NULL;
	if (c->failed)
		return comm_broken(c);
	if (mem != TP_MEM_HOST && mem != TP_MEM_CUDA)
		return sm_fail(SM_ERR_INVALID, "unknown memory type %d", mem);
	if (mem == TP_MEM_CUDA) {
		rc = comm_gpu_ready(c);
		if (rc)
			return rc;
	}
	r = calloc(1, c->ops->region_size);
	if (!r)
		return sm_fail(SM_ERR_SYSTEM, "out of memory registering %zu bytes", size);
	r->comm = c;
	r->comm_serial = c->serial;
	r->ops = c->ops;
	r->base = (uintptr_t)data;
	r->size = size;
	r->mem = mem;
	if (c->ops->region_register)
		rc = c->ops->region_register(c, r, dmabuf_fd, dmabuf_offset);
	if (rc) {
		region_release(r);
		free(r);
		return rc;
	}
	*out = r;
	return SM_OK;
}

int tp_register(struct tp_comm *c, void *data, size_t size, int mem, struct tp_region **out)
{
	return region_register(c, data, size, mem, -1, 0, out);
}

int tp_register_dmabuf(struct tp_comm *c, void *data, size_t size, int fd, uint64_t offset,
		       struct tp_region **out)
{
	return region_register(c, data, size, TP_MEM_CUDA, fd, offset, out);
}

void tp_deregister(struct tp_comm *c, struct tp_region *r)
{
	if (!r)
		return;
	/* The peer forgets the registration too; best effort: after a
	 * failure, or once the connection is closed (c == NULL), the sender
	 * unmaps at its own close.  Only through the comm it was registered
	 * on: after an abort NCCL may deregister once that comm is closed and
	 * another sits at its address, whose peer would drop a live
	 * registration of the same id. */
	if (c && c->serial != r->comm_serial)
		c = NULL;
	if (c && !c->failed && r->ops->region_withdraw)
		r->ops->region_withdraw(c, r);
	region_release(r);
	free(r);
}

int tp_remote_region_count(const struct tp_comm *c)
{
	return c->ops->remote_count ? c->ops->remote_count(c) : 0;
}
