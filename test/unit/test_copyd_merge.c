/* The copy helper's waiting requests grouped into copies
 * (smfree/copyd_merge.c).  A wrong merge writes bytes a request never
 * asked for, or into the wrong buffer, so only exact continuations may
 * join: same two mappings, the next bytes on both sides.  The copies
 * themselves need a GPU (scripts/gpu_check.sh merge). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "copyd_proto.h"

#define MIB (1ull << 20)

static struct cd_queue q;

/* Request in `slot`: `len` bytes from src_id:src_off to dst_id:dst_off. */
static void add_to(uint32_t slot, uint32_t src_id, uint64_t src_off, uint32_t dst_id,
		   uint64_t dst_off, uint64_t len, uint32_t dst_key)
{
	struct cd_pending p = { .slot = slot, .src_id = src_id, .dst_id = dst_id,
				.dst_key = dst_key, .src_off = src_off, .dst_off = dst_off,
				.len = len };
	cd_queue_add(&q, &p);
}

/* Every destination one GPU away, unless a test says otherwise. */
static void add(uint32_t slot, uint32_t src_id, uint64_t src_off, uint32_t dst_id,
		uint64_t dst_off, uint64_t len)
{
	add_to(slot, src_id, src_off, dst_id, dst_off, len, 1);
}

/* A fresh queue merging up to `merge_max` holding one connection's first
 * two 2 MiB steps, back to back on both sides (slots 0 and 1). */
static void two_steps(uint64_t merge_max)
{
	cd_queue_init(&q, merge_max);
	add(0, 1, 0, 2, 0, 2 * MIB);
	add(1, 1, 2 * MIB, 2, 2 * MIB, 2 * MIB);
}

/* A copy's member slots, in order, into m[]; returns how many. */
static int members(const struct cd_group *g, uint32_t *m)
{
	int n = 0;

	for (uint32_t s = g->lead; s != CD_SLOTS; s = q.next[s])
		m[n++] = s;
	return n;
}

static void test_empty(void **state)
{
	(void)state;
	cd_queue_init(&q, 16 * MIB);
	assert_null(cd_queue_at(&q, 0));
	cd_queue_remove(&q, 0);	/* harmless */
	assert_null(cd_queue_at(&q, 0));
}

/* NCCL's steps 0..3 of one connection with another connection's step
 * between them: the four make one copy, the stranger its own, and copies
 * leave oldest first. */
static void test_consecutive_steps_join(void **state)
{
	const struct cd_group *g;
	uint32_t m[CD_MERGE_MAX];

	(void)state;
	cd_queue_init(&q, 16 * MIB);
	add(10, 1, 0, 2, 0, 2 * MIB);
	add(11, 3, 0, 4, 0, 2 * MIB);
	add(12, 1, 2 * MIB, 2, 2 * MIB, 2 * MIB);
	add(13, 1, 4 * MIB, 2, 4 * MIB, 2 * MIB);
	add(14, 1, 6 * MIB, 2, 6 * MIB, 1 * MIB);
	g = cd_queue_at(&q, 0);
	assert_non_null(g);
	assert_int_equal(members(g, m), 4);
	assert_int_equal(m[0], 10);
	assert_int_equal(m[1], 12);
	assert_int_equal(m[3], 14);
	assert_int_equal(g->len, 7 * MIB);
	assert_int_equal(g->src_off, 0);
	assert_int_equal(g->members, 4);
	cd_queue_remove(&q, 0);
	g = cd_queue_at(&q, 0);
	assert_non_null(g);
	assert_int_equal(g->lead, 11);
	assert_int_equal(members(g, m), 1);
	cd_queue_remove(&q, 0);
	assert_null(cd_queue_at(&q, 0));
}

/* Contiguous on one side only, in other mappings, or overlapping: never
 * joined. */
