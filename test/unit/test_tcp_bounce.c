/* GPU buffers over TCP through the bounce slots (transport/tcp_bounce.c),
 * on real sockets, with the copy engine's stand-in (engine_standin.c) in
 * place of the GPU: copies land late, out of a small event pool, or are
 * refused, and every byte must still arrive in order and whole. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "engine_standin.h"
#include "tcp.h"
#include "symmem.h"
#include "tp_pair.h"
#include "transport.h"

#define INFLIGHT 8			/* messages in flight each way */
#define MAX_MSG (5u << 20)		/* more than the four 1 MiB slots */
#define MESSAGES 200
#define DEADLINE_S 30.0

/* A pair for "GPU" buffers: it takes the (stand-in) engine, so bounce slots. */
static const struct tp_pair_opts gpu_tcp = { .backend = TP_BACKEND_TCP, .gpu = 1 };

static uint8_t pattern(size_t byte, int msg)
{
	return (uint8_t)(byte * 7 + (size_t)msg * 13 + 1);
}

/* Sizes that cross the slots' edges, zero included. */
static size_t message_size(unsigned *seed)
{
	switch (rand_r(seed) % 6) {
	case 0: return 0;
	case 1: return (size_t)(rand_r(seed) % 5000);
	case 2: return 1u << 20;
	case 3: return (1u << 20) + 1;
	case 4: return 4u << 20;
	default: return (size_t)rand_r(seed) % MAX_MSG;
	}
}

struct side {
	struct tp_comm *comm;
	uint8_t *buf[INFLIGHT];
	struct tp_region *gpu[INFLIGHT];	/* "GPU" registration of each buffer */
	struct tp_req *req[INFLIGHT];
	int posted, done;
};

static void side_open(struct side *d, struct tp_comm *c)
{
	memset(d, 0, sizeof(*d));
	d->comm = c;
	for (int i = 0; i < INFLIGHT; i++) {
		d->buf[i] = malloc(MAX_MSG);
		assert_non_null(d->buf[i]);
		assert_int_equal(tp_register(c, d->buf[i], MAX_MSG, TP_MEM_CUDA, &d->gpu[i]), SM_OK);
	}
}

static void side_close(struct side *d)
{
	for (int i = 0; i < INFLIGHT; i++) {
		tp_deregister(d->comm, d->gpu[i]);
		free(d->buf[i]);
	}
	tp_close(d->comm);
}

/* On a new pair, the pattern of a message of `size` in the sender's first
 * buffer and a receive of `cap` posted in the receiver's first buffer
 * (poisoned); `second`, unless NULL, gets a second receive posted. */
static void post_receives(struct tp_pair *c, struct side *s, struct side *r, size_t size,
			  size_t cap, struct tp_req **second)
{
	tp_pair_open(c, &gpu_tcp);
	side_open(s, c->s);
	side_open(r, c->r);
	for (size_t j = 0; j < size; j++)
		s->buf[0][j] = pattern(j, 0);
	memset(r->buf[0], 0xee, MAX_MSG);
	assert_int_equal(tp_irecv(c->r, r->buf[0], cap, r->gpu[0], &r->req[0]), SM_OK);
	if (second)
		assert_int_equal(tp_irecv(c->r, r->buf[1], MAX_MSG, r->gpu[1], second), SM_OK);
}

/* As post_receives(), then that message sent from the sender's "GPU"
 * buffer.  Returns the deadline the caller goes on waiting under. */
static double post_one_message(struct tp_pair *c, struct side *s, struct side *r, size_t size,
			       size_t cap, struct tp_req **second)
{
	double end;

	post_receives(c, s, r, size, cap, second);
	end = now() + DEADLINE_S;
	s->req[0] = isend_when_posted(c->s, s->buf[0], size, s->gpu[0], end);
	return end;
}

/* MESSAGES messages each way between GPU and host buffers at random, with
 * the engine as the stand-in is set; every byte checked, and the source
 * overwritten as soon as its send is done (the slots must hold copies). */
