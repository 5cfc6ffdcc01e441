/* plugin/config/: the one place that reads environment variables.
 *
 * Owns: every variable the product reads (parsed once, logged once), the
 * defaults it sets for NCCL and the env plugin's routing.  Must not touch:
 * NCCL's tables, connections, the CUDA driver: it hands values to the net
 * plugin, the env plugin and symmem-info, and includes nothing of theirs.
 *
 * Every variable the plugin honours is parsed once per process, validated
 * and logged once.  A malformed value makes config_get() fail with one
 * message naming the variable, the value and the accepted form; plugin init
 * turns that into a WARN and an error code.
 *
 * The module, one job per file (this header is its whole public surface):
 *  - config_vars.h: the table, every variable with its kind, default and
 *    range (docs/env.md documents each);
 *  - config_parse.c: the value parser and its error messages;
 *  - config.c: loading, validation, the lines logged once at init;
 *  - config_nccl_defaults.c: what the plugin sets for NCCL, and what
 *    follows from it for the tuner and the backend;
 *  - config_route.c: the env plugin's routing. */
#ifndef SYMMEM_PLUGIN_CONFIG_H
#define SYMMEM_PLUGIN_CONFIG_H

#include <stddef.h>
#include <stdint.h>

/* Tri-state for NCCL's own switches whose default is "auto". */
enum config_tristate {
	CONFIG_AUTO = -1,
	CONFIG_OFF = 0,
	CONFIG_ON = 1,
};

enum config_backend {
	CONFIG_BACKEND_AUTO = 0,	/* shared memory on one host, ibverbs or TCP between hosts */
	CONFIG_BACKEND_SHM,		/* same-host path only */
	CONFIG_BACKEND_TCP,		/* force the TCP data path, also on one host */
	CONFIG_BACKEND_IB,		/* force ibverbs, also on one host (RDMA loopback) */
};

struct config {
	int pass_sm;			/* NCCL_PASS_SM */
	int cumem_enable;		/* NCCL_CUMEM_ENABLE, tristate */
	int cumem_host_enable;		/* NCCL_CUMEM_HOST_ENABLE, tristate */
	uint64_t pool_size;		/* NCCL_CUMEM_POOL_SIZE */
	int pool_prealloc;		/* NCCL_CUMEM_PREALLOC */
	double pool_growth;		/* NCCL_CUMEM_GROWTH_FACTOR, >= 1.0 */
	uint64_t pool_max;		/* NCCL_CUMEM_MAX_SIZE */
	uint64_t pool_trim;		/* NCCL_CUMEM_TRIM_THRESHOLD */
	int monitor;			/* NCCL_CUMEM_MONITOR */
	double monitor_interval;	/* NCCL_CUMEM_MONITOR_INTERVAL, seconds, > 0 */
	int verbose;			/* NCCL_SM_FREE_VERBOSE */
	int zero_copy;			/* NCCL_ZERO_COPY */
	int dma_enable;			/* NCCL_DMA_ENABLE */
	int direct_path;		/* NCCL_DIRECT_PATH */
	int fault_tolerance;		/* NCCL_ENABLE_FAULT_TOLERANCE */
	char ib_hca[256];		/* NCCL_IB_HCA, syntax-checked, empty entries
					 * dropped, "" when unset or no entry */
	int ib_gid_index;		/* NCCL_IB_GID_INDEX, -1 = chosen per port */
	int ib_timeout;			/* NCCL_IB_TIMEOUT, 0..31 (0: no retry timer) */
	int ib_retry;			/* NCCL_IB_RETRY_CNT, 0..7 */
	int ib_sl;			/* NCCL_IB_SL, 0..15 */
	int ib_tc;			/* NCCL_IB_TC, 0..255 */
	char socket_ifname[256];	/* NCCL_SOCKET_IFNAME, as NCCL_IB_HCA */
	int streams;			/* NCCL_SYMMEM_STREAMS, 1..16 */
	uint64_t chunk_size;		/* NCCL_SYMMEM_CHUNK_SIZE */
	uint64_t split_min;		/* NCCL_SYMMEM_SPLIT_SIZE, 0 = never split a copy */
	int copy_depth;			/* NCCL_SYMMEM_COPY_DEPTH: helper copies queued per stream */
	uint64_t merge_max;		/* NCCL_SYMMEM_MERGE_SIZE: largest merged copy, 0 = none */
	int batch;			/* NCCL_SYMMEM_BATCH: copies per copy-engine call at most */
	int phase_us;			/* NCCL_SYMMEM_PHASE_US: helper phase per destination, 0 = off */
	int landing_words;		/* NCCL_SYMMEM_LANDING_WORDS: landings by stream writes */
	int host_in_place;		/* NCCL_SYMMEM_HOST_IN_PLACE: host receives written in place */
	uint64_t host_ring_size;	/* NCCL_SYMMEM_HOST_RING_SIZE */
	double connect_timeout;		/* NCCL_SYMMEM_CONNECT_TIMEOUT, seconds */
	double stall_report;		/* NCCL_SYMMEM_STALL_REPORT, seconds */
	double copy_timeout;		/* NCCL_SYMMEM_COPY_TIMEOUT, seconds */
	int trace_us;			/* NCCL_SYMMEM_TRACE_US: log waits longer, 0 = off */
	int backend;			/* NCCL_SYMMEM_BACKEND, enum config_backend */
	int pass_sm_channels;		/* NCCL_SYMMEM_PASS_SM_CHANNELS, 1..64 */
	uint64_t ll128_chunk;		/* NCCL_SYMMEM_LL128_CHUNK: see config_ll128_chunk() */
	uint64_t ll_max;		/* NCCL_SYMMEM_LL_MAX: see config_ll_max() */
	int nccl_defaults;		/* NCCL_SYMMEM_NCCL_DEFAULTS */
	int copy_helper;		/* NCCL_SYMMEM_COPY_HELPER */
	char copy_helper_path[256];	/* NCCL_SYMMEM_COPY_HELPER_PATH, "" = next to the library */
	int helper_all_gpus;		/* NCCL_SYMMEM_HELPER_ALL_GPUS */
	int coll_register;		/* NCCL_SYMMEM_COLL_REGISTER, tristate: config_coll_register() */
	char inner_net[256];		/* NCCL_SYMMEM_INNER_NET: the net plugin for other hosts,
					 * "" = none (plugin/inner_net.h) */
	char gpus_visible[512];		/* CUDA_VISIBLE_DEVICES when it names whole GPUs only
					 * (no MIG instance), else "": the helper runs without it */
	int ngpus_visible;		/* how many it names (0 with "") */
	int user_proto;			/* NCCL_PROTO was set before the plugin's defaults */
	int kept_loaded;		/* NCCL_NET_PLUGIN_REF_COUNT is a positive integer:
					 * NCCL never unloads the plugin */
	/* NCCL's channel bounds as the user set them, read as NCCL reads
	 * them, before the plugin's defaults: */
	int user_min_channels;		/* NCCL_MIN_NCHANNELS (or _NRINGS), 0..64; -1 unset */
	int user_min_ctas;		/* NCCL_MIN_CTAS, 1..64; 0 unset */
	int user_max_channels;		/* the lowest of NCCL_MAX_NCHANNELS (or _NRINGS) and
					 * NCCL_MAX_CTAS, 1..64; 0 unset */
	int user_min_p2p_channels;	/* NCCL_MIN_P2P_NCHANNELS, 1..64; 0 unset */
	/* NCCL's own variables whose value NCCL runs with but the plugin
	 * read otherwise or could not use ("; "-separated sentences, "" for
	 * none): plugin init logs them in one WARN. */
	char warnings[512];
};

