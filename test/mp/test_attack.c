/* Connection setup under attack, with real processes on real sockets:
 *
 *   other-user  another user's process floods the listener's Unix socket
 *               (root only: a child setuid()s to nobody);
 *   silent      a crowd of connections that never say a word, on the Unix
 *               socket and over TCP;
 *   setup       peers from many addresses that say hello, are challenged
 *               and then say no more, filling the table at the step where
 *               the real connector's setup waits;
 *   takeover    a process takes the TCP port of a listener that died and
 *               plays listener to its connector;
 *   room        who keeps a place when a table is full: strangers over
 *               TCP never take a connector's of this host, silent
 *               newcomers never push out a connection of a moment ago,
 *               and the kernel's queue has room past a crowd.
 *
 * In each, the real connector (a child process) and the listener (this
 * process) must still pair within their normal bound, or fail with a clean
 * error when they cannot, and nothing may be left open.  The program runs
 * the group its argument names. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
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
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "fd_util.h"
#include "wire.h"		/* WIRE_MAGIC, for the impostor's answer */
#include "listen.h"		/* CAND_PER_PEER, CAND_GRACE_NS */
#include "symmem.h"
#include "tp_pair.h"
#include "transport.h"

/* Connections each attacker holds per socket: more than the listener's
 * table (16) and than its kernel backlog used to be (16). */
#define CROWD 24
/* A pair that normally takes milliseconds; one candidate at a time with
 * 5 s each, as before, would need minutes for a crowd. */
#define PAIR_BOUND_S 3.0
#define NOBODY 65534
/* A crowd is one process on the Unix socket and one address over TCP:
 * the listener holds CAND_PER_PEER connections of each at most and hangs
 * up on the rest. */
#define HELD_AT_MOST (2 * CAND_PER_PEER)

/* In a child: descriptors a and b become 3 and 4 and every other one
 * from 3 up is closed, so an attacker holds none of the listener's
 * sockets (or another child's pipes) open. */
static void keep_two(int a, int b)
{
	int a2 = fcntl(a, F_DUPFD, 10), b2 = fcntl(b, F_DUPFD, 10);

	if (a2 < 0 || b2 < 0 || dup2(a2, 3) != 3 || dup2(b2, 4) != 4)
		_exit(90);
	close_range(5, ~0u, 0);
}

/* The attackers' connections never wait: one the listener's backlog has
 * no room for is not made (and the report says so). */
static int uds_dial(const char *name)
{
	struct sockaddr_un sa;
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0);

	memset(&sa, 0, sizeof(sa));
	sa.sun_family = AF_UNIX;
	memcpy(sa.sun_path + 1, name, strlen(name));
	if (fd >= 0 && connect(fd, (struct sockaddr *)&sa,
			       (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 +
					   strlen(name))) == 0)
		return fd;
	if (fd >= 0)
		close(fd);
	return -1;
}

static socklen_t tcp_addr(const struct tp_handle_info *info, struct sockaddr_storage *ss)
{
	memset(ss, 0, sizeof(*ss));
	if (info->family == AF_INET) {
		struct sockaddr_in *sin = (struct sockaddr_in *)ss;

		sin->sin_family = AF_INET;
		sin->sin_port = htons(info->port);
		memcpy(&sin->sin_addr, info->addr, 4);
		return sizeof(*sin);
	}
	struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)ss;

	sin6->sin6_family = AF_INET6;
	sin6->sin6_port = htons(info->port);
	memcpy(&sin6->sin6_addr, info->addr, 16);
	return sizeof(*sin6);
}

static int tcp_dial(const struct tp_handle_info *info)
{
	struct sockaddr_storage ss;
	socklen_t len = tcp_addr(info, &ss);
	int fd = socket(info->family, SOCK_STREAM | SOCK_NONBLOCK, 0);
	struct pollfd p = { .fd = fd, .events = POLLOUT };
	int err = -1;
	socklen_t elen = sizeof(err);

	if (fd < 0)
		return -1;
	if (connect(fd, (struct sockaddr *)&ss, len) == 0 ||
	    (errno == EINPROGRESS && poll(&p, 1, 1000) == 1 &&
	     !getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &elen) && err == 0))
		return fd;
	close(fd);
	return -1;
}

/* read() of a whole report or answer, waiting `ms` at most for it. */
static ssize_t read_within(int fd, void *buf, size_t len, int ms)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };

	if (poll(&p, 1, ms) != 1)
		return -1;
	return read(fd, buf, len);
}

