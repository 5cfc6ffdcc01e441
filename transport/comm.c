/* What every connection shares, whatever moves its bytes: the request pool,
 * the in-order queue, sticky failure and the dead-peer check. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "comm.h"
#include "sock.h"
#include "symmem.h"

/* While a request waits, the peer's socket is checked this often.  Polling
 * it on every test() call would cost a system call per spin. */
#define LIVENESS_INTERVAL_NS (50ull * 1000 * 1000)

static _Atomic uint64_t serials;	/* tp_comm.serial */

struct tp_comm *comm_new(int is_send, const struct tp_ops *ops, int fd)
{
	struct tp_comm *c = calloc(1, ops->comm_size);

	if (!c)
		return NULL;
	c->serial = atomic_fetch_add(&serials, 1) + 1;
	c->is_send = is_send;
	c->ops = ops;
	c->fd = fd;
	atomic_flag_clear(&c->fail_claimed);
	for (int i = 0; i < TP_MAX_REQUESTS; i++)
		c->reqs[i].comm = c;
	if (ops->init)
		ops->init(c);
	return c;
}

/* A request stays taken from its post until NCCL's test() saw it done,
 * so a free one is the test: the queue only holds those still moving. */
static struct tp_req *free_req(struct tp_comm *c)
{
	for (int i = 0; i < TP_MAX_REQUESTS; i++)
		if (c->reqs[i].kind == REQ_FREE)
			return &c->reqs[i];
	return NULL;
}

struct tp_req *comm_req_alloc(struct tp_comm *c, int kind)
{
	struct tp_req *r = free_req(c);

	if (!r)
		return NULL;
	memset(r, 0, sizeof(*r));
	r->comm = c;
	r->kind = kind;
	r->seq = c->posted;
	r->t_post = sm_now_ns();
	c->queue[(c->q_head + c->q_count) % TP_MAX_REQUESTS] = r;
	c->q_count++;
	return r;
}

int comm_engine(struct tp_comm *c)
{
	if (c->ce)
		return SM_OK;
	return comm_fail(c, SM_ERR_USAGE, "GPU memory on a connection without a copy engine "
			 "(this process serves host memory only)");
}

static const char *const path_names[PATH_COUNT] = {
	[PATH_RING] = "through the connection's host buffers (shared-memory ring or TCP)",
	[PATH_HELPER] = "by copy engine into the receiver's buffer, issued by the copy helper",
	[PATH_STAGED] = "from host staging by copy engine into the receiver's buffer, issued by "
			"the copy helper",
	[PATH_IN_PROCESS] = "by copy engine into the receiver's buffer, issued in NCCL's process "
			    "(no copy helper, or it cannot map one of the buffers)",
	[PATH_IN_PLACE] = "in place, written by the sender's copy engine",
	[PATH_POOL] = "into this GPU's staging pool by the sender's copy engine, then copied "
		      "into the buffer by this GPU's copy engine",
};

/* How r moved, by its backend's word. */
static void req_note(const struct tp_comm *c, const struct tp_req *r, struct tp_req_note *n)
{
	memset(n, 0, sizeof(*n));
	n->path = PATH_RING;
	if (c->ops->req_note)
		c->ops->req_note(r, n);
}

/* NCCL_SM_FREE_VERBOSE: the first message of each kind on a connection,
 * a send when it is posted, a receive when it completes (the sender may
 * take the ring into a receive posted for a copy in place). */
static void note_path(struct tp_comm *c, const struct tp_req *r)
{
	struct tp_req_note n;

	req_note(c, r, &n);
	if (n.skip || !c->verbose || (c->paths_seen & (1u << n.path)))
		return;
	c->paths_seen |= 1u << n.path;
	sm_info("%s connection (%s) %p: message %llu is the first moved %s",
		c->is_send ? "sending" : "receiving", c->ops->name, (void *)c,
		(unsigned long long)r->seq, path_names[n.path]);
}

int comm_recv_size(struct tp_comm *c, struct tp_req *r, uint64_t size)
{
	if (size > r->size)
		return comm_fail(c, SM_ERR_USAGE, "peer sent %llu bytes into a posted receive of "
				 "%llu bytes (message %llu)", (unsigned long long)size,
				 (unsigned long long)r->size, (unsigned long long)r->seq);
	r->msg_size = size;
	r->have_size = 1;
	return SM_OK;
}

/* On NCCL's service thread; the backend's engine_ready follows (the TCP
 * bounce slots). */
