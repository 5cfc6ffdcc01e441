/* nccl_bench: the project's NCCL driver.
 *
 * Runs every selected collective over a size sweep natively and through
 * the plugin in one invocation (each phase in fresh processes, one per
 * GPU, so NCCL reads its environment anew), checks every result element,
 * and prints time and bus bandwidth per size for both with their ratio.
 *
 *   nccl_bench [-n ranks] [-b min] [-e max] [-f factor] [-o ops] [-i iters]
 *              [-w warmup] [-G] [-R] [-A] [-m both|native|plugin] [-c cases]
 *              [-P plugin] [-E NAME=VALUE]... [-t seconds] [-j file]
 *
 * -o: comma list of all_reduce,broadcast,reduce,all_gather,reduce_scatter,
 *     alltoall,sendrecv, or "all".  -c: comma list of dtype:redop checked
 *     at three sizes besides the timed float sums ("none" for no extra).
 * -G: capture each op into a CUDA graph.  -R: ncclCommRegister the buffers.
 * -A: the buffers come from ncclMemAlloc (cuMem memory, as PyTorch's
 *     expandable segments) instead of cudaMalloc.
 * -L N: instead of the matrix, N communicators split off the first, each
 *     running the selected ops once at the first size (checked) and then
 *     destroyed; every rank prints device memory and RSS after the first
 *     and the last cycle.
 * -T: each timed iteration starts on every rank together (a host barrier)
 *     and runs alone (synchronized); every rank prints each
 *     iteration's time to stderr: a one-off stall and a steady slowness
 *     give the same mean.
 * -E: extra variables for the plugin phase only.  -j FILE: besides the
 * tables, one JSON object per timed size appended to FILE (bench_json.h).
 * Exit status 0 only when every element of every run in every phase was
 * correct. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cuda_runtime_api.h>

#include "bench.h"
#include "bench_json.h"

static const char *default_cases =
	"bf16:sum,half:max,int32:min,int8:sum,double:prod,float:avg,uint8:max,int64:sum";

static void usage(const char *argv0)
{
	fprintf(stderr, "usage: %s [-n ranks] [-b min] [-e max] [-f factor] [-o ops] [-i iters] "
		"[-w warmup] [-G [-Y]] [-T] [-R] [-A] [-V|-W] [-H hosts] [-m both|native|plugin] [-c dtype:redop,...] [-P plugin] [-Z] "
		"[-E NAME=VALUE] [-t seconds] [-S stack-dir] [-L cycles] [-j file]\n"
		"  -Z: the plugin phase sets only NCCL_ENV_PLUGIN=plugin (the library's env plugin "
		"routes the job)\n"
		"  -H n: the ranks pose as n hosts (NCCL_HOSTID): NCCL's P2P/SHM inside each, the "
		"network (native: NCCL's own; plugin: symmem) only between them; with "
		"BENCH_PID_NS=1 in the environment each rank also gets PID and mount namespaces "
		"of its own, so the plugin sees other hosts too (NCCL_DEBUG_FILE's %%p is then "
		"r<rank>, as every rank is process 1)\n"
		"  -j file: one JSON object per timed size appended to file\n", argv0);
	exit(2);
}

static int parse_ops(const char *s, int *ops)
{
	char buf[256], *save = NULL;

	memset(ops, 0, sizeof(int) * OP_COUNT);
	snprintf(buf, sizeof(buf), "%s", s);
	for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		int found = 0;

		for (int op = 0; op < OP_COUNT; op++) {
			if (!strcmp(t, "all") || !strcmp(t, bench_op_name(op))) {
				ops[op] = 1;
				found = 1;
			}
		}
		if (!found)
			return -1;
	}
	return 0;
}

static int parse_cases(const char *s, struct bench_opts *o)
{
	static const struct { const char *name; ncclRedOp_t op; } redops[] = {
		{ "sum", ncclSum }, { "prod", ncclProd }, { "max", ncclMax }, { "min", ncclMin },
		{ "avg", ncclAvg },
	};
	char buf[512], *save = NULL;

	o->ncases = 0;
	if (!strcmp(s, "none"))
		return 0;
	snprintf(buf, sizeof(buf), "%s", s);
	for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		char *colon = strchr(t, ':');
		int dt, found = 0;

		if (!colon || o->ncases == MAX_CASES)
			return -1;
		*colon = '\0';
		dt = bench_dtype_find(t);
		if (dt < 0)
			return -1;
		for (size_t i = 0; i < sizeof(redops) / sizeof(redops[0]); i++) {
			if (!strcmp(colon + 1, redops[i].name)) {
				o->cases[o->ncases].dtype = dt;
				o->cases[o->ncases].redop = redops[i].op;
				o->ncases++;
				found = 1;
			}
		}
		if (!found)
			return -1;
	}
	return 0;
}

/* A hung phase is only worth its time with the ranks' stacks: every
 * thread of every rank, taken with cuda-gdb (the GPU hosts have no gdb)
 * while the ranks still hang, all ranks at once. */
