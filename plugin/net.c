/* The net plugin's ABI glue: argument checks, object bookkeeping and the
 * dispatch to a path (path.h), which does the work.  Every failure leaves
 * here as an ncclResult_t plus exactly one WARN line.  One refusal is not
 * a failure: a user buffer on a ring connection (conn_hints.h), which
 * NCCL answers by running the collective on its own buffers; it is logged
 * once, at INFO.
 *
 * The process's path (net_path()) answers the device and setup calls;
 * every comm, memory handle, listener and request then goes to the path
 * that made it, through one pointer. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "conn_hints.h"
#include "devices.h"
#include "log.h"
#include "monitor.h"
#include "net.h"
#include "notes.h"
#include "path.h"
#include "registry.h"
#include "symmem.h"

static const struct config *load_config(void)
{
	const struct config *cfg = config_get();

	if (!cfg)
		LOG_WARN("NET/symmem: %s", config_error());
	return cfg;
}

ncclResult_t net_init(void **ctx, uint64_t commId, ncclNetCommConfig_v11_t *config,
		      ncclDebugLogger_t logFunction, ncclProfilerCallback_t profFunction)
{
	const struct net_path *path;
	const struct config *cfg;
	struct net_ctx *c;
	ncclResult_t rc;

	log_set_logger(logFunction);
	if (ctx)
		*ctx = NULL;
	cfg = load_config();
	path = net_path(cfg);
	if (!cfg || path->refuses(cfg))
		return ncclInvalidUsage;
	notes_announce(cfg, path);
	if (ctx)
		notes_set_rings_hinted();
	notes_hints(cfg);
	devices_ready();
	notes_rdma(cfg, path);
	if (!ctx)	/* pre-v11 init: no per-comm context */
		return path->init(cfg, NULL, commId, config, logFunction, profFunction);
	c = calloc(1, sizeof(*c));
	if (!c) {
		LOG_WARN("NET/symmem: out of memory in init");
		return ncclSystemError;
	}
	c->path = path;
	rc = path->init(cfg, c, commId, config, logFunction, profFunction);
	if (rc != ncclSuccess) {
		free(c);
		return rc;
	}
	if (registry_add(c, OBJ_CTX)) {
		path->finalize(c);
		free(c);
		LOG_WARN("NET/symmem: out of memory in init");
		return ncclSystemError;
	}
	c->comm_id = commId;
	c->traffic_class = config ? config->trafficClass : -1;
	notes_context_opened();
	*ctx = c;
	return ncclSuccess;
}

/* NCCL sees the inner plugin's devices when there is one (docs/
 * multi-node.md): its NICs are where NCCL places the channels that
 * leave the host, and a channel to a peer on this host may use any. */
ncclResult_t net_devices(int *ndev)
{
	if (!ndev) {
		LOG_WARN("NET/symmem: devices called with a NULL count");
		return ncclInvalidArgument;
	}
	devices_ready();
	return net_path(config_get())->devices(ndev);
}

static int check_dev(int dev, const char *what)
{
	int n;

	devices_ready();
	n = net_path(config_get())->device_count();
	if (dev >= 0 && dev < n)
		return 0;
	LOG_WARN("NET/symmem: %s on device %d, this plugin has %d device(s)", what, dev, n);
	return -1;
}

ncclResult_t net_get_properties_v12(int dev, ncclNetProperties_v12_t *props)
{
	if (check_dev(dev, "getProperties") || !props)
		return ncclInvalidArgument;
	return net_path(config_get())->get_properties(dev, props);
}

ncclResult_t net_listen(void *ctx, int dev, void *handle, void **listenComm)
{
	const struct config *cfg = load_config();
	struct net_listen *l;
	ncclResult_t rc;

	conn_setup_end();
	if (!listenComm || !handle) {
		LOG_WARN("NET/symmem: listen called with a NULL handle or comm slot");
		return ncclInvalidArgument;
	}
	*listenComm = NULL;
	if (!cfg)
		return ncclInvalidUsage;
	if (check_dev(dev, "listen"))
		return ncclInvalidArgument;
	rc = net_path(cfg)->listen(cfg, ctx, dev, handle, &l);
	if (rc != ncclSuccess)
		return rc;
	if (registry_add(l, OBJ_LISTEN)) {
		l->path->close_listen(l);
		free(l);
		LOG_WARN("NET/symmem: out of memory in listen");
		return ncclSystemError;
	}
	*listenComm = l;
	return ncclSuccess;
}

