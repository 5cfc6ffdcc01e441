/* The ibverbs backend moving real data: needs an RDMA device (Soft-RoCE
 * in a VM will do: scripts/rdma_vm.sh runs this program there).  Without
 * one the whole program reports itself skipped (TAP "1..0 # SKIP"). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "symmem.h"
#include "transport.h"
#include "tp_pair.h"

static int have_rdma(void)
{
	char found[256], selected[256], why[96];

	return tp_rdma_devices("", found, sizeof(found), selected, sizeof(selected), why,
			       sizeof(why)) > 0;
}

static void fill(uint8_t *p, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)(i * 131 + seed * 7 + 1);
}

/* Sizes from 0 B to 3 MiB, more messages than request slots, half of
 * them through registrations, eight in flight at once. */
static void test_ib_messages(void **state)
{
	struct tp_options o = ib_options("rxe");
	enum { BIG = 3 << 20, BATCH = 8 };
	static const size_t sizes[] = { 0, 1, 7, 4096, 65537, 1 << 20, BIG };
	uint8_t *src = malloc((size_t)BIG * BATCH), *dst = malloc((size_t)BIG * BATCH);
	struct tp_region *sreg, *rreg;
	struct tp_comm *s, *r;
	unsigned m = 0;

	(void)state;
	assert_int_equal(make_pair(&o, &s, &r), SM_OK);
	assert_string_equal(tp_comm_backend(s), "ib");
	assert_string_equal(tp_comm_backend(r), "ib");
	assert_int_equal(tp_register(s, src, (size_t)BIG * BATCH, TP_MEM_HOST, &sreg), SM_OK);
	assert_int_equal(tp_register(r, dst, (size_t)BIG * BATCH, TP_MEM_HOST, &rreg), SM_OK);
	for (int round = 0; round < 10; round++) {
		struct tp_req *sr[BATCH], *rr[BATCH];
		size_t got[BATCH];
		double end = now() + 20;
		int use_reg = round % 2;

		memset(dst, 0xa5, (size_t)BIG * BATCH);	/* poison */
		for (int i = 0; i < BATCH; i++) {
			size_t size = sizes[(m + (unsigned)i) % 7];

			fill(src + (size_t)i * BIG, size, m + (unsigned)i);
			assert_int_equal(tp_irecv(r, dst + (size_t)i * BIG, BIG,
						  use_reg ? rreg : NULL, &rr[i]), SM_OK);
		}
		for (int i = 0; i < BATCH; i++) {
			size_t size = sizes[(m + (unsigned)i) % 7];

			sr[i] = NULL;
			while (!sr[i] && now() < end)
				assert_int_equal(tp_isend(s, src + (size_t)i * BIG, size,
							  use_reg ? sreg : NULL, &sr[i]), SM_OK);
			assert_non_null(sr[i]);
		}
		for (int i = 0; i < BATCH; i++)
			got[i] = complete_both(sr[i], rr[i], end);
		for (int i = 0; i < BATCH; i++) {
			size_t size = sizes[(m + (unsigned)i) % 7];

			assert_int_equal(got[i], size);
			assert_memory_equal(src + (size_t)i * BIG, dst + (size_t)i * BIG, size);
			if (size < BIG)	/* nothing past the message */
				assert_int_equal(dst[(size_t)i * BIG + size], 0xa5);
		}
		m += BATCH;
	}
	tp_deregister(s, sreg);
	tp_deregister(r, rreg);
	tp_close(s);
	tp_close(r);
	free(src);
	free(dst);
}

