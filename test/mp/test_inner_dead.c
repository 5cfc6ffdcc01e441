/* A peer through the inner net plugin (NCCL_SYMMEM_INNER_NET) that dies
 * or stalls, with a stand-in that waits for a dead peer forever as
 * aws-ofi-nccl does (INNER_STANDIN_HANG_ON_DEAD): the connection still
 * fails within 2 s with one WARN and closes at once (inner_live.h), and
 * a stall is reported as on this plugin's own connections.  Ranks run
 * on two posed hosts (hosts.h); the dying one is killed with SIGKILL, so
 * nothing of it closes anything.
 *
 * meson sets SYMMEM_PLUGIN and NCCL_SYMMEM_INNER_NET (the stand-in). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "hosts.h"
#include "standin_log.h"

#define MSG 4096

struct pair {
	void *ctx, *lc, *send, *recv, *smh, *rmh;
	uint8_t sbuf[MSG], rbuf[MSG];
};

static int pair_up(int rank, int ctl, struct pair *p)
{
	char mine[NCCL_NET_HANDLE_MAXSIZE], theirs[NCCL_NET_HANDLE_MAXSIZE];

	p->ctx = harness_open() ? standin_rank_init(rank, 7, 0) : NULL;
	if (!p->ctx || net->listen(p->ctx, 0, mine, &p->lc) != ncclSuccess ||
	    hosts_swap_handle(ctl, mine, theirs) ||
	    hosts_pair_up(p->ctx, 0, theirs, p->lc, &p->send, &p->recv) ||
	    net->closeListen(p->lc) != ncclSuccess)
		return -1;
	if (net->regMr(p->send, p->sbuf, MSG, NCCL_PTR_HOST, &p->smh) != ncclSuccess ||
	    net->regMr(p->recv, p->rbuf, MSG, NCCL_PTR_HOST, &p->rmh) != ncclSuccess)
		return -1;
	return 0;
}

static int post_recv(struct pair *p, void **req)
{
	size_t cap = MSG;
	int tag = 0;
	void *buf = p->rbuf, *mh = p->rmh;
	double end = harness_now() + 10;

	do {
		*req = NULL;
		if (net->irecv(p->recv, 1, &buf, &cap, &tag, &mh, NULL, req) != ncclSuccess)
			return -1;
	} while (!*req && harness_now() < end);
	return *req ? 0 : -1;
}

/* Tests `req` until it is done or fails, at most `seconds`: its result,
 * or -1 when it did neither. */
static int test_until(void *req, double seconds)
{
	double end = harness_now() + seconds;
	int done = 0, size = 0, rc;

	while (harness_now() < end) {
		rc = net->test(req, &done, &size);
		if (rc != ncclSuccess || done)
			return rc;
		usleep(200);
	}
	return -1;
}

/* ---- the peer dies ----------------------------------------------------- */

/* Rank 1 is killed once rank 0 has a receive posted from it and a send
 * to it in flight. */
static int dead_rank(int rank, int ctl, void *arg)
{
	struct pair *p = calloc(1, sizeof(*p));
	void *rreq, *sreq = NULL;
	double t0, took;
	char go = 'k';
	int rc;

	(void)arg;
	alarm(30);	/* without the check, the receive and the close hang */
	if (!p || pair_up(rank, ctl, p))
		return 10;
	if (rank == 1) {
		if (harness_recv_all(ctl, &go, 1))
			return 11;
		raise(SIGKILL);
	}
	if (post_recv(p, &rreq))
		return 12;
	/* The stand-in takes a send once the peer could have posted. */
	for (int i = 0; i < 4 && !sreq; i++)
		if (net->isend(p->send, p->sbuf, MSG, 0, p->smh, NULL, &sreq) != ncclSuccess)
			return 13;
	t0 = harness_now();
	if (harness_send_all(ctl, &go, 1))
		return 14;
	rc = test_until(rreq, 10);
	took = harness_now() - t0;
	if (rc != ncclRemoteError || took > 2.0) {
		fprintf(stderr, "receive: %d after %.2f s, want ncclRemoteError within 2 s\n", rc,
			took);
		return 15;
	}
	/* The send may have gone into the socket before the death. */
	rc = sreq ? test_until(sreq, 3) : ncclRemoteError;
	if (rc != ncclRemoteError && rc != ncclSuccess)
		return 16;
	/* The WARN names the peer's process and address. */
	if (harness_warn_count() != 1 || !strstr(harness_last_warn(), "is gone (its liveness "
						   "connection hung up without closing)") ||
	    strstr(harness_last_warn(), " on ?") || strstr(harness_last_warn(), "process 0 ")) {
		fprintf(stderr, "%d WARNs, last: %s\n", harness_warn_count(),
			harness_warn_count() ? harness_last_warn() : "none");
		return 17;
	}
	t0 = harness_now();
	net->deregMr(p->send, p->smh);
	net->deregMr(p->recv, p->rmh);
	if (net->closeSend(p->send) != ncclSuccess || net->closeRecv(p->recv) != ncclSuccess ||
	    net->finalize(p->ctx) != ncclSuccess)
		return 18;
	took = harness_now() - t0;
	if (took > 1.0) {
		fprintf(stderr, "close took %.2f s\n", took);
		return 19;
	}
	free(p);
	return harness_warn_count() == 1 ? 0 : 20;
}

