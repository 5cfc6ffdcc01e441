/* A stand-in for the copy helper (symmem-copyd) in test_copy_helper.c.
 * It is started the same way (its end of the control socket on
 * CD_CTRL_FD, the client's pid as its argument), answers the hello as
 * the real one does, but has no GPU and maps nothing.  What it does after
 * the hello is chosen by SYMMEM_STANDIN_MODE:
 *
 *   exit-after-hello  exits at once;
 *   slow-first-add    answers its first CD_ADD only after
 *                     SYMMEM_STANDIN_DELAY_MS milliseconds and later ones
 *                     at once, each with the next id (1, 2, 3, ...);
 *                     leaves when the client hangs up.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "copyd_proto.h"

/* The next request; 0, or -1 on a hang-up or anything not a request.
 * Descriptors that come with it (the ring, an export) are not used. */
static int next_msg(struct cd_msg *m)
{
	char cbuf[CMSG_SPACE(sizeof(int))];
	struct iovec iov = { .iov_base = m, .iov_len = sizeof(*m) };
	struct msghdr mh = {
		.msg_iov = &iov, .msg_iovlen = 1,
		.msg_control = cbuf, .msg_controllen = sizeof(cbuf),
	};
	struct cmsghdr *c;
	ssize_t n;
	int fd;

	n = recvmsg(CD_CTRL_FD, &mh, MSG_CMSG_CLOEXEC);
	if (n < 0)
		return -1;
	for (c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		memcpy(&fd, CMSG_DATA(c), sizeof(fd));
		close(fd);
	}
	return n == (ssize_t)sizeof(*m) && m->magic == CD_MAGIC ? 0 : -1;
}

static int reply(int status, uint32_t id)
{
	struct cd_reply r;

	memset(&r, 0, sizeof(r));
	r.magic = CD_MAGIC;
	r.status = status;
	r.id = id;
	/* The client may have hung up meanwhile: no SIGPIPE. */
	return send(CD_CTRL_FD, &r, sizeof(r), MSG_NOSIGNAL) == (ssize_t)sizeof(r) ? 0 : -1;
}

static void sleep_ms(long ms)
{
	struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000 };

	while (nanosleep(&ts, &ts) != 0)
		;
}

int main(void)
{
	const char *mode = getenv("SYMMEM_STANDIN_MODE");
	const char *delay = getenv("SYMMEM_STANDIN_DELAY_MS");
	uint32_t next_id = 1;
	struct cd_msg m;

	if (!mode)
		return 2;
	if (next_msg(&m) != 0 || m.op != CD_HELLO || reply(SM_OK, 0) != 0)
		return 1;
	if (strcmp(mode, "exit-after-hello") == 0)
		return 0;
	if (strcmp(mode, "slow-first-add") != 0)
		return 2;
	while (next_msg(&m) == 0) {
		if (m.op != CD_ADD)
			continue;	/* CD_DEL has no answer */
		if (next_id == 1 && delay)
			sleep_ms(atol(delay));
		if (reply(SM_OK, next_id++) != 0)
			break;
	}
	return 0;
}
