// Floor cost of moving bytes with copy engines beside a bf16 GEMM, no NCCL.
// Answers: if a perfect zero-SM copy-engine path moved the same bytes, how
// much would the GEMM slow down and how much of its solo bandwidth would the
// copy keep?
//
// One process drives the first N GPUs.  Each runs G back-to-back d x d bf16
// GEMMs (cuBLAS) on a compute stream and pushes B bytes C times into the next
// GPU's memory (ring; with 2 GPUs both ways at once, as sendrecv) with
// cudaMemcpyAsync on copy streams of its own, in pieces of P bytes.  Phases,
// R rounds each, medians reported: GEMM alone, copies alone, both at once;
// with -k also beside K resident CTAs per GPU that spin on a host flag (NCCL's
// few CTAs that stay while copy engines move the data).  Times come from
// events on each GPU, measured from a start event that all its streams wait
// on; the slowest GPU counts.  A gate kernel holds every GPU's start until
// work is queued on all of them, so that the GPUs start together.
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static void fail(void);
#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { \
	fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); fail(); } } while (0)
#define CB(x) do { cublasStatus_t s_ = (x); if (s_ != CUBLAS_STATUS_SUCCESS) { \
	fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cublasGetStatusString(s_)); fail(); } } while (0)

#define MAX_GPUS 16
#define MAX_STREAMS 8
#define DEADLINE_S 60.0			// longest wait for any GPU work before giving up
#define GATE_NS 10000000000ull		// a gate opens by itself (and says so) after 10 s
#define WINDOW 32			// copy pieces per GPU queued behind the gate
#define MAX_ROUNDS 99

static struct {
	int n, d, g, s, c, k, r;
	size_t b, p;
} O = { 0, 8192, 20, 1, 10, 0, 3, 1ull << 30, 16ull << 20 };

struct gpu {
	cublasHandle_t blas;
	cudaStream_t comp, spin, cp[MAX_STREAMS];
	cudaEvent_t start, gemm_end, cp_end[MAX_STREAMS], spin_end;
	unsigned short *a, *b, *c;	// bf16
	char *src, *dst;
};
static struct gpu G[MAX_GPUS];

// Host flags mapped into every GPU; with UVA the host address is the device one.
struct flags { int open, late, stop; };
static volatile struct flags *fl;
static volatile int *ready;		// n * K slots: CTA b of GPU g is resident

struct times { double gemm, copy, span; };	// ms, each the slowest GPU's

// Open every gate and stop every resident CTA so that nothing is left spinning.
static void fail(void)
{
	if (fl) {
		fl->open = 1;
		fl->stop = 1;
	}
	__sync_synchronize();
	exit(2);
}

