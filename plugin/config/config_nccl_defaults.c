/* The NCCL-defaults policy: which of NCCL's variables the net plugin sets
 * when it carries a job's GPU traffic (config_apply_nccl_defaults), which
 * it can only name in the log (config_nccl_advice), and what follows from
 * them for the tuner and the backend between hosts.
 *
 * Each choice keeps its reason in a comment here; the measurements behind
 * them are in docs/performance.md ("Figures behind the defaults"). */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "config_internal.h"

/* ---- where the host's GPU traffic goes ----------------------------------- */

/* GPU traffic of one host goes through the plugin (config_p2p_off()) and
 * the plugin's copy engines carry it.  With NCCL_SYMMEM_BACKEND=tcp
 * sockets do (with =ib, RDMA loopback), as between hosts, and NCCL's own
 * channel sizing fits them better than the plugin's. */
static int intra_host_by_copy_engine(const struct config *cfg)
{
	return config_p2p_off() && cfg->backend != CONFIG_BACKEND_TCP &&
	       cfg->backend != CONFIG_BACKEND_IB;
}

/* NCCL hands a net plugin GPU buffers when the GPU-to-device path is no
 * longer than NCCL_NET_GDR_LEVEL.  The plugin's devices have no PCI path,
 * so NCCL places them at the CPU (PHB or SYS from the GPU): only PHB, SYS
 * or a number (whose meaning changed between NCCL versions, so it is
 * taken as "maybe") let GPU buffers through.  Read when connections are
 * made, after the plugin's own defaults (config_apply_nccl_defaults). */
static int gpu_buffers_between_hosts(void)
{
	const char *v = getenv("NCCL_NET_GDR_LEVEL");

	if (!v || !*v)
		return 0;
	return !strcasecmp(v, "PHB") || !strcasecmp(v, "SYS") || (*v >= '0' && *v <= '9');
}

/* With P2P off (every GPU its own node), whether NCCL hands the plugin GPU
 * buffers: not with NCCL_SYMMEM_BACKEND=ib (it advertises host memory
 * only), and only where NCCL_NET_GDR_LEVEL lets them through: PHB, SYS or
 * a number of the user's, or unset, which the plugin's own default makes
 * SYS (the row before NCCL_PROTO; none of them with the defaults off). */
static int intra_host_gpu_buffers(const struct config *cfg)
{
	if (cfg->backend == CONFIG_BACKEND_IB)
		return 0;
	if (!getenv("NCCL_NET_GDR_LEVEL"))
		return cfg->nccl_defaults;
	return gpu_buffers_between_hosts();
}

/* Why an INTRA_HOST_GPU_BUFFERS default is left unset on the intra-host
 * path, for the log: NCCL_PROTO there is the one users look for. */
static const char *gpu_buffers_left_why(const struct config *cfg)
{
	if (cfg->backend == CONFIG_BACKEND_IB)
		return "NCCL_SYMMEM_BACKEND=ib carries host memory only, so NCCL stages this path in "
		       "host memory; NCCL's own LL128 safety rule and LL stay (any NCCL_PROTO value "
		       "turns that rule off)";
	return "NCCL_NET_GDR_LEVEL (yours, below PHB) makes NCCL stage this path in host memory; "
	       "NCCL's own LL128 safety rule and LL stay (any NCCL_PROTO value turns that rule off)";
}

/* ---- channels ------------------------------------------------------------ */

/* The plugin's NCCL_MIN_NCHANNELS: 32, or the user's cap where that is
 * lower.  NCCL applies its maximum (NCCL_MAX_NCHANNELS, NCCL_MAX_CTAS)
 * first and then copies channels up to the minimum (ncclTopoPostset in
 * its graph/connect.cc), so a minimum above the user's cap would
 * silently override it and launch 32 CTAs where the user allowed, say, 8. */
#define PLUGIN_MIN_CHANNELS 32

/* NCCL's bound on channels, to which it clamps every minimum and maximum. */
#define NCCL_MAX_CHANNELS 64

