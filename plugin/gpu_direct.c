/* GPUDirect RDMA for the plugin's devices (gpu_direct.h).  The RDMA
 * device's side is transport/ib_dmabuf.c's probe; the GPU's is the
 * driver's DMA-BUF support and its generation: before Hopper NCCL flushes
 * the receives an RDMA device wrote into GPU memory (iflush: a read that
 * makes the writes visible to the GPU), and this plugin's iflush does no
 * such read, so those GPUs keep host staging. */
#include <stdio.h>
#include <string.h>

#include "gpu_direct.h"
#include "log.h"
#include "symmem.h"
#include "transport.h"

static int gpu_needs_no_flush(int ordinal, char *why, size_t len)
{
	CUdevice dev;
	int major = 0;

	if (sm_cu()->device_get(&dev, ordinal) != CUDA_SUCCESS ||
	    sm_cu()->device_get_attribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
					  dev) != CUDA_SUCCESS)
		major = 0;
	if (major >= 9)
		return 1;
	snprintf(why, len, "GPU %d is older than Hopper (compute capability %d): NCCL would "
		 "flush its GPUDirect receives, which this plugin's iflush does not do", ordinal,
		 major);
	return 0;
}

int gpu_direct_device(const char *hca, int gid_index, int dev, const char *name, int gpu,
		      const char *pci, char *line, size_t len)
{
	char item[448], nic[200], gpu_why[160] = "";
	struct tp_options opt;
	size_t used = strlen(line);
	int nic_ok, gpu_ok = 0;

	memset(&opt, 0, sizeof(opt));
	opt.ib_hca = hca;
	opt.ib_gid_index = gid_index;
	opt.dev = dev;
	opt.gpu_pci = pci;
	nic_ok = tp_ib_dmabuf(&opt, nic, sizeof(nic));
	if (!gpu)
		snprintf(gpu_why, sizeof(gpu_why), "no GPU buffers (host memory only)");
	else
		gpu_ok = sm_dmabuf_gpu_supported(dev, gpu_why, sizeof(gpu_why)) &&
			 gpu_needs_no_flush(dev, gpu_why, sizeof(gpu_why));
	snprintf(item, sizeof(item), "%s: %s%s%s", name, nic, gpu_ok ? "" : "; ",
		 gpu_ok ? "" : gpu_why);
	if (used + 1 < len)
		snprintf(line + used, len - used, "%s%s", used ? "; " : "", item);
	return nic_ok && gpu_ok;
}

void gpu_direct_announce(int on, int n, const char *line)
{
	if (on == n)
		LOG_INFO("NET/symmem GPUDirect RDMA through DMA-BUF: GPU buffers are registered "
			 "with the RDMA device (NCCL_PTR_CUDA|NCCL_PTR_DMABUF): %s", line);
	else if (!on)
		LOG_INFO("NET/symmem no GPUDirect RDMA: NCCL stages GPU buffers in host memory "
			 "(NCCL_PTR_HOST only): %s", line);
	else
		LOG_INFO("NET/symmem GPUDirect RDMA through DMA-BUF on %d of %d devices, NCCL "
			 "stages GPU buffers in host memory on the others: %s", on, n, line);
}
