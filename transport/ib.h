/* The ibverbs backend (between hosts over RDMA): one reliable-connected
 * queue pair per connection, on a device shared by the process's
 * connections.  For its own files (ib*.c, rdma.c, gid_net.c) and the
 * backend registry only. */
#ifndef SYMMEM_TRANSPORT_IB_H
#define SYMMEM_TRANSPORT_IB_H

#include <stdint.h>

#include "comm.h"
#include "gid.h"

extern const struct tp_ops tp_ib_ops;

/* rdma.c: dlsym's object pointer into a function pointer of `size` bytes. */
int tp_ibv_symbol(void *lib, const char *name, void *fn, size_t size);


/* ib_dev.c: the RDMA device for the plugin's device `which` (its GPU at
 * sysfs path gpu_pci, or NULL), among those NCCL_IB_HCA `spec` selects,
 * opened once per process and held until the last put; gid_index < 0
 * picks the port's GID.  A connector passes the listener's port address
 * `peer_gid` (else NULL): when the closest device is on another network,
 * a selected one on the listener's is taken instead (rails). */
struct ib_dev;
int ib_dev_get(const char *spec, int which, const char *gpu_pci, int gid_index,
	       const uint8_t *peer_gid, struct ib_dev **out);
void ib_dev_put(struct ib_dev *d);

/* An ibverbs end of a connection, in the setup and the reply
 * (wire_setup.part, wire_reply.part): its queue pair's address and, from
 * the sender, where the receiver writes the receives it posts. */
struct ib_wire {
	uint32_t qpn;
	uint32_t psn;
	uint8_t gid[16];
	uint16_t lid;
	uint8_t mtu;			/* enum ibv_mtu */
	uint8_t link_layer;		/* IBV_LINK_LAYER_* */
	uint32_t fifo_rkey;
	uint64_t fifo_addr;
};
_Static_assert(sizeof(struct ib_wire) == WIRE_PART_BYTES, "the setup's backend part");

/* ib_conn.c (without verbs, ib.c): ib_usable opens the device for opt,
 * held until ib_held_put (a comm takes a reference of its own);
 * ib_held_gid gives its port address.  A connector passes the
 * listener's port address, a listener NULL. */
int ib_usable(const struct tp_options *opt, const uint8_t *peer_gid, void **held);
void ib_held_put(void *held);
void ib_held_gid(const void *held, uint8_t gid[16]);

/* ib_offer.c: the ops setup asks (comm.h): the listener's offer of its
 * RDMA device, the connector's choice of ibverbs. */
int ib_offer(const struct tp_options *opt, void **held, uint8_t offer[TP_OFFER_BYTES]);
int ib_pick(const struct tp_options *opt, const struct tp_handle_info *info, int *picked,
	    void **held);

/* ib_conn.c: how long the connector waits for its probe write's answer
 * at NCCL_IB_TIMEOUT `timeout` (1..31): two retry intervals of 4.096 us x
 * 2^timeout, 2 s at least (the connect deadline still caps the setup). */
uint64_t ib_probe_wait_for(int timeout);

#ifdef SYMMEM_HAVE_VERBS
#include <infiniband/verbs.h>

#define IB_WHY_BYTES 160

/* The verbs the data path calls, from libibverbs loaded at run time.
 * Posting and polling are inline in verbs.h (they go through the device
 * context), so they need no entry here. */
struct ib_fns {
	int loaded;
	struct ibv_device **(*get_device_list)(int *);
	void (*free_device_list)(struct ibv_device **);
	const char *(*get_device_name)(struct ibv_device *);
	struct ibv_context *(*open_device)(struct ibv_device *);
	int (*close_device)(struct ibv_context *);
	int (*query_device)(struct ibv_context *, struct ibv_device_attr *);
	int (*query_port)(struct ibv_context *, uint8_t, struct _compat_ibv_port_attr *);
	int (*query_gid)(struct ibv_context *, uint8_t, int, union ibv_gid *);
	struct ibv_pd *(*alloc_pd)(struct ibv_context *);
	int (*dealloc_pd)(struct ibv_pd *);
	struct ibv_mr *(*reg_mr)(struct ibv_pd *, void *, size_t, int);
	int (*dereg_mr)(struct ibv_mr *);
	struct ibv_cq *(*create_cq)(struct ibv_context *, int, void *, struct ibv_comp_channel *,
				    int);
	int (*destroy_cq)(struct ibv_cq *);
	struct ibv_qp *(*create_qp)(struct ibv_pd *, struct ibv_qp_init_attr *);
	int (*destroy_qp)(struct ibv_qp *);
	int (*modify_qp)(struct ibv_qp *, struct ibv_qp_attr *, int);
	const char *(*wc_status_str)(enum ibv_wc_status);
	/* Optional (libibverbs IBVERBS_1.12 on): NULL means no GPUDirect RDMA. */
	struct ibv_mr *(*reg_dmabuf_mr)(struct ibv_pd *, uint64_t, size_t, uint64_t, int, int);
};