static void run_messages(unsigned seed)
{
	struct tp_pair c;
	struct side s, r;
	size_t sizes[MESSAGES], caps[MESSAGES];
	double end;

	for (int m = 0; m < MESSAGES; m++)
		sizes[m] = message_size(&seed);
	tp_pair_open(&c, &gpu_tcp);
	side_open(&s, c.s);
	side_open(&r, c.r);
	end = now() + DEADLINE_S;
	while (s.done < MESSAGES || r.done < MESSAGES) {
		if (now() > end)
			fail_msg("no progress: %d of %d sends and %d receives done (pool %d, "
				 "%d copies in flight)", s.done, MESSAGES, r.done,
				 standin_engine.pool, standin_engine.out);
		if (r.posted < MESSAGES && r.posted - r.done < INFLIGHT) {
			int i = r.posted % INFLIGHT, gpu = rand_r(&seed) % 2;
			size_t cap = sizes[r.posted] + (size_t)(rand_r(&seed) % 2) * 1000;

			caps[r.posted] = cap < MAX_MSG ? cap : MAX_MSG;
			memset(r.buf[i], 0xee, MAX_MSG);
			assert_int_equal(tp_irecv(c.r, r.buf[i], caps[r.posted],
						  gpu ? r.gpu[i] : NULL, &r.req[i]), SM_OK);
			r.posted++;
		}
		if (s.posted < MESSAGES && s.posted - s.done < INFLIGHT) {
			int i = s.posted % INFLIGHT, gpu = rand_r(&seed) % 2;

			for (size_t j = 0; j < sizes[s.posted]; j++)
				s.buf[i][j] = pattern(j, s.posted);
			assert_int_equal(tp_isend(c.s, s.buf[i], sizes[s.posted],
						  gpu ? s.gpu[i] : NULL, &s.req[i]), SM_OK);
			if (s.req[i])
				s.posted++;
		}
		if (s.done < s.posted) {
			int i = s.done % INFLIGHT, done = 0;

			assert_int_equal(tp_test(s.req[i], &done, NULL), SM_OK);
			if (done) {
				memset(s.buf[i], 0xab, sizes[s.done]);
				s.done++;
			}
		}
		if (r.done < r.posted) {
			int i = r.done % INFLIGHT, done = 0;
			size_t got = 0;

			assert_int_equal(tp_test(r.req[i], &done, &got), SM_OK);
			if (done) {
				assert_int_equal(got, sizes[r.done]);
				for (size_t j = 0; j < got; j++)
					if (r.buf[i][j] != pattern(j, r.done))
						fail_msg("message %d byte %zu of %zu wrong", r.done, j,
							 got);
				/* Nothing lands past the bytes sent, even where the
				 * posted receive is larger. */
				for (size_t j = got; j < MAX_MSG && j < caps[r.done] + 65536; j++)
					if (r.buf[i][j] != 0xee)
						fail_msg("message %d: byte %zu written past the %zu "
							 "bytes sent", r.done, j, got);
				r.done++;
			}
		}
	}
	side_close(&s);
	side_close(&r);
	assert_int_equal(standin_engine.out, 0);	/* every event back */
	assert_true(standin_engine.starts > 0);		/* the slots were used */
	assert_int_equal(standin_engine.ranges, 0);	/* the helper let go of all */
}

static void test_messages_land_whole(void **state)
{
	(void)state;
	standin_engine_reset(1);
	standin_engine.lag = 5;
	standin_engine.refuse_pct = 20;
	run_messages(1);
}

/* Slots must give their events back as they land, not as they leave in
 * order, and start their copies in order: with one or two events for the
 * whole process a slot used to wait for an event a later slot of its own
 * held. */
static void test_tiny_event_pool(void **state)
{
	(void)state;
	for (unsigned seed = 1; seed <= 3; seed++) {
		standin_engine_reset(seed);
		standin_engine.pool = 1 + (int)(seed % 2);
		standin_engine.lag = 5;
		standin_engine.refuse_pct = 30;
		run_messages(seed);
	}
}

