/* Moving bytes and file descriptors over a socket without blocking: the
 * shared-memory connections and the copy helper both pass cuMem fds with
 * SCM_RIGHTS over Unix sockets; the TCP data path moves its messages. */
#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "symmem.h"

static ssize_t send_msg(int fd, const struct msghdr *msg)
{
	ssize_t n;

	do {
		n = sendmsg(fd, msg, MSG_NOSIGNAL | MSG_DONTWAIT);
	} while (n < 0 && errno == EINTR);
	if (n >= 0)
		return n;
	if (errno == EAGAIN || errno == EWOULDBLOCK)
		return 0;
	sm_fail(SM_ERR_REMOTE, "peer connection lost on send: %s", strerror(errno));
	return -1;
}

ssize_t sm_send_two(int fd, const void *a, size_t alen, const void *b, size_t blen)
{
	struct iovec iov[2] = {
		{ .iov_base = (void *)a, .iov_len = alen },
		{ .iov_base = (void *)b, .iov_len = blen },
	};
	struct msghdr msg = { .msg_iov = iov, .msg_iovlen = blen ? 2 : 1 };

	return send_msg(fd, &msg);
}

ssize_t sm_send_some(int fd, const void *buf, size_t len, int pass_fd)
{
	char cbuf[CMSG_SPACE(sizeof(int))];
	struct iovec iov = { .iov_base = (void *)buf, .iov_len = len };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1 };

	if (pass_fd >= 0) {
		struct cmsghdr *cm;

		memset(cbuf, 0, sizeof(cbuf));
		msg.msg_control = cbuf;
		msg.msg_controllen = sizeof(cbuf);
		cm = CMSG_FIRSTHDR(&msg);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(cm), &pass_fd, sizeof(int));
	}
	return send_msg(fd, &msg);
}

/* Keeps the first descriptor that came with `msg` in *got_fd and closes
 * every other one.  One is all our senders attach, but anyone who can
 * connect may attach more: the kernel installs as many as the control
 * buffer holds (two in one int's CMSG_SPACE, with its padding), and each
 * left open would leak. */
static void take_fds(struct msghdr *msg, int *got_fd)
{
	struct cmsghdr *cm;

	for (cm = CMSG_FIRSTHDR(msg); cm; cm = CMSG_NXTHDR(msg, cm)) {
		size_t n;

		if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS ||
		    cm->cmsg_len < CMSG_LEN(0))
			continue;
		n = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t i = 0; i < n; i++) {
			int nfd;

			memcpy(&nfd, CMSG_DATA(cm) + i * sizeof(int), sizeof(int));
			if (*got_fd >= 0)
				close(nfd);
			else
				*got_fd = nfd;
		}
	}
}

ssize_t sm_recv_some(int fd, void *buf, size_t len, int *got_fd)
{
	char cbuf[CMSG_SPACE(sizeof(int))];
	struct iovec iov = { .iov_base = buf, .iov_len = len };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1 };
	ssize_t n;

	if (got_fd) {
		msg.msg_control = cbuf;
		msg.msg_controllen = sizeof(cbuf);
	}
	do {
		n = recvmsg(fd, &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
	} while (n < 0 && errno == EINTR);
	if (n == 0) {
		sm_fail(SM_ERR_REMOTE, "peer closed the connection");
		return -1;
	}
	if (n < 0) {
		if (errno == EAGAIN || errno == EWOULDBLOCK)
			return 0;
		sm_fail(SM_ERR_REMOTE, "peer connection lost on receive: %s", strerror(errno));
		return -1;
	}
	if (got_fd)
		take_fds(&msg, got_fd);
	return n;
}

int sm_wait_fd(int fd, short events, int timeout_ms)
{
	uint64_t end = sm_now_ns() + (uint64_t)timeout_ms * 1000000ull, now;
	struct pollfd p = { .fd = fd, .events = events };
	int n;

	for (;;) {
		n = poll(&p, 1, timeout_ms);
		if (n >= 0 || errno != EINTR)
			return n;
		now = sm_now_ns();
		if (now >= end)
			return 0;
		timeout_ms = (int)((end - now + 999999) / 1000000);
	}
}