/* Larger than the posted receive: both sides fail, nothing lands. */
static void test_ib_oversized_send(void **state)
{
	struct tp_options o = ib_options("rxe");
	uint8_t src[200], dst[100];
	struct tp_comm *s, *r;
	struct tp_req *sr = NULL, *rr;
	double end = now() + 10;
	int rc = SM_OK;

	(void)state;
	assert_int_equal(make_pair(&o, &s, &r), SM_OK);
	memset(src, 0x11, sizeof(src));
	memset(dst, 0xa5, sizeof(dst));
	assert_int_equal(tp_irecv(r, dst, sizeof(dst), NULL, &rr), SM_OK);
	while (rc == SM_OK && !sr && now() < end)
		rc = tp_isend(s, src, sizeof(src), NULL, &sr);
	assert_int_equal(rc, SM_ERR_USAGE);
	assert_non_null(strstr(sm_last_error(), "posted receive of 100 bytes"));
	assert_int_equal(wait_failure(rr, end), SM_ERR_USAGE);
	assert_non_null(strstr(sm_last_error(), "refused message 0"));
	for (size_t i = 0; i < sizeof(dst); i++)
		assert_int_equal(dst[i], 0xa5);
	tp_close(s);
	tp_close(r);
}

/* Soft-RoCE has no DMA-BUF registration: the probe (ibv_reg_dmabuf_mr of
 * fd -1 on the real device) says so, the same way each time it is asked. */
static void test_ib_dmabuf_probe(void **state)
{
	struct tp_options o = ib_options("rxe");
	char desc[256], again[256];

	(void)state;
	assert_int_equal(tp_ib_dmabuf(&o, desc, sizeof(desc)), 0);
	print_message("# %s\n", desc);
	assert_non_null(strstr(desc, "rxe0: the DMA-BUF probe answered"));
	assert_non_null(strstr(desc, "its driver has no DMA-BUF registration"));
	assert_int_equal(tp_ib_dmabuf(&o, again, sizeof(again)), 0);
	assert_string_equal(again, desc);
}

/* Without GPUDirect RDMA, GPU memory is refused at registration with the
 * probe's answer and the way out in the message; NCCL's DMA-BUF
 * descriptor is left open (NCCL closes it). */
static void test_ib_gpu_memory_refused(void **state)
{
	struct tp_options o = ib_options("rxe");
	struct tp_region *reg = (struct tp_region *)1;
	struct tp_comm *s, *r;
	char buf[64];
	int fds[2];

	(void)state;
	assert_int_equal(make_pair(&o, &s, &r), SM_OK);
	assert_int_equal(tp_register(r, buf, sizeof(buf), TP_MEM_CUDA, &reg), SM_ERR_USAGE);
	assert_null(reg);
	assert_non_null(strstr(sm_last_error(), "NCCL_NET_GDR_LEVEL"));
	assert_non_null(strstr(sm_last_error(), "rxe0 has no GPUDirect RDMA (the DMA-BUF probe"));
	assert_int_equal(pipe(fds), 0);
	reg = (struct tp_region *)1;
	assert_int_equal(tp_register_dmabuf(s, buf, sizeof(buf), fds[0], 0, &reg), SM_ERR_USAGE);
	assert_null(reg);
	assert_non_null(strstr(sm_last_error(), "the DMA-BUF probe"));
	assert_int_not_equal(fcntl(fds[0], F_GETFD), -1);
	close(fds[0]);
	close(fds[1]);
	tp_close(s);
	tp_close(r);
}

/* NCCL deregisters after an abort, once the comm is closed: the memory
 * region outlives its queue pair and is released then (the device stays
 * open until it is: ASan and the driver would catch a use after free). */
static void test_ib_region_outlives_comm(void **state)
{
	struct tp_options o = ib_options("rxe");
	struct tp_region *sreg, *rreg;
	struct tp_comm *s, *r;
	static uint8_t a[8192], b[8192];

	(void)state;
	assert_int_equal(make_pair(&o, &s, &r), SM_OK);
	assert_int_equal(tp_register(s, a, sizeof(a), TP_MEM_HOST, &sreg), SM_OK);
	assert_int_equal(tp_register(r, b, sizeof(b), TP_MEM_HOST, &rreg), SM_OK);
	tp_close(s);
	tp_close(r);
	tp_deregister(NULL, sreg);
	tp_deregister(NULL, rreg);
}

