/* The copy helper (symmem-copyd) as the real executable in a real child
 * process.  These hosts have no GPU, so what is checked is everything up
 * to the GPU: starting it, its refusals reaching the caller as one clear
 * error, its handling of a client that hangs up or sends garbage, and that
 * nothing (child, descriptor) is left behind.  The copies themselves run
 * on the GPU hosts (scripts/gpu_check.sh). */
#include <fcntl.h>
#include <errno.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "copy_helper.h"
#include "copyd_proto.h"
#include "fd_util.h"
#include "symmem.h"

extern char **environ;

static const struct smf_helper_params params = { .nstreams = 2, .depth = 2,
						 .merge_max = 16 << 20, .batch = 16 };

static const char *helper_path(void)
{
	const char *p = getenv("SYMMEM_COPYD");

	assert_non_null(p);	/* set by meson: the helper built beside the tests */
	return p;
}

/* No child of this process is left, running or as a zombie. */
static void assert_no_children(void)
{
	errno = 0;
	assert_int_equal(waitpid(-1, NULL, WNOHANG), -1);
	assert_int_equal(errno, ECHILD);
}

static void test_missing_binary(void **state)
{
	struct smf_helper *h = (struct smf_helper *)1;
	int fds = open_fds();

	(void)state;
	assert_int_equal(smf_helper_start("/nonexistent/symmem-copyd", "0000:00:06.0", &params, &h),
			 SM_ERR_SYSTEM);
	assert_null(h);
	assert_non_null(strstr(sm_last_error(), "cannot start the copy helper "
				"/nonexistent/symmem-copyd"));
	assert_int_equal(open_fds(), fds);
	assert_no_children();
}

/* The real helper on a host without a usable GPU refuses the hello with
 * its reason, which becomes the caller's error; it is then gone. */
static void test_no_gpu_refusal(void **state)
{
	struct smf_helper *h = (struct smf_helper *)1;
	int fds = open_fds(), rc;

	(void)state;
	if (sm_cu())
		skip();		/* a driver exists: the GPU runs cover the success path */
	rc = smf_helper_start(helper_path(), "0000:00:06.0", &params, &h);
	assert_int_equal(rc, SM_ERR_CUDA);
	assert_null(h);
	assert_non_null(strstr(sm_last_error(), "copy helper: no CUDA driver"));
	assert_int_equal(open_fds(), fds);
	assert_no_children();
}

/* A helper that exits at once (here: a program that is not one) is seen
 * as gone as soon as it exits, not after the 60 s hello deadline. */
static void test_helper_exits_at_start(void **state)
{
	struct smf_helper *h = (struct smf_helper *)1;
	uint64_t t0 = sm_now_ns();

	(void)state;
	assert_int_not_equal(smf_helper_start("/bin/false", "0000:00:06.0", &params, &h), SM_OK);
	assert_null(h);
	assert_non_null(strstr(sm_last_error(), "has exited"));
	assert_true(sm_now_ns() - t0 < 5ull * 1000 * 1000 * 1000);
	assert_no_children();
}

/* Starts a stand-in program as the helper: a shell script that writes
 * what `cmd` prints to a file and exits, so the start fails as it must
 * without the real helper.  `out` gets what it printed. */
static void stand_in(const char *cmd, const struct smf_helper_params *p, char *out, size_t len)
{
	char dir[] = "/tmp/copyd-standin-XXXXXX", script[64], file[64];
	struct smf_helper *h = NULL;
	size_t n;
	FILE *f;

	assert_non_null(mkdtemp(dir));
	snprintf(script, sizeof(script), "%s/helper.sh", dir);
	snprintf(file, sizeof(file), "%s/out", dir);
	f = fopen(script, "w");
	assert_non_null(f);
	fprintf(f, "#!/bin/sh\n%s > %s\n", cmd, file);
	fclose(f);
	assert_int_equal(chmod(script, 0700), 0);
	assert_int_not_equal(smf_helper_start(script, "0000:00:06.0", p, &h), SM_OK);
	assert_null(h);
	f = fopen(file, "r");
	assert_non_null(f);
	n = fread(out, 1, len - 1, f);
	out[n] = '\0';
	fclose(f);
	unlink(file);
	unlink(script);
	rmdir(dir);
	assert_no_children();
}

/* NCCL's threads may block or ignore signals; the helper must not inherit
 * that, or a job's SIGTERM would leave it behind.  A stand-in program
 * records the signal state it starts with. */
