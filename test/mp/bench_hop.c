/* The copy-engine hop, measured through the plugin's exported v11 table
 * as NCCL's proxies drive it, against the bare driver's floors for the
 * same copies in the same run (hop_floor.c).
 *
 * Two processes on GPU 0: H with host buffers (cuMem host pages, as NCCL
 * 2.28 makes them), G with GPU buffers (cuMem).  Each process's copy
 * helper moves what it sends, so H -> G is a host-to-GPU copy and G -> H a
 * GPU-to-host one: the copy-engine paths one GPU has (with
 * NCCL_SYMMEM_HOST_IN_PLACE=1, set here unless the caller set it, H's
 * host receive buffers are written in place).  With --path gpu-gpu
 * both sides have GPU buffers, the first on GPU A and the second on GPU B
 * (--gpus A,B, default 0,1): peer copies, which need two GPUs to mean
 * anything (on one GPU the driver runs them on its SMs).
 *   pingpong  one message each way per round, receives posted ahead; one
 *             way is half the round trip; median, 10th and 90th
 *             percentiles over the rounds after a tenth of warm-up;
 *   stream    16 connections with 8 messages in flight each, one way,
 *             after one untimed message per connection (its setup time:
 *             first_ms): copies per second and GB/s; from the sending
 *             helper's stop lines its CPU time per copy (its work turns),
 *             copy-engine calls per copy, driver time per call, and the
 *             helper's own time per copy (work less its driver calls).
 * Every message has a buffer of its own and a pattern of its number, and
 * every one is checked after its phase.  With --hog other|self a kernel
 * keeps every SM busy meanwhile, in a process of its own (on both GPUs
 * of --path gpu-gpu) or in G's (where NCCL's kernel would run; each
 * side's on its own GPU with --path gpu-gpu) and in the floors' process.
 *
 *   SYMMEM_PLUGIN=.../libnccl-net-symmem.so bench_hop [-r rounds]
 *       [-s 8,4096,...] [-S 65536,...] [--hog none|other|self]
 *       [--floors run|none] [--path host-gpu|gpu-gpu] [--gpus A,B] [--tag text]
 *
 * With --floors none (the floors need a real GPU) and the driver of
 * test/fakedriver/ it runs in CI as an end-to-end check of the plugin
 * and its copy helper: every message checked, no timing worth keeping.
 *
 * Output: one JSON object per line (floors and plugin rows).  HOP_VERBOSE=1
 * copies the plugin's INFO lines to stderr (with NCCL_SM_FREE_VERBOSE=1,
 * each connection's data path and the helper's stop lines). */
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "helper_stop.h"
#include "hop.h"

#define MAX_SIZES 16
#define CONNS 16
#define IN_FLIGHT 8
#define STREAM_BYTES (256ull << 20)

struct opts {
	size_t sizes[MAX_SIZES], stream[MAX_SIZES];
	int nsizes, nstream, rounds;
	int hog;		/* 0 none, 1 another process, 2 self */
	int no_floors;		/* --floors none: the plugin's rows only */
	int peer;		/* --path gpu-gpu: both sides GPU buffers, on dev[0], dev[1] */
	int dev[2];		/* --gpus A,B: the GPUs of the first and second side */
	char tag[256];		/* JSON members every row carries */
};

static struct helper_stop stop;	/* the sending helper's, after a stream */
static int verbose;	/* HOP_VERBOSE=1: the plugin's INFO lines to stderr too */

/* NCCL's logger: WARNs to stderr; the helper's stop lines give its work. */
static void logger(ncclDebugLogLevel level, unsigned long flags, const char *file, int line,
		   const char *fmt, ...)
{
	char buf[2048];
	va_list ap;

	(void)flags;
	(void)file;
	(void)line;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	if (level == NCCL_LOG_WARN)
		fprintf(stderr, "WARN %s\n", buf);
	else if (verbose)
		fprintf(stderr, "INFO %s\n", buf);
	helper_stop_read(&stop, buf);
}

static void *open_ctx(void)
{
	ncclNetCommConfig_v11_t cfg = { .trafficClass = -1 };
	void *ctx = NULL;

	if (!harness_open() || net->init(&ctx, 7, &cfg, logger, NULL) != ncclSuccess)
		return NULL;
	return ctx;
}

