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
 * Lanes.  Under CUDA-graph replay the application thread sits in
 * cuGraphLaunch, waiting for the previous replay to finish, while holding a
 * lock that cuMemcpyAsync and cuEventRecord in the application's context
 * also take, and that replay waits for our copies: a deadlock (4 x H200,
 * cuda-gdb stacks).  So copies go first to a lane in a CUDA context of the
 * engine's own, which does not share that lock.  Memory the driver will not
 * copy from there (cudaMalloc memory of the application's context) goes to
 * a second lane in the application's context.
 *
 * Consecutive copies go to a lane's streams in turn, so a copy's launch
 * cost overlaps the previous copy's transfer; a large copy may be cut into
 * one piece per stream.  Several progress threads (several communicators in
 * one process) share an engine, so each lane's event pool and stream cursor
 * sit under a mutex; no driver call is made while it is held. */
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "smfree.h"
#include "symmem.h"

/* Enough for 32 copies in flight on each of 64 connections of one GPU;
 * beyond that a copy waits for a free event (the caller retries). */
#define EVENT_POOL 2048

/* A synchronous copy that has not landed after this long is an error. */
#define SYNC_COPY_LIMIT_NS (60ull * 1000 * 1000 * 1000)

enum {
	LANE_OWN = 0,		/* the engine's own context */
	LANE_APP = 1,		/* the application's context */
	LANES = 2,
};

struct lane {
	CUcontext ctx;		/* NULL: lane not in use */
	int nstreams;
	CUstream streams[SMF_MAX_STREAMS];
	pthread_mutex_t lock;	/* the pool and the cursor */
	int next_stream;
	int nfree;
	CUevent free_ev[EVENT_POOL];
};

struct smf_engine {
	struct smf_engine *next;	/* in the engine list */
	int refs;			/* under list_lock */
	const struct sm_cuda_api *cu;
	CUcontext key;			/* the application's context */
	CUcontext own;			/* ours, or NULL */
	int device;
	uint64_t split_min;
	int app_fallback_logged;
	struct lane lane[LANES];
};

static pthread_mutex_t list_lock = PTHREAD_MUTEX_INITIALIZER;
static struct smf_engine *engines;

/* Driver calls on a lane's streams and events run with the lane's context
 * current; the caller's context is put back after. */
static CUcontext enter(const struct smf_engine *e, CUcontext ctx)
{
	CUcontext prev = NULL;

	e->cu->ctx_get_current(&prev);
	if (prev != ctx)
		e->cu->ctx_set_current(ctx);
	return prev;
}

static void leave(const struct smf_engine *e, CUcontext ctx, CUcontext prev)
{
	if (prev != ctx)
		e->cu->ctx_set_current(prev);
}

static void lane_destroy(const struct smf_engine *e, struct lane *l)
{
	CUcontext prev;

	if (!l->ctx)
		return;
	prev = enter(e, l->ctx);
	for (int i = 0; i < l->nstreams; i++) {
		e->cu->stream_synchronize(l->streams[i]);
		e->cu->stream_destroy(l->streams[i]);
	}
	for (int i = 0; i < l->nfree; i++)
		e->cu->event_destroy(l->free_ev[i]);
	leave(e, l->ctx, prev);
	pthread_mutex_destroy(&l->lock);
	l->ctx = NULL;
}

static int lane_create(const struct smf_engine *e, struct lane *l, CUcontext ctx, int nstreams)
{
	CUcontext prev;
	CUresult crc = CUDA_SUCCESS;
	int rc = SM_OK;

	pthread_mutex_init(&l->lock, NULL);
	l->ctx = ctx;
	prev = enter(e, ctx);
	while (l->nstreams < nstreams) {
		crc = e->cu->stream_create(&l->streams[l->nstreams], CU_STREAM_NON_BLOCKING);
		if (crc != CUDA_SUCCESS) {
			rc = sm_cuda_fail(crc, "cuStreamCreate for the copy engine");
			goto out;
		}
		l->nstreams++;
	}
	while (l->nfree < EVENT_POOL) {
		crc = e->cu->event_create(&l->free_ev[l->nfree], CU_EVENT_DISABLE_TIMING);
		if (crc != CUDA_SUCCESS) {
			rc = sm_cuda_fail(crc, "cuEventCreate for the copy engine");
			goto out;
		}
		l->nfree++;
	}
out:
	leave(e, ctx, prev);
	return rc;
}

/* Closes come from whichever thread drops the last connection. */
static void engine_destroy(struct smf_engine *e)
{
	for (int i = 0; i < LANES; i++)
		lane_destroy(e, &e->lane[i]);
	if (e->own)
		e->cu->ctx_destroy(e->own);
	free(e);
}

/* A context of our own on the caller's device; costs device memory,
 * which is logged.  cuCtxCreate makes it current: the caller's goes back. */
static int own_context(struct smf_engine *e)
{
	size_t free0 = 0, free1 = 0, total = 0;
	CUresult crc;

	e->cu->mem_get_info(&free0, &total);
	crc = e->cu->ctx_create(&e->own, NULL, 0, 0, (CUdevice)e->device);
	if (crc != CUDA_SUCCESS) {
		e->own = NULL;
		return sm_cuda_fail(crc, "cuCtxCreate on GPU %d for the copy engine", e->device);
	}
	e->cu->mem_get_info(&free1, &total);
	e->cu->ctx_set_current(e->key);
	sm_info("copy engine of GPU %d issues copies from its own CUDA context (%.0f MiB of "
		"device memory)", e->device,
		free0 > free1 ? (double)(free0 - free1) / 1048576.0 : 0.0);
	return SM_OK;
}

static int engine_create(const struct sm_cuda_api *cu, CUcontext ctx, int device,
			 const struct smf_engine_options *opt, struct smf_engine **out)
{
	struct smf_engine *e;
	int rc = SM_OK;

	e = calloc(1, sizeof(*e));
	if (!e)
		return sm_fail(SM_ERR_SYSTEM, "out of memory opening a copy engine");
	e->cu = cu;
	e->key = ctx;
	e->device = device;
	e->split_min = opt->split_min;
	if (opt->own_context) {
		rc = own_context(e);
		if (!rc)
			rc = lane_create(e, &e->lane[LANE_OWN], e->own, opt->nstreams);
		if (rc)
			goto fail;
	}
	rc = lane_create(e, &e->lane[LANE_APP], ctx, opt->nstreams);
	if (rc)
		goto fail;
	*out = e;
	return SM_OK;
fail:
	engine_destroy(e);
	return rc;
}

int smf_engine_get(const struct smf_engine_options *opt, struct smf_engine **out)
{
	const struct sm_cuda_api *cu = sm_cu();
	struct smf_engine *e;
	CUcontext ctx;
	int device, rc;

	*out = NULL;
	if (opt->nstreams < 1 || opt->nstreams > SMF_MAX_STREAMS)
		return sm_fail(SM_ERR_INTERNAL, "copy engine with %d streams", opt->nstreams);
	rc = sm_ctx_enter(0, &device, &ctx);
	if (rc)
		return rc;
	pthread_mutex_lock(&list_lock);
	for (e = engines; e; e = e->next)
		if (e->key == ctx)
			break;
	if (!e) {
		rc = engine_create(cu, ctx, device, opt, &e);
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

/* Takes `n` events and a first stream, or none when the pool is short. */
static int reserve(struct lane *l, int n, CUevent *ev, int *first_stream)
{
	pthread_mutex_lock(&l->lock);
	if (l->nfree < n) {
		pthread_mutex_unlock(&l->lock);
		return 0;
	}
	for (int i = 0; i < n; i++)
		ev[i] = l->free_ev[--l->nfree];
	*first_stream = l->next_stream;
	l->next_stream = (l->next_stream + 1) % l->nstreams;
	pthread_mutex_unlock(&l->lock);
	return 1;
}

static void events_put(struct lane *l, const CUevent *ev, int n)
{
	pthread_mutex_lock(&l->lock);
	for (int i = 0; i < n; i++)
		l->free_ev[l->nfree++] = ev[i];
	pthread_mutex_unlock(&l->lock);
}

/* Queues the pieces of one copy on one lane.  *started = 0 when the lane
 * has too few free events.  A failure leaves nothing queued only for the
 * first piece, which is where the driver rejects memory it cannot reach. */
static int lane_copy(struct smf_engine *e, int li, CUdeviceptr d, CUdeviceptr s, size_t n,
		     int pieces, size_t piece, struct smf_copy *op, int *started, CUresult *first_rc)
{
	struct lane *l = &e->lane[li];
	CUevent ev[SMF_MAX_STREAMS];
	CUresult crc = CUDA_SUCCESS;
	CUcontext prev;
	size_t off = 0;
	int first;

	*first_rc = CUDA_SUCCESS;
	if (!reserve(l, pieces, ev, &first)) {
		*started = 0;
		return SM_OK;
	}
	*started = 1;
	op->lane = li;
	prev = enter(e, l->ctx);
	for (int i = 0; i < pieces; i++) {
		size_t len = n - off < piece ? n - off : piece;
		CUstream st = l->streams[(first + i) % l->nstreams];

		crc = e->cu->memcpy_async(d + off, s + off, len, st);
		if (crc == CUDA_SUCCESS)
			crc = e->cu->event_record(ev[i], st);
		if (crc != CUDA_SUCCESS) {
			if (i == 0)
				*first_rc = crc;
			break;
		}
		memcpy(&op->ev[op->nev++], &ev[i], sizeof(ev[i]));
		off += len;
	}
	leave(e, l->ctx, prev);
	if (crc == CUDA_SUCCESS)
		return SM_OK;
	/* Pieces already queued may still land; their events only go back. */
	events_put(l, ev, pieces);
	op->nev = 0;
	return sm_cuda_fail(crc, "copy of %zu bytes 0x%llx -> 0x%llx", n, (unsigned long long)s,
			    (unsigned long long)d);
}

int smf_copy_start(struct smf_engine *e, void *dst, const void *src, size_t n,
		   struct smf_copy *op, int *started)
{
	CUdeviceptr d = (CUdeviceptr)dst, s = (CUdeviceptr)src;
	int pieces = 1, rc;
	size_t piece;
	CUresult first_rc;

	memset(op, 0, sizeof(*op));
	*started = 1;
	if (n == 0)
		return SM_OK;
	if (e->split_min && n >= e->split_min)
		pieces = e->lane[LANE_APP].nstreams;
	/* Pieces stay multiples of 4 KiB so each copy runs at full width. */
	piece = ((n / (size_t)pieces) + 4095) & ~(size_t)4095;
	pieces = (int)((n + piece - 1) / piece);
	if (e->own) {
		rc = lane_copy(e, LANE_OWN, d, s, n, pieces, piece, op, started, &first_rc);
		if (!rc || first_rc == CUDA_SUCCESS)
			return rc;
		/* Rejected outright: memory of the application's context. */
		if (!e->app_fallback_logged) {
			e->app_fallback_logged = 1;
			sm_info("copy engine of GPU %d: copies of memory its own context cannot reach "
				"(%s) go through the application's context", e->device,
				sm_last_error());
		}
	}
	return lane_copy(e, LANE_APP, d, s, n, pieces, piece, op, started, &first_rc);
}

int smf_copy_test(struct smf_engine *e, struct smf_copy *op, int *done)
{
	struct lane *l = &e->lane[op->lane];
	CUresult rc = CUDA_SUCCESS;
	CUcontext prev;

	*done = 0;
	if (op->nev == 0) {
		*done = 1;
		return SM_OK;
	}
	prev = enter(e, l->ctx);
	while (op->nev > 0) {
		CUevent ev;

		memcpy(&ev, &op->ev[op->nev - 1], sizeof(ev));
		rc = e->cu->event_query(ev);
		if (rc != CUDA_SUCCESS)
			break;
		events_put(l, &ev, 1);
		op->nev--;
	}
	leave(e, l->ctx, prev);
	if (rc == CUDA_ERROR_NOT_READY)
		return SM_OK;
	if (rc != CUDA_SUCCESS)
		return sm_cuda_fail(rc, "copy engine reported a failed copy; cuEventQuery");
	*done = 1;
	return SM_OK;
}

void smf_copy_abandon(struct smf_engine *e, struct smf_copy *op)
{
	struct lane *l = &e->lane[op->lane];

	/* An event re-recorded later simply moves on; until then it may still
	 * fire, which harms nobody. */
	for (int i = 0; i < op->nev; i++) {
		CUevent ev;

		memcpy(&ev, &op->ev[i], sizeof(ev));
		events_put(l, &ev, 1);
	}
	op->nev = 0;
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

int smf_copy_wait(struct smf_engine *e, struct smf_copy *op)
{
	uint64_t limit = now_ns() + SYNC_COPY_LIMIT_NS;
	int done = 0, rc;

	for (;;) {
		rc = smf_copy_test(e, op, &done);
		if (rc || done)
			return rc;
		if (now_ns() > limit) {
			smf_copy_abandon(e, op);
			return sm_fail(SM_ERR_CUDA, "a copy did not land in %.0f s",
				       SYNC_COPY_LIMIT_NS / 1e9);
		}
		sched_yield();
	}
}

int smf_copy_sync(struct smf_engine *e, void *dst, const void *src, size_t n)
{
	uint64_t limit = now_ns() + SYNC_COPY_LIMIT_NS;
	struct smf_copy op;
	int started = 0, rc;

	while (!started) {
		rc = smf_copy_start(e, dst, src, n, &op, &started);
		if (rc)
			return rc;
		if (!started && now_ns() > limit)
			return sm_fail(SM_ERR_CUDA, "no copy-engine event free for %.0f s",
				       SYNC_COPY_LIMIT_NS / 1e9);
		if (!started)
			sched_yield();
	}
	return smf_copy_wait(e, &op);
}
