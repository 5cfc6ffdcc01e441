/* The inner net plugin (NCCL_SYMMEM_INNER_NET) through the exported
 * table, as NCCL drives it: processes posed on two hosts (hosts.h) send
 * checked bytes around a ring, and the stand-in plugin (inner_standin.c)
 * logs what it carried, so each test says which plugin carried which
 * bytes.  Also: a library that cannot serve fails init with one WARN, a
 * handle that does not fit is refused, and NCCL sees the stand-in's
 * devices with what the copy-engine path cannot do taken out.
 *
 * meson sets SYMMEM_PLUGIN, NCCL_SYMMEM_INNER_NET (the v12 stand-in),
 * INNER_STANDIN_DIR (every build of it) and LD_LIBRARY_PATH (that
 * directory, for bare names).  This process never opens the plugin: each
 * rank and case is a fresh process that reads its environment anew. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <dlfcn.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fd_util.h"
#include "harness.h"
#include "hosts.h"
#include "standin_log.h"

#define MAX_MSG (256u << 10)
#define TRAFFIC_CLASS 5

/* ---- a rank of the ring ------------------------------------------------ */

struct ring {
	int n;
	int host[HOSTS_MAX_RANKS];
	int msgs;
	int version;		/* the stand-in's table: 12, 11, ... */
	char lib[512];		/* NCCL_SYMMEM_INNER_NET, "" = meson's */
};

static size_t msg_size(int rank, int i)
{
	uint64_t x = (uint64_t)(rank + 1) * 0x9e3779b97f4a7c15ull ^
		     (uint64_t)(i + 7) * 0xbf58476d1ce4e5b9ull;

	if (i == 0)
		return 0;	/* NCCL sends empty messages too */
	if (i == 1)
		return MAX_MSG;
	return (size_t)((x >> 17) % (MAX_MSG + 1));
}

static long long sent_bytes(int rank, int msgs)
{
	long long sum = 0;

	for (int i = 0; i < msgs; i++)
		sum += (long long)msg_size(rank, i);
	return sum;
}

static void *rank_init(int rank)
{
	return harness_open() ? standin_rank_init(rank, 42, TRAFFIC_CLASS) : NULL;
}

/* The INFO line that names a comm's path says inner plugin or this one. */
static int on_path(const char *kind, void *comm, int dev, int inner, int version)
{
	char needle[160];

	if (inner)
		snprintf(needle, sizeof(needle), "%s comm %p on device %d: inner net plugin "
			 "'standin' (v%d), to another host", kind, comm, dev, version);
	else
		snprintf(needle, sizeof(needle), "%s comm %p on device %d: shm data path", kind,
			 comm, dev);
	if (harness_info_count(needle) == 1)
		return 1;
	fprintf(stderr, "no INFO line \"%s\"\n", needle);
	return 0;
}

static int wait_both(void *sreq, void *rreq, int *got)
{
	double end = harness_now() + 20;
	int sdone = 0, rdone = 0, one = 0, sizes[64] = { 0 };

	while (!sdone || !rdone) {
		if (!sdone && net->test(sreq, &sdone, &one) != ncclSuccess)
			return -1;
		if (!rdone && net->test(rreq, &rdone, sizes) != ncclSuccess)
			return -1;
		if (harness_now() > end)
			return -1;
	}
	*got = sizes[0];
	return 0;
}

/* A receive for one message: the optional-completion hint on every
 * other one, as NCCL stores it for LL; NULL means "again". */
static int post_recv(void *recv, void *buf, void *mh, int hint, void **req)
{
	size_t cap = MAX_MSG;
	int tag = 0;
	double end = harness_now() + 10;

	do {
		*req = hint ? (void *)NCCL_NET_OPTIONAL_RECV_COMPLETION : NULL;
		if (net->irecv(recv, 1, &buf, &cap, &tag, &mh, NULL, req) != ncclSuccess)
			return -1;
	} while (!*req && harness_now() < end);
	return *req ? 0 : -1;
}

static int exchange(const struct ring *g, int rank, void *send, void *recv)
{
	int prev = (rank + g->n - 1) % g->n, got, rc = 0;
	uint8_t *sbuf = malloc(MAX_MSG), *rbuf = malloc(MAX_MSG);
	void *smh = NULL, *rmh = NULL, *sreq, *rreq;

	if (!sbuf || !rbuf || net->regMr(send, sbuf, MAX_MSG, NCCL_PTR_HOST, &smh) ||
	    net->regMr(recv, rbuf, MAX_MSG, NCCL_PTR_HOST, &rmh))
		rc = 30;
	for (int i = 0; !rc && i < g->msgs; i++) {
		size_t want = msg_size(prev, i);

		pattern_fill(sbuf, msg_size(rank, i), (uint64_t)rank << 32 | (uint64_t)i);
		memset(rbuf, 0, MAX_MSG);
		if (post_recv(recv, rbuf, rmh, i % 2, &rreq) ||
		    harness_isend(send, sbuf, msg_size(rank, i), smh, &sreq, 10) ||
		    wait_both(sreq, rreq, &got)) {
			rc = 31;
		} else if (net->irecvConsumed && net->irecvConsumed(recv, 1, rreq)) {
			rc = 35;	/* NCCL calls it for every receive, where exported */
		} else if ((size_t)got != want ||
			   pattern_check(rbuf, want, (uint64_t)prev << 32 | (uint64_t)i) != want) {
			fprintf(stderr, "rank %d message %d: %d bytes, expected %zu, first bad byte "
				"%zu\n", rank, i, got, want,
				pattern_check(rbuf, want, (uint64_t)prev << 32 | (uint64_t)i));
			rc = 32;
		}
	}
	if (smh && net->deregMr(send, smh))
		rc = rc ? rc : 33;
	if (rmh && net->deregMr(recv, rmh))
		rc = rc ? rc : 34;
	free(sbuf);
	free(rbuf);
	return rc;
}