static void test_only_exact_continuations(void **state)
{
	(void)state;
	cd_queue_init(&q, 16 * MIB);
	add(0, 1, 0, 2, 0, 64);
	add(1, 1, 64, 2, 128, 32);	/* destination gap, and not a row: other length */
	add(2, 1, 640, 2, 64, 64);	/* source gap wider than CD_STRIDE_MAX rows */
	add(3, 9, 64, 2, 64, 64);	/* other source mapping */
	add(4, 1, 64, 9, 64, 64);	/* other destination mapping */
	add(5, 1, 32, 2, 32, 64);	/* overlaps the first */
	assert_int_equal(q.n, 6);
	for (int i = 0; i < 6; i++) {
		assert_int_equal(cd_queue_at(&q, 0)->lead, i);
		assert_int_equal(cd_queue_at(&q, 0)->len, i == 1 ? 32 : 64);
		cd_queue_remove(&q, 0);
	}
}

/* NCCL's shared send/recv buffers: the two connections of a channel to
 * two peers take alternate slots of the sender's pool, and each steps
 * every third slot of its receiver's.  Each connection's steps join as the
 * rows of one 2D copy, and a row out of step starts a new copy. */
static void test_strided_steps_join(void **state)
{
	const struct cd_group *g;
	uint32_t m[CD_MERGE_MAX];

	(void)state;
	cd_queue_init(&q, 16 * MIB);
	for (uint32_t i = 0; i < 4; i++) {
		add(2 * i, 1, 2 * MIB * (2 * i), 2, 2 * MIB * (3 * i), 2 * MIB);
		add(2 * i + 1, 1, 2 * MIB * (2 * i + 1), 3, 2 * MIB * (3 * i + 1), 2 * MIB);
	}
	assert_int_equal(q.n, 2);
	g = cd_queue_at(&q, 0);
	assert_int_equal(members(g, m), 4);
	assert_int_equal(m[3], 6);
	assert_int_equal(g->width, 2 * MIB);
	assert_int_equal(g->spitch, 4 * MIB);
	assert_int_equal(g->dpitch, 6 * MIB);
	assert_int_equal(g->len, 8 * MIB);
	assert_int_equal(cd_group_src_span(g), 3 * 4 * MIB + 2 * MIB);
	assert_int_equal(cd_group_dst_span(g), 3 * 6 * MIB + 2 * MIB);
	assert_int_equal(cd_queue_at(&q, 1)->lead, 1);
	assert_int_equal(cd_queue_at(&q, 1)->members, 4);

	add(8, 1, 2 * MIB * 9, 2, 2 * MIB * 12, 2 * MIB);	/* source one slot late */
	assert_int_equal(q.n, 3);
	add(9, 1, 2 * MIB * 8, 2, 2 * MIB * 12, MIB);		/* right place, half a row */
	assert_int_equal(q.n, 4);
}

/* Back-to-back copies stay plain (a strided request cannot join them), a
 * single request's rows may not overlap on either side, and a strided
 * copy cut at a phase's end leaves a rest a row on, which the next row
 * still joins. */
static void test_strided_rules_and_take(void **state)
{
	struct cd_group g;

	(void)state;
	two_steps(64 * MIB);
	add(2, 1, 8 * MIB, 2, 8 * MIB, 2 * MIB);	/* a stride after back-to-back */
	assert_int_equal(q.n, 2);
	assert_int_equal(cd_queue_at(&q, 0)->width, 0);
	assert_int_equal(cd_group_src_span(cd_queue_at(&q, 0)), 4 * MIB);
	add(3, 3, 0, 4, 0, 2 * MIB);
	add(4, 3, 4 * MIB, 4, MIB, 2 * MIB);		/* destination rows would overlap */
	assert_int_equal(q.n, 4);

	/* Rows of 256 MiB eight widths (2 GiB) apart: within the stride cap, past
	 * the pitch cap; four widths apart (1 GiB, the cap itself) they join. */
	cd_queue_init(&q, 1ull << 40);
	add(0, 1, 0, 2, 0, 256 * MIB);
	add(1, 1, 1024 * MIB + 1024 * MIB, 2, 2048 * MIB, 256 * MIB);
	assert_int_equal(q.n, 2);
	add(2, 1, 1024 * MIB, 2, 1024 * MIB, 256 * MIB);
	assert_int_equal(q.n, 2);
	assert_int_equal(cd_queue_at(&q, 0)->members, 2);
	assert_int_equal(cd_queue_at(&q, 0)->spitch, 1024 * MIB);

	cd_queue_init(&q, 64 * MIB);
	for (uint32_t i = 0; i < 4; i++)
		add(i, 1, 6 * MIB * i, 2, 4 * MIB * i, 2 * MIB);
	assert_int_equal(q.n, 1);
	assert_int_equal(cd_queue_take(&q, 0, 5 * MIB, &g), 0);
	assert_int_equal(g.members, 2);
	assert_int_equal(g.len, 4 * MIB);
	assert_int_equal(g.width, 2 * MIB);
	assert_int_equal(cd_group_src_span(&g), 8 * MIB);
	g = *cd_queue_at(&q, 0);
	assert_int_equal(g.lead, 2);
	assert_int_equal(g.src_off, 12 * MIB);
	assert_int_equal(g.dst_off, 8 * MIB);
	assert_int_equal(g.len, 4 * MIB);
	add(4, 1, 24 * MIB, 2, 16 * MIB, 2 * MIB);	/* the next row joins the rest */
	assert_int_equal(q.n, 1);
	assert_int_equal(cd_queue_at(&q, 0)->members, 3);
}

