/* The copy helper's engine loop (copyd.h): requests taken from the shared
 * ring, merged and ordered into copy-engine calls (copyd_merge.c), queued
 * on the streams, and ended when their events fire. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "copyd.h"

/* The key copies are scheduled by: the destination GPU's bus place + 1;
 * 0 for this GPU, host memory or unknown. */
static uint32_t dest_key(const struct copyd *d, const struct range *r)
{
	if (d->gpu < 0 || r->gpu < 0 || r->gpu == d->gpu)
		return 0;
	return (uint32_t)r->gpu + 1;
}

/* Which destination goes first at time t.  With four GPUs, engines that
 * each take their copies in the order NCCL posted them write into one GPU
 * at the same time while another gets nothing, and every writer slows to a
 * share of that GPU's links: a probe with each GPU in its own order moved
 * 230 GB/s per GPU, the same copies in step (all to the next GPU, then all
 * to the one after) 360 (bench/results/alltoall-4gpu.md).  The helpers of
 * a host share CLOCK_MONOTONIC, so each takes first the GPU
 * cd_phase_target() names for phase t / phase_ns: every GPU writes to a
 * different one.  When no copy to it waits, the oldest goes (no engine
 * idles for the schedule).
 *
 * The phases count this GPU and the GPUs it has written to, not every GPU
 * the helper sees: a helper started without CUDA_VISIBLE_DEVICES sees the
 * whole host, and a job on part of it would otherwise get phases for GPUs
 * nobody writes to.  The helpers of an alltoall write to the same set, so
 * they agree; while they learn it they disagree for a moment, and the
 * schedule then only reorders, it never holds a copy back. */
static uint32_t phase_at(const struct copyd *d, uint64_t t)
{
	int target;

	if (d->gpu < 0 || !d->phase_ns)
		return 0;
	target = cd_phase_target(d->used, d->gpu, t / d->phase_ns);
	return target < 0 ? 0 : (uint32_t)target + 1;
}

/* Whether this helper's last CD_DEST_WINDOW requests went to at most one
 * other GPU.  Then there is nothing to order (a ring collective: every GPU
 * writes to the next one only), and cutting its copies at phase ends only
 * costs calls: 4-GPU broadcast went 0.91-0.92 -> 0.96 of native at 1 GiB,
 * send/recv 0.83-0.85 -> 0.93 (bench/results/batch.md). */
static int one_destination(const struct copyd *d)
{
	/* order_gpus() keeps ngpus within MAX_GPUS: keys 1..ngpus. */
	return cd_one_destination(d->key_seen, d->ngpus + 1, d->taken, CD_DEST_WINDOW);
}

/* Bytes per ns the engine moves while it has work, as measured so far;
 * a guess below what H200s do one way (about 0.36) until there is data. */
double engine_rate(const struct copyd *d)
{
	if (d->busy_ns < ENGINE_RATE_SETTLE_NS || !d->moved)
		return 0.3;
	return (double)d->moved / (double)d->busy_ns;
}

static void slot_fail(struct cd_slot *s, const char *why)
{
	snprintf(s->err, sizeof(s->err), "%s", why);
	atomic_store_explicit(&s->state, CD_FAILED, memory_order_release);
}

/* The mapping one side of a request names, if [off, off + len) lies
 * inside it; NULL otherwise. */
static struct range *covering(struct copyd *d, uint32_t id, uint64_t off, uint64_t len)
{
	struct range *r = range_find(d, id);

	return r && off <= r->size && len <= r->size - off ? r : NULL;
}

/* Resolves one side of a request to this process's address. */
static int locate(struct copyd *d, uint32_t id, uint64_t off, uint64_t len, CUdeviceptr *p)
{
	struct range *r = covering(d, id, off, len);

	if (!r)
		return -1;
	*p = (r->host ? r->host_dev : (CUdeviceptr)sm_mapping_base(r->map)) + off;
	return 0;
}

/* A request's watch word (copyd_proto.h), as read from its slot. */
struct watch {
	uint32_t id, off, val;
};

/* Copies the request in slot i out of the ring, reading each field once,
 * and returns its message number.  The client can write the slot at any
 * time: the helper checks this copy and uses only it, so a request
 * rewritten after the check cannot send a copy outside its mappings. */