static int ring_rank(int rank, int ctl, void *arg)
{
	const struct ring *g = arg;
	int next = (rank + 1) % g->n, prev = (rank + g->n - 1) % g->n;
	int send_inner = g->host[rank] != g->host[next], recv_inner = g->host[rank] != g->host[prev];
	char mine[NCCL_NET_HANDLE_MAXSIZE], theirs[NCCL_NET_HANDLE_MAXSIZE], needle[160];
	void *ctx, *lc, *send, *recv;
	int dev = rank % 2, rc;

	if (g->lib[0])
		setenv("NCCL_SYMMEM_INNER_NET", g->lib, 1);
	ctx = rank_init(rank);
	if (!ctx)
		return 10;
	if (net->listen(ctx, dev, mine, &lc) != ncclSuccess)
		return 11;
	if (hosts_swap_handle(ctl, mine, theirs))
		return 12;
	if (hosts_pair_up(ctx, dev, theirs, lc, &send, &recv))
		return 13;
	if (net->closeListen(lc) != ncclSuccess)
		return 14;
	if (!on_path("send", send, dev, send_inner, g->version) ||
	    !on_path("receive", recv, dev, recv_inner, g->version))
		return 15;
	rc = exchange(g, rank, send, recv);
	if (rc)
		return rc;
	if (net->closeSend(send) != ncclSuccess || net->closeRecv(recv) != ncclSuccess)
		return 16;
	/* This plugin's own account of what the inner plugin carried. */
	snprintf(needle, sizeof(needle), "send comm %p on device %d closed: %d messages, %lld "
		 "bytes through inner net plugin", send, dev, g->msgs, sent_bytes(rank, g->msgs));
	if (send_inner && harness_info_count(needle) != 1) {
		fprintf(stderr, "no INFO line \"%s\"\n", needle);
		return 17;
	}
	if (net->finalize(ctx) != ncclSuccess)
		return 18;
	if (harness_warn_count()) {
		fprintf(stderr, "rank %d: WARN %s\n", rank, harness_last_warn());
		return 19;
	}
	return 0;
}

static void run_ring(struct ring *g)
{
	struct hosts_job job;

	standin_log_reset();
	assert_int_equal(hosts_start(&job, g->n, g->host, ring_rank, g), 0);
	assert_int_equal(hosts_ring_handles(&job), 0);
	assert_int_equal(hosts_wait(&job), 0);
}

/* Whether the exported table has irecvConsumed, so that NCCL (and the
 * ranks here) call it for every receive: then the stand-in, which keeps
 * each receive until then, holds none at close. */
static int consumed_exported(void)
{
	void *lib = dlopen(getenv("SYMMEM_PLUGIN"), RTLD_NOW | RTLD_LOCAL);
	const ncclNet_v11_t *t = lib ? dlsym(lib, "ncclNetPlugin_v11") : NULL;
	int yes = t && t->irecvConsumed;

	assert_non_null(t);
	dlclose(lib);
	return yes;
}

/* What the stand-in's log says connection r -> r + 1 carried: all of
 * rank r's bytes when the two are on different hosts, else nothing (no
 * line at all: the stand-in never saw the connection). */
static void check_carried(const struct ring *g)
{
	char tag[16], next[16];
	int lines, held = consumed_exported() ? 0 : g->msgs;

	for (int r = 0; r < g->n; r++) {
		int to = (r + 1) % g->n;
		long long want = sent_bytes(r, g->msgs);

		snprintf(tag, sizeof(tag), "rank%d", r);
		snprintf(next, sizeof(next), "rank%d", to);
		if (g->host[r] == g->host[to]) {
			assert_int_equal(standin_log_lines(tag, "send"), 0);
			assert_int_equal(standin_log_lines(next, "recv"), 0);
			continue;
		}
		assert_int_equal(standin_log_sum(tag, "send", "bytes", &lines), want);
		assert_int_equal(lines, 1);
		assert_int_equal(standin_log_sum(next, "recv", "bytes", &lines), want);
		assert_int_equal(standin_log_sum(tag, "send", "messages", &lines), g->msgs);
		assert_int_equal(standin_log_sum(next, "recv", "messages", &lines), g->msgs);
		/* Registrations went back, no request was left behind. */
		assert_int_equal(standin_log_sum(tag, "send", "regs", &lines),
				 standin_log_sum(tag, "send", "deregs", &lines));
		assert_int_equal(standin_log_sum(next, "recv", "held", &lines), held);
		assert_int_equal(standin_log_sum(tag, "send", "held", &lines), 0);
		/* NCCL's receive hint reaches v9 and later, as NCCL passes it. */
		assert_int_equal(standin_log_sum(next, "recv", "hints", &lines),
				 g->version >= 9 ? g->msgs / 2 : 0);
	}
}