/* The channels NCCL sizes its rings to on the intra-host path before any
 * minimum: with P2P off it plans them from the GPU-CPU-GPU path. */
#define NCCL_OWN_RING_CHANNELS 4

static int plugin_min_channels(const struct config *cfg)
{
	if (cfg->user_max_channels && cfg->user_max_channels < PLUGIN_MIN_CHANNELS)
		return cfg->user_max_channels;
	return PLUGIN_MIN_CHANNELS;
}

/* NULL where the user set a minimum of their own (NCCL_MIN_NRINGS, which
 * a NCCL_MIN_NCHANNELS of the plugin's would override). */
static const char *min_channels_value(const struct config *cfg, char *buf, size_t len)
{
	if (cfg->user_min_channels >= 0)
		return NULL;
	snprintf(buf, len, "%d", plugin_min_channels(cfg));
	return buf;
}

/* NCCL sizes the pool of send/recv buffers it shares among a process's
 * peers as an int: p2p channels x 16 steps x NCCL_P2P_NET_CHUNKSIZE
 * (sharedNetBuffersInit, net.cc).  With 64 p2p channels, 2 MiB steps make
 * it 2 GiB, one past INT_MAX, and NCCL's allocation fails before any op.
 * NCCL rounds its p2p channels up to a power of two, so any minimum above
 * 32 means 64: 1 MiB steps there. */
#define P2P_CHUNK_BYTES (2 << 20)
#define P2P_CHUNK_BYTES_AT_64 (1 << 20)

static const char *p2p_chunk_value(const struct config *cfg, char *buf, size_t len)
{
	int lo = cfg->user_min_channels;

	/* A minimum wins over NCCL's maxima (user_min_ctas is already
	 * lowered to NCCL_MAX_CTAS, as NCCL does). */
	if (cfg->user_min_ctas > lo)
		lo = cfg->user_min_ctas;
	if (cfg->user_min_p2p_channels > lo)
		lo = cfg->user_min_p2p_channels;
	snprintf(buf, len, "%d", lo > 32 ? P2P_CHUNK_BYTES_AT_64 : P2P_CHUNK_BYTES);
	return buf;
}

int config_ring_channels(const struct config *cfg)
{
	int lo, hi, n;

	/* The plugin's minimum counts only where it sets it (copy engines
	 * with its NCCL defaults); with P2P on NCCL's rings inside a host are
	 * its own, and the minimum stands for "no bound from here". */
	if (cfg->user_min_channels >= 0)
		lo = cfg->user_min_channels;
	else if (!config_p2p_off() || (cfg->nccl_defaults && intra_host_by_copy_engine(cfg)))
		lo = plugin_min_channels(cfg);
	else
		lo = 0;		/* tcp, ib or no defaults: NCCL's own rings */
	if (cfg->user_min_ctas > lo)
		lo = cfg->user_min_ctas;
	hi = cfg->user_max_channels ? cfg->user_max_channels : NCCL_MAX_CHANNELS;
	n = NCCL_OWN_RING_CHANNELS < hi ? NCCL_OWN_RING_CHANNELS : hi;
	return n > lo ? n : lo;
}

int config_coll_register(const struct config *cfg)
{
	if (cfg->coll_register == CONFIG_AUTO)
		return cfg->pass_sm != 0;
	return cfg->coll_register == CONFIG_ON;
}

/* ---- the defaults -------------------------------------------------------- */

/* When a default of nccl_defaults[] applies. */
enum default_when {
	INTRA_HOST,		/* GPU traffic of one host goes through the plugin */
	INTRA_HOST_RINGS_KEPT,	/* that, NCCL_PASS_SM off, and the net keeps ring registrations */
	INTRA_HOST_CE,		/* that, carried by copy engines (not NCCL_SYMMEM_BACKEND=tcp) */
	INTRA_HOST_OR_PASS_SM,	/* that, or NCCL_PASS_SM asks for zero-copy user buffers */
	INTRA_HOST_GPU_BUFFERS,	/* that, and NCCL hands the plugin GPU buffers there */
};

