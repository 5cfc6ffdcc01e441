/* The built plugin, driven through its exported ncclNetPlugin_v11 table by
 * one thread, several threads and several real processes. */
#include <dlfcn.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fd_util.h"
#include "harness.h"

#define MIB (1024 * 1024)

static void *ctx;

/* Deterministic sizes both processes agree on without talking. */
static uint64_t rng_next(uint64_t *s)
{
	uint64_t x = (*s += 0x9e3779b97f4a7c15ull);

	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

/* Mostly small messages, some large, some empty: what NCCL really sends. */
static size_t message_size(uint64_t *s)
{
	uint64_t r = rng_next(s);

	switch (r % 8) {
	case 0:
		return 0;
	case 1:
	case 2:
		return (size_t)(rng_next(s) % 64);
	case 3:
	case 4:
		return (size_t)(rng_next(s) % 65536);
	default:
		return (size_t)(rng_next(s) % (MIB + 1));
	}
}

/* ---- the exported surface ---------------------------------------------- */

static void test_exported_versions(void **state)
{
	static const char *const names[] = {
		"ncclNetPlugin_v12", "ncclNetPlugin_v11", "ncclNetPlugin_v10", "ncclNetPlugin_v9",
		"ncclNetPlugin_v8", "ncclTunerPlugin_v7", "ncclTunerPlugin_v6", "ncclTunerPlugin_v5",
		"ncclTunerPlugin_v4", "ncclTunerPlugin_v3", "ncclTunerPlugin_v2",
	};
	void *lib = *state;

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		const char *const *name = dlsym(lib, names[i]);

		assert_non_null(name);
		assert_string_equal(*name, "symmem");	/* name is slot 0 of every table */
	}
	assert_null(dlsym(lib, "net_isend"));		/* internals stay hidden */
	assert_null(dlsym(lib, "ncclNetPlugin_v7"));
	assert_null(dlsym(lib, "ncclEnvPlugin_v1"));	/* libnccl-env-symmem.so's */
	assert_non_null(net->finalize);
	assert_non_null(net->irecvConsumed);	/* an inner plugin's receives */
	assert_null(net->makeVDevice);
	assert_null(net->getDeviceMr);
	assert_non_null(net->setNetAttr);
}

static void test_properties(void **state)
{
	ncclNetProperties_v11_t p;
	int ndev = 0;

	(void)state;
	memset(&p, 0xa5, sizeof(p));
	assert_int_equal(net->devices(&ndev), ncclSuccess);
	assert_int_equal(ndev, 1);
	assert_int_equal(net->getProperties(0, &p), ncclSuccess);
	assert_string_equal(p.name, "symmem0");
	assert_true(p.ptrSupport & NCCL_PTR_HOST);
	assert_true(p.speed > 0);
	assert_int_equal(p.maxRecvs, 1);
	assert_int_equal(p.netDeviceType, NCCL_NET_DEVICE_HOST);
	assert_int_equal(p.netDeviceVersion, 0);
	assert_int_equal(p.vProps.ndevs, 1);
	assert_int_equal(p.vProps.devs[0], 0);
	assert_true(p.maxP2pBytes > 0 && p.maxP2pBytes <= NCCL_MAX_NET_SIZE_BYTES);
	assert_true(p.maxCollBytes > 0 && p.maxCollBytes <= NCCL_MAX_NET_SIZE_BYTES);
	assert_int_equal(p.maxMultiRequestSize, 1);
	assert_int_equal(p.forceFlush, 0);
	assert_true(p.latency == 0.0f);

	harness_reset_warn();
	assert_int_not_equal(net->getProperties(1, &p), ncclSuccess);
	assert_int_not_equal(net->getProperties(-1, &p), ncclSuccess);	/* below the range too */
	assert_int_equal(harness_warn_count(), 2);
}

/* ---- one thread drives both ends --------------------------------------- */

static void test_one_thread_fifo(void **state)
{
	uint8_t *src[3], *dst[3];
	size_t sizes[3] = { 1000, 0, 3 * MIB + 17 };
	void *send, *recv, *sreq[3], *rreq[3];
	int got;

	(void)state;
	assert_int_equal(harness_pair(ctx, &send, &recv), ncclSuccess);
	for (int i = 0; i < 3; i++) {
		size_t cap = sizes[i] + 100;	/* receives larger than the sends */
		void *d;

		src[i] = malloc(sizes[i] + 1);
		dst[i] = malloc(cap);
		pattern_fill(src[i], sizes[i], (uint64_t)i);
		memset(dst[i], 0x5a, cap);
		d = dst[i];
		assert_int_equal(net->irecv(recv, 1, &d, &cap, (int[]){ 0 }, NULL, NULL, &rreq[i]),
				 ncclSuccess);
		assert_non_null(rreq[i]);
	}
	for (int i = 0; i < 3; i++)
		assert_int_equal(harness_isend(send, src[i], sizes[i], NULL, &sreq[i], 5), ncclSuccess);
	/* Test in reverse: completion order must not depend on test order. */
	for (int i = 2; i >= 0; i--) {
		assert_int_equal(harness_wait(sreq[i], NULL, 10), ncclSuccess);
		assert_int_equal(harness_wait(rreq[i], &got, 10), ncclSuccess);
		assert_int_equal(got, (int)sizes[i]);
		assert_int_equal(pattern_check(dst[i], sizes[i], (uint64_t)i), sizes[i]);
		assert_int_equal(dst[i][sizes[i]], 0x5a);	/* nothing past the message */
		free(src[i]);
		free(dst[i]);
	}
	assert_int_equal(net->closeSend(send), ncclSuccess);
	assert_int_equal(net->closeRecv(recv), ncclSuccess);
}

static void test_send_waits_for_receive(void **state)
{
	uint8_t buf[64], out[64];
	size_t cap = sizeof(out);
	void *send, *recv, *sreq = (void *)0x77, *rreq, *d = out;

	(void)state;
	assert_int_equal(harness_pair(ctx, &send, &recv), ncclSuccess);
	pattern_fill(buf, sizeof(buf), 9);
	/* No receive posted yet: NULL request, NCCL retries. */
	assert_int_equal(net->isend(send, buf, sizeof(buf), 0, NULL, NULL, &sreq), ncclSuccess);
	assert_null(sreq);
	/* The optional-completion hint must be overwritten. */
	rreq = (void *)0x1;
	assert_int_equal(net->irecv(recv, 1, &d, &cap, (int[]){ 0 }, NULL, NULL, &rreq), ncclSuccess);
	assert_true(rreq != NULL && rreq != (void *)0x1);
	assert_int_equal(harness_isend(send, buf, sizeof(buf), NULL, &sreq, 5), ncclSuccess);
	assert_int_equal(harness_wait(rreq, NULL, 5), ncclSuccess);
	assert_int_equal(harness_wait(sreq, NULL, 5), ncclSuccess);
	assert_memory_equal(buf, out, sizeof(buf));
	assert_int_equal(net->closeSend(send), ncclSuccess);
	assert_int_equal(net->closeRecv(recv), ncclSuccess);
}

static void test_oversized_send(void **state)
{
	uint8_t buf[200], out[100];
	size_t cap = sizeof(out);
	void *send, *recv, *sreq, *rreq, *d = out;
	int done = 0, rc = ncclSuccess;
	double end = harness_now() + 5;

	(void)state;
	assert_int_equal(harness_pair(ctx, &send, &recv), ncclSuccess);
	assert_int_equal(net->irecv(recv, 1, &d, &cap, (int[]){ 0 }, NULL, NULL, &rreq), ncclSuccess);
	harness_reset_warn();
	memset(buf, 1, sizeof(buf));
	assert_int_equal(net->isend(send, buf, sizeof(buf), 0, NULL, NULL, &sreq), ncclInvalidUsage);
	assert_null(sreq);
	assert_int_equal(harness_warn_count(), 1);
	assert_non_null(strstr(harness_last_warn(), "200 bytes"));
	/* The receiver learns about it too, instead of waiting forever. */
	while (rc == ncclSuccess && !done && harness_now() < end)
		rc = net->test(rreq, &done, (int[64]){ 0 });
	assert_int_equal(rc, ncclInvalidUsage);
	assert_int_equal(net->closeSend(send), ncclSuccess);
	assert_int_equal(net->closeRecv(recv), ncclSuccess);
}

/* Calls outside what getProperties advertises are refused with a WARN
 * before they reach the connection, which goes on working: a receive or a
 * send of more than maxP2pBytes (the send into a receive that is posted,
 * so that the connection would otherwise take it up), an irecv of other
 * than the one buffer maxRecvs allows, and NULL memory with a size to
 * register (NULL with no size registers). */
