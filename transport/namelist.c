/* NCCL's name-list syntax, shared by NCCL_SOCKET_IFNAME and NCCL_IB_HCA:
 * "[^][=]item,item,...": each item a name prefix, or an exact name after
 * '=', and '^' turns the list into the names to leave out. */
#include <stdlib.h>
#include <string.h>

#include "transport.h"

/* Walks the items after the list's "^" and "=" prefixes: 1 when one
 * selects `name`, with *port the number after its ':' (0 for none) when
 * port_suffix lets items carry one. */
static int find_item(const char *p, int exact, const char *name, int port_suffix, int *port)
{
	*port = 0;
	while (*p) {
		size_t len = strcspn(p, ","), n = len;
		const char *colon = port_suffix ? memchr(p, ':', len) : NULL;

		if (colon)
			n = (size_t)(colon - p);	/* "mlx5_0:1": the device is mlx5_0 */
		if (n && strncmp(name, p, n) == 0 && (!exact || strlen(name) == n)) {
			*port = colon ? atoi(colon + 1) : 0;
			return 1;
		}
		p += len;
		if (*p == ',')
			p++;
	}
	return 0;
}

int tp_namelist_selects(const char *spec, const char *name, int port_suffix)
{
	int exclude = 0, exact = 0, port;
	const char *p = spec;

	if (*p == '^') {
		exclude = 1;
		p++;
	}
	if (*p == '=') {
		exact = 1;
		p++;
	}
	return find_item(p, exact, name, port_suffix, &port) != exclude;
}

int tp_namelist_port(const char *spec, const char *name)
{
	int exact = 0, port;

	if (!spec || *spec == '^')
		return 0;	/* an exclusion list names no port to use */
	if (*spec == '=') {
		exact = 1;
		spec++;
	}
	return find_item(spec, exact, name, 1, &port) ? port : 0;
}