/* A finished connection into NCCL's hands. */
static ncclResult_t publish(struct net_comm *c, void **out)
{
	const struct config *cfg = config_get();

	if (registry_add(c, c->is_send ? OBJ_SEND : OBJ_RECV)) {
		c->path->close(c, 1);
		free(c);
		LOG_WARN("NET/symmem: out of memory while finishing a connection");
		return ncclSystemError;
	}
	c->kind = hints_take();
	notes_unhinted(cfg, c->kind);
	conn_setup_begin(c);
	c->path->opened(cfg, c);
	*out = c;
	return ncclSuccess;
}

ncclResult_t net_connect(void *ctx, int dev, void *handle, void **sendComm,
			 ncclNetDeviceHandle_t **sendDevComm)
{
	const struct config *cfg = load_config();
	struct net_comm *c;
	ncclResult_t rc;

	conn_setup_end();
	if (!sendComm || !handle) {
		LOG_WARN("NET/symmem: connect called with a NULL handle or comm slot");
		return ncclInvalidArgument;
	}
	*sendComm = NULL;
	if (!cfg)
		return ncclInvalidUsage;
	if (check_dev(dev, "connect"))
		return ncclInvalidArgument;
	rc = net_path(cfg)->connect(cfg, ctx, dev, handle, &c, sendDevComm);
	if (rc != ncclSuccess || !c)
		return rc;
	return publish(c, sendComm);
}

ncclResult_t net_accept(void *listenComm, void **recvComm, ncclNetDeviceHandle_t **recvDevComm)
{
	struct net_listen *l = listenComm;
	struct net_comm *c;
	ncclResult_t rc;

	conn_setup_end();
	if (!recvComm) {
		LOG_WARN("NET/symmem: accept called with a NULL comm slot");
		return ncclInvalidArgument;
	}
	*recvComm = NULL;
	if (!registry_has(l, OBJ_LISTEN)) {
		LOG_WARN("NET/symmem: accept on %p, which is not an open listen comm", listenComm);
		return ncclInternalError;
	}
	rc = l->path->accept(l, &c, recvDevComm);
	if (rc != ncclSuccess || !c)
		return rc;
	return publish(c, recvComm);
}

/* NCCL's hint for the connection its service thread makes next
 * (conn_hints.h); `ctx` is the communicator's, `attr` may be NULL. */
ncclResult_t net_set_net_attr(void *ctx, ncclNetAttr_v11_t *attr)
{
	conn_setup_end();
	if (attr)
		hints_note(attr->op);
	return net_path(config_get())->set_net_attr(ctx, attr);
}

/* Whether `data`, device memory NCCL registers on ring connection `c`,
 * is a user buffer the plugin keeps unregistered (conn_hints.h): with P2P
 * off, where NCCL would then run the collective on one channel, unless
 * config_coll_register() says otherwise.  Memory the driver cannot place
 * goes on to be registered, or fail, as before. */
static int declines_user_buffer(struct net_comm *c, void *data)
{
	const struct config *cfg = config_get();
	const struct sm_cuda_api *cu = sm_cu();
	struct reg_case r = { .kind = c->kind };
	CUdeviceptr base;
	size_t len;

	if (!cfg || !cu)
		return 0;
	/* On every connection alike, also between hosts (conn_may_decline). */
	r.p2p_off = config_p2p_off();
	r.keep_rings = config_coll_register(cfg);
	r.in_setup = conn_in_setup(c);
	if (!conn_may_decline(&r))
		return 0;	/* no driver call for what is registered anyway */
	if (cu->mem_get_address_range(&base, &len, (CUdeviceptr)data) != CUDA_SUCCESS)
		return 0;
	r.lo = (uintptr_t)base;
	r.hi = (uintptr_t)base + len;
	if (!conn_declines(&c->staging, &r))
		return 0;
	notes_declined();
	return 1;
}