int comm_take_engine(struct tp_comm *c)
{
	int rc = smf_engine_get(&c->engine_opt, &c->ce);

	c->engine_later = 0;
	if (rc)
		return sm_fail(rc, "opening the copy engine: %s", sm_last_error());
	return c->ops->engine_ready ? c->ops->engine_ready(c) : SM_OK;
}

int comm_gpu_ready(struct tp_comm *c)
{
	return c->engine_later ? comm_take_engine(c) : SM_OK;
}

int comm_setup(struct tp_comm *c, const struct tp_options *opt)
{
	struct smf_engine_options *eo = &c->engine_opt;

	c->stall_ns = opt->stall_report > 0 ? (uint64_t)(opt->stall_report * 1e9) : 0;
	c->copy_limit_ns = COPY_LIMIT_NS;
	if (opt->copy_timeout > 0)
		c->copy_limit_ns = (uint64_t)(opt->copy_timeout * 1e9);
	if (c->copy_limit_ns < 1000)	/* 1 us at least: 0 would fail every copy at once */
		c->copy_limit_ns = 1000;
	c->trace_ns = opt->trace_ns;
	c->verbose = opt->verbose;
	if (!opt->gpu)
		return c->ops->setup ? c->ops->setup(c, opt) : SM_OK;
	eo->nstreams = opt->copy_streams > 0 ? opt->copy_streams : 1;
	eo->split_min = opt->split_min;
	eo->helper = opt->copy_helper;
	eo->copy_depth = opt->copy_depth > 0 ? opt->copy_depth : 2;
	eo->merge_max = opt->merge_max;
	eo->batch = opt->batch > 0 ? opt->batch : 1;
	eo->phase_ns = opt->phase_ns;
	eo->landing = opt->landing;
	eo->all_gpus = opt->helper_all_gpus;
	/* The backend takes the engine now, later or never (ibverbs moves
	 * its bytes without one). */
	return c->ops->setup ? c->ops->setup(c, opt) : SM_OK;
}

/* A wait that makes no progress for stall_ns is reported once, with both
 * sides' counters: NCCL itself never says which connection a stuck job
 * waits on.  The wait goes on; a live but slow peer is not an error. */
static void comm_note_wait(struct tp_comm *c, uint64_t now)
{
	char state[320], oldest[320], copy[160];
	const struct tp_req *r = comm_head(c);

	if (!c->stall_ns || c->stall_reported)
		return;
	if (!c->wait_since_ns) {
		c->wait_since_ns = now;
		return;
	}
	if (now - c->wait_since_ns < c->stall_ns)
		return;
	c->stall_reported = 1;
	state[0] = '\0';
	if (c->ops->describe)
		c->ops->describe(c, state, sizeof(state));
	snprintf(oldest, sizeof(oldest), "none");
	if (r) {
		struct tp_req_note n;

		req_note(c, r, &n);
		copy[0] = '\0';
		if (c->ops->req_describe)
			c->ops->req_describe(c, r, copy, sizeof(copy));
		snprintf(oldest, sizeof(oldest), "message %llu (%llu of %llu bytes moved%s%s%s)",
			 (unsigned long long)r->seq, (unsigned long long)r->moved,
			 (unsigned long long)(r->kind == REQ_RECV && r->have_size ? r->msg_size :
					      r->size),
			 n.direct ? ", copy engine in place" : "", copy[0] ? ": " : "", copy);
	}
	/* One WARN per peer: every channel's connection to a stuck peer
	 * reports, and this text is the same for all of them (the log shows
	 * it once); each connection's own state is an INFO line. */
	sm_warn("connections to peer process %d made no progress for %.3g s, still waiting "
		"(NCCL_SYMMEM_STALL_REPORT; INFO lines give each one's state)", c->peer_pid,
		(double)c->stall_ns / 1e9);
	sm_info("%s connection (%s) to peer process %d made no progress for %.3g s, still "
		"waiting; %llu posted here, oldest in flight: %s; %s",
		c->is_send ? "sending" : "receiving", c->ops->name, c->peer_pid,
		(double)(now - c->wait_since_ns) / 1e9, (unsigned long long)c->posted, oldest, state);
}

static void comm_progressed(struct tp_comm *c)
{
	c->wait_since_ns = 0;
	c->stall_reported = 0;
}

/* Fails the connection for good.  The first failure is the one it keeps
 * (a later one is usually a consequence); every caller still gets its
 * own message back.  The message names the peer's process and nothing
 * that differs between connections, so when a peer dies the failures of
 * all of NCCL's channels to it read the same and the log shows one. */