/* Looks a name up; getenv in production, a table in tests. */
typedef const char *(*config_getenv_fn)(const char *name, void *arg);

/* Parses every variable through `get` into `cfg` (defaults first).
 * Returns 0, or -1 with a one-line reason in `err`. */
int config_parse(struct config *cfg, config_getenv_fn get, void *arg, char *err, size_t errlen);

/* Writes one line per variable ("NAME=value (default|set)") through `emit`.
 * `all` = 0 lists only variables that were set. */
void config_describe(const struct config *cfg, config_getenv_fn get, void *arg, int all,
		     void (*emit)(const char *line, void *arg), void *emit_arg);

/* Process-wide configuration, parsed from the real environment on first use.
 * Returns NULL when parsing failed; config_error() then holds the reason. */
const struct config *config_get(void);
const char *config_error(void);

/* Names under NCCL_SYMMEM_ in the environment that the plugin does not know
 * (likely typos), written space-separated into `out`; returns the count. */
int config_unknown_vars(char *out, size_t outlen);

/* Sets the NCCL variables the GPU path needs (NCCL_NET_GDR_LEVEL) where the
 * user left them unset and NCCL_SYMMEM_NCCL_DEFAULTS is on.  `rings_hinted`:
 * NCCL tells the net which connections are rings (net v11, NCCL 2.28 on),
 * so the plugin can decline user buffers on them.  `emit` hears each one:
 * its value now, whether it was set here, and why: why it was set, or for
 * one left unset where the plugin sets it in similar jobs, why not (NULL
 * otherwise).  Returns how many were set.
 * Call only once a GPU path is really offered. */
int config_apply_nccl_defaults(const struct config *cfg, int rings_hinted,
			       void (*emit)(const char *name, const char *value, int applied,
					    const char *why, void *arg),
			       void *arg);

/* The NCCL variables the GPU path wants that only the user can set (NCCL
 * reads them before it loads the plugin): `emit` hears each one left unset,
 * with the value to set and why, when GPU traffic of one host goes through
 * the plugin and NCCL_SYMMEM_NCCL_DEFAULTS is on.  Returns how many. */
