/* The net plugin proper: argument checks, object bookkeeping and logging
 * around transport/, which does the work.  Every failure leaves here as an
 * ncclResult_t plus exactly one WARN line.  One refusal is not a failure:
 * a user buffer on a ring connection (conn_hints.h), which NCCL answers by
 * running the collective on its own buffers; it is logged once, at INFO.
 *
 * With an inner net plugin (NCCL_SYMMEM_INNER_NET, inner_net.h) this is
 * also the dispatch: NCCL sees the inner plugin's devices, every listen
 * listens on both paths, the handle tells connect whether the listener is
 * on this host (the copy engines) or not (the inner plugin), and each
 * comm, memory handle and request knows which path it is on. */
#include <ctype.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "conn_hints.h"
#include "gpu_direct.h"
#include "helper_path.h"
#include "inner_net.h"
#include "log.h"
#include "monitor.h"
#include "net.h"
#include "registry.h"
#include "symmem.h"
#include "transport.h"

/* The host-memory path is bounded by two memcpy streams; advertising more
 * would only make NCCL's graph search overestimate this device. */
#define HOST_PATH_SPEED_MBPS 100000
/* The copy-engine path: one copy engine writes about 395 GB/s into a peer
 * GPU over NVLink (H200, NV18).  NCCL reads speed / 8000 as GB/s. */
#define GPU_PATH_SPEED_MBPS 3200000
#define MAX_TRANSFER_BYTES (1ull << 30)
#define MAX_DEVICES 64
/* With an inner plugin its handle takes the front of NCCL's 128 bytes
 * (vendors use up to 80) and this plugin's local form the rest. */
#define INNER_ROOM (NCCL_NET_HANDLE_MAXSIZE - TP_HANDLE_LOCAL_SIZE)

/* The plugin's devices: one per visible GPU when the copy-engine path is
 * on, else one host-memory device.  Built once, read from any thread. */
struct net_device {
	char name[16];
	char pci[256];		/* its GPU's sysfs path, "" when unknown: picks the RDMA device */
	int dmabuf;		/* GPUDirect RDMA: NCCL_PTR_CUDA | NCCL_PTR_DMABUF (ib only) */
};

static pthread_once_t devices_once = PTHREAD_ONCE_INIT;
static struct net_device devices[MAX_DEVICES];
static int ndevices;
static int gpu_path;		/* 1: devices are GPUs, the copy engines serve them */
/* NCCL_PTR_CUDA advertised: on the GPU path, unless every connection is
 * ibverbs (NCCL_SYMMEM_BACKEND=ib), which carries GPU memory only where
 * the device has GPUDirect RDMA (net_device.dmabuf). */
static int gpu_ptrs;
/* NCCL called the v11 init (with a per-comm context): NCCL 2.28 on, which
 * says through setNetAttr which connections are rings, so ring
 * registrations can be declined (conn_hints.c).  Set before the first
 * build_devices, which reads it once. */
static atomic_int rings_hinted;
static atomic_int hints_announced;
static atomic_int unhinted_warned;

struct net_ctx {
	uint64_t comm_id;
	int traffic_class;
	int inner;			/* the inner plugin's init ran for it */
	void *inner_ctx;		/* ... and gave this context */
};

struct net_comm {
	struct tp_comm *tp;		/* NULL when the inner plugin carries it */
	int via_inner;
	struct inner_comm inner;
	int dev;
	struct monitor_state mon;
	enum conn_kind kind;		/* from NCCL's hint when it was made */
	struct staging_alloc staging;	/* ring connections: NCCL's own buffers */
};

struct net_listen {
	struct tp_listener *tp;
	void *inner;			/* the inner plugin's listen comm, or NULL */
	int dev;
};

/* What NCCL holds as an mhandle; the range lives in the tp_region, which
 * tp_isend/tp_irecv check every buffer against. */
struct net_mr {
	void *comm;
	struct tp_region *region;
	int via_inner;
	void *inner_mh;			/* the inner plugin's own mhandle */
};

static atomic_int announced;
static atomic_int rdma_announced;
static atomic_int rdma_passed_warned;
static atomic_int decline_announced;
static atomic_int live_contexts;	/* v11 contexts: one per communicator */

/* NCCL v10 and older init once, without a context: the inner plugin's
 * context then serves every communicator and is never finalized. */
static pthread_mutex_t inner_lock = PTHREAD_MUTEX_INITIALIZER;
static int inner_global;
static void *inner_global_ctx;

static int via_inner(const struct config *cfg)
{
	return cfg && cfg->inner_net[0];
}

static void *inner_ctx_of(void *ctx)
{
	return ctx ? ((struct net_ctx *)ctx)->inner_ctx : inner_global_ctx;
}

/* The device of this plugin's own that serves NCCL's device `dev` (the
 * inner plugin's, with one) for connections inside the host. */
static int local_dev(int dev);

static void emit_config_line(const char *line, void *arg)
{
	(void)arg;
	LOG_INFO("NET/symmem config %s", line);
}

static const char *real_getenv(const char *name, void *arg)
{
	(void)arg;
	return getenv(name);
}

/* This host's RDMA devices and those NCCL_IB_HCA selects, looked up once
 * (libibverbs opened, its device list read): the INFO line at init and
 * the WARN at the first TCP connection to another host both read them. */
static pthread_once_t rdma_once = PTHREAD_ONCE_INIT;
static struct {
	int n;			/* devices selected */
	char found[256], selected[256], why[96];
} rdma;

static void rdma_lookup(void)
{
	const struct config *cfg = config_get();

	if (cfg)
		rdma.n = tp_rdma_devices(cfg->ib_hca, rdma.found, sizeof(rdma.found), rdma.selected,
					 sizeof(rdma.selected), rdma.why, sizeof(rdma.why));
}

/* What NCCL_IB_HCA selects on this host, and whether connections to
 * other hosts will use it (once, with NCCL_IB_HCA set or verbose). */