static void skip_unless_posed(void)
{
	if (!hosts_can_pose()) {
		print_message("# cannot make a PID namespace here (not root?): skipped\n");
		skip();
	}
}

/* One rank on host 0, two on host 1: 0 -> 1 and 2 -> 0 cross hosts and go
 * through the stand-in; 1 -> 2 stays on host 1 and takes this plugin's
 * path, which the stand-in never sees; every byte is checked. */
static void test_ring_across_posed_hosts(void **state)
{
	struct ring g = { .n = 3, .host = { 0, 1, 1 }, .msgs = 24, .version = 12 };
	int lines;

	(void)state;
	skip_unless_posed();
	run_ring(&g);
	check_carried(&g);
	/* One init and one finalize per rank, with the rank's traffic class. */
	for (int r = 0; r < g.n; r++) {
		char tag[16];

		snprintf(tag, sizeof(tag), "rank%d", r);
		assert_int_equal(standin_log_lines(tag, "init"), 1);
		assert_int_equal(standin_log_lines(tag, "finalize"), 1);
		assert_int_equal(standin_log_sum(tag, "init", "tc", &lines), TRAFFIC_CLASS);
	}
}

/* Every table version the plugin adapts, both ways between two hosts. */
static void test_each_table_version(void **state)
{
	const char *dir = getenv("INNER_STANDIN_DIR");
	int lines;

	(void)state;
	skip_unless_posed();
	assert_non_null(dir);
	for (int v = 8; v <= 11; v++) {
		struct ring g = { .n = 2, .host = { 0, 1 }, .msgs = 8, .version = v };

		snprintf(g.lib, sizeof(g.lib), "%s/libnccl-net-standin-v%d.so", dir, v);
		print_message("# stand-in v%d\n", v);
		run_ring(&g);
		check_carried(&g);
		/* v10 gets the communicator's traffic class at connect, v11 at init;
		 * v8 and v9 never see it. */
		if (v == 10)
			assert_int_equal(standin_log_sum("rank0", "connect", "tc", &lines),
					 TRAFFIC_CLASS);
		if (v == 11)
			assert_int_equal(standin_log_sum("rank0", "init", "tc", &lines),
					 TRAFFIC_CLASS);
		/* Before v11 there is no finalize to call. */
		assert_int_equal(standin_log_lines("rank0", "finalize"), v == 11 ? 1 : 0);
	}
}

/* ---- grouped receives, flush and hints through the inner plugin -------- */

/* arg non-NULL: the receiver's irecv goes through the v8 table, whose
 * sizes are ints, as NCCL 2.19-2.23 call it. */
static int group_rank(int rank, int ctl, void *arg)
{
	static const int tags[3] = { 12, 10, 11 };
	static const size_t sizes_sent[3] = { 5000, 1000, 0 };	/* tags 10, 11, 12 */
	ncclNetAttr_v11_t attr = { .op = 1u << 5 };
	char mine[NCCL_NET_HANDLE_MAXSIZE], theirs[NCCL_NET_HANDLE_MAXSIZE];
	uint8_t *buf = calloc(3, 8192);
	void *ctx, *lc, *send, *recv, *mh, *req, *data[3], *mhs[3];
	size_t caps[3] = { 8192, 8192, 8192 };
	int sizes[64] = { 0 }, done = 0;
	double end = harness_now() + 10;

	ctx = rank_init(rank);
	if (!ctx || !buf)
		return 10;
	/* NCCL's hint for the connection it makes next goes on too. */
	if (net->setNetAttr(ctx, &attr) != ncclSuccess)
		return 11;
	if (net->listen(ctx, 0, mine, &lc) || hosts_swap_handle(ctl, mine, theirs) ||
	    hosts_pair_up(ctx, 0, theirs, lc, &send, &recv) || net->closeListen(lc))
		return 12;
	if (rank == 0) {
		int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);

		/* A DMA-BUF registration as NCCL makes one for GPU buffers (the
		 * stand-in checks the fd is open during the call). */
		if (fd < 0 || !net->regMrDmaBuf ||
		    net->regMrDmaBuf(send, buf, 3 * 8192, NCCL_PTR_CUDA, 0, fd, &mh))
			return 13;
		close(fd);
		/* Three sends with tags; the receiver's one irecv takes them. */
		for (int i = 0; i < 3; i++) {
			pattern_fill(buf + i * 8192, sizes_sent[i], 100 + (uint64_t)i);
			do {
				if (net->isend(send, buf + i * 8192, sizes_sent[i], 10 + i, mh, NULL,
					       &req))
					return 14;
			} while (!req && harness_now() < end);
			if (!req || harness_wait(req, NULL, 10))
				return 15;
		}
		if (net->deregMr(send, mh))
			return 16;
	} else {
		if (net->regMr(recv, buf, 3 * 8192, NCCL_PTR_HOST, &mh))
			return 20;
		for (int i = 0; i < 3; i++) {
			data[i] = buf + i * 8192;
			mhs[i] = mh;
		}
		req = NULL;
		if (arg) {
			const ncclNet_v8_t *v8 = dlsym(harness_open(), "ncclNetPlugin_v8");
			int icaps[3] = { 8192, 8192, 8192 };

			if (!v8 || v8->irecv(recv, 3, data, icaps, (int *)tags, mhs, &req) || !req)
				return 21;
		} else if (net->irecv(recv, 3, data, caps, (int *)tags, mhs, NULL, &req) || !req) {
			return 21;
		}
		while (!done)
			if (net->test(req, &done, sizes) || harness_now() > end)
				return 22;
		/* Buffer i took the message whose tag it asked for. */
		for (int i = 0; i < 3; i++) {
			int k = tags[i] - 10;

			if ((size_t)sizes[i] != sizes_sent[k] ||
			    pattern_check(data[i], sizes_sent[k], 100 + (uint64_t)k) != sizes_sent[k])
				return 23;
		}
		/* The stand-in flushes with a request of its own. */
		req = NULL;
		done = 0;
		if (net->iflush(recv, 3, data, sizes, mhs, &req) || !req)
			return 24;
		while (!done)
			if (net->test(req, &done, NULL) || harness_now() > end)
				return 25;
		if (net->deregMr(recv, mh))
			return 26;
	}
	if (net->closeSend(send) || net->closeRecv(recv) || net->finalize(ctx))
		return 27;
	free(buf);
	return harness_warn_count() ? 28 : 0;
}

