/* Environment configuration.
 *
 * Every variable lives in one table below: its name, its kind, where it is
 * stored in struct config, its default and its range.  Parsing, describing
 * and the typo scan all walk that table, so adding a variable is one line.
 *
 * Value forms, common to every variable of the plugin's own:
 *  - A value that is empty (or only whitespace) is an error: exporting a
 *    variable empty is a mistake, not a request for the default.
 *  - Scalars (bool, tristate, integer, size, decimal, backend) tolerate
 *    surrounding whitespace.  Lists (NCCL_IB_HCA, NCCL_SOCKET_IFNAME) are
 *    kept verbatim, so whitespace anywhere in them is rejected.
 *  - Sizes are a decimal integer, then optionally exactly one space, then
 *    an optional unit K, KB, KiB, M, MB, MiB, G, GB, GiB, T, TB, TiB (case
 *    insensitive).  Every unit is a power of 1024: "2MB" is 2097152.
 *  - Decimals are [+-]digits[.digits]; no exponent, hex, inf or nan.
 *
 * NCCL's own variables (`.nccl` in the table) are read as NCCL reads them,
 * so that a value NCCL runs with never fails the plugin's init (with
 * NCCL_NET=symmem that fails every communicator):
 *  - an empty value is unset, as in NCCL's ncclLoadParam;
 *  - integers are strtoll(s, NULL, 0): hex and octal taken, text after the
 *    number ignored, no number at all read as 0; one that does not fit 64
 *    bits keeps the default, as NCCL does;
 *  - lists skip empty entries, and one with no entry at all is unset, as
 *    NCCL's parseStringList and matchIfList read it.
 * A value NCCL takes but the plugin cannot use (an ibverbs field out of
 * its range) keeps NCCL's default, with one WARN at init (cfg->warnings).
 */
#include "config.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

extern char **environ;

#define SZ_KIB (1ULL << 10)
#define SZ_MIB (1ULL << 20)
#define SZ_GIB (1ULL << 30)

/* Bytes of the user's value quoted in an error message, so one absurd
 * value cannot push the variable name and the accepted form out of a
 * caller's buffer. */
#define QUOTE_MAX 128

enum var_kind {
	VAR_BOOL,
	VAR_TRISTATE,
	VAR_INT,
	VAR_SIZE,
	VAR_FACTOR,		/* decimal, min <= x <= max */
	VAR_SECONDS,		/* decimal, 0 < x <= max */
	VAR_BACKEND,
	VAR_HCA_LIST,		/* [^][=]name[:port],... */
	VAR_IFNAME_LIST,	/* [^][=]prefix,... */
	VAR_PATH,		/* an absolute file name */
};

struct var {
	const char *name;
	enum var_kind kind;
	size_t off;			/* where the value lives in struct config */
	size_t len;			/* buffer size, list kinds only */
	int nccl;			/* NCCL's own: read as NCCL reads it */
	long long idef, imin, imax;	/* bool, tristate, int, backend */
	uint64_t udef, umin, umax;	/* size */
	double ddef, dmin, dmax;	/* factor, seconds */
};