static void announce_rdma(const struct config *cfg)
{
	char tcp_why[192];
	int mode = config_ib_mode(cfg);
	const char *passed;

	/* After build_devices: the plugin's own NCCL_NET_GDR_LEVEL counts.
	 * With an inner plugin this plugin reaches no other host itself. */
	if ((!cfg->ib_hca[0] && !cfg->verbose && mode != 2) || via_inner(cfg) ||
	    atomic_exchange(&rdma_announced, 1))
		return;
	passed = config_rdma_passed_over(cfg);
	if (passed)
		snprintf(tcp_why, sizeof(tcp_why), "over TCP: %s", passed);
	else
		snprintf(tcp_why, sizeof(tcp_why), "over TCP (NCCL_SYMMEM_BACKEND)");
	pthread_once(&rdma_once, rdma_lookup);
	LOG_INFO("NET/symmem RDMA devices: %s%s%s; NCCL_IB_HCA=%s selects %d%s%s; other hosts are "
		 "reached %s", rdma.found[0] ? rdma.found : "none", rdma.why[0] ? ", " : "",
		 rdma.why, cfg->ib_hca[0] ? cfg->ib_hca : "(unset: all)", rdma.n,
		 rdma.n ? ": " : "", rdma.selected,
		 mode == 2 ? "over ibverbs only (NCCL_SYMMEM_BACKEND=ib)" :
		 mode == 0 ? tcp_why :
		 rdma.n ? "over ibverbs where the peer has an RDMA device too, else TCP" :
			  "over TCP");
}

/* A connection to another host went over TCP while this host has RDMA
 * devices NCCL_IB_HCA selects: a job across hosts that expects RDMA gets
 * TCP's speed.  A WARN, once per process, at the first such connection
 * (not at init: single-host jobs on hosts with NICs never cross it).
 * Under NCCL_SYMMEM_BACKEND=auto a TCP connection is always one to
 * another host. */
static void warn_rdma_passed_over(const struct config *cfg, const struct tp_comm *tp)
{
	const char *passed = config_rdma_passed_over(cfg);

	if (!passed || strcmp(tp_comm_backend(tp), "tcp") != 0 ||
	    atomic_exchange(&rdma_passed_warned, 1))
		return;
	pthread_once(&rdma_once, rdma_lookup);
	if (rdma.n <= 0)
		return;
	LOG_WARN("NET/symmem: connections to other hosts run over TCP, though this host has "
		 "RDMA device(s) %s: %s. With NCCL_P2P_DISABLE=0, and NCCL_NET_GDR_LEVEL and "
		 "NCCL_PASS_SM unset, NCCL keeps its own paths inside each host and hands the "
		 "plugin host memory between hosts, which goes over ibverbs", rdma.selected, passed);
}

/* GPUs hidden per process (a scheduler's per-task binding): copies into
 * GPUs the copying process cannot see ran at 25-28 GB/s against about 300
 * on 4 x H200, so the copy helper runs with every GPU visible.  One GPU
 * visible hides every peer for certain, and then a helper that keeps the
 * variable is worth a WARN; a list may hide none. */
static void announce_hidden_peers(const struct config *cfg)
{
	const char *what = cfg->ngpus_visible == 1 ? "hides the peer GPUs from this process" :
						     "may hide peer GPUs from this process";

	if (cfg->copy_helper && cfg->helper_all_gpus)
		LOG_INFO("NET/symmem CUDA_VISIBLE_DEVICES=%s %s; the copy helper runs without "
			 "it, so that it sees the GPUs it copies into "
			 "(NCCL_SYMMEM_HELPER_ALL_GPUS=0 keeps it)", cfg->gpus_visible, what);
	else if (cfg->ngpus_visible == 1)
		LOG_WARN("NET/symmem: CUDA_VISIBLE_DEVICES=%s hides the peer GPUs from the "
			 "process that copies into them: copies run at about a tenth of the "
			 "copy engines' speed; leave NCCL_SYMMEM_COPY_HELPER and "
			 "NCCL_SYMMEM_HELPER_ALL_GPUS at 1, or show every GPU to every rank",
			 cfg->gpus_visible);
	else
		LOG_INFO("NET/symmem CUDA_VISIBLE_DEVICES=%s %s; copies into a GPU it hides "
			 "run at about a tenth of the copy engines' speed", cfg->gpus_visible, what);
}

/* Once per process, after NCCL gave us its logger. */
static void announce(const struct config *cfg)
{
	const struct sm_cuda_info *cuda;
	char unknown[256];

	if (atomic_exchange(&announced, 1))
		return;
	config_describe(cfg, real_getenv, NULL, cfg->verbose, emit_config_line, NULL);
	if (config_env_plugin_applied()[0])
		LOG_INFO("NET/symmem env plugin (NCCL_ENV_PLUGIN) set what the user left unset: %s",
			 config_env_plugin_applied());
	if (cfg->warnings[0])
		LOG_WARN("NET/symmem: %s", cfg->warnings);
	if (config_unknown_vars(unknown, sizeof(unknown)) > 0)
		LOG_WARN("NET/symmem: ignoring unknown variable(s): %s", unknown);
	cuda = sm_cuda_load();
	if (!cuda->loaded)
		LOG_INFO("NET/symmem no CUDA driver (%s); serving host memory only", cuda->reason);
	else if (!cfg->dma_enable)
		LOG_INFO("NET/symmem CUDA driver %d.%d, %d GPU(s); NCCL_DMA_ENABLE=0: host memory only",
			 cuda->driver_version / 1000, cuda->driver_version % 1000 / 10,
			 cuda->device_count);
	else
		LOG_INFO("NET/symmem CUDA driver %d.%d, %d GPU(s); data path: copy engines into "
			 "peer-mapped GPU buffers on one host, %s between hosts",
			 cuda->driver_version / 1000, cuda->driver_version % 1000 / 10,
			 cuda->device_count, via_inner(cfg) ? "the inner net plugin" :
			 "ibverbs or TCP (host memory)");
	if (cuda->loaded && cfg->dma_enable && cfg->ngpus_visible)
		announce_hidden_peers(cfg);
}