/* A send's copies land in any order: one that landed gives its event back
 * at once, though an older slot's copy is still in flight.  With two
 * events and the first copy held, the third copy must still start. */
static void test_landed_copy_frees_its_event(void **state)
{
	struct tp_pair c;
	struct side s, r;
	size_t size = 3u << 20;
	double end;
	int done = 0;

	(void)state;
	standin_engine_reset(3);
	standin_engine.pool = 2;
	standin_engine.hold_nth = 1;
	end = post_one_message(&c, &s, &r, size, MAX_MSG, NULL);
	for (int i = 0; i < 100 && standin_engine.starts < 3; i++)
		assert_int_equal(tp_test(s.req[0], &done, NULL), SM_OK);
	assert_int_equal(standin_engine.starts, 3);
	assert_false(done);
	standin_engine.hold_nth = 0;
	complete_both(s.req[0], r.req[0], end);
	for (size_t j = 0; j < size; j++)
		if (r.buf[0][j] != pattern(j, 0))
			fail_msg("byte %zu of %zu wrong", j, size);
	side_close(&s);
	side_close(&r);
	assert_int_equal(standin_engine.out, 0);
}

/* After the sender hung up: the receive into r's first buffer completes
 * with its `size` bytes and nothing past them, the next receive (`second`)
 * fails with a remote error, and nothing hangs; closes r. */
static void finish_after_hangup(struct side *r, struct tp_req *second, size_t size, double end)
{
	assert_int_equal(wait_done(r->req[0], end), size);
	for (size_t j = 0; j < size; j++)
		if (r->buf[0][j] != pattern(j, 0))
			fail_msg("byte %zu of %zu wrong", j, size);
	if (size < MAX_MSG)
		assert_int_equal(r->buf[0][size], 0xee);
	assert_int_equal(wait_failure(second, end), SM_ERR_REMOTE);
	side_close(r);
	assert_int_equal(standin_engine.out, 0);
}

/* The sender sends one message of `size` and hangs up while the
 * receiver's copies of it are held and a second receive is posted; two
 * more are posted after the hang-up.  The first receive completes whole
 * once its copies land, the second fails, nothing hangs.  Past four slots
 * the message's last bytes are still in the socket at the hang-up. */
static void hangup_behind(size_t size)
{
	struct tp_pair c;
	struct side s, r;
	struct tp_req *second, *late;
	double end;
	int done = 0;

	standin_engine_reset(7);
	end = post_one_message(&c, &s, &r, size, MAX_MSG, &second);
	/* All on the wire, none copied up. */
	standin_engine.hold_dst = r.buf[0];
	standin_engine.hold_len = MAX_MSG;
	while (!done && now() < end) {
		int landed = 0;

		assert_int_equal(tp_test(s.req[0], &done, NULL), SM_OK);
		assert_int_equal(tp_test(r.req[0], &landed, NULL), SM_OK);
		assert_false(landed);
	}
	assert_true(done);
	side_close(&s);

	/* Past the liveness check's interval: the hang-up is seen. */
	done = 0;
	for (double t = now() + 0.2; now() < t;)
		assert_int_equal(tp_test(r.req[0], &done, NULL), SM_OK);
	assert_false(done);
	for (int i = 2; i < 4; i++)
		assert_int_equal(tp_irecv(c.r, r.buf[i], MAX_MSG, r.gpu[i], &late), SM_OK);
	standin_engine.hold_dst = NULL;
	finish_after_hangup(&r, second, size, end);
}

static void test_sender_hangup_leaves_earlier_receive(void **state)
{
	(void)state;
	hangup_behind((3u << 20) + 5);
}

static void test_sender_hangup_with_bytes_in_socket(void **state)
{
	(void)state;
	hangup_behind((4u << 20) + 65536);
}

