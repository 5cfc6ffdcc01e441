/* RDMA devices for the cross-host backend: which ones this host has and
 * which of them NCCL_IB_HCA lets the plugin use.
 *
 * libibverbs is opened at run time, like the CUDA driver, so the plugin
 * loads on hosts without it.  Only the device list is read here; ib_dev.c
 * opens the devices the data path uses. */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "ib.h"

struct ibv_device;

int tp_hca_selected(const char *spec, const char *name)
{
	if (!spec || !*spec)
		return 1;		/* unset: every device */
	/* A device matches whatever port an item names, and stays in when an
	 * exclusion item names one of its ports: ports are for the data path
	 * (ib_dev.c). */
	return tp_namelist_selects(spec, name, 1);
}

/* Appends `name` to the comma-separated list in buf. */
static void list_add(char *buf, size_t len, const char *name)
{
	size_t used = strlen(buf);

	if (used + 1 < len)
		snprintf(buf + used, len - used, "%s%s", used ? "," : "", name);
}

/* dlsym's object pointer into a function pointer, without the cast ISO C
 * forbids (the same bytes on every platform dlsym exists on). */
int tp_ibv_symbol(void *lib, const char *name, void *fn, size_t size)
{
	void *sym = dlsym(lib, name);

	if (!sym || size != sizeof(sym))
		return -1;
	memcpy(fn, &sym, sizeof(sym));
	return 0;
}

int tp_rdma_built(void)
{
#ifdef SYMMEM_HAVE_VERBS
	return 1;
#else
	return 0;
#endif
}

int tp_rdma_devices(const char *spec, char *found, size_t flen, char *selected, size_t slen,
		    char *why, size_t wlen)
{
	struct ibv_device **(*get_list)(int *);
	void (*free_list)(struct ibv_device **);
	const char *(*get_name)(struct ibv_device *);
	struct ibv_device **list;
	void *lib;
	int n = 0, count = 0;

	found[0] = selected[0] = why[0] = '\0';
	if (!tp_rdma_built()) {
		snprintf(why, wlen, "this build has no ibverbs backend (built without libibverbs-dev)");
		return 0;
	}
	lib = dlopen("libibverbs.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!lib) {
		snprintf(why, wlen, "libibverbs.so.1 not found");
		return 0;
	}
	if (tp_ibv_symbol(lib, "ibv_get_device_list", &get_list, sizeof(get_list)) ||
	    tp_ibv_symbol(lib, "ibv_free_device_list", &free_list, sizeof(free_list)) ||
	    tp_ibv_symbol(lib, "ibv_get_device_name", &get_name, sizeof(get_name))) {
		snprintf(why, wlen, "libibverbs.so.1 lacks the device-list calls");
		goto out;
	}
	list = get_list(&n);
	if (!list) {
		snprintf(why, wlen, "no RDMA device list (no RDMA driver loaded)");
		goto out;
	}
	for (int i = 0; i < n; i++) {
		const char *name = get_name(list[i]);

		if (!name)
			continue;
		list_add(found, flen, name);
		if (tp_hca_selected(spec, name)) {
			list_add(selected, slen, name);
			count++;
		}
	}
	free_list(list);
	if (n == 0)
		snprintf(why, wlen, "no RDMA device on this host");
out:
	dlclose(lib);
	return count;
}

/* Path components two sysfs paths share from the start. */
static int common_components(const char *a, const char *b)
{
	int n = 0;

	for (size_t i = 0; a[i] && a[i] == b[i]; i++)
		if (a[i + 1] == '/' || a[i + 1] == '\0')
			n += b[i + 1] == '/' || b[i + 1] == '\0';
	return n;
}

int tp_nic_closest(const char *gpu, const char *const *nics, int n, int which)
{
	int best = -1, ties = 0, k = 0;

	if (n <= 0)
		return -1;
	if (!gpu || !*gpu)
		return (which < 0 ? 0 : which) % n;
	for (int i = 0; i < n; i++) {
		int c = nics[i] && *nics[i] ? common_components(gpu, nics[i]) : 0;

		if (c > best) {
			best = c;
			ties = 0;
		}
		ties += c == best;
	}
	/* Equally close NICs (one switch, or only the root in common) are
	 * shared out among the GPUs in turn. */
	for (int i = 0; i < n; i++) {
		int c = nics[i] && *nics[i] ? common_components(gpu, nics[i]) : 0;

		if (c == best && k++ == (which < 0 ? 0 : which) % ties)
			return i;
	}
	return 0;
}
