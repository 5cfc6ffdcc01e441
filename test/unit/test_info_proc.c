/* symmem-info's child processes (plugin/info/info_proc.c), real ones: several
 * children waited for against one deadline, as the self-test's rounds and
 * the GPU tries do.  A child that hangs is killed at the deadline, and
 * one that answered in time keeps its answer even when it is read after
 * the hung one made the deadline pass. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include "info.h"
#include "symmem.h"

static const char answer[] = "the child's report";

static int answers(void *arg, int wr)
{
	(void)arg;
	return proc_write(wr, answer, sizeof(answer)) ? 1 : 7;
}

static int hangs(void *arg, int wr)
{
	(void)arg;
	(void)wr;
	for (;;)
		pause();
	return 0;
}

/* The hung child first, then the one that answered at once: the second
 * read starts past the deadline, with the answer waiting in its pipe. */
static void test_answer_read_after_deadline(void **state)
{
	char got[sizeof(answer)];
	int rd_hung = -1, rd_ok = -1;
	pid_t hung, ok;
	uint64_t deadline;

	(void)state;
	hung = proc_start(hangs, NULL, &rd_hung);
	ok = proc_start(answers, NULL, &rd_ok);
	assert_true(hung > 0 && ok > 0);
	deadline = proc_deadline(0.3);
	assert_int_equal(proc_read(rd_hung, got, sizeof(got), deadline), -1);
	assert_int_equal(proc_reap(hung, deadline), -1);
	assert_true(sm_now_ns() >= deadline);
	/* Killed and reaped: no such process any more. */
	assert_int_equal(kill(hung, 0), -1);
	memset(got, 0, sizeof(got));
	assert_int_equal(proc_read(rd_ok, got, sizeof(got), deadline), 0);
	assert_string_equal(got, answer);
	assert_int_equal(proc_reap(ok, deadline), 7);
	close(rd_hung);
	close(rd_ok);
}

/* Past the deadline, an empty pipe is still a failure, and at once. */
static void test_nothing_after_deadline(void **state)
{
	char got[sizeof(answer)];
	int rd = -1;
	pid_t pid;
	uint64_t t0;

	(void)state;
	pid = proc_start(hangs, NULL, &rd);
	assert_true(pid > 0);
	t0 = sm_now_ns();
	assert_int_equal(proc_read(rd, got, sizeof(got), t0 - 1), -1);
	assert_true(sm_now_ns() - t0 < 1000000000ull);
	assert_int_equal(proc_reap(pid, t0), -1);
	close(rd);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_answer_read_after_deadline),
		cmocka_unit_test(test_nothing_after_deadline),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
