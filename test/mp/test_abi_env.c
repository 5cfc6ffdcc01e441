/* Every env table the built env plugin (libnccl-env-symmem.so) exports,
 * read through the layouts NCCL declares (abi_layouts.h): its slots, init
 * through each version's parameter list (v2 with NCCL's logger), getEnv
 * answering from the environment, finalize.  A process of its own: init
 * sets variables in the environment. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "abi_layouts.h"

static void *lib;
static int warns, infos;

static void logger(int level, unsigned long flags, const char *file, int line, const char *fmt,
		   ...)
{
	(void)flags;
	(void)file;
	(void)line;
	(void)fmt;
	if (level == ABI_LOG_WARN)
		warns++;
	else
		infos++;
}

/* Only v1 and v2 exist (NCCL 2.28.7 on); v2 (NCCL 2.30's) is exported. */
static void exported_tables(void **state)
{
	(void)state;
	for (int v = 1; v <= 32; v++) {
		char sym[32];

		snprintf(sym, sizeof(sym), "ncclEnvPlugin_v%d", v);
		if (dlsym(lib, sym) && v > 2)
			fail_msg("%s is exported, but this test has no layout for it", sym);
	}
	assert_non_null(dlsym(lib, "ncclEnvPlugin_v2"));
}

/* getEnv reads the environment as NCCL's own does, and finalize works. */
static void answers(const char *name, const char *(*get)(const char *), abi_rc (*fin)(void))
{
	assert_string_equal(name, "symmem");
	setenv("SYMMEM_ABI_PROBE", "42", 1);
	assert_string_equal(get("SYMMEM_ABI_PROBE"), "42");
	unsetenv("SYMMEM_ABI_PROBE");
	assert_null(get("SYMMEM_ABI_PROBE"));
	assert_int_equal(fin(), ABI_OK);
}

static void env_v1(void **state)
{
	const struct abi_env_v1 *t = dlsym(lib, "ncclEnvPlugin_v1");

	(void)state;
	if (!t)
		skip();
	assert_non_null(t->init);
	assert_non_null(t->finalize);
	assert_non_null(t->getEnv);
	assert_int_equal(t->init(2, 28, 9, ""), ABI_OK);
	answers(t->name, t->getEnv, t->finalize);
}

static void env_v2(void **state)
{
	const struct abi_env_v2 *t = dlsym(lib, "ncclEnvPlugin_v2");

	(void)state;
	assert_non_null(t);
	assert_non_null(t->init);
	assert_non_null(t->finalize);
	assert_non_null(t->getEnv);
	warns = infos = 0;
	assert_int_equal(t->init(2, 30, 7, "", logger), ABI_OK);
	assert_int_equal(warns, 0);
	assert_int_equal(infos, 1);	/* what it set, to NCCL's log */
	answers(t->name, t->getEnv, t->finalize);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(exported_tables),
		cmocka_unit_test(env_v2),
		cmocka_unit_test(env_v1),
	};
	const char *path = getenv("SYMMEM_ENV_PLUGIN");

	lib = path ? dlopen(path, RTLD_NOW | RTLD_LOCAL) : NULL;
	if (!lib) {
		fprintf(stderr, "SYMMEM_ENV_PLUGIN: %s\n", path ? dlerror() : "not set");
		return 1;
	}
	return cmocka_run_group_tests(tests, NULL, NULL);
}