/* regMr, and regMrDmaBuf with NCCL's DMA-BUF `fd` (-1: none). */
static ncclResult_t reg_mr(void *comm, void *data, size_t size, int type, int fd,
			   uint64_t offset, void **mhandle, const char *what)
{
	struct net_comm *c = comm;
	struct net_mr *mr;
	ncclResult_t rc;

	if (!mhandle) {
		LOG_WARN("NET/symmem: %s called with a NULL handle slot", what);
		return ncclInvalidArgument;
	}
	*mhandle = NULL;
	if (!registry_has(comm, OBJ_SEND) && !registry_has(comm, OBJ_RECV)) {
		LOG_WARN("NET/symmem: %s on %p, which is not an open comm", what, comm);
		return ncclInternalError;
	}
	/* Not a failure: NCCL runs the operation on its own buffers.  Alike
	 * on both paths (conn_may_decline). */
	if (type == NCCL_PTR_CUDA && declines_user_buffer(c, data))
		return ncclInvalidUsage;
	mr = calloc(1, sizeof(*mr));
	if (!mr) {
		LOG_WARN("NET/symmem: out of memory in %s", what);
		return ncclSystemError;
	}
	rc = c->path->reg(c, data, size, type, fd, offset, &mr->handle, what);
	if (rc != ncclSuccess) {
		free(mr);
		return rc;
	}
	if (registry_add(mr, OBJ_MR)) {
		c->path->dereg(c, mr->handle);
		free(mr);
		LOG_WARN("NET/symmem: out of memory in %s", what);
		return ncclSystemError;
	}
	mr->comm = c;
	mr->path = c->path;
	*mhandle = mr;
	return ncclSuccess;
}

ncclResult_t net_reg_mr(void *comm, void *data, size_t size, int type, void **mhandle)
{
	return reg_mr(comm, data, size, type, -1, 0, mhandle, "regMr");
}

/* NCCL closes `fd` once this returns: the registration keeps no copy. */
ncclResult_t net_reg_mr_dma_buf(void *comm, void *data, size_t size, int type, uint64_t offset,
				int fd, void **mhandle)
{
	return reg_mr(comm, data, size, type, fd, offset, mhandle, "regMrDmaBuf");
}

ncclResult_t net_dereg_mr(void *comm, void *mhandle)
{
	struct net_mr *mr = mhandle;
	ncclResult_t rc;
	int open;

	if (!registry_has(mr, OBJ_MR)) {
		LOG_WARN("NET/symmem: deregMr of %p, which is not a live memory handle "
			 "(deregistered twice?)", mhandle);
		return ncclInternalError;
	}
	if ((void *)mr->comm != comm) {
		LOG_WARN("NET/symmem: deregMr of a handle registered on comm %p through comm %p",
			 (void *)mr->comm, comm);
		return ncclInternalError;
	}
	registry_remove(mr, OBJ_MR);
	/* The handle's own path, which holds it also after its comm closed
	 * (then the comm is not read). */
	open = registry_has(comm, OBJ_SEND) || registry_has(comm, OBJ_RECV);
	rc = mr->path->dereg(open ? mr->comm : NULL, mr->handle);
	registry_retire(mr);
	return rc;
}

ncclResult_t net_get_device_mr(void *comm, void *mhandle, void **dptr_mhandle)
{
	struct net_comm *c = comm;
	struct net_mr *mr = mhandle;

	if (!dptr_mhandle) {
		LOG_WARN("NET/symmem: getDeviceMr called with a NULL slot");
		return ncclInvalidArgument;
	}
	*dptr_mhandle = NULL;
	if (!registry_has(mr, OBJ_MR) || (void *)mr->comm != comm) {
		LOG_WARN("NET/symmem: getDeviceMr of %p, which is no live memory handle of comm %p",
			 mhandle, comm);
		return ncclInternalError;
	}
	return c->path->get_device_mr(c, mr->handle, dptr_mhandle);
}

