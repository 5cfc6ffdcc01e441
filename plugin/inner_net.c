/* Forwarding to the inner net plugin: each call passed on as NCCL would
 * make it, its requests wrapped (inner_req.c), every failure one WARN
 * naming the plugin and the call, with the plugin's own error code. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "inner_internal.h"
#include "log.h"
#include "symmem.h"

#define MAX_RECVS 64

static atomic_int ndev;
static atomic_int announced;
static pthread_mutex_t desc_lock = PTHREAD_MUTEX_INITIALIZER;
static char desc[320];

/* The library, loaded while a context or a comm of it lives. */
static const struct inner_lib *L(void)
{
	return inner_lib_current();
}

/* Written on each load, not in between: a plugin's lines read it. */
static void set_desc(const struct inner_lib *l)
{
	char d[sizeof(desc)];

	snprintf(d, sizeof(d), "'%s' (v%d)", l->name, l->version);
	pthread_mutex_lock(&desc_lock);
	if (strcmp(d, desc) != 0)
		memcpy(desc, d, sizeof(d));
	pthread_mutex_unlock(&desc_lock);
}

static ncclResult_t not_loaded(const char *what)
{
	LOG_WARN("NET/symmem: %s: no inner net plugin is loaded (called before init?)", what);
	return ncclInternalError;
}

const char *inner_describe(void)
{
	return desc;
}

static const char *result_name(ncclResult_t rc)
{
	static const char *const names[] = { "ncclSuccess", "ncclUnhandledCudaError",
					     "ncclSystemError", "ncclInternalError",
					     "ncclInvalidArgument", "ncclInvalidUsage",
					     "ncclRemoteError", "ncclInProgress" };

	return (unsigned)rc < sizeof(names) / sizeof(names[0]) ? names[rc] : "unknown";
}

static ncclResult_t fail(ncclResult_t rc, const char *what)
{
	LOG_WARN("NET/symmem: inner net plugin %s: %s failed: error %d (%s)", desc, what, rc,
		 result_name(rc));
	return rc;
}

/* NCCL needs a device; the copy-engine path and NCCL's proxy serve host
 * devices only, so a device-offload one (UNPACK) is refused here rather
 * than at its first connection. */
static ncclResult_t check_devices(const struct inner_lib *l)
{
	ncclNetProperties_v12_t p;
	ncclResult_t rc;
	int n = 0;

	rc = l->ops.devices(&n);
	if (rc != ncclSuccess)
		return fail(rc, "devices");
	if (n < 1) {
		LOG_WARN("NET/symmem: inner net plugin %s (%s) found no device; connections to "
			 "other hosts need one, so this plugin does not start", desc, l->path);
		return ncclSystemError;
	}
	for (int d = 0; d < n; d++) {
		rc = l->ops.getProperties(d, &p);
		if (rc != ncclSuccess)
			return fail(rc, "getProperties");
		if (p.netDeviceType != NCCL_NET_DEVICE_HOST) {
			LOG_WARN("NET/symmem: inner net plugin %s: device %d (%s) is a "
				 "device-offload device (type %d), which this plugin cannot "
				 "forward", desc, d,
				 p.name ? p.name : "?", (int)p.netDeviceType);
			return ncclInvalidUsage;
		}
	}
	atomic_store(&ndev, n);
	if (!atomic_exchange(&announced, 1))
		LOG_INFO("NET/symmem inner net plugin %s from %s: %d device(s); every connection "
			 "to another host goes through it, connections inside this host keep the "
			 "copy engines", desc, l->path, n);
	return ncclSuccess;
}

ncclResult_t inner_init(const char *spec, void **ictx, uint64_t commId,
			ncclNetCommConfig_v11_t *config, ncclDebugLogger_t log,
			ncclProfilerCallback_t prof)
{
	const struct inner_lib *l = inner_lib_get(spec);
	ncclResult_t rc;

	*ictx = NULL;
	if (!l)
		return ncclInvalidUsage;
	set_desc(l);
	rc = l->ops.init(ictx, commId, config, log, prof);
	if (rc != ncclSuccess) {
		LOG_WARN("NET/symmem: inner net plugin %s (%s) failed its init: error %d (%s); "
			 "connections to other hosts need it, so this plugin does not start", desc,
			 l->path, rc, result_name(rc));
		*ictx = NULL;
		inner_lib_put();
		return rc;
	}
	rc = check_devices(l);
	if (rc != ncclSuccess) {
		l->ops.finalize(*ictx);
		*ictx = NULL;
		inner_lib_put();
	}
	return rc;
}