int comm_fail(struct tp_comm *c, int status, const char *fmt, ...)
{
	char msg[sizeof(c->failmsg)];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (n >= 0 && (size_t)n < sizeof(msg) && c->peer_pid > 0)
		snprintf(msg + n, sizeof(msg) - (size_t)n, " (peer process %d)", c->peer_pid);
	if (!atomic_flag_test_and_set(&c->fail_claimed)) {
		memcpy(c->failmsg, msg, sizeof(msg));
		atomic_store(&c->failed, status);
	}
	return sm_fail(status, "%s", msg);
}

/* Set once a copy of this process outlived the copy limit: the engine is
 * taken as stuck, and closes stop waiting the limit again for each of
 * NCCL's connections (32 per peer), which would hold an abort for minutes. */
static atomic_int copies_overdue;

/* NCCL asks about a waiting copy on every turn of its progress loop (a few
 * microseconds apart).  A gap between two asks longer than half the limit,
 * and than GAP_FLOOR_NS, means NCCL's thread was held up (a debugger, a
 * stopped process), not that the engine is stuck: the time before the gap
 * counts for no copy of the connection.  The floor keeps a limit of a few
 * microseconds (tests) from seeing a gap in every turn.  More than
 * GAP_STREAK gaps in a row are NCCL asking slowly, not a thread held up
 * once: they no longer restart the clock, or a stuck copy asked about
 * that slowly would never fail. */
#define GAP_FLOOR_NS (10ull * 1000 * 1000)
#define GAP_STREAK 2

int comm_copy_overdue(struct tp_comm *c, uint64_t since, uint64_t bytes, const char *what)
{
	uint64_t now = sm_now_ns();
	uint64_t gap = c->copy_limit_ns / 2;

	if (gap < GAP_FLOOR_NS)
		gap = GAP_FLOOR_NS;
	if (!c->overdue_seen_ns) {
		c->overdue_from_ns = now;
	} else if (now - c->overdue_seen_ns <= gap) {
		c->overdue_gaps = 0;
	} else if (++c->overdue_gaps <= GAP_STREAK) {
		c->overdue_from_ns = now;
	}
	c->overdue_seen_ns = now;
	if (since < c->overdue_from_ns)
		since = c->overdue_from_ns;
	if (now < since || now - since <= c->copy_limit_ns)
		return SM_OK;
	atomic_store(&copies_overdue, 1);
	return comm_fail(c, SM_ERR_CUDA, "a %llu-byte copy %s did not land in %g s: the GPU, "
			 "its driver or the copy helper is stuck (NCCL_SYMMEM_COPY_TIMEOUT)",
			 (unsigned long long)bytes, what, c->copy_limit_ns / 1e9);
}

uint64_t comm_close_deadline(const struct tp_comm *c)
{
	uint64_t now = sm_now_ns();

	return atomic_load(&copies_overdue) ? now : now + c->copy_limit_ns;
}

int comm_broken(const struct tp_comm *c)
{
	return sm_fail(c->failed, "%s", c->failmsg);
}

int comm_check_peer(struct tp_comm *c, struct tp_req *r)
{
	uint64_t now = sm_now_ns();
	int progressed = 0, rc;

	if (now < c->next_check_ns)
		return SM_OK;
	c->next_check_ns = now + LIVENESS_INTERVAL_NS;
	comm_note_wait(c, now);
	if (!sock_peer_gone(c->fd))
		return SM_OK;
	rc = c->ops->progress(c, &progressed);
	if (rc)
		return rc;
	/* A receive whose bytes all arrived waits on its own copies only,
	 * and bytes still in the socket wait for copies to free a slot
	 * (each bounded by the copy limit, tcp_bounce.c). */
	if (r && (r->done || r->wire_done || (c->ops->pending && c->ops->pending(c))))
		return SM_OK;
	/* A receiver goes on while the bytes sent before the hang-up are
	 * still coming out of the socket (a 1 MiB message ahead of a close
	 * is not read in one pass).  The socket holds only so much once the
	 * peer is gone, and the read that finds it empty fails the receive
	 * that lacks bytes. */
	if (!c->is_send && progressed)
		return SM_OK;
	return comm_fail(c, SM_ERR_REMOTE, "%s peer closed the connection or died",
			 c->is_send ? "receiving" : "sending");
}

int tp_region_covers(const struct tp_region *r, const void *data, size_t size)
{
	uintptr_t p = (uintptr_t)data;

	return p >= r->base && size <= r->size && p - r->base <= r->size - size;
}

