/* What one rank of the NCCL driver does in one phase: set up the
 * communicator, then for every op and size poison the output, run once and
 * check every element, then time `iters` runs.  Results go to the parent
 * as fixed-size records. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cuda_runtime_api.h>

#include "bench.h"

#define CUDA_OK(call) cuda_ok((call), #call, __LINE__)
#define NCCL_OK(call) nccl_ok((call), #call, __LINE__)
#define BUF_ROUND ((size_t)2 << 20)	/* buffers come in whole 2 MiB pages */

static void cuda_ok(cudaError_t e, const char *what, int line)
{
	if (e == cudaSuccess)
		return;
	fprintf(stderr, "bench_rank.c:%d: %s: %s\n", line, what, cudaGetErrorString(e));
	exit(2);
}

static void nccl_ok(ncclResult_t r, const char *what, int line)
{
	if (r == ncclSuccess)
		return;
	fprintf(stderr, "bench_rank.c:%d: %s: %s\n", line, what, ncclGetErrorString(r));
	exit(3);
}

struct rank_ctx {
	const struct bench_opts *o;
	int rank, phase, out_fd;
	ncclComm_t comm;
	cudaStream_t stream;
	void *sbuf, *rbuf;
	uint8_t *host;
	size_t cap;		/* bytes of each device buffer */
};

static void issue(struct rank_ctx *c, int op, int dtype, ncclRedOp_t redop,
		  const struct bench_shape *s)
{
	NCCL_OK(bench_issue(c->comm, c->stream, op, dtype, redop, s, c->sbuf, c->rbuf, c->rank,
			    c->o->nranks));
}

/* Waits for what is queued on the stream as nccl-tests does: polling it
 * while watching the communicator for an asynchronous error, the only way
 * a network plugin's failure in NCCL's proxy thread reaches a job.  On one
 * the rank names it, aborts its communicator and exits. */
static void wait_ops(struct rank_ctx *c)
{
	ncclResult_t err = ncclSuccess;
	int state;

	while ((state = bench_poll_op(c->comm, c->stream, &err)) == 0)
		;
	if (state > 0)
		return;
	fprintf(stderr, "rank %d: NCCL reported %s with an op in flight; aborting\n", c->rank,
		ncclGetErrorString(err));
	ncclCommAbort(c->comm);
	exit(3);
}

/* Runs the op `times` times, directly or as one captured graph launched
 * `times` times (so each launch is one op, as in nccl-tests -G). */
static void run(struct rank_ctx *c, int op, int dtype, ncclRedOp_t redop,
		const struct bench_shape *s, int times, cudaGraphExec_t *exec)
{
	if (!c->o->graph) {
		for (int i = 0; i < times; i++)
			issue(c, op, dtype, redop, s);
		return;
	}
	if (!*exec) {
		cudaGraph_t g;

		CUDA_OK(cudaStreamBeginCapture(c->stream, cudaStreamCaptureModeThreadLocal));
		issue(c, op, dtype, redop, s);
		CUDA_OK(cudaStreamEndCapture(c->stream, &g));
		CUDA_OK(cudaGraphInstantiate(exec, g, 0));
		CUDA_OK(cudaGraphDestroy(g));
	}
	for (int i = 0; i < times; i++) {
		CUDA_OK(cudaGraphLaunch(*exec, c->stream));
		/* -Y: one replay in flight at a time (the plugin's copies
		 * deadlock against a cuGraphLaunch that waits for a replay). */
		if (c->o->graph_sync)
			wait_ops(c);
	}
}

static void report(struct rank_ctx *c, int op, int dtype, ncclRedOp_t redop, size_t bytes,
		   int timed, double time_us, uint64_t errors)
{
	struct bench_result r = {
		.phase = c->phase, .rank = c->rank, .op = op, .dtype = dtype, .redop = (int)redop,
		.timed = timed, .bytes = bytes, .time_us = time_us, .errors = errors,
	};

	if (write(c->out_fd, &r, sizeof(r)) != (ssize_t)sizeof(r))
		exit(4);
}

/* Every rank here before any goes on; a rank that never comes ends this
 * one (bounded by the run's timeout). */
static void barrier(struct rank_ctx *c)
{
	if (bench_barrier_wait(c->o->barrier, c->o->timeout) == 0)
		return;
	fprintf(stderr, "rank %d: the other ranks did not come to the barrier\n", c->rank);
	exit(1);
}

