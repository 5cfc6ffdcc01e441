/* The inner net plugin as a path (path.h): NCCL sees the inner plugin's
 * devices, every listen listens on both the inner plugin and this
 * plugin's transport, the handle tells connect whether the listener is on
 * this host (the copy engines, path_local) or not (the inner plugin), and
 * each comm made is on the one path that carries it.  The calls
 * themselves go through inner_net.c, which forwards them. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "devices.h"
#include "inner_dial.h"
#include "inner_form.h"
#include "inner_net.h"
#include "log.h"
#include "net.h"
#include "path.h"
#include "recv_group.h"
#include "symmem.h"
#include "transport.h"

/* The inner plugin's handle takes the front of NCCL's 128 bytes (vendors
 * use up to 80) and this plugin's part (inner_form.h) the rest. */
#define INNER_ROOM (NCCL_NET_HANDLE_MAXSIZE - INNER_FORM_SIZE)

struct inner_listen {
	struct net_listen base;
	struct tp_listener *tp;		/* this host's */
	void *inner;			/* the inner plugin's listen comm */
	struct live_listener *live;	/* NULL: no liveness check (no IPv4) */
	uint8_t token[16];		/* the handle's: the connector proves it */
	struct live_peer peer;		/* fd -1 until a connector proved the token */
};

struct inner_path_comm {
	struct net_comm base;
	struct inner_comm inner;
};

/* NCCL v10 and older init once, without a context: the inner plugin's
 * context then serves every communicator and is never finalized. */
static pthread_mutex_t global_lock = PTHREAD_MUTEX_INITIALIZER;
static int global_live;
static void *global_ctx;

static void *ctx_of(const struct net_ctx *ctx)
{
	return ctx ? ctx->path_ctx : global_ctx;
}

static struct inner_comm *inner_of(struct net_comm *c)
{
	return &((struct inner_path_comm *)c)->inner;
}

/* ---- process ---------------------------------------------------------- */

/* A backend forced for every connection and an inner plugin for other
 * hosts cannot both hold: one WARN, and init fails. */
static int inner_refuses(const struct config *cfg)
{
	if (cfg->backend != CONFIG_BACKEND_TCP && cfg->backend != CONFIG_BACKEND_IB)
		return 0;
	LOG_WARN("NET/symmem: NCCL_SYMMEM_BACKEND=%s makes this plugin carry every connection "
		 "itself, but NCCL_SYMMEM_INNER_NET=%s hands those to other hosts to that plugin: "
		 "unset one of the two", cfg->backend == CONFIG_BACKEND_TCP ? "tcp" : "ib",
		 cfg->inner_net);
	return 1;
}

/* NCCL v10 and older: the inner plugin's init, once for the process. */
static ncclResult_t init_global(const struct config *cfg, ncclDebugLogger_t log,
				ncclProfilerCallback_t prof)
{
	ncclNetCommConfig_v11_t none = { .trafficClass = -1 };
	ncclResult_t rc = ncclSuccess;

	pthread_mutex_lock(&global_lock);
	if (!global_live) {
		rc = inner_init(cfg->inner_net, &global_ctx, 0, &none, log, prof);
		global_live = rc == ncclSuccess;
	}
	pthread_mutex_unlock(&global_lock);
	return rc;
}

static ncclResult_t path_init(const struct config *cfg, struct net_ctx *ctx, uint64_t comm_id,
			      ncclNetCommConfig_v11_t *config, ncclDebugLogger_t log,
			      ncclProfilerCallback_t prof)
{
	ncclResult_t rc;

	if (!ctx)
		return init_global(cfg, log, prof);
	rc = inner_init(cfg->inner_net, &ctx->path_ctx, comm_id, config, log, prof);
	ctx->path_live = rc == ncclSuccess;
	return rc;
}

static ncclResult_t path_finalize(struct net_ctx *ctx)
{
	return ctx->path_live ? inner_finalize(ctx->path_ctx) : ncclSuccess;
}

static void close_send_ic(void *ic)
{
	struct inner_comm tmp = { .comm = ic, .is_send = 1, .live = { .fd = -1 } };

	inner_close(&tmp);
}

/* Connects NCCL gave up on either path. */
static int path_abandon(const void *owner)
{
	return tp_connect_abandon(owner) + inner_connect_abandon(owner) +
	       inner_dial_abandon(owner, close_send_ic);
}

