/* The net plugin's optional calls that reach an inner net plugin
 * (getDeviceMr, irecvConsumed, makeVDevice, v12's getProperties with rail
 * and plane, and regMrDmaBuf).  The exported tables do not point at
 * getDeviceMr and makeVDevice, so this program links the plugin's sources
 * and calls them all by name, between ranks posed on two hosts (hosts.h), with the
 * stand-in (inner_standin.c) counting what reached it.  meson sets
 * NCCL_SYMMEM_INNER_NET to the v12 stand-in. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "hosts.h"
#include "net.h"
#include "standin_log.h"

extern ncclNet_v11_t ncclNetPlugin_v11;

static void *rank_init(int rank)
{
	net = &ncclNetPlugin_v11;
	return standin_rank_init(rank, 7, -1);
}

/* The device NCCL's v12 table would show: the stand-in's rail and plane. */
static int check_properties(void)
{
	ncclNetProperties_v12_t p;

	if (net_get_properties_v12(1, &p) != ncclSuccess)
		return -1;
	return strcmp(p.name, "standin1") == 0 && p.railId == 1 && p.planeId == 7 &&
	       (!(p.ptrSupport & NCCL_PTR_DMABUF) || (p.ptrSupport & NCCL_PTR_CUDA)) &&
	       p.maxRecvs == 4 ? 0 : -1;
}

/* Merging the two devices makes a third, which NCCL counts from then on
 * (through either form of the call). */
static int check_vdevice(void)
{
	ncclNetVDeviceProps_v12_t v12 = { .ndevs = 2, .devs = { 0, 1 } };
	ncclNetVDeviceProps_v11_t v11 = { .ndevs = 2, .devs = { 1, 0 } };
	ncclNetProperties_v12_t p;
	int d = -1, n = 0;

	if (net_make_vdevice_v12(&d, &v12) != ncclSuccess || d != 2)
		return -1;
	if (net_devices(&n) != ncclSuccess || n != 3)
		return -1;
	if (net_get_properties_v12(2, &p) != ncclSuccess || p.vProps.ndevs != 2)
		return -1;
	if (net_make_vdevice(&d, &v11) != ncclSuccess || d != 3)
		return -1;
	return net_devices(&n) == ncclSuccess && n == 4 ? 0 : -1;
}

/* Rank 0 sends one message from a DMA-BUF registration, rank 1 receives
 * it and says it was consumed, as NCCL does once the GPU read it. */
static int slots_rank(int rank, int ctl, void *arg)
{
	char mine[NCCL_NET_HANDLE_MAXSIZE], theirs[NCCL_NET_HANDLE_MAXSIZE];
	uint8_t buf[4096];
	size_t cap = sizeof(buf);
	void *ctx, *lc, *send, *recv, *mh, *dptr = NULL, *req = NULL;
	int fd = open("/dev/null", O_RDONLY | O_CLOEXEC), tag = 3, got = 0;
	double end = harness_now() + 10;

	(void)arg;
	ctx = rank_init(rank);
	if (!ctx || fd < 0)
		return 10;
	if (check_properties())
		return 11;
	if (net_listen(ctx, 0, mine, &lc) || hosts_swap_handle(ctl, mine, theirs) ||
	    hosts_pair_up(ctx, 0, theirs, lc, &send, &recv) || net_close_listen(lc))
		return 12;
	if (rank == 0) {
		if (net_reg_mr_dma_buf(send, buf, sizeof(buf), NCCL_PTR_CUDA, 0, fd, &mh))
			return 13;
		/* The fd is NCCL's, closed when the call returns. */
		close(fd);
		if (net_get_device_mr(send, mh, &dptr) || !dptr)
			return 14;
		pattern_fill(buf, sizeof(buf), 5);
		do {
			if (net_isend(send, buf, sizeof(buf), tag, mh, NULL, &req))
				return 15;
		} while (!req && harness_now() < end);
		if (!req || harness_wait(req, NULL, 10))
			return 16;
		if (net_dereg_mr(send, mh))
			return 17;
	} else {
		void *data = buf;

		close(fd);
		if (check_vdevice())
			return 20;
		if (net_reg_mr(recv, buf, sizeof(buf), NCCL_PTR_HOST, &mh))
			return 21;
		if (net_irecv(recv, 1, &data, &cap, &tag, &mh, NULL, &req) || !req)
			return 22;
		if (harness_wait(req, &got, 10) || got != (int)sizeof(buf) ||
		    pattern_check(buf, sizeof(buf), 5) != sizeof(buf))
			return 23;
		if (net_irecv_consumed(recv, 1, req) != ncclSuccess)
			return 24;
		/* Once only: the request is the plugin's again. */
		if (net_irecv_consumed(recv, 1, req) != ncclInternalError ||
		    harness_warn_count() != 1)
			return 25;
		if (net_dereg_mr(recv, mh))
			return 26;
	}
	if (net_close_send(send) || net_close_recv(recv) || net_finalize(ctx))
		return 27;
	return harness_warn_count() == rank ? 0 : 28;
}

