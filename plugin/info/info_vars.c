/* Every variable the plugin reads: its value, where the value came from
 * (the user, the env plugin, the net plugin's own defaults, or the
 * default) and what it means now.  The plugin's own variables come from
 * config.c's table (config_describe), each parsed alone as well, so that
 * every malformed one shows with the error text the plugin's init would
 * give for it; NCCL's variables that the plugin reads or sets are listed
 * below. */
#include <stdlib.h>
#include <string.h>

#include "info.h"

#define MAX_VARS 96

struct meaning {
	const char *name;
	const char *text;	/* for any value */
	struct {
		const char *value;
		const char *text;
	} when[4];		/* for these values */
};

/* The same meaning at every value; by value (`t` for any other). */
#define ANY(n, t) { .name = n, .text = t }
#define BY(n, t, ...) { .name = n, .text = t, .when = { __VA_ARGS__ } }

/* What each variable means at a value, in a line (docs/env.md says
 * more).  A variable missing here shows "(no description)", which the
 * tests catch. */
static const struct meaning meanings[] = {
	BY("NCCL_PASS_SM", NULL,
	   { "0", "off: NCCL picks its collective channels" },
	   { "1", "SM-saving mode: the tuner caps collective channels at "
		  "NCCL_SYMMEM_PASS_SM_CHANNELS" }),
	BY("NCCL_CUMEM_ENABLE", NULL,
	   { "-1", "auto (NCCL's default): cuMem buffers, shared as POSIX fds" },
	   { "0", "cudaMalloc buffers, shared as legacy IPC handles; the staging pool too" },
	   { "1", "cuMem buffers, shared as POSIX fds" }),
	BY("NCCL_CUMEM_HOST_ENABLE", "host staging in a shared memfd the copy helper maps",
	   { "1", "host staging in cuMem host memory pinned on the GPU's NUMA node" }),
	ANY("NCCL_CUMEM_POOL_SIZE", "the staging pool's first segment (one pool per GPU and "
	    "process)"),
	BY("NCCL_CUMEM_PREALLOC", NULL,
	   { "0", "the pool's first segment is made at first use" },
	   { "1", "the pool's first segment is made when the first receiving connection opens" }),
	ANY("NCCL_CUMEM_GROWTH_FACTOR", "each further pool segment is this many times the last"),
	ANY("NCCL_CUMEM_MAX_SIZE", "the staging pool never holds more (per GPU and process)"),
	ANY("NCCL_CUMEM_TRIM_THRESHOLD", "idle pool segments go back while more than this is idle"),
	BY("NCCL_CUMEM_MONITOR", NULL,
	   { "0", "no periodic traffic lines" },
	   { "1", "each connection logs its traffic once per interval" }),
	ANY("NCCL_CUMEM_MONITOR_INTERVAL", "seconds between NCCL_CUMEM_MONITOR lines"),
	BY("NCCL_SM_FREE_VERBOSE", NULL,
	   { "0", "the log shows the variables you set and the decisions that matter" },
	   { "1", "the log shows every variable, path decision and connection" }),
	BY("NCCL_ZERO_COPY", NULL,
	   { "0", "every GPU receive goes through the staging pool (two copies)" },
	   { "1", "copy engines write straight into registered receive buffers" }),
	BY("NCCL_DMA_ENABLE", NULL,
	   { "0", "one host-memory device, NCCL_PTR_HOST only" },
	   { "1", "GPU buffers are moved by copy engines" }),
	BY("NCCL_DIRECT_PATH", NULL,
	   { "0", "GPU data bounces through the shared-memory ring (GPUs that cannot map each "
		  "other)" },
	   { "1", "GPUs write into each other's buffers through peer mappings" }),
	BY("NCCL_ENABLE_FAULT_TOLERANCE", NULL,
	   { "0", "the first connect failure is the error" },
	   { "1", "an unreachable listener is tried again until NCCL_SYMMEM_CONNECT_TIMEOUT" }),
	BY("NCCL_IB_HCA", "the RDMA devices the ibverbs backend may use",
	   { "", "every RDMA device" }),
	BY("NCCL_IB_GID_INDEX", "the GID index the queue pairs use",
	   { "-1", "the GID is picked per port (RoCE v2 with an IPv4 address first)" }),
	ANY("NCCL_IB_TIMEOUT", "ibverbs retry timeout, 4.096 us x 2^value"),
	ANY("NCCL_IB_RETRY_CNT", "ibverbs retries"),
	ANY("NCCL_IB_SL", "ibverbs service level"),
	ANY("NCCL_IB_TC", "ibverbs traffic class"),
	BY("NCCL_SOCKET_IFNAME", "the interfaces whose address the TCP listener publishes",
	   { "", "the first usable interface" }),
	ANY("NCCL_SYMMEM_STREAMS", "copy-engine streams per GPU and process"),
	ANY("NCCL_SYMMEM_CHUNK_SIZE", "copy granularity in the shared-memory ring"),
	BY("NCCL_SYMMEM_SPLIT_SIZE", "in-process copies this large are split over the streams",
	   { "0", "in-process copies are never split" }),
	ANY("NCCL_SYMMEM_COPY_DEPTH", "copies the copy helper queues per stream"),
	BY("NCCL_SYMMEM_MERGE_SIZE", "the most bytes one copy-engine call moves (consecutive "
	   "requests merged)",
	   { "0", "no merging: one copy per request" }),
	ANY("NCCL_SYMMEM_BATCH", "copies one batch call carries at most"),
	BY("NCCL_SYMMEM_PHASE_US", "with 3 or more GPUs the copy helpers serve one destination "
	   "distance at a time, this many us each",
	   { "0", "copies run in NCCL's order" }),
	BY("NCCL_SYMMEM_LANDING_WORDS", "how the copy helper tells a copy landed",
	   { "1", "a word in host memory the GPU writes after the copy; the plugin polls it" },
	   { "0", "an event the helper queries; the plugin then reads the request's state" }),
	BY("NCCL_SYMMEM_HOST_IN_PLACE", "how a GPU sender reaches a host receive buffer",
	   { "1", "its copy engine writes the buffer in place where the driver can export it" },
	   { "0", "through the shared-memory ring" }),
	ANY("NCCL_SYMMEM_HOST_RING_SIZE", "shared-memory ring per connection for host-memory "
	    "buffers"),
	ANY("NCCL_SYMMEM_CONNECT_TIMEOUT", "seconds a connect or accept may take"),
	ANY("NCCL_SYMMEM_STALL_REPORT", "seconds without progress before a connection is reported"),
	ANY("NCCL_SYMMEM_COPY_TIMEOUT", "seconds a copy may take before its connection fails"),
	BY("NCCL_SYMMEM_TRACE_US", "messages slower than this many us are logged",
	   { "0", "off" }),
	BY("NCCL_SYMMEM_BACKEND", NULL,
	   { "auto", "copy engines and shared memory on one host; ibverbs or TCP between hosts "
		     "(or NCCL_SYMMEM_INNER_NET)" },
	   { "shm", "one host only: connections to other hosts are refused" },
	   { "tcp", "TCP for every connection, one host too" },
	   { "ib", "ibverbs for every connection, one host too (host memory only)" }),
	ANY("NCCL_SYMMEM_PASS_SM_CHANNELS", "the channel cap of NCCL_PASS_SM=1"),
	BY("NCCL_SYMMEM_LL128_CHUNK", "inside a host, Ring LL128 instead of Simple while a rank's "
	   "share per channel is at most this",
	   { "0", "NCCL's protocol choice" }),
	BY("NCCL_SYMMEM_LL_MAX", "between hosts, all_reduce and broadcast larger than this leave "
	   "LL for Simple",
	   { "0", "NCCL's protocol choice" }),
	BY("NCCL_SYMMEM_NCCL_DEFAULTS", NULL,
	   { "0", "the plugin sets no NCCL variable" },
	   { "1", "the plugin sets the NCCL variables its path needs, where unset" }),
	BY("NCCL_SYMMEM_COPY_HELPER", NULL,
	   { "0", "copies run in NCCL's process (CUDA-graph replays that queue up deadlock)" },
	   { "1", "copies run in symmem-copyd, a helper process per GPU" }),
	BY("NCCL_SYMMEM_COPY_HELPER_PATH", "the copy helper to start",
	   { "", "the helper beside the library, else in the install's libexec" }),
	BY("NCCL_SYMMEM_HELPER_ALL_GPUS", NULL,
	   { "0", "the copy helper keeps CUDA_VISIBLE_DEVICES" },
	   { "1", "the copy helper starts without a CUDA_VISIBLE_DEVICES of whole GPUs, so it "
		  "sees the GPUs it copies into" }),
	BY("NCCL_SYMMEM_COLL_REGISTER", NULL,
	   { "-1", "auto: user buffers on ring connections are registered with NCCL_PASS_SM=1 "
		   "only" },
	   { "0", "user buffers on ring connections are declined" },
	   { "1", "user buffers on ring connections are registered" }),
	BY("NCCL_SYMMEM_INNER_NET", "the net plugin that carries every connection to another host",
	   { "", "none: the plugin's own ibverbs or TCP reach other hosts" }),
};