static uint64_t min_u64(uint64_t a, uint64_t b)
{
	return a < b ? a : b;
}

/* The inner plugin's device as NCCL sees it: the NIC's own place, speed,
 * identity, rail and plane, with what this plugin's path cannot do for a
 * peer on this host taken out, since NCCL may open such a channel on any
 * device: GPU memory (CUDA, DMA-BUF) only where the copy engines serve
 * it, registrations per comm, at most RECV_GROUP_MAX buffers per irecv
 * (the inner plugin's grouping, which this plugin's path takes where
 * NCCL gives it: recv_group.h), transfers of at most 1 GiB. */
static ncclResult_t path_get_properties(int dev, ncclNetProperties_v12_t *props)
{
	ncclResult_t rc = inner_get_properties(dev, props);

	if (rc != ncclSuccess)
		return rc;
	props->ptrSupport &= NCCL_PTR_HOST |
			     (devices_gpu_ptrs() ? NCCL_PTR_CUDA | NCCL_PTR_DMABUF : 0);
	props->regIsGlobal = 0;
	if (props->maxRecvs < 1)
		props->maxRecvs = 1;
	if (props->maxRecvs > RECV_GROUP_MAX)
		props->maxRecvs = RECV_GROUP_MAX;
	props->maxP2pBytes = min_u64(props->maxP2pBytes, MAX_TRANSFER_BYTES);
	props->maxCollBytes = min_u64(props->maxCollBytes, MAX_TRANSFER_BYTES);
	props->maxMultiRequestSize = 1;
	return ncclSuccess;
}

/* That connection may be the inner plugin's: it gets every hint too. */
static ncclResult_t path_set_net_attr(struct net_ctx *ctx, ncclNetAttr_v11_t *attr)
{
	return inner_set_net_attr(ctx_of(ctx), attr);
}

/* ---- setup ------------------------------------------------------------ */

/* A liveness listener, or none: the connections then go unchecked
 * (one WARN per process says why) rather than not at all, since the
 * inner plugin may need no TCP (NCCL_SOCKET_IFNAME set for another
 * purpose, say). */
static void live_listen_or_none(const struct config *cfg, struct live_listener **out,
				uint8_t addr[4], uint16_t *port)
{
	static atomic_int said;
	int rc = live_listen(cfg->socket_ifname, out, addr, port);

	if (!rc)
		return;
	*out = NULL;
	*port = 0;
	memset(addr, 0, 4);
	if (!atomic_exchange(&said, 1))
		log_fail(rc, "listen (no liveness listener: connections through the inner net "
			 "plugin go without a check of their peer process)");
}

/* The connector may be on either path: listen on both, the inner
 * plugin's handle first, this plugin's part after it. */
static ncclResult_t path_listen(const struct config *cfg, struct net_ctx *ctx, int dev,
				void *handle, struct net_listen **out)
{
	struct inner_listen *l = calloc(1, sizeof(*l));
	uint8_t local[TP_HANDLE_SIZE] = { 0 }, addr[4];
	struct tp_handle_info info;
	uint16_t port = 0;
	ncclResult_t r;
	int rc;

	*out = NULL;
	if (!l) {
		LOG_WARN("NET/symmem: out of memory in listen");
		return ncclSystemError;
	}
	l->peer.fd = -1;
	r = inner_listen(ctx_of(ctx), dev, handle, INNER_ROOM, &l->inner);
	if (r != ncclSuccess) {
		free(l);
		return r;
	}
	rc = local_listen(cfg, 1, dev, local, &l->tp);
	if (!rc)
		live_listen_or_none(cfg, &l->live, addr, &port);
	if (!rc)
		rc = inner_form_encode(local, addr, port, (uint8_t *)handle + INNER_ROOM);
	if (!rc)
		rc = tp_handle_decode(local, &info);
	if (rc) {
		live_close_listener(l->live);
		if (l->tp)
			tp_close_listener(l->tp);
		inner_close_listen(l->inner);
		free(l);
		return log_fail(rc, "listen");
	}
	memcpy(l->token, info.token, 16);
	l->base.path = &path_inner;
	l->base.dev = dev;
	*out = &l->base;
	return ncclSuccess;
}