/* n connections from the sending process to the other, over `ctl`. */
static int link_up(int ctl, void *ctx, int n, int sending, void **comm)
{
	char h[CONNS][NCCL_NET_HANDLE_MAXSIZE];
	void *lc[CONNS];
	double end = harness_now() + 60;
	int left = n;

	memset(comm, 0, sizeof(*comm) * (size_t)n);
	if (!sending) {
		for (int i = 0; i < n; i++)
			if (net->listen(ctx, 0, h[i], &lc[i]))
				return -1;
		if (harness_send_all(ctl, h, sizeof(h[0]) * (size_t)n))
			return -1;
	} else if (harness_recv_all(ctl, h, sizeof(h[0]) * (size_t)n)) {
		return -1;
	}
	while (left && harness_now() < end) {
		for (int i = 0; i < n; i++) {
			int rc;

			if (comm[i])
				continue;
			rc = sending ? net->connect(ctx, 0, h[i], &comm[i], NULL) :
				       net->accept(lc[i], &comm[i], NULL);
			if (rc)
				return -1;
			left -= comm[i] != NULL;
		}
	}
	if (!sending)
		for (int i = 0; i < n; i++)
			net->closeListen(lc[i]);
	return left ? -1 : 0;
}

static int test_until(void *req, int *size)
{
	double end = harness_now() + 30;
	int done = 0;

	while (!done) {
		if (net->test(req, &done, size) != ncclSuccess || harness_now() > end)
			return -1;
	}
	return 0;
}

static int post_recv(void *comm, void *buf, size_t len, void *mh, void **req)
{
	size_t cap = len;
	int tag = 0;

	*req = NULL;
	return net->irecv(comm, 1, &buf, &cap, &tag, &mh, NULL, req) || !*req ? -1 : 0;
}

static int rounds_for(const struct opts *o, size_t size)
{
	return size <= 65536 ? o->rounds : (o->rounds / 5 > 50 ? o->rounds / 5 : 50);
}

static size_t stride_of(size_t size)
{
	return (size + 4095) / 4096 * 4096;
}