static const struct var vars[] = {
	{ .name = "NCCL_PASS_SM", .kind = VAR_BOOL,
	  .off = offsetof(struct config, pass_sm), .idef = 0 },
	{ .name = "NCCL_CUMEM_ENABLE", .kind = VAR_TRISTATE, .nccl = 1,
	  .off = offsetof(struct config, cumem_enable), .idef = CONFIG_AUTO },
	{ .name = "NCCL_CUMEM_HOST_ENABLE", .kind = VAR_TRISTATE, .nccl = 1,
	  .off = offsetof(struct config, cumem_host_enable), .idef = CONFIG_AUTO },
	{ .name = "NCCL_CUMEM_POOL_SIZE", .kind = VAR_SIZE,
	  .off = offsetof(struct config, pool_size),
	  .udef = 64 * SZ_MIB, .umin = 0, .umax = UINT64_MAX },
	{ .name = "NCCL_CUMEM_PREALLOC", .kind = VAR_BOOL,
	  .off = offsetof(struct config, pool_prealloc), .idef = 0 },
	{ .name = "NCCL_CUMEM_GROWTH_FACTOR", .kind = VAR_FACTOR,
	  .off = offsetof(struct config, pool_growth),
	  .ddef = 2.0, .dmin = 1.0, .dmax = 16.0 },
	{ .name = "NCCL_CUMEM_MAX_SIZE", .kind = VAR_SIZE,
	  .off = offsetof(struct config, pool_max),
	  .udef = 4 * SZ_GIB, .umin = 0, .umax = UINT64_MAX },
	{ .name = "NCCL_CUMEM_TRIM_THRESHOLD", .kind = VAR_SIZE,
	  .off = offsetof(struct config, pool_trim),
	  .udef = 256 * SZ_MIB, .umin = 0, .umax = UINT64_MAX },
	{ .name = "NCCL_CUMEM_MONITOR", .kind = VAR_BOOL,
	  .off = offsetof(struct config, monitor), .idef = 0 },
	{ .name = "NCCL_CUMEM_MONITOR_INTERVAL", .kind = VAR_SECONDS,
	  .off = offsetof(struct config, monitor_interval),
	  .ddef = 10.0, .dmax = 86400.0 },
	{ .name = "NCCL_SM_FREE_VERBOSE", .kind = VAR_BOOL,
	  .off = offsetof(struct config, verbose), .idef = 0 },
	{ .name = "NCCL_ZERO_COPY", .kind = VAR_BOOL,
	  .off = offsetof(struct config, zero_copy), .idef = 1 },
	{ .name = "NCCL_DMA_ENABLE", .kind = VAR_BOOL,
	  .off = offsetof(struct config, dma_enable), .idef = 1 },
	{ .name = "NCCL_DIRECT_PATH", .kind = VAR_BOOL,
	  .off = offsetof(struct config, direct_path), .idef = 1 },
	{ .name = "NCCL_ENABLE_FAULT_TOLERANCE", .kind = VAR_BOOL,
	  .off = offsetof(struct config, fault_tolerance), .idef = 0 },
	{ .name = "NCCL_IB_HCA", .kind = VAR_HCA_LIST, .nccl = 1,
	  .off = offsetof(struct config, ib_hca),
	  .len = sizeof(((struct config *)0)->ib_hca) },
	/* NCCL's own: -1 (unset) lets the plugin pick the port's GID
	 * (ib_dev.c: RoCE v2 with an IPv4 address first). */
	{ .name = "NCCL_IB_GID_INDEX", .kind = VAR_INT, .nccl = 1,
	  .off = offsetof(struct config, ib_gid_index),
	  .idef = -1, .imin = -1, .imax = 255 },
	/* NCCL's own, with NCCL's defaults, for the queue pairs of the
	 * ibverbs backend: retry timeout 4.096 us x 2^n, retries, service
	 * level, traffic class.  The ranges are what the ibverbs fields hold;
	 * a timeout of 0 (no retry timer) is ibverbs', and NCCL passes it on. */
	{ .name = "NCCL_IB_TIMEOUT", .kind = VAR_INT, .nccl = 1,
	  .off = offsetof(struct config, ib_timeout),
	  .idef = 20, .imin = 0, .imax = 31 },
	{ .name = "NCCL_IB_RETRY_CNT", .kind = VAR_INT, .nccl = 1,
	  .off = offsetof(struct config, ib_retry),
	  .idef = 7, .imin = 0, .imax = 7 },
	{ .name = "NCCL_IB_SL", .kind = VAR_INT, .nccl = 1,
	  .off = offsetof(struct config, ib_sl),
	  .idef = 0, .imin = 0, .imax = 15 },
	{ .name = "NCCL_IB_TC", .kind = VAR_INT, .nccl = 1,
	  .off = offsetof(struct config, ib_tc),
	  .idef = 0, .imin = 0, .imax = 255 },
	{ .name = "NCCL_SOCKET_IFNAME", .kind = VAR_IFNAME_LIST, .nccl = 1,
	  .off = offsetof(struct config, socket_ifname),
	  .len = sizeof(((struct config *)0)->socket_ifname) },
	/* One stream with two copies queued (the one running and the next):
	 * a copy's phase is planned from the bytes queued before it, and a
	 * short queue keeps the plan true.  4-GPU registered alltoall 242 ->
	 * 302 GB/s; 2 GPUs and rings unchanged (session 8,
	 * bench/results/alltoall-4gpu.md). */
	{ .name = "NCCL_SYMMEM_STREAMS", .kind = VAR_INT,
	  .off = offsetof(struct config, streams),
	  .idef = 1, .imin = 1, .imax = 16 },
	{ .name = "NCCL_SYMMEM_CHUNK_SIZE", .kind = VAR_SIZE,
	  .off = offsetof(struct config, chunk_size),
	  .udef = 512 * SZ_KIB, .umin = 4 * SZ_KIB, .umax = SZ_GIB },
	{ .name = "NCCL_SYMMEM_SPLIT_SIZE", .kind = VAR_SIZE,
	  .off = offsetof(struct config, split_min),
	  .udef = 0, .umin = 0, .umax = SZ_GIB },
	/* The copy helper queues at most this many copies per stream and
	 * merges waiting requests that continue each other into one copy of
	 * at most MERGE_SIZE (smfree/copyd_merge.c, bench/results/coalesce.md).
	 * 64 MiB: 4 x H200 at 1 GiB, every ring collective 0.98-1.02 x native
	 * against 0.94-0.97 with 16 MiB, 256 MiB within run-to-run noise
	 * (session 10, bench/results/merge64.md).  Session 9 kept 16 MiB for
	 * 256 MiB losses that were nccl_bench's rank skew, not the merging. */
	{ .name = "NCCL_SYMMEM_COPY_DEPTH", .kind = VAR_INT,
	  .off = offsetof(struct config, copy_depth),
	  .idef = 2, .imin = 1, .imax = 1024 },
	{ .name = "NCCL_SYMMEM_MERGE_SIZE", .kind = VAR_SIZE,
	  .off = offsetof(struct config, merge_max),
	  .udef = 64 * SZ_MIB, .umin = 0, .umax = SZ_GIB },
	/* Copies that do not continue each other (other channels' buffers)
	 * still share one call: one cuMemcpyBatchAsync of up to this many
	 * copies and MERGE_SIZE bytes pays the engine's fixed cost once
	 * (test/probe/ce_shapes.cu).  1 = a call per copy. */
	{ .name = "NCCL_SYMMEM_BATCH", .kind = VAR_INT,
	  .off = offsetof(struct config, batch),
	  .idef = 16, .imin = 1, .imax = 64 },
	/* With three or more GPUs the helpers of a host take copies in phase,
	 * this long per destination (smfree/copyd.c phase_at(),
	 * bench/results/alltoall-4gpu.md); 0 = in NCCL's order. */
	{ .name = "NCCL_SYMMEM_PHASE_US", .kind = VAR_INT,
	  .off = offsetof(struct config, phase_us),
	  .idef = 200, .imin = 0, .imax = 100000 },
	{ .name = "NCCL_SYMMEM_HOST_RING_SIZE", .kind = VAR_SIZE,
	  .off = offsetof(struct config, host_ring_size),
	  .udef = 4 * SZ_MIB, .umin = 64 * SZ_KIB, .umax = SZ_GIB },
	{ .name = "NCCL_SYMMEM_CONNECT_TIMEOUT", .kind = VAR_SECONDS,
	  .off = offsetof(struct config, connect_timeout),
	  .ddef = 120.0, .dmax = 86400.0 },
	{ .name = "NCCL_SYMMEM_STALL_REPORT", .kind = VAR_SECONDS,
	  .off = offsetof(struct config, stall_report),
	  .ddef = 60.0, .dmax = 86400.0 },
	/* A copy that has not landed this long fails its connection: only a
	 * stuck GPU, driver or copy helper takes that long (1 GiB lands in
	 * about 3 ms), and an error beats a hang. */
	{ .name = "NCCL_SYMMEM_COPY_TIMEOUT", .kind = VAR_SECONDS,
	  .off = offsetof(struct config, copy_timeout),
	  .ddef = 60.0, .dmax = 86400.0 },
	/* A debugging aid: every message slower than this from post to done,
	 * and every pause this long in NCCL's testing of a connection with
	 * messages in flight, is one INFO line with a host-wide clock, so the
	 * ranks' lines can be laid side by side.  0 = off. */
	{ .name = "NCCL_SYMMEM_TRACE_US", .kind = VAR_INT,
	  .off = offsetof(struct config, trace_us),
	  .idef = 0, .imin = 0, .imax = 60000000 },
	{ .name = "NCCL_SYMMEM_BACKEND", .kind = VAR_BACKEND,
	  .off = offsetof(struct config, backend), .idef = CONFIG_BACKEND_AUTO },
	/* 16: beside a GEMM (bench/results/overlap.md), 8 and 16 end a
	 * 128 MiB batch within 0.025 of each other (2 x H200 session 5, 4 x
	 * H200 session 31; 2 took 1.69-2.26 x native's makespan), but with
	 * 8 a batch of 1 GiB all_reduces took 1.54 x native's makespan on
	 * 4 x H200, with 16 1.00 x (session 31). */
	{ .name = "NCCL_SYMMEM_PASS_SM_CHANNELS", .kind = VAR_INT,
	  .off = offsetof(struct config, pass_sm_channels),
	  .idef = 16, .imin = 1, .imax = 64 },
	/* Ring collectives ran up to 2 x faster with LL128 than with the
	 * Simple NCCL's model picks while each rank's share per channel was at
	 * most 512 KiB (4 x H200: 32 MiB all_reduce 0.19 -> 0.39 of native,
	 * 64 MiB 0.35 -> 0.65; 2 and 3 GPUs alike), and slower past it
	 * (session 15, bench/results/mid-size.md).  The tuner applies it on
	 * the intra-host path only (config_ll128_chunk()). */
	{ .name = "NCCL_SYMMEM_LL128_CHUNK", .kind = VAR_SIZE,
	  .off = offsetof(struct config, ll128_chunk),
	  .udef = 512 * SZ_KIB, .umin = 0, .umax = SZ_GIB },
	/* Between hosts NCCL's model keeps all_reduce and broadcast on LL up
	 * to 1 MiB and more; through the plugin Simple was faster from
	 * 128 KiB (2 x 2 H200 posed as two hosts, TCP: 512 KiB all_reduce
	 * 820 -> 203 us, 2 MiB broadcast 1188 -> 465 us) and LL from 32 KiB
	 * down (session 20, bench/results/hosts.md).  config_ll_max(). */
	{ .name = "NCCL_SYMMEM_LL_MAX", .kind = VAR_SIZE,
	  .off = offsetof(struct config, ll_max),
	  .udef = 32 * SZ_KIB, .umin = 0, .umax = SZ_GIB },
	{ .name = "NCCL_SYMMEM_NCCL_DEFAULTS", .kind = VAR_BOOL,
	  .off = offsetof(struct config, nccl_defaults), .idef = 1 },
	{ .name = "NCCL_SYMMEM_COPY_HELPER", .kind = VAR_BOOL,
	  .off = offsetof(struct config, copy_helper), .idef = 1 },
	{ .name = "NCCL_SYMMEM_COPY_HELPER_PATH", .kind = VAR_PATH,
	  .off = offsetof(struct config, copy_helper_path),
	  .len = sizeof(((struct config *)0)->copy_helper_path) },
	/* A process that cannot see a peer GPU (CUDA_VISIBLE_DEVICES per
	 * rank) still maps its memory, but the driver then copies into it at
	 * 25-28 GB/s instead of about 300 (4 x H200, session 13,
	 * bench/results/visibility.md).  The helper opens its GPU by bus id,
	 * so it can run with every GPU visible. */
	{ .name = "NCCL_SYMMEM_HELPER_ALL_GPUS", .kind = VAR_BOOL,
	  .off = offsetof(struct config, helper_all_gpus), .idef = 1 },
	/* A ring all_gather or broadcast on registered buffers runs on one
	 * channel when P2P is off (NCCL's coll_reg.cc): 48 against 205 GB/s
	 * on NCCL's buffers at 128 MiB on 2 x H200 (session 31,
	 * bench/results/registration.md).  Declining those registrations
	 * leaves send/recv and alltoall zero-copy.  Auto: declined unless
	 * NCCL_PASS_SM=1 (config_coll_register()). */
	{ .name = "NCCL_SYMMEM_COLL_REGISTER", .kind = VAR_TRISTATE,
	  .off = offsetof(struct config, coll_register), .idef = CONFIG_AUTO },
};

#define NVARS (sizeof(vars) / sizeof(vars[0]))

/* Pairs of sizes where the first must not be smaller than the second:
 * a pool cap below the initial pool, or a host ring that cannot hold one
 * chunk, would only fail much later and far from the cause. */
static const struct {
	const char *larger;
	const char *smaller;
} size_order[] = {
	{ "NCCL_CUMEM_MAX_SIZE", "NCCL_CUMEM_POOL_SIZE" },
	{ "NCCL_SYMMEM_HOST_RING_SIZE", "NCCL_SYMMEM_CHUNK_SIZE" },
};

/* Indexed by enum config_backend. */
static const char *const backend_names[] = { "auto", "shm", "tcp", "ib" };