/* What an attacker saw: connections it made, and of those the ones the
 * listener hung up on before sending a single byte. */
struct crowd_report {
	int made;
	int hung_up_silently;
};

/* Waits up to `ms` for each of fds[] to be hung up on; counts those that
 * were, with nothing read first. */
static int count_hung_up(const int *fds, int n, int ms)
{
	double end = now() + ms / 1000.0;
	int gone = 0;

	for (int i = 0; i < n; i++) {
		struct pollfd p = { .fd = fds[i], .events = POLLIN };
		char b;
		int left = (int)((end - now()) * 1000);
		ssize_t n;

		if (poll(&p, 1, left > 0 ? left : 0) != 1)
			continue;
		n = recv(fds[i], &b, 1, MSG_DONTWAIT);
		gone += n == 0 || (n < 0 && errno == ECONNRESET);
	}
	return gone;
}

/* A child that opens CROWD connections to the Unix socket and, with
 * `tcp`, CROWD more to the TCP port, and holds them without a word.  It
 * reports on `rep_rd` how many it made, then, once the parent writes to
 * `go_wr`, how many the listener hung up on within a second; it exits
 * when `go_wr` closes (or after 30 s).  With uid >= 0 it first becomes
 * that user. */
static pid_t crowd(const struct tp_handle_info *info, int tcp, int uid, int *rep_rd, int *go_wr)
{
	int rep[2], go[2];
	pid_t pid;

	assert_int_equal(pipe(rep), 0);
	assert_int_equal(pipe(go), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct crowd_report r = { 0 };
		struct pollfd p = { .fd = 4, .events = POLLIN };
		int fds[2 * CROWD], n = 0;
		char c;

		keep_two(rep[1], go[0]);
		if (uid >= 0 && (setgroups(0, NULL) || setgid((gid_t)uid) || setuid((uid_t)uid)))
			_exit(92);
		for (int i = 0; i < CROWD; i++)
			if ((fds[n] = uds_dial(info->uds_name)) >= 0)
				n++;
		for (int i = 0; tcp && i < CROWD; i++)
			if ((fds[n] = tcp_dial(info)) >= 0)
				n++;
		r.made = n;
		if (write(3, &r, sizeof(r)) != sizeof(r))
			_exit(93);
		if (poll(&p, 1, 30000) != 1 || read(4, &c, 1) != 1)
			_exit(94);
		r.hung_up_silently = count_hung_up(fds, n, 1000);
		if (write(3, &r, sizeof(r)) != sizeof(r))
			_exit(95);
		poll(&p, 1, 30000);
		_exit(0);
	}
	close(rep[1]);
	close(go[0]);
	*rep_rd = rep[0];
	*go_wr = go[1];
	return pid;
}

/* What the crowd saw of the listener so far. */
static void crowd_count(int rep_rd, int go_wr, struct crowd_report *rep)
{
	assert_int_equal(write(go_wr, "c", 1), 1);
	assert_int_equal(read_within(rep_rd, rep, sizeof(*rep), 10000), sizeof(*rep));
}

static void crowd_end(pid_t pid, int rep_rd, int go_wr)
{
	int status;

	close(go_wr);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	close(rep_rd);
}

/* Accepts on `l` until the real connector's comm arrives; returns the
 * seconds it took (failing the test past `bound`), then takes its message
 * and reaps it. */
static double accept_real(struct tp_listener *l, pid_t connector, double bound)
{
	struct tp_comm *r = NULL;
	struct tp_req *q;
	char got[64] = { 0 };
	double t0 = now();
	int rc = SM_OK, status;
	double took;

	while (!r && rc == SM_OK && now() - t0 < bound) {
		rc = tp_accept(l, &r);
		if (!r && rc == SM_OK)
			usleep(200);
	}
	took = now() - t0;
	if (!r)
		print_message("# accept: %s after %.2f s\n", rc ? sm_last_error() : "nothing",
			      took);
	assert_int_equal(rc, SM_OK);
	assert_non_null(r);
	assert_int_equal(tp_irecv(r, got, sizeof(got), NULL, &q), SM_OK);
	assert_non_null(q);
	wait_done(q, now() + 10);
	assert_string_equal(got, "through the crowd");
	assert_int_equal(waitpid(connector, &status, 0), connector);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	tp_close(r);
	return took;
}

/* A crowd (of user `uid`, or ours with -1) holds its connections while
 * the real pair is made over `backend`; *rep: what the crowd saw while
 * the listener was still open. */