/* One side of every ping-pong size; `lead` (H) times and prints. */
static int pingpong(int ctl, void *ctx, int lead, int gpu, const struct opts *o)
{
	void *send, *recv, *ms = NULL, *mr = NULL;
	struct hop_buf sb, rb;
	size_t area = 0, most = 0;
	double *t = NULL, *at = NULL, *seen = NULL, *h2g = NULL, *g2h = NULL;
	int rc = -1;

	for (int i = 0; i < o->nsizes; i++) {
		size_t n = (size_t)rounds_for(o, o->sizes[i]), a = stride_of(o->sizes[i]) * n;

		area = a > area ? a : area;
		most = n > most ? n : most;	/* large sizes take at least 50 */
	}
	if (link_up(ctl, ctx, 1, lead, lead ? &send : &recv) ||
	    link_up(ctl, ctx, 1, !lead, lead ? &recv : &send))
		return -1;
	if (hop_buf_alloc(&sb, gpu, area) || hop_buf_alloc(&rb, gpu, area))
		goto out;
	if (net->regMr(send, sb.ptr, area, gpu ? NCCL_PTR_CUDA : NCCL_PTR_HOST, &ms) ||
	    net->regMr(recv, rb.ptr, area, gpu ? NCCL_PTR_CUDA : NCCL_PTR_HOST, &mr))
		goto out;
	/* at[r]: when the round's first message was posted (H) or seen (G);
	 * both sides read one monotonic clock, so G's moment splits H's
	 * round trip into its two directions. */
	t = calloc(most, sizeof(*t));
	at = calloc(most, sizeof(*at));
	seen = calloc(most, sizeof(*seen));	/* G's at[], sent to H */
	h2g = calloc(most, sizeof(*h2g));
	g2h = calloc(most, sizeof(*g2h));
	if (!t || !at || !seen || !h2g || !g2h)
		goto out;
	for (int i = 0; i < o->nsizes; i++) {
		size_t len = o->sizes[i], st = stride_of(len);
		int n = rounds_for(o, len), warm = n / 10, bad, theirs = 0, got;
		uint64_t mine = ((uint64_t)i << 32) + (lead ? 0 : 1u << 20);
		uint64_t other = ((uint64_t)i << 32) + (lead ? 1u << 20 : 0);
		double p10, p50, p90, h50, g50;
		char c = 0;

		if (hop_buf_fill(&sb, st, n, len, mine) || hop_buf_poison(&rb, st * (size_t)n))
			goto out;
		for (int r = 0; r < n; r++) {
			void *rq, *sq;
			double t0 = 0;

			if (post_recv(recv, rb.ptr + st * (size_t)r, len, mr, &rq))
				goto out;
			if (lead) {
				/* The other side has posted its receive: time from here. */
				if (harness_recv_all(ctl, &c, 1))
					goto out;
				t0 = harness_now();
				if (harness_isend(send, sb.ptr + st * (size_t)r, len, ms, &sq, 30) ||
				    test_until(sq, NULL) || test_until(rq, &got) || (size_t)got != len)
					goto out;
				if (r >= warm)
					t[r - warm] = (harness_now() - t0) / 2 * 1e6;
				at[r] = t0;
			} else {
				if (harness_send_all(ctl, &c, 1) || test_until(rq, &got))
					goto out;
				at[r] = harness_now();
				if ((size_t)got != len ||
				    harness_isend(send, sb.ptr + st * (size_t)r, len, ms, &sq, 30) ||
				    test_until(sq, NULL))
					goto out;
			}
		}
		bad = hop_buf_check(&rb, st, n, len, other);
		if (bad < 0)
			goto out;
		if (!lead) {
			if (harness_send_all(ctl, &bad, sizeof(bad)) ||
			    harness_send_all(ctl, at, sizeof(*at) * (size_t)n))
				goto out;
			continue;
		}
		if (harness_recv_all(ctl, &theirs, sizeof(theirs)) ||
		    harness_recv_all(ctl, seen, sizeof(*seen) * (size_t)n))
			goto out;
		/* h2g: H's post to G's sight; the rest of the round is G -> H
		 * (t[] holds half the round, so G -> H is 2 t - h2g). */
		for (int r = warm; r < n; r++) {
			h2g[r - warm] = (seen[r] - at[r]) * 1e6;
			g2h[r - warm] = 2 * t[r - warm] - h2g[r - warm];
		}
		hop_percentiles(h2g, n - warm, NULL, &h50, NULL);
		hop_percentiles(g2h, n - warm, NULL, &g50, NULL);
		hop_percentiles(t, n - warm, &p10, &p50, &p90);
		printf("{\"mode\": \"pingpong\", \"who\": \"plugin\", %s, \"bytes\": %zu, "
		       "\"plugin_us\": %.2f, \"plugin_p10\": %.2f, \"plugin_p90\": %.2f, "
		       "\"plugin_h2g_us\": %.2f, \"plugin_g2h_us\": %.2f, "
		       "\"rounds\": %d, \"checked\": %d, \"bad\": %d}\n", o->tag, len, p50, p10, p90,
		       h50, g50, n - warm, 2 * n, bad + theirs);
		fflush(stdout);
		if (bad + theirs) {
			fprintf(stderr, "bench_hop: %d of %d messages of %zu bytes arrived wrong\n",
				bad + theirs, 2 * n, len);
			goto out;
		}
	}
	rc = 0;
out:
	free(t);
	free(at);
	free(seen);
	free(h2g);
	free(g2h);
	if (ms)
		net->deregMr(send, ms);
	if (mr)
		net->deregMr(recv, mr);
	net->closeSend(send);
	net->closeRecv(recv);
	hop_buf_free(&sb);
	hop_buf_free(&rb);
	return rc;
}

struct flow {
	void *comm, *mh;
	void *req[IN_FLIGHT];
	int head, n;		/* requests in flight: req[head .. head + n) */
	int next;		/* next message of this connection */
};

/* Moves messages on every connection until each has completed `upto`
 * (message m of connection c in buffer c * per + m); 0, or -1 on an
 * error, a short receive or 60 s without the end. */