/* A sender that dies with a receive posted: the receive fails within a
 * few seconds, from the socket's hang-up or the queue pair's error. */
static void test_ib_peer_dies(void **state)
{
	struct tp_options o = ib_options("rxe");
	uint8_t h[TP_HANDLE_SIZE], dst[64];
	struct tp_listener *l;
	struct tp_comm *r = NULL;
	struct tp_req *rr;
	double end;
	int rc = SM_OK, status;
	pid_t pid;

	(void)state;
	assert_int_equal(tp_listen(&o, 0, h, &l), SM_OK);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct tp_comm *s = NULL;
		double stop = now() + 10;

		while (!s && now() < stop)
			if (tp_connect(&o, h, &s))
				_exit(1);
		_exit(s ? 0 : 2);	/* dies without closing */
	}
	end = now() + 10;
	while (!r && rc == SM_OK && now() < end)
		rc = tp_accept(l, &r);
	assert_int_equal(rc, SM_OK);
	assert_non_null(r);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_int_equal(WEXITSTATUS(status), 0);
	assert_int_equal(tp_irecv(r, dst, sizeof(dst), NULL, &rr), SM_OK);
	assert_int_equal(wait_failure(rr, now() + 5), SM_ERR_REMOTE);
	tp_close(r);
	tp_close_listener(l);
}

/* A GID index the port does not have: the connect fails and says so. */
static void test_ib_bad_gid_index(void **state)
{
	struct tp_options o = ib_options("rxe");
	struct tp_comm *s, *r;

	(void)state;
	o.ib_gid_index = 255;
	assert_int_equal(make_pair(&o, &s, &r), SM_ERR_USAGE);
	assert_non_null(strstr(sm_last_error(), "NCCL_IB_GID_INDEX=255"));
}

/* NCCL_IB_HCA `works` connects; `fails` does not, with an error that
 * holds `why`. */
static void hca_works_and_fails(const char *works, const char *fails, const char *why)
{
	struct tp_options ok = ib_options(works), bad = ib_options(fails);
	struct tp_comm *s, *r;

	assert_int_equal(make_pair(&ok, &s, &r), SM_OK);
	tp_close(s);
	tp_close(r);
	assert_int_equal(make_pair(&bad, &s, &r), SM_ERR_USAGE);
	assert_non_null(strstr(sm_last_error(), why));
}

/* A port NCCL_IB_HCA names: the first (Soft-RoCE has one) works, one the
 * device lacks fails the connect and says which. */
static void test_ib_named_port(void **state)
{
	(void)state;
	hca_works_and_fails("rxe:1", "rxe:2", "names port 2");
}

/* An exclusion list that leaves out the only port of the one device it
 * leaves in fails the connect and says so; one that leaves out a port
 * the device lacks changes nothing. */
static void test_ib_excluded_port(void **state)
{
	(void)state;
	hca_works_and_fails("^rxe0:2,far", "^rxe0:1,far", "leaves out every active port of rxe0");
}

/* With a device: automatic picks ibverbs for a peer on another host. */
static void test_ib_auto_between_hosts(void **state)
{
	(void)state;
	auto_between_hosts("rxe", 1, "ib");
}

/* Two RDMA ports that cannot reach each other: rxe0 and far0, Soft-RoCE
 * on two networks of one machine (scripts/rdma_vm.sh makes far0 on a
 * dummy network card; one host's two Soft-RoCE devices do not route to
 * each other).  The connector's probe write finds out at setup. */
static int have_far(void)
{
	char found[256], selected[256], why[96];

	return tp_rdma_devices("far", found, sizeof(found), selected, sizeof(selected), why,
			       sizeof(why)) > 0;
}

static char warned[512];
static char connector_error[512];

static void keep_warning(int warn, const char *msg)
{
	if (warn)
		snprintf(warned, sizeof(warned), "%s", msg);
}