static void pair_through_crowd(int backend, int uid, struct crowd_report *rep)
{
	struct tp_options o = options(backend, 1 << 20, 65536);
	struct tp_handle_info info;
	uint8_t h[TP_HANDLE_SIZE];
	struct tp_listener *l;
	int fds = open_fds(), rep_rd, go;
	pid_t attacker, connector;
	double took;

	assert_int_equal(tp_listen(&o, 0, h, &l), SM_OK);
	assert_int_equal(tp_handle_decode(h, &info), SM_OK);
	attacker = crowd(&info, !info.no_tcp, uid, &rep_rd, &go);
	assert_int_equal(read_within(rep_rd, rep, sizeof(*rep), 10000), sizeof(*rep));
	assert_int_equal(rep->made, info.no_tcp ? CROWD : 2 * CROWD);
	connector = fork_connector(&o, h, "through the crowd", 20);
	took = accept_real(l, connector, PAIR_BOUND_S);
	crowd_count(rep_rd, go, rep);
	print_message("# paired in %.3f s past %d connections, %d hung up on\n", took,
		      rep->made, rep->hung_up_silently);
	tp_close_listener(l);
	crowd_end(attacker, rep_rd, go);
	assert_int_equal(open_fds(), fds);
	assert_int_equal(tp_pending_connects(), 0);
}

/* (a) Another user's connections to the Unix socket are hung up on as
 * they are accepted, before a byte is read or sent, and the real pair is
 * made as if they were not there.  (Before, each was served in turn and
 * given 5 s to say hello, and the uid was checked only after it.) */
static void test_other_user_hung_up_at_accept(void **state)
{
	struct crowd_report rep;

	(void)state;
	pair_through_crowd(TP_BACKEND_SHM, NOBODY, &rep);
	assert_int_equal(rep.hung_up_silently, rep.made);
}

/* The same user's silent crowd on the Unix socket and over TCP: the real
 * connector gets through at once (the oldest silent ones make room). */
static void test_silent_crowd_shm(void **state)
{
	struct crowd_report rep;

	(void)state;
	pair_through_crowd(TP_BACKEND_AUTO, -1, &rep);
	assert_true(rep.hung_up_silently >= rep.made - HELD_AT_MOST);
}

/* Over TCP the real connector comes from the crowd's own address, so the
 * per-address cap holds it too: the silent ones go first. */
static void test_silent_crowd_tcp(void **state)
{
	struct crowd_report rep;

	(void)state;
	pair_through_crowd(TP_BACKEND_TCP, -1, &rep);
	assert_true(rep.hung_up_silently >= rep.made - HELD_AT_MOST);
}

/* With no real connector, the accept ends at its deadline with an error
 * that says connections were turned away, and not later. */
static void test_silent_crowd_alone_times_out(void **state)
{
	struct tp_options o = options(TP_BACKEND_TCP, 1 << 20, 65536);
	struct tp_handle_info info;
	struct crowd_report rep;
	uint8_t h[TP_HANDLE_SIZE];
	struct tp_listener *l;
	struct tp_comm *r = NULL;
	int fds = open_fds(), rep_rd, go, rc = SM_OK;
	pid_t attacker;
	double t0;

	(void)state;
	o.connect_timeout = 1;
	assert_int_equal(tp_listen(&o, 0, h, &l), SM_OK);
	assert_int_equal(tp_handle_decode(h, &info), SM_OK);
	attacker = crowd(&info, 1, -1, &rep_rd, &go);
	assert_int_equal(read_within(rep_rd, &rep, sizeof(rep), 10000), sizeof(rep));
	t0 = now();
	while (rc == SM_OK && now() - t0 < 5) {
		rc = tp_accept(l, &r);
		assert_null(r);
		usleep(200);
	}
	assert_int_equal(rc, SM_ERR_REMOTE);
	assert_true(now() - t0 < 2);
	assert_non_null(strstr(sm_last_error(), "turned away"));
	crowd_count(rep_rd, go, &rep);
	assert_true(rep.hung_up_silently >= rep.made - HELD_AT_MOST);
	tp_close_listener(l);
	crowd_end(attacker, rep_rd, go);
	assert_int_equal(open_fds(), fds);
}

/* Peers that each say a valid hello from an address of their own
 * (127.0.0.x, so the per-address cap holds none of them back), read the
 * challenge and then never prove the token: a crowd that fills the
 * table with connections at the same step as the real connector.  Their
 * hellos carry good tickets (made here with the token: copies of
 * connectors' hellos), since a stranger's is refused before that step. */
