/* Opening the inner net plugin and speaking its table's version.
 *
 * NCCL 2.19 to 2.30 plugins export ncclNetPlugin_v8 to _v12; the newest
 * one found is used, as NCCL itself does.  Whatever it is, the rest of the
 * module calls v12's functions: the older tables get small adapters here
 * that do what NCCL's own compatibility layer does for them (init once
 * per process, the per-communicator traffic class kept for connect, int
 * sizes checked, optional-completion hint cleared for v8, properties
 * given the defaults their layout lacks). */
#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "inner_internal.h"
#include "lib_path.h"
#include "log.h"
#include "net.h"

/* What NCCL's compatibility layer lets a v8 plugin move at once
 * (nccl-plugin-abi.md section 3.3), and the most receives one irecv
 * adapts. */
#define V8_MAX_SIZE (1ull << 30)
#define MAX_RECVS 64

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static void *lib;
static int refs;
static struct inner_lib loaded;
static const struct inner_lib *_Atomic current;	/* &loaded while refs > 0 */

/* The table as the library exports it; the adapters call through it. */
static union {
	const ncclNet_v12_t *v12;
	const ncclNet_v11_t *v11;
	const ncclNet_v10_t *v10;
	const ncclNet_v9_t *v9;
	const ncclNet_v8_t *v8;
} orig;

/* v8 to v10 init once per process; later communicators share it. */
static int once_done;
static ncclResult_t once_rc;

/* ---- the adapters --------------------------------------------------- */

/* Properties in v12's layout (net_props.c), whatever the table's. */
static ncclResult_t old_get_properties(int dev, ncclNetProperties_v12_t *props)
{
	union {
		ncclNetProperties_v11_t v11;
		ncclNetProperties_v10_t v10;
		ncclNetProperties_v8_t v8;
	} p;
	ncclResult_t rc;

	switch (loaded.version) {
	case 11:
		rc = orig.v11->getProperties(dev, &p.v11);
		break;
	case 10:
		rc = orig.v10->getProperties(dev, &p.v10);
		break;
	case 9:
		rc = orig.v9->getProperties(dev, &p.v10);
		break;
	default:
		rc = orig.v8->getProperties(dev, &p.v8);
		break;
	}
	if (rc != ncclSuccess)
		return rc;
	props_from_old(&p, loaded.version, dev, props);
	return ncclSuccess;
}

/* v9 to v11 merge at most 4 devices into one. */
static ncclResult_t v11_make_vdevice(int *d, ncclNetVDeviceProps_v12_t *props)
{
	ncclNetVDeviceProps_v11_t p = { .ndevs = props->ndevs };

	if (props->ndevs < 0 || props->ndevs > NCCL_NET_MAX_DEVS_PER_NIC) {
		LOG_WARN("NET/symmem: makeVDevice of %d devices; inner net plugin '%s' (v%d) "
			 "merges at most %d", props->ndevs, loaded.name, loaded.version,
			 NCCL_NET_MAX_DEVS_PER_NIC);
		return ncclInvalidArgument;
	}
	memcpy(p.devs, props->devs, sizeof(p.devs));
	switch (loaded.version) {
	case 11:
		return orig.v11->makeVDevice(d, &p);
	case 10:
		return orig.v10->makeVDevice(d, &p);
	default:
		return orig.v9->makeVDevice(d, &p);
	}
}

/* v10 keeps the communicator's traffic class for connect, as NCCL's
 * compatibility layer does. */
struct v10_ctx {
	ncclNetCommConfig_v11_t config;
};

static ncclResult_t old_init(void **ctx, uint64_t commId, ncclNetCommConfig_v11_t *config,
			     ncclDebugLogger_t log, ncclProfilerCallback_t prof)
{
	struct v10_ctx *c;

	ncclResult_t rc;

	(void)commId;
	*ctx = NULL;
	pthread_mutex_lock(&lock);
	if (!once_done) {
		once_rc = loaded.version == 10 ? orig.v10->init(log, prof) :
			  loaded.version == 9 ? orig.v9->init(log) : orig.v8->init(log);
		once_done = 1;
	}
	rc = once_rc;
	pthread_mutex_unlock(&lock);
	if (rc != ncclSuccess || loaded.version != 10)
		return rc;
	c = calloc(1, sizeof(*c));
	if (!c)
		return ncclSystemError;
	c->config.trafficClass = config ? config->trafficClass : -1;
	*ctx = c;
	return ncclSuccess;
}

