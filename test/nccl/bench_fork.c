/* The process side of the GPU drivers: one process per GPU, forked from a
 * parent that never touches CUDA (so each child may), the NCCL id handed
 * from rank 0 to the others, a deadline after which every rank is killed,
 * and a backtrace from any rank that crashes. */
#include <execinfo.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"

int bench_count_gpus(void)
{
	int fds[2], n = 0;
	pid_t pid;

	/* In a child: CUDA must not be initialised in the parent before fork. */
	if (pipe(fds) != 0)
		return -1;
	pid = fork();
	if (pid == 0) {
		if (cudaGetDeviceCount(&n) != cudaSuccess)
			n = 0;
		_exit(write(fds[1], &n, sizeof(n)) == sizeof(n) ? 0 : 1);
	}
	if (read(fds[0], &n, sizeof(n)) != sizeof(n))
		n = -1;
	waitpid(pid, NULL, 0);
	close(fds[0]);
	close(fds[1]);
	return n;
}

struct bench_barrier {
	int nranks;
	_Atomic int arrived;
	_Atomic int round;
};

struct bench_barrier *bench_barrier_new(int nranks)
{
	struct bench_barrier *b = mmap(NULL, sizeof(*b), PROT_READ | PROT_WRITE,
				       MAP_SHARED | MAP_ANONYMOUS, -1, 0);

	if (b == MAP_FAILED)
		return NULL;
	b->nranks = nranks;
	return b;
}

void bench_barrier_reset(struct bench_barrier *b)
{
	atomic_store(&b->arrived, 0);
}

double bench_now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* The last rank to arrive resets the count and opens the next round. */
int bench_barrier_wait(struct bench_barrier *b, double seconds)
{
	int round = atomic_load(&b->round);
	double limit = bench_now() + seconds;

	if (atomic_fetch_add(&b->arrived, 1) == b->nranks - 1) {
		atomic_store(&b->arrived, 0);
		atomic_fetch_add(&b->round, 1);
		return 0;
	}
	while (atomic_load(&b->round) == round) {
		if (bench_now() > limit)
			return -1;
		sched_yield();
	}
	return 0;
}

void bench_route_env(int through_plugin, enum bench_route route, const char *plugin,
		     char *const *extra, int nextra)
{
	/* The env plugin's variables too: its runs must show what it sets. */
	static const char *const routing[] = { "NCCL_NET_PLUGIN", "NCCL_NET", "NCCL_P2P_DISABLE",
					       "NCCL_SHM_DISABLE", "NCCL_ENV_PLUGIN",
					       "NCCL_NET_PLUGIN_REF_COUNT" };

	for (size_t i = 0; i < sizeof(routing) / sizeof(routing[0]); i++)
		unsetenv(routing[i]);
	if (!through_plugin)
		return;
	if (route == ROUTE_ENV_PLUGIN) {
		unsetenv("NCCL_NCHANNELS_PER_NET_PEER");
		setenv("NCCL_ENV_PLUGIN", plugin, 1);
	} else {
		setenv("NCCL_NET_PLUGIN", plugin, 1);
		setenv("NCCL_NET", "symmem", 1);
	}
	if (route == ROUTE_ALL) {
		setenv("NCCL_P2P_DISABLE", "1", 1);
		setenv("NCCL_SHM_DISABLE", "1", 1);
	}
	for (int i = 0; i < nextra; i++)
		putenv(extra[i]);
}

static void crash_handler(int sig)
{
	void *frames[64];
	int n = backtrace(frames, 64);

	fprintf(stderr, "rank process %d: signal %d, backtrace:\n", (int)getpid(), sig);
	backtrace_symbols_fd(frames, n, 2);
	signal(sig, SIG_DFL);
	raise(sig);
}

/* BENCH_PID_NS=1: every rank is process 1 of its namespace, so NCCL's %p
 * in NCCL_DEBUG_FILE would name one file for all of them; the rank
 * stands in for it ("r0", "r1", ...). */
