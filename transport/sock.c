/* Non-blocking socket plumbing for connection setup and the TCP data path. */
#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "sock.h"
#include "symmem.h"

/* Connections the kernel holds until the listener takes them: strangers
 * redialling between two accept calls must not fill it, or the kernel
 * drops the real connector's SYN and TCP tries again only a second later
 * (the listener drains it on every call, listen.c).  The kernel caps it
 * at net.core.somaxconn (4096 by default since Linux 5.4). */
#define SOCK_BACKLOG 4096

int sock_random(void *buf, size_t len)
{
	uint8_t *p = buf;
	size_t got = 0;

	while (got < len) {
		ssize_t n = getrandom(p + got, len - got, 0);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return sm_fail(SM_ERR_SYSTEM, "getrandom: %s", strerror(errno));
		got += (size_t)n;
	}
	return SM_OK;
}

/* Abstract Unix socket names need no file system and vanish with the
 * process, so a crashed job leaves nothing behind. */
static socklen_t uds_addr(const char *name, struct sockaddr_un *sa)
{
	size_t n = strlen(name);

	memset(sa, 0, sizeof(*sa));
	sa->sun_family = AF_UNIX;
	memcpy(sa->sun_path + 1, name, n);
	return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n);
}

int sock_uds_listen(char name[32], int *fd)
{
	struct sockaddr_un sa;
	uint8_t rnd[8];
	socklen_t len;
	int s, rc;

	rc = sock_random(rnd, sizeof(rnd));
	if (rc)
		return rc;
	snprintf(name, 32, "symmem-%02x%02x%02x%02x%02x%02x%02x%02x", rnd[0], rnd[1], rnd[2],
		 rnd[3], rnd[4], rnd[5], rnd[6], rnd[7]);
	s = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (s < 0)
		return sm_fail(SM_ERR_SYSTEM, "socket(AF_UNIX): %s", strerror(errno));
	len = uds_addr(name, &sa);
	if (bind(s, (struct sockaddr *)&sa, len) != 0 || listen(s, SOCK_BACKLOG) != 0) {
		rc = sm_fail(SM_ERR_SYSTEM, "cannot listen on Unix socket @%s: %s", name,
			     strerror(errno));
		close(s);
		return rc;
	}
	*fd = s;
	return SM_OK;
}

/* Picks the address other hosts can reach: the first interface that is up
 * and allowed by ifname (IPv4 preferred), loopback only when ifname names
 * it.  Without ifname, loopback is the fallback (a host with no other
 * interface); with one that selects nothing it is an error, not a silent
 * 127.0.0.1 that peers on other hosts would take for their own. */
static int pick_address(const char *ifname, struct sockaddr_storage *ss)
{
	struct ifaddrs *ifs = NULL, *i;
	struct sockaddr_in *lo = (struct sockaddr_in *)ss;
	int named = ifname && *ifname, found = 0;

	memset(ss, 0, sizeof(*ss));
	lo->sin_family = AF_INET;
	lo->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (getifaddrs(&ifs) != 0) {
		if (!named)
			return SM_OK;
		return sm_fail(SM_ERR_SYSTEM, "cannot list network interfaces for "
			       "NCCL_SOCKET_IFNAME=%s: %s", ifname, strerror(errno));
	}
	for (int want = AF_INET; want && !found; want = want == AF_INET ? AF_INET6 : 0) {
		for (i = ifs; i && !found; i = i->ifa_next) {
			if (!i->ifa_addr || i->ifa_addr->sa_family != want)
				continue;
			if (!(i->ifa_flags & IFF_UP))
				continue;
			if (named ? !tp_namelist_selects(ifname, i->ifa_name, 0) :
				    (i->ifa_flags & IFF_LOOPBACK) != 0)
				continue;
			if (want == AF_INET6 &&
			    IN6_IS_ADDR_LINKLOCAL(&((struct sockaddr_in6 *)i->ifa_addr)->sin6_addr))
				continue;
			memcpy(ss, i->ifa_addr,
			       want == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6));
			found = 1;
		}
	}
	freeifaddrs(ifs);
	if (named && !found)
		return sm_fail(SM_ERR_USAGE, "NCCL_SOCKET_IFNAME=%s selects no network interface "
			       "that is up and has an address", ifname);
	return SM_OK;
}

