/* This plugin's own transport as a path (path.h): every connection made,
 * registered and moved by transport/, each failure one WARN through
 * log_fail.  The inner path builds on it for connections inside the host
 * (local_listen, local_connect, local_adopt). */
#include <stdlib.h>
#include <string.h>

#include "devices.h"
#include "helper_path.h"
#include "log.h"
#include "monitor.h"
#include "notes.h"
#include "path.h"
#include "recv_group.h"
#include "transport.h"

struct local_listen {
	struct net_listen base;
	struct tp_listener *tp;
};

struct local_comm {
	struct net_comm base;
	struct tp_comm *tp;
	struct monitor_state mon;
	struct recv_group *partial;	/* a grouped receive the transport took part of */
	int groups;			/* takes grouped receives: beside an inner plugin */
};

/* `beside`: an inner plugin takes every other host, so this plugin's own
 * connections stay inside this one. */
static void transport_options(const struct config *cfg, int beside, struct tp_options *opt)
{
	int gpu_path = devices_gpu_path();

	memset(opt, 0, sizeof(*opt));
	opt->backend = cfg->backend == CONFIG_BACKEND_TCP ? TP_BACKEND_TCP :
		       cfg->backend == CONFIG_BACKEND_SHM ? TP_BACKEND_SHM :
		       cfg->backend == CONFIG_BACKEND_IB ? TP_BACKEND_IB : TP_BACKEND_AUTO;
	if (beside)
		opt->backend = TP_BACKEND_SHM;
	opt->ring_size = cfg->host_ring_size;
	opt->chunk_size = cfg->chunk_size;
	opt->connect_timeout = cfg->connect_timeout;
	opt->ifname = cfg->socket_ifname;
	opt->ib = beside ? 0 : config_ib_mode(cfg);
	opt->ib_hca = cfg->ib_hca;
	opt->ib_gid_index = cfg->ib_gid_index;
	opt->ib_timeout = cfg->ib_timeout;
	opt->ib_retry = cfg->ib_retry;
	opt->ib_sl = cfg->ib_sl;
	opt->ib_tc = cfg->ib_tc;
	opt->copy_streams = cfg->streams;
	opt->split_min = cfg->split_min;
	opt->copy_depth = cfg->copy_depth;
	opt->merge_max = cfg->merge_max;
	opt->batch = cfg->batch;
	opt->phase_ns = (uint64_t)cfg->phase_us * 1000;
	opt->landing = cfg->landing_words;
	opt->stall_report = cfg->stall_report;
	opt->copy_timeout = cfg->copy_timeout;
	opt->trace_ns = (uint64_t)cfg->trace_us * 1000;
	opt->gpu = gpu_path;
	opt->no_direct = !cfg->direct_path;
	opt->copy_helper = gpu_path ? helper_path_find(cfg) : NULL;
	opt->helper_all_gpus = cfg->helper_all_gpus && cfg->ngpus_visible;
	opt->verbose = cfg->verbose;
	opt->zero_copy = cfg->zero_copy;
	opt->host_in_place = cfg->host_in_place;
	opt->fault_tolerance = cfg->fault_tolerance;
	/* Only when asked for: NCCL's "auto" keeps the measured memfd path. */
	opt->cumem_host = cfg->cumem_host_enable == CONFIG_ON;
	opt->pool.initial = cfg->pool_size;
	opt->pool.prealloc = cfg->pool_prealloc;
	opt->pool.growth = cfg->pool_growth;
	opt->pool.max = cfg->pool_max;
	opt->pool.trim = cfg->pool_trim;
	/* Like NCCL's own buffers: no cuMem with NCCL_CUMEM_ENABLE=0. */
	opt->pool.legacy = cfg->cumem_enable == CONFIG_OFF;
}

/* ---- setup ------------------------------------------------------------ */

int local_listen(const struct config *cfg, int beside, int dev, void *handle,
		 struct tp_listener **out)
{
	uint8_t full[TP_HANDLE_SIZE];
	struct tp_options opt;
	int rc;