static void grouped_receive(void *through_v8)
{
	static const int host[2] = { 0, 1 };
	struct hosts_job job;
	int lines;

	skip_unless_posed();
	standin_log_reset();
	assert_int_equal(hosts_start(&job, 2, host, group_rank, through_v8), 0);
	assert_int_equal(hosts_ring_handles(&job), 0);
	assert_int_equal(hosts_wait(&job), 0);
	assert_int_equal(standin_log_sum("rank1", "recv", "messages", &lines), 1);
	assert_int_equal(standin_log_sum("rank1", "recv", "bytes", &lines), 6000);
	assert_int_equal(standin_log_sum("rank1", "recv", "flushes", &lines), 1);
	assert_int_equal(standin_log_sum("rank0", "send", "messages", &lines), 3);
	assert_int_equal(standin_log_sum("rank0", "send", "dmabufs", &lines), 1);
	assert_int_equal(standin_log_count("rank0 attr op=0x20"), 1);
	assert_int_equal(standin_log_count("rank1 attr op=0x20"), 1);
}

static void test_grouped_receive_and_flush(void **state)
{
	(void)state;
	grouped_receive(NULL);
}

/* The v8 table's int sizes, converted for every buffer of the group. */
static void test_grouped_receive_v8_table(void **state)
{
	static int through_v8 = 1;

	(void)state;
	grouped_receive(&through_v8);
}

/* ---- one process: this host's path, properties ------------------------- */

/* Runs fn in a child with NAME, VALUE pairs added to its environment. */
static int in_child(int (*fn)(void), const char *const *env)
{
	pid_t pid = fork();
	int status;

	if (pid == 0) {
		for (; env && *env; env += 2)
			setenv(env[0], env[1], 1);
		_exit(fn());
	}
	if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status))
		return -1;
	return WEXITSTATUS(status);
}

/* A listener in this process: this plugin's path, and the stand-in,
 * though initialised, carries nothing. */
static int child_same_host(void)
{
	void *ctx, *send, *recv, *req, *rreq;
	char out[4096], in[4096] = { 0 };
	size_t cap = sizeof(in);
	int tag = 0, got;

	ctx = rank_init(0);
	if (!ctx || harness_pair(ctx, &send, &recv))
		return 10;
	if (!on_path("send", send, 0, 0, 12) || !on_path("receive", recv, 0, 0, 12))
		return 11;
	pattern_fill((uint8_t *)out, sizeof(out), 9);
	rreq = NULL;
	{
		void *b = in;

		if (net->irecv(recv, 1, &b, &cap, &tag, NULL, NULL, &rreq) || !rreq)
			return 12;
	}
	if (harness_isend(send, out, sizeof(out), NULL, &req, 10) || wait_both(req, rreq, &got))
		return 13;
	if (got != (int)sizeof(out) || memcmp(in, out, sizeof(out)))
		return 14;
	if (net->closeSend(send) || net->closeRecv(recv) || net->finalize(ctx))
		return 15;
	return harness_warn_count() ? 16 : 0;
}

static void test_same_host_keeps_own_path(void **state)
{
	(void)state;
	standin_log_reset();
	assert_int_equal(in_child(child_same_host, NULL), 0);
	assert_int_equal(standin_log_lines("rank0", "init"), 1);
	assert_int_equal(standin_log_lines("rank0", "send"), 0);
	assert_int_equal(standin_log_lines("rank0", "recv"), 0);
}

/* NCCL takes one maxRecvs per device, the inner plugin's (4 for the
 * stand-in), for every connection of it: one inside this host may get a
 * grouped receive too.  With one tag throughout (NCCL's sending rank) it
 * is the order of the sends, checked per buffer; different tags are
 * refused with one WARN (recv_group.h). */