static void test_helper_signals_reset(void **state)
{
	char status[512], *line, *save = NULL;
	sigset_t block, old;
	int blk_ok = 0, ign_ok = 0;

	(void)state;
	sigemptyset(&block);
	sigaddset(&block, SIGTERM);
	sigaddset(&block, SIGINT);
	assert_int_equal(pthread_sigmask(SIG_BLOCK, &block, &old), 0);
	signal(SIGHUP, SIG_IGN);
	stand_in("grep -E '^Sig(Blk|Ign)' /proc/self/status", &params, status, sizeof(status));
	signal(SIGHUP, SIG_DFL);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	/* Masks are hex, bit n-1 for signal n; glibc's own real-time
	 * signals (32, 33) may show as ignored and are not ours to judge. */
	for (line = strtok_r(status, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		unsigned long long mask;
		unsigned long long ours = (1ull << (SIGHUP - 1)) | (1ull << (SIGINT - 1)) |
					  (1ull << (SIGTERM - 1));

		if (sscanf(line, "SigBlk: %llx", &mask) == 1)
			blk_ok = (mask & ours) == 0;
		if (sscanf(line, "SigIgn: %llx", &mask) == 1)
			ign_ok = (mask & ours) == 0;
	}
	assert_true(blk_ok);
	assert_true(ign_ok);
}

/* A rank that sees one GPU only starts its helper without
 * CUDA_VISIBLE_DEVICES (all_gpus), so the helper sees the peers it copies
 * into; otherwise the helper inherits the environment as it is. */
static void test_helper_env_all_gpus(void **state)
{
	char *env[] = { (char *)"A=1", (char *)"CUDA_VISIBLE_DEVICES=2",
			(char *)"CUDA_VISIBLE_DEVICES_X=3", (char *)"B=2", NULL };
	const char *show = "echo \"[${CUDA_VISIBLE_DEVICES-unset}]\"";
	struct smf_helper_params all = params;
	const char *before = getenv("CUDA_VISIBLE_DEVICES");
	char *saved = before ? strdup(before) : NULL;
	char seen[64];
	char **out;

	(void)state;
	out = smf_helper_env(env, 1);
	assert_non_null(out);
	assert_ptr_not_equal(out, env);
	assert_string_equal(out[0], "A=1");
	assert_string_equal(out[1], "CUDA_VISIBLE_DEVICES_X=3");
	assert_string_equal(out[2], "B=2");
	assert_null(out[3]);
	free(out);
	assert_ptr_equal(smf_helper_env(env, 0), env);
	assert_string_equal(env[1], "CUDA_VISIBLE_DEVICES=2");

	/* What the started program really sees. */
	all.all_gpus = 1;
	assert_int_equal(setenv("CUDA_VISIBLE_DEVICES", "2", 1), 0);
	stand_in(show, &all, seen, sizeof(seen));
	assert_string_equal(seen, "[unset]\n");
	stand_in(show, &params, seen, sizeof(seen));
	assert_string_equal(seen, "[2]\n");
	if (saved)
		setenv("CUDA_VISIBLE_DEVICES", saved, 1);
	else
		unsetenv("CUDA_VISIBLE_DEVICES");
	free(saved);
}

/* Starts copyd_standin.c as the helper, in `mode` (its comment lists
 * them); the hello succeeds. */
static struct smf_helper *start_standin(const char *mode, const char *delay_ms,
					const struct smf_helper_params *p)
{
	const char *path = getenv("SYMMEM_COPYD_STANDIN");
	struct smf_helper *h = NULL;
	int rc;

	assert_non_null(path);	/* set by meson */
	assert_int_equal(setenv("SYMMEM_STANDIN_MODE", mode, 1), 0);
	if (delay_ms)
		assert_int_equal(setenv("SYMMEM_STANDIN_DELAY_MS", delay_ms, 1), 0);
	rc = smf_helper_start(path, "0000:00:06.0", p, &h);
	unsetenv("SYMMEM_STANDIN_MODE");
	unsetenv("SYMMEM_STANDIN_DELAY_MS");
	assert_int_equal(rc, SM_OK);
	assert_non_null(h);
	return h;
}

/* Replies carry no request number.  An answer that comes after its
 * request timed out would be read as the answer to the next request, and
 * a mapping would get another mapping's id; so a helper that did not
 * answer in time gets no more requests, and is ended.  The stand-in answers the first
 * mapping with id 1 after 500 ms (the client waits 200 ms), later ones
 * with 2, 3, ... at once. */
static void test_late_answer_not_taken(void **state)
{
	struct smf_helper_params quick = params;
	struct sm_share_info info;
	struct smf_helper *h;
	uint32_t id = 77;
	uint64_t end;
	int rc, status = 0;
	pid_t pid;

	(void)state;
	quick.request_timeout_ms = 200;
	h = start_standin("slow-first-add", "500", &quick);
	memset(&info, 0, sizeof(info));
	info.kind = SM_SHARE_LEGACY_IPC;
	assert_int_equal(smf_helper_add(h, (int)getpid(), &info, -1, &id), SM_ERR_SYSTEM);
	assert_int_equal(id, 0);
	assert_non_null(strstr(sm_last_error(), "did not answer in 0.2 s; it was stopped and no "
				"further requests go to it"));
	/* Given up, it is ended at once (SIGKILL): copies it held stop with
	 * it instead of writing into buffers whose requests failed. */
	pid = smf_helper_pid(h);
	for (end = sm_now_ns() + 2000000000ull; sm_now_ns() < end; usleep(1000))
		if (waitpid(pid, &status, WNOHANG) == pid)
			break;
	assert_true(WIFSIGNALED(status));
	assert_int_equal(WTERMSIG(status), SIGKILL);
	usleep(600 * 1000);	/* past the moment its late answer would have come */
	id = 77;
	rc = smf_helper_add(h, (int)getpid(), &info, -1, &id);
	assert_int_equal(id, 0);	/* not 1, the first mapping's */
	assert_int_equal(rc, SM_ERR_SYSTEM);
	assert_non_null(strstr(sm_last_error(), "no further requests go to it"));
	smf_helper_stop(h);
	assert_no_children();
}

static int warnings;

static void count_warnings(int warn, const char *msg)
{
	(void)msg;
	warnings += warn;
}

/* A helper that exits is collected when the client sees it gone, not
 * only at smf_helper_stop() (a zombie for the rest of the job); stop then
 * leaves that pid alone. */
static void test_exited_helper_reaped(void **state)
{
	struct smf_helper *h;
	uint64_t seq = 0, t0;
	int started = 0, done = 1;
	siginfo_t si;
	pid_t pid;

	(void)state;
	h = start_standin("exit-after-hello", NULL, &params);
	pid = smf_helper_pid(h);
	/* Until it has exited, without collecting it: that is the client's. */
	memset(&si, 0, sizeof(si));
	assert_int_equal(waitid(P_PID, (id_t)pid, &si, WEXITED | WNOWAIT), 0);
	assert_int_equal(si.si_pid, pid);
	/* Posting looks at no socket; the test of the copy notices. */
	assert_int_equal(smf_helper_post(h, 1, 0, 2, 0, 4096, &seq, &started), SM_OK);
	assert_int_equal(started, 1);
	assert_int_equal(smf_helper_test(h, seq, &done), SM_ERR_SYSTEM);
	assert_int_equal(done, 0);
	assert_non_null(strstr(sm_last_error(), "has exited"));
	assert_no_children();
	/* Later calls still fail, and nothing is collected twice. */
	assert_int_equal(smf_helper_post(h, 1, 0, 2, 0, 4096, &seq, &started), SM_ERR_SYSTEM);
	assert_non_null(strstr(sm_last_error(), "has exited"));
	warnings = 0;
	sm_set_log_sink(count_warnings);
	t0 = sm_now_ns();
	smf_helper_stop(h);
	sm_set_log_sink(NULL);
	assert_true(sm_now_ns() - t0 < 1000ull * 1000 * 1000);
	assert_int_equal(warnings, 0);
	assert_no_children();
}

/* Starts the helper by hand with a raw socket, as the plugin would, and
 * `extra` (if >= 0) as the child's descriptor CD_CTRL_FD + 1; no cmocka
 * asserts, so a forked child may call it.  -1 on failure. */
static pid_t spawn_helper_with(const char *path, int *sock, int extra)
{
	posix_spawn_file_actions_t fa;
	char pid[24], *argv[3];
	pid_t child = -1;
	int sv[2];

	if (socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv) != 0)
		return -1;
	snprintf(pid, sizeof(pid), "%d", (int)getpid());
	argv[0] = (char *)path;
	argv[1] = pid;
	argv[2] = NULL;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, sv[1], CD_CTRL_FD);
	if (extra >= 0)
		posix_spawn_file_actions_adddup2(&fa, extra, CD_CTRL_FD + 1);
	if (posix_spawn(&child, argv[0], &fa, NULL, argv, environ) != 0)
		child = -1;
	posix_spawn_file_actions_destroy(&fa);
	close(sv[1]);
	*sock = sv[0];
	return child;
}