/* One 3000-byte message from s to r, every byte checked against a
 * poisoned buffer. */
static void one_checked_message(struct tp_comm *s, struct tp_comm *r, unsigned seed)
{
	uint8_t src[3000], dst[3000];
	struct tp_req *sr, *rr;

	fill(src, sizeof(src), seed);
	memset(dst, 0xa5, sizeof(dst));
	assert_int_equal(tp_irecv(r, dst, sizeof(dst), NULL, &rr), SM_OK);
	sr = isend_when_posted(s, src, sizeof(src), NULL, now() + 10);
	assert_int_equal(complete_both(sr, rr, now() + 10), sizeof(src));
	assert_memory_equal(src, dst, sizeof(src));
}

/* Listener with `lo`, connector with `co`, posed on two hosts; both ends
 * driven here until both exist or one fails; returns the status and how
 * long it took. */
static int two_hosts(struct tp_options lo, struct tp_options co, struct tp_comm **s,
		     struct tp_comm **r, double *took)
{
	struct tp_handle_info info;
	uint8_t h[TP_HANDLE_SIZE];
	struct tp_listener *l;
	double start = now(), end = start + 30;
	int rc = SM_OK, lrc = SM_OK;

	/* 4.096 us x 2^12 = 17 ms per retry: the probe's wait is its floor, 2 s. */
	lo.ib_timeout = co.ib_timeout = 12;
	assert_int_equal(tp_listen(&lo, 0, h, &l), SM_OK);
	assert_int_equal(tp_handle_decode(h, &info), SM_OK);
	info.host_id ^= 0xffff;		/* a peer on another host */
	tp_handle_encode(&info, h);
	*s = *r = NULL;
	while ((!*s || !*r) && now() < end && !rc) {
		if (!*s && (rc = tp_connect(&co, h, s)) != SM_OK)
			snprintf(connector_error, sizeof(connector_error), "%s", sm_last_error());
		/* The listener keeps going after the connector failed: it
		 * must fail too, not wait for its deadline. */
		if (!*r && lrc == SM_OK)
			lrc = tp_accept(l, r);
	}
	while (rc && !*r && lrc == SM_OK && now() < end)
		lrc = tp_accept(l, r);
	*took = now() - start;
	print_message("# pair: connector %d (%s), listener %d (%s), %.2f s\n", rc,
		      rc ? connector_error : "-", lrc, lrc ? sm_last_error() : "-", *took);
	tp_close_listener(l);
	if (rc && lrc == SM_OK)
		return SM_ERR_INTERNAL;		/* the listener never noticed */
	return rc ? rc : lrc;
}

/* Listener on `lhca`, connector on `chca` (rxe and far, one way or the
 * other: which end finds out first differs). */
static int unreachable_pair(const char *lhca, const char *chca, int ib_mode, struct tp_comm **s,
			    struct tp_comm **r, double *took)
{
	struct tp_options lo = ib_options(lhca), co = ib_options(chca);

	lo.ib = co.ib = ib_mode;
	if (ib_mode == 1)
		lo.backend = co.backend = TP_BACKEND_AUTO;
	return two_hosts(lo, co, s, r, took);
}

/* The two ends, listener first: each way round a different end finds
 * out (Soft-RoCE refuses the route when a queue pair joins the peer's). */
static const char *const far_pairs[][2] = { { "rxe", "far" }, { "far", "rxe" } };

/* Automatic choice: the connection falls back to TCP within seconds, says
 * so in one WARN, and carries data. */
