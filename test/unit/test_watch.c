/* Watch words on a shared-memory connection (transport/shm_watch.c): the
 * receiver of a direct send sees it land from the word the sender's copy
 * helper writes after the copy, without waiting for the sender to see it
 * first; a word that does not hold the message's number never ends a
 * receive.  Real sockets and shared memory in one process; the copy
 * engine and the GPU exports are stand-ins (engine_standin.c, whose
 * watch_at_once lands a copy and writes its word as it starts, and whose
 * hold keeps the sender from ever seeing it land). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "engine_standin.h"
#include "shm.h"
#include "symmem.h"
#include "transport.h"
#include "tp_pair.h"

#define SIZE 4096
#define DEADLINE_S 10.0

struct pair {
	struct tp_pair c;
	struct tp_region *sreg, *rreg;
	uint8_t src[SIZE], dst[SIZE];
};

static void pair_open_landing(struct pair *p, int landing)
{
	const struct tp_pair_opts gpu_shm = { .backend = TP_BACKEND_SHM, .gpu = 1,
					      .landing = landing };

	standin_engine_reset(1);
	standin_engine.helper = 1;
	memset(p, 0, sizeof(*p));
	tp_pair_open(&p->c, &gpu_shm);
	assert_int_equal(tp_register(p->c.s, p->src, SIZE, TP_MEM_CUDA, &p->sreg), SM_OK);
	assert_int_equal(tp_register(p->c.r, p->dst, SIZE, TP_MEM_CUDA, &p->rreg), SM_OK);
}

static void pair_open(struct pair *p)
{
	pair_open_landing(p, 1);
}

/* Closes both ends: the helper then holds nothing of theirs, the
 * sender's control page included. */
static void pair_close(struct pair *p)
{
	tp_deregister(p->c.s, p->sreg);
	tp_deregister(p->c.r, p->rreg);
	tp_pair_close(&p->c);
	assert_int_equal(standin_engine.ranges, 0);
}

/* Message m's bytes into src; a receive of dst posted and the send made. */
static void post_pair(struct pair *p, int m, struct tp_req **sr, struct tp_req **rr)
{
	for (size_t i = 0; i < SIZE; i++)
		p->src[i] = (uint8_t)(i * 7 + m);
	memset(p->dst, 0xee, SIZE);
	*rr = NULL;
	assert_int_equal(tp_irecv(p->c.r, p->dst, SIZE, p->rreg, rr), SM_OK);
	assert_non_null(*rr);
	*sr = isend_when_posted(p->c.s, p->src, SIZE, p->sreg, now() + DEADLINE_S);
}

/* One message through: by its end the sender's progress has the helper's
 * name for its control page, asked for at connect, and each copy from
 * then on names its watch word. */
static void first_message(struct pair *p)
{
	struct tp_req *sr, *rr;

	post_pair(p, 0, &sr, &rr);
	assert_int_equal(complete_both(sr, rr, now() + DEADLINE_S), SIZE);
	assert_memory_equal(p->dst, p->src, SIZE);
	assert_int_not_equal(shm_of(p->c.s)->watch_id, 0);
}

/* Tests the receive alone for `seconds`: 1 if it ended. */
static int receive_ends(struct tp_req *rr, double seconds)
{
	double end = now() + seconds;
	size_t got = 0;
	int done = 0;

	while (!done && now() < end)
		assert_int_equal(tp_test(rr, &done, &got), SM_OK);
	if (done)
		assert_int_equal(got, SIZE);
	return done;
}

/* The copy lands and writes its word while the sender, whose copy test
 * is held, never sees it: the receive ends all the same, every byte in
 * place, and is counted as seen by the watch word. */
static void test_receive_ends_by_watch_word(void **state)
{
	struct tp_req *sr, *rr;
	struct tp_stats st;
	struct pair p;
	int watches;

	(void)state;
	pair_open(&p);
	first_message(&p);
	watches = standin_engine.watches;
	standin_engine.watch_at_once = 1;
	standin_engine.hold_nth = standin_engine.starts + 1;
	post_pair(&p, 1, &sr, &rr);
	assert_true(receive_ends(rr, DEADLINE_S));
	assert_memory_equal(p.dst, p.src, SIZE);
	assert_int_equal(standin_engine.watches, watches + 1);
	tp_get_stats(p.c.r, &st);
	assert_int_equal(st.watched, 1);
	standin_engine.hold_nth = 0;
	assert_int_equal(wait_done(sr, now() + DEADLINE_S), SIZE);
	pair_close(&p);
}

/* A word that holds another message's number (a stale one, or one a
 * confused sender wrote) leaves the receive waiting for the sender; it
 * ends once the sender saw the copy land, not counted as watched. */
static void test_stale_watch_word_ends_nothing(void **state)
{
	struct tp_req *sr, *rr;
	struct shm_ctrl *ctrl;
	struct tp_stats st;
	struct pair p;

	(void)state;
	pair_open(&p);
	first_message(&p);
	standin_engine.hold_nth = standin_engine.starts + 1;
	post_pair(&p, 1, &sr, &rr);
	ctrl = shm_of(p.c.r)->ctrl;
	atomic_store(&ctrl->watch[1], 1);	/* message 0's number + 1 */
	assert_false(receive_ends(rr, 0.2));
	atomic_store(&ctrl->watch[1], 2 + TP_MAX_REQUESTS);	/* a later message's */
	assert_false(receive_ends(rr, 0.2));
	standin_engine.hold_nth = 0;
	assert_int_equal(complete_both(sr, rr, now() + DEADLINE_S), SIZE);
	assert_memory_equal(p.dst, p.src, SIZE);
	tp_get_stats(p.c.r, &st);
	assert_int_equal(st.watched, 0);
	pair_close(&p);
}

/* Without landing words (NCCL_SYMMEM_LANDING_WORDS=0) the helper writes
 * no watch words, so the connector asks it to map no page: receives end
 * by the sender's count, as before. */
static void test_no_page_without_landing_words(void **state)
{
	struct tp_req *sr, *rr;
	struct pair p;

	(void)state;
	pair_open_landing(&p, 0);
	post_pair(&p, 0, &sr, &rr);
	assert_int_equal(complete_both(sr, rr, now() + DEADLINE_S), SIZE);
	assert_memory_equal(p.dst, p.src, SIZE);
	assert_int_equal(shm_of(p.c.s)->watch_id, 0);
	assert_int_equal(standin_engine.watches, 0);
	pair_close(&p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_receive_ends_by_watch_word),
		cmocka_unit_test(test_stale_watch_word_ends_nothing),
		cmocka_unit_test(test_no_page_without_landing_words),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