static pid_t spawn_helper(const char *path, int *sock)
{
	return spawn_helper_with(path, sock, -1);
}

static pid_t raw_helper(int *sock)
{
	pid_t pid = spawn_helper(helper_path(), sock);

	assert_true(pid > 0);
	return pid;
}

static int exited_within(pid_t pid, int ms)
{
	int status;

	for (int i = 0; i < ms; i++) {
		if (waitpid(pid, &status, WNOHANG) == pid)
			return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
		usleep(1000);
	}
	kill(pid, SIGKILL);
	waitpid(pid, &status, 0);
	return -1;
}

/* Takes the helper's answer to the request just sent. */
static void take_reply(int sock, struct cd_reply *r)
{
	struct pollfd p = { .fd = sock, .events = POLLIN };

	assert_int_equal(poll(&p, 1, 10000), 1);
	assert_int_equal(recv(sock, r, sizeof(*r), 0), (ssize_t)sizeof(*r));
	assert_int_equal(r->magic, CD_MAGIC);
}

/* Sends the first `len` bytes of a request and takes the answer. */
static void ask_len(int sock, const struct cd_msg *m, size_t len, struct cd_reply *r)
{
	assert_int_equal(send(sock, m, len, 0), (ssize_t)len);
	take_reply(sock, r);
}

