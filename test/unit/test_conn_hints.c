/* NCCL's traffic hints per thread, and which device memory on a ring
 * connection counts as a user buffer (plugin/conn_hints.c). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
#include <pthread.h>

#include "conn_hints.h"

/* NCCL's hints (net.cc, populateCommNetAttrs): a point-to-point
 * connection carries Send, Recv, AlltoAll, Scatter and Gather (ncclFunc_t
 * 6-10), a ring or tree connection "undefined" (all ones). */
#define OP_P2P ((1u << 6) | (1u << 7) | (1u << 8) | (1u << 9) | (1u << 10))
#define OP_UNDEFINED 0xffffffffu
#define OP_ALL_GATHER (1u << 2)

static void test_kinds(void **state)
{
	(void)state;
	assert_int_equal(hints_take(), CONN_UNHINTED);
	hints_note(OP_P2P);
	assert_int_equal(hints_take(), CONN_P2P);
	assert_int_equal(hints_take(), CONN_UNHINTED);	/* used up by the first connection */
	hints_note(OP_UNDEFINED);
	assert_int_equal(hints_take(), CONN_RING);
	hints_note(1u << 6);				/* one send: still point-to-point */
	assert_int_equal(hints_take(), CONN_P2P);
	hints_note(OP_ALL_GATHER);			/* a collective's transfer hint */
	assert_int_equal(hints_take(), CONN_RING);
	hints_note(OP_P2P | OP_ALL_GATHER);
	assert_int_equal(hints_take(), CONN_RING);
	hints_note(0);					/* no operation at all: no hint */
	assert_int_equal(hints_take(), CONN_UNHINTED);
	hints_note(OP_P2P);
	hints_note(OP_UNDEFINED);			/* the last hint before the connection */
	assert_int_equal(hints_take(), CONN_RING);
	assert_string_equal(conn_kind_name(CONN_P2P), "send/recv");
	assert_string_equal(conn_kind_name(CONN_RING), "ring/tree");
	assert_string_equal(conn_kind_name(CONN_UNHINTED), "unhinted");
}

static void *p2p_thread(void *arg)
{
	int *kind = arg;

	hints_note(OP_P2P);
	*kind = hints_take();
	return NULL;
}

/* NCCL's progress thread hints each transfer while its service thread
 * connects: one thread's hint never names another's connection. */
static void test_hints_are_per_thread(void **state)
{
	pthread_t t;
	int kind = -1;

	(void)state;
	hints_note(OP_UNDEFINED);
	assert_int_equal(pthread_create(&t, NULL, p2p_thread, &kind), 0);
	assert_int_equal(pthread_join(t, NULL), 0);
	assert_int_equal(kind, CONN_P2P);
	assert_int_equal(hints_take(), CONN_RING);
	hints_note(OP_P2P);
	kind = -1;
	assert_int_equal(pthread_create(&t, NULL, p2p_thread, &kind), 0);
	assert_int_equal(pthread_join(t, NULL), 0);
	assert_int_equal(hints_take(), CONN_P2P);
}

static void test_staging_then_user_buffers(void **state)
{
	struct staging_alloc s = { 0, 0 };

	(void)state;
	assert_int_equal(staging_is_user_buffer(&s, 1, 0x10000000, 0x11400000), 0);
	assert_int_equal(staging_is_user_buffer(&s, 1, 0x10000000, 0x11400000), 0);
	/* Set up: anything registered now may be NCCL's own, never declined. */
	assert_int_equal(staging_is_user_buffer(&s, 1, 0x30000000, 0x31000000), 0);
	/* Later: the staging allocation again, or a user buffer. */
	assert_int_equal(staging_is_user_buffer(&s, 0, 0x10000000, 0x11400000), 0);
	assert_int_equal(staging_is_user_buffer(&s, 0, 0x20000000, 0x60000000), 1);
	assert_int_equal(staging_is_user_buffer(&s, 0, 0x10000000, 0x12000000), 1);
	assert_int_equal(staging_is_user_buffer(&s, 0, 0x0f000000, 0x11400000), 1);
	/* Neither a user buffer nor a late registration moves it. */
	assert_int_equal(staging_is_user_buffer(&s, 0, 0x10000000, 0x11400000), 0);
	assert_true(s.lo == 0x10000000 && s.hi == 0x11400000);
}

