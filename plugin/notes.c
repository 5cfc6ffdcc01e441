/* The net plugin's once-per-process lines (notes.h).  Each fires at most
 * once: its flag lives in `notes`, the one place such state is kept. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "notes.h"
#include "path.h"
#include "symmem.h"
#include "transport.h"

static struct {
	atomic_int rings_hinted;	/* notes_set_rings_hinted() */
	atomic_int announced;
	atomic_int hints_announced;
	atomic_int unhinted_warned;
	atomic_int rdma_announced;
	atomic_int rdma_passed_warned;
	atomic_int decline_announced;
	atomic_int live_contexts;	/* v11 contexts: one per communicator */
	/* This host's RDMA devices and those NCCL_IB_HCA selects, looked up
	 * once (libibverbs opened, its device list read): the INFO line at
	 * init and the WARN at the first TCP connection to another host both
	 * read them. */
	pthread_once_t rdma_once;
	struct {
		int n;		/* devices selected */
		char found[256], selected[256], why[96];
	} rdma;
} notes = { .rdma_once = PTHREAD_ONCE_INIT };

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

static void rdma_lookup(void)
{
	const struct config *cfg = config_get();

	if (cfg)
		notes.rdma.n = tp_rdma_devices(cfg->ib_hca, notes.rdma.found,
					       sizeof(notes.rdma.found), notes.rdma.selected,
					       sizeof(notes.rdma.selected), notes.rdma.why,
					       sizeof(notes.rdma.why));
}

/* What NCCL_IB_HCA selects on this host, and whether connections to
 * other hosts will use it (once, with NCCL_IB_HCA set or verbose). */
void notes_rdma(const struct config *cfg, const struct net_path *path)
{
	char tcp_why[192];
	int mode = config_ib_mode(cfg);
	const char *passed;

	/* After the devices are built: the plugin's own NCCL_NET_GDR_LEVEL
	 * counts.  With an inner plugin this plugin reaches no other host
	 * itself. */
	if ((!cfg->ib_hca[0] && !cfg->verbose && mode != 2) || !path->own_remote ||
	    atomic_exchange(&notes.rdma_announced, 1))
		return;
	passed = config_rdma_passed_over(cfg);
	if (passed)
		snprintf(tcp_why, sizeof(tcp_why), "over TCP: %s", passed);
	else
		snprintf(tcp_why, sizeof(tcp_why), "over TCP (NCCL_SYMMEM_BACKEND)");
	pthread_once(&notes.rdma_once, rdma_lookup);
	LOG_INFO("NET/symmem RDMA devices: %s%s%s; NCCL_IB_HCA=%s selects %d%s%s; other hosts are "
		 "reached %s", notes.rdma.found[0] ? notes.rdma.found : "none",
		 notes.rdma.why[0] ? ", " : "", notes.rdma.why,
		 cfg->ib_hca[0] ? cfg->ib_hca : "(unset: all)", notes.rdma.n,
		 notes.rdma.n ? ": " : "", notes.rdma.selected,
		 mode == 2 ? "over ibverbs only (NCCL_SYMMEM_BACKEND=ib)" :
		 mode == 0 ? tcp_why :
		 notes.rdma.n ? "over ibverbs where the peer has an RDMA device too, else TCP" :
				"over TCP");
}

/* A connection to another host went over TCP while this host has RDMA
 * devices NCCL_IB_HCA selects: a job across hosts that expects RDMA gets
 * TCP's speed.  A WARN, once per process, at the first such connection
 * (not at init: single-host jobs on hosts with NICs never cross it).
 * Under NCCL_SYMMEM_BACKEND=auto a TCP connection is always one to
 * another host. */
void notes_rdma_passed_over(const struct config *cfg, const struct tp_comm *tp)
{
	const char *passed = config_rdma_passed_over(cfg);

	if (!passed || strcmp(tp_comm_backend(tp), "tcp") != 0 ||
	    atomic_exchange(&notes.rdma_passed_warned, 1))
		return;
	pthread_once(&notes.rdma_once, rdma_lookup);
	if (notes.rdma.n <= 0)
		return;
	LOG_WARN("NET/symmem: connections to other hosts run over TCP, though this host has "
		 "RDMA device(s) %s: %s. With NCCL_P2P_DISABLE=0, and NCCL_NET_GDR_LEVEL and "
		 "NCCL_PASS_SM unset, NCCL keeps its own paths inside each host and hands the "
		 "plugin host memory between hosts, which goes over ibverbs", notes.rdma.selected,
		 passed);
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

void notes_announce(const struct config *cfg, const struct net_path *path)
{
	const struct sm_cuda_info *cuda;
	char unknown[256];

	if (atomic_exchange(&notes.announced, 1))
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
			 cuda->device_count, path->between_hosts);
	if (cuda->loaded && cfg->dma_enable && cfg->ngpus_visible)
		announce_hidden_peers(cfg);
}