/* Merging stops at the size cap (the next request starts a copy of its
 * own), and never happens with a cap of 0. */
static void test_size_cap(void **state)
{
	(void)state;
	cd_queue_init(&q, 5 * MIB);
	add(0, 1, 0, 2, 0, 2 * MIB);
	add(1, 1, 2 * MIB, 2, 2 * MIB, 2 * MIB);
	add(2, 1, 4 * MIB, 2, 4 * MIB, 2 * MIB);
	assert_int_equal(q.n, 2);
	assert_int_equal(cd_queue_at(&q, 0)->len, 4 * MIB);

	cd_queue_init(&q, 0);
	add(0, 1, 0, 2, 0, 8);
	add(1, 1, 8, 2, 8, 8);
	assert_int_equal(q.n, 2);
}

/* At most CD_MERGE_MAX requests per copy. */
static void test_member_cap(void **state)
{
	(void)state;
	cd_queue_init(&q, 16 * MIB);
	for (uint32_t i = 0; i < CD_MERGE_MAX + 3; i++)
		add(i, 1, 8 * i, 2, 8 * i, 8);
	assert_int_equal(q.n, 2);
	assert_int_equal(cd_queue_at(&q, 0)->members, CD_MERGE_MAX);
	assert_int_equal(cd_queue_at(&q, 0)->len, 8 * CD_MERGE_MAX);
}

/* A request joins its connection's copy even with newer copies of other
 * connections after it, and the queue wraps around its array. */
static void test_joins_older_copy_and_wraps(void **state)
{
	uint32_t m[CD_MERGE_MAX];

	(void)state;
	cd_queue_init(&q, 16 * MIB);
	for (uint32_t i = 0; i < CD_SLOTS - 2; i++) {	/* move head near the end */
		add(i, 5, 1000 * i, 6, 1000 * i, 8);
		cd_queue_remove(&q, 0);
	}
	add(0, 1, 0, 2, 0, 16);
	add(1, 3, 0, 4, 0, 16);
	add(2, 7, 0, 8, 0, 16);
	add(3, 1, 16, 2, 16, 16);
	assert_int_equal(q.n, 3);
	assert_int_equal(members(cd_queue_at(&q, 0), m), 2);
	assert_int_equal(m[1], 3);
	cd_queue_remove(&q, 0);
	assert_int_equal(cd_queue_at(&q, 0)->lead, 1);
	cd_queue_remove(&q, 0);
	assert_int_equal(cd_queue_at(&q, 0)->lead, 2);
}

/* The phase's distance goes first, oldest first among its copies; with
 * none of that distance waiting, the oldest copy goes. */
static void test_pick_key(void **state)
{
	(void)state;
	cd_queue_init(&q, 0);			/* no merging: one copy per request */
	assert_int_equal(cd_queue_pick_key(&q, 1), -1);
	add_to(0, 1, 0, 10, 0, 16, 1);		/* next GPU */
	add_to(1, 1, 16, 20, 0, 16, 2);		/* two away */
	add_to(2, 1, 32, 20, 16, 16, 2);	/* two away again */
	add_to(3, 1, 48, 30, 0, 16, 3);
	assert_int_equal(cd_queue_pick_key(&q, 1), 0);
	assert_int_equal(cd_queue_pick_key(&q, 2), 1);	/* not slot 2: order kept */
	assert_int_equal(cd_queue_pick_key(&q, 3), 3);
	assert_int_equal(cd_queue_pick_key(&q, 0), 0);	/* none of it: the oldest */
}

