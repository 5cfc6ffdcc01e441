/* The connector's side of connection setup (transport/connect.c and the
 * backends' connect_open): what the listener answers.  Whoever holds the
 * socket name or the port the handle names answers the connector (a
 * listener that died and a process that took its port, say): the
 * connector must send its proof and ring only to one that proved the
 * token, fail cleanly on anything but a proper answer, and free what it
 * set up.
 *
 * The listener here is played by the target: its own Unix socket (this
 * host, the connector sends its ring segment) or TCP socket (posed as
 * another host), named in a handle it encodes, so it knows the token.
 * It reads the connector's hello, answers with the input's challenge
 * carrying the proof wire_proof() makes (or the input's own), reads the
 * setup, and answers with the input's reply.
 *
 * Input: flags (below); with F_RAW the rest is sent as it is once the
 * connector is in; else a struct wire_challenge, then the reply bytes. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "fuzz.h"
#include "symmem.h"
#include "wire.h"

#define F_TCP 1u		/* TCP, else the Unix socket */
#define F_WRONG_PROOF 2u	/* the challenge's proof is the input's */
#define F_RAW 4u		/* no handshake: the input's bytes as they are */
/* tp_connect calls per run: setup takes a few, every wait is bounded. */
#define CONNECT_CALLS 16

/* The listener the target plays, one step per tp_connect call. */
enum { READ_HELLO, SEND_CHALLENGE, READ_SETUP, SEND_REPLY, DRAIN };

struct peer {
	int fd;
	int state;
	unsigned flags;
	const uint8_t *token;
	struct wire_hello hello;
	struct wire_challenge chal;
	struct wire_setup setup;
	uint8_t *out;		/* the reply (or, raw, everything) */
	size_t out_len;
	int proved;		/* the challenge carries the right proof */
	int ring;		/* the segment the connector passed, or -1 */
	struct fz_msg msg;
};

static unsigned runs;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	fz_quiet();
	return 0;
}

/* Listens where `info` will say, on this host's Unix socket or on TCP
 * loopback; fills in the rest of the handle. */
static int listen_as(struct tp_handle_info *info, int tcp)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int fd;

	memset(info, 0, sizeof(*info));
	memset(&ss, 0, sizeof(ss));
	info->pid = (int)getpid();
	info->family = AF_INET;
	info->port = 1;
	snprintf(info->uds_name, sizeof(info->uds_name), "symmem-fuzz-%d-%u", info->pid, runs);
	/* A fresh token per run: connects in progress are found by it. */
	snprintf((char *)info->token, sizeof(info->token), "fuzz-%u", runs++);
	info->host_id = tcp ? ~tp_host_id() : tp_host_id();
	if (tcp) {
		struct sockaddr_in *in = (struct sockaddr_in *)&ss;

		in->sin_family = AF_INET;
		in->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		len = sizeof(*in);
	} else {
		struct sockaddr_un *un = (struct sockaddr_un *)&ss;
		size_t n = strlen(info->uds_name);

		un->sun_family = AF_UNIX;
		memcpy(un->sun_path + 1, info->uds_name, n);
		len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n);
	}
	fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	if (bind(fd, (struct sockaddr *)&ss, len) != 0 || listen(fd, 4) != 0 ||
	    getsockname(fd, (struct sockaddr *)&ss, &len) != 0) {
		close(fd);
		return -1;
	}
	if (tcp) {
		const struct sockaddr_in *in = (const struct sockaddr_in *)&ss;

		info->port = ntohs(in->sin_port);
		memcpy(info->addr, &in->sin_addr, 4);
	}
	return fd;
}

static void start(struct peer *p, struct fz_msg m, int state)
{
	p->msg = m;
	p->state = state;
}

/* The hello came: answer with the input's challenge, proved or not. */
static void on_hello(struct peer *p)
{
	uint8_t want[WIRE_MAC];

	FZ_CHECK(p->hello.magic == WIRE_MAGIC && p->hello.version == WIRE_VERSION);
	FZ_CHECK(p->hello.backend == (p->flags & F_TCP ? TP_BACKEND_TCP : TP_BACKEND_SHM));
	wire_ticket(p->token, &p->hello, want);
	FZ_CHECK(wire_mac_equal(p->hello.ticket, want));
	wire_proof(p->token, 1, &p->hello, p->chal.nonce, want);
	if (!(p->flags & F_WRONG_PROOF))
		memcpy(p->chal.proof, want, sizeof(want));
	p->proved = p->chal.magic == WIRE_MAGIC && p->chal.status == SM_OK &&
		    wire_mac_equal(p->chal.proof, want);
	start(p, (struct fz_msg){ &p->chal, sizeof(p->chal), 0, -1 }, SEND_CHALLENGE);
}

/* The setup came: only after our proof, with the connector's own, and on
 * one host with the whole ring segment it announced. */
