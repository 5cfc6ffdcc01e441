/* Copies that never touch an SM: cuMemcpyAsync on the plugin's own
 * non-blocking streams, completion seen by polling events from the host.
 *
 * One engine per CUDA context (one per GPU in practice), shared by every
 * connection on it and refcounted.  Its streams and its whole event pool
 * are made when the first connection is set up, on NCCL's service thread:
 * made lazily on the progress thread, cuStreamCreate blocked behind NCCL's
 * own kernel, which was waiting for that very thread (2 x H200, 16
 * channels: every rank hung there).  After setup the data path makes no
 * driver call that allocates.
 *
 * Consecutive copies go to the streams in turn, so a copy's launch cost
 * overlaps the previous copy's transfer; a large copy may be cut into one
 * piece per stream.  Several progress threads (several communicators in
 * one process) share an engine, so the event pool and the stream cursor
 * sit under a mutex; no driver call is made while it is held. */
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "copy_helper.h"
#include "smfree.h"
#include "symmem.h"

/* Enough for 32 copies in flight on each of 64 connections of one GPU;
 * beyond that a copy waits for a free event (the caller retries). */
#define EVENT_POOL 2048

/* A synchronous copy that has not landed after this long is an error. */
#define SYNC_COPY_LIMIT_NS (60ull * 1000 * 1000 * 1000)

struct smf_engine {
	struct smf_engine *next;	/* in the engine list */
	int refs;			/* under list_lock */
	const struct sm_cuda_api *cu;
	CUcontext ctx;
	int nstreams;
	uint64_t split_min;
	CUstream streams[SMF_MAX_STREAMS];
	pthread_mutex_t lock;		/* the pool and the cursor */
	int next_stream;
	int nfree;
	CUevent free_ev[EVENT_POOL];
	struct smf_helper *helper;	/* NULL: every copy runs in this process */
};

static pthread_mutex_t list_lock = PTHREAD_MUTEX_INITIALIZER;
static struct smf_engine *engines;

/* 0 once `s` has no work left, -1 if it still has some at `limit`. */
static int stream_idle_by(struct smf_engine *e, CUstream s, uint64_t limit)
{
	while (e->cu->stream_query(s) == CUDA_ERROR_NOT_READY) {
		if (sm_now_ns() > limit)
			return -1;
		sched_yield();
	}
	return 0;
}

/* Runs `e`'s teardown calls in its own context: closes come from
 * whichever thread drops the last connection. */
static void engine_destroy(struct smf_engine *e)
{
	uint64_t limit = sm_now_ns() + SYNC_COPY_LIMIT_NS;
	CUcontext prev = NULL;

	if (!e)
		return;
	smf_helper_stop(e->helper);
	if (e->ctx) {
		e->cu->ctx_get_current(&prev);
		e->cu->ctx_set_current(e->ctx);
	}
	for (int i = 0; i < e->nstreams; i++) {
		/* Bounded: a copy given up at a close may never finish.
		 * cuStreamDestroy does not wait; the stream goes once its
		 * work is done. */
		if (stream_idle_by(e, e->streams[i], limit))
			sm_warn("copy engine of GPU context %p: stream %d still busy after %.0f s "
				"at teardown; destroyed without waiting", (void *)e->ctx, i,
				SYNC_COPY_LIMIT_NS / 1e9);
		e->cu->stream_destroy(e->streams[i]);
	}
	for (int i = 0; i < e->nfree; i++)
		e->cu->event_destroy(e->free_ev[i]);
	if (e->ctx)
		e->cu->ctx_set_current(prev);
	pthread_mutex_destroy(&e->lock);
	free(e);
}

/* Starts the helper for this context's GPU.  Without one the engine
 * still works, in this process, so a failure is a warning. */