#define SETUP_CROWD (CAND_MAX - 1)

struct setup_crowd {
	pid_t pid[SETUP_CROWD + 1];
	int n;
	int rep[2];		/* 'c': connected, hello sent; 'h': challenge read */
	int hold[2];		/* write end closed: every peer hangs up and exits */
};

/* Peer i, from 127.0.0.(2 + i): reports 'c' once its hello is sent and
 * 'h' once the challenge came, then holds its connection until fd 4
 * closes (or 30 s). */
static void setup_peer(const struct tp_handle_info *info, int i)
{
	struct sockaddr_in src = { .sin_family = AF_INET };
	struct wire_hello hello = { .magic = WIRE_MAGIC, .version = WIRE_VERSION,
				    .backend = TP_BACKEND_TCP, .pid = (uint32_t)getpid() };
	struct wire_challenge chal;
	struct sockaddr_storage ss;
	socklen_t len = tcp_addr(info, &ss);
	struct pollfd p = { .fd = 4, .events = POLLIN };
	size_t got = 0;
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	ssize_t n;

	src.sin_addr.s_addr = htonl(INADDR_LOOPBACK + 1 + (uint32_t)i);
	if (getrandom(hello.nonce, sizeof(hello.nonce), 0) != sizeof(hello.nonce))
		_exit(90);
	wire_ticket(info->token, &hello, hello.ticket);
	if (fd < 0 || bind(fd, (struct sockaddr *)&src, sizeof(src)) ||
	    connect(fd, (struct sockaddr *)&ss, len))
		_exit(91);
	if (send(fd, &hello, sizeof(hello), MSG_NOSIGNAL) != sizeof(hello) || write(3, "c", 1) != 1)
		_exit(92);
	while (got < sizeof(chal) &&
	       (n = read_within(fd, (char *)&chal + got, sizeof(chal) - got, 10000)) > 0)
		got += (size_t)n;
	if (got == sizeof(chal) && write(3, "h", 1) != 1)
		_exit(93);
	poll(&p, 1, 30000);
	_exit(0);
}

/* Starts peer c->n and waits for its hello to be out. */
static void setup_crowd_add(struct setup_crowd *c, const struct tp_handle_info *info)
{
	char r;
	pid_t pid = fork();

	assert_true(pid >= 0);
	if (pid == 0) {
		keep_two(c->rep[1], c->hold[0]);
		setup_peer(info, c->n);
	}
	c->pid[c->n++] = pid;
	assert_int_equal(read_within(c->rep[0], &r, 1, 10000), 1);
	assert_int_equal(r, 'c');
}

static void setup_crowd_end(struct setup_crowd *c)
{
	int status;

	close(c->hold[1]);
	for (int i = 0; i < c->n; i++) {
		assert_int_equal(waitpid(c->pid[i], &status, 0), c->pid[i]);
		assert_true(WIFEXITED(status));
		assert_int_equal(WEXITSTATUS(status), 0);
	}
	close(c->hold[0]);
	close(c->rep[0]);
	close(c->rep[1]);
}

static int cands_in(const struct tp_listener *l, int state)
{
	int n = 0;

	for (int i = 0; i < CAND_MAX; i++)
		n += l->cand[i].fd >= 0 && l->cand[i].state == state;
	return n;
}

/* The real connector and the listener, driven from this thread as NCCL
 * drives them, so that each step happens exactly when the test says:
 * the connector's hello is answered with its challenge, and then the
 * crowd's SETUP_CROWD peers are challenged too, all before the connector
 * reads its own.  With `setup_sent`, the connector's setup then waits in
 * its socket, else it is still to be sent, when one more peer arrives at
 * the full table.  The pair must still be made within PAIR_BOUND_S. */