static void emit_nccl_default(const char *name, const char *value, int applied, const char *why,
			      void *arg)
{
	(void)arg;
	if (applied)
		LOG_INFO("NET/symmem set %s=%s: %s (NCCL_SYMMEM_NCCL_DEFAULTS=0 leaves it alone)",
			 name, value, why);
	else if (why)
		LOG_INFO("NET/symmem %s=%s left as it is: %s", name, value, why);
	else
		LOG_INFO("NET/symmem %s=%s left as it is", name, value);
}

/* A WARN, not INFO: under the usual NCCL_DEBUG=WARN an INFO line is never
 * seen, and what it names costs send/recv and alltoall most of their
 * speed.  Once per process (build_devices). */
static void emit_nccl_advice(const char *name, const char *value, const char *why, void *arg)
{
	(void)arg;
	LOG_WARN("NET/symmem: %s is unset; set %s=%s before the job starts, or "
		 "NCCL_ENV_PLUGIN=symmem, which sets it (NCCL reads it before it loads a net "
		 "plugin): %s", name, name, value, why);
}

/* Where GPU `ordinal` sits on the PCI tree ("/sys/devices/pci0000:00/
 * 0000:00:06.0"), for the choice of the closest RDMA device; "" when the
 * driver or sysfs does not say. */
static void gpu_sysfs_path(int ordinal, char *out, size_t len)
{
	char bus[32], link[96], *real;
	CUdevice dev;

	out[0] = '\0';
	if (sm_cu()->device_get(&dev, ordinal) != CUDA_SUCCESS ||
	    sm_cu()->device_get_pci_bus_id(bus, sizeof(bus), dev) != CUDA_SUCCESS)
		return;
	for (char *p = bus; *p; p++)
		*p = (char)tolower((unsigned char)*p);
	snprintf(link, sizeof(link), "/sys/bus/pci/devices/%s", bus);
	real = realpath(link, NULL);
	if (real)
		snprintf(out, len, "%s", real);
	free(real);
}

/* NCCL_SYMMEM_BACKEND=ib: which devices carry GPU buffers (GPUDirect
 * RDMA, gpu_direct.h); the others advertise host memory only. */
static void probe_gpu_direct(const struct config *cfg)
{
	char line[768] = "";
	int on = 0;

	if (!cfg || cfg->backend != CONFIG_BACKEND_IB)
		return;
	for (int i = 0; i < ndevices; i++) {
		devices[i].dmabuf = gpu_direct_device(cfg->ib_hca, cfg->ib_gid_index, i,
						      devices[i].name, gpu_path, devices[i].pci,
						      line, sizeof(line));
		on += devices[i].dmabuf;
	}
	gpu_direct_announce(on, ndevices, line);
}

static void build_devices(void)
{
	const struct config *cfg = config_get();
	const struct sm_cuda_info *cuda = sm_cuda_load();
	int n = cuda->loaded ? cuda->device_count : 0;

	if (n > MAX_DEVICES)
		n = MAX_DEVICES;
	if (!cfg || !cfg->dma_enable || !sm_cu() || n < 1) {
		ndevices = 1;
		snprintf(devices[0].name, sizeof(devices[0].name), "symmem0");
		probe_gpu_direct(cfg);
		return;
	}
	for (int i = 0; i < n; i++) {
		struct net_device *d = &devices[i];

		snprintf(d->name, sizeof(d->name), "symmem%d", i);
		gpu_sysfs_path(i, d->pci, sizeof(d->pci));
		if (cfg->verbose)
			LOG_INFO("NET/symmem device %s: GPU %d at %s", d->name, i,
				 d->pci[0] ? d->pci : "(PCI place unknown)");
	}
	ndevices = n;
	gpu_path = 1;
	gpu_ptrs = cfg->backend != CONFIG_BACKEND_IB;
	probe_gpu_direct(cfg);
	config_apply_nccl_defaults(cfg, rings_hinted, emit_nccl_default, NULL);
	config_nccl_advice(cfg, emit_nccl_advice, NULL);
}

/* With P2P off, what registrations of user buffers on ring connections
 * become (conn_hints.h): once per process, from the table NCCL chose
 * (rings_hinted, as build_devices reads it). */
static void announce_hints(const struct config *cfg)
{
	if (!config_p2p_off() || atomic_exchange(&hints_announced, 1))
		return;
	if (!atomic_load(&rings_hinted))
		LOG_INFO("NET/symmem: NCCL gives no connection hints (net v10 or older), so user "
			 "buffers it registers on ring connections stay registered and NCCL runs "
			 "such all_gathers and broadcasts on one channel (the plugin's "
			 "NCCL_GRAPH_REGISTER=0 default keeps CUDA graphs off it)");
	else if (config_coll_register(cfg))
		LOG_INFO("NET/symmem: user buffers NCCL registers on ring connections stay "
			 "registered (NCCL_SYMMEM_COLL_REGISTER=1 or NCCL_PASS_SM=1)");
	else
		LOG_INFO("NET/symmem: NCCL says which connections are rings (net v11): user "
			 "buffers it registers on them are declined on every connection, so that "
			 "every rank runs those collectives on all its channels");
}

static const struct config *load_config(void)
{
	const struct config *cfg = config_get();

	if (!cfg)
		LOG_WARN("NET/symmem: %s", config_error());
	return cfg;
}