void notes_set_rings_hinted(void)
{
	atomic_store(&notes.rings_hinted, 1);
}

int notes_rings_hinted(void)
{
	return atomic_load(&notes.rings_hinted);
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
 * speed.  Once per process (when the devices are built). */
static void emit_nccl_advice(const char *name, const char *value, const char *why, void *arg)
{
	(void)arg;
	LOG_WARN("NET/symmem: %s is unset; set %s=%s before the job starts, or "
		 "NCCL_ENV_PLUGIN=symmem, which sets it (NCCL reads it before it loads a net "
		 "plugin): %s", name, name, value, why);
}

void notes_nccl_defaults(const struct config *cfg)
{
	config_apply_nccl_defaults(cfg, notes_rings_hinted(), emit_nccl_default, NULL);
	config_nccl_advice(cfg, emit_nccl_advice, NULL);
}

/* With P2P off, what registrations of user buffers on ring connections
 * become (conn_hints.h): once per process, from the table NCCL chose
 * (rings_hinted, as the devices read it). */
void notes_hints(const struct config *cfg)
{
	if (!config_p2p_off() || atomic_exchange(&notes.hints_announced, 1))
		return;
	if (!notes_rings_hinted())
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

/* A connection NCCL made without a hint, in a job whose NCCL hints the
 * others (the v11 table): nothing on it is declined, so this rank could
 * keep a ring registration that the others decline and run that
 * collective on one channel against their many (conn_may_decline).  NCCL
 * 2.28.9 hinted every connection in the logs checked; a later
 * NCCL that stops would land here.  NCCL's bootstrap over the net
 * (NCCL_OOB_NET_ENABLE) connects without hints and registers no user
 * buffers, so it is left out.  Once per process. */
void notes_unhinted(const struct config *cfg, enum conn_kind kind)
{
	if (kind != CONN_UNHINTED || !notes_rings_hinted() || !cfg ||
	    config_coll_register(cfg) || !config_p2p_off() || config_oob_net() ||
	    atomic_exchange(&notes.unhinted_warned, 1))
		return;
	LOG_WARN("NET/symmem: NCCL made a connection without saying what it carries "
		 "(setNetAttr), though its net v11 table is meant to: user buffers it registers "
		 "on it stay registered, so a registered all_gather or broadcast could run on one "
		 "channel on this rank only; set NCCL_SYMMEM_COLL_REGISTER=1 on every rank, or "
		 "keep collective buffers unregistered (under CUDA graphs also "
		 "NCCL_GRAPH_REGISTER=0)");
}

void notes_declined(void)
{
	if (!atomic_exchange(&notes.decline_announced, 1))
		LOG_INFO("NET/symmem: user buffers NCCL registers for ring collectives stay "
			 "unregistered: with P2P off NCCL would run such a collective on one "
			 "channel; it runs on NCCL's buffers with all its channels instead, and "
			 "send/recv and alltoall stay zero-copy (NCCL_SYMMEM_COLL_REGISTER=1 "
			 "registers them)");
}

void notes_context_opened(void)
{
	atomic_fetch_add(&notes.live_contexts, 1);
}

/* The version of the NCCL in this process (ncclGetVersion, found as
 * NCCL's own symbols are: libnccl.so.2 linked or opened RTLD_GLOBAL),
 * 0 when none answers. */
static int nccl_version(void)
{
	void *sym = dlsym(RTLD_DEFAULT, "ncclGetVersion");
	int (*get)(int *);
	int v = 0;

	if (!sym)
		return 0;
	memcpy(&get, &sym, sizeof(get));
	return get(&v) == 0 ? v : 0;
}

/* NCCL 2.28 unloads an external net plugin with the process's last
 * communicator and clears its name, so the next ncclCommInitRank looks for
 * libnccl-net.so instead (bench/results/failures.md, run 8).  Said at
 * INFO, and only where ncclGetVersion says 2.28: it explains the "Failed
 * to initialize any NET plugin" that may follow.  Other NCCL versions, or
 * one whose version cannot be read, get no line at every job's end. */
void notes_context_closed(void)
{
	const struct config *cfg;
	int v;

	if (atomic_fetch_sub(&notes.live_contexts, 1) != 1)
		return;
	cfg = config_get();
	if (!cfg || cfg->kept_loaded)
		return;
	v = nccl_version();
	if (v < 22800 || v >= 22900)
		return;
	LOG_INFO("NET/symmem: the last communicator of this process is gone: NCCL 2.28 unloads "
		 "the plugin now and forgets NCCL_NET_PLUGIN, so a later ncclCommInitRank in this "
		 "process does not find it; NCCL_NET_PLUGIN_REF_COUNT=1, set before the job "
		 "starts, keeps it loaded");
}
