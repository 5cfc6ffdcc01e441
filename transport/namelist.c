/* NCCL's name-list syntax, shared by NCCL_SOCKET_IFNAME and NCCL_IB_HCA:
 * "[^][=]item,item,...": each item a name prefix, or an exact name after
 * '=', and '^' turns the list into the names to leave out. */
#include <string.h>

#include "transport.h"

int tp_namelist_selects(const char *spec, const char *name, int port_suffix)
{
	int exclude = 0, exact = 0, hit = 0;
	const char *p = spec;

	if (*p == '^') {
		exclude = 1;
		p++;
	}
	if (*p == '=') {
		exact = 1;
		p++;
	}
	while (*p && !hit) {
		size_t len = strcspn(p, ","), n = len;
		const char *colon = port_suffix ? memchr(p, ':', len) : NULL;

		if (colon)
			n = (size_t)(colon - p);	/* "mlx5_0:1": the device is mlx5_0 */
		if (n && strncmp(name, p, n) == 0 && (!exact || strlen(name) == n))
			hit = 1;
		p += len;
		if (*p == ',')
			p++;
	}
	return exclude ? !hit : hit;
}
