#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "hosts.h"

/* Status of a rank that could not run at all. */
#define NO_START 90

static int status_of(int status)
{
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* The namespace's first process is its init: when it exits the kernel
 * kills the rest, so it only starts the ranks and waits for them all. */
static int host1_init(int n, const int *host, hosts_rank_fn fn, void *arg, const int *ctl)
{
	pid_t pid[HOSTS_MAX_RANKS];
	int np = 0, rc = 0, status;

	for (int r = 0; r < n; r++) {
		if (host[r] != 1)
			continue;
		pid[np] = fork();
		if (pid[np] < 0)
			return NO_START;
		if (pid[np] == 0)
			_exit(fn(r, ctl[r], arg));
		np++;
	}
	for (int i = 0; i < np; i++) {
		if (waitpid(pid[i], &status, 0) != pid[i])
			status = -1;
		if (!rc && status_of(status))
			rc = status_of(status) < 0 ? NO_START + 1 : status_of(status);
	}
	return rc;
}

static int host1_holder(int n, const int *host, hosts_rank_fn fn, void *arg, const int *ctl)
{
	pid_t init;
	int status;

	if (unshare(CLONE_NEWPID) != 0) {
		fprintf(stderr, "hosts: unshare(CLONE_NEWPID): %s\n", strerror(errno));
		return NO_START;
	}
	init = fork();
	if (init < 0)
		return NO_START;
	if (init == 0)
		_exit(host1_init(n, host, fn, arg, ctl));
	if (waitpid(init, &status, 0) != init)
		return NO_START;
	return status_of(status) < 0 ? NO_START + 1 : status_of(status);
}

int hosts_start(struct hosts_job *job, int n, const int *host, hosts_rank_fn fn, void *arg)
{
	int child[HOSTS_MAX_RANKS], sv[2], any1 = 0;
	pid_t pid;

	memset(job, 0, sizeof(*job));
	if (n < 1 || n > HOSTS_MAX_RANKS)
		return -1;
	for (int r = 0; r < n; r++) {
		if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv))
			return -1;
		job->ctl[r] = sv[0];
		child[r] = sv[1];
		any1 |= host[r] == 1;
	}
	job->n = n;
	for (int r = 0; r <= n; r++) {
		if (r == n ? !any1 : host[r] != 0)
			continue;
		pid = fork();
		if (pid < 0)
			return -1;
		if (pid == 0) {
			/* Each process keeps its own ranks' ends only, so that a
			 * rank that dies shows as end of file. */
			for (int k = 0; k < n; k++) {
				close(job->ctl[k]);
				if (r == n ? host[k] != 1 : k != r)
					close(child[k]);
			}
			_exit(r == n ? host1_holder(n, host, fn, arg, child) :
				       fn(r, child[r], arg));
		}
		job->pid[job->npid++] = pid;
	}
	for (int r = 0; r < n; r++)
		close(child[r]);
	return 0;
}

int hosts_wait(struct hosts_job *job)
{
	int rc = 0, status;

	for (int i = 0; i < job->npid; i++) {
		if (waitpid(job->pid[i], &status, 0) != job->pid[i])
			status = -1;
		if (!rc && status_of(status))
			rc = status_of(status);
	}
	for (int r = 0; r < job->n; r++)
		close(job->ctl[r]);
	job->npid = 0;
	job->n = 0;
	return rc;
}

int hosts_ring_handles(struct hosts_job *job)
{
	char h[HOSTS_MAX_RANKS][NCCL_NET_HANDLE_MAXSIZE];

	for (int r = 0; r < job->n; r++)
		if (harness_recv_all(job->ctl[r], h[r], sizeof(h[r])))
			return -1;
	for (int r = 0; r < job->n; r++)
		if (harness_send_all(job->ctl[r], h[(r + 1) % job->n], sizeof(h[r])))
			return -1;
	return 0;
}

int hosts_swap_handle(int ctl, const void *mine, void *next)
{
	if (harness_send_all(ctl, mine, NCCL_NET_HANDLE_MAXSIZE))
		return -1;
	return harness_recv_all(ctl, next, NCCL_NET_HANDLE_MAXSIZE);
}

int hosts_can_pose(void)
{
	pid_t pid = fork();
	int status;

	if (pid == 0)
		_exit(unshare(CLONE_NEWPID) == 0 ? 0 : 1);
	return pid > 0 && waitpid(pid, &status, 0) == pid && status_of(status) == 0;
}

int hosts_pair_up(void *ctx, int dev, void *next, void *lc, void **send, void **recv)
{
	double end = harness_now() + 30;

	*send = *recv = NULL;
	while ((!*send || !*recv) && harness_now() < end) {
		if (!*send && net->connect(ctx, dev, next, send, NULL) != ncclSuccess)
			return -1;
		if (!*recv && net->accept(lc, recv, NULL) != ncclSuccess)
			return -1;
	}
	return *send && *recv ? 0 : -1;
}
