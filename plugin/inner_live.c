/* The liveness connection of a connection through the inner net plugin
 * (inner_live.h).  Two messages set it up, never blocking on the other
 * end's thread (NCCL's proxy thread connects and accepts from one loop):
 *
 *   connector -> listener: hello    magic, pid, nonce_c, MAC("live-t", nonce_c)
 *   listener -> connector: answer   magic, pid, nonce_l, MAC("live-l", nonce_c, nonce_l)
 *
 * The hello proves the token in one message, like the ticket of the
 * plugin's own handshake, so that a connector that dies right after its
 * connect is still known to the listener: the kernel keeps the hello
 * for the listener's accept, and the hang-up behind it.  A listener
 * takes one connector only.  The answer proves the listener over both
 * nonces.  After that a byte 'B' (bye) before the close is all it ever
 * carries. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include "inner_live.h"
#include "log.h"
#include "sock.h"	/* transport/'s address pick: NCCL_SOCKET_IFNAME's rule */
#include "symmem.h"
#include "wire.h"	/* transport/'s HMAC-SHA-256 */

#define LIVE_MAGIC 0x564c4d53u	/* "SMLV" */
#define BYE 'B'
/* A stranger that holds the one slot this long without proving anything
 * is dropped: the real connector needs a few round trips. */
#define CANDIDATE_NS (2ull * 1000 * 1000 * 1000)

struct hello {
	uint32_t magic;
	int32_t pid;
	uint8_t nonce[WIRE_NONCE];
	uint8_t ticket[WIRE_MAC];
};

struct answer {
	uint32_t magic;
	int32_t pid;
	uint8_t nonce[WIRE_NONCE];
	uint8_t mac[WIRE_MAC];
};

/* One direction of the setup: `len` bytes of `buf`, `done` so far. */
struct xfer {
	uint8_t buf[sizeof(struct answer)];
	size_t len, done;
};

/* Moves what the socket takes now: 1 when all of it moved, 0 not yet,
 * -1 when the socket failed or the other end hung up. */
static int xfer_step(int fd, struct xfer *x, int sending)
{
	while (x->done < x->len) {
		ssize_t n = sending ? send(fd, x->buf + x->done, x->len - x->done,
					   MSG_NOSIGNAL | MSG_DONTWAIT) :
				      recv(fd, x->buf + x->done, x->len - x->done, MSG_DONTWAIT);

		if (n > 0) {
			x->done += (size_t)n;
			continue;
		}
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
			return 0;
		return -1;
	}
	return 1;
}

static void xfer_set(struct xfer *x, const void *msg, size_t len)
{
	memcpy(x->buf, msg, len);
	x->len = len;
	x->done = 0;
}

static void xfer_expect(struct xfer *x, size_t len)
{
	x->len = len;
	x->done = 0;
}

static void mac_of(const uint8_t token[16], const char *label, const uint8_t *nonce_c,
		   const uint8_t *nonce_l, uint8_t out[WIRE_MAC])
{
	const void *parts[3] = { label, nonce_c, nonce_l };
	const size_t lens[3] = { strlen(label), WIRE_NONCE, WIRE_NONCE };
	uint8_t full[SHA256_BYTES];

	hmac_sha256(token, 16, parts, lens, 3, full);
	memcpy(out, full, WIRE_MAC);
}

static int nonce_fill(uint8_t *n)
{
	if (getrandom(n, WIRE_NONCE, 0) != WIRE_NONCE)
		return sm_fail(SM_ERR_SYSTEM, "getrandom: %s", strerror(errno));
	return SM_OK;
}

/* A host dies without closing anything: keepalives find that out within
 * about ten seconds.  A process's death needs none of them. */
static void keepalive(int fd)
{
	int on = 1, idle = 5, intvl = 1, cnt = 5;

	setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof(on));
	setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
	setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof(intvl));
	setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof(cnt));
}

/* The other end's address, for log lines: taken when the connection is
 * made, as a peer that hung up since may have no name left. */
static void host_of(const struct sockaddr_in *sin, char *out, size_t len)
{
	if (sin->sin_family != AF_INET || !inet_ntop(AF_INET, &sin->sin_addr, out, (socklen_t)len))
		snprintf(out, len, "?");
}

static void set_peer(struct live_peer *p, int fd, int pid, const char *host)
{
	p->fd = fd;
	p->pid = pid;
	snprintf(p->host, sizeof(p->host), "%s", host);
	keepalive(fd);
}

