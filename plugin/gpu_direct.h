/* GPUDirect RDMA for the plugin's devices under NCCL_SYMMEM_BACKEND=ib:
 * which of them may advertise NCCL_PTR_CUDA | NCCL_PTR_DMABUF, so that
 * NCCL hands GPU buffers to the RDMA device instead of staging them in
 * host memory, and one INFO line per process saying which and why not. */
#ifndef SYMMEM_PLUGIN_GPU_DIRECT_H
#define SYMMEM_PLUGIN_GPU_DIRECT_H

#include <stddef.h>

/* 1 if the plugin's device `dev`, called `name` (GPU `dev` at sysfs path
 * `pci` when `gpu`, else host memory only), carries GPU buffers: its GPU
 * hands out DMA-BUF descriptors and needs no flush from the plugin (Hopper
 * on), and its RDMA device (NCCL_IB_HCA `hca`, NCCL_IB_GID_INDEX
 * `gid_index`) registers them.  Appends "name: what was found" to line[]. */
int gpu_direct_device(const char *hca, int gid_index, int dev, const char *name, int gpu,
		      const char *pci, char *line, size_t len);
/* The INFO line: `on` of `n` devices carry GPU buffers; line[] as above. */
void gpu_direct_announce(int on, int n, const char *line);

#endif