static void test_ib_unreachable_falls_back_to_tcp(void **state)
{
	struct tp_comm *s, *r;
	double took;

	(void)state;
	if (!have_far())
		skip();
	for (int i = 0; i < 2; i++) {
		warned[0] = '\0';
		sm_set_log_sink(keep_warning);
		assert_int_equal(unreachable_pair(far_pairs[i][0], far_pairs[i][1], 1, &s, &r,
						  &took), SM_OK);
		sm_set_log_sink(NULL);
		assert_true(took < 10);
		assert_string_equal(tp_comm_backend(s), "tcp");
		assert_string_equal(tp_comm_backend(r), "tcp");
		assert_non_null(strstr(warned, "cannot reach each other"));
		assert_non_null(strstr(warned, "this connection uses TCP"));
		one_checked_message(s, r, 9 + (unsigned)i);
		tp_close(s);
		tp_close(r);
	}
}

/* Required ibverbs: both ends fail within seconds (not after the queue
 * pair's retries), each naming both ports. */
static void test_ib_unreachable_forced_fails(void **state)
{
	struct tp_comm *s, *r;
	double took;

	(void)state;
	if (!have_far())
		skip();
	for (int i = 0; i < 2; i++) {
		assert_int_equal(unreachable_pair(far_pairs[i][0], far_pairs[i][1], 2, &s, &r,
						  &took), SM_ERR_REMOTE);
		assert_true(took < 10);
		assert_null(s);
		assert_null(r);
		assert_non_null(strstr(connector_error, "cannot reach each other"));
		assert_non_null(strstr(connector_error, "NCCL_SYMMEM_BACKEND=ib requires RDMA"));
		assert_non_null(strstr(sm_last_error(), "cannot reach each other"));
	}
}

static char infos[2048];

static void keep_infos(int warn, const char *msg)
{
	size_t used = strlen(infos);

	if (!warn && used + 1 < sizeof(infos))
		snprintf(infos + used, sizeof(infos) - used, "%s\n", msg);
}

/* Rails: the connector's closest port (far0, as this plugin device's turn
 * gives it) is on another network than the listener's (rxe0), and another
 * port it may use (rxe0) is on that one.  It takes that port, says so in
 * one INFO line, and the connection runs on ibverbs, required here, so a
 * connector that kept far0 would fail. */
static void test_ib_rail_match(void **state)
{
	struct tp_options lo = ib_options("rxe"), co = ib_options("");
	char found[256], selected[256], why[96];
	struct tp_comm *s, *r;
	const char *p;
	double took;

	(void)state;
	if (!have_far())
		skip();
	/* Software devices have no PCI place: the plugin's devices take the
	 * selected ones in turn, so device k of the list goes to dev k. */
	tp_rdma_devices("", found, sizeof(found), selected, sizeof(selected), why, sizeof(why));
	p = strstr(selected, "far");
	assert_non_null(p);
	co.dev = 0;
	for (const char *q = selected; q < p; q++)
		co.dev += *q == ',';
	infos[0] = '\0';
	sm_set_log_sink(keep_infos);
	assert_int_equal(two_hosts(lo, co, &s, &r, &took), SM_OK);
	sm_set_log_sink(NULL);
	print_message("# %s", infos);
	assert_string_equal(tp_comm_backend(s), "ib");
	assert_string_equal(tp_comm_backend(r), "ib");
	assert_non_null(strstr(infos, "is on the network of rxe0"));
	assert_non_null(strstr(infos, "not on that of the closest, far0"));
	assert_non_null(strstr(infos, "the connection takes rxe0"));
	one_checked_message(s, r, 21);
	tp_close(s);
	tp_close(r);

	/* Its own closest port on the listener's network: no switch, no line. */
	co.dev = (co.dev + 1) % 2;
	infos[0] = '\0';
	sm_set_log_sink(keep_infos);
	assert_int_equal(two_hosts(lo, co, &s, &r, &took), SM_OK);
	sm_set_log_sink(NULL);
	assert_string_equal(tp_comm_backend(s), "ib");
	assert_null(strstr(infos, "the connection takes"));
	tp_close(s);
	tp_close(r);
}

/* A probe nobody answers: the listener's process dies after its reply,
 * taking its queue pair with it, before the connector probes.  The
 * connector (ibverbs required) fails within the probe's wait, well before
 * the 30 s of retries NCCL's timeout would give, and says why. */