/* The inner plugin's connection as a comm of this path, with what
 * watches its peer (`w`: the liveness connection or its setup, taken);
 * NULL after one WARN (the connection closed) when out of memory. */
static ncclResult_t adopt(void *ic, int dev, int is_send, struct inner_comm *w,
			  struct net_comm **out)
{
	struct inner_path_comm *c = calloc(1, sizeof(*c));
	const struct config *cfg = config_get();

	*out = NULL;
	w->comm = ic;
	w->is_send = is_send;
	if (!c) {
		inner_close(w);
		LOG_WARN("NET/symmem: out of memory while finishing a connection");
		return ncclSystemError;
	}
	c->base.path = &path_inner;
	c->base.dev = dev;
	c->base.is_send = is_send;
	c->inner = *w;
	c->inner.nccl = c;
	c->inner.stall_ns = cfg && cfg->stall_report > 0 ?
				    (uint64_t)(cfg->stall_report * 1e9) : 0;
	*out = &c->base;
	return ncclSuccess;
}

/* The connect to another host gave up: what it held is closed. */
static ncclResult_t dial_failed(struct inner_dial *d, ncclResult_t r)
{
	if (d->ic)
		close_send_ic(d->ic);
	d->ic = NULL;
	inner_dial_put(d);
	return r;
}

/* Another host's listener: the inner plugin's connect, with the liveness
 * connection started beside it.  The comm is NCCL's as soon as the inner
 * plugin's is: the listener's thread may be away for longer than any
 * bound (its proxy serves other work), so the liveness connection's
 * setup is finished while this comm's tests wait (inner_watch.c). */
static ncclResult_t connect_remote(const struct config *cfg, struct net_ctx *ctx, int dev,
				   void *handle, const struct inner_form *f, struct net_comm **out,
				   ncclNetDeviceHandle_t **dev_comm)
{
	struct inner_dial *d = inner_dial_get(f->local.token, ctx);
	struct inner_comm w = { .live = { .fd = -1 } };
	ncclResult_t r;
	int rc;

	if (!d) {
		LOG_WARN("NET/symmem: out of memory in connect");
		return ncclSystemError;
	}
	if (f->live_port && !d->dial) {
		rc = live_dial_start(f->live_addr, f->live_port, f->local.token, &d->dial);
		if (rc)
			return dial_failed(d, log_fail(rc, "connect (liveness connection)"));
	}
	r = inner_connect(ctx_of(ctx), dev, handle, INNER_ROOM, f->local.token, ctx,
			  cfg->connect_timeout, &d->ic, dev_comm);
	if (r != ncclSuccess)
		return dial_failed(d, r);
	if (d->dial) {
		rc = live_dial_step(d->dial, &w.live);
		/* The hello goes before NCCL gets the comm, so that the
		 * listener knows this process even if it dies at once; only
		 * the kernels take part (TCP's handshake, a socket buffer). */
		while (d->ic && rc == 0 && !live_dial_sent(d->dial) &&
		       sm_now_ns() - d->since_ns < (uint64_t)(cfg->connect_timeout * 1e9)) {
			usleep(100);
			rc = live_dial_step(d->dial, &w.live);
		}
		if (rc == 0 && d->ic && !live_dial_sent(d->dial))
			rc = sm_fail(SM_ERR_REMOTE, "no TCP connection to %u.%u.%u.%u port %u within "
				     "%.1f s (NCCL_SYMMEM_CONNECT_TIMEOUT; a firewall between the "
				     "hosts?)", f->live_addr[0], f->live_addr[1], f->live_addr[2],
				     f->live_addr[3], f->live_port, cfg->connect_timeout);
		if (rc < 0)
			return dial_failed(d, log_fail(rc, "connect (liveness connection)"));
		if (rc == 1) {
			live_dial_free(d->dial);
			d->dial = NULL;
		}
	}
	if (!d->ic) {
		d->peer = w.live;	/* proven before the inner plugin was done */
		return ncclSuccess;
	}
	if (w.live.fd < 0)
		w.live = d->peer;
	d->peer.fd = -1;
	if (w.live.fd < 0) {
		/* For log lines until the peer says so itself. */
		w.live.pid = f->local.pid;
		snprintf(w.live.host, sizeof(w.live.host), "%u.%u.%u.%u", f->live_addr[0],
			 f->live_addr[1], f->live_addr[2], f->live_addr[3]);
	}
	w.dial = d->dial;
	d->dial = NULL;
	r = adopt(d->ic, dev, 1, &w, out);
	d->ic = NULL;
	inner_dial_put(d);
	return r;
}

