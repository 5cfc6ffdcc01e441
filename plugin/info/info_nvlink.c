/* NVLink links between the GPUs, from NVML (libnvidia-ml.so.1, opened at
 * run time like the driver): the CUDA driver API says whether two GPUs
 * can reach each other and ranks the link, but not what it is.  Each
 * active link's far end is a GPU (a direct link to it) or an NVSwitch
 * (every GPU on the switches reaches every other). */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "info.h"

/* NVML's interface facts, declared here (no NVML header at build time). */
typedef int nvml_return;
typedef void *nvml_device;

struct nvml_pci {
	char bus_id_legacy[16];
	unsigned int domain, bus, device, pci_device_id, pci_subsystem_id;
	char bus_id[32];
};

enum {
	NVML_OK = 0,
	NVML_LINKS_MAX = 18,		/* NVML_NVLINK_MAX_LINKS */
	NVML_REMOTE_SWITCH = 2,		/* NVML_NVLINK_DEVICE_TYPE_SWITCH */
};

struct nvml {
	nvml_return (*init)(void);
	nvml_return (*shutdown)(void);
	const char *(*error)(nvml_return);
	nvml_return (*by_bus_id)(const char *, nvml_device *);
	nvml_return (*link_state)(nvml_device, unsigned int, int *);
	nvml_return (*remote_pci)(nvml_device, unsigned int, struct nvml_pci *);
	nvml_return (*remote_type)(nvml_device, unsigned int, int *);	/* may be NULL */
};

static int symbol(void *lib, const char *name, void *fn)
{
	void *sym = dlsym(lib, name);

	if (!sym)
		return -1;
	memcpy(fn, &sym, sizeof(sym));
	return 0;
}

static int nvml_open(struct nvml *n, char *why, size_t len)
{
	void *lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
	nvml_return rc;

	memset(n, 0, sizeof(*n));
	if (!lib) {
		info_say(why, len, "no NVML: libnvidia-ml.so.1 not found");
		return -1;
	}
	if (symbol(lib, "nvmlInit_v2", &n->init) || symbol(lib, "nvmlShutdown", &n->shutdown) ||
	    symbol(lib, "nvmlErrorString", &n->error) ||
	    symbol(lib, "nvmlDeviceGetHandleByPciBusId_v2", &n->by_bus_id) ||
	    symbol(lib, "nvmlDeviceGetNvLinkState", &n->link_state) ||
	    symbol(lib, "nvmlDeviceGetNvLinkRemotePciInfo_v2", &n->remote_pci)) {
		info_say(why, len, "libnvidia-ml.so.1 lacks the NVLink queries");
		return -1;
	}
	if (symbol(lib, "nvmlDeviceGetNvLinkRemoteDeviceType", &n->remote_type))
		n->remote_type = NULL;
	rc = n->init();
	if (rc != NVML_OK) {
		info_say(why, len, "nvmlInit: %s", n->error(rc));
		return -1;
	}
	return 0;
}

/* The GPU of ours at that PCI address, or -1. */
static int gpu_at(const struct info_gpus *g, const struct nvml_pci *pci)
{
	for (int i = 0; i < g->shown; i++) {
		unsigned int dom, bus, dev, fn;

		if (sscanf(g->gpu[i].bus_id, "%x:%x:%x.%x", &dom, &bus, &dev, &fn) == 4 &&
		    dom == pci->domain && bus == pci->bus && dev == pci->device)
			return i;
	}
	return -1;
}

/* GPU i's active links: counted into pair[i][j].nvlinks per far GPU;
 * links to an NVSwitch into *switched. */
static void gpu_links(const struct nvml *n, struct info_gpus *g, int i, int *switched)
{
	nvml_device dev;

	*switched = 0;
	if (n->by_bus_id(g->gpu[i].bus_id, &dev) != NVML_OK)
		return;
	g->gpu[i].nvlinks = 0;
	for (int j = 0; j < g->shown; j++)
		if (j != i)
			g->pair[i][j].nvlinks = 0;
	for (unsigned int link = 0; link < NVML_LINKS_MAX; link++) {
		struct nvml_pci pci;
		int active = 0, type = -1, far;

		if (n->link_state(dev, link, &active) != NVML_OK || !active)
			continue;
		g->gpu[i].nvlinks++;
		if (n->remote_type && n->remote_type(dev, link, &type) == NVML_OK &&
		    type == NVML_REMOTE_SWITCH) {
			(*switched)++;
			continue;
		}
		memset(&pci, 0, sizeof(pci));
		if (n->remote_pci(dev, link, &pci) != NVML_OK)
			continue;
		far = gpu_at(g, &pci);
		if (far >= 0 && far != i)
			g->pair[i][far].nvlinks++;
	}
}

void info_nvlinks(struct info_gpus *g)
{
	int switched[INFO_MAX_GPUS] = { 0 };
	struct nvml n;

	if (g->shown < 1)
		return;
	if (nvml_open(&n, g->nvml, sizeof(g->nvml)))
		return;
	for (int i = 0; i < g->shown; i++)
		gpu_links(&n, g, i, &switched[i]);
	for (int i = 0; i < g->shown; i++)
		for (int j = 0; j < g->shown; j++)
			if (i != j)
				g->pair[i][j].switched = switched[i] > 0 && switched[j] > 0;
	n.shutdown();
}