/* The first device memory seen, set up or not, is the staging one. */
static void test_first_allocation_is_staging(void **state)
{
	struct staging_alloc s = { 0, 0 };

	(void)state;
	assert_int_equal(staging_is_user_buffer(&s, 0, 0x40000000, 0x40200000), 0);
	assert_int_equal(staging_is_user_buffer(&s, 0, 0x40000000, 0x40200000), 0);
	assert_int_equal(staging_is_user_buffer(&s, 0, 0x50000000, 0x50200000), 1);
}

static void *other_setup_thread(void *arg)
{
	int *seen = arg;

	seen[0] = conn_in_setup(&seen[1]);	/* the main thread's comm: not here */
	conn_setup_begin(&seen[2]);
	seen[3] = conn_in_setup(&seen[2]);
	return NULL;
}

/* Setup belongs to the comm the thread made last, until the thread
 * enters another call that makes connections; other threads keep theirs. */
static void test_setup_per_thread(void **state)
{
	int seen[4] = { -1, 0, 0, -1 };
	pthread_t t;
	int a = 0, b = 0;

	(void)state;
	assert_false(conn_in_setup(&a));
	assert_false(conn_in_setup(NULL));
	conn_setup_begin(&a);
	assert_true(conn_in_setup(&a));
	assert_false(conn_in_setup(&b));
	conn_setup_begin(&seen[1]);
	assert_int_equal(pthread_create(&t, NULL, other_setup_thread, seen), 0);
	assert_int_equal(pthread_join(t, NULL), 0);
	assert_int_equal(seen[0], 0);
	assert_int_equal(seen[3], 1);
	assert_true(conn_in_setup(&seen[1]));
	assert_false(conn_in_setup(&seen[2]));
	conn_setup_end();
	assert_false(conn_in_setup(&seen[1]));
	conn_setup_begin(&b);
	assert_false(conn_in_setup(&a));
	conn_setup_end();
}

/* The whole decision regMr makes with device memory. */
static void test_declines(void **state)
{
	struct staging_alloc s = { 0, 0 };
	struct reg_case ring = { .kind = CONN_RING, .p2p_off = 1, .lo = 0x10000000,
				 .hi = 0x11400000 };
	struct reg_case r;

	(void)state;
	assert_true(conn_may_decline(&ring));
	assert_int_equal(conn_declines(&s, &ring), 0);		/* staging */
	r = ring;
	r.lo = 0x20000000;
	r.hi = 0x60000000;
	assert_int_equal(conn_declines(&s, &r), 1);		/* a user buffer */
	r.in_setup = 1;
	assert_int_equal(conn_declines(&s, &r), 0);		/* maybe NCCL's own */
	r.in_setup = 0;
	r.keep_rings = 1;
	assert_int_equal(conn_declines(&s, &r), 0);		/* NCCL_SYMMEM_COLL_REGISTER=1 */
	r.keep_rings = 0;
	r.p2p_off = 0;
	assert_int_equal(conn_declines(&s, &r), 0);		/* P2P on: NCCL does not cap */
	r.p2p_off = 1;
	r.kind = CONN_P2P;
	assert_int_equal(conn_declines(&s, &r), 0);		/* send/recv: zero-copy */
	r.kind = CONN_UNHINTED;
	assert_int_equal(conn_declines(&s, &r), 0);		/* NCCL gave no hint */
	r.kind = CONN_RING;
	assert_int_equal(conn_declines(&s, &r), 1);
	assert_int_equal(conn_declines(&s, &ring), 0);		/* staging again */
}

/* Where nothing is declined, nothing is recorded either: the staging
 * allocation is the first one a declining connection saw. */
static void test_declines_records_only_rings(void **state)
{
	struct staging_alloc s = { 0, 0 };
	struct reg_case p2p = { .kind = CONN_P2P, .p2p_off = 1, .lo = 0x1000, .hi = 0x2000 };

	(void)state;
	assert_false(conn_may_decline(&p2p));
	assert_int_equal(conn_declines(&s, &p2p), 0);
	assert_true(s.hi == 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_kinds),
		cmocka_unit_test(test_hints_are_per_thread),
		cmocka_unit_test(test_staging_then_user_buffers),
		cmocka_unit_test(test_first_allocation_is_staging),
		cmocka_unit_test(test_setup_per_thread),
		cmocka_unit_test(test_declines),
		cmocka_unit_test(test_declines_records_only_rings),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
