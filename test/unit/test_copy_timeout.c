/* A copy that never lands, or never finds a free copy slot to start, fails
 * its connection once NCCL_SYMMEM_COPY_TIMEOUT (tp_options.copy_timeout)
 * has passed, with an error naming the copy, instead of leaving NCCL
 * waiting for ever.  The copy engine's stand-in (engine_standin.c) holds
 * copies back or refuses them, as a stuck GPU, driver or copy helper
 * would.  A receive whose bytes all arrived waits on its own copy alone:
 * that limit, not the sender's hang-up, ends the wait.  And a copy still
 * queued keeps its target mapped when the receiver withdraws it.  Real
 * sockets and shared memory, one process. */
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "engine_standin.h"
#include "shm.h"
#include "symmem.h"
#include "transport.h"
#include "tp_pair.h"

#define SIZE (256u << 10)
#define TIMEOUT_S 0.3
#define DEADLINE_S 10.0

/* Both ends of one connection, a "GPU" buffer registered on each, and
 * one receive posted. */
struct pair {
	struct tp_pair c;
	struct tp_region *sreg, *rreg;
	struct tp_req *rr;
	uint8_t *src, *dst;
};

/* Opens `p` with a copy limit of `limit_s` seconds on both ends. */
static void pair_open(struct pair *p, int backend, int zero_copy, double limit_s)
{
	const struct tp_pair_opts opts = {
		.backend = backend,
		.gpu = 1,
		.staged = !zero_copy,
		.copy_limit_s = limit_s,
	};

	memset(p, 0, sizeof(*p));
	p->src = malloc(SIZE);
	p->dst = malloc(SIZE);
	assert_non_null(p->src);
	assert_non_null(p->dst);
	memset(p->src, 0x5a, SIZE);
	memset(p->dst, 0xee, SIZE);
	tp_pair_open(&p->c, &opts);
	assert_int_equal(tp_register(p->c.s, p->src, SIZE, TP_MEM_CUDA, &p->sreg), SM_OK);
	assert_int_equal(tp_register(p->c.r, p->dst, SIZE, TP_MEM_CUDA, &p->rreg), SM_OK);
	assert_int_equal(tp_irecv(p->c.r, p->dst, SIZE, p->rreg, &p->rr), SM_OK);
}

static void pair_close(struct pair *p)
{
	tp_deregister(p->c.s, p->sreg);
	tp_deregister(p->c.r, p->rreg);
	tp_pair_close(&p->c);
	free(p->src);
	free(p->dst);
}

/* A shared-memory pair whose engine refuses `refuse_pct` % of copy starts. */
static void refusing_pair(struct pair *p, unsigned seed, int refuse_pct)
{
	standin_engine_reset(seed);
	standin_engine.helper = 1;
	standin_engine.refuse_pct = refuse_pct;
	pair_open(p, TP_BACKEND_SHM, 1, TIMEOUT_S);
}

/* A pair (copy limit `limit_s`) whose engine holds every copy into the
 * receive buffer until the test lets go (standin_engine.hold_dst = NULL). */
static void holding_pair(struct pair *p, unsigned seed, int backend, int zero_copy,
			 double limit_s)
{
	standin_engine_reset(seed);
	standin_engine.helper = 1;
	pair_open(p, backend, zero_copy, limit_s);
	standin_engine.hold_dst = p->dst;
	standin_engine.hold_len = SIZE;
}

/* The receiver's registration `id` of its receive buffer, as a receive
 * names it, without the receiver's bookkeeping (withdrawn, or announced
 * by hand). */
static void fake_region(struct shm_region *f, const struct pair *p, uint32_t id)
{
	memset(f, 0, sizeof(*f));
	f->reg.comm = p->c.r;
	f->reg.comm_serial = p->c.r->serial;
	f->reg.base = (uintptr_t)p->dst;
	f->reg.size = SIZE;
	f->reg.mem = TP_MEM_HOST;
	f->id = id;
}

/* A pair whose copies run in this process (no copy helper): returns its
 * first send, issued; with `hold` the engine holds its copy into the
 * receive buffer until the test lets go. */
static struct tp_req *inprocess_first_send(struct pair *p, unsigned seed, int hold)
{
	struct tp_req *sr = NULL;
	double end;

