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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <cmocka.h>

#include "engine_standin.h"
#include "internal.h"
#include "symmem.h"
#include "transport.h"
#include "tp_pair.h"
#include "fd_util.h"

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
	sr = isend_when_posted(p->s, p->src, SIZE, p->sreg, end);
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

/* Fills the receiver's socket, then registers `dst`: its first receive
 * is not posted (NCCL retries it), and the connection stays up. */
static struct tp_region *register_while_full(struct pair *p, uint8_t *dst)
{
	struct tp_region *reg;
	struct tp_req *rr = (struct tp_req *)1;

	fill_socket(p->r);
	assert_int_equal(tp_register(p->r, dst, SIZE, TP_MEM_CUDA, &reg), SM_OK);
	assert_int_equal(tp_irecv(p->r, dst, SIZE, reg, &rr), SM_OK);
	assert_null(rr);
	assert_int_equal(p->r->failed, 0);
	return reg;
}

/* A receive into a new registration while the socket is full is not
 * posted (NCCL retries it); once the sender reads, the announcement goes
 * out whole and the data lands. */
static void test_receive_waits_for_room(void **state)
{
	static uint8_t dst[SIZE];
	struct tp_region *reg;
	struct pair p;

	(void)state;
	pair_open(&p);
	reg = register_while_full(&p, dst);
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

/* Receive slot i % 32 serves message i: a plain host receive 32
 * messages after one into a registration (the same slot) goes through the
 * ring, into the host buffer, and the registration is left alone. */
static void test_ring_receive_after_direct_in_slot(void **state)
{
	static uint8_t dst[SIZE], host[SIZE];
	struct tp_region *reg;
	struct tp_req *sr, *rr;
	struct pair p;

	(void)state;
	pair_open(&p);
	assert_int_equal(tp_register(p.r, dst, SIZE, TP_MEM_CUDA, &reg), SM_OK);
	move_once(&p, dst, reg);
	memset(dst, 0xee, SIZE);
	for (int m = 1; m <= TP_MAX_REQUESTS; m++) {
		double end = now() + 5;

		memset(host, 0, SIZE);
		assert_int_equal(tp_irecv(p.r, host, SIZE, NULL, &rr), SM_OK);
		sr = isend_when_posted(p.s, p.src, SIZE, NULL, end);
		assert_int_equal(complete_both(sr, rr, end), SIZE);
		assert_memory_equal(host, p.src, SIZE);
	}
	assert_int_equal(dst[0], 0xee);
	assert_int_equal(dst[SIZE - 1], 0xee);
	tp_deregister(p.r, reg);
	pair_close(&p);
}

/* A receive into part of a registration lands at its own offset in it,
 * and nothing around it is written. */
static void test_receive_inside_registration(void **state)
{
	static uint8_t buf[3 * SIZE];
	struct tp_region *reg;
	struct pair p;

	(void)state;
	pair_open(&p);
	memset(buf, 0xee, sizeof(buf));
	assert_int_equal(tp_register(p.r, buf, sizeof(buf), TP_MEM_CUDA, &reg), SM_OK);
	move_once(&p, buf + SIZE, reg);
	for (size_t i = 0; i < SIZE; i++) {
		assert_int_equal(buf[i], 0xee);
		assert_int_equal(buf[2 * SIZE + i], 0xee);
	}
	tp_deregister(p.r, reg);
	pair_close(&p);
}

/* Where a receive's bytes go in its registration is written by the
 * receiver into memory it shares with the sender.  An offset past the
 * registration's allocation (also one that would wrap the sum), or one
 * that leaves too little room, fails the sender with a remote error
 * before any copy starts. */
static void test_receive_offset_outside_registration(void **state)
{
	const uint64_t bad[] = { SIZE + 4096, 1ull << 63, SIZE - 100 };
	static uint8_t dst[SIZE];

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct tp_req *sr = NULL, *rr = NULL;
		struct tp_region *reg;
		double end = now() + 5;
		struct pair p;
		int rc = SM_OK;

		pair_open(&p);
		assert_int_equal(tp_register(p.r, dst, SIZE, TP_MEM_CUDA, &reg), SM_OK);
		assert_int_equal(tp_irecv(p.r, dst, SIZE, reg, &rr), SM_OK);
		assert_non_null(rr);
		p.r->ctrl->recv_offset[0] = bad[i];
		while (!sr && rc == SM_OK && now() < end)
			rc = tp_isend(p.s, p.src, SIZE, p.sreg, &sr);
		assert_null(sr);
		assert_int_equal(rc, SM_ERR_REMOTE);
		assert_non_null(strstr(sm_last_error(), "cannot hold"));
		assert_int_equal(standin_engine.starts, 0);
		tp_deregister(p.r, reg);
		pair_close(&p);
	}
}

/* The time the sender saw a copy land is the peer's word, for the
 * receiver's statistics only: one in the future counts as no wait, not
 * as the longest. */
