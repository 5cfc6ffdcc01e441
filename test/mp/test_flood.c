/* Connection setup under a flood of strangers without the token: processes
 * of their own dial the listener's TCP port from 64 loopback addresses
 * (127.0.0.2 to 127.0.0.65), 4 connections each, as fast as they can.
 * Those of even addresses say a well-formed hello and hold on to whatever
 * they get, those of odd ones say nothing; a connection hung up on is
 * dialled again at once.  Meanwhile the real connector, a child process,
 * connects:
 *
 *   same-host   over the Unix socket, as on one host with
 *               NCCL_SYMMEM_BACKEND=auto: within 2 s, every trial;
 *   other-host  over TCP from 127.0.0.1, an address no stranger uses, as
 *               a peer on another host: within 5 s, every trial.
 *
 * The listener holds no more descriptors than its tables throughout and
 * gives back every one at its close.  Loopback only; every process stops
 * by itself (the flood when its pipe closes, or after FLOOD_MAX_S). */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "fd_util.h"
#include "listen.h"		/* CAND_MAX */
#include "symmem.h"
#include "tp_pair.h"
#include "transport.h"
#include "wire.h"

#define ADDRS 64
#define PER_ADDR 4
#define FLOODERS 4
#define ADDRS_EACH (ADDRS / FLOODERS)
#define SLOTS (ADDRS_EACH * PER_ADDR)
#define FLOOD_MAX_S 60
/* The strangers dial for this long before the connector starts, so that
 * it meets a table already full of them. */
#define RAMP_S 0.3
#define TRIALS 5
#define SAME_HOST_BOUND_S 2.0
#define OTHER_HOST_BOUND_S 5.0
/* The listener's own sockets (Unix and TCP) besides its tables. */
#define LISTENER_FDS 2
/* Descriptors past the tables while a connection is handed over: its
 * socket, ring and the like. */
#define HANDOVER_FDS 4

struct flood {
	pid_t pid[FLOODERS];
	int rep;		/* each flooder's dial count, at its end */
	int hold;		/* closed: the flood stops */
};

static int dial_from(uint32_t src, const struct sockaddr_in *dst)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	int one = 1, fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);

	if (fd < 0)
		return -1;
	sa.sin_addr.s_addr = htonl(src);
	/* The port is picked at connect, per destination: 64 addresses
	 * dialing this fast would run out of ports bound in advance. */
	setsockopt(fd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) ||
	    (connect(fd, (const struct sockaddr *)dst, sizeof(*dst)) && errno != EINPROGRESS)) {
		close(fd);
		return -1;
	}
	return fd;
}

/* Flooder k: addresses 127.0.0.(2 + k * ADDRS_EACH) and on, PER_ADDR
 * connections each, until fd 3 closes.  Writes how many it dialled to
 * fd 4 at the end. */
static void flooder(int k, const struct sockaddr_in *dst)
{
	struct wire_hello hello = { .magic = WIRE_MAGIC, .version = WIRE_VERSION,
				    .backend = TP_BACKEND_TCP, .pid = (uint32_t)getpid() };
	struct pollfd p[SLOTS + 1];
	int fd[SLOTS], up[SLOTS];
	unsigned long dials = 0;
	char buf[4096];

	alarm(FLOOD_MAX_S);
	if (getrandom(hello.nonce, sizeof(hello.nonce), 0) != sizeof(hello.nonce))
		_exit(90);
	for (int i = 0; i < SLOTS; i++)
		fd[i] = -1;
	for (;;) {
		for (int i = 0; i < SLOTS; i++) {
			int addr = k * ADDRS_EACH + i / PER_ADDR;

			if (fd[i] < 0) {
				fd[i] = dial_from(INADDR_LOOPBACK + 2 + (uint32_t)addr, dst);
				up[i] = 0;
				dials++;
			}
			p[i] = (struct pollfd){ .fd = fd[i], .events = up[i] ? POLLIN : POLLOUT };
		}
		p[SLOTS] = (struct pollfd){ .fd = 3, .events = POLLIN };
		if (poll(p, SLOTS + 1, 100) < 0 && errno != EINTR)
			_exit(91);
		if (p[SLOTS].revents)
			break;
		for (int i = 0; i < SLOTS; i++) {
			int talks = (k * ADDRS_EACH + i / PER_ADDR) % 2 == 0;
			ssize_t n = 1;

			if (!p[i].revents)
				continue;
			if (!up[i] && (p[i].revents & POLLOUT) && !(p[i].revents & (POLLERR | POLLHUP))) {
				up[i] = 1;
				if (talks)
					send(fd[i], &hello, sizeof(hello), MSG_NOSIGNAL | MSG_DONTWAIT);
				continue;
			}
			if (p[i].revents & POLLIN)
				n = recv(fd[i], buf, sizeof(buf), MSG_DONTWAIT);
			if (n == 0 || (n < 0 && errno != EAGAIN) || (p[i].revents & (POLLERR | POLLHUP))) {
				close(fd[i]);
				fd[i] = -1;	/* hung up on: dial again */
			}
		}
	}
	_exit(write(4, &dials, sizeof(dials)) == sizeof(dials) ? 0 : 92);
}