static uint64_t read_request(const struct cd_slot *s, unsigned i, struct cd_pending *w,
			     struct watch *watch, uint64_t *post_ns)
{
	const volatile struct cd_slot *v = s;

	memset(w, 0, sizeof(*w));
	w->slot = i;
	w->src_id = v->src_id;
	w->dst_id = v->dst_id;
	w->src_off = v->src_off;
	w->dst_off = v->dst_off;
	w->len = v->len;
	watch->id = v->watch_id;
	watch->off = v->watch_off;
	watch->val = v->watch_val;
	*post_ns = v->post_ns;
	return v->seq;
}

/* In *out the mapping a watch word lies in; NULL when the request names
 * none or this helper writes none.  -1 when it names one the GPU cannot
 * write to: outside host memory registered here, or not 4-aligned. */
static int watch_range(struct copyd *d, const struct watch *w, struct range **out)
{
	*out = NULL;
	if (!w->id || !d->watching)
		return 0;
	*out = covering(d, w->id, w->off, sizeof(uint32_t));
	if (!*out || !(*out)->host || (*out)->dying || w->off % sizeof(uint32_t))
		return -1;
	return 0;
}

/* Takes every newly posted request, in order, into the waiting copies;
 * returns how many.  `now`: this turn's clock, for the statistics (the
 * loop takes microseconds). */
int take(struct copyd *d, uint64_t now)
{
	int n = 0;

	while (d->tail - d->oldest < CD_SLOTS) {
		unsigned i = d->tail % CD_SLOTS;
		struct cd_slot *s = &d->ring->slot[i];
		struct range *dst, *src, *wr;
		struct cd_pending w;
		struct watch watch;
		uint64_t post_ns;

		if (atomic_load_explicit(&s->state, memory_order_acquire) != CD_POSTED ||
		    read_request(s, i, &w, &watch, &post_ns) != d->tail)
			break;
		d->tail++;
		n++;
		if (post_ns)
			sm_hist_add(&d->ring->stats.take_hist, now > post_ns ? now - post_ns : 0);
		d->posted_at[i] = post_ns;
		dst = covering(d, w.dst_id, w.dst_off, w.len);
		src = covering(d, w.src_id, w.src_off, w.len);
		if (!dst || !src || dst->dying || src->dying) {
			slot_fail(s, "copy names an unknown mapping or runs past one");
			continue;
		}
		if (watch_range(d, &watch, &wr)) {
			slot_fail(s, "watch word outside the host memory mapped here");
			continue;
		}
		src->busy++;
		dst->busy++;
		d->slot_src[i] = src->id;
		d->slot_dst[i] = dst->id;
		d->slot_watch[i] = 0;
		if (wr) {
			wr->busy++;
			d->slot_watch[i] = wr->id;
			d->watch_dev[i] = wr->host_dev + watch.off;
			d->watch_val[i] = watch.val;
		}
		w.dst_key = dest_key(d, dst);	/* <= ngpus <= MAX_GPUS */
		d->key_seen[w.dst_key] = ++d->taken;
		if (w.dst_key)
			d->used |= 1ull << dst->gpu;
		cd_queue_add(&d->queue, &w);
		d->held[i] = 1;
		if (d->queue.n > d->ring->stats.waiting_max)
			d->ring->stats.waiting_max = d->queue.n;
	}
	return n;
}

/* Ends every request of the copy led by slot `lead`; with `keep_ranges`
 * its mappings stay held for good (end_failed()). */
static void finish(struct copyd *d, unsigned lead, CUresult crc, uint64_t now, int keep_ranges)
{
	for (unsigned m = lead; m != CD_SLOTS; m = d->queue.next[m]) {
		struct cd_slot *s = &d->ring->slot[m];

		d->held[m] = 0;
		d->ring->stats.landed_ns += now - d->queued_at[lead];
		if (now - d->queued_at[lead] > d->ring->stats.landed_max_ns)
			d->ring->stats.landed_max_ns = now - d->queued_at[lead];
		sm_hist_add(&d->ring->stats.landed_hist, now - d->queued_at[lead]);
		if (!keep_ranges) {
			range_unhold(d, d->slot_src[m]);
			range_unhold(d, d->slot_dst[m]);
			range_unhold(d, d->slot_watch[m]);	/* 0: none, found by no name */
		}
		if (crc != CUDA_SUCCESS)
			slot_fail(s, sm_last_error());
		else
			atomic_store_explicit(&s->state, CD_DONE, memory_order_release);
	}
}

