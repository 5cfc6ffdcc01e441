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
 *                     leaves when the client hangs up;
 *   serve-ring        keeps the hello's request ring and ends each posted
 *                     request in order: failed (err "stand-in: no
 *                     mapping 0") if it names source 0, else done.  A
 *                     CD_ADD is answered with the next id, but one of
 *                     alloc_size 1 with id 0 and one of alloc_size 2 with
 *                     a reply of the wrong magic; leaves on the hang-up;
 *   serve-words       reports each posted request as a helper with landing
 *                     words does: queued on stream 1 with the next ticket,
 *                     that ticket written into landed[1] at once, and the
 *                     request ended (done) only SYMMEM_STANDIN_DELAY_MS
 *                     later.
 */
#include <poll.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "copyd_proto.h"

/* The next request; 0, or -1 on a hang-up or anything not a request.
 * Descriptors that come with it (the ring, an export) are closed, but
 * for the first, which goes to *keep if keep is not NULL. */
static int next_msg(struct cd_msg *m, int *keep)
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
		if (keep && *keep < 0)
			*keep = fd;
		else
			close(fd);
	}
	return n == (ssize_t)sizeof(*m) && m->magic == CD_MAGIC ? 0 : -1;
}

static int reply_magic(uint32_t magic, int status, uint32_t id)
{
	struct cd_reply r;

	memset(&r, 0, sizeof(r));
	r.magic = magic;
	r.status = status;
	r.id = id;
	/* The client may have hung up meanwhile: no SIGPIPE. */
	return send(CD_CTRL_FD, &r, sizeof(r), MSG_NOSIGNAL) == (ssize_t)sizeof(r) ? 0 : -1;
}

static int reply(int status, uint32_t id)
{
	return reply_magic(CD_MAGIC, status, id);
}

/* The hello's request ring, mapped whole; NULL if it cannot be. */
static struct cd_ring *map_ring(int ringfd)
{
	void *p = mmap(NULL, sizeof(struct cd_ring), PROT_READ | PROT_WRITE, MAP_SHARED, ringfd, 0);

	close(ringfd);
	return p == MAP_FAILED ? NULL : p;
}

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* serve-words: landing words, with the request's end held back. */
static int serve_words(int ringfd, uint64_t delay_ms)
{
	static uint64_t landed_at[CD_SLOTS];
	struct cd_ring *ring;
	uint64_t tail = 0, ended = 0;

	ring = map_ring(ringfd);
	if (!ring)
		return 1;
	for (;;) {
		struct pollfd p = { .fd = CD_CTRL_FD, .events = POLLIN };
		struct cd_slot *s = &ring->slot[tail % CD_SLOTS];

		if (atomic_load(&s->state) == CD_POSTED && s->seq == tail) {
			s->stream = 1;
			s->ticket = (uint32_t)tail + 1;
			atomic_store(&s->state, CD_QUEUED);
			atomic_store(&ring->landed[1], (uint32_t)tail + 1);
			landed_at[tail % CD_SLOTS] = now_ms();
			tail++;
			continue;
		}
		while (ended < tail && now_ms() >= landed_at[ended % CD_SLOTS] + delay_ms)
			atomic_store(&ring->slot[ended++ % CD_SLOTS].state, CD_DONE);
		if (poll(&p, 1, 0) > 0)
			return 0;	/* the hang-up: nothing else is asked of it */
		usleep(10);
	}
}

/* serve-ring: ends the posted requests in order until the hang-up. */
static int serve_ring(int ringfd)
{
	struct cd_ring *ring;
	uint64_t tail = 0;
	uint32_t next_id = 1;
	struct cd_msg m;

	ring = map_ring(ringfd);
	if (!ring)
		return 1;
	for (;;) {
		struct pollfd p = { .fd = CD_CTRL_FD, .events = POLLIN };
		struct cd_slot *s = &ring->slot[tail % CD_SLOTS];

		if (atomic_load(&s->state) == CD_POSTED && s->seq == tail) {
			tail++;
			if (s->src_id == 0) {
				snprintf(s->err, sizeof(s->err), "stand-in: no mapping 0");
				atomic_store(&s->state, CD_FAILED);
			} else {
				atomic_store(&s->state, CD_DONE);
			}
			continue;
		}
		if (poll(&p, 1, 0) > 0) {
			if (next_msg(&m, NULL) != 0)
				return 0;
			if (m.op != CD_ADD)
				continue;
			if (m.info.alloc_size == 1)
				reply(SM_OK, 0);
			else if (m.info.alloc_size == 2)
				reply_magic(~CD_MAGIC, SM_OK, next_id++);
			else
				reply(SM_OK, next_id++);
		}
		usleep(10);
	}
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
	int ringfd = -1;

	if (!mode)
		return 2;
	if (next_msg(&m, &ringfd) != 0 || m.op != CD_HELLO || reply(SM_OK, 0) != 0)
		return 1;
	if (strcmp(mode, "exit-after-hello") == 0)
		return 0;
	if (strcmp(mode, "serve-ring") == 0)
		return serve_ring(ringfd);
	if (strcmp(mode, "serve-words") == 0)
		return serve_words(ringfd, delay ? strtoull(delay, NULL, 10) : 0);
	if (ringfd >= 0)
		close(ringfd);
	if (strcmp(mode, "slow-first-add") != 0)
		return 2;
	while (next_msg(&m, NULL) == 0) {
		if (m.op != CD_ADD)
			continue;	/* CD_DEL has no answer */
		if (next_id == 1 && delay)
			sleep_ms(atol(delay));
		if (reply(SM_OK, next_id++) != 0)
			break;
	}
	return 0;
}