/* NCCL's variables the plugin reads or sets, and what they do for it. */
static const struct meaning nccl_vars[] = {
	ANY("NCCL_ENV_PLUGIN", "the env plugin NCCL loads (symmem: this project's, which sets the "
	    "routing variables)"),
	ANY("NCCL_NET_PLUGIN", "the net plugin NCCL opens"),
	ANY("NCCL_NET", "the net NCCL must use (symmem: this plugin, or the job fails)"),
	ANY("NCCL_P2P_DISABLE", "non-zero: GPU traffic of a host goes through the net, every GPU a "
	    "node of its own"),
	ANY("NCCL_SHM_DISABLE", "non-zero: NCCL's shared-memory transport is off"),
	ANY("NCCL_NET_PLUGIN_REF_COUNT", "a positive integer keeps NCCL from unloading the plugin"),
	ANY("NCCL_NCHANNELS_PER_NET_PEER", "channels per peer for send/recv and alltoall"),
	ANY("NCCL_NET_GDR_LEVEL", "PHB or SYS: NCCL hands the plugin GPU buffers"),
	ANY("NCCL_PROTO", "the protocols NCCL may use"),
	ANY("NCCL_ALGO", "the algorithms NCCL may use"),
	ANY("NCCL_MIN_NCHANNELS", "NCCL's minimum of channels"),
	ANY("NCCL_MIN_NRINGS", "NCCL's older name of its minimum of channels"),
	ANY("NCCL_MAX_NCHANNELS", "NCCL's maximum of channels"),
	ANY("NCCL_MAX_NRINGS", "NCCL's older name of its maximum of channels"),
	ANY("NCCL_MIN_CTAS", "NCCL's minimum of CTAs"),
	ANY("NCCL_MAX_CTAS", "NCCL's maximum of CTAs"),
	ANY("NCCL_MIN_P2P_NCHANNELS", "NCCL's minimum of send/recv channels"),
	ANY("NCCL_BUFFSIZE", "NCCL's buffer per channel and connection"),
	ANY("NCCL_P2P_NET_CHUNKSIZE", "NCCL's send/recv step through the net"),
	ANY("NCCL_THREAD_THRESHOLDS", "bytes per channel before NCCL opens another"),
	ANY("NCCL_GRAPH_REGISTER", "whether NCCL registers user buffers of CUDA graphs"),
	ANY("NCCL_OOB_NET_ENABLE", "non-zero: NCCL's bootstrap connects through the net plugin"),
	ANY("CUDA_VISIBLE_DEVICES", "the GPUs a process sees (the copy helper starts without a "
	    "list of whole GPUs)"),
};

