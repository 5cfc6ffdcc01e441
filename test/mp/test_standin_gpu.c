/* The stand-in inner net plugin's GPU mode (INNER_STANDIN_GPU=1,
 * standin_gpu.h), on its own table, against the fake driver of
 * test/fakedriver/, whose "GPU memory" the CPU cannot touch: it offers
 * NCCL_PTR_CUDA (and DMA-BUF only when asked), and every byte between
 * GPU buffers, grouped receives with a host buffer among them included,
 * arrives through its copies.  So scripts/gpu_check.sh hosts runs a
 * stand-in already known to move GPU bytes right.
 *
 * meson sets INNER_STANDIN_SO (the v12 stand-in), INNER_STANDIN_LOG's
 * directory and LD_LIBRARY_PATH (the fake driver's directory). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "nccl_abi.h"
#include "standin_log.h"

#define BIG (1u << 20)

static ncclNet_v12_t *t;
static void *(*dev_alloc)(size_t);
static void (*dev_read)(void *, const void *, size_t);
static void (*dev_write)(void *, const void *, size_t);

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static void open_all(void)
{
	void *lib = dlopen(getenv("INNER_STANDIN_SO"), RTLD_NOW | RTLD_LOCAL);
	void *cu = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);

	assert_non_null(lib);
	assert_non_null(cu);
	t = dlsym(lib, "ncclNetPlugin_v12");
	*(void **)&dev_alloc = dlsym(cu, "fake_dev_alloc");
	*(void **)&dev_read = dlsym(cu, "fake_dev_read");
	*(void **)&dev_write = dlsym(cu, "fake_dev_write");
	assert_non_null(t);
	assert_non_null(dev_alloc);
}

static void pair(void *ctx, void **send, void **recv)
{
	char h[NCCL_NET_HANDLE_MAXSIZE] = { 0 };
	void *lc;
	double end = now() + 10;

	assert_int_equal(t->listen(ctx, 0, h, &lc), ncclSuccess);
	*send = *recv = NULL;
	while ((!*send || !*recv) && now() < end) {
		if (!*send)
			assert_int_equal(t->connect(ctx, 0, h, send, NULL), ncclSuccess);
		if (!*recv)
			assert_int_equal(t->accept(lc, recv, NULL), ncclSuccess);
	}
	assert_non_null(*send);
	assert_non_null(*recv);
	assert_int_equal(t->closeListen(lc), ncclSuccess);
}

static void wait_done(void *req, int *sizes)
{
	double end = now() + 10;
	int done = 0;

	while (!done && now() < end)
		assert_int_equal(t->test(req, &done, sizes), ncclSuccess);
	assert_true(done);
}

static void fill(uint8_t *b, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		b[i] = (uint8_t)(i * 131 + seed);
}

/* GPU to GPU, several sizes; then a group of GPU, host and GPU buffers. */
static void test_gpu_bytes_through_copies(void **state)
{
	static uint8_t want[BIG], got[BIG], host_in[4096];
	static const size_t sizes[] = { 0, 1, 4093, BIG };
	ncclNetProperties_v12_t p;
	ncclNetCommConfig_v11_t cfg = { .trafficClass = -1 };
	void *ctx = NULL, *send, *recv, *smh, *rmh, *rmh2, *hmh, *sreq, *rreq;
	uint8_t *sdev = dev_alloc(BIG), *rdev = dev_alloc(BIG), *rdev2 = dev_alloc(BIG);
	int tag = 3, got_sizes[3];

	(void)state;
	assert_non_null(rdev2);
	assert_int_equal(t->init(&ctx, 1, &cfg, NULL, NULL), ncclSuccess);
	assert_int_equal(t->getProperties(0, &p), ncclSuccess);
	assert_int_equal(p.ptrSupport, NCCL_PTR_HOST | NCCL_PTR_CUDA);
	pair(ctx, &send, &recv);
	assert_int_equal(t->regMr(send, sdev, BIG, NCCL_PTR_CUDA, &smh), ncclSuccess);
	assert_int_equal(t->regMr(recv, rdev, BIG, NCCL_PTR_CUDA, &rmh), ncclSuccess);
	assert_int_equal(t->regMr(recv, rdev2, BIG, NCCL_PTR_CUDA, &rmh2), ncclSuccess);
	assert_int_equal(t->regMr(recv, host_in, sizeof(host_in), NCCL_PTR_HOST, &hmh),
			 ncclSuccess);
	for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
		size_t n = sizes[k], cap = BIG;
		void *rb = rdev;
		int s = 0;

		fill(want, BIG, (unsigned)k);
		dev_write(sdev, want, BIG);
		rreq = sreq = NULL;
		assert_int_equal(t->irecv(recv, 1, &rb, &cap, &tag, &rmh, NULL, &rreq),
				 ncclSuccess);
		while (!sreq)
			assert_int_equal(t->isend(send, sdev, n, tag, smh, NULL, &sreq),
					 ncclSuccess);
		wait_done(sreq, NULL);
		wait_done(rreq, &s);
		assert_int_equal(s, (int)n);
		dev_read(got, rdev, n);
		assert_memory_equal(got, want, n);
		assert_int_equal(t->irecvConsumed(recv, 1, rreq), ncclSuccess);
	}
	{
		void *bufs[3] = { rdev, host_in, rdev2 }, *mhs[3] = { rmh, hmh, rmh2 };
		size_t caps[3] = { BIG, sizeof(host_in), BIG };
		int tags[3] = { 1, 2, 3 };
		const size_t n[3] = { 5000, 4096, 70000 };

		rreq = NULL;
		assert_int_equal(t->irecv(recv, 3, bufs, caps, tags, mhs, NULL, &rreq),
				 ncclSuccess);
		for (int i = 0; i < 3; i++) {
			fill(want, n[i], 50u + (unsigned)i);
			dev_write(sdev, want, n[i]);
			sreq = NULL;
			while (!sreq)
				assert_int_equal(t->isend(send, sdev, n[i], tags[i], smh, NULL,
							  &sreq), ncclSuccess);
			wait_done(sreq, NULL);
		}
		wait_done(rreq, got_sizes);
		for (int i = 0; i < 3; i++) {
			fill(want, n[i], 50u + (unsigned)i);
			assert_int_equal(got_sizes[i], (int)n[i]);
			if (i == 1)
				memcpy(got, host_in, n[i]);
			else
				dev_read(got, bufs[i], n[i]);
			assert_memory_equal(got, want, n[i]);
		}
		assert_int_equal(t->irecvConsumed(recv, 3, rreq), ncclSuccess);
	}
	assert_int_equal(t->deregMr(send, smh), ncclSuccess);
	assert_int_equal(t->deregMr(recv, rmh), ncclSuccess);
	assert_int_equal(t->deregMr(recv, rmh2), ncclSuccess);
	assert_int_equal(t->deregMr(recv, hmh), ncclSuccess);
	assert_int_equal(t->closeSend(send), ncclSuccess);
	assert_int_equal(t->closeRecv(recv), ncclSuccess);
	assert_int_equal(t->finalize(ctx), ncclSuccess);
	/* Every non-empty message moved GPU bytes: 3 sends of the sizes and 3
	 * of the group; the receiver's GPU buffers (4 and 2). */
	assert_int_equal(standin_log_count("send dev=0 messages=7 "), 1);
	assert_int_equal(standin_log_count(" gpu=6"), 2);
}

/* DMA-BUF is offered only where asked for. */
static void test_dmabuf_where_asked(void **state)
{
	ncclNetProperties_v12_t p;

	(void)state;
	setenv("INNER_STANDIN_DMABUF", "1", 1);
	assert_int_equal(t->getProperties(0, &p), ncclSuccess);
	assert_int_equal(p.ptrSupport, NCCL_PTR_HOST | NCCL_PTR_CUDA | NCCL_PTR_DMABUF);
	unsetenv("INNER_STANDIN_DMABUF");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_gpu_bytes_through_copies),
		cmocka_unit_test(test_dmabuf_where_asked),
	};
	int rc;

	setenv("INNER_STANDIN_GPU", "1", 1);
	if (standin_log_create())
		return 1;
	open_all();
	rc = cmocka_run_group_tests(tests, NULL, NULL);
	standin_log_remove();
	return rc;
}