/* NCCL settings the copy-engine path needs.  NCCL reads each of these when
 * it first needs it, after the plugin's init, so a value set here still
 * counts; a value the user set always wins.  INTRA_HOST ones answer what
 * NCCL does when the user routes traffic between GPUs of one host through
 * the plugin (NCCL_P2P_DISABLE=1, the documented way: every GPU becomes a
 * node of its own); INTRA_HOST_CE ones size NCCL's channels and steps for
 * the copy engines that then carry it, and are left out with
 * NCCL_SYMMEM_BACKEND=tcp or ib.  Jobs that use the plugin between hosts
 * only keep NCCL's own sizing. */
static const struct {
	const char *name;
	const char *value;
	enum default_when when;
	const char *why;
	/* For a value that depends on the user's settings (`value` NULL):
	 * writes it into buf, or returns NULL to leave the variable alone. */
	const char *(*value_for)(const struct config *cfg, char *buf, size_t len);
} nccl_defaults[] = {
	/* Not in jobs that use the plugin between hosts only, without
	 * NCCL_PASS_SM: there the plugin's TCP path would move NCCL's GPU
	 * buffers through its pinned slots, a copy-engine hop on each side,
	 * where NCCL's kernels write and read host buffers themselves, which
	 * was faster.  NCCL_PASS_SM keeps it: its registered send/recv and
	 * alltoall then go from the user's buffers with no kernel copy,
	 * which needs NCCL to hand the plugin GPU memory. */
	/* Never with an inner net plugin: NCCL then sees the cluster's NICs,
	 * with their PCI paths, and its own rule (GPU buffers where the NIC
	 * is close enough to the GPU) is the one those NICs need; SYS would
	 * hand a NIC across the CPUs' link GPU memory too.  NCCL decides per
	 * GPU and NIC, not per peer, so this host's connections through the
	 * plugin get GPU buffers (the copy engines) on the NICs close to
	 * their GPU and host buffers (the shared-memory ring: right, slower)
	 * on the others (docs/multi-node.md). */
	{ "NCCL_NET_GDR_LEVEL", "SYS", INTRA_HOST_OR_PASS_SM,
	  "the plugin's devices are GPUs' copy engines, not PCI NICs; NCCL places them at the "
	  "CPU and would otherwise stage GPU buffers in host memory (which it does, faster, "
	  "for jobs that use the plugin between hosts only)",
	  NULL },
	/* Only where GPU traffic of one host goes through the plugin.  Any
	 * NCCL_PROTO value turns NCCL's own LL128 safety rule off (tuning.cc:
	 * a listed or not-excluded protocol is forced on, where the default
	 * enables LL128 only on paths NCCL knows to be safe, e.g. not over
	 * PCIe peer links), so setting it in jobs that use the plugin only
	 * between hosts would force LL128 onto their intra-host P2P and SHM
	 * paths and would take LL from their small messages.  On the
	 * copy-engine path LL128 was checked element by element and the
	 * tuner's LL128 rule needs it.  The same holds within a host: only
	 * where NCCL hands the plugin GPU buffers that copy engines fill
	 * (intra_host_gpu_buffers()).  Where NCCL stages in host memory
	 * (NCCL_SYMMEM_BACKEND=ib, or the user's NCCL_NET_GDR_LEVEL below PHB)
	 * LL128 through the plugin was never checked, so NCCL's own gate and
	 * LL stay (gpu_buffers_left_why()). */
	{ "NCCL_PROTO", "^LL", INTRA_HOST_GPU_BUFFERS,
	  "LL keeps its send buffers in host memory, so every LL step is a host-to-GPU copy; "
	  "on this path LL ran far below native from 128 KiB up, and small messages gained "
	  "nothing over LL128", NULL },
	/* With P2P off NCCL sizes its rings from the GPU-CPU-GPU path and
	 * opens 4 channels, 2 per peer for send/recv, each a chain of copies
	 * with a fixed cost between them; more channels and larger steps keep
	 * more copies in flight. */
	{ "NCCL_MIN_NCHANNELS", NULL, INTRA_HOST_CE,
	  "with P2P off NCCL opens 4 channels for the plugin; 32 keep enough copies in flight "
	  "(with the two below); lowered to NCCL_MAX_CTAS or NCCL_MAX_NCHANNELS where those are "
	  "lower, since NCCL's minimum overrides its maximum",
	  min_channels_value },
	/* NCCL_NCHANNELS_PER_NET_PEER=16 is not here: NCCL reads it before it
	 * loads the plugin, so setting it here changes nothing.  The env
	 * plugin sets it (config_apply_env_plugin_defaults), else the user
	 * must; nccl_advice below says so in the log when it is unset. */
	{ "NCCL_BUFFSIZE", "16777216", INTRA_HOST_CE,
	  "16 MiB per channel and connection: fewer, larger copies (about 1 GiB of GPU memory "
	  "per GPU for 32 ring channels)", NULL },
	{ "NCCL_P2P_NET_CHUNKSIZE", NULL, INTRA_HOST_CE,
	  "2 MiB send/recv steps instead of 128 KiB (1 MiB where NCCL opens 64 send/recv "
	  "channels: its shared buffer pool would overflow)", p2p_chunk_value },
	/* NCCL spreads a collective over every channel from a few KiB up
	 * (ring or tree, threads x threshold bytes per channel: 512 x 64 for
	 * Simple, 640 x 8 for LL128).  Each channel's steps are copies of
	 * their own, each with a fixed cost on the engine, so the plugin asks
	 * for one channel per SMFREE_CHANNEL_BYTES (1 MiB): 2048 x 512 for
	 * Simple, 1638 x 640 for LL128, for tree and ring; LL (-1) keeps
	 * NCCL's.  test_config checks the numbers against the constant. */
	{ "NCCL_THREAD_THRESHOLDS", "-1 1638 2048 -1 1638 2048", INTRA_HOST_CE,
	  "one channel per MiB of a collective instead of all 32 from 32 KiB: each channel's "
	  "steps are separate copy-engine copies, each with a fixed cost", NULL },
	/* With P2P off NCCL counts every GPU as a node of its own (its log:
	 * "nNodes 4 localRanks 1"), and for such one-rank-per-node
	 * communicators its coll_reg.cc runs a ring all_gather or broadcast
	 * whose buffers it registered with the net on one channel
	 * (nMaxChannels = 1), with each send waiting for the receiver's
	 * irecv.  Under CUDA graphs NCCL registers the buffers by itself.
	 * Where NCCL says which connections are rings (net v11, NCCL 2.28:
	 * conn_hints.c) the plugin declines user buffers on them, so graph
	 * registration then only makes send/recv and alltoall zero-copy,
	 * which is a gain.  So the variable is set only where ring
	 * registrations are kept: NCCL before 2.28 (no hints) or
	 * NCCL_SYMMEM_COLL_REGISTER=1.  NCCL_PASS_SM=1 keeps the registration:
	 * its send/recv and alltoall go zero-copy from the user's buffers,
	 * which is the point of that mode.  Explicit ncclCommRegister
	 * (NCCL_LOCAL_REGISTER) is the user's choice and stays. */
	{ "NCCL_GRAPH_REGISTER", "0", INTRA_HOST_RINGS_KEPT,
	  "NCCL runs a graph-captured all_gather or broadcast whose buffers it registered on one "
	  "channel when each GPU is its own node, and this net keeps such registrations (NCCL "
	  "before 2.28 or NCCL_SYMMEM_COLL_REGISTER=1); graph-captured send/recv then go through "
	  "NCCL's buffers", NULL },
	/* Every GPU its own node also makes NCCL pick PAT (its algorithm for
	 * one GPU per host) for all_gather and reduce_scatter of up to 128 KiB
	 * per rank.  Through the copy engines its many small steps took
	 * several times as long as Ring.  Ring and Tree stay NCCL's choice. */
	{ "NCCL_ALGO", "^PAT", INTRA_HOST,
	  "with each GPU its own node NCCL runs all_gather and reduce_scatter of up to 128 KiB "
	  "per rank with PAT, whose small steps through the copy engines take several times as "
	  "long as Ring", NULL },
	/* NCCL_NET_SHARED_BUFFERS=0 is not here either.  With shared buffers
	 * NCCL gives the peers of one channel alternate slots of a common
	 * pool (net.cc: slot * nsubs + sub), so the steps of a connection are
	 * not adjacent and the helper cannot merge them; turning them off
	 * sped up alltoall, but NCCL 2.28.3 then crashed in its own code on
	 * every run with registered buffers or CUDA graphs. */
};