static void helper_start(struct smf_engine *e, const struct smf_engine_options *o)
{
	char pci[32];
	CUdevice dev;
	CUresult crc;
	int rc;

	crc = e->cu->ctx_get_device(&dev);
	if (crc == CUDA_SUCCESS)
		crc = e->cu->device_get_pci_bus_id(pci, sizeof(pci), dev);
	if (crc != CUDA_SUCCESS) {
		rc = sm_cuda_fail(crc, "finding this GPU's PCI bus id");
	} else {
		struct smf_helper_params p = {
			.nstreams = o->nstreams, .depth = o->copy_depth, .merge_max = o->merge_max,
			.batch = o->batch, .phase_ns = o->phase_ns, .all_gpus = o->all_gpus,
			.landing = o->landing,
		};

		uint64_t t0 = sm_now_ns();

		rc = smf_helper_start(o->helper, pci, &p, &e->helper);
		if (!rc) {
			/* The start (a process and its CUDA context) is part of
			 * the first collective's time (bench/results/setup.md). */
			sm_info("copy helper %s (pid %d) drives GPU %s, started in %.0f ms",
				o->helper, (int)smf_helper_pid(e->helper), pci,
				(double)(sm_now_ns() - t0) / 1e6);
			return;
		}
	}
	sm_warn("copy helper not started (%s); copies run in this process, where CUDA-graph "
		"replays queued back to back can deadlock against them", sm_last_error());
}

static int engine_create(const struct sm_cuda_api *cu, CUcontext ctx,
			 const struct smf_engine_options *o, struct smf_engine **out)
{
	int nstreams = o->nstreams;
	struct smf_engine *e;
	CUresult crc;
	int rc = SM_OK;

	e = calloc(1, sizeof(*e));
	if (!e)
		return sm_fail(SM_ERR_SYSTEM, "out of memory opening a copy engine");
	pthread_mutex_init(&e->lock, NULL);
	e->cu = cu;
	e->ctx = ctx;
	e->split_min = o->split_min;
	for (; e->nstreams < nstreams; e->nstreams++) {
		crc = cu->stream_create(&e->streams[e->nstreams], CU_STREAM_NON_BLOCKING);
		if (crc != CUDA_SUCCESS) {
			rc = sm_cuda_fail(crc, "cuStreamCreate");
			goto fail;
		}
	}
	for (; e->nfree < EVENT_POOL; e->nfree++) {
		crc = cu->event_create(&e->free_ev[e->nfree], CU_EVENT_DISABLE_TIMING);
		if (crc != CUDA_SUCCESS) {
			rc = sm_cuda_fail(crc, "cuEventCreate");
			goto fail;
		}
	}
	if (o->helper)
		helper_start(e, o);
	*out = e;
	return SM_OK;
fail:
	engine_destroy(e);
	return rc;
}

int smf_engine_get(const struct smf_engine_options *o, struct smf_engine **out)
{
	const struct sm_cuda_api *cu = sm_cu();
	struct smf_engine *e;
	CUcontext ctx;
	int rc;

	*out = NULL;
	if (o->nstreams < 1 || o->nstreams > SMF_MAX_STREAMS)
		return sm_fail(SM_ERR_INTERNAL, "copy engine with %d streams", o->nstreams);
	rc = sm_ctx_enter(0, NULL, &ctx);
	if (rc)
		return rc;
	pthread_mutex_lock(&list_lock);
	for (e = engines; e; e = e->next)
		if (e->ctx == ctx)
			break;
	if (!e) {
		rc = engine_create(cu, ctx, o, &e);
		if (!rc) {
			e->next = engines;
			engines = e;
		}
	}
	if (!rc) {
		e->refs++;
		*out = e;
	}
	pthread_mutex_unlock(&list_lock);
	return rc;
}

void smf_engine_hold(struct smf_engine *e)
{
	pthread_mutex_lock(&list_lock);
	e->refs++;
	pthread_mutex_unlock(&list_lock);
}

void smf_engine_put(struct smf_engine *e)
{
	struct smf_engine **p;

	if (!e)
		return;
	pthread_mutex_lock(&list_lock);
	if (--e->refs > 0) {
		pthread_mutex_unlock(&list_lock);
		return;
	}
	for (p = &engines; *p; p = &(*p)->next) {
		if (*p == e) {
			*p = e->next;
			break;
		}
	}
	pthread_mutex_unlock(&list_lock);
	engine_destroy(e);
}

int smf_engine_count(void)
{
	int n = 0;

	pthread_mutex_lock(&list_lock);
	for (struct smf_engine *e = engines; e; e = e->next)
		n++;
	pthread_mutex_unlock(&list_lock);
	return n;
}