static void on_setup(struct peer *p)
{
	uint8_t want[WIRE_MAC];
	struct stat st;

	FZ_CHECK(p->proved);
	FZ_CHECK(p->setup.magic == WIRE_MAGIC);
	wire_proof(p->token, 0, &p->hello, p->chal.nonce, want);
	FZ_CHECK(wire_mac_equal(p->setup.proof, want));
	if (!(p->flags & F_TCP)) {
		FZ_CHECK(p->ring >= 0 && fstat(p->ring, &st) == 0);
		FZ_CHECK(p->setup.seg_size == (uint64_t)st.st_size);
	}
	start(p, (struct fz_msg){ p->out, p->out_len, 0, -1 }, SEND_REPLY);
}

/* Reads what the connector sends once its setup is done (nothing, or
 * a redial's hello), closing any descriptor that came. */
static void drain(struct peer *p)
{
	uint8_t sink[512];
	struct fz_msg m = { sink, sizeof(sink), 0, -1 };

	while (fz_pull(p->fd, &m) > 0)
		m.done = 0;
	if (m.fd >= 0)
		close(m.fd);
}

static void peer_step(struct peer *p)
{
	int r = 0;

	switch (p->state) {
	case READ_HELLO:
	case READ_SETUP:
		r = fz_pull(p->fd, &p->msg);
		/* The ring rides with the setup; the hello brings none. */
		FZ_CHECK(p->msg.fd < 0 || p->state == READ_SETUP);
		if (p->msg.fd >= 0) {
			FZ_CHECK(p->ring < 0);	/* one segment */
			p->ring = p->msg.fd;	/* kept for the checks */
			p->msg.fd = -1;
		}
		/* Nothing of the setup before the listener proved the token. */
		if (p->state == READ_SETUP)
			FZ_CHECK(p->proved || (p->msg.done == 0 && p->ring < 0));
		if (r < 0) {
			p->state = DRAIN;	/* the connector gave up */
			return;
		}
		if (r == 0)
			return;
		if (p->state == READ_HELLO) {
			on_hello(p);
			return;
		}
		on_setup(p);
		return;
	case SEND_CHALLENGE:
	case SEND_REPLY:
		r = fz_push(p->fd, &p->msg);
		if (r == 0)
			return;
		if (r > 0 && p->state == SEND_CHALLENGE && !(p->flags & F_RAW)) {
			start(p, (struct fz_msg){ &p->setup, sizeof(p->setup), 0, -1 }, READ_SETUP);
			return;
		}
		shutdown(p->fd, SHUT_WR);
		p->state = DRAIN;
		return;
	case DRAIN:
		drain(p);
		return;
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct tp_options o = fz_options(TP_BACKEND_AUTO);
	struct fz_in in = { data, size };
	struct tp_handle_info info;
	struct tp_comm *c = NULL;
	struct peer p;
	uint8_t h[TP_HANDLE_SIZE];
	int fds = fz_fd_count(), lfd, rc = SM_OK;

	memset(&p, 0, sizeof(p));
	p.fd = -1;
	p.ring = -1;
	p.flags = fz_u8(&in);
	if (!(p.flags & F_RAW))
		fz_take(&in, &p.chal, sizeof(p.chal));
	p.out_len = in.n;
	p.out = malloc(p.out_len + 1);
	if (!p.out)
		return 0;
	fz_take(&in, p.out, p.out_len);
	lfd = listen_as(&info, p.flags & F_TCP);
	if (lfd < 0)
		goto out;
	p.token = info.token;
	tp_handle_encode(&info, h);
	o.owner = &info;
	for (int i = 0; i < CONNECT_CALLS; i++) {
		rc = tp_connect(&o, h, &c);
		if (rc || c)
			break;
		if (p.fd < 0) {
			p.fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
			if (p.fd < 0)
				continue;
			if (p.flags & F_RAW)
				start(&p, (struct fz_msg){ p.out, p.out_len, 0, -1 },
				      SEND_CHALLENGE);
			else
				start(&p, (struct fz_msg){ &p.hello, sizeof(p.hello), 0, -1 },
				      READ_HELLO);
		}
		peer_step(&p);
	}
	if (rc)
		FZ_CHECK(sm_last_error()[0] != '\0');
	/* Connected: only to a listener that proved the token and said yes. */
	if (c) {
		struct wire_reply r;

		memset(&r, 0, sizeof(r));
		memcpy(&r, p.out, p.out_len < sizeof(r) ? p.out_len : sizeof(r));
		FZ_CHECK(p.proved && p.state == DRAIN && p.out_len >= sizeof(r));
		FZ_CHECK(r.magic == WIRE_MAGIC && r.status == SM_OK);
	}
	/* A connect that ended, either way, keeps nothing in progress. */
	if (rc || c)
		FZ_CHECK(tp_pending_connects() == 0);
	if (c)
		tp_close(c);
	tp_connect_abandon(&info);
	FZ_CHECK(tp_pending_connects() == 0);
	if (p.fd >= 0)
		close(p.fd);
	close(lfd);
out:
	if (p.ring >= 0)
		close(p.ring);
	free(p.out);
	FZ_CHECK(fz_fd_count() == fds);
	return 0;
}