static ncclResult_t old_finalize(void *ctx)
{
	free(ctx);
	return ncclSuccess;
}

static ncclResult_t old_listen(void *ctx, int dev, void *handle, void **listenComm)
{
	(void)ctx;
	return (loaded.version == 10 ? orig.v10->listen :
		loaded.version == 9 ? orig.v9->listen : orig.v8->listen)(dev, handle, listenComm);
}

static ncclResult_t v10_connect(void *ctx, int dev, void *handle, void **sendComm,
				ncclNetDeviceHandle_t **sendDevComm)
{
	struct v10_ctx *c = ctx;
	ncclNetCommConfig_v11_t none = { .trafficClass = -1 };

	return orig.v10->connect(dev, c ? &c->config : &none, handle, sendComm, sendDevComm);
}

static ncclResult_t v9_connect(void *ctx, int dev, void *handle, void **sendComm,
			       ncclNetDeviceHandle_t **sendDevComm)
{
	(void)ctx;
	return (loaded.version == 9 ? orig.v9->connect : orig.v8->connect)(dev, handle, sendComm,
									   sendDevComm);
}

static ncclResult_t v9_isend(void *sendComm, void *data, size_t size, int tag, void *mhandle,
			     void *phandle, void **request)
{
	(void)phandle;
	return orig.v9->isend(sendComm, data, size, tag, mhandle, request);
}

static ncclResult_t v9_irecv(void *recvComm, int n, void **data, size_t *sizes, int *tags,
			     void **mhandles, void **phandles, void **request)
{
	(void)phandles;
	return orig.v9->irecv(recvComm, n, data, sizes, tags, mhandles, request);
}

static ncclResult_t v8_isend(void *sendComm, void *data, size_t size, int tag, void *mhandle,
			     void *phandle, void **request)
{
	(void)phandle;
	*request = NULL;
	if (size > V8_MAX_SIZE) {
		LOG_WARN("NET/symmem: isend of %zu bytes; inner net plugin '%s' (v8) takes at most "
			 "%llu", size, loaded.name, V8_MAX_SIZE);
		return ncclInternalError;
	}
	return orig.v8->isend(sendComm, data, (int)size, tag, mhandle, request);
}

static ncclResult_t v8_irecv(void *recvComm, int n, void **data, size_t *sizes, int *tags,
			     void **mhandles, void **phandles, void **request)
{
	int isizes[MAX_RECVS];

	(void)phandles;
	/* v8 never saw the optional-completion hint: NCCL clears it too. */
	*request = NULL;
	if (n < 1 || n > MAX_RECVS) {
		LOG_WARN("NET/symmem: irecv of %d buffers through inner net plugin '%s' (v8)", n,
			 loaded.name);
		return ncclInternalError;
	}
	for (int i = 0; i < n; i++) {
		if (sizes[i] > V8_MAX_SIZE) {
			LOG_WARN("NET/symmem: irecv of %zu bytes; inner net plugin '%s' (v8) takes "
				 "at most %llu", sizes[i], loaded.name, V8_MAX_SIZE);
			return ncclInternalError;
		}
		isizes[i] = (int)sizes[i];
	}
	return orig.v8->irecv(recvComm, n, data, isizes, tags, mhandles, request);
}

/* The slots every version shares with v12, signatures and all. */
#define SHARED_SLOTS(ops, t)                                                                     \
	do {                                                                                      \
		(ops)->accept = (t)->accept;                                                      \
		(ops)->regMr = (t)->regMr;                                                        \
		(ops)->regMrDmaBuf = (t)->regMrDmaBuf;                                            \
		(ops)->deregMr = (t)->deregMr;                                                    \
		(ops)->iflush = (t)->iflush;                                                      \
		(ops)->test = (t)->test;                                                          \
		(ops)->closeSend = (t)->closeSend;                                                \
		(ops)->closeRecv = (t)->closeRecv;                                                \
		(ops)->closeListen = (t)->closeListen;                                            \
		(ops)->getDeviceMr = (t)->getDeviceMr;                                            \
		(ops)->irecvConsumed = (t)->irecvConsumed;                                        \
		(ops)->devices = (t)->devices;                                                    \
	} while (0)

