/* Overlap benchmark (issue 4): on every rank a bf16 GEMM (d x d x d,
 * repeated) runs on a compute stream while a collective runs on a second
 * stream.  For each configuration (native NCCL, the plugin, the plugin with
 * NCCL_PASS_SM=1) it measures, in fresh processes (one per GPU):
 *   - GEMM TFLOP/s alone and overlapped,
 *   - collective busbw alone and overlapped,
 *   - the makespan of a fixed amount of work: N GEMMs and M collectives
 *     started together (both streams wait on one event).
 * Every element of the overlapped batch's last collective is checked
 * (output poisoned first).  Times are the slowest rank's.  Besides the
 * table, one "CSV," line per configuration feeds scripts/plot_overlap.py
 * (its third field: 1 = registered buffers, +2 = from ncclMemAlloc, -A).
 *
 * Configuration "native-ce" is NCCL's own copy-engine collectives: a
 * communicator with CTA policy zero and the collective's buffers from
 * ncclMemAlloc in symmetric windows (NCCL has them for all_gather and
 * alltoall; other collectives run its kernels as usual).  Built only where
 * nccl.h has NCCL_CTA_POLICY_ZERO.
 *
 * CTAs per collective: every configuration's ranks log NCCL's INIT and
 * TUNING lines into a scratch folder; rank 0's TUNING line for each
 * collective names the channels it ran on (one CTA each,
 * "channel{Lo..Hi}={a..b}"), and for send/recv-based operations (alltoall,
 * sendrecv) the INIT line gives the channels per peer.  The column says
 * which of the two it is; "?" when NCCL logged neither (its copy-engine
 * collectives launch no kernel and log no TUNING line). */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include "bench.h"

/* NCCL before 2.27 has no windows; native-ce, the only user, is not built
 * there (no NCCL_CTA_POLICY_ZERO), so the type only needs to exist. */
#ifndef NCCL_CTA_POLICY_ZERO
typedef void *ncclWindow_t;
#endif

enum config {
	CFG_NATIVE,
	CFG_NATIVE_CE,
	CFG_PLUGIN,
	CFG_PASS_SM,
	CFG_COUNT
};

static const char *const config_names[CFG_COUNT] = { "native", "native-ce", "plugin",
						     "plugin+PASS_SM" };

struct ovl_opts {
	int nranks;
	int op;
	size_t bytes;		/* collective size, nccl-tests' convention */
	int ngemm, ncoll;
	int dim;
	int registered;		/* ncclCommRegister the collective buffers */
	int cumem_bufs;		/* -A: collective buffers from ncclMemAlloc (cuMem) */
	int comm_priority;	/* -P: the collective's stream at the GPU's highest priority */
	int env_plugin;		/* -Z: the plugin configurations routed by NCCL_ENV_PLUGIN alone */
	int configs[CFG_COUNT];
	double timeout;
	char *extra_env[16];	/* NAME=VALUE for the plugin configurations */
	int nextra;
	char logdir[64];	/* NCCL's logs per configuration, for the CTA count */
};

struct ovl_result {
	int32_t config, rank;
	double gemm_alone_ms, coll_alone_ms;
	double gemm_ovl_ms, coll_ovl_ms, makespan_ms;
	uint64_t errors;
};

static void die_cuda(cudaError_t e, const char *what)
{
	if (e == cudaSuccess)
		return;
	fprintf(stderr, "overlap: %s: %s\n", what, cudaGetErrorString(e));
	exit(2);
}

static void die_nccl(ncclResult_t r, const char *what)
{
	if (r == ncclSuccess)
		return;
	fprintf(stderr, "overlap: %s: %s\n", what, ncclGetErrorString(r));
	exit(3);
}

static void die_cublas(cublasStatus_t s, const char *what)
{
	if (s == CUBLAS_STATUS_SUCCESS)
		return;
	fprintf(stderr, "overlap: %s: cuBLAS status %d\n", what, (int)s);
	exit(4);
}

/* bf16 is the top half of an IEEE float. */
static uint16_t to_bf16(float f)
{
	uint32_t u;

	memcpy(&u, &f, sizeof(u));
	return (uint16_t)(u >> 16);
}

