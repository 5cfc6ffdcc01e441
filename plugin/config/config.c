/* Loading the configuration: every variable of config_vars.h parsed once
 * per process (config_parse.c reads each value), the sizes that depend on
 * each other checked, NCCL's own variables that the plugin only looks at
 * read as NCCL reads them, and the lines that describe it all for the one
 * INFO block at init. */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config_internal.h"
#include "config_parse.h"
#include "config_vars.h"

extern char **environ;

/* ---- the table ----------------------------------------------------------- */

/* Each kind's default and range, from a row's (def, min, max).  Lists and
 * paths have neither: "" (unset) is their default. */
#define LIMITS_BOOL(d, lo, hi) .idef = (d)
#define LIMITS_TRISTATE(d, lo, hi) .idef = (d)
#define LIMITS_INT(d, lo, hi) .idef = (d), .imin = (lo), .imax = (hi)
#define LIMITS_SIZE(d, lo, hi) .udef = (d), .umin = (lo), .umax = (hi)
#define LIMITS_FACTOR(d, lo, hi) .ddef = (d), .dmin = (lo), .dmax = (hi)
#define LIMITS_SECONDS(d, lo, hi) .ddef = (d), .dmin = (lo), .dmax = (hi)
#define LIMITS_BACKEND(d, lo, hi) .idef = (d)
#define LIMITS_HCA_LIST(d, lo, hi)
#define LIMITS_IFNAME_LIST(d, lo, hi)
#define LIMITS_PATH(d, lo, hi)
#define LIMITS_LIBRARY(d, lo, hi)

#define OWNER_OWN 0
#define OWNER_NCCL 1

#define VAR_ROW(nm, kd, fld, d, lo, hi, owner) \
	{ .name = #nm, .kind = CONFIG_KIND_##kd, .off = offsetof(struct config, fld), \
	  .len = sizeof(((struct config *)0)->fld), .nccl = OWNER_##owner, \
	  LIMITS_##kd(d, lo, hi) },

static const struct config_var vars[] = { CONFIG_VARS(VAR_ROW) };

#define NVARS (sizeof(vars) / sizeof(vars[0]))

/* The field's type each kind writes ('i' int, 'u' uint64_t, 'd' double,
 * 's' a char buffer): a row naming a field of another type would write
 * past it or misread it, so it fails to compile. */
#define TYPE_BOOL 'i'
#define TYPE_TRISTATE 'i'
#define TYPE_INT 'i'
#define TYPE_SIZE 'u'
#define TYPE_FACTOR 'd'
#define TYPE_SECONDS 'd'
#define TYPE_BACKEND 'i'
#define TYPE_HCA_LIST 's'
#define TYPE_IFNAME_LIST 's'
#define TYPE_PATH 's'
#define TYPE_LIBRARY 's'

#define FIELD_TYPE(fld) _Generic(((struct config *)0)->fld, int: 'i', uint64_t: 'u', \
				 double: 'd', char *: 's', default: '?')

