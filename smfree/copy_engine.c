/* Copies that never touch an SM: cuMemcpyAsync on the connection's own
 * non-blocking streams, completion seen by polling events from the host.
 *
 * Consecutive copies go to the streams in turn, so a copy's launch cost
 * overlaps the previous copy's transfer and the GPU's copy engines share
 * the work; a large copy is cut into one piece per stream. */
#include <stdlib.h>
#include <string.h>

#include "smfree.h"
#include "symmem.h"

#define EVENT_POOL (SMF_MAX_STREAMS * 64)

struct smf_engine {
	const struct sm_cuda_api *cu;
	CUcontext ctx;
	int nstreams;
	int next_stream;
	uint64_t split_min;
	CUstream streams[SMF_MAX_STREAMS];
	CUevent free_ev[EVENT_POOL];
	int nfree;
	int ncreated;
};

int smf_engine_open(int nstreams, uint64_t split_min, struct smf_engine **out)
{
	const struct sm_cuda_api *cu = sm_cu();
	struct smf_engine *e;
	CUresult crc;
	int rc;

	*out = NULL;
	if (nstreams < 1 || nstreams > SMF_MAX_STREAMS)
		return sm_fail(SM_ERR_INTERNAL, "copy engine with %d streams", nstreams);
	e = calloc(1, sizeof(*e));
	if (!e)
		return sm_fail(SM_ERR_SYSTEM, "out of memory opening a copy engine");
	e->cu = cu;
	e->split_min = split_min;
	rc = sm_ctx_enter(0, NULL, &e->ctx);
	if (rc)
		goto fail;
	for (; e->nstreams < nstreams; e->nstreams++) {
		crc = cu->stream_create(&e->streams[e->nstreams], CU_STREAM_NON_BLOCKING);
		if (crc != CUDA_SUCCESS) {
			rc = sm_cuda_fail(crc, "cuStreamCreate");
			goto fail;
		}
	}
	*out = e;
	return SM_OK;
fail:
	smf_engine_close(e);
	return rc;
}

void smf_engine_close(struct smf_engine *e)
{
	CUcontext prev = NULL;

	if (!e)
		return;
	if (e->ctx) {
		/* Closes come from NCCL's service thread; the streams belong to
		 * the context they were made in. */
		e->cu->ctx_get_current(&prev);
		e->cu->ctx_set_current(e->ctx);
	}
	for (int i = 0; i < e->nstreams; i++) {
		e->cu->stream_synchronize(e->streams[i]);
		e->cu->stream_destroy(e->streams[i]);
	}
	for (int i = 0; i < e->nfree; i++)
		e->cu->event_destroy(e->free_ev[i]);
	if (e->ctx)
		e->cu->ctx_set_current(prev);
	free(e);
}

static int event_get(struct smf_engine *e, CUevent *ev)
{
	CUresult rc;

	if (e->nfree > 0) {
		*ev = e->free_ev[--e->nfree];
		return SM_OK;
	}
	if (e->ncreated == EVENT_POOL)
		return sm_fail(SM_ERR_INTERNAL, "more than %d copies in flight", EVENT_POOL);
	rc = e->cu->event_create(ev, CU_EVENT_DISABLE_TIMING);
	if (rc != CUDA_SUCCESS)
		return sm_cuda_fail(rc, "cuEventCreate");
	e->ncreated++;
	return SM_OK;
}

static void event_put(struct smf_engine *e, CUevent ev)
{
	e->free_ev[e->nfree++] = ev;
}

static void release_events(struct smf_engine *e, struct smf_copy *op)
{
	for (int i = 0; i < op->nev; i++) {
		CUevent ev;

		memcpy(&ev, &op->ev[i], sizeof(ev));
		event_put(e, ev);
	}
	op->nev = 0;
}

/* Queues one piece on stream `s` followed by its completion event. */
static int copy_piece(struct smf_engine *e, int s, CUdeviceptr dst, CUdeviceptr src, size_t n,
		      struct smf_copy *op)
{
	CUevent ev;
	CUresult crc;
	int rc;

	rc = event_get(e, &ev);
	if (rc)
		return rc;
	crc = e->cu->memcpy_async(dst, src, n, e->streams[s]);
	if (crc == CUDA_SUCCESS)
		crc = e->cu->event_record(ev, e->streams[s]);
	if (crc != CUDA_SUCCESS) {
		event_put(e, ev);
		return sm_cuda_fail(crc, "copy of %zu bytes 0x%llx -> 0x%llx", n,
				    (unsigned long long)src, (unsigned long long)dst);
	}
	memcpy(&op->ev[op->nev++], &ev, sizeof(ev));
	return SM_OK;
}

int smf_copy_start(struct smf_engine *e, void *dst, const void *src, size_t n,
		   struct smf_copy *op)
{
	CUdeviceptr d = (CUdeviceptr)dst, s = (CUdeviceptr)src;
	int pieces = 1, rc = SM_OK;
	size_t piece, off = 0;

	memset(op, 0, sizeof(*op));
	if (n == 0)
		return SM_OK;
	if (e->split_min && n >= e->split_min)
		pieces = e->nstreams;
	/* Pieces stay multiples of 4 KiB so each copy runs at full width. */
	piece = ((n / (size_t)pieces) + 4095) & ~(size_t)4095;
	op->first_stream = e->next_stream;
	for (int i = 0; i < pieces && off < n; i++) {
		size_t len = n - off < piece ? n - off : piece;
		int st = (e->next_stream + i) % e->nstreams;

		rc = copy_piece(e, st, d + off, s + off, len, op);
		if (rc)
			break;
		off += len;
	}
	e->next_stream = (e->next_stream + 1) % e->nstreams;
	if (rc)
		release_events(e, op);
	return rc;
}

int smf_copy_test(struct smf_engine *e, struct smf_copy *op, int *done)
{
	*done = 0;
	while (op->nev > 0) {
		CUevent ev;
		CUresult rc;

		memcpy(&ev, &op->ev[op->nev - 1], sizeof(ev));
		rc = e->cu->event_query(ev);
		if (rc == CUDA_ERROR_NOT_READY)
			return SM_OK;
		if (rc != CUDA_SUCCESS)
			return sm_cuda_fail(rc, "copy engine reported a failed copy; cuEventQuery");
		event_put(e, ev);
		op->nev--;
	}
	*done = 1;
	return SM_OK;
}

void smf_copy_abandon(struct smf_engine *e, struct smf_copy *op)
{
	/* The streams are synchronised when the engine closes; until then
	 * the events may still fire, so they simply return to the pool. */
	release_events(e, op);
}

int smf_copy_sync(struct smf_engine *e, void *dst, const void *src, size_t n)
{
	CUresult rc;

	rc = e->cu->memcpy_async((CUdeviceptr)dst, (CUdeviceptr)src, n, e->streams[0]);
	if (rc == CUDA_SUCCESS)
		rc = e->cu->stream_synchronize(e->streams[0]);
	if (rc != CUDA_SUCCESS)
		return sm_cuda_fail(rc, "staged copy of %zu bytes", n);
	return SM_OK;
}
