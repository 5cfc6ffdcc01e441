/* GPU check: one rank of a job dies (SIGKILL) in the middle of a
 * collective, as a rank does when the kernel's OOM killer or a crash takes
 * it; or, with -s, stops taking part (stuck in its own code, alive, its
 * connections open).  One process per GPU runs one op of one size back to back; the last
 * rank kills itself `delay` ms into that loop.  Every other rank polls
 * ncclCommGetAsyncError while its op is in flight (as PyTorch's watchdog
 * does), calls ncclCommAbort once it sees an error or once `deadline`
 * seconds have passed since the kill, and exits.
 *
 * Natively and through the plugin in one invocation.  Native NCCL is
 * printed for comparison only.  Through the plugin every survivor must see
 * an error before the deadline (a neighbour of the dead rank from its
 * connection, the others from their neighbours' aborts closing theirs),
 * every abort must return, and no copy helper of the job may outlive it.
 * With -s the survivors must see no error (a slow peer is not one: the
 * wait goes on, reported in the log) and every abort must still return.
 *
 * With -k the survivors go on, as fault-tolerant training does: once a
 * survivor sees the error (or the deadline passes: a rank with no
 * connection to the victim learns nothing while its neighbours stop
 * taking part), the survivors meet on the board.  If none of them saw an
 * error they call ncclCommShrink with NCCL_SHRINK_ABORT to drop the
 * victim.  NCCL 2.28 refuses to shrink a communicator whose network
 * reported an error (ncclCommEnsureReady returns it; measured with NCCL's
 * own Socket net too), so where one saw it they all make a new
 * communicator with ncclCommInitRank instead, as an elastic restart does
 * (shrink is collective: one rank refused would leave the others waiting
 * in it), after aborting the old one.  Either way they run SHRINK_OPS
 * ops on the new communicator (every element checked, poisoned output),
 * destroy it and abort the old one if it is still there.  Through the plugin a neighbour must also have seen the error.  On
 * 2 GPUs the new communicator has one rank: only the old communicator's
 * end goes through the plugin.  Exit status 0 only when everything asked
 * for held.
 *
 * Usage: rank_death [-n ranks] [-o op] [-b bytes] [-d delay_ms] [-s] [-k]
 *                   [-t deadline_s] [-m native|plugin|both] [-P plugin]
 *                   [-E NAME=VALUE]... */
#include <dirent.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cuda_runtime_api.h>

#include "bench.h"

#define MAX_RANKS 64
#define MAX_HELPERS 256
#define SHRINK_OPS 3
#define SHRINK_OP_LIMIT_S 60.0

/* What each rank saw, in memory the forked ranks share with the parent. */
struct survivor {
	int32_t outcome;	/* OUTCOME_* */
	int32_t error;		/* ncclResult_t seen */
	int32_t ops;		/* ops completed after the start line */
	int32_t aborted;	/* ncclCommAbort returned */
	double error_s;		/* seen this long after the kill */
	double abort_s;		/* ncclCommAbort took this long */
	int32_t shrink_error;	/* -k: ncclCommShrink's or ncclCommInitRank's result, -1 before */
	int32_t reinit;		/* -k: went on with a new ncclCommInitRank */
	int32_t after_ok;	/* -k: ops on the new communicator all correct */
	uint64_t after_wrong;	/* -k: wrong elements in them */
	double shrink_s;	/* -k: the new communicator took this long */
};

enum { OUTCOME_NONE, OUTCOME_ERROR, OUTCOME_DEADLINE, OUTCOME_NO_KILL };

struct board {
	_Atomic double killed_at;	/* bench_now() of the kill, 0 before */
	struct survivor rank[MAX_RANKS];
	ncclUniqueId next_id;		/* -k: the survivors' new communicator */
	_Atomic int next_id_ready;
	_Atomic int survivors_in;	/* -k: survivors at the meeting */
	_Atomic int any_error;		/* -k: one of them saw an error */
};