	standin_engine_reset(seed);
	pair_open(p, TP_BACKEND_SHM, 1, DEADLINE_S);
	if (hold) {
		standin_engine.hold_dst = p->dst;
		standin_engine.hold_len = SIZE;
	}
	end = now() + DEADLINE_S;
	sr = isend_when_posted(p->c.s, p->src, SIZE, p->sreg, end);
	return sr;
}

/* Asks about the held copy for `seconds`: its wait has begun and no limit
 * is near (an error here fails the test). */
static void ask_for(struct pair *p, struct tp_req *sr, int failing_send, double seconds)
{
	double end = now() + seconds;
	int done = 0;

	while (now() < end) {
		if (failing_send)
			assert_int_equal(tp_test(sr, &done, NULL), SM_OK);
		else
			assert_int_equal(tp_test(p->rr, &done, NULL), SM_OK);
		assert_false(done);
	}
}

/* One message from one "GPU" buffer into another with every copy into the
 * receive buffer held: the side named by `failing_send` fails with
 * SM_ERR_CUDA and a message naming `copy`, no sooner than the timeout and
 * well before the test's deadline; the other side is not asked to finish.
 * zero_copy 0: receives land in the staging pool first.  close_held: the
 * pair is closed with the copy still held, and must not wait for it.
 * gap: once the copy waits, nobody asks about it for longer than the
 * limit (NCCL's thread stopped in a debugger); the limit then counts from
 * the first ask after the gap. */
static void held_copy_fails(int backend, int zero_copy, int failing_send, const char *copy,
			    int close_held, int gap)
{
	struct tp_req *sr = NULL;
	struct pair p;
	double t0, end;
	int done = 0, other = 0, rv = SM_OK;

	holding_pair(&p, 11, backend, zero_copy, TIMEOUT_S);
	t0 = now();
	end = t0 + DEADLINE_S;
	while (!sr && now() < end) {
		if (tp_isend(p.c.s, p.src, SIZE, p.sreg, &sr))
			fail_msg("isend: %s", sm_last_error());
		assert_int_equal(tp_test(p.rr, &done, NULL), SM_OK);
	}
	assert_non_null(sr);
	if (gap) {
		ask_for(&p, sr, failing_send, 0.02);
		usleep((useconds_t)(TIMEOUT_S * 1.5 * 1e6));
		t0 = now();
	}
	while (now() < end) {
		if (failing_send) {
			rv = tp_test(sr, &done, NULL);
			if (rv)
				break;
			assert_int_equal(tp_test(p.rr, &other, NULL), SM_OK);
		} else {
			rv = tp_test(p.rr, &done, NULL);
			if (rv)
				break;
			if (!other)	/* the bytes leave; only their copy is held */
				assert_int_equal(tp_test(sr, &other, NULL), SM_OK);
		}
		assert_false(done);
	}
	assert_int_equal(rv, SM_ERR_CUDA);
	assert_true(now() - t0 >= TIMEOUT_S);
	assert_non_null(strstr(sm_last_error(), copy));
	assert_non_null(strstr(sm_last_error(), "did not land in"));
	assert_int_equal(p.dst[0], 0xee);
	if (!close_held) {
		standin_engine.hold_dst = NULL;
		pair_close(&p);
		return;
	}
	/* The engine now counts as stuck: closing does not wait the limit
	 * again for the held copy (32 connections per peer would wait 32
	 * times).  What the copy may still touch stays; the next reset lets
	 * go of the stand-in's copy. */
	t0 = now();
	pair_close(&p);
	assert_true(now() - t0 < TIMEOUT_S / 2);
	standin_engine.hold_dst = NULL;
}

/* Shared memory: the sender's copy straight into the receive buffer. */
static void test_shm_direct_copy_times_out(void **state)
{
	(void)state;
	held_copy_fails(TP_BACKEND_SHM, 1, 1, "into the peer's buffer", 1, 0);
}

/* TCP: the receiver's copy from a bounce slot into its buffer, under the
 * same limit (once a constant 60 s). */
static void test_tcp_bounce_copy_times_out(void **state)
{
	(void)state;
	held_copy_fails(TP_BACKEND_TCP, 1, 0, "TCP bounce buffer", 0, 0);
}

/* TCP, closed with the copy from a bounce slot still held: the close does
 * not wait the limit again, and the bounce buffer, which the copy may
 * still read, stays with the copy helper (its range is not dropped) and
 * allocated. */