/* Taking a copy from the middle keeps the others in order, and a later
 * request still joins the copy it continues. */
static void test_remove_middle(void **state)
{
	uint32_t m[CD_MERGE_MAX];

	(void)state;
	cd_queue_init(&q, 16 * MIB);
	add(0, 1, 0, 2, 0, 16);
	add(1, 3, 0, 4, 0, 16);
	add(2, 5, 0, 6, 0, 16);
	cd_queue_remove(&q, 1);
	assert_int_equal(q.n, 2);
	assert_int_equal(cd_queue_at(&q, 0)->lead, 0);
	assert_int_equal(cd_queue_at(&q, 1)->lead, 2);
	assert_null(cd_queue_at(&q, 2));
	add(3, 5, 16, 6, 16, 16);		/* continues slot 2's copy */
	assert_int_equal(q.n, 2);
	assert_int_equal(members(cd_queue_at(&q, 1), m), 2);
	assert_int_equal(m[1], 3);
	cd_queue_remove(&q, 5);			/* out of range: nothing happens */
	assert_int_equal(q.n, 2);
}

/* A copy cut at a phase's end: its first members up to the limit leave as
 * one copy, the rest waits in its place and starts where the front ends;
 * a later request still joins the rest. */
static void test_take_front(void **state)
{
	struct cd_group g;
	uint32_t m[CD_MERGE_MAX];

	(void)state;
	cd_queue_init(&q, 16 * MIB);
	add(0, 9, 0, 9, 0, 16);			/* an older copy ahead of it */
	for (uint32_t i = 0; i < 4; i++)	/* slots 1..4: 2 MiB steps */
		add(1 + i, 1, 2 * MIB * i, 2, 4 * MIB + 2 * MIB * i, 2 * MIB);
	assert_int_equal(cd_queue_take(&q, 1, 5 * MIB, &g), 0);
	assert_int_equal(g.lead, 1);
	assert_int_equal(g.last, 2);
	assert_int_equal(g.len, 4 * MIB);
	assert_int_equal(g.members, 2);
	assert_int_equal(g.src_off, 0);
	assert_int_equal(g.dst_off, 4 * MIB);
	assert_int_equal(members(&g, m), 2);	/* the front's chain ends at its last */
	assert_int_equal(q.n, 2);
	assert_int_equal(cd_queue_at(&q, 0)->lead, 0);
	g = *cd_queue_at(&q, 1);
	assert_int_equal(g.lead, 3);
	assert_int_equal(g.len, 4 * MIB);
	assert_int_equal(g.members, 2);
	assert_int_equal(g.src_off, 4 * MIB);
	assert_int_equal(g.dst_off, 8 * MIB);
	add(5, 1, 8 * MIB, 2, 12 * MIB, 2 * MIB);	/* continues the rest */
	assert_int_equal(members(cd_queue_at(&q, 1), m), 3);
	assert_int_equal(m[2], 5);
}

/* A limit below one member still takes that member; a limit that holds
 * the whole copy takes it out of the queue; a bad position takes nothing. */
static void test_take_bounds(void **state)
{
	struct cd_group g;

	(void)state;
	two_steps(16 * MIB);
	assert_int_equal(cd_queue_take(&q, 0, 1, &g), 0);
	assert_int_equal(g.members, 1);
	assert_int_equal(g.len, 2 * MIB);
	assert_int_equal(q.n, 1);
	assert_int_equal(cd_queue_take(&q, 1, UINT64_MAX, &g), -1);
	assert_int_equal(cd_queue_take(&q, -1, UINT64_MAX, &g), -1);
	assert_int_equal(q.n, 1);
	assert_int_equal(cd_queue_take(&q, 0, UINT64_MAX, &g), 0);
	assert_int_equal(g.lead, 1);
	assert_int_equal(g.len, 2 * MIB);
	assert_int_equal(q.n, 0);
}