static const struct {
	const char *word;
	int value;
} bool_words[] = {
	{ "0", 0 }, { "1", 1 },
	{ "false", 0 }, { "true", 1 },
	{ "no", 0 }, { "yes", 1 },
	{ "off", 0 }, { "on", 1 },
};

static const struct {
	const char *unit;
	unsigned int shift;
} size_units[] = {
	{ "K", 10 }, { "KB", 10 }, { "KiB", 10 },
	{ "M", 20 }, { "MB", 20 }, { "MiB", 20 },
	{ "G", 30 }, { "GB", 30 }, { "GiB", 30 },
	{ "T", 40 }, { "TB", 40 }, { "TiB", 40 },
};

/* Largest first, so the printed unit is the largest exact one. */
static const struct {
	const char *unit;
	unsigned int shift;
} print_units[] = {
	{ "TiB", 40 }, { "GiB", 30 }, { "MiB", 20 }, { "KiB", 10 },
};

/* IB port numbers are 8 bits in ibverbs; a larger number would silently
 * wrap further down. */
#define HCA_PORT_MAX 255

/* Internal parse results: the caller words the error differently for a
 * malformed value and for a well-formed one that does not fit. */
enum parse_rc {
	PARSE_OK = 0,
	PARSE_BAD = -1,
	PARSE_RANGE = -2,
};

/* ---- small helpers ---------------------------------------------------- */

/* Not isspace(): the locale must not change what a value means. */
static int is_space(char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r';
}

static int is_digit(char c)
{
	return c >= '0' && c <= '9';
}

