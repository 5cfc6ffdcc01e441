/* The same-host data path: a byte ring in a shared memfd segment.
 *
 * The sender copies message bytes into the ring and the receiver copies
 * them out, chunk by chunk, so both copies overlap.  Messages follow each
 * other in the ring in posting order; each side advances only its own
 * counter, so no lock is needed (single producer, single consumer).  A
 * receive into an exported GPU registration skips the ring: the sender's
 * copy engine writes it in place. */
#include <stdio.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

#include "shm.h"

/* Through the helper from host staging: for host buffers it cannot map.
 * *started = 0 with *stage_end = 0: no staging, copy in this process. */
static int staged_copy(struct shm_comm *s, struct remote_alloc *ra, uint64_t offset,
		       const void *data, size_t size, struct smf_copy *copy, int *started,
		       uint64_t *stage_end)
{
	uint64_t before = s->hs_head, off = 0;
	struct smf_watch w;
	int rc;

	*started = 0;
	rc = stage_put(s, data, size, &off, stage_end);
	if (rc || !*stage_end)
		return rc;
	rc = smf_copy_start_watched(s->comm.ce, ra->hid, offset, s->hs_id, off, size,
				    watch_for(s, s->comm.posted, &w), copy, started);
	if (rc || !*started) {
		stage_unput(s, *stage_end, before);
		*stage_end = 0;
	}
	return rc;
}

/* Starts the copy of a message into the receiver's exported GPU buffer:
 * through the copy helper when it knows both buffers (or the source is
 * host memory it can read from staging), else in this process.  *started
 * = 0 when no copy slot or staging is free, or when the peer's buffer is
 * still being set up (*state says which): NCCL retries the send.  Setup
 * (reading the announcement, mapping the buffer here or in the helper,
 * opening host staging) is asked of a progress step, never done here.
 *
 * A receive that names a registration still unknown once the socket was
 * read can never resolve: the receiver writes the announcement whole
 * (announce_recv_ready) before it publishes the first receive that names it,
 * and an AF_UNIX send is in the reader's queue when it returns.
 * Waiting would hang NCCL; the connection fails instead. */
static int direct_copy(struct shm_comm *s, unsigned slot, uint32_t id, const void *data,
		       size_t size, const struct tp_region *treg, struct smf_copy *copy,
		       int *started, uint64_t *stage_end, enum remote_state *state)
{
	const struct shm_region *reg = treg ? shm_region_of(treg) : NULL;
	struct tp_comm *c = &s->comm;
	uint64_t offset = s->ctrl->recv_offset[slot];
	struct remote_alloc *ra;
	int rc, later;

	*started = 0;
	*stage_end = 0;
	*state = REMOTE_READY;
	rc = remote_lookup(s, id, &ra, &later);
	if (rc || later) {
		*state = REMOTE_ASK;
		return rc;
	}
	if (!ra)
		return comm_fail(c, SM_ERR_REMOTE, "the peer's receive names its registration %u, "
				 "which it never announced or already withdrew", id);
	if (offset > ra->info.alloc_size || size > ra->info.alloc_size - offset)
		return comm_fail(c, SM_ERR_REMOTE, "receive at offset %llu of a %llu-byte peer "
				 "allocation cannot hold %zu bytes", (unsigned long long)offset,
				 (unsigned long long)ra->info.alloc_size, size);
	/* Host to host: the CPU's copy through the ring is faster than a
	 * copy engine's, and needs no mapping of the peer's buffer. */
	if (ra->host && (!reg || reg->reg.mem == TP_MEM_HOST)) {
		*state = REMOTE_RING;
		return SM_OK;
	}
	rc = comm_engine(c);
	if (rc)
		return rc;
	if (reg && (reg->own.hid || reg->reg.mem == TP_MEM_HOST)) {
		*state = remote_helper_state(s, ra);
		if (*state)
			return SM_OK;
	}
	if (reg && reg->own.hid && ra->hid) {
		struct smf_watch w;

		rc = smf_copy_start_watched(c->ce, ra->hid, offset, reg->own.hid,
					    reg->own.offset + ((uintptr_t)data - reg->reg.base), size,
					    watch_for(s, c->posted, &w), copy, started);
		return rc ? comm_fail(c, rc, "%s", sm_last_error()) : SM_OK;
	}
	if (reg && reg->reg.mem == TP_MEM_HOST && ra->hid && size + 64 <= s->ring_size) {
		if (!s->hs_buf && !s->stage_tried) {
			s->want_stage = 1;
			s->setup_wanted = 1;
			c->step_wanted = 1;
			*state = REMOTE_ASK;
			return SM_OK;
		}
		rc = staged_copy(s, ra, offset, data, size, copy, started, stage_end);
		if (rc)
			return comm_fail(c, rc, "%s", sm_last_error());
		if (*started || s->hs_buf)
			return SM_OK;	/* staged, or staging full: retry */
	}
	*state = remote_map_state(s, ra);
	if (*state)
		return SM_OK;
	rc = smf_copy_start(c->ce, sm_mapping_base(ra->map) + offset, data, size, copy, started);
	return rc ? comm_fail(c, rc, "%s", sm_last_error()) : SM_OK;
}

