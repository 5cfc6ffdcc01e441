/* The listening (receiving) side of connection setup.
 *
 * A listener owns a Unix socket (same host) and, where peers may be on
 * other hosts, a TCP socket, and serves the one connector that proves it
 * holds the handle's token (auth.c).  Anyone who can reach a socket can
 * connect, so the listener never waits on one candidate: each is served
 * without blocking, side by side (candidate.c), in a table per socket, so
 * that strangers over TCP never take the place of a connector of this
 * host (room.c).  A connection from another user on the Unix socket is
 * hung up on as it is accepted, a stranger without the token at its
 * hello. */
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "backend.h"
#include "listen.h"
#include "sock.h"
#include "symmem.h"

/* Connections taken off each socket per call: enough to drain a flood
 * before the kernel's backlog fills, few enough to bound one call. */
#define ACCEPTS_PER_CALL 64

/* TCP only where a peer may be on another host: a named kind that is
 * carried on the Unix socket (NCCL_SYMMEM_BACKEND=shm) refuses other
 * hosts, so its listeners open no TCP port at all.  With auto the
 * listener cannot tell (a job of several hosts looks the same from
 * here), and tcp and ib connect over it on one host too. */
static int wants_tcp(const struct tp_options *opt)
{
	const struct tp_ops *named = backend_ops(opt->backend);

	return !(named && named->local);
}

/* Each kind that takes more than the sockets carry offers it in the
 * handle and holds what it needs while the listener lives; the handle
 * has room for one offer, the highest-priority kind's. */
static void ask_offers(struct tp_listener *l, struct tp_handle_info *info)
{
	const struct tp_ops *ops;

	for (unsigned i = 0; (ops = backend_ranked(i)) != NULL && !info->offered; i++)
		if (ops->offer)
			info->offered = ops->offer(&l->opt, &l->held[ops->kind], info->offer);
}

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
	for (int i = 0; i < CAND_MAX; i++) {
		cand_init(&l->cand[i]);
		cand_init(&l->local[i]);
	}
	l->opt = *opt;
	l->opt.ifname = NULL;		/* the caller's string need not outlive listen */
	l->uid = (int)getuid();
	memset(&info, 0, sizeof(info));
	rc = sock_random(l->token, sizeof(l->token));
	if (rc)
		goto fail;
	rc = sock_uds_listen(info.uds_name, &l->uds_fd);
	if (rc)
		goto fail;
	info.no_tcp = !wants_tcp(opt);
	if (!info.no_tcp) {
		rc = sock_tcp_listen(opt->ifname, &info, &l->tcp_fd);
		if (rc)
			goto fail;
	}
	l->opt.dev = dev;
	ask_offers(l, &info);
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

/* Who is on the other end, for the per-peer cap: the process (pid) on
 * the Unix socket, whose user must be ours; the address over TCP.
 * Returns 0 for a connection to hang up on at once. */
static int peer_of(struct tp_listener *l, int fd, int uds, const struct sockaddr_storage *ss,
		   struct cand_peer *peer)
{
	int pid, uid;

	memset(peer, 0, sizeof(*peer));
	if (uds) {
		if (sock_peer_cred(fd, &pid, &uid) || uid != l->uid) {
			listen_note_refusal(l, "the connector runs as another user");
			return 0;
		}
		peer->family = AF_UNIX;
		memcpy(peer->addr, &pid, sizeof(pid));
		peer->pid = pid;
		return 1;
	}
	peer->family = ss->ss_family;
	if (ss->ss_family == AF_INET)
		memcpy(peer->addr, &((const struct sockaddr_in *)ss)->sin_addr, 4);
	else if (ss->ss_family == AF_INET6)
		memcpy(peer->addr, &((const struct sockaddr_in6 *)ss)->sin6_addr, 16);
	return 1;
}

/* Takes every connection waiting on `lfd` (up to ACCEPTS_PER_CALL) into
 * its table, or hangs up on it. */