static void test_tcp_bounce_kept_at_close(void **state)
{
	int ranges;

	(void)state;
	held_copy_fails(TP_BACKEND_TCP, 1, 0, "TCP bounce buffer", 1, 0);
	ranges = standin_engine.ranges;
	/* The receiver's bounce buffer: still named to the helper. */
	assert_true(ranges >= 1);
}

/* Shared memory through the staging pool: the receiver's copy out of it. */
static void test_shm_staged_copy_out_times_out(void **state)
{
	(void)state;
	held_copy_fails(TP_BACKEND_SHM, 0, 0, "out of the staging pool", 0, 0);
}

/* A copy into the peer's buffer held for good, asked about every `every`
 * seconds: fails, and returns how long after the first ask.  The pair
 * has a limit of 1 s. */
static double slow_asks_fail_after(double every)
{
	struct tp_req *sr = NULL;
	struct pair p;
	double t0, end;
	int done = 0, rv = SM_OK;

	holding_pair(&p, 15, TP_BACKEND_SHM, 1, 1.0);
	end = now() + DEADLINE_S;
	sr = isend_when_posted(p.c.s, p.src, SIZE, p.sreg, end);
	t0 = now();
	while (now() < end) {
		rv = tp_test(sr, &done, NULL);
		if (rv)
			break;
		usleep((useconds_t)(every * 1e6));
	}
	assert_int_equal(rv, SM_ERR_CUDA);
	assert_non_null(strstr(sm_last_error(), "did not land in"));
	t0 = now() - t0;
	standin_engine.hold_dst = NULL;
	pair_close(&p);
	return t0;
}

/* NCCL asking slowly is not NCCL held up.  Asks 0.2 s apart (under half
 * the 1 s limit) are no gap: the copy fails one limit after the first ask,
 * not later (counting gaps from the 10 ms floor alone, it failed after
 * 1.6 s).  Asks 0.7 s apart are gaps every time: the first two restart
 * the clock, the rest do not, so a stuck copy still fails (it never did
 * when every gap restarted it). */
static void test_slow_asks_still_time_out(void **state)
{
	double t;

	(void)state;
	t = slow_asks_fail_after(0.2);
	assert_true(t >= 1.0);
	assert_true(t < 1.35);
	t = slow_asks_fail_after(0.7);
	assert_true(t >= 1.0);
	assert_true(t < 4.0);
}

/* A long gap in the asks starts every wait of the connection again: a
 * copy into the peer's buffer, out of the staging pool, and from a TCP
 * bounce slot (each once counted from its post, so the first ask after a
 * debugger's stop failed it). */
static void test_gap_in_asks_restarts_the_clock(void **state)
{
	(void)state;
	held_copy_fails(TP_BACKEND_SHM, 1, 1, "into the peer's buffer", 0, 1);
	held_copy_fails(TP_BACKEND_SHM, 0, 0, "out of the staging pool", 0, 1);
	held_copy_fails(TP_BACKEND_TCP, 1, 0, "TCP bounce buffer", 0, 1);
}

/* Shared memory, every copy start refused (no copy slot ever frees up):
 * the send fails after the timeout instead of NCCL retrying for ever. */
static void test_shm_copy_start_times_out(void **state)
{
	struct tp_req *sr = NULL;
	struct pair p;
	double t0, end;
	int done = 0, rv = SM_OK;

	(void)state;
	refusing_pair(&p, 12, 100);
	t0 = now();
	end = t0 + DEADLINE_S;
	while (!rv && !sr && now() < end) {
		rv = tp_isend(p.c.s, p.src, SIZE, p.sreg, &sr);
		assert_int_equal(tp_test(p.rr, &done, NULL), SM_OK);
	}
	assert_null(sr);
	assert_int_equal(rv, SM_ERR_CUDA);
	assert_true(now() - t0 >= TIMEOUT_S);
	assert_non_null(strstr(sm_last_error(), "waiting for a free copy slot"));
	assert_int_equal(standin_engine.starts, 0);
	pair_close(&p);
}

/* TCP, every copy start refused: the receive slot that holds all its
 * bytes never gets a copy slot, and the receive fails after the limit,
 * timed from the slot's first refusal (timed again from every retry, it
 * never failed).  The bytes come from host memory, so the sender needs no
 * copy and completes. */