static void test_refused_arguments(void **state)
{
	ncclNetProperties_v11_t p;
	uint8_t src[64], dst[64];
	size_t cap = sizeof(dst), big;
	void *send, *recv, *sreq = (void *)0x77, *rreq = (void *)0x1, *mh = (void *)0x77, *d = dst;
	void *two[2] = { dst, dst };
	size_t two_caps[2] = { sizeof(dst), sizeof(dst) };
	int got;

	(void)state;
	assert_int_equal(net->getProperties(0, &p), ncclSuccess);
	big = (size_t)p.maxP2pBytes + 1;
	assert_int_equal(harness_pair(ctx, &send, &recv), ncclSuccess);
	harness_reset_warn();
	assert_int_equal(net->irecv(recv, 1, &d, &big, (int[]){ 0 }, NULL, NULL, &rreq),
			 ncclInternalError);
	assert_null(rreq);
	assert_non_null(strstr(harness_last_warn(), "maxP2pBytes"));
	rreq = (void *)0x1;
	assert_int_equal(net->irecv(recv, 2, two, two_caps, (int[]){ 0, 0 }, NULL, NULL, &rreq),
			 ncclInternalError);
	assert_null(rreq);
	assert_non_null(strstr(harness_last_warn(), "maxRecvs"));
	rreq = (void *)0x1;
	assert_int_equal(net->irecv(recv, 0, two, two_caps, (int[]){ 0 }, NULL, NULL, &rreq),
			 ncclInternalError);
	assert_null(rreq);
	assert_int_equal(net->regMr(send, NULL, 4096, NCCL_PTR_HOST, &mh), ncclInvalidArgument);
	assert_null(mh);
	assert_non_null(strstr(harness_last_warn(), "NULL"));
	assert_int_equal(harness_warn_count(), 4);
	assert_int_equal(net->regMr(send, NULL, 0, NCCL_PTR_HOST, &mh), ncclSuccess);
	assert_non_null(mh);
	assert_int_equal(net->deregMr(send, mh), ncclSuccess);

	/* The one receive posted; a send past maxP2pBytes is refused. */
	assert_int_equal(net->irecv(recv, 1, &d, &cap, (int[]){ 0 }, NULL, NULL, &rreq),
			 ncclSuccess);
	assert_non_null(rreq);
	assert_int_equal(net->isend(send, src, big, 0, NULL, NULL, &sreq), ncclInternalError);
	assert_null(sreq);
	assert_int_equal(harness_warn_count(), 5);
	assert_non_null(strstr(harness_last_warn(), "maxP2pBytes"));

	/* Nothing of the refused calls reached the connection. */
	pattern_fill(src, sizeof(src), 5);
	assert_int_equal(harness_isend(send, src, sizeof(src), NULL, &sreq, 5), ncclSuccess);
	assert_int_equal(harness_wait(rreq, &got, 5), ncclSuccess);
	assert_int_equal(got, (int)sizeof(src));
	assert_int_equal(pattern_check(dst, sizeof(dst), 5), sizeof(dst));
	assert_int_equal(harness_wait(sreq, NULL, 5), ncclSuccess);
	assert_int_equal(harness_warn_count(), 5);
	assert_int_equal(net->closeSend(send), ncclSuccess);
	assert_int_equal(net->closeRecv(recv), ncclSuccess);
}

/* test() writes a request's size only once it is done, for a receive and
 * for a send alike: before that the caller's sizes are left as they were
 * (NCCL reads them at completion only). */
static void test_sizes_written_when_done(void **state)
{
	enum { SIZE = 8 * MIB };	/* more than one write of the socket or ring takes */
	uint8_t *src = malloc(SIZE), *dst = malloc(SIZE);
	size_t cap = SIZE;
	void *send, *recv, *sreq, *rreq, *d = dst;
	int sdone = 0, rdone = 0, ssize = -7, rsize = -7, pending = 0;
	double end = harness_now() + 10;

	(void)state;
	assert_non_null(src);
	assert_non_null(dst);
	assert_int_equal(harness_pair(ctx, &send, &recv), ncclSuccess);
	assert_int_equal(net->irecv(recv, 1, &d, &cap, (int[]){ 0 }, NULL, NULL, &rreq),
			 ncclSuccess);
	/* Nothing sent yet. */
	assert_int_equal(net->test(rreq, &rdone, &rsize), ncclSuccess);
	assert_false(rdone);
	assert_int_equal(rsize, -7);
	pattern_fill(src, SIZE, 3);
	assert_int_equal(harness_isend(send, src, SIZE, NULL, &sreq, 5), ncclSuccess);
	while ((!sdone || !rdone) && harness_now() < end) {
		if (!sdone) {
			assert_int_equal(net->test(sreq, &sdone, &ssize), ncclSuccess);
			if (!sdone) {
				assert_int_equal(ssize, -7);
				pending++;
			}
		}
		if (!rdone) {
			assert_int_equal(net->test(rreq, &rdone, &rsize), ncclSuccess);
			if (!rdone)
				assert_int_equal(rsize, -7);
		}
	}
	assert_true(sdone && rdone);
	assert_true(pending > 0);	/* the send was seen in flight */
	assert_int_equal(ssize, SIZE);
	assert_int_equal(rsize, SIZE);
	assert_int_equal(pattern_check(dst, SIZE, 3), SIZE);
	assert_int_equal(net->closeSend(send), ncclSuccess);
	assert_int_equal(net->closeRecv(recv), ncclSuccess);
	free(src);
	free(dst);
}

static void test_32_in_flight(void **state)
{
	enum { N = NCCL_NET_MAX_REQUESTS };
	static uint8_t src[N][256], dst[N][256];
	void *send, *recv, *sreq[N], *rreq[N], *extra = (void *)0x99;
	size_t cap = 256;
	int got;

	(void)state;
	assert_int_equal(harness_pair(ctx, &send, &recv), ncclSuccess);
	for (int i = 0; i < N; i++) {
		void *d = dst[i];

		assert_int_equal(net->irecv(recv, 1, &d, &cap, (int[]){ 0 }, NULL, NULL, &rreq[i]),
				 ncclSuccess);
	}
	harness_reset_warn();
	{
		void *d = dst[0];

		assert_int_equal(net->irecv(recv, 1, &d, &cap, (int[]){ 0 }, NULL, NULL, &extra),
				 ncclInternalError);
		assert_null(extra);
		assert_int_equal(harness_warn_count(), 1);
	}
	for (int i = 0; i < N; i++) {
		pattern_fill(src[i], (size_t)i * 8, (uint64_t)i);
		assert_int_equal(harness_isend(send, src[i], (size_t)i * 8, NULL, &sreq[i], 5), ncclSuccess);
	}
	for (int i = 0; i < N; i++) {
		assert_int_equal(harness_wait(rreq[i], &got, 5), ncclSuccess);
		assert_int_equal(got, i * 8);
		assert_int_equal(pattern_check(dst[i], (size_t)i * 8, (uint64_t)i), (size_t)i * 8);
		assert_int_equal(harness_wait(sreq[i], NULL, 5), ncclSuccess);
	}
	assert_int_equal(net->closeSend(send), ncclSuccess);
	assert_int_equal(net->closeRecv(recv), ncclSuccess);
}

/* A request holds its slot until test() reports it done: 32 sends that
 * landed but were never tested leave no room for a 33rd, which must be
 * refused with a WARN (it used to crash), and the connection goes on. */
static void test_untested_requests_hold_their_slots(void **state)
{
	enum { N = NCCL_NET_MAX_REQUESTS };
	static uint8_t src[N + 1][64], dst[N + 1][64];
	void *send, *recv, *sreq[N + 1], *rreq[N + 1], *extra = (void *)0x99, *d;
	size_t cap = 64;
	int got;

	(void)state;
	assert_int_equal(harness_pair(ctx, &send, &recv), ncclSuccess);
	for (int i = 0; i < N; i++) {
		d = dst[i];
		assert_int_equal(net->irecv(recv, 1, &d, &cap, (int[]){ 0 }, NULL, NULL, &rreq[i]),
				 ncclSuccess);
	}
	for (int i = 0; i < N; i++) {
		pattern_fill(src[i], 64, (uint64_t)i);
		assert_int_equal(harness_isend(send, src[i], 64, NULL, &sreq[i], 5), ncclSuccess);
	}
	/* One receive tested frees one receive slot, so the receiver can post
	 * a 33rd; every send slot is still held. */
	assert_int_equal(harness_wait(rreq[0], &got, 5), ncclSuccess);
	d = dst[N];
	assert_int_equal(net->irecv(recv, 1, &d, &cap, (int[]){ 0 }, NULL, NULL, &rreq[N]),
			 ncclSuccess);
	pattern_fill(src[N], 64, N);
	harness_reset_warn();
	assert_int_equal(net->isend(send, src[N], 64, 0, NULL, NULL, &extra), ncclInternalError);
	assert_null(extra);
	assert_int_equal(harness_warn_count(), 1);
	assert_non_null(strstr(harness_last_warn(), "not yet tested"));
	/* Nothing was lost: every message lands, and the 33rd goes once the
	 * sends are tested. */
	for (int i = 0; i < N; i++) {
		if (i)
			assert_int_equal(harness_wait(rreq[i], &got, 5), ncclSuccess);
		assert_int_equal(pattern_check(dst[i], 64, (uint64_t)i), 64);
		assert_int_equal(harness_wait(sreq[i], NULL, 5), ncclSuccess);
	}
	assert_int_equal(harness_isend(send, src[N], 64, NULL, &sreq[N], 5), ncclSuccess);
	assert_int_equal(harness_wait(rreq[N], &got, 5), ncclSuccess);
	assert_int_equal(got, 64);
	assert_int_equal(pattern_check(dst[N], 64, N), 64);
	assert_int_equal(harness_wait(sreq[N], NULL, 5), ncclSuccess);
	assert_int_equal(net->closeSend(send), ncclSuccess);
	assert_int_equal(net->closeRecv(recv), ncclSuccess);
}