/* Requests of different connections (different mappings) never merge,
 * but one batch call carries them: every copy waiting, in order, their
 * chains linked so ending the call ends each request once. */
static void test_batch_takes_other_connections(void **state)
{
	struct cd_group out[CD_BATCH_MAX];
	uint32_t m[CD_SLOTS];

	(void)state;
	cd_queue_init(&q, 16 * MIB);
	for (uint32_t c = 0; c < 4; c++)	/* four channels' buffers */
		add(c, 10 + c, 0, 20 + c, 0, 2 * MIB);
	add(4, 10, 2 * MIB, 20, 2 * MIB, 2 * MIB);	/* channel 0's next step joins */
	assert_int_equal(q.n, 4);
	assert_int_equal(cd_queue_take_batch(&q, 1, 16 * MIB, 16, out), 4);
	assert_int_equal(q.n, 0);
	assert_int_equal(out[0].members, 2);
	assert_int_equal(out[0].len, 4 * MIB);
	assert_int_equal(out[3].src_id, 13);
	assert_int_equal(members(&out[0], m), 5);
	assert_int_equal(m[0], 0);
	assert_int_equal(m[1], 4);
	assert_int_equal(m[2], 1);
	assert_int_equal(m[4], 3);
	assert_int_equal(cd_queue_take_batch(&q, 1, 16 * MIB, 16, out), 0);
}

/* A batch stops at its byte limit (a copy whose first request no longer
 * fits stays), at its copy count, and always takes something: a limit
 * below one request still takes that request. */
static void test_batch_limits(void **state)
{
	struct cd_group out[CD_BATCH_MAX];

	(void)state;
	cd_queue_init(&q, 16 * MIB);
	for (uint32_t c = 0; c < 5; c++)
		add(c, 10 + c, 0, 20 + c, 0, 4 * MIB);
	assert_int_equal(cd_queue_take_batch(&q, 1, 10 * MIB, 16, out), 2);
	assert_int_equal(q.n, 3);
	assert_int_equal(cd_queue_at(&q, 0)->lead, 2);
	assert_int_equal(cd_queue_take_batch(&q, 1, 64 * MIB, 2, out), 2);
	assert_int_equal(q.n, 1);
	assert_int_equal(cd_queue_take_batch(&q, 1, 0, 16, out), 1);
	assert_int_equal(out[0].lead, 4);
	assert_int_equal(q.n, 0);

	/* The first copy is cut to the limit; its rest waits as the oldest. */
	cd_queue_init(&q, 16 * MIB);
	for (uint32_t i = 0; i < 4; i++)
		add(i, 1, 2 * MIB * i, 2, 2 * MIB * i, 2 * MIB);
	add(4, 3, 0, 4, 0, MIB);
	assert_int_equal(cd_queue_take_batch(&q, 1, 5 * MIB, 16, out), 1);
	assert_int_equal(out[0].len, 4 * MIB);
	assert_int_equal(q.n, 2);
	assert_int_equal(cd_queue_at(&q, 0)->lead, 2);
}

/* A call is cut to the rest of its phase and to the merge size, and,
 * only while a phase orders the destinations, to CD_PHASE_CALL_MAX. */
static void test_call_limit(void **state)
{
	(void)state;
	assert_int_equal(cd_call_limit(0, UINT64_MAX, 64 * MIB), 64 * MIB);
	assert_int_equal(cd_call_limit(0, UINT64_MAX, 0), UINT64_MAX);
	assert_int_equal(cd_call_limit(2, UINT64_MAX, 64 * MIB), CD_PHASE_CALL_MAX);
	assert_int_equal(cd_call_limit(2, UINT64_MAX, 0), CD_PHASE_CALL_MAX);
	assert_int_equal(cd_call_limit(1, 5 * MIB, 64 * MIB), 5 * MIB);
	assert_int_equal(cd_call_limit(0, 5 * MIB, 64 * MIB), 5 * MIB);
	assert_int_equal(cd_call_limit(3, 40 * MIB, 8 * MIB), 8 * MIB);
	assert_true(CD_PHASE_CALL_MAX < 64 * MIB);
}