struct death_opts {
	int nranks, op, through_plugin;
	int stuck;			/* -s: the victim stops taking part, alive */
	int shrink;			/* -k: the survivors shrink and go on */
	size_t bytes;
	double delay_ms, deadline_s;
	const char *plugin;
	char *env[16];
	int nenv;
	struct board *board;
	struct bench_barrier *barrier;
};

static void die(int rank, const char *what, const char *why)
{
	fprintf(stderr, "rank %d: %s: %s\n", rank, what, why);
	exit(2);
}

static void prepare(void *arg, int rank)
{
	const struct death_opts *o = arg;

	(void)rank;
	bench_route_env(o->through_plugin, ROUTE_ALL, o->plugin, o->env, o->nenv);
}

/* The victim: keeps the op queued until `delay` has passed, then dies
 * with it in flight. */
static void victim(const struct death_opts *o, ncclComm_t comm, cudaStream_t stream,
		   const struct bench_shape *s, void *sb, void *rb, int rank)
{
	double kill_at = bench_now() + o->delay_ms / 1e3;

	while (bench_now() < kill_at) {
		if (bench_issue(comm, stream, o->op, 0, ncclSum, s, sb, rb, rank, o->nranks) !=
		    ncclSuccess)
			die(rank, "victim", "op failed before the kill");
		while (cudaStreamQuery(stream) == cudaErrorNotReady && bench_now() < kill_at)
			usleep(100);
	}
	atomic_store(&o->board->killed_at, bench_now());
	if (!o->stuck)
		raise(SIGKILL);
	/* Stuck: no more ops from here, connections open, until the others
	 * have given up and aborted. */
	for (int r = 0; r < o->nranks - 1; r++)
		while (!o->board->rank[r].aborted && bench_now() < kill_at + o->deadline_s + 120)
			usleep(10000);
	_exit(0);	/* as a process ends that nobody waits on */
}

/* Waits for the op on `stream` with a limit; 0 when it finished cleanly. */
static int wait_op(ncclComm_t comm, cudaStream_t stream, double limit_s)
{
	double end = bench_now() + limit_s;
	ncclResult_t err = ncclSuccess;
	int state;

	while ((state = bench_poll_op(comm, stream, &err)) == 0 && bench_now() < end)
		usleep(100);
	return state == 1 ? 0 : -1;
}

/* -k: one op of the job's kind on the shrunk communicator, checked
 * element by element; returns the wrong elements, or -1 when it failed. */
static int64_t checked_op(const struct death_opts *o, ncclComm_t comm, cudaStream_t stream,
			  int rank, int nranks, int round)
{
	int dtype = bench_dtype_find("float");
	size_t step = (size_t)nranks * 4096, bytes = o->bytes / step * step;
	struct bench_pattern pat;
	struct bench_shape s;
	uint8_t *host = NULL;
	void *sb = NULL, *rb = NULL;
	int64_t wrong = -1;

	if (!bench_shape(o->op, nranks, sizeof(float), bytes, &s) ||
	    bench_pattern_make(&pat, dtype, ncclSum, nranks, 7 + round))
		return -1;
	host = malloc((s.send_count > s.recv_count ? s.send_count : s.recv_count) * sizeof(float));
	if (!host || cudaMalloc(&sb, s.send_count * sizeof(float)) != cudaSuccess ||
	    cudaMalloc(&rb, s.recv_count * sizeof(float)) != cudaSuccess)
		goto out;
	bench_fill(&pat, rank, host, s.send_count);
	if (cudaMemcpy(sb, host, s.send_count * sizeof(float), cudaMemcpyHostToDevice) !=
	    cudaSuccess || cudaMemset(rb, 0xa5, s.recv_count * sizeof(float)) != cudaSuccess)
		goto out;
	if (bench_issue(comm, stream, o->op, dtype, ncclSum, &s, sb, rb, rank, nranks) !=
	    ncclSuccess || wait_op(comm, stream, SHRINK_OP_LIMIT_S))
		goto out;
	if (cudaMemcpy(host, rb, s.recv_count * sizeof(float), cudaMemcpyDeviceToHost) ==
	    cudaSuccess)
		wrong = (int64_t)bench_check(&pat, o->op, rank, host, &s, 1);
out:
	cudaFree(sb);
	cudaFree(rb);
	free(host);
	bench_pattern_free(&pat);
	return wrong;
}