/* One message of `size` from src (registered as `sreg`, NULL: host
 * memory) into dst (`rreg`): every byte, nothing past it. */
static void send_and_check(struct tp_comm *sc, struct tp_comm *rc, uint8_t *src, uint8_t *dst,
			   struct tp_region *sreg, struct tp_region *rreg, size_t size, int msg)
{
	struct tp_req *sr = NULL, *rr = NULL;
	double end = now() + DEADLINE_S;

	for (size_t j = 0; j < size; j++)
		src[j] = pattern(j, msg);
	memset(dst, 0xee, size + 1);
	assert_int_equal(tp_irecv(rc, dst, size, rreg, &rr), SM_OK);
	sr = isend_when_posted(sc, src, size, sreg, end);
	assert_int_equal(complete_both(sr, rr, end), size);
	for (size_t j = 0; j < size; j++)
		assert_int_equal(dst[j], pattern(j, msg));
	assert_int_equal(dst[size], 0xee);
}

/* A TCP connection of a GPU process takes the copy engine (and with it the
 * copy helper, its CUDA context and the pinned slots) only at its first GPU
 * registration: a job between hosts whose NCCL stages in host memory never
 * makes one and pays for none of it. */
static void test_engine_waits_for_gpu_memory(void **state)
{
	struct tp_pair c;
	struct tp_region *sgpu, *rgpu;
	uint8_t *src = malloc(MAX_MSG), *dst = malloc(MAX_MSG + 1);

	(void)state;
	standin_engine_reset(1);
	tp_pair_open(&c, &gpu_tcp);
	send_and_check(c.s, c.r, src, dst, NULL, NULL, 3000, 0);
	send_and_check(c.s, c.r, src, dst, NULL, NULL, 2u << 20, 1);
	assert_int_equal(standin_engine.refs, 0);
	assert_null(tcp_of(c.s)->bounce);
	assert_null(tcp_of(c.r)->bounce);

	/* The receiver's first GPU registration takes it on that side only. */
	assert_int_equal(tp_register(c.r, dst, MAX_MSG + 1, TP_MEM_CUDA, &rgpu), SM_OK);
	assert_non_null(tcp_of(c.r)->bounce);
	assert_null(tcp_of(c.s)->bounce);
	send_and_check(c.s, c.r, src, dst, NULL, rgpu, (1u << 20) + 5, 2);
	assert_true(standin_engine.starts > 0);	/* it came through the slots */

	assert_int_equal(tp_register(c.s, src, MAX_MSG, TP_MEM_CUDA, &sgpu), SM_OK);
	assert_non_null(tcp_of(c.s)->bounce);
	send_and_check(c.s, c.r, src, dst, sgpu, rgpu, 4000, 3);
	send_and_check(c.s, c.r, src, dst, sgpu, NULL, 5000, 4);
	tp_deregister(c.s, sgpu);
	tp_deregister(c.r, rgpu);
	tp_pair_close(&c);
	assert_int_equal(standin_engine.refs, 0);	/* every reference given back */
	assert_int_equal(standin_engine.out, 0);
	free(src);
	free(dst);
}

/* With a copy helper, the slots' copies to and from registered "GPU"
 * buffers run there: in NCCL's process a blocked driver lock hangs
 * CUDA-graph replays. */
static void test_helper_runs_the_copies(void **state)
{
	(void)state;
	for (unsigned seed = 4; seed <= 5; seed++) {
		standin_engine_reset(seed);
		standin_engine.helper = 1;
		standin_engine.lag = 5;
		standin_engine.refuse_pct = 20;
		standin_engine.pool = seed == 5 ? 1 : 1 << 20;
		run_messages(seed);
		assert_true(standin_engine.range_starts > 0);
	}
}

/* One GPU-to-GPU message of `size` into a posted receive of `cap`: every
 * byte lands, none past the message; the helper makes `helper` of its
 * copies, NCCL's process `local` (both counted by the connections). */