static void dump_stacks(const struct bench_opts *o, int phase, const pid_t *pids)
{
	char cmd[8192];
	size_t n = 0;

	if (!o->stack_dir)
		return;
	n += (size_t)snprintf(cmd + n, sizeof(cmd) - n, "command -v cuda-gdb >/dev/null || exit 0; ");
	for (int r = 0; r < o->nranks && n < sizeof(cmd) - 512; r++)
		n += (size_t)snprintf(cmd + n, sizeof(cmd) - n,
			"timeout 120 cuda-gdb -q -p %d -batch -ex 'thread apply all bt' "
			">'%s/stacks.%s.rank%d.txt' 2>&1 & ", (int)pids[r], o->stack_dir,
			phase == PHASE_NATIVE ? "native" : "plugin", r);
	snprintf(cmd + n, sizeof(cmd) - n, "wait");
	fprintf(stderr, "taking the ranks' stacks into %s\n", o->stack_dir);
	if (system(cmd) != 0)
		fprintf(stderr, "stack dump failed\n");
}

struct phase_run {
	const struct bench_opts *o;
	int phase, out_fd;
};

/* GPU `rank` of the job: the rank-th entry of CUDA_VISIBLE_DEVICES, or
 * GPU `rank` when it is unset. */
static void job_gpu(int rank, char *id, size_t len)
{
	const char *all = getenv("CUDA_VISIBLE_DEVICES");
	char buf[256];
	char *save = NULL;
	int i = 0;

	snprintf(id, len, "%d", rank);
	if (!all)
		return;
	snprintf(buf, sizeof(buf), "%s", all);
	for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save), i++) {
		if (i == rank) {
			snprintf(id, len, "%s", t);
			return;
		}
	}
}

/* -V: the rank's process sees its own GPU only, as under a scheduler's
 * per-task GPU binding (Slurm --gpus-per-task=1).  -W: its own first (the
 * rank's device 0) and the next rank's, a list of two that hides the
 * other peers, as with two GPUs per task.  Runs in the forked rank before
 * it touches CUDA. */
static void see_own_gpu_only(int rank, int nranks, int count)
{
	char own[64], next[64], list[160];

	job_gpu(rank, own, sizeof(own));
	job_gpu((rank + 1) % nranks, next, sizeof(next));
	if (count == 2 && nranks > 1)
		snprintf(list, sizeof(list), "%s,%s", own, next);
	else
		snprintf(list, sizeof(list), "%s", own);
	setenv("CUDA_VISIBLE_DEVICES", list, 1);
}

/* -H: blocks of consecutive ranks pose as hosts of their own, through the
 * host id NCCL reads (NCCL_HOSTID): NCCL then joins the GPUs of a block
 * with its own P2P and SHM transports and the blocks over the network, as
 * in a job across hosts.  The plugin sees through it (its peers are still
 * on its host), which is what keeps its copy-engine path here; with
 * NCCL_SYMMEM_BACKEND=tcp it takes the path between hosts. */
static void pose_as_host(int rank, int nranks, int hosts)
{
	char id[64];

	snprintf(id, sizeof(id), "nccl-bench-host-%d", rank * hosts / nranks);
	setenv("NCCL_HOSTID", id, 1);
}

static void phase_prepare(void *arg, int rank)
{
	const struct phase_run *p = arg;

	if (p->o->own_gpu_only)
		see_own_gpu_only(rank, p->o->nranks, p->o->own_gpu_only);
	if (p->o->hosts)
		pose_as_host(rank, p->o->nranks, p->o->hosts);
	bench_route_env(p->phase == PHASE_PLUGIN,
			p->o->env_plugin ? ROUTE_ENV_PLUGIN :
			p->o->hosts > 0 ? ROUTE_HOSTS_ONLY : ROUTE_ALL,
			p->o->plugin, p->o->plugin_env, p->o->nplugin_env);
}

