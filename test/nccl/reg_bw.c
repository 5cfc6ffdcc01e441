/* GPU experiment: registered send/recv through the plugin's exported v11
 * table, without NCCL.  Two processes (GPU 0 and GPU 1) each send 1 GiB to
 * the other and receive 1 GiB from it at the same time, in PIECE-sized
 * messages with DEPTH in flight each way, from and into registered
 * buffers made one of two ways:
 *   malloc  cudaMalloc (the plugin shares it as a legacy IPC handle);
 *   cumem   cuMemCreate with a POSIX-fd handle type, as ncclMemAlloc makes it.
 * Every byte is checked after each pass (pattern in, poison out).  Prints
 * GB/s per direction.  It was written to tell whether NCCL has a part in
 * registered cudaMalloc send/recv running at 0.70 of cuMem's through the
 * plugin; the allocation size turned out to.
 * With CONNECTIONS > 1 each direction has that many connections, each
 * registering the whole buffers and carrying its own part of them, as
 * NCCL's channels do (NCCL_NCHANNELS_PER_NET_PEER=16: 16).  EXTRA_KiB
 * makes each allocation that much larger than the 1 GiB it carries, as
 * nccl_bench's once were (1 GiB + 4 KiB); WHICH says which
 * buffers: both (the default), send or recv.
 * Usage: SYMMEM_PLUGIN=... reg_bw [piece_MiB] [depth] [passes] [connections] [extra_KiB] [which] */
#include <cuda.h>
#include <cuda_runtime.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../mp/harness.h"
#include "../probe/probe_cumem.h"

#define SIZE (1ull << 30)
#define MAX_DEPTH 64
#define MAX_CONNS 32
#define SETUP_S 30.0		/* connecting, at most */
#define PASS_S 30.0		/* one pass of 1 GiB each way, at most */

static size_t piece = 16u << 20;
static int depth = 8, passes = 5, conns = 1;
static size_t extra;		/* bytes allocated past SIZE ... */
static int extra_send = 1, extra_recv = 1;	/* ... for these buffers */
static uint8_t *host;

/* cuMem memory as ncclMemAlloc makes it, readable and writable by both GPUs. */
static void *cumem_buffer(int dev, size_t alloc)
{
	CUmemAllocationProp prop;
	CUmemGenericAllocationHandle h;
	CUdeviceptr va = 0;
	size_t gran = probe_cumem_prop(dev, &prop);
	size_t size = (alloc + gran - 1) / gran * gran;

	if (cuMemCreate(&h, size, &prop, 0) || cuMemAddressReserve(&va, size, gran, 0, 0) ||
	    cuMemMap(va, size, 0, h, 0))
		return NULL;
	grant_gpus(va, size, 2);
	cuMemRelease(h);	/* the mapping holds it; the process exits without unmapping */
	return (void *)va;
}

static void *gpu_buffer(int dev, int use_cumem, size_t alloc)
{
	void *p = NULL;

	if (use_cumem)
		return cumem_buffer(dev, alloc);
	return cudaMalloc(&p, alloc) == cudaSuccess ? p : NULL;
}

struct way {
	void *comm, *mh;
	uint8_t *buf;
	void *req[MAX_DEPTH];
	size_t next, done, n;
	int recv;
};

/* Posts what fits, tests what is posted; -1 on an error. */
static int step(struct way *w)
{
	for (int s = 0; s < depth && w->next < w->n; s++) {
		void *ptr;
		size_t size = piece;
		int tag = 0, rc;

		if (w->req[s])
			continue;
		ptr = w->buf + w->next * piece;
		rc = w->recv ? net->irecv(w->comm, 1, &ptr, &size, &tag, &w->mh, NULL, &w->req[s]) :
			       net->isend(w->comm, ptr, piece, 0, w->mh, NULL, &w->req[s]);
		if (rc)
			return -1;
		if (!w->req[s])
			break;	/* the receiver has not posted yet */
		w->next++;
	}
	for (int s = 0; s < depth; s++) {
		int done = 0, size = 0;

		if (!w->req[s])
			continue;
		if (net->test(w->req[s], &done, &size))
			return -1;
		if (done) {
			w->req[s] = NULL;
			w->done++;
		}
	}
	return 0;
}

