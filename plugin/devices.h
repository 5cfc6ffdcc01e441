/* This plugin's own devices (devices.c): one per visible GPU when the
 * copy-engine path is on, else one host-memory device.  Built once, on
 * the first call that needs them, and read from any thread after. */
#ifndef SYMMEM_PLUGIN_DEVICES_H
#define SYMMEM_PLUGIN_DEVICES_H

#include "nccl_abi.h"

#define MAX_TRANSFER_BYTES (1ull << 30)

/* Builds the list the first time (and applies the plugin's NCCL
 * defaults then); cheap after. */
void devices_ready(void);
int devices_count(void);
/* The device of this plugin's own that serves NCCL's device `dev` (the
 * inner plugin's, with one) for connections inside the host. */
int devices_local(int dev);
/* Its GPU's sysfs path, "" when unknown: picks the RDMA device. */
const char *devices_pci(int dev);
/* GPUDirect RDMA: NCCL_PTR_CUDA | NCCL_PTR_DMABUF (ib only). */
int devices_dmabuf(int dev);
/* 1: devices are GPUs, the copy engines serve them. */
int devices_gpu_path(void);
/* NCCL_PTR_CUDA advertised on every device. */
int devices_gpu_ptrs(void);
/* What NCCL sees of device `dev`, when this plugin's transport is the
 * process's path. */
void devices_properties(int dev, ncclNetProperties_v12_t *props);

#endif
