/* The listener's side of connection setup (transport/listen.c): what a
 * connecting process sends it, the connector's hello and, on one host,
 * the ring segment passed with it.  Anyone on the host can connect to the
 * Unix socket, anyone who reaches the port to the TCP one: the listener
 * must turn every stranger away and keep serving, and set up only what a
 * well-formed hello from the token's holder asks for.
 *
 * Input: flags (bit 0: TCP, else the Unix socket; bit 1: pass a ring
 * segment with the first byte; bit 2: leave it unsealed), the segment's
 * ring size (u32) and its first 64 bytes (the header the peer writes),
 * then the bytes to send, with FZ_TOKEN_MARKER replaced by the token. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "fuzz.h"
#include "symmem.h"

#define F_TCP 1u
#define F_SEGMENT 2u
#define F_UNSEALED 4u
/* tp_accept calls per run: setup takes a few, every wait is bounded. */
#define ACCEPT_CALLS 16
#define MAX_RING (1u << 20)

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
	uint64_t size = 4096 + fz_u32(in) % MAX_RING;
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

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct tp_options o = fz_options(TP_BACKEND_AUTO);
	struct fz_in in = { data, size };
	struct tp_handle_info info;
	struct tp_listener *l;
	struct tp_comm *c = NULL;
	uint8_t h[TP_HANDLE_SIZE], *msg;
	unsigned flags = fz_u8(&in);
	int fds = fz_fd_count(), fd, seg = -1, rc = SM_OK;

	if (flags & F_SEGMENT)
		seg = segment(&in, flags);
	if (tp_listen(&o, 0, h, &l) != SM_OK)
		goto out;
	FZ_CHECK(tp_handle_decode(h, &info) == SM_OK);
	fd = dial(&info, flags & F_TCP);
	if (fd < 0)
		goto close_listener;
	msg = malloc(in.n + 1);
	if (msg) {
		memcpy(msg, in.p, in.n);
		fz_put_token(msg, in.n, info.token);
		/* The first call takes the connection; TCP may still be
		 * connecting until then. */
		rc = tp_accept(l, &c);
		fz_send(fd, msg, in.n, seg);
		shutdown(fd, SHUT_WR);
		free(msg);
	}
	for (int i = 0; i < ACCEPT_CALLS && !rc && !c; i++) {
		uint8_t sink[512];

		rc = tp_accept(l, &c);
		while (recv(fd, sink, sizeof(sink), MSG_DONTWAIT) > 0)
			;	/* the listener's answers must not fill the socket */
	}
	if (rc)
		FZ_CHECK(sm_last_error()[0] != '\0');
	if (c)
		tp_close(c);
	close(fd);
close_listener:
	tp_close_listener(l);
out:
	if (seg >= 0)
		close(seg);
	FZ_CHECK(fz_fd_count() == fds);
	return 0;
}