static int child_same_host_group(void)
{
	enum { N = 4, SZ = 3000 };
	static uint8_t out[N][SZ], in[N][SZ];
	void *ctx, *send, *recv, *sreq[N], *rreq = NULL, *bufs[N];
	size_t caps[N];
	int tags[N], sizes[N] = { 0 }, done = 0;
	double end;

	ctx = rank_init(0);
	if (!ctx || harness_pair(ctx, &send, &recv))
		return 10;
	for (int i = 0; i < N; i++) {
		bufs[i] = in[i];
		caps[i] = SZ;
		tags[i] = 7;
		pattern_fill(out[i], SZ, (uint64_t)i);
	}
	if (net->irecv(recv, N, bufs, caps, tags, NULL, NULL, &rreq) || !rreq)
		return 11;
	/* Sizes differ per buffer: each lands in its own. */
	for (int i = 0; i < N; i++)
		if (harness_isend(send, out[i], SZ - 100 * (size_t)i, NULL, &sreq[i], 10))
			return 12;
	for (end = harness_now() + 10; !done && harness_now() < end;)
		if (net->test(rreq, &done, sizes))
			return 13;
	for (int i = 0; i < N; i++) {
		int d = 0;

		while (!d && harness_now() < end)
			if (net->test(sreq[i], &d, NULL))
				return 14;
		if (!done || sizes[i] != SZ - 100 * i ||
		    pattern_check(in[i], (size_t)sizes[i], (uint64_t)i) != (size_t)sizes[i])
			return 15;
	}
	tags[2] = 8;
	rreq = NULL;
	if (net->irecv(recv, N, bufs, caps, tags, NULL, NULL, &rreq) != ncclInternalError ||
	    rreq || harness_warn_count() != 1 ||
	    !strstr(harness_last_warn(), "different tags (7, 8)"))
		return 16;
	if (net->closeSend(send) || net->closeRecv(recv) || net->finalize(ctx))
		return 17;
	return harness_warn_count() == 1 ? 0 : 18;
}

static void test_same_host_grouped_receive(void **state)
{
	(void)state;
	assert_int_equal(in_child(child_same_host_group, NULL), 0);
}

/* Whether the plugin found a CUDA driver (it opens it at init). */
static int cuda_loaded(void)
{
	void *cu = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);

	if (cu)
		dlclose(cu);
	return cu != NULL;
}

/* NCCL sees the stand-in's devices: its names, places, speed and ports,
 * without what this plugin's path cannot do for a peer on this host. */
static int child_properties(void)
{
	ncclNetProperties_v11_t p;
	int n = 0;

	if (!rank_init(0) || net->devices(&n) || n != 2)
		return 10;
	if (net->getProperties(1, &p))
		return 11;
	if (strcmp(p.name, "standin1") || strcmp(p.pciPath, "/sys/devices/pci0000:00/0000:00:11.0"))
		return 12;
	if (p.guid != 0x5354414e00000001ull || p.speed != 200000 || p.port != 2 ||
	    p.forceFlush != 1 || p.maxComms != 4096)
		return 13;
	/* Host memory always; GPU memory (CUDA, DMA-BUF) only where the copy
	 * engines serve it, so none on a machine without a GPU driver. */
	if (!(p.ptrSupport & NCCL_PTR_HOST) ||
	    ((p.ptrSupport & NCCL_PTR_DMABUF) && !(p.ptrSupport & NCCL_PTR_CUDA)))
		return 14;
	if (!cuda_loaded() && p.ptrSupport != NCCL_PTR_HOST)
		return 14;
	/* The stand-in's grouping (4), which this plugin's path takes too. */
	if (p.regIsGlobal != 0 || p.maxRecvs != 4 || p.maxMultiRequestSize != 1)
		return 15;
	if (p.maxP2pBytes != 1ull << 30 || p.maxCollBytes != 1ull << 30)
		return 16;
	if (p.netDeviceType != NCCL_NET_DEVICE_HOST || p.vProps.ndevs != 1 || p.vProps.devs[0] != 1)
		return 17;
	if (harness_warn_count())
		return 18;
	if (net->getProperties(2, &p) == ncclSuccess || harness_warn_count() != 1)
		return 19;
	return 0;
}

static void test_properties_are_the_inner_devices(void **state)
{
	(void)state;
	assert_int_equal(in_child(child_properties, NULL), 0);
}

/* ---- what fails, and how loudly ---------------------------------------- */

static const char *expect_warn;

/* init fails, with exactly one WARN, which says `expect_warn`. */
static int child_init_fails(void)
{
	void *ctx = NULL;
	ncclNetCommConfig_v11_t cfg = { .trafficClass = -1 };

	if (!harness_open())
		return 10;
	if (net->init(&ctx, 42, &cfg, harness_logger, NULL) == ncclSuccess || ctx)
		return 11;
	if (harness_warn_count() != 1) {
		fprintf(stderr, "%d WARN lines, the last \"%s\"\n", harness_warn_count(),
			harness_last_warn());
		return 12;
	}
	if (!strstr(harness_last_warn(), expect_warn)) {
		fprintf(stderr, "WARN \"%s\" does not say \"%s\"\n", harness_last_warn(), expect_warn);
		return 13;
	}
	/* 2.28.9 calls finalize after a failed init, with the NULL context. */
	return net->finalize(NULL) == ncclSuccess ? 0 : 14;
}

