/* An ibverbs connection's setup and close: the device a listener offers
 * and a connector picks, the queue pair each end makes, joining the two,
 * and the connector's probe write that proves the two ports reach each
 * other before any data moves (else both ends go on over TCP, unless
 * ibverbs is required). */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "ib.h"

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

/* 1 if this process can open the RDMA device for opt (the listener's
 * offer in the handle), which *held then holds open until ib_held_put: a
 * listener keeps it, so its connections do not open it again.  A
 * connector passes the listener's port address (ib_dev_get), a listener
 * NULL. */
int ib_usable(const struct tp_options *opt, const uint8_t *peer_gid, void **held)
{
	struct ib_dev *d = NULL;
	int ok;

	*held = NULL;
	if (!opt->ib)
		return 0;
	ok = ib_dev_get(opt->ib_hca, opt->dev, opt->gpu_pci, opt->ib_gid_index, peer_gid,
			&d) == SM_OK;
	*held = d;
	return ok;
}

void ib_held_put(void *held)
{
	ib_dev_put(held);
}

/* The device's port address (zero on an InfiniBand port without a GID). */
void ib_held_gid(const void *held, uint8_t gid[16])
{
	const struct ib_dev *d = held;

	memcpy(gid, d->gid, 16);
}

static int qp_init(const struct ib_fns *f, struct ib_comm *ib)
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

/* Makes c's queue pair on `dev` (the caller's: the comm takes a
 * reference of its own) and describes it in *mine; tp_close frees
 * whatever was made. */
static int conn_open(struct tp_comm *c, const struct tp_options *opt, struct ib_dev *dev,
		     struct ib_wire *mine)
{
	const struct ib_fns *f = ib_fns();
	struct ib_comm *ib = ib_of(c);
	struct ibv_qp_init_attr qa;
	int rc;

	memset(mine, 0, sizeof(*mine));
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

/* Joins c's queue pair to the peer's. */
static int conn_connect(struct tp_comm *c, const struct ib_wire *peer)
{
	const struct ib_fns *f = ib_fns();
	struct ib_comm *ib = ib_of(c);
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
	const struct ib_comm *ib = ib_of(c);
	char mine[INET6_ADDRSTRLEN] = "?", peer[INET6_ADDRSTRLEN] = "?";

	if (!ib->dev) {
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
static int conn_probe(struct tp_comm *c)
{
	struct ib_comm *ib = ib_of(c);
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

static uint64_t probe_wait_ns(const struct tp_comm *c)
{
	return ib_probe_wait_for(ib_of(c)->timeout);
}

/* *done = 1 once the probe was acknowledged; fails if it came back with
 * an error (the queue pair gave up, or the peer refused it). */
static int conn_probe_done(struct tp_comm *c, int *done)
{
	struct ib_comm *ib = ib_of(c);
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

/* The two RDMA ports cannot reach each other; sm_last_error() says how that
 * showed.  Both ends of a connection word it alike, naming both ports. */
static int conn_unreachable(const struct tp_comm *c, int required)
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

/* Connector: its queue pair, in the setup message. */
int ib_connect_open(struct tp_comm *c, const struct tp_options *opt, void *held,
		    struct wire_setup *setup, int *memfd)
{
	struct ib_wire mine;
	int rc;

	(void)memfd;
	rc = conn_open(c, opt, held, &mine);
	memcpy(setup->part, &mine, sizeof(mine));
	return rc;
}

/* Listener: its queue pair, joined to the connector's.  One that would
 * not join (Soft-RoCE and RoCE refuse a route they do not have here)
 * means the two RDMA ports cannot reach each other: unless either end
 * requires ibverbs, the reply asks for TCP instead; else the connection
 * fails. */
int ib_accept_open(struct tp_comm *c, const struct tp_options *opt, void *held,
		   const struct wire_hello *hello, const struct wire_setup *setup, int memfd,
		   struct wire_reply *reply)
{
	int required = opt->ib == 2 || (hello->flags & WIRE_REQUIRED);
	struct ib_wire mine, peer;
	int rc;

	(void)memfd;
	memcpy(&peer, setup->part, sizeof(peer));
	rc = conn_open(c, opt, held, &mine);
	memcpy(reply->part, &mine, sizeof(mine));
	if (rc || conn_connect(c, &peer) == SM_OK)
		return rc;
	rc = conn_unreachable(c, required);
	if (!rc)
		reply->backend = TP_BACKEND_AUTO;	/* go on as the plain kind */
	return rc;
}

/* The two RDMA ports cannot reach each other: this queue pair would not
 * join the listener's, or the probe write went unanswered.  Unless either
 * end requires ibverbs, the connection goes on over TCP, with one WARN
 * (the same text for every channel to that peer, so the log shows it
 * once); else it fails. */
static char verdict_unreachable(const struct tp_comm *c, const struct tp_options *opt,
				const struct wire_reply *reply)
{
	int required = opt->ib == 2 || (reply->flags & WIRE_REQUIRED);

	return conn_unreachable(c, required) ? VERDICT_FAIL : VERDICT_PLAIN;
}

/* Connector, once the reply came.  The listener's queue pair may write to
 * ours as soon as it has its comm: it waits for the verdict, given once
 * ours can take the writes and the probe write came back. */
int ib_connect_join(struct tp_comm *c, const struct tp_options *opt,
		    const struct wire_reply *reply, char *verdict)
{
	struct ib_comm *ib = ib_of(c);
	int rc, ok;

	*verdict = VERDICT_NONE;
	if (!ib->probe_until_ns) {
		struct ib_wire peer;

		memcpy(&peer, reply->part, sizeof(peer));
		rc = conn_connect(c, &peer);
		if (rc == SM_OK)
			rc = conn_probe(c);
		if (rc) {
			*verdict = verdict_unreachable(c, opt, reply);
			return SM_OK;
		}
		ib->probe_until_ns = sm_now_ns() + probe_wait_ns(c);
	}
	rc = conn_probe_done(c, &ok);
	if (rc == SM_OK && !ok) {
		if (sm_now_ns() < ib->probe_until_ns)
			return SM_OK;
		rc = sm_fail(SM_ERR_REMOTE, "no answer to the probe write within %.1f s",
			     (double)probe_wait_ns(c) / 1e9);
	}
	*verdict = rc ? verdict_unreachable(c, opt, reply) : VERDICT_JOINED;
	return SM_OK;
}

void ib_close(struct tp_comm *c)
{
	const struct ib_fns *f = ib_fns();
	struct ib_comm *ib = ib_of(c);

	/* The queue pair goes first: nothing is written into memory that
	 * is about to be released. */
	if (ib->qp)
		f->destroy_qp(ib->qp);
	ib->qp = NULL;
	for (int i = 0; i < TP_MAX_REQUESTS; i++)
		ib_req_release(&c->reqs[i]);
	if (ib->cq)
		f->destroy_cq(ib->cq);
	ib->cq = NULL;
	if (ib->fifo_mr)
		f->dereg_mr(ib->fifo_mr);
	ib->fifo_mr = NULL;
	free(ib->fifo);
	ib->fifo = NULL;
	ib_dev_put(ib->dev);
	ib->dev = NULL;
}

#endif