static void test_tcp_bounce_copy_start_times_out(void **state)
{
	struct tp_req *sr = NULL;
	struct pair p;
	double t0, end;
	int done = 0, sent = 0, rv = SM_OK;

	(void)state;
	standin_engine_reset(18);
	standin_engine.helper = 1;
	standin_engine.refuse_pct = 100;
	pair_open(&p, TP_BACKEND_TCP, 1, TIMEOUT_S);
	t0 = now();
	end = t0 + DEADLINE_S;
	sr = isend_when_posted(p.c.s, p.src, SIZE, NULL, end);
	while (now() < end) {
		rv = tp_test(p.rr, &done, NULL);
		if (rv)
			break;
		assert_false(done);
		if (!sent)
			assert_int_equal(tp_test(sr, &sent, NULL), SM_OK);
	}
	assert_int_equal(rv, SM_ERR_CUDA);
	assert_true(sent);
	assert_true(now() - t0 >= TIMEOUT_S);
	assert_non_null(strstr(sm_last_error(), "TCP bounce buffer, waiting for a free copy slot"));
	assert_non_null(strstr(sm_last_error(), "did not land in"));
	assert_int_equal(standin_engine.starts, 0);
	assert_int_equal(p.dst[0], 0xee);
	pair_close(&p);
}

/* Refused starts with a long gap between two tries (NCCL's thread held up
 * for longer than the limit, say by a debugger) do not fail the send at
 * the next try: the clock starts again.  Refused without a break for the
 * whole limit, it fails. */
static void test_start_clock_restarts_after_a_gap(void **state)
{
	struct tp_req *sr = NULL;
	struct pair p;
	double t1, end;
	int rv;

	(void)state;
	refusing_pair(&p, 14, 100);
	assert_int_equal(tp_isend(p.c.s, p.src, SIZE, p.sreg, &sr), SM_OK);
	assert_null(sr);
	usleep((useconds_t)(TIMEOUT_S * 1.5 * 1e6));
	t1 = now();
	assert_int_equal(tp_isend(p.c.s, p.src, SIZE, p.sreg, &sr), SM_OK);
	assert_null(sr);
	end = t1 + DEADLINE_S;
	do
		rv = tp_isend(p.c.s, p.src, SIZE, p.sreg, &sr);
	while (!rv && now() < end);
	assert_int_equal(rv, SM_ERR_CUDA);
	assert_true(now() - t1 >= TIMEOUT_S);
	pair_close(&p);
}

/* Sends `n` messages `gap_ms` apart over a refusing pair, each retried
 * as NCCL's proxy does until its copy starts (with `refuse_first`, the
 * first start of each is refused for certain); every one must land,
 * none time out. */
static void send_apart(struct pair *p, int n, int gap_ms, int refuse_first)
{
	double end = now() + DEADLINE_S;

	for (int i = 0; i < n; i++) {
		struct tp_req *sr = NULL;

		if (i)
			assert_int_equal(tp_irecv(p->c.r, p->dst, SIZE, p->rreg, &p->rr), SM_OK);
		memset(p->src, i + 1, SIZE);
		if (refuse_first) {
			int pct = standin_engine.refuse_pct;

			standin_engine.refuse_pct = 100;
			assert_int_equal(tp_isend(p->c.s, p->src, SIZE, p->sreg, &sr), SM_OK);
			assert_null(sr);
			standin_engine.refuse_pct = pct;
		}
		while (!sr) {
			if (tp_isend(p->c.s, p->src, SIZE, p->sreg, &sr))
				fail_msg("message %d: %s", i, sm_last_error());
			assert_true(now() < end);
		}
		assert_int_equal(complete_both(sr, p->rr, end), SIZE);
		assert_int_equal(p->dst[SIZE - 1], i + 1);
		usleep(gap_ms * 1000);
	}
}

/* A healthy connection whose copy starts are often refused for a moment
 * (half of them here) and whose messages come apart, for longer in all
 * than the limit: every message lands, none times out.  The clock of a
 * refused start is the message's own, not the first refusal ever. */
static void test_slow_but_healthy_never_times_out(void **state)
{
	struct pair p;

	(void)state;
	refusing_pair(&p, 13, 50);
	send_apart(&p, 20, 60, 0);
	assert_true(standin_engine.starts >= 20);
	pair_close(&p);
}