struct rank_ctx {
	const struct ovl_opts *o;
	int rank;
	int ce;			/* CFG_NATIVE_CE: NCCL-allocated buffers in windows */
	ncclComm_t comm;
	cudaStream_t compute, comm_stream;
	cublasHandle_t blas;
	void *a, *b, *c;
	void *sbuf, *rbuf;
	float *bar;		/* the barrier's own word */
	struct bench_shape shape;
	int dtype;
};

static void gemm(struct rank_ctx *x)
{
	const float alpha = 1.0f, beta = 0.0f;
	int d = x->o->dim;

	die_cublas(cublasGemmEx(x->blas, CUBLAS_OP_N, CUBLAS_OP_N, d, d, d, &alpha, x->a,
				CUDA_R_16BF, d, x->b, CUDA_R_16BF, d, &beta, x->c, CUDA_R_16BF, d,
				CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT), "cublasGemmEx");
}

static void coll(struct rank_ctx *x)
{
	die_nccl(bench_issue(x->comm, x->comm_stream, x->o->op, x->dtype, ncclSum, &x->shape,
			     x->sbuf, x->rbuf, x->rank, x->o->nranks), "collective");
}

/* All ranks leave together: one small all_reduce, waited for. */
static void barrier(struct rank_ctx *x)
{
	die_nccl(ncclAllReduce(x->bar, x->bar, 1, ncclFloat, ncclSum, x->comm, x->comm_stream),
		 "barrier");
	die_cuda(cudaStreamSynchronize(x->comm_stream), "barrier sync");
}

static double elapsed_ms(cudaEvent_t a, cudaEvent_t b)
{
	float ms = 0;

	die_cuda(cudaEventElapsedTime(&ms, a, b), "cudaEventElapsedTime");
	return ms;
}

/* n runs of `work` on `stream` with nothing beside them, in ms (ranks
 * start together). */
static double time_alone(struct rank_ctx *x, cudaStream_t stream, void (*work)(struct rank_ctx *),
			 int n, cudaEvent_t ev[2])
{
	barrier(x);
	die_cuda(cudaEventRecord(ev[0], stream), "record");
	for (int i = 0; i < n; i++)
		work(x);
	die_cuda(cudaEventRecord(ev[1], stream), "record");
	die_cuda(cudaStreamSynchronize(stream), "timing alone");
	return elapsed_ms(ev[0], ev[1]);
}

static void fill_matrices(struct rank_ctx *x)
{
	size_t n = (size_t)x->o->dim * (size_t)x->o->dim;
	uint16_t *h = malloc(n * sizeof(*h));
	uint32_t seed = 12345u + (uint32_t)x->rank;

	if (!h)
		exit(5);
	/* Small non-zero values: realistic power draw, no overflow. */
	for (size_t i = 0; i < n; i++) {
		seed = seed * 1664525u + 1013904223u;
		h[i] = to_bf16(((float)(seed >> 8) / 16777216.0f - 0.5f) * 0.1f);
	}
	die_cuda(cudaMemcpy(x->a, h, n * 2, cudaMemcpyHostToDevice), "fill A");
	die_cuda(cudaMemcpy(x->b, h, n * 2, cudaMemcpyHostToDevice), "fill B");
	free(h);
}

/* The communicator, and the collective's buffers: cudaMalloc (ncclMemAlloc
 * with -A), or for native-ce ncclMemAlloc in symmetric windows of a
 * zero-CTA communicator. */