static double now_s(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

static __device__ unsigned long long gtime(void)
{
	unsigned long long t;
	asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
	return t;
}

// Holds a GPU's start until the host has queued the first work everywhere.
// Gives up after a while, so that a host stuck while issuing cannot hang.
__global__ void gate(volatile int *open, volatile int *late, unsigned long long limit_ns)
{
	unsigned long long t0 = gtime();
	while (*open == 0)
		if (gtime() - t0 > limit_ns) {
			*late = 1;
			return;
		}
}

// K of these per GPU stand for NCCL's CTAs that stay resident while copy
// engines move the data: they hold SM slots the GEMM cannot use.  One thread
// polls, as the waiting thread of NCCL's primitives does; the other 511 wait
// at the barrier, which takes no issue slots.
__global__ void resident(volatile int *stop, volatile int *ready)
{
	if (threadIdx.x == 0) {
		ready[blockIdx.x] = 1;
		while (*stop == 0)
			;
	}
	__syncthreads();
}

// Sender g's pattern: byte i = (i*7 + g*13 + 1) & 0xff, never all one value.
__global__ void fill_bytes(unsigned char *p, size_t n, int g)
{
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
		p[i] = (unsigned char)((i * 7 + g * 13 + 1) & 0xff);
}

// bf16 = the top half of a float; k/8 for k in 1..7 is exact in bf16.
__global__ void fill_bf16(unsigned short *p, size_t n, int seed)
{
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
		p[i] = (unsigned short)(__float_as_uint((float)((i * 3 + seed) % 7 + 1) * 0.125f) >> 16);
}

// Every wait has a deadline: the probe exits with an error, never hangs.
static void deadline(double end, int g, const char *what)
{
	if (now_s() > end) {
		fprintf(stderr, "GPU %d: %s not done after %.0f s\n", g, what, DEADLINE_S);
		fail();
	}
	usleep(20);
}

static void wait_ev(cudaEvent_t e, int g, const char *what)
{
	double end = now_s() + DEADLINE_S;
	cudaError_t r;
	while ((r = cudaEventQuery(e)) == cudaErrorNotReady)
		deadline(end, g, what);
	CK(r);
}

static void gemm(int g)
{
	const float one = 1, zero = 0;
	struct gpu *x = &G[g];
	CB(cublasGemmEx(x->blas, CUBLAS_OP_N, CUBLAS_OP_N, O.d, O.d, O.d, &one, x->a, CUDA_R_16BF, O.d,
			x->b, CUDA_R_16BF, O.d, &zero, x->c, CUDA_R_16BF, O.d, CUBLAS_COMPUTE_32F,
			CUBLAS_GEMM_DEFAULT));
}

// Piece i of GPU g's copies (pieces of one copy round are i % per); pushed by
// the sender's copy engine, as the plugin's helper does.
static void issue_copy(int g, size_t i, size_t per, size_t piece)
{
	size_t off = i % per * piece, len = O.b - off < piece ? O.b - off : piece;
	CK(cudaSetDevice(g));
	CK(cudaMemcpyAsync(G[(g + 1) % O.n].dst + off, G[g].src + off, len, cudaMemcpyDeviceToDevice,
			   G[g].cp[i % O.s]));
}

// K resident CTAs on every GPU, on SMs before the GEMM's blocks take them all.
static void start_resident(void)
{
	double end = now_s() + DEADLINE_S;
	fl->stop = 0;
	for (int i = 0; i < O.n * O.k; i++)
		ready[i] = 0;
	__sync_synchronize();
	for (int g = 0; g < O.n; g++) {
		CK(cudaSetDevice(g));
		resident<<<O.k, 512, 0, G[g].spin>>>(&fl->stop, ready + g * O.k);
		CK(cudaGetLastError());
		CK(cudaEventRecord(G[g].spin_end, G[g].spin));
	}
	for (int i = 0; i < O.n * O.k; i++)
		while (!ready[i])
			deadline(end, i / O.k, "starting the resident CTAs");
}

static void stop_resident(void)
{
	fl->stop = 1;
	__sync_synchronize();
	for (int g = 0; g < O.n; g++)
		wait_ev(G[g].spin_end, g, "resident CTAs");
}

// Behind each GPU's gate: its start event, its GEMMs and its first pieces,
// a bounded amount, so that a full launch queue cannot block the host before
// it opens the gates.  The rest after, round-robin over the GPUs, so that
// every copy stream stays fed.
static void queue_round(int do_gemm, int do_copy)
{
	size_t piece = O.p ? O.p : O.b, per = (O.b + piece - 1) / piece;
	size_t total = do_copy ? per * O.c : 0, win = total < WINDOW ? total : WINDOW;
	fl->open = 0;
	fl->late = 0;
	__sync_synchronize();
	for (int g = 0; g < O.n; g++) {
		struct gpu *x = &G[g];
		CK(cudaSetDevice(g));
		gate<<<1, 1, 0, x->comp>>>(&fl->open, &fl->late, GATE_NS);
		CK(cudaGetLastError());
		CK(cudaEventRecord(x->start, x->comp));
		for (int s = 0; s < O.s; s++)
			CK(cudaStreamWaitEvent(x->cp[s], x->start, 0));
		for (int i = 0; do_gemm && i < O.g; i++)
			gemm(g);
		CK(cudaEventRecord(x->gemm_end, x->comp));
		for (size_t i = 0; i < win; i++)
			issue_copy(g, i, per, piece);
	}
	fl->open = 1;
	__sync_synchronize();
	for (size_t i = win; i < total; i++)
		for (int g = 0; g < O.n; g++)
			issue_copy(g, i, per, piece);
	for (int g = 0; g < O.n; g++) {
		CK(cudaSetDevice(g));
		for (int s = 0; s < O.s; s++)
			CK(cudaEventRecord(G[g].cp_end[s], G[g].cp[s]));
	}
}

// The slowest GPU's times, each from that GPU's start event.  A phase without
// GEMMs or copies has their end events right behind the start.
static struct times collect(void)
{
	struct times t = { 0, 0, 0 };
	for (int g = 0; g < O.n; g++) {
		float gm, cm = 0, f;
		wait_ev(G[g].gemm_end, g, "GEMMs");
		CK(cudaEventElapsedTime(&gm, G[g].start, G[g].gemm_end));
		for (int s = 0; s < O.s; s++) {
			wait_ev(G[g].cp_end[s], g, "copies");
			CK(cudaEventElapsedTime(&f, G[g].start, G[g].cp_end[s]));
			cm = fmaxf(cm, f);
		}
		t.gemm = fmax(t.gemm, gm);
		t.copy = fmax(t.copy, cm);
		t.span = fmax(t.span, fmaxf(gm, cm));
	}
	return t;
}

static struct times run_round(int do_gemm, int do_copy, int spin)
{
	for (int g = 0; g < O.n; g++) {
		CK(cudaSetDevice(g));
		CK(cudaDeviceSynchronize());
	}
	if (spin)
		start_resident();
	queue_round(do_gemm, do_copy);
	struct times t = collect();
	if (spin)
		stop_resident();	// the measured phase is over
	if (fl->late) {
		fprintf(stderr, "a gate opened by itself: the host took over 10 s to queue a round\n");
		fail();
	}
	return t;
}

static void poison(void)
{
	for (int g = 0; g < O.n; g++) {
		CK(cudaSetDevice(g));
		CK(cudaMemsetAsync(G[g].dst, 0xA5, O.b, G[g].cp[0]));
		CK(cudaStreamSynchronize(G[g].cp[0]));
	}
}

// Every destination against its sender's pattern; returns the bad bytes.
static size_t check(unsigned char *host, size_t *checked)
{
	size_t bad = 0;
	for (int r = 0; r < O.n; r++) {
		int s = (r + O.n - 1) % O.n;
		unsigned char exp[256];	// (i*7) & 0xff repeats every 256 bytes
		for (int j = 0; j < 256; j++)
			exp[j] = (unsigned char)((j * 7 + s * 13 + 1) & 0xff);
		CK(cudaSetDevice(r));
		CK(cudaMemcpy(host, G[r].dst, O.b, cudaMemcpyDeviceToHost));
		for (size_t off = 0; off < O.b; off += 256) {
			size_t len = O.b - off < 256 ? O.b - off : 256;
			if (memcmp(host + off, exp, len) == 0)
				continue;
			for (size_t j = 0; j < len; j++)
				if (host[off + j] != exp[j] && bad++ < 8)
					fprintf(stderr, "GPU %d from GPU %d: byte %zu is 0x%02x, not 0x%02x\n", r, s,
						off + j, host[off + j], exp[j]);
		}
		*checked += O.b;
	}
	return bad;
}

static void setup(int g)
{
	struct gpu *x = &G[g];
	size_t mat = (size_t)O.d * O.d;
	int sms;
	CK(cudaSetDevice(g));
	CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, g));
	if (O.k >= sms) {
		fprintf(stderr, "-k %d: must be below GPU %d's %d SMs\n", O.k, g, sms);
		exit(2);
	}
	for (int p = 0; p < O.n; p++) {
		int can = 0;
		if (p == g)
			continue;
		CK(cudaDeviceCanAccessPeer(&can, g, p));
		if (!can) {
			fprintf(stderr, "GPU %d cannot access GPU %d's memory (no peer access)\n", g, p);
			exit(2);
		}
		cudaError_t e = cudaDeviceEnablePeerAccess(p, 0);
		if (e == cudaErrorPeerAccessAlreadyEnabled)
			(void)cudaGetLastError();
		else
			CK(e);
	}
	CK(cudaStreamCreateWithFlags(&x->comp, cudaStreamNonBlocking));
	CK(cudaStreamCreateWithFlags(&x->spin, cudaStreamNonBlocking));
	CK(cudaEventCreate(&x->start));
	CK(cudaEventCreate(&x->gemm_end));
	CK(cudaEventCreateWithFlags(&x->spin_end, cudaEventDisableTiming));
	for (int s = 0; s < O.s; s++) {
		CK(cudaStreamCreateWithFlags(&x->cp[s], cudaStreamNonBlocking));
		CK(cudaEventCreate(&x->cp_end[s]));
	}
	CK(cudaMalloc(&x->a, mat * 2));
	CK(cudaMalloc(&x->b, mat * 2));
	CK(cudaMalloc(&x->c, mat * 2));
	CK(cudaMalloc(&x->src, O.b));
	CK(cudaMalloc(&x->dst, O.b));
	fill_bf16<<<1024, 256, 0, x->comp>>>(x->a, mat, 1);
	fill_bf16<<<1024, 256, 0, x->comp>>>(x->b, mat, 2 + g);
	fill_bytes<<<1024, 256, 0, x->comp>>>((unsigned char *)x->src, O.b, g);
	CK(cudaGetLastError());
	CB(cublasCreate(&x->blas));
	CB(cublasSetStream(x->blas, x->comp));
	// Run every kernel once, ungated: a lazily loaded kernel may wait for
	// running ones, which would deadlock behind a gate or a resident CTA.
	fl->open = 1;
	fl->stop = 1;
	__sync_synchronize();
	gate<<<1, 1, 0, x->comp>>>(&fl->open, &fl->late, GATE_NS);
	resident<<<1, 512, 0, x->comp>>>(&fl->stop, ready);
	CK(cudaGetLastError());
	gemm(g);
	CK(cudaDeviceSynchronize());
}