/* Mean us of `iters` runs queued back to back. */
static double timed_together(struct rank_ctx *c, int op, int dtype, ncclRedOp_t redop,
			     const struct bench_shape *s, cudaGraphExec_t *exec)
{
	double t0 = bench_now();

	run(c, op, dtype, redop, s, c->o->iters, exec);
	wait_ops(c);
	return (bench_now() - t0) * 1e6 / c->o->iters;
}

/* -T: mean us of `iters` runs, each started on every rank together and
 * waited for; every rank lists its times. */
static double timed_alone(struct rank_ctx *c, int op, int dtype, ncclRedOp_t redop,
			  const struct bench_shape *s, cudaGraphExec_t *exec, size_t bytes)
{
	char line[4096];
	int used;
	double sum = 0;

	used = snprintf(line, sizeof(line), "rank %d %s %zu B, us per iteration:", c->rank,
			bench_op_name(op), bytes);
	for (int i = 0; i < c->o->iters; i++) {
		double t0, us;

		barrier(c);
		t0 = bench_now();

		run(c, op, dtype, redop, s, 1, exec);
		wait_ops(c);
		us = (bench_now() - t0) * 1e6;
		sum += us;
		if (used > 0 && (size_t)used < sizeof(line))
			used += snprintf(line + used, sizeof(line) - (size_t)used, " %.0f", us);
	}
	/* One write: the ranks share stderr, and stdio may cut a line. */
	if (used > 0 && (size_t)used + 1 < sizeof(line)) {
		line[used++] = '\n';
		if (write(2, line, (size_t)used) != used)
			perror("rank times");
	}
	return sum / c->o->iters;
}

/* One size: check, then (if timed) measure. */
static void one(struct rank_ctx *c, int op, int dtype, ncclRedOp_t redop, size_t bytes,
		int timed)
{
	const struct bench_dtype *d = &bench_dtypes[dtype];
	struct bench_pattern pat;
	struct bench_shape s;
	cudaGraphExec_t exec = NULL;
	size_t sbytes, rbytes;
	uint64_t errors = 0, after;
	double us = 0;

	if (!bench_shape(op, c->o->nranks, d->size, bytes, &s))
		return;
	sbytes = s.send_count * d->size;
	rbytes = s.recv_count * d->size;
	if (sbytes > c->cap || rbytes > c->cap)
		return;
	if (bench_pattern_make(&pat, dtype, redop, c->o->nranks, (int)(bytes % 53)))
		return;
	bench_fill(&pat, c->rank, c->host, s.send_count);
	CUDA_OK(cudaMemcpyAsync(c->sbuf, c->host, sbytes, cudaMemcpyHostToDevice, c->stream));
	/* Poison: 0xff bytes are NaN or -1, never an expected value. */
	CUDA_OK(cudaMemsetAsync(c->rbuf, 0xff, rbytes + 64 <= c->cap ? rbytes + 64 : c->cap,
				c->stream));
	run(c, op, dtype, redop, &s, 1, &exec);
	wait_ops(c);
	CUDA_OK(cudaMemcpy(c->host, c->rbuf, rbytes + 64 <= c->cap ? rbytes + 64 : rbytes,
			   cudaMemcpyDeviceToHost));
	errors = bench_check(&pat, op, c->rank, c->host, &s, 1);
	/* Nothing may be written past the result (or anywhere, off-root reduce). */
	for (size_t i = op == OP_REDUCE && c->rank != BENCH_ROOT ? 0 : rbytes;
	     i < rbytes + 64 && i < c->cap; i++)
		errors += c->host[i] != 0xff;
	if (errors)
		fprintf(stderr, "rank %d %s %s/%s %zu bytes: %llu wrong element(s)\n", c->rank,
			bench_op_name(op), d->name, bench_redop_name(redop), bytes,
			(unsigned long long)errors);
	if (timed) {
		run(c, op, dtype, redop, &s, c->o->warmup, &exec);
		wait_ops(c);
		/* Every rank starts its clock together.  Without this, a rank
		 * that finished the check early starts timing early and its
		 * first op waits out the others' checks: natively it cannot
		 * get ahead (NCCL's 4 MiB per channel), but the plugin's 16 MiB
		 * per channel let the root finish its warmups into the next
		 * GPU's buffers, so the skew landed in its timed window (61 ms
		 * in a 256 MiB broadcast, 0.2 of native). */
		barrier(c);
		us = c->o->iter_times ? timed_alone(c, op, dtype, redop, &s, &exec, bytes) :
		     timed_together(c, op, dtype, redop, &s, &exec);
		/* The last timed run's result as well: ops queued back to back
		 * (and graph replays) must leave the same bytes as the lone
		 * checked call above (the inputs are unchanged, no op is in
		 * place). */
		CUDA_OK(cudaMemcpy(c->host, c->rbuf, rbytes, cudaMemcpyDeviceToHost));
		after = bench_check(&pat, op, c->rank, c->host, &s, 1);
		if (after)
			fprintf(stderr, "rank %d %s %s/%s %zu bytes: %llu wrong element(s) after the "
				"timed runs\n", c->rank, bench_op_name(op), d->name,
				bench_redop_name(redop), bytes, (unsigned long long)after);
		errors += after;
	}
	if (exec)
		CUDA_OK(cudaGraphExecDestroy(exec));
	bench_pattern_free(&pat);
	report(c, op, dtype, redop, bytes, timed, us, errors);
}

