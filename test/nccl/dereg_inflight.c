/* GPU check: a send buffer deregistered while its copy is queued in or
 * running on the copy helper (what NCCL may do after an abort) must not
 * poison the helper.  Two processes (receiver on GPU 0, sender on GPU 1)
 * open two connections through the plugin's exported v11 table.  On the
 * first, the sender deregisters its 256 MiB buffer right after isend: that
 * transfer may land whole or fail cleanly on both ends, nothing else.  On
 * the second, a fresh buffer through the same helper must land byte for
 * byte.  Exit status 0 only then.
 * Usage: SYMMEM_PLUGIN=... dereg_inflight */
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../mp/harness.h"

#define SIZE (256u << 20)

static uint8_t *host;

/* A GPU buffer holding pattern `msg` (sender) or poison (receiver). */
static void *gpu_buffer(int fill, uint64_t msg)
{
	void *p = NULL;

	if (cudaMalloc(&p, SIZE) != cudaSuccess)
		return NULL;
	if (fill)
		pattern_fill(host, SIZE, msg);
	else
		memset(host, 0xa5, SIZE);
	if (cudaMemcpy(p, host, SIZE, cudaMemcpyHostToDevice) != cudaSuccess)
		return NULL;
	return p;
}

/* 0 when the GPU buffer holds pattern `msg` whole. */
static int gpu_check(void *p, uint64_t msg)
{
	if (cudaMemcpy(host, p, SIZE, cudaMemcpyDeviceToHost) != cudaSuccess)
		return -1;
	return pattern_check(host, SIZE, msg) == SIZE ? 0 : -1;
}

static int sender(int sock)
{
	char handle[2][NCCL_NET_HANDLE_MAXSIZE];
	void *ctx, *comm[2] = { NULL, NULL }, *buf[2], *mh[2], *req;
	int rc;

	if (cudaSetDevice(1) != cudaSuccess || cudaFree(NULL) != cudaSuccess ||
	    !(ctx = harness_init()) || harness_recv_all(sock, handle, sizeof(handle)))
		return 2;
	for (int i = 0; i < 2; i++)
		while (!comm[i])
			if (net->connect(ctx, 1, handle[i], &comm[i], NULL))
				return 3;
	for (int i = 0; i < 2; i++)
		if (!(buf[i] = gpu_buffer(1, (uint64_t)i + 1)) ||
		    net->regMr(comm[i], buf[i], SIZE, NCCL_PTR_CUDA, &mh[i]))
			return 4;
	/* Connection 0: deregistered while the helper holds the copy. */
	if (harness_isend(comm[0], buf[0], SIZE, mh[0], &req, 10))
		return 5;
	usleep(100);
	if (net->deregMr(comm[0], mh[0]))
		return 6;
	rc = harness_wait(req, NULL, 30);
	printf("sender: connection 0 after deregMr in flight: %s\n",
	       rc ? "failed cleanly" : "landed");
	/* Connection 1: the same helper must still copy. */
	if (harness_isend(comm[1], buf[1], SIZE, mh[1], &req, 10) || harness_wait(req, NULL, 30))
		return 7;
	if (net->deregMr(comm[1], mh[1]) || net->closeSend(comm[0]) || net->closeSend(comm[1]))
		return 8;
	cudaFree(buf[0]);
	cudaFree(buf[1]);
	/* The helper stopped with the last close; its stop line says whether
	 * the deregistration met the copy in the helper (the path this checks)
	 * or came before the helper took it (the copy then fails cleanly). */
	printf("sender: the helper %s\n",
	       harness_info_count("1 mapping(s) dropped while copies named them") ?
	       "kept the dropped mapping until its copy ended" :
	       "saw the deregistration before the copy");
	return net->finalize(ctx) ? 9 : 0;
}

static int receiver(int sock, int *first_landed)
{
	char handle[2][NCCL_NET_HANDLE_MAXSIZE];
	void *ctx, *lc[2], *comm[2] = { NULL, NULL }, *buf[2], *mh[2], *req[2];
	int tags[1] = { 0 }, rc;
	size_t cap = SIZE;

	if (cudaSetDevice(0) != cudaSuccess || cudaFree(NULL) != cudaSuccess ||
	    !(ctx = harness_init()))
		return 2;
	for (int i = 0; i < 2; i++)
		if (net->listen(ctx, 0, handle[i], &lc[i]))
			return 2;
	if (harness_send_all(sock, handle, sizeof(handle)))
		return 2;
	for (int i = 0; i < 2; i++) {
		while (!comm[i])
			if (net->accept(lc[i], &comm[i], NULL))
				return 3;
		net->closeListen(lc[i]);
		if (!(buf[i] = gpu_buffer(0, 0)) ||
		    net->regMr(comm[i], buf[i], SIZE, NCCL_PTR_CUDA, &mh[i]) ||
		    net->irecv(comm[i], 1, &buf[i], &cap, tags, &mh[i], NULL, &req[i]))
			return 4;
	}
	/* Connection 1 first: a sender whose connection 0 failed closes it
	 * only after connection 1 is done. */
	if (harness_wait(req[1], NULL, 30) || gpu_check(buf[1], 2)) {
		printf("receiver: connection 1 did not land right\n");
		return 6;
	}
	printf("receiver: connection 1 landed, every byte right\n");
	rc = harness_wait(req[0], NULL, 30);
	*first_landed = !rc;
	if (!rc && gpu_check(buf[0], 1)) {
		printf("receiver: connection 0 reported done with wrong bytes\n");
		return 5;
	}
	printf("receiver: connection 0: %s\n", rc ? "failed cleanly" : "landed, every byte right");
	for (int i = 0; i < 2; i++)
		if (net->deregMr(comm[i], mh[i]) || net->closeRecv(comm[i]))
			return 7;
	cudaFree(buf[0]);
	cudaFree(buf[1]);
	return net->finalize(ctx) ? 8 : 0;
}

int main(void)
{
	int sv[2], status, rc, landed = 0;
	pid_t pid;

	host = malloc(SIZE);
	if (!host || !harness_open() || socketpair(AF_UNIX, SOCK_STREAM, 0, sv))
		return 1;
	pid = fork();
	if (pid == 0) {
		rc = sender(sv[1]);
		fflush(stdout);
		_exit(rc);
	}
	rc = receiver(sv[0], &landed);
	if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status)) {
		printf("dereg_inflight: sender process died\n");
		return 1;
	}
	printf("dereg_inflight: receiver %d, sender %d: %s\n", rc, WEXITSTATUS(status),
	       !rc && !WEXITSTATUS(status) ? "PASS" : "FAIL");
	return rc || WEXITSTATUS(status);
}
