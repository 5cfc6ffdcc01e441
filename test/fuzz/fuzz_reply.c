/* The connector's side of connection setup (transport/connect.c): what
 * the listener answers.  Whoever holds the socket name or the port the
 * handle names answers the connector (a listener that died and a process
 * that took its port, say): the connector must fail cleanly on anything
 * but a proper answer, and free what it set up.
 *
 * The listener here is played by the target: its own Unix socket (this
 * host, the connector sends its ring segment) or TCP socket (posed as
 * another host), named in a handle it encodes.  Input: flags (bit 0:
 * TCP), then the bytes it answers with, once the connector is in. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "fuzz.h"
#include "symmem.h"

#define F_TCP 1u
/* tp_connect calls per run: setup takes a few, every wait is bounded. */
#define CONNECT_CALLS 16

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

/* Reads what the connector sent, closing any descriptor that came. */
static void drain(int fd)
{
	uint8_t sink[512];

	for (;;) {
		int got = -1;
		ssize_t n = sm_recv_some(fd, sink, sizeof(sink), &got);

		if (got >= 0)
			close(got);
		if (n <= 0)
			return;
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct tp_options o = fz_options(TP_BACKEND_AUTO);
	struct fz_in in = { data, size };
	struct tp_handle_info info;
	struct tp_comm *c = NULL;
	uint8_t h[TP_HANDLE_SIZE];
	unsigned flags = fz_u8(&in);
	int fds = fz_fd_count(), lfd, fd = -1, rc = SM_OK;

	lfd = listen_as(&info, flags & F_TCP);
	if (lfd < 0)
		return 0;
	tp_handle_encode(&info, h);
	o.owner = &info;
	for (int i = 0; i < CONNECT_CALLS && !rc && !c; i++) {
		rc = tp_connect(&o, h, &c);
		if (fd < 0) {
			fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
			if (fd >= 0) {
				fz_send(fd, in.p, in.n, -1);
				shutdown(fd, SHUT_WR);
			}
		}
		if (fd >= 0)
			drain(fd);
	}
	if (rc)
		FZ_CHECK(sm_last_error()[0] != '\0');
	/* A connect that ended, either way, keeps nothing in progress. */
	if (rc || c)
		FZ_CHECK(tp_pending_connects() == 0);
	if (c)
		tp_close(c);
	tp_connect_abandon(&info);
	FZ_CHECK(tp_pending_connects() == 0);
	if (fd >= 0)
		close(fd);
	close(lfd);
	FZ_CHECK(fz_fd_count() == fds);
	return 0;
}
