/* symmem-info's child processes: every GPU question and every self-test
 * side runs in a child (a process that initialised CUDA cannot fork one
 * that uses it), reports through a pipe, and is waited for with a
 * deadline, then killed: the tool never hangs on a stuck driver. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <poll.h>
#include <time.h>
#include <unistd.h>

#include "info.h"
#include "symmem.h"

uint64_t proc_deadline(double seconds)
{
	return sm_now_ns() + (uint64_t)(seconds * 1e9);
}

static int ms_left(uint64_t deadline)
{
	uint64_t now = sm_now_ns();

	if (now >= deadline)
		return 0;
	return (int)((deadline - now) / 1000000 + 1);
}

/* How long a killed child may take to go. */
#define REAP_AFTER_KILL_NS (2ull * 1000 * 1000 * 1000)

pid_t proc_start(int (*fn)(void *arg, int wr), void *arg, int *rd)
{
	int p[2];
	pid_t pid;

	if (pipe2(p, O_CLOEXEC))
		return -1;
	fflush(stdout);
	fflush(stderr);
	pid = fork();
	if (pid < 0) {
		close(p[0]);
		close(p[1]);
		return -1;
	}
	if (pid == 0) {
		close(p[0]);
		/* The report is the parent's stdout: a library the child opens
		 * (any NCCL_NET_PLUGIN) may print on load, so its prints go to
		 * stderr and --json stays JSON. */
		dup2(STDERR_FILENO, STDOUT_FILENO);
		_exit(fn(arg, p[1]));
	}
	close(p[1]);
	*rd = p[0];
	return pid;
}

int proc_read(int fd, void *buf, size_t len, uint64_t deadline)
{
	uint8_t *b = buf;

	while (len) {
		ssize_t n;

		/* Past the deadline, still take what is there: children share
		 * one deadline, and one that answered must not be lost because
		 * another hung until it. */
		if (sm_wait_fd(fd, POLLIN, ms_left(deadline)) <= 0)
			return -1;
		n = read(fd, b, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		b += n;
		len -= (size_t)n;
	}
	return 0;
}

int proc_write(int fd, const void *buf, size_t len)
{
	const uint8_t *b = buf;

	while (len) {
		ssize_t n = write(fd, b, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		b += n;
		len -= (size_t)n;
	}
	return 0;
}

int proc_send_fd(int sock, const void *buf, size_t len, int fd, uint64_t deadline)
{
	const uint8_t *b = buf;

	while (len) {
		ssize_t n = sm_send_some(sock, b, len, fd);
		int ms;

		if (n < 0)
			return -1;
		if (n > 0) {
			fd = -1;	/* it went with the first byte */
			b += n;
			len -= (size_t)n;
			continue;
		}
		ms = ms_left(deadline);
		if (!ms || sm_wait_fd(sock, POLLOUT, ms) <= 0)
			return -1;
	}
	return 0;
}

int proc_recv_fd(int sock, void *buf, size_t len, int *fd, uint64_t deadline)
{
	uint8_t *b = buf;

	*fd = -1;
	while (len) {
		ssize_t n = sm_recv_some(sock, b, len, fd);
		int ms;

		if (n < 0)
			goto fail;
		if (n > 0) {
			b += n;
			len -= (size_t)n;
			continue;
		}
		ms = ms_left(deadline);
		if (!ms || sm_wait_fd(sock, POLLIN, ms) <= 0)
			goto fail;
	}
	return 0;
fail:
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
	return -1;
}

/* Waits for pid to end until deadline: 1 ended (*status set), 0 still
 * running, -1 not ours to wait for. */
static int wait_until(pid_t pid, uint64_t deadline, int *status)
{
	for (;;) {
		pid_t r = waitpid(pid, status, WNOHANG);

		if (r == pid)
			return 1;
		if (r < 0 && errno != EINTR)
			return -1;
		if (sm_now_ns() >= deadline)
			return 0;
		nanosleep(&(struct timespec){ .tv_nsec = 2000000 }, NULL);
	}
}

int proc_reap(pid_t pid, uint64_t deadline)
{
	int status, rc = wait_until(pid, deadline, &status);

	if (rc)
		return rc > 0 && WIFEXITED(status) ? WEXITSTATUS(status) : -1;
	/* A child stuck in the driver (uninterruptible sleep) may outlive
	 * SIGKILL for a while: wait a bounded time, then leave it behind
	 * rather than hang the tool. */
	kill(pid, SIGKILL);
	wait_until(pid, sm_now_ns() + REAP_AFTER_KILL_NS, &status);
	return -1;
}
