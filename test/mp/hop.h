/* The copy-engine hop benchmark (bench_hop.c): one host<->GPU message at
 * a time through the plugin's exported table, a stream of them, and the
 * bare driver's floors for the same copies, on an idle GPU or beside a
 * kernel that keeps every SM busy.  Shared by its three files. */
#ifndef SYMMEM_TEST_HOP_H
#define SYMMEM_TEST_HOP_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "symmem.h"

/* Memory as NCCL 2.28 makes it: cuMem on the GPU, cuMem host pages
 * (NCCL_CUMEM_HOST_ENABLE) for host buffers; both exportable. */
struct hop_buf {
	int gpu;
	size_t size;
	uint8_t *ptr;			/* what the plugin is handed */
	struct sm_host_cumem host;	/* !gpu */
	size_t granted;			/* gpu: the mapping's size */
};

int hop_buf_alloc(struct hop_buf *b, int gpu, size_t size);
/* A GPU buffer on `device`, which GPU `peer` may copy to and from too
 * (-1: none); a host buffer when !gpu. */
int hop_buf_alloc_on(struct hop_buf *b, int gpu, size_t size, int device, int peer);
void hop_buf_free(struct hop_buf *b);
/* Messages i < n of `len` bytes at i * stride: fill writes message
 * first + i's pattern into each; check returns how many are wrong (-1 on
 * failure); poison zeroes the lot, so that a message that never lands
 * shows.  GPU memory goes through host memory in one copy, off the clock. */
int hop_buf_fill(struct hop_buf *b, size_t stride, int n, size_t len, uint64_t first);
int hop_buf_check(struct hop_buf *b, size_t stride, int n, size_t len, uint64_t first);
int hop_buf_poison(struct hop_buf *b, size_t bytes);

/* A kernel that keeps every SM of GPU `device` busy until hop_hog_stop():
 * in a process of its own (`self` = 0) or on a thread of this one. */
struct hop_hog;
int hop_hog_start(int self, int device, struct hop_hog **out);
/* Returns the kernels it ran, or -1 when it failed. */
long hop_hog_stop(struct hop_hog *h);

/* The bare driver's floors, in this process: the same copies issued
 * and polled by event, followed by a stream write polled on a host word,
 * and pre-posted behind a stream wait.  One row per size on `out`.  The
 * copies go between host memory and this context's GPU, or with peer >=
 * 0 between this GPU and GPU `peer` (the host buffer's place). */
int hop_floors(FILE *out, const char *tag, const size_t *sizes, int nsizes, int rounds,
	       int peer);
/* Copies per second of `count` back-to-back copies of `size` each way. */
int hop_floor_stream(FILE *out, const char *tag, size_t size, int count, int peer);

/* hop_stats.c: per-round times, sorted in place: median and the 10th and
 * 90th percentiles (either may be NULL).  bench_helper_cpu.c uses it too. */
void hop_percentiles(double *v, int n, double *p10, double *p50, double *p90);

#endif
