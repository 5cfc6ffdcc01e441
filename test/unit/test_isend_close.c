/* A receiver that posts its receive and then closes: the send it posted
 * for is still served over shared memory, whenever the sender looks.  The
 * close may come right after the sender looked at the posted receives
 * and before its liveness check (the touch hook puts it there every
 * time), after a registration's announcement the sender has not read yet,
 * or while the sender's copy into the receive waits for a copy slot.
 * Real sockets and shared memory, the receiver a forked process where the
 * timing needs one; the copy engine and the GPU exports are stand-ins
 * (engine_standin.c, export_standin.c). */
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "engine_standin.h"
#include "shm.h"
#include "symmem.h"
#include "touch_hook.h"
#include "tp_pair.h"
#include "transport.h"

#define SIZE 4096
#define DEADLINE_S 10.0

static uint8_t src[SIZE], dst[SIZE];

/* A pair whose receiver may register GPU memory (stand-ins). */
static void pair_open(struct tp_pair *p)
{
	const struct tp_pair_opts gpu_shm = { .backend = TP_BACKEND_SHM, .gpu = 1 };

	standin_engine_reset(1);
	standin_engine.helper = 1;
	tp_pair_open(p, &gpu_shm);
	for (size_t i = 0; i < SIZE; i++)
		src[i] = (uint8_t)(i * 7 + 3);
	memset(dst, 0xee, SIZE);
}

/* ---- closed right after the sender looked ---- */

struct closer {
	int go;			/* the forked receiver's cue */
	int sock;		/* the sender's end of the control socket */
};

/* The touch hook's callback, right after the sender read how many
 * receives are posted: the receiver posts one and closes, and the sender
 * goes on once the hang-up shows (or 5 s passed: the test then fails). */
static void receiver_posts_and_closes(void *arg)
{
	const struct closer *k = arg;
	struct pollfd p = { .fd = k->sock, .events = POLLRDHUP };

	if (write(k->go, "g", 1) == 1)
		poll(&p, 1, 5000);
}

/* The forked receiver: posts a ring receive on the cue and closes. */
static void receiver_child(struct tp_comm *r, int go)
{
	struct tp_req *rr = NULL;
	char c;

	if (read(go, &c, 1) != 1 || tp_irecv(r, dst, SIZE, NULL, &rr) != SM_OK || !rr)
		_exit(1);
	tp_close(r);
	_exit(0);
}

/* The receiver posts and closes between the sender's look at its posted
 * receives and the sender's liveness check, which sees the hang-up: the
 * send looks again and goes into the receive instead of failing. */
static void test_receive_posted_between_look_and_check(void **state)
{
	struct tp_pair p;
	struct tp_req *sr = NULL;
	struct closer k;
	int go[2], status, rc;
	pid_t pid;

	(void)state;
	pair_open(&p);
	assert_int_equal(pipe(go), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		close(go[1]);
		receiver_child(p.r, go[0]);
	}
	close(go[0]);
	close(p.r->fd);		/* the child's copy is the receiver's end now */
	p.r->fd = -1;
	k.go = go[1];
	k.sock = p.s->fd;
	if (touch_hook_arm((void *)&shm_of(p.s)->ctrl->recv_posted,
			   sizeof(shm_of(p.s)->ctrl->recv_posted), receiver_posts_and_closes, &k)) {
		kill(pid, SIGKILL);
		waitpid(pid, &status, 0);
		skip();
	}
	rc = tp_isend(p.s, src, SIZE, NULL, &sr);
	assert_true(touch_hook_disarm());
	if (rc)
		print_message("%s\n", sm_last_error());
	assert_int_equal(rc, SM_OK);
	assert_non_null(sr);
	wait_done(sr, now() + DEADLINE_S);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	assert_int_equal(p.s->failed, 0);
	close(go[1]);
	tp_pair_close(&p);
}

/* ---- closed after a receive into a registration ---- */

/* The receiver registers dst, posts a receive into it (announcing the
 * registration on the socket) and closes before the sender read a byte. */
static struct tp_region *post_then_close(struct tp_comm *r)
{
	struct tp_region *reg;
	struct tp_req *rr = NULL;

	assert_int_equal(tp_register(r, dst, SIZE, TP_MEM_CUDA, &reg), SM_OK);
	assert_int_equal(tp_irecv(r, dst, SIZE, reg, &rr), SM_OK);
	assert_non_null(rr);
	tp_close(r);
	return reg;
}

/* The sender reads the announcement and then the socket's end: the end
 * of the stream after whole messages is no failure, and the copy lands in
 * the receive posted before the close. */
static void test_announced_receive_served_after_close(void **state)
{
	struct tp_region *sreg, *reg;
	struct tp_pair p;
	double end = now() + DEADLINE_S;

	(void)state;
	pair_open(&p);
	assert_int_equal(tp_register(p.s, src, SIZE, TP_MEM_CUDA, &sreg), SM_OK);
	reg = post_then_close(p.r);
	wait_done(isend_when_posted(p.s, src, SIZE, sreg, end), end);
	assert_memory_equal(dst, src, SIZE);
	assert_int_equal(p.s->failed, 0);
	tp_deregister(NULL, reg);
	tp_deregister(p.s, sreg);
	tp_close(p.s);
}

/* The copy into a receive posted before the close cannot start (no copy
 * slot free) while the sender's liveness checks see the hang-up: the send
 * waits for a slot, as it would with the receiver there, and lands once
 * one is free.  A send with no receive posted still fails. */
static void test_refused_copy_waits_past_close(void **state)
{
	struct tp_region *sreg, *reg;
	struct tp_pair p;
	struct tp_req *sr = NULL;
	int rc = SM_OK;
	double end;

	(void)state;
	pair_open(&p);
	assert_int_equal(tp_register(p.s, src, SIZE, TP_MEM_CUDA, &sreg), SM_OK);
	reg = post_then_close(p.r);
	standin_engine.refuse_pct = 100;
	end = now() + 0.2;	/* several liveness checks */
	while (now() < end) {
		assert_int_equal(tp_isend(p.s, src, SIZE, sreg, &sr), SM_OK);
		assert_null(sr);
	}
	standin_engine.refuse_pct = 0;
	end = now() + DEADLINE_S;
	wait_done(isend_when_posted(p.s, src, SIZE, sreg, end), end);
	assert_memory_equal(dst, src, SIZE);
	end = now() + DEADLINE_S;
	while (rc == SM_OK && now() < end) {
		rc = tp_isend(p.s, src, SIZE, sreg, &sr);
		assert_null(sr);
	}
	assert_int_equal(rc, SM_ERR_REMOTE);
	assert_non_null(strstr(sm_last_error(), "closed the connection or died"));
	tp_deregister(NULL, reg);
	tp_deregister(p.s, sreg);
	tp_close(p.s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_receive_posted_between_look_and_check),
		cmocka_unit_test(test_announced_receive_served_after_close),
		cmocka_unit_test(test_refused_copy_waits_past_close),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
