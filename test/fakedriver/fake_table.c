/* The one symbol the plugin looks up by name, cuGetProcAddress_v2, and
 * the mode (fake.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fake.h"

int fake_strict;

/* At load, before any call: a mode that changed between calls would let
 * one copy be checked and the next not.  An unknown mode stops the
 * process rather than run the checks it names unnoticed. */
__attribute__((constructor)) static void read_mode(void)
{
	const char *mode = getenv("FAKE_CUDA_MODE");

	if (!mode || !*mode || !strcmp(mode, "default"))
		return;
	if (!strcmp(mode, "strict")) {
		fake_strict = 1;
		return;
	}
	fprintf(stderr, "fake libcuda: FAKE_CUDA_MODE=%s is neither default nor strict\n", mode);
	abort();
}

static const struct fake_entry *const tables[] = {
	fake_device_entries,
	fake_mem_entries,
	fake_copy_entries,
};

FAKE_EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version,
					 cuuint64_t flags, CUdriverProcAddressQueryResult *status)
{
	(void)version;
	(void)flags;
	for (size_t t = 0; t < sizeof(tables) / sizeof(tables[0]); t++) {
		for (const struct fake_entry *e = tables[t]; e->name; e++) {
			if (strcmp(e->name, symbol))
				continue;
			memcpy(pfn, &e->fn, sizeof(e->fn));
			if (status)
				*status = CU_GET_PROC_ADDRESS_SUCCESS;
			return CUDA_SUCCESS;
		}
	}
	*pfn = NULL;
	if (status)
		*status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
	return CUDA_ERROR_NOT_FOUND;
}