static int pump(struct flow *f, int sending, uint8_t *base, size_t len, int per, int upto)
{
	double t0 = harness_now();
	int left = 0;

	for (int i = 0; i < CONNS; i++)
		left += upto - f[i].next + f[i].n;
	while (left > 0) {
		if (harness_now() - t0 > 60)
			return -1;
		for (int i = 0; i < CONNS; i++) {
			struct flow *w = &f[i];
			int fin = 0, got = 0;

			while (w->n < IN_FLIGHT && w->next < upto) {
				uint8_t *p = base + len * (size_t)(i * per + w->next);
				void **slot = &w->req[(w->head + w->n) % IN_FLIGHT];

				*slot = NULL;
				if (sending ? net->isend(w->comm, p, len, 0, w->mh, NULL, slot) != 0 :
					      post_recv(w->comm, p, len, w->mh, slot) != 0)
					return -1;
				if (!*slot)
					break;	/* not posted on the other side yet */
				w->n++;
				w->next++;
			}
			if (!w->n)
				continue;
			if (net->test(w->req[w->head], &fin, &got) != ncclSuccess)
				return -1;
			if (!fin)
				continue;
			if (!sending && (size_t)got != len)
				return -1;
			w->head = (w->head + 1) % IN_FLIGHT;
			w->n--;
			left--;
		}
	}
	return 0;
}

/* One stream: `sending` posts, the other receives; the sender times.
 * Message m of connection c has buffer (c * per + m) and that number.
 * The first message of every connection goes untimed (first_ms): it
 * carries the setup a job pays once per buffer (the receiver's
 * announcement, the mappings in the sender and its helper), so the
 * timed part is the steady state NCCL's steps see.  The receiver then
 * poisons its buffers again, so every timed message is checked. */
static int stream(int ctl, void *ctx, int sending, int gpu, size_t len, const struct opts *o,
		  const char *dir)
{
	int per = (int)(STREAM_BYTES / CONNS / len), total, bad, theirs = 0, rc = -1;
	void *comms[CONNS];
	struct flow f[CONNS];
	struct hop_buf b;
	double t0, t1, first = 0;
	char c = 0;

	per = per < 8 ? 8 : per > 512 ? 512 : per;
	total = per * CONNS;
	memset(f, 0, sizeof(f));
	if (link_up(ctl, ctx, CONNS, sending, comms))
		return -1;
	if (hop_buf_alloc(&b, gpu, len * (size_t)total))
		goto out;
	if (sending ? hop_buf_fill(&b, len, total, len, 1000) :
		      hop_buf_poison(&b, len * (size_t)total))
		goto out;
	for (int i = 0; i < CONNS; i++) {
		f[i].comm = comms[i];
		if (net->regMr(comms[i], b.ptr, len * (size_t)total,
			       gpu ? NCCL_PTR_CUDA : NCCL_PTR_HOST, &f[i].mh))
			goto out;
	}
	if (sending ? harness_recv_all(ctl, &c, 1) : harness_send_all(ctl, &c, 1))
		goto out;
	t0 = harness_now();
	if (pump(f, sending, b.ptr, len, per, 1))
		goto out;
	first = harness_now() - t0;
	for (int i = 0; i < CONNS; i++)
		f[i].next = 0;
	if (!sending && hop_buf_poison(&b, len * (size_t)total))
		goto out;
	if (sending ? harness_recv_all(ctl, &c, 1) : harness_send_all(ctl, &c, 1))
		goto out;
	helper_stop_reset(&stop);
	t0 = harness_now();
	if (pump(f, sending, b.ptr, len, per, per))
		goto out;
	if (sending ? harness_recv_all(ctl, &c, 1) : harness_send_all(ctl, &c, 1))
		goto out;
	t1 = harness_now();
	bad = sending ? 0 : hop_buf_check(&b, len, total, len, 1000);
	if (bad < 0)
		goto out;
	rc = 0;
out:
	for (int i = 0; i < CONNS; i++) {
		if (f[i].mh)
			net->deregMr(comms[i], f[i].mh);
		if (comms[i] && sending)
			net->closeSend(comms[i]);
		else if (comms[i])
			net->closeRecv(comms[i]);
	}
	hop_buf_free(&b);
	/* The helper stopped with the last connection: its stop line is in. */
	if (rc)
		return rc;
	if (!sending)
		return harness_send_all(ctl, &bad, sizeof(bad));
	if (harness_recv_all(ctl, &theirs, sizeof(theirs)))
		return -1;
	printf("{\"mode\": \"stream\", \"who\": \"plugin\", %s, \"dir\": \"%s\", \"bytes\": %zu, "
	       "\"copies\": %d, \"plugin_copies_per_s\": %.0f, \"plugin_gbps\": %.2f, "
	       "\"first_ms\": %.3f, \"helper_work_us_per_copy\": %.3f, \"calls_per_copy\": %.3f, "
	       "\"driver_us_per_call\": %.2f, \"helper_own_us_per_copy\": %.3f, \"checked\": %d, "
	       "\"bad\": %d}\n", o->tag, dir, len, total, total / (t1 - t0),
	       (double)len * total / (t1 - t0) / 1e9, first * 1e3, stop.work_us,
	       stop.calls_per_copy, stop.driver_us_per_call, helper_stop_own_us(&stop), total,
	       theirs);
	fflush(stdout);
	return theirs ? -1 : 0;
}

