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

/* What each variable means at a value, in a line: README's table says
 * more.  A variable missing here shows "(no description)", which the
 * tests catch. */
static const struct meaning meanings[] = {
	{ .name = "NCCL_PASS_SM", .text = NULL, { { "0", "off: NCCL picks its collective channels" },
				  { "1", "SM-saving mode: the tuner caps collective channels at "
					 "NCCL_SYMMEM_PASS_SM_CHANNELS" } } },
	{ .name = "NCCL_CUMEM_ENABLE", .text = NULL,
	  { { "-1", "auto (NCCL's default): cuMem buffers, shared as POSIX fds" },
	    { "0", "cudaMalloc buffers, shared as legacy IPC handles; the staging pool too" },
	    { "1", "cuMem buffers, shared as POSIX fds" } } },
	{ .name = "NCCL_CUMEM_HOST_ENABLE", .text = "host staging in a shared memfd the copy helper maps",
	  { { "1", "host staging in cuMem host memory pinned on the GPU's NUMA node" } } },
	{ .name = "NCCL_CUMEM_POOL_SIZE", .text = "the staging pool's first segment (one pool per GPU and process)" },
	{ .name = "NCCL_CUMEM_PREALLOC", .text = NULL, { { "0", "the pool's first segment is made at first use" },
					 { "1", "the pool's first segment is made when the first "
						"receiving connection opens" } } },
	{ .name = "NCCL_CUMEM_GROWTH_FACTOR", .text = "each further pool segment is this many times the last" },
	{ .name = "NCCL_CUMEM_MAX_SIZE", .text = "the staging pool never holds more (per GPU and process)" },
	{ .name = "NCCL_CUMEM_TRIM_THRESHOLD", .text = "idle pool segments go back while more than this is idle" },
	{ .name = "NCCL_CUMEM_MONITOR", .text = NULL, { { "0", "no periodic traffic lines" },
					{ "1", "each connection logs its traffic once per interval" } } },
	{ .name = "NCCL_CUMEM_MONITOR_INTERVAL", .text = "seconds between NCCL_CUMEM_MONITOR lines" },
	{ .name = "NCCL_SM_FREE_VERBOSE", .text = NULL,
	  { { "0", "the log shows the variables you set and the decisions that matter" },
	    { "1", "the log shows every variable, path decision and connection" } } },
	{ .name = "NCCL_ZERO_COPY", .text = NULL,
	  { { "0", "every GPU receive goes through the staging pool (two copies)" },
	    { "1", "copy engines write straight into registered receive buffers" } } },
	{ .name = "NCCL_DMA_ENABLE", .text = NULL,
	  { { "0", "one host-memory device, NCCL_PTR_HOST only" },
	    { "1", "GPU buffers are moved by copy engines" } } },
	{ .name = "NCCL_DIRECT_PATH", .text = NULL,
	  { { "0", "GPU data bounces through the shared-memory ring (GPUs that cannot map each "
		   "other)" },
	    { "1", "GPUs write into each other's buffers through peer mappings" } } },
	{ .name = "NCCL_ENABLE_FAULT_TOLERANCE", .text = NULL,
	  { { "0", "the first connect failure is the error" },
	    { "1", "an unreachable listener is tried again until NCCL_SYMMEM_CONNECT_TIMEOUT" } } },
	{ .name = "NCCL_IB_HCA", .text = "the RDMA devices the ibverbs backend may use", { { "", "every RDMA device" } } },
	{ .name = "NCCL_IB_GID_INDEX", .text = "the GID index the queue pairs use",
	  { { "-1", "the GID is picked per port (RoCE v2 with an IPv4 address first)" } } },
	{ .name = "NCCL_IB_TIMEOUT", .text = "ibverbs retry timeout, 4.096 us x 2^value" },
	{ .name = "NCCL_IB_RETRY_CNT", .text = "ibverbs retries" },
	{ .name = "NCCL_IB_SL", .text = "ibverbs service level" },
	{ .name = "NCCL_IB_TC", .text = "ibverbs traffic class" },
	{ .name = "NCCL_SOCKET_IFNAME", .text = "the interfaces whose address the TCP listener publishes",
	  { { "", "the first usable interface" } } },
	{ .name = "NCCL_SYMMEM_STREAMS", .text = "copy-engine streams per GPU and process" },
	{ .name = "NCCL_SYMMEM_CHUNK_SIZE", .text = "copy granularity in the shared-memory ring" },
	{ .name = "NCCL_SYMMEM_SPLIT_SIZE", .text = "in-process copies this large are split over the streams",
	  { { "0", "in-process copies are never split" } } },
	{ .name = "NCCL_SYMMEM_COPY_DEPTH", .text = "copies the copy helper queues per stream" },
	{ .name = "NCCL_SYMMEM_MERGE_SIZE", .text = "the most bytes one copy-engine call moves (consecutive "
	  "requests merged)", { { "0", "no merging: one copy per request" } } },
	{ .name = "NCCL_SYMMEM_BATCH", .text = "copies one batch call carries at most" },
	{ .name = "NCCL_SYMMEM_PHASE_US", .text = "with 3 or more GPUs the copy helpers serve one destination "
	  "distance at a time, this many us each", { { "0", "copies run in NCCL's order" } } },
	{ .name = "NCCL_SYMMEM_HOST_RING_SIZE", .text = "shared-memory ring per connection for host-memory buffers" },
	{ .name = "NCCL_SYMMEM_CONNECT_TIMEOUT", .text = "seconds a connect or accept may take" },
	{ .name = "NCCL_SYMMEM_STALL_REPORT", .text = "seconds without progress before a connection is reported" },
	{ .name = "NCCL_SYMMEM_COPY_TIMEOUT", .text = "seconds a copy may take before its connection fails" },
	{ .name = "NCCL_SYMMEM_TRACE_US", .text = "messages slower than this many us are logged",
	  { { "0", "off" } } },
	{ .name = "NCCL_SYMMEM_BACKEND", .text = NULL,
	  { { "auto", "copy engines and shared memory on one host; ibverbs or TCP between hosts" },
	    { "shm", "one host only: connections to other hosts are refused" },
	    { "tcp", "TCP for every connection, one host too" },
	    { "ib", "ibverbs for every connection, one host too (host memory only)" } } },
	{ .name = "NCCL_SYMMEM_PASS_SM_CHANNELS", .text = "the channel cap of NCCL_PASS_SM=1" },
	{ .name = "NCCL_SYMMEM_LL128_CHUNK", .text = "inside a host, Ring LL128 instead of Simple while a rank's "
	  "share per channel is at most this", { { "0", "NCCL's protocol choice" } } },
	{ .name = "NCCL_SYMMEM_LL_MAX", .text = "between hosts, all_reduce and broadcast larger than this leave "
	  "LL for Simple", { { "0", "NCCL's protocol choice" } } },
	{ .name = "NCCL_SYMMEM_NCCL_DEFAULTS", .text = NULL,
	  { { "0", "the plugin sets no NCCL variable" },
	    { "1", "the plugin sets the NCCL variables its path needs, where unset" } } },
	{ .name = "NCCL_SYMMEM_COPY_HELPER", .text = NULL,
	  { { "0", "copies run in NCCL's process (CUDA-graph replays that queue up deadlock)" },
	    { "1", "copies run in symmem-copyd, a helper process per GPU" } } },
	{ .name = "NCCL_SYMMEM_COPY_HELPER_PATH", .text = "the copy helper to start",
	  { { "", "the helper beside the library, else in the install's libexec" } } },
	{ .name = "NCCL_SYMMEM_HELPER_ALL_GPUS", .text = NULL,
	  { { "0", "the copy helper keeps CUDA_VISIBLE_DEVICES" },
	    { "1", "the copy helper starts without a CUDA_VISIBLE_DEVICES of whole GPUs, so it "
		   "sees the GPUs it copies into" } } },
	{ .name = "NCCL_SYMMEM_COLL_REGISTER", .text = NULL,
	  { { "-1", "auto: user buffers on ring connections are registered with NCCL_PASS_SM=1 "
		    "only" },
	    { "0", "user buffers on ring connections are declined" },
	    { "1", "user buffers on ring connections are registered" } } },
};