/* The listener on this host takes this plugin's local form (a copy will
 * do: its connect state is keyed by the token), one elsewhere the inner
 * plugin, which gets NCCL's buffer itself. */
static ncclResult_t path_connect(const struct config *cfg, struct net_ctx *ctx, int dev,
				 void *handle, struct net_comm **out,
				 ncclNetDeviceHandle_t **dev_comm)
{
	uint8_t local[TP_HANDLE_SIZE];
	struct inner_form f;
	int rc;

	*out = NULL;
	rc = inner_form_decode((uint8_t *)handle + INNER_ROOM, &f);
	if (rc)
		return log_fail(rc, "connect: the handle's part of this plugin (does every rank "
				"set the same NCCL_SYMMEM_INNER_NET?)");
	if (f.local.host_id != tp_host_id())
		return connect_remote(cfg, ctx, dev, handle, &f, out, dev_comm);
	/* The same bytes every call, as tp_connect needs. */
	tp_handle_encode(&f.local, local);
	return local_connect(cfg, 1, ctx, dev, local, out);
}

/* The inner plugin's connection from another host, with the liveness
 * listener (and the connector's proof, where it came already): the
 * setup is finished while the comm's tests wait (inner_watch.c). */
static ncclResult_t accept_remote(struct inner_listen *l, void *ic, struct net_comm **out)
{
	struct inner_comm w = { .live = { .fd = -1 } };

	/* A failure here is the setup's to retry while tests wait. */
	if (l->live)
		(void)live_accept(l->live, l->token, &l->peer);
	w.live = l->peer;
	l->peer.fd = -1;
	if (w.live.fd < 0 && l->live) {
		w.lis = l->live;
		l->live = NULL;
		memcpy(w.token, l->token, 16);
	}
	return adopt(ic, l->base.dev, 0, &w, out);
}

/* Both paths, this host's first; only one connector comes.  This host's
 * listener bounds the wait (NCCL_SYMMEM_CONNECT_TIMEOUT), but only once
 * the inner plugin was asked too: its connector may have come while
 * NCCL's thread was away past that bound. */
static ncclResult_t path_accept(struct net_listen *base, struct net_comm **out,
				ncclNetDeviceHandle_t **dev_comm)
{
	struct inner_listen *l = (struct inner_listen *)base;
	struct tp_comm *tp;
	void *ic = NULL;
	ncclResult_t r;
	int rc;

	*out = NULL;
	rc = tp_accept(l->tp, &tp);
	if (tp)
		return local_adopt(tp, base->dev, 0, 1, out);
	r = inner_accept(l->inner, &ic, dev_comm);
	if (r != ncclSuccess)
		return r;
	if (ic)
		return accept_remote(l, ic, out);
	if (rc)
		return log_fail(rc, "accept on this host's path (the inner net plugin had no "
				"connection either)");
	return ncclSuccess;
}

static ncclResult_t path_close_listen(struct net_listen *base)
{
	struct inner_listen *l = (struct inner_listen *)base;

	live_close(&l->peer, 0);
	live_close_listener(l->live);
	tp_close_listener(l->tp);
	return inner_close_listen(l->inner);
}

/* ---- one comm --------------------------------------------------------- */

static void path_opened(const struct config *cfg, struct net_comm *c)
{
	if (cfg && cfg->verbose)
		LOG_INFO("NET/symmem %s comm %p on device %d: inner net plugin %s, to another "
			 "host, %s connection", c->is_send ? "send" : "receive", (void *)c,
			 c->dev, inner_describe(), conn_kind_name(c->kind));
}

/* The inner plugin's registration, in a handle NCCL can give back to
 * either path's calls.  `fd` >= 0: NCCL's DMA-BUF, through regMrDmaBuf. */
static ncclResult_t path_reg(struct net_comm *c, void *data, size_t size, int type, int fd,
			     uint64_t offset, void **handle, const char *what)
{
	(void)what;
	return fd >= 0 ? inner_reg_mr_dma_buf(inner_of(c), data, size, type, offset, fd, handle) :
			 inner_reg_mr(inner_of(c), data, size, type, handle);
}