static int is_hex_digit(char c)
{
	return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

static int is_alnum(char c)
{
	return is_digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

static void trim(const char **s, size_t *n)
{
	while (*n > 0 && is_space(**s)) {
		(*s)++;
		(*n)--;
	}
	while (*n > 0 && is_space((*s)[*n - 1]))
		(*n)--;
}

/* Case-insensitive comparison of a counted span with a C string. */
static int span_is(const char *s, size_t n, const char *word)
{
	return strlen(word) == n && strncasecmp(s, word, n) == 0;
}

static const struct var *find_var(const char *name, size_t n)
{
	for (size_t i = 0; i < NVARS; i++) {
		if (strlen(vars[i].name) == n && strncmp(vars[i].name, name, n) == 0)
			return &vars[i];
	}
	return NULL;
}

static void *field(struct config *cfg, const struct var *v)
{
	return (char *)cfg + v->off;
}

static const void *cfield(const struct config *cfg, const struct var *v)
{
	return (const char *)cfg + v->off;
}

static void format_size(uint64_t v, char *buf, size_t len)
{
	for (size_t i = 0; v && i < sizeof(print_units) / sizeof(print_units[0]); i++) {
		uint64_t mask = (1ULL << print_units[i].shift) - 1;

		if ((v & mask) == 0) {
			snprintf(buf, len, "%llu%s", (unsigned long long)(v >> print_units[i].shift),
				 print_units[i].unit);
			return;
		}
	}
	snprintf(buf, len, "%llu", (unsigned long long)v);
}

/* Copies a user value for an error message: non-printable bytes become
 * '?' so the message stays one line, and long values are cut. */
static void quote_value(const char *s, char *buf, size_t len)
{
	size_t i;

	for (i = 0; s[i] && i + 1 < len; i++) {
		unsigned char c = (unsigned char)s[i];

		buf[i] = (c >= 0x20 && c < 0x7f) ? (char)c : '?';
	}
	buf[i] = '\0';
	if (s[i] && len >= 4)
		memcpy(buf + len - 4, "...", 4);
}

/* Adds one sentence to cfg->warnings, "; " after the one before.  One that
 * does not fit is cut, never those before it. */
static void add_warning(struct config *cfg, const char *fmt, ...)
{
	size_t used = strlen(cfg->warnings), room = sizeof(cfg->warnings) - used;
	va_list ap;

	if (used && room > 2) {
		memcpy(cfg->warnings + used, "; ", 3);
		used += 2;
		room -= 2;
	}
	va_start(ap, fmt);
	vsnprintf(cfg->warnings + used, room, fmt, ap);
	va_end(ap);
}

/* ---- value parsers ---------------------------------------------------- */

static enum parse_rc parse_bool_span(const char *s, size_t n, int *out)
{
	trim(&s, &n);
	for (size_t i = 0; i < sizeof(bool_words) / sizeof(bool_words[0]); i++) {
		if (span_is(s, n, bool_words[i].word)) {
			*out = bool_words[i].value;
			return PARSE_OK;
		}
	}
	return PARSE_BAD;
}

int config_parse_bool(const char *s, int *out)
{
	int v;

	if (!s || parse_bool_span(s, strlen(s), &v) != PARSE_OK)
		return -1;
	*out = v;
	return 0;
}

/* NCCL reads its own switches with strtoll(..., 0) and only looks at the
 * sign, so any integer is accepted here, of any length and in decimal or
 * 0x hex; only whether it is negative, zero or positive matters.  The bool
 * words are accepted on top because users write them. */
static enum parse_rc parse_tristate(const char *s, size_t n, int *out)
{
	int negative = 0, nonzero = 0, b;
	int hex = 0;

	trim(&s, &n);
	if (parse_bool_span(s, n, &b) == PARSE_OK) {
		*out = b ? CONFIG_ON : CONFIG_OFF;
		return PARSE_OK;
	}
	if (n > 0 && (*s == '-' || *s == '+')) {
		negative = *s == '-';
		s++;
		n--;
	}
	if (n > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
		hex = 1;
		s += 2;
		n -= 2;
	}
	if (n == 0)
		return PARSE_BAD;
	for (size_t i = 0; i < n; i++) {
		if (!(hex ? is_hex_digit(s[i]) : is_digit(s[i])))
			return PARSE_BAD;
		if (s[i] != '0')
			nonzero = 1;
	}
	if (!nonzero)
		*out = CONFIG_OFF;
	else
		*out = negative ? CONFIG_AUTO : CONFIG_ON;
	return PARSE_OK;
}

/* One of NCCL's integers, read as NCCL's ncclLoadParam reads it: never an
 * error, since NCCL runs with any value.  strtoll in base 0 (hex and octal
 * taken, text after the number ignored, no number at all 0); a value that
 * does not fit 64 bits keeps the default, as in NCCL.  A value NCCL would
 * hand ibverbs but that is outside the field's range keeps NCCL's default
 * instead of failing init later on every connection; each such value is
 * noted for one WARN at init. */
static void parse_nccl_number(struct config *cfg, const struct var *v, const char *val)
{
	char quoted[QUOTE_MAX];
	char *end;
	long long x;

	quote_value(val, quoted, sizeof(quoted));
	errno = 0;
	x = strtoll(val, &end, 0);
	if (errno) {
		add_warning(cfg, "%s='%s' does not fit 64 bits: NCCL keeps its default, and so "
			    "does the plugin", v->name, quoted);
		return;
	}
	if (end == val)
		add_warning(cfg, "%s='%s' holds no number: NCCL reads it as 0, and so does the "
			    "plugin", v->name, quoted);
	if (v->kind == VAR_TRISTATE) {
		*(int *)field(cfg, v) = x < 0 ? CONFIG_AUTO : x > 0 ? CONFIG_ON : CONFIG_OFF;
		return;
	}
	if (x < v->imin || x > v->imax) {
		add_warning(cfg, "%s='%s' is outside %lld..%lld, the range ibverbs takes: the "
			    "plugin uses NCCL's default %lld", v->name, quoted, v->imin, v->imax,
			    v->idef);
		return;
	}
	*(int *)field(cfg, v) = (int)x;
}

/* Decimal integer with optional sign.  Values too large for the caller's
 * range are reported as PARSE_RANGE rather than wrapped. */
static enum parse_rc parse_int(const char *s, size_t n, long long lo, long long hi,
			       long long *out)
{
	int negative = 0, big = 0;
	long long v = 0;

	trim(&s, &n);
	if (n > 0 && (*s == '-' || *s == '+')) {
		negative = *s == '-';
		s++;
		n--;
	}
	if (n == 0)
		return PARSE_BAD;
	for (size_t i = 0; i < n; i++) {
		if (!is_digit(s[i]))
			return PARSE_BAD;
		/* Ranges are small; stop growing well before overflow. */
		if (v > 1000000000000LL)
			big = 1;
		else
			v = v * 10 + (s[i] - '0');
	}
	if (negative)
		v = -v;
	if (big || v < lo || v > hi)
		return PARSE_RANGE;
	*out = v;
	return PARSE_OK;
}

static enum parse_rc parse_size_span(const char *s, size_t n, uint64_t *out)
{
	uint64_t v = 0;
	size_t i = 0;

	trim(&s, &n);
	for (; i < n && is_digit(s[i]); i++) {
		unsigned int d = (unsigned int)(s[i] - '0');

		if (v > (UINT64_MAX - d) / 10)
			return PARSE_RANGE;
		v = v * 10 + d;
	}
	if (i == 0)
		return PARSE_BAD;
	if (i == n) {
		*out = v;
		return PARSE_OK;
	}
	/* One space before the unit, no more: "64 MB" reads naturally,
	 * "64   MB" is more likely a quoting accident. */
	if (s[i] == ' ')
		i++;
	for (size_t u = 0; u < sizeof(size_units) / sizeof(size_units[0]); u++) {
		unsigned int shift = size_units[u].shift;

		if (!span_is(s + i, n - i, size_units[u].unit))
			continue;
		if (v > (UINT64_MAX >> shift))
			return PARSE_RANGE;
		*out = v << shift;
		return PARSE_OK;
	}
	return PARSE_BAD;
}

int config_parse_size(const char *s, uint64_t *out)
{
	uint64_t v;

	if (!s || parse_size_span(s, strlen(s), &v) != PARSE_OK)
		return -1;
	*out = v;
	return 0;
}

/* [+-]digits[.digits], computed by hand instead of strtod() so that the
 * process locale cannot turn "2.5" into 2, and so that hex, exponents,
 * inf and nan stay out. */
static enum parse_rc parse_decimal(const char *s, size_t n, double *out)
{
	double mant = 0.0, scale = 1.0;
	int negative = 0;
	size_t i = 0, int_digits = 0, frac_digits = 0;

	trim(&s, &n);
	if (n > 0 && (*s == '-' || *s == '+')) {
		negative = *s == '-';
		i++;
	}
	for (; i < n && is_digit(s[i]); i++, int_digits++)
		mant = mant * 10.0 + (s[i] - '0');
	if (int_digits == 0)
		return PARSE_BAD;
	if (i < n && s[i] == '.') {
		for (i++; i < n && is_digit(s[i]); i++, frac_digits++) {
			mant = mant * 10.0 + (s[i] - '0');
			scale *= 10.0;
		}
		if (frac_digits == 0)
			return PARSE_BAD;
	}
	if (i != n)
		return PARSE_BAD;
	mant /= scale;
	if (!isfinite(mant))
		return PARSE_RANGE;
	*out = negative ? -mant : mant;
	return PARSE_OK;
}

static enum parse_rc parse_backend(const char *s, size_t n, int *out)
{
	trim(&s, &n);
	for (size_t i = 0; i < sizeof(backend_names) / sizeof(backend_names[0]); i++) {
		if (span_is(s, n, backend_names[i])) {
			*out = (int)i;
			return PARSE_OK;
		}
	}
	return PARSE_BAD;
}

/* Reads NCCL's device list syntax, [^][=]entry[,entry...], into `out`
 * (room for `s`) without the empty entries NCCL's parseStringList skips
 * ("mlx5_0,", "a,,b"); no entry at all leaves only the prefixes.  With
 * `ports`, an entry is name[:port] with name of [A-Za-z0-9_.-]; without,
 * it is an interface prefix of [A-Za-z0-9_.:-].  Returns the entries kept,
 * or -1 with why in `why` (entries counted as written). */
static int read_list(const char *s, int ports, char *out, char *why, size_t whylen)
{
	size_t entry = 1;
	int kept = 0;

	if (*s == '^')
		*out++ = *s++;
	if (*s == '=')
		*out++ = *s++;
	for (;; entry++) {
		const char *name = s;

		while (is_alnum(*s) || *s == '_' || *s == '.' || *s == '-' || (!ports && *s == ':'))
			s++;
		if (s == name && ports && *s == ':') {
			snprintf(why, whylen, "entry %zu has a port but no name", entry);
			return -1;
		}
		if (ports && *s == ':') {
			const char *port = ++s;
			long v = 0;

			while (is_digit(*s)) {
				if (v <= HCA_PORT_MAX)
					v = v * 10 + (*s - '0');
				s++;
			}
			if (s == port && (*s == ',' || *s == '\0')) {
				snprintf(why, whylen, "entry %zu: missing port after ':'", entry);
				return -1;
			}
			if (*s != ',' && *s != '\0') {
				snprintf(why, whylen, "entry %zu: port is not a positive integer", entry);
				return -1;
			}
			if (v < 1 || v > HCA_PORT_MAX) {
				snprintf(why, whylen, "entry %zu: port is out of range", entry);
				return -1;
			}
		}
		if (*s != ',' && *s != '\0') {
			unsigned char c = (unsigned char)*s;

			if (c >= 0x20 && c < 0x7f)
				snprintf(why, whylen, "entry %zu: bad character '%c'", entry, c);
			else
				snprintf(why, whylen, "entry %zu: bad character 0x%02x", entry, c);
			return -1;
		}
		if (s > name) {
			if (kept++)
				*out++ = ',';
			memcpy(out, name, (size_t)(s - name));
			out += s - name;
		}
		if (*s == '\0')
			break;
		s++;
	}
	*out = '\0';
	return kept;
}

/* ---- per-variable glue ------------------------------------------------ */

static void accepted_form(const struct var *v, char *buf, size_t len)
{
	char lo[32], hi[32];

	switch (v->kind) {
	case VAR_BOOL:
		snprintf(buf, len, "0/1, true/false, yes/no, on/off");
		break;
	case VAR_TRISTATE:
		snprintf(buf, len, "an integer, <0 auto, 0 off, >0 on; or 0/1, true/false, yes/no, on/off");
		break;
	case VAR_INT:
		snprintf(buf, len, "an integer %lld..%lld", v->imin, v->imax);
		break;
	case VAR_SIZE:
		if (v->umin == 0 && v->umax == UINT64_MAX) {
			snprintf(buf, len, "4096, 64K, 2MB, 4GB, 1GiB");
			break;
		}
		format_size(v->umin, lo, sizeof(lo));
		format_size(v->umax, hi, sizeof(hi));
		snprintf(buf, len, "4096, 64K, 2MB, 4GB, 1GiB, within %s..%s", lo, hi);
		break;
	case VAR_FACTOR:
		snprintf(buf, len, "a decimal number %g..%g, e.g. 1.5", v->dmin, v->dmax);
		break;
	case VAR_SECONDS:
		snprintf(buf, len, "seconds, a decimal number > 0 and <= %g, e.g. 10 or 0.5", v->dmax);
		break;
	case VAR_BACKEND:
		snprintf(buf, len, "auto, shm, tcp, ib");
		break;
	case VAR_HCA_LIST:
		snprintf(buf, len, "[^][=]name[:port][,name[:port]...], name of A-Za-z0-9_.-, port 1..%d, at most %zu characters",
			 HCA_PORT_MAX, v->len - 1);
		break;
	case VAR_IFNAME_LIST:
		snprintf(buf, len, "[^][=]prefix[,prefix...], prefix of A-Za-z0-9_.:-, at most %zu characters",
			 v->len - 1);
		break;
	case VAR_PATH:
		snprintf(buf, len, "an absolute file name, at most %zu characters", v->len - 1);
		break;
	}
}

/* Parses one set value into `cfg`.  On failure writes what is wrong with
 * it ("is not a size") into `problem`. */
static int parse_value(struct config *cfg, const struct var *v, const char *val,
		       char *problem, size_t plen)
{
	const char *s = val;
	size_t n = strlen(val);
	enum parse_rc rc = PARSE_OK;
	const char *what = "";
	const char *range = "is out of range";
	int list = v->kind == VAR_HCA_LIST || v->kind == VAR_IFNAME_LIST;
	char why[64];

	if (v->nccl && (v->kind == VAR_INT || v->kind == VAR_TRISTATE)) {
		parse_nccl_number(cfg, v, val);
		return 0;
	}
	/* Lists are read verbatim: whitespace in one is a bad character. */
	trim(&s, &n);
	if (n == 0 && !list) {
		snprintf(problem, plen, "is empty");
		return -1;
	}

	switch (v->kind) {
	case VAR_BOOL:
		rc = parse_bool_span(s, n, field(cfg, v));
		what = "is not a boolean";
		break;
	case VAR_TRISTATE:
		rc = parse_tristate(s, n, field(cfg, v));
		what = "is not an integer or boolean";
		break;
	case VAR_INT: {
		long long x;

		rc = parse_int(s, n, v->imin, v->imax, &x);
		if (rc == PARSE_OK)
			*(int *)field(cfg, v) = (int)x;
		what = "is not an integer";
		break;
	}
	case VAR_SIZE: {
		uint64_t x;

		rc = parse_size_span(s, n, &x);
		if (rc == PARSE_RANGE)
			range = "does not fit in 64 bits";
		if (rc == PARSE_OK && (x < v->umin || x > v->umax))
			rc = PARSE_RANGE;
		if (rc == PARSE_OK)
			*(uint64_t *)field(cfg, v) = x;
		what = "is not a size";
		break;
	}
	case VAR_FACTOR:
	case VAR_SECONDS: {
		double x;
		int low;

		rc = parse_decimal(s, n, &x);
		if (rc == PARSE_OK) {
			low = v->kind == VAR_SECONDS ? !(x > 0.0) : !(x >= v->dmin);
			if (low || x > v->dmax)
				rc = PARSE_RANGE;
		}
		if (rc == PARSE_OK)
			*(double *)field(cfg, v) = x;
		what = "is not a decimal number";
		break;
	}
	case VAR_BACKEND:
		rc = parse_backend(s, n, field(cfg, v));
		what = "is not a backend";
		break;
	case VAR_HCA_LIST:
	case VAR_IFNAME_LIST:
	case VAR_PATH:
		/* Verbatim: untrimmed, so stray whitespace is reported. */
		if (strlen(val) >= v->len) {
			snprintf(problem, plen, "is too long (%zu characters)", strlen(val));
			return -1;
		}
		if (v->kind == VAR_PATH && val[0] != '/') {
			snprintf(problem, plen, "is not an absolute file name");
			return -1;
		}
		if (!list) {
			memcpy(field(cfg, v), val, strlen(val) + 1);
			return 0;
		}
		switch (read_list(val, v->kind == VAR_HCA_LIST, field(cfg, v), why, sizeof(why))) {
		case -1:
			snprintf(problem, plen, "is not a valid list: %s", why);
			return -1;
		case 0:
			/* matchIfList takes no entry as every device; an exclusion
			 * of nothing NCCL reads as every device left out (NCCL_IB_HCA
			 * and a NCCL_SOCKET_IFNAME of 2 characters or more), which
			 * can only be a mistake: unset here, and said so. */
			if (val[0] == '^')
				add_warning(cfg, "%s='%s' names nothing to leave out: the plugin "
					    "takes it as unset (every device); NCCL's own transport "
					    "would leave every device out", v->name, val);
			*(char *)field(cfg, v) = '\0';
			return 0;
		default:
			return 0;
		}
	}

	if (rc == PARSE_OK)
		return 0;
	snprintf(problem, plen, "%s", rc == PARSE_RANGE ? range : what);
	return -1;
}

/* Whether `val` counts as set: NCCL takes an empty value of its own
 * variables as unset (ncclLoadParam, parseStringList). */
static int value_set(const struct var *v, const char *val)
{
	return val && (val[0] || !v->nccl);
}

static void set_defaults(struct config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	for (size_t i = 0; i < NVARS; i++) {
		const struct var *v = &vars[i];

		switch (v->kind) {
		case VAR_BOOL:
		case VAR_TRISTATE:
		case VAR_INT:
		case VAR_BACKEND:
			*(int *)field(cfg, v) = (int)v->idef;
			break;
		case VAR_SIZE:
			*(uint64_t *)field(cfg, v) = v->udef;
			break;
		case VAR_FACTOR:
		case VAR_SECONDS:
			*(double *)field(cfg, v) = v->ddef;
			break;
		case VAR_HCA_LIST:
		case VAR_IFNAME_LIST:
		case VAR_PATH:
			/* "" from the memset: unset means no filter / the default. */
			break;
		}
	}
	cfg->user_min_channels = -1;	/* 0 is a minimum a user can set */
}

static void set_error(char *err, size_t errlen, const struct var *v, const char *val,
		      const char *problem)
{
	char quoted[QUOTE_MAX], accepted[160];

	if (!err || errlen == 0)
		return;
	quote_value(val, quoted, sizeof(quoted));
	accepted_form(v, accepted, sizeof(accepted));
	snprintf(err, errlen, "%s='%s' %s (accepted: %s)", v->name, quoted, problem, accepted);
}

static const char *origin(config_getenv_fn get, void *arg, const char *name)
{
	return get && get(name, arg) ? "set" : "default";
}

static int check_size_order(const struct config *cfg, config_getenv_fn get, void *arg,
			    char *err, size_t errlen)
{
	for (size_t i = 0; i < sizeof(size_order) / sizeof(size_order[0]); i++) {
		const char *lname = size_order[i].larger, *sname = size_order[i].smaller;
		const struct var *l = find_var(lname, strlen(lname));
		const struct var *s = find_var(sname, strlen(sname));
		uint64_t lv = *(const uint64_t *)cfield(cfg, l);
		uint64_t sv = *(const uint64_t *)cfield(cfg, s);
		char lbuf[32], sbuf[32];

		if (lv >= sv)
			continue;
		if (err && errlen) {
			format_size(lv, lbuf, sizeof(lbuf));
			format_size(sv, sbuf, sizeof(sbuf));
			snprintf(err, errlen,
				 "%s=%s (%s) is smaller than %s=%s (%s) (accepted: %s >= %s)",
				 lname, lbuf, origin(get, arg, lname),
				 sname, sbuf, origin(get, arg, sname), lname, sname);
		}
		return -1;
	}
	return 0;
}

/* CUDA's variable, read here because this is where variables are read;
 * the plugin only looks at it, never sets it. */
#define CUDA_VISIBLE "CUDA_VISIBLE_DEVICES"

/* One entry of the list, spaces around it ignored: a whole GPU. */
static int whole_gpu(const char *entry, size_t len)
{
	trim(&entry, &len);
	if (!len || entry[0] == '-')
		return 0;
	return len < 4 || strncmp(entry, "MIG-", 4) != 0;
}

int config_visible_gpus(const char *cvd)
{
	int n = 0;

	if (!cvd)
		return 0;
	for (;;) {
		const char *comma = strchr(cvd, ',');
		size_t len = comma ? (size_t)(comma - cvd) : strlen(cvd);

		if (!whole_gpu(cvd, len))
			return 0;
		n++;
		if (!comma)
			return n;
		cvd = comma + 1;
	}
}

static void note_visible_gpus(struct config *cfg, const char *cvd)
{
	cfg->gpus_visible[0] = '\0';
	cfg->ngpus_visible = config_visible_gpus(cvd);
	if (cfg->ngpus_visible)
		snprintf(cfg->gpus_visible, sizeof(cfg->gpus_visible), "%s", cvd);
}

/* What config_apply_nccl_defaults() set, "NAME=value;NAME=value" (values
 * may hold spaces, never ';'), kept in the environment beside them.  A
 * process that parses the environment again (a child that inherits it, or
 * the plugin loaded anew by a later NCCL) must not take the plugin's own
 * defaults for the user's choices: a NCCL_PROTO counted as the user's turns
 * the tuner's LL128 rule off. */
#define DEFAULTS_SET "NCCL_SYMMEM_NCCL_DEFAULTS_SET"

/* 1 when `val` is what the plugin itself gave `name` (DEFAULTS_SET). */
static int set_by_plugin(config_getenv_fn get, void *arg, const char *name, const char *val)
{
	const char *p = get(DEFAULTS_SET, arg);
	size_t n = strlen(name), v = strlen(val);

	while (p && *p) {
		const char *end = strchr(p, ';');
		size_t len = end ? (size_t)(end - p) : strlen(p);

		if (len == n + 1 + v && !strncmp(p, name, n) && p[n] == '=' &&
		    !strncmp(p + n + 1, val, v))
			return 1;
		p = end ? end + 1 : NULL;
	}
	return 0;
}

/* An NCCL variable as the user set it: NULL also when its value is the
 * plugin's own default from an earlier init. */
static const char *user_value(config_getenv_fn get, void *arg, const char *name)
{
	const char *v = get(name, arg);

	return v && set_by_plugin(get, arg, name, v) ? NULL : v;
}

/* NCCL's channel bounds are NCCL's variables: the plugin only reads them,
 * the way NCCL's own loader does (strtoll in base 0, text after the number
 * ignored, no number at all meaning unset; NCCL warns about those itself),
 * and clamps them as NCCL does to 0..64 (minimum) and 1..64 (maximum). */
#define NCCL_MAX_CHANNELS 64

static int nccl_int_var(config_getenv_fn get, void *arg, const char *name, long long *out)
{
	const char *s = user_value(get, arg, name);
	char *end;
	long long v;

	if (!s)
		return 0;
	errno = 0;
	v = strtoll(s, &end, 0);
	if (errno || end == s)
		return 0;
	*out = v;
	return 1;
}

static int clamp_channels(long long v, int lo)
{
	if (v < lo)
		return lo;
	if (v > NCCL_MAX_CHANNELS)
		return NCCL_MAX_CHANNELS;
	return (int)v;
}

static void note_channel_bounds(struct config *cfg, config_getenv_fn get, void *arg)
{
	long long v;
	int max = 0, max_ctas = 0;

	/* NCCL_MIN_NCHANNELS wins over the older NCCL_MIN_NRINGS, as in NCCL. */
	if (nccl_int_var(get, arg, "NCCL_MIN_NCHANNELS", &v) ||
	    nccl_int_var(get, arg, "NCCL_MIN_NRINGS", &v))
		cfg->user_min_channels = clamp_channels(v, 0);
	if (nccl_int_var(get, arg, "NCCL_MAX_NCHANNELS", &v) ||
	    nccl_int_var(get, arg, "NCCL_MAX_NRINGS", &v))
		max = clamp_channels(v, 1);
	if (nccl_int_var(get, arg, "NCCL_MAX_CTAS", &v)) {
		max_ctas = clamp_channels(v, 1);
		if (!max || max_ctas < max)
			max = max_ctas;
	}
	/* NCCL lowers a minCTAs above maxCTAs to maxCTAs. */
	if (nccl_int_var(get, arg, "NCCL_MIN_CTAS", &v)) {
		cfg->user_min_ctas = clamp_channels(v, 1);
		if (max_ctas && cfg->user_min_ctas > max_ctas)
			cfg->user_min_ctas = max_ctas;
	}
	cfg->user_max_channels = max;
	if (nccl_int_var(get, arg, "NCCL_MIN_P2P_NCHANNELS", &v))
		cfg->user_min_p2p_channels = clamp_channels(v, 1);
}

int config_parse(struct config *cfg, config_getenv_fn get, void *arg, char *err, size_t errlen)
{
	char problem[96];
	long long ref_count;

	set_defaults(cfg);
	if (err && errlen)
		err[0] = '\0';
	if (!get)
		return 0;

	for (size_t i = 0; i < NVARS; i++) {
		const struct var *v = &vars[i];
		const char *val = get(v->name, arg);

		if (!value_set(v, val))
			continue;
		if (parse_value(cfg, v, val, problem, sizeof(problem)) == 0)
			continue;
		set_error(err, errlen, v, val, problem);
		return -1;
	}
	note_visible_gpus(cfg, get(CUDA_VISIBLE, arg));
	/* Read before the plugin sets its own NCCL_PROTO and
	 * NCCL_MIN_NCHANNELS defaults. */
	cfg->user_proto = user_value(get, arg, "NCCL_PROTO") != NULL;
	/* NCCL_NET_PLUGIN_REF_COUNT starts NCCL's count of the plugin's
	 * users; read the way NCCL reads its own integers (strtoll, base 0). */
	cfg->kept_loaded = nccl_int_var(get, arg, "NCCL_NET_PLUGIN_REF_COUNT", &ref_count) &&
			   ref_count > 0;
	note_channel_bounds(cfg, get, arg);
	return check_size_order(cfg, get, arg, err, errlen);
}

/* ---- describing ------------------------------------------------------- */

static void format_value(const struct config *cfg, const struct var *v, char *buf, size_t len)
{
	const void *p = cfield(cfg, v);

	switch (v->kind) {
	case VAR_BOOL:
	case VAR_TRISTATE:
	case VAR_INT:
		snprintf(buf, len, "%d", *(const int *)p);
		break;
	case VAR_SIZE:
		format_size(*(const uint64_t *)p, buf, len);
		break;
	case VAR_FACTOR:
	case VAR_SECONDS:
		/* Enough digits that a value reads back as what was set. */
		snprintf(buf, len, "%.15g", *(const double *)p);
		break;
	case VAR_BACKEND: {
		int b = *(const int *)p;

		if (b >= 0 && (size_t)b < sizeof(backend_names) / sizeof(backend_names[0]))
			snprintf(buf, len, "%s", backend_names[b]);
		else
			snprintf(buf, len, "%d", b);
		break;
	}
	case VAR_HCA_LIST:
	case VAR_IFNAME_LIST:
	case VAR_PATH:
		snprintf(buf, len, "%s", (const char *)p);
		break;
	}
}

void config_describe(const struct config *cfg, config_getenv_fn get, void *arg, int all,
		     void (*emit)(const char *line, void *arg), void *emit_arg)
{
	char value[300], line[400];

	for (size_t i = 0; i < NVARS; i++) {
		const struct var *v = &vars[i];
		int set = get && value_set(v, get(v->name, arg));

		if (!set && !all)
			continue;
		format_value(cfg, v, value, sizeof(value));
		snprintf(line, sizeof(line), "%s=%s (%s)", v->name, value, set ? "set" : "default");
		emit(line, emit_arg);
	}
}

/* ---- the process environment ------------------------------------------ */

static pthread_once_t env_once = PTHREAD_ONCE_INIT;
static struct config env_cfg;
static int env_ok;
static char env_err[512];

static const char *env_get(const char *name, void *arg)
{
	(void)arg;
	return getenv(name);
}

static void env_load(void)
{
	env_ok = config_parse(&env_cfg, env_get, NULL, env_err, sizeof(env_err)) == 0;
}

const struct config *config_get(void)
{
	pthread_once(&env_once, env_load);
	return env_ok ? &env_cfg : NULL;
}

/* Also parses on first use, so it is meaningful whichever is called first;
 * "" when the environment parsed fine. */
const char *config_error(void)
{
	pthread_once(&env_once, env_load);
	return env_err;
}

/* Appends a name unless it would not fit; once one does not fit nothing
 * more is written, so the list is always a prefix of the full one. */
static void append_name(char *out, size_t outlen, size_t *used, int *full,
			const char *name, size_t n)
{
	size_t sep = *used ? 1 : 0;

	if (*full || !out || outlen == 0)
		return;
	if (*used + sep + n + 1 > outlen) {
		*full = 1;
		return;
	}
	if (sep)
		out[(*used)++] = ' ';
	memcpy(out + *used, name, n);
	*used += n;
	out[*used] = '\0';
}

/* What config_apply_env_plugin_defaults() set, "NAME=value ...", for the
 * net plugin's init to log: the env plugin gets no logger in v1, and it is
 * another library, so the list goes where both look, the environment.
 * The plugin writes it; it is not one of the user's variables. */
#define ENV_PLUGIN_SET "NCCL_SYMMEM_ENV_PLUGIN_SET"

/* Whether the first `n` bytes of `s` are exactly `name`. */
static int is_name(const char *s, size_t n, const char *name)
{
	return n == strlen(name) && !strncmp(s, name, n);
}

int config_unknown_vars(char *out, size_t outlen)
{
	static const char prefix[] = "NCCL_SYMMEM_";
	size_t plen = sizeof(prefix) - 1, used = 0;
	int count = 0, full = 0;

	if (out && outlen)
		out[0] = '\0';
	/* clearenv() leaves environ NULL. */
	if (!environ)
		return 0;

	for (char **e = environ; *e; e++) {
		const char *eq = strchr(*e, '=');
		size_t n = eq ? (size_t)(eq - *e) : strlen(*e);

		if (n < plen || strncmp(*e, prefix, plen) != 0)
			continue;
		/* Not the user's: the plugins' notes of what they set. */
		if (find_var(*e, n) || is_name(*e, n, ENV_PLUGIN_SET) || is_name(*e, n, DEFAULTS_SET))
			continue;
		count++;
		append_name(out, outlen, &used, &full, *e, n);
	}
	return count;
}

/* When a default of nccl_defaults[] applies. */
enum default_when {
	INTRA_HOST,		/* GPU traffic of one host goes through the plugin */
	INTRA_HOST_RINGS_KEPT,	/* that, NCCL_PASS_SM off, and the net keeps ring registrations */
	INTRA_HOST_CE,		/* that, carried by copy engines (not NCCL_SYMMEM_BACKEND=tcp) */
	INTRA_HOST_OR_PASS_SM,	/* that, or NCCL_PASS_SM asks for zero-copy user buffers */
	INTRA_HOST_GPU_BUFFERS,	/* that, and NCCL hands the plugin GPU buffers there */
};

/* The plugin's NCCL_MIN_NCHANNELS: 32, or the user's cap where that is
 * lower.  NCCL applies its maximum (NCCL_MAX_NCHANNELS, NCCL_MAX_CTAS)
 * first and then copies channels up to the minimum (ncclTopoPostset in
 * its graph/connect.cc), so a minimum above the user's cap would
 * silently override it and launch 32 CTAs where the user allowed, say, 8. */
#define PLUGIN_MIN_CHANNELS 32

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
 * it 2 GiB, one past INT_MAX, and NCCL's allocation fails ("Cuda failure
 * 2 'out of memory'") before any op: NCCL_MIN_NCHANNELS=64 on 2 x H200,
 * session 25 (bench/results/channels.md).  NCCL rounds its p2p channels
 * up to a power of two, so any minimum above 32 means 64: 1 MiB steps
 * there. */
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

int config_coll_register(const struct config *cfg)
{
	if (cfg->coll_register == CONFIG_AUTO)
		return cfg->pass_sm != 0;
	return cfg->coll_register == CONFIG_ON;
}

/* The channels NCCL sizes its rings to on this path before any minimum:
 * 4 (2 x H200, bench/results/channels.md). */
#define NCCL_OWN_RING_CHANNELS 4

static int intra_host_by_copy_engine(const struct config *cfg);

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

/* NCCL settings the copy-engine path needs.  NCCL reads each of these when
 * it first needs it, after the plugin's init, so a value set here still
 * counts; a value the user set always wins.  INTRA_HOST ones answer what
 * NCCL does when the user routes traffic between GPUs of one host through
 * the plugin (NCCL_P2P_DISABLE=1, the documented way: every GPU becomes a
 * node of its own); INTRA_HOST_CE ones size NCCL's channels and steps for
 * the copy engines that then carry it, and are left out with
 * NCCL_SYMMEM_BACKEND=tcp.  Jobs that use the plugin between hosts only
 * keep NCCL's own sizing. */
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
	 * where NCCL's kernels can write and read host buffers themselves.
	 * Posed as 2 hosts x 2 H200 over loopback TCP (session 21,
	 * bench/results/hosts.md) NCCL's host staging was 1.1-2.0 x faster
	 * up to 32 KiB (8-byte send/recv 27 against 43 us) and even within
	 * the spread from 128 KiB up.  NCCL_PASS_SM keeps it: its registered send/recv and
	 * alltoall then go from the user's buffers with no kernel copy,
	 * which needs NCCL to hand the plugin GPU memory. */
	{ "NCCL_NET_GDR_LEVEL", "SYS", INTRA_HOST_OR_PASS_SM,
	  "the plugin's devices are GPUs' copy engines, not PCI NICs; NCCL places them at the "
	  "CPU and would otherwise stage GPU buffers in host memory (which it does, faster, "
	  "for jobs that use the plugin between hosts only: 8-byte send/recv 27 against 43 us)",
	  NULL },
	/* Only where GPU traffic of one host goes through the plugin.  Any
	 * NCCL_PROTO value turns NCCL's own LL128 safety rule off (tuning.cc:
	 * a listed or not-excluded protocol is forced on, where the default
	 * enables LL128 only on paths NCCL knows to be safe, e.g. not over
	 * PCIe peer links), so setting it in jobs that use the plugin only
	 * between hosts would force LL128 onto their intra-host P2P and SHM
	 * paths and would take LL from their small messages.  On the
	 * copy-engine path LL128 was checked element by element (2-4 x H200)
	 * and the tuner's LL128 rule needs it.  The same holds within a host:
	 * only where NCCL hands the plugin GPU buffers that copy engines fill
	 * (intra_host_gpu_buffers()).  Where NCCL stages in host memory
	 * (NCCL_SYMMEM_BACKEND=ib, or the user's NCCL_NET_GDR_LEVEL below PHB)
	 * LL128 through the plugin was never checked, so NCCL's own gate and
	 * LL stay (gpu_buffers_left_why()). */
	{ "NCCL_PROTO", "^LL", INTRA_HOST_GPU_BUFFERS,
	  "LL keeps its send buffers in host memory, so every LL step is a host-to-GPU copy; "
	  "from 128 KiB up LL ran at 0.01-0.05 of native on this path, and at 8 B it gained "
	  "nothing over LL128 (2 x H200: 33.5 us against 31.6)", NULL },
	/* Measured on 2 x H200 (bench/results/channels.md): NCCL sizes its
	 * rings from the GPU-CPU-GPU path when P2P is off and opens 4
	 * channels, 2 per peer for send/recv, each a chain of copies with
	 * ~14 us between them; more channels and larger steps keep more
	 * copies in flight.  all_reduce 81 -> 277, all_gather 60 -> 256 GB/s
	 * at 1 GiB. */
	{ "NCCL_MIN_NCHANNELS", NULL, INTRA_HOST_CE,
	  "with P2P off NCCL opens 4 channels for the plugin; 32 keep enough copies in flight "
	  "(2 x H200, 1 GiB all_reduce 81 -> 277 GB/s with the two below); lowered to "
	  "NCCL_MAX_CTAS or NCCL_MAX_NCHANNELS where those are lower, since NCCL's minimum "
	  "overrides its maximum",
	  min_channels_value },
	/* NCCL_NCHANNELS_PER_NET_PEER=16 (sendrecv 47 -> 235 GB/s) is not
	 * here: NCCL reads it before it loads the plugin, so setting it here
	 * changed nothing (measured: still "2 p2p channels per peer").  The
	 * env plugin sets it (config_apply_env_plugin_defaults), else the
	 * user must; nccl_advice below says so in the log when it is unset. */
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
	  "steps are separate copy-engine copies (4 x H200: 1 MiB all_reduce 0.045 -> 0.127 of "
	  "native, 4 MiB 0.10 -> 0.23; 256 MiB and up unchanged)", NULL },
	/* With P2P off NCCL counts every GPU as a node of its own (its log:
	 * "nNodes 4 localRanks 1"), and for such one-rank-per-node
	 * communicators its coll_reg.cc runs a ring all_gather or broadcast
	 * whose buffers it registered with the net on one channel
	 * (nMaxChannels = 1), with each send waiting for the receiver's
	 * irecv.  Under CUDA graphs NCCL registers the buffers by itself.
	 * Since session 31 the plugin declines user buffers on ring
	 * connections where NCCL says which connections are rings (net v11,
	 * NCCL 2.28: conn_hints.c), so graph registration then only makes
	 * send/recv and alltoall zero-copy: 4 x H100, 1 GiB under CUDA graphs,
	 * send/recv 0.89 -> 1.00 and alltoall 0.75 -> 0.88 of native,
	 * all_gather and broadcast unchanged (session 32,
	 * bench/results/registration.md).  So the variable is set only where
	 * ring registrations are kept: NCCL before 2.28 (no hints) or
	 * NCCL_SYMMEM_COLL_REGISTER=1.  NCCL_PASS_SM=1 keeps the registration:
	 * its send/recv and alltoall go zero-copy from the user's buffers,
	 * which is the point of that mode.  Explicit ncclCommRegister
	 * (NCCL_LOCAL_REGISTER) is the user's choice and stays. */
	{ "NCCL_GRAPH_REGISTER", "0", INTRA_HOST_RINGS_KEPT,
	  "NCCL runs a graph-captured all_gather or broadcast whose buffers it registered on one "
	  "channel when each GPU is its own node, and this net keeps such registrations (NCCL "
	  "before 2.28 or NCCL_SYMMEM_COLL_REGISTER=1; 4 x H200, 1 GiB: broadcast 0.13 -> 0.79, "
	  "all_gather 0.41 -> 0.87 of native); graph-captured send/recv then go through NCCL's "
	  "buffers", NULL },
	/* Every GPU its own node also makes NCCL pick PAT (its algorithm for
	 * one GPU per host) for all_gather and reduce_scatter of up to 128 KiB
	 * per rank.  Through the copy engines its many small steps took 3-8 x
	 * as long as Ring: on 4 x H200 a 512 KiB all_gather 491 us against
	 * 63 us with PAT excluded, 256 KiB 151 against 50 (session 14,
	 * bench/results/small-channels.md).  Ring and Tree stay NCCL's choice. */
	{ "NCCL_ALGO", "^PAT", INTRA_HOST,
	  "with each GPU its own node NCCL runs all_gather and reduce_scatter of up to 128 KiB "
	  "per rank with PAT, whose small steps through the copy engines took 3-8 x as long as "
	  "Ring (4 x H200: 512 KiB all_gather 491 -> 63 us)", NULL },
	/* NCCL_NET_SHARED_BUFFERS=0 is not here either.  With shared buffers
	 * NCCL gives the peers of one channel alternate slots of a common
	 * pool (net.cc: slot * nsubs + sub), so the steps of a connection are
	 * not adjacent and the helper cannot merge them; with it off a 4-GPU
	 * alltoall ran 231 -> 263 GB/s, but NCCL 2.28.3 then crashed
	 * (SIGSEGV in its own code) on every run with registered buffers or
	 * CUDA graphs (session 8, bench/results/alltoall-4gpu.md). */
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
	  "without it NCCL gives send/recv and alltoall 2 channels per peer on this path "
	  "(4 x H200, 1 GiB send/recv 0.13 of native instead of 0.96)" },
};