/* NCCL variables the GPU path wants that NCCL reads before it loads the
 * net plugin: only the env plugin (config_apply_env_plugin_defaults) or
 * the user can set them, and the log names them when GPU traffic of one
 * host goes through the plugin and they are still unset. */
static const struct {
	const char *name;
	const char *value;
	const char *why;
} nccl_advice[] = {
	{ "NCCL_NCHANNELS_PER_NET_PEER", "16",
	  "without it NCCL gives send/recv and alltoall 2 channels per peer on this path, "
	  "which leaves them far below native" },
};

int config_apply_nccl_defaults(const struct config *cfg, int rings_hinted,
			       void (*emit)(const char *name, const char *value, int applied,
					    const char *why, void *arg),
			       void *arg)
{
	int applied = 0, intra = config_p2p_off(), by_ce = intra_host_by_copy_engine(cfg);
	int rings_kept = !rings_hinted || config_coll_register(cfg);
	char set[512] = "";
	size_t used = 0;

	for (size_t i = 0; i < sizeof(nccl_defaults) / sizeof(nccl_defaults[0]); i++) {
		const char *name = nccl_defaults[i].name;
		/* Set by an earlier init of the plugin: counts as unset. */
		const char *cur = config_user_value(config_env_get, NULL, name);
		const char *value = nccl_defaults[i].value;
		enum default_when when = nccl_defaults[i].when;
		/* Asked here, after the rows before it: NCCL_NET_GDR_LEVEL first. */
		int gpu = when == INTRA_HOST_GPU_BUFFERS && intra && intra_host_gpu_buffers(cfg);
		int fits = (when == INTRA_HOST && intra) ||
			   (when == INTRA_HOST_RINGS_KEPT && intra && !cfg->pass_sm && rings_kept) ||
			   (when == INTRA_HOST_CE && by_ce) ||
			   (when == INTRA_HOST_OR_PASS_SM && (intra || cfg->pass_sm) &&
			    !cfg->inner_net[0]) || gpu;
		const char *left_why = NULL;
		char buf[32];
		int apply;

		if (nccl_defaults[i].value_for)
			value = nccl_defaults[i].value_for(cfg, buf, sizeof(buf));
		apply = cfg->nccl_defaults && !cur && fits && value;
		if (apply && setenv(name, value, 1) == 0)
			applied++;
		else
			apply = 0;
		if (apply)
			used += (size_t)snprintf(set + used, used < sizeof(set) ? sizeof(set) - used : 0,
						 "%s%s=%s", used ? ";" : "", name, value);
		else if (!cur && getenv(name))
			unsetenv(name);	/* an earlier init's default that no longer applies */
		if (!apply && !cur && cfg->nccl_defaults && when == INTRA_HOST_GPU_BUFFERS && intra &&
		    !gpu)
			left_why = gpu_buffers_left_why(cfg);
		if (emit)
			emit(name, apply ? value : cur ? cur : "(unset)", apply,
			     apply ? nccl_defaults[i].why : left_why, arg);
	}
	/* A list cut short would claim a wrong value: then none. */
	if (applied && used < sizeof(set))
		setenv(CONFIG_DEFAULTS_SET, set, 1);
	else if (getenv(CONFIG_DEFAULTS_SET))
		unsetenv(CONFIG_DEFAULTS_SET);
	return applied;
}

