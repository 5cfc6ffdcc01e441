/* One side of a self-test path, in a child process: the plugin's own net
 * table (ncclNetPlugin_v11, the library dlopen()ed as NCCL does), a
 * connection each way to the other side, buffers in host memory or in
 * GPU memory from cuMemAlloc, then
 *  - latency: an 8-byte ping-pong, each round's message in a slot of its
 *    own, so that every one of them is checked afterwards;
 *  - bandwidth: `nmsg` messages of `msg` bytes each way, a few rounds,
 *    the best round counted.
 * Send buffers carry a pattern that depends on the side, the phase and
 * the offset; receive buffers are poisoned before each round and checked
 * byte by byte after it, also the guard past what was sent. */
#include <dlfcn.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "info.h"
#include "nccl_abi.h"
#include "symmem.h"

#define POISON 0xa5
#define GUARD 4096
/* Buffers in whole 2 MiB pages: the driver's copies of legacy-IPC-mapped
 * memory of other sizes run at two thirds of full speed (export.c). */
#define PAGE ((size_t)2 << 20)
#define LAT_WARMUP 20
#define LAT_ROUNDS 200
#define BW_ROUNDS 3
#define SETUP_SECONDS 30.0
#define OP_SECONDS 30.0

struct buf {
	int gpu;
	size_t size;
	uint8_t *host;		/* the buffer (host memory), or its mirror */
	CUdeviceptr dev;
};

struct side {
	const struct xfer_args *a;
	const struct info_cu *cu;
	ncclNet_v11_t *net;
	void *lib, *ctx, *lc, *send, *recv, *smr, *rmr;
	struct buf out, in;
	uint8_t *want;		/* what should arrive */
	size_t lat_len, bw_len;
	struct xfer_result *res;
};

static char last_warn[200];

/* The plugin's WARNs: the last one explains a failure. */
static void logger(ncclDebugLogLevel level, unsigned long flags, const char *file, int line,
		   const char *fmt, ...)
{
	va_list ap;

	(void)flags;
	(void)file;
	(void)line;
	if (level != NCCL_LOG_WARN)
		return;
	va_start(ap, fmt);
	vsnprintf(last_warn, sizeof(last_warn), fmt, ap);
	va_end(ap);
}