/* H (lead, host buffers) or G (GPU buffers). */
static int side(int ctl, int lead, const struct opts *o)
{
	struct hop_hog *hog = NULL;
	int gpu = o->peer || !lead, rc = -1;
	void *ctx;

	/* The plugin works on the GPU of the context current when it starts,
	 * as NCCL's proxy thread does. */
	if (sm_ctx_enter(o->dev[!lead], NULL, NULL))
		return 2;
	ctx = open_ctx();
	if (!ctx)
		return 2;
	if (o->hog == 2 && gpu && hop_hog_start(1, o->dev[!lead], &hog))
		return 3;
	if (pingpong(ctl, ctx, lead, gpu, o))
		goto out;
	for (int i = 0; i < o->nstream; i++) {
		/* host -> GPU (or A -> B): the first side sends; then back. */
		if (stream(ctl, ctx, lead, gpu, o->stream[i], o,
			   o->peer ? "a-to-b" : "host-to-gpu") ||
		    stream(ctl, ctx, !lead, gpu, o->stream[i], o, o->peer ? "b-to-a" : "gpu-to-host"))
			goto out;
	}
	rc = 0;
out:
	if (hog && hop_hog_stop(hog) < 0)
		rc = 4;
	net->finalize(ctx);
	return rc ? 5 : 0;
}

static int floors(const struct opts *o)
{
	struct hop_hog *hog = NULL;
	int rc = 0;

	if (o->hog == 2 && hop_hog_start(1, o->dev[0], &hog))
		return 3;
	if (sm_ctx_enter(o->dev[0], NULL, NULL))
		return 6;
	rc = hop_floors(stdout, o->tag, o->sizes, o->nsizes, o->rounds / 2,
			o->peer ? o->dev[1] : -1);
	for (int i = 0; i < o->nstream && !rc; i++)
		rc = hop_floor_stream(stdout, o->tag, o->stream[i],
				      (int)(STREAM_BYTES / o->stream[i]), o->peer ? o->dev[1] : -1);
	if (hog && hop_hog_stop(hog) < 0)
		rc = 4;
	return rc ? 6 : 0;
}

static int parse_sizes(const char *s, size_t *out)
{
	int n = 0;

	while (*s && n < MAX_SIZES) {
		char *end;

		out[n++] = strtoull(s, &end, 0);
		if (end == s || out[n - 1] == 0)
			return -1;
		s = *end == ',' ? end + 1 : end;
	}
	return n;
}