ncclResult_t inner_finalize(void *ictx)
{
	ncclResult_t rc = L()->ops.finalize(ictx);

	if (rc != ncclSuccess)
		fail(rc, "finalize");
	inner_lib_put();
	return rc;
}

int inner_device_count(void)
{
	return atomic_load(&ndev);
}

ncclResult_t inner_devices(int *n)
{
	ncclResult_t rc;

	if (!L())
		return not_loaded("devices");
	rc = L()->ops.devices(n);
	if (rc != ncclSuccess)
		return fail(rc, "devices");
	atomic_store(&ndev, *n);
	return ncclSuccess;
}

ncclResult_t inner_get_properties(int dev, ncclNetProperties_v12_t *props)
{
	ncclResult_t rc;

	if (!L())
		return not_loaded("getProperties");
	rc = L()->ops.getProperties(dev, props);
	if (rc != ncclSuccess)
		return fail(rc, "getProperties");
	/* DMA-BUF without regMrDmaBuf to take it is no offer (NCCL's rule). */
	if (!L()->ops.regMrDmaBuf)
		props->ptrSupport &= ~NCCL_PTR_DMABUF;
	return ncclSuccess;
}

ncclResult_t inner_make_vdevice(int *d, ncclNetVDeviceProps_v12_t *props)
{
	const struct inner_lib *l = L();
	ncclResult_t rc;
	int n;

	if (!l)
		return not_loaded("makeVDevice");
	if (!l->ops.makeVDevice) {
		LOG_WARN("NET/symmem: makeVDevice: inner net plugin %s merges no devices", desc);
		return ncclInvalidUsage;
	}
	rc = l->ops.makeVDevice(d, props);
	if (rc != ncclSuccess)
		return fail(rc, "makeVDevice");
	/* The new device counts from now on, as NCCL will ask. */
	if (l->ops.devices(&n) == ncclSuccess)
		atomic_store(&ndev, n);
	return ncclSuccess;
}

ncclResult_t inner_set_net_attr(void *ictx, ncclNetAttr_v11_t *attr)
{
	const struct inner_lib *l = L();
	ncclResult_t rc;

	/* Before v11 NCCL gives no hints: nothing to pass on. */
	if (!l->ops.setNetAttr)
		return ncclSuccess;
	rc = l->ops.setNetAttr(ictx, attr);
	return rc == ncclSuccess ? rc : fail(rc, "setNetAttr");
}

/* ---- setup: the handle is shared with this plugin's own part -------- */

static size_t bytes_used(const uint8_t *h)
{
	size_t n = NCCL_NET_HANDLE_MAXSIZE;

	while (n > 0 && h[n - 1] == 0)
		n--;
	return n;
}

ncclResult_t inner_listen(void *ictx, int dev, void *handle, size_t room, void **listenComm)
{
	const struct inner_lib *l = L();
	ncclResult_t rc;
	size_t used;

	*listenComm = NULL;
	/* Zero, as NCCL hands it over: its bytes past `room` must stay so. */
	memset(handle, 0, NCCL_NET_HANDLE_MAXSIZE);
	rc = l->ops.listen(ictx, dev, handle, listenComm);
	if (rc != ncclSuccess)
		return fail(rc, "listen");
	if (!*listenComm) {
		LOG_WARN("NET/symmem: inner net plugin %s: listen on device %d returned no listen "
			 "comm", desc, dev);
		return ncclInternalError;
	}
	used = bytes_used(handle);
	if (used <= room)
		return ncclSuccess;
	l->ops.closeListen(*listenComm);
	*listenComm = NULL;
	LOG_WARN("NET/symmem: inner net plugin %s wrote %zu bytes of its connection handle; "
		 "beside this plugin's %d only %zu of NCCL's %d fit, so it cannot carry "
		 "connections to other hosts through this plugin", desc, used,
		 NCCL_NET_HANDLE_MAXSIZE - (int)room, room, NCCL_NET_HANDLE_MAXSIZE);
	return ncclInvalidUsage;
}

