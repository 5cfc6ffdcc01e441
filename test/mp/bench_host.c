/* Host-memory throughput between two processes through the plugin's
 * exported v11 table: one sender process, one receiver, messages of a fixed
 * size with up to 8 in flight (NCCL's NCCL_STEPS), every byte checked once
 * up front and the timed run after it.
 * Usage: SYMMEM_PLUGIN=... bench_host [size_bytes] [messages] */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

enum { WINDOW = 8 };

static int pump(void *comm, int sending, size_t size, int count, uint8_t **bufs)
{
	void *reqs[WINDOW] = { 0 };

	for (int m = 0; m < count + WINDOW; m++) {
		int slot = m % WINDOW;

		if (m >= WINDOW && harness_wait(reqs[slot], NULL, 30))
			return -1;
		if (m >= count)
			continue;
		if (sending) {
			if (harness_isend(comm, bufs[slot], size, NULL, &reqs[slot], 30))
				return -1;
		} else {
			void *d = bufs[slot];
			size_t cap = size;

			if (net->irecv(comm, 1, &d, &cap, (int[]){ 0 }, NULL, NULL, &reqs[slot]))
				return -1;
		}
	}
	return 0;
}

int main(int argc, char **argv)
{
	size_t size = argc > 1 ? strtoull(argv[1], NULL, 0) : 1 << 20;
	int count = argc > 2 ? atoi(argv[2]) : 2000;
	char handle[NCCL_NET_HANDLE_MAXSIZE];
	uint8_t *bufs[WINDOW];
	void *ctx, *lc, *comm = NULL;
	int sv[2], status;
	double t0, dt;
	pid_t pid;

	if (!harness_open() || socketpair(AF_UNIX, SOCK_STREAM, 0, sv))
		return 1;
	for (int i = 0; i < WINDOW; i++) {
		bufs[i] = malloc(size);
		pattern_fill(bufs[i], size, (uint64_t)i);
	}
	pid = fork();
	if (pid == 0) {
		if (!(ctx = harness_init()) || harness_recv_all(sv[1], handle, sizeof(handle)))
			_exit(2);
		while (!comm)
			if (net->connect(ctx, 0, handle, &comm, NULL))
				_exit(3);
		/* first round checked, second timed */
		_exit(pump(comm, 1, size, WINDOW, bufs) || pump(comm, 1, size, count, bufs) ? 4 : 0);
	}
	if (!(ctx = harness_init()) || net->listen(ctx, 0, handle, &lc) ||
	    harness_send_all(sv[0], handle, sizeof(handle)))
		return 1;
	while (!comm)
		if (net->accept(lc, &comm, NULL))
			return 1;
	for (int i = 0; i < WINDOW; i++)
		memset(bufs[i], 0, size);
	if (pump(comm, 0, size, WINDOW, bufs))
		return 1;
	for (int i = 0; i < WINDOW; i++)
		if (pattern_check(bufs[i], size, (uint64_t)i) != size) {
			fprintf(stderr, "message %d arrived wrong\n", i);
			return 1;
		}
	t0 = harness_now();
	if (pump(comm, 0, size, count, bufs))
		return 1;
	dt = harness_now() - t0;
	waitpid(pid, &status, 0);
	printf("%zu-byte messages, %d in flight: %.2f GB/s (%.1f us per message)\n", size, WINDOW,
	       (double)size * count / dt / 1e9, dt / count * 1e6);
	return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
}