/* After an abort NCCL may close the comm before deregistering; the inner
 * plugin's close then freed what its comm held. */
static ncclResult_t path_dereg(struct net_comm *c, void *handle)
{
	return c ? inner_dereg_mr(inner_of(c), handle) : ncclSuccess;
}

static ncclResult_t path_get_device_mr(struct net_comm *c, void *handle, void **dptr_mhandle)
{
	return inner_get_device_mr(inner_of(c), handle, dptr_mhandle);
}

/* The inner plugin's mhandles behind NCCL's `n` (NULL stays NULL). */
static int inner_mhandles(int n, void **mhandles, void **out)
{
	if (n < 1 || n > NET_MAX_RECVS) {
		LOG_WARN("NET/symmem: a receive or flush of %d buffers; at most %d go through the "
			 "inner net plugin at once", n, NET_MAX_RECVS);
		return -1;
	}
	for (int i = 0; i < n; i++)
		out[i] = mhandles ? net_mr_handle(mhandles[i], &path_inner) : NULL;
	return 0;
}

static ncclResult_t path_isend(struct net_comm *c, void *data, size_t size, int tag,
			       void *mhandle, void *phandle, void **request)
{
	return inner_isend(inner_of(c), data, size, tag, net_mr_handle(mhandle, &path_inner),
			   phandle, request);
}

/* Grouped receives go through: only this plugin's path advertises 1. */
static ncclResult_t path_irecv(struct net_comm *c, int n, void **data, size_t *sizes, int *tags,
			       void **mhandles, void **phandles, void **request)
{
	void *imh[NET_MAX_RECVS];

	if (inner_mhandles(n, mhandles, imh)) {
		*request = NULL;
		return ncclInternalError;
	}
	return inner_irecv(inner_of(c), n, data, sizes, tags, mhandles ? imh : NULL, phandles,
			   request);
}

static ncclResult_t path_iflush(struct net_comm *c, int n, void **data, int *sizes,
				void **mhandles, void **request)
{
	void *imh[NET_MAX_RECVS];

	if (inner_mhandles(n, mhandles, imh))
		return ncclInternalError;
	return inner_iflush(inner_of(c), n, data, sizes, mhandles ? imh : NULL, request);
}

static ncclResult_t path_irecv_consumed(struct net_comm *c, int n, void *request)
{
	return inner_irecv_consumed(inner_of(c), n, request);
}

/* What the connection carried, as monitor_close says it for this
 * plugin's own. */
static void close_line(struct net_comm *c)
{
	const struct config *cfg = config_get();
	const struct inner_comm *ic = inner_of(c);

	if (!cfg || (!cfg->verbose && !cfg->monitor))
		return;
	LOG_INFO("NET/symmem %s comm %p on device %d closed: %llu messages, %llu bytes through "
		 "inner net plugin %s", c->is_send ? "send" : "receive", (const void *)c, c->dev,
		 (unsigned long long)ic->messages, (unsigned long long)ic->bytes,
		 inner_describe());
}

static ncclResult_t path_close(struct net_comm *c, int quiet)
{
	if (!quiet)
		close_line(c);
	return inner_close(inner_of(c));
}

const struct net_path path_inner = {
	.name = "inner",
	.between_hosts = "the inner net plugin",
	.own_remote = 0,
	.refuses = inner_refuses,
	.init = path_init,
	.finalize = path_finalize,
	.abandon = path_abandon,
	.device_count = inner_device_count,
	.devices = inner_devices,
	.get_properties = path_get_properties,
	.make_vdevice = inner_make_vdevice,
	.set_net_attr = path_set_net_attr,
	.listen = path_listen,
	.connect = path_connect,
	.accept = path_accept,
	.close_listen = path_close_listen,
	.opened = path_opened,
	.reg = path_reg,
	.dereg = path_dereg,
	.get_device_mr = path_get_device_mr,
	.isend = path_isend,
	.irecv = path_irecv,
	.iflush = path_iflush,
	.irecv_consumed = path_irecv_consumed,
	.close = path_close,
	.owns_request = inner_owns_request,
	.test = inner_test,
};