int config_nccl_advice(const struct config *cfg,
		       void (*emit)(const char *name, const char *value, const char *why, void *arg),
		       void *arg);

/* The env plugin's part (NCCL_ENV_PLUGIN=symmem, plugin/env_plugin.c):
 * before NCCL reads any variable, sets those the user left unset that
 * route the job's GPU traffic through the net plugin (NCCL_NET_PLUGIN =
 * `net_plugin`, its path, NCCL_NET, NCCL_P2P_DISABLE,
 * NCCL_SHM_DISABLE, NCCL_NET_PLUGIN_REF_COUNT) and, where copy engines
 * carry it, those of config_nccl_advice() (not with
 * NCCL_SYMMEM_NCCL_DEFAULTS=0).  A `net_plugin` NCCL could not use (empty,
 * longer than 254, with a comma) gives NCCL_NET_PLUGIN=symmem.  Sets
 * nothing when the user named another net plugin (or a list) or net.
 * Returns how many it set.  The list ("NAME=value ...") goes into
 * NCCL_SYMMEM_ENV_PLUGIN_SET, since the env plugin and the net plugin are
 * two libraries; config_env_plugin_applied() reads it there ("" for none;
 * in a process that set nothing, what a parent's env plugin set). */
int config_apply_env_plugin_defaults(const char *net_plugin);
const char *config_env_plugin_applied(void);

/* The largest share of a collective per rank and channel the tuner runs
 * as Ring LL128 where NCCL's model picked Ring Simple:
 * NCCL_SYMMEM_LL128_CHUNK when GPU traffic of one host goes through the
 * plugin, the NCCL defaults are on and the user left NCCL_PROTO to NCCL;
 * else 0 (NCCL's choice). */
uint64_t config_ll128_chunk(const struct config *cfg);

/* The largest all_reduce or broadcast between hosts the tuner leaves on
 * LL where NCCL's model picked it (above it, Simple of the same
 * algorithm): NCCL_SYMMEM_LL_MAX when the plugin carries traffic between
 * hosts only (P2P on), the NCCL defaults are on and the user left
 * NCCL_PROTO to NCCL; else 0 (NCCL's choice). */
uint64_t config_ll_max(const struct config *cfg);

/* Whether the plugin registers user buffers on ring and tree connections
 * (plugin/conn_hints.h): NCCL_SYMMEM_COLL_REGISTER=1 yes, 0 no, unset
 * only with NCCL_PASS_SM=1, whose one-channel registered collectives leave
 * compute the most SMs.  Returns 1 or 0. */
int config_coll_register(const struct config *cfg);

/* NCCL_P2P_DISABLE read as NCCL reads it, non-zero: GPU traffic of a host
 * goes through the net, and NCCL counts every GPU as a node of its own. */
int config_p2p_off(void);

/* NCCL_OOB_NET_ENABLE read as NCCL reads it, non-zero: NCCL's bootstrap
 * makes its own connections through the net plugin, without hints. */
int config_oob_net(void);

/* How many channels NCCL opens for a ring on the intra-host path: the
 * plugin's NCCL_MIN_NCHANNELS default where it sets one (32, lowered to
 * the user's NCCL_MAX_CTAS or NCCL_MAX_NCHANNELS where those are lower),
 * NCCL's own 4 where it does not (NCCL_SYMMEM_BACKEND=tcp or ib,
 * NCCL_SYMMEM_NCCL_DEFAULTS=0), or the user's own bounds, combined as
 * NCCL combines them. */
int config_ring_channels(const struct config *cfg);

/* The ibverbs backend between hosts: 2 = required (NCCL_SYMMEM_BACKEND=ib),
 * 1 = where both ends have an RDMA device, else TCP (auto, while NCCL
 * stages in host memory between hosts), 0 = never (tcp or shm, or NCCL
 * may hand over GPU buffers, which it carries only over TCP). */
int config_ib_mode(const struct config *cfg);

/* Why connections to other hosts pass over this host's RDMA devices under
 * NCCL_SYMMEM_BACKEND=auto (they carry GPU buffers, which only TCP
 * takes), or NULL where they do not. */
const char *config_rdma_passed_over(const struct config *cfg);

/* How many whole GPUs CUDA_VISIBLE_DEVICES (NULL: unset) shows a process
 * when it lists whole GPUs only, as a scheduler's per-task binding does
 * (indices or GPU- UUIDs); 0 when it is unset or empty, names a MIG
 * instance, or holds an entry CUDA would stop at (negative or empty).
 * With one, every peer GPU is hidden from the process; with more, some
 * may be. */
int config_visible_gpus(const char *cuda_visible_devices);

/* Parsers, exposed for the unit tests. Each returns 0 or -1. */
int config_parse_size(const char *s, uint64_t *out);
int config_parse_bool(const char *s, int *out);

#endif