static void admit(struct tp_listener *l, int lfd, int uds, uint64_t now)
{
	struct cand *table = uds ? l->local : l->cand;

	for (int i = 0; i < ACCEPTS_PER_CALL; i++) {
		struct sockaddr_storage ss;
		socklen_t len = sizeof(ss);
		struct cand_peer peer;
		struct tp_comm *none;
		struct cand fresh, *c;
		int fd;

		fd = accept4(lfd, (struct sockaddr *)&ss, &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0 && (errno == EINTR || errno == ECONNABORTED))
			continue;
		if (fd < 0)
			return;	/* none waiting, or out of descriptors: next call */
		if (!peer_of(l, fd, uds, &ss, &peer)) {
			close(fd);
			continue;
		}
		if (!uds)
			sock_enable_nodelay(fd);
		/* A connector's hello comes with its connection, or just after:
		 * read before room is made, a stranger's is turned away without
		 * taking a place, and a connector's takes one from the silent. */
		cand_init(&fresh);
		cand_start(&fresh, fd, uds, &peer, now);
		cand_step(l, &fresh, now, &none);
		if (fresh.fd < 0)
			continue;
		c = cand_make_room(l, table, &fresh, now);
		if (!c) {
			listen_note_refusal(l, "too many connections waiting to prove the token");
			cand_drop(&fresh);
			continue;
		}
		*c = fresh;
		/* Its challenge goes out at once; nothing completes from here. */
		cand_step(l, c, now, &none);
	}
}

/* Moves every connection of `table` on a step; the first that is ready
 * goes to *out, a failure of one that proved the token is the accept's. */
static int step_table(struct tp_listener *l, struct cand *table, uint64_t now,
		      struct tp_comm **out)
{
	for (int i = 0; i < CAND_MAX; i++) {
		int rc;

		if (table[i].fd < 0)
			continue;
		rc = cand_step(l, &table[i], now, out);
		if (rc || *out)
			return rc;
	}
	return SM_OK;
}

int tp_accept(struct tp_listener *l, struct tp_comm **out)
{
	uint64_t now = sm_now_ns();
	int rc;

	*out = NULL;
	if (!l->deadline_ns)
		l->deadline_ns = now + (uint64_t)(l->opt.connect_timeout * 1e9);
	/* Those in the tables first: a setup that waits is read, and its
	 * connector proved the token, before any newcomer looks for room. */
	rc = step_table(l, l->local, now, out);
	if (!rc && !*out)
		rc = step_table(l, l->cand, now, out);
	if (rc || *out)
		return rc;
	admit(l, l->uds_fd, 1, now);
	if (l->tcp_fd >= 0)
		admit(l, l->tcp_fd, 0, now);
	if (now <= l->deadline_ns)
		return SM_OK;
	if (l->refused)
		return sm_fail(SM_ERR_REMOTE, "no connector arrived within %.1f s "
			       "(NCCL_SYMMEM_CONNECT_TIMEOUT); %u connections were turned away "
			       "(another user, no proof of the token, or silent)",
			       l->opt.connect_timeout, l->refused);
	return sm_fail(SM_ERR_REMOTE,
		       "no connector arrived within %.1f s (NCCL_SYMMEM_CONNECT_TIMEOUT)",
		       l->opt.connect_timeout);
}

void tp_close_listener(struct tp_listener *l)
{
	if (!l)
		return;
	for (int i = 0; i < CAND_MAX; i++) {
		cand_drop(&l->cand[i]);
		cand_drop(&l->local[i]);
	}
	if (l->uds_fd >= 0)
		close(l->uds_fd);
	if (l->tcp_fd >= 0)
		close(l->tcp_fd);
	for (int k = 0; k < TP_BACKEND_COUNT; k++)
		if (l->held[k])
			backend_ops(k)->put(l->held[k]);
	free(l);
}
