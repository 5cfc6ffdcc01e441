/* NCCL's name-list syntax, shared by NCCL_SOCKET_IFNAME and NCCL_IB_HCA:
 * "[^][=]item,item,...": each item a name prefix, or an exact name after
 * '=', and '^' turns the list into the names to leave out. */
#include <stdlib.h>
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

int tp_namelist_port(const char *spec, const char *name)
{
	const char *p = spec;
	int exact = 0;

	if (!p || *p == '^')
		return 0;	/* an exclusion list names no port to use */
	if (*p == '=') {
		exact = 1;
		p++;
	}
	while (*p) {
		size_t len = strcspn(p, ",");
		const char *colon = memchr(p, ':', len);
		size_t n = colon ? (size_t)(colon - p) : len;

		if (colon && n && strncmp(name, p, n) == 0 && (!exact || strlen(name) == n))
			return atoi(colon + 1);
		p += len;
		if (*p == ',')
			p++;
	}
	return 0;
}