/* One pass: every connection's part, both ways, until all landed. */
static int one_pass(struct way *out, struct way *in)
{
	double end = harness_now() + PASS_S;
	size_t left;

	for (int c = 0; c < conns; c++)
		out[c].next = out[c].done = in[c].next = in[c].done = 0;
	do {
		left = 0;
		for (int c = 0; c < conns; c++) {
			if (step(&out[c]) || step(&in[c]))
				return -1;
			left += (out[c].n - out[c].done) + (in[c].n - in[c].done);
		}
		if (left && harness_now() > end) {
			fprintf(stderr, "a pass did not end within %.0f s\n", PASS_S);
			return -1;
		}
	} while (left);
	return 0;
}

static int rank_main(int me, int sock, int use_cumem)
{
	char mine[MAX_CONNS][NCCL_NET_HANDLE_MAXSIZE], theirs[MAX_CONNS][NCCL_NET_HANDLE_MAXSIZE];
	struct way out[MAX_CONNS], in[MAX_CONNS];
	void *ctx, *lc[MAX_CONNS], *sbuf, *rbuf;
	size_t part = SIZE / (size_t)conns, open;
	size_t salloc = SIZE + (extra_send ? extra : 0), ralloc = SIZE + (extra_recv ? extra : 0);
	double end;

	memset(out, 0, sizeof(out));
	memset(in, 0, sizeof(in));
	if (cudaSetDevice(me) != cudaSuccess || cudaFree(NULL) != cudaSuccess ||
	    !(ctx = harness_init()))
		return 2;
	for (int c = 0; c < conns; c++)
		if (net->listen(ctx, me, mine[c], &lc[c]))
			return 2;
	if (harness_send_all(sock, mine, sizeof(mine)) || harness_recv_all(sock, theirs, sizeof(theirs)))
		return 2;
	end = harness_now() + SETUP_S;
	do {
		open = 0;
		for (int c = 0; c < conns; c++) {
			if (!out[c].comm && net->connect(ctx, me, theirs[c], &out[c].comm, NULL))
				return 3;
			if (!in[c].comm && net->accept(lc[c], &in[c].comm, NULL))
				return 3;
			open += (out[c].comm != NULL) + (in[c].comm != NULL);
		}
		if (open < 2 * (size_t)conns && harness_now() > end)
			return 3;
	} while (open < 2 * (size_t)conns);
	if (!(sbuf = gpu_buffer(me, use_cumem, salloc)) || !(rbuf = gpu_buffer(me, use_cumem, ralloc)))
		return 4;
	pattern_fill(host, SIZE, (uint64_t)me + 1);
	if (cudaMemcpy(sbuf, host, SIZE, cudaMemcpyHostToDevice) != cudaSuccess)
		return 5;
	/* Like NCCL's channels: each connection registers the whole buffer
	 * and carries its own part of it. */
	for (int c = 0; c < conns; c++) {
		if (net->regMr(out[c].comm, sbuf, salloc, NCCL_PTR_CUDA, &out[c].mh) ||
		    net->regMr(in[c].comm, rbuf, ralloc, NCCL_PTR_CUDA, &in[c].mh))
			return 5;
		out[c].buf = (uint8_t *)sbuf + (size_t)c * part;
		in[c].buf = (uint8_t *)rbuf + (size_t)c * part;
		in[c].recv = 1;
		out[c].n = in[c].n = part / piece;
	}
	for (int p = 0; p < passes; p++) {
		double t0;
		char go = 'g';

		if (cudaMemset(rbuf, 0xa5, SIZE) != cudaSuccess || cudaDeviceSynchronize() != cudaSuccess)
			return 6;
		/* Both ranks start a pass together. */
		if (harness_send_all(sock, &go, 1) || harness_recv_all(sock, &go, 1))
			return 6;
		t0 = harness_now();
		if (one_pass(out, in))
			return 7;
		printf("%-6s piece %4zu MiB depth %2d connections %2d extra %4zu KiB %-4s  GPU%d -> GPU%d  %6.1f GB/s\n",
		       use_cumem ? "cumem" : "malloc", piece >> 20, depth, conns, extra >> 10,
		       extra_send && extra_recv ? "both" : extra_send ? "send" : "recv", 1 - me, me,
		       SIZE / (harness_now() - t0) / 1e9);
		if (cudaMemcpy(host, rbuf, SIZE, cudaMemcpyDeviceToHost) != cudaSuccess ||
		    pattern_check(host, SIZE, (uint64_t)(1 - me) + 1) != SIZE) {
			printf("GPU%d: pass %d arrived wrong\n", me, p);
			return 8;
		}
	}
	fflush(stdout);
	for (int c = 0; c < conns; c++)
		if (net->deregMr(out[c].comm, out[c].mh) || net->deregMr(in[c].comm, in[c].mh) ||
		    net->closeSend(out[c].comm) || net->closeRecv(in[c].comm) ||
		    net->closeListen(lc[c]))
			return 9;
	return net->finalize(ctx) ? 10 : 0;
}