static const char *meaning_of(const struct meaning *table, size_t n, const char *name,
			      const char *value)
{
	for (size_t i = 0; i < n; i++) {
		const struct meaning *m = &table[i];

		if (strcmp(m->name, name))
			continue;
		for (size_t k = 0; k < sizeof(m->when) / sizeof(m->when[0]) && m->when[k].text; k++)
			if (!strcmp(m->when[k].value, value))
				return m->when[k].text;
		return m->text ? m->text : "(no description for this value)";
	}
	return "(no description)";
}

static const char *env_get(const char *name, void *arg)
{
	(void)arg;
	return getenv(name);
}

/* Only the variable named by `arg`: a parse that sees one variable. */
static const char *only_get(const char *name, void *arg)
{
	return strcmp(name, arg) ? NULL : getenv(name);
}

/* config_describe's lines, "NAME=value (set)" or "NAME=value (default)". */
struct line_set {
	int n;
	char name[MAX_VARS][64];
	char value[MAX_VARS][320];
	int set[MAX_VARS];
};

static void collect(const char *line, void *arg)
{
	struct line_set *ls = arg;
	const char *eq = strchr(line, '='), *paren = strrchr(line, '(');

	if (!eq || !paren || paren < eq + 2 || ls->n >= MAX_VARS)
		return;
	info_say(ls->name[ls->n], sizeof(ls->name[0]), "%.*s", (int)(eq - line), line);
	info_say(ls->value[ls->n], sizeof(ls->value[0]), "%.*s", (int)(paren - 1 - eq - 1), eq + 1);
	ls->set[ls->n] = !strncmp(paren, "(set)", 5);
	ls->n++;
}