/* Rank 0's own exit status, whatever became of the killed rank's host. */
static int rank0_status(struct hosts_job *job)
{
	char go;
	int status, rc;

	/* Rank 0's word that the peer may die, passed on to it. */
	if (harness_recv_all(job->ctl[0], &go, 1) || harness_send_all(job->ctl[1], &go, 1))
		return -1;
	rc = waitpid(job->pid[0], &status, 0) == job->pid[0] && WIFEXITED(status) ?
		     WEXITSTATUS(status) : -1;
	waitpid(job->pid[1], &status, 0);
	close(job->ctl[0]);
	close(job->ctl[1]);
	return rc;
}

static void skip_unless_posed(void)
{
	if (!hosts_can_pose()) {
		print_message("# cannot make a PID namespace here (not root?): skipped\n");
		skip();
	}
}

/* Ranks 0 and 1 running `fn` on two posed hosts, with var=value in their
 * environment, their handles passed round. */
static void start_pair(struct hosts_job *job, hosts_rank_fn fn, const char *var,
		       const char *value)
{
	static const int host[2] = { 0, 1 };
	int rc;

	skip_unless_posed();
	setenv(var, value, 1);
	rc = hosts_start(job, 2, host, fn, NULL);
	unsetenv(var);		/* the ranks have it: this process needs none */
	assert_int_equal(rc, 0);
	assert_int_equal(hosts_ring_handles(job), 0);
}

static void test_dead_peer_fails_within_2s(void **state)
{
	struct hosts_job job;

	(void)state;
	start_pair(&job, dead_rank, "INNER_STANDIN_HANG_ON_DEAD", "1");
	assert_int_equal(rank0_status(&job), 0);
}

/* ---- the peer stalls, then sends and closes at once ------------------- */

static int stall_rank(int rank, int ctl, void *arg)
{
	struct pair *p = calloc(1, sizeof(*p));
	char needle[160];
	void *req = NULL;
	int rc;

	(void)arg;
	alarm(30);
	if (!p || pair_up(rank, ctl, p))
		return 10;
	if (rank == 1) {
		/* Quiet past the stall report, then one message, and the
		 * comm closed right behind it: an orderly close is no death. */
		usleep(1500 * 1000);
		if (harness_isend(p->send, p->sbuf, MSG, p->smh, &req, 10) ||
		    test_until(req, 10) != ncclSuccess)
			return 11;
		net->deregMr(p->send, p->smh);
		if (net->closeSend(p->send) != ncclSuccess)
			return 12;
		usleep(500 * 1000);
		net->deregMr(p->recv, p->rmh);
		net->closeRecv(p->recv);
		net->finalize(p->ctx);
		return 0;
	}
	if (post_recv(p, &req))
		return 13;
	rc = test_until(req, 10);
	if (rc != ncclSuccess) {
		fprintf(stderr, "receive: %d (%s)\n", rc,
			harness_warn_count() ? harness_last_warn() : "no WARN");
		return 14;
	}
	if (harness_warn_count() != 1 ||
	    !strstr(harness_last_warn(), "through inner net plugin 'standin' (v12) to peer "
					 "process") ||
	    !strstr(harness_last_warn(), "made no progress for 0.5 s, still waiting")) {
		fprintf(stderr, "%d WARNs, last: %s\n", harness_warn_count(),
			harness_warn_count() ? harness_last_warn() : "none");
		return 15;
	}
	snprintf(needle, sizeof(needle), "receive comm %p through inner net plugin 'standin' "
		 "(v12) to peer process", p->recv);
	if (harness_info_count(needle) != 1)
		return 16;
	net->deregMr(p->send, p->smh);
	net->deregMr(p->recv, p->rmh);
	if (net->closeSend(p->send) != ncclSuccess || net->closeRecv(p->recv) != ncclSuccess ||
	    net->finalize(p->ctx) != ncclSuccess)
		return 17;
	free(p);
	return harness_warn_count() == 1 ? 0 : 18;
}