/* A copy start refused for want of a free copy slot or staging room:
 * refused for the whole copy limit, the send fails (comm_copy_overdue()
 * starts the clock again after a gap in NCCL's tries). */
static int start_refused(struct tp_comm *c, size_t size)
{
	if (!c->start_try_ns)
		c->start_try_ns = sm_now_ns();
	return comm_copy_overdue(c, c->start_try_ns, size, "into the peer's buffer, waiting for "
				 "a free copy slot or staging room,");
}

int shm_isend(struct tp_comm *c, struct tp_req **out, const void *data, size_t size,
		     const struct tp_region *reg)
{
	struct shm_comm *s = shm_of(c);
	struct shm_ctrl *ctrl = s->ctrl;
	unsigned slot = c->posted % TP_MAX_REQUESTS;
	struct smf_copy copy;
	uint32_t region;
	int direct = 0, ring = 0;
	uint64_t capacity, stage_end = 0;
	struct tp_req *r;
	int rc;

	/* Announcements waiting: read by the step tp_isend runs, so a
	 * receiver waiting for room on the socket goes on (a load here). */
	if (atomic_load_explicit(&ctrl->announced, memory_order_acquire) != s->ann_read)
		c->step_wanted = 1;
	if (atomic_load_explicit(&ctrl->recv_posted, memory_order_acquire) <= c->posted)
		return SM_OK;		/* no receive posted yet: NCCL retries */
	capacity = ctrl->recv_size[slot];
	if (size > capacity) {
		/* Publish the size anyway so the receiver fails too, rather than
		 * waiting for bytes that will never come. */
		ctrl->send_size[slot] = size;
		atomic_store_explicit(&ctrl->send_posted, c->posted + 1, memory_order_release);
		return comm_fail(c, SM_ERR_USAGE,
				 "send of %zu bytes into a posted receive of %llu bytes (message %llu)",
				 size, (unsigned long long)capacity, (unsigned long long)c->posted);
	}
	/* Read once: the peer can write the header. */
	region = ctrl->recv_region[slot];
	if (region != 0) {
		enum remote_state state;
		int started;

		rc = direct_copy(s, slot, region, data, size, reg, &copy, &started, &stage_end,
				 &state);
		/* tp_isend runs the step asked for: it reads the announcement,
		 * asks the helper, or collects its answer (the helper's request
		 * time bounds the wait for it). */
		if (rc || state == REMOTE_ASK || state == REMOTE_WAIT)
			return rc;
		if (state == REMOTE_RING) {
			ring = 1;
		} else if (!started) {
			/* No copy slot or staging room free: NCCL retries. */
			return start_refused(c, size);
		} else {
			c->start_try_ns = 0;
			direct = 1;
		}
	}
	r = comm_req_alloc(c, REQ_SEND);	/* tp_isend checked there is room */
	r->buf = (uint8_t *)data;
	r->size = size;
	if (direct) {
		struct shm_req *sq = shm_req_of(r);

		sq->direct = 1;
		sq->region = region;
		sq->copy = copy;
		sq->stage_end = stage_end;
		sq->by_helper = copy.helper || stage_end;
	}
	ctrl->send_size[slot] = size;
	ctrl->send_ring[slot] = (uint8_t)ring;
	c->posted++;
	atomic_store_explicit(&ctrl->send_posted, c->posted, memory_order_release);
	*out = r;
	return SM_OK;
}