static long rss_kib(void)
{
	long pages = 0, resident = 0;
	FILE *f = fopen("/proc/self/statm", "r");

	if (!f)
		return -1;
	if (fscanf(f, "%ld %ld", &pages, &resident) != 2)
		resident = -1;
	fclose(f);
	return resident < 0 ? -1 : resident * (sysconf(_SC_PAGESIZE) / 1024);
}

/* -L: communicators made (split from the first) and destroyed over and
 * over, each running every selected op once at the first size, checked.
 * Device memory and RSS after the first cycle and after the last show
 * what a cycle leaks. */
static void leak_cycles(struct rank_ctx *c)
{
	ncclComm_t parent = c->comm;
	size_t free0 = 0, free1 = 0, total = 0;
	long rss0 = 0, rss1;

	for (int i = 0; i < c->o->cycles; i++) {
		NCCL_OK(ncclCommSplit(parent, 0, c->rank, &c->comm, NULL));
		for (int op = 0; op < OP_COUNT; op++)
			if (c->o->ops[op])
				one(c, op, 0, ncclSum, c->o->sizes[0], 0);
		NCCL_OK(ncclCommDestroy(c->comm));
		if (i == 0) {
			CUDA_OK(cudaMemGetInfo(&free0, &total));
			rss0 = rss_kib();
		}
		/* The trend along the way, so a run cut short still tells. */
		if (c->rank == 0 && (i + 1) % 25 == 0 && i + 1 < c->o->cycles) {
			CUDA_OK(cudaMemGetInfo(&free1, &total));
			printf("leak rank 0: after cycle %d: device free %.1f MiB (%+.1f), RSS %ld KiB "
			       "(%+ld)\n", i + 1, free1 / 1048576.0,
			       ((double)free1 - (double)free0) / 1048576.0, rss_kib(),
			       rss_kib() - rss0);
			fflush(stdout);
		}
	}
	CUDA_OK(cudaMemGetInfo(&free1, &total));
	rss1 = rss_kib();
	printf("leak rank %d: %d communicator cycles; after cycle 1 and after cycle %d: device free "
	       "%.1f -> %.1f MiB (%+.1f), RSS %ld -> %ld KiB (%+ld)\n", c->rank, c->o->cycles,
	       c->o->cycles, free0 / 1048576.0, free1 / 1048576.0,
	       ((double)free1 - (double)free0) / 1048576.0, rss0, rss1, rss1 - rss0);
	c->comm = parent;
}

/* Setup cost, every rank starting together: one checked call of each
 * selected op at its smallest size, the first use of the op, which is
 * when NCCL makes its connections (NCCL_RUNTIME_CONNECT).  Reported as
 * timed == BENCH_SETUP rows. */
static void first_calls(struct rank_ctx *c)
{
	for (int op = 0; op < OP_COUNT; op++) {
		double t0;

		if (!c->o->ops[op])
			continue;
		barrier(c);
		t0 = bench_now();
		one(c, op, 0, ncclSum, (size_t)c->o->nranks * sizeof(float), 0);
		report(c, op, 0, ncclSum, 0, BENCH_SETUP, (bench_now() - t0) * 1e6, 0);
	}
}

