// What amortises the copy engine's fixed cost per copy (not part of the
// library).  The helper queues one copy per run of NCCL steps it can merge;
// steps of different channels live in different allocations, so today they
// never merge.  This probe moves the same bytes in four shapes:
//
//   separate  one cudaMemcpyAsync per piece (what the helper does now)
//   batch     one cudaMemcpyBatchAsync call holding every piece
//   2d-split  one cudaMemcpy2DAsync whose rows lie in separate cuMem
//             allocations, evenly spaced in one reserved range with an
//             unmapped hole between them (as per-channel buffers would be
//             if the helper mapped them at an even spacing).  The driver
//             refuses it on H200 with CUDA 13 (invalid argument): the probe
//             says so and leaves the shape out.
//   1d        one cudaMemcpyAsync of all the bytes in one allocation
//
// Every GPU pushes into the next one at once (ring; two GPUs: both ways),
// one issuing thread per GPU.  Before timing, each shape's result is checked
// byte for byte against random source bytes, into a poisoned destination.
//
//   ce_shapes [gpus]      default: every GPU
#include <cuda.h>
#include <cuda_runtime.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "probe_cumem.h"

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { \
	fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); exit(2); } } while (0)

#define MAX_GPUS PROBE_MAX_GPUS
#define MAX_PIECES 32
#define BUF_BYTES (8u << 20)	// one "channel buffer"
#define REPS 20

enum shape { SEPARATE, BATCH, SPLIT_2D, ONE_1D, NSHAPES };
static const char *shape_name[] = { "separate", "batch", "2d-split", "1d" };

struct gpu_mem {
	char *src, *dst;	// N buffers of BUF_BYTES each, pitch apart
	char *src1d, *dst1d;	// one allocation of MAX_PIECES * piece
	size_t pitch;
	cudaStream_t st;
};

static struct gpu_mem mem[MAX_GPUS];
static int ngpus;