/* Connects in progress, by key: when each must be done. */
struct pending {
	struct pending *next;
	uint8_t key[16];
	const void *owner;
	uint64_t deadline_ns;
};

static pthread_mutex_t pending_lock = PTHREAD_MUTEX_INITIALIZER;
static struct pending *pending;

/* The deadline of connect `key`, from its first call; 0 when out of
 * memory.  Entries whose connect NCCL abandoned without a finalize go a
 * minute past their deadline. */
static uint64_t deadline_of(const uint8_t key[16], const void *owner, double timeout)
{
	uint64_t now = sm_now_ns(), d = 0;
	struct pending **pp = &pending, *p;

	pthread_mutex_lock(&pending_lock);
	while ((p = *pp)) {
		if (!memcmp(p->key, key, 16)) {
			d = p->deadline_ns;
			break;
		}
		if (now > p->deadline_ns + 60ull * 1000 * 1000 * 1000) {
			*pp = p->next;
			free(p);
			continue;
		}
		pp = &p->next;
	}
	if (!p && (p = calloc(1, sizeof(*p)))) {
		memcpy(p->key, key, 16);
		p->owner = owner;
		p->deadline_ns = d = now + (uint64_t)(timeout * 1e9);
		p->next = pending;
		pending = p;
	}
	pthread_mutex_unlock(&pending_lock);
	return d;
}

static void forget(const uint8_t key[16])
{
	struct pending **pp = &pending, *p;

	pthread_mutex_lock(&pending_lock);
	while ((p = *pp)) {
		if (!memcmp(p->key, key, 16)) {
			*pp = p->next;
			free(p);
			break;
		}
		pp = &p->next;
	}
	pthread_mutex_unlock(&pending_lock);
}

int inner_connect_abandon(const void *owner)
{
	struct pending **pp = &pending, *p;
	int n = 0;

	pthread_mutex_lock(&pending_lock);
	while ((p = *pp)) {
		if (p->owner == owner) {
			*pp = p->next;
			free(p);
			n++;
			continue;
		}
		pp = &p->next;
	}
	pthread_mutex_unlock(&pending_lock);
	return n;
}

static ncclResult_t connect_once(const struct inner_lib *l, void *ictx, int dev, void *handle,
				 size_t room, void **sendComm, ncclNetDeviceHandle_t **sendDevComm)
{
	uint8_t *h = handle, ours[NCCL_NET_HANDLE_MAXSIZE];
	size_t tail = NCCL_NET_HANDLE_MAXSIZE - room;
	ncclResult_t rc;

	memcpy(ours, h + room, tail);
	/* NCCL's own buffer, every call: the plugin may keep its connect
	 * state in the handle between calls. */
	rc = l->ops.connect(ictx, dev, handle, sendComm, sendDevComm);
	if (memcmp(ours, h + room, tail) != 0) {
		if (*sendComm)
			l->ops.closeSend(*sendComm);
		*sendComm = NULL;
		LOG_WARN("NET/symmem: inner net plugin %s wrote past byte %zu of its connection "
			 "handle while connecting; only %zu of NCCL's %d fit beside this "
			 "plugin's %zu", desc, room, room, NCCL_NET_HANDLE_MAXSIZE, tail);
		return ncclInvalidUsage;
	}
	if (rc == ncclSuccess)
		return rc;
	/* Not NCCL's to close: it never saw this comm. */
	if (*sendComm)
		l->ops.closeSend(*sendComm);
	*sendComm = NULL;
	return fail(rc, "connect");
}

ncclResult_t inner_connect(void *ictx, int dev, void *handle, size_t room, const uint8_t key[16],
			   const void *owner, double timeout, void **sendComm,
			   ncclNetDeviceHandle_t **sendDevComm)
{
	uint64_t deadline = deadline_of(key, owner, timeout);
	ncclResult_t rc;

	*sendComm = NULL;
	if (!deadline) {
		LOG_WARN("NET/symmem: out of memory in connect");
		return ncclSystemError;
	}
	if (sm_now_ns() > deadline) {
		forget(key);
		LOG_WARN("NET/symmem: inner net plugin %s did not connect within %.1f s "
			 "(NCCL_SYMMEM_CONNECT_TIMEOUT)", desc, timeout);
		return ncclRemoteError;
	}
	rc = connect_once(L(), ictx, dev, handle, room, sendComm, sendDevComm);
	if (rc != ncclSuccess || *sendComm)
		forget(key);
	return rc;
}