	dev = devices_local(dev);
	transport_options(cfg, beside, &opt);
	opt.gpu_pci = devices_pci(dev);
	if (!beside)
		return tp_listen(&opt, dev, handle, out);
	rc = tp_listen(&opt, dev, full, out);
	if (!rc)
		rc = tp_handle_shrink(full, handle);
	if (rc && *out) {
		tp_close_listener(*out);
		*out = NULL;
	}
	return rc;
}

ncclResult_t local_adopt(struct tp_comm *tp, int dev, int is_send, int beside,
			 struct net_comm **out)
{
	struct local_comm *c = calloc(1, sizeof(*c));

	*out = NULL;
	if (!c) {
		tp_close(tp);
		LOG_WARN("NET/symmem: out of memory while finishing a connection");
		return ncclSystemError;
	}
	c->base.path = &path_local;
	c->base.dev = dev;
	c->base.is_send = is_send;
	c->tp = tp;
	c->groups = beside;
	*out = &c->base;
	return ncclSuccess;
}

ncclResult_t local_connect(const struct config *cfg, int beside, struct net_ctx *ctx, int dev,
			   void *handle, struct net_comm **out)
{
	struct tp_options opt;
	struct tp_comm *tp;
	int rc;

	*out = NULL;
	transport_options(cfg, beside, &opt);
	opt.dev = devices_local(dev);
	opt.gpu_pci = devices_pci(opt.dev);
	opt.owner = ctx;	/* NULL through the v9/v10 tables, which have no finalize */
	rc = tp_connect(&opt, handle, &tp);
	if (rc)
		return log_fail(rc, "connect");
	if (!tp)
		return ncclSuccess;
	return local_adopt(tp, dev, 1, beside, out);
}

static ncclResult_t listen_alone(const struct config *cfg, struct net_ctx *ctx, int dev,
				 void *handle, struct net_listen **out)
{
	struct local_listen *l = calloc(1, sizeof(*l));
	int rc;

	(void)ctx;
	*out = NULL;
	if (!l) {
		LOG_WARN("NET/symmem: out of memory in listen");
		return ncclSystemError;
	}
	rc = local_listen(cfg, 0, dev, handle, &l->tp);
	if (rc) {
		free(l);
		return log_fail(rc, "listen");
	}
	l->base.path = &path_local;
	l->base.dev = dev;
	*out = &l->base;
	return ncclSuccess;
}

static ncclResult_t connect_alone(const struct config *cfg, struct net_ctx *ctx, int dev,
				  void *handle, struct net_comm **out,
				  ncclNetDeviceHandle_t **dev_comm)
{
	/* This plugin's devices are HOST ones: no device handle. */
	(void)dev_comm;
	return local_connect(cfg, 0, ctx, dev, handle, out);
}

static ncclResult_t accept_alone(struct net_listen *base, struct net_comm **out,
				 ncclNetDeviceHandle_t **dev_comm)
{
	struct local_listen *l = (struct local_listen *)base;
	struct tp_comm *tp;
	int rc;

	(void)dev_comm;
	*out = NULL;
	rc = tp_accept(l->tp, &tp);
	if (tp)
		return local_adopt(tp, base->dev, 0, 0, out);
	return rc ? log_fail(rc, "accept") : ncclSuccess;
}

static ncclResult_t close_listen_alone(struct net_listen *base)
{
	tp_close_listener(((struct local_listen *)base)->tp);
	return ncclSuccess;
}

/* ---- one comm --------------------------------------------------------- */

static void local_opened(const struct config *cfg, struct net_comm *base)
{
	struct local_comm *c = (struct local_comm *)base;

	if (cfg)
		notes_rdma_passed_over(cfg, c->tp);
	monitor_open(&c->mon);
	if (cfg && cfg->verbose)
		LOG_INFO("NET/symmem %s comm %p on device %d: %s data path%s, %s connection",
			 base->is_send ? "send" : "receive", (void *)c, base->dev,
			 tp_comm_backend(c->tp),
			 devices_gpu_path() ? ", GPU buffers moved by copy engines" : ", host memory",
			 conn_kind_name(base->kind));
}