static void test_close_with_requests_in_flight(void **state)
{
	/* Larger than the ring and than loopback TCP buffers. */
	uint8_t *big = malloc(64 * MIB), *out = malloc(64 * MIB);
	size_t cap = 64 * MIB;
	void *send, *recv, *sreq, *rreq[4], *d = out;
	int done;

	(void)state;
	pattern_fill(big, 64 * MIB, 1);
	assert_int_equal(harness_pair(ctx, &send, &recv), ncclSuccess);
	for (int i = 0; i < 4; i++)
		assert_int_equal(net->irecv(recv, 1, &d, &cap, (int[]){ 0 }, NULL, NULL, &rreq[i]),
				 ncclSuccess);
	/* A send larger than the ring is half done when both ends close. */
	assert_int_equal(harness_isend(send, big, 64 * MIB, NULL, &sreq, 5), ncclSuccess);
	assert_int_equal(net->test(sreq, &done, NULL), ncclSuccess);
	assert_int_equal(done, 0);
	assert_int_equal(net->test(rreq[0], &done, (int[64]){ 0 }), ncclSuccess);
	assert_int_equal(net->closeRecv(recv), ncclSuccess);
	assert_int_equal(net->closeSend(send), ncclSuccess);
	free(big);
	free(out);
}

static void test_double_close_and_bad_objects(void **state)
{
	char handle[NCCL_NET_HANDLE_MAXSIZE];
	uint8_t buf[64];
	void *send, *recv, *closed_recv, *lc, *mh;
	int done;

	(void)state;
	assert_int_equal(harness_pair(ctx, &send, &recv), ncclSuccess);
	closed_recv = recv;
	assert_int_equal(net->regMr(send, buf, sizeof(buf), NCCL_PTR_HOST, &mh), ncclSuccess);
	harness_reset_warn();
	assert_int_equal(net->deregMr(recv, mh), ncclInternalError);	/* wrong comm */
	assert_int_equal(net->deregMr(send, mh), ncclSuccess);
	assert_int_equal(net->deregMr(send, mh), ncclInternalError);	/* twice */
	assert_int_equal(net->closeSend(send), ncclSuccess);
	assert_int_equal(net->closeSend(send), ncclInternalError);
	assert_int_equal(net->closeRecv(send), ncclInternalError);	/* wrong kind */
	assert_int_equal(net->closeRecv(recv), ncclSuccess);
	assert_int_equal(net->closeRecv(recv), ncclInternalError);
	assert_int_equal(net->listen(ctx, 0, handle, &lc), ncclSuccess);
	assert_int_equal(net->closeListen(lc), ncclSuccess);
	assert_int_equal(net->closeListen(lc), ncclInternalError);
	assert_int_equal(net->accept(lc, &recv, NULL), ncclInternalError);
	assert_int_equal(net->test((void *)0x1, &done, NULL), ncclInternalError);
	assert_int_equal(net->regMr(closed_recv, buf, sizeof(buf), NCCL_PTR_HOST, &mh),
			 ncclInternalError);
	assert_int_equal(harness_warn_count(), 9);	/* one WARN per refused call */
	assert_int_equal(net->finalize(NULL), ncclSuccess);
}

/* A second close of a comm, or a second deregMr of a handle, after a new
 * one was made: the new object must not sit at the old address (glibc
 * would hand it the same block), so the stale call fails with a WARN and
 * the new object keeps working. */
static void test_stale_pointer_after_reuse(void **state)
{
	uint8_t src[64], dst[64];
	void *send, *recv, *old_send, *old_recv, *old_mh, *mh, *sreq, *rreq, *d = dst;
	size_t cap = sizeof(dst);
	int got;

	(void)state;
	assert_int_equal(harness_pair(ctx, &send, &recv), ncclSuccess);
	assert_int_equal(net->regMr(send, src, sizeof(src), NCCL_PTR_HOST, &old_mh), ncclSuccess);
	assert_int_equal(net->deregMr(send, old_mh), ncclSuccess);
	assert_int_equal(net->closeSend(send), ncclSuccess);
	assert_int_equal(net->closeRecv(recv), ncclSuccess);
	old_send = send;
	old_recv = recv;
	assert_int_equal(harness_pair(ctx, &send, &recv), ncclSuccess);
	assert_int_equal(net->regMr(send, src, sizeof(src), NCCL_PTR_HOST, &mh), ncclSuccess);
	assert_true(send != old_send && send != old_recv);
	assert_true(recv != old_send && recv != old_recv);
	assert_true(mh != old_mh);
	harness_reset_warn();
	assert_int_equal(net->closeSend(old_send), ncclInternalError);
	assert_int_equal(net->closeRecv(old_recv), ncclInternalError);
	assert_int_equal(net->deregMr(send, old_mh), ncclInternalError);
	assert_int_equal(harness_warn_count(), 3);
	/* The live ones lost nothing. */
	pattern_fill(src, sizeof(src), 7);
	assert_int_equal(net->irecv(recv, 1, &d, &cap, (int[]){ 0 }, NULL, NULL, &rreq),
			 ncclSuccess);
	assert_int_equal(harness_isend(send, src, sizeof(src), NULL, &sreq, 5), ncclSuccess);
	assert_int_equal(harness_wait(rreq, &got, 5), ncclSuccess);
	assert_int_equal(got, (int)sizeof(src));
	assert_int_equal(pattern_check(dst, sizeof(dst), 7), sizeof(dst));
	assert_int_equal(harness_wait(sreq, NULL, 5), ncclSuccess);
	assert_int_equal(net->deregMr(send, mh), ncclSuccess);
	assert_int_equal(net->closeSend(send), ncclSuccess);
	assert_int_equal(net->closeRecv(recv), ncclSuccess);
}

static void test_registration(void **state)
{
	uint8_t buf[4096], out[4096];
	size_t cap = sizeof(out);
	void *send, *recv, *mh, *rmh, *req, *d = out;

	(void)state;
	assert_int_equal(harness_pair(ctx, &send, &recv), ncclSuccess);
	harness_reset_warn();
	assert_int_equal(net->regMr(send, buf, sizeof(buf), NCCL_PTR_CUDA, &mh), ncclInvalidArgument);
	assert_null(mh);
	assert_int_equal(harness_warn_count(), 1);
	assert_int_equal(net->regMr(send, buf, 1024, NCCL_PTR_HOST, &mh), ncclSuccess);
	assert_int_equal(net->regMr(recv, out, sizeof(out), NCCL_PTR_HOST, &rmh), ncclSuccess);
	assert_int_equal(net->irecv(recv, 1, &d, &cap, (int[]){ 0 }, &rmh, NULL, &req), ncclSuccess);
	/* 2048 bytes from a 1024-byte registration. */
	assert_int_equal(net->isend(send, buf, 2048, 0, mh, NULL, &req), ncclInternalError);
	assert_int_equal(harness_warn_count(), 2);
	assert_int_equal(net->deregMr(send, mh), ncclSuccess);
	assert_int_equal(net->deregMr(recv, rmh), ncclSuccess);
	assert_int_equal(net->closeSend(send), ncclSuccess);
	assert_int_equal(net->closeRecv(recv), ncclSuccess);
}

/* regMrDmaBuf, NCCL's regMr for memory it hands over as a DMA-BUF
 * descriptor: the same checks (a memory type the device does not serve
 * is refused with one WARN naming the call), host memory registers as
 * with regMr and carries a message, and the descriptor is left open for
 * NCCL, which closes it itself. */
static void test_registration_dmabuf(void **state)
{
	uint8_t buf[4096], out[4096];
	size_t cap = sizeof(out);
	void *send, *recv, *mh = NULL, *rmh, *sreq = NULL, *rreq, *d = out;
	ncclNetProperties_v11_t p;
	int fds[2], size = 0;

	(void)state;
	assert_int_equal(pipe(fds), 0);
	assert_int_equal(net->getProperties(0, &p), ncclSuccess);
	assert_int_equal(harness_pair(ctx, &send, &recv), ncclSuccess);
	harness_reset_warn();
	if (!(p.ptrSupport & NCCL_PTR_CUDA)) {
		assert_int_equal(net->regMrDmaBuf(send, buf, sizeof(buf), NCCL_PTR_CUDA, 0, fds[0],
						  &mh), ncclInvalidArgument);
		assert_null(mh);
		assert_int_equal(harness_warn_count(), 1);
		assert_non_null(strstr(harness_last_warn(), "regMrDmaBuf of memory type 2"));
	}
	assert_int_equal(net->regMrDmaBuf(send, buf, sizeof(buf), NCCL_PTR_HOST, 0, fds[0], &mh),
			 ncclSuccess);
	assert_int_not_equal(fcntl(fds[0], F_GETFD), -1);
	assert_int_equal(net->regMr(recv, out, sizeof(out), NCCL_PTR_HOST, &rmh), ncclSuccess);
	pattern_fill(buf, sizeof(buf), 5);
	assert_int_equal(net->irecv(recv, 1, &d, &cap, (int[]){ 0 }, &rmh, NULL, &rreq),
			 ncclSuccess);
	assert_int_equal(harness_isend(send, buf, sizeof(buf), mh, &sreq, 10), ncclSuccess);
	assert_int_equal(harness_wait(sreq, NULL, 10), ncclSuccess);
	assert_int_equal(harness_wait(rreq, &size, 10), ncclSuccess);
	assert_int_equal(size, sizeof(buf));
	assert_int_equal(pattern_check(out, sizeof(out), 5), sizeof(out));
	assert_int_equal(net->deregMr(send, mh), ncclSuccess);
	assert_int_equal(net->deregMr(recv, rmh), ncclSuccess);
	assert_int_equal(net->closeSend(send), ncclSuccess);
	assert_int_equal(net->closeRecv(recv), ncclSuccess);
	close(fds[0]);
	close(fds[1]);
}