static int fail(struct side *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int fail(struct side *s, const char *fmt, ...)
{
	size_t n;
	va_list ap;

	if (s->res->why[0])
		return -1;	/* the first failure is the one that counts */
	va_start(ap, fmt);
	vsnprintf(s->res->why, sizeof(s->res->why), fmt, ap);
	va_end(ap);
	n = strlen(s->res->why);
	if (last_warn[0])
		info_say(s->res->why + n, sizeof(s->res->why) - n, " (plugin: %s)", last_warn);
	return -1;
}

/* ---- patterns and buffers --------------------------------------------- */

/* Eight bytes at a time: fast enough for hundreds of MiB. */
static uint64_t pattern_word(size_t word, uint32_t seed)
{
	uint64_t x = (word + 1) * 0x9e3779b97f4a7c15ull ^
		     ((uint64_t)seed + 1) * 0xbf58476d1ce4e5b9ull;

	x ^= x >> 31;
	x *= 0x94d049bb133111ebull;
	return x ^ (x >> 29);
}

static void pattern(uint8_t *p, size_t len, uint32_t seed)
{
	for (size_t w = 0; w * 8 < len; w++) {
		uint64_t x = pattern_word(w, seed);
		size_t n = len - w * 8 < 8 ? len - w * 8 : 8;

		memcpy(p + w * 8, &x, n);
	}
	/* The poison is no pattern byte: a byte never written shows. */
	for (size_t i = 0; i < len; i++)
		if (p[i] == POISON)
			p[i] = (uint8_t)~POISON;
}

/* Each side's pattern for each phase differs from every other. */
static uint32_t seed_of(int side, int phase)
{
	return (uint32_t)(phase * 2 + side + 1);
}

static int buf_alloc(struct side *s, struct buf *b, size_t size)
{
	b->gpu = s->a->gpu;
	b->size = (size + PAGE - 1) / PAGE * PAGE;
	b->host = aligned_alloc(4096, b->size);
	if (!b->host)
		return fail(s, "out of memory for %zu bytes", size);
	if (b->gpu < 0)
		return 0;
	if (sm_cu()->mem_alloc(&b->dev, b->size) != CUDA_SUCCESS) {
		b->dev = 0;
		return fail(s, "cuMemAlloc of %zu bytes on GPU %d failed", b->size, b->gpu);
	}
	return 0;
}

static void buf_free(struct buf *b)
{
	if (b->dev)
		sm_cu()->mem_free(b->dev);
	free(b->host);
	memset(b, 0, sizeof(*b));
}

static void *buf_ptr(const struct buf *b)
{
	return b->gpu < 0 ? (void *)b->host : (void *)(uintptr_t)b->dev;
}

/* The host copy goes to the GPU: after b->host was written. */
static int buf_push(struct side *s, struct buf *b)
{
	CUresult rc;

	if (b->gpu < 0)
		return 0;
	rc = s->cu->htod(b->dev, b->host, b->size);
	return rc == CUDA_SUCCESS ? 0 : fail(s, "cuMemcpyHtoD failed (CUDA error %d)", (int)rc);
}

static int buf_pull(struct side *s, struct buf *b)
{
	CUresult rc;

	if (b->gpu < 0)
		return 0;
	rc = s->cu->dtoh(b->host, b->dev, b->size);
	return rc == CUDA_SUCCESS ? 0 : fail(s, "cuMemcpyDtoH failed (CUDA error %d)", (int)rc);
}

static int buf_poison(struct side *s, struct buf *b)
{
	CUresult rc;

	memset(b->host, POISON, b->size);
	if (b->gpu < 0)
		return 0;
	rc = s->cu->memset_d8(b->dev, POISON, b->size);
	return rc == CUDA_SUCCESS ? 0 : fail(s, "cuMemsetD8 failed (CUDA error %d)", (int)rc);
}

/* The send buffer's first `len` bytes: this side's pattern of `phase`,
 * one byte flipped where the corruption knob names this path. */
static int fill_out(struct side *s, int phase, size_t len)
{
	const char *knob = getenv(INFO_CORRUPT_ENV);

	pattern(s->out.host, len, seed_of(s->a->side, phase));
	if (phase == 1 && s->a->side == 0 && knob && !strcmp(knob, s->a->path))
		s->out.host[len / 2 + 1] ^= 0x40;
	return buf_push(s, &s->out);
}

/* What arrived in [0, len) against the other side's pattern, and the
 * guard after it against the poison. */
static int check_in(struct side *s, size_t len, const char *what, size_t msg)
{
	const uint8_t *got = s->in.host;

	if (buf_pull(s, &s->in))
		return -1;
	if (memcmp(got, s->want, len) != 0) {
		size_t i = 0;

		while (got[i] == s->want[i])
			i++;
		return fail(s, "%s: byte %zu of message %zu arrived as 0x%02x where the sender's "
			    "pattern has 0x%02x%s", what, i % msg, i / msg, got[i], s->want[i],
			    got[i] == POISON ? " (never written)" : "");
	}
	for (size_t i = len; i < len + GUARD && i < s->in.size; i++)
		if (got[i] != POISON)
			return fail(s, "%s: byte %zu past the last message was overwritten", what,
				    i - len);
	return 0;
}

/* ---- the plugin ------------------------------------------------------- */

static int ctl_byte(struct side *s, char c, int sending)
{
	uint64_t deadline = proc_deadline(OP_SECONDS);
	int fd = -1;

	if (sending ? proc_send_fd(s->a->ctl, &c, 1, -1, deadline) :
		      proc_recv_fd(s->a->ctl, &c, 1, &fd, deadline))
		return fail(s, "the other side's process is gone");
	return !sending && c == 'x' ? fail(s, "the other side failed") : 0;
}

static int wait_req(struct side *s, void *req, const char *what)
{
	uint64_t deadline = proc_deadline(OP_SECONDS);
	int done = 0, sizes[1] = { 0 };

	while (!done) {
		if (s->net->test(req, &done, sizes) != ncclSuccess)
			return fail(s, "%s: test failed", what);
		if (!done && sm_now_ns() > deadline)
			return fail(s, "%s: not done after %.0f s", what, OP_SECONDS);
	}
	return 0;
}

static int post_send(struct side *s, size_t off, size_t len, void **req)
{
	uint64_t deadline = proc_deadline(OP_SECONDS);

	*req = NULL;
	while (!*req) {
		if (s->net->isend(s->send, (uint8_t *)buf_ptr(&s->out) + off, len, 0, s->smr, NULL,
				  req) != ncclSuccess)
			return fail(s, "isend failed");
		if (!*req && sm_now_ns() > deadline)
			return fail(s, "isend of %zu bytes not taken after %.0f s", len,
				    OP_SECONDS);
	}
	return 0;
}

static int post_recv(struct side *s, size_t off, size_t len, void **req)
{
	void *data = (uint8_t *)buf_ptr(&s->in) + off;
	int tag = 0;

	*req = NULL;
	if (s->net->irecv(s->recv, 1, &data, &len, &tag, &s->rmr, NULL, req) != ncclSuccess ||
	    !*req)
		return fail(s, "irecv failed");
	return 0;
}

static int connect_both(struct side *s)
{
	char mine[NCCL_NET_HANDLE_MAXSIZE], theirs[NCCL_NET_HANDLE_MAXSIZE];
	ncclNetCommConfig_v11_t cfg = { .trafficClass = -1 };
	uint64_t deadline = proc_deadline(SETUP_SECONDS);
	int dev = s->a->gpu < 0 ? 0 : s->a->gpu, fd = -1;

	if (s->net->init(&s->ctx, 1, &cfg, logger, NULL) != ncclSuccess)
		return fail(s, "the plugin's init failed");
	if (s->net->listen(s->ctx, dev, mine, &s->lc) != ncclSuccess)
		return fail(s, "listen failed");
	if (proc_send_fd(s->a->ctl, mine, sizeof(mine), -1, deadline) ||
	    proc_recv_fd(s->a->ctl, theirs, sizeof(theirs), &fd, deadline))
		return fail(s, "no handle from the other side");
	while (!s->send || !s->recv) {
		if (!s->send && s->net->connect(s->ctx, dev, theirs, &s->send, NULL) != ncclSuccess)
			return fail(s, "connect failed");
		if (!s->recv && s->net->accept(s->lc, &s->recv, NULL) != ncclSuccess)
			return fail(s, "accept failed");
		if ((!s->send || !s->recv) && sm_now_ns() > deadline)
			return fail(s, "no connection after %.0f s", SETUP_SECONDS);
	}
	return 0;
}

static int open_plugin(struct side *s)
{
	void *sym;

	s->lib = dlopen(s->a->lib, RTLD_NOW | RTLD_LOCAL);
	if (!s->lib)
		return fail(s, "dlopen: %s", dlerror());
	sym = dlsym(s->lib, "ncclNetPlugin_v11");
	if (!sym)
		return fail(s, "%s exports no ncclNetPlugin_v11", s->a->lib);
	s->net = sym;
	return 0;
}

/* ---- the phases ------------------------------------------------------- */

static int latency(struct side *s)
{
	int first = s->a->side == 0;
	uint64_t t0 = 0;

	if (fill_out(s, 0, s->lat_len) || buf_poison(s, &s->in))
		return -1;
	pattern(s->want, s->lat_len, seed_of(!s->a->side, 0));
	if (ctl_byte(s, 'g', first) || ctl_byte(s, 'g', !first))
		return -1;
	for (int r = 0; r < LAT_WARMUP + LAT_ROUNDS; r++) {
		void *sr = NULL, *rr = NULL;
		size_t off = (size_t)r * 8;

		if (r == LAT_WARMUP)
			t0 = sm_now_ns();
		if (first && (post_send(s, off, 8, &sr) || wait_req(s, sr, "ping send")))
			return -1;
		if (post_recv(s, off, 8, &rr) || wait_req(s, rr, "ping receive"))
			return -1;
		if (!first && (post_send(s, off, 8, &sr) || wait_req(s, sr, "pong send")))
			return -1;
	}
	s->res->lat_us = (double)(sm_now_ns() - t0) / 1e3 / LAT_ROUNDS / 2;
	return check_in(s, s->lat_len, "ping-pong", 8);
}

static int bw_receive(struct side *s, double *best)
{
	void *req[NCCL_NET_MAX_REQUESTS];
	uint64_t t0, t1;

	if (buf_poison(s, &s->in))
		return -1;
	for (int m = 0; m < s->a->nmsg; m++)
		if (post_recv(s, (size_t)m * s->a->msg, s->a->msg, &req[m]))
			return -1;
	t0 = sm_now_ns();
	if (ctl_byte(s, 'g', 1))
		return -1;
	for (int m = 0; m < s->a->nmsg; m++)
		if (wait_req(s, req[m], "bandwidth receive"))
			return -1;
	t1 = sm_now_ns();
	if (check_in(s, s->bw_len, "bandwidth", s->a->msg)) {
		ctl_byte(s, 'x', 1);
		return -1;
	}
	if ((double)s->bw_len / (double)(t1 - t0) > *best)
		*best = (double)s->bw_len / (double)(t1 - t0);
	return ctl_byte(s, 'k', 1);
}

static int bw_send(struct side *s)
{
	void *req[NCCL_NET_MAX_REQUESTS];

	if (ctl_byte(s, 'g', 0))
		return -1;
	for (int m = 0; m < s->a->nmsg; m++)
		if (post_send(s, (size_t)m * s->a->msg, s->a->msg, &req[m]))
			return -1;
	for (int m = 0; m < s->a->nmsg; m++)
		if (wait_req(s, req[m], "bandwidth send"))
			return -1;
	return ctl_byte(s, 'k', 0);
}

/* Side 0 sends first, then side 1; GB/s into this side (bytes per ns). */
static int bandwidth(struct side *s)
{
	double best = 0;

	for (int dir = 0; dir < 2; dir++) {
		int sending = dir == s->a->side;

		if (sending && fill_out(s, 1, s->bw_len))
			return -1;
		if (!sending)
			pattern(s->want, s->bw_len, seed_of(dir, 1));
		for (int r = 0; r < BW_ROUNDS; r++)
			if (sending ? bw_send(s) : bw_receive(s, &best))
				return -1;
	}
	s->res->gbps = best;
	return 0;
}

static void close_all(struct side *s)
{
	if (s->smr)
		s->net->deregMr(s->send, s->smr);
	if (s->rmr)
		s->net->deregMr(s->recv, s->rmr);
	if (s->send)
		s->net->closeSend(s->send);
	if (s->recv)
		s->net->closeRecv(s->recv);
	if (s->lc)
		s->net->closeListen(s->lc);
	if (s->ctx)
		s->net->finalize(s->ctx);
	buf_free(&s->out);
	buf_free(&s->in);
	free(s->want);
}

static int run(struct side *s)
{
	int type = s->a->gpu < 0 ? NCCL_PTR_HOST : NCCL_PTR_CUDA;
	char why[200] = "";

	s->lat_len = (LAT_WARMUP + LAT_ROUNDS) * 8;
	s->bw_len = s->a->msg * (size_t)s->a->nmsg;
	if (s->a->nmsg > NCCL_NET_MAX_REQUESTS)
		return fail(s, "too many messages per round");
	if (s->a->gpu >= 0) {
		s->cu = info_cu(why, sizeof(why));
		if (!s->cu)
			return fail(s, "%s", why);
		if (sm_ctx_enter(s->a->gpu, NULL, NULL))
			return fail(s, "%s", sm_last_error());
	}
	s->want = malloc(s->bw_len > s->lat_len ? s->bw_len : s->lat_len);
	if (!s->want || open_plugin(s) || connect_both(s) ||
	    buf_alloc(s, &s->out, s->bw_len > s->lat_len ? s->bw_len : s->lat_len) ||
	    buf_alloc(s, &s->in, (s->bw_len > s->lat_len ? s->bw_len : s->lat_len) + GUARD))
		return fail(s, "setup failed");
	if (s->net->regMr(s->send, buf_ptr(&s->out), s->out.size, type, &s->smr) != ncclSuccess ||
	    s->net->regMr(s->recv, buf_ptr(&s->in), s->in.size, type, &s->rmr) != ncclSuccess)
		return fail(s, "regMr failed");
	return latency(s) || bandwidth(s) ? -1 : 0;
}

int xfer_side(void *arg, int wr)
{
	const struct xfer_args *a = arg;
	struct xfer_result res;
	struct side s;

	memset(&res, 0, sizeof(res));
	memset(&s, 0, sizeof(s));
	s.a = a;
	s.res = &res;
	close(a->other);
	setenv("NCCL_SYMMEM_BACKEND", a->backend, 1);
	res.ok = run(&s) == 0;
	/* Before the connections close: the other side may wait on ctl. */
	if (!res.ok)
		ctl_byte(&s, 'x', 1);
	close_all(&s);
	close(a->ctl);
	return proc_write(wr, &res, sizeof(res)) || !res.ok;
}