static ncclResult_t local_reg(struct net_comm *base, void *data, size_t size, int type, int fd,
			      uint64_t offset, void **handle, const char *what)
{
	struct local_comm *c = (struct local_comm *)base;
	struct tp_region *region;
	int rc, gpu_ok = devices_gpu_ptrs() || devices_dmabuf(devices_local(base->dev));

	if (type != NCCL_PTR_HOST && (type != NCCL_PTR_CUDA || !gpu_ok)) {
		LOG_WARN("NET/symmem: %s of memory type %d; device %d serves %s", what, type,
			 base->dev, gpu_ok ? "NCCL_PTR_HOST and NCCL_PTR_CUDA" :
					     "host memory only (NCCL_PTR_HOST)");
		return ncclInvalidArgument;
	}
	if (!data && size) {
		LOG_WARN("NET/symmem: %s of %zu bytes at NULL", what, size);
		return ncclInvalidArgument;
	}
	if (type == NCCL_PTR_CUDA && fd >= 0)
		rc = tp_register_dmabuf(c->tp, data, size, fd, offset, &region);
	else
		rc = tp_register(c->tp, data, size,
				 type == NCCL_PTR_CUDA ? TP_MEM_CUDA : TP_MEM_HOST, &region);
	if (rc)
		return log_fail(rc, what);
	*handle = region;
	return ncclSuccess;
}

static ncclResult_t local_dereg(struct net_comm *base, void *handle)
{
	tp_deregister(base ? ((struct local_comm *)base)->tp : NULL, handle);
	return ncclSuccess;
}

/* Only device-offload plugins have device handles for memory. */
static ncclResult_t local_get_device_mr(struct net_comm *c, void *handle, void **dptr_mhandle)
{
	(void)c;
	(void)handle;
	(void)dptr_mhandle;
	return ncclSuccess;
}

static ncclResult_t local_isend(struct net_comm *base, void *data, size_t size, int tag,
				void *mhandle, void *phandle, void **request)
{
	struct local_comm *c = (struct local_comm *)base;
	struct tp_req *r;
	int rc;

	(void)tag;
	(void)phandle;
	*request = NULL;
	if (size > MAX_TRANSFER_BYTES) {
		LOG_WARN("NET/symmem: isend of %zu bytes exceeds maxP2pBytes %llu", size,
			 MAX_TRANSFER_BYTES);
		return ncclInternalError;
	}
	rc = tp_isend(c->tp, data, size, net_mr_handle(mhandle, &path_local), &r);
	if (rc)
		return log_fail(rc, "isend");
	monitor_tick(&c->mon, c->tp, c, 1, base->dev);
	*request = r;
	return ncclSuccess;
}

/* What a grouped receive must be for this path (recv_group.h): 0, or
 * -1 after one WARN. */
static int group_refused(int n, const int *tags)
{
	if (n > RECV_GROUP_MAX) {
		LOG_WARN("NET/symmem: irecv of %d buffers on a connection inside this host; it "
			 "takes at most %d", n, RECV_GROUP_MAX);
		return -1;
	}
	for (int i = 1; i < n; i++) {
		if (tags[i] != tags[0]) {
			LOG_WARN("NET/symmem: irecv of %d buffers with different tags (%d, %d) on a "
				 "connection inside this host, which keeps only the order of "
				 "messages; NCCL groups such receives for PXN, which needs "
				 "NCCL_P2P_DISABLE unset", n, tags[0], tags[i]);
			return -1;
		}
	}
	return 0;
}

/* The buffers of `g` not posted yet, in order: 1 when all are, 0 when the
 * transport asks to be called again, -1 after one WARN. */
