/* The driver entry points symmem-info needs beyond those of the data
 * path (symmem.h's table): names, peer attributes, plain copies to check
 * bytes.  Resolved through symmem's run-time loader, so the tool, like
 * the plugin, runs where there is no driver and says so. */
#include <stdio.h>

#include "info.h"
#include "symmem.h"

static struct info_cu cu;
static int resolved;

const struct info_cu *info_cu(char *why, size_t len)
{
	static const struct {
		const char *name;
		void *fn;
	} table[] = {
		{ "cuDeviceGetName", &cu.device_name },
		{ "cuDeviceCanAccessPeer", &cu.can_access_peer },
		{ "cuDeviceGetP2PAttribute", &cu.p2p_attribute },
		{ "cuMemcpyHtoD", &cu.htod },
		{ "cuMemcpyDtoH", &cu.dtoh },
		{ "cuMemcpyDtoD", &cu.dtod },
		{ "cuMemsetD8", &cu.memset_d8 },
	};
	const struct sm_cuda_info *ci = sm_cuda_load();

	if (resolved)
		return &cu;
	if (!ci->loaded) {
		info_say(why, len, "no CUDA driver: %s", ci->reason);
		return NULL;
	}
	for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++) {
		if (sm_cuda_symbol(table[i].name, table[i].fn)) {
			info_say(why, len, "the CUDA driver lacks %s", table[i].name);
			return NULL;
		}
	}
	resolved = 1;
	return &cu;
}

int info_cu_fail(CUresult rc, const char *call, char *why, size_t len)
{
	const char *name = NULL;
	const struct sm_cuda_api *api = sm_cu();

	if (api)
		api->get_error_string(rc, &name);
	info_say(why, len, "%s: %s (CUDA error %d)", call, name ? name : "unknown error", (int)rc);
	return -1;
}
