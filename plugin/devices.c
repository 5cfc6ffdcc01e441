/* This plugin's own devices and what NCCL sees of them (devices.h). */
#include <ctype.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "devices.h"
#include "gpu_direct.h"
#include "log.h"
#include "notes.h"
#include "symmem.h"

/* The host-memory path is bounded by two memcpy streams; advertising more
 * would only make NCCL's graph search overestimate this device. */
#define HOST_PATH_SPEED_MBPS 100000
/* The copy-engine path: one copy engine writes about 395 GB/s into a peer
 * GPU over NVLink (H200, NV18).  NCCL reads speed / 8000 as GB/s. */
#define GPU_PATH_SPEED_MBPS 3200000
#define MAX_DEVICES 64

struct net_device {
	char name[16];
	char pci[256];		/* its GPU's sysfs path, "" when unknown: picks the RDMA device */
	int dmabuf;		/* GPUDirect RDMA: NCCL_PTR_CUDA | NCCL_PTR_DMABUF (ib only) */
};

static pthread_once_t devices_once = PTHREAD_ONCE_INIT;
static struct net_device devices[MAX_DEVICES];
static int ndevices;
static int gpu_path;		/* 1: devices are GPUs, the copy engines serve them */
/* NCCL_PTR_CUDA advertised: on the GPU path, unless every connection is
 * ibverbs (NCCL_SYMMEM_BACKEND=ib), which carries GPU memory only where
 * the device has GPUDirect RDMA (net_device.dmabuf). */
static int gpu_ptrs;

/* Where GPU `ordinal` sits on the PCI tree ("/sys/devices/pci0000:00/
 * 0000:00:06.0"), for the choice of the closest RDMA device; "" when the
 * driver or sysfs does not say. */
static void gpu_sysfs_path(int ordinal, char *out, size_t len)
{
	char bus[32], link[96], *real;
	CUdevice dev;

	out[0] = '\0';
	if (sm_cu()->device_get(&dev, ordinal) != CUDA_SUCCESS ||
	    sm_cu()->device_get_pci_bus_id(bus, sizeof(bus), dev) != CUDA_SUCCESS)
		return;
	for (char *p = bus; *p; p++)
		*p = (char)tolower((unsigned char)*p);
	snprintf(link, sizeof(link), "/sys/bus/pci/devices/%s", bus);
	real = realpath(link, NULL);
	if (real)
		snprintf(out, len, "%s", real);
	free(real);
}

/* NCCL_SYMMEM_BACKEND=ib: which devices carry GPU buffers (GPUDirect
 * RDMA, gpu_direct.h); the others advertise host memory only. */
static void probe_gpu_direct(const struct config *cfg)
{
	char line[768] = "";
	int on = 0;

	if (!cfg || cfg->backend != CONFIG_BACKEND_IB)
		return;
	for (int i = 0; i < ndevices; i++) {
		devices[i].dmabuf = gpu_direct_device(cfg->ib_hca, cfg->ib_gid_index, i,
						      devices[i].name, gpu_path, devices[i].pci,
						      line, sizeof(line));
		on += devices[i].dmabuf;
	}
	gpu_direct_announce(on, ndevices, line);
}

static void build_devices(void)
{
	const struct config *cfg = config_get();
	const struct sm_cuda_info *cuda = sm_cuda_load();
	int n = cuda->loaded ? cuda->device_count : 0;

	if (n > MAX_DEVICES)
		n = MAX_DEVICES;
	if (!cfg || !cfg->dma_enable || !sm_cu() || n < 1) {
		ndevices = 1;
		snprintf(devices[0].name, sizeof(devices[0].name), "symmem0");
		probe_gpu_direct(cfg);
		return;
	}
	for (int i = 0; i < n; i++) {
		struct net_device *d = &devices[i];

		snprintf(d->name, sizeof(d->name), "symmem%d", i);
		gpu_sysfs_path(i, d->pci, sizeof(d->pci));
		if (cfg->verbose)
			LOG_INFO("NET/symmem device %s: GPU %d at %s", d->name, i,
				 d->pci[0] ? d->pci : "(PCI place unknown)");
	}
	ndevices = n;
	gpu_path = 1;
	gpu_ptrs = cfg->backend != CONFIG_BACKEND_IB;
	probe_gpu_direct(cfg);
	notes_nccl_defaults(cfg);
}

void devices_ready(void)
{
	pthread_once(&devices_once, build_devices);
}

int devices_count(void)
{
	return ndevices;
}

int devices_local(int dev)
{
	return dev % ndevices;
}

const char *devices_pci(int dev)
{
	return devices[dev].pci;
}

int devices_dmabuf(int dev)
{
	return devices[dev].dmabuf;
}

int devices_gpu_path(void)
{
	return gpu_path;
}

int devices_gpu_ptrs(void)
{
	return gpu_ptrs;
}

void devices_properties(int dev, ncclNetProperties_v12_t *props)
{
	memset(props, 0, sizeof(*props));
	props->name = devices[dev].name;
	/* No pciPath: NCCL hangs the device off the CPU with no PCI link of
	 * its own to cap it.  The GPU's own PCI function instead leaves NCCL's
	 * topology with a GPU that has no links (both ranks crashed, measured);
	 * a sibling on the root bus would cap it at that device's link. */
	props->pciPath = NULL;
	props->guid = 0x53594d4d00000000ull | (uint64_t)dev;
	props->ptrSupport = NCCL_PTR_HOST | (gpu_ptrs ? NCCL_PTR_CUDA : 0) |
			    (devices[dev].dmabuf ? NCCL_PTR_CUDA | NCCL_PTR_DMABUF : 0);
	props->regIsGlobal = 0;
	/* Copy-engine writes are complete when their event fires: no flush;
	 * GPUDirect RDMA is advertised from Hopper on, where NCCL needs none. */
	props->forceFlush = 0;
	props->speed = gpu_path ? GPU_PATH_SPEED_MBPS : HOST_PATH_SPEED_MBPS;
	props->port = 1;
	props->latency = 0;
	props->maxComms = 1 << 20;
	props->maxRecvs = 1;
	props->netDeviceType = NCCL_NET_DEVICE_HOST;
	props->netDeviceVersion = 0;
	props->vProps.ndevs = 1;
	props->vProps.devs[0] = dev;
	props->maxP2pBytes = MAX_TRANSFER_BYTES;
	props->maxCollBytes = MAX_TRANSFER_BYTES;
	props->maxMultiRequestSize = 1;
	/* Copy engines and sockets inside a host: on no fabric rail. */
	props->railId = NCCL_NET_ID_UNDEF;
	props->planeId = NCCL_NET_ID_UNDEF;
}