/* With NCCL_PASS_SM=1 the channels per peer are the user's call: NCCL's
 * 2 run registered send/recv about as fast as 1 does, and 16 would put 16
 * CTAs per peer on the SMs the mode is there to give back (README,
 * issue 4). */
int config_advice_wanted(const struct config *cfg)
{
	return cfg->nccl_defaults && !cfg->pass_sm && intra_host_by_copy_engine(cfg);
}

void config_advice_each(void (*fn)(const char *name, const char *value, void *arg), void *arg)
{
	for (size_t i = 0; i < sizeof(nccl_advice) / sizeof(nccl_advice[0]); i++)
		fn(nccl_advice[i].name, nccl_advice[i].value, arg);
}

int config_nccl_advice(const struct config *cfg,
		       void (*emit)(const char *name, const char *value, const char *why, void *arg),
		       void *arg)
{
	int count = 0;

	if (!config_advice_wanted(cfg))
		return 0;
	for (size_t i = 0; i < sizeof(nccl_advice) / sizeof(nccl_advice[0]); i++) {
		if (getenv(nccl_advice[i].name))
			continue;
		count++;
		if (emit)
			emit(nccl_advice[i].name, nccl_advice[i].value, nccl_advice[i].why, arg);
	}
	return count;
}

/* ---- what follows for the tuner and the backend --------------------------- */