static void init_fails(const char *expect, const char *const *env)
{
	expect_warn = expect;
	assert_int_equal(in_child(child_init_fails, env), 0);
}

static void test_unusable_library_fails_init(void **state)
{
	const char *dir = getenv("INNER_STANDIN_DIR");
	char none[512];

	(void)state;
	snprintf(none, sizeof(none), "%s/libnccl-net-standin-v0.so", dir);
	{
		const char *env[] = { "NCCL_SYMMEM_INNER_NET", "/nonexistent/libnccl-net-gone.so", NULL };

		init_fails("NCCL_SYMMEM_INNER_NET=/nonexistent/libnccl-net-gone.so: cannot open it",
			   env);
	}
	{
		/* A bare name is tried as given, then as libnccl-net-<name>.so. */
		const char *env[] = { "NCCL_SYMMEM_INNER_NET", "gone", NULL };

		init_fails("libnccl-net-gone.so: cannot open shared object file", env);
	}
	{
		const char *env[] = { "NCCL_SYMMEM_INNER_NET", none, NULL };

		init_fails("exports no net plugin table ncclNetPlugin_v12 to _v8, only "
			   "ncclNetPlugin_v7", env);
	}
	{
		const char *env[] = { "INNER_STANDIN_FAIL_INIT", "1", NULL };

		init_fails("inner net plugin 'standin' (v12)", env);
		init_fails("failed its init: error 2 (ncclSystemError)", env);
	}
	{
		const char *env[] = { "INNER_STANDIN_DEVICES", "0", NULL };

		init_fails("inner net plugin 'standin' (v12) (", env);
		init_fails("found no device", env);
	}
	{
		const char *env[] = { "INNER_STANDIN_OFFLOAD", "1", NULL };

		init_fails("is a device-offload device", env);
	}
	{
		const char *env[] = { "NCCL_SYMMEM_INNER_NET", getenv("SYMMEM_PLUGIN"), NULL };

		init_fails("is this plugin itself", env);
	}
	{
		const char *env[] = { "NCCL_SYMMEM_BACKEND", "tcp", NULL };

		init_fails("NCCL_SYMMEM_BACKEND=tcp makes this plugin carry every connection", env);
	}
	{
		const char *env[] = { "NCCL_SYMMEM_INNER_NET", "libnccl-net.so ", NULL };

		init_fails("NCCL_SYMMEM_INNER_NET='libnccl-net.so ' has whitespace", env);
	}
}

/* ---- what another user could have put there --------------------------- */

static char placed[1024];	/* the stand-in's copy in a directory anyone may write */

/* init fails with the one WARN, and the library was never opened: its
 * constructor could not have run. */
static int child_refused_unopened(void)
{
	void *h;

	if (child_init_fails())
		return 20;
	h = dlopen(placed, RTLD_NOW | RTLD_NOLOAD);
	if (h) {
		dlclose(h);
		return 21;
	}
	return 0;
}

static void copy_file(const char *from, const char *to)
{
	char buf[65536];
	int in = open(from, O_RDONLY), out = open(to, O_WRONLY | O_CREAT | O_EXCL, 0755);
	ssize_t n;

	assert_true(in >= 0 && out >= 0);
	while ((n = read(in, buf, sizeof(buf))) > 0)
		assert_int_equal(write(out, buf, (size_t)n), n);
	close(in);
	close(out);
}

/* The stand-in, copied into a directory every user may write (not
 * sticky: another user could replace the file), is not loaded: named by path, relative to the
 * working directory, or found by bare name on LD_LIBRARY_PATH.  A link in
 * a safe directory to it neither. */
static void test_writable_place_refused(void **state)
{
	const char *dir = getenv("INNER_STANDIN_DIR");
	char tmpl[512], std[1024], link[1024], cwd[512];
	const char *why = "not loading it, since another user could have put it there: ";

	(void)state;
	snprintf(tmpl, sizeof(tmpl), "%s/writable-XXXXXX", dir);
	assert_non_null(mkdtemp(tmpl));
	assert_int_equal(chmod(tmpl, 0777), 0);
	snprintf(std, sizeof(std), "%s/libnccl-net-standin.so", dir);
	snprintf(placed, sizeof(placed), "%s/libnccl-net-placed.so", tmpl);
	copy_file(std, placed);
	snprintf(link, sizeof(link), "%s/libnccl-net-link-%d.so", dir, (int)getpid());
	assert_int_equal(symlink(placed, link), 0);
	{
		const char *env[] = { "NCCL_SYMMEM_INNER_NET", placed, NULL };

		expect_warn = why;
		assert_int_equal(in_child(child_refused_unopened, env), 0);
		init_fails("is writable by every user (mode 0777)", env);
	}
	{
		const char *env[] = { "NCCL_SYMMEM_INNER_NET", link, NULL };

		expect_warn = why;
		assert_int_equal(in_child(child_refused_unopened, env), 0);
	}
	{
		const char *env[] = { "NCCL_SYMMEM_INNER_NET", "placed", "LD_LIBRARY_PATH", tmpl,
				      NULL };

		expect_warn = why;
		assert_int_equal(in_child(child_refused_unopened, env), 0);
	}
	assert_non_null(getcwd(cwd, sizeof(cwd)));
	assert_int_equal(chdir(tmpl), 0);
	{
		const char *env[] = { "NCCL_SYMMEM_INNER_NET", "./libnccl-net-placed.so", NULL };

		expect_warn = why;
		assert_int_equal(in_child(child_refused_unopened, env), 0);
	}
	assert_int_equal(chdir(cwd), 0);
	unlink(link);
	unlink(placed);
	assert_int_equal(rmdir(tmpl), 0);
}

