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
 * connection up stays open as the liveness check.
 *
 * GPU memory is registered through DMA-BUF where the device takes it
 * (GPUDirect RDMA, ib_dmabuf.c) and refused at registration where it does
 * not; the plugin advertises GPU pointers only where it does, so NCCL
 * stages in host memory there (plugin/net.c). */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "ib.h"
#include "internal.h"

/* The probe's answer may take one lost packet's retry, 4.096 us x
 * 2^timeout (4.3 s at NCCL's 20): it gets two of those, and 2 s at least.
 * Outside the verbs build so that test_transport checks it on any host. */
#define PROBE_MIN_NS (2000ull * 1000 * 1000)

uint64_t ib_probe_wait_for(int timeout)
{
	/* 4096 ns << timeout is one interval, already in nanoseconds. */
	uint64_t retry_ns = (4096ull << timeout) * 2;

	return retry_ns > PROBE_MIN_NS ? retry_ns : PROBE_MIN_NS;
}

#ifdef SYMMEM_HAVE_VERBS

/* One posted receive as the sender sees it.  `seq1` (message number + 1)
 * is written last in the same RDMA write, and read first. */
struct ib_fifo {
	uint64_t addr;
	uint64_t size;
	uint32_t rkey;
	uint32_t pad;
	uint64_t seq1;
};

#define FIFO_BYTES (TP_MAX_REQUESTS * sizeof(struct ib_fifo))
#define SQ_DEPTH 128
#define IMM_OVERSIZE 0xffffffffu	/* the sender refused the message */
#define WR_FIFO (1ull << 63)		/* wr_id of a FIFO write (receiver) */
#define WR_PROBE (1ull << 62)		/* wr_id of the connector's probe write */
/* NCCL's defaults for its own IB transport: 4.096 us x 2^20 = 4.3 s per
 * retry, 7 retries.  A dead peer is noticed sooner by the TCP socket
 * (comm_check_peer), so long timeouts cost nothing there. */
#define QP_TIMEOUT 20
#define QP_RETRIES 7

struct ib_conn {
	struct ib_dev *dev;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ib_fifo *fifo;	/* sender: written by the peer; receiver: entries to write */
	struct ibv_mr *fifo_mr;
	uint64_t peer_fifo;	/* receiver: the sender's FIFO */
	uint32_t peer_rkey;
	int sq_depth;
	int sq_used;		/* work requests posted, completions not yet polled */
	uint64_t chunk;		/* the most one write moves */
	uint32_t psn;
	int timeout, retry, sl, tc;	/* NCCL_IB_TIMEOUT, _RETRY_CNT, _SL, _TC */
	uint8_t peer_gid[16];		/* for messages */
	uint16_t peer_lid;
};

int ib_usable(const struct tp_options *opt, const uint8_t *peer_gid, struct ib_dev **held)
{
	*held = NULL;
	if (!opt->ib)
		return 0;
	return ib_dev_get(opt->ib_hca, opt->dev, opt->gpu_pci, opt->ib_gid_index, peer_gid,
			  held) == SM_OK;
}

void ib_dev_gid(const struct ib_dev *d, uint8_t gid[16])
{
	memcpy(gid, d->gid, 16);
}

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

static int qp_init(const struct ib_fns *f, struct ib_conn *ib)
{
	struct ibv_qp_attr a;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.pkey_index = 0;
	a.port_num = (uint8_t)ib->dev->port;
	a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_LOCAL_WRITE;
	if (f->modify_qp(ib->qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
			 IBV_QP_ACCESS_FLAGS))
		return sm_fail(SM_ERR_SYSTEM, "queue pair on %s to INIT failed", ib->dev->name);
	return SM_OK;
}

int ib_conn_open(struct tp_comm *c, const struct tp_options *opt, struct ib_dev *dev,
		 struct wire_ib *mine)
{
	const struct ib_fns *f = ib_fns();
	struct ibv_qp_init_attr qa;
	struct ib_conn *ib;
	int rc;