static int group_post(struct local_comm *c, struct recv_group *g, void **data,
		      size_t *sizes, void **mhandles)
{
	for (; g->posted < g->n; g->posted++) {
		int k = g->posted;
		int rc = tp_irecv(c->tp, data[k], sizes[k],
				  mhandles ? net_mr_handle(mhandles[k], &path_local) : NULL,
				  &g->req[k]);

		if (rc) {
			log_fail(rc, "irecv");
			return -1;
		}
		if (!g->req[k])
			return 0;
		monitor_tick(&c->mon, c->tp, c, 0, c->base.dev);
	}
	return 1;
}

/* Several buffers: posted one by one into a group, which NCCL gets once
 * all are; a transport that takes part of it now gets the rest when
 * NCCL asks again with the same buffers. */
static ncclResult_t group_irecv(struct local_comm *c, int n, void **data, size_t *sizes,
				int *tags, void **mhandles, void **request)
{
	struct recv_group *g = c->partial;
	int rc;

	if (g && (g->n != n || g->first != data[0])) {
		LOG_WARN("NET/symmem: irecv of %d buffers while one of %d, partly posted, waits "
			 "to be asked again", n, g->n);
		return ncclInternalError;
	}
	if (!g) {
		if (group_refused(n, tags))
			return ncclInternalError;
		g = recv_group_get();
		if (!g)
			return ncclSuccess;	/* all in flight: NCCL asks again */
		g->n = n;
		g->first = data[0];
	}
	rc = group_post(c, g, data, sizes, mhandles);
	c->partial = rc == 0 ? g : NULL;
	if (rc < 0) {
		recv_group_put(g);
		return ncclInternalError;
	}
	if (rc == 1)
		*request = g;
	return ncclSuccess;
}

static ncclResult_t local_irecv(struct net_comm *base, int n, void **data, size_t *sizes,
				int *tags, void **mhandles, void **phandles, void **request)
{
	struct local_comm *c = (struct local_comm *)base;
	struct tp_req *r;
	int rc;

	(void)phandles;
	/* Overwrite NCCL's optional-completion hint (0x1) on every path. */
	*request = NULL;
	for (int i = 0; i < n; i++) {
		if (sizes[i] > MAX_TRANSFER_BYTES) {
			LOG_WARN("NET/symmem: irecv of %zu bytes exceeds maxP2pBytes %llu",
				 sizes[i], MAX_TRANSFER_BYTES);
			return ncclInternalError;
		}
	}
	/* Alone, this plugin advertises one buffer (devices.c); beside an
	 * inner plugin, that plugin's grouping (path_inner.c). */
	if (n < 1 || (n > 1 && !c->groups)) {
		LOG_WARN("NET/symmem: irecv of %d buffers; this plugin advertises maxRecvs=1", n);
		return ncclInternalError;
	}
	if (n > 1 || c->partial)
		return group_irecv(c, n, data, sizes, tags, mhandles, request);
	rc = tp_irecv(c->tp, data[0], sizes[0],
		      mhandles ? net_mr_handle(mhandles[0], &path_local) : NULL, &r);
	if (rc)
		return log_fail(rc, "irecv");
	monitor_tick(&c->mon, c->tp, c, 0, base->dev);
	*request = r;
	return ncclSuccess;
}

/* Copy-engine writes and CPU copies are visible once test() says so. */
static ncclResult_t local_iflush(struct net_comm *c, int n, void **data, int *sizes,
				 void **mhandles, void **request)
{
	(void)c;
	(void)n;
	(void)data;
	(void)sizes;
	(void)mhandles;
	(void)request;
	return ncclSuccess;
}

static ncclResult_t local_irecv_consumed(struct net_comm *c, int n, void *request)
{
	(void)c;
	(void)n;
	(void)request;
	return ncclSuccess;
}

static ncclResult_t local_close(struct net_comm *base, int quiet)
{
	struct local_comm *c = (struct local_comm *)base;

	if (!quiet)
		monitor_close(&c->mon, c->tp, c, base->is_send, base->dev);
	if (c->partial)
		recv_group_put(c->partial);
	tp_close(c->tp);
	return ncclSuccess;
}

