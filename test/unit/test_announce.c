/* How a receiver's GPU registrations reach the sender of a shared-memory
 * connection: announced by the first receive into them, never by the
 * registration itself, so registering never waits for a sender that is
 * not reading its socket (CUDA graph capture registers buffers long
 * before any data moves).  A receive whose announcement cannot be written
 * yet is retried, as NCCL retries irecv, and one that waits past the
 * announcement limit fails its connection instead of hanging.  Real
 * sockets and shared memory, one process; the copy engine and the GPU
 * exports are stand-ins (engine_standin.c, export_standin.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>

#include <cmocka.h>

#include "engine_standin.h"
#include "internal.h"
#include "symmem.h"
#include "transport.h"
#include "tp_pair.h"

#define NREG 4096
#define SIZE 4096
#define DEADLINE_S 20.0

struct pair {
	struct tp_comm *s, *r;
	struct tp_region *sreg;
	uint8_t src[SIZE];
};

static void pair_open(struct pair *p)
{
	struct tp_options o = options(TP_BACKEND_SHM, 1 << 20, 65536);

	standin_engine_reset(1);
	standin_engine.helper = 1;
	o.gpu = 1;
	o.pool = (struct sm_pool_config){ .growth = 2.0, .max = 64u << 20, .trim = 64u << 20 };
	memset(p, 0, sizeof(*p));
	for (size_t i = 0; i < SIZE; i++)
		p->src[i] = (uint8_t)(i * 7 + 3);
	if (make_pair(&o, &p->s, &p->r))
		fail_msg("%s", sm_last_error());
	assert_int_equal(tp_register(p->s, p->src, SIZE, TP_MEM_CUDA, &p->sreg), SM_OK);
}

static void pair_close(struct pair *p)
{
	tp_deregister(p->s, p->sreg);
	tp_close(p->s);
	tp_close(p->r);
}

/* Bytes waiting to be read on a socket. */
static int unread(int fd)
{
	int n = -1;

	assert_int_equal(ioctl(fd, FIONREAD, &n), 0);
	return n;
}

/* Fills the receiver's socket with withdrawals of registrations it never
 * made, until some wait in its backlog: the sender has not read. */
static void fill_socket(struct tp_comm *r)
{
	struct tp_region fake;
	uint32_t id = 100000;

	memset(&fake, 0, sizeof(fake));
	while (r->aout_len == 0 && id < 200000) {
		fake.id = id++;
		assert_int_equal(region_withdraw(r, &fake), SM_OK);
	}
	assert_true(r->aout_len > 0);
}

/* Posts a receive of `dst` (registration `reg`) and sends src into it,
 * retrying both as NCCL's proxy does; checks every byte landed. */
static void move_once(struct pair *p, uint8_t *dst, struct tp_region *reg)
{
	double end = now() + DEADLINE_S;
	struct tp_req *sr = NULL, *rr = NULL;

	memset(dst, 0xee, SIZE);
	while (!rr && now() < end) {
		assert_int_equal(tp_irecv(p->r, dst, SIZE, reg, &rr), SM_OK);
		if (!rr)	/* the sender reads announcements when it tries to send */
			assert_int_equal(tp_isend(p->s, p->src, SIZE, p->sreg, &sr), SM_OK);
	}
	assert_non_null(rr);
	while (!sr && now() < end)
		assert_int_equal(tp_isend(p->s, p->src, SIZE, p->sreg, &sr), SM_OK);
	assert_non_null(sr);
	assert_int_equal(complete_both(sr, rr, end), SIZE);
	assert_memory_equal(dst, p->src, SIZE);
}

/* Thousands of registrations while the sender moves nothing (more than
 * the socket holds were they announced) return at once and write
 * nothing; the one a receive uses is announced then, and the data lands
 * in it; withdrawing the others sends nothing either. */
static void test_register_many_while_sender_idle(void **state)
{
	static uint8_t bufs[NREG][SIZE];
	static struct tp_region *regs[NREG];
	struct pair p;
	double t0;

	(void)state;
	pair_open(&p);
	t0 = now();
	for (int i = 0; i < NREG; i++)
		assert_int_equal(tp_register(p.r, bufs[i], SIZE, TP_MEM_CUDA, &regs[i]), SM_OK);
	assert_true(now() - t0 < 2.0);
	assert_int_equal(p.r->failed, 0);
	assert_int_equal(unread(p.s->fd), 0);
	assert_int_equal(p.r->aout_len, 0);

	move_once(&p, bufs[NREG - 7], regs[NREG - 7]);
	assert_int_equal(tp_remote_region_count(p.s), 1);
	/* Its second receive writes nothing more. */
	move_once(&p, bufs[NREG - 7], regs[NREG - 7]);
	assert_int_equal(unread(p.s->fd), 0);

	for (int i = 0; i < NREG; i++)
		tp_deregister(p.r, regs[i]);
	assert_int_equal(p.r->failed, 0);
	/* One withdrawal: the announced one's. */
	assert_int_equal(unread(p.s->fd), (int)sizeof(struct wire_region));
	pair_close(&p);
}

/* A receive into a new registration while the socket is full is not
 * posted (NCCL retries it); once the sender reads, the announcement goes
 * out whole and the data lands. */
static void test_receive_waits_for_room(void **state)
{
	static uint8_t dst[SIZE];
	struct tp_region *reg;
	struct tp_req *rr = (struct tp_req *)1;
	struct pair p;

	(void)state;
	pair_open(&p);
	fill_socket(p.r);
	assert_int_equal(tp_register(p.r, dst, SIZE, TP_MEM_CUDA, &reg), SM_OK);
	assert_int_equal(tp_irecv(p.r, dst, SIZE, reg, &rr), SM_OK);
	assert_null(rr);
	assert_int_equal(p.r->failed, 0);
	move_once(&p, dst, reg);
	assert_int_equal(p.r->aout_len, 0);
	assert_int_equal(p.s->failed, 0);
	tp_deregister(p.r, reg);
	pair_close(&p);
}

/* A sender that never reads again: the receive is refused until the
 * announcement limit (10 s) has passed, then the connection fails with
 * an error saying why, instead of NCCL retrying for ever. */
static void test_receive_gives_up_on_a_sender_that_never_reads(void **state)
{
	static uint8_t dst[SIZE];
	struct tp_region *reg;
	struct tp_req *rr = NULL;
	struct pair p;
	double t0, end;
	int rc = SM_OK;

	(void)state;
	pair_open(&p);
	fill_socket(p.r);
	assert_int_equal(tp_register(p.r, dst, SIZE, TP_MEM_CUDA, &reg), SM_OK);
	t0 = now();
	end = t0 + DEADLINE_S;
	while (rc == SM_OK && now() < end) {
		rc = tp_irecv(p.r, dst, SIZE, reg, &rr);
		assert_null(rr);
	}
	assert_int_equal(rc, SM_ERR_REMOTE);
	assert_true(now() - t0 > 9.5);
	assert_non_null(strstr(sm_last_error(), "did not read a registration announcement"));
	tp_deregister(p.r, reg);
	pair_close(&p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_register_many_while_sender_idle),
		cmocka_unit_test(test_receive_waits_for_room),
		cmocka_unit_test(test_receive_gives_up_on_a_sender_that_never_reads),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
