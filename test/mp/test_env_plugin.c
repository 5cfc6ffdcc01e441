/* The env plugin as NCCL loads it: real NCCL (ncclGetUniqueId needs no
 * GPU, and it is the first call that reads NCCL's environment) opens
 * NCCL_ENV_PLUGIN=symmem as libnccl-env-symmem.so from the loader path,
 * and the library sets what routes the job through it.  Each case runs in
 * a fresh process: NCCL loads its env plugin once per process.
 *
 * NCCL itself is opened at run time (libnccl.so.2 on the loader path the
 * test is given) and skipped where there is none; its header is not
 * needed: only ncclGetUniqueId is called, whose id is 128 bytes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <dlfcn.h>

#include "harness.h"

typedef struct {
	char internal[128];
} unique_id_t;

/* NCCL's first call: 0 (ncclSuccess) or its error, -1 without NCCL. */
static int nccl_first_call(void)
{
	void *nccl = dlopen("libnccl.so.2", RTLD_NOW | RTLD_GLOBAL);
	ncclResult_t (*get_id)(unique_id_t *);
	unique_id_t id;

	if (!nccl)
		return -1;
	*(void **)&get_id = dlsym(nccl, "ncclGetUniqueId");
	return get_id ? (int)get_id(&id) : -1;
}

/* The line NCCL logs once it uses the plugin's table. */
#define LOADED "Successfully loaded external env plugin"

/* NCCL's log file, named by the parent before each child starts. */
static char log_path[64];

static int log_has(const char *needle)
{
	const char *path = getenv("NCCL_DEBUG_FILE");
	char line[1024];
	FILE *f = path ? fopen(path, "r") : NULL;
	int found = 0;

	if (!f)
		return 0;
	while (!found && fgets(line, sizeof(line), f))
		found = strstr(line, needle) != NULL;
	fclose(f);
	return found;
}

/* NCCL's first call in this process: 0 once it ran and NCCL says it
 * loaded the env plugin. */
static int first_call_loads_plugin(void)
{
	if (nccl_first_call() != 0)
		return 10;
	return log_has(LOADED) ? 0 : 11;
}

static int is(const char *name, const char *want)
{
	const char *v = getenv(name);

	if (!want)
		return v == NULL;
	return v && strcmp(v, want) == 0;
}

/* NCCL's first call with nothing but NCCL_ENV_PLUGIN set: the routing is
 * in the environment afterwards, NCCL_NET_PLUGIN naming the net plugin
 * beside the env plugin by its full path; that net plugin, opened from
 * there, logs at init what the env plugin set. */
static int child_defaults(void)
{
	const char *plugin;
	int rc = first_call_loads_plugin();

	if (rc)
		return rc;
	if (!is("NCCL_NET", "symmem") || !is("NCCL_P2P_DISABLE", "1") ||
	    !is("NCCL_SHM_DISABLE", "1") || !is("NCCL_NET_PLUGIN_REF_COUNT", "1") ||
	    !is("NCCL_NCHANNELS_PER_NET_PEER", "16"))
		return 12;
	plugin = getenv("NCCL_NET_PLUGIN");
	if (!plugin || plugin[0] != '/' || !strstr(plugin, "/libnccl-net-symmem.so"))
		return 13;
	setenv("SYMMEM_PLUGIN", plugin, 1);
	if (!harness_open() || !harness_init())
		return 14;
	if (harness_info_count("env plugin (NCCL_ENV_PLUGIN) set what the user left unset: "
			       "NCCL_NET_PLUGIN=/") != 1)
		return 15;
	return 0;
}

/* The user's own values win, read by NCCL as they were. */
static int child_user_values(void)
{
	int rc = first_call_loads_plugin();

	if (rc)
		return rc;
	if (!is("NCCL_P2P_DISABLE", "0") || !is("NCCL_SHM_DISABLE", NULL) ||
	    !is("NCCL_NCHANNELS_PER_NET_PEER", NULL) || !is("NCCL_NET", "symmem"))
		return 12;
	return 0;
}

/* Another net plugin named: the env plugin loads and sets nothing. */
static int child_other_net(void)
{
	int rc = first_call_loads_plugin();

	if (rc)
		return rc;
	if (!is("NCCL_NET_PLUGIN", "other") || !is("NCCL_NET", NULL) ||
	    !is("NCCL_P2P_DISABLE", NULL) || !is("NCCL_NCHANNELS_PER_NET_PEER", NULL))
		return 12;
	return 0;
}

/* The v2 table, as an NCCL after 2.28.9 would use it (it probes v2
 * before v1; 2.28.9 knows v1 only, so no NCCL here can call it): called
 * directly, with a logger.  It routes as v1 does and logs the list. */
static const ncclEnv_v2_t *v2_table(void)
{
	void *lib = dlopen("libnccl-env-symmem.so", RTLD_NOW | RTLD_LOCAL);

	return lib ? dlsym(lib, "ncclEnvPlugin_v2") : NULL;
}