ncclResult_t inner_accept(void *listenComm, void **recvComm, ncclNetDeviceHandle_t **recvDevComm)
{
	ncclResult_t rc = L()->ops.accept(listenComm, recvComm, recvDevComm);

	return rc == ncclSuccess ? rc : fail(rc, "accept");
}

ncclResult_t inner_close_listen(void *listenComm)
{
	ncclResult_t rc = L()->ops.closeListen(listenComm);

	return rc == ncclSuccess ? rc : fail(rc, "closeListen");
}

/* ---- registration --------------------------------------------------- */

ncclResult_t inner_reg_mr(struct inner_comm *c, void *data, size_t size, int type,
			  void **mhandle)
{
	ncclResult_t rc = L()->ops.regMr(c->comm, data, size, type, mhandle);

	return rc == ncclSuccess ? rc : fail(rc, "regMr");
}

ncclResult_t inner_reg_mr_dma_buf(struct inner_comm *c, void *data, size_t size, int type,
				  uint64_t offset, int fd, void **mhandle)
{
	const struct inner_lib *l = L();
	ncclResult_t rc;

	if (!l->ops.regMrDmaBuf) {
		LOG_WARN("NET/symmem: regMrDmaBuf: inner net plugin %s registers no DMA-BUF", desc);
		return ncclInvalidUsage;
	}
	rc = l->ops.regMrDmaBuf(c->comm, data, size, type, offset, fd, mhandle);
	return rc == ncclSuccess ? rc : fail(rc, "regMrDmaBuf");
}

ncclResult_t inner_dereg_mr(struct inner_comm *c, void *mhandle)
{
	ncclResult_t rc = L()->ops.deregMr(c->comm, mhandle);

	return rc == ncclSuccess ? rc : fail(rc, "deregMr");
}

ncclResult_t inner_get_device_mr(struct inner_comm *c, void *mhandle, void **dptr_mhandle)
{
	const struct inner_lib *l = L();
	ncclResult_t rc;

	/* Only device-offload plugins have device handles. */
	if (!l->ops.getDeviceMr) {
		*dptr_mhandle = NULL;
		return ncclSuccess;
	}
	rc = l->ops.getDeviceMr(c->comm, mhandle, dptr_mhandle);
	return rc == ncclSuccess ? rc : fail(rc, "getDeviceMr");
}

/* ---- data path ------------------------------------------------------ */

static ncclResult_t no_wrapper(void)
{
	LOG_WARN("NET/symmem: out of memory for a request through inner net plugin %s "
		 "(or more than 262144 in flight)", desc);
	return ncclSystemError;
}

/* The inner plugin's request `r` (or none yet) into NCCL's slot. */
static ncclResult_t posted(struct inner_req *w, ncclResult_t rc, void *r, const char *what,
			   void **request)
{
	if (rc != ncclSuccess || !r) {
		inner_req_put(w);
		return rc == ncclSuccess ? rc : fail(rc, what);
	}
	w->req = r;
	w->comm->inflight++;
	*request = w;
	return ncclSuccess;
}

ncclResult_t inner_isend(struct inner_comm *c, void *data, size_t size, int tag, void *mhandle,
			 void *phandle, void **request)
{
	struct inner_req *w;
	void *r = NULL;
	ncclResult_t rc;

	*request = NULL;
	if (c->dead)
		return ncclRemoteError;
	w = inner_req_get(c, INNER_REQ_SEND);
	if (!w)
		return no_wrapper();
	w->size = size;
	rc = L()->ops.isend(c->comm, data, size, tag, mhandle, phandle, &r);
	return posted(w, rc, r, "isend", request);
}

ncclResult_t inner_irecv(struct inner_comm *c, int n, void **data, size_t *sizes, int *tags,
			 void **mhandles, void **phandles, void **request)
{
	struct inner_req *w;
	/* NCCL's optional-completion hint goes on to the plugin. */
	void *r = *request == (void *)NCCL_NET_OPTIONAL_RECV_COMPLETION ? *request : NULL;
	ncclResult_t rc;

	*request = NULL;
	if (c->dead)
		return ncclRemoteError;
	w = inner_req_get(c, INNER_REQ_RECV);
	if (!w)
		return no_wrapper();
	w->n = n;
	rc = L()->ops.irecv(c->comm, n, data, sizes, tags, mhandles, phandles, &r);
	return posted(w, rc, r, "irecv", request);
}

