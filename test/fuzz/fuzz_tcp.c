/* The TCP data path's parsers (transport/tcp.c): the receiver's
 * announcements of its posted receives (message number and capacity, 16
 * bytes each), which the sender reads, and the sender's size headers and
 * payloads, which the receiver reads.  A peer holding the token may send
 * anything, or stop reading: the other end must fail the connection
 * cleanly, never write past what it posted, and stay within bounded
 * memory.
 *
 * A real TCP pair in this process; the target plays one end over that
 * end's socket, and checks what the honest end sends it.  Input: flags
 * (bit 0: the target plays the sender, else the receiver), then
 * operations until the input ends, each an opcode byte (modulo OP_COUNT)
 * and its fields. */
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "fuzz.h"
#include "comm.h"
#include "tcp.h"
#include "wire.h"
#include "symmem.h"

#define F_PLAY_SENDER 1u

enum op {
	OP_BYTES,	/* u16 length, bytes: from the played end */
	OP_POST,	/* u32 size: the honest end posts a send or receive */
	OP_TEST,	/* the honest end tests what it has in flight */
	OP_READ,	/* the played end reads what the honest end sent */
	OP_COUNT
};

#define MSG_MAX (64u << 10)
#define TESTS_AT_END 8

struct run {
	struct tp_comm *honest;	/* the end under test */
	int fd;			/* the played end's socket */
	int sender;		/* the target plays the sender */
	/* In flight: each buffer a heap block of exactly its size, so
	 * AddressSanitizer sees a byte written past it. */
	struct tp_req *req[TP_MAX_REQUESTS];
	uint8_t *buf[TP_MAX_REQUESTS];
	uint32_t size[TP_MAX_REQUESTS];
	int n;
	/* Playing the sender: the receives posted, and the announcements
	 * read so far, which must name them in order.  Every capacity is
	 * kept until its announcement is read: a receive completes (and
	 * leaves the honest end's TP_MAX_REQUESTS) without it, so more
	 * than that many may wait unread. */
	uint64_t posted, announced;
	uint64_t *capacity;	/* by message number */
	uint64_t capacity_len;
	uint8_t part[16];
	size_t part_len;
};

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	fz_quiet();
	return 0;
}

static void send_bytes(struct run *run, struct fz_in *in)
{
	uint8_t b[1024];
	size_t len = fz_take(in, b, fz_u16(in) % sizeof(b));

	fz_send(run->fd, b, len, -1);
}

/* Room for one more capacity; -1 when there is no memory for it. */
static int keep_room(struct run *run)
{
	uint64_t len = run->capacity_len ? 2 * run->capacity_len : 64;
	uint64_t *c;

	if (run->posted < run->capacity_len)
		return 0;
	c = realloc(run->capacity, len * sizeof(*c));
	if (!c)
		return -1;
	run->capacity = c;
	run->capacity_len = len;
	return 0;
}

static int post(struct run *run, struct fz_in *in)
{
	uint32_t size = fz_u32(in) % (MSG_MAX + 1);
	struct tp_req *req = NULL;
	uint8_t *buf;
	int rc;

	if (run->n == TP_MAX_REQUESTS || (run->sender && keep_room(run)))
		return 0;
	buf = malloc(size ? size : 1);
	if (!buf)
		return 0;
	memset(buf, 0x5a, size);
	if (run->sender) {
		rc = tp_irecv(run->honest, buf, size, NULL, &req);
		if (!rc && req)
			run->capacity[run->posted++] = size;
	} else {
		rc = tp_isend(run->honest, buf, size, NULL, &req);
	}
	if (rc || !req) {
		free(buf);
		return rc ? -1 : 0;
	}
	run->req[run->n] = req;
	run->buf[run->n] = buf;
	run->size[run->n++] = size;
	return 0;
}

static int test_all(struct run *run)
{
	for (int i = 0; i < run->n;) {
		size_t got = 0;
		int done = 0;

		if (tp_test(run->req[i], &done, &got) != SM_OK)
			return -1;
		if (!done) {
			i++;
			continue;
		}
		/* A receive reports at most what it posted. */
		FZ_CHECK(got <= run->size[i]);
		free(run->buf[i]);
		run->n--;
		run->req[i] = run->req[run->n];
		run->buf[i] = run->buf[run->n];
		run->size[i] = run->size[run->n];
	}
	return 0;
}

/* Playing the sender: the honest receiver announces exactly the receives
 * it posted, in order.  Playing the receiver: whatever came is dropped. */
static void read_peer(struct run *run)
{
	uint8_t b[4096];
	ssize_t n;

	while ((n = recv(run->fd, b, sizeof(b), MSG_DONTWAIT)) > 0) {
		for (ssize_t i = 0; run->sender && i < n; i++) {
			uint64_t seq, size;

			run->part[run->part_len++] = b[i];
			if (run->part_len < sizeof(run->part))
				continue;
			run->part_len = 0;
			memcpy(&seq, run->part, 8);
			memcpy(&size, run->part + 8, 8);
			FZ_CHECK(seq == run->announced && seq < run->posted);
			FZ_CHECK(size == run->capacity[seq]);
			run->announced++;
		}
	}
}

static int step(struct run *run, struct fz_in *in)
{
	switch (fz_u8(in) % OP_COUNT) {
	case OP_BYTES:
		send_bytes(run, in);
		return 0;
	case OP_POST:
		return post(run, in);
	case OP_TEST:
		return test_all(run);
	default:
		read_peer(run);
		return 0;
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct tp_options o = fz_options(TP_BACKEND_TCP);
	struct fz_in in = { data, size };
	struct tp_comm *s, *r;
	unsigned flags = fz_u8(&in);
	struct run run;
	int fds = fz_fd_count(), rc = 0;

	if (fz_pair(&o, &o, &s, &r) != SM_OK)
		return 0;
	memset(&run, 0, sizeof(run));
	run.sender = flags & F_PLAY_SENDER;
	run.honest = run.sender ? r : s;
	run.fd = run.sender ? s->fd : r->fd;
	while (in.n && !rc)
		rc = step(&run, &in);
	for (int i = 0; i < TESTS_AT_END && !rc && run.n; i++)
		rc = test_all(&run);
	if (rc)
		FZ_CHECK(sm_last_error()[0] != '\0');
	tp_close(s);
	tp_close(r);
	for (int i = 0; i < run.n; i++)
		free(run.buf[i]);	/* after the close: nothing moves them now */
	free(run.capacity);
	FZ_CHECK(fz_fd_count() == fds);
	return 0;
}