static void open_comm(struct rank_ctx *x, ncclUniqueId id, size_t sbytes, size_t rbytes,
		      ncclWindow_t win[2])
{
	if (!x->ce) {
		die_nccl(ncclCommInitRank(&x->comm, x->o->nranks, id, x->rank), "ncclCommInitRank");
		if (x->o->cumem_bufs) {
			die_nccl(ncclMemAlloc(&x->sbuf, sbytes), "ncclMemAlloc send");
			die_nccl(ncclMemAlloc(&x->rbuf, rbytes), "ncclMemAlloc recv");
			return;
		}
		die_cuda(cudaMalloc(&x->sbuf, sbytes), "cudaMalloc send");
		die_cuda(cudaMalloc(&x->rbuf, rbytes), "cudaMalloc recv");
		return;
	}
#ifdef NCCL_CTA_POLICY_ZERO
	ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;

	cfg.CTAPolicy = NCCL_CTA_POLICY_ZERO;
	die_nccl(ncclCommInitRankConfig(&x->comm, x->o->nranks, id, x->rank, &cfg),
		 "ncclCommInitRankConfig (CTA policy zero)");
	die_nccl(ncclMemAlloc(&x->sbuf, sbytes), "ncclMemAlloc send");
	die_nccl(ncclMemAlloc(&x->rbuf, rbytes), "ncclMemAlloc recv");
	die_nccl(ncclCommWindowRegister(x->comm, x->sbuf, sbytes, &win[0], NCCL_WIN_COLL_SYMMETRIC),
		 "ncclCommWindowRegister send");
	die_nccl(ncclCommWindowRegister(x->comm, x->rbuf, rbytes, &win[1], NCCL_WIN_COLL_SYMMETRIC),
		 "ncclCommWindowRegister recv");
#else
	(void)id;
	(void)sbytes;
	(void)rbytes;
	(void)win;
	fprintf(stderr, "overlap: this nccl.h has no CTA policy zero (native-ce)\n");
	exit(8);
#endif
}

static void close_comm(struct rank_ctx *x, ncclWindow_t win[2])
{
#ifdef NCCL_CTA_POLICY_ZERO
	if (x->ce) {
		die_nccl(ncclCommWindowDeregister(x->comm, win[0]), "ncclCommWindowDeregister");
		die_nccl(ncclCommWindowDeregister(x->comm, win[1]), "ncclCommWindowDeregister");
	}
#else
	(void)win;
#endif
	die_nccl(ncclCommDestroy(x->comm), "ncclCommDestroy");
	if (x->ce || x->o->cumem_bufs) {
		ncclMemFree(x->sbuf);
		ncclMemFree(x->rbuf);
	} else {
		cudaFree(x->sbuf);
		cudaFree(x->rbuf);
	}
}