/* Sends a whole request with `fd` attached (closed here once sent) and
 * takes the answer. */
static void ask_with_fd(int sock, const struct cd_msg *m, int fd, struct cd_reply *r)
{
	assert_int_equal(sm_send_some(sock, m, sizeof(*m), fd), (ssize_t)sizeof(*m));
	close(fd);
	take_reply(sock, r);
}

static void ask(int sock, const struct cd_msg *m, struct cd_reply *r)
{
	ask_len(sock, m, sizeof(*m), r);
}

/* Sends `m` (with `fd` attached and closed here, unless it is -1) and
 * expects it refused as invalid for a reason holding `why`. */
static void refused(int sock, const struct cd_msg *m, int fd, const char *why)
{
	struct cd_reply r;

	if (fd >= 0)
		ask_with_fd(sock, m, fd, &r);
	else
		ask(sock, m, &r);
	assert_int_equal(r.status, SM_ERR_INVALID);
	assert_non_null(strstr(r.msg, why));
}

/* Requests out of order or unknown are refused with a reason; the helper
 * keeps serving, and leaves once the client hangs up. */
static void test_refusals_then_hangup(void **state)
{
	struct cd_msg m;
	int sock;
	pid_t pid;

	(void)state;
	pid = raw_helper(&sock);
	memset(&m, 0, sizeof(m));
	m.magic = CD_MAGIC;
	m.op = CD_ADD;
	m.info.kind = SM_SHARE_LEGACY_IPC;
	refused(sock, &m, -1, "mapping before hello");
	m.op = 77;
	refused(sock, &m, -1, "unknown request");
	m.op = CD_HELLO;
	m.version = CD_VERSION + 1;
	m.nstreams = 2;
	refused(sock, &m, -1, "protocol");
	m.version = CD_VERSION;
	m.nstreams = 0;
	refused(sock, &m, -1, "0 streams asked for");
	m.nstreams = 17;	/* the helper has room for 16 */
	refused(sock, &m, -1, "17 streams asked for");
	m.nstreams = 2;
	m.depth = 0;
	refused(sock, &m, -1, "0 copies per stream");
	m.depth = CD_SLOTS + 1;
	refused(sock, &m, -1, "1025 copies per stream");
	m.depth = 2;
	m.batch = 0;
	refused(sock, &m, -1, "0 copies per call");
	m.batch = CD_BATCH_MAX + 1;
	refused(sock, &m, -1, "65 copies per call");
	close(sock);
	assert_int_equal(exited_within(pid, 5000), 0);
}

/* A memfd of `size` zero bytes, sealed against shrinking as the plugin's
 * are, or not. */
static int memfd_of(size_t size, int sealed)
{
	int fd = memfd_create("ring-test", MFD_CLOEXEC | MFD_ALLOW_SEALING);

	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, (off_t)size), 0);
	if (sealed)
		assert_int_equal(fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK), 0);
	return fd;
}

/* A hello whose request ring is missing, too short (the helper would
 * fault on its first read), not sealed against shrinking (it could become
 * too short later) or not ours is refused with the reason, before
 * the helper touches a GPU; the helper stays and takes a good hello's
 * refusal for the next reason (here: no GPU, or none at that address). */
static void test_bad_ring_refused(void **state)
{
	struct cd_msg m = { .magic = CD_MAGIC, .op = CD_HELLO, .version = CD_VERSION,
			    .nstreams = 1, .depth = 2, .batch = 1 };
	struct cd_ring *good;
	struct cd_reply r;
	int sock, fd;
	pid_t pid;

	(void)state;
	pid = raw_helper(&sock);
	refused(sock, &m, -1, "hello without its request ring");

	fd = memfd_of(64, 1);
	refused(sock, &m, fd, "request ring is 64 bytes, not");

	fd = memfd_of(sizeof(struct cd_ring), 0);
	refused(sock, &m, fd, "request ring is not sealed against shrinking");

	fd = memfd_of(sizeof(struct cd_ring), 1);
	refused(sock, &m, fd, "request ring has the wrong layout");

	/* Our magic, another ring size. */
	assert_int_equal(sm_memfd_map("odd-ring", sizeof(*good), sizeof(*good), &fd, (void **)&good),
			 SM_OK);
	good->magic = CD_MAGIC;
	good->nslots = CD_SLOTS / 2;
	refused(sock, &m, fd, "request ring has the wrong layout");
	munmap(good, sizeof(*good));

	assert_int_equal(sm_memfd_map("good-ring", sizeof(*good), sizeof(*good), &fd, (void **)&good),
			 SM_OK);
	good->magic = CD_MAGIC;
	good->nslots = CD_SLOTS;
	snprintf(m.pci_bus_id, sizeof(m.pci_bus_id), "ffff:ff:1f.7");
	ask_with_fd(sock, &m, fd, &r);
	assert_int_equal(r.status, SM_ERR_CUDA);
	assert_null(strstr(r.msg, "ring"));
	/* A GPU that would not open: it leaves without waiting for the
	 * hang-up. */
	assert_int_equal(exited_within(pid, 5000), 0);
	munmap(good, sizeof(*good));
	close(sock);
}