/* Through the staging pool, the sender's copy lands, its send completes
 * and it closes (its last message); only the receiver's own copy out of
 * the pool is still held.  The sender's hang-up must not fail a receive
 * whose bytes all arrived: it completes once its copy lands (`lands`), or
 * fails after its own copy limit like any copy, not as "peer died". */
static void pool_receive_outlives_sender(int lands)
{
	struct tp_req *sr = NULL;
	struct pair p;
	double t0, end;
	int done = 0, rv = SM_OK;

	holding_pair(&p, 16, TP_BACKEND_SHM, 0, TIMEOUT_S);
	end = now() + DEADLINE_S;
	sr = isend_when_posted(p.c.s, p.src, SIZE, p.sreg, end);
	wait_done(sr, end);	/* only copies into p.dst are held */
	tp_deregister(p.c.s, p.sreg);
	tp_close(p.c.s);
	p.c.s = NULL;
	p.sreg = NULL;
	/* Longer than one liveness interval (50 ms): the hang-up is seen. */
	t0 = now();
	ask_for(&p, NULL, 0, 0.12);
	if (lands) {
		standin_engine.hold_dst = NULL;
		done = 0;
		wait_done(p.rr, end);
		assert_int_equal(p.dst[0], 0x5a);
		assert_int_equal(p.dst[SIZE - 1], 0x5a);
		pair_close(&p);
		return;
	}
	while (now() < end) {
		rv = tp_test(p.rr, &done, NULL);
		if (rv)
			break;
		assert_false(done);
	}
	assert_int_equal(rv, SM_ERR_CUDA);
	assert_true(now() - t0 >= TIMEOUT_S);
	assert_non_null(strstr(sm_last_error(), "out of the staging pool"));
	assert_non_null(strstr(sm_last_error(), "did not land in"));
	standin_engine.hold_dst = NULL;
	pair_close(&p);
}

static void test_pool_receive_outlives_sender(void **state)
{
	(void)state;
	pool_receive_outlives_sender(1);
	pool_receive_outlives_sender(0);
}

/* The receiver withdraws its registration (after an abort NCCL
 * deregisters with receives in flight) while the sender's copy into it,
 * issued in this process (no copy helper), is still queued.  The sender
 * reads the withdrawal at its next test but keeps the receiver's buffer
 * mapped until that copy landed: unmapping it under a running copy would
 * fault the sender's CUDA context.  Then the mapping goes. */
static void test_withdrawal_waits_for_queued_copy(void **state)
{
	struct tp_req *sr;
	struct pair p;
	double end;
	int done = 0;

	(void)state;
	sr = inprocess_first_send(&p, 17, 1);
	end = now() + DEADLINE_S;
	assert_int_equal(standin_engine.range_starts, 0);
	assert_int_equal(sm_import_count(), 1);
	tp_deregister(p.c.r, p.rreg);
	p.rreg = NULL;
	for (int i = 0; i < 3; i++) {
		assert_int_equal(tp_test(sr, &done, NULL), SM_OK);
		assert_false(done);
	}
	assert_int_equal(sm_import_count(), 1);
	assert_int_equal(tp_remote_region_count(p.c.s), 1);
	standin_engine.hold_dst = NULL;
	wait_done(sr, end);
	assert_int_equal(p.dst[0], 0x5a);
	assert_int_equal(sm_import_count(), 0);
	assert_int_equal(tp_remote_region_count(p.c.s), 0);
	pair_close(&p);
}

/* Every message's first copy start is refused once, then goes; messages
 * come 50 ms apart for twice the limit.  The wait for a free copy slot is
 * timed from the message's own first refusal, so none fails (timed from
 * the first refusal on the connection, one failed once past the limit). */
static void test_start_clock_is_per_message(void **state)
{
	struct pair p;

	(void)state;
	refusing_pair(&p, 19, 0);
	send_apart(&p, (int)(2 * TIMEOUT_S / 0.05), 50, 1);
	pair_close(&p);
}

/* Two sends queued into one registration, which the receiver withdraws
 * while both copies (in this process) are held; the first lands while the
 * second is still held: that landing
 * keeps the mapping for the second, which lands whole; the mapping goes
 * with the last. */