/* The phase's destination goes first, then the oldest of the others (no
 * engine idles for the schedule), as when copies are taken one by one. */
static void test_batch_key_order(void **state)
{
	struct cd_group out[CD_BATCH_MAX];

	(void)state;
	cd_queue_init(&q, 16 * MIB);
	add_to(0, 10, 0, 20, 0, MIB, 1);
	add_to(1, 11, 0, 21, 0, MIB, 2);
	add_to(2, 12, 0, 22, 0, MIB, 1);
	add_to(3, 13, 0, 23, 0, MIB, 2);
	assert_int_equal(cd_queue_take_batch(&q, 2, 16 * MIB, 16, out), 4);
	assert_int_equal(out[0].lead, 1);
	assert_int_equal(out[1].lead, 3);
	assert_int_equal(out[2].lead, 0);
	assert_int_equal(out[3].lead, 2);
}

/* Each row of a 2D copy is one copy of the call: a strided copy behind
 * others joins with the rows that fit the count and leaves the rest a
 * row on; a 2D copy first in line goes whole (as one 2D call). */
static void test_batch_counts_rows(void **state)
{
	struct cd_group out[CD_BATCH_MAX];
	const struct cd_group *g;

	(void)state;
	cd_queue_init(&q, 16 * MIB);
	add(0, 9, 0, 9, 0, MIB);
	for (uint32_t i = 0; i < 4; i++)	/* rows 4 MiB apart, 1 MiB wide */
		add(1 + i, 1, 4 * MIB * i, 2, 4 * MIB * i, MIB);
	assert_int_equal(q.n, 2);
	assert_int_equal(cd_queue_take_batch(&q, 1, 16 * MIB, 3, out), 2);
	assert_int_equal(out[1].members, 2);
	assert_int_equal(cd_group_copies(&out[0]) + cd_group_copies(&out[1]), 3);
	g = cd_queue_at(&q, 0);
	assert_int_equal(g->members, 2);
	assert_int_equal(g->src_off, 8 * MIB);
	assert_int_equal(cd_queue_take_batch(&q, 1, 16 * MIB, 1, out), 1);
	assert_int_equal(out[0].members, 2);
	assert_int_equal(out[0].width, MIB);
	assert_int_equal(q.n, 0);
}

/* A ring (every request to the next GPU) has one destination; a second
 * destination counts while its last request is inside the window; none at
 * all is one too (nothing to order).  Counted in requests: a run of
 * requests to one peer, however long it takes, leaves an earlier one to
 * another peer in the window. */
static void test_one_destination(void **state)
{
	uint64_t seen[4] = { 0 };

	(void)state;
	assert_true(cd_one_destination(seen, 4, 0, 64));	/* nothing taken yet */
	seen[1] = 100;					/* the next GPU, just now */
	assert_true(cd_one_destination(seen, 4, 100, 64));
	seen[0] = 99;					/* this GPU itself: not a peer */
	assert_true(cd_one_destination(seen, 4, 100, 64));
	seen[3] = 36;					/* another, 64 requests ago */
	assert_true(cd_one_destination(seen, 4, 100, 64));
	seen[3] = 37;					/* another, 63 requests ago */
	assert_false(cd_one_destination(seen, 4, 100, 64));
	assert_true(cd_one_destination(seen, 4, 101, 64));	/* key 3 aged out, 1 not */
	seen[2] = 101;
	assert_false(cd_one_destination(seen, 4, 101, 64));	/* 1 and 2 */
	seen[2] = 0;
	seen[3] = 500;					/* past the newest: not counted */
	assert_true(cd_one_destination(seen, 4, 101, 64));
	assert_true(cd_one_destination(seen, 2, 101, 64));	/* only key 1 counts */
	seen[2] = 101;					/* a key past nkeys, recent */
	assert_true(cd_one_destination(seen, 2, 101, 64));
}

/* In every phase each GPU of the set writes to a different one, never to
 * itself, and over n - 1 phases to every other GPU once. */
