/* The value parser (config_parse.h): one function per value form, the
 * accepted form of each kind, and the error message for a refused value. */
#include "config_parse.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* Bytes of the user's value quoted in an error message, so one absurd
 * value cannot push the variable name and the accepted form out of a
 * caller's buffer. */
#define QUOTE_MAX 128

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

static void *field(struct config *cfg, const struct config_var *v)
{
	return (char *)cfg + v->off;
}

static const void *cfield(const struct config *cfg, const struct config_var *v)
{
	return (const char *)cfg + v->off;
}

void config_format_size(uint64_t v, char *buf, size_t len)
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
static void parse_nccl_number(struct config *cfg, const struct config_var *v, const char *val)
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
	if (v->kind == CONFIG_KIND_TRISTATE) {
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

static void accepted_form(const struct config_var *v, char *buf, size_t len)
{
	char lo[32], hi[32];

	switch (v->kind) {
	case CONFIG_KIND_BOOL:
		snprintf(buf, len, "0/1, true/false, yes/no, on/off");
		break;
	case CONFIG_KIND_TRISTATE:
		snprintf(buf, len, "an integer, <0 auto, 0 off, >0 on; or 0/1, true/false, yes/no, on/off");
		break;
	case CONFIG_KIND_INT:
		snprintf(buf, len, "an integer %lld..%lld", v->imin, v->imax);
		break;
	case CONFIG_KIND_SIZE:
		if (v->umin == 0 && v->umax == UINT64_MAX) {
			snprintf(buf, len, "4096, 64K, 2MB, 4GB, 1GiB");
			break;
		}
		config_format_size(v->umin, lo, sizeof(lo));
		config_format_size(v->umax, hi, sizeof(hi));
		snprintf(buf, len, "4096, 64K, 2MB, 4GB, 1GiB, within %s..%s", lo, hi);
		break;
	case CONFIG_KIND_FACTOR:
		snprintf(buf, len, "a decimal number %g..%g, e.g. 1.5", v->dmin, v->dmax);
		break;
	case CONFIG_KIND_SECONDS:
		snprintf(buf, len, "seconds, a decimal number > 0 and <= %g, e.g. 10 or 0.5", v->dmax);
		break;
	case CONFIG_KIND_BACKEND:
		snprintf(buf, len, "auto, shm, tcp, ib");
		break;
	case CONFIG_KIND_HCA_LIST:
		snprintf(buf, len, "[^][=]name[:port][,name[:port]...], name of A-Za-z0-9_.-, port 1..%d, at most %zu characters",
			 HCA_PORT_MAX, v->len - 1);
		break;
	case CONFIG_KIND_IFNAME_LIST:
		snprintf(buf, len, "[^][=]prefix[,prefix...], prefix of A-Za-z0-9_.:-, at most %zu characters",
			 v->len - 1);
		break;
	case CONFIG_KIND_PATH:
		snprintf(buf, len, "an absolute file name, at most %zu characters", v->len - 1);
		break;
	case CONFIG_KIND_LIBRARY:
		snprintf(buf, len, "a library name or file name without whitespace, at most %zu "
			 "characters", v->len - 1);
		break;
	}
}

static int printable_word(const char *s)
{
	for (; *s; s++)
		if (isspace((unsigned char)*s) || iscntrl((unsigned char)*s))
			return 0;
	return 1;
}

int config_parse_value(struct config *cfg, const struct config_var *v, const char *val,
		       char *problem, size_t plen)
{
	const char *s = val;
	size_t n = strlen(val);
	enum parse_rc rc = PARSE_OK;
	const char *what = "";
	const char *range = "is out of range";
	int list = v->kind == CONFIG_KIND_HCA_LIST || v->kind == CONFIG_KIND_IFNAME_LIST;
	char why[64];

	if (v->nccl && (v->kind == CONFIG_KIND_INT || v->kind == CONFIG_KIND_TRISTATE)) {
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
	case CONFIG_KIND_BOOL:
		rc = parse_bool_span(s, n, field(cfg, v));
		what = "is not a boolean";
		break;
	case CONFIG_KIND_TRISTATE:
		rc = parse_tristate(s, n, field(cfg, v));
		what = "is not an integer or boolean";
		break;
	case CONFIG_KIND_INT: {
		long long x;

		rc = parse_int(s, n, v->imin, v->imax, &x);
		if (rc == PARSE_OK)
			*(int *)field(cfg, v) = (int)x;
		what = "is not an integer";
		break;
	}
	case CONFIG_KIND_SIZE: {
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
	case CONFIG_KIND_FACTOR:
	case CONFIG_KIND_SECONDS: {
		double x;
		int low;

		rc = parse_decimal(s, n, &x);
		if (rc == PARSE_OK) {
			low = v->kind == CONFIG_KIND_SECONDS ? !(x > 0.0) : !(x >= v->dmin);
			if (low || x > v->dmax)
				rc = PARSE_RANGE;
		}
		if (rc == PARSE_OK)
			*(double *)field(cfg, v) = x;
		what = "is not a decimal number";
		break;
	}
	case CONFIG_KIND_BACKEND:
		rc = parse_backend(s, n, field(cfg, v));
		what = "is not a backend";
		break;
	case CONFIG_KIND_HCA_LIST:
	case CONFIG_KIND_IFNAME_LIST:
	case CONFIG_KIND_PATH:
	case CONFIG_KIND_LIBRARY:
		/* Verbatim: untrimmed, so stray whitespace is reported. */
		if (strlen(val) >= v->len) {
			snprintf(problem, plen, "is too long (%zu characters)", strlen(val));
			return -1;
		}
		if (v->kind == CONFIG_KIND_PATH && val[0] != '/') {
			snprintf(problem, plen, "is not an absolute file name");
			return -1;
		}
		/* dlopen would take it, but a stray space is a typo. */
		if (v->kind == CONFIG_KIND_LIBRARY && !printable_word(val)) {
			snprintf(problem, plen, "has whitespace or a control character in it");
			return -1;
		}
		if (!list) {
			memcpy(field(cfg, v), val, strlen(val) + 1);
			return 0;
		}
		switch (read_list(val, v->kind == CONFIG_KIND_HCA_LIST, field(cfg, v), why, sizeof(why))) {
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

void config_value_error(const struct config_var *v, const char *val, const char *problem,
			char *err, size_t errlen)
{
	char quoted[QUOTE_MAX], accepted[160];

	if (!err || errlen == 0)
		return;
	quote_value(val, quoted, sizeof(quoted));
	accepted_form(v, accepted, sizeof(accepted));
	snprintf(err, errlen, "%s='%s' %s (accepted: %s)", v->name, quoted, problem, accepted);
}

/* ---- writing values back --------------------------------------------- */

void config_format_value(const struct config *cfg, const struct config_var *v, char *buf,
			 size_t len)
{
	const void *p = cfield(cfg, v);

	switch (v->kind) {
	case CONFIG_KIND_BOOL:
	case CONFIG_KIND_TRISTATE:
	case CONFIG_KIND_INT:
		snprintf(buf, len, "%d", *(const int *)p);
		break;
	case CONFIG_KIND_SIZE:
		config_format_size(*(const uint64_t *)p, buf, len);
		break;
	case CONFIG_KIND_FACTOR:
	case CONFIG_KIND_SECONDS:
		/* Enough digits that a value reads back as what was set. */
		snprintf(buf, len, "%.15g", *(const double *)p);
		break;
	case CONFIG_KIND_BACKEND: {
		int b = *(const int *)p;

		if (b >= 0 && (size_t)b < sizeof(backend_names) / sizeof(backend_names[0]))
			snprintf(buf, len, "%s", backend_names[b]);
		else
			snprintf(buf, len, "%d", b);
		break;
	}
	case CONFIG_KIND_HCA_LIST:
	case CONFIG_KIND_IFNAME_LIST:
	case CONFIG_KIND_PATH:
	case CONFIG_KIND_LIBRARY:
		snprintf(buf, len, "%s", (const char *)p);
		break;
	}
}

/* ---- CUDA_VISIBLE_DEVICES ------------------------------------------------ */

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