/* A bare name found on the loader's path, as NCCL finds its plugins. */
static int child_bare_name(void)
{
	if (!rank_init(0))
		return 10;
	return harness_info_count("inner net plugin 'standin' (v12) from ") == 1 &&
	       harness_info_count("/libnccl-net-standin.so: 2 device(s)") == 1 ? 0 : 11;
}

static void test_bare_name_resolved(void **state)
{
	const char *env[] = { "NCCL_SYMMEM_INNER_NET", "standin", NULL };

	(void)state;
	assert_int_equal(in_child(child_bare_name, env), 0);
}

/* A handle of 96 bytes leaves no room for this plugin's 48: listen says
 * so with the sizes, and holds nothing open afterwards. */
static int child_handle_too_big(void)
{
	char handle[NCCL_NET_HANDLE_MAXSIZE];
	void *ctx, *lc = NULL;
	int before;

	ctx = rank_init(0);
	if (!ctx)
		return 10;
	before = open_fds();
	if (net->listen(ctx, 0, handle, &lc) != ncclInvalidUsage || lc)
		return 11;
	if (harness_warn_count() != 1 ||
	    !strstr(harness_last_warn(), "wrote 96 bytes of its connection handle; beside this "
					 "plugin's 48 only 80 of NCCL's 128 fit"))
		return 12;
	if (open_fds() != before)
		return 13;
	return net->finalize(ctx) == ncclSuccess ? 0 : 14;
}

static void test_handle_too_big_refused(void **state)
{
	const char *env[] = { "INNER_STANDIN_HANDLE_BYTES", "96", NULL };

	(void)state;
	assert_int_equal(in_child(child_handle_too_big, env), 0);
}

/* A plugin that keeps connect state past its 80 bytes would overwrite
 * this plugin's part: the connector refuses it at once, and the listener
 * fails within its bound instead of waiting. */
static int spill_rank(int rank, int ctl, void *arg)
{
	char mine[NCCL_NET_HANDLE_MAXSIZE], theirs[NCCL_NET_HANDLE_MAXSIZE];
	void *ctx, *lc, *comm = NULL;
	double end = harness_now() + 15;
	int rc = ncclSuccess;

	(void)arg;
	if (rank == 0)
		setenv("INNER_STANDIN_STATE_SPILL", "1", 1);
	ctx = rank_init(rank);
	if (!ctx || net->listen(ctx, 0, mine, &lc) || hosts_swap_handle(ctl, mine, theirs))
		return 10;
	while (rc == ncclSuccess && !comm && harness_now() < end)
		rc = rank == 0 ? net->connect(ctx, 0, theirs, &comm, NULL) :
				 net->accept(lc, &comm, NULL);
	if (rc == ncclSuccess || comm)
		return 11;
	if (rank == 0 && (rc != ncclInvalidUsage || harness_warn_count() != 1 ||
			  !strstr(harness_last_warn(), "wrote past byte 80 of its connection handle "
						       "while connecting")))
		return 12;
	net->closeListen(lc);
	return net->finalize(ctx) == ncclSuccess ? 0 : 13;
}

/* A plugin whose connect never finishes: the connector gives up after
 * NCCL_SYMMEM_CONNECT_TIMEOUT with one WARN instead of being called
 * forever, and so does the listener's accept. */
static int never_rank(int rank, int ctl, void *arg)
{
	char mine[NCCL_NET_HANDLE_MAXSIZE], theirs[NCCL_NET_HANDLE_MAXSIZE];
	void *ctx, *lc, *comm = NULL;
	double start, end;
	int rc = ncclSuccess;

	(void)arg;
	if (rank == 0)
		setenv("INNER_STANDIN_CONNECT_NEVER", "1", 1);
	ctx = rank_init(rank);
	if (!ctx || net->listen(ctx, 0, mine, &lc) || hosts_swap_handle(ctl, mine, theirs))
		return 10;
	start = harness_now();
	end = start + 15;
	while (rc == ncclSuccess && !comm && harness_now() < end)
		rc = rank == 0 ? net->connect(ctx, 0, theirs, &comm, NULL) :
				 net->accept(lc, &comm, NULL);
	/* The listener fails too, by its own bound or when the connector
	 * hangs up, whichever comes first. */
	if (rc == ncclSuccess || comm || (rank == 0 && harness_now() - start < 1.0))
		return 11;
	if (rank == 0 && (rc != ncclRemoteError || harness_warn_count() != 1 ||
			  !strstr(harness_last_warn(), "inner net plugin 'standin' (v12) did not "
						       "connect within 1.0 s")))
		return 12;
	net->closeListen(lc);
	/* The abandoned connect is forgotten with its context. */
	return net->finalize(ctx) == ncclSuccess ? 0 : 13;
}