/* A plugin of an older build sends a shorter hello: the helper names both
 * protocol versions in its answer, so the plugin's WARN says why, and
 * leaves. */
static void test_short_hello_names_versions(void **state)
{
	size_t len = offsetof(struct cd_msg, info);
	struct cd_reply r;
	struct cd_msg m = { .magic = CD_MAGIC, .op = CD_HELLO, .version = CD_VERSION - 1,
			    .nstreams = 2 };
	char want[64];
	int sock;
	pid_t pid;

	(void)state;
	pid = raw_helper(&sock);
	ask_len(sock, &m, len, &r);
	assert_int_equal(r.status, SM_ERR_INVALID);
	snprintf(want, sizeof(want), "protocol %d (a %zu-byte hello), helper %d", CD_VERSION - 1,
		 len, CD_VERSION);
	assert_non_null(strstr(r.msg, want));
	assert_int_equal(exited_within(pid, 5000), 0);
	close(sock);
}

/* The first `len` bytes of an `op` request, alone: the helper leaves
 * without an answer, and nothing but the hang-up comes back. */
static void short_request_ends_helper(uint32_t op, size_t len)
{
	struct cd_msg m = { .magic = CD_MAGIC, .op = op, .version = CD_VERSION };
	struct cd_reply r;
	int sock;
	pid_t pid;

	pid = raw_helper(&sock);
	assert_int_equal(send(sock, &m, len, 0), (ssize_t)len);
	assert_int_equal(exited_within(pid, 5000), 0);
	assert_int_equal(recv(sock, &r, sizeof(r), 0), 0);
	close(sock);
}

/* A hello too short to hold its version cannot be told from garbage: the
 * helper leaves without guessing at an answer. */
static void test_hello_without_version_ends_helper(void **state)
{
	(void)state;
	short_request_ends_helper(CD_HELLO, offsetof(struct cd_msg, version));
}

/* Only a hello of another size gets the versions answer; any other short
 * request is garbage. */
static void test_short_request_ends_helper(void **state)
{
	(void)state;
	short_request_ends_helper(CD_ADD, offsetof(struct cd_msg, info));
}

/* The helper `pid` holds none of the pipes whose read ends are rd[0..n):
 * each reader sees the end while the helper still runs; then it leaves on
 * the hang-up of `sock`. */
static void holds_none_then_exits(pid_t pid, int sock, int *rd, int n)
{
	for (int i = 0; i < n; i++) {
		assert_true(writers_gone(rd[i], 5000));
		close(rd[i]);
	}
	assert_int_equal(waitpid(pid, NULL, WNOHANG), 0);
	close(sock);
	assert_int_equal(exited_within(pid, 5000), 0);
}

/* A refused request with descriptors attached: the helper closes every
 * one it got at once (it kept the one until it left, and a second stayed
 * open for good), so each pipe's reader sees the end while the helper
 * still runs. */
static void refused_request_closes(int nfds)
{
	struct cd_msg m = { .magic = CD_MAGIC, .op = CD_ADD, .info.kind = SM_SHARE_POSIX_FD };
	struct cd_reply r;
	int sock, rd[2], wr[2];
	pid_t pid;

	pid = raw_helper(&sock);
	assert_int_equal(make_pipes(rd, wr, nfds), 0);
	assert_int_equal(send_with_fds(sock, &m, sizeof(m), wr, nfds), (ssize_t)sizeof(m));
	for (int i = 0; i < nfds; i++)
		close(wr[i]);
	take_reply(sock, &r);
	assert_int_equal(r.status, SM_ERR_INVALID);
	assert_non_null(strstr(r.msg, "mapping before hello"));
	holds_none_then_exits(pid, sock, rd, nfds);
}

static void test_refused_request_closes_fd(void **state)
{
	(void)state;
	refused_request_closes(1);
}

static void test_refused_request_closes_two_fds(void **state)
{
	(void)state;
	refused_request_closes(2);
}

/* Garbage on the socket means the client is not one of ours: it leaves. */
static void test_garbage_ends_helper(void **state)
{
	char junk[sizeof(struct cd_msg)];
	int sock;
	pid_t pid;

	(void)state;
	pid = raw_helper(&sock);
	memset(junk, 0x5a, sizeof(junk));
	assert_int_equal(send(sock, junk, sizeof(junk), 0), (ssize_t)sizeof(junk));
	assert_int_equal(exited_within(pid, 5000), 0);
	close(sock);
}

/* The client dies while a forked child of it still holds the socket (a
 * data-loader worker, say): no hang-up comes, yet the helper must not
 * outlive the job.  It notices it was re-parented (here to this process,
 * made a subreaper for the test) and exits. */