/* Both ranks in child processes: this one never touches CUDA, so the
 * next kind forks cleanly. */
static int run(int use_cumem)
{
	int sv[2], status[2], bad = 0;
	pid_t pid[2];

	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv))
		return 1;
	for (int r = 0; r < 2; r++) {
		pid[r] = fork();
		if (pid[r] == 0) {
			int rc;

			close(sv[1 - r]);	/* EOF here if the other rank dies */
			rc = rank_main(r, sv[r], use_cumem);

			fflush(stdout);
			_exit(rc);
		}
	}
	close(sv[0]);
	close(sv[1]);
	for (int r = 0; r < 2; r++) {
		if (waitpid(pid[r], &status[r], 0) != pid[r] || !WIFEXITED(status[r]))
			status[r] = 255 << 8;
		bad |= WEXITSTATUS(status[r]) != 0;
	}
	if (bad)
		printf("reg_bw %s: rank 0 %d, rank 1 %d: FAIL\n", use_cumem ? "cumem" : "malloc",
		       WEXITSTATUS(status[0]), WEXITSTATUS(status[1]));
	return bad;
}

/* argv[i] as a whole number in [lo, hi], or -1 when it is not one. */
static long arg_num(char **argv, int i, long lo, long hi)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(argv[i], &end, 10);
	if (errno || end == argv[i] || *end || v < lo || v > hi)
		return -1;
	return v;
}

int main(int argc, char **argv)
{
	long v[5] = { (long)(piece >> 20), depth, passes, conns, (long)(extra >> 10) };
	int bad = 0;

	for (int i = 1; i < argc && i <= 5; i++) {
		/* piece_MiB, depth, passes, connections, extra_KiB */
		static const long lo[5] = { 1, 1, 1, 1, 0 };
		static const long hi[5] = { 1024, MAX_DEPTH, 1000, MAX_CONNS, 1 << 20 };

		v[i - 1] = arg_num(argv, i, lo[i - 1], hi[i - 1]);
		if (v[i - 1] < 0)
			bad = 1;
	}
	if (argc > 6) {
		extra_send = strcmp(argv[6], "recv") != 0;
		extra_recv = strcmp(argv[6], "send") != 0;
		if (strcmp(argv[6], "both") && strcmp(argv[6], "send") && strcmp(argv[6], "recv"))
			bad = 1;
	}
	piece = (size_t)v[0] << 20;
	depth = (int)v[1];
	passes = (int)v[2];
	conns = (int)v[3];
	extra = (size_t)v[4] << 10;
	if (bad || argc > 7 || SIZE % (piece * (size_t)conns)) {
		fprintf(stderr, "usage: reg_bw [piece_MiB] [depth 1-%d] [passes] [connections 1-%d] "
			"[extra_KiB 0-1048576] [both|send|recv]; pieces x connections must divide 1 GiB\n",
			MAX_DEPTH, MAX_CONNS);
		return 2;
	}
	host = malloc(SIZE);
	if (!host || !harness_open())
		return 1;
	/* Each kind in its own pair of processes: a fresh helper per kind. */
	bad = run(0);
	bad |= run(1);
	return bad;
}
