/* The data path between hosts over RDMA: one reliable-connected queue pair
 * per connection, host memory only.
 *
 * The receiver posts each receive twice: a receive work request (which
 * the sender's last write consumes, so its completion says the message
 * landed and how long it was) and an entry in the sender's FIFO, written
 * by RDMA (buffer address, key, capacity, message number).  The sender
 * waits for the entry of its next message, refuses a message larger than
 * the capacity (both sides fail with ncclInvalidUsage, no payload moves),
 * and writes the payload straight into the receive buffer with RDMA
 * writes, the last one carrying the size as immediate data.  No copy and
 * no system call per message on either side; the TCP socket that set the
 * connection up stays open as the liveness check.  Setup is ib_conn.c's.
 *
 * GPU memory is registered through DMA-BUF where the device takes it
 * (GPUDirect RDMA, ib_dmabuf.c) and refused at registration where it does
 * not; the plugin advertises GPU pointers only where it does, so NCCL
 * stages in host memory there (plugin/devices.c). */
#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>

#include "ib.h"

#ifdef SYMMEM_HAVE_VERBS

/* The key of the memory a request names: its registration's, or one made
 * for the request alone (freed when it completes). */
static int req_keys(struct tp_comm *c, struct tp_req *r, const struct tp_region *reg,
		    uint32_t *lkey, uint32_t *rkey)
{
	struct ibv_mr *mr = reg ? ib_region_of(reg)->mr : NULL;

	*lkey = *rkey = 0;
	if (!r->size)
		return SM_OK;
	if (!mr) {
		mr = ib_fns()->reg_mr(ib_of(c)->dev->pd, r->buf, r->size,
				      IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
		if (!mr)
			return comm_fail(c, SM_ERR_SYSTEM, "registering %llu bytes at %p with %s "
					 "failed", (unsigned long long)r->size, (void *)r->buf,
					 ib_of(c)->dev->name);
		ib_req_of(r)->mr = mr;
	}
	*lkey = mr->lkey;
	*rkey = mr->rkey;
	return SM_OK;
}

static int post_write(struct tp_comm *c, struct tp_req *r, uint64_t len, int last)
{
	struct ib_comm *ib = ib_of(c);
	struct ibv_send_wr wr, *bad;
	struct ibv_sge sge;

	memset(&wr, 0, sizeof(wr));
	sge.addr = (uint64_t)(uintptr_t)(r->buf + r->moved);
	sge.length = (uint32_t)len;
	sge.lkey = ib_req_of(r)->lkey;
	wr.wr_id = (uint64_t)(r - c->reqs);
	wr.sg_list = len ? &sge : NULL;
	wr.num_sge = len ? 1 : 0;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.opcode = last ? IBV_WR_RDMA_WRITE_WITH_IMM : IBV_WR_RDMA_WRITE;
	if (last)
		wr.imm_data = htonl((uint32_t)r->size);
	wr.wr.rdma.remote_addr = ib_req_of(r)->raddr + r->moved;
	wr.wr.rdma.rkey = ib_req_of(r)->rkey;
	if (ibv_post_send(ib->qp, &wr, &bad))
		return comm_fail(c, SM_ERR_SYSTEM, "posting an RDMA write on %s failed",
				 ib->dev->name);
	ib->sq_used++;
	ib_req_of(r)->wrs++;
	r->moved += len;
	return SM_OK;
}

/* Sender: a zero-byte write whose immediate data says the message was
 * refused, so the receiver fails too and no payload moves.  Best effort:
 * this side fails either way. */
static void post_refusal(struct tp_comm *c, const struct ib_fifo *e)
{
	struct ibv_send_wr wr, *bad;

	if (ib_of(c)->sq_used >= ib_of(c)->sq_depth)
		return;
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = WR_FIFO;
	wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.imm_data = htonl(IMM_OVERSIZE);
	wr.wr.rdma.remote_addr = e->addr;
	wr.wr.rdma.rkey = e->rkey;
	if (!ibv_post_send(ib_of(c)->qp, &wr, &bad))
		ib_of(c)->sq_used++;
}

/* Sender: puts the queued sends' bytes on the wire while the send queue
 * has room, in posting order. */
static int post_sends(struct tp_comm *c, int *progressed)
{
	struct ib_comm *ib = ib_of(c);

	for (unsigned i = 0; i < c->q_count; i++) {
		struct tp_req *r = c->queue[(c->q_head + i) % TP_MAX_REQUESTS];

		while (!ib_req_of(r)->last_posted) {
			uint64_t len = min_u64(r->size - r->moved, ib->chunk);
			int last = r->moved + len == r->size, rc;

			if (ib->sq_used >= ib->sq_depth)
				return SM_OK;
			rc = post_write(c, r, len, last);
			if (rc)
				return rc;
			ib_req_of(r)->last_posted = last;
			*progressed = 1;
		}
	}
	return SM_OK;
}

static int ib_isend(struct tp_comm *c, struct tp_req **out, const void *data, size_t size,
		    const struct tp_region *reg)
{
	struct ib_comm *ib = ib_of(c);
	struct ib_fifo *e = &ib->fifo[c->posted % TP_MAX_REQUESTS];
	struct tp_req *r;
	uint32_t lkey, rkey;
	int rc;

	if (__atomic_load_n(&e->seq1, __ATOMIC_ACQUIRE) != c->posted + 1)
		return SM_OK;	/* the receive is not posted yet */
	if (size > e->size || size >= IMM_OVERSIZE) {
		post_refusal(c, e);
		return comm_fail(c, SM_ERR_USAGE,
				 "send of %zu bytes into a posted receive of %llu bytes (message %llu)",
				 size, (unsigned long long)e->size, (unsigned long long)c->posted);
	}
	r = comm_req_alloc(c, REQ_SEND);
	r->buf = (uint8_t *)data;
	r->size = size;
	ib_req_of(r)->raddr = e->addr;
	ib_req_of(r)->rkey = e->rkey;
	rc = req_keys(c, r, reg, &lkey, &rkey);
	if (rc)
		return rc;
	ib_req_of(r)->lkey = lkey;
	c->posted++;
	*out = r;
	return SM_OK;
}

static int ib_irecv(struct tp_comm *c, struct tp_req *r, const struct tp_region *reg)
{
	struct ib_comm *ib = ib_of(c);
	struct ib_fifo *e = &ib->fifo[r->seq % TP_MAX_REQUESTS];
	struct ibv_recv_wr rwr, *rbad;
	struct ibv_send_wr wr, *bad;
	struct ibv_sge sge;
	uint32_t lkey, rkey;
	int rc;

	rc = req_keys(c, r, reg, &lkey, &rkey);
	if (rc)
		return rc;
	if (ib->sq_used >= ib->sq_depth)
		return comm_fail(c, SM_ERR_INTERNAL, "ibverbs send queue full of FIFO writes");
	memset(&rwr, 0, sizeof(rwr));
	rwr.wr_id = r->seq;
	if (ibv_post_recv(ib->qp, &rwr, &rbad))
		return comm_fail(c, SM_ERR_SYSTEM, "posting a receive on %s failed", ib->dev->name);
	/* The entry's slot was last written 32 receives ago, whose message
	 * the sender has sent since, so that write is done. */
	e->addr = (uint64_t)(uintptr_t)r->buf;
	e->size = r->size;
	e->rkey = rkey;
	e->seq1 = r->seq + 1;
	memset(&wr, 0, sizeof(wr));
	sge.addr = (uint64_t)(uintptr_t)e;
	sge.length = sizeof(*e);
	sge.lkey = ib->fifo_mr->lkey;
	wr.wr_id = WR_FIFO;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_RDMA_WRITE;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.wr.rdma.remote_addr = ib->peer_fifo + (r->seq % TP_MAX_REQUESTS) * sizeof(*e);
	wr.wr.rdma.rkey = ib->peer_rkey;
	if (ibv_post_send(ib->qp, &wr, &bad))
		return comm_fail(c, SM_ERR_SYSTEM, "posting a FIFO write on %s failed",
				 ib->dev->name);
	ib->sq_used++;
	return SM_OK;
}

/* One completion: a send's write, a FIFO write, or an arrived message. */
static int complete(struct tp_comm *c, const struct ibv_wc *wc)
{
	const struct ib_fns *f = ib_fns();
	struct ib_comm *ib = ib_of(c);
	struct tp_req *r;
	uint32_t imm;
	int rc;

	/* The opcode of a failed completion is undefined: only the status. */
	if (wc->status != IBV_WC_SUCCESS)
		return comm_fail(c, SM_ERR_REMOTE, "RDMA work request on %s failed: %s (the peer "
				 "died, or its host is unreachable)", ib->dev->name,
				 f->wc_status_str(wc->status));
	if (!(wc->opcode & IBV_WC_RECV)) {
		ib->sq_used--;
		if (wc->wr_id == WR_FIFO || wc->wr_id >= TP_MAX_REQUESTS)
			return SM_OK;
		r = &c->reqs[wc->wr_id];
		ib_req_of(r)->wrs--;
		if (r->kind == REQ_SEND && !ib_req_of(r)->wrs && ib_req_of(r)->last_posted) {
			ib_req_release(r);
			r->done = 1;
		}
		return SM_OK;
	}
	/* Receives complete in posting order: this is the oldest one not
	 * yet done (done ones leave the queue after the whole batch). */
	r = NULL;
	for (unsigned i = 0; i < c->q_count && !r; i++) {
		r = c->queue[(c->q_head + i) % TP_MAX_REQUESTS];
		r = r->done ? NULL : r;
	}
	if (!r || r->kind != REQ_RECV || r->seq != wc->wr_id)
		return comm_fail(c, SM_ERR_INTERNAL, "RDMA message %llu arrived out of order",
				 (unsigned long long)wc->wr_id);
	imm = ntohl(wc->imm_data);
	if (imm == IMM_OVERSIZE)
		return comm_fail(c, SM_ERR_USAGE, "sending peer refused message %llu: larger than "
				 "the posted receive of %llu bytes", (unsigned long long)r->seq,
				 (unsigned long long)r->size);
	rc = comm_recv_size(c, r, imm);
	if (rc)
		return rc;
	r->moved = imm;
	ib_req_release(r);
	r->done = 1;
	return SM_OK;
}

static int ib_progress(struct tp_comm *c, int *progressed)
{
	struct ibv_wc wc[16];
	struct tp_req *r;
	int n, rc = SM_OK;

	if (c->is_send) {
		rc = post_sends(c, progressed);
		if (rc)
			return rc;
	}
	do {
		n = ibv_poll_cq(ib_of(c)->cq, 16, wc);
		if (n < 0)
			return comm_fail(c, SM_ERR_SYSTEM, "polling %s's completions failed",
					 ib_of(c)->dev->name);
		for (int i = 0; i < n && !rc; i++)
			rc = complete(c, &wc[i]);
		if (rc)
			return rc;
		if (n)
			*progressed = 1;
	} while (n == 16);
	while ((r = comm_head(c)) != NULL && r->done)
		comm_pop(c);
	/* Completions freed room for more of a long send. */
	return c->is_send ? post_sends(c, progressed) : SM_OK;
}

static void ib_describe(const struct tp_comm *c, char *buf, size_t len)
{
	const struct ib_comm *ib = ib_of(c);

	snprintf(buf, len, "ibverbs %s port %d qp %u, %d work request(s) in the send queue",
		 ib->dev->name, ib->dev->port, ib->qp->qp_num, ib->sq_used);
}

const struct tp_ops tp_ib_ops = {
	.name = "ib",
	.title = "RDMA",
	.kind = TP_BACKEND_IB,
	.comm_size = sizeof(struct ib_comm),
	.region_size = sizeof(struct ib_region),
	.priority = 20,
	.pick = ib_pick,
	.offer = ib_offer,
	.put = ib_held_put,
	.connect_open = ib_connect_open,
	.accept_open = ib_accept_open,
	.connect_join = ib_connect_join,
	.route = ib_conn_route,
	.isend = ib_isend,
	.irecv = ib_irecv,
	.progress = ib_progress,
	.close = ib_close,
	.describe = ib_describe,
	.region_register = ib_region_register,
	.region_release = ib_region_release,
};

#else	/* built without <infiniband/verbs.h>: never usable */

int ib_usable(const struct tp_options *opt, const uint8_t *peer_gid, void **held)
{
	(void)opt;
	(void)peer_gid;
	*held = NULL;
	return 0;
}

void ib_held_put(void *held)
{
	(void)held;
}

void ib_held_gid(const void *held, uint8_t gid[16])
{
	(void)held;
	memset(gid, 0, 16);
}

static int ib_none(struct tp_comm *c, int *progressed)
{
	(void)progressed;
	return comm_fail(c, SM_ERR_SYSTEM, "this build has no ibverbs backend");
}

static void ib_close_none(struct tp_comm *c)
{
	(void)c;
}

const struct tp_ops tp_ib_ops = {
	.name = "ib",
	.title = "RDMA",
	.kind = TP_BACKEND_IB,
	.comm_size = sizeof(struct tp_comm),
	.region_size = sizeof(struct tp_region),
	.priority = 20,
	.pick = ib_pick,
	.offer = ib_offer,
	.put = ib_held_put,
	.progress = ib_none,
	.close = ib_close_none,
};

#endif