static void test_withdrawal_waits_for_every_queued_copy(void **state)
{
	struct tp_req *s0 = NULL, *s1 = NULL, *r1;
	struct pair p;
	double end;
	int done = 0;

	(void)state;
	standin_engine_reset(20);	/* no helper: copies run in this process */
	pair_open(&p, TP_BACKEND_SHM, 1, DEADLINE_S);
	assert_int_equal(tp_irecv(p.c.r, p.dst + SIZE / 2, SIZE / 2, p.rreg, &r1), SM_OK);
	standin_engine.hold_nth = 1;
	end = now() + DEADLINE_S;
	s0 = isend_when_posted(p.c.s, p.src, SIZE / 2, p.sreg, end);
	s1 = isend_when_posted(p.c.s, p.src + SIZE / 2, SIZE / 2, p.sreg, end);
	tp_deregister(p.c.r, p.rreg);
	p.rreg = NULL;
	assert_int_equal(tp_test(s0, &done, NULL), SM_OK);	/* reads the withdrawal */
	assert_false(done);
	standin_engine.hold_nth = 2;
	wait_done(s0, end);
	assert_int_equal(sm_import_count(), 1);
	assert_int_equal(tp_remote_region_count(p.c.s), 1);
	standin_engine.hold_nth = 0;
	wait_done(s1, end);
	assert_int_equal(p.dst[SIZE - 1], 0x5a);
	assert_int_equal(sm_import_count(), 0);
	assert_int_equal(tp_remote_region_count(p.c.s), 0);
	pair_close(&p);
}

/* A withdrawn registration no queued send copies into goes at once,
 * though a send into another registration is still copying. */
static void test_withdrawal_of_idle_region_not_held_by_another(void **state)
{
	struct tp_region *reg_b;
	struct tp_req *s0 = NULL, *s1 = NULL, *rb;
	uint8_t *dst_b = malloc(SIZE);
	struct pair p;
	double end;
	int done = 0;

	(void)state;
	assert_non_null(dst_b);
	s0 = inprocess_first_send(&p, 21, 0);
	end = now() + DEADLINE_S;
	wait_done(s0, end);
	assert_int_equal(tp_register(p.c.r, dst_b, SIZE, TP_MEM_CUDA, &reg_b), SM_OK);
	assert_int_equal(tp_irecv(p.c.r, dst_b, SIZE, reg_b, &rb), SM_OK);
	standin_engine.hold_dst = dst_b;
	standin_engine.hold_len = SIZE;
	s1 = isend_when_posted(p.c.s, p.src, SIZE, p.sreg, end);
	assert_int_equal(tp_remote_region_count(p.c.s), 2);
	tp_deregister(p.c.r, p.rreg);
	p.rreg = NULL;
	for (int i = 0; i < 3; i++) {
		assert_int_equal(tp_test(s1, &done, NULL), SM_OK);
		assert_false(done);
	}
	assert_int_equal(tp_remote_region_count(p.c.s), 1);
	assert_int_equal(sm_import_count(), 1);
	standin_engine.hold_dst = NULL;
	wait_done(s1, end);
	assert_int_equal(dst_b[0], 0x5a);
	tp_deregister(p.c.r, reg_b);
	pair_close(&p);
	free(dst_b);
}

/* A receive that names a registration the receiver withdrew, which the
 * sender keeps only for the copy still queued into it, fails the sender
 * with a remote error; no copy into it starts. */
static void test_receive_into_withdrawn_region_fails(void **state)
{
	struct tp_req *s0, *s1 = NULL, *r1 = NULL;
	struct shm_region fake;
	struct pair p;
	int done = 0, starts;

	(void)state;
	s0 = inprocess_first_send(&p, 22, 1);
	fake_region(&fake, &p, shm_region_of(p.rreg)->id);
	tp_deregister(p.c.r, p.rreg);
	p.rreg = NULL;
	assert_int_equal(tp_test(s0, &done, NULL), SM_OK);	/* reads the withdrawal */
	assert_false(done);
	assert_int_equal(tp_remote_region_count(p.c.s), 1);	/* kept for s0's copy */
	assert_int_equal(tp_irecv(p.c.r, p.dst, SIZE, &fake.reg, &r1), SM_OK);
	assert_non_null(r1);
	starts = standin_engine.starts;
	assert_int_equal(tp_isend(p.c.s, p.src, SIZE, p.sreg, &s1), SM_ERR_REMOTE);
	assert_null(s1);
	assert_non_null(strstr(sm_last_error(), "already withdrew"));
	assert_int_equal(standin_engine.starts, starts);
	standin_engine.hold_dst = NULL;
	pair_close(&p);
}