static void test_corrupt_handles(void **state)
{
	char handle[NCCL_NET_HANDLE_MAXSIZE], bad[NCCL_NET_HANDLE_MAXSIZE];
	void *lc, *send = NULL, *recv = NULL;

	(void)state;
	assert_int_equal(net->listen(ctx, 0, handle, &lc), ncclSuccess);
	harness_reset_warn();
	/* Zeros, random bytes, and every single-byte corruption of a real one. */
	memset(bad, 0, sizeof(bad));
	assert_int_equal(net->connect(ctx, 0, bad, &send, NULL), ncclInvalidArgument);
	for (size_t i = 0; i < sizeof(bad); i++)
		bad[i] = (char)(i * 37 + 11);
	assert_int_equal(net->connect(ctx, 0, bad, &send, NULL), ncclInvalidArgument);
	for (size_t i = 0; i < sizeof(handle); i++) {
		memcpy(bad, handle, sizeof(bad));
		bad[i] ^= 0x40;
		assert_int_equal(net->connect(ctx, 0, bad, &send, NULL), ncclInvalidArgument);
		assert_null(send);
	}
	/* Each refusal logged; an identical text again within a minute is an
	 * INFO "again:" line, not another WARN. */
	assert_true(harness_warn_count() >= 1);
	assert_int_equal(harness_warn_count() + harness_repeat_count(), 2 + NCCL_NET_HANDLE_MAXSIZE);
	/* The listener is unharmed and still serves the real handle. */
	for (int i = 0; i < 100000 && (!send || !recv); i++) {
		if (!send)
			assert_int_equal(net->connect(ctx, 0, handle, &send, NULL), ncclSuccess);
		if (!recv)
			assert_int_equal(net->accept(lc, &recv, NULL), ncclSuccess);
	}
	assert_non_null(send);
	assert_non_null(recv);
	assert_int_equal(net->closeListen(lc), ncclSuccess);
	assert_int_equal(net->closeSend(send), ncclSuccess);
	assert_int_equal(net->closeRecv(recv), ncclSuccess);
}

static void test_listener_gone(void **state)
{
	char handle[NCCL_NET_HANDLE_MAXSIZE];
	void *lc, *send = NULL;
	double start = harness_now();
	int rc = ncclSuccess;

	(void)state;
	assert_int_equal(net->listen(ctx, 0, handle, &lc), ncclSuccess);
	assert_int_equal(net->closeListen(lc), ncclSuccess);
	harness_reset_warn();
	while (rc == ncclSuccess && !send && harness_now() - start < 10)
		rc = net->connect(ctx, 0, handle, &send, NULL);
	assert_int_equal(rc, ncclRemoteError);
	assert_null(send);
	assert_int_equal(harness_warn_count(), 1);
	assert_true(harness_now() - start < 5);
}

/* ---- several threads, each with its own comms --------------------------- */

struct thread_arg {
	int id;
	int failures;
};

static void *thread_main(void *p)
{
	struct thread_arg *a = p;
	ncclNetCommConfig_v11_t cfg = { .trafficClass = -1 };
	uint64_t seed = (uint64_t)a->id;
	uint8_t *src = malloc(MIB), *dst = malloc(MIB + 64);
	void *tctx = NULL, *send, *recv;

	if (net->init(&tctx, (uint64_t)a->id, &cfg, harness_logger, NULL) ||
	    harness_pair(tctx, &send, &recv)) {
		a->failures++;
		goto out;
	}
	for (uint64_t m = 0; m < 300; m++) {
		size_t size = message_size(&seed), cap = size + 64;
		void *sreq, *rreq, *d = dst;
		int got = -1;

		pattern_fill(src, size, m + (uint64_t)a->id * 1000);
		memset(dst, 0, cap);
		if (net->irecv(recv, 1, &d, &cap, (int[]){ 0 }, NULL, NULL, &rreq) ||
		    harness_isend(send, src, size, NULL, &sreq, 5) || harness_wait(sreq, NULL, 10) ||
		    harness_wait(rreq, &got, 10) || got != (int)size ||
		    pattern_check(dst, size, m + (uint64_t)a->id * 1000) != size) {
			a->failures++;
			break;
		}
	}
	net->closeSend(send);
	net->closeRecv(recv);
	net->finalize(tctx);
out:
	free(src);
	free(dst);
	return NULL;
}

static void test_threads_own_comms(void **state)
{
	enum { T = 6 };
	pthread_t th[T];
	struct thread_arg args[T];

	(void)state;
	for (int i = 0; i < T; i++) {
		args[i] = (struct thread_arg){ .id = i + 1 };
		assert_int_equal(pthread_create(&th[i], NULL, thread_main, &args[i]), 0);
	}
	for (int i = 0; i < T; i++) {
		pthread_join(th[i], NULL);
		assert_int_equal(args[i].failures, 0);
	}
}

/* ---- real processes ----------------------------------------------------- */

enum { STREAM_MESSAGES = 3000, STREAM_WINDOW = 8 };

/* The sending process: connects with the handle it is given and streams
 * STREAM_MESSAGES messages, up to STREAM_WINDOW in flight. */
static int stream_sender(int sock, int die_after)
{
	char handle[NCCL_NET_HANDLE_MAXSIZE];
	uint8_t *bufs[STREAM_WINDOW];
	void *reqs[STREAM_WINDOW] = { 0 };
	uint64_t seed = 12345;
	void *cctx = harness_init(), *send = NULL;
	double end = harness_now() + 20;

	if (!cctx || harness_recv_all(sock, handle, sizeof(handle)))
		return 10;
	while (!send && harness_now() < end)
		if (net->connect(cctx, 0, handle, &send, NULL))
			return 11;
	if (!send)
		return 12;
	for (int i = 0; i < STREAM_WINDOW; i++)
		bufs[i] = malloc(MIB);
	for (uint64_t m = 0; m < STREAM_MESSAGES; m++) {
		int slot = (int)(m % STREAM_WINDOW);
		size_t size = message_size(&seed);

		if (reqs[slot] && harness_wait(reqs[slot], NULL, 20))
			return 13;
		if ((int)m == die_after)
			raise(SIGKILL);
		pattern_fill(bufs[slot], size, m);
		if (harness_isend(send, bufs[slot], size, NULL, &reqs[slot], 20))
			return 14;
	}
	for (int i = 0; i < STREAM_WINDOW; i++)
		if (reqs[i] && harness_wait(reqs[i], NULL, 20))
			return 15;
	/* Keep the connection until the receiver has everything. */
	harness_recv_all(sock, handle, 1);
	for (int i = 0; i < STREAM_WINDOW; i++)
		free(bufs[i]);
	net->closeSend(send);
	net->finalize(cctx);
	return 0;
}

static int stream_receive(void *recv, int expect_death)
{
	uint8_t *bufs[STREAM_WINDOW];
	void *reqs[STREAM_WINDOW] = { 0 };
	size_t caps[STREAM_WINDOW];
	uint64_t seed = 12345;
	int rc = 0;

	for (int i = 0; i < STREAM_WINDOW; i++)
		bufs[i] = malloc(MIB + 4096);
	for (uint64_t m = 0; m < STREAM_MESSAGES + STREAM_WINDOW && !rc; m++) {
		int slot = (int)(m % STREAM_WINDOW);
		uint64_t done_msg = m - STREAM_WINDOW;
		static size_t expect[STREAM_WINDOW];

		if (m >= STREAM_WINDOW) {
			int got = -1;

			rc = harness_wait(reqs[slot], &got, 20);
			if (rc)
				break;
			if (got != (int)expect[slot] ||
			    pattern_check(bufs[slot], expect[slot], done_msg) != expect[slot]) {
				print_error("message %llu: got %d bytes, expected %zu, first bad byte %zu\n",
					    (unsigned long long)done_msg, got, expect[slot],
					    pattern_check(bufs[slot], expect[slot], done_msg));
				rc = -1;
				break;
			}
		}
		if (m < STREAM_MESSAGES) {
			void *d = bufs[slot];

			expect[slot] = message_size(&seed);
			caps[slot] = expect[slot] + (m % 3) * 1000;	/* often larger than sent */
			memset(bufs[slot], 0, caps[slot]);
			rc = net->irecv(recv, 1, &d, &caps[slot], (int[]){ 0 }, NULL, NULL, &reqs[slot]);
		}
	}
	for (int i = 0; i < STREAM_WINDOW; i++)
		free(bufs[i]);
	(void)expect_death;
	return rc;
}