static int phase_rank(void *arg, int rank, ncclUniqueId id)
{
	const struct phase_run *p = arg;

	return bench_rank_main(p->o, p->phase, rank, id, p->out_fd);
}

static void phase_hung(void *arg, const pid_t *pids)
{
	const struct phase_run *p = arg;

	dump_stacks(p->o, p->phase, pids);
}

/* Forks the ranks of one phase and waits for them, killing them all at
 * the deadline.  Returns how many ranks failed. */
static int run_phase(const struct bench_opts *o, int phase, int out_fd)
{
	struct phase_run p = { .o = o, .phase = phase, .out_fd = out_fd };
	struct bench_fork f = {
		.nranks = o->nranks, .timeout = o->timeout, .arg = &p,
		.label = phase == PHASE_NATIVE ? "native phase" : "plugin phase",
		.prepare = phase_prepare, .run = phase_rank, .hung = phase_hung,
	};

	bench_barrier_reset(o->barrier);
	return bench_fork_ranks(&f);
}

/* The slowest rank's time and all ranks' errors for one run. */
struct row {
	int op, dtype, redop, timed;
	uint64_t bytes;
	double us[PHASE_COUNT];
	uint64_t errors[PHASE_COUNT];
	int ranks[PHASE_COUNT];
};

static struct row *find_row(struct row *rows, int *nrows, const struct bench_result *r)
{
	for (int i = 0; i < *nrows; i++)
		if (rows[i].op == r->op && rows[i].dtype == r->dtype && rows[i].redop == r->redop &&
		    rows[i].bytes == r->bytes && rows[i].timed == r->timed)
			return &rows[i];
	memset(&rows[*nrows], 0, sizeof(rows[0]));
	rows[*nrows].op = r->op;
	rows[*nrows].dtype = r->dtype;
	rows[*nrows].redop = r->redop;
	rows[*nrows].bytes = r->bytes;
	rows[*nrows].timed = r->timed;
	return &rows[(*nrows)++];
}

static double busbw(const struct bench_opts *o, const struct row *w, int phase)
{
	struct bench_shape s;

	if (w->us[phase] <= 0 || w->bytes == 0)
		return 0;
	bench_shape(w->op, o->nranks, bench_dtypes[w->dtype].size, w->bytes, &s);
	return (double)w->bytes / (w->us[phase] * 1e-6) / 1e9 * s.bus_factor;
}

/* Setup times, slowest rank: ncclCommInitRank, and each op's first call
 * (when NCCL connects: its first use), natively and through the plugin. */
static void print_setup(const struct bench_opts *o, const struct row *rows, int nrows)
{
	int header = 0;

	for (int i = 0; i < nrows; i++) {
		const struct row *w = &rows[i];

		if (w->timed != BENCH_SETUP)
			continue;
		if (!header++)
			printf("\n# setup, slowest rank (ms): ncclCommInitRank, then each op's first "
			       "call (NCCL connects at first use)\n# %-26s %10s %10s\n", "step",
			       "native", "plugin");
		printf("  %-26s %10.1f %10.1f\n",
		       w->op == OP_COUNT ? "ncclCommInitRank" : bench_op_name(w->op),
		       o->phases[PHASE_NATIVE] ? w->us[PHASE_NATIVE] / 1e3 : -1.0,
		       o->phases[PHASE_PLUGIN] ? w->us[PHASE_PLUGIN] / 1e3 : -1.0);
	}
}