/* One opened device, shared by the process's connections on it. */
struct ib_dev {
	struct ib_dev *next;
	int refs;
	char name[64];
	int want_gid;			/* NCCL_IB_GID_INDEX it was opened for, -1 = auto */
	int want_port;			/* the port NCCL_IB_HCA named, 0 = first active */
	int pid;			/* the process that opened it (not reused after a fork) */
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	int port;
	int gid_index;
	uint8_t gid[16];
	uint16_t lid;
	int mtu;			/* enum ibv_mtu, active */
	int link_layer;
	uint32_t max_msg;		/* the port's largest message */
	int max_qp_wr;
	int dmabuf;			/* GPU memory registers through DMA-BUF */
	char dmabuf_why[IB_WHY_BYTES];	/* the probe's answer, for messages */
};

/* One more holder of a device ib_dev_get opened. */
void ib_dev_hold(struct ib_dev *d);

/* NULL when libibverbs cannot be loaded. */
const struct ib_fns *ib_fns(void);

/* ib_dmabuf.c: whether protection domain `pd`'s device registers DMA-BUF
 * memory, asked once per device: 1 or 0, with the answer in why[]. */
int ib_dmabuf_probe(const struct ib_fns *f, struct ibv_pd *pd, char *why, size_t len);
/* GPU memory [base, base + size) registered with d for RDMA writes, through
 * NCCL's DMA-BUF `fd` (at `offset` in it; NCCL closes it) or, with fd -1,
 * one the driver hands out here for the pages holding the range (closed
 * before returning). */
int ib_gpu_mr(const struct ib_fns *f, const struct ib_dev *d, uintptr_t base, size_t size,
	      int fd, uint64_t offset, struct ibv_mr **out);

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

struct ib_comm {
	struct tp_comm comm;
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
	uint64_t probe_until_ns;	/* connector: the probe write's answer is due (0: not sent) */
};

/* A registration: the memory region, and the device it holds open (the
 * region may outlive the connection). */
struct ib_region {
	struct tp_region reg;
	struct ibv_mr *mr;
	struct ib_dev *dev;
};

/* The ibverbs part of a request (comm.h's tp_req). */
struct ib_req {
	void *mr;		/* registered for this request alone (no registration) */
	uint32_t lkey;		/* send: the source's key */
	uint32_t rkey;		/* send: the receive buffer's key and address */
	uint64_t raddr;
	unsigned wrs;		/* send: work requests posted, not yet completed */
	int last_posted;	/* send: the last write, with the size, is posted */
};
_Static_assert(sizeof(struct ib_req) <= TP_REQ_PART_BYTES, "TP_REQ_PART_BYTES");

static inline struct ib_req *ib_req_of(const struct tp_req *r)
{
	return TP_REQ_PART(r, struct ib_req);
}

static inline struct ib_comm *ib_of(const struct tp_comm *c)
{
	return TP_CONTAINER(c, struct ib_comm, comm);
}

static inline struct ib_region *ib_region_of(const struct tp_region *r)
{
	return TP_CONTAINER(r, struct ib_region, reg);
}

/* ib_conn.c: the queue pair's life, the ops of connection setup (comm.h
 * says what each does; all run on NCCL's service thread). */
int ib_connect_open(struct tp_comm *c, const struct tp_options *opt, void *held,
		    struct wire_setup *setup, int *memfd);
int ib_accept_open(struct tp_comm *c, const struct tp_options *opt, void *held,
		   const struct wire_hello *hello, const struct wire_setup *setup, int memfd,
		   struct wire_reply *reply);
int ib_connect_join(struct tp_comm *c, const struct tp_options *opt,
		    const struct wire_reply *reply, char *verdict);
/* Both ports, for messages about the path between them. */
void ib_conn_route(const struct tp_comm *c, char *buf, size_t len);
/* Destroys the queue pair, then the requests' own registrations. */
void ib_close(struct tp_comm *c);

/* ib_region.c: registers r's memory with c's device: host memory, or GPU
 * memory through DMA-BUF where the device takes it (NCCL's `dmabuf_fd` at
 * `dmabuf_offset`, or with -1 one asked of the driver), refused where it
 * does not; ib_region_release undoes it, also after c closed. */
int ib_region_register(struct tp_comm *c, struct tp_region *r, int dmabuf_fd,
		       uint64_t dmabuf_offset);
void ib_region_release(struct tp_region *r);
/* A request's registration made for it alone (ib.c), released. */
void ib_req_release(struct tp_req *r);
#endif

#endif