static pid_t spawn_sender(void *handle, int die_after, int *sock)
{
	int sv[2];
	pid_t pid;

	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		close(sv[0]);
		_exit(stream_sender(sv[1], die_after));
	}
	close(sv[1]);
	assert_int_equal(harness_send_all(sv[0], handle, NCCL_NET_HANDLE_MAXSIZE), 0);
	*sock = sv[0];
	return pid;
}

static void *accept_from(void *lc)
{
	void *recv = NULL;
	double end = harness_now() + 20;

	while (!recv && harness_now() < end)
		assert_int_equal(net->accept(lc, &recv, NULL), ncclSuccess);
	assert_non_null(recv);
	assert_int_equal(net->closeListen(lc), ncclSuccess);
	return recv;
}

static void test_process_stream(void **state)
{
	char handle[NCCL_NET_HANDLE_MAXSIZE];
	void *lc, *recv;
	int sock, status;
	pid_t pid;

	(void)state;
	assert_int_equal(net->listen(ctx, 0, handle, &lc), ncclSuccess);
	pid = spawn_sender(handle, -1, &sock);
	recv = accept_from(lc);
	assert_int_equal(stream_receive(recv, 0), 0);
	assert_int_equal(harness_send_all(sock, "x", 1), 0);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	close(sock);
	assert_int_equal(net->closeRecv(recv), ncclSuccess);
}

static void test_dead_sender(void **state)
{
	char handle[NCCL_NET_HANDLE_MAXSIZE];
	void *lc, *recv;
	int sock, status, rc;
	double start;
	pid_t pid;

	(void)state;
	assert_int_equal(net->listen(ctx, 0, handle, &lc), ncclSuccess);
	pid = spawn_sender(handle, 100, &sock);
	recv = accept_from(lc);
	harness_reset_warn();
	start = harness_now();
	rc = stream_receive(recv, 1);
	assert_int_equal(rc, ncclRemoteError);
	assert_true(harness_now() - start < 5);
	assert_int_equal(harness_warn_count(), 1);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFSIGNALED(status));
	close(sock);
	assert_int_equal(net->closeRecv(recv), ncclSuccess);
}

static void test_dead_receiver(void **state)
{
	char handle[NCCL_NET_HANDLE_MAXSIZE];
	uint8_t *big = malloc(64 * MIB);
	void *lc, *send = NULL, *req = NULL;
	int sv[2], status, done = 0, rc = ncclSuccess;
	double end, start;
	pid_t pid;

	(void)state;
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		/* The receiver: accept, post one big receive, take a little, die. */
		void *cctx = harness_init(), *recv = NULL, *rreq, *d;
		size_t cap = 64 * MIB;
		char h[NCCL_NET_HANDLE_MAXSIZE];

		close(sv[0]);
		d = malloc(cap);
		if (!cctx || net->listen(cctx, 0, h, &lc) || harness_send_all(sv[1], h, sizeof(h)))
			_exit(2);
		while (!recv)
			if (net->accept(lc, &recv, NULL))
				_exit(3);
		if (net->irecv(recv, 1, &d, &cap, (int[]){ 0 }, NULL, NULL, &rreq))
			_exit(4);
		for (int i = 0; i < 1000; i++)
			net->test(rreq, &done, (int[64]){ 0 });
		raise(SIGKILL);
	}
	close(sv[1]);
	assert_int_equal(harness_recv_all(sv[0], handle, sizeof(handle)), 0);
	end = harness_now() + 20;
	while (!send && harness_now() < end)
		assert_int_equal(net->connect(ctx, 0, handle, &send, NULL), ncclSuccess);
	assert_non_null(send);
	pattern_fill(big, 64 * MIB, 3);
	harness_reset_warn();
	start = harness_now();
	/* The death shows in isend (which starts copying at once) or in test. */
	rc = harness_isend(send, big, 64 * MIB, NULL, &req, 20);
	while (rc == ncclSuccess && !done && harness_now() - start < 10)
		rc = net->test(req, &done, NULL);
	assert_int_equal(rc, ncclRemoteError);
	assert_int_equal(done, 0);
	assert_true(harness_now() - start < 5);
	assert_int_equal(harness_warn_count(), 1);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFSIGNALED(status));
	/* Later calls keep failing the same way, quietly for the caller. */
	assert_int_equal(net->isend(send, big, 10, 0, NULL, NULL, &req), ncclRemoteError);
	assert_int_equal(net->closeSend(send), ncclSuccess);
	close(sv[0]);
	free(big);
}

/* A peer with several connections to this process dies, as a rank with
 * one connection per NCCL channel does: every connection fails with
 * ncclRemoteError, and the log has one WARN naming the peer's process, the
 * other failures being INFO "again:" lines.  The peer also receives on one
 * connection, whose failure reads differently ("receiving peer", in
 * isend) and still counts as the same peer's. */
#define DEAD_CONNS 4

static int many_sender(int sock)
{
	char handle[DEAD_CONNS][NCCL_NET_HANDLE_MAXSIZE], back[NCCL_NET_HANDLE_MAXSIZE];
	void *cctx = harness_init(), *send[DEAD_CONNS] = { 0 }, *req, *lc, *recv = NULL;
	uint8_t msg[4096];

	if (!cctx || harness_recv_all(sock, handle, sizeof(handle)))
		return 2;
	for (int i = 0; i < DEAD_CONNS; i++)
		while (!send[i])
			if (net->connect(cctx, 0, handle[i], &send[i], NULL))
				return 3;
	if (net->listen(cctx, 0, back, &lc) || harness_send_all(sock, back, sizeof(back)))
		return 6;
	while (!recv)
		if (net->accept(lc, &recv, NULL))
			return 7;
	for (int i = 0; i < DEAD_CONNS; i++) {
		pattern_fill(msg, sizeof(msg), (uint64_t)i);
		if (harness_isend(send[i], msg, sizeof(msg), NULL, &req, 20) ||
		    harness_wait(req, NULL, 20))
			return 4;
	}
	raise(SIGKILL);
	return 5;
}

static void test_dead_peer_many_connections(void **state)
{
	char handle[DEAD_CONNS][NCCL_NET_HANDLE_MAXSIZE], back[NCCL_NET_HANDLE_MAXSIZE], who[64];
	void *lc[DEAD_CONNS], *recv[DEAD_CONNS] = { 0 }, *req[DEAD_CONNS], *send = NULL, *sreq;
	void *fresh_send, *fresh_recv, *fresh_buf;
	size_t fresh_cap;
	uint8_t msg[DEAD_CONNS][4096];
	int sv[2], status, got, rc;
	double end;
	pid_t pid;

	(void)state;
	for (int i = 0; i < DEAD_CONNS; i++)
		assert_int_equal(net->listen(ctx, 0, handle[i], &lc[i]), ncclSuccess);
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		close(sv[0]);
		_exit(many_sender(sv[1]));
	}
	close(sv[1]);
	assert_int_equal(harness_send_all(sv[0], handle, sizeof(handle)), 0);
	end = harness_now() + 20;
	for (int i = 0; i < DEAD_CONNS; i++) {
		while (!recv[i] && harness_now() < end)
			assert_int_equal(net->accept(lc[i], &recv[i], NULL), ncclSuccess);
		assert_non_null(recv[i]);
		assert_int_equal(net->closeListen(lc[i]), ncclSuccess);
	}
	assert_int_equal(harness_recv_all(sv[0], back, sizeof(back)), 0);
	while (!send && harness_now() < end)
		assert_int_equal(net->connect(ctx, 0, back, &send, NULL), ncclSuccess);
	assert_non_null(send);
	/* One message each arrives whole; the next receives find it dead. */
	for (int i = 0; i < DEAD_CONNS; i++) {
		void *d = msg[i];
		size_t cap = sizeof(msg[i]);

		memset(msg[i], 0, sizeof(msg[i]));
		assert_int_equal(net->irecv(recv[i], 1, &d, &cap, (int[]){ 0 }, NULL, NULL, &req[i]),
				 ncclSuccess);
		assert_int_equal(harness_wait(req[i], &got, 20), ncclSuccess);
		assert_int_equal(got, (int)sizeof(msg[i]));
		assert_int_equal(pattern_check(msg[i], sizeof(msg[i]), (uint64_t)i), sizeof(msg[i]));
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFSIGNALED(status));
	harness_reset_warn();
	for (int i = 0; i < DEAD_CONNS; i++) {
		void *d = msg[i];
		size_t cap = sizeof(msg[i]);
		int rc = net->irecv(recv[i], 1, &d, &cap, (int[]){ 0 }, NULL, NULL, &req[i]);

		if (rc == ncclSuccess)
			rc = harness_wait(req[i], NULL, 5);
		assert_int_equal(rc, ncclRemoteError);
	}
	rc = harness_isend(send, msg[0], sizeof(msg[0]), NULL, &sreq, 5);
	if (rc == ncclSuccess)
		rc = harness_wait(sreq, NULL, 5);
	assert_int_equal(rc, ncclRemoteError);
	assert_int_equal(harness_warn_count(), 1);
	assert_true(harness_repeat_count() >= DEAD_CONNS);
	snprintf(who, sizeof(who), "(peer process %d)", (int)pid);
	assert_non_null(strstr(harness_last_warn(), who));
	/* The survivors go on (ncclCommShrink): a new connection works while
	 * the dead ones are still open, and logs nothing. */
	assert_int_equal(harness_pair(ctx, &fresh_send, &fresh_recv), ncclSuccess);
	pattern_fill(msg[1], sizeof(msg[1]), 77);
	memset(msg[0], 0, sizeof(msg[0]));
	fresh_buf = msg[0];
	fresh_cap = sizeof(msg[0]);
	assert_int_equal(net->irecv(fresh_recv, 1, &fresh_buf, &fresh_cap, (int[]){ 0 }, NULL,
				    NULL, &req[0]), ncclSuccess);
	assert_int_equal(harness_isend(fresh_send, msg[1], sizeof(msg[1]), NULL, &sreq, 5),
			 ncclSuccess);
	assert_int_equal(harness_wait(sreq, NULL, 5), ncclSuccess);
	assert_int_equal(harness_wait(req[0], &got, 5), ncclSuccess);
	assert_int_equal(got, (int)sizeof(msg[0]));
	assert_int_equal(pattern_check(msg[0], sizeof(msg[0]), 77), sizeof(msg[0]));
	assert_int_equal(harness_warn_count(), 1);
	assert_int_equal(net->closeSend(fresh_send), ncclSuccess);
	assert_int_equal(net->closeRecv(fresh_recv), ncclSuccess);
	for (int i = 0; i < DEAD_CONNS; i++)
		assert_int_equal(net->closeRecv(recv[i]), ncclSuccess);
	assert_int_equal(net->closeSend(send), ncclSuccess);
	close(sv[0]);
}