static void test_optional_slots_forwarded(void **state)
{
	static const int host[2] = { 0, 1 };
	struct hosts_job job;

	(void)state;
	if (!hosts_can_pose()) {
		print_message("# cannot make a PID namespace here (not root?): skipped\n");
		skip();
	}
	assert_int_equal(hosts_start(&job, 2, host, slots_rank, NULL), 0);
	assert_int_equal(hosts_ring_handles(&job), 0);
	assert_int_equal(hosts_wait(&job), 0);
	assert_int_equal(standin_log_count("rank0 send dev=0 messages=1 bytes=4096 regs=1 deregs=1 "
				 "dmabufs=1 flushes=0 hints=0 consumed=0 devmrs=1 held=0"), 1);
	assert_int_equal(standin_log_count("rank1 recv dev=0 messages=1 bytes=4096 regs=1 deregs=1 "
				 "dmabufs=0 flushes=0 hints=0 consumed=1 devmrs=0 held=0"), 1);
	assert_int_equal(standin_log_count("rank1 vdevice d=2 ndevs=2"), 1);
	assert_int_equal(standin_log_count("rank1 vdevice d=3 ndevs=2"), 1);
}

/* Without an inner plugin: no device merges, no device handles, and a
 * receive consumed is nothing to this plugin's path. */
static int child_own_path(void)
{
	ncclNetVDeviceProps_v12_t v = { .ndevs = 2, .devs = { 0, 0 } };
	void *ctx, *send, *recv, *mh, *dptr = &dptr;
	int d, buf[4];

	unsetenv("NCCL_SYMMEM_INNER_NET");
	ctx = rank_init(0);
	if (!ctx || harness_pair(ctx, &send, &recv))
		return 10;
	if (net_make_vdevice_v12(&d, &v) != ncclInvalidUsage || harness_warn_count() != 1)
		return 11;
	if (net_reg_mr(recv, buf, sizeof(buf), NCCL_PTR_HOST, &mh) ||
	    net_get_device_mr(recv, mh, &dptr) || dptr)
		return 12;
	if (net_irecv_consumed(recv, 1, (void *)&buf) != ncclSuccess)
		return 13;
	if (net_dereg_mr(recv, mh) || net_close_send(send) || net_close_recv(recv) ||
	    net_finalize(ctx))
		return 14;
	return harness_warn_count() == 1 ? 0 : 15;
}

static void test_own_path_slots(void **state)
{
	pid_t pid = fork();
	int status;

	(void)state;
	if (pid == 0)
		_exit(child_own_path());
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
}

static int setup(void **state)
{
	(void)state;
	if (standin_log_create())
		return -1;
	return getenv("NCCL_SYMMEM_INNER_NET") ? 0 : -1;
}

static int teardown(void **state)
{
	(void)state;
	standin_log_remove();
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_optional_slots_forwarded),
		cmocka_unit_test(test_own_path_slots),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