static void test_stall_reported(void **state)
{
	struct hosts_job job;

	(void)state;
	start_pair(&job, stall_rank, "NCCL_SYMMEM_STALL_REPORT", "0.5");
	assert_int_equal(hosts_wait(&job), 0);
}

/* ---- a peer that closes in order is not dead -------------------------- */

/* Rank 1 sends one message and closes at once, before its end of the
 * liveness connection ever heard the listener's answer; rank 0 still
 * waits on a second receive.  The hang-up that follows the close is no
 * death: no failure, no WARN.  (Rank 0 then exits without closing: the
 * stand-in's close would wait for that receive.) */
static int orderly_rank(int rank, int ctl, void *arg)
{
	struct pair *p = calloc(1, sizeof(*p));
	void *req = NULL, *second = NULL;
	char go = 'c';
	int rc;

	(void)arg;
	alarm(30);
	if (!p || pair_up(rank, ctl, p))
		return 10;
	if (rank == 1) {
		if (harness_isend(p->send, p->sbuf, MSG, p->smh, &req, 10) ||
		    test_until(req, 10) != ncclSuccess)
			return 11;
		net->deregMr(p->send, p->smh);
		if (net->closeSend(p->send) != ncclSuccess)
			return 12;
		/* Rank 0 looks while this process lives on. */
		if (harness_recv_all(ctl, &go, 1))
			return 13;
		return 0;
	}
	if (post_recv(p, &req) || post_recv(p, &second) || test_until(req, 10) != ncclSuccess)
		return 14;
	rc = test_until(second, 1.5);
	if (rc != -1 || harness_warn_count()) {
		fprintf(stderr, "second receive: %d, %d WARNs (%s)\n", rc, harness_warn_count(),
			harness_warn_count() ? harness_last_warn() : "none");
		return 15;
	}
	if (harness_send_all(ctl, &go, 1))
		return 16;
	_exit(0);
}

static void test_orderly_close_is_no_death(void **state)
{
	struct hosts_job job;
	char go;

	(void)state;
	start_pair(&job, orderly_rank, "INNER_STANDIN_HANG_ON_DEAD", "1");
	/* Rank 0's word that it looked, passed on to rank 1. */
	assert_int_equal(harness_recv_all(job.ctl[0], &go, 1), 0);
	assert_int_equal(harness_send_all(job.ctl[1], &go, 1), 0);
	assert_int_equal(hosts_wait(&job), 0);
}

/* ---- a handle whose part of this plugin was changed in transit -------- */

static void test_corrupt_handle_refused(void **state)
{
	char h[NCCL_NET_HANDLE_MAXSIZE];
	void *ctx, *lc, *comm = NULL;

	(void)state;
	assert_non_null(harness_open());
	ctx = standin_rank_init(0, 9, 0);
	assert_non_null(ctx);
	assert_int_equal(net->listen(ctx, 0, h, &lc), ncclSuccess);
	h[NCCL_NET_HANDLE_MAXSIZE - 1] ^= 0x40;	/* the liveness address */
	harness_reset_warn();
	assert_int_not_equal(net->connect(ctx, 0, h, &comm, NULL), ncclSuccess);
	assert_null(comm);
	assert_int_equal(harness_warn_count(), 1);
	assert_non_null(strstr(harness_last_warn(), "fails its check (corrupted in transit)"));
	assert_int_equal(net->closeListen(lc), ncclSuccess);
	assert_int_equal(net->finalize(ctx), ncclSuccess);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_dead_peer_fails_within_2s),
		cmocka_unit_test(test_stall_reported),
		cmocka_unit_test(test_orderly_close_is_no_death),
		cmocka_unit_test(test_corrupt_handle_refused),
	};
	int rc;

	if (standin_log_create())
		return 1;
	rc = cmocka_run_group_tests(tests, NULL, NULL);
	standin_log_remove();
	return rc;
}