/* ---- environment handling, in fresh processes --------------------------- */

/* Runs this binary again with extra environment and a mode argument; the
 * plugin parses its environment once per process, so a new one is needed. */
static int run_child(const char *mode, const char *const *env)
{
	return harness_run_child("test_net", mode, env);
}

/* A connect NCCL gives up on (an abort during setup) and never calls
 * again: finalize of its context frees it, with its socket and shared
 * ring, even though the listener never accepted. */
static int child_abandoned_connect(void)
{
	char handle[NCCL_NET_HANDLE_MAXSIZE];
	void *c, *lc, *send = NULL;
	int before;

	if (!harness_open() || !(c = harness_init()))
		return 10;
	before = open_fds();
	if (net->listen(c, 0, handle, &lc) != ncclSuccess)
		return 11;
	if (net->connect(c, 0, handle, &send, NULL) != ncclSuccess || send)
		return 12;	/* in progress: the listener has not accepted */
	if (net->closeListen(lc) != ncclSuccess)
		return 13;
	if (open_fds() <= before)
		return 14;	/* the attempt holds its socket and ring */
	if (net->finalize(c) != ncclSuccess)
		return 15;
	if (open_fds() != before)
		return 16;
	if (harness_info_count("finalize freed 1 connect(s) NCCL left unfinished") != 1)
		return 17;
	return 0;
}

/* NCCL's version as the plugin reads it (dlsym of ncclGetVersion in the
 * process: this program exports it): TEST_NCCL_VERSION, or no answer. */
__attribute__((visibility("default"))) int ncclGetVersion(int *version);
int ncclGetVersion(int *version)
{
	const char *v = getenv("TEST_NCCL_VERSION");

	if (!v)
		return 1;	/* ncclInternalError: no version */
	*version = atoi(v);
	return 0;
}

/* The last context's finalize says that NCCL unloads the plugin now and
 * how to keep it (once, INFO) where the NCCL in the process is a 2.28;
 * not while another context lives, not with NCCL_NET_PLUGIN_REF_COUNT set,
 * and not under another NCCL or one that gives no version. */
static int child_last_finalize(void)
{
	const char *needle = "NCCL_NET_PLUGIN_REF_COUNT=1";
	const char *v = getenv("TEST_NCCL_VERSION");
	int expect = !getenv("NCCL_NET_PLUGIN_REF_COUNT") && v && atoi(v) / 100 == 228;
	void *a, *b;

	if (!harness_open() || !(a = harness_init()) || !(b = harness_init()))
		return 10;
	if (net->finalize(a) != ncclSuccess || harness_info_count(needle) != 0)
		return 11;
	if (net->finalize(b) != ncclSuccess || harness_info_count(needle) != expect)
		return 12;
	return 0;
}

static void test_last_finalize_says_unload(void **state)
{
	const char *plain[] = { NULL };
	const char *nccl228[] = { "TEST_NCCL_VERSION", "22809", NULL };
	const char *nccl230[] = { "TEST_NCCL_VERSION", "23007", NULL };
	const char *kept[] = { "TEST_NCCL_VERSION", "22809", "NCCL_NET_PLUGIN_REF_COUNT", "1",
			       NULL };

	(void)state;
	assert_int_equal(run_child("--child-last-finalize", plain), 0);
	assert_int_equal(run_child("--child-last-finalize", nccl228), 0);
	assert_int_equal(run_child("--child-last-finalize", nccl230), 0);
	assert_int_equal(run_child("--child-last-finalize", kept), 0);
}

static void test_finalize_frees_abandoned_connect(void **state)
{
	const char *env[] = { NULL };

	(void)state;
	assert_int_equal(run_child("--child-abandoned-connect", env), 0);
}

static void test_bad_env_fails_init(void **state)
{
	static const char *const cases[][2] = {
		{ "NCCL_CUMEM_POOL_SIZE", "banana" },
		{ "NCCL_PASS_SM", "maybe" },
		{ "NCCL_CUMEM_GROWTH_FACTOR", "-2" },
		{ "NCCL_SYMMEM_BACKEND", "carrier-pigeon" },
		{ "NCCL_SYMMEM_STREAMS", "0x2" },
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const char *env[] = { cases[i][0], cases[i][1], "EXPECT_VAR", cases[i][0], NULL };

		assert_int_equal(run_child("--child-bad-env", env), 0);
	}
}

/* NCCL's own variables with values NCCL runs with: init succeeds, and
 * the one value the plugin cannot use (a GID index past ibverbs' 255) is
 * named in one WARN instead of failing every communicator. */
static void test_nccl_env_accepted(void **state)
{
	const char *env[] = { "NCCL_IB_GID_INDEX", "256", "NCCL_IB_TC", "0x68",
			      "NCCL_IB_TIMEOUT", "0", "NCCL_IB_HCA", "",
			      "NCCL_SOCKET_IFNAME", "lo,", "NCCL_CUMEM_ENABLE", "1 # on", NULL };

	(void)state;
	assert_int_equal(run_child("--child-nccl-env", env), 0);
}

static int child_nccl_env(void)
{
	ncclNetCommConfig_v11_t cfg = { .trafficClass = -1 };
	void *c = NULL;

	if (!harness_open())
		return 10;
	if (net->init(&c, 1, &cfg, harness_logger, NULL) != ncclSuccess || !c)
		return 11;
	if (harness_warn_count() != 1 || !strstr(harness_last_warn(), "NCCL_IB_GID_INDEX='256'"))
		return 12;
	if (strstr(harness_last_warn(), "NCCL_IB_TC") || strstr(harness_last_warn(), "NCCL_IB_HCA"))
		return 13;
	if (net->finalize(c) != ncclSuccess)
		return 14;
	return 0;
}

/* NCCL_IB_HCA: init reports once which RDMA devices it selects (none on
 * a host without any, never one the list excludes) and goes on over TCP. */
static void test_ib_hca_reported(void **state)
{
	const char *env[] = { "NCCL_IB_HCA", "=mlx5_0:1", NULL };

	(void)state;
	assert_int_equal(run_child("--child-ib-hca", env), 0);
}

static int child_ib_hca(void)
{
	void *c;

	if (!harness_open() || !(c = harness_init()))
		return 10;
	if (harness_info_count("NCCL_IB_HCA==mlx5_0:1 selects") != 1)
		return 11;
	if (harness_info_count("other hosts are reached over TCP") != 1 || harness_warn_count())
		return 12;
	net->finalize(c);
	return 0;
}

/* NCCL_SYMMEM_BACKEND=ib where NCCL_IB_HCA selects no device: init goes
 * on (GPU pointers are not advertised: no device, no GPUDirect RDMA, one
 * INFO line says so), and the connect fails with one WARN that says why,
 * instead of quietly running TCP. */
static void test_ib_forced_without_device(void **state)
{
	const char *env[] = { "NCCL_SYMMEM_BACKEND", "ib", "NCCL_IB_HCA", "=no_such_hca", NULL };

	(void)state;
	assert_int_equal(run_child("--child-ib-forced", env), 0);
}

static int child_ib_forced(void)
{
	ncclNetProperties_v11_t p;
	void *c, *send = NULL, *recv = NULL;

	if (!harness_open() || !(c = harness_init()))
		return 10;
	if (harness_warn_count() || net->getProperties(0, &p) || p.ptrSupport != NCCL_PTR_HOST)
		return 11;
	/* No GPUDirect RDMA either, said once, with the reason. */
	if (harness_info_count("no GPUDirect RDMA: NCCL stages GPU buffers in host memory") != 1 ||
	    harness_info_count("symmem0: no RDMA device (") != 1)
		return 14;
	if (harness_pair(c, &send, &recv) == 0 || send)
		return 12;
	if (harness_warn_count() != 1 || !strstr(harness_last_warn(), "NCCL_SYMMEM_BACKEND=ib"))
		return 13;
	if (recv)
		net->closeRecv(recv);
	net->finalize(c);
	return 0;
}

