// Hardware/driver probe for the copy-engine design (not part of the library,
// which has no kernels; this tool needs one to keep SMs busy).
//
//   ce_probe xproc      Copy latency and bandwidth GPU0 -> GPU1 (peer mapping)
//                       from a separate process, while the first process's
//                       kernels fill every SM of GPU0, and while it is idle.
//                       Answers: can a copy-helper process drive the copy
//                       engines of a GPU another process is computing on?
//   ce_probe kinds      Which copies another process's kernels hold up: while
//                       a child keeps every SM of GPU0 and GPU1 busy (as NCCL's
//                       kernels do on both ends), this process times copies of
//                       each kind from a GPU0 context: to a peer, within GPU0,
//                       host to GPU, peer to peer, plain and with the batch
//                       call's copy-engine hint.
//   ce_probe bidir      Copy-engine bandwidth between GPU0 and GPU1 one way and
//                       both ways at once, pushed (the source GPU copies) or
//                       pulled, as one copy or cut into pieces over 1-4
//                       streams, one issuing thread per copying GPU (as one
//                       copy helper per rank).  Answers: what does the
//                       hardware give send/recv's two directions at 1 GiB?
//   ce_probe multi      Every GPU of the host pushes at once, one issuing thread
//                       per GPU (as one copy helper per rank): to the next GPU
//                       (ring), to both neighbours, to every other GPU at once
//                       (one stream per peer) and to every other GPU in turn.
//                       Answers: does a copy engine keep its one-peer rate when
//                       it writes to several peers (4-GPU alltoall)?
//   ce_probe multi-cumem  The same on memory made as ncclMemAlloc makes it
//                       (cuMem, fd-exportable, mapped for every GPU).
//   ce_probe multi-proc One process per GPU (MULTI_GPUS, default 4) writing
//                       into the others' memory imported from POSIX fds, as
//                       the plugin's copies do.
//   ce_probe ipc        Where registered cudaMalloc buffers lose speed: two
//                       owner processes (GPU0, GPU1) each export a cudaMalloc
//                       and a cuMem buffer; this process (as the copy helper)
//                       copies GPU0 -> GPU1 between every mix of imported
//                       legacy-IPC, imported cuMem-fd and its own memory.
//   ce_probe ipc-bidir  The plugin's shape: two owners (GPU0, GPU1) export a
//                       1 GiB source and destination each, as cudaMalloc
//                       (legacy IPC) and as cuMem (fd); two helper processes,
//                       one per GPU, import their owner's source and the
//                       peer's destination and copy 1 GiB in 16 MiB pieces
//                       (or whole) one way, then both ways at once.
//   ce_probe graph [H]  One process: a graph whose kernel waits on a host flag
//                       (H=1: plus a host node, as NCCL's proxy graphs have),
//                       launched 32 times back to back; a second thread issues
//                       cudaMemcpyAsync meanwhile.  Prints how long launches and
//                       copies were blocked before the flag was released.
#include <cuda.h>
#include <cuda_runtime.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "probe_cumem.h"

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { \
	fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); exit(2); } } while (0)