int smf_engine_helper_pid(const struct smf_engine *e)
{
	return e && e->helper ? (int)smf_helper_pid(e->helper) : 0;
}

int smf_range_add(struct smf_engine *e, int owner_pid, const struct sm_share_info *info, int fd,
		  uint32_t *id)
{
	*id = 0;
	if (!e->helper)
		return SM_OK;
	return smf_helper_add(e->helper, owner_pid, info, fd, id);
}

int smf_range_add_start(struct smf_engine *e, int owner_pid, const struct sm_share_info *info,
			int fd, struct smf_range_req *req, int *posted)
{
	*posted = 0;
	if (!e->helper)
		return sm_fail(SM_ERR_INTERNAL, "no copy helper to map a range");
	return smf_helper_add_post(e->helper, owner_pid, info, fd, &req->ticket, posted);
}

int smf_range_add_test(struct smf_engine *e, struct smf_range_req *req, int *done, uint32_t *id)
{
	return smf_helper_add_test(e->helper, req->ticket, done, id);
}

void smf_range_add_cancel(struct smf_engine *e, struct smf_range_req *req)
{
	if (e && e->helper)
		smf_helper_add_cancel(e->helper, req->ticket);
}

void smf_range_del(struct smf_engine *e, uint32_t id)
{
	if (e && e->helper)
		smf_helper_del(e->helper, id);
}

int smf_copy_start_watched(struct smf_engine *e, uint32_t dst_id, uint64_t dst_off,
			   uint32_t src_id, uint64_t src_off, size_t n,
			   const struct smf_watch *w, struct smf_copy *op, int *started)
{
	int rc;

	memset(op, 0, sizeof(*op));
	*started = 1;
	if (n == 0)
		return SM_OK;
	if (!e->helper || !dst_id || !src_id)
		return sm_fail(SM_ERR_INTERNAL, "copy by mapping name without a helper mapping");
	rc = smf_helper_post_watched(e->helper, dst_id, dst_off, src_id, src_off, n, w, &op->seq,
				     started);
	op->helper = !rc && *started;
	return rc;
}

int smf_copy_start_ranges(struct smf_engine *e, uint32_t dst_id, uint64_t dst_off,
			  uint32_t src_id, uint64_t src_off, size_t n, struct smf_copy *op,
			  int *started)
{
	return smf_copy_start_watched(e, dst_id, dst_off, src_id, src_off, n, NULL, op, started);
}

/* Takes `n` events and a first stream, or none when the pool is short. */
static int reserve(struct smf_engine *e, int n, CUevent *ev, int *first_stream)
{
	pthread_mutex_lock(&e->lock);
	if (e->nfree < n) {
		pthread_mutex_unlock(&e->lock);
		return 0;
	}
	for (int i = 0; i < n; i++)
		ev[i] = e->free_ev[--e->nfree];
	*first_stream = e->next_stream;
	e->next_stream = (e->next_stream + 1) % e->nstreams;
	pthread_mutex_unlock(&e->lock);
	return 1;
}

static void events_put(struct smf_engine *e, const CUevent *ev, int n)
{
	pthread_mutex_lock(&e->lock);
	for (int i = 0; i < n; i++)
		e->free_ev[e->nfree++] = ev[i];
	pthread_mutex_unlock(&e->lock);
}

int smf_copy_start(struct smf_engine *e, void *dst, const void *src, size_t n,
		   struct smf_copy *op, int *started)
{
	CUdeviceptr d = (CUdeviceptr)dst, s = (CUdeviceptr)src;
	CUevent ev[SMF_MAX_STREAMS];
	int pieces = 1, first, rc = SM_OK;
	size_t piece, off = 0;