/* Measured, and LL128 checked, only where copy engines fill GPU buffers
 * under the plugin's NCCL_PROTO=^LL: not where NCCL stages in host memory. */
uint64_t config_ll128_chunk(const struct config *cfg)
{
	if (!cfg->nccl_defaults || cfg->user_proto || !intra_host_by_copy_engine(cfg) ||
	    !intra_host_gpu_buffers(cfg))
		return 0;
	return cfg->ll128_chunk;
}

uint64_t config_ll_max(const struct config *cfg)
{
	/* With P2P off the plugin's own NCCL_PROTO=^LL has closed LL, or,
	 * where NCCL stages in host memory, LL is NCCL's choice: the rule was
	 * measured between hosts with P2P on only. */
	if (!cfg->nccl_defaults || cfg->user_proto || config_p2p_off())
		return 0;
	return cfg->ll_max;
}

int config_ib_mode(const struct config *cfg)
{
	if (cfg->backend == CONFIG_BACKEND_IB)
		return 2;
	if (cfg->backend != CONFIG_BACKEND_AUTO || gpu_buffers_between_hosts())
		return 0;
	return 1;
}

/* Why, under NCCL_SYMMEM_BACKEND=auto, connections to other hosts leave
 * this host's RDMA devices unused; NULL where they would use them (or the
 * user chose the backend).  NCCL_NET_GDR_LEVEL at PHB, SYS or a number
 * (the plugin's own SYS with NCCL_P2P_DISABLE=1 or NCCL_PASS_SM=1) lets
 * NCCL hand the plugin GPU buffers, which the ibverbs path carries only
 * under NCCL_SYMMEM_BACKEND=ib: GPU traffic between hosts then goes over
 * TCP. */
const char *config_rdma_passed_over(const struct config *cfg)
{
	/* Under auto, config_ib_mode() is 0 for this reason alone. */
	if (cfg->backend != CONFIG_BACKEND_AUTO || config_ib_mode(cfg) != 0)
		return NULL;
	return "NCCL hands the plugin GPU buffers (NCCL_NET_GDR_LEVEL), and its ibverbs path "
	       "carries them only under NCCL_SYMMEM_BACKEND=ib (GPUDirect RDMA through DMA-BUF)";
}