static void teardown(void)
{
	for (int g = 0; g < O.n; g++) {
		struct gpu *x = &G[g];
		void *mem[] = { x->a, x->b, x->c, x->src, x->dst };
		cudaEvent_t ev[] = { x->start, x->gemm_end, x->spin_end };
		CK(cudaSetDevice(g));
		CB(cublasDestroy(x->blas));
		for (int i = 0; i < 5; i++)
			CK(cudaFree(mem[i]));
		for (int i = 0; i < 3; i++)
			CK(cudaEventDestroy(ev[i]));
		for (int s = 0; s < O.s; s++) {
			CK(cudaStreamDestroy(x->cp[s]));
			CK(cudaEventDestroy(x->cp_end[s]));
		}
		CK(cudaStreamDestroy(x->comp));
		CK(cudaStreamDestroy(x->spin));
	}
	void *p = (void *)fl;
	fl = NULL;	// fail() must not touch it any more
	CK(cudaFreeHost(p));
	CK(cudaFreeHost((void *)ready));
}

static size_t parse_size(const char *s)
{
	static const char unit[] = "kmg";
	char *e;
	size_t v = strtoull(s, &e, 0);
	const char *u = e != s && *e ? strchr(unit, *e | 0x20) : NULL;
	if (u)
		v <<= 10 * (u - unit + 1), e++;
	if (e == s || *e) {
		fprintf(stderr, "bad size '%s'\n", s);
		exit(2);
	}
	return v;
}

