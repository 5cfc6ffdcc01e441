/* Ranks posed on two hosts of one machine, for tests of what crosses
 * hosts: ranks of host 0 run in this process's PID namespace, those of
 * host 1 in a new one, and the plugin's host identity includes the PID
 * namespace (transport/hostid.c), so the two groups connect as two hosts
 * do.  Making the namespace needs root (or CAP_SYS_ADMIN). */
#ifndef SYMMEM_TEST_HOSTS_H
#define SYMMEM_TEST_HOSTS_H

#include <sys/types.h>

#define HOSTS_MAX_RANKS 8

/* A rank's body: its exit status is the result (0 = passed). */
typedef int (*hosts_rank_fn)(int rank, int ctl, void *arg);

struct hosts_job {
	int n;
	int ctl[HOSTS_MAX_RANKS];	/* the parent's end of each rank's socket */
	pid_t pid[HOSTS_MAX_RANKS + 1];	/* host 0's ranks, then host 1's holder */
	int npid;
};

/* Forks ranks 0..n-1, rank r on host host[r] (0 or 1), each running
 * fn(r, ctl, arg) with `ctl` its end of a socket pair to this process.
 * Returns 0, or -1 when a process or the namespace cannot be made. */
int hosts_start(struct hosts_job *job, int n, const int *host, hosts_rank_fn fn, void *arg);
/* Waits for every rank; 0 when all passed, else the first failing
 * status (-1 for one that did not exit). */
int hosts_wait(struct hosts_job *job);

/* The ring's handle exchange, parent side: reads each rank's listen
 * handle and sends it to the rank before it (rank r connects to r + 1). */
int hosts_ring_handles(struct hosts_job *job);
/* ... and a rank's side: its handle out, its successor's in. */
int hosts_swap_handle(int ctl, const void *mine, void *next);
/* ... then connects to the successor through `net` (harness.h) and
 * accepts the predecessor on `lc`, both from this thread as NCCL's proxy
 * does: 0, or -1 on a failed call or after 30 s. */
int hosts_pair_up(void *ctx, int dev, void *next, void *lc, void **send, void **recv);

/* Whether this process may make a PID namespace (probed in a child). */
int hosts_can_pose(void);

#endif