static void pair_past_setup_crowd(int setup_sent)
{
	struct tp_options o = options(TP_BACKEND_TCP, 1 << 20, 65536);
	struct tp_handle_info info;
	struct setup_crowd crowd;
	uint8_t h[TP_HANDLE_SIZE];
	struct tp_listener *l;
	struct tp_comm *s = NULL, *r = NULL;
	struct tp_req *sq = NULL, *rq = NULL;
	char msg[64] = "through the crowd", got[64] = { 0 }, c;
	int fds = open_fds(), rc = SM_OK, ra = SM_OK;
	double t0;

	o.ifname = "lo";	/* 127.0.0.1: the crowd's addresses are loopback too */
	assert_int_equal(tp_listen(&o, 0, h, &l), SM_OK);
	assert_int_equal(tp_handle_decode(h, &info), SM_OK);
	assert_int_equal(info.family, AF_INET);
	assert_int_equal(pipe(crowd.rep), 0);
	assert_int_equal(pipe(crowd.hold), 0);
	crowd.n = 0;

	/* The connector says hello and is challenged, first of all. */
	t0 = now();
	while (!cands_in(l, CAND_SETUP) && now() - t0 < 5) {
		assert_int_equal(tp_connect(&o, h, &s), SM_OK);
		assert_int_equal(tp_accept(l, &r), SM_OK);
		usleep(200);
	}
	assert_int_equal(cands_in(l, CAND_SETUP), 1);

	/* The crowd fills the table's other slots, and is challenged. */
	for (int i = 0; i < SETUP_CROWD; i++)
		setup_crowd_add(&crowd, &info);
	t0 = now();
	while (cands_in(l, CAND_SETUP) < CAND_MAX && now() - t0 < 5) {
		assert_int_equal(tp_accept(l, &r), SM_OK);
		assert_null(r);
		usleep(200);
	}
	assert_int_equal(cands_in(l, CAND_SETUP), CAND_MAX);
	for (int i = 0; i < SETUP_CROWD; i++) {
		assert_int_equal(read_within(crowd.rep[0], &c, 1, 10000), 1);
		assert_int_equal(c, 'h');
	}
	if (setup_sent) {
		assert_int_equal(tp_connect(&o, h, &s), SM_OK);
		assert_null(s);
		assert_int_equal(tp_connects_awaiting_reply(), 1);
	}

	/* One more peer at the full table, then the pair as usual. */
	setup_crowd_add(&crowd, &info);
	if (setup_sent) {
		/* The setup that waits is read before room is made: proved,
		 * the connector is not one that may be dropped. */
		assert_int_equal(tp_accept(l, &r), SM_OK);
		assert_int_equal(cands_in(l, CAND_REPLY), 1);
	}
	t0 = now();
	while ((!s || !r) && rc == SM_OK && ra == SM_OK && now() - t0 < PAIR_BOUND_S) {
		if (!r)
			ra = tp_accept(l, &r);
		if (!s && ra == SM_OK)
			rc = tp_connect(&o, h, &s);
		usleep(200);
	}
	if (!s || !r)
		print_message("# %s: %s after %.2f s\n", rc ? "connect" : "accept",
			      rc || ra ? sm_last_error() : "nothing", now() - t0);
	assert_int_equal(rc, SM_OK);
	assert_int_equal(ra, SM_OK);
	assert_non_null(s);
	assert_non_null(r);
	assert_int_equal(tp_irecv(r, got, sizeof(got), NULL, &rq), SM_OK);
	assert_non_null(rq);
	t0 = now();
	while (!sq && now() - t0 < 10)
		assert_int_equal(tp_isend(s, msg, sizeof(msg), NULL, &sq), SM_OK);
	assert_non_null(sq);
	complete_both(sq, rq, now() + 10);
	assert_string_equal(got, msg);
	tp_close(s);
	tp_close(r);
	tp_close_listener(l);
	setup_crowd_end(&crowd);
	assert_int_equal(tp_pending_connects(), 0);
	assert_int_equal(open_fds(), fds);
}

/* The connector's setup already waits in its socket when the table is
 * full of peers at the same step and one more arrives: the listener
 * reads what waits before it makes room, so the connector, though the
 * oldest there, is not the one dropped. */
static void test_setup_waiting_is_served_first(void **state)
{
	(void)state;
	pair_past_setup_crowd(1);
}

/* The connector is dropped after its challenge went out but before its
 * setup came (a slow one): it hears the hang-up before any reply byte,
 * and dials again rather than failing. */
static void test_setup_dropped_redials(void **state)
{
	(void)state;
	pair_past_setup_crowd(0);
}

/* ---- room: who keeps a place when a table is full --------------------- */

/* A TCP connection from 127.0.0.(2 + i), connected, silent. */
static int silent_from(const struct tp_handle_info *info, int i)
{
	struct sockaddr_in src = { .sin_family = AF_INET };
	struct sockaddr_storage ss;
	socklen_t len = tcp_addr(info, &ss);
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	src.sin_addr.s_addr = htonl(INADDR_LOOPBACK + 2 + (uint32_t)i);
	assert_true(fd >= 0);
	assert_int_equal(bind(fd, (struct sockaddr *)&src, sizeof(src)), 0);
	assert_int_equal(connect(fd, (struct sockaddr *)&ss, len), 0);
	return fd;
}