/* -k: a new communicator of the survivors, as after an elastic restart:
 * survivor 0 makes the id, the others take it from the board. */
static ncclResult_t survivors_comm(const struct death_opts *o, int rank, ncclComm_t *next)
{
	double end = bench_now() + 60;

	if (rank == 0) {
		if (ncclGetUniqueId(&o->board->next_id) != ncclSuccess)
			return ncclSystemError;
		atomic_store(&o->board->next_id_ready, 1);
	}
	while (!atomic_load(&o->board->next_id_ready)) {
		if (bench_now() > end)
			return ncclSystemError;
		usleep(1000);
	}
	return ncclCommInitRank(next, o->nranks - 1, o->board->next_id, rank);
}

/* -k: drop the victim and go on with the others (the victim is the last
 * rank, so every survivor keeps its rank number). */
static void shrink_and_go_on(const struct death_opts *o, ncclComm_t *comm, int rank,
			     struct survivor *me)
{
	int victim_rank = o->nranks - 1, ok = 0;
	ncclComm_t next = NULL;
	cudaStream_t stream;
	double t0 = bench_now();
	ncclResult_t err;

	me->shrink_error = -1;
	if (me->outcome == OUTCOME_ERROR)
		atomic_store(&o->board->any_error, 1);
	atomic_fetch_add(&o->board->survivors_in, 1);
	while (atomic_load(&o->board->survivors_in) < o->nranks - 1) {
		if (bench_now() - t0 > 60)
			return;
		usleep(1000);
	}
	if (atomic_load(&o->board->any_error)) {
		/* The old communicator goes first, its kernels with it. */
		t0 = bench_now();
		ncclCommAbort(*comm);
		*comm = NULL;
		me->abort_s = bench_now() - t0;
		me->aborted = 1;
		me->reinit = 1;
		t0 = bench_now();
		err = survivors_comm(o, rank, &next);
	} else {
		t0 = bench_now();
		err = ncclCommShrink(*comm, &victim_rank, 1, &next, NULL, NCCL_SHRINK_ABORT);
	}
	me->shrink_s = bench_now() - t0;
	me->shrink_error = err;
	if (err != ncclSuccess)
		return;
	if (cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) != cudaSuccess) {
		ncclCommAbort(next);
		return;
	}
	for (int i = 0; i < SHRINK_OPS; i++) {
		int64_t wrong = checked_op(o, next, stream, rank, o->nranks - 1, i);

		if (wrong < 0)
			break;
		me->after_wrong += (uint64_t)wrong;
		ok += wrong == 0;
	}
	me->after_ok = ok;
	if (ok == SHRINK_OPS)
		ncclCommDestroy(next);
	else
		ncclCommAbort(next);
	cudaStreamDestroy(stream);
}

/* A survivor: ops back to back until an error, or the deadline after the
 * kill; then (-k) the shrink and the ops after it, and the abort. */