/* Parses `name` alone: its value as the plugin shows it, or the error the
 * plugin gives for it.  A variable alone can still fail an order rule
 * against the others' defaults (the pool cap below the pool): that error
 * is not its own and shows at config_error only. */
static void alone(const char *name, char *value, size_t vlen, char *err, size_t elen)
{
	static struct line_set ls;
	struct config cfg;
	size_t n = strlen(name);

	err[0] = '\0';
	if (config_parse(&cfg, only_get, (void *)name, err, elen) && !strncmp(err, name, n) &&
	    !strncmp(err + n, "='", 2)) {
		info_say(value, vlen, "%s", getenv(name));
		return;
	}
	err[0] = '\0';
	ls.n = 0;
	config_describe(&cfg, NULL, NULL, 1, collect, &ls);
	for (int i = 0; i < ls.n; i++)
		if (!strcmp(ls.name[i], name))
			info_say(value, vlen, "%s", ls.value[i]);
}

static void emit_plugin_vars(struct out *o, const struct info_sim *s)
{
	static struct line_set ls;
	char value[320], err[512];

	ls.n = 0;
	config_describe(&s->cfg, env_get, NULL, 1, collect, &ls);
	out_list(o, "variables");
	for (int i = 0; i < ls.n; i++) {
		info_say(value, sizeof(value), "%s", ls.value[i]);
		err[0] = '\0';
		if (ls.set[i])
			alone(ls.name[i], value, sizeof(value), err, sizeof(err));
		out_item(o);
		out_str(o, "name", ls.name[i]);
		out_str(o, "value", value);
		out_str(o, "origin", ls.set[i] ? "user" : "default");
		out_str(o, "meaning", err[0] ? "malformed: the plugin's init fails" :
			meaning_of(meanings, sizeof(meanings) / sizeof(meanings[0]), ls.name[i],
				   value));
		out_str(o, "error", err[0] ? err : NULL);
		out_item_end(o);
	}
	out_list_end(o);
}

/* Whether the env plugin's list "NAME=value ..." holds `name`. */
static int in_list(const char *list, const char *name)
{
	size_t n = strlen(name);

	for (const char *p = list; (p = strstr(p, name)); p += n)
		if ((p == list || p[-1] == ' ') && p[n] == '=')
			return 1;
	return 0;
}

static void emit_nccl_vars(struct out *o, const struct info_sim *s, const struct info_libs *l)
{
	out_list(o, "nccl_variables");
	for (size_t i = 0; i < sizeof(nccl_vars) / sizeof(nccl_vars[0]); i++) {
		const char *name = nccl_vars[i].name, *v = getenv(name);
		const char *origin = v ? "user" : "unset", *why = nccl_vars[i].text;

		for (int k = 0; k < s->ndef; k++) {
			if (strcmp(s->def[k].name, name))
				continue;
			if (s->def[k].applied)
				origin = "net plugin";
			if (s->def[k].why)
				why = s->def[k].why;
		}
		if (v && in_list(l->env_set, name))
			origin = "env plugin";
		out_item(o);
		out_str(o, "name", name);
		out_str(o, "value", v);
		out_str(o, "origin", origin);
		out_str(o, "meaning", why);
		out_item_end(o);
	}
	out_list_end(o);
}

void info_vars_emit(struct out *o, const struct info_sim *s, const struct info_libs *l)
{
	out_str(o, "config_error", s->cfg_ok ? NULL : s->err);
	emit_plugin_vars(o, s);
	emit_nccl_vars(o, s, l);
}