static void test_exits_when_client_dies(void **state)
{
	const char *path = helper_path();
	pid_t pids[2] = { -1, -1 }, client;	/* helper, grandchild */
	int p[2], status;

	(void)state;
	assert_int_equal(prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
	assert_int_equal(pipe(p), 0);
	client = fork();
	assert_true(client >= 0);
	if (client == 0) {
		int sock;

		struct cd_reply r;
		struct cd_msg m;

		pids[0] = spawn_helper(path, &sock);
		/* One answered request: the helper is past its start checks. */
		memset(&m, 0, sizeof(m));
		m.magic = CD_MAGIC;
		m.op = 77;
		if (send(sock, &m, sizeof(m), 0) != sizeof(m) || recv(sock, &r, sizeof(r), 0) != sizeof(r))
			_exit(2);
		pids[1] = fork();
		if (pids[1] == 0) {
			sleep(20);	/* holds the socket open */
			_exit(0);
		}
		_exit(write(p[1], pids, sizeof(pids)) == sizeof(pids) ? 0 : 1);
	}
	close(p[1]);
	assert_int_equal(read(p[0], pids, sizeof(pids)), (ssize_t)sizeof(pids));
	close(p[0]);
	assert_int_equal(waitpid(client, &status, 0), client);
	assert_true(pids[0] > 0 && pids[1] > 0);
	assert_int_equal(exited_within(pids[0], 3000), 0);
	kill(pids[1], SIGKILL);
	assert_int_equal(waitpid(pids[1], &status, 0), pids[1]);
	prctl(PR_SET_CHILD_SUBREAPER, 0);
}

/* Descriptors the client's process had open (NCCL's sockets) are not
 * kept by the helper, the one right after its socket included: a pipe's
 * reader sees the end while the helper runs. */
static void test_inherited_fds_closed(void **state)
{
	struct cd_msg m = { .magic = CD_MAGIC, .op = 77 };
	struct cd_reply r;
	int sock, rd[2], wr[2];
	pid_t pid;

	(void)state;
	assert_int_equal(make_pipes(rd, wr, 2), 0);
	pid = spawn_helper_with(helper_path(), &sock, wr[0]);
	assert_true(pid > 0);
	close(wr[0]);
	close(wr[1]);		/* wr[1] was inherited under its own number */
	ask(sock, &m, &r);	/* past its start */
	holds_none_then_exits(pid, sock, rd, 2);
}

/* CD_SLOTS copies in flight fill the ring: the next post starts nothing
 * (the caller retries) and takes no message number. */
static void test_full_ring_refuses_post(void **state)
{
	struct smf_helper *h;
	uint64_t seq = 0, last = 0;
	int started = 0;

	(void)state;
	h = start_standin("slow-first-add", NULL, &params);
	for (int i = 0; i < CD_SLOTS; i++) {
		assert_int_equal(smf_helper_post(h, 1, 0, 2, 0, 4096, &seq, &started), SM_OK);
		assert_int_equal(started, 1);
		assert_int_equal(seq, (uint64_t)i);
	}
	last = seq;
	seq = 77;
	assert_int_equal(smf_helper_post(h, 1, 0, 2, 0, 4096, &seq, &started), SM_OK);
	assert_int_equal(started, 0);
	assert_int_equal(seq, 77);
	assert_string_equal(smf_helper_state(h, 0), "posted");
	assert_string_equal(smf_helper_state(h, last), "posted");
	smf_helper_stop(h);
	assert_no_children();
}

/* Posts one copy (source `src`) and waits until the helper ended it;
 * returns what the test that saw it ended said. */
static int post_and_wait(struct smf_helper *h, uint32_t src, uint64_t *seq)
{
	uint64_t end = sm_now_ns() + 5000ull * 1000 * 1000;
	int started = 0, done = 0, rc;

	assert_int_equal(smf_helper_post(h, 1, 0, src, 0, 4096, seq, &started), SM_OK);
	assert_int_equal(started, 1);
	while ((rc = smf_helper_test(h, *seq, &done)) == SM_OK && !done)
		assert_true(sm_now_ns() < end);
	return rc;
}

/* Copies that ended, done or failed, give their slots back once tested:
 * the ring goes round more than once.  A failed one says why; a copy
 * tested again after its slot was reused is an error, not another copy's
 * result. */
static void test_ended_copies_free_slots(void **state)
{
	struct smf_helper *h;
	uint64_t seq = 0;
	int done = 1;

	(void)state;
	h = start_standin("serve-ring", NULL, &params);
	assert_int_equal(post_and_wait(h, 2, &seq), SM_OK);
	assert_int_equal(post_and_wait(h, 0, &seq), SM_ERR_CUDA);
	assert_non_null(strstr(sm_last_error(), "copy helper: stand-in: no mapping 0"));
	/* Round the ring: slots 0 (done) and 1 (failed) are taken again. */
	for (int i = 2; i <= CD_SLOTS + 1; i++)
		assert_int_equal(post_and_wait(h, i % 2 ? 0 : 2, &seq),
				 i % 2 ? SM_ERR_CUDA : SM_OK);
	assert_int_equal(seq, CD_SLOTS + 1);
	assert_int_equal(smf_helper_test(h, 0, &done), SM_ERR_INTERNAL);
	assert_int_equal(done, 0);
	assert_non_null(strstr(sm_last_error(), "copy 0 tested after its slot was reused"));
	assert_string_equal(smf_helper_state(h, 0), "reused");
	smf_helper_stop(h);
	assert_no_children();
}

/* With landing words a copy is done for the client as soon as its ticket
 * reached its stream's word, before the helper ended the request; the
 * slot is posted into again only once the helper has. */
static void test_landing_word_done_before_helper_ends(void **state)
{
	struct smf_helper *h;
	uint64_t seq = 0, end;
	int started = 0, done = 0;

	(void)state;
	h = start_standin("serve-words", "400", &params);
	assert_int_equal(smf_helper_post(h, 1, 0, 2, 0, 4096, &seq, &started), SM_OK);
	assert_int_equal(started, 1);
	for (end = sm_now_ns() + 200ull * 1000 * 1000; !done; usleep(10)) {
		assert_int_equal(smf_helper_test(h, seq, &done), SM_OK);
		assert_true(sm_now_ns() < end);		/* long before the request ends */
	}
	assert_string_equal(smf_helper_state(h, seq), "queued");
	for (int i = 1; i < CD_SLOTS; i++)
		assert_int_equal(post_and_wait(h, 2, &seq), SM_OK);
	/* Slot 0 again: held until the helper ends request 0. */
	assert_int_equal(smf_helper_post(h, 1, 0, 2, 0, 4096, &seq, &started), SM_OK);
	for (end = sm_now_ns() + 5000ull * 1000 * 1000; !started; usleep(100)) {
		assert_int_equal(smf_helper_post(h, 1, 0, 2, 0, 4096, &seq, &started), SM_OK);
		assert_true(sm_now_ns() < end);
	}
	assert_int_equal(seq, CD_SLOTS);
	smf_helper_stop(h);
	assert_no_children();
}

/* A copy given up before it ended (here one that then fails) gives its
 * slot back once the helper ended it, without a test. */
static void test_abandoned_failed_copy_frees_slot(void **state)
{
	struct smf_helper *h;
	uint64_t seq = 0, end;
	int started = 0;

	(void)state;
	h = start_standin("serve-ring", NULL, &params);
	assert_int_equal(smf_helper_post(h, 1, 0, 0, 0, 4096, &seq, &started), SM_OK);
	assert_int_equal(started, 1);
	smf_helper_abandon(h, seq);
	for (end = sm_now_ns() + 5000ull * 1000 * 1000;
	     strcmp(smf_helper_state(h, 0), "failed") != 0; usleep(100))
		assert_true(sm_now_ns() < end);
	for (int i = 1; i < CD_SLOTS; i++)
		assert_int_equal(post_and_wait(h, 2, &seq), SM_OK);
	assert_int_equal(post_and_wait(h, 2, &seq), SM_OK);	/* in the abandoned slot */
	assert_int_equal(seq, CD_SLOTS);
	smf_helper_stop(h);
	assert_no_children();
}

/* A mapping answered without a name, or with an answer that is not one,
 * fails: the first with the reason, the second as a helper gone. */
static void test_bad_add_answers(void **state)
{
	struct sm_share_info info;
	struct smf_helper *h;
	uint32_t id = 77;

	(void)state;
	h = start_standin("serve-ring", NULL, &params);
	memset(&info, 0, sizeof(info));
	info.kind = SM_SHARE_LEGACY_IPC;
	info.alloc_size = 4096;
	assert_int_equal(smf_helper_add(h, (int)getpid(), &info, -1, &id), SM_OK);
	assert_int_equal(id, 1);
	info.alloc_size = 1;
	assert_int_equal(smf_helper_add(h, (int)getpid(), &info, -1, &id), SM_ERR_SYSTEM);
	assert_int_equal(id, 0);
	assert_non_null(strstr(sm_last_error(), "answered a mapping without a name"));
	info.alloc_size = 2;
	id = 77;
	assert_int_equal(smf_helper_add(h, (int)getpid(), &info, -1, &id), SM_ERR_SYSTEM);
	assert_int_equal(id, 0);
	assert_non_null(strstr(sm_last_error(), "has exited"));
	smf_helper_stop(h);
	assert_no_children();
}

/* Tests posted mapping `ticket` until it is answered (2 s at most). */
static int add_wait(struct smf_helper *h, uint64_t ticket, uint32_t *id)
{
	uint64_t end = sm_now_ns() + 2000000000ull;
	int done = 0, rc = SM_OK;

	while (!done && sm_now_ns() < end) {
		rc = smf_helper_add_test(h, ticket, &done, id);
		if (!done)
			usleep(100);
	}
	assert_true(done);
	return rc;
}

/* Mappings posted without waiting (NCCL's progress thread) and one
 * request that waits share the socket: each gets its own answer, in the
 * order they were sent, whoever reads it. */
static void test_posted_adds_keep_their_answers(void **state)
{
	struct sm_share_info info;
	struct smf_helper *h;
	uint64_t t1, t2;
	uint32_t id = 77;
	int posted;

	(void)state;
	h = start_standin("serve-ring", NULL, &params);
	memset(&info, 0, sizeof(info));
	info.kind = SM_SHARE_LEGACY_IPC;
	info.alloc_size = 4096;
	assert_int_equal(smf_helper_add_post(h, (int)getpid(), &info, -1, &t1, &posted), SM_OK);
	assert_true(posted);
	assert_int_equal(smf_helper_add_post(h, (int)getpid(), &info, -1, &t2, &posted), SM_OK);
	assert_true(posted);
	assert_int_equal(smf_helper_add(h, (int)getpid(), &info, -1, &id), SM_OK);
	assert_int_equal(id, 3);
	assert_int_equal(add_wait(h, t2, &id), SM_OK);
	assert_int_equal(id, 2);
	assert_int_equal(add_wait(h, t1, &id), SM_OK);
	assert_int_equal(id, 1);
	info.alloc_size = 1;	/* answered without a name */
	assert_int_equal(smf_helper_add_post(h, (int)getpid(), &info, -1, &t1, &posted), SM_OK);
	assert_int_equal(add_wait(h, t1, &id), SM_ERR_SYSTEM);
	assert_int_equal(id, 0);
	assert_non_null(strstr(sm_last_error(), "answered a mapping without a name"));
	smf_helper_stop(h);
	assert_no_children();
}

/* A posted mapping unanswered past the request time gives the helper up,
 * as a waiting request does, and a later one is refused. */
static void test_posted_add_late_gives_up(void **state)
{
	struct smf_helper_params quick = params;
	struct sm_share_info info;
	struct smf_helper *h;
	uint32_t id = 77;
	uint64_t t;
	int posted;

	(void)state;
	quick.request_timeout_ms = 200;
	h = start_standin("slow-first-add", "500", &quick);
	memset(&info, 0, sizeof(info));
	info.kind = SM_SHARE_LEGACY_IPC;
	assert_int_equal(smf_helper_add_post(h, (int)getpid(), &info, -1, &t, &posted), SM_OK);
	assert_true(posted);
	assert_int_equal(add_wait(h, t, &id), SM_ERR_SYSTEM);
	assert_int_equal(id, 0);
	assert_non_null(strstr(sm_last_error(), "did not answer in 0.2 s"));
	assert_int_equal(smf_helper_add_post(h, (int)getpid(), &info, -1, &t, &posted),
			 SM_ERR_SYSTEM);
	assert_false(posted);
	smf_helper_stop(h);
	assert_no_children();
}

/* Started by hand by anyone but the client it names, it does not run. */
static void test_wrong_parent(void **state)
{
	char *argv[] = { (char *)helper_path(), "1", NULL };
	pid_t pid;

	(void)state;
	assert_int_equal(posix_spawn(&pid, argv[0], NULL, NULL, argv, environ), 0);
	assert_int_equal(exited_within(pid, 5000), 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_missing_binary),
		cmocka_unit_test(test_no_gpu_refusal),
		cmocka_unit_test(test_helper_exits_at_start),
		cmocka_unit_test(test_helper_signals_reset),
		cmocka_unit_test(test_helper_env_all_gpus),
		cmocka_unit_test(test_late_answer_not_taken),
		cmocka_unit_test(test_exited_helper_reaped),
		cmocka_unit_test(test_refusals_then_hangup),
		cmocka_unit_test(test_bad_ring_refused),
		cmocka_unit_test(test_short_hello_names_versions),
		cmocka_unit_test(test_hello_without_version_ends_helper),
		cmocka_unit_test(test_short_request_ends_helper),
		cmocka_unit_test(test_refused_request_closes_fd),
		cmocka_unit_test(test_refused_request_closes_two_fds),
		cmocka_unit_test(test_garbage_ends_helper),
		cmocka_unit_test(test_wrong_parent),
		cmocka_unit_test(test_inherited_fds_closed),
		cmocka_unit_test(test_full_ring_refuses_post),
		cmocka_unit_test(test_ended_copies_free_slots),
		cmocka_unit_test(test_landing_word_done_before_helper_ends),
		cmocka_unit_test(test_abandoned_failed_copy_frees_slot),
		cmocka_unit_test(test_bad_add_answers),
		cmocka_unit_test(test_posted_adds_keep_their_answers),
		cmocka_unit_test(test_posted_add_late_gives_up),
		cmocka_unit_test(test_exits_when_client_dies),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