/* A request's buffer must lie inside the registration it names. */
static int check_region(const struct tp_comm *c, const struct tp_region *reg, const void *data,
			size_t size)
{
	if (!reg)
		return SM_OK;
	/* By serial, not address: a closed comm's address may come back. */
	if (reg->comm_serial != c->serial)
		return sm_fail(SM_ERR_INTERNAL, "buffer registered on another connection");
	if (size && !tp_region_covers(reg, data, size))
		return sm_fail(SM_ERR_INTERNAL, "%zu bytes at %p lie outside their registration "
			       "(%zu bytes at 0x%lx)", size, data, reg->size, (unsigned long)reg->base);
	return SM_OK;
}

/* The backend took no send: no receive posted yet, or its copy could not
 * start.  A receiver may post its receive and close between the backend's
 * look at its receives and the liveness check; once the hang-up shows,
 * everything it posted before closing shows too, so the send looks once
 * more before the hang-up fails it.  A posted receive whose copy waits
 * for a copy slot (start_try_ns) is not failed by the hang-up either: the
 * copy limit bounds that wait.  The hang-up is looked for here, not left
 * to comm_check_peer: one that check found on a look of its own, a moment
 * later, would fail the send without the second look. */
static int isend_not_taken(struct tp_comm *c, struct tp_req **out, const void *data,
			   size_t size, const struct tp_region *reg)
{
	uint64_t now = sm_now_ns();
	int rc;

	c->stats.retries++;
	if (!c->try_ns)
		c->try_ns = now;
	if (now < c->next_check_ns)
		return SM_OK;
	if (!c->start_try_ns && sock_peer_gone(c->fd)) {
		rc = c->ops->isend(c, out, data, size, reg);
		if (rc || *out || c->start_try_ns)
			return rc;
		return comm_check_peer(c, NULL);
	}
	c->next_check_ns = now + LIVENESS_INTERVAL_NS;
	comm_note_wait(c, now);
	return SM_OK;
}

/* Steps one send may ask for in a row: read the announcement, ask the
 * copy helper, open host staging, map the peer's buffer here. */
#define SETUP_STEPS 4

/* The backend's isend is a lookup and a post: setup it found still to do
 * is a progress step's (where an announcement is read, a peer's buffer
 * mapped, the copy helper asked), so that work runs where NCCL's test()
 * runs it too, and the send looks once more. */
static int isend_after_step(struct tp_comm *c, struct tp_req **out, const void *data,
			    size_t size, const struct tp_region *reg)
{
	int rc = SM_OK;

	for (int i = 0; i < SETUP_STEPS && !rc && !*out && c->step_wanted; i++) {
		int progressed = 0;

		c->step_wanted = 0;
		rc = c->ops->progress(c, &progressed);
		if (!rc)
			rc = c->ops->isend(c, out, data, size, reg);
	}
	c->step_wanted = 0;	/* still asking: the next try's step does it */
	return rc;
}

int tp_isend(struct tp_comm *c, const void *data, size_t size, const struct tp_region *reg,
	     struct tp_req **out)
{
	int progressed = 0, rc;

	*out = NULL;
	if (c->failed)
		return comm_broken(c);
	if (!c->is_send)
		return sm_fail(SM_ERR_INTERNAL, "isend on a receiving connection");
	if (size && !data)
		return sm_fail(SM_ERR_INTERNAL, "isend of %zu bytes from a NULL buffer", size);
	if (!free_req(c))
		return sm_fail(SM_ERR_INTERNAL, "more than %d sends outstanding on one connection "
			       "(in flight, or done but not yet tested)", TP_MAX_REQUESTS);
	rc = check_region(c, reg, data, size);
	if (rc)
		return rc;
	trace_call(c);
	c->step_wanted = 0;
	rc = c->ops->isend(c, out, data, size, reg);
	if (!rc && !*out && c->step_wanted)
		rc = isend_after_step(c, out, data, size, reg);
	if (!rc && !*out)
		rc = isend_not_taken(c, out, data, size, reg);
	if (rc || !*out)
		return rc;
	(*out)->t_wait = c->try_ns ? (*out)->t_post - c->try_ns : 0;
	sm_hist_add(&c->stats.stage[TP_STAGE_RECV_WAIT], (*out)->t_wait);
	c->try_ns = 0;
	comm_progressed(c);
	(*out)->src_dev = reg && reg->mem == TP_MEM_CUDA;
	note_path(c, *out);
	/* Start moving bytes now: a small message is often complete before
	 * NCCL's first test(), and the receiver can start copying sooner. */
	return c->ops->progress(c, &progressed);
}

int tp_irecv(struct tp_comm *c, void *data, size_t size, struct tp_region *reg,
	     struct tp_req **out)
{
	struct tp_req *r;
	int rc;