/* ---- requests --------------------------------------------------------- */

/* Every request that is not another path's. */
static int local_owns_request(const void *request)
{
	(void)request;
	return 1;
}

/* Done when every buffer is; each buffer's size as NCCL's IB plugin
 * gives them. */
static ncclResult_t group_test(struct recv_group *g, int *done, int *sizes)
{
	int left = 0;

	*done = 0;
	for (int i = 0; i < g->n; i++) {
		int d = 0, rc;

		if (!g->req[i])
			continue;
		rc = tp_test(g->req[i], &d, &g->size[i]);
		if (rc) {
			recv_group_put(g);
			return log_fail(rc, "test");
		}
		if (d)
			g->req[i] = NULL;
		left += !d;
	}
	if (left)
		return ncclSuccess;
	*done = 1;
	for (int i = 0; sizes && i < g->n; i++)
		sizes[i] = (int)g->size[i];
	recv_group_put(g);
	return ncclSuccess;
}

static ncclResult_t local_test(void *request, int *done, int *sizes)
{
	size_t size = 0;
	int rc;

	if (recv_group_owned(request))
		return group_test(request, done, sizes);
	rc = tp_test(request, done, &size);

	if (rc)
		return log_fail(rc, "test");
	if (*done && sizes)
		sizes[0] = (int)size;
	return ncclSuccess;
}

/* ---- process ---------------------------------------------------------- */

static int local_refuses(const struct config *cfg)
{
	(void)cfg;
	return 0;
}

static ncclResult_t local_init(const struct config *cfg, struct net_ctx *ctx, uint64_t comm_id,
			       ncclNetCommConfig_v11_t *config, ncclDebugLogger_t log,
			       ncclProfilerCallback_t prof)
{
	(void)cfg;
	(void)ctx;
	(void)comm_id;
	(void)config;
	(void)log;
	(void)prof;
	return ncclSuccess;
}

static ncclResult_t local_finalize(struct net_ctx *ctx)
{
	(void)ctx;
	return ncclSuccess;
}

static int local_abandon(const void *owner)
{
	return tp_connect_abandon(owner);
}

static ncclResult_t local_devices(int *ndev)
{
	*ndev = devices_count();
	return ncclSuccess;
}

static ncclResult_t local_get_properties(int dev, ncclNetProperties_v12_t *props)
{
	devices_properties(dev, props);
	return ncclSuccess;
}

/* NIC fusion is the inner plugin's; this plugin's own devices merge
 * with nothing. */
static ncclResult_t local_make_vdevice(int *d, ncclNetVDeviceProps_v12_t *props)
{
	(void)d;
	(void)props;
	LOG_WARN("NET/symmem: makeVDevice: this plugin's devices merge with none");
	return ncclInvalidUsage;
}

static ncclResult_t local_set_net_attr(struct net_ctx *ctx, ncclNetAttr_v11_t *attr)
{
	(void)ctx;
	(void)attr;
	return ncclSuccess;
}

const struct net_path path_local = {
	.name = "local",
	.between_hosts = "ibverbs or TCP (host memory)",
	.own_remote = 1,
	.refuses = local_refuses,
	.init = local_init,
	.finalize = local_finalize,
	.abandon = local_abandon,
	.device_count = devices_count,
	.devices = local_devices,
	.get_properties = local_get_properties,
	.make_vdevice = local_make_vdevice,
	.set_net_attr = local_set_net_attr,
	.listen = listen_alone,
	.connect = connect_alone,
	.accept = accept_alone,
	.close_listen = close_listen_alone,
	.opened = local_opened,
	.reg = local_reg,
	.dereg = local_dereg,
	.get_device_mr = local_get_device_mr,
	.isend = local_isend,
	.irecv = local_irecv,
	.iflush = local_iflush,
	.irecv_consumed = local_irecv_consumed,
	.close = local_close,
	.owns_request = local_owns_request,
	.test = local_test,
};