static double now_us(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

// n allocations of size bytes on dev, mapped pitch apart in one range (the
// gap between them stays unmapped).  The mappings keep the memory alive.
static char *spaced_alloc(int dev, int n, size_t size, size_t pitch)
{
	CUmemAllocationProp prop;
	CUmemGenericAllocationHandle h;
	CUdeviceptr base;
	size_t gran;

	gran = probe_cumem_prop(dev, &prop);
	if (size % gran || pitch % gran) {
		fprintf(stderr, "size/pitch not a multiple of %zu\n", gran);
		exit(2);
	}
	CUCK(cuMemAddressReserve(&base, pitch * n, gran, 0, 0));
	for (int i = 0; i < n; i++) {
		CUCK(cuMemCreate(&h, size, &prop, 0));
		CUCK(cuMemMap(base + pitch * i, size, 0, h, 0));
		CUCK(cuMemRelease(h));
		grant_gpus(base + pitch * i, size, ngpus);
	}
	return (char *)base;
}

struct job {
	int g, n;
	size_t piece;
	enum shape shape;
	int reps;
	pthread_barrier_t *bar;
	double us;
};

static void issue(int g, int n, size_t piece, enum shape shape)
{
	struct gpu_mem *s = &mem[g], *d = &mem[(g + 1) % ngpus];
	void *dsts[MAX_PIECES], *srcs[MAX_PIECES];
	size_t sizes[MAX_PIECES], idx = 0;
	struct cudaMemcpyAttributes a;

	switch (shape) {
	case SEPARATE:
		for (int i = 0; i < n; i++)
			CK(cudaMemcpyAsync(d->dst + i * d->pitch, s->src + i * s->pitch, piece,
					   cudaMemcpyDefault, s->st));
		break;
	case BATCH:
		for (int i = 0; i < n; i++) {
			dsts[i] = d->dst + i * d->pitch;
			srcs[i] = s->src + i * s->pitch;
			sizes[i] = piece;
		}
		memset(&a, 0, sizeof(a));
		a.srcAccessOrder = cudaMemcpySrcAccessOrderStream;
		CK(cudaMemcpyBatchAsync(dsts, srcs, sizes, n, &a, &idx, 1, s->st));
		break;
	case SPLIT_2D:
		CK(cudaMemcpy2DAsync(d->dst, d->pitch, s->src, s->pitch, piece, n, cudaMemcpyDefault,
				     s->st));
		break;
	default:
		CK(cudaMemcpyAsync(d->dst1d, s->src1d, piece * n, cudaMemcpyDefault, s->st));
		break;
	}
}

static void *job_main(void *arg)
{
	struct job *j = (struct job *)arg;
	CK(cudaSetDevice(j->g));
	pthread_barrier_wait(j->bar);
	double t0 = now_us();
	for (int r = 0; r < j->reps; r++)
		issue(j->g, j->n, j->piece, j->shape);
	CK(cudaStreamSynchronize(mem[j->g].st));
	j->us = now_us() - t0;
	return NULL;
}

// All GPUs run the shape reps times at once; returns the slowest GPU's us.
static double run_all(int n, size_t piece, enum shape shape, int reps)
{
	struct job j[MAX_GPUS];
	pthread_t t[MAX_GPUS];
	pthread_barrier_t bar;
	double slowest = 0;

	pthread_barrier_init(&bar, NULL, ngpus);
	for (int g = 0; g < ngpus; g++) {
		j[g] = (struct job){ .g = g, .n = n, .piece = piece, .shape = shape, .reps = reps,
				     .bar = &bar };
		pthread_create(&t[g], NULL, job_main, &j[g]);
	}
	for (int g = 0; g < ngpus; g++) {
		pthread_join(t[g], NULL);
		if (j[g].us > slowest)
			slowest = j[g].us;
	}
	pthread_barrier_destroy(&bar);
	return slowest;
}

// Random source bytes, poisoned destinations, one run, every byte compared.
static long check(int n, size_t piece, enum shape shape, unsigned char *want, unsigned char *got)
{
	long bad = 0;
	unsigned seed = 777u + (unsigned)shape * 31u + (unsigned)n;

	for (int g = 0; g < ngpus; g++) {
		CK(cudaSetDevice(g));
		for (size_t k = 0; k < piece * n; k++)
			want[k] = (unsigned char)(rand_r(&seed) >> 7);
		for (int i = 0; i < n; i++) {
			char *src = shape == ONE_1D ? mem[g].src1d + i * piece : mem[g].src + i * mem[g].pitch;
			char *dst = shape == ONE_1D ? mem[g].dst1d + i * piece : mem[g].dst + i * mem[g].pitch;
			CK(cudaMemcpy(src, want + i * piece, piece, cudaMemcpyHostToDevice));
			CK(cudaMemset(dst, 0xa5, piece));
		}
		CK(cudaDeviceSynchronize());
		// Keep each GPU's bytes: the next GPU's destination receives them.
		memcpy(want + (size_t)(g + 1) * piece * n, want, piece * n);
	}
	run_all(n, piece, shape, 1);
	for (int g = 0; g < ngpus; g++) {
		int from = (g + ngpus - 1) % ngpus;
		unsigned char *w = want + (size_t)(from + 1) * piece * n;
		CK(cudaSetDevice(g));
		for (int i = 0; i < n; i++) {
			char *dst = shape == ONE_1D ? mem[g].dst1d + i * piece : mem[g].dst + i * mem[g].pitch;
			CK(cudaMemcpy(got, dst, piece, cudaMemcpyDeviceToHost));
			for (size_t k = 0; k < piece; k++)
				bad += got[k] != w[i * piece + k];
		}
	}
	return bad;
}

int main(int argc, char **argv)
{
	static const size_t pieces[] = { 512u << 10, 2u << 20 };
	static const int counts[] = { 8, 32 };
	size_t pitch = BUF_BYTES + (2u << 20);
	long failed = 0;

	CK(cudaGetDeviceCount(&ngpus));
	if (argc > 1 && atoi(argv[1]) > 0 && atoi(argv[1]) < ngpus)
		ngpus = atoi(argv[1]);
	if (ngpus < 2 || ngpus > MAX_GPUS) {
		fprintf(stderr, "ce_shapes: needs 2..%d GPUs, have %d\n", MAX_GPUS, ngpus);
		return 2;
	}
	for (int g = 0; g < ngpus; g++) {
		CK(cudaSetDevice(g));
		CK(cudaFree(0));
		mem[g].pitch = pitch;
		mem[g].src = spaced_alloc(g, MAX_PIECES, BUF_BYTES, pitch);
		mem[g].dst = spaced_alloc(g, MAX_PIECES, BUF_BYTES, pitch);
		mem[g].src1d = spaced_alloc(g, 1, MAX_PIECES * (2u << 20), MAX_PIECES * (2u << 20));
		mem[g].dst1d = spaced_alloc(g, 1, MAX_PIECES * (2u << 20), MAX_PIECES * (2u << 20));
		CK(cudaStreamCreateWithFlags(&mem[g].st, cudaStreamNonBlocking));
	}
	unsigned char *want = (unsigned char *)malloc((size_t)(ngpus + 1) * MAX_PIECES * (2u << 20));
	unsigned char *got = (unsigned char *)malloc(2u << 20);

	printf("ce_shapes: %d GPUs, each pushing into the next; buffers %u B, pitch %zu B, %d reps\n",
	       ngpus, BUF_BYTES, pitch, REPS);
	CK(cudaSetDevice(0));
	cudaError_t e2d = cudaMemcpy2DAsync(mem[1].dst, pitch, mem[0].src, pitch, 4096, 2,
					    cudaMemcpyDefault, mem[0].st);
	if (e2d == cudaSuccess)
		e2d = cudaStreamSynchronize(mem[0].st);
	printf("2D copy across separate allocations: %s\n",
	       e2d == cudaSuccess ? "accepted" : cudaGetErrorString(e2d));
	(void)cudaGetLastError();
	for (unsigned p = 0; p < sizeof(pieces) / sizeof(pieces[0]); p++) {
		for (unsigned c = 0; c < sizeof(counts) / sizeof(counts[0]); c++) {
			for (int s = 0; s < NSHAPES; s++) {
				if (s == SPLIT_2D && e2d != cudaSuccess)
					continue;
				size_t piece = pieces[p];
				int n = counts[c];
				long bad = check(n, piece, (enum shape)s, want, got);
				run_all(n, piece, (enum shape)s, 2);	// warm
				double us = run_all(n, piece, (enum shape)s, REPS);
				printf("shape %-9s %2d pieces of %8zu B: %7.1f GB/s per GPU (slowest)  %s\n",
				       shape_name[s], n, piece, piece * n * (double)REPS / us / 1e3,
				       bad ? "WRONG BYTES" : "bytes ok");
				fflush(stdout);
				failed += bad != 0;
			}
		}
	}
	free(want);
	free(got);
	printf("ce_shapes: %s\n", failed ? "FAIL" : "PASS");
	return failed ? 1 : 0;
}