static int rank_main(const struct ovl_opts *o, int config, int rank, ncclUniqueId id, int out_fd)
{
	struct rank_ctx x = { .o = o, .rank = rank, .ce = config == CFG_NATIVE_CE };
	ncclWindow_t win[2] = { NULL, NULL };
	struct ovl_result res = { .config = config, .rank = rank };
	struct bench_pattern pat;
	cudaEvent_t ev[5];
	size_t mbytes = (size_t)o->dim * (size_t)o->dim * 2, sbytes, rbytes;
	void *sreg = NULL, *rreg = NULL;
	uint8_t *host;

	x.dtype = bench_dtype_find("float");
	if (!bench_shape(o->op, o->nranks, 4, o->bytes, &x.shape) ||
	    bench_pattern_make(&pat, x.dtype, ncclSum, o->nranks, 7))
		return 6;
	sbytes = x.shape.send_count * 4;
	rbytes = x.shape.recv_count * 4;
	host = malloc(sbytes > rbytes ? sbytes : rbytes);
	if (!host)
		return 5;
	die_cuda(cudaSetDevice(rank), "cudaSetDevice");
	open_comm(&x, id, sbytes, rbytes, win);
	die_cuda(cudaStreamCreateWithFlags(&x.compute, cudaStreamNonBlocking), "stream");
	/* -P: training frameworks often give communication a high-priority
	 * stream (PyTorch's TORCH_NCCL_HIGH_PRIORITY=1), so that NCCL's CTAs
	 * take the next SM the GEMM frees instead of queueing behind its
	 * waiting blocks.  The same for every configuration. */
	if (o->comm_priority) {
		int least, greatest;

		die_cuda(cudaDeviceGetStreamPriorityRange(&least, &greatest), "priority range");
		die_cuda(cudaStreamCreateWithPriority(&x.comm_stream, cudaStreamNonBlocking, greatest),
			 "stream");
	} else {
		die_cuda(cudaStreamCreateWithFlags(&x.comm_stream, cudaStreamNonBlocking), "stream");
	}
	die_cublas(cublasCreate(&x.blas), "cublasCreate");
	die_cublas(cublasSetStream(x.blas, x.compute), "cublasSetStream");
	die_cuda(cudaMalloc(&x.a, mbytes), "cudaMalloc A");
	die_cuda(cudaMalloc(&x.b, mbytes), "cudaMalloc B");
	die_cuda(cudaMalloc(&x.c, mbytes), "cudaMalloc C");
	die_cuda(cudaMalloc((void **)&x.bar, sizeof(float)), "cudaMalloc barrier");
	die_cuda(cudaMemset(x.bar, 0, sizeof(float)), "barrier word");
	if (o->registered && !x.ce) {
		die_nccl(ncclCommRegister(x.comm, x.sbuf, sbytes, &sreg), "ncclCommRegister");
		die_nccl(ncclCommRegister(x.comm, x.rbuf, rbytes, &rreg), "ncclCommRegister");
	}
	fill_matrices(&x);
	bench_fill(&pat, rank, host, x.shape.send_count);
	die_cuda(cudaMemcpy(x.sbuf, host, sbytes, cudaMemcpyHostToDevice), "fill send");
	for (int i = 0; i < 5; i++)
		die_cuda(cudaEventCreate(&ev[i]), "cudaEventCreate");

	/* Warm-up: cuBLAS picks its kernel, NCCL connects. */
	gemm(&x);
	coll(&x);
	coll(&x);
	die_cuda(cudaDeviceSynchronize(), "warm-up");

	/* Each alone. */
	res.gemm_alone_ms = time_alone(&x, x.compute, gemm, o->ngemm, ev);
	res.coll_alone_ms = time_alone(&x, x.comm_stream, coll, o->ncoll, ev);

	/* Together: both streams wait on one start event. */
	die_cuda(cudaMemsetAsync(x.rbuf, 0xff, rbytes, x.comm_stream), "poison");
	barrier(&x);
	die_cuda(cudaEventRecord(ev[2], x.compute), "record");
	die_cuda(cudaStreamWaitEvent(x.comm_stream, ev[2], 0), "wait");
	for (int i = 0; i < o->ngemm; i++)
		gemm(&x);
	for (int i = 0; i < o->ncoll; i++)
		coll(&x);
	die_cuda(cudaEventRecord(ev[3], x.compute), "record");
	die_cuda(cudaEventRecord(ev[4], x.comm_stream), "record");
	die_cuda(cudaDeviceSynchronize(), "overlapped batch");
	res.gemm_ovl_ms = elapsed_ms(ev[2], ev[3]);
	res.coll_ovl_ms = elapsed_ms(ev[2], ev[4]);
	res.makespan_ms = fmax(res.gemm_ovl_ms, res.coll_ovl_ms);

	die_cuda(cudaMemcpy(host, x.rbuf, rbytes, cudaMemcpyDeviceToHost), "read result");
	res.errors = bench_check(&pat, o->op, rank, host, &x.shape, 1);

	if (o->registered && !x.ce) {
		die_nccl(ncclCommDeregister(x.comm, sreg), "ncclCommDeregister");
		die_nccl(ncclCommDeregister(x.comm, rreg), "ncclCommDeregister");
	}
	close_comm(&x, win);
	for (int i = 0; i < 5; i++)
		cudaEventDestroy(ev[i]);
	cublasDestroy(x.blas);
	cudaFree(x.a);
	cudaFree(x.b);
	cudaFree(x.c);
	cudaFree(x.bar);
	bench_pattern_free(&pat);
	free(host);
	return write(out_fd, &res, sizeof(res)) == (ssize_t)sizeof(res) ? 0 : 7;
}

struct config_run {
	const struct ovl_opts *o;
	int config, out_fd;
};

static void config_prepare(void *arg, int rank)
{
	const struct config_run *p = arg;

	char file[PATH_MAX];

	(void)rank;
	if (p->config == CFG_PASS_SM)
		setenv("NCCL_PASS_SM", "1", 1);	/* before the -E strings, which win */
	if (p->o->logdir[0]) {
		snprintf(file, sizeof(file), "%s/%s.%%p.log", p->o->logdir, config_names[p->config]);
		setenv("NCCL_DEBUG", "INFO", 1);
		setenv("NCCL_DEBUG_SUBSYS", "INIT,ENV,TUNING", 1);
		setenv("NCCL_DEBUG_FILE", file, 1);
	}
	bench_route_env(p->config == CFG_PLUGIN || p->config == CFG_PASS_SM,
			p->o->env_plugin ? ROUTE_ENV_PLUGIN : ROUTE_ALL, "symmem",
			p->o->extra_env, p->o->nextra);
}