/* The connector on `fd`, silent until now, says a hello that shows the
 * token; 1 when the listener answers with its challenge, 0 when it hung
 * up. */
static int challenged(struct tp_listener *l, const struct tp_handle_info *info, int fd,
		      int backend)
{
	struct wire_hello hello = { .magic = WIRE_MAGIC, .version = WIRE_VERSION,
				    .backend = (uint16_t)backend, .pid = (uint32_t)getpid() };
	struct wire_challenge chal;
	struct tp_comm *r = NULL;
	double end = now() + 5;
	size_t got = 0;

	assert_int_equal(getrandom(hello.nonce, sizeof(hello.nonce), 0), WIRE_NONCE);
	wire_ticket(info->token, &hello, hello.ticket);
	if (send(fd, &hello, sizeof(hello), MSG_NOSIGNAL) != sizeof(hello))
		return 0;
	while (got < sizeof(chal) && now() < end) {
		ssize_t n;

		assert_int_equal(tp_accept(l, &r), SM_OK);
		assert_null(r);
		n = recv(fd, (char *)&chal + got, sizeof(chal) - got, MSG_DONTWAIT);
		if (n == 0 || (n < 0 && errno != EAGAIN))
			return 0;
		if (n > 0)
			got += (size_t)n;
	}
	return got == sizeof(chal) && chal.status == SM_OK;
}

static void close_all(int *fd, int n)
{
	for (int i = 0; i < n; i++)
		close(fd[i]);
}

/* A connector of this host, silent so far (a process between its
 * connect and its hello), then twice a table of silent TCP strangers
 * from addresses of their own, all taken in one accept: the strangers
 * push out each other, never the connector, which is challenged when it
 * speaks.  (In one table for both sockets, the 16th stranger pushed it
 * out, the oldest of equals.) */
static void test_tcp_crowd_leaves_local_alone(void **state)
{
	struct tp_options o = options(TP_BACKEND_AUTO, 1 << 20, 65536);
	struct tp_handle_info info;
	uint8_t h[TP_HANDLE_SIZE];
	struct tp_listener *l;
	struct tp_comm *r = NULL;
	int crowd[2 * CAND_MAX], local, fds = open_fds();

	(void)state;
	o.ifname = "lo";
	assert_int_equal(tp_listen(&o, 0, h, &l), SM_OK);
	assert_int_equal(tp_handle_decode(h, &info), SM_OK);
	local = uds_dial(info.uds_name);
	assert_true(local >= 0);
	assert_int_equal(tp_accept(l, &r), SM_OK);
	for (int i = 0; i < 2 * CAND_MAX; i++)
		crowd[i] = silent_from(&info, i);
	assert_int_equal(tp_accept(l, &r), SM_OK);
	assert_null(r);
	assert_true(challenged(l, &info, local, TP_BACKEND_SHM));
	close(local);
	close_all(crowd, 2 * CAND_MAX);
	tp_close_listener(l);
	assert_int_equal(open_fds(), fds);
}

/* A table of silent strangers that have had their grace; the connector,
 * silent so far, takes the place of one; then a table more of silent
 * strangers, all taken in one accept: they push out the old ones, and
 * are turned away once only the connector and their own kind of a
 * moment ago are left.  The connector is challenged when it speaks.
 * (Without the grace, the last of them pushed it out.) */
static void test_fresh_connection_keeps_place(void **state)
{
	struct tp_options o = options(TP_BACKEND_TCP, 1 << 20, 65536);
	struct tp_handle_info info;
	uint8_t h[TP_HANDLE_SIZE];
	struct tp_listener *l;
	struct tp_comm *r = NULL;
	int old[CAND_MAX], young[CAND_MAX], conn, fds = open_fds();
	double t0;

	(void)state;
	o.ifname = "lo";
	assert_int_equal(tp_listen(&o, 0, h, &l), SM_OK);
	assert_int_equal(tp_handle_decode(h, &info), SM_OK);
	for (int i = 0; i < CAND_MAX; i++)
		old[i] = silent_from(&info, i);
	assert_int_equal(tp_accept(l, &r), SM_OK);
	usleep(CAND_GRACE_NS / 1000 + 20 * 1000);
	conn = silent_from(&info, CAND_MAX);
	t0 = now();
	assert_int_equal(tp_accept(l, &r), SM_OK);
	for (int i = 0; i < CAND_MAX; i++)
		young[i] = silent_from(&info, CAND_MAX + 1 + i);
	assert_int_equal(tp_accept(l, &r), SM_OK);
	assert_null(r);
	if (now() - t0 > CAND_GRACE_NS / 2e9) {
		print_message("# SKIP: %.0f ms between the connector and the last newcomer, "
			      "more than half its grace\n", (now() - t0) * 1e3);
	} else {
		assert_true(challenged(l, &info, conn, TP_BACKEND_TCP));
		assert_int_equal(count_hung_up(old, CAND_MAX, 1000), CAND_MAX);
	}
	close(conn);
	close_all(old, CAND_MAX);
	close_all(young, CAND_MAX);
	tp_close_listener(l);
	assert_int_equal(open_fds(), fds);
}

