/* Small-message latency between two processes through the plugin's exported
 * v11 table, host memory: a ping-pong of one message each way per round, the
 * way NCCL's proxies drive a send/recv of a few bytes (isend until taken,
 * test until done), against the same ping-pong over a bare loopback TCP
 * socket (TCP_NODELAY, polled send/recv) in the same run, which is the
 * floor any TCP path has.  Every message carries a pattern of its round
 * and is checked.
 * PINGPONG_APART=1 puts the second process in a PID namespace of its own,
 * which the plugin's host identity includes, so the two connect as two
 * hosts do (TCP or ibverbs); that needs the privilege to make the
 * namespace (root, as inside scripts/rdma_vm.sh).
 * Usage: SYMMEM_PLUGIN=... [NCCL_SYMMEM_BACKEND=tcp] bench_pingpong [size] [rounds] */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

enum { WARMUP = 200 };

struct pair {
	void *send, *recv;
};

/* Listens, swaps handles with the other process over `fd`, then connects
 * and accepts until both directions stand. */
static int pair_up(int fd, struct pair *p)
{
	char mine[NCCL_NET_HANDLE_MAXSIZE], theirs[NCCL_NET_HANDLE_MAXSIZE];
	void *ctx, *lc;
	double end;

	ctx = harness_init();
	if (!ctx || net->listen(ctx, 0, mine, &lc))
		return -1;
	if (harness_send_all(fd, mine, sizeof(mine)) || harness_recv_all(fd, theirs, sizeof(theirs)))
		return -1;
	p->send = p->recv = NULL;
	end = harness_now() + 30;
	while (!p->send || !p->recv) {
		if (!p->send && net->connect(ctx, 0, theirs, &p->send, NULL))
			return -1;
		if (!p->recv && net->accept(lc, &p->recv, NULL))
			return -1;
		if (harness_now() > end)
			return -1;
	}
	return 0;
}

/* Rounds cycle through PATTERNS messages made up front, so the timed loop
 * checks with memcmp instead of computing patterns. */
enum { PATTERNS = 4 };

struct msgs {
	uint8_t *want[PATTERNS];
	uint8_t *in;
	size_t size;
};

static int msgs_make(struct msgs *m, size_t size)
{
	m->size = size;
	m->in = malloc(size ? size : 1);
	for (int i = 0; i < PATTERNS; i++) {
		m->want[i] = malloc(size ? size : 1);
		if (m->want[i])
			pattern_fill(m->want[i], size, (uint64_t)i);
	}
	for (int i = 0; i < PATTERNS; i++)
		if (!m->want[i])
			return -1;
	return m->in ? 0 : -1;
}

static void msgs_free(struct msgs *m)
{
	for (int i = 0; i < PATTERNS; i++)
		free(m->want[i]);
	free(m->in);
}

/* Poisoned before the receive, compared after it. */
static int arrived(struct msgs *m, int round)
{
	if (memcmp(m->in, m->want[round % PATTERNS], m->size) == 0)
		return 0;
	fprintf(stderr, "round %d arrived wrong\n", round);
	return -1;
}

static int recv_one(struct pair *p, struct msgs *m, int round)
{
	void *req = NULL, *d = m->in;
	size_t cap = m->size;
	int got = 0;

	memset(m->in, 0xa5, m->size);
	if (net->irecv(p->recv, 1, &d, &cap, (int[]){ 0 }, NULL, NULL, &req) ||
	    harness_wait(req, &got, 30))
		return -1;
	if ((size_t)got != m->size)
		return -1;
	return arrived(m, round);
}

static int send_one(struct pair *p, struct msgs *m, int round)
{
	void *req = NULL;

	if (harness_isend(p->send, m->want[round % PATTERNS], m->size, NULL, &req, 30))
		return -1;
	return harness_wait(req, NULL, 30);
}

/* `first` sends first.  Returns seconds for `rounds` after the warm-up. */
static double plugin_rounds(struct pair *p, int first, struct msgs *m, int rounds)
{
	double t0 = 0;
	int rc = 0;

	for (int r = 0; r < WARMUP + rounds && !rc; r++) {
		if (r == WARMUP)
			t0 = harness_now();
		if (first)
			rc = send_one(p, m, r) || recv_one(p, m, r);
		else
			rc = recv_one(p, m, r) || send_one(p, m, r);
	}
	return rc ? -1 : harness_now() - t0;
}

static int tcp_recv_one(int fd, struct msgs *m, int round)
{
	memset(m->in, 0xa5, m->size);
	return harness_io(fd, m->in, m->size, 0, 1) || arrived(m, round);
}

