/* The listening (receiving) side of connection setup.
 *
 * A listener owns a Unix socket (same host) and a TCP socket (other hosts)
 * and serves exactly one connector: the one that presents the random token
 * from the handle and, on one host, runs as the same user.  Anyone else is
 * told no and dropped, and the listener keeps waiting. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "internal.h"
#include "sock.h"
#include "symmem.h"

/* A connection that has not introduced itself by then is dropped, so a
 * silent stranger cannot keep the real connector waiting. */
#define CANDIDATE_PATIENCE_NS (5ull * 1000 * 1000 * 1000)

struct tp_listener {
	int uds_fd;
	int tcp_fd;
	uint8_t token[16];
	uint64_t deadline_ns;
	struct tp_options opt;		/* applied to each accepted connection */

	/* the connection being served */
	int cand_fd;
	int cand_uds;
	uint64_t cand_deadline_ns;
	int memfd;
	struct wire_hello hello;
	size_t got;
	struct tp_comm *comm;
	struct wire_reply reply;
	size_t sent;
	struct ib_dev *ib_dev;		/* held while listening (ib_usable) */
};

int tp_listen(const struct tp_options *opt, int dev, void *handle, struct tp_listener **out)
{
	struct tp_handle_info info;
	struct tp_listener *l;
	int rc;

	*out = NULL;
	l = calloc(1, sizeof(*l));
	if (!l)
		return sm_fail(SM_ERR_SYSTEM, "out of memory");
	l->uds_fd = -1;
	l->tcp_fd = -1;
	l->cand_fd = -1;
	l->memfd = -1;
	l->opt = *opt;
	l->opt.ifname = NULL;		/* the caller's string need not outlive listen */
	memset(&info, 0, sizeof(info));
	rc = sock_random(l->token, sizeof(l->token));
	if (rc)
		goto fail;
	rc = sock_uds_listen(info.uds_name, &l->uds_fd);
	if (rc)
		goto fail;
	rc = sock_tcp_listen(opt->ifname, &info, &l->tcp_fd);
	if (rc)
		goto fail;
	l->opt.dev = dev;
	info.ib = ib_usable(&l->opt, NULL, &l->ib_dev);
	if (info.ib)
		ib_dev_gid(l->ib_dev, info.ib_gid);
	info.host_id = tp_host_id();
	memcpy(info.token, l->token, 16);
	info.dev = dev;
	info.pid = (int)getpid();
	tp_handle_encode(&info, handle);
	*out = l;
	return SM_OK;

fail:
	tp_close_listener(l);
	return rc;
}

static void drop_candidate(struct tp_listener *l)
{
	if (l->comm)
		tp_close(l->comm);	/* owns cand_fd */
	else if (l->cand_fd >= 0)
		close(l->cand_fd);
	if (l->memfd >= 0)
		close(l->memfd);
	l->comm = NULL;
	l->cand_fd = -1;
	l->memfd = -1;
	l->got = 0;
	l->sent = 0;
}

static int token_equal(const uint8_t *a, const uint8_t *b)
{
	uint8_t diff = 0;

	for (int i = 0; i < 16; i++)
		diff |= a[i] ^ b[i];
	return diff == 0;
}

/* Best effort: tell a refused connector why before hanging up on it. */
static void refuse(struct tp_listener *l, int status, const char *why)
{
	struct wire_reply r = { .magic = WIRE_MAGIC, .status = status };

	snprintf(r.reason, sizeof(r.reason), "%s", why);
	sm_send_some(l->cand_fd, &r, sizeof(r), -1);
	sm_info("refused a connection: %s", why);
	drop_candidate(l);
}

/* This queue pair would not join the connector's: the two RDMA ports
 * cannot reach each other (Soft-RoCE and RoCE refuse a route they do not
 * have here).  Unless either end requires ibverbs, the connection goes on
 * over TCP and the reply says so; else the connection fails. */
static int unreachable(struct tp_listener *l, const struct wire_hello *h)
{
	int rc = ib_conn_unreachable(l->comm, l->opt.ib == 2 || (h->flags & WIRE_IB_REQUIRED));

	if (rc)
		return rc;
	l->reply.backend = TP_BACKEND_TCP;
	return comm_fall_back_to_tcp(l->comm, &l->opt);
}