/* Connections the kernel queues for the listener, past any burst the
 * listener could meet between two accepts: 300 from one address, none
 * taken yet.  The connector's SYN still finds room: its connect
 * completes at once, not after TCP sends it again a second later.
 * (With the old queue of 128, it did not complete within a second.) */
#define QUEUED 300

static int somaxconn(void)
{
	FILE *f = fopen("/proc/sys/net/core/somaxconn", "r");
	int n = 0;

	if (f && fscanf(f, "%d", &n) != 1)
		n = 0;
	if (f)
		fclose(f);
	return n;
}

static void test_queue_holds_a_crowd(void **state)
{
	struct tp_options o = options(TP_BACKEND_TCP, 1 << 20, 65536);
	struct sockaddr_in src = { .sin_family = AF_INET };
	struct tp_handle_info info;
	struct sockaddr_storage ss;
	uint8_t h[TP_HANDLE_SIZE];
	struct tp_listener *l;
	int crowd[QUEUED], fd, fds = open_fds();
	socklen_t len;
	double t0;

	(void)state;
	if (somaxconn() <= QUEUED) {
		print_message("# SKIP: net.core.somaxconn is %d, the kernel's cap on the queue\n",
			      somaxconn());
		skip();
	}
	o.ifname = "lo";
	assert_int_equal(tp_listen(&o, 0, h, &l), SM_OK);
	assert_int_equal(tp_handle_decode(h, &info), SM_OK);
	len = tcp_addr(&info, &ss);
	src.sin_addr.s_addr = htonl(INADDR_LOOPBACK + 2);
	for (int i = 0; i < QUEUED; i++) {
		crowd[i] = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
		assert_true(crowd[i] >= 0);
		assert_int_equal(bind(crowd[i], (struct sockaddr *)&src, sizeof(src)), 0);
		assert_true(connect(crowd[i], (struct sockaddr *)&ss, len) == 0 ||
			    errno == EINPROGRESS);
	}
	t0 = now();
	fd = tcp_dial(&info);	/* from 127.0.0.1, waiting 1 s at most */
	print_message("# connect past %d queued: %s in %.3f s\n", QUEUED,
		      fd >= 0 ? "done" : "NOT done", now() - t0);
	assert_true(fd >= 0);
	assert_true(now() - t0 < 0.5);
	close(fd);
	close_all(crowd, QUEUED);
	tp_close_listener(l);
	assert_int_equal(open_fds(), fds);
}

/* The impostor: binds the dead listener's address and port, accepts one
 * connection, answers whatever comes with bytes that look like a
 * listener's first answer (our magic, status 0, the rest random), and
 * sends back on `out` every byte the connector sent it. */
static pid_t impostor(const struct tp_handle_info *info, int *ready_rd, int *out_rd)
{
	int ready[2], out[2];
	pid_t pid;

	assert_int_equal(pipe(ready), 0);
	assert_int_equal(pipe(out), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct sockaddr_storage ss;
		socklen_t len = tcp_addr(info, &ss);
		uint8_t seen[65536], answer[4096];
		size_t nseen = 0;
		int s, c, one = 1, answered = 0;
		uint32_t magic = WIRE_MAGIC;
		double end;

		struct pollfd lp;

		keep_two(ready[1], out[1]);
		s = socket(info->family, SOCK_STREAM, 0);
		setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (s < 0 || bind(s, (struct sockaddr *)&ss, len) || listen(s, 4))
			_exit(92);
		if (write(3, "r", 1) != 1)
			_exit(93);
		lp = (struct pollfd){ .fd = s, .events = POLLIN };
		c = poll(&lp, 1, 5000) == 1 ? accept(s, NULL, NULL) : -1;
		end = now() + 5;
		while (c >= 0 && now() < end && nseen < sizeof(seen)) {
			struct pollfd p = { .fd = c, .events = POLLIN };
			ssize_t n;

			if (poll(&p, 1, 100) != 1)
				continue;
			n = recv(c, seen + nseen, sizeof(seen) - nseen, 0);
			if (n <= 0)
				break;
			nseen += (size_t)n;
			if (!answered) {
				if (getrandom(answer, sizeof(answer), 0) != sizeof(answer))
					_exit(94);
				memcpy(answer, &magic, 4);
				memset(answer + 4, 0, 4);
				answered = send(c, answer, sizeof(answer), MSG_NOSIGNAL) > 0;
			}
		}
		_exit(write(4, seen, nseen) == (ssize_t)nseen ? 0 : 95);
	}
	close(ready[1]);
	close(out[1]);
	*ready_rd = ready[0];
	*out_rd = out[0];
	return pid;
}

