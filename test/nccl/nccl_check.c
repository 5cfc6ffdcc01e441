/* NCCL check driver: one process per GPU, a collective over a range of
 * sizes, every received element checked against a host reference, and the
 * time and bus bandwidth per size in nccl-tests' terms.
 *
 * Usage: nccl_check [-n ranks] [-b min_bytes] [-e max_bytes] [-i iters]
 *                   [-c allreduce|allgather|sendrecv]
 * Inputs are small integers stored as float, so every sum is exact and the
 * check is equality, not a tolerance.  Outputs are poisoned (NaN) first. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cuda_runtime_api.h>
#include <nccl.h>

enum coll { ALLREDUCE, ALLGATHER, SENDRECV };

struct opts {
	int nranks;
	size_t min_bytes, max_bytes;
	int iters;
	enum coll coll;
};

#define CHECK_CUDA(call) check_cuda((call), #call, __LINE__)
#define CHECK_NCCL(call) check_nccl((call), #call, __LINE__)

static int check_cuda(cudaError_t e, const char *what, int line)
{
	if (e == cudaSuccess)
		return 0;
	fprintf(stderr, "line %d: %s: %s\n", line, what, cudaGetErrorString(e));
	exit(2);
}

static int check_nccl(ncclResult_t r, const char *what, int line)
{
	if (r == ncclSuccess)
		return 0;
	fprintf(stderr, "line %d: %s: %s\n", line, what, ncclGetErrorString(r));
	exit(3);
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Value rank r contributes at element i (small, non-zero, exact in float). */
static float input(int r, size_t i, int round)
{
	return (float)(1 + (int)((i * 7 + (size_t)r * 13 + (size_t)round * 5) % 61));
}

static const char *coll_name(enum coll c)
{
	return c == ALLREDUCE ? "allreduce" : c == ALLGATHER ? "allgather" : "sendrecv";
}

/* nccl-tests' bus-bandwidth factors. */
static double bus_factor(enum coll c, int n)
{
	if (c == ALLREDUCE)
		return 2.0 * (n - 1) / n;
	if (c == ALLGATHER)
		return (double)(n - 1) / n;
	return 1.0;
}

static void run_op(const struct opts *o, int rank, ncclComm_t comm, cudaStream_t s,
		   float *sbuf, float *rbuf, size_t count)
{
	int n = o->nranks;

	switch (o->coll) {
	case ALLREDUCE:
		CHECK_NCCL(ncclAllReduce(sbuf, rbuf, count, ncclFloat, ncclSum, comm, s));
		break;
	case ALLGATHER:
		CHECK_NCCL(ncclAllGather(sbuf, rbuf, count, ncclFloat, comm, s));
		break;
	case SENDRECV:
		CHECK_NCCL(ncclGroupStart());
		CHECK_NCCL(ncclSend(sbuf, count, ncclFloat, (rank + 1) % n, comm, s));
		CHECK_NCCL(ncclRecv(rbuf, count, ncclFloat, (rank + n - 1) % n, comm, s));
		CHECK_NCCL(ncclGroupEnd());
		break;
	}
}

static float expected(const struct opts *o, int rank, size_t count, size_t j, int round)
{
	int n = o->nranks;
	float sum = 0;

	switch (o->coll) {
	case ALLREDUCE:
		for (int r = 0; r < n; r++)
			sum += input(r, j, round);
		return sum;
	case ALLGATHER:
		return input((int)(j / count), j % count, round);
	default:
		return input((rank + n - 1) % n, j, round);
	}
}