static void test_ib_probe_unanswered(void **state)
{
	struct tp_options o = ib_options("rxe");
	uint8_t h[TP_HANDLE_SIZE];
	struct tp_comm *s = NULL;
	int fds[2], go[2], rc = SM_OK, status;
	double start, end;
	pid_t pid;

	(void)state;
	o.ib_timeout = 12;	/* 17 ms per retry: the queue pair gives up in 0.2 s */
	assert_int_equal(pipe(fds), 0);
	assert_int_equal(pipe(go), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct tp_listener *l;
		struct tp_comm *r = NULL;
		double stop = now() + 20;
		char c;

		if (tp_listen(&o, 0, h, &l) || write(fds[1], h, sizeof(h)) != sizeof(h))
			_exit(1);
		/* Answers only once the connector's hello waits in the socket. */
		if (read(go[0], &c, 1) != 1)
			_exit(2);
		while (!r && now() < stop)
			if (tp_accept(l, &r))
				_exit(3);
		_exit(4);	/* killed before this: the connector never says "ready" */
	}
	assert_int_equal(read(fds[0], h, sizeof(h)), (ssize_t)sizeof(h));
	/* The socket connects and the hello goes out (the kernel's backlog
	 * takes both); nothing can come back yet. */
	for (int i = 0; i < 50 && rc == SM_OK; i++) {
		rc = tp_connect(&o, h, &s);
		usleep(2000);
	}
	assert_int_equal(rc, SM_OK);
	assert_null(s);
	/* The listener proves the token and takes the connector's setup; the
	 * connector stops there, so the listener answers, then dies with its
	 * reply in the socket. */
	assert_int_equal(write(go[1], "g", 1), 1);
	for (int i = 0; i < 5000 && rc == SM_OK && !tp_connects_awaiting_reply(); i++) {
		rc = tp_connect(&o, h, &s);
		usleep(1000);
	}
	assert_int_equal(rc, SM_OK);
	assert_null(s);
	assert_int_equal(tp_connects_awaiting_reply(), 1);
	usleep(1000000);
	kill(pid, SIGKILL);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFSIGNALED(status));
	start = now();
	end = start + 20;
	while (rc == SM_OK && !s && now() < end)
		rc = tp_connect(&o, h, &s);
	print_message("# unanswered probe: %d (%s) after %.2f s\n", rc, sm_last_error(),
		      now() - start);
	assert_int_equal(rc, SM_ERR_REMOTE);
	assert_null(s);
	assert_true(now() - start < 5);
	assert_non_null(strstr(sm_last_error(), "probe write"));
	assert_non_null(strstr(sm_last_error(), "cannot reach each other"));
	for (int i = 0; i < 2; i++) {
		close(fds[i]);
		close(go[i]);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ib_messages),
		cmocka_unit_test(test_ib_oversized_send),
		cmocka_unit_test(test_ib_dmabuf_probe),
		cmocka_unit_test(test_ib_gpu_memory_refused),
		cmocka_unit_test(test_ib_peer_dies),
		cmocka_unit_test(test_ib_region_outlives_comm),
		cmocka_unit_test(test_ib_bad_gid_index),
		cmocka_unit_test(test_ib_named_port),
		cmocka_unit_test(test_ib_excluded_port),
		cmocka_unit_test(test_ib_auto_between_hosts),
		cmocka_unit_test(test_ib_unreachable_falls_back_to_tcp),
		cmocka_unit_test(test_ib_unreachable_forced_fails),
		cmocka_unit_test(test_ib_probe_unanswered),
		cmocka_unit_test(test_ib_rail_match),
	};

	if (!have_rdma()) {
		printf("1..0 # SKIP no RDMA device on this host (scripts/rdma_vm.sh runs these "
		       "under Soft-RoCE)\n");
		return 0;
	}
	return cmocka_run_group_tests(tests, NULL, NULL);
}