/* Prints the tables; returns the number of runs with errors or missing ranks. */
static int print_rows(const struct bench_opts *o, struct row *rows, int nrows)
{
	int bad = 0, checked = 0, last_op = -1;
	/* -L: every rank reports each op once per communicator cycle. */
	int expect = o->nranks * (o->cycles > 0 ? o->cycles : 1);

	for (int i = 0; i < nrows; i++) {
		struct row *w = &rows[i];
		double nb = busbw(o, w, PHASE_NATIVE), pb = busbw(o, w, PHASE_PLUGIN);
		uint64_t errs = 0;

		for (int p = 0; p < PHASE_COUNT; p++) {
			if (!o->phases[p])
				continue;
			checked += w->timed != BENCH_SETUP;
			errs += w->errors[p];
			/* Setup rows come once per rank, cycles or not. */
			if (w->ranks[p] != (w->timed == BENCH_SETUP ? o->nranks : expect))
				bad++;
		}
		bad += errs != 0;
		if (w->timed != 1)
			continue;
		if (w->op != last_op) {
			printf("\n# %s, %s %s, %d ranks%s%s%s%s\n", bench_op_name(w->op),
			       bench_dtypes[w->dtype].name, bench_redop_name((ncclRedOp_t)w->redop),
			       o->nranks,
			       o->graph ? (o->graph_sync ? ", CUDA graph (sync per replay)" : ", CUDA graph") : "",
			       o->registered ? ", registered buffers" : "",
			       o->cumem_bufs ? ", ncclMemAlloc buffers" : "",
			       o->own_gpu_only == 1 ? ", each rank sees its own GPU only" :
			       o->own_gpu_only == 2 ? ", each rank sees its own GPU and the next" : "");
			printf("# %12s %12s %12s %12s %12s %7s %7s\n", "size(B)", "native_us",
			       "native_GB/s", "plugin_us", "plugin_GB/s", "ratio", "errors");
			last_op = w->op;
		}
		char ratio[16] = "-";

		if (nb > 0 && pb > 0)
			snprintf(ratio, sizeof(ratio), "%.3f", pb / nb);
		else if (w->bytes == 0 && w->us[PHASE_NATIVE] > 0 && w->us[PHASE_PLUGIN] > 0)
			snprintf(ratio, sizeof(ratio), "%.3f", w->us[PHASE_NATIVE] / w->us[PHASE_PLUGIN]);
		printf("  %12llu %12.1f %12.2f %12.1f %12.2f %7s %7llu\n",
		       (unsigned long long)w->bytes, w->us[PHASE_NATIVE], nb, w->us[PHASE_PLUGIN], pb,
		       ratio, (unsigned long long)errs);
	}
	print_setup(o, rows, nrows);
	printf("\n# extra checks (dtype:redop at 3 sizes):");
	for (int i = 0, n = 0; i < nrows; i++) {
		struct row *w = &rows[i];

		if (w->timed)
			continue;
		if (n++ % 6 == 0)
			printf("\n#  ");
		printf(" %s/%s/%s:%s", bench_op_name(w->op), bench_dtypes[w->dtype].name,
		       bench_redop_name((ncclRedOp_t)w->redop),
		       w->errors[0] + w->errors[1] ? "WRONG" : "ok");
	}
	printf("\n# %d checked runs\n", checked);
	return bad;
}

/* Timed sizes an op cannot run at (its buffers do not divide among the
 * ranks: bench_rank.c's one() reports nothing for them) and extra cases
 * that cannot be checked exactly with this rank count are listed; an op
 * with no non-zero size left fails the run instead of passing unchecked.
 * Returns the number of such ops. */
static int print_skipped(const struct bench_opts *o)
{
	struct bench_shape s;
	struct bench_pattern pat;
	int empty = 0;

	for (int op = 0; op < OP_COUNT; op++) {
		int ran = 0, header = 0;

		if (!o->ops[op])
			continue;
		for (int i = 0; i < o->nsizes; i++) {
			if (bench_shape(op, o->nranks, bench_dtypes[0].size, o->sizes[i], &s)) {
				ran += o->sizes[i] > 0;
				continue;
			}
			if (!header++)
				printf("# %s: not run (does not divide among %d ranks):", bench_op_name(op),
				       o->nranks);
			printf(" %zu", o->sizes[i]);
		}
		if (header)
			printf("\n");
		if (!ran && !o->cycles) {
			printf("# %s: no non-zero size ran: nothing checked\n", bench_op_name(op));
			empty++;
		}
	}
	for (int k = 0; k < o->ncases; k++) {
		if (bench_pattern_make(&pat, o->cases[k].dtype, o->cases[k].redop, o->nranks, 0)) {
			printf("# %s:%s not checked: not exact with %d ranks\n",
			       bench_dtypes[o->cases[k].dtype].name,
			       bench_redop_name(o->cases[k].redop), o->nranks);
			continue;
		}
		bench_pattern_free(&pat);
	}
	return empty;
}