static int gpu_buffers_between_hosts(void);

/* An NCCL switch read as NCCL reads it: an integer in any base strtoll
 * takes, non-zero for on ("01" and "0x1" too). */
static int nccl_switch_on(const char *name)
{
	long long v = 0;

	return nccl_int_var(env_get, NULL, name, &v) && v != 0;
}

/* The user sends traffic between GPUs of one host through the net (and so
 * through the plugin): NCCL_P2P_DISABLE on. */
int config_p2p_off(void)
{
	return nccl_switch_on("NCCL_P2P_DISABLE");
}

int config_oob_net(void)
{
	return nccl_switch_on("NCCL_OOB_NET_ENABLE");
}

/* ... and the plugin's copy engines carry it.  With NCCL_SYMMEM_BACKEND=tcp
 * sockets do (with =ib, RDMA loopback), as between hosts, and NCCL's own sizing fits them better:
 * 32 channels of 16 MiB buffers ran a 256 MiB all_reduce over TCP at 2.2
 * GB/s, NCCL's 4 channels at 2.9, and NCCL's Socket net with its 2 at 4.0
 * (2 x H200, session 18, bench/results/tcp.md). */
static int intra_host_by_copy_engine(const struct config *cfg)
{
	return config_p2p_off() && cfg->backend != CONFIG_BACKEND_TCP &&
	       cfg->backend != CONFIG_BACKEND_IB;
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
		const char *cur = user_value(env_get, NULL, name);
		const char *value = nccl_defaults[i].value;
		enum default_when when = nccl_defaults[i].when;
		/* Asked here, after the rows before it: NCCL_NET_GDR_LEVEL first. */
		int gpu = when == INTRA_HOST_GPU_BUFFERS && intra && intra_host_gpu_buffers(cfg);
		int fits = (when == INTRA_HOST && intra) ||
			   (when == INTRA_HOST_RINGS_KEPT && intra && !cfg->pass_sm && rings_kept) ||
			   (when == INTRA_HOST_CE && by_ce) ||
			   (when == INTRA_HOST_OR_PASS_SM && (intra || cfg->pass_sm)) || gpu;
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
		setenv(DEFAULTS_SET, set, 1);
	else if (getenv(DEFAULTS_SET))
		unsetenv(DEFAULTS_SET);
	return applied;
}

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