int sock_tcp_listen(const char *ifname, struct tp_handle_info *info, int *fd)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int s, rc, one = 1;

	rc = pick_address(ifname, &ss);
	if (rc)
		return rc;
	len = ss.ss_family == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6);
	s = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (s < 0)
		return sm_fail(SM_ERR_SYSTEM, "socket(TCP): %s", strerror(errno));
	setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(s, (struct sockaddr *)&ss, len) != 0 || listen(s, SOCK_BACKLOG) != 0 ||
	    getsockname(s, (struct sockaddr *)&ss, &len) != 0) {
		rc = sm_fail(SM_ERR_SYSTEM, "cannot listen on TCP: %s", strerror(errno));
		close(s);
		return rc;
	}
	info->family = ss.ss_family;
	memset(info->addr, 0, sizeof(info->addr));
	if (ss.ss_family == AF_INET) {
		struct sockaddr_in *sin = (struct sockaddr_in *)&ss;

		memcpy(info->addr, &sin->sin_addr, 4);
		info->port = ntohs(sin->sin_port);
	} else {
		struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)&ss;

		memcpy(info->addr, &sin6->sin6_addr, 16);
		info->port = ntohs(sin6->sin6_port);
	}
	*fd = s;
	return SM_OK;
}

int sock_uds_connect(const char *name, int *fd)
{
	struct sockaddr_un sa;
	socklen_t len = uds_addr(name, &sa);
	int s, rc;

	s = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (s < 0)
		return sm_fail(SM_ERR_SYSTEM, "socket(AF_UNIX): %s", strerror(errno));
	if (connect(s, (struct sockaddr *)&sa, len) == 0) {
		*fd = s;
		return SM_OK;
	}
	/* EAGAIN: the listener's backlog is full; the caller retries. */
	rc = errno == EAGAIN ? SM_OK : SM_ERR_REMOTE;
	if (rc)
		sm_fail(rc, "cannot reach the listener at @%s: %s", name, strerror(errno));
	close(s);
	*fd = -1;
	return rc;
}

int sock_tcp_connect(const struct tp_handle_info *info, int *fd, int *pending)
{
	struct sockaddr_storage ss;
	socklen_t len;
	char text[64];
	int s, rc;

	memset(&ss, 0, sizeof(ss));
	if (info->family == AF_INET) {
		struct sockaddr_in *sin = (struct sockaddr_in *)&ss;

		sin->sin_family = AF_INET;
		sin->sin_port = htons(info->port);
		memcpy(&sin->sin_addr, info->addr, 4);
		len = sizeof(*sin);
	} else {
		struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)&ss;

		sin6->sin6_family = AF_INET6;
		sin6->sin6_port = htons(info->port);
		memcpy(&sin6->sin6_addr, info->addr, 16);
		len = sizeof(*sin6);
	}
	s = socket(info->family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (s < 0)
		return sm_fail(SM_ERR_SYSTEM, "socket(TCP): %s", strerror(errno));
	*pending = 0;
	if (connect(s, (struct sockaddr *)&ss, len) != 0) {
		if (errno != EINPROGRESS) {
			inet_ntop(info->family, info->addr, text, sizeof(text));
			rc = sm_fail(SM_ERR_REMOTE, "cannot connect to %s port %u: %s", text,
				     info->port, strerror(errno));
			close(s);
			return rc;
		}
		*pending = 1;
	}
	sock_enable_nodelay(s);
	*fd = s;
	return SM_OK;
}

int sock_connect_done(int fd)
{
	struct pollfd p = { .fd = fd, .events = POLLOUT };
	socklen_t len = sizeof(int);
	int err = 0;

	if (poll(&p, 1, 0) <= 0)
		return 0;
	if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0)
		err = errno;
	if (err) {
		sm_fail(SM_ERR_REMOTE, "TCP connect failed: %s", strerror(err));
		return -1;
	}
	return 1;
}

int sock_peer_gone(int fd)
{
	struct pollfd p = { .fd = fd, .events = POLLRDHUP };

	if (poll(&p, 1, 0) <= 0)
		return 0;
	return (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) != 0;
}

int sock_peer_cred(int fd, int *pid, int *uid)
{
	struct ucred cred;
	socklen_t len = sizeof(cred);

	*pid = *uid = -1;
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0)
		return -1;
	*pid = (int)cred.pid;
	*uid = (int)cred.uid;
	return 0;
}

void sock_enable_nodelay(int fd)
{
	int one = 1;

	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}