	memset(op, 0, sizeof(*op));
	*started = 1;
	if (n == 0)
		return SM_OK;
	if (e->split_min && n >= e->split_min)
		pieces = e->nstreams;
	/* Pieces stay multiples of 4 KiB so each copy runs at full width. */
	piece = ((n / (size_t)pieces) + 4095) & ~(size_t)4095;
	pieces = (int)((n + piece - 1) / piece);
	if (!reserve(e, pieces, ev, &first)) {
		*started = 0;
		return SM_OK;
	}
	for (int i = 0; i < pieces; i++) {
		size_t len = n - off < piece ? n - off : piece;
		CUstream st = e->streams[(first + i) % e->nstreams];
		CUresult crc;

		crc = e->cu->memcpy_async(d + off, s + off, len, st);
		if (crc == CUDA_SUCCESS)
			crc = e->cu->event_record(ev[i], st);
		if (crc != CUDA_SUCCESS) {
			rc = sm_cuda_fail(crc, "copy of %zu bytes 0x%llx -> 0x%llx", len,
					  (unsigned long long)(s + off),
					  (unsigned long long)(d + off));
			break;
		}
		memcpy(&op->ev[op->nev++], &ev[i], sizeof(ev[i]));
		off += len;
	}
	if (rc) {
		/* Pieces already queued may still land; their events are
		 * recorded and only go back to the pool. */
		events_put(e, ev, pieces);
		op->nev = 0;
	}
	return rc;
}

int smf_copy_test(struct smf_engine *e, struct smf_copy *op, int *done)
{
	*done = 0;
	if (op->helper) {
		int rc = smf_helper_test(e->helper, op->seq, done);

		if (*done || rc)
			op->helper = 0;	/* its slot is free again */
		return rc;
	}
	while (op->nev > 0) {
		CUevent ev;
		CUresult rc;

		memcpy(&ev, &op->ev[op->nev - 1], sizeof(ev));
		rc = e->cu->event_query(ev);
		if (rc == CUDA_ERROR_NOT_READY)
			return SM_OK;
		if (rc != CUDA_SUCCESS)
			return sm_cuda_fail(rc, "copy engine reported a failed copy; cuEventQuery");
		events_put(e, &ev, 1);
		op->nev--;
	}
	*done = 1;
	return SM_OK;
}

void smf_copy_describe(const struct smf_engine *e, const struct smf_copy *op, char *buf,
		       size_t len)
{
	if (op->helper)
		snprintf(buf, len, "copy helper pid %d, its request %llu %s",
			 (int)smf_helper_pid(e->helper), (unsigned long long)op->seq,
			 smf_helper_state(e->helper, op->seq));
	else if (op->nev)
		snprintf(buf, len, "in-process copy, %d piece(s) not landed", op->nev);
	else
		snprintf(buf, len, "no copy in flight");
}

/* Gives an unfinished copy's events back to the pool.  An event recorded
 * again later simply moves on; until then it may still fire, which harms
 * nobody. */
static void copy_abandon(struct smf_engine *e, struct smf_copy *op)
{
	if (op->helper) {
		smf_helper_abandon(e->helper, op->seq);
		op->helper = 0;
	}
	for (int i = 0; i < op->nev; i++) {
		CUevent ev;

		memcpy(&ev, &op->ev[i], sizeof(ev));
		events_put(e, &ev, 1);
	}
	op->nev = 0;
}

int smf_copy_wait(struct smf_engine *e, struct smf_copy *op)
{
	return smf_copy_wait_until(e, op, sm_now_ns() + SYNC_COPY_LIMIT_NS);
}

int smf_copy_wait_until(struct smf_engine *e, struct smf_copy *op, uint64_t limit)
{
	int done = 0, rc;

	for (;;) {
		rc = smf_copy_test(e, op, &done);
		if (rc) {
			copy_abandon(e, op);	/* the pool is shared: keep it whole */
			return rc;
		}
		if (done)
			return SM_OK;
		if (sm_now_ns() > limit) {
			copy_abandon(e, op);
			return sm_fail(SM_ERR_CUDA, "a copy did not land in time");
		}
		sched_yield();
	}
}

int smf_copy_sync(struct smf_engine *e, void *dst, const void *src, size_t n, uint64_t limit_ns)
{
	uint64_t limit = sm_now_ns() + limit_ns;
	struct smf_copy op;
	int started = 0, rc;

	while (!started) {
		rc = smf_copy_start(e, dst, src, n, &op, &started);
		if (rc)
			return rc;
		if (!started && sm_now_ns() > limit)
			return sm_fail(SM_ERR_CUDA, "no copy-engine event free for %g s",
				       limit_ns / 1e9);
		if (!started)
			sched_yield();
	}
	return smf_copy_wait_until(e, &op, limit);
}