/* (c) A process that took over the TCP port of a dead listener: the
 * connector fails within its bound saying the process there did not prove
 * the token, and the impostor never saw the token (before, it came in the
 * first message, and a status-0 answer made the connection). */
static void test_port_taken_over(void **state)
{
	struct tp_options o = options(TP_BACKEND_TCP, 1 << 20, 65536);
	struct tp_handle_info info;
	uint8_t h[TP_HANDLE_SIZE], seen[65536];
	struct tp_listener *l;
	struct tp_comm *s = NULL;
	int fds = open_fds(), ready, out, rc = SM_OK, status;
	size_t nseen = 0;
	ssize_t n;
	double t0;
	char go;
	pid_t pid;

	(void)state;
	assert_int_equal(tp_listen(&o, 0, h, &l), SM_OK);
	assert_int_equal(tp_handle_decode(h, &info), SM_OK);
	tp_close_listener(l);
	pid = impostor(&info, &ready, &out);
	assert_int_equal(read_within(ready, &go, 1, 10000), 1);
	t0 = now();
	while (!s && rc == SM_OK && now() - t0 < 5) {
		rc = tp_connect(&o, h, &s);
		usleep(200);
	}
	assert_null(s);
	assert_int_equal(rc, SM_ERR_REMOTE);
	assert_true(now() - t0 < 2);
	assert_non_null(strstr(sm_last_error(), "did not prove"));
	while ((n = read(out, seen + nseen, sizeof(seen) - nseen)) > 0)
		nseen += (size_t)n;
	assert_true(nseen > 0);		/* it was spoken to */
	assert_null(memmem(seen, nseen, info.token, sizeof(info.token)));
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	close(ready);
	close(out);
	assert_int_equal(tp_pending_connects(), 0);
	assert_int_equal(open_fds(), fds);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest other_user[] = {
		cmocka_unit_test(test_other_user_hung_up_at_accept),
	};
	const struct CMUnitTest silent[] = {
		cmocka_unit_test(test_silent_crowd_shm),
		cmocka_unit_test(test_silent_crowd_tcp),
		cmocka_unit_test(test_silent_crowd_alone_times_out),
	};
	const struct CMUnitTest setup[] = {
		cmocka_unit_test(test_setup_waiting_is_served_first),
		cmocka_unit_test(test_setup_dropped_redials),
	};
	const struct CMUnitTest takeover[] = {
		cmocka_unit_test(test_port_taken_over),
	};
	const struct CMUnitTest room[] = {
		cmocka_unit_test(test_tcp_crowd_leaves_local_alone),
		cmocka_unit_test(test_fresh_connection_keeps_place),
		cmocka_unit_test(test_queue_holds_a_crowd),
	};
	const char *mode = argc > 1 ? argv[1] : "";

	signal(SIGPIPE, SIG_IGN);
	if (!strcmp(mode, "other-user")) {
		if (geteuid() != 0) {
			printf("1..0 # SKIP not root: cannot setuid() a child to another user "
			       "(uid %d)\n", NOBODY);
			return 0;
		}
		return cmocka_run_group_tests(other_user, NULL, NULL);
	}
	if (!strcmp(mode, "silent"))
		return cmocka_run_group_tests(silent, NULL, NULL);
	if (!strcmp(mode, "setup"))
		return cmocka_run_group_tests(setup, NULL, NULL);
	if (!strcmp(mode, "takeover"))
		return cmocka_run_group_tests(takeover, NULL, NULL);
	if (!strcmp(mode, "room"))
		return cmocka_run_group_tests(room, NULL, NULL);
	fprintf(stderr, "usage: %s other-user|silent|setup|takeover|room\n", argv[0]);
	return 2;
}