int shm_irecv(struct tp_comm *c, struct tp_req *r, const struct tp_region *treg)
{
	const struct shm_region *reg = treg ? shm_region_of(treg) : NULL;
	struct shm_ctrl *ctrl = shm_of(c)->ctrl;
	unsigned slot = r->seq % TP_MAX_REQUESTS;

	ctrl->recv_size[slot] = r->size;
	ctrl->recv_region[slot] = 0;
	if (reg && reg->id) {
		ctrl->recv_region[slot] = reg->id;
		ctrl->recv_offset[slot] = reg->own.offset + ((uintptr_t)r->buf - reg->reg.base);
		shm_req_of(r)->direct = 1;
		if (reg->shadow)
			shadow_recv_post(r, reg);
	}
	atomic_store_explicit(&ctrl->recv_posted, c->posted, memory_order_release);
	return SM_OK;
}

/* Copies with plain 16-byte vector moves.  glibc's memcpy picks `rep movsb`
 * for sizes between about 2 KiB and the L2 size, and on the AMD EPYC hosts
 * measured here that ran at 1.6 GB/s when the source lines sit dirty in the
 * other process's cache (the ring's normal state), against 20+ GB/s for
 * this loop; see bench/results/host-memory.md.  From 512 KiB on glibc
 * switches to its vector loop, which beats this one out of cache. */
#define LARGE_COPY (512 * 1024)
static void copy_bytes(uint8_t *dst, const uint8_t *src, uint64_t n)
{
#ifdef __SSE2__
	uint64_t i = 0;

	if (n >= LARGE_COPY) {
		memcpy(dst, src, n);	/* glibc's large-copy path is the fast one */
		return;
	}
	for (; i + 64 <= n; i += 64) {
		__m128i a = _mm_loadu_si128((const __m128i *)(src + i));
		__m128i b = _mm_loadu_si128((const __m128i *)(src + i + 16));
		__m128i c = _mm_loadu_si128((const __m128i *)(src + i + 32));
		__m128i d = _mm_loadu_si128((const __m128i *)(src + i + 48));

		_mm_storeu_si128((__m128i *)(dst + i), a);
		_mm_storeu_si128((__m128i *)(dst + i + 16), b);
		_mm_storeu_si128((__m128i *)(dst + i + 32), c);
		_mm_storeu_si128((__m128i *)(dst + i + 48), d);
	}
	memcpy(dst + i, src + i, n - i);
#else
	memcpy(dst, src, n);
#endif
}

/* One piece of a ring copy.  GPU memory on the linear side (a GPU buffer
 * whose peer is host memory) is moved with a synchronous driver copy. */
static int copy_piece(struct tp_comm *c, uint8_t *dst, const uint8_t *src, uint64_t n,
		      int buf_dev)
{
	int rc;

	if (n == 0)
		return SM_OK;
	if (!buf_dev) {
		copy_bytes(dst, src, n);
		return SM_OK;
	}
	rc = comm_engine(c);
	if (!rc)
		rc = smf_copy_sync(c->ce, dst, src, n, c->copy_limit_ns);
	return rc ? comm_fail(c, rc, "%s", sm_last_error()) : SM_OK;
}

/* Copies n bytes between a linear buffer and the ring at stream offset pos,
 * in two pieces where the ring wraps. */