ncclResult_t inner_iflush(struct inner_comm *c, int n, void **data, int *sizes, void **mhandles,
			  void **request)
{
	struct inner_req *w = inner_req_get(c, INNER_REQ_FLUSH);
	void *r = NULL;
	ncclResult_t rc;

	*request = NULL;
	if (!w)
		return no_wrapper();
	rc = L()->ops.iflush(c->comm, n, data, sizes, mhandles, &r);
	return posted(w, rc, r, "iflush", request);
}

int inner_owns_request(const void *request)
{
	return inner_req_owned(request);
}

static void count_done(const struct inner_req *w, const int *sizes)
{
	w->comm->messages += w->kind != INNER_REQ_FLUSH;
	if (w->kind == INNER_REQ_SEND)
		w->comm->bytes += w->size;
	else if (w->kind == INNER_REQ_RECV && sizes)
		for (int i = 0; i < w->n && i < MAX_RECVS; i++)
			w->comm->bytes += (uint64_t)(sizes[i] > 0 ? sizes[i] : 0);
}

ncclResult_t inner_test(void *request, int *done, int *sizes)
{
	const struct inner_lib *l = L();
	struct inner_req *w = request;
	ncclResult_t rc;

	if (!w->comm || w->done) {
		LOG_WARN("NET/symmem: test on request %p, which is not in flight through inner net "
			 "plugin %s (tested after it was done?)", request, desc);
		return ncclInternalError;
	}
	/* Left with the inner plugin, which may never give it back. */
	if (w->comm->dead)
		return ncclRemoteError;
	rc = l->ops.test(w->req, done, sizes);
	if (rc != ncclSuccess) {
		w->comm->inflight--;
		inner_req_put(w);
		return fail(rc, "test");
	}
	if (!*done)
		return inner_watch_wait(w->comm);
	w->comm->inflight--;
	inner_watch_progress(w->comm);
	count_done(w, sizes);
	/* irecvConsumed will name it: kept until then. */
	if (w->kind == INNER_REQ_RECV && l->ops.irecvConsumed) {
		w->done = 1;
		return ncclSuccess;
	}
	inner_req_put(w);
	return ncclSuccess;
}

ncclResult_t inner_irecv_consumed(struct inner_comm *c, int n, void *request)
{
	const struct inner_lib *l = L();
	struct inner_req *w = request;
	ncclResult_t rc;

	/* Without one the wrapper went back at test(): `request` may be
	 * another's now and is not read. */
	if (!l->ops.irecvConsumed)
		return ncclSuccess;
	if (!inner_req_owned(w) || w->comm != c || !w->done || w->kind != INNER_REQ_RECV) {
		LOG_WARN("NET/symmem: irecvConsumed of %p, which is no completed receive of comm "
			 "%p through inner net plugin %s", request, (void *)c, desc);
		return ncclInternalError;
	}
	rc = l->ops.irecvConsumed(c->comm, n, w->req);
	inner_req_put(w);
	return rc == ncclSuccess ? rc : fail(rc, "irecvConsumed");
}

ncclResult_t inner_close(struct inner_comm *c)
{
	const struct inner_lib *l = L();
	ncclResult_t rc;

	if (inner_watch_dead_at_close(c)) {
		LOG_INFO("NET/symmem %s comm %p: peer process %d on %s died with %d requests in "
			 "flight; inner net plugin %s's comm is left to this process's exit, its "
			 "close could wait for them forever", c->is_send ? "send" : "receive",
			 c->nccl, c->live.pid, c->live.host, c->inflight, desc);
		live_close(&c->live, 0);
		inner_watch_free(c);
		inner_req_drop(c);
		return ncclSuccess;
	}
	inner_watch_close(c);
	rc = c->is_send ? l->ops.closeSend(c->comm) : l->ops.closeRecv(c->comm);
	inner_req_drop(c);
	return rc == ncclSuccess ? rc : fail(rc, c->is_send ? "closeSend" : "closeRecv");
}