static int config_rank(void *arg, int rank, ncclUniqueId id)
{
	const struct config_run *p = arg;

	return rank_main(p->o, p->config, rank, id, p->out_fd);
}

/* One configuration in fresh processes; returns how many ranks failed. */
static int run_config(const struct ovl_opts *o, int config, int out_fd)
{
	struct config_run p = { .o = o, .config = config, .out_fd = out_fd };
	struct bench_fork f = {
		.nranks = o->nranks, .timeout = o->timeout, .label = config_names[config],
		.arg = &p, .prepare = config_prepare, .run = config_rank,
	};

	return bench_fork_ranks(&f);
}

/* NCCL's name for an operation in its TUNING lines. */
static const char *nccl_func_name(int op)
{
	switch (op) {
	case OP_ALLREDUCE: return "AllReduce";
	case OP_BROADCAST: return "Broadcast";
	case OP_REDUCE: return "Reduce";
	case OP_ALLGATHER: return "AllGather";
	case OP_REDUCESCATTER: return "ReduceScatter";
	default: return NULL;	/* send/recv based */
	}
}

/* How many CTAs a configuration's collective ran on, read from its ranks'
 * NCCL logs (see the top of the file); "?" when they do not say. */
static void config_ctas(const struct ovl_opts *o, int config, char *out, size_t len)
{
	const char *func = nccl_func_name(o->op);
	char cmd[PATH_MAX + 64], line[1024];
	int most = -1, per_peer = -1;
	FILE *f;

	snprintf(out, len, "?");
	snprintf(cmd, sizeof(cmd), "cat %s/%s.*.log 2>/dev/null", o->logdir, config_names[config]);
	f = popen(cmd, "r");
	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		const char *at;
		int lo, hi, n;

		if (func && (at = strstr(line, " Bytes -> Algo ")) && strstr(line, func) &&
		    (at = strstr(at, "channel{Lo..Hi}={")) &&
		    sscanf(at, "channel{Lo..Hi}={%d..%d}", &lo, &hi) == 2 && hi - lo + 1 > most)
			most = hi - lo + 1;
		if ((at = strstr(line, "p2p channels, ")) && sscanf(at, "p2p channels, %d", &n) == 1)
			per_peer = n;
	}
	pclose(f);
	if (most >= 0)
		snprintf(out, len, "%d", most);
	else if (!func && per_peer >= 0)
		snprintf(out, len, "%d/peer", per_peer);
}

/* Whether a configuration's NCCL logs exist and every one of them holds
 * a line with `needle`. */
static int config_logs_have(const struct ovl_opts *o, int config, const char *needle)
{
	char cmd[PATH_MAX + 192];

	snprintf(cmd, sizeof(cmd),
		 "set -- %s/%s.*.log; [ -e \"$1\" ] && [ -z \"$(grep -LF -- '%s' \"$@\")\" ]",
		 o->logdir, config_names[config], needle);
	return system(cmd) == 0;
}

/* A plugin configuration that NCCL quietly ran on its own transports (the
 * plugin or the env plugin not found) would be measured as the plugin. */
static const char *config_misrouted(const struct ovl_opts *o, int config)
{
	if (config != CFG_PLUGIN && config != CFG_PASS_SM)
		return NULL;
	if (!o->logdir[0])
		return o->env_plugin ? "no NCCL logs to check the routing (-Z) in" : NULL;
	if (o->env_plugin && !config_logs_have(o, config, "Successfully loaded external env plugin"))
		return "a rank's NCCL did not load the env plugin (-Z)";
	if (!config_logs_have(o, config, "via NET/symmem"))
		return "a rank's NCCL log has no connection via NET/symmem";
	return NULL;
}

static void usage(const char *argv0)
{
	fprintf(stderr, "usage: %s [-n ranks] [-o op] [-b bytes] [-g gemms] [-c collectives] "
		"[-d dim] [-R] [-A] [-P] [-Z] [-C native,native-ce,plugin,passsm] [-E NAME=VALUE] "
		"[-t seconds]\n",
		argv0);
	exit(2);
}