static int take_connection(struct tp_listener *l)
{
	int fd = accept4(l->uds_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);

	l->cand_uds = 1;
	if (fd < 0) {
		fd = accept4(l->tcp_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		l->cand_uds = 0;
	}
	if (fd < 0)
		return 0;
	if (!l->cand_uds)
		sock_enable_nodelay(fd);
	l->cand_fd = fd;
	l->got = 0;
	l->cand_deadline_ns = sm_now_ns() + CANDIDATE_PATIENCE_NS;
	return 1;
}

/* The hello is complete: check who is asking and build the comm. 
 * Returns SM_OK with l->comm set, SM_OK with the candidate dropped (a
 * stranger), or an error for a connector with the right token whose setup
 * failed. */
static int check_hello(struct tp_listener *l)
{
	const struct wire_hello *h = &l->hello;
	int rc, pid, uid;

	if (h->magic != WIRE_MAGIC || h->version != WIRE_VERSION) {
		refuse(l, SM_ERR_INVALID, "not a symmem connector (bad magic or version)");
		return SM_OK;
	}
	if (!token_equal(h->token, l->token)) {
		refuse(l, SM_ERR_INVALID, "wrong connection token");
		return SM_OK;
	}
	if (l->cand_uds && (sock_peer_cred(l->cand_fd, &pid, &uid) || uid != (int)getuid())) {
		refuse(l, SM_ERR_INVALID, "connector runs as another user");
		return SM_OK;
	}
	if (l->cand_uds != (h->backend == TP_BACKEND_SHM) || (l->cand_uds && l->memfd < 0)) {
		refuse(l, SM_ERR_INVALID, "connector asked for a data path this socket cannot carry");
		return SM_OK;
	}
	if (h->backend == TP_BACKEND_IB && !l->ib_dev) {
		refuse(l, SM_ERR_INVALID, "connector asked for ibverbs, which this listener does "
		       "not take");
		return SM_OK;
	}
	l->comm = comm_new(0, l->cand_uds ? &tp_shm_ops :
			   h->backend == TP_BACKEND_IB ? &tp_ib_ops : &tp_tcp_ops, l->cand_fd);
	if (!l->comm)
		return sm_fail(SM_ERR_SYSTEM, "out of memory");
	l->comm->peer_pid = (int)h->pid;	/* for log lines only: the peer says it */
	memset(&l->reply, 0, sizeof(l->reply));
	l->reply.backend = h->backend;
	l->reply.flags = l->opt.ib == 2 ? WIRE_IB_REQUIRED : 0;
	rc = comm_setup(l->comm, &l->opt);
	if (!rc && h->backend == TP_BACKEND_IB)
		rc = ib_conn_open(l->comm, &l->opt, l->ib_dev, &l->reply.ib);
	if (!rc && h->backend == TP_BACKEND_IB && ib_conn_connect(l->comm, &h->ib))
		rc = unreachable(l, h);
	if (l->cand_uds) {
		if (!rc)
			rc = shm_comm_attach(l->comm, l->memfd, h->seg_size, l->opt.chunk_size);
		close(l->memfd);
		l->memfd = -1;
	}
	if (rc) {
		char why[sizeof(l->reply.reason)];

		snprintf(why, sizeof(why), "%s", sm_last_error());
		l->comm->fd = -1;	/* refuse() still needs the socket */
		tp_close(l->comm);
		l->comm = NULL;
		refuse(l, rc, why);
		return sm_fail(rc, "%s", why);
	}
	l->reply.magic = WIRE_MAGIC;
	l->reply.status = SM_OK;
	l->sent = 0;
	return SM_OK;
}

int tp_accept(struct tp_listener *l, struct tp_comm **out)
{
	uint64_t now = sm_now_ns();
	ssize_t n;
	int rc;

	*out = NULL;
	if (!l->deadline_ns)
		l->deadline_ns = now + (uint64_t)(l->opt.connect_timeout * 1e9);
	if (l->cand_fd < 0 && !take_connection(l))
		goto wait;
	if (!l->comm) {
		n = sm_recv_some(l->cand_fd, (uint8_t *)&l->hello + l->got, sizeof(l->hello) - l->got,
				   l->cand_uds ? &l->memfd : NULL);
		if (n < 0) {
			drop_candidate(l);	/* hung up before saying who it is */
			goto wait;
		}
		l->got += (size_t)n;
		if (l->got < sizeof(l->hello)) {
			if (now > l->cand_deadline_ns)
				drop_candidate(l);
			goto wait;
		}
		rc = check_hello(l);
		if (rc)
			return rc;
		if (!l->comm)
			goto wait;
	}
	n = l->sent < sizeof(l->reply) ? sm_send_some(l->cand_fd, (uint8_t *)&l->reply + l->sent,
						      sizeof(l->reply) - l->sent, -1) : 0;
	if (n < 0) {
		rc = sm_fail(SM_ERR_REMOTE, "connector hung up during setup");
		drop_candidate(l);
		return rc;
	}
	l->sent += (size_t)n;
	if (l->sent < sizeof(l->reply))
		goto wait;
	if (l->comm->ops == &tp_ib_ops) {
		char verdict, route[200];

		/* No receive may be posted to the connector's queue pair
		 * before it is ready for them and its probe write came back
		 * (connect.c). */
		n = sm_recv_some(l->cand_fd, &verdict, 1, NULL);
		if (n < 0 || (n == 1 && verdict == VERDICT_FAIL)) {
			ib_conn_route(l->comm, route, sizeof(route));
			rc = n < 0 ? sm_fail(SM_ERR_REMOTE, "connector hung up during setup") :
			     sm_fail(SM_ERR_REMOTE, "RDMA %s cannot reach each other, the connector "
				     "found (NCCL_SYMMEM_BACKEND=ib requires RDMA)", route);
			drop_candidate(l);
			return rc;
		}
		if (n == 0)
			goto wait;
		if (verdict == VERDICT_TCP) {
			sm_info("the connector (pid %d) cannot reach this host's RDMA port: this "
				"connection uses TCP", l->comm->peer_pid);
			rc = comm_fall_back_to_tcp(l->comm, &l->opt);
			if (rc)
				return rc;
		}
	}
	*out = l->comm;
	l->comm = NULL;
	l->cand_fd = -1;
	return SM_OK;

wait:
	if (now > l->deadline_ns)
		return sm_fail(SM_ERR_REMOTE,
			       "no connector arrived within %.1f s (NCCL_SYMMEM_CONNECT_TIMEOUT)",
			       l->opt.connect_timeout);
	return SM_OK;
}

void tp_close_listener(struct tp_listener *l)
{
	if (!l)
		return;
	drop_candidate(l);
	if (l->uds_fd >= 0)
		close(l->uds_fd);
	if (l->tcp_fd >= 0)
		close(l->tcp_fd);
	ib_dev_put(l->ib_dev);
	free(l);
}