static void survivor(const struct death_opts *o, ncclComm_t comm, cudaStream_t stream,
		     const struct bench_shape *s, void *sb, void *rb, int rank)
{
	struct survivor *me = &o->board->rank[rank];
	double started = bench_now(), t0;
	ncclResult_t err = ncclSuccess;
	int state = 1;

	for (;;) {
		double killed = atomic_load(&o->board->killed_at), now = bench_now();

		if (state == 1) {
			err = bench_issue(comm, stream, o->op, 0, ncclSum, s, sb, rb, rank,
					  o->nranks);
			if (err != ncclSuccess && err != ncclInProgress) {
				state = -1;
			} else {
				me->ops++;
				state = 0;
			}
		} else {
			state = bench_poll_op(comm, stream, &err);
		}
		if (state < 0) {
			me->outcome = OUTCOME_ERROR;
			me->error = err;
			me->error_s = killed > 0 ? now - killed : -1;
			break;
		}
		if (killed > 0 && now - killed > o->deadline_s) {
			me->outcome = OUTCOME_DEADLINE;
			break;
		}
		if (killed == 0 && now - started > o->delay_ms / 1e3 + 60) {
			me->outcome = OUTCOME_NO_KILL;
			break;
		}
		if (state == 0)
			usleep(100);
	}
	if (o->shrink && (me->outcome == OUTCOME_ERROR || me->outcome == OUTCOME_DEADLINE))
		shrink_and_go_on(o, &comm, rank, me);
	if (!comm)
		return;		/* aborted before its successor was made */
	t0 = bench_now();
	ncclCommAbort(comm);
	me->abort_s = bench_now() - t0;
	me->aborted = 1;
}

static int run_rank(void *arg, int rank, ncclUniqueId id)
{
	const struct death_opts *o = arg;
	struct bench_shape s;
	ncclComm_t comm;
	cudaStream_t stream;
	void *sb, *rb;
	ncclResult_t err;

	if (!bench_shape(o->op, o->nranks, sizeof(float), o->bytes, &s))
		die(rank, "size", "does not divide among the ranks");
	if (cudaSetDevice(rank) != cudaSuccess ||
	    cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) != cudaSuccess)
		die(rank, "CUDA", "no device or stream");
	if (cudaMalloc(&sb, s.send_count * sizeof(float)) != cudaSuccess ||
	    cudaMalloc(&rb, s.recv_count * sizeof(float)) != cudaSuccess ||
	    cudaMemset(sb, 0x3c, s.send_count * sizeof(float)) != cudaSuccess ||
	    cudaMemset(rb, 0xa5, s.recv_count * sizeof(float)) != cudaSuccess)
		die(rank, "buffers", "cudaMalloc or cudaMemset failed");
	err = ncclCommInitRank(&comm, o->nranks, id, rank);
	if (err != ncclSuccess)
		die(rank, "ncclCommInitRank", ncclGetErrorString(err));
	/* Two ops that must pass: the connections are up before anyone dies. */
	for (int i = 0; i < 2; i++) {
		err = bench_issue(comm, stream, o->op, 0, ncclSum, &s, sb, rb, rank, o->nranks);
		if (err != ncclSuccess || cudaStreamSynchronize(stream) != cudaSuccess)
			die(rank, "warm-up op", ncclGetErrorString(err));
	}
	if (bench_barrier_wait(o->barrier, 120) != 0)
		die(rank, "start line", "the other ranks did not come");
	if (rank == o->nranks - 1)
		victim(o, comm, stream, &s, sb, rb, rank);
	survivor(o, comm, stream, &s, sb, rb, rank);
	/* The communicator is gone; the process ends without waiting for its
	 * stream, whose kernel the abort ended. */
	return 0;
}

/* The pids of live copy helpers on this host. */
static int list_helpers(pid_t *pids, int max)
{
	DIR *d = opendir("/proc");
	struct dirent *e;
	int n = 0;

	if (!d)
		return 0;
	while ((e = readdir(d)) && n < max) {
		char path[300], comm[64] = "";
		FILE *f;

		if (e->d_name[0] < '0' || e->d_name[0] > '9')
			continue;
		snprintf(path, sizeof(path), "/proc/%s/comm", e->d_name);
		f = fopen(path, "r");
		if (!f)
			continue;
		if (fgets(comm, sizeof(comm), f) && strncmp(comm, "symmem-copyd", 12) == 0)
			pids[n++] = (pid_t)atoi(e->d_name);
		fclose(f);
	}
	closedir(d);
	return n;
}