static void test_landing_time_from_the_future(void **state)
{
	static uint8_t dst[SIZE];
	struct tp_req *sr, *rr = NULL;
	struct tp_region *reg;
	struct tp_stats st;
	double end = now() + 5;
	struct pair p;

	(void)state;
	pair_open(&p);
	assert_int_equal(tp_register(p.r, dst, SIZE, TP_MEM_CUDA, &reg), SM_OK);
	assert_int_equal(tp_irecv(p.r, dst, SIZE, reg, &rr), SM_OK);
	assert_non_null(rr);
	sr = isend_when_posted(p.s, p.src, SIZE, p.sreg, end);
	wait_done(sr, end);
	p.r->ctrl->land_ns[0] = sm_now_ns() + 10ull * 1000 * 1000 * 1000;
	wait_done(rr, end);
	assert_memory_equal(dst, p.src, SIZE);
	tp_get_stats(p.r, &st);
	assert_int_equal(st.stage[TP_STAGE_NOTICE].n[0], 1);
	assert_int_equal(st.stage[TP_STAGE_NOTICE].n[SM_HIST_BUCKETS - 1], 0);
	tp_deregister(p.r, reg);
	pair_close(&p);
}

/* NCCL may deregister a registration after its connection closed, while
 * another connection has announced a registration of the same number:
 * deregistering the old one through the new connection withdraws nothing
 * from that connection's sender, whose receives go on landing in place. */
static void test_stale_deregistration_leaves_new_comm_alone(void **state)
{
	static uint8_t d1[SIZE], d2[SIZE];
	struct tp_region *reg1, *reg2;
	struct pair a, b;

	(void)state;
	pair_open(&a);
	assert_int_equal(tp_register(a.r, d1, SIZE, TP_MEM_CUDA, &reg1), SM_OK);
	move_once(&a, d1, reg1);
	pair_close(&a);
	pair_open(&b);
	assert_int_equal(tp_register(b.r, d2, SIZE, TP_MEM_CUDA, &reg2), SM_OK);
	assert_int_equal(reg2->id, reg1->id);
	move_once(&b, d2, reg2);
	tp_deregister(b.r, reg1);
	move_once(&b, d2, reg2);
	assert_int_equal(tp_remote_region_count(b.s), 1);
	assert_int_equal(b.s->failed, 0);
	tp_deregister(b.r, reg2);
	pair_close(&b);
}

/* Sends from a host buffer the copy helper cannot map go through the
 * connection's host staging: many more messages than the staging holds
 * at once all land (each gives its room back once its copy landed), and
 * the staging goes with the connection. */
static void test_host_sends_through_staging(void **state)
{
	static uint8_t dst[SIZE], host[SIZE];
	struct tp_region *reg, *hreg;
	struct tp_stats st;
	struct pair p;

	(void)state;
	pair_open(&p);
	standin_engine.helper = 0;	/* registered while the helper cannot map it */
	assert_int_equal(tp_register(p.s, host, SIZE, TP_MEM_HOST, &hreg), SM_OK);
	standin_engine.helper = 1;
	assert_int_equal(tp_register(p.r, dst, SIZE, TP_MEM_CUDA, &reg), SM_OK);
	for (int m = 0; m < 3 * (1 << 20) / SIZE; m++) {
		double end = now() + 5;
		struct tp_req *sr = NULL, *rr = NULL;

		memset(host, m + 1, SIZE);
		memset(dst, 0, SIZE);
		assert_int_equal(tp_irecv(p.r, dst, SIZE, reg, &rr), SM_OK);
		assert_non_null(rr);
		sr = isend_when_posted(p.s, host, SIZE, hreg, end);
		assert_int_equal(complete_both(sr, rr, end), SIZE);
		assert_memory_equal(dst, host, SIZE);
	}
	tp_get_stats(p.s, &st);
	assert_int_equal(st.direct, 3 * (1 << 20) / SIZE);
	assert_true(mappings_named("symmem-stage") > 0);	/* here and in the helper */
	tp_deregister(p.r, reg);
	tp_deregister(p.s, hreg);
	pair_close(&p);
	assert_int_equal(mappings_named("symmem-stage"), 0);
	assert_int_equal(standin_engine.ranges, 0);
}

/* A region whose first receive once waited for room, and whose later
 * receive, long after, finds other messages waiting again: the 10 s limit
 * counts from the start of this wait, not the first one, so the
 * connection goes on.  Before, the first wait's clock was kept and the
 * later receive failed a healthy connection at once. */
static void test_second_wait_counts_from_its_own_start(void **state)
{
	static uint8_t dst[SIZE];
	struct tp_region *reg;
	struct tp_req *rr = (struct tp_req *)1;
	struct pair p;

	(void)state;
	pair_open(&p);
	reg = register_while_full(&p, dst);	/* the first wait starts its clock */
	move_once(&p, dst, reg);
	sleep(11);			/* past ANNOUNCE_TIMEOUT_MS since then */
	move_once(&p, dst, reg);
	fill_socket(p.r);
	assert_int_equal(tp_irecv(p.r, dst, SIZE, reg, &rr), SM_OK);
	assert_null(rr);		/* waits again, and is not failed */
	assert_int_equal(p.r->failed, 0);
	move_once(&p, dst, reg);
	assert_int_equal(p.s->failed, 0);
	tp_deregister(p.r, reg);
	pair_close(&p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_register_many_while_sender_idle),
		cmocka_unit_test(test_receive_waits_for_room),
		cmocka_unit_test(test_receive_gives_up_on_a_sender_that_never_reads),
		cmocka_unit_test(test_second_wait_counts_from_its_own_start),
		cmocka_unit_test(test_ring_receive_after_direct_in_slot),
		cmocka_unit_test(test_receive_inside_registration),
		cmocka_unit_test(test_receive_offset_outside_registration),
		cmocka_unit_test(test_landing_time_from_the_future),
		cmocka_unit_test(test_stale_deregistration_leaves_new_comm_alone),
		cmocka_unit_test(test_host_sends_through_staging),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