static void adapt(ncclNet_v12_t *ops)
{
	memset(ops, 0, sizeof(*ops));
	switch (loaded.version) {
	case 12:
		*ops = *orig.v12;
		return;
	case 11:
		*ops = (ncclNet_v12_t){
			.init = orig.v11->init, .listen = orig.v11->listen,
			.connect = orig.v11->connect, .isend = orig.v11->isend,
			.irecv = orig.v11->irecv, .finalize = orig.v11->finalize,
			.setNetAttr = orig.v11->setNetAttr,
		};
		SHARED_SLOTS(ops, orig.v11);
		ops->getProperties = old_get_properties;
		ops->makeVDevice = orig.v11->makeVDevice ? v11_make_vdevice : NULL;
		return;
	case 10:
		SHARED_SLOTS(ops, orig.v10);
		ops->connect = v10_connect;
		ops->isend = orig.v10->isend;
		ops->irecv = orig.v10->irecv;
		ops->getProperties = old_get_properties;
		ops->makeVDevice = orig.v10->makeVDevice ? v11_make_vdevice : NULL;
		break;
	case 9:
		SHARED_SLOTS(ops, orig.v9);
		ops->connect = v9_connect;
		ops->isend = v9_isend;
		ops->irecv = v9_irecv;
		ops->getProperties = old_get_properties;
		ops->makeVDevice = orig.v9->makeVDevice ? v11_make_vdevice : NULL;
		break;
	default:
		SHARED_SLOTS(ops, orig.v8);
		ops->connect = v9_connect;
		ops->isend = v8_isend;
		ops->irecv = v8_irecv;
		ops->getProperties = old_get_properties;
		break;
	}
	ops->init = old_init;
	ops->finalize = old_finalize;
	ops->listen = old_listen;
}

/* ---- loading -------------------------------------------------------- */

static const char *loader_error(void)
{
	const char *e = dlerror();

	return e ? e : "unknown loader error";
}

/* One name as the loader finds it, checked first where the user chose
 * the file (a path, or a directory of LD_LIBRARY_PATH); the loader's
 * cache and system directories are root's.  *refused with `why` when
 * another user could have put the file there. */
static void *open_one(const char *name, char *why, size_t wlen, int *refused)
{
	char found[PATH_MAX], real[PATH_MAX];
	const char *path = name;
	void *h;

	if (!strchr(name, '/') && lib_path_search(name, found, sizeof(found)))
		path = found;
	if (strchr(path, '/')) {
		switch (lib_path_check(path, real, sizeof(real), why, wlen)) {
		case LIB_PATH_UNSAFE:
			*refused = 1;
			return NULL;
		case LIB_PATH_SAFE:
			path = real;	/* no link left to swap meanwhile */
			break;
		default:
			break;		/* missing: the loader says so */
		}
	}
	h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!h)
		snprintf(why, wlen, "%s", loader_error());
	return h;
}

/* As NCCL resolves NCCL_NET_PLUGIN: the value itself, then, for a bare
 * word that is not already lib*.so, libnccl-net-<value>.so.  `why` gets
 * each attempt's loader error, or the reason one was refused. */
static void *open_named(const char *spec, char *why, size_t wlen, int *refused)
{
	size_t n = strlen(spec), used;
	char alt[300];
	void *h;

	*refused = 0;
	h = open_one(spec, why, wlen, refused);
	if (h || *refused)
		return h;
	if (strchr(spec, '/') || (strncmp(spec, "lib", 3) == 0 && n >= 3 &&
				  strcmp(spec + n - 3, ".so") == 0))
		return NULL;
	snprintf(alt, sizeof(alt), "libnccl-net-%s.so", spec);
	used = strlen(why);
	if (used + 2 < wlen) {
		snprintf(why + used, wlen - used, "; ");
		used += 2;
	}
	h = open_one(alt, why + used, wlen - used, refused);
	if (*refused)
		memmove(why, why + used, strlen(why + used) + 1);
	return h;
}