#define VAR_CHECK(nm, kd, fld, d, lo, hi, owner) \
	_Static_assert(FIELD_TYPE(fld) == TYPE_##kd, #nm ": the field does not fit the kind");

CONFIG_VARS(VAR_CHECK)

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

static const struct config_var *find_var(const char *name, size_t n)
{
	for (size_t i = 0; i < NVARS; i++) {
		if (strlen(vars[i].name) == n && strncmp(vars[i].name, name, n) == 0)
			return &vars[i];
	}
	return NULL;
}

static void *field(struct config *cfg, const struct config_var *v)
{
	return (char *)cfg + v->off;
}

static const void *cfield(const struct config *cfg, const struct config_var *v)
{
	return (const char *)cfg + v->off;
}

/* ---- parsing ------------------------------------------------------------- */

/* Whether `val` counts as set: NCCL takes an empty value of its own
 * variables as unset (ncclLoadParam, parseStringList). */
static int value_set(const struct config_var *v, const char *val)
{
	return val && (val[0] || !v->nccl);
}

static void set_defaults(struct config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	for (size_t i = 0; i < NVARS; i++) {
		const struct config_var *v = &vars[i];

		switch (v->kind) {
		case CONFIG_KIND_BOOL:
		case CONFIG_KIND_TRISTATE:
		case CONFIG_KIND_INT:
		case CONFIG_KIND_BACKEND:
			*(int *)field(cfg, v) = (int)v->idef;
			break;
		case CONFIG_KIND_SIZE:
			*(uint64_t *)field(cfg, v) = v->udef;
			break;
		case CONFIG_KIND_FACTOR:
		case CONFIG_KIND_SECONDS:
			*(double *)field(cfg, v) = v->ddef;
			break;
		case CONFIG_KIND_HCA_LIST:
		case CONFIG_KIND_IFNAME_LIST:
		case CONFIG_KIND_PATH:
		case CONFIG_KIND_LIBRARY:
			/* "" from the memset: unset means no filter / the default. */
			break;
		}
	}
	cfg->user_min_channels = -1;	/* 0 is a minimum a user can set */
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
		const struct config_var *l = find_var(lname, strlen(lname));
		const struct config_var *s = find_var(sname, strlen(sname));
		uint64_t lv = *(const uint64_t *)cfield(cfg, l);
		uint64_t sv = *(const uint64_t *)cfield(cfg, s);
		char lbuf[32], sbuf[32];

		if (lv >= sv)
			continue;
		if (err && errlen) {
			config_format_size(lv, lbuf, sizeof(lbuf));
			config_format_size(sv, sbuf, sizeof(sbuf));
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

static void note_visible_gpus(struct config *cfg, const char *cvd)
{
	cfg->gpus_visible[0] = '\0';
	cfg->ngpus_visible = config_visible_gpus(cvd);
	if (cfg->ngpus_visible)
		snprintf(cfg->gpus_visible, sizeof(cfg->gpus_visible), "%s", cvd);
}

/* 1 when `val` is what the plugin itself gave `name` (CONFIG_DEFAULTS_SET). */
static int set_by_plugin(config_getenv_fn get, void *arg, const char *name, const char *val)
{
	const char *p = get(CONFIG_DEFAULTS_SET, arg);
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

const char *config_user_value(config_getenv_fn get, void *arg, const char *name)
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
	const char *s = config_user_value(get, arg, name);
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
		const struct config_var *v = &vars[i];
		const char *val = get(v->name, arg);

		if (!value_set(v, val))
			continue;
		if (config_parse_value(cfg, v, val, problem, sizeof(problem)) == 0)
			continue;
		config_value_error(v, val, problem, err, errlen);
		return -1;
	}
	note_visible_gpus(cfg, get(CUDA_VISIBLE, arg));
	/* Read before the plugin sets its own NCCL_PROTO and
	 * NCCL_MIN_NCHANNELS defaults. */
	cfg->user_proto = config_user_value(get, arg, "NCCL_PROTO") != NULL;
	/* NCCL_NET_PLUGIN_REF_COUNT starts NCCL's count of the plugin's
	 * users; read the way NCCL reads its own integers (strtoll, base 0). */
	cfg->kept_loaded = nccl_int_var(get, arg, "NCCL_NET_PLUGIN_REF_COUNT", &ref_count) &&
			   ref_count > 0;
	note_channel_bounds(cfg, get, arg);
	return check_size_order(cfg, get, arg, err, errlen);
}

/* ---- describing ---------------------------------------------------------- */

void config_describe(const struct config *cfg, config_getenv_fn get, void *arg, int all,
		     void (*emit)(const char *line, void *arg), void *emit_arg)
{
	char value[300], line[400];

	for (size_t i = 0; i < NVARS; i++) {
		const struct config_var *v = &vars[i];
		int set = get && value_set(v, get(v->name, arg));

		if (!set && !all)
			continue;
		config_format_value(cfg, v, value, sizeof(value));
		snprintf(line, sizeof(line), "%s=%s (%s)", v->name, value, set ? "set" : "default");
		emit(line, emit_arg);
	}
}

/* ---- the process environment ------------------------------------------ */

static pthread_once_t env_once = PTHREAD_ONCE_INIT;
static struct config env_cfg;
static int env_ok;
static char env_err[512];

const char *config_env_get(const char *name, void *arg)
{
	(void)arg;
	return getenv(name);
}

static void env_load(void)
{
	env_ok = config_parse(&env_cfg, config_env_get, NULL, env_err, sizeof(env_err)) == 0;
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

void config_append_word(char *out, size_t outlen, size_t *used, int *full, const char *word,
			size_t n)
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
	memcpy(out + *used, word, n);
	*used += n;
	out[*used] = '\0';
}

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
		if (find_var(*e, n) || is_name(*e, n, CONFIG_ENV_PLUGIN_SET) ||
		    is_name(*e, n, CONFIG_DEFAULTS_SET))
			continue;
		count++;
		config_append_word(out, outlen, &used, &full, *e, n);
	}
	return count;
}

/* ---- NCCL's switches, read when asked ---------------------------------- */

/* An NCCL switch read as NCCL reads it: an integer in any base strtoll
 * takes, non-zero for on ("01" and "0x1" too). */
static int nccl_switch_on(const char *name)
{
	long long v = 0;

	return nccl_int_var(config_env_get, NULL, name, &v) && v != 0;
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