/* -j: the timed rows as JSON lines, for scripts; the tables stay as
 * they are.  Returns 0, or -1 when the file could not be written. */
static int write_json(const struct bench_opts *o, const struct row *rows, int nrows, FILE *f)
{
	char version[32] = "unknown";
	int v = 0;
	struct bench_json_run run = {
		.nccl_version = version, .ranks = o->nranks, .iters = o->iters, .graph = o->graph,
		.registered = o->registered, .cumem_bufs = o->cumem_bufs, .hosts = o->hosts,
		.plugin_env = o->plugin_env, .nplugin_env = o->nplugin_env,
		.route = o->env_plugin ? "env-plugin" : o->hosts ? "hosts-only" : "net-plugin",
	};

	/* The library this process links, as the ranks do; it starts nothing. */
	if (ncclGetVersion(&v) == ncclSuccess && v > 0)
		snprintf(version, sizeof(version), "%d.%d.%d", v / 10000, v / 100 % 100, v % 100);
	for (int i = 0; i < nrows; i++) {
		const struct row *w = &rows[i];
		struct bench_json_row j = {
			.op = bench_op_name(w->op), .dtype = bench_dtypes[w->dtype].name,
			.redop = bench_redop_name((ncclRedOp_t)w->redop), .bytes = w->bytes,
		};

		if (w->timed != 1)
			continue;
		for (int p = 0; p < PHASE_COUNT; p++) {
			j.ran[p] = o->phases[p] && w->ranks[p] > 0;
			j.us[p] = w->us[p];
			j.busbw[p] = busbw(o, w, p);
			j.errors += w->errors[p];
		}
		if (bench_json_row(f, &run, &j))
			return -1;
	}
	return fflush(f) ? -1 : 0;
}

static void add_sizes(struct bench_opts *o, size_t min, size_t max, size_t factor)
{
	size_t s = min;

	o->nsizes = 0;
	if (s == 0) {
		o->sizes[o->nsizes++] = 0;
		s = 8;
	}
	for (; s <= max && o->nsizes < MAX_SIZES; s *= factor)
		o->sizes[o->nsizes++] = s;
	/* The sweep always ends at the largest size asked for. */
	if (o->nsizes < MAX_SIZES && o->nsizes > 0 && o->sizes[o->nsizes - 1] < max)
		o->sizes[o->nsizes++] = max;
}