static int was_listed(pid_t p, const pid_t *pids, int n)
{
	for (int i = 0; i < n; i++)
		if (pids[i] == p)
			return 1;
	return 0;
}

/* Copy helpers alive now that were not before the phase, after giving the
 * ones whose process just died a moment to notice. */
static int helpers_left(const pid_t *before, int nbefore)
{
	pid_t now[MAX_HELPERS];
	int n = 0, left = 0;

	for (int tries = 0; tries < 50; tries++) {
		n = list_helpers(now, MAX_HELPERS);
		left = 0;
		for (int i = 0; i < n; i++)
			left += !was_listed(now[i], before, nbefore);
		if (left == 0)
			break;
		usleep(100000);
	}
	for (int i = 0; i < n; i++)
		if (!was_listed(now[i], before, nbefore))
			fprintf(stderr, "copy helper pid %d outlived its job\n", (int)now[i]);
	return left;
}

static const char *outcome_name(const struct survivor *s)
{
	switch (s->outcome) {
	case OUTCOME_ERROR: return ncclGetErrorString((ncclResult_t)s->error);
	case OUTCOME_DEADLINE: return "no error by the deadline";
	case OUTCOME_NO_KILL: return "the victim never died";
	default: return "no report (rank failed)";
	}
}

/* Runs one phase; returns 0 when every survivor saw an error in time, its
 * abort returned, only the victim's process failed and no helper is left. */
static int run_phase(struct death_opts *o, const char *label)
{
	struct bench_fork f = {
		.nranks = o->nranks, .label = label, .arg = o, .prepare = prepare,
		.run = run_rank, .hung = NULL,
		.timeout = 180 + o->delay_ms / 1e3 + 2 * o->deadline_s,
	};
	pid_t before[MAX_HELPERS];
	int nbefore = list_helpers(before, MAX_HELPERS), failed, left, bad = 0, errors = 0;

	memset(o->board, 0, sizeof(*o->board));
	bench_barrier_reset(o->barrier);
	failed = bench_fork_ranks(&f);
	left = helpers_left(before, nbefore);
	for (int r = 0; r < o->nranks - 1; r++) {
		const struct survivor *s = &o->board->rank[r];
		int ok = s->outcome == (o->stuck ? OUTCOME_DEADLINE : OUTCOME_ERROR) && s->aborted;
		char after[128] = "";

		if (o->shrink) {
			/* A rank with no connection to the victim waits out the
			 * deadline; any one survivor's error is enough. */
			ok = (s->outcome == OUTCOME_ERROR || s->outcome == OUTCOME_DEADLINE) &&
			     s->aborted && s->shrink_error >= 0 && s->after_ok == SHRINK_OPS;
			errors += s->outcome == OUTCOME_ERROR;
			ok = ok && s->shrink_error == ncclSuccess;
			snprintf(after, sizeof(after), " %10.1f  %s %s: %d/%d ops right, %llu wrong",
				 s->shrink_s * 1e3, s->reinit ? "ncclCommInitRank" : "ncclCommShrink",
				 s->shrink_error == ncclSuccess ? "ok" : "failed", s->after_ok,
				 SHRINK_OPS, (unsigned long long)s->after_wrong);
		}
		bad += !ok;
		printf("  %-7s %4d %6d  %-28s %10.1f %10.1f%s\n", label, r, s->ops, outcome_name(s),
		       s->outcome == OUTCOME_ERROR ? s->error_s * 1e3 : -1.0,
		       s->aborted ? s->abort_s * 1e3 : -1.0, after);
	}
	/* Through the plugin a neighbour of the victim must have seen it. */
	if (o->shrink && o->through_plugin && !o->stuck && errors == 0)
		bad++;
	printf("  %-7s %4d %6s  %-28s\n", label, o->nranks - 1, "-",
	       o->stuck ? "stuck (no more ops)" : "killed (SIGKILL)");
	printf("# %s: %d survivor(s) without %s and an abort, %d rank process(es) failed%s, "
	       "%d copy helper(s) left\n", label, bad, o->stuck ? "waiting out the deadline" :
	       "an error", o->stuck ? failed : failed - 1, o->stuck ? "" : " besides the victim",
	       left);
	return bad || failed != (o->stuck ? 0 : 1) || left;
}

