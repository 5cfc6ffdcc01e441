/* The ibverbs backend's own declarations, for ib_dev.c and ib.c only
 * (internal.h has what the rest of transport/ sees of it). */
#ifndef SYMMEM_TRANSPORT_IB_H
#define SYMMEM_TRANSPORT_IB_H

#include <stdint.h>

#include "internal.h"

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
#endif

#endif
