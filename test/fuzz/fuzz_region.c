/* What the receiving end of a shared-memory connection tells the sender
 * (transport/region.c, shm.c): registration announcements on the Unix
 * socket (struct wire_region, an export fd riding along) and its posted
 * receives in the shared header (size, registration, offset).  A
 * receiving peer may write anything there; the sender must fail the
 * connection on what does not add up, never copy outside what the peer
 * exported, and keep no descriptor or mapping past close.
 *
 * A real pair in this process; the sender's copy engine is the test
 * stand-in (a copy is a memcpy when tested) and an import is a heap buffer
 * of the size announced (import_heap.c), so AddressSanitizer sees a copy
 * that overruns it.  The target plays the receiver.  Input: operations
 * until it ends, each an opcode byte (taken modulo OP_COUNT) and its
 * fields. */
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

#include "engine_standin.h"
#include "fuzz.h"
#include "comm.h"
#include "shm.h"
#include "wire.h"
#include "symmem.h"

enum op {
	OP_BYTES,	/* u16 length, bytes: onto the socket */
	OP_BYTES_FD,	/* u32 export size, u16 length, bytes: the same with an fd */
	OP_RECV,	/* u32 registration, u64 offset, u32 size: a posted receive */
	OP_SEND,	/* u32 size: the sender's isend from host memory */
	OP_TEST,	/* the sender tests what it has in flight */
	OP_ANNOUNCED,	/* u32: the message count the receiver claims */
	OP_COUNT
};

#define SRC_BYTES (64u << 10)
#define EXPORT_MAX (1u << 20)
#define TESTS_AT_END 8

static uint8_t src[SRC_BYTES];

struct run {
	struct tp_comm *s, *r;
	struct tp_req *sent[TP_MAX_REQUESTS];
	int nsent;
	uint64_t posted;	/* receives published */
	size_t written;		/* socket bytes written */
};

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	fz_quiet();
	return 0;
}

static void announce(struct run *run, struct fz_in *in, int with_fd)
{
	uint8_t buf[1024];
	int fd = with_fd ? fz_memfd(fz_u32(in) % EXPORT_MAX) : -1;
	size_t len = fz_u16(in) % sizeof(buf);

	len = fz_take(in, buf, len);
	run->written += fz_send(run->r->fd, buf, len, fd);
	if (fd >= 0)
		close(fd);	/* sent: the sender holds its own */
	/* What an honest receiver publishes: whole messages written. */
	atomic_store(&shm_of(run->r)->ctrl->announced, run->written / sizeof(struct wire_region));
}

static void post_recv(struct run *run, struct fz_in *in)
{
	struct shm_ctrl *ctrl = shm_of(run->r)->ctrl;
	unsigned slot = run->posted % TP_MAX_REQUESTS;
	uint32_t region = fz_u32(in);
	uint64_t offset = fz_u64(in);
	uint32_t size = fz_u32(in);

	/* A receiver has at most TP_MAX_REQUESTS receives in flight. */
	if (run->posted >= run->s->posted + TP_MAX_REQUESTS)
		return;
	ctrl->recv_size[slot] = size;
	ctrl->recv_region[slot] = region;
	ctrl->recv_offset[slot] = offset;
	atomic_store(&ctrl->recv_posted, ++run->posted);
}

static int test_sends(struct run *run)
{
	for (int i = 0; i < run->nsent;) {
		int done = 0;

		if (tp_test(run->sent[i], &done, NULL) != SM_OK)
			return -1;
		if (done)
			run->sent[i] = run->sent[--run->nsent];
		else
			i++;
	}
	return 0;
}

static int send_one(struct run *run, struct fz_in *in)
{
	size_t size = fz_u32(in) % (SRC_BYTES + 1);
	struct tp_req *req = NULL;

	if (run->nsent == TP_MAX_REQUESTS)
		return 0;
	if (tp_isend(run->s, src, size, NULL, &req) != SM_OK)
		return -1;
	if (req)
		run->sent[run->nsent++] = req;
	return 0;
}

static int step(struct run *run, struct fz_in *in)
{
	switch (fz_u8(in) % OP_COUNT) {
	case OP_BYTES:
		announce(run, in, 0);
		return 0;
	case OP_BYTES_FD:
		announce(run, in, 1);
		return 0;
	case OP_RECV:
		post_recv(run, in);
		return 0;
	case OP_SEND:
		return send_one(run, in);
	case OP_TEST:
		return test_sends(run);
	default:
		atomic_store(&shm_of(run->r)->ctrl->announced, fz_u32(in));
		return 0;
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct tp_options lo = fz_options(TP_BACKEND_SHM), co = lo;
	struct fz_in in = { data, size };
	struct run run;
	int fds = fz_fd_count(), rc = 0;

	memset(&run, 0, sizeof(run));
	standin_engine_reset(1);
	co.gpu = 1;		/* the sender takes the (stand-in) copy engine */
	if (fz_pair(&lo, &co, &run.s, &run.r) != SM_OK)
		return 0;
	while (in.n && !rc)
		rc = step(&run, &in);
	for (int i = 0; i < TESTS_AT_END && !rc && run.nsent; i++)
		rc = test_sends(&run);
	if (rc)
		FZ_CHECK(sm_last_error()[0] != '\0');
	tp_close(run.s);
	tp_close(run.r);
	FZ_CHECK(sm_import_count() == 0);
	FZ_CHECK(fz_fd_count() == fds);
	return 0;
}