/* A copy's first source and destination bytes in this process.  take()
 * checked every member, so the whole copy lies inside both mappings. */
static void locate_group(struct copyd *d, const struct cd_group *g, CUdeviceptr *src,
			 CUdeviceptr *dst)
{
	*src = 0;
	*dst = 0;
	locate(d, g->src_id, g->src_off, cd_group_src_span(g), src);
	locate(d, g->dst_id, g->dst_off, cd_group_dst_span(g), dst);
}

/* A copy of back-to-back bytes from host memory short enough to wait for
 * the GPU's time slice as a plain copy (CD_SMALL_HOST). */
static int small_from_host(struct copyd *d, const struct cd_group *g)
{
	const struct range *src, *dst;

	/* Most copies are long: they cost no range lookup here. */
	if (g->len >= CD_SMALL_HOST || (g->width && g->members > 1) || !cd_small_rows(g->len))
		return 0;
	src = range_find(d, g->src_id);
	dst = range_find(d, g->dst_id);
	return src && src->in_host && dst && !dst->in_host;
}

static CUresult copy_2d(struct copyd *d, CUdeviceptr dst, uint64_t dpitch, CUdeviceptr src,
			uint64_t spitch, uint64_t width, uint64_t rows, CUstream st)
{
	CUDA_MEMCPY2D c;

	memset(&c, 0, sizeof(c));
	/* Unified addressing: the driver tells GPU memory from the mapped
	 * host staging it also copies from. */
	c.srcMemoryType = CU_MEMORYTYPE_UNIFIED;
	c.srcDevice = src;
	c.srcPitch = spitch;
	c.dstMemoryType = CU_MEMORYTYPE_UNIFIED;
	c.dstDevice = dst;
	c.dstPitch = dpitch;
	c.WidthInBytes = width;
	c.Height = rows;
	return d->cu->memcpy_2d_async(&c, st);
}

/* Queues a copy small_from_host() chose as a 2D copy of equal rows. */
static CUresult queue_small(struct copyd *d, const struct cd_group *g, CUstream st)
{
	uint64_t rows = cd_small_rows(g->len), width = g->len / rows;
	CUdeviceptr src, dst;

	locate_group(d, g, &src, &dst);
	d->ring->stats.small_2d++;
	return copy_2d(d, dst, width, src, width, width, rows, st);
}

/* Queues one copy: a plain one for back-to-back members, a 2D one for
 * evenly spaced rows or a short copy from host memory. */
static CUresult queue_copy(struct copyd *d, const struct cd_group *g, CUstream st)
{
	CUdeviceptr src, dst;

	if (small_from_host(d, g))
		return queue_small(d, g, st);
	locate_group(d, g, &src, &dst);
	if (!g->width || g->members == 1)
		return d->cu->memcpy_async(dst, src, g->len, st);
	d->ring->stats.strided++;
	return copy_2d(d, dst, g->dpitch, src, g->spitch, g->width, (uint64_t)g->members, st);
}

/* Queues n > 1 copies as one batch call, 2D ones as their rows.  The
 * copies of a call run in any order: they never overlap (NCCL's steps in
 * flight are distinct bytes).  *queued is set once some of them are on
 * the stream (a short copy from host memory goes ahead on its own), which
 * a failure later in the call does not take back. */