static void transport_options(const struct config *cfg, struct tp_options *opt)
{
	memset(opt, 0, sizeof(*opt));
	opt->backend = cfg->backend == CONFIG_BACKEND_TCP ? TP_BACKEND_TCP :
		       cfg->backend == CONFIG_BACKEND_SHM ? TP_BACKEND_SHM :
		       cfg->backend == CONFIG_BACKEND_IB ? TP_BACKEND_IB : TP_BACKEND_AUTO;
	/* The inner plugin takes every other host: this plugin's own
	 * connections stay inside this one. */
	if (via_inner(cfg))
		opt->backend = TP_BACKEND_SHM;
	opt->ring_size = cfg->host_ring_size;
	opt->chunk_size = cfg->chunk_size;
	opt->connect_timeout = cfg->connect_timeout;
	opt->ifname = cfg->socket_ifname;
	opt->ib = via_inner(cfg) ? 0 : config_ib_mode(cfg);
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

/* A backend forced for every connection and an inner plugin for other
 * hosts cannot both hold: one WARN, and init fails. */
static int inner_conflicts(const struct config *cfg)
{
	if (!via_inner(cfg) || (cfg->backend != CONFIG_BACKEND_TCP &&
				cfg->backend != CONFIG_BACKEND_IB))
		return 0;
	LOG_WARN("NET/symmem: NCCL_SYMMEM_BACKEND=%s makes this plugin carry every connection "
		 "itself, but NCCL_SYMMEM_INNER_NET=%s hands those to other hosts to that plugin: "
		 "unset one of the two", cfg->backend == CONFIG_BACKEND_TCP ? "tcp" : "ib",
		 cfg->inner_net);
	return 1;
}

/* NCCL v10 and older: the inner plugin's init, once for the process. */
static ncclResult_t init_inner_global(const struct config *cfg, ncclDebugLogger_t log,
				      ncclProfilerCallback_t prof)
{
	ncclNetCommConfig_v11_t none = { .trafficClass = -1 };
	ncclResult_t rc = ncclSuccess;

	pthread_mutex_lock(&inner_lock);
	if (!inner_global) {
		rc = inner_init(cfg->inner_net, &inner_global_ctx, 0, &none, log, prof);
		inner_global = rc == ncclSuccess;
	}
	pthread_mutex_unlock(&inner_lock);
	return rc;
}

ncclResult_t net_init(void **ctx, uint64_t commId, ncclNetCommConfig_v11_t *config,
		      ncclDebugLogger_t logFunction, ncclProfilerCallback_t profFunction)
{
	const struct config *cfg;
	struct net_ctx *c;
	ncclResult_t rc;

	log_set_logger(logFunction);
	if (ctx)
		*ctx = NULL;
	cfg = load_config();
	if (!cfg || inner_conflicts(cfg))
		return ncclInvalidUsage;
	announce(cfg);
	if (ctx)
		rings_hinted = 1;
	announce_hints(cfg);
	pthread_once(&devices_once, build_devices);
	announce_rdma(cfg);
	if (!ctx) {
		/* pre-v11 init: no per-comm context */
		return via_inner(cfg) ? init_inner_global(cfg, logFunction, profFunction) :
					ncclSuccess;
	}
	c = calloc(1, sizeof(*c));
	if (!c) {
		LOG_WARN("NET/symmem: out of memory in init");
		return ncclSystemError;
	}
	if (via_inner(cfg)) {
		rc = inner_init(cfg->inner_net, &c->inner_ctx, commId, config, logFunction,
				profFunction);
		if (rc != ncclSuccess) {
			free(c);
			return rc;
		}
		c->inner = 1;
	}
	if (registry_add(c, OBJ_CTX)) {
		if (c->inner)
			inner_finalize(c->inner_ctx);
		free(c);
		LOG_WARN("NET/symmem: out of memory in init");
		return ncclSystemError;
	}
	c->comm_id = commId;
	c->traffic_class = config ? config->trafficClass : -1;
	atomic_fetch_add(&live_contexts, 1);
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
	pthread_once(&devices_once, build_devices);
	if (via_inner(config_get()))
		return inner_devices(ndev);
	*ndev = ndevices;
	return ncclSuccess;
}

static int local_dev(int dev)
{
	return dev % ndevices;
}

static int check_dev(int dev, const char *what)
{
	int n;

	pthread_once(&devices_once, build_devices);
	n = via_inner(config_get()) ? inner_device_count() : ndevices;
	if (dev >= 0 && dev < n)
		return 0;
	LOG_WARN("NET/symmem: %s on device %d, this plugin has %d device(s)", what, dev, n);
	return -1;
}

static uint64_t min_u64(uint64_t a, uint64_t b)
{
	return a < b ? a : b;
}

/* The inner plugin's device as NCCL sees it: the NIC's own place, speed,
 * identity, rail and plane, with what this plugin's path cannot do for a
 * peer on this host taken out, since NCCL may open such a channel on any
 * device: GPU memory (CUDA, DMA-BUF) only where the copy engines serve
 * it, registrations per comm, one buffer per irecv (no grouping on the
 * copy-engine path), transfers of at most 1 GiB. */
static ncclResult_t inner_properties(int dev, ncclNetProperties_v12_t *props)
{
	ncclResult_t rc = inner_get_properties(dev, props);

	if (rc != ncclSuccess)
		return rc;
	props->ptrSupport &= NCCL_PTR_HOST | (gpu_ptrs ? NCCL_PTR_CUDA | NCCL_PTR_DMABUF : 0);
	props->regIsGlobal = 0;
	props->maxRecvs = 1;
	props->maxP2pBytes = min_u64(props->maxP2pBytes, MAX_TRANSFER_BYTES);
	props->maxCollBytes = min_u64(props->maxCollBytes, MAX_TRANSFER_BYTES);
	props->maxMultiRequestSize = 1;
	return ncclSuccess;
}

ncclResult_t net_get_properties_v12(int dev, ncclNetProperties_v12_t *props)
{
	if (check_dev(dev, "getProperties") || !props)
		return ncclInvalidArgument;
	if (via_inner(config_get()))
		return inner_properties(dev, props);
	memset(props, 0, sizeof(*props));
	props->name = devices[dev].name;
	/* No pciPath: NCCL hangs the device off the CPU with no PCI link of
	 * its own to cap it.  The GPU's own PCI function instead leaves NCCL's
	 * topology with a GPU that has no links (both ranks crashed, measured);
	 * a sibling on the root bus would cap it at that device's link. */
	props->pciPath = NULL;
	props->guid = 0x53594d4d00000000ull | (uint64_t)dev;
	props->ptrSupport = NCCL_PTR_HOST | (gpu_ptrs ? NCCL_PTR_CUDA : 0) |
			    (devices[dev].dmabuf ? NCCL_PTR_CUDA | NCCL_PTR_DMABUF : 0);
	props->regIsGlobal = 0;
	/* Copy-engine writes are complete when their event fires: no flush;
	 * GPUDirect RDMA is advertised from Hopper on, where NCCL needs none. */
	props->forceFlush = 0;
	props->speed = gpu_path ? GPU_PATH_SPEED_MBPS : HOST_PATH_SPEED_MBPS;
	props->port = 1;
	props->latency = 0;
	props->maxComms = 1 << 20;
	props->maxRecvs = 1;
	props->netDeviceType = NCCL_NET_DEVICE_HOST;
	props->netDeviceVersion = 0;
	props->vProps.ndevs = 1;
	props->vProps.devs[0] = dev;
	props->maxP2pBytes = MAX_TRANSFER_BYTES;
	props->maxCollBytes = MAX_TRANSFER_BYTES;
	props->maxMultiRequestSize = 1;
	/* Copy engines and sockets inside a host: on no fabric rail. */
	props->railId = NCCL_NET_ID_UNDEF;
	props->planeId = NCCL_NET_ID_UNDEF;
	return ncclSuccess;
}

/* This plugin's own listener; with an inner plugin its handle is the
 * local form, behind the inner plugin's. */
static int listen_here(const struct config *cfg, struct net_listen *l, void *handle)
{
	uint8_t full[TP_HANDLE_SIZE];
	struct tp_options opt;
	int dev = via_inner(cfg) ? local_dev(l->dev) : l->dev;
	int rc;

	transport_options(cfg, &opt);
	opt.gpu_pci = devices[dev].pci;
	if (!via_inner(cfg))
		return tp_listen(&opt, dev, handle, &l->tp);
	rc = tp_listen(&opt, dev, full, &l->tp);
	if (!rc)
		rc = tp_handle_shrink(full, (uint8_t *)handle + INNER_ROOM);
	if (rc && l->tp) {
		tp_close_listener(l->tp);
		l->tp = NULL;
	}
	return rc;
}

ncclResult_t net_listen(void *ctx, int dev, void *handle, void **listenComm)
{
	const struct config *cfg = load_config();
	struct net_listen *l;
	int rc;

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
	l = calloc(1, sizeof(*l));
	if (!l) {
		LOG_WARN("NET/symmem: out of memory in listen");
		return ncclSystemError;
	}
	l->dev = dev;
	/* The connector may be on either path: listen on both, the inner
	 * plugin's handle first, this plugin's local form after it. */
	if (via_inner(cfg)) {
		rc = inner_listen(inner_ctx_of(ctx), dev, handle, INNER_ROOM, &l->inner);
		if (rc != ncclSuccess) {
			free(l);
			return rc;
		}
	}
	rc = listen_here(cfg, l, handle);
	if (rc) {
		if (l->inner)
			inner_close_listen(l->inner);
		free(l);
		return log_fail(rc, "listen");
	}
	if (registry_add(l, OBJ_LISTEN)) {
		tp_close_listener(l->tp);
		if (l->inner)
			inner_close_listen(l->inner);
		free(l);
		LOG_WARN("NET/symmem: out of memory in listen");
		return ncclSystemError;
	}
	*listenComm = l;
	return ncclSuccess;
}

/* A connection NCCL made without a hint, in a job whose NCCL hints the
 * others (the v11 table): nothing on it is declined, so this rank could
 * keep a ring registration that the others decline and run that
 * collective on one channel against their many (conn_may_decline).  NCCL
 * 2.28.9 hinted every connection in the logs checked; a later
 * NCCL that stops would land here.  NCCL's bootstrap over the net
 * (NCCL_OOB_NET_ENABLE) connects without hints and registers no user
 * buffers, so it is left out.  Once per process. */
static void warn_unhinted(const struct config *cfg, enum conn_kind kind)
{
	if (kind != CONN_UNHINTED || !atomic_load(&rings_hinted) || !cfg ||
	    config_coll_register(cfg) || !config_p2p_off() || config_oob_net() ||
	    atomic_exchange(&unhinted_warned, 1))
		return;
	LOG_WARN("NET/symmem: NCCL made a connection without saying what it carries "
		 "(setNetAttr), though its net v11 table is meant to: user buffers it registers "
		 "on it stay registered, so a registered all_gather or broadcast could run on one "
		 "channel on this rank only; set NCCL_SYMMEM_COLL_REGISTER=1 on every rank, or "
		 "keep collective buffers unregistered (under CUDA graphs also "
		 "NCCL_GRAPH_REGISTER=0)");
}

/* A finished connection into NCCL's hands: this plugin's own (`tp`) or
 * the inner plugin's (`inner`, its comm). */
static ncclResult_t publish_comm(struct tp_comm *tp, void *inner, int dev, int kind, void **out)
{
	const struct config *cfg = config_get();
	struct net_comm *c = calloc(1, sizeof(*c));

	if (!c || registry_add(c, kind)) {
		free(c);
		if (tp) {
			tp_close(tp);
		} else {
			struct inner_comm ic = { .comm = inner, .is_send = kind == OBJ_SEND };

			inner_close(&ic);
		}
		LOG_WARN("NET/symmem: out of memory while finishing a connection");
		return ncclSystemError;
	}
	c->tp = tp;
	c->via_inner = !tp;
	c->inner.comm = inner;
	c->inner.is_send = kind == OBJ_SEND;
	c->dev = dev;
	c->kind = hints_take();
	warn_unhinted(cfg, c->kind);
	if (cfg && tp)
		warn_rdma_passed_over(cfg, tp);
	conn_setup_begin(c);
	if (tp)
		monitor_open(&c->mon);
	if (cfg && cfg->verbose && tp)
		LOG_INFO("NET/symmem %s comm %p on device %d: %s data path%s, %s connection",
			 kind == OBJ_SEND ? "send" : "receive", (void *)c, dev, tp_comm_backend(tp),
			 gpu_path ? ", GPU buffers moved by copy engines" : ", host memory",
			 conn_kind_name(c->kind));
	else if (cfg && cfg->verbose)
		LOG_INFO("NET/symmem %s comm %p on device %d: inner net plugin %s, to another "
			 "host, %s connection", kind == OBJ_SEND ? "send" : "receive", (void *)c,
			 dev, inner_describe(), conn_kind_name(c->kind));
	*out = c;
	return ncclSuccess;
}

/* With an inner plugin: the listener on this host takes this plugin's
 * local form (a copy will do: its connect state is keyed by the token),
 * one elsewhere the inner plugin, which gets NCCL's buffer itself. */
static ncclResult_t connect_split(const struct config *cfg, void *ctx, int dev, void *handle,
				  void **sendComm, ncclNetDeviceHandle_t **sendDevComm)
{
	uint8_t local[TP_HANDLE_SIZE] = { 0 };
	struct tp_handle_info info;
	struct tp_options opt;
	struct tp_comm *tp;
	void *ic = NULL;
	ncclResult_t r;
	int rc;

	memcpy(local, (uint8_t *)handle + INNER_ROOM, TP_HANDLE_LOCAL_SIZE);
	rc = tp_handle_decode(local, &info);
	if (rc)
		return log_fail(rc, "connect: the handle's part of this plugin (does every rank "
				"set the same NCCL_SYMMEM_INNER_NET?)");
	if (info.host_id != tp_host_id()) {
		r = inner_connect(inner_ctx_of(ctx), dev, handle, INNER_ROOM, info.token, ctx,
				  cfg->connect_timeout, &ic, sendDevComm);
		if (r != ncclSuccess || !ic)
			return r;
		return publish_comm(NULL, ic, dev, OBJ_SEND, sendComm);
	}
	transport_options(cfg, &opt);
	opt.dev = local_dev(dev);
	opt.gpu_pci = devices[opt.dev].pci;
	opt.owner = ctx;
	rc = tp_connect(&opt, local, &tp);
	if (rc)
		return log_fail(rc, "connect");
	if (!tp)
		return ncclSuccess;
	return publish_comm(tp, NULL, dev, OBJ_SEND, sendComm);
}

ncclResult_t net_connect(void *ctx, int dev, void *handle, void **sendComm,
			 ncclNetDeviceHandle_t **sendDevComm)
{
	const struct config *cfg = load_config();
	struct tp_options opt;
	struct tp_comm *tp;
	int rc;

	/* sendDevComm: this plugin's devices are HOST ones; only the inner
	 * plugin gets NCCL's device handle. */
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
	if (via_inner(cfg))
		return connect_split(cfg, ctx, dev, handle, sendComm, sendDevComm);
	transport_options(cfg, &opt);
	opt.dev = dev;
	opt.gpu_pci = devices[dev].pci;
	opt.owner = ctx;	/* NULL through the v9/v10 tables, which have no finalize */
	rc = tp_connect(&opt, handle, &tp);
	if (rc)
		return log_fail(rc, "connect");
	if (!tp)
		return ncclSuccess;
	return publish_comm(tp, NULL, dev, OBJ_SEND, sendComm);
}

ncclResult_t net_accept(void *listenComm, void **recvComm, ncclNetDeviceHandle_t **recvDevComm)
{
	struct net_listen *l = listenComm;
	struct tp_comm *tp;
	int rc;

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
	/* Both paths, this host's first; only one connector comes.  This
	 * host's listener bounds the wait (NCCL_SYMMEM_CONNECT_TIMEOUT), but
	 * only once the inner plugin was asked too: its connector may have
	 * come while NCCL's thread was away past that bound. */
	rc = tp_accept(l->tp, &tp);
	if (tp)
		return publish_comm(tp, NULL, l->dev, OBJ_RECV, recvComm);
	if (l->inner) {
		void *ic = NULL;
		ncclResult_t r = inner_accept(l->inner, &ic, recvDevComm);

		if (r != ncclSuccess)
			return r;
		if (ic)
			return publish_comm(NULL, ic, l->dev, OBJ_RECV, recvComm);
	}
	if (rc)
		return log_fail(rc, l->inner ? "accept on this host's path (the inner net plugin "
				"had no connection either)" : "accept");
	return ncclSuccess;
}

/* NCCL's hint for the connection its service thread makes next
 * (conn_hints.h); `ctx` is the communicator's, `attr` may be NULL.  That
 * connection may be the inner plugin's: it gets every hint too. */
ncclResult_t net_set_net_attr(void *ctx, ncclNetAttr_v11_t *attr)
{
	conn_setup_end();
	if (attr)
		hints_note(attr->op);
	if (via_inner(config_get()))
		return inner_set_net_attr(inner_ctx_of(ctx), attr);
	return ncclSuccess;
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
	if (!atomic_exchange(&decline_announced, 1))
		LOG_INFO("NET/symmem: user buffers NCCL registers for ring collectives stay "
			 "unregistered: with P2P off NCCL would run such a collective on one "
			 "channel; it runs on NCCL's buffers with all its channels instead, and "
			 "send/recv and alltoall stay zero-copy (NCCL_SYMMEM_COLL_REGISTER=1 "
			 "registers them)");
	return 1;
}

/* The inner plugin's registration, in a handle NCCL can give back to
 * either path's calls.  `fd` >= 0: NCCL's DMA-BUF, through regMrDmaBuf. */
static ncclResult_t reg_inner(struct net_comm *c, void *data, size_t size, int type, int fd,
			      uint64_t offset, void **mhandle, const char *what)
{
	struct net_mr *mr = calloc(1, sizeof(*mr));
	ncclResult_t rc;

	if (!mr) {
		LOG_WARN("NET/symmem: out of memory in %s", what);
		return ncclSystemError;
	}
	rc = fd >= 0 ? inner_reg_mr_dma_buf(&c->inner, data, size, type, offset, fd, &mr->inner_mh) :
		       inner_reg_mr(&c->inner, data, size, type, &mr->inner_mh);
	if (rc != ncclSuccess) {
		free(mr);
		return rc;
	}
	if (registry_add(mr, OBJ_MR)) {
		inner_dereg_mr(&c->inner, mr->inner_mh);
		free(mr);
		LOG_WARN("NET/symmem: out of memory in %s", what);
		return ncclSystemError;
	}
	mr->comm = c;
	mr->via_inner = 1;
	*mhandle = mr;
	return ncclSuccess;
}

/* regMr, and regMrDmaBuf with NCCL's DMA-BUF `fd` (-1: none). */
static ncclResult_t reg_mr(void *comm, void *data, size_t size, int type, int fd,
			   uint64_t offset, void **mhandle, const char *what)
{
	struct net_comm *c = comm;
	struct net_mr *mr;
	int rc, gpu_ok;

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
	if (c->via_inner)
		return reg_inner(c, data, size, type, fd, offset, mhandle, what);
	gpu_ok = gpu_ptrs || devices[local_dev(c->dev)].dmabuf;
	if (type != NCCL_PTR_HOST && (type != NCCL_PTR_CUDA || !gpu_ok)) {
		LOG_WARN("NET/symmem: %s of memory type %d; device %d serves %s", what, type,
			 c->dev, gpu_ok ? "NCCL_PTR_HOST and NCCL_PTR_CUDA" :
					  "host memory only (NCCL_PTR_HOST)");
		return ncclInvalidArgument;
	}
	if (!data && size) {
		LOG_WARN("NET/symmem: %s of %zu bytes at NULL", what, size);
		return ncclInvalidArgument;
	}
	mr = calloc(1, sizeof(*mr));
	if (!mr) {
		LOG_WARN("NET/symmem: out of memory in %s", what);
		return ncclSystemError;
	}
	if (type == NCCL_PTR_CUDA && fd >= 0)
		rc = tp_register_dmabuf(c->tp, data, size, fd, offset, &mr->region);
	else
		rc = tp_register(c->tp, data, size,
				 type == NCCL_PTR_CUDA ? TP_MEM_CUDA : TP_MEM_HOST, &mr->region);
	if (rc) {
		free(mr);
		return log_fail(rc, what);
	}
	if (registry_add(mr, OBJ_MR)) {
		tp_deregister(c->tp, mr->region);
		free(mr);
		LOG_WARN("NET/symmem: out of memory in %s", what);
		return ncclSystemError;
	}
	mr->comm = comm;
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
	struct net_comm *c = comm;
	ncclResult_t rc = ncclSuccess;
	int open;

	if (!registry_has(mr, OBJ_MR)) {
		LOG_WARN("NET/symmem: deregMr of %p, which is not a live memory handle "
			 "(deregistered twice?)", mhandle);
		return ncclInternalError;
	}
	if (mr->comm != comm) {
		LOG_WARN("NET/symmem: deregMr of a handle registered on comm %p through comm %p",
			 mr->comm, comm);
		return ncclInternalError;
	}
	registry_remove(mr, OBJ_MR);
	/* After an abort NCCL may close the comm before deregistering; the
	 * inner plugin's close then freed what its comm held. */
	open = registry_has(c, OBJ_SEND) || registry_has(c, OBJ_RECV);
	if (mr->via_inner)
		rc = open ? inner_dereg_mr(&c->inner, mr->inner_mh) : ncclSuccess;
	else
		tp_deregister(open ? c->tp : NULL, mr->region);
	registry_retire(mr);
	return rc;
}

/* Only device-offload plugins have device handles for memory. */
ncclResult_t net_get_device_mr(void *comm, void *mhandle, void **dptr_mhandle)
{
	struct net_comm *c = comm;
	struct net_mr *mr = mhandle;

	if (!dptr_mhandle) {
		LOG_WARN("NET/symmem: getDeviceMr called with a NULL slot");
		return ncclInvalidArgument;
	}
	*dptr_mhandle = NULL;
	if (!registry_has(mr, OBJ_MR) || mr->comm != comm) {
		LOG_WARN("NET/symmem: getDeviceMr of %p, which is no live memory handle of comm %p",
			 mhandle, comm);
		return ncclInternalError;
	}
	return c->via_inner ? inner_get_device_mr(&c->inner, mr->inner_mh, dptr_mhandle) :
			      ncclSuccess;
}

ncclResult_t net_isend(void *sendComm, void *data, size_t size, int tag, void *mhandle,
		       void *phandle, void **request)
{
	struct net_comm *c = sendComm;
	struct tp_req *r;
	int rc;

	if (c->via_inner)
		return inner_isend(&c->inner, data, size, tag,
				   mhandle ? ((struct net_mr *)mhandle)->inner_mh : NULL, phandle,
				   request);
	*request = NULL;
	if (size > MAX_TRANSFER_BYTES) {
		LOG_WARN("NET/symmem: isend of %zu bytes exceeds maxP2pBytes %llu", size,
			 MAX_TRANSFER_BYTES);
		return ncclInternalError;
	}
	rc = tp_isend(c->tp, data, size, mhandle ? ((struct net_mr *)mhandle)->region : NULL, &r);
	if (rc)
		return log_fail(rc, "isend");
	monitor_tick(&c->mon, c->tp, c, 1, c->dev);
	*request = r;
	return ncclSuccess;
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
		out[i] = mhandles && mhandles[i] ? ((struct net_mr *)mhandles[i])->inner_mh : NULL;
	return 0;
}

ncclResult_t net_irecv(void *recvComm, int n, void **data, size_t *sizes, int *tags,
		       void **mhandles, void **phandles, void **request)
{
	struct net_comm *c = recvComm;
	void *imh[NET_MAX_RECVS];
	struct tp_req *r;
	int rc;

	/* Grouped receives go through: only this plugin's path advertises 1. */
	if (c->via_inner) {
		if (inner_mhandles(n, mhandles, imh)) {
			*request = NULL;
			return ncclInternalError;
		}
		return inner_irecv(&c->inner, n, data, sizes, tags, mhandles ? imh : NULL,
				   phandles, request);
	}
	/* Overwrite NCCL's optional-completion hint (0x1) on every path. */
	*request = NULL;
	if (n != 1) {
		LOG_WARN("NET/symmem: irecv of %d buffers; this plugin advertises maxRecvs=1", n);
		return ncclInternalError;
	}
	if (sizes[0] > MAX_TRANSFER_BYTES) {
		LOG_WARN("NET/symmem: irecv of %zu bytes exceeds maxP2pBytes %llu", sizes[0],
			 MAX_TRANSFER_BYTES);
		return ncclInternalError;
	}
	rc = tp_irecv(c->tp, data[0], sizes[0],
		      mhandles && mhandles[0] ? ((struct net_mr *)mhandles[0])->region : NULL, &r);
	if (rc)
		return log_fail(rc, "irecv");
	monitor_tick(&c->mon, c->tp, c, 0, c->dev);
	*request = r;
	return ncclSuccess;
}

ncclResult_t net_iflush(void *recvComm, int n, void **data, int *sizes, void **mhandles,
			void **request)
{
	struct net_comm *c = recvComm;
	void *imh[NET_MAX_RECVS];

	*request = NULL;
	if (c->via_inner) {
		if (inner_mhandles(n, mhandles, imh))
			return ncclInternalError;
		return inner_iflush(&c->inner, n, data, sizes, mhandles ? imh : NULL, request);
	}
	/* Copy-engine writes and CPU copies are visible once test() says so. */
	return ncclSuccess;
}

ncclResult_t net_test(void *request, int *done, int *sizes)
{
	size_t size = 0;
	int rc;

	if ((uintptr_t)request <= NCCL_NET_OPTIONAL_RECV_COMPLETION) {
		LOG_WARN("NET/symmem: test on request %p, which no isend/irecv returned", request);
		return ncclInternalError;
	}
	if (inner_owns_request(request))
		return inner_test(request, done, sizes);
	rc = tp_test(request, done, &size);
	if (rc)
		return log_fail(rc, "test");
	if (*done && sizes)
		sizes[0] = (int)size;
	return ncclSuccess;
}

/* NCCL may call it for every completed receive (the exported table's
 * choice); only the inner plugin's may want to know. */
ncclResult_t net_irecv_consumed(void *recvComm, int n, void *request)
{
	struct net_comm *c = recvComm;

	return c->via_inner ? inner_irecv_consumed(&c->inner, n, request) : ncclSuccess;
}

/* What a connection through the inner plugin carried, as monitor_close
 * says it for this plugin's own. */
static void close_line(const struct net_comm *c, int is_send)
{
	const struct config *cfg = config_get();

	if (!cfg || (!cfg->verbose && !cfg->monitor))
		return;
	LOG_INFO("NET/symmem %s comm %p on device %d closed: %llu messages, %llu bytes through "
		 "inner net plugin %s", is_send ? "send" : "receive", (const void *)c, c->dev,
		 (unsigned long long)c->inner.messages, (unsigned long long)c->inner.bytes,
		 inner_describe());
}

static ncclResult_t close_comm(void *comm, int kind, const char *what)
{
	struct net_comm *c = comm;
	ncclResult_t rc = ncclSuccess;

	if (!comm)
		return ncclSuccess;
	if (registry_take(c, kind, what))
		return ncclInternalError;
	if (c->via_inner) {
		close_line(c, kind == OBJ_SEND);
		rc = inner_close(&c->inner);
	} else {
		monitor_close(&c->mon, c->tp, c, kind == OBJ_SEND, c->dev);
		tp_close(c->tp);
	}
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
	tp_close_listener(l->tp);
	rc = l->inner ? inner_close_listen(l->inner) : ncclSuccess;
	registry_retire(l);
	return rc;
}

/* NIC fusion is the inner plugin's; this plugin's own devices merge
 * with nothing. */
ncclResult_t net_make_vdevice_v12(int *d, ncclNetVDeviceProps_v12_t *props)
{
	if (!d || !props) {
		LOG_WARN("NET/symmem: makeVDevice called with a NULL slot or list");
		return ncclInvalidArgument;
	}
	if (!via_inner(config_get())) {
		LOG_WARN("NET/symmem: makeVDevice: this plugin's devices merge with none");
		return ncclInvalidUsage;
	}
	return inner_make_vdevice(d, props);
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

/* NCCL 2.28 unloads an external net plugin with the process's last
 * communicator and clears its name, so the next ncclCommInitRank looks for
 * libnccl-net.so instead (bench/results/failures.md, run 8).  Said at
 * INFO: it is also how every job ends, and it explains the "Failed to
 * initialize any NET plugin" that may follow. */
static void note_unload(void)
{
	const struct config *cfg = config_get();

	if (!cfg || cfg->kept_loaded)
		return;
	LOG_INFO("NET/symmem: the last communicator of this process is gone: NCCL 2.28 unloads "
		 "the plugin now and forgets NCCL_NET_PLUGIN, so a later ncclCommInitRank in this "
		 "process does not find it; NCCL_NET_PLUGIN_REF_COUNT=1, set before the job "
		 "starts, keeps it loaded");
}

ncclResult_t net_finalize(void *ctx)
{
	struct net_ctx *c = ctx;
	ncclResult_t rc = ncclSuccess;
	int abandoned;

	/* 2.28.9 also calls this after a failed init, with a NULL context. */
	if (!ctx)
		return ncclSuccess;
	if (registry_take(ctx, OBJ_CTX, "finalize"))
		return ncclInternalError;
	abandoned = tp_connect_abandon(ctx) + inner_connect_abandon(ctx);
	if (abandoned)
		LOG_INFO("NET/symmem: finalize freed %d connect(s) NCCL left unfinished", abandoned);
	if (c->inner)
		rc = inner_finalize(c->inner_ctx);
	registry_retire(ctx);
	monitor_finalize();
	if (atomic_fetch_sub(&live_contexts, 1) == 1)
		note_unload();
	return rc;
}
