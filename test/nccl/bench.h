/* The project's NCCL driver: one process per GPU, every collective checked
 * element by element and timed, natively and through the plugin in one
 * invocation.  bench_main.c runs the phases and prints the tables,
 * bench_rank.c is what each rank does, bench_data.c makes inputs and
 * expected values. */
#ifndef SYMMEM_BENCH_H
#define SYMMEM_BENCH_H

#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>
#include <nccl.h>

enum op {
	OP_ALLREDUCE,
	OP_BROADCAST,
	OP_REDUCE,
	OP_ALLGATHER,
	OP_REDUCESCATTER,
	OP_ALLTOALL,
	OP_SENDRECV,
	OP_COUNT
};

enum phase {
	PHASE_NATIVE,
	PHASE_PLUGIN,
	PHASE_COUNT
};

#define MAX_SIZES 40
#define MAX_CASES 24
#define BENCH_ROOT 0

/* One data type and reduction checked beside the timed float sums. */
struct bench_case {
	int dtype;		/* index into bench_dtypes */
	ncclRedOp_t redop;
};

struct bench_opts {
	int nranks;
	int ops[OP_COUNT];		/* which to run */
	size_t sizes[MAX_SIZES];	/* timed sweep, bytes as nccl-tests counts them */
	int nsizes;
	int iters, warmup;
	int graph;			/* capture each op into a CUDA graph */
	int graph_sync;			/* synchronize after each graph replay */
	int iter_times;			/* -T: each rank times each iteration alone (stderr) */
	struct bench_barrier *barrier;	/* the ranks start timing together */
	int cycles;			/* -L: communicator create/destroy cycles instead of the matrix */
	int registered;			/* ncclCommRegister the buffers */
	int cumem_bufs;			/* -A: buffers from ncclMemAlloc (cuMem) instead of cudaMalloc */
	int own_gpu_only;		/* -V: each rank's process sees its own GPU only, -W: its own
					 * and the next rank's (2: a list that hides the others) */
	int hosts;			/* -H: the ranks pose as this many hosts (0: one, real) */
	int phases[PHASE_COUNT];
	struct bench_case cases[MAX_CASES];
	int ncases;
	size_t case_sizes[3];		/* where the extra cases are checked */
	const char *plugin;		/* NCCL_NET_PLUGIN for the plugin phase (-Z: NCCL_ENV_PLUGIN) */
	int env_plugin;			/* -Z: the plugin phase sets NCCL_ENV_PLUGIN only */
	char *plugin_env[16];		/* extra NAME=VALUE for the plugin phase */
	int nplugin_env;
	double timeout;			/* seconds per phase */
	const char *stack_dir;		/* where hung ranks' stacks go (cuda-gdb), or NULL */
};

/* What a rank reports for one run (written to the results file).  timed:
 * 0 a check, 1 a timed size, BENCH_SETUP a setup step (op OP_COUNT:
 * ncclCommInitRank; another op: its first call, when NCCL connects). */
#define BENCH_SETUP 2
struct bench_result {
	int32_t phase, rank, op, dtype, redop, timed;
	uint64_t bytes;
	double time_us;
	uint64_t errors;
};

struct bench_dtype {
	ncclDataType_t nccl;
	const char *name;
	size_t size;
	double exact;		/* every integer up to this is exact */
	int is_int;
};

extern const struct bench_dtype bench_dtypes[];
extern const int bench_ndtypes;
int bench_dtype_find(const char *name);
const char *bench_op_name(int op);
const char *bench_redop_name(ncclRedOp_t r);

/* Element counts and bytes per buffer for an op at nccl-tests size `bytes`;
 * 0 when the size does not divide evenly. */
struct bench_shape {
	size_t send_count, recv_count;	/* elements */
	size_t unit;			/* elements per rank block */
	double bus_factor;
};
int bench_shape(int op, int nranks, size_t elsize, size_t bytes, struct bench_shape *s);