/* A registration announced with a descriptor (cuMem memory) and mapped
 * in this process for a copy: the import consumes the descriptor, so
 * when the registration is withdrawn nothing closes that number again;
 * by then this process may have opened something else there. */
static void test_imported_fd_not_closed_twice(void **state)
{
	struct tp_req *sr = NULL, *rr = NULL;
	struct wire_region msg;
	struct shm_region fake;
	struct pair p;
	int pfd[2], n = -1, mine;
	double end;

	(void)state;
	sr = inprocess_first_send(&p, 23, 0);
	end = now() + DEADLINE_S;
	assert_int_equal(complete_both(sr, p.rr, end), SIZE);

	assert_int_equal(pipe(pfd), 0);
	memset(&msg, 0, sizeof(msg));
	msg.magic = REGION_MAGIC;
	msg.op = REGION_ADD;
	msg.id = 9;
	msg.info.kind = SM_SHARE_POSIX_FD;
	msg.info.alloc_size = SIZE;
	msg.info.addr = (uint64_t)(uintptr_t)p.dst;
	assert_int_equal(sm_send_some(p.c.r->fd, &msg, sizeof(msg), pfd[1]), (ssize_t)sizeof(msg));
	close(pfd[1]);
	assert_int_equal(remote_drain(shm_of(p.c.s)), SM_OK);
	for (unsigned i = 0; i < shm_of(p.c.s)->nremote; i++)
		if (shm_of(p.c.s)->remote[i].id == 9)
			n = shm_of(p.c.s)->remote[i].alloc->fd;
	assert_true(n >= 0);

	fake_region(&fake, &p, 9);
	memset(p.dst, 0, SIZE);
	assert_int_equal(tp_irecv(p.c.r, p.dst, SIZE, &fake.reg, &rr), SM_OK);
	assert_non_null(rr);
	sr = isend_when_posted(p.c.s, p.src, SIZE, p.sreg, end);
	wait_done(sr, end);
	assert_int_equal(p.dst[0], 0x5a);
	/* The descriptor went with the import: this process reuses the number. */
	mine = open("/dev/null", O_RDONLY | O_CLOEXEC);
	assert_true(mine >= 0);
	assert_int_equal(dup2(mine, n), n);
	msg.op = REGION_DEL;
	assert_int_equal(sm_send_some(p.c.r->fd, &msg, sizeof(msg), -1), (ssize_t)sizeof(msg));
	assert_int_equal(remote_drain(shm_of(p.c.s)), SM_OK);
	assert_int_equal(tp_remote_region_count(p.c.s), 1);
	assert_true(fcntl(n, F_GETFD) >= 0);
	close(n);
	close(mine);
	close(pfd[0]);
	pair_close(&p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_shm_direct_copy_times_out),
		cmocka_unit_test(test_tcp_bounce_copy_times_out),
		cmocka_unit_test(test_tcp_bounce_kept_at_close),
		cmocka_unit_test(test_shm_staged_copy_out_times_out),
		cmocka_unit_test(test_shm_copy_start_times_out),
		cmocka_unit_test(test_tcp_bounce_copy_start_times_out),
		cmocka_unit_test(test_start_clock_restarts_after_a_gap),
		cmocka_unit_test(test_gap_in_asks_restarts_the_clock),
		cmocka_unit_test(test_slow_asks_still_time_out),
		cmocka_unit_test(test_slow_but_healthy_never_times_out),
		cmocka_unit_test(test_pool_receive_outlives_sender),
		cmocka_unit_test(test_withdrawal_waits_for_queued_copy),
		cmocka_unit_test(test_start_clock_is_per_message),
		cmocka_unit_test(test_withdrawal_waits_for_every_queued_copy),
		cmocka_unit_test(test_withdrawal_of_idle_region_not_held_by_another),
		cmocka_unit_test(test_receive_into_withdrawn_region_fails),
		cmocka_unit_test(test_imported_fd_not_closed_twice),
	};

	int failed = cmocka_run_group_tests(tests, NULL, NULL);

	standin_engine_reset(0);	/* lets go of copies given up as stuck */
	return failed;
}
