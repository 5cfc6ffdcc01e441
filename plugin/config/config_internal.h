/* What the config files share among themselves: config.c (loading),
 * config_nccl_defaults.c (what the plugin sets for NCCL) and
 * config_route.c (the env plugin's routing).  Nothing else includes it;
 * the rest of the plugin sees config.h only. */
#ifndef SYMMEM_PLUGIN_CONFIG_INTERNAL_H
#define SYMMEM_PLUGIN_CONFIG_INTERNAL_H

#include <stddef.h>

#include "config.h"

/* What config_apply_nccl_defaults() set, "NAME=value;NAME=value" (values
 * may hold spaces, never ';'), kept in the environment beside them.  A
 * process that parses the environment again (a child that inherits it, or
 * the plugin loaded anew by a later NCCL) must not take the plugin's own
 * defaults for the user's choices: a NCCL_PROTO counted as the user's turns
 * the tuner's LL128 rule off. */
#define CONFIG_DEFAULTS_SET "NCCL_SYMMEM_NCCL_DEFAULTS_SET"

/* What config_apply_env_plugin_defaults() set, "NAME=value ...", for the
 * net plugin's init to log: the env plugin gets no logger in v1, and it is
 * another library, so the list goes where both look, the environment. */
#define CONFIG_ENV_PLUGIN_SET "NCCL_SYMMEM_ENV_PLUGIN_SET"

/* ---- config.c ------------------------------------------------------------ */

/* getenv() as a config_getenv_fn. */
const char *config_env_get(const char *name, void *arg);

/* An NCCL variable as the user set it: NULL when unset, and also when its
 * value is the plugin's own default from an earlier init
 * (CONFIG_DEFAULTS_SET). */
const char *config_user_value(config_getenv_fn get, void *arg, const char *name);

/* Appends `n` bytes of `word` to the space-separated list `out` unless
 * they would not fit; once one does not, `*full` is set and nothing more
 * is written, so the list is always a prefix of the whole one. */
void config_append_word(char *out, size_t outlen, size_t *used, int *full, const char *word,
			size_t n);

/* ---- config_nccl_defaults.c ---------------------------------------------- */

/* Whether the variables of config_nccl_advice() apply: copy engines carry
 * the host's GPU traffic, the NCCL defaults are on and NCCL_PASS_SM off. */
int config_advice_wanted(const struct config *cfg);

/* `fn` hears each variable of config_nccl_advice() with the value the
 * plugin wants, whether or not it is set. */
void config_advice_each(void (*fn)(const char *name, const char *value, void *arg), void *arg);

#endif