/* The newest table, or 0 with `found` naming any older one it has. */
static int pick_version(void *h, char *found, size_t flen)
{
	static const char *const old[] = { "ncclNetPlugin_v7", "ncclNetPlugin_v6" };
	char sym[32];
	void *t;

	for (int v = 12; v >= 8; v--) {
		snprintf(sym, sizeof(sym), "ncclNetPlugin_v%d", v);
		t = dlsym(h, sym);
		if (t) {
			orig.v12 = t;	/* the union: one pointer whatever the version */
			return v;
		}
	}
	found[0] = '\0';
	for (size_t i = 0; i < sizeof(old) / sizeof(old[0]); i++)
		if (dlsym(h, old[i]))
			snprintf(found + strlen(found), flen - strlen(found), " %s", old[i]);
	return 0;
}

/* The slot a usable table lacks, or NULL: NCCL calls all of these. */
static const char *missing_slot(const ncclNet_v12_t *o)
{
	if (!o->init || !o->devices || !o->getProperties || !o->listen || !o->connect ||
	    !o->accept)
		return "init, devices, getProperties, listen, connect or accept";
	if (!o->regMr || !o->deregMr || !o->isend || !o->irecv || !o->iflush || !o->test)
		return "regMr, deregMr, isend, irecv, iflush or test";
	if (!o->closeSend || !o->closeRecv || !o->closeListen || !o->finalize)
		return "closeSend, closeRecv, closeListen or finalize";
	return NULL;
}

static int load(const char *spec)
{
	char why[768], found[64];
	const char *gap;
	Dl_info where;
	int refused;

	lib = open_named(spec, why, sizeof(why), &refused);
	if (refused) {
		LOG_WARN("NET/symmem: NCCL_SYMMEM_INNER_NET=%s: not loading it, since another user "
			 "could have put it there: %s (a library runs code as it loads; see "
			 "docs/security.md); so this plugin does not start", spec, why);
		return -1;
	}
	if (!lib) {
		LOG_WARN("NET/symmem: NCCL_SYMMEM_INNER_NET=%s: cannot open it (%s); connections "
			 "to other hosts need it, so this plugin does not start", spec, why);
		return -1;
	}
	loaded.version = pick_version(lib, found, sizeof(found));
	if (!loaded.version) {
		LOG_WARN("NET/symmem: NCCL_SYMMEM_INNER_NET=%s exports no net plugin table "
			 "ncclNetPlugin_v12 to _v8%s%s; connections to other hosts need one, so "
			 "this plugin does not start", spec, found[0] ? ", only" : "", found);
		return -1;
	}
	loaded.name = orig.v12->name ? orig.v12->name : "(unnamed)";
	snprintf(loaded.path, sizeof(loaded.path), "%s",
		 dladdr(orig.v12, &where) && where.dli_fname ? where.dli_fname : spec);
	/* A copy of this plugin would hand itself its own connections. */
	if (strcasecmp(loaded.name, PLUGIN_NAME) == 0) {
		LOG_WARN("NET/symmem: NCCL_SYMMEM_INNER_NET=%s is this plugin itself (%s); name "
			 "the cluster's own net plugin there", spec, loaded.path);
		return -1;
	}
	adapt(&loaded.ops);
	gap = missing_slot(&loaded.ops);
	if (gap) {
		LOG_WARN("NET/symmem: inner net plugin '%s' (v%d, %s) lacks %s; connections to "
			 "other hosts need them, so this plugin does not start", loaded.name,
			 loaded.version, loaded.path, gap);
		return -1;
	}
	return 0;
}

static void unload(void)
{
	if (lib)
		dlclose(lib);
	lib = NULL;
	memset(&loaded, 0, sizeof(loaded));
	orig.v12 = NULL;
	once_done = 0;
	once_rc = ncclSuccess;
}

const struct inner_lib *inner_lib_get(const char *spec)
{
	const struct inner_lib *got = &loaded;

	pthread_mutex_lock(&lock);
	if (refs == 0 && load(spec)) {
		unload();
		got = NULL;
	} else {
		refs++;
		atomic_store(&current, &loaded);
	}
	pthread_mutex_unlock(&lock);
	return got;
}

void inner_lib_put(void)
{
	pthread_mutex_lock(&lock);
	if (refs > 0 && --refs == 0) {
		atomic_store(&current, NULL);
		inner_req_reset();
		unload();
	}
	pthread_mutex_unlock(&lock);
}

const struct inner_lib *inner_lib_current(void)
{
	return atomic_load(&current);
}
