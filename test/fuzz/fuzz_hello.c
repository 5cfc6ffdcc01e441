/* The listener's side of connection setup (transport/listen.c,
 * candidate.c, and the backends' accept_open): what a connecting process
 * sends it.  Anyone on the host can connect to the Unix socket, anyone who
 * reaches the port to the TCP one: the listener must turn every stranger
 * away and keep serving, and set up only what a well-formed setup from
 * the token's holder asks for.
 *
 * The target owns the listener, so it holds the token and plays a
 * connector that can prove it: it sends the input's hello with the
 * ticket wire_ticket() makes (or the input's own, a stranger's guess),
 * reads the challenge (whose proof must be right), answers with the
 * input's setup carrying the proof wire_proof() makes (or the input's
 * own) and, on one host, the ring segment; then reads the reply.  So the
 * checks after the proof (seg_size, the segment, the backend asked for)
 * see the input's values.
 *
 * Input: flags (below); with F_SEGMENT the segment's ring size (u32) and
 * its first 64 bytes (the header the connector writes); with F_RAW the
 * rest is sent as it is, no handshake; else a struct wire_hello, a
 * struct wire_setup, and the rest, sent after the setup. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "fuzz.h"
#include "shm.h"
#include "symmem.h"
#include "wire.h"

#define F_TCP 1u		/* TCP, else the Unix socket */
#define F_SEGMENT 2u		/* pass a ring segment */
#define F_UNSEALED 4u		/* ... not sealed against shrinking */
#define F_WRONG_PROOF 8u	/* the setup's proof is the input's */
#define F_EARLY_FD 16u		/* the segment rides with the hello, not the setup */
#define F_RAW 32u		/* no handshake: the input's bytes as they are */
#define F_WRONG_TICKET 64u	/* the hello's ticket is the input's */
/* tp_accept calls per run: setup takes a few, every wait is bounded. */
#define ACCEPT_CALLS 16
#define MAX_RING (1u << 20)

/* The connector the target plays, one step per tp_accept call. */
enum { SEND_HELLO, READ_CHALLENGE, SEND_SETUP, READ_REPLY, HUNG_UP };

struct peer {
	int fd;
	int state;
	unsigned flags;
	const uint8_t *token;
	struct wire_hello hello;
	struct wire_challenge chal;
	struct wire_reply reply;
	uint8_t *out;		/* the setup and what follows it */
	size_t out_len;
	int ticketed;		/* the hello carries the right ticket */
	int proved;		/* the setup carries the right proof */
	struct fz_msg msg;
};

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	fz_quiet();
	return 0;
}

static int dial(const struct tp_handle_info *info, int tcp)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int fd;

	memset(&ss, 0, sizeof(ss));
	if (!tcp) {
		struct sockaddr_un *un = (struct sockaddr_un *)&ss;
		size_t n = strlen(info->uds_name);

		un->sun_family = AF_UNIX;
		memcpy(un->sun_path + 1, info->uds_name, n);	/* abstract name */
		len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n);
	} else if (info->family == AF_INET) {
		struct sockaddr_in *in = (struct sockaddr_in *)&ss;

		in->sin_family = AF_INET;
		in->sin_port = htons(info->port);
		memcpy(&in->sin_addr, info->addr, 4);
		len = sizeof(*in);
	} else {
		struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&ss;

		in6->sin6_family = AF_INET6;
		in6->sin6_port = htons(info->port);
		memcpy(&in6->sin6_addr, info->addr, 16);
		len = sizeof(*in6);
	}
	fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	if (connect(fd, (struct sockaddr *)&ss, len) != 0 && !tcp) {
		close(fd);
		return -1;
	}
	return fd;	/* TCP on this host: connected, or soon */
}

/* The ring segment a connector passes: sized, with the input's header. */
static int segment(struct fz_in *in, unsigned flags)
{
	uint64_t size = SHM_RING_OFFSET + fz_u32(in) % MAX_RING;
	uint8_t head[64];
	int fd;

	fz_take(in, head, sizeof(head));
	if (flags & F_UNSEALED) {
		fd = memfd_create("symmem-fuzz", MFD_CLOEXEC);
		if (fd >= 0 && ftruncate(fd, (off_t)size) != 0) {
			close(fd);
			fd = -1;
		}
	} else {
		fd = fz_memfd(size);
	}
	if (fd >= 0 && pwrite(fd, head, sizeof(head), 0) != (ssize_t)sizeof(head)) {
		close(fd);
		fd = -1;
	}
	return fd;
}

static void start(struct peer *p, struct fz_msg m, int state)
{
	p->msg = m;
	p->state = state;
}

static int ticket_holds(const struct peer *p)
{
	uint8_t want[WIRE_MAC];

	wire_ticket(p->token, &p->hello, want);
	return wire_mac_equal(p->hello.ticket, want);
}

/* The challenge came: the listener must prove the token before anything
 * else goes to it, and challenge only a hello whose ticket holds; a
 * refusal ends the setup. */