static void check_permutations(uint64_t used)
{
	int n = __builtin_popcountll(used);

	for (uint64_t turn = 0; turn < (uint64_t)(n - 1); turn++) {
		uint64_t targets = 0;

		for (int own = 0; own < 64; own++) {
			int t;

			if (!(used >> own & 1))
				continue;
			t = cd_phase_target(used, own, turn);
			assert_in_range(t, 0, 63);
			assert_true(used >> t & 1);
			assert_int_not_equal(t, own);
			assert_false(targets >> t & 1);
			targets |= 1ull << t;
		}
		assert_true(targets == used);
	}
	for (int own = 0; own < 64; own++) {
		uint64_t seen = 0;

		if (!(used >> own & 1))
			continue;
		for (uint64_t turn = 0; turn < (uint64_t)(n - 1); turn++)
			seen |= 1ull << cd_phase_target(used, own, turn);
		assert_true(seen == (used & ~(1ull << own)));
	}
}

/* The phases count the GPUs a helper writes to: four of a host's eight,
 * a gap in bus order, the top place, three, all 64. */
static void test_phase_target(void **state)
{
	(void)state;
	assert_int_equal(cd_phase_target(0xf, 1, 0), 2);	/* 1 place on */
	assert_int_equal(cd_phase_target(0xf, 1, 1), 3);
	assert_int_equal(cd_phase_target(0xf, 1, 2), 0);	/* around the set */
	assert_int_equal(cd_phase_target(0xf, 1, 3), 2);	/* phase n - 1 is phase 0 */
	/* GPUs 0, 2 and 5 of a host: 5 goes to 0, then 2; the GPUs between
	 * are skipped, not counted. */
	assert_int_equal(cd_phase_target(0x25, 5, 0), 0);
	assert_int_equal(cd_phase_target(0x25, 5, 1), 2);
	assert_int_equal(cd_phase_target(0x25, 0, 0), 2);
	check_permutations(0xf);
	check_permutations(0xf0);
	check_permutations(0x25);
	check_permutations(0x8000000000000003ull);
	check_permutations(0xa5);
	check_permutations(~0ull);
	/* Nothing to order: fewer than three GPUs, or this GPU outside. */
	assert_int_equal(cd_phase_target(0x3, 0, 0), -1);
	assert_int_equal(cd_phase_target(0x1, 0, 5), -1);
	assert_int_equal(cd_phase_target(0xe, 0, 0), -1);
	assert_int_equal(cd_phase_target(0xf, -1, 0), -1);
	assert_int_equal(cd_phase_target(0xf, 64, 0), -1);
}

/* Short host-to-GPU copies go as 2D copies of at least two even rows. */
static void test_small_rows(void **state)
{
	(void)state;
	assert_int_equal(cd_small_rows(0), 0);
	assert_int_equal(cd_small_rows(1), 0);	/* no two rows: a plain copy */
	assert_int_equal(cd_small_rows(2), 2);
	assert_int_equal(cd_small_rows(8), 2);
	assert_int_equal(cd_small_rows(9), 3);
	assert_int_equal(cd_small_rows(15), 3);
	assert_int_equal(cd_small_rows(49), 7);
	assert_int_equal(cd_small_rows(16381), 16381);	/* prime: one-byte rows */
	for (uint64_t n = 2; n < CD_SMALL_HOST; n++) {
		uint64_t rows = cd_small_rows(n);

		if (rows < 2 || n % rows != 0)
			fail_msg("%llu bytes split into %llu rows", (unsigned long long)n,
				 (unsigned long long)rows);
	}
}

/* The limits of merging, each at its edge: a copy may fill the size cap
 * exactly; a row may be packed on one side (pitch == width) and as far as
 * CD_STRIDE_MAX widths on the other; the pitch is measured from the copy's
 * own offsets, not from 0; a copy taken away is never joined again; a
 * second copy of a batch may fill the call exactly, and a strided one
 * brings only the rows the copy count leaves room for. */