static int ring_copy(struct shm_comm *s, uint64_t pos, uint8_t *buf, uint64_t n, int to_ring,
		     int buf_dev)
{
	struct tp_comm *c = &s->comm;
	uint64_t off = pos % s->ring_size;
	uint64_t first = min_u64(n, s->ring_size - off);
	int rc;

	if (to_ring) {
		rc = copy_piece(c, s->ring + off, buf, first, buf_dev);
		return rc ? rc : copy_piece(c, s->ring, buf + first, n - first, buf_dev);
	}
	rc = copy_piece(c, buf, s->ring + off, first, buf_dev);
	return rc ? rc : copy_piece(c, buf + first, s->ring, n - first, buf_dev);
}

/* One call moves at most one ring's worth of bytes, so a single large
 * message cannot keep NCCL's progress thread from its other connections. */
static int shm_progress_send(struct shm_comm *s, int *progressed)
{
	struct tp_comm *c = &s->comm;
	struct shm_ctrl *ctrl = s->ctrl;
	uint64_t budget = s->ring_size;
	struct tp_req *r;
	int rc = remote_setup(s, progressed);

	if (rc)
		return rc;
	while ((r = comm_head(c)) != NULL) {
		struct shm_req *sq = shm_req_of(r);
		uint64_t used, n;
		int landed;

		if (sq->direct) {
			rc = smf_copy_test(c->ce, &sq->copy, &landed);
			if (rc)
				return comm_fail(c, rc, "%s", sm_last_error());
			if (!landed) {
				rc = comm_copy_overdue(c, r->t_post, r->size, "into the peer's buffer");
				if (rc)
					return rc;
				break;
			}
			r->moved = r->size;
			stage_done(s, sq->stage_end);
			r->t_landed = sm_now_ns();
			ctrl->land_ns[r->seq % TP_MAX_REQUESTS] = r->t_landed;
			sm_hist_add(&c->stats.stage[TP_STAGE_COPY], r->t_landed - r->t_post);
		}
		if (r->moved == r->size) {
			r->done = 1;
			atomic_store_explicit(&ctrl->send_done, r->seq + 1, memory_order_release);
			comm_pop(c);
			if (sq->direct)
				remote_landed(s, sq->region);
			*progressed = 1;
			continue;
		}
		used = s->data_pos - atomic_load_explicit(&ctrl->data_read, memory_order_acquire);
		if (used > s->ring_size)
			return comm_fail(c, SM_ERR_REMOTE, "peer corrupted the ring counters");
		n = min_u64(min_u64(s->ring_size - used, r->size - r->moved), min_u64(s->chunk, budget));
		if (n == 0)
			break;
		rc = ring_copy(s, s->data_pos, r->buf + r->moved, n, 1, r->src_dev);
		if (rc)
			return rc;
		r->moved += n;
		s->data_pos += n;
		budget -= n;
		atomic_store_explicit(&ctrl->data_written, s->data_pos, memory_order_release);
		*progressed = 1;
	}
	return SM_OK;
}

/* The time from the sender seeing message r land to this side seeing it
 * (the peer wrote land_ns before send_done; a clock it got wrong is
 * only a statistic, so it is clamped, not trusted). */
static void note_landed(struct shm_comm *s, struct tp_req *r)
{
	struct tp_comm *c = &s->comm;
	uint64_t now = sm_now_ns(), at = s->ctrl->land_ns[r->seq % TP_MAX_REQUESTS];

	sm_hist_add(&c->stats.stage[TP_STAGE_NOTICE], at && at <= now ? now - at : 0);
	r->t_landed = at;
	r->t_seen = now;
	shm_req_of(r)->landed_seen = 1;
}

/* The same when the watch word told first: the copy landed at most now,
 * the sender has not seen it yet. */
static void note_watched(struct shm_comm *s, struct tp_req *r)
{
	struct tp_comm *c = &s->comm;

	sm_hist_add(&c->stats.stage[TP_STAGE_NOTICE], 0);
	r->t_landed = r->t_seen = sm_now_ns();
	c->stats.watched++;
	shm_req_of(r)->landed_seen = 1;
}