static int child_v2(void)
{
	const ncclEnv_v2_t *v2 = v2_table();
	const char *net;

	if (!v2 || strcmp(v2->name, "symmem") != 0)
		return 10;
	if (v2->init(2, 29, 0, "", harness_logger) != ncclSuccess)
		return 11;
	if (!is("NCCL_NET", "symmem") || !is("NCCL_P2P_DISABLE", "1") ||
	    !is("NCCL_NCHANNELS_PER_NET_PEER", "16"))
		return 12;
	net = v2->getEnv("NCCL_NET_PLUGIN");
	if (!net || net[0] != '/' || !strstr(net, "/libnccl-net-symmem.so"))
		return 13;
	if (harness_info_count("ENV/Plugin symmem set what the user left unset: "
			       "NCCL_NET_PLUGIN=/") != 1 || harness_warn_count())
		return 14;
	if (v2->finalize() != ncclSuccess)
		return 15;
	return 0;
}

/* v2 where another net plugin is named: nothing set, and the line says
 * so even with a list a parent's env plugin left in the environment. */
static int child_v2_nothing(void)
{
	const ncclEnv_v2_t *v2 = v2_table();

	if (!v2 || v2->init(2, 29, 0, "", harness_logger) != ncclSuccess)
		return 10;
	if (!is("NCCL_NET_PLUGIN", "other") || !is("NCCL_NET", NULL))
		return 11;
	if (harness_info_count("ENV/Plugin symmem set what the user left unset: nothing") != 1)
		return 12;
	return 0;
}

/* Needs no NCCL: never skipped. */
static void test_v2_table(void **state)
{
	const char *none[] = { NULL };

	const char *other[] = { "NCCL_NET_PLUGIN", "other", "NCCL_SYMMEM_ENV_PLUGIN_SET",
				"NCCL_NET=symmem", NULL };

	(void)state;
	assert_int_equal(harness_run_child("test_env_plugin", "--child-v2", none), 0);
	assert_int_equal(harness_run_child("test_env_plugin", "--child-v2-nothing", other), 0);
}

/* What every child starts from (set in main): none of the variables the
 * env plugin sets or reads, NCCL_ENV_PLUGIN, and NCCL's log in a file. */
static const char *const cleared[] = {
	"NCCL_NET_PLUGIN", "NCCL_NET", "NCCL_P2P_DISABLE", "NCCL_SHM_DISABLE",
	"NCCL_NET_PLUGIN_REF_COUNT", "NCCL_NCHANNELS_PER_NET_PEER", "NCCL_SYMMEM_NCCL_DEFAULTS",
	"NCCL_SYMMEM_BACKEND", "NCCL_TUNER_PLUGIN", "NCCL_SYMMEM_ENV_PLUGIN_SET",
};

static void child_environment(void)
{
	for (size_t i = 0; i < sizeof(cleared) / sizeof(cleared[0]); i++)
		unsetenv(cleared[i]);
	setenv("NCCL_ENV_PLUGIN", "symmem", 1);
	/* ncclGetUniqueId picks a bootstrap interface: loopback, so a
	 * machine with no other network still runs the test. */
	setenv("NCCL_SOCKET_IFNAME", "lo", 1);
	setenv("NCCL_DEBUG", "INFO", 1);
	setenv("NCCL_DEBUG_SUBSYS", "INIT,ENV", 1);
	setenv("NCCL_DEBUG_FILE", log_path, 1);
}

/* Whether NCCL can be opened: each test is skipped (not passed) where
 * not.  Asked in the test body, since cmocka 1.1 counts a skip() in a
 * setup fixture as a failed setup. */
static int have_nccl(void)
{
	void *nccl = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);

	if (!nccl)
		return 0;
	dlclose(nccl);
	return 1;
}

/* Runs `mode` in a child (child_environment's, plus `env`), which must
 * pass; skipped where no NCCL can be opened. */
static void expect_child(const char *mode, const char *const *env)
{
	if (!have_nccl())
		skip();
	assert_int_equal(harness_run_child("test_env_plugin", mode, env), 0);
}

static void test_defaults(void **state)
{
	const char *none[] = { NULL };

	(void)state;
	expect_child("--child-defaults", none);
}

static void test_user_values(void **state)
{
	const char *env[] = { "NCCL_P2P_DISABLE", "0", NULL };

	(void)state;
	expect_child("--child-user-values", env);
}

static void test_other_net(void **state)
{
	const char *env[] = { "NCCL_NET_PLUGIN", "other", NULL };

	(void)state;
	expect_child("--child-other-net", env);
}

static int teardown(void **state)
{
	(void)state;
	unlink(log_path);
	return 0;
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_defaults, teardown),
		cmocka_unit_test_teardown(test_user_values, teardown),
		cmocka_unit_test_teardown(test_other_net, teardown),
		cmocka_unit_test(test_v2_table),
	};

	if (argc > 1 && strcmp(argv[1], "--child-defaults") == 0)
		return child_defaults();
	if (argc > 1 && strcmp(argv[1], "--child-user-values") == 0)
		return child_user_values();
	if (argc > 1 && strcmp(argv[1], "--child-other-net") == 0)
		return child_other_net();
	if (argc > 1 && strcmp(argv[1], "--child-v2") == 0)
		return child_v2();
	if (argc > 1 && strcmp(argv[1], "--child-v2-nothing") == 0)
		return child_v2_nothing();
	snprintf(log_path, sizeof(log_path), "/tmp/test_env_plugin.%d.log", (int)getpid());
	child_environment();
	return cmocka_run_group_tests(tests, NULL, NULL);
}