static void usage(void)
{
	fprintf(stderr,
		"usage: gemm_ce [-n gpus] [-d dim] [-g gemms] [-b bytes] [-p piece] [-s streams]\n"
		"               [-c copies] [-k ctas] [-r rounds]\n"
		"  -n N  use the first N GPUs (default all visible; at least 2)\n"
		"  -d D  GEMM size: bf16 D x D times D x D (default 8192)\n"
		"  -g G  GEMMs per round, back to back (default 20)\n"
		"  -b B  bytes each GPU pushes to the next per copy (default 1G; k/M/G suffixes)\n"
		"  -p P  bytes per cudaMemcpyAsync (default 16M; 0: one per buffer)\n"
		"  -s S  copy streams per GPU, pieces round-robin (default 1, at most %d)\n"
		"  -c C  copies of the B bytes per round (default 10)\n"
		"  -k K  also with K resident CTAs of 512 threads per GPU spinning (default 0)\n"
		"  -r R  rounds per phase; medians are reported (default 3, at most %d)\n",
		MAX_STREAMS, MAX_ROUNDS);
	exit(2);
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

// Median of each field over the rounds, each field on its own.
static struct times median(const struct times *t)
{
	double v[3][MAX_ROUNDS];
	for (int i = 0; i < O.r; i++)
		v[0][i] = t[i].gemm, v[1][i] = t[i].copy, v[2][i] = t[i].span;
	for (int f = 0; f < 3; f++)
		qsort(v[f], O.r, sizeof(double), cmp_d);
	struct times m = { v[0][O.r / 2], v[1][O.r / 2], v[2][O.r / 2] };
	return m;
}

static double gemm_ms, copy_ms;	// medians alone

// A configuration against GEMM alone and copies alone; a row without one of
// them divides its makespan by the other alone.
static void row(const char *name, int with_gemm, int with_copy, struct times x)
{
	double flop = 2.0 * O.d * O.d * O.d * O.g, bytes = (double)O.b * O.c;
	char gs[64] = "-", cs[64] = "-";
	if (with_gemm)
		snprintf(gs, sizeof(gs), "%6.1f -> %6.1f (%.3fx)", flop / gemm_ms / 1e9, flop / x.gemm / 1e9,
			 x.gemm / gemm_ms);
	if (with_copy)
		snprintf(cs, sizeof(cs), "%6.1f -> %6.1f (%.3fx)", bytes / copy_ms / 1e6, bytes / x.copy / 1e6,
			 copy_ms / x.copy);
	printf("%-22s | %-31s | %-29s | %9.2f | %.3f\n", name, gs, cs, x.span,
	       x.span / ((with_gemm ? gemm_ms : 0) + (with_copy ? copy_ms : 0)));
}

// The phases, in the order they run within a round, and their rows.
static const struct {
	const char *phase, *row;
	int gemm, copy, spin;
} PH[] = {
	{ "GEMM alone", NULL, 1, 0, 0 },
	{ "copies alone", NULL, 0, 1, 0 },
	{ "GEMM + copies", "ce copies", 1, 1, 0 },
	{ "GEMM + K CTAs", "K CTAs, no copies", 1, 0, 1 },
	{ "copies + K CTAs", "K CTAs, no GEMM", 0, 1, 1 },
	{ "GEMM + copies + K CTAs", "ce copies + K CTAs", 1, 1, 1 },
};

static void report(const struct times *m, int nph)
{
	printf("medians, slowest GPU (ms):\n");
	for (int ph = 0; ph < nph; ph++)
		printf("  %-22s GEMMs %9.2f  copies %9.2f  makespan %9.2f\n", PH[ph].phase,
		       PH[ph].gemm ? m[ph].gemm : 0, PH[ph].copy ? m[ph].copy : 0, m[ph].span);
	gemm_ms = m[0].gemm;
	copy_ms = m[1].copy;
	printf("\n%-22s | %-31s | %-29s | %9s | %s\n", "config", "GEMM TFLOP/s alone -> overlapped",
	       "copy GB/s alone -> overlapped", "makespan", "makespan /");
	printf("%-22s | %-31s | %-29s | %9s | %s\n", "", "(slowdown x)", "per GPU (kept x)", "ms",
	       "(GEMM + copies alone)");
	for (int ph = 2; ph < nph; ph++)
		row(PH[ph].row, PH[ph].gemm, PH[ph].copy, m[ph]);
}

static void parse_args(int argc, char **argv)
{
	int c;
	while ((c = getopt(argc, argv, "n:d:g:b:p:s:c:k:r:h")) != -1)
		switch (c) {
		case 'n': O.n = atoi(optarg); break;
		case 'd': O.d = atoi(optarg); break;
		case 'g': O.g = atoi(optarg); break;
		case 'b': O.b = parse_size(optarg); break;
		case 'p': O.p = parse_size(optarg); break;
		case 's': O.s = atoi(optarg); break;
		case 'c': O.c = atoi(optarg); break;
		case 'k': O.k = atoi(optarg); break;
		case 'r': O.r = atoi(optarg); break;
		default: usage();
		}
	if (optind < argc || O.n < 0 || O.d < 1 || O.g < 1 || O.b < 1 || O.s < 1 || O.s > MAX_STREAMS ||
	    O.c < 1 || O.k < 0 || O.r < 1 || O.r > MAX_ROUNDS)
		usage();
}

int main(int argc, char **argv)
{
	int avail, nph;
	void *p;
	parse_args(argc, argv);
	CK(cudaGetDeviceCount(&avail));
	O.n = O.n ? O.n : avail;
	if (O.n < 2 || O.n > avail || O.n > MAX_GPUS) {
		fprintf(stderr, "need 2..%d GPUs with peer access, asked %d, %d visible\n", MAX_GPUS, O.n, avail);
		return 2;
	}
	CK(cudaHostAlloc(&p, sizeof(struct flags), cudaHostAllocMapped | cudaHostAllocPortable));
	fl = (volatile struct flags *)p;
	CK(cudaHostAlloc(&p, (O.n * O.k + 1) * sizeof(int), cudaHostAllocMapped | cudaHostAllocPortable));
	ready = (volatile int *)p;
	for (int g = 0; g < O.n; g++) {
		struct cudaDeviceProp prop;
		CK(cudaGetDeviceProperties(&prop, g));
		printf("GPU %d: %s\n", g, prop.name);
		setup(g);
	}
	printf("%d GPUs, ring; GEMM %d^3 bf16 x %d; B %zu bytes x %d; P %zu; S %d; K %d; rounds %d\n", O.n,
	       O.d, O.g, O.b, O.c, O.p ? O.p : O.b, O.s, O.k, O.r);
	fflush(stdout);
	run_round(1, 1, 0);	// warm-up: cuBLAS, peer mappings
	nph = O.k ? 6 : 3;
	struct times m[6], *t = (struct times *)calloc(6 * O.r, sizeof(struct times));
	unsigned char *host = (unsigned char *)malloc(O.b);
	size_t bad = 0, checked = 0;
	if (!t || !host) {
		fprintf(stderr, "out of host memory\n");
		fail();
	}
	// Phases interleaved round by round, so that drift (clocks, heat) hits all alike;
	// the last round's GEMM + copies phases land on poisoned memory and are checked.
	for (int r = 0; r < O.r; r++)
		for (int ph = 0; ph < nph; ph++) {
			int last_both = r == O.r - 1 && PH[ph].gemm && PH[ph].copy;
			if (last_both)
				poison();
			t[ph * O.r + r] = run_round(PH[ph].gemm, PH[ph].copy, PH[ph].spin);
			if (last_both)
				bad += check(host, &checked);
		}
	for (int ph = 0; ph < nph; ph++)
		m[ph] = median(t + ph * O.r);
	report(m, nph);
	if (bad)
		printf("data check: FAIL (%zu of %zu bytes wrong)\n", bad, checked);
	else
		printf("data check: PASS (%zu bytes)\n", checked);
	teardown();
	free(t);
	free(host);
	return bad ? 1 : 0;
}