/* The whole matrix: every selected op at every size, then the extra
 * data types and reductions at three sizes. */
static void matrix(struct rank_ctx *c)
{
	first_calls(c);
	for (int op = 0; op < OP_COUNT; op++) {
		if (!c->o->ops[op])
			continue;
		for (int i = 0; i < c->o->nsizes; i++)
			one(c, op, 0, ncclSum, c->o->sizes[i], 1);
		for (int k = 0; k < c->o->ncases; k++) {
			int reducing = op == OP_ALLREDUCE || op == OP_REDUCE || op == OP_REDUCESCATTER;

			/* Moving ops ignore the reduction: one check per type. */
			if (!reducing && c->o->cases[k].redop != ncclSum)
				continue;
			for (int i = 0; i < 3; i++)
				one(c, op, c->o->cases[k].dtype, c->o->cases[k].redop, c->o->case_sizes[i], 0);
		}
	}
}

int bench_rank_main(const struct bench_opts *o, int phase, int rank, ncclUniqueId id, int out_fd)
{
	struct rank_ctx c = { .o = o, .rank = rank, .phase = phase, .out_fd = out_fd };
	void *sreg = NULL, *rreg = NULL;
	double t0;

	for (int i = 0; i < o->nsizes; i++)
		if (o->sizes[i] > c.cap)
			c.cap = o->sizes[i];
	for (int i = 0; i < 3; i++)
		if (o->case_sizes[i] > c.cap)
			c.cap = o->case_sizes[i];
	/* Room past the largest op for the overrun check, in whole 2 MiB
	 * pages as PyTorch's caching allocator cuts its segments: copy engines
	 * move legacy-IPC-mapped cudaMalloc memory of a size that is not a
	 * multiple of 64 KiB at about two thirds of full speed
	 * (bench/results/coalesce.md, section 4), which is the allocation's
	 * shape and not the plugin's. */
	c.cap = (c.cap + 4096 + BUF_ROUND - 1) / BUF_ROUND * BUF_ROUND;
	c.host = malloc(c.cap);
	if (!c.host)
		return 2;
	/* -V: the only GPU this process sees is its own.  More ranks than
	 * GPUs share them round robin: with -H (one host per rank) that is
	 * a correctness check on a one-GPU host, never a timing. */
	int ngpus = 1;

	if (!o->own_gpu_only)
		CUDA_OK(cudaGetDeviceCount(&ngpus));
	CUDA_OK(cudaSetDevice(o->own_gpu_only ? 0 : rank % ngpus));
	CUDA_OK(cudaFree(NULL));	/* the CUDA context is not NCCL's setup */
	barrier(&c);
	t0 = bench_now();
	NCCL_OK(ncclCommInitRank(&c.comm, o->nranks, id, rank));
	report(&c, OP_COUNT, 0, ncclSum, 0, BENCH_SETUP, (bench_now() - t0) * 1e6, 0);
	CUDA_OK(cudaStreamCreateWithFlags(&c.stream, cudaStreamNonBlocking));
	if (o->cumem_bufs) {
		NCCL_OK(ncclMemAlloc(&c.sbuf, c.cap));
		NCCL_OK(ncclMemAlloc(&c.rbuf, c.cap));
	} else {
		CUDA_OK(cudaMalloc(&c.sbuf, c.cap));
		CUDA_OK(cudaMalloc(&c.rbuf, c.cap));
	}
	if (o->registered) {
		NCCL_OK(ncclCommRegister(c.comm, c.sbuf, c.cap, &sreg));
		NCCL_OK(ncclCommRegister(c.comm, c.rbuf, c.cap, &rreg));
	}
	if (o->cycles)
		leak_cycles(&c);
	else
		matrix(&c);
	if (o->registered) {
		NCCL_OK(ncclCommDeregister(c.comm, sreg));
		NCCL_OK(ncclCommDeregister(c.comm, rreg));
	}
	NCCL_OK(ncclCommDestroy(c.comm));
	if (o->cumem_bufs) {
		NCCL_OK(ncclMemFree(c.sbuf));
		NCCL_OK(ncclMemFree(c.rbuf));
	} else {
		CUDA_OK(cudaFree(c.sbuf));
		CUDA_OK(cudaFree(c.rbuf));
	}
	CUDA_OK(cudaStreamDestroy(c.stream));
	free(c.host);
	return 0;
}