static int parse(int argc, char **argv, struct opts *o)
{
	const char *tag = "", *hog = "none", *path = "host-gpu";

	o->rounds = 1000;
	o->dev[1] = -1;
	o->nsizes = parse_sizes("8,4096,65536,1048576,4194304", o->sizes);
	o->nstream = parse_sizes("65536,262144,1048576", o->stream);
	for (int i = 1; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "-r"))
			o->rounds = atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "-s"))
			o->nsizes = parse_sizes(argv[i + 1], o->sizes);
		else if (!strcmp(argv[i], "-S"))
			o->nstream = parse_sizes(argv[i + 1], o->stream);
		else if (!strcmp(argv[i], "--hog"))
			hog = argv[i + 1];
		else if (!strcmp(argv[i], "--tag"))
			tag = argv[i + 1];
		else if (!strcmp(argv[i], "--floors"))
			o->no_floors = !strcmp(argv[i + 1], "none");
		else if (!strcmp(argv[i], "--path"))
			path = argv[i + 1];
		else if (!strcmp(argv[i], "--gpus")) {
			if (sscanf(argv[i + 1], "%d,%d", &o->dev[0], &o->dev[1]) != 2 ||
			    o->dev[0] < 0 || o->dev[1] < 0)
				return -1;
		}
		else
			return -1;
	}
	o->hog = !strcmp(hog, "other") ? 1 : !strcmp(hog, "self") ? 2 : 0;
	o->peer = !strcmp(path, "gpu-gpu");
	if (!o->peer && strcmp(path, "host-gpu"))
		return -1;
	if (o->dev[1] < 0)
		o->dev[1] = o->peer;	/* GPU 1 for the second side of gpu-gpu */
	if ((argc - 1) % 2 || o->rounds < 20 || o->nsizes <= 0 || o->nstream < 0 ||
	    (o->hog == 0 && strcmp(hog, "none")))
		return -1;
	snprintf(o->tag, sizeof(o->tag), "\"path\": \"%s\", \"hog\": \"%s\"%s%s", path, hog,
		 *tag ? ", " : "", tag);
	return 0;
}

static int reap(pid_t pid, const char *what)
{
	int status;

	if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status)) {
		fprintf(stderr, "bench_hop: %s failed (status %d)\n", what, status);
		return -1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct hop_hog *hog[2] = { NULL, NULL };
	struct opts o;
	int sv[2], rc = 0;
	pid_t f, h, g;

	memset(&o, 0, sizeof(o));
	verbose = getenv("HOP_VERBOSE") && !strcmp(getenv("HOP_VERBOSE"), "1");
	if (parse(argc, argv, &o)) {
		fprintf(stderr, "usage: SYMMEM_PLUGIN=... bench_hop [-r rounds] [-s sizes] "
			"[-S stream sizes] [--hog none|other|self] [--floors run|none] "
			"[--path host-gpu|gpu-gpu] [--gpus A,B] [--tag '\"k\": v']\n");
		return 2;
	}
	/* G's messages to H take the copy helper's path, as a GPU-to-GPU
	 * send does, not the ring (docs/env.md); unless told otherwise. */
	setenv("NCCL_SYMMEM_HOST_IN_PLACE", "1", 0);
	/* No CUDA in this process: every child makes its own context.  Peer
	 * copies get a kernel on both GPUs, as a collective's kernels are. */
	if (o.hog == 1 && (hop_hog_start(0, o.dev[0], &hog[0]) ||
			   (o.peer && o.dev[1] != o.dev[0] && hop_hog_start(0, o.dev[1], &hog[1])))) {
		if (hog[0])
			hop_hog_stop(hog[0]);
		return 1;
	}
	fflush(stdout);
	if (!o.no_floors) {
		f = fork();
		if (f == 0)
			_exit(floors(&o));
		rc |= f < 0 || reap(f, "the floors");
	}
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv))
		return 1;
	h = fork();
	if (h == 0)
		_exit(side(sv[0], 1, &o));
	g = fork();
	if (g == 0)
		_exit(side(sv[1], 0, &o));
	close(sv[0]);
	close(sv[1]);
	rc |= h < 0 || reap(h, "the host-buffer side");
	rc |= g < 0 || reap(g, "the GPU-buffer side");
	for (int i = 0; i < 2; i++) {
		if (hog[i] && hop_hog_stop(hog[i]) < 0) {
			fprintf(stderr, "bench_hop: the kernel on every SM of GPU %d failed\n",
				o.dev[i]);
			rc = 1;
		}
	}
	return rc ? 1 : 0;
}
