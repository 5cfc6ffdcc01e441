/* The value parser: what each kind of variable accepts, and the error
 * message for a value it does not.  Private to plugin/config/ and
 * their unit tests; the rest of the plugin includes config.h only.
 *
 * Value forms, common to every variable of the plugin's own:
 *  - A value that is empty (or only whitespace) is an error: exporting a
 *    variable empty is a mistake, not a request for the default.
 *  - Scalars (bool, tristate, integer, size, decimal, backend) tolerate
 *    surrounding whitespace.  Lists (NCCL_IB_HCA, NCCL_SOCKET_IFNAME),
 *    paths and library names are kept verbatim, so whitespace anywhere
 *    in them is rejected.
 *  - Sizes are a decimal integer, then optionally exactly one space, then
 *    an optional unit K, KB, KiB, M, MB, MiB, G, GB, GiB, T, TB, TiB (case
 *    insensitive).  Every unit is a power of 1024: "2MB" is 2097152.
 *  - Decimals are [+-]digits[.digits]; no exponent, hex, inf or nan.
 *
 * NCCL's own variables (`nccl` set) are read as NCCL reads them, so that a
 * value NCCL runs with never fails the plugin's init (with NCCL_NET=symmem
 * that fails every communicator):
 *  - integers are strtoll(s, NULL, 0): hex and octal taken, text after the
 *    number ignored, no number at all read as 0; one that does not fit 64
 *    bits keeps the default, as NCCL does;
 *  - lists skip empty entries, and one with no entry at all is unset, as
 *    NCCL's parseStringList and matchIfList read it.
 * A value NCCL takes but the plugin cannot use (an ibverbs field out of
 * its range) keeps NCCL's default, noted in cfg->warnings for one WARN at
 * init.  (An empty value of NCCL's is unset: the caller skips it.) */
#ifndef SYMMEM_PLUGIN_CONFIG_PARSE_H
#define SYMMEM_PLUGIN_CONFIG_PARSE_H

#include <stddef.h>
#include <stdint.h>

#include "config.h"

enum config_kind {
	CONFIG_KIND_BOOL,
	CONFIG_KIND_TRISTATE,
	CONFIG_KIND_INT,
	CONFIG_KIND_SIZE,
	CONFIG_KIND_FACTOR,		/* decimal, min <= x <= max */
	CONFIG_KIND_SECONDS,		/* decimal, 0 < x <= max */
	CONFIG_KIND_BACKEND,
	CONFIG_KIND_HCA_LIST,		/* [^][=]name[:port],... */
	CONFIG_KIND_IFNAME_LIST,	/* [^][=]prefix,... */
	CONFIG_KIND_PATH,		/* an absolute file name */
	CONFIG_KIND_LIBRARY,		/* a shared library: a name or a file name */
};

/* One row of plugin/config_vars.h. */
struct config_var {
	const char *name;
	enum config_kind kind;
	size_t off;			/* where the value lives in struct config */
	size_t len;			/* the field's size: a list's or path's buffer */
	int nccl;			/* NCCL's own: read as NCCL reads it */
	long long idef, imin, imax;	/* bool, tristate, int, backend */
	uint64_t udef, umin, umax;	/* size */
	double ddef, dmin, dmax;	/* factor, seconds */
};

/* Parses the set value `val` of `v` into `cfg`.  Returns 0, or -1 with
 * what is wrong with it ("is not a size") in `problem`. */
int config_parse_value(struct config *cfg, const struct config_var *v, const char *val,
		       char *problem, size_t plen);

/* The one-line error for a value config_parse_value() refused:
 * "NAME='value' problem (accepted: form)", the value cut and made
 * printable.  Writes nothing without a buffer. */
void config_value_error(const struct config_var *v, const char *val, const char *problem,
			char *err, size_t errlen);

/* `v`'s value in `cfg` as a user would write it, so that it parses back
 * to the same value. */
void config_format_value(const struct config *cfg, const struct config_var *v, char *buf,
			 size_t len);

/* A size in the largest unit that holds it exactly ("4MiB", "4097"). */
void config_format_size(uint64_t v, char *buf, size_t len);

#endif