static CUresult queue_batch(struct copyd *d, const struct cd_group *g, int n, CUstream st,
			    int *queued)
{
	CUdeviceptr src[CD_BATCH_MAX], dst[CD_BATCH_MAX];
	size_t len[CD_BATCH_MAX], first = 0;
	CUmemcpyAttributes attr;
	size_t count = 0;

	for (int i = 0; i < n; i++)
		count += cd_group_copies(&g[i]);
	if (count > CD_BATCH_MAX)
		return CUDA_ERROR_INVALID_VALUE;	/* cd_queue_take_batch keeps to it */
	count = 0;
	for (int i = 0; i < n; i++) {
		CUdeviceptr s, t;
		unsigned rows = cd_group_copies(&g[i]);
		CUresult crc;

		/* In a batch call it would wait for the time slice too; on the
		 * same stream it is still covered by the call's event. */
		if (small_from_host(d, &g[i])) {
			crc = queue_small(d, &g[i], st);
			if (crc != CUDA_SUCCESS)
				return crc;
			*queued = 1;
			continue;
		}

		locate_group(d, &g[i], &s, &t);
		for (unsigned r = 0; r < rows; r++) {
			src[count] = s + r * g[i].spitch;
			dst[count] = t + r * g[i].dpitch;
			len[count] = g[i].width ? g[i].width : g[i].len;
			count++;
		}
	}
	if (!count)
		return CUDA_SUCCESS;
	memset(&attr, 0, sizeof(attr));
	attr.srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_STREAM;
	d->ring->stats.batches++;
	d->ring->stats.batched += count;
	return d->cu->memcpy_batch_async(dst, src, len, count, &attr, &first, 1, st);
}

/* 1 once nothing queued on stream `st` runs any more; 0 if it still does
 * after FAILED_DRAIN_NS, or the stream reports an error instead (its work
 * may or may not have stopped). */
static int stream_drained(struct copyd *d, CUstream st)
{
	uint64_t limit = sm_now_ns() + FAILED_DRAIN_NS;
	CUresult crc;

	while ((crc = d->cu->stream_query(st)) == CUDA_ERROR_NOT_READY) {
		if (sm_now_ns() > limit)
			return 0;
		usleep(100);
	}
	return crc == CUDA_SUCCESS;
}

/* Ends the requests of a call that failed (sm_last_error() says how).
 * With `on_stream`, part of it may be queued on stream `st` all the same:
 * short copies sent ahead of a batch call that failed, or a copy whose
 * event could not be recorded.  Nothing would ever wait for that work
 * (no event, no place in fifo[]), so the requests end only once the
 * stream ran it: else the client reuses their buffers, and finish() frees
 * dying ranges (range_del()), while the copy still moves bytes.  A stream
 * still busy after the bound leaves the requests failed and their ranges
 * held for good: mappings kept to the end of the process beat a copy
 * faulting on an unmapped one. */
static void end_failed(struct copyd *d, unsigned lead, CUresult crc, int st, int on_stream)
{
	char why[256];
	int keep = 0;

	if (on_stream && !stream_drained(d, d->stream[st])) {
		/* First: the slot's message has room for 80 bytes. */
		snprintf(why, sizeof(why), "%s", sm_last_error());
		sm_fail(SM_ERR_CUDA, "still queued after %.0f s, mappings kept: %s",
			(double)FAILED_DRAIN_NS / 1e9, why);
		keep = 1;
	}
	finish(d, lead, crc, sm_now_ns(), keep);
}

/* When the copy queued now will start, and which destination goes first
 * then.  The streams hold up to depth copies each (tens of MiB), so a copy
 * chosen by the phase of the moment it is queued would run in a later
 * phase, and helpers with more queued would run out of step with the
 * others.  *max_len: the bytes the call may carry (cd_call_limit): what
 * fits in the rest of that phase, so a copy does not run on into the next
 * one, within the merge size and the phases' call size. */
static uint32_t plan(const struct copyd *d, uint64_t *max_len)
{
	double rate = engine_rate(d);
	uint64_t now = sm_now_ns();
	uint64_t start = now + (uint64_t)((double)d->inflight_bytes / rate);
	uint32_t key = one_destination(d) ? 0 : phase_at(d, start);
	uint64_t room = UINT64_MAX;

	if (key)
		room = (uint64_t)(rate * (double)(d->phase_ns - start % d->phase_ns));
	*max_len = cd_call_limit(key, room, d->queue.merge_max);
	return key;
}

/* One 32-bit stream write in a batch of memory operations. */
static void op_write(CUstreamBatchMemOpParams *o, CUdeviceptr at, uint32_t v)
{
	memset(o, 0, sizeof(*o));
	o->writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_32;
	o->writeValue.address = at;
	o->writeValue.value = v;
	o->writeValue.flags = CU_STREAM_WRITE_VALUE_DEFAULT;
}