static void debug_file_per_rank(int rank)
{
	const char *v = getenv("NCCL_DEBUG_FILE"), *p;
	char buf[1024];

	if (!v || !(p = strstr(v, "%p")))
		return;
	snprintf(buf, sizeof(buf), "%.*sr%d%s", (int)(p - v), v, rank, p + 2);
	setenv("NCCL_DEBUG_FILE", buf, 1);
}

static void child(const struct bench_fork *f, int rank, int id_in, int id_out)
{
	ncclUniqueId id;

	setvbuf(stdout, NULL, _IOLBF, 0);
	signal(SIGSEGV, crash_handler);
	signal(SIGBUS, crash_handler);
	signal(SIGABRT, crash_handler);
	f->prepare(f->arg, rank);	/* NCCL reads its environment once */
	if (getenv("BENCH_PID_NS") && atoi(getenv("BENCH_PID_NS")) == 1)
		debug_file_per_rank(rank);
	if (rank == 0) {
		if (ncclGetUniqueId(&id) != ncclSuccess)
			_exit(2);
		for (int r = 1; r < f->nranks; r++)
			if (write(id_out, &id, sizeof(id)) != sizeof(id))
				_exit(2);
	} else if (read(id_in, &id, sizeof(id)) != sizeof(id)) {
		_exit(2);
	}
	_exit(f->run(f->arg, rank, id));
}

/* BENCH_PID_NS=1: each rank runs in PID and mount namespaces of its own,
 * with its own /proc (CUDA reads /proc by its own pid).  The plugin counts
 * the PID namespace in its host identity, so with -H (NCCL's own posing)
 * the plugin too sees other hosts and takes its path between hosts (TCP,
 * or NCCL_SYMMEM_INNER_NET's plugin) on one machine.  The rank is the
 * namespace's init and dies with the process that made it. */
static void child_apart(const struct bench_fork *f, int rank, int id_in, int id_out)
{
	pid_t pid;
	int status;

	if (unshare(CLONE_NEWPID | CLONE_NEWNS) != 0) {
		perror("nccl_bench: BENCH_PID_NS: unshare");
		_exit(2);
	}
	pid = fork();
	if (pid < 0)
		_exit(2);
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0 ||
		    mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) != 0) {
			perror("nccl_bench: BENCH_PID_NS: mount /proc");
			_exit(2);
		}
		child(f, rank, id_in, id_out);
	}
	if (waitpid(pid, &status, 0) != pid)
		_exit(2);
	_exit(WIFEXITED(status) ? WEXITSTATUS(status) : 3);
}

int bench_fork_ranks(const struct bench_fork *f)
{
	pid_t pids[64];
	int ids[2], failed = 0, left = f->nranks;
	int apart = getenv("BENCH_PID_NS") && atoi(getenv("BENCH_PID_NS")) == 1;
	double deadline;

	if (f->nranks < 1 || f->nranks > 64 || pipe(ids) != 0)
		return f->nranks;
	/* Children would print the parent's buffered output again. */
	fflush(stdout);
	fflush(stderr);
	/* Rank 0 writes the id once per other rank; each reads one copy
	 * (writes this small are atomic). */
	for (int r = 0; r < f->nranks; r++) {
		pids[r] = fork();
		if (pids[r] == 0 && apart)
			child_apart(f, r, ids[0], ids[1]);
		if (pids[r] == 0)
			child(f, r, ids[0], ids[1]);
	}
	close(ids[0]);
	close(ids[1]);
	deadline = bench_now() + f->timeout;
	while (left > 0) {
		int status;
		pid_t p = waitpid(-1, &status, WNOHANG);

		if (p > 0) {
			left--;
			if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
				fprintf(stderr, "%s: a rank process failed (status 0x%x)\n", f->label,
					status);
				failed++;
			}
			continue;
		}
		if (bench_now() > deadline) {
			fprintf(stderr, "%s: no result after %.0f s, killing the ranks\n", f->label,
				f->timeout);
			if (f->hung)
				f->hung(f->arg, pids);
			for (int r = 0; r < f->nranks; r++)
				kill(pids[r], SIGKILL);
			while (waitpid(-1, NULL, 0) > 0)
				;
			return failed + left;
		}
		usleep(20000);
	}
	return failed;
}