static int parse_configs(char *s, int *cfg)
{
	memset(cfg, 0, sizeof(int) * CFG_COUNT);
	for (char *save = NULL, *t = strtok_r(s, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		if (!strcmp(t, "native"))
			cfg[CFG_NATIVE] = 1;
		else if (!strcmp(t, "native-ce"))
#ifdef NCCL_CTA_POLICY_ZERO
			cfg[CFG_NATIVE_CE] = 1;
#else
			printf("# native-ce skipped: this nccl.h has no CTA policy zero\n");
#endif
		else if (!strcmp(t, "plugin"))
			cfg[CFG_PLUGIN] = 1;
		else if (!strcmp(t, "passsm"))
			cfg[CFG_PASS_SM] = 1;
		else
			return -1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct ovl_opts o = {
		.op = OP_ALLGATHER, .bytes = 128u << 20, .ngemm = 20, .ncoll = 10, .dim = 8192,
		.configs = { 1, 0, 1, 1 }, .timeout = 300,
	};
	struct ovl_result all[CFG_COUNT][64];
	struct bench_shape shape;
	struct ovl_result rec;
	FILE *results;
	int opt, failed = 0;
	double native_makespan = 0;

	memset(all, 0, sizeof(all));
	while ((opt = getopt(argc, argv, "n:o:b:g:c:d:RAPZC:E:t:")) != -1) {
		switch (opt) {
		case 'n': o.nranks = atoi(optarg); break;
		case 'o':
			o.op = -1;
			for (int k = 0; k < OP_COUNT; k++)
				if (!strcmp(optarg, bench_op_name(k)))
					o.op = k;
			if (o.op < 0)
				usage(argv[0]);
			break;
		case 'b': o.bytes = strtoull(optarg, NULL, 0); break;
		case 'g': o.ngemm = atoi(optarg); break;
		case 'c': o.ncoll = atoi(optarg); break;
		case 'd': o.dim = atoi(optarg); break;
		case 'R': o.registered = 1; break;
		case 'A': o.cumem_bufs = 1; break;
		case 'P': o.comm_priority = 1; break;
		case 'Z': o.env_plugin = 1; break;
		case 'C': if (parse_configs(optarg, o.configs)) usage(argv[0]); break;
		case 'E':
			if (o.nextra == 16 || !strchr(optarg, '='))
				usage(argv[0]);
			o.extra_env[o.nextra++] = optarg;
			break;
		case 't': o.timeout = atof(optarg); break;
		default: usage(argv[0]);
		}
	}
	if (o.nranks <= 0)
		o.nranks = bench_count_gpus();
	if (o.nranks < 2 || o.nranks > 64 || o.ngemm < 1 || o.ncoll < 1 || o.dim < 256) {
		fprintf(stderr, "need 2-64 GPUs, at least one GEMM and one collective\n");
		return 2;
	}
	if (!bench_shape(o.op, o.nranks, 4, o.bytes, &shape)) {
		fprintf(stderr, "%zu bytes do not divide into %d ranks for %s\n", o.bytes, o.nranks,
			bench_op_name(o.op));
		return 2;
	}
	results = tmpfile();
	if (!results)
		return 2;
	snprintf(o.logdir, sizeof(o.logdir), "/tmp/nccl_overlap.XXXXXX");
	if (!mkdtemp(o.logdir))
		o.logdir[0] = '\0';	/* no CTA column then, the rest still runs */
	for (int c = 0; c < CFG_COUNT; c++)
		if (o.configs[c])
			failed += run_config(&o, c, fileno(results));
	rewind(results);
	while (fread(&rec, sizeof(rec), 1, results) == 1)
		if (rec.config >= 0 && rec.config < CFG_COUNT && rec.rank >= 0 && rec.rank < o.nranks)
			all[rec.config][rec.rank] = rec;

	printf("# overlap: %s of %zu B%s, %d ranks, %d GEMMs of %d^3 bf16 and %d collectives "
	       "started together%s%s\n", bench_op_name(o.op), o.bytes,
	       o.registered ? (o.cumem_bufs ? " (registered ncclMemAlloc buffers)" :
			       " (registered buffers)") : (o.cumem_bufs ? " (ncclMemAlloc buffers)" : ""),
	       o.nranks, o.ngemm, o.dim, o.ncoll,
	       o.comm_priority ? ", collectives on a high-priority stream" : "",
	       o.env_plugin ? ", plugin routed by NCCL_ENV_PLUGIN=symmem alone" : "");
	printf("# %-15s %9s %9s %8s %10s %10s %6s %11s %9s %6s %8s\n", "config", "gemm_TF",
	       "gemm_TF", "gemm", "busbw", "busbw", "busbw", "makespan", "makespan", "errors",
	       "CTAs");
	printf("# %-15s %9s %9s %8s %10s %10s %6s %11s %9s %6s %8s\n", "", "alone", "overlap",
	       "slowdown", "alone", "overlap", "kept", "ms", "/native", "", "per coll");
	for (int c = 0; c < CFG_COUNT; c++) {
		struct ovl_result w = { 0 };
		uint64_t errors = 0;
		int ranks = 0;
		char ctas[32];
		const char *misrouted;
		double flops, gemm_a, gemm_o, bw_a, bw_o;

		if (!o.configs[c])
			continue;
		/* The slowest rank's times. */
		for (int r = 0; r < o.nranks; r++) {
			const struct ovl_result *x = &all[c][r];

			if (x->gemm_alone_ms <= 0)
				continue;
			ranks++;
			errors += x->errors;
			w.gemm_alone_ms = fmax(w.gemm_alone_ms, x->gemm_alone_ms);
			w.coll_alone_ms = fmax(w.coll_alone_ms, x->coll_alone_ms);
			w.gemm_ovl_ms = fmax(w.gemm_ovl_ms, x->gemm_ovl_ms);
			w.coll_ovl_ms = fmax(w.coll_ovl_ms, x->coll_ovl_ms);
			w.makespan_ms = fmax(w.makespan_ms, x->makespan_ms);
		}
		if (ranks != o.nranks) {
			printf("  %-15s incomplete: %d of %d ranks reported\n", config_names[c], ranks,
			       o.nranks);
			failed++;
			continue;
		}
		if (c == CFG_NATIVE)
			native_makespan = w.makespan_ms;
		flops = 2.0 * (double)o.dim * (double)o.dim * (double)o.dim * o.ngemm;
		gemm_a = flops / (w.gemm_alone_ms * 1e-3) / 1e12;
		gemm_o = flops / (w.gemm_ovl_ms * 1e-3) / 1e12;
		bw_a = (double)o.bytes * shape.bus_factor * o.ncoll / (w.coll_alone_ms * 1e-3) / 1e9;
		bw_o = (double)o.bytes * shape.bus_factor * o.ncoll / (w.coll_ovl_ms * 1e-3) / 1e9;
		if ((misrouted = config_misrouted(&o, c))) {
			printf("  %-15s %s\n", config_names[c], misrouted);
			failed++;
			continue;
		}
		config_ctas(&o, c, ctas, sizeof(ctas));
		printf("  %-15s %9.1f %9.1f %8.3f %10.1f %10.1f %6.3f %11.2f %9.3f %6llu %8s\n",
		       config_names[c], gemm_a, gemm_o, w.gemm_ovl_ms / w.gemm_alone_ms, bw_a, bw_o,
		       bw_o / bw_a, w.makespan_ms, native_makespan > 0 ? w.makespan_ms / native_makespan : 0.0,
		       (unsigned long long)errors, ctas);
		printf("CSV,%s,%zu,%d,%s,%.2f,%.2f,%.2f,%.2f,%.3f,%llu,%s\n", bench_op_name(o.op),
		       o.bytes, o.registered + 2 * o.cumem_bufs, config_names[c], gemm_a, gemm_o,
		       bw_a, bw_o,
		       w.makespan_ms, (unsigned long long)errors, ctas);
		failed += errors != 0;
	}
	printf("overlap: %s\n", failed ? "FAIL" : "PASS");
	if (o.logdir[0]) {
		char cmd[PATH_MAX + 16];

		snprintf(cmd, sizeof(cmd), "rm -rf %s", o.logdir);
		if (system(cmd) != 0)
			fprintf(stderr, "overlap: could not remove %s\n", o.logdir);
	}
	return failed ? 1 : 0;
}