int main(int argc, char **argv)
{
	struct bench_opts o = {
		.iters = 20, .warmup = 3, .plugin = "symmem", .timeout = 900,
		.phases = { 1, 1 },
	};
	size_t min = 8, max = 64 << 20, factor = 4;
	struct bench_result rec;
	struct row *rows;
	int opt, nrows = 0, failed = 0, bad;
	FILE *results, *json = NULL;
	const char *json_path = NULL;

	parse_ops("all", o.ops);
	parse_cases(default_cases, &o);
	while ((opt = getopt(argc, argv, "n:b:e:f:o:i:w:GYTRAVWZH:m:c:P:E:t:S:L:j:")) != -1) {
		switch (opt) {
		case 'n': o.nranks = atoi(optarg); break;
		case 'b': min = strtoull(optarg, NULL, 0); break;
		case 'e': max = strtoull(optarg, NULL, 0); break;
		case 'f': factor = strtoull(optarg, NULL, 0); break;
		case 'o': if (parse_ops(optarg, o.ops)) usage(argv[0]); break;
		case 'i': o.iters = atoi(optarg); break;
		case 'w': o.warmup = atoi(optarg); break;
		case 'G': o.graph = 1; break;
		case 'Y': o.graph_sync = 1; break;
		case 'T': o.iter_times = 1; break;
		case 'R': o.registered = 1; break;
		case 'A': o.cumem_bufs = 1; break;
		case 'V': o.own_gpu_only = 1; break;
		case 'W': o.own_gpu_only = 2; break;
		case 'H': o.hosts = atoi(optarg); break;
		case 'm':
			o.phases[PHASE_NATIVE] = strcmp(optarg, "plugin") != 0;
			o.phases[PHASE_PLUGIN] = strcmp(optarg, "native") != 0;
			break;
		case 'c': if (parse_cases(optarg, &o)) usage(argv[0]); break;
		case 'P': o.plugin = optarg; break;
		case 'Z': o.env_plugin = 1; break;
		case 'E':
			if (o.nplugin_env == 16 || !strchr(optarg, '='))
				usage(argv[0]);
			o.plugin_env[o.nplugin_env++] = optarg;
			break;
		case 't': o.timeout = atof(optarg); break;
		case 'S': o.stack_dir = optarg; break;
		case 'L': o.cycles = atoi(optarg); break;
		case 'j': json_path = optarg; break;
		default: usage(argv[0]);
		}
	}
	if (factor < 2 || o.iters < 1)
		usage(argv[0]);
	add_sizes(&o, min, max, factor);
	if (o.nranks <= 0)
		o.nranks = bench_count_gpus();
	if (o.nranks < 1 || o.nranks > 64) {
		fprintf(stderr, "no GPUs (or more than 64)\n");
		return 2;
	}
	if (o.hosts < 0 || o.hosts > o.nranks) {
		fprintf(stderr, "-H %d: between 1 and the %d ranks\n", o.hosts, o.nranks);
		return 2;
	}
	/* The env plugin routes GPUs of one host through the net: it would
	 * undo -H's NCCL P2P inside each posed host. */
	if (o.hosts && o.env_plugin) {
		fprintf(stderr, "-Z and -H do not go together\n");
		return 2;
	}
	/* Opened before the phases run, so a wrong path fails at once; nothing
	 * is written to it before the ranks are forked. */
	if (json_path && !(json = fopen(json_path, "a"))) {
		fprintf(stderr, "-j %s: %s\n", json_path, strerror(errno));
		return 2;
	}
	o.barrier = bench_barrier_new(o.nranks);
	if (!o.barrier) {
		perror("the ranks' barrier (mmap)");
		return 2;
	}
	/* Odd element counts at the small and middle size; 8 MiB per rank. */
	o.case_sizes[0] = (size_t)o.nranks * 8 * 5;
	o.case_sizes[1] = (size_t)o.nranks * 8 * 12347;
	o.case_sizes[2] = (size_t)o.nranks * (8u << 20);
	results = tmpfile();
	if (!results)
		return 2;
	fflush(stdout);
	for (int p = 0; p < PHASE_COUNT; p++)
		if (o.phases[p])
			failed += run_phase(&o, p, fileno(results));
	rewind(results);
	/* Per op: its sizes, its checks, the first call's check and setup time;
	 * plus ncclCommInitRank's. */
	rows = calloc((OP_COUNT + 1) * (MAX_SIZES + 3 * MAX_CASES + 2), sizeof(*rows));
	if (!rows)
		return 2;
	while (fread(&rec, sizeof(rec), 1, results) == 1) {
		struct row *w = find_row(rows, &nrows, &rec);

		if (rec.phase < 0 || rec.phase >= PHASE_COUNT)
			continue;
		if (rec.time_us > w->us[rec.phase])
			w->us[rec.phase] = rec.time_us;
		w->errors[rec.phase] += rec.errors;
		w->ranks[rec.phase]++;
	}
	if (o.hosts)
		printf("# nccl_bench: the ranks pose as %d hosts (NCCL_HOSTID); the network only "
		       "between them\n", o.hosts);
	printf("# nccl_bench: %d ranks, iters %d, phases:%s%s (plugin: ", o.nranks, o.iters,
	       o.phases[0] ? " native" : "", o.phases[1] ? " plugin" : "");
	if (o.env_plugin)
		printf("NCCL_ENV_PLUGIN=%s only", o.plugin);
	else
		printf("NCCL_NET_PLUGIN=%s NCCL_NET=symmem%s", o.plugin,
		       o.hosts ? "" : " NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1");
	for (int i = 0; i < o.nplugin_env; i++)
		printf(" %s", o.plugin_env[i]);
	printf(")\n");
	bad = print_rows(&o, rows, nrows);
	bad += print_skipped(&o);
	if (json) {
		int werr = write_json(&o, rows, nrows, json);

		if (fclose(json) || werr) {
			fprintf(stderr, "-j %s: not written: %s\n", json_path, strerror(errno));
			bad++;
		}
	}
	free(rows);
	fclose(results);
	if (nrows == 0)
		bad++;
	printf("nccl_bench: %s (%d failed rank process(es), %d wrong or incomplete run(s))\n",
	       failed || bad ? "FAIL" : "PASS", failed, bad);
	return failed || bad ? 1 : 0;
}