static int shm_progress_recv(struct shm_comm *s, int *progressed)
{
	struct tp_comm *c = &s->comm;
	struct shm_ctrl *ctrl = s->ctrl;
	uint64_t budget = s->ring_size;
	struct tp_req *r;

	announce_push_backlog(s);
	while ((r = comm_head(c)) != NULL) {
		struct shm_req *sq = shm_req_of(r);
		uint64_t avail, n;
		int rc;

		if (!r->have_size) {
			if (atomic_load_explicit(&ctrl->send_posted, memory_order_acquire) <= r->seq)
				break;
			rc = comm_recv_size(c, r, ctrl->send_size[r->seq % TP_MAX_REQUESTS]);
			if (rc)
				return rc;
			/* The sender chose the ring for this one (host to host). */
			if (ctrl->send_ring[r->seq % TP_MAX_REQUESTS])
				sq->direct = 0;
			*progressed = 1;
		}
		if (sq->direct) {
			int landed = 1;

			if (atomic_load_explicit(&ctrl->send_done, memory_order_acquire) > r->seq) {
				if (!sq->landed_seen)
					note_landed(s, r);
			} else if (watch_landed(ctrl, r->seq)) {
				if (!sq->landed_seen)
					note_watched(s, r);
			} else {
				break;
			}
			/* Every byte is here: what remains is this side's copy
			 * out of the pool, bounded by the copy limit, so a
			 * sender that closed after its last message no longer
			 * matters (comm_check_peer). */
			r->wire_done = 1;
			if (sq->shadow && r->msg_size) {
				rc = shadow_copy_out(c, r, &landed);
				if (rc)
					return rc;
			}
			if (!landed)
				break;
			r->moved = r->msg_size;
		}
		if (r->moved == r->msg_size) {
			r->done = 1;
			comm_pop(c);
			*progressed = 1;
			continue;
		}
		avail = atomic_load_explicit(&ctrl->data_written, memory_order_acquire) - s->data_pos;
		if (avail > s->ring_size)
			return comm_fail(c, SM_ERR_REMOTE, "peer corrupted the ring counters");
		n = min_u64(min_u64(avail, r->msg_size - r->moved), min_u64(s->chunk, budget));
		if (n == 0)
			break;
		rc = ring_copy(s, s->data_pos, r->buf + r->moved, n, 0, r->dst_dev);
		if (rc)
			return rc;
		r->moved += n;
		s->data_pos += n;
		budget -= n;
		atomic_store_explicit(&ctrl->data_read, s->data_pos, memory_order_release);
		*progressed = 1;
	}
	return SM_OK;
}

int shm_progress(struct tp_comm *c, int *progressed)
{
	return c->is_send ? shm_progress_send(shm_of(c), progressed) :
			    shm_progress_recv(shm_of(c), progressed);
}

void shm_req_note(const struct tp_req *r, struct tp_req_note *n)
{
	const struct shm_req *sq = shm_req_of(r);

	n->direct = sq->direct;
	n->helper = sq->by_helper;
	n->pooled = sq->shadow != NULL;
	if (!sq->direct)
		return;
	if (r->kind == REQ_RECV)
		n->path = sq->shadow ? PATH_POOL : PATH_IN_PLACE;
	else if (sq->stage_end)
		n->path = PATH_STAGED;
	else if (sq->by_helper)
		n->path = PATH_HELPER;
	else if (r->size == 0)
		n->skip = 1;	/* an empty message needs no copy at all */
	else
		n->path = PATH_IN_PROCESS;
}

void shm_req_describe(const struct tp_comm *c, const struct tp_req *r, char *buf, size_t len)
{
	const struct shm_req *sq = shm_req_of(r);

	if (sq->direct && r->kind == REQ_SEND && c->ce)
		smf_copy_describe(c->ce, &sq->copy, buf, len);
}

int shm_req_close_wait(struct tp_comm *c, struct tp_req *r, uint64_t limit)
{
	struct shm_req *sq = shm_req_of(r);

	return sq->direct && (sq->copy.nev || sq->copy.helper) &&
	       smf_copy_wait_until(c->ce, &sq->copy, limit);
}