	memset(mine, 0, sizeof(*mine));
	ib = calloc(1, sizeof(*ib));
	if (!ib)
		return sm_fail(SM_ERR_SYSTEM, "out of memory");
	c->ib = ib;		/* tp_close frees whatever was made */
	if (!dev)
		return sm_fail(SM_ERR_INTERNAL, "ibverbs connection without an RDMA device");
	ib_dev_hold(dev);
	ib->dev = dev;
	/* 0 is ibverbs' "no retry timer", which NCCL passes on as well. */
	ib->timeout = opt->ib_timeout >= 0 ? opt->ib_timeout : QP_TIMEOUT;
	ib->retry = opt->ib_retry >= 0 ? opt->ib_retry : QP_RETRIES;
	ib->sl = opt->ib_sl;
	ib->tc = opt->ib_tc;
	ib->sq_depth = ib->dev->max_qp_wr < SQ_DEPTH ? ib->dev->max_qp_wr : SQ_DEPTH;
	ib->chunk = ib->dev->max_msg ? min_u64(ib->dev->max_msg, 1ull << 30) : 1ull << 30;
	ib->cq = f->create_cq(ib->dev->ctx, ib->sq_depth + TP_MAX_REQUESTS + 8, NULL, NULL, 0);
	if (!ib->cq)
		return sm_fail(SM_ERR_SYSTEM, "ibv_create_cq on %s failed", ib->dev->name);
	memset(&qa, 0, sizeof(qa));
	qa.send_cq = ib->cq;
	qa.recv_cq = ib->cq;
	qa.qp_type = IBV_QPT_RC;
	qa.cap.max_send_wr = (uint32_t)ib->sq_depth;
	qa.cap.max_recv_wr = TP_MAX_REQUESTS;
	qa.cap.max_send_sge = 1;
	qa.cap.max_recv_sge = 1;
	ib->qp = f->create_qp(ib->dev->pd, &qa);
	if (!ib->qp)
		return sm_fail(SM_ERR_SYSTEM, "ibv_create_qp on %s failed", ib->dev->name);
	rc = qp_init(f, ib);
	if (rc)
		return rc;
	if (posix_memalign((void **)&ib->fifo, 4096, FIFO_BYTES))
		return sm_fail(SM_ERR_SYSTEM, "out of memory");
	memset(ib->fifo, 0, FIFO_BYTES);
	ib->fifo_mr = f->reg_mr(ib->dev->pd, ib->fifo, FIFO_BYTES,
				IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	if (!ib->fifo_mr)
		return sm_fail(SM_ERR_SYSTEM, "registering the FIFO on %s failed", ib->dev->name);
	if (getrandom(&ib->psn, sizeof(ib->psn), 0) != sizeof(ib->psn))
		ib->psn = (uint32_t)sm_now_ns();
	ib->psn &= 0xffffff;
	mine->qpn = ib->qp->qp_num;
	mine->psn = ib->psn;
	memcpy(mine->gid, ib->dev->gid, 16);
	mine->lid = ib->dev->lid;
	mine->mtu = (uint8_t)ib->dev->mtu;
	mine->link_layer = (uint8_t)ib->dev->link_layer;
	if (c->is_send) {
		mine->fifo_addr = (uint64_t)(uintptr_t)ib->fifo;
		mine->fifo_rkey = ib->fifo_mr->rkey;
	}
	return SM_OK;
}

int ib_conn_connect(struct tp_comm *c, const struct wire_ib *peer)
{
	const struct ib_fns *f = ib_fns();
	struct ib_conn *ib = c->ib;
	struct ibv_qp_attr a;

	memcpy(ib->peer_gid, peer->gid, 16);
	ib->peer_lid = peer->lid;
	if (peer->link_layer != ib->dev->link_layer)
		return sm_fail(SM_ERR_REMOTE, "the peer's RDMA port is %s, %s's is %s",
			       peer->link_layer == IBV_LINK_LAYER_ETHERNET ? "RoCE" : "InfiniBand",
			       ib->dev->name,
			       ib->dev->link_layer == IBV_LINK_LAYER_ETHERNET ? "RoCE" : "InfiniBand");
	if (!c->is_send) {
		ib->peer_fifo = peer->fifo_addr;
		ib->peer_rkey = peer->fifo_rkey;
	}
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = peer->mtu < ib->dev->mtu ? peer->mtu : ib->dev->mtu;
	a.dest_qp_num = peer->qpn;
	a.rq_psn = peer->psn;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 12;
	a.ah_attr.port_num = (uint8_t)ib->dev->port;
	a.ah_attr.dlid = peer->lid;
	a.ah_attr.sl = (uint8_t)ib->sl;
	if (ib->dev->link_layer == IBV_LINK_LAYER_ETHERNET) {
		a.ah_attr.is_global = 1;
		memcpy(a.ah_attr.grh.dgid.raw, peer->gid, 16);
		a.ah_attr.grh.sgid_index = (uint8_t)ib->dev->gid_index;
		a.ah_attr.grh.hop_limit = 255;
		a.ah_attr.grh.traffic_class = (uint8_t)ib->tc;
	}
	if (f->modify_qp(ib->qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
			 IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
		return sm_fail(SM_ERR_SYSTEM, "queue pair on %s to RTR (peer qp %u) failed",
			       ib->dev->name, peer->qpn);
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = (uint8_t)ib->timeout;
	a.retry_cnt = (uint8_t)ib->retry;
	a.rnr_retry = 7;
	a.sq_psn = ib->psn;
	a.max_rd_atomic = 1;
	if (f->modify_qp(ib->qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
			 IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC))
		return sm_fail(SM_ERR_SYSTEM, "queue pair on %s to RTS failed", ib->dev->name);
	return SM_OK;
}

/* "rxe0 port 1 (GID ::ffff:10.0.2.15) and the peer's (GID ...)", or LIDs
 * on InfiniBand links, for messages about the path between the two. */
void ib_conn_route(const struct tp_comm *c, char *buf, size_t len)
{
	const struct ib_conn *ib = c->ib;
	char mine[INET6_ADDRSTRLEN] = "?", peer[INET6_ADDRSTRLEN] = "?";

	if (!ib || !ib->dev) {
		snprintf(buf, len, "(no RDMA port)");
		return;
	}
	if (ib->dev->link_layer != IBV_LINK_LAYER_ETHERNET) {
		snprintf(buf, len, "%s port %d (LID %u) and the peer's (LID %u)", ib->dev->name,
			 ib->dev->port, ib->dev->lid, ib->peer_lid);
		return;
	}
	inet_ntop(AF_INET6, ib->dev->gid, mine, sizeof(mine));
	inet_ntop(AF_INET6, ib->peer_gid, peer, sizeof(peer));
	snprintf(buf, len, "%s port %d (GID %s) and the peer's (GID %s)", ib->dev->name,
		 ib->dev->port, mine, peer);
}

/* Connector, once both queue pairs are ready: a zero-byte RDMA write.  Its
 * acknowledgement proves the two ports reach each other both ways; ports
 * that cannot (separate fabrics or rails) would otherwise be found only
 * at the first message, after the queue pair's retries (30 s). */
int ib_conn_probe(struct tp_comm *c)
{
	struct ib_conn *ib = c->ib;
	struct ibv_send_wr wr, *bad;

	memset(&wr, 0, sizeof(wr));
	wr.wr_id = WR_PROBE;
	wr.opcode = IBV_WR_RDMA_WRITE;
	wr.send_flags = IBV_SEND_SIGNALED;
	if (ibv_post_send(ib->qp, &wr, &bad))
		return sm_fail(SM_ERR_SYSTEM, "posting the probe write on %s failed", ib->dev->name);
	ib->sq_used++;
	return SM_OK;
}

uint64_t ib_probe_wait_ns(const struct tp_comm *c)
{
	return ib_probe_wait_for(c->ib->timeout);
}

/* *done = 1 once the probe was acknowledged; fails if it came back with
 * an error (the queue pair gave up, or the peer refused it). */
int ib_conn_probe_done(struct tp_comm *c, int *done)
{
	struct ib_conn *ib = c->ib;
	struct ibv_wc wc;
	int n;

	*done = 0;
	n = ibv_poll_cq(ib->cq, 1, &wc);
	if (n < 0)
		return sm_fail(SM_ERR_SYSTEM, "polling the completion queue of %s failed",
			       ib->dev->name);
	if (n == 0)
		return SM_OK;
	ib->sq_used--;
	if (wc.status != IBV_WC_SUCCESS)
		return sm_fail(SM_ERR_REMOTE, "the probe write failed: %s",
			       ib_fns()->wc_status_str(wc.status));
	if (wc.wr_id != WR_PROBE)
		return sm_fail(SM_ERR_INTERNAL, "unexpected completion %llu during the probe",
			       (unsigned long long)wc.wr_id);
	*done = 1;
	return SM_OK;
}

int ib_region_register(struct tp_comm *c, struct tp_region *r, int dmabuf_fd,
		       uint64_t dmabuf_offset)
{
	const struct ib_fns *f = ib_fns();
	struct ib_dev *d = c->ib->dev;
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
	r->ib_mr = mr;
	/* The region may outlive the connection (NCCL deregisters after an
	 * abort): it holds the device, whose protection domain the memory
	 * region lives in. */
	ib_dev_hold(d);
	r->ib_dev = d;
	return SM_OK;
}

void ib_region_release(struct tp_region *r)
{
	if (!r->ib_mr)
		return;
	ib_fns()->dereg_mr(r->ib_mr);
	r->ib_mr = NULL;
	ib_dev_put(r->ib_dev);
	r->ib_dev = NULL;
}

/* The key of the memory a request names: its registration's, or one made
 * for the request alone (freed when it completes). */
static int req_keys(struct tp_comm *c, struct tp_req *r, const struct tp_region *reg,
		    uint32_t *lkey, uint32_t *rkey)
{
	struct ibv_mr *mr = reg ? reg->ib_mr : NULL;

	*lkey = *rkey = 0;
	if (!r->size)
		return SM_OK;
	if (!mr) {
		mr = ib_fns()->reg_mr(c->ib->dev->pd, r->buf, r->size,
				      IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
		if (!mr)
			return comm_fail(c, SM_ERR_SYSTEM, "registering %llu bytes at %p with %s "
					 "failed", (unsigned long long)r->size, (void *)r->buf,
					 c->ib->dev->name);
		r->ib_mr = mr;
	}
	*lkey = mr->lkey;
	*rkey = mr->rkey;
	return SM_OK;
}

static void req_release(struct tp_req *r)
{
	if (r->ib_mr)
		ib_fns()->dereg_mr(r->ib_mr);
	r->ib_mr = NULL;
}

static int post_write(struct tp_comm *c, struct tp_req *r, uint64_t len, int last)
{
	struct ib_conn *ib = c->ib;
	struct ibv_send_wr wr, *bad;
	struct ibv_sge sge;

	memset(&wr, 0, sizeof(wr));
	sge.addr = (uint64_t)(uintptr_t)(r->buf + r->moved);
	sge.length = (uint32_t)len;
	sge.lkey = r->ib_lkey;
	wr.wr_id = (uint64_t)(r - c->reqs);
	wr.sg_list = len ? &sge : NULL;
	wr.num_sge = len ? 1 : 0;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.opcode = last ? IBV_WR_RDMA_WRITE_WITH_IMM : IBV_WR_RDMA_WRITE;
	if (last)
		wr.imm_data = htonl((uint32_t)r->size);
	wr.wr.rdma.remote_addr = r->ib_raddr + r->moved;
	wr.wr.rdma.rkey = r->ib_rkey;
	if (ibv_post_send(ib->qp, &wr, &bad))
		return comm_fail(c, SM_ERR_SYSTEM, "posting an RDMA write on %s failed",
				 ib->dev->name);
	ib->sq_used++;
	r->ib_wrs++;
	r->moved += len;
	return SM_OK;
}

/* Sender: a zero-byte write whose immediate data says the message was
 * refused, so the receiver fails too and no payload moves.  Best effort:
 * this side fails either way. */
static void post_refusal(struct tp_comm *c, const struct ib_fifo *e)
{
	struct ibv_send_wr wr, *bad;

	if (c->ib->sq_used >= c->ib->sq_depth)
		return;
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = WR_FIFO;
	wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.imm_data = htonl(IMM_OVERSIZE);
	wr.wr.rdma.remote_addr = e->addr;
	wr.wr.rdma.rkey = e->rkey;
	if (!ibv_post_send(c->ib->qp, &wr, &bad))
		c->ib->sq_used++;
}

/* Sender: puts the queued sends' bytes on the wire while the send queue
 * has room, in posting order. */
static int post_sends(struct tp_comm *c, int *progressed)
{
	struct ib_conn *ib = c->ib;

	for (unsigned i = 0; i < c->q_count; i++) {
		struct tp_req *r = c->queue[(c->q_head + i) % TP_MAX_REQUESTS];

		/* hdr_done: the last write, with the size, is posted. */
		while (!r->hdr_done) {
			uint64_t len = min_u64(r->size - r->moved, ib->chunk);
			int last = r->moved + len == r->size, rc;

			if (ib->sq_used >= ib->sq_depth)
				return SM_OK;
			rc = post_write(c, r, len, last);
			if (rc)
				return rc;
			r->hdr_done = last;
			*progressed = 1;
		}
	}
	return SM_OK;
}

static int ib_isend(struct tp_comm *c, struct tp_req **out, const void *data, size_t size,
		    const struct tp_region *reg)
{
	struct ib_conn *ib = c->ib;
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
	r->ib_raddr = e->addr;
	r->ib_rkey = e->rkey;
	rc = req_keys(c, r, reg, &lkey, &rkey);
	if (rc)
		return rc;
	r->ib_lkey = lkey;
	c->posted++;
	*out = r;
	return SM_OK;
}

static int ib_irecv(struct tp_comm *c, struct tp_req *r, const struct tp_region *reg)
{
	struct ib_conn *ib = c->ib;
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
	struct ib_conn *ib = c->ib;
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
		r->ib_wrs--;
		if (r->kind == REQ_SEND && !r->ib_wrs && r->hdr_done) {
			req_release(r);
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
	req_release(r);
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
		n = ibv_poll_cq(c->ib->cq, 16, wc);
		if (n < 0)
			return comm_fail(c, SM_ERR_SYSTEM, "polling %s's completions failed",
					 c->ib->dev->name);
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

static void ib_close(struct tp_comm *c)
{
	const struct ib_fns *f = ib_fns();
	struct ib_conn *ib = c->ib;

	if (!ib)
		return;
	/* The queue pair goes first: nothing is written into memory that
	 * is about to be released. */
	if (ib->qp)
		f->destroy_qp(ib->qp);
	for (int i = 0; i < TP_MAX_REQUESTS; i++)
		req_release(&c->reqs[i]);
	if (ib->cq)
		f->destroy_cq(ib->cq);
	if (ib->fifo_mr)
		f->dereg_mr(ib->fifo_mr);
	free(ib->fifo);
	ib_dev_put(ib->dev);
	free(ib);
	c->ib = NULL;
}

static void ib_describe(const struct tp_comm *c, char *buf, size_t len)
{
	const struct ib_conn *ib = c->ib;

	snprintf(buf, len, "ibverbs %s port %d qp %u, %d work request(s) in the send queue",
		 ib->dev->name, ib->dev->port, ib->qp->qp_num, ib->sq_used);
}

const struct tp_ops tp_ib_ops = {
	.name = "ib",
	.isend = ib_isend,
	.irecv = ib_irecv,
	.progress = ib_progress,
	.close = ib_close,
	.describe = ib_describe,
};

#else	/* built without <infiniband/verbs.h> */

int ib_usable(const struct tp_options *opt, const uint8_t *peer_gid, struct ib_dev **held)
{
	(void)opt;
	(void)peer_gid;
	*held = NULL;
	return 0;
}

void ib_dev_gid(const struct ib_dev *d, uint8_t gid[16])
{
	(void)d;
	memset(gid, 0, 16);
}

int ib_conn_open(struct tp_comm *c, const struct tp_options *opt, struct ib_dev *dev,
		 struct wire_ib *mine)
{
	(void)c;
	(void)opt;
	(void)dev;
	memset(mine, 0, sizeof(*mine));
	return sm_fail(SM_ERR_SYSTEM, "this build has no ibverbs backend");
}

int ib_conn_connect(struct tp_comm *c, const struct wire_ib *peer)
{
	(void)c;
	(void)peer;
	return sm_fail(SM_ERR_SYSTEM, "this build has no ibverbs backend");
}

void ib_conn_route(const struct tp_comm *c, char *buf, size_t len)
{
	(void)c;
	snprintf(buf, len, "(no RDMA port)");
}

int ib_conn_probe(struct tp_comm *c)
{
	(void)c;
	return sm_fail(SM_ERR_SYSTEM, "this build has no ibverbs backend");
}

uint64_t ib_probe_wait_ns(const struct tp_comm *c)
{
	(void)c;
	return 0;
}

int ib_conn_probe_done(struct tp_comm *c, int *done)
{
	(void)c;
	*done = 0;
	return sm_fail(SM_ERR_SYSTEM, "this build has no ibverbs backend");
}

int ib_region_register(struct tp_comm *c, struct tp_region *r, int dmabuf_fd,
		       uint64_t dmabuf_offset)
{
	(void)c;
	(void)r;
	(void)dmabuf_fd;
	(void)dmabuf_offset;
	return sm_fail(SM_ERR_SYSTEM, "this build has no ibverbs backend");
}

int tp_ib_dmabuf(const struct tp_options *opt, char *desc, size_t len)
{
	(void)opt;
	snprintf(desc, len, "this build has no ibverbs backend");
	return 0;
}

void ib_region_release(struct tp_region *r)
{
	(void)r;
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
	.progress = ib_none,
	.close = ib_close_none,
};

#endif

/* The two RDMA ports cannot reach each other; sm_last_error() says how that
 * showed.  Both ends of a connection word it alike, naming both ports. */
int ib_conn_unreachable(const struct tp_comm *c, int required)
{
	char route[200], msg[300];

	ib_conn_route(c, route, sizeof(route));
	snprintf(msg, sizeof(msg), "RDMA %s cannot reach each other: %s", route, sm_last_error());
	if (required)
		return sm_fail(SM_ERR_REMOTE, "%s (NCCL_SYMMEM_BACKEND=ib requires RDMA)", msg);
	sm_warn("%s; this connection uses TCP (NCCL_IB_HCA selects ports, "
		"NCCL_SYMMEM_BACKEND=tcp skips ibverbs)", msg);
	return SM_OK;
}