/* ---- the listener's side ---------------------------------------------- */

struct live_listener {
	int fd;				/* listening */
	int cand;			/* the connection being proven, or -1 */
	uint64_t cand_since;
	char cand_host[48];
	struct hello hello;
	struct xfer x;
};

int live_listen(const char *ifname, struct live_listener **out, uint8_t addr[4],
		uint16_t *port)
{
	static int said;
	struct tp_handle_info info;
	struct live_listener *l;
	int fd, rc;

	*out = NULL;
	*port = 0;
	memset(addr, 0, 4);
	memset(&info, 0, sizeof(info));
	rc = sock_tcp_listen(ifname, &info, &fd);
	if (rc)
		return rc;
	if (info.family != AF_INET) {
		close(fd);
		if (!__atomic_exchange_n(&said, 1, __ATOMIC_RELAXED))
			LOG_INFO("NET/symmem: no IPv4 address to listen on (NCCL_SOCKET_IFNAME=%s): "
				 "connections through the inner net plugin go without a liveness "
				 "check of their peer", ifname && *ifname ? ifname : "unset");
		return SM_OK;
	}
	l = calloc(1, sizeof(*l));
	if (!l) {
		close(fd);
		return sm_fail(SM_ERR_SYSTEM, "out of memory for a liveness listener");
	}
	l->fd = fd;
	l->cand = -1;
	memcpy(addr, info.addr, 4);
	*port = info.port;
	*out = l;
	return SM_OK;
}

static void drop_candidate(struct live_listener *l)
{
	if (l->cand >= 0)
		close(l->cand);
	l->cand = -1;
}

static const uint8_t no_nonce[WIRE_NONCE];

/* The candidate's hello: 1 proven (the answer is on its way), 0 not
 * yet, -1 turned away. */
static int candidate_step(struct live_listener *l, const uint8_t token[16])
{
	struct answer a = { .magic = LIVE_MAGIC, .pid = (int32_t)getpid() };
	uint8_t want[WIRE_MAC];
	struct xfer out;
	int rc = xfer_step(l->cand, &l->x, 0);

	if (rc <= 0)
		return rc;
	memcpy(&l->hello, l->x.buf, sizeof(l->hello));
	mac_of(token, "live-t", l->hello.nonce, no_nonce, want);
	if (l->hello.magic != LIVE_MAGIC || !wire_mac_equal(want, l->hello.ticket) ||
	    nonce_fill(a.nonce))
		return -1;
	mac_of(token, "live-l", l->hello.nonce, a.nonce, a.mac);
	/* 56 bytes into a fresh socket: they fit at once.  Where the
	 * connector is gone already, its hang-up shows next. */
	xfer_set(&out, &a, sizeof(a));
	(void)xfer_step(l->cand, &out, 1);
	return 1;
}

int live_accept(struct live_listener *l, const uint8_t token[16], struct live_peer *peer)
{
	int rc;

	for (;;) {
		if (l->cand < 0) {
			struct sockaddr_in sin = { 0 };
			socklen_t sl = sizeof(sin);

			l->cand = accept4(l->fd, (struct sockaddr *)&sin, &sl,
					  SOCK_NONBLOCK | SOCK_CLOEXEC);
			if (l->cand < 0)
				return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ?
					       0 : sm_fail(SM_ERR_SYSTEM, "accept(liveness): %s",
							   strerror(errno));
			l->cand_since = sm_now_ns();
			host_of(&sin, l->cand_host, sizeof(l->cand_host));
			xfer_expect(&l->x, sizeof(struct hello));
		}
		rc = candidate_step(l, token);
		if (rc == 1) {
			set_peer(peer, l->cand, l->hello.pid, l->cand_host);
			l->cand = -1;
			return 1;
		}
		if (rc == 0 && sm_now_ns() - l->cand_since < CANDIDATE_NS)
			return 0;
		drop_candidate(l);
	}
}

void live_close_listener(struct live_listener *l)
{
	if (!l)
		return;
	drop_candidate(l);
	close(l->fd);
	free(l);
}

/* ---- the connector's side --------------------------------------------- */

struct live_dial {
	int fd;
	int stage;			/* 0: TCP connect; 1: hello out; 2: answer in */
	char host[48];
	uint8_t token[16];
	uint8_t nonce[WIRE_NONCE];
	struct xfer x;
};