static void test_accept_timeout(void **state)
{
	const char *env[] = { "NCCL_SYMMEM_CONNECT_TIMEOUT", "0.5", NULL };

	(void)state;
	assert_int_equal(run_child("--child-accept-timeout", env), 0);
}

/* init must fail with ncclInvalidUsage and exactly one WARN naming the
 * variable and its value; finalize(NULL) afterwards is harmless. */
static int child_bad_env(void)
{
	const char *var = getenv("EXPECT_VAR");
	ncclNetCommConfig_v11_t cfg = { .trafficClass = -1 };
	void *c = (void *)0x5;

	if (!harness_open())
		return 10;
	if (net->init(&c, 1, &cfg, harness_logger, NULL) != ncclInvalidUsage)
		return 11;
	if (c != NULL || harness_warn_count() != 1)
		return 12;
	if (!strstr(harness_last_warn(), var) || !strstr(harness_last_warn(), getenv(var)))
		return 13;
	if (net->finalize(NULL) != ncclSuccess)
		return 14;
	return 0;
}

static int child_accept_timeout(void)
{
	char handle[NCCL_NET_HANDLE_MAXSIZE];
	void *c, *lc, *recv = NULL;
	double start;
	int rc = ncclSuccess;

	if (!harness_open() || !(c = harness_init()))
		return 10;
	if (net->listen(c, 0, handle, &lc))
		return 11;
	start = harness_now();
	while (rc == ncclSuccess && !recv && harness_now() - start < 10)
		rc = net->accept(lc, &recv, NULL);
	if (rc != ncclRemoteError || recv)
		return 12;
	if (harness_now() - start > 3 || harness_warn_count() != 1)
		return 13;
	net->closeListen(lc);
	net->finalize(c);
	return 0;
}

/* NCCL_CUMEM_MONITOR=1 with a 50 ms interval: traffic lines for both ends
 * while messages flow, a close line per connection, and a finalize line
 * that finds nothing live once everything is closed. */
static int child_monitor(void)
{
	uint8_t *src = malloc(1 << 20), *dst = malloc(1 << 20);
	void *c, *send, *recv, *sreq, *rreq;
	double start, end;
	int size;

	if (!src || !dst || !harness_open() || !(c = harness_init()))
		return 10;
	if (harness_pair(c, &send, &recv) != ncclSuccess)
		return 11;
	start = harness_now();
	end = start + 0.4;
	for (uint64_t m = 0; harness_now() < end; m++) {
		pattern_fill(src, 1 << 20, m);
		if (net->irecv(recv, 1, (void **)&dst, &(size_t){ 1 << 20 }, &(int){ 0 }, NULL, NULL,
			       &rreq))
			return 12;
		if (harness_isend(send, src, 1 << 20, NULL, &sreq, 10))
			return 13;
		if (harness_wait(sreq, &size, 10) || harness_wait(rreq, &size, 10))
			return 14;
		if (pattern_check(dst, 1 << 20, m) != 1 << 20)
			return 15;
		usleep(5000);
	}
	if (harness_info_count("monitor: send comm") < 2 ||
	    harness_info_count("monitor: receive comm") < 2)
		return 16;
	if (harness_info_count("GB/s") < 4)
		return 17;
	/* The pools are the process's: at most one line per 50 ms interval,
	 * not one per connection that ticks in it (both connections tick
	 * here, so per connection it would be about twice that).  Counted
	 * against the time that passed, not against one connection's lines:
	 * the other connection may tick last. */
	if (harness_info_count("staging pools now: none") < 1 ||
	    harness_info_count("staging pools now") > (int)((harness_now() - start) / 0.05) + 1)
		return 20;
	net->closeSend(send);
	net->closeRecv(recv);
	if (harness_info_count("send comm") < 3 || harness_info_count(" closed: ") != 2)
		return 18;
	net->finalize(c);
	if (harness_info_count("at finalize 0 copy engine(s), 0 exported allocation(s), "
			       "0 peer mapping(s), 0 connect(s) in progress, 0 staging pool(s)") != 1 ||
	    harness_info_count("staging pools at finalize: none") != 1)
		return 19;
	free(src);
	free(dst);
	return 0;
}

static void test_monitor_lines(void **state)
{
	const char *env[] = { "NCCL_CUMEM_MONITOR", "1", "NCCL_CUMEM_MONITOR_INTERVAL", "0.05",
			      NULL };

	(void)state;
	assert_int_equal(run_child("--child-monitor", env), 0);
}

/* NCCL_SM_FREE_VERBOSE=1: each connection says once how its messages
 * move (here, host memory: through the shared-memory ring or TCP), not
 * once per message.  Without the variable it stays quiet. */
static int child_paths(void)
{
	uint8_t *src = malloc(4096), *dst = malloc(4096);
	int verbose = getenv("NCCL_SM_FREE_VERBOSE") != NULL;
	void *c, *send, *recv, *sreq, *rreq;
	int size;

	if (!src || !dst || !harness_open() || !(c = harness_init()))
		return 10;
	if (harness_pair(c, &send, &recv) != ncclSuccess)
		return 11;
	for (uint64_t m = 0; m < 3; m++) {
		pattern_fill(src, 4096, m);
		if (net->irecv(recv, 1, (void **)&dst, &(size_t){ 4096 }, &(int){ 0 }, NULL, NULL,
			       &rreq))
			return 12;
		if (harness_isend(send, src, 4096, NULL, &sreq, 10))
			return 13;
		if (harness_wait(sreq, &size, 10) || harness_wait(rreq, &size, 10))
			return 14;
		if (pattern_check(dst, 4096, m) != 4096)
			return 15;
	}
	if (harness_info_count("sending connection (") != verbose ||
	    harness_info_count("receiving connection (") != verbose)
		return 16;
	if (harness_info_count("message 0 is the first moved through the connection's host "
			       "buffers") != 2 * verbose)
		return 17;
	net->closeSend(send);
	net->closeRecv(recv);
	net->finalize(c);
	free(src);
	free(dst);
	return 0;
}

static void test_path_lines(void **state)
{
	const char *verbose[] = { "NCCL_SM_FREE_VERBOSE", "1", NULL };
	const char *quiet[] = { NULL };

	(void)state;
	assert_int_equal(run_child("--child-paths", verbose), 0);
	assert_int_equal(run_child("--child-paths", quiet), 0);
}

/* NCCL's hints before each connect and accept (net v11 setNetAttr, as
 * NCCL 2.28's net.cc gives them): send/recv connections carry Send, Recv,
 * AlltoAll, Scatter and Gather (ncclFunc_t 6-10), ring and tree ones
 * "undefined".  With NCCL_SM_FREE_VERBOSE=1 every comm says which kind
 * it was made as. */
#define OP_P2P ((1u << 6) | (1u << 7) | (1u << 8) | (1u << 9) | (1u << 10))
#define OP_UNDEFINED 0xffffffffu

static int hinted_pair(void *c, const ncclNetAttr_v11_t *hint, void **send, void **recv)
{
	char handle[NCCL_NET_HANDLE_MAXSIZE];
	double end = harness_now() + 10;
	ncclNetAttr_v11_t a;
	void *lc = NULL;
	int rc;

	*send = *recv = NULL;
	rc = net->listen(c, 0, handle, &lc);
	while (!rc && (!*send || !*recv) && harness_now() < end) {
		a = *hint;	/* NCCL's is a temporary too */
		if (!*send && ((rc = net->setNetAttr(c, &a)) || (rc = net->connect(c, 0, handle, send, NULL))))
			break;
		a = *hint;
		if (!*recv && ((rc = net->setNetAttr(c, &a)) || (rc = net->accept(lc, recv, NULL))))
			break;
	}
	if (lc)
		net->closeListen(lc);
	if (!rc && (!*send || !*recv))
		rc = ncclInternalError;
	return rc;
}

static int child_conn_kinds(void)
{
	static const char *const kinds[] = { "send/recv connection", "ring/tree connection" };
	ncclNetAttr_v11_t hint;
	void *c, *send, *recv;

	if (!harness_open() || !(c = harness_init()))
		return 10;
	if (net->setNetAttr(c, NULL) != ncclSuccess)	/* "may be NULL" */
		return 11;
	for (int k = 0; k < 2; k++) {
		memset(&hint, 0xff, sizeof(hint));
		hint.op = k == 0 ? OP_P2P : OP_UNDEFINED;
		if (hinted_pair(c, &hint, &send, &recv) != ncclSuccess)
			return 12;
		if (harness_info_count(kinds[k]) != 2)
			return 13 + k;
		net->closeSend(send);
		net->closeRecv(recv);
	}
	/* No hint since: the hints were used up by the comms they named. */
	if (harness_pair(c, &send, &recv) != ncclSuccess)
		return 15;
	if (harness_info_count("unhinted connection") != 2 || harness_info_count(kinds[0]) != 2 ||
	    harness_info_count(kinds[1]) != 2)
		return 16;
	net->closeSend(send);
	net->closeRecv(recv);
	net->finalize(c);
	return 0;
}

/* With P2P off and NCCL's hints (v11), a connection made without one gets
 * one WARN per process: its ring registrations would not be declined.
 * Hinted connections, NCCL_SYMMEM_COLL_REGISTER=1 and P2P on give none.
 * EXPECT_WARN: 1 or 0. */