static void usage(const char *me)
{
	fprintf(stderr,
		"usage: %s [-n ranks] [-o op] [-b bytes] [-d delay_ms] [-s] [-k] [-t deadline_s] "
		"[-m native|plugin|both] [-P plugin] [-E NAME=VALUE]...\n"
		"  -s: the last rank stops taking part instead of dying\n"
		"  -k: the survivors shrink the communicator and go on without it\n", me);
	exit(2);
}

static int find_op(const char *name)
{
	for (int op = 0; op < OP_COUNT; op++)
		if (strcmp(bench_op_name(op), name) == 0)
			return op;
	return -1;
}

int main(int argc, char **argv)
{
	struct death_opts o = {
		.op = OP_ALLREDUCE, .bytes = 256u << 20, .delay_ms = 20, .deadline_s = 20,
		.plugin = "symmem",
	};
	int opt, native = 1, plugin = 1, rc = 0;

	while ((opt = getopt(argc, argv, "n:o:b:d:skt:m:P:E:")) != -1) {
		switch (opt) {
		case 's': o.stuck = 1; break;
		case 'k': o.shrink = 1; break;
		case 'n': o.nranks = atoi(optarg); break;
		case 'o': if ((o.op = find_op(optarg)) < 0) usage(argv[0]); break;
		case 'b': o.bytes = strtoull(optarg, NULL, 0); break;
		case 'd': o.delay_ms = atof(optarg); break;
		case 't': o.deadline_s = atof(optarg); break;
		case 'm':
			native = strcmp(optarg, "plugin") != 0;
			plugin = strcmp(optarg, "native") != 0;
			break;
		case 'P': o.plugin = optarg; break;
		case 'E':
			if (o.nenv == 16 || !strchr(optarg, '='))
				usage(argv[0]);
			o.env[o.nenv++] = optarg;
			break;
		default: usage(argv[0]);
		}
	}
	if (o.nranks <= 0)
		o.nranks = bench_count_gpus();
	if (o.nranks < 2 || o.nranks > MAX_RANKS || o.deadline_s <= 0 || o.delay_ms < 0) {
		fprintf(stderr, "rank_death: needs 2 to %d GPUs and a positive deadline\n",
			MAX_RANKS);
		return 2;
	}
	o.board = mmap(NULL, sizeof(*o.board), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
		       -1, 0);
	o.barrier = bench_barrier_new(o.nranks);
	if (o.board == MAP_FAILED || !o.barrier) {
		perror("rank_death: shared memory");
		return 2;
	}
	printf("# rank_death: %s of %zu B on %d ranks, rank %d %s %.0f ms into the loop, "
	       "deadline %.0f s after that\n", bench_op_name(o.op), o.bytes, o.nranks,
	       o.nranks - 1, o.stuck ? "stops taking part" : "killed", o.delay_ms, o.deadline_s);
	printf("# %-7s %4s %6s  %-28s %10s %10s%s\n", "phase", "rank", "ops", "seen",
	       "after_ms", "abort_ms", o.shrink ? "  new_comm_ms  how, then 3 ops on it" : "");
	fflush(stdout);
	if (native) {
		o.through_plugin = 0;
		run_phase(&o, "native");
	}
	if (plugin) {
		o.through_plugin = 1;
		rc = run_phase(&o, "plugin");
	}
	printf("rank_death: %s\n", !plugin ? "native only (no verdict)" : rc ? "FAIL" : "PASS");
	return rc ? 1 : 0;
}