/* NCCL's variables the plugin reads or sets, and what they do for it. */
static const struct meaning nccl_vars[] = {
	{ .name = "NCCL_ENV_PLUGIN", .text = "the env plugin NCCL loads (symmem: this project's, which sets the "
	  "routing variables)" },
	{ .name = "NCCL_NET_PLUGIN", .text = "the net plugin NCCL opens" },
	{ .name = "NCCL_NET", .text = "the net NCCL must use (symmem: this plugin, or the job fails)" },
	{ .name = "NCCL_P2P_DISABLE", .text = "non-zero: GPU traffic of a host goes through the net, every GPU a "
	  "node of its own" },
	{ .name = "NCCL_SHM_DISABLE", .text = "non-zero: NCCL's shared-memory transport is off" },
	{ .name = "NCCL_NET_PLUGIN_REF_COUNT", .text = "a positive integer keeps NCCL from unloading the plugin" },
	{ .name = "NCCL_NCHANNELS_PER_NET_PEER", .text = "channels per peer for send/recv and alltoall" },
	{ .name = "NCCL_NET_GDR_LEVEL", .text = "PHB or SYS: NCCL hands the plugin GPU buffers" },
	{ .name = "NCCL_PROTO", .text = "the protocols NCCL may use" },
	{ .name = "NCCL_ALGO", .text = "the algorithms NCCL may use" },
	{ .name = "NCCL_MIN_NCHANNELS", .text = "NCCL's minimum of channels" },
	{ .name = "NCCL_MIN_NRINGS", .text = "NCCL's older name of its minimum of channels" },
	{ .name = "NCCL_MAX_NCHANNELS", .text = "NCCL's maximum of channels" },
	{ .name = "NCCL_MAX_NRINGS", .text = "NCCL's older name of its maximum of channels" },
	{ .name = "NCCL_MIN_CTAS", .text = "NCCL's minimum of CTAs" },
	{ .name = "NCCL_MAX_CTAS", .text = "NCCL's maximum of CTAs" },
	{ .name = "NCCL_MIN_P2P_NCHANNELS", .text = "NCCL's minimum of send/recv channels" },
	{ .name = "NCCL_BUFFSIZE", .text = "NCCL's buffer per channel and connection" },
	{ .name = "NCCL_P2P_NET_CHUNKSIZE", .text = "NCCL's send/recv step through the net" },
	{ .name = "NCCL_THREAD_THRESHOLDS", .text = "bytes per channel before NCCL opens another" },
	{ .name = "NCCL_GRAPH_REGISTER", .text = "whether NCCL registers user buffers of CUDA graphs" },
	{ .name = "NCCL_OOB_NET_ENABLE", .text = "non-zero: NCCL's bootstrap connects through the net plugin" },
	{ .name = "CUDA_VISIBLE_DEVICES", .text = "the GPUs a process sees (the copy helper starts without a "
	  "list of whole GPUs)" },
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
			meaning_of(meanings, sizeof(meanings) / sizeof(meanings[0]), ls.name[i], value));
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