int live_dial_start(const uint8_t addr[4], uint16_t port, const uint8_t token[16],
		    struct live_dial **out)
{
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons(port) };
	struct hello h = { .magic = LIVE_MAGIC, .pid = (int32_t)getpid() };
	struct live_dial *d = calloc(1, sizeof(*d));
	int rc = SM_ERR_SYSTEM;

	*out = NULL;
	if (!d)
		return sm_fail(SM_ERR_SYSTEM, "out of memory for a liveness connection");
	memcpy(&sin.sin_addr, addr, 4);
	memcpy(d->token, token, 16);
	host_of(&sin, d->host, sizeof(d->host));
	d->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (d->fd < 0) {
		rc = sm_fail(SM_ERR_SYSTEM, "socket(liveness): %s", strerror(errno));
		goto fail;
	}
	if (connect(d->fd, (struct sockaddr *)&sin, sizeof(sin)) != 0 && errno != EINPROGRESS) {
		rc = sm_fail(SM_ERR_REMOTE, "cannot reach the peer's liveness port %s:%u: %s",
			     inet_ntoa(sin.sin_addr), port, strerror(errno));
		goto fail;
	}
	rc = nonce_fill(d->nonce);
	if (rc)
		goto fail;
	memcpy(h.nonce, d->nonce, WIRE_NONCE);
	mac_of(token, "live-t", d->nonce, no_nonce, h.ticket);
	xfer_set(&d->x, &h, sizeof(h));
	*out = d;
	return SM_OK;
fail:
	live_dial_free(d);
	return rc;
}

int live_dial_step(struct live_dial *d, struct live_peer *peer)
{
	struct answer a;
	uint8_t want[WIRE_MAC];
	int rc;

	if (d->stage == 0) {
		rc = sock_connect_done(d->fd);
		if (rc <= 0)
			return rc < 0 ? sm_fail(SM_ERR_REMOTE, "the peer's liveness port refused "
						"the connection") : 0;
		d->stage = 1;
	}
	rc = xfer_step(d->fd, &d->x, d->stage == 1);
	if (rc < 0)
		return sm_fail(SM_ERR_REMOTE, "the peer's liveness connection hung up%s",
			       d->stage == 1 ? " before the hello went" : "");
	if (rc == 0)
		return 0;
	if (d->stage == 1) {
		xfer_expect(&d->x, sizeof(struct answer));
		d->stage = 2;
		return 0;
	}
	memcpy(&a, d->x.buf, sizeof(a));
	mac_of(d->token, "live-l", d->nonce, a.nonce, want);
	if (a.magic != LIVE_MAGIC || !wire_mac_equal(want, a.mac))
		return sm_fail(SM_ERR_REMOTE, "the peer's liveness port did not prove the "
			       "connection's token");
	set_peer(peer, d->fd, a.pid, d->host);
	d->fd = -1;
	return 1;
}

int live_dial_sent(const struct live_dial *d)
{
	return d->stage == 2;
}

void live_dial_bye(struct live_dial *d)
{
	uint8_t bye = BYE;

	if (d && d->stage == 2 && send(d->fd, &bye, 1, MSG_NOSIGNAL | MSG_DONTWAIT) != 1)
		LOG_INFO("NET/symmem: could not tell a peer of an orderly close: %s",
			 strerror(errno));
}

void live_dial_free(struct live_dial *d)
{
	if (!d)
		return;
	if (d->fd >= 0)
		close(d->fd);
	free(d);
}

/* ---- afterwards ------------------------------------------------------- */

int live_check(struct live_peer *p)
{
	uint8_t buf[16];
	ssize_t n;

	if (p->fd < 0)
		return LIVE_UP;
	n = recv(p->fd, buf, sizeof(buf), MSG_DONTWAIT);
	if (n > 0)
		return memchr(buf, BYE, (size_t)n) ? LIVE_CLOSED : LIVE_UP;
	if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
		return LIVE_UP;
	return LIVE_GONE;
}

void live_close(struct live_peer *p, int orderly)
{
	uint8_t bye = BYE;

	if (p->fd < 0)
		return;
	if (orderly && send(p->fd, &bye, 1, MSG_NOSIGNAL | MSG_DONTWAIT) != 1)
		LOG_INFO("NET/symmem: could not tell peer process %d on %s of an orderly close: %s",
			 p->pid, p->host, strerror(errno));
	close(p->fd);
	p->fd = -1;
}