/* Inputs: rank r's element k is val(r, k), a small integer chosen so that
 * every result is exact in the data type.  Expected outputs come from
 * per-rank tables indexed by k % period. */
struct bench_pattern {
	int period;
	int nranks;
	size_t elsize;
	uint8_t *tab;		/* [nranks][period][elsize] encoded inputs */
	uint8_t *red;		/* [period][elsize] the reduction over ranks */
};

/* Returns 0, or -1 if the combination cannot be checked exactly here
 * (e.g. prod overflowing int8, avg with a rank count not a power of two). */
int bench_pattern_make(struct bench_pattern *p, int dtype, ncclRedOp_t redop, int nranks,
		       int seed);
void bench_pattern_free(struct bench_pattern *p);
void bench_fill(const struct bench_pattern *p, int rank, uint8_t *dst, size_t count);
/* Counts the elements of `out` that differ from what `rank` must hold. */
uint64_t bench_check(const struct bench_pattern *p, int op, int rank, const uint8_t *out,
		     const struct bench_shape *s, int report);

/* Enqueues one op on `stream`: buffers as bench_shape() sizes them. */
ncclResult_t bench_issue(ncclComm_t comm, cudaStream_t stream, int op, int dtype,
			 ncclRedOp_t redop, const struct bench_shape *s, void *sbuf, void *rbuf,
			 int rank, int nranks);

/* The op in flight on `stream` has finished (1), or the communicator
 * reports an error (-1, *err set), or neither yet (0): what nccl-tests and
 * PyTorch's watchdog look at while they wait. */
int bench_poll_op(ncclComm_t comm, cudaStream_t stream, ncclResult_t *err);

int bench_rank_main(const struct bench_opts *o, int phase, int rank, ncclUniqueId id, int out_fd);

/* bench_fork.c: one process per GPU. */
#include <sys/types.h>

struct bench_fork {
	int nranks;
	double timeout;			/* seconds until every rank is killed */
	const char *label;		/* names the phase in messages */
	void *arg;
	void (*prepare)(void *arg, int rank);	/* in the child, before NCCL runs */
	int (*run)(void *arg, int rank, ncclUniqueId id);	/* the child's exit status */
	void (*hung)(void *arg, const pid_t *pids);	/* at the deadline, or NULL */
};

/* Forks the ranks, hands them rank 0's NCCL id and waits; returns how many
 * failed (a killed rank counts). */
int bench_fork_ranks(const struct bench_fork *f);
/* Seconds on CLOCK_MONOTONIC. */
double bench_now(void);
/* A barrier of the forked ranks in shared memory, made before the fork:
 * -T starts every iteration on every rank together, so one rank's time is
 * that iteration's alone, not the backlog of the ones before it. */
struct bench_barrier *bench_barrier_new(int nranks);
/* Empties it for a new set of ranks (one that died may have left a count). */
void bench_barrier_reset(struct bench_barrier *b);
/* Returns 0, or -1 when the others did not come within `seconds`. */
int bench_barrier_wait(struct bench_barrier *b, double seconds);
/* GPUs visible, asked in a child so the caller stays CUDA-free; -1 on error. */
int bench_count_gpus(void);
/* How a plugin run is routed. */
enum bench_route {
	ROUTE_ALL = 0,		/* NCCL_NET_PLUGIN=plugin, NCCL_NET=symmem, P2P and SHM off */
	ROUTE_HOSTS_ONLY,	/* the same with P2P and SHM on: the network between hosts only */
	ROUTE_ENV_PLUGIN,	/* NCCL_ENV_PLUGIN=plugin alone: the library's env plugin sets
				 * the rest, NCCL_NCHANNELS_PER_NET_PEER included */
};

/* Routes NCCL through the plugin as `route` says, then adds the `extra`
 * NAME=VALUE strings, or clears those variables for native runs. */
void bench_route_env(int through_plugin, enum bench_route route, const char *plugin,
		     char *const *extra, int nextra);

#endif