	*out = NULL;
	if (c->failed)
		return comm_broken(c);
	if (c->is_send)
		return sm_fail(SM_ERR_INTERNAL, "irecv on a sending connection");
	if (size && !data)
		return sm_fail(SM_ERR_INTERNAL, "irecv of %zu bytes into a NULL buffer", size);
	rc = check_region(c, reg, data, size);
	if (rc)
		return rc;
	if (reg && c->ops->recv_ready) {
		int ready;

		rc = c->ops->recv_ready(c, reg, &ready);
		if (rc || !ready)
			return rc;	/* not ready: *out NULL, NCCL retries */
	}
	trace_call(c);
	r = comm_req_alloc(c, REQ_RECV);
	if (!r)
		return sm_fail(SM_ERR_INTERNAL, "more than %d receives outstanding on one "
			       "connection (in flight, or done but not yet tested)", TP_MAX_REQUESTS);
	r->buf = data;
	r->size = size;
	r->dst_dev = reg && reg->mem == TP_MEM_CUDA;
	c->posted++;
	rc = c->ops->irecv(c, r, reg);
	if (rc)
		return rc;
	*out = r;
	return SM_OK;
}

static void account(struct tp_comm *c, const struct tp_req *r)
{
	uint64_t lat = sm_now_ns() - r->t_post;
	struct tp_req_note n;

	req_note(c, r, &n);
	c->stats.messages++;
	c->stats.bytes += r->kind == REQ_RECV ? r->msg_size : r->size;
	c->stats.direct += n.direct != 0;
	c->stats.helper += n.helper != 0;
	c->stats.pooled += n.pooled != 0;
	c->stats.lat_ns_sum += lat;
	if (lat > c->stats.lat_ns_max)
		c->stats.lat_ns_max = lat;
}

void tp_get_stats(const struct tp_comm *c, struct tp_stats *out)
{
	*out = c->stats;
}

int tp_test(struct tp_req *r, int *done, size_t *size)
{
	struct tp_comm *c = r->comm;
	int progressed = 0, rc;

	*done = 0;
	if (r->kind == REQ_FREE)
		return sm_fail(SM_ERR_INTERNAL, "test on a request that is not in flight");
	trace_call(c);
	if (!r->done) {
		if (c->failed)
			return comm_broken(c);
		rc = c->ops->progress(c, &progressed);
		/* A failure found after r completed (the peer hung up behind
		 * it) is the next request's to report. */
		if (rc && !r->done)
			return rc;
		if (progressed)
			comm_progressed(c);
		if (!r->done && !progressed) {
			rc = comm_check_peer(c, r);
			/* Its last look at the connection may complete r and
			 * find the hang-up behind it, as above. */
			if (rc && !r->done)
				return rc;
		}
		if (!r->done)
			return SM_OK;
	}
	*done = 1;
	if (r->kind == REQ_RECV)
		note_path(c, r);
	account(c, r);
	trace_done(c, r);
	if (size)
		*size = r->kind == REQ_RECV ? r->msg_size : r->size;
	r->kind = REQ_FREE;
	return SM_OK;
}

void tp_close(struct tp_comm *c)
{
	uint64_t limit;
	unsigned stuck = 0;

	if (!c)
		return;
	/* Copies still queued must land before their targets are unmapped,
	 * and their events go back to the engine other connections share.
	 * One deadline for all of them: a copy that has not landed by then
	 * is given up (the engine is stuck), and the peer's buffers stay
	 * mapped, since a copy given up may still run and must not write
	 * into memory that is no longer there. */
	limit = comm_close_deadline(c);
	for (unsigned i = 0; i < c->q_count; i++) {
		struct tp_req *r = c->queue[(c->q_head + i) % TP_MAX_REQUESTS];

		if (c->ops->req_close_wait && c->ops->req_close_wait(c, r, limit))
			stuck++;
	}
	if (stuck) {
		c->keep_mappings = 1;
		sm_warn("closing a %s connection: %u queued copy(ies) failed or did not land "
			"within %g s (none once a copy was overdue); the peer's buffers stay "
			"mapped in this process", c->is_send ? "sending" : "receiving", stuck,
			c->copy_limit_ns / 1e9);
	}
	c->ops->close(c);	/* forgets the peer's mappings, in the helper too */
	smf_engine_put(c->ce);
	c->ce = NULL;
	if (c->fd >= 0)
		close(c->fd);
	free(c);
}

const char *tp_comm_backend(const struct tp_comm *c)
{
	return c->ops->name;
}