/* Whether nccl_advice[] applies: copy engines carry the host's GPU
 * traffic and NCCL_PASS_SM is off.  With NCCL_PASS_SM=1 the channels per
 * peer are the user's call: NCCL's 2 run registered send/recv at 386 GB/s
 * on 2 CTAs per peer, 1 at 380 on one, and 16 would put 16 CTAs per peer
 * on the SMs the mode is there to give back (README, issue 4). */
static int channels_per_peer_wanted(const struct config *cfg)
{
	return cfg->nccl_defaults && !cfg->pass_sm && intra_host_by_copy_engine(cfg);
}

int config_nccl_advice(const struct config *cfg,
		       void (*emit)(const char *name, const char *value, const char *why, void *arg),
		       void *arg)
{
	int count = 0;

	if (!channels_per_peer_wanted(cfg))
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
 * NCCL hand the plugin GPU buffers, and the ibverbs path carries host
 * memory only: GPU traffic between hosts then goes over TCP. */
const char *config_rdma_passed_over(const struct config *cfg)
{
	/* Under auto, config_ib_mode() is 0 for this reason alone. */
	if (cfg->backend != CONFIG_BACKEND_AUTO || config_ib_mode(cfg) != 0)
		return NULL;
	return "NCCL hands the plugin GPU buffers (NCCL_NET_GDR_LEVEL), and its ibverbs path "
	       "carries host memory only (GPUDirect RDMA is not built)";
}

/* ---- the env plugin (NCCL_ENV_PLUGIN=symmem) --------------------------- */

/* What routes a job through the plugin, set by the env plugin where the
 * user left it unset, besides NCCL_NET_PLUGIN (the net plugin's path)
 * and nccl_advice[] (where copy engines carry GPU traffic of one host).
 * NCCL loads an env plugin before it reads any variable (NCCL 2.28.7 and
 * later), so from there even the variables it reads before it loads the
 * net plugin can be given. */
static const struct {
	const char *name;
	const char *value;
	int intra_only;		/* only while GPU traffic of one host goes through the net */
} env_routing[] = {
	{ "NCCL_NET", "symmem", 0 },
	{ "NCCL_P2P_DISABLE", "1", 0 },
	/* A user's NCCL_P2P_DISABLE=0 (the plugin between hosts only) keeps
	 * NCCL's shared-memory path inside each host too. */
	{ "NCCL_SHM_DISABLE", "1", 1 },
	{ "NCCL_NET_PLUGIN_REF_COUNT", "1", 0 },
};

/* NCCL_NET_PLUGIN as NCCL resolves it: a bare name gets libnccl-net-
 * prefixed, a path or file name is opened as written.  A list (newer NCCL
 * takes several, comma-separated) is the user's own arrangement. */
static int names_this_plugin(const char *v)
{
	const char *base = strrchr(v, '/');

	if (strchr(v, ','))
		return 0;
	base = base ? base + 1 : v;
	return !strcmp(base, "symmem") || !strcmp(base, "libnccl-net-symmem.so") ||
	       !strcmp(base, "libnccl-env-symmem.so");
}

/* NCCL ignores a NCCL_NET_PLUGIN entry of 255 characters or more, cuts
 * names at 254, and newer NCCL splits the value at commas: a path like
 * that would load no plugin at all, so the name is given instead, which
 * NCCL looks up on the loader path as for NCCL_NET_PLUGIN=symmem. */
#define NCCL_PLUGIN_NAME_MAX 254

static const char *plugin_value(const char *path)
{
	if (!path || !*path || strlen(path) > NCCL_PLUGIN_NAME_MAX || strchr(path, ','))
		return "symmem";
	return path;
}

/* Sets one variable the user left unset and adds it to `list`. */
static int env_default(const char *name, const char *value, char *list, size_t len,
		       size_t *used, int *full)
{
	char item[NCCL_PLUGIN_NAME_MAX + 64];
	int n;

	if (getenv(name) || setenv(name, value, 0) != 0)
		return 0;
	n = snprintf(item, sizeof(item), "%s=%s", name, value);
	if (n > 0)
		append_name(list, len, used, full, item,
			    (size_t)n < sizeof(item) ? (size_t)n : sizeof(item) - 1);
	return 1;
}

int config_apply_env_plugin_defaults(const char *net_plugin)
{
	const char *net = getenv("NCCL_NET"), *plugin = getenv("NCCL_NET_PLUGIN");
	/* Room for a NCCL_NET_PLUGIN of NCCL_PLUGIN_NAME_MAX and the rest. */
	char list[1024] = "";
	struct config cfg;
	char err[256];
	size_t used = 0;
	int full = 0, parsed, n = 0;

	/* The user picked another net: their job, left as it is. */
	if ((plugin && !names_this_plugin(plugin)) || (net && strcasecmp(net, "symmem") != 0))
		return 0;
	/* A malformed NCCL_SYMMEM_ variable still routes the job here, so the
	 * net plugin's init names it in a WARN and fails, instead of NCCL
	 * running quietly without the plugin.  NCCL_SYMMEM_NCCL_DEFAULTS=0
	 * keeps the routing (what NCCL_ENV_PLUGIN=symmem is asked for; v1's
	 * init has no logger to say it did nothing) and drops the tuning. */
	parsed = config_parse(&cfg, env_get, NULL, err, sizeof(err)) == 0;
	n += env_default("NCCL_NET_PLUGIN", plugin_value(net_plugin), list, sizeof(list), &used,
			 &full);
	for (size_t i = 0; i < sizeof(env_routing) / sizeof(env_routing[0]); i++)
		if (!env_routing[i].intra_only || config_p2p_off())
			n += env_default(env_routing[i].name, env_routing[i].value, list,
					 sizeof(list), &used, &full);
	if (!parsed || channels_per_peer_wanted(&cfg))
		for (size_t i = 0; i < sizeof(nccl_advice) / sizeof(nccl_advice[0]); i++)
			n += env_default(nccl_advice[i].name, nccl_advice[i].value, list,
					 sizeof(list), &used, &full);
	/* Nothing set here (a process that inherited all of it) keeps what
	 * its parent's env plugin set. */
	if (n)
		setenv(ENV_PLUGIN_SET, list, 1);
	return n;
}

const char *config_env_plugin_applied(void)
{
	const char *v = getenv(ENV_PLUGIN_SET);

	return v ? v : "";
}