static void test_merge_edges(void **state)
{
	struct cd_group out[CD_BATCH_MAX];
	const struct cd_group *g;

	(void)state;
	two_steps(4 * MIB);				/* 2 + 2 MiB: the cap itself */
	assert_int_equal(q.n, 1);
	assert_int_equal(cd_queue_at(&q, 0)->len, 4 * MIB);

	cd_queue_init(&q, 64 * MIB);			/* packed source, strided destination */
	add(0, 1, 0, 2, 0, MIB);
	add(1, 1, MIB, 2, 4 * MIB, MIB);
	assert_int_equal(q.n, 1);
	assert_int_equal(cd_queue_at(&q, 0)->spitch, MIB);
	assert_int_equal(cd_queue_at(&q, 0)->dpitch, 4 * MIB);
	cd_queue_init(&q, 64 * MIB);			/* and the other way round */
	add(0, 1, 0, 2, 0, MIB);
	add(1, 1, 4 * MIB, 2, MIB, MIB);
	assert_int_equal(q.n, 1);
	assert_int_equal(cd_queue_at(&q, 0)->dpitch, MIB);

	cd_queue_init(&q, 64 * MIB);			/* CD_STRIDE_MAX widths apart */
	add(0, 1, 0, 2, 0, MIB);
	add(1, 1, CD_STRIDE_MAX * MIB, 2, CD_STRIDE_MAX * MIB, MIB);
	assert_int_equal(q.n, 1);
	assert_int_equal(cd_queue_at(&q, 0)->members, 2);

	/* Rows 1 GiB apart (the pitch cap) starting 4 GiB in: they join. */
	cd_queue_init(&q, 1ull << 40);
	add(0, 1, 4096 * MIB, 2, 4096 * MIB, 256 * MIB);
	add(1, 1, 5120 * MIB, 2, 5120 * MIB, 256 * MIB);
	assert_int_equal(q.n, 1);
	assert_int_equal(cd_queue_at(&q, 0)->spitch, 1024 * MIB);

	/* A copy taken whole leaves no group for the next step to join. */
	cd_queue_init(&q, 64 * MIB);
	add(0, 1, 0, 2, 0, MIB);
	assert_int_equal(cd_queue_take(&q, 0, 64 * MIB, out), 0);
	assert_int_equal(q.n, 0);
	add(1, 1, MIB, 2, MIB, MIB);
	assert_int_equal(q.n, 1);
	g = cd_queue_at(&q, 0);
	assert_int_equal(g->lead, 1);
	assert_int_equal(g->members, 1);
	assert_int_equal(g->src_off, MIB);

	/* Two copies of 4 MiB fill a call of 8 MiB. */
	cd_queue_init(&q, 16 * MIB);
	add(0, 10, 0, 20, 0, 4 * MIB);
	add(1, 11, 0, 21, 0, 4 * MIB);
	assert_int_equal(cd_queue_take_batch(&q, 1, 8 * MIB, 16, out), 2);
	assert_int_equal(q.n, 0);

	/* One copy, then 1 MiB rows with room for three by size but two by
	 * count (3 copies in all). */
	cd_queue_init(&q, 16 * MIB);
	add(0, 9, 0, 9, 0, MIB);
	for (uint32_t i = 0; i < 4; i++)
		add(1 + i, 1, 4 * MIB * i, 2, 4 * MIB * i, MIB);
	assert_int_equal(cd_queue_take_batch(&q, 1, 4 * MIB, 3, out), 2);
	assert_int_equal(out[1].members, 2);
	assert_int_equal(cd_queue_at(&q, 0)->members, 2);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_empty),
		cmocka_unit_test(test_consecutive_steps_join),
		cmocka_unit_test(test_only_exact_continuations),
		cmocka_unit_test(test_size_cap),
		cmocka_unit_test(test_member_cap),
		cmocka_unit_test(test_joins_older_copy_and_wraps),
		cmocka_unit_test(test_pick_key),
		cmocka_unit_test(test_remove_middle),
		cmocka_unit_test(test_take_front),
		cmocka_unit_test(test_take_bounds),
		cmocka_unit_test(test_strided_steps_join),
		cmocka_unit_test(test_strided_rules_and_take),
		cmocka_unit_test(test_batch_takes_other_connections),
		cmocka_unit_test(test_batch_limits),
		cmocka_unit_test(test_call_limit),
		cmocka_unit_test(test_batch_key_order),
		cmocka_unit_test(test_batch_counts_rows),
		cmocka_unit_test(test_one_destination),
		cmocka_unit_test(test_phase_target),
		cmocka_unit_test(test_small_rows),
		cmocka_unit_test(test_merge_edges),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