static double now_us(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

__global__ void spin_ns(long long ns)
{
	long long t0 = clock64();
	// ~1.98 GHz on H200; close enough for "busy for a while".
	while (clock64() - t0 < ns * 2)
		;
}

__global__ void wait_flag(volatile int *flag)
{
	if (threadIdx.x == 0 && blockIdx.x == 0)
		while (*flag == 0)
			;
}

static void host_node(void *arg)
{
	(void)arg;
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static int use_batch_hint;	// kinds: copies through cudaMemcpyBatchAsync + hint

// kinds-small: other shapes of a small host-to-GPU copy, each a 2D copy:
// 1: one row, 2: two rows, 3: 256-byte rows, 4: 1-byte rows.  (64-bit
// stream memory writes were tried too: 94 us for 1 KiB with the GPU idle.)
static int copy_shape;

static void copy_shaped(void *dst, const void *src, size_t n, cudaStream_t s)
{
	size_t w = copy_shape == 1 ? n : copy_shape == 2 ? n / 2 : copy_shape == 3 ? 256 : 1;

	if (w > n)
		w = n;
	CK(cudaMemcpy2DAsync(dst, w, src, w, w, n / w, cudaMemcpyDefault, s));
}

static void copy_async(void *dst, const void *src, size_t n, cudaStream_t s)
{
	if (copy_shape) {
		copy_shaped(dst, src, n, s);
		return;
	}
	if (!use_batch_hint) {
		CK(cudaMemcpyAsync(dst, src, n, cudaMemcpyDefault, s));
		return;
	}
	struct cudaMemcpyAttributes a;
	size_t idx = 0;
	memset(&a, 0, sizeof(a));
	a.srcAccessOrder = cudaMemcpySrcAccessOrderStream;
	a.flags = cudaMemcpyFlagPreferOverlapWithCompute;
	CK(cudaMemcpyBatchAsync(&dst, &src, &n, 1, &a, &idx, 1, s));
}

// Copy n bytes iters times, each waited for alone; prints median/p99 time.
static void time_copies(const char *label, void *dst, const void *src, size_t n, int iters,
			cudaStream_t s)
{
	double *t = (double *)calloc(iters, sizeof(double));
	cudaEvent_t ev;
	CK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
	for (int i = 0; i < iters; i++) {
		double t0 = now_us();
		copy_async(dst, src, n, s);
		CK(cudaEventRecord(ev, s));
		while (cudaEventQuery(ev) == cudaErrorNotReady)
			;
		t[i] = now_us() - t0;
	}
	qsort(t, iters, sizeof(double), cmp_d);
	double med = t[iters / 2];
	printf("%-28s %10zu B  median %9.1f us  p99 %9.1f us  max %9.1f us  %7.1f GB/s\n", label, n,
	       med, t[iters * 99 / 100], t[iters - 1], n / med / 1e3);
	fflush(stdout);
	CK(cudaEventDestroy(ev));
	free(t);
}

static int xproc(void)
{
	int go[2], done[2];
	if (pipe(go) || pipe(done))
		return 1;
	pid_t pid = fork();
	if (pid == 0) {
		// The "application": fills GPU0's SMs with 20 ms kernels while told to.
		char c;
		CK(cudaSetDevice(0));
		cudaStream_t s;
		CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
		int sms;
		CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
		CK(cudaDeviceSynchronize());
		if (read(go[0], &c, 1) != 1)
			_exit(1);
		// Busy until the prober says stop; keep at most a few kernels queued.
		for (;;) {
			spin_ns<<<sms * 4, 256, 0, s>>>(20000000LL);
			CK(cudaStreamSynchronize(s));
			struct timeval tv = {0, 0};
			fd_set f;
			FD_ZERO(&f);
			FD_SET(done[0], &f);
			if (select(done[0] + 1, &f, NULL, NULL, &tv) > 0)
				break;
		}
		_exit(0);
	}
	CK(cudaSetDevice(0));
	int can = 0;
	CK(cudaDeviceCanAccessPeer(&can, 0, 1));
	if (!can) {
		fprintf(stderr, "no peer access 0->1\n");
		return 1;
	}
	CK(cudaDeviceEnablePeerAccess(1, 0));
	size_t big = 256u << 20;
	void *src, *dst;
	CK(cudaMalloc(&src, big));
	CK(cudaMemset(src, 0x5a, big));
	CK(cudaSetDevice(1));
	CK(cudaMalloc(&dst, big));
	CK(cudaSetDevice(0));
	cudaStream_t s;
	CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
	CK(cudaDeviceSynchronize());
	time_copies("other process idle", dst, src, 8, 2000, s);
	time_copies("other process idle", dst, src, 1 << 20, 500, s);
	time_copies("other process idle", dst, src, big, 20, s);
	if (write(go[1], "g", 1) != 1)
		return 1;
	usleep(200000);
	time_copies("other process SMs busy", dst, src, 8, 2000, s);
	time_copies("other process SMs busy", dst, src, 1 << 20, 500, s);
	time_copies("other process SMs busy", dst, src, big, 20, s);
	if (write(done[1], "d", 1) != 1)
		return 1;
	int st;
	waitpid(pid, &st, 0);
	return 0;
}

// The "application" of kinds: every SM of GPU0 and GPU1 busy with 20 ms
// kernels until told to stop.
static void busy_both(int go, int done)
{
	char c;
	cudaStream_t s[2];
	int sms;
	for (int d = 0; d < 2; d++) {
		CK(cudaSetDevice(d));
		CK(cudaStreamCreateWithFlags(&s[d], cudaStreamNonBlocking));
	}
	CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
	if (read(go, &c, 1) != 1)
		_exit(1);
	for (;;) {
		for (int d = 0; d < 2; d++) {
			CK(cudaSetDevice(d));
			spin_ns<<<sms * 4, 256, 0, s[d]>>>(20000000LL);
		}
		for (int d = 0; d < 2; d++)
			CK(cudaStreamSynchronize(s[d]));
		struct timeval tv = {0, 0};
		fd_set f;
		FD_ZERO(&f);
		FD_SET(done, &f);
		if (select(done + 1, &f, NULL, NULL, &tv) > 0)
			break;
	}
	_exit(0);
}

static void kinds_round(const char *state, void *g0a, void *g0b, void *g1a, void *g1b, void *host,
			cudaStream_t s)
{
	// Every copy from a GPU0 context: what it writes, what it reads.
	const struct {
		const char *what;
		void *dst;
		const void *src;
		int iters;
	} kind[] = {
		{ "gpu0->gpu1", g1a, g0a, 200 }, { "gpu0->gpu0", g0b, g0a, 50 },
		{ "gpu1->gpu0", g0b, g1a, 50 },  { "gpu1->gpu1", g1b, g1a, 50 },
		{ "host->gpu0", g0a, host, 50 }, { "host->gpu1", g1a, host, 50 },
		{ "gpu0->host", host, g0a, 50 },
	};
	char l[96];
	for (use_batch_hint = 0; use_batch_hint < 2; use_batch_hint++)
		for (size_t n = 8; n <= (4u << 20); n *= 512)
			for (size_t k = 0; k < sizeof(kind) / sizeof(kind[0]); k++) {
				snprintf(l, sizeof(l), "%s %s %s", state,
					 use_batch_hint ? "hint" : "plain", kind[k].what);
				time_copies(l, kind[k].dst, kind[k].src, n, kind[k].iters, s);
			}
	use_batch_hint = 0;
}

// kinds-sizes: host copies by size while another process's kernels fill
// both GPUs: where a host-to-GPU copy stops waiting for the other
// context's time slice (kinds found 8 B and 4 KiB wait, 2 MiB does not).
static void sizes_round(const char *state, void *g0a, void *host, cudaStream_t s)
{
	char l[96];
	for (size_t n = 4096; n <= (4u << 20); n *= 2) {
		snprintf(l, sizeof(l), "%s host->gpu0", state);
		time_copies(l, g0a, host, n, 30, s);
		snprintf(l, sizeof(l), "%s gpu0->host", state);
		time_copies(l, host, g0a, n, 30, s);
	}
}

static void small_round(const char *state, void *g0a, void *host, cudaStream_t s)
{
	static const char *const shape[] = { "plain", "2d-1row", "2d-2rows", "2d-256B-rows",
					     "2d-1B-rows" };
	char l[96];
	for (copy_shape = 0; copy_shape < 5; copy_shape++)
		for (size_t n = 512; n <= 16384; n *= 2) {
			snprintf(l, sizeof(l), "%s %s host->gpu0", state, shape[copy_shape]);
			time_copies(l, g0a, host, n, 20, s);
		}
	copy_shape = 0;
}

static int kinds(int by_size)
{
	int go[2], done[2];
	if (pipe(go) || pipe(done))
		return 1;
	pid_t pid = fork();
	if (pid == 0)
		busy_both(go[0], done[0]);
	size_t n = 4u << 20;
	void *g0a, *g0b, *g1a, *g1b, *host;
	CK(cudaSetDevice(1));
	CK(cudaMalloc(&g1a, n));
	CK(cudaMalloc(&g1b, n));
	CK(cudaSetDevice(0));
	CK(cudaDeviceEnablePeerAccess(1, 0));
	CK(cudaMalloc(&g0a, n));
	CK(cudaMalloc(&g0b, n));
	CK(cudaMallocHost(&host, n));
	memset(host, 0x33, n);
	CK(cudaMemset(g0a, 0x11, n));
	cudaStream_t s;
	CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
	CK(cudaDeviceSynchronize());
	for (int busy = 0; busy < 2; busy++) {
		const char *state = busy ? "busy" : "idle";
		if (busy) {
			if (write(go[1], "g", 1) != 1)
				return 1;
			usleep(200000);
		}
		if (by_size == 2)
			small_round(state, g0a, host, s);
		else if (by_size)
			sizes_round(state, g0a, host, s);
		else
			kinds_round(state, g0a, g0b, g1a, g1b, host, s);
	}
	if (write(done[1], "d", 1) != 1)
		return 1;
	int st;
	waitpid(pid, &st, 0);
	return 0;
}


// bidir: one thread per copying GPU, like one copy helper per rank.
#define BIDIR_BYTES (1ull << 30)
struct dir_job {
	int dev;			// the GPU whose copy engine copies
	char *dst, *src;
	size_t piece;
	int nstreams;
	cudaStream_t st[4];
	pthread_barrier_t *bar;
	double us;			// wall time of this direction
};

static void *dir_main(void *arg)
{
	struct dir_job *j = (struct dir_job *)arg;
	CK(cudaSetDevice(j->dev));
	pthread_barrier_wait(j->bar);
	double t0 = now_us();
	size_t k = 0;
	for (size_t off = 0; off < BIDIR_BYTES; off += j->piece, k++)
		CK(cudaMemcpyAsync(j->dst + off, j->src + off, j->piece, cudaMemcpyDefault,
				   j->st[k % j->nstreams]));
	for (int i = 0; i < j->nstreams; i++)
		CK(cudaStreamSynchronize(j->st[i]));
	j->us = now_us() - t0;
	return NULL;
}

// ways: 1 = GPU0 -> GPU1 only, 2 = both at once.  pull: the destination
// GPU's engine copies instead of the source's.
static void bidir_case(char *buf[2][2], cudaStream_t st[2][4], int ways, int pull, size_t piece,
		       int nstreams)
{
	double best[2] = {1e30, 1e30}, wall_best = 1e30;
	for (int rep = 0; rep < 6; rep++) {
		pthread_barrier_t bar;
		struct dir_job j[2];
		pthread_t t[2];
		pthread_barrier_init(&bar, NULL, ways + 1);
		for (int d = 0; d < ways; d++) {
			int from = d, to = 1 - d;	// direction d: GPU d -> GPU 1-d
			j[d].dev = pull ? to : from;
			j[d].src = buf[from][0];
			j[d].dst = buf[to][1];
			j[d].piece = piece;
			j[d].nstreams = nstreams;
			memcpy(j[d].st, st[j[d].dev], sizeof(j[d].st));
			j[d].bar = &bar;
			pthread_create(&t[d], NULL, dir_main, &j[d]);
		}
		double t0 = now_us();
		pthread_barrier_wait(&bar);
		for (int d = 0; d < ways; d++)
			pthread_join(t[d], NULL);
		double wall = now_us() - t0;
		pthread_barrier_destroy(&bar);
		if (rep == 0)
			continue;	// first round warms the mappings
		for (int d = 0; d < ways; d++)
			if (j[d].us < best[d])
				best[d] = j[d].us;
		if (wall < wall_best)
			wall_best = wall;
	}
	printf("bidir %-8s %-4s piece %10zu B  streams %d:  GPU0->GPU1 %6.1f GB/s", ways == 2 ? "two-way" : "one-way",
	       pull ? "pull" : "push", piece, nstreams, BIDIR_BYTES / best[0] / 1e3);
	if (ways == 2)
		printf("  GPU1->GPU0 %6.1f GB/s  sum %6.1f GB/s", BIDIR_BYTES / best[1] / 1e3,
		       2.0 * BIDIR_BYTES / wall_best / 1e3);
	printf("\n");
	fflush(stdout);
}

// KiB from environment variable `name` (0 when unset) as bytes: a whole
// number from 0 to 1 GiB, or the probe stops saying so.
static size_t env_kib(const char *name)
{
	const char *e = getenv(name);
	char *end;
	long long v;

	if (!e)
		return 0;
	v = strtoll(e, &end, 10);
	if (end == e || *end || v < 0 || v > (1ll << 20)) {
		fprintf(stderr, "%s=%s: give a whole number of KiB from 0 to 1048576\n", name, e);
		exit(2);
	}
	return (size_t)v << 10;
}

// BIDIR_EXTRA_KiB=N: each buffer is allocated N KiB larger than the 1 GiB
// it carries, and only whole and 16 MiB one-stream copies run.  Answers
// whether cudaMalloc memory of a size that is not a multiple of 64 KiB
// copies slowly between GPUs of one process too, without IPC (through the
// plugin it was measured slow only through legacy IPC mappings).
static int bidir(void)
{
	char *buf[2][2];
	cudaStream_t st[2][4];
	const char *e = getenv("BIDIR_EXTRA_KiB");
	size_t extra = env_kib("BIDIR_EXTRA_KiB");
	for (int g = 0; g < 2; g++) {
		CK(cudaSetDevice(g));
		CK(cudaDeviceEnablePeerAccess(1 - g, 0));
		for (int b = 0; b < 2; b++) {
			CK(cudaMalloc(&buf[g][b], BIDIR_BYTES + extra));
			CK(cudaMemset(buf[g][b], 0x21 + g + b, BIDIR_BYTES + extra));
		}
		for (int i = 0; i < 4; i++)
			CK(cudaStreamCreateWithFlags(&st[g][i], cudaStreamNonBlocking));
		CK(cudaDeviceSynchronize());
	}
	if (e) {
		printf("bidir: cudaMalloc of 1 GiB + %zu KiB, peer access in one process\n", extra >> 10);
		for (int ways = 1; ways <= 2; ways++) {
			bidir_case(buf, st, ways, 0, BIDIR_BYTES, 1);
			bidir_case(buf, st, ways, 0, 16ull << 20, 1);
		}
		return 0;
	}
	const size_t pieces[] = { 1ull << 30, 512ull << 20, 64ull << 20, 16ull << 20, 4ull << 20, 2ull << 20 };
	for (int ways = 1; ways <= 2; ways++)
		for (int pull = 0; pull < 2; pull++)
			for (size_t p = 0; p < sizeof(pieces) / sizeof(pieces[0]); p++)
				for (int ns = 1; ns <= 4; ns *= 2) {
					if (pieces[p] == BIDIR_BYTES && ns > 1)
						continue;
					bidir_case(buf, st, ways, pull, pieces[p], ns);
				}
	return 0;
}

#define MULTI_BYTES (768ull << 20)	// what each GPU sends per round
static const char *multi_mem = "malloc";	// for the output lines
#define MULTI_MAX 8

struct multi_job {
	int dev, ndst, serial;
	int dst[MULTI_MAX];
	char *src, *dstbuf[MULTI_MAX];	// dstbuf[k]: where this GPU's bytes land on dst[k]
	size_t per_peer, piece;
	cudaStream_t st[MULTI_MAX];
	pthread_barrier_t *bar;
	double us;
};

static void *multi_main(void *arg)
{
	struct multi_job *j = (struct multi_job *)arg;
	CK(cudaSetDevice(j->dev));
	pthread_barrier_wait(j->bar);
	double t0 = now_us();
	if (j->serial == 2) {
		// Every piece once, destinations in an order of this GPU's own, on
		// two streams: GPUs that do not coordinate, like independent ranks.
		size_t per = j->per_peer / j->piece, total = per * j->ndst;
		size_t *order = (size_t *)malloc(total * sizeof(size_t));
		unsigned seed = 12345u + 977u * (unsigned)j->dev;
		for (size_t i = 0; i < total; i++)
			order[i] = i;
		for (size_t i = total - 1; i > 0; i--) {
			size_t r = (size_t)rand_r(&seed) % (i + 1), t = order[i];
			order[i] = order[r];
			order[r] = t;
		}
		for (size_t i = 0; i < total; i++) {
			size_t k = order[i] / per, off = order[i] % per * j->piece;
			CK(cudaMemcpyAsync(j->dstbuf[k] + off, j->src + k * j->per_peer + off, j->piece,
					   cudaMemcpyDefault, j->st[i % 2]));
		}
		free(order);
	} else if (j->serial) {
		for (int k = 0; k < j->ndst; k++)
			for (size_t off = 0; off < j->per_peer; off += j->piece)
				CK(cudaMemcpyAsync(j->dstbuf[k] + off, j->src + k * j->per_peer + off,
						   j->piece, cudaMemcpyDefault, j->st[0]));
	} else {
		// Interleaved, one stream per peer: every peer's copies progress together.
		for (size_t off = 0; off < j->per_peer; off += j->piece)
			for (int k = 0; k < j->ndst; k++)
				CK(cudaMemcpyAsync(j->dstbuf[k] + off, j->src + k * j->per_peer + off,
						   j->piece, cudaMemcpyDefault, j->st[k]));
	}
	int used = j->serial == 2 ? 2 : j->serial ? 1 : j->ndst;
	for (int k = 0; k < used; k++)
		CK(cudaStreamSynchronize(j->st[k]));
	j->us = now_us() - t0;
	return NULL;
}

// pattern: 0 ring, 1 both neighbours, 2 all peers at once, 3 all peers in turn,
// 4 all peers in an order of each GPU's own (uncoordinated, two streams).
static void multi_case(int n, char *src[], char *dst[], cudaStream_t st[][MULTI_MAX], int pattern,
		       size_t piece)
{
	static const char *names[] = { "ring", "neighbours", "a2a", "a2a-serial", "a2a-random" };
	double best = 1e30, best_sum = 0;
	size_t sent = 0;
	for (int rep = 0; rep < 5; rep++) {
		struct multi_job j[MULTI_MAX];
		pthread_t t[MULTI_MAX];
		pthread_barrier_t bar;
		pthread_barrier_init(&bar, NULL, n);
		for (int g = 0; g < n; g++) {
			struct multi_job *m = &j[g];
			memset(m, 0, sizeof(*m));
			m->dev = g;
			m->serial = pattern == 3 ? 1 : pattern == 4 ? 2 : 0;
			if (pattern == 0) {
				m->dst[m->ndst++] = (g + 1) % n;
			} else if (pattern == 1) {
				m->dst[m->ndst++] = (g + 1) % n;
				m->dst[m->ndst++] = (g + n - 1) % n;
			} else {
				for (int k = 1; k < n; k++)
					m->dst[m->ndst++] = (g + k) % n;
			}
			m->per_peer = MULTI_BYTES / m->ndst;
			m->piece = piece < m->per_peer ? piece : m->per_peer;
			m->per_peer = m->per_peer / m->piece * m->piece;
			m->src = src[g];
			for (int k = 0; k < m->ndst; k++) {
				// The receiver keeps one slot per sender: slot = sender's distance.
				int slot = (g - m->dst[k] + n) % n - 1;
				m->dstbuf[k] = dst[m->dst[k]] + (size_t)slot * m->per_peer;
				m->st[k] = st[g][k];
			}
			m->bar = &bar;
			pthread_create(&t[g], NULL, multi_main, m);
		}
		double slowest = 0, sum = 0;
		for (int g = 0; g < n; g++) {
			pthread_join(t[g], NULL);
			double gbs = j[g].per_peer * j[g].ndst / j[g].us / 1e3;
			if (j[g].us > slowest)
				slowest = j[g].us;
			sum += gbs;
		}
		pthread_barrier_destroy(&bar);
		sent = j[0].per_peer * j[0].ndst;
		if (rep > 0 && slowest < best) {	// first round warms the mappings
			best = slowest;
			best_sum = sum;
		}
	}
	printf("multi %d GPUs %-6s %-10s piece %10zu B: slowest GPU %6.1f GB/s out, all GPUs %7.1f GB/s\n",
	       n, multi_mem, names[pattern], piece, sent / best / 1e3, best_sum);
	fflush(stdout);
}

// Such memory, mapped read-write for every GPU.
static char *cumem_alloc(int dev, int n, size_t size)
{
	CUmemAllocationProp prop;
	size_t gran = probe_cumem_prop(dev, &prop);
	size = (size + gran - 1) / gran * gran;
	CUmemGenericAllocationHandle h;
	CUdeviceptr va;
	CUCK(cuMemCreate(&h, size, &prop, 0));
	CUCK(cuMemAddressReserve(&va, size, gran, 0, 0));
	CUCK(cuMemMap(va, size, 0, h, 0));
	grant_gpus(va, size, n);
	CUCK(cuMemRelease(h));	// the mapping keeps it; the probe exits without unmapping
	return (char *)va;
}

static int multi(int use_cumem)
{
	int n;
	CK(cudaGetDeviceCount(&n));
	if (n < 2 || n > MULTI_MAX) {
		fprintf(stderr, "multi needs 2..%d GPUs, found %d\n", MULTI_MAX, n);
		return 2;
	}
	char *src[MULTI_MAX], *dst[MULTI_MAX];
	cudaStream_t st[MULTI_MAX][MULTI_MAX];
	for (int g = 0; g < n; g++) {
		CK(cudaSetDevice(g));
		for (int p = 0; p < n; p++)
			if (p != g)
				CK(cudaDeviceEnablePeerAccess(p, 0));
		// One receive slot per sender, each as large as the most one sender sends.
		if (use_cumem) {
			src[g] = cumem_alloc(g, n, MULTI_BYTES);
			dst[g] = cumem_alloc(g, n, (size_t)(n - 1) * MULTI_BYTES);
		} else {
			CK(cudaMalloc(&src[g], MULTI_BYTES));
			CK(cudaMalloc(&dst[g], (size_t)(n - 1) * MULTI_BYTES));
		}
		CK(cudaMemset(src[g], 0x31 + g, MULTI_BYTES));
		for (int k = 0; k < MULTI_MAX; k++)
			CK(cudaStreamCreateWithFlags(&st[g][k], cudaStreamNonBlocking));
		CK(cudaDeviceSynchronize());
	}
	const size_t pieces[] = { 2ull << 20, 16ull << 20, MULTI_BYTES };
	for (int pattern = 0; pattern < 5; pattern++) {
		if (pattern == 1 && n < 3)
			continue;
		for (size_t p = 0; p < sizeof(pieces) / sizeof(pieces[0]); p++)
			multi_case(n, src, dst, st, pattern, pieces[p]);
	}
	return 0;
}

// ---- multi-proc: one process per GPU, peers' memory imported from fds ----

struct mp_shared {
	int arrive, gen;
	double us[MULTI_MAX];
};

static void mp_barrier(struct mp_shared *s, int n)
{
	int gen = __atomic_load_n(&s->gen, __ATOMIC_ACQUIRE);
	if (__atomic_add_fetch(&s->arrive, 1, __ATOMIC_ACQ_REL) == n) {
		__atomic_store_n(&s->arrive, 0, __ATOMIC_RELAXED);
		__atomic_store_n(&s->gen, gen + 1, __ATOMIC_RELEASE);
	} else {
		while (__atomic_load_n(&s->gen, __ATOMIC_ACQUIRE) == gen)
			;
	}
}

static void send_fd(int sock, int fd)
{
	char byte = 0, ctl[CMSG_SPACE(sizeof(int))];
	struct iovec iov = { &byte, 1 };
	struct msghdr m;
	memset(&m, 0, sizeof(m));
	memset(ctl, 0, sizeof(ctl));
	m.msg_iov = &iov;
	m.msg_iovlen = 1;
	m.msg_control = ctl;
	m.msg_controllen = sizeof(ctl);
	struct cmsghdr *c = CMSG_FIRSTHDR(&m);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(c), &fd, sizeof(int));
	if (sendmsg(sock, &m, 0) != 1) {
		perror("sendmsg");
		exit(2);
	}
}

static int recv_fd(int sock)
{
	char byte, ctl[CMSG_SPACE(sizeof(int))];
	struct iovec iov = { &byte, 1 };
	struct msghdr m;
	int fd = -1;
	memset(&m, 0, sizeof(m));
	m.msg_iov = &iov;
	m.msg_iovlen = 1;
	m.msg_control = ctl;
	m.msg_controllen = sizeof(ctl);
	if (recvmsg(sock, &m, 0) != 1) {
		perror("recvmsg");
		exit(2);
	}
	struct cmsghdr *c = CMSG_FIRSTHDR(&m);
	if (!c || c->cmsg_type != SCM_RIGHTS) {
		fprintf(stderr, "no descriptor received\n");
		exit(2);
	}
	memcpy(&fd, CMSG_DATA(c), sizeof(int));
	return fd;
}

static CUdeviceptr mp_map(CUmemGenericAllocationHandle h, size_t size, size_t gran, int dev)
{
	CUdeviceptr va;
	CUmemAccessDesc acc;
	CUCK(cuMemAddressReserve(&va, size, gran, 0, 0));
	CUCK(cuMemMap(va, size, 0, h, 0));
	acc.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	acc.location.id = dev;
	acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
	CUCK(cuMemSetAccess(va, size, &acc, 1));
	return va;
}

// Maps `bytes` of GPU `owner`'s cuMem export `fd` (consumed) for GPU dev,
// or for GPUs 0 and 1 with `both`.
static char *import_fd(int fd, int owner, int dev, size_t bytes, int both)
{
	CUmemAllocationProp prop;
	CUmemGenericAllocationHandle h;
	size_t gran = probe_cumem_prop(owner, &prop);
	size_t size = (bytes + gran - 1) / gran * gran;

	CUCK(cuMemImportFromShareableHandle(&h, (void *)(uintptr_t)fd,
					    CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR));
	close(fd);
	CUdeviceptr va = mp_map(h, size, gran, dev);
	if (both)
		grant_gpus(va, size, 2);
	return (char *)va;
}

// Child g: export its receive buffer, import every peer's, then time the
// patterns against the others (barriers in shared memory).
static void mp_child(struct mp_shared *s, int sock, int n, int g)
{
	CUdevice dev;
	CUcontext ctx;
	CUCK(cuInit(0));
	CUCK(cuDeviceGet(&dev, g));
	CUCK(cuDevicePrimaryCtxRetain(&ctx, dev));
	CUCK(cuCtxSetCurrent(ctx));
	CUmemAllocationProp prop;
	size_t gran = probe_cumem_prop(g, &prop);
	size_t dsize = ((size_t)(n - 1) * MULTI_BYTES + gran - 1) / gran * gran;
	CUmemGenericAllocationHandle hs, hd;
	CUCK(cuMemCreate(&hs, MULTI_BYTES, &prop, 0));
	CUCK(cuMemCreate(&hd, dsize, &prop, 0));
	char *src = (char *)mp_map(hs, MULTI_BYTES, gran, g);
	CUCK(cuMemsetD8((CUdeviceptr)src, 0x31 + g, MULTI_BYTES));
	(void)mp_map(hd, dsize, gran, g);
	int fd;
	CUCK(cuMemExportToShareableHandle(&fd, hd, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
	send_fd(sock, fd);
	char *peer[MULTI_MAX] = { 0 };
	for (int p = 0; p < n; p++) {
		int pfd = recv_fd(sock);
		if (p == g) {
			close(pfd);
			continue;
		}
		peer[p] = import_fd(pfd, p, g, dsize, 0);
	}
	cudaStream_t st[MULTI_MAX];
	for (int k = 0; k < MULTI_MAX; k++)
		CK(cudaStreamCreateWithFlags(&st[k], cudaStreamNonBlocking));
	CUCK(cuCtxSynchronize());
	const size_t pieces[] = { 2ull << 20, 16ull << 20 };
	static const char *names[] = { "ring", "neighbours", "a2a", "a2a-serial", "a2a-random" };
	for (int pattern = 0; pattern < 5; pattern++) {
		if (pattern == 1)
			continue;
		for (size_t pi = 0; pi < 2; pi++) {
			struct multi_job j;
			memset(&j, 0, sizeof(j));
			j.dev = g;
			j.serial = pattern == 3 ? 1 : pattern == 4 ? 2 : 0;
			if (pattern == 0)
				j.dst[j.ndst++] = (g + 1) % n;
			else
				for (int k = 1; k < n; k++)
					j.dst[j.ndst++] = (g + k) % n;
			j.per_peer = MULTI_BYTES / j.ndst;
			j.piece = pieces[pi] < j.per_peer ? pieces[pi] : j.per_peer;
			j.per_peer = j.per_peer / j.piece * j.piece;
			j.src = src;
			for (int k = 0; k < j.ndst; k++) {
				int slot = (g - j.dst[k] + n) % n - 1;
				j.dstbuf[k] = peer[j.dst[k]] + (size_t)slot * j.per_peer;
				j.st[k] = st[k];
			}
			double best = 1e30;
			for (int rep = 0; rep < 5; rep++) {
				pthread_barrier_t one;
				pthread_barrier_init(&one, NULL, 1);
				j.bar = &one;
				mp_barrier(s, n);
				multi_main(&j);
				s->us[g] = j.us;
				mp_barrier(s, n);
				double slowest = 0;
				for (int q = 0; q < n; q++)
					if (s->us[q] > slowest)
						slowest = s->us[q];
				if (rep > 0 && slowest < best)
					best = slowest;
				pthread_barrier_destroy(&one);
				mp_barrier(s, n);
			}
			if (g == 0) {
				printf("multi %d GPUs procs  %-10s piece %10zu B: slowest GPU %6.1f GB/s out\n", n,
				       names[pattern], j.piece, j.per_peer * j.ndst / best / 1e3);
				fflush(stdout);
			}
		}
	}
	mp_barrier(s, n);	// peers keep their memory until everyone is done
	exit(0);
}

static int multi_proc(void)
{
	int n = 0;
	// The count comes from the environment: CUDA must not start before fork.
	const char *vis = getenv("MULTI_GPUS");
	n = vis ? atoi(vis) : 4;
	if (n < 2 || n > MULTI_MAX)
		return 2;
	struct mp_shared *s = (struct mp_shared *)mmap(NULL, sizeof(*s), PROT_READ | PROT_WRITE,
						       MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	int sv[MULTI_MAX][2];
	pid_t pid[MULTI_MAX];
	memset(s, 0, sizeof(*s));
	for (int g = 0; g < n; g++) {
		if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv[g]) != 0)
			return 2;
		pid[g] = fork();
		if (pid[g] == 0) {
			close(sv[g][0]);
			mp_child(s, sv[g][1], n, g);
		}
		close(sv[g][1]);
	}
	int fds[MULTI_MAX];
	for (int g = 0; g < n; g++)
		fds[g] = recv_fd(sv[g][0]);
	for (int g = 0; g < n; g++)
		for (int p = 0; p < n; p++)
			send_fd(sv[g][0], fds[p]);
	int bad = 0;
	for (int g = 0; g < n; g++) {
		int st;
		waitpid(pid[g], &st, 0);
		bad |= !WIFEXITED(st) || WEXITSTATUS(st);
	}
	return bad ? 2 : 0;
}

struct copier {
	volatile int stop;
	double max_call_us;
	int calls;
};

static void *copier_main(void *arg)
{
	struct copier *c = (struct copier *)arg;
	CK(cudaSetDevice(0));
	cudaStream_t s;
	CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
	void *a, *b;
	CK(cudaMalloc(&a, 64));
	CK(cudaMalloc(&b, 64));
	while (!c->stop) {
		double t0 = now_us();
		CK(cudaMemcpyAsync(b, a, 8, cudaMemcpyDeviceToDevice, s));
		double dt = now_us() - t0;
		if (dt > c->max_call_us)
			c->max_call_us = dt;
		c->calls++;
		usleep(1000);
	}
	return NULL;
}

struct releaser {
	volatile int *flag;
	int after_ms;
};

static void *releaser_main(void *arg)
{
	struct releaser *r = (struct releaser *)arg;
	usleep(r->after_ms * 1000);
	*r->flag = 1;
	__sync_synchronize();
	return NULL;
}

static int graph(int with_host_node, int launches)
{
	CK(cudaSetDevice(0));
	int *flag_h, *flag_d;
	CK(cudaHostAlloc(&flag_h, sizeof(int), cudaHostAllocMapped));
	*flag_h = 0;
	CK(cudaHostGetDevicePointer(&flag_d, flag_h, 0));
	cudaStream_t s;
	CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
	cudaGraph_t g;
	cudaGraphExec_t ge;
	CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
	wait_flag<<<1, 32, 0, s>>>(flag_d);
	if (with_host_node)
		CK(cudaLaunchHostFunc(s, host_node, NULL));
	CK(cudaStreamEndCapture(s, &g));
	CK(cudaGraphInstantiate(&ge, g, 0));

	struct copier cp = {0, 0, 0};
	pthread_t ct, rt;
	pthread_create(&ct, NULL, copier_main, &cp);
	usleep(100000);
	struct releaser rel = {flag_h, 2000};
	pthread_create(&rt, NULL, releaser_main, &rel);
	double t0 = now_us(), worst = 0;
	int worst_i = -1;
	for (int i = 0; i < launches; i++) {
		double a = now_us();
		CK(cudaGraphLaunch(ge, s));
		double d = now_us() - a;
		if (d > worst) {
			worst = d;
			worst_i = i;
		}
	}
	double launched = now_us() - t0;
	CK(cudaStreamSynchronize(s));
	cp.stop = 1;
	pthread_join(ct, NULL);
	pthread_join(rt, NULL);
	printf("graph host_node=%d launches=%d: all launched after %.0f us (flag released at 2000000 us), "
	       "slowest launch #%d %.0f us; copier: %d calls, slowest %.0f us\n",
	       with_host_node, launches, launched, worst_i, worst, cp.calls, cp.max_call_us);
	fflush(stdout);
	return 0;
}

// ---- ipc: legacy CUDA IPC against cuMem fds, as the copy helper maps them ----

#define IPC_BYTES (256ull << 20)

struct ipc_export {
	cudaIpcMemHandle_t legacy;
};

// Owner of GPU g: a cudaMalloc buffer (legacy handle over the pipe) and a
// cuMem one (fd over the socket; left unwritten: only timed); waits until
// told to go.
static void ipc_owner(int g, int sock, int out, int done)
{
	struct ipc_export e;
	void *legacy;
	CUmemAllocationProp prop;
	CUmemGenericAllocationHandle h;
	int fd;
	char c;

	CK(cudaSetDevice(g));
	CK(cudaMalloc(&legacy, IPC_BYTES));
	CK(cudaMemset(legacy, 0x21 + g, IPC_BYTES));
	CK(cudaIpcGetMemHandle(&e.legacy, legacy));
	size_t gran = probe_cumem_prop(g, &prop);
	size_t size = (IPC_BYTES + gran - 1) / gran * gran;
	CUCK(cuMemCreate(&h, size, &prop, 0));
	CUCK(cuMemExportToShareableHandle(&fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
	CK(cudaDeviceSynchronize());
	if (write(out, &e, sizeof(e)) != sizeof(e))
		_exit(1);
	send_fd(sock, fd);
	if (read(done, &c, 1) != 1)
		_exit(1);
	_exit(0);
}

// Forks the owners of GPU 0 and GPU 1 (owner(g, fd socket, export pipe,
// done pipe)); they live until done[1] is written.  Before any CUDA call
// of this process, so the children start clean.
static int fork_owners(void (*owner)(int, int, int, int), int sock[2][2], int pipes[2][2],
		       int done[2], pid_t pid[2])
{
	if (pipe(done))
		return -1;
	for (int g = 0; g < 2; g++) {
		if (socketpair(AF_UNIX, SOCK_STREAM, 0, sock[g]) || pipe(pipes[g]))
			return -1;
		pid[g] = fork();
		if (pid[g] < 0)
			return -1;
		if (pid[g] == 0) {
			// Gone with the parent, and end of file on done[0] when it
			// stops, however it stops.
			prctl(PR_SET_PDEATHSIG, SIGKILL);
			close(done[1]);
			CUCK(cuInit(0));
			owner(g, sock[g][1], pipes[g][1], done[0]);
		}
	}
	return 0;
}

static int ipc(void)
{
	int sock[2][2], pipes[2][2], done[2];
	pid_t pid[2];

	if (fork_owners(ipc_owner, sock, pipes, done, pid))
		return 1;
	struct ipc_export e[2];
	for (int g = 0; g < 2; g++)
		if (read(pipes[g][0], &e[g], sizeof(e[g])) != sizeof(e[g]))
			return 1;
	CK(cudaSetDevice(1));
	CK(cudaDeviceEnablePeerAccess(0, 0));
	void *own1;
	CK(cudaMalloc(&own1, IPC_BYTES));
	CK(cudaSetDevice(0));
	CK(cudaDeviceEnablePeerAccess(1, 0));
	void *own0, *leg[2];
	char *fdm[2];
	CK(cudaMalloc(&own0, IPC_BYTES));
	CK(cudaMemset(own0, 0x5a, IPC_BYTES));
	for (int g = 0; g < 2; g++) {
		CK(cudaIpcOpenMemHandle(&leg[g], e[g].legacy, cudaIpcMemLazyEnablePeerAccess));
		fdm[g] = import_fd(recv_fd(sock[g][0]), g, 0, IPC_BYTES, 1);
	}
	// Which GPU the driver says each mapping lives on (the helper's phases
	// need the destination GPU of every copy).
	const char *names[6] = { "own GPU0", "own GPU1", "legacy GPU0", "legacy GPU1", "cumem GPU0",
				 "cumem GPU1" };
	void *ptrs[6] = { own0, own1, leg[0], leg[1], fdm[0], fdm[1] };
	for (int i = 0; i < 6; i++) {
		int ordinal = -9;
		CUresult r = cuPointerGetAttribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
						   (CUdeviceptr)ptrs[i]);
		printf("%-12s CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL: rc %d, ordinal %d\n", names[i], (int)r,
		       ordinal);
	}
	cudaStream_t s;
	CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
	for (int round = 0; round < 2; round++) {
		time_copies("own -> own", own1, own0, IPC_BYTES, 20, s);
		time_copies("legacy -> legacy", leg[1], leg[0], IPC_BYTES, 20, s);
		time_copies("own -> legacy", leg[1], own0, IPC_BYTES, 20, s);
		time_copies("legacy -> own", own1, leg[0], IPC_BYTES, 20, s);
		time_copies("cumem -> cumem", fdm[1], fdm[0], IPC_BYTES, 20, s);
		time_copies("legacy -> cumem", fdm[1], leg[0], IPC_BYTES, 20, s);
		time_copies("cumem -> legacy", leg[1], fdm[0], IPC_BYTES, 20, s);
		time_copies("legacy -> legacy 16M", leg[1], leg[0], 16u << 20, 100, s);
		time_copies("cumem -> cumem 16M", fdm[1], fdm[0], 16u << 20, 100, s);
	}
	if (write(done[1], "dd", 2) != 2)
		return 1;
	for (int g = 0; g < 2; g++)
		waitpid(pid[g], NULL, 0);
	return 0;
}

// ---- ipc-bidir: one copy helper per GPU, both directions at once ----

#define BI_BYTES (1ull << 30)

// BIPC_EXTRA_KiB=N: the cudaMalloc buffers are N KiB larger than the 1 GiB
// they carry (through the plugin, sizes that are not a multiple of 64 KiB
// copy slowly; this asks whether the plain probe sees it too).
static size_t bi_extra(void)
{
	return env_kib("BIPC_EXTRA_KiB");
}

struct bi_export {
	cudaIpcMemHandle_t legacy[2];	// source, destination
};

// Owner of GPU g: source and destination, cudaMalloc (filled) and cuMem
// (left unwritten: only timed).
static void bi_owner(int g, int sock, int out, int done)
{
	struct bi_export e;
	CUmemAllocationProp prop;
	size_t gran;
	char c;

	CK(cudaSetDevice(g));
	gran = probe_cumem_prop(g, &prop);
	for (int k = 0; k < 2; k++) {
		void *p;
		CUmemGenericAllocationHandle h;
		int fd;

		CK(cudaMalloc(&p, BI_BYTES + bi_extra()));
		CK(cudaMemset(p, 0x31 + g, BI_BYTES));
		CK(cudaIpcGetMemHandle(&e.legacy[k], p));
		CUCK(cuMemCreate(&h, (BI_BYTES + gran - 1) / gran * gran, &prop, 0));
		CUCK(cuMemExportToShareableHandle(&fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
		send_fd(sock, fd);
		close(fd);
	}
	CK(cudaDeviceSynchronize());
	if (write(out, &e, sizeof(e)) != sizeof(e))
		_exit(1);
	if (read(done, &c, 1) != 1)
		_exit(1);
	_exit(0);
}

// Helper of GPU g: its owner's source and the peer's destination, both
// kinds; on each command ('l'/'c' pieces, 'L'/'C' whole) one timed pass
// over 1 GiB, the GB/s written back.
static void bi_helper(int g, struct bi_export *e, int src_fd, int dst_fd, int cmd, int res)
{
	void *leg_src, *leg_dst;
	char *cm_src, *cm_dst, c;
	cudaStream_t s;

	CK(cudaSetDevice(g));
	CK(cudaIpcOpenMemHandle(&leg_src, e[g].legacy[0], cudaIpcMemLazyEnablePeerAccess));
	CK(cudaIpcOpenMemHandle(&leg_dst, e[1 - g].legacy[1], cudaIpcMemLazyEnablePeerAccess));
	cm_src = import_fd(src_fd, g, g, BI_BYTES, 0);
	cm_dst = import_fd(dst_fd, 1 - g, g, BI_BYTES, 0);
	CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
	while (read(cmd, &c, 1) == 1) {
		char *src = (char *)(c == 'l' || c == 'L' ? leg_src : cm_src);
		char *dst = (char *)(c == 'l' || c == 'L' ? leg_dst : cm_dst);
		size_t piece = c == 'l' || c == 'c' ? 16u << 20 : BI_BYTES;
		double t0 = now_us(), gbs;

		for (size_t off = 0; off < BI_BYTES; off += piece)
			CK(cudaMemcpyAsync(dst + off, src + off, piece, cudaMemcpyDefault, s));
		CK(cudaStreamSynchronize(s));
		gbs = BI_BYTES / (now_us() - t0) / 1e3;
		if (write(res, &gbs, sizeof(gbs)) != sizeof(gbs))
			_exit(1);
	}
	_exit(0);
}

static int ipc_bidir(void)
{
	int sock[2][2], out[2][2], cmd[2][2], res[2][2], done[2], fds[2][2];
	struct bi_export e[2];
	pid_t pid[4];

	if (fork_owners(bi_owner, sock, out, done, pid))
		return 1;
	for (int g = 0; g < 2; g++) {
		fds[g][0] = recv_fd(sock[g][0]);
		fds[g][1] = recv_fd(sock[g][0]);
		if (read(out[g][0], &e[g], sizeof(e[g])) != sizeof(e[g]))
			return 1;
	}
	for (int g = 0; g < 2; g++) {
		if (pipe(cmd[g]) || pipe(res[g]))
			return 1;
		pid[2 + g] = fork();
		if (pid[2 + g] == 0) {
			CUCK(cuInit(0));
			// Only its own command and result ends, so that the
			// parent closing cmd[g][1] ends its loop.
			prctl(PR_SET_PDEATHSIG, SIGKILL);
			for (int k = 0; k <= g; k++) {
				close(cmd[k][1]);
				close(res[k][0]);
			}
			bi_helper(g, e, fds[g][0], fds[1 - g][1], cmd[g][0], res[g][1]);
		}
	}
	const char *kinds = "lcLC";
	printf("ipc-bidir: cudaMalloc buffers of 1 GiB + %zu KiB\n", bi_extra() >> 10);
	for (int round = 0; round < 3; round++) {
		for (int k = 0; k < 4; k++) {
			for (int both = 0; both < 2; both++) {
				double gbs[2] = { 0, 0 };

				for (int g = 0; g <= both; g++)
					if (write(cmd[g][1], &kinds[k], 1) != 1)
						return 1;
				for (int g = 0; g <= both; g++)
					if (read(res[g][0], &gbs[g], sizeof(gbs[g])) != sizeof(gbs[g]))
						return 1;
				printf("%-7s %-6s %-9s GPU0->1 %6.1f GB/s  GPU1->0 %6.1f GB/s\n",
				       k % 2 ? "cumem" : "legacy", k < 2 ? "16 MiB" : "1 GiB",
				       both ? "both ways" : "one way", gbs[0], gbs[1]);
				fflush(stdout);
			}
		}
	}
	for (int g = 0; g < 2; g++)
		close(cmd[g][1]);
	if (write(done[1], "dd", 2) != 2)
		return 1;
	for (int i = 0; i < 4; i++)
		waitpid(pid[i], NULL, 0);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc > 1 && strcmp(argv[1], "xproc") == 0)
		return xproc();
	if (argc > 1 && strcmp(argv[1], "kinds") == 0)
		return kinds(0);
	if (argc > 1 && strcmp(argv[1], "kinds-sizes") == 0)
		return kinds(1);
	if (argc > 1 && strcmp(argv[1], "kinds-small") == 0)
		return kinds(2);
	if (argc > 1 && strcmp(argv[1], "bidir") == 0)
		return bidir();
	if (argc > 1 && strcmp(argv[1], "multi") == 0)
		return multi(0);
	if (argc > 1 && strcmp(argv[1], "multi-proc") == 0)
		return multi_proc();
	if (argc > 1 && strcmp(argv[1], "multi-cumem") == 0) {
		multi_mem = "cumem";
		return multi(1);
	}
	if (argc > 1 && strcmp(argv[1], "ipc") == 0)
		return ipc();
	if (argc > 1 && strcmp(argv[1], "ipc-bidir") == 0)
		return ipc_bidir();
	if (argc > 1 && strcmp(argv[1], "graph") == 0)
		return graph(argc > 2 ? atoi(argv[2]) : 0, argc > 3 ? atoi(argv[3]) : 32);
	fprintf(stderr, "usage: ce_probe xproc | kinds | kinds-sizes | kinds-small | bidir | multi | multi-cumem | multi-proc | ipc | ipc-bidir | graph [host_node] [launches]\n");
	return 2;
}