static int rank_main(const struct opts *o, int rank, ncclUniqueId id)
{
	size_t max_count = o->max_bytes / sizeof(float);
	size_t rmax = o->coll == ALLGATHER ? max_count * (size_t)o->nranks : max_count;
	float *sbuf, *rbuf, *host = malloc(rmax * sizeof(float));
	cudaStream_t s;
	ncclComm_t comm;
	int bad = 0;

	CHECK_CUDA(cudaSetDevice(rank));
	CHECK_NCCL(ncclCommInitRank(&comm, o->nranks, id, rank));
	CHECK_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
	CHECK_CUDA(cudaMalloc((void **)&sbuf, max_count * sizeof(float) + 1));
	CHECK_CUDA(cudaMalloc((void **)&rbuf, rmax * sizeof(float) + 1));
	if (rank == 0)
		printf("# %s, %d ranks; size = bytes per rank\n# %12s %10s %10s %8s\n",
		       coll_name(o->coll), o->nranks, "size", "time_us", "busbw_GBs", "errors");
	for (size_t bytes = o->min_bytes; bytes <= o->max_bytes; bytes = bytes ? bytes * 4 : 4) {
		size_t count = bytes / sizeof(float);
		size_t rcount = o->coll == ALLGATHER ? count * (size_t)o->nranks : count;
		size_t errors = 0;
		double t0, dt;

		/* Correctness round: fresh inputs, poisoned output, every element. */
		for (size_t i = 0; i < count; i++)
			host[i] = input(rank, i, (int)(bytes % 97));
		/* Everything on the collective's own (non-blocking) stream: a plain
		 * cudaMemset would race with it from the legacy stream. */
		CHECK_CUDA(cudaMemcpyAsync(sbuf, host, count * sizeof(float), cudaMemcpyHostToDevice, s));
		CHECK_CUDA(cudaMemsetAsync(rbuf, 0xff, rcount * sizeof(float) + 1, s));
		CHECK_CUDA(cudaStreamSynchronize(s));
		run_op(o, rank, comm, s, sbuf, rbuf, count);
		CHECK_CUDA(cudaStreamSynchronize(s));
		CHECK_CUDA(cudaMemcpy(host, rbuf, rcount * sizeof(float), cudaMemcpyDeviceToHost));
		for (size_t j = 0; j < rcount; j++) {
			float want = expected(o, rank, count, j, (int)(bytes % 97));

			if (host[j] != want) {
				if (errors < 3)
					fprintf(stderr, "rank %d size %zu: element %zu is %g, expected %g\n",
						rank, bytes, j, (double)host[j], (double)want);
				errors++;
			}
		}
		bad |= errors != 0;

		/* Timed rounds. */
		run_op(o, rank, comm, s, sbuf, rbuf, count);
		CHECK_CUDA(cudaStreamSynchronize(s));
		t0 = now();
		for (int it = 0; it < o->iters; it++)
			run_op(o, rank, comm, s, sbuf, rbuf, count);
		CHECK_CUDA(cudaStreamSynchronize(s));
		dt = (now() - t0) / o->iters;
		if (rank == 0)
			printf("  %12zu %10.1f %10.2f %8zu\n", bytes, dt * 1e6,
			       (double)(o->coll == ALLGATHER ? bytes * (size_t)o->nranks : bytes) /
				       dt / 1e9 * bus_factor(o->coll, o->nranks),
			       errors);
		fflush(stdout);
		if (bytes == 0 && o->max_bytes == 0)
			break;
	}
	CHECK_NCCL(ncclCommDestroy(comm));
	CHECK_CUDA(cudaFree(sbuf));
	CHECK_CUDA(cudaFree(rbuf));
	free(host);
	return bad ? 1 : 0;
}

int main(int argc, char **argv)
{
	struct opts o = { .nranks = 0, .min_bytes = 4, .max_bytes = 64 << 20, .iters = 20 };
	int pipes[2], opt, failed = 0;
	ncclUniqueId id;
	pid_t pids[64];

	while ((opt = getopt(argc, argv, "n:b:e:i:c:")) != -1) {
		switch (opt) {
		case 'n': o.nranks = atoi(optarg); break;
		case 'b': o.min_bytes = strtoull(optarg, NULL, 0); break;
		case 'e': o.max_bytes = strtoull(optarg, NULL, 0); break;
		case 'i': o.iters = atoi(optarg); break;
		case 'c':
			o.coll = !strcmp(optarg, "allgather") ? ALLGATHER :
				 !strcmp(optarg, "sendrecv") ? SENDRECV : ALLREDUCE;
			break;
		default:
			fprintf(stderr, "usage: %s [-n ranks] [-b min] [-e max] [-i iters] [-c coll]\n",
				argv[0]);
			return 2;
		}
	}
	if (o.nranks <= 0) {
		/* Count GPUs in a child: CUDA must not be initialised before fork. */
		if (pipe(pipes) != 0)
			return 2;
		if (fork() == 0) {
			int n = 0;

			cudaGetDeviceCount(&n);
			_exit(write(pipes[1], &n, sizeof(n)) == sizeof(n) ? 0 : 1);
		}
		if (read(pipes[0], &o.nranks, sizeof(o.nranks)) != sizeof(o.nranks))
			return 2;
		wait(NULL);
	}
	if (o.nranks < 1 || o.nranks > 64)
		return 2;
	/* Rank 0 makes the unique id and the parent hands it to the others, so
	 * no CUDA or NCCL state exists in the parent when it forks. */
	if (pipe(pipes) != 0)
		return 2;
	for (int r = 0; r < o.nranks; r++) {
		int to_rank[2];

		if (pipe(to_rank) != 0)
			return 2;
		pids[r] = fork();
		if (pids[r] == 0) {
			if (r == 0) {
				CHECK_NCCL(ncclGetUniqueId(&id));
				if (write(pipes[1], &id, sizeof(id)) != sizeof(id))
					_exit(2);
			} else if (read(to_rank[0], &id, sizeof(id)) != sizeof(id)) {
				_exit(2);
			}
			_exit(rank_main(&o, r, id));
		}
		if (r == 0 && read(pipes[0], &id, sizeof(id)) != sizeof(id))
			return 2;
		if (r > 0 && write(to_rank[1], &id, sizeof(id)) != sizeof(id))
			return 2;
		close(to_rank[0]);
		close(to_rank[1]);
	}
	for (int r = 0; r < o.nranks; r++) {
		int status;

		waitpid(pids[r], &status, 0);
		if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
			fprintf(stderr, "rank %d failed (status 0x%x)\n", r, status);
			failed = 1;
		}
	}
	printf("%s: %s\n", coll_name(o.coll), failed ? "FAILED" : "all results correct");
	return failed;
}
