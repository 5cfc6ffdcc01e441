/* NCCL's name-list syntax, shared by NCCL_SOCKET_IFNAME and NCCL_IB_HCA:
 * "[^][=]item,item,...": each item a name prefix, or an exact name after
 * '=', and '^' turns the list into the names to leave out. */
#include <stdlib.h>
#include <string.h>

#include "transport.h"

/* Walks the items after the list's "^" and "=" prefixes for one that
 * names `name`: 1 on a match, with *named the port after its ':' (0 for
 * none) when port_suffix lets items carry one.  `port` narrows the match:
 * -1 takes any item, 0 only items that name no port (the whole device),
 * a port number items that name no port or that one. */
static int find_item(const char *p, int exact, const char *name, int port_suffix, int port,
		     int *named)
{
	*named = 0;
	while (*p) {
		size_t len = strcspn(p, ","), n = len;
		const char *colon = port_suffix ? memchr(p, ':', len) : NULL;
		int item_port = colon ? atoi(colon + 1) : 0;

		if (colon)
			n = (size_t)(colon - p);	/* "mlx5_0:1": the device is mlx5_0 */
		if (n && strncmp(name, p, n) == 0 && (!exact || strlen(name) == n) &&
		    (port < 0 || item_port == 0 || item_port == port)) {
			*named = item_port;
			return 1;
		}
		p += len;
		if (*p == ',')
			p++;
	}
	return 0;
}

/* Skips the "^" and "=" prefixes; sets *exclude and *exact. */
static const char *list_items(const char *spec, int *exclude, int *exact)
{
	*exclude = *spec == '^';
	spec += *exclude;
	*exact = *spec == '=';
	return spec + *exact;
}

int tp_namelist_selects(const char *spec, const char *name, int port_suffix)
{
	int exclude, exact, named;
	const char *p = list_items(spec, &exclude, &exact);

	/* An exclusion item with a port ("^mlx5_0:1") leaves the device in,
	 * less that port, as NCCL reads it. */
	if (exclude)
		return !find_item(p, exact, name, port_suffix, port_suffix ? 0 : -1, &named);
	return find_item(p, exact, name, port_suffix, -1, &named);
}

int tp_namelist_port(const char *spec, const char *name)
{
	int exclude, exact, named;
	const char *p;

	if (!spec)
		return 0;
	p = list_items(spec, &exclude, &exact);
	if (exclude)
		return 0;	/* an exclusion list names no port to use */
	return find_item(p, exact, name, 1, -1, &named) ? named : 0;
}

int tp_namelist_port_excluded(const char *spec, const char *name, int port)
{
	int exclude, exact, named;
	const char *p;

	if (!spec)
		return 0;
	p = list_items(spec, &exclude, &exact);
	return exclude && find_item(p, exact, name, 1, port, &named);
}