static void flood_start(struct flood *f, const struct tp_handle_info *info)
{
	struct sockaddr_in dst = { .sin_family = AF_INET };
	int rep[2], hold[2];

	assert_int_equal(info->family, AF_INET);
	dst.sin_port = htons(info->port);
	memcpy(&dst.sin_addr, info->addr, 4);
	assert_int_equal(pipe(rep), 0);
	assert_int_equal(pipe(hold), 0);
	for (int k = 0; k < FLOODERS; k++) {
		f->pid[k] = fork();
		assert_true(f->pid[k] >= 0);
		if (f->pid[k] == 0) {
			/* Holds none of the listener's sockets or the others' pipes. */
			int h = fcntl(hold[0], F_DUPFD, 10), r = fcntl(rep[1], F_DUPFD, 10);

			if (h < 0 || r < 0 || dup2(h, 3) != 3 || dup2(r, 4) != 4)
				_exit(93);
			close_range(5, ~0u, 0);
			flooder(k, &dst);
		}
	}
	close(rep[1]);
	close(hold[0]);
	f->rep = rep[0];
	f->hold = hold[1];
}

/* Stops the flood; returns the connections it dialled, -1 when a
 * flooder failed. */
static long flood_stop(struct flood *f)
{
	long total = 0;
	int status, bad = 0;

	close(f->hold);
	for (int k = 0; k < FLOODERS; k++) {
		unsigned long n = 0;

		if (read(f->rep, &n, sizeof(n)) == sizeof(n))
			total += (long)n;
		if (waitpid(f->pid[k], &status, 0) != f->pid[k] || !WIFEXITED(status) ||
		    WEXITSTATUS(status) != 0)
			bad = 1;
	}
	close(f->rep);
	return bad ? -1 : total;
}

/* Accepts on `l` for `s` seconds, or until a comm comes; keeps the most
 * descriptors seen open in *most. */
static struct tp_comm *accept_for(struct tp_listener *l, double s, int *most, int *rc)
{
	struct tp_comm *r = NULL;
	double t0 = now(), next = 0;

	*rc = SM_OK;
	while (!r && *rc == SM_OK && now() - t0 < s) {
		*rc = tp_accept(l, &r);
		if (now() >= next) {
			int n = open_fds();

			*most = n > *most ? n : *most;
			next = now() + 0.01;
		}
		if (!r && *rc == SM_OK)
			usleep(200);
	}
	return r;
}

/* One trial: a fresh listener, the flood on its port, then the connector
 * of `backend`; returns the seconds it took to connect, or -1. */
static double trial(int backend, double bound, int n)
{
	struct tp_options lo = options(TP_BACKEND_AUTO, 1 << 20, 65536);
	struct tp_options co = options(backend, 1 << 20, 65536);
	struct tp_handle_info info;
	uint8_t h[TP_HANDLE_SIZE];
	struct tp_listener *l;
	struct tp_comm *r = NULL;
	struct tp_req *q;
	struct flood f;
	char got[64] = { 0 };
	int fds = open_fds(), base, most = 0, rc, status;
	double took;
	long dials;
	pid_t pid;

	lo.ifname = "lo";	/* 127.0.0.1: the strangers dial from loopback too */
	co.ifname = "lo";
	assert_int_equal(tp_listen(&lo, 0, h, &l), SM_OK);
	assert_int_equal(tp_handle_decode(h, &info), SM_OK);
	flood_start(&f, &info);
	base = open_fds();
	r = accept_for(l, RAMP_S, &most, &rc);
	assert_int_equal(rc, SM_OK);
	assert_null(r);
	pid = fork_connector(&co, h, "through the flood", 2 * OTHER_HOST_BOUND_S);
	took = now();
	r = accept_for(l, bound, &most, &rc);
	took = now() - took;
	if (!r) {
		print_message("# %s trial %d: %s after %.2f s\n",
			      backend == TP_BACKEND_TCP ? "other-host" : "same-host", n,
			      rc ? sm_last_error() : "no connector", took);
		kill(pid, SIGKILL);
	}
	if (r) {
		assert_int_equal(tp_irecv(r, got, sizeof(got), NULL, &q), SM_OK);
		assert_non_null(q);
		wait_done(q, now() + 10);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	dials = flood_stop(&f);
	print_message("# %s trial %d: %s in %.3f s; %ld connections dialled, the listener "
		      "held %d descriptors at most\n",
		      backend == TP_BACKEND_TCP ? "other-host" : "same-host", n,
		      r ? "connected" : "NOT connected", took, dials, most - base + LISTENER_FDS);
	assert_true(dials > 0);
	if (r)
		tp_close(r);
	tp_close_listener(l);
	/* The tables' slots, never more (and the comm handed over). */
	assert_true(most - base <= 2 * CAND_MAX + HANDOVER_FDS);
	assert_int_equal(open_fds(), fds);
	assert_int_equal(tp_pending_connects(), 0);
	if (!r || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
		return -1;
	assert_string_equal(got, "through the flood");
	return took;
}

static void trials(int backend, double bound)
{
	int failed = 0;

	for (int i = 1; i <= TRIALS; i++) {
		double took = trial(backend, bound, i);

		failed += took < 0 || took > bound;
	}
	assert_int_equal(failed, 0);
}

static void test_same_host_connector_through_flood(void **state)
{
	(void)state;
	trials(TP_BACKEND_AUTO, SAME_HOST_BOUND_S);
}

static void test_other_host_connector_through_flood(void **state)
{
	(void)state;
	trials(TP_BACKEND_TCP, OTHER_HOST_BOUND_S);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_same_host_connector_through_flood),
		cmocka_unit_test(test_other_host_connector_through_flood),
	};

	signal(SIGPIPE, SIG_IGN);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