/* Older NCCL: the v10 table, whose connections never carry a hint. */
static int v10_pairs(void *lib)
{
	const ncclNet_v10_t *v10 = dlsym(lib, "ncclNetPlugin_v10");
	char handle[NCCL_NET_HANDLE_MAXSIZE];

	if (!v10 || v10->init(harness_logger, NULL) != ncclSuccess)
		return 20;
	for (int k = 0; k < 2; k++) {
		double end = harness_now() + 10;
		void *lc = NULL, *send = NULL, *recv = NULL;

		if (v10->listen(0, handle, &lc) != ncclSuccess)
			return 21;
		while ((!send || !recv) && harness_now() < end) {
			if ((!send && v10->connect(0, NULL, handle, &send, NULL) != ncclSuccess) ||
			    (!recv && v10->accept(lc, &recv, NULL) != ncclSuccess))
				return 22;
		}
		v10->closeListen(lc);
		if (!send || !recv)
			return 23;
		v10->closeSend(send);
		v10->closeRecv(recv);
	}
	return harness_warn_count() || harness_repeat_count() ? 24 : 0;
}

static int child_unhinted(void)
{
	const char *want = getenv("EXPECT_WARN");
	ncclNetAttr_v11_t ring = { .op = OP_UNDEFINED };
	void *lib = harness_open(), *c, *send, *recv;

	if (!want || !lib)
		return 10;
	if (getenv("USE_V10"))
		return v10_pairs(lib);
	if (!(c = harness_init()))
		return 10;
	if (hinted_pair(c, &ring, &send, &recv) != ncclSuccess || harness_warn_count())
		return 11;
	net->closeSend(send);
	net->closeRecv(recv);
	for (int k = 0; k < 2; k++) {
		if (harness_pair(c, &send, &recv) != ncclSuccess)
			return 12;
		net->closeSend(send);
		net->closeRecv(recv);
	}
	if (harness_warn_count() != atoi(want) || harness_repeat_count())
		return 13;	/* once per process: no "again:" repeats either */
	if (atoi(want) && !strstr(harness_last_warn(), "without saying what it carries"))
		return 14;
	net->finalize(c);
	return 0;
}

static void test_unhinted_connection_warns(void **state)
{
	const char *off[] = { "NCCL_P2P_DISABLE", "1", "EXPECT_WARN", "1", NULL };
	const char *kept[] = { "NCCL_P2P_DISABLE", "1", "NCCL_SYMMEM_COLL_REGISTER", "1",
			       "EXPECT_WARN", "0", NULL };
	const char *on[] = { "NCCL_P2P_DISABLE", "0", "EXPECT_WARN", "0", NULL };
	const char *oob[] = { "NCCL_P2P_DISABLE", "1", "NCCL_OOB_NET_ENABLE", "1",
			      "EXPECT_WARN", "0", NULL };
	const char *v10[] = { "NCCL_P2P_DISABLE", "1", "USE_V10", "1", "EXPECT_WARN", "0", NULL };

	(void)state;
	assert_int_equal(run_child("--child-unhinted", off), 0);
	assert_int_equal(run_child("--child-unhinted", kept), 0);
	assert_int_equal(run_child("--child-unhinted", on), 0);
	assert_int_equal(run_child("--child-unhinted", oob), 0);
	assert_int_equal(run_child("--child-unhinted", v10), 0);
}

static void test_connection_kinds(void **state)
{
	const char *verbose[] = { "NCCL_SM_FREE_VERBOSE", "1", NULL };

	(void)state;
	assert_int_equal(run_child("--child-conn-kinds", verbose), 0);
}

/* With P2P off, init says once what becomes of user buffers NCCL registers
 * on ring connections, from the table NCCL chose: the v11 one (NCCL 2.28,
 * which hints) declines them unless they are kept, older ones cannot.
 * EXPECT_HINTS names the case: v11, v10, kept, or p2p-on (no line). */
static int child_hints(void)
{
	static const char *const lines[] = {
		"NCCL says which connections are rings", "NCCL gives no connection hints",
		"stay registered (NCCL_SYMMEM_COLL_REGISTER=1",
	};
	const char *want = getenv("EXPECT_HINTS");
	void *lib = harness_open(), *c = NULL;
	int expect[3] = { 0, 0, 0 };

	if (!lib || !want)
		return 10;
	if (!strcmp(want, "v10")) {
		const ncclNet_v10_t *v10 = dlsym(lib, "ncclNetPlugin_v10");

		if (!v10 || v10->init(harness_logger, NULL) != ncclSuccess)
			return 11;
		expect[1] = 1;
	} else {
		if (!(c = harness_init()))
			return 12;
		expect[0] = !strcmp(want, "v11");
		expect[2] = !strcmp(want, "kept");
	}
	for (int i = 0; i < 3; i++)
		if (harness_info_count(lines[i]) != expect[i])
			return 13 + i;
	if (c)
		net->finalize(c);
	return 0;
}

static void test_hints_announced(void **state)
{
	const char *v11[] = { "NCCL_P2P_DISABLE", "1", "EXPECT_HINTS", "v11", NULL };
	const char *v10[] = { "NCCL_P2P_DISABLE", "1", "EXPECT_HINTS", "v10", NULL };
	const char *kept[] = { "NCCL_P2P_DISABLE", "1", "NCCL_SYMMEM_COLL_REGISTER", "1",
			       "EXPECT_HINTS", "kept", NULL };
	const char *p2p_on[] = { "NCCL_P2P_DISABLE", "0", "EXPECT_HINTS", "p2p-on", NULL };

	(void)state;
	assert_int_equal(run_child("--child-hints", v11), 0);
	assert_int_equal(run_child("--child-hints", v10), 0);
	assert_int_equal(run_child("--child-hints", kept), 0);
	assert_int_equal(run_child("--child-hints", p2p_on), 0);
}

static int setup(void **state)
{
	*state = harness_open();
	if (!*state)
		return -1;
	ctx = harness_init();
	return ctx ? 0 : -1;
}

static int teardown(void **state)
{
	(void)state;
	return net->finalize(ctx) == ncclSuccess ? 0 : -1;
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_exported_versions),
		cmocka_unit_test(test_properties),
		cmocka_unit_test(test_one_thread_fifo),
		cmocka_unit_test(test_send_waits_for_receive),
		cmocka_unit_test(test_oversized_send),
		cmocka_unit_test(test_refused_arguments),
		cmocka_unit_test(test_sizes_written_when_done),
		cmocka_unit_test(test_32_in_flight),
		cmocka_unit_test(test_untested_requests_hold_their_slots),
		cmocka_unit_test(test_close_with_requests_in_flight),
		cmocka_unit_test(test_double_close_and_bad_objects),
		cmocka_unit_test(test_stale_pointer_after_reuse),
		cmocka_unit_test(test_registration),
		cmocka_unit_test(test_registration_dmabuf),
		cmocka_unit_test(test_corrupt_handles),
		cmocka_unit_test(test_listener_gone),
		cmocka_unit_test(test_threads_own_comms),
		cmocka_unit_test(test_process_stream),
		cmocka_unit_test(test_dead_sender),
		cmocka_unit_test(test_dead_receiver),
		cmocka_unit_test(test_dead_peer_many_connections),
		cmocka_unit_test(test_bad_env_fails_init),
		cmocka_unit_test(test_nccl_env_accepted),
		cmocka_unit_test(test_finalize_frees_abandoned_connect),
		cmocka_unit_test(test_last_finalize_says_unload),
		cmocka_unit_test(test_accept_timeout),
		cmocka_unit_test(test_ib_hca_reported),
		cmocka_unit_test(test_ib_forced_without_device),
		cmocka_unit_test(test_monitor_lines),
		cmocka_unit_test(test_path_lines),
		cmocka_unit_test(test_connection_kinds),
		cmocka_unit_test(test_hints_announced),
		cmocka_unit_test(test_unhinted_connection_warns),
	};

	if (argc > 1 && !strcmp(argv[1], "--child-bad-env"))
		return child_bad_env();
	if (argc > 1 && !strcmp(argv[1], "--child-nccl-env"))
		return child_nccl_env();
	if (argc > 1 && !strcmp(argv[1], "--child-accept-timeout"))
		return child_accept_timeout();
	if (argc > 1 && !strcmp(argv[1], "--child-monitor"))
		return child_monitor();
	if (argc > 1 && !strcmp(argv[1], "--child-last-finalize"))
		return child_last_finalize();
	if (argc > 1 && !strcmp(argv[1], "--child-abandoned-connect"))
		return child_abandoned_connect();
	if (argc > 1 && !strcmp(argv[1], "--child-conn-kinds"))
		return child_conn_kinds();
	if (argc > 1 && !strcmp(argv[1], "--child-paths"))
		return child_paths();
	if (argc > 1 && !strcmp(argv[1], "--child-ib-hca"))
		return child_ib_hca();
	if (argc > 1 && !strcmp(argv[1], "--child-ib-forced"))
		return child_ib_forced();
	if (argc > 1 && !strcmp(argv[1], "--child-hints"))
		return child_hints();
	if (argc > 1 && !strcmp(argv[1], "--child-unhinted"))
		return child_unhinted();
	return cmocka_run_group_tests(tests, setup, teardown);
}