static void test_inner_connect_bounded(void **state)
{
	static const int host[2] = { 0, 1 };
	struct hosts_job job;

	(void)state;
	skip_unless_posed();
	setenv("NCCL_SYMMEM_CONNECT_TIMEOUT", "1", 1);
	assert_int_equal(hosts_start(&job, 2, host, never_rank, NULL), 0);
	assert_int_equal(hosts_ring_handles(&job), 0);
	assert_int_equal(hosts_wait(&job), 0);
	unsetenv("NCCL_SYMMEM_CONNECT_TIMEOUT");
}

/* A connection through the inner plugin that came while the listener's
 * thread was busy past this host's bound (NCCL's proxy serves other
 * work between accepts) is still taken: accept looks at both paths
 * before it gives up on this host's. */
static int late_rank(int rank, int ctl, void *arg)
{
	char mine[NCCL_NET_HANDLE_MAXSIZE], theirs[NCCL_NET_HANDLE_MAXSIZE];
	void *ctx, *lc, *comm = NULL;
	double end;
	int rc = ncclSuccess;

	(void)arg;
	ctx = rank_init(rank);
	if (!ctx || net->listen(ctx, 0, mine, &lc) || hosts_swap_handle(ctl, mine, theirs))
		return 10;
	if (rank == 1) {
		/* The first accept starts the bound (1 s); the connector
		 * comes and finishes while this thread is away. */
		if (net->accept(lc, &comm, NULL) != ncclSuccess || comm)
			return 11;
		usleep(2000 * 1000);
	} else {
		usleep(500 * 1000);
	}
	end = harness_now() + 10;
	while (rc == ncclSuccess && !comm && harness_now() < end)
		rc = rank == 0 ? net->connect(ctx, 0, theirs, &comm, NULL) :
				 net->accept(lc, &comm, NULL);
	if (rc != ncclSuccess || !comm) {
		fprintf(stderr, "rank %d: no comm (%d): %s\n", rank, rc,
			harness_warn_count() ? harness_last_warn() : "no WARN");
		return 12;
	}
	if (!on_path(rank == 0 ? "send" : "receive", comm, 0, 1, 12))
		return 13;
	if ((rank == 0 ? net->closeSend(comm) : net->closeRecv(comm)) != ncclSuccess ||
	    net->closeListen(lc) != ncclSuccess || net->finalize(ctx) != ncclSuccess)
		return 14;
	return harness_warn_count() ? 15 : 0;
}

static void test_inner_accept_after_local_bound(void **state)
{
	static const int host[2] = { 0, 1 };
	struct hosts_job job;

	(void)state;
	skip_unless_posed();
	setenv("NCCL_SYMMEM_CONNECT_TIMEOUT", "1", 1);
	assert_int_equal(hosts_start(&job, 2, host, late_rank, NULL), 0);
	assert_int_equal(hosts_ring_handles(&job), 0);
	assert_int_equal(hosts_wait(&job), 0);
	unsetenv("NCCL_SYMMEM_CONNECT_TIMEOUT");
}

static void test_connect_state_past_room_refused(void **state)
{
	static const int host[2] = { 0, 1 };
	struct hosts_job job;

	(void)state;
	skip_unless_posed();
	setenv("NCCL_SYMMEM_CONNECT_TIMEOUT", "3", 1);
	assert_int_equal(hosts_start(&job, 2, host, spill_rank, NULL), 0);
	assert_int_equal(hosts_ring_handles(&job), 0);
	assert_int_equal(hosts_wait(&job), 0);
	unsetenv("NCCL_SYMMEM_CONNECT_TIMEOUT");
}

static int setup(void **state)
{
	(void)state;
	if (standin_log_create())
		return -1;
	setenv("NCCL_SM_FREE_VERBOSE", "1", 1);
	return getenv("NCCL_SYMMEM_INNER_NET") && getenv("INNER_STANDIN_DIR") ? 0 : -1;
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
		cmocka_unit_test(test_properties_are_the_inner_devices),
		cmocka_unit_test(test_same_host_keeps_own_path),
		cmocka_unit_test(test_same_host_grouped_receive),
		cmocka_unit_test(test_unusable_library_fails_init),
		cmocka_unit_test(test_bare_name_resolved),
		cmocka_unit_test(test_handle_too_big_refused),
		cmocka_unit_test(test_ring_across_posed_hosts),
		cmocka_unit_test(test_each_table_version),
		cmocka_unit_test(test_grouped_receive_and_flush),
		cmocka_unit_test(test_grouped_receive_v8_table),
		cmocka_unit_test(test_connect_state_past_room_refused),
		cmocka_unit_test(test_inner_connect_bounded),
		cmocka_unit_test(test_inner_accept_after_local_bound),
		cmocka_unit_test(test_writable_place_refused),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