#define WRITES_PER_CALL 64

/* One batch call; a refusal stops the watch words for good. */
static int write_batch(struct copyd *d, int st, CUstreamBatchMemOpParams *op, unsigned n)
{
	if (d->cu->stream_batch_mem_op(d->stream[st], n, op, 0) == CUDA_SUCCESS)
		return 0;
	d->watching = 0;
	d->ring->stats.watch_refused = 1;
	return -1;
}

/* The watch words of the copy led by `lead`, then its landing word
 * (ticket t), in batches of memory operations on stream `st`: one call
 * for up to WRITES_PER_CALL - 1 watched requests.  Each write has the
 * default memory barrier, so it follows the copy's bytes.  A driver that
 * refuses a batch gets no more: the watch words are an extra, so the
 * helper stops writing them (receivers then wait for their senders) and
 * writes the landing word alone. */
static CUresult write_words(struct copyd *d, unsigned lead, int st, uint32_t t)
{
	CUdeviceptr landed = d->landed_dev + (CUdeviceptr)st * 4;
	CUstreamBatchMemOpParams op[WRITES_PER_CALL];
	unsigned n = 0;

	for (unsigned m = lead; m != CD_SLOTS && d->watching; m = d->queue.next[m]) {
		if (!d->slot_watch[m])
			continue;
		if (n == WRITES_PER_CALL - 1) {
			if (write_batch(d, st, op, n))
				break;
			n = 0;
		}
		op_write(&op[n++], d->watch_dev[m], d->watch_val[m]);
	}
	if (n && d->watching) {
		op_write(&op[n++], landed, t);
		if (!write_batch(d, st, op, n))
			return CUDA_SUCCESS;
	}
	return d->cu->stream_write_value32(d->stream[st], landed, t, CU_STREAM_WRITE_VALUE_DEFAULT);
}

/* What tells that the copy just queued on stream `st` landed: the
 * call's ticket written into landed[st] after it (with its requests'
 * watch words), or its lead's event. */
static CUresult mark_landing(struct copyd *d, unsigned lead, int st, const char **call)
{
	uint32_t t;
	CUresult crc;

	if (!d->landing) {
		*call = "cuEventRecord after a copy";
		return d->cu->event_record(d->ev[lead], d->stream[st]);
	}
	*call = "cuStreamWriteValue32 after a copy";
	t = d->ticket[st] + 1;
	if (t == 0)
		t = 1;	/* 0 is the word's value before any write */
	crc = write_words(d, lead, st, t);
	if (crc != CUDA_SUCCESS)
		return crc;
	d->ticket[st] = t;
	d->lead_ticket[lead] = t;
	/* The client may now watch the word itself (copy_helper.c). */
	for (unsigned m = lead; m != CD_SLOTS; m = d->queue.next[m]) {
		struct cd_slot *s = &d->ring->slot[m];

		s->stream = (uint32_t)st;
		s->ticket = t;
		atomic_store_explicit(&s->state, CD_QUEUED, memory_order_release);
	}
	return CUDA_SUCCESS;
}

/* Queues waiting copies on streams with room: per call the oldest to the
 * destination of the phase it will run in (else the oldest), with more
 * copies in the same batch call while they fit the call's limits.  Only
 * `depth` calls wait on a stream, so while the engine is busy the rest
 * wait here, where later requests can still join them.  Returns how many
 * calls it queued. */