static void on_challenge(struct peer *p, int seg)
{
	struct wire_setup setup;
	uint8_t want[WIRE_MAC];

	if (p->chal.status != SM_OK) {
		FZ_CHECK(memchr(p->chal.reason, '\0', sizeof(p->chal.reason)) != NULL);
		p->state = HUNG_UP;
		return;
	}
	FZ_CHECK(p->ticketed);
	FZ_CHECK(p->chal.magic == WIRE_MAGIC);
	wire_proof(p->token, 1, &p->hello, p->chal.nonce, want);
	FZ_CHECK(wire_mac_equal(p->chal.proof, want));
	wire_proof(p->token, 0, &p->hello, p->chal.nonce, want);
	memcpy(&setup, p->out, sizeof(setup));
	if (!(p->flags & F_WRONG_PROOF))
		memcpy(setup.proof, want, sizeof(want));
	p->proved = wire_mac_equal(setup.proof, want);
	memcpy(p->out, &setup, sizeof(setup));
	start(p, (struct fz_msg){ p->out, p->out_len, 0, p->flags & F_EARLY_FD ? -1 : seg },
	      SEND_SETUP);
}

/* One step of the connector; `seg` rides with the hello or the setup. */
static void peer_step(struct peer *p, int seg)
{
	int r;

	switch (p->state) {
	case SEND_HELLO:
	case SEND_SETUP:
		r = fz_push(p->fd, &p->msg);
		if (r < 0)
			p->state = HUNG_UP;
		if (r <= 0)
			return;
		if (p->state == SEND_SETUP || (p->flags & F_RAW)) {
			shutdown(p->fd, SHUT_WR);
			start(p, (struct fz_msg){ &p->reply, sizeof(p->reply), 0, -1 }, READ_REPLY);
			return;
		}
		start(p, (struct fz_msg){ &p->chal, sizeof(p->chal), 0, -1 }, READ_CHALLENGE);
		/* fall through */
	case READ_CHALLENGE:
	case READ_REPLY:
		r = fz_pull(p->fd, &p->msg);
		if (p->msg.fd >= 0)
			close(p->msg.fd);	/* the listener sends none */
		FZ_CHECK(p->msg.fd < 0);
		if (r < 0)
			p->state = HUNG_UP;
		if (r > 0 && p->state == READ_CHALLENGE)
			on_challenge(p, seg);
		return;
	}
}

/* A connection the listener set up: only for the token's holder, and on
 * one host only over the whole segment it was passed. */
static void check_comm(const struct peer *p, struct tp_comm *c, int seg)
{
	const struct shm_comm *s;
	struct stat st;

	FZ_CHECK(p->proved);
	if (c->ops != &tp_shm_ops)
		return;
	s = shm_of(c);
	FZ_CHECK(seg >= 0 && fstat(seg, &st) == 0);
	FZ_CHECK(s->seg_size == (uint64_t)st.st_size);
	FZ_CHECK(s->ring_size > 0 && s->ring_size == s->seg_size - SHM_RING_OFFSET);
	FZ_CHECK(s->chunk > 0 && s->chunk <= s->ring_size);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct tp_options o = fz_options(TP_BACKEND_AUTO);
	struct fz_in in = { data, size };
	struct tp_handle_info info;
	struct tp_listener *l;
	struct tp_comm *c = NULL;
	struct peer p;
	uint8_t h[TP_HANDLE_SIZE];
	unsigned flags = fz_u8(&in);
	int fds = fz_fd_count(), seg = -1, pass, rc = SM_OK;

	memset(&p, 0, sizeof(p));
	p.flags = flags;
	if (flags & F_SEGMENT)
		seg = segment(&in, flags);
	pass = flags & F_TCP ? -1 : seg;	/* a TCP socket carries none */
	if (flags & F_RAW) {
		p.out_len = in.n;
	} else {
		fz_take(&in, &p.hello, sizeof(p.hello));
		p.out_len = sizeof(struct wire_setup) + in.n;
	}
	p.out = calloc(1, p.out_len + 1);
	if (!p.out)
		goto out;
	fz_take(&in, p.out, p.out_len);
	if (tp_listen(&o, 0, h, &l) != SM_OK)
		goto out;
	FZ_CHECK(tp_handle_decode(h, &info) == SM_OK);
	p.token = info.token;
	if (!(flags & (F_RAW | F_WRONG_TICKET)))
		wire_ticket(p.token, &p.hello, p.hello.ticket);
	p.ticketed = !(flags & F_RAW) && ticket_holds(&p);
	p.fd = dial(&info, flags & F_TCP);
	if (p.fd < 0)
		goto close_listener;
	if (flags & F_RAW)
		start(&p, (struct fz_msg){ p.out, p.out_len, 0, pass }, SEND_HELLO);
	else
		start(&p, (struct fz_msg){ &p.hello, sizeof(p.hello), 0,
					   flags & F_EARLY_FD ? pass : -1 }, SEND_HELLO);
	/* The first call takes the connection (TCP may still be connecting
	 * until then); each later one moves the setup on a step. */
	for (int i = 0; i < ACCEPT_CALLS; i++) {
		rc = tp_accept(l, &c);
		if (rc || c)
			break;
		peer_step(&p, pass);
	}
	if (rc)
		FZ_CHECK(sm_last_error()[0] != '\0');
	if (c) {
		peer_step(&p, pass);	/* the reply, sent before the comm came */
		check_comm(&p, c, seg);
		FZ_CHECK(p.state == READ_REPLY && p.msg.done == sizeof(p.reply));
		FZ_CHECK(p.reply.magic == WIRE_MAGIC && p.reply.status == SM_OK);
		tp_close(c);
	}
	close(p.fd);
close_listener:
	tp_close_listener(l);
out:
	free(p.out);
	if (seg >= 0)
		close(seg);
	FZ_CHECK(fz_fd_count() == fds);
	return 0;
}