static double tcp_rounds(int fd, int first, struct msgs *m, int rounds)
{
	double t0 = 0;
	int rc = 0;

	for (int r = 0; r < WARMUP + rounds && !rc; r++) {
		uint8_t *out = m->want[r % PATTERNS];

		if (r == WARMUP)
			t0 = harness_now();
		if (first)
			rc = harness_io(fd, out, m->size, 1, 1) || tcp_recv_one(fd, m, r);
		else
			rc = tcp_recv_one(fd, m, r) || harness_io(fd, out, m->size, 1, 1);
	}
	return rc ? -1 : harness_now() - t0;
}

/* A loopback TCP connection between the two processes: the parent listens
 * and passes its port over `ctl`. */
static int tcp_link(int ctl, int parent)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	socklen_t len = sizeof(a);
	int one = 1, fd, lfd;

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (parent) {
		lfd = socket(AF_INET, SOCK_STREAM, 0);
		if (lfd < 0 || bind(lfd, (struct sockaddr *)&a, sizeof(a)) || listen(lfd, 1) ||
		    getsockname(lfd, (struct sockaddr *)&a, &len) ||
		    harness_send_all(ctl, &a.sin_port, sizeof(a.sin_port)))
			return -1;
		fd = accept(lfd, NULL, NULL);
		close(lfd);
	} else {
		if (harness_recv_all(ctl, &a.sin_port, sizeof(a.sin_port)))
			return -1;
		fd = socket(AF_INET, SOCK_STREAM, 0);
		if (fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof(a))) {
			close(fd);
			fd = -1;
		}
	}
	if (fd >= 0)
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return fd;
}

static int side(int ctl, int parent, size_t size, int rounds)
{
	struct msgs m;
	struct pair p;
	double dp, dt;
	int fd, rc = 0;

	if (msgs_make(&m, size) || !harness_open() || pair_up(ctl, &p)) {
		msgs_free(&m);
		return 2;
	}
	fd = tcp_link(ctl, parent);
	if (fd < 0) {
		net->closeSend(p.send);
		net->closeRecv(p.recv);
		msgs_free(&m);
		return 3;
	}
	dp = plugin_rounds(&p, parent, &m, rounds);
	dt = tcp_rounds(fd, parent, &m, rounds);
	if (dp < 0 || dt < 0)
		rc = 4;
	else if (parent)
		printf("%zu-byte ping-pong, %d rounds: plugin %.2f us one way, bare TCP %.2f us "
		       "(plugin / TCP %.2f)\n", size, rounds, dp / rounds / 2 * 1e6,
		       dt / rounds / 2 * 1e6, dp / dt);
	close(fd);
	net->closeSend(p.send);
	net->closeRecv(p.recv);
	msgs_free(&m);
	return rc;
}

/* The second process's side; with PINGPONG_APART set, run by a child in a
 * new PID namespace (unshare() moves only the children made after it). */
static int second_side(int ctl, size_t size, int rounds)
{
	const char *apart = getenv("PINGPONG_APART");
	int status;
	pid_t inner;

	if (!apart || strcmp(apart, "1") != 0)
		return side(ctl, 0, size, rounds);
	if (unshare(CLONE_NEWPID) != 0) {
		perror("bench_pingpong: PINGPONG_APART: unshare(CLONE_NEWPID)");
		return 5;
	}
	inner = fork();
	if (inner < 0)
		return 5;
	if (inner == 0)
		_exit(side(ctl, 0, size, rounds));
	if (waitpid(inner, &status, 0) != inner || !WIFEXITED(status))
		return 5;
	return WEXITSTATUS(status);
}

int main(int argc, char **argv)
{
	size_t size = argc > 1 ? strtoull(argv[1], NULL, 0) : 8;
	int rounds = argc > 2 ? atoi(argv[2]) : 20000;
	int sv[2], status, rc;
	pid_t pid;

	if (rounds <= 0 || socketpair(AF_UNIX, SOCK_STREAM, 0, sv))
		return 1;
	pid = fork();
	if (pid < 0)
		return 1;
	if (pid == 0)
		_exit(second_side(sv[1], size, rounds));
	rc = side(sv[0], 1, size, rounds);
	waitpid(pid, &status, 0);
	if (rc || !WIFEXITED(status) || WEXITSTATUS(status)) {
		fprintf(stderr, "bench_pingpong failed (%d, child status %d)\n", rc, status);
		return 1;
	}
	return 0;
}