ncclResult_t net_isend(void *sendComm, void *data, size_t size, int tag, void *mhandle,
		       void *phandle, void **request)
{
	struct net_comm *c = sendComm;

	return c->path->isend(c, data, size, tag, mhandle, phandle, request);
}

ncclResult_t net_irecv(void *recvComm, int n, void **data, size_t *sizes, int *tags,
		       void **mhandles, void **phandles, void **request)
{
	struct net_comm *c = recvComm;

	return c->path->irecv(c, n, data, sizes, tags, mhandles, phandles, request);
}

ncclResult_t net_iflush(void *recvComm, int n, void **data, int *sizes, void **mhandles,
			void **request)
{
	struct net_comm *c = recvComm;

	*request = NULL;
	return c->path->iflush(c, n, data, sizes, mhandles, request);
}

ncclResult_t net_test(void *request, int *done, int *sizes)
{
	if ((uintptr_t)request <= NCCL_NET_OPTIONAL_RECV_COMPLETION) {
		LOG_WARN("NET/symmem: test on request %p, which no isend/irecv returned", request);
		return ncclInternalError;
	}
	return net_path_of_request(request)->test(request, done, sizes);
}

/* NCCL may call it for every completed receive (the exported table's
 * choice); only the inner plugin's may want to know. */
ncclResult_t net_irecv_consumed(void *recvComm, int n, void *request)
{
	struct net_comm *c = recvComm;

	return c->path->irecv_consumed(c, n, request);
}

static ncclResult_t close_comm(void *comm, int kind, const char *what)
{
	struct net_comm *c = comm;
	ncclResult_t rc;

	if (!comm)
		return ncclSuccess;
	if (registry_take(c, kind, what))
		return ncclInternalError;
	rc = c->path->close(c, 0);
	if (conn_in_setup(c))
		conn_setup_end();	/* a later comm at this address is not set up yet */
	registry_retire(c);
	return rc;
}

ncclResult_t net_close_send(void *sendComm)
{
	return close_comm(sendComm, OBJ_SEND, "closeSend");
}

ncclResult_t net_close_recv(void *recvComm)
{
	return close_comm(recvComm, OBJ_RECV, "closeRecv");
}

ncclResult_t net_close_listen(void *listenComm)
{
	struct net_listen *l = listenComm;
	ncclResult_t rc;

	if (!l)
		return ncclSuccess;
	if (registry_take(l, OBJ_LISTEN, "closeListen"))
		return ncclInternalError;
	rc = l->path->close_listen(l);
	registry_retire(l);
	return rc;
}

/* NIC fusion is the inner plugin's. */
ncclResult_t net_make_vdevice_v12(int *d, ncclNetVDeviceProps_v12_t *props)
{
	if (!d || !props) {
		LOG_WARN("NET/symmem: makeVDevice called with a NULL slot or list");
		return ncclInvalidArgument;
	}
	return net_path(config_get())->make_vdevice(d, props);
}

ncclResult_t net_make_vdevice(int *d, ncclNetVDeviceProps_v11_t *props)
{
	ncclNetVDeviceProps_v12_t p = { 0 };

	if (!props)
		return net_make_vdevice_v12(d, NULL);
	p.ndevs = props->ndevs;
	memcpy(p.devs, props->devs, sizeof(props->devs));
	return net_make_vdevice_v12(d, &p);
}

ncclResult_t net_finalize(void *ctx)
{
	struct net_ctx *c = ctx;
	ncclResult_t rc;
	int abandoned;

	/* 2.28.9 also calls this after a failed init, with a NULL context. */
	if (!ctx)
		return ncclSuccess;
	if (registry_take(ctx, OBJ_CTX, "finalize"))
		return ncclInternalError;
	abandoned = c->path->abandon(ctx);
	if (abandoned)
		LOG_INFO("NET/symmem: finalize freed %d connect(s) NCCL left unfinished", abandoned);
	rc = c->path->finalize(c);
	registry_retire(ctx);
	monitor_finalize();
	notes_context_closed();
	return rc;
}