static void one_message(size_t size, size_t cap, int helper, int local)
{
	struct tp_pair c;
	struct tp_stats ss, rs;
	struct side s, r;
	double end;

	standin_engine_reset(6);
	standin_engine.helper = 1;
	end = post_one_message(&c, &s, &r, size, cap, NULL);
	assert_int_equal(complete_both(s.req[0], r.req[0], end), size);
	for (size_t j = 0; j < size; j++)
		assert_int_equal(r.buf[0][j], pattern(j, 0));
	for (size_t j = size; j < MAX_MSG; j++)
		assert_int_equal(r.buf[0][j], 0xee);
	tp_get_stats(c.s, &ss);
	tp_get_stats(c.r, &rs);
	side_close(&s);
	side_close(&r);
	assert_int_equal(standin_engine.ranges, 0);
	assert_int_equal(standin_engine.range_starts, helper);
	assert_int_equal(ss.slot_copies + rs.slot_copies, helper + local);
	assert_int_equal(ss.slot_local + rs.slot_local, local);
}

/* Every copy of a message between buffers the helper knows goes there,
 * short ones and a message's tail included, and nothing is written past
 * the message into a larger posted receive. */
static void test_every_copy_in_the_helper(void **state)
{
	(void)state;
	one_message(100, 65536, 2, 0);
	one_message(1, 1, 2, 0);
	one_message((1u << 20) + 10, (1u << 20) + 40000, 4, 0);
	one_message((4u << 20) + 1, MAX_MSG, 10, 0);
}

/* The receiver's bounce slots as the stall report shows them. */
static void slots_in_use(struct tp_comm *rc, char *buf, size_t len)
{
	bounce_describe(rc, buf, len);
}

/* A receive slot still taking bytes waits on the sender, not on a copy:
 * a sender that stops half way through a slot for longer than the copy
 * limit (NCCL's proxy busy elsewhere) fails nothing, and the message
 * completes whole once it goes on.  Only a slot that holds all it will is
 * timed (timed from the connection's first wait, a slow sender failed a
 * healthy receive as a stuck copy). */
static void test_slow_sender_is_not_a_stuck_copy(void **state)
{
	const double limit_s = 0.3;
	const struct tp_pair_opts limited = { .backend = TP_BACKEND_TCP, .gpu = 1,
					      .copy_limit_s = limit_s };
	size_t size = 24u << 20;	/* more than loopback's socket buffers */
	uint8_t *src = malloc(size), *dst = malloc(size);
	struct tp_pair c;
	struct tp_region *rreg;
	struct tp_req *sr = NULL, *rr;
	char slots[96];
	double end, t;
	int done = 0;

	(void)state;
	assert_non_null(src);
	assert_non_null(dst);
	standin_engine_reset(8);
	tp_pair_open(&c, &limited);
	assert_int_equal(tp_register(c.r, dst, size, TP_MEM_CUDA, &rreg), SM_OK);
	for (size_t j = 0; j < size; j++)
		src[j] = pattern(j, 0);
	memset(dst, 0xee, size);
	assert_int_equal(tp_irecv(c.r, dst, size, rreg, &rr), SM_OK);
	end = now() + DEADLINE_S;
	/* Host memory: what the socket takes in the isend's one write leaves
	 * now, the rest when the sender is tested again. */
	sr = isend_when_posted(c.s, src, size, NULL, end);
	for (t = now() + 3 * limit_s; now() < t;) {
		assert_int_equal(tp_test(rr, &done, NULL), SM_OK);
		assert_false(done);
	}
	/* The socket is drained and the full slots' copies landed: one slot
	 * holds the bytes of a slot begun, waiting for the rest. */
	slots_in_use(c.r, slots, sizeof(slots));
	assert_string_equal(slots, "bounce slots in use 1 of 4 (0 copying)");
	assert_int_equal(complete_both(sr, rr, end), size);
	for (size_t j = 0; j < size; j++)
		if (dst[j] != pattern(j, 0))
			fail_msg("byte %zu of %zu wrong", j, size);
	tp_deregister(c.r, rreg);
	tp_pair_close(&c);
	assert_int_equal(standin_engine.out, 0);
	free(src);
	free(dst);
}