int issue(struct copyd *d)
{
	struct cd_group g[CD_BATCH_MAX];
	uint64_t max_len, bytes;
	uint32_t key;
	int queued = 0, n, members;

	while (d->queue.n && d->fifo_n[d->next_stream] < d->depth) {
		int st = d->next_stream, on_stream = 0;
		const char *call;
		unsigned lead;
		uint64_t t0, t1;
		CUresult crc;

		key = plan(d, &max_len);
		n = cd_queue_take_batch(&d->queue, key, max_len, d->batch, g);
		lead = g[0].lead;
		d->next_stream = (st + 1) % d->nstreams;
		t0 = sm_now_ns();
		crc = n == 1 ? queue_copy(d, &g[0], d->stream[st]) :
		      queue_batch(d, g, n, d->stream[st], &on_stream);
		t1 = sm_now_ns();
		call = n > 1 ? "cuMemcpyBatchAsync" :
		       g[0].width && g[0].members > 1 ? "cuMemcpy2DAsync" : "cuMemcpyAsync";
		if (crc == CUDA_SUCCESS) {
			on_stream = 1;
			crc = mark_landing(d, lead, st, &call);
		}
		d->queued_at[lead] = sm_now_ns();
		d->ring->stats.copy_call_ns += t1 - t0;
		d->ring->stats.event_call_ns += d->queued_at[lead] - t1;
		if (d->queued_at[lead] - t0 > d->ring->stats.call_max_ns)
			d->ring->stats.call_max_ns = d->queued_at[lead] - t0;
		bytes = 0;
		members = 0;
		for (int i = 0; i < n; i++) {
			bytes += g[i].len;
			members += g[i].members;
		}
		if (crc != CUDA_SUCCESS) {
			sm_cuda_fail(crc, "%s of %llu bytes", call, (unsigned long long)bytes);
			end_failed(d, lead, crc, st, on_stream);
			continue;
		}
		for (unsigned m = lead; m != CD_SLOTS; m = d->queue.next[m]) {
			uint64_t posted = d->posted_at[m];

			if (!posted || posted > d->queued_at[lead])
				continue;	/* a clock it got wrong: only a statistic */
			d->ring->stats.queue_ns += d->queued_at[lead] - posted;
			sm_hist_add(&d->ring->stats.queue_hist, d->queued_at[lead] - posted);
		}
		d->fifo[st][(d->fifo_head[st] + d->fifo_n[st]) % CD_SLOTS] = lead;
		d->fifo_n[st]++;
		d->copy_len[lead] = bytes;
		d->inflight_bytes += bytes;
		d->moved += bytes;
		d->ring->stats.copies += (uint64_t)members;
		d->ring->stats.bytes += bytes;
		d->ring->stats.issued++;
		if (key) {
			d->ring->stats.phased_bytes += bytes;
			for (int i = 0; i < n; i++)
				if (g[i].dst_key == key)
					d->ring->stats.in_phase_bytes += g[i].len;
		}
		queued++;
	}
	return queued;
}

/* Whether stream st's oldest copy (led by `lead`) landed, as an event
 * query would answer: its ticket in landed[st] is the answer, read from
 * host memory.  A failed copy writes no ticket, so a copy long unlanded
 * has its stream asked now and then; an idle stream has run everything
 * queued on it, the write too. */
static CUresult landed(struct copyd *d, int st, unsigned lead, uint64_t now)
{
	uint32_t seen = atomic_load_explicit(&d->ring->landed[st], memory_order_acquire);

	if ((int32_t)(seen - d->lead_ticket[lead]) >= 0)
		return CUDA_SUCCESS;
	if (now - d->queued_at[lead] < STALL_QUERY_NS || now < d->next_query[st])
		return CUDA_ERROR_NOT_READY;
	d->next_query[st] = now + STALL_QUERY_NS;
	return d->cu->stream_query(d->stream[st]);
}

/* Ends the requests whose copies landed; a stream's copies land in order,
 * so only the oldest of each is asked about.  Returns how many copies are
 * still queued. */
int complete(struct copyd *d, int *ended)
{
	uint64_t now = sm_now_ns();
	int inflight = 0;

	for (int st = 0; st < d->nstreams; st++) {
		while (d->fifo_n[st] > 0) {
			unsigned lead = d->fifo[st][d->fifo_head[st]];
			CUresult crc = d->landing ? landed(d, st, lead, now) :
				       d->cu->event_query(d->ev[lead]);

			if (crc == CUDA_ERROR_NOT_READY)
				break;
			if (crc != CUDA_SUCCESS)
				sm_cuda_fail(crc, "the copy engine reported a failed copy");
			finish(d, lead, crc, now, 0);
			(*ended)++;
			d->inflight_bytes -= d->copy_len[lead];
			d->fifo_head[st] = (d->fifo_head[st] + 1) % CD_SLOTS;
			d->fifo_n[st]--;
		}
		inflight += d->fifo_n[st];
	}
	while (d->oldest < d->tail && !d->held[d->oldest % CD_SLOTS])
		d->oldest++;
	return inflight;
}
