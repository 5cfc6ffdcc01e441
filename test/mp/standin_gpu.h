/* GPU memory for the stand-in inner net plugin (inner_standin.c): with
 * INNER_STANDIN_GPU=1 it offers NCCL_PTR_CUDA and moves GPU bytes itself,
 * a copy to or from host memory beside each socket transfer, as a NIC
 * without GPUDirect would need.  libcuda.so.1 is opened at run time, so
 * the stand-in links no CUDA and builds where there is none. */
#ifndef SYMMEM_TEST_STANDIN_GPU_H
#define SYMMEM_TEST_STANDIN_GPU_H

#include <stddef.h>

/* 1 when INNER_STANDIN_GPU=1 and the driver's calls were found (once). */
int standin_gpu_on(void);
/* Copies `n` bytes between host memory and the GPU memory at `dev`, in
 * the context that owns `dev`, on a stream of the stand-in's own that
 * waits for no other (NCCL's kernel may be waiting for this very copy):
 * done when it returns.  0, or -1 after a line on stderr. */
int standin_gpu_to_host(void *host, const void *dev, size_t n);
int standin_gpu_to_device(void *dev, const void *host, size_t n);

#endif