/* A slot is taken for bytes, not for a header alone: while a GPU send's
 * first copy is held, its header arrives and nothing more, and the
 * receiver holds no slot (the stall report counts none in use). */
static void test_no_slot_without_bytes(void **state)
{
	struct tp_pair c;
	struct side s, r;
	char slots[96];
	double end, t;
	int done = 0;

	(void)state;
	standin_engine_reset(10);
	standin_engine.hold_nth = 1;	/* the sender's only copy */
	end = post_one_message(&c, &s, &r, 100, MAX_MSG, NULL);
	for (t = now() + 0.05; now() < t;) {
		assert_int_equal(tp_test(s.req[0], &done, NULL), SM_OK);
		assert_false(done);
		assert_int_equal(tp_test(r.req[0], &done, NULL), SM_OK);
		assert_false(done);
	}
	assert_true(r.req[0]->have_size);	/* the header came */
	slots_in_use(c.r, slots, sizeof(slots));
	assert_string_equal(slots, "bounce slots in use 0 of 4 (0 copying)");
	standin_engine.hold_nth = 0;
	assert_int_equal(complete_both(s.req[0], r.req[0], end), 100);
	for (size_t j = 0; j < 100; j++)
		assert_int_equal(r.buf[0][j], pattern(j, 0));
	side_close(&s);
	side_close(&r);
	assert_int_equal(standin_engine.out, 0);
}

/* A sender that hangs up after its last message leaves the receive whose
 * bytes all arrived to complete, though no copy slot is free for it yet
 * (its slot holds all its bytes, its copy not started): the hang-up is
 * not the receive's failure while the copy can still start.  The receive
 * posted after it fails. */
static void test_sender_hangup_leaves_receive_waiting_for_an_event(void **state)
{
	struct tp_pair c;
	struct side s, r;
	struct tp_req *second;
	size_t size = 1000;
	double end;
	int done = 0;

	(void)state;
	standin_engine_reset(9);
	post_receives(&c, &s, &r, size, MAX_MSG, &second);
	standin_engine.refuse_pct = 100;	/* no copy starts */
	end = now() + DEADLINE_S;
	/* From host memory: the sender needs no copy. */
	s.req[0] = isend_when_posted(c.s, s.buf[0], size, NULL, end);
	wait_done(s.req[0], end);
	while (!r.req[0]->wire_done && now() < end) {
		assert_int_equal(tp_test(r.req[0], &done, NULL), SM_OK);
		assert_false(done);
	}
	assert_true(r.req[0]->wire_done);
	side_close(&s);

	/* Past the liveness check's interval: the hang-up is seen. */
	for (double t = now() + 0.2; now() < t;) {
		assert_int_equal(tp_test(r.req[0], &done, NULL), SM_OK);
		assert_false(done);
	}
	assert_int_equal(standin_engine.starts, 0);
	standin_engine.refuse_pct = 0;
	finish_after_hangup(&r, second, size, end);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_messages_land_whole),
		cmocka_unit_test(test_engine_waits_for_gpu_memory),
		cmocka_unit_test(test_tiny_event_pool),
		cmocka_unit_test(test_landed_copy_frees_its_event),
		cmocka_unit_test(test_sender_hangup_leaves_earlier_receive),
		cmocka_unit_test(test_sender_hangup_with_bytes_in_socket),
		cmocka_unit_test(test_helper_runs_the_copies),
		cmocka_unit_test(test_every_copy_in_the_helper),
		cmocka_unit_test(test_slow_sender_is_not_a_stuck_copy),
		cmocka_unit_test(test_no_slot_without_bytes),
		cmocka_unit_test(test_sender_hangup_leaves_receive_waiting_for_an_event),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
