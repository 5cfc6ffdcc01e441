/* A listener's refusal reaches the connector's log only escaped and
 * bounded: its reason is text anyone at the listener's address may send
 * (before any proof in the challenge; in the reply from whoever holds
 * the token).  A squatter's reason with a newline, a forged log line and
 * terminal escapes must come out as one line of printable characters.
 *
 * The squatter is a raw Unix socket of this process under the handle's
 * name, so the connector's owner check passes, served step by step on
 * the test's thread between the connector's calls. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cmocka.h>

#include "fd_util.h"
#include "symmem.h"
#include "tp_pair.h"
#include "transport.h"
#include "wire.h"

/* A newline and a line of the peer's own, then a screen clear and
 * colour: what a squatter would put in a victim's WARN. */
#define HOSTILE "no\n[0] NCCL INFO forged line\x1b[2J\x1b[31mred\\"
#define ESCAPED "no\\x0a[0] NCCL INFO forged line\\x1b[2J\\x1b[31mred\\\\"

struct squatter {
	int lfd, fd;
	struct tp_handle_info info;
	uint8_t h[TP_HANDLE_SIZE];
};

static void squat(struct squatter *q)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	size_t n;

	memset(&q->info, 0, sizeof(q->info));
	q->info.host_id = tp_host_id();
	q->info.pid = (int)getpid();
	q->info.no_tcp = 1;
	snprintf(q->info.uds_name, sizeof(q->info.uds_name), "symmem-squat-%d", q->info.pid);
	assert_int_equal(getrandom(q->info.token, 16, 0), 16);
	tp_handle_encode(&q->info, q->h);
	n = strlen(q->info.uds_name);
	memcpy(sa.sun_path + 1, q->info.uds_name, n);
	q->lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0);
	assert_true(q->lfd >= 0);
	assert_int_equal(bind(q->lfd, (struct sockaddr *)&sa,
			      (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n)), 0);
	assert_int_equal(listen(q->lfd, 4), 0);
	q->fd = -1;
}

/* Reads `len` bytes from the connector, calling tp_connect meanwhile. */
static void read_all(struct squatter *q, const struct tp_options *o, void *buf, size_t len)
{
	struct tp_comm *s = NULL;
	double end = now() + 5;
	size_t got = 0;

	while (got < len && now() < end) {
		ssize_t n;

		assert_int_equal(tp_connect(o, q->h, &s), SM_OK);
		assert_null(s);
		if (q->fd < 0) {
			q->fd = accept(q->lfd, NULL, NULL);
			continue;
		}
		n = recv(q->fd, (uint8_t *)buf + got, len - got, MSG_DONTWAIT);
		if (n > 0)
			got += (size_t)n;
		usleep(100);
	}
	assert_int_equal(got, len);
}

/* Calls tp_connect until it fails; returns its error. */
static int connect_fails(struct squatter *q, const struct tp_options *o)
{
	struct tp_comm *s = NULL;
	double end = now() + 5;
	int rc = SM_OK;

	while (rc == SM_OK && now() < end) {
		rc = tp_connect(o, q->h, &s);
		assert_null(s);
		usleep(100);
	}
	return rc;
}

static void unsquat(struct squatter *q)
{
	close(q->fd);
	close(q->lfd);
	assert_int_equal(tp_pending_connects(), 0);
}

/* The message holds the reason escaped, on one line, and no more of it
 * than the bound allows. */
static void check_logged(const char *msg)
{
	print_message("# %s\n", msg);
	assert_non_null(strstr(msg, "listener refused the connection: " ESCAPED));
	for (const char *c = msg; *c; c++)
		assert_true(*c >= 0x20 && *c < 0x7f);
	assert_true(strlen(msg) < 300);
}

/* Before any proof: the challenge says no, with the squatter's text. */
static void test_challenge_refusal_escaped(void **state)
{
	struct tp_options o = options(TP_BACKEND_SHM, 1 << 20, 65536);
	struct wire_challenge chal = { .magic = WIRE_MAGIC, .status = SM_ERR_INVALID };
	struct wire_hello hello;
	struct squatter q;
	int fds = open_fds();

	(void)state;
	squat(&q);
	read_all(&q, &o, &hello, sizeof(hello));
	memset(chal.reason, 'x', sizeof(chal.reason));	/* and no NUL at all */
	memcpy(chal.reason, HOSTILE, strlen(HOSTILE));
	assert_int_equal(send(q.fd, &chal, sizeof(chal), MSG_NOSIGNAL), sizeof(chal));
	assert_int_equal(connect_fails(&q, &o), SM_ERR_REMOTE);
	check_logged(sm_last_error());
	unsquat(&q);
	assert_int_equal(open_fds(), fds);
}

/* After both proofs: the reply says no (the squatter holds the token
 * here; a peer of the job may be broken too). */
static void test_reply_refusal_escaped(void **state)
{
	struct tp_options o = options(TP_BACKEND_SHM, 1 << 20, 65536);
	struct wire_challenge chal = { .magic = WIRE_MAGIC };
	struct wire_reply reply = { .magic = WIRE_MAGIC, .status = SM_ERR_INVALID };
	struct wire_hello hello;
	struct wire_setup setup;
	struct squatter q;
	int fds = open_fds();

	(void)state;
	squat(&q);
	read_all(&q, &o, &hello, sizeof(hello));
	assert_int_equal(getrandom(chal.nonce, sizeof(chal.nonce), 0), sizeof(chal.nonce));
	wire_proof(q.info.token, 1, &hello, chal.nonce, chal.proof);
	assert_int_equal(send(q.fd, &chal, sizeof(chal), MSG_NOSIGNAL), sizeof(chal));
	read_all(&q, &o, &setup, sizeof(setup));	/* the ring's fd is dropped unread */
	snprintf(reply.reason, sizeof(reply.reason), "%s", HOSTILE);
	assert_int_equal(send(q.fd, &reply, sizeof(reply), MSG_NOSIGNAL), sizeof(reply));
	assert_int_equal(connect_fails(&q, &o), SM_ERR_REMOTE);
	check_logged(sm_last_error());
	unsquat(&q);
	assert_int_equal(open_fds(), fds);
}

/* The escaping itself: every byte that is not printable ASCII, bounded
 * output cut at a whole escape, stopping at the first NUL. */
static void test_escape(void **state)
{
	const char in[] = "a\x01\x7f\xff\\b";
	char out[64], small[5];

	(void)state;
	assert_string_equal(sm_escape(out, sizeof(out), in, sizeof(in)), "a\\x01\\x7f\\xff\\\\b");
	assert_string_equal(sm_escape(small, sizeof(small), in, sizeof(in)), "a");
	assert_string_equal(sm_escape(out, sizeof(out), "ab\0cd", 5), "ab");
	assert_string_equal(sm_escape(out, sizeof(out), "abcd", 2), "ab");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_challenge_refusal_escaped),
		cmocka_unit_test(test_reply_refusal_escaped),
		cmocka_unit_test(test_escape),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
