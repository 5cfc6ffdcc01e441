/* The staging pool: memory a receiver can always export.
 *
 * When NCCL's receive buffer cannot be exported (memory from a stream-
 * ordered pool, cuMem without a shareable handle type) or the user asked
 * for NCCL_ZERO_COPY=0, the peer's copy engine writes into a span of this
 * pool instead and the receiver copies the message on.  The pool hands out
 * spans of a few large segments, so each segment is exported once and a
 * peer maps it once, however many registrations come and go.
 *
 * Sizing follows the NCCL_CUMEM_* variables: the first segment is the
 * initial size (made at once with prealloc), each further one `growth`
 * times the previous, never more in all than the cap (running out is an
 * error for the caller, never a larger allocation), and whole idle
 * segments go back to their backend while more than the trim threshold
 * sits idle.  Where the bytes come from is the backend's business
 * (pool_cumem.c: GPU memory); this file only keeps the books. */
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "symmem.h"

/* Spans start and end on this boundary: copy engines move aligned blocks
 * fastest, and NCCL's buffers are far larger anyway. */
#define SPAN_ALIGN 65536u

struct pool_span {
	struct pool_span *next;		/* the segment's spans, by offset */
	uint64_t off;
	uint64_t size;
};

struct pool_segment {
	struct pool_segment *next;
	uint8_t *base;
	uint64_t size;
	uint64_t used;
	uint64_t cookie;		/* the backend's handle */
	struct pool_span *spans;
};

struct sm_pool {
	pthread_mutex_t lock;
	struct sm_pool_backend be;
	struct sm_pool_config cfg;
	struct pool_segment *segs;	/* newest first */
	uint64_t last_seg;		/* size of the newest segment made */
	struct sm_pool_stats st;
};

static uint64_t round_up(uint64_t n, uint64_t to)
{
	return to ? (n + to - 1) / to * to : n;
}

static int segment_add(struct sm_pool *p, uint64_t size, struct pool_segment **out)
{
	struct pool_segment *s;
	int rc;

	s = calloc(1, sizeof(*s));
	if (!s)
		return sm_fail(SM_ERR_SYSTEM, "out of memory for a pool segment record");
	rc = p->be.alloc(p->be.arg, size, (void **)&s->base, &s->cookie);
	if (rc) {
		free(s);
		return rc;
	}
	s->size = size;
	s->next = p->segs;
	p->segs = s;
	p->last_seg = size;
	p->st.size += size;
	p->st.segments++;
	p->st.grows++;
	/* Rare (a few per job): each one is worth a line at INFO. */
	sm_info("staging pool of %s: new %.1f MiB segment, %.1f MiB in %u segment(s), cap %.1f MiB",
		p->be.what, size / 1048576.0, p->st.size / 1048576.0, p->st.segments,
		p->cfg.max / 1048576.0);
	*out = s;
	return SM_OK;
}

static void segment_release(struct sm_pool *p, struct pool_segment *s)
{
	while (s->spans) {
		struct pool_span *sp = s->spans;

		s->spans = sp->next;
		free(sp);
	}
	p->be.free(p->be.arg, s->base, s->size, s->cookie);
	p->st.size -= s->size;
	p->st.used -= s->used;
	p->st.segments--;
	free(s);
}

/* First fit inside one segment: the lowest gap between its spans that
 * holds `size`.  Returns 0 and the offset, or -1. */
static int segment_fit(const struct pool_segment *s, uint64_t size, uint64_t *off,
		       struct pool_span ***link)
{
	struct pool_span **pp = (struct pool_span **)&s->spans;
	uint64_t at = 0;

	if (s->size - s->used < size)
		return -1;
	for (; *pp; pp = &(*pp)->next) {
		if ((*pp)->off - at >= size)
			break;
		at = (*pp)->off + (*pp)->size;
	}
	if (!*pp && s->size - at < size)
		return -1;
	*off = at;
	*link = pp;
	return 0;
}

/* The size of the next segment for a request of `need` bytes, within the
 * cap; 0 when the cap leaves no room. */
static uint64_t next_segment_size(const struct sm_pool *p, uint64_t need)
{
	uint64_t want, room, gran = p->be.granularity;

	if (!p->segs)
		want = p->cfg.initial;	/* also after a trim gave everything back */
	else
		want = (uint64_t)((double)p->last_seg * p->cfg.growth);
	if (want < need)
		want = need;
	want = round_up(want, gran);
	room = p->cfg.max > p->st.size ? p->cfg.max - p->st.size : 0;
	if (gran)
		room = room / gran * gran;
	if (want <= room)
		return want;
	/* Growth would pass the cap: take only what fits, if the request does. */
	return round_up(need, gran) <= room ? room : 0;
}

int sm_pool_create(const struct sm_pool_backend *be, const struct sm_pool_config *cfg,
		   struct sm_pool **out)
{
	struct sm_pool *p;
	struct pool_segment *s;
	int rc;

	*out = NULL;
	if (!be || !be->alloc || !be->free || !cfg || cfg->growth < 1.0)
		return sm_fail(SM_ERR_INTERNAL, "staging pool: bad backend or configuration");
	p = calloc(1, sizeof(*p));
	if (!p)
		return sm_fail(SM_ERR_SYSTEM, "out of memory for a staging pool");
	pthread_mutex_init(&p->lock, NULL);
	p->be = *be;
	p->cfg = *cfg;
	if (cfg->prealloc && cfg->initial) {
		uint64_t size = next_segment_size(p, 0);

		rc = size ? segment_add(p, size, &s)
			  : sm_fail(SM_ERR_USAGE, "the cap %" PRIu64 " bytes leaves no room",
				    cfg->max);
		if (rc) {
			pthread_mutex_destroy(&p->lock);
			free(p);
			return sm_fail(rc, "preallocating the staging pool of %s: %s",
				       be->what, sm_last_error());
		}
	}
	*out = p;
	return SM_OK;
}

void sm_pool_destroy(struct sm_pool *p)
{
	if (!p)
		return;
	if (p->st.used)
		sm_warn("staging pool of %s destroyed with %" PRIu64 " bytes still handed out",
			p->be.what, p->st.used);
	sm_info("staging pool of %s released: peak %.1f MiB in use, %" PRIu64 " segment(s) made, "
		"%" PRIu64 " given back while in use, %" PRIu64 " request(s) refused", p->be.what,
		p->st.peak / 1048576.0, p->st.grows, p->st.trims, p->st.failures);
	while (p->segs) {
		struct pool_segment *s = p->segs;

		p->segs = s->next;
		segment_release(p, s);
	}
	pthread_mutex_destroy(&p->lock);
	free(p);
}

int sm_pool_alloc(struct sm_pool *p, uint64_t size, struct sm_pool_piece *out)
{
	struct pool_segment *s;
	struct pool_span *sp, **link = NULL;
	uint64_t need = round_up(size ? size : 1, SPAN_ALIGN), off = 0, grow;
	int rc = SM_OK;

	memset(out, 0, sizeof(*out));
	sp = calloc(1, sizeof(*sp));
	if (!sp)
		return sm_fail(SM_ERR_SYSTEM, "out of memory for a pool span record");
	pthread_mutex_lock(&p->lock);
	for (s = p->segs; s; s = s->next)
		if (segment_fit(s, need, &off, &link) == 0)
			break;
	if (!s) {
		grow = next_segment_size(p, need);
		if (!grow) {
			p->st.failures++;
			rc = sm_fail(SM_ERR_USAGE, "staging pool of %s exhausted: %" PRIu64 " bytes "
				     "wanted, %" PRIu64 " of %" PRIu64 " in use, cap %" PRIu64
				     " (NCCL_CUMEM_MAX_SIZE)", p->be.what, size, p->st.used,
				     p->st.size, p->cfg.max);
			goto out;
		}
		rc = segment_add(p, grow, &s);
		if (rc) {
			p->st.failures++;
			rc = sm_fail(rc, "growing the staging pool of %s by %" PRIu64 " bytes: %s",
				     p->be.what, grow, sm_last_error());
			goto out;
		}
		off = 0;
		link = &s->spans;
	}
	sp->off = off;
	sp->size = need;
	sp->next = *link;
	*link = sp;
	s->used += need;
	p->st.used += need;
	if (p->st.used > p->st.peak)
		p->st.peak = p->st.used;
	p->st.spans++;
	out->ptr = s->base + off;
	out->size = need;
	out->seg_base = s->base;
	out->seg_size = s->size;
	sp = NULL;
out:
	pthread_mutex_unlock(&p->lock);
	free(sp);
	return rc;
}

/* Whole idle segments go back, newest first, while more than the trim
 * threshold sits idle. */
static void pool_trim(struct sm_pool *p)
{
	struct pool_segment **pp = &p->segs;

	while (*pp && p->st.size - p->st.used > p->cfg.trim) {
		struct pool_segment *s = *pp;

		if (s->used) {
			pp = &s->next;
			continue;
		}
		*pp = s->next;
		sm_info("staging pool of %s: idle %.1f MiB segment given back (more than %.1f MiB "
			"idle)", p->be.what, s->size / 1048576.0, p->cfg.trim / 1048576.0);
		segment_release(p, s);
		p->st.trims++;
	}
}

int sm_pool_free(struct sm_pool *p, void *ptr)
{
	struct pool_segment *s;
	struct pool_span **pp;
	uint8_t *b = ptr;
	int rc = SM_OK;

	pthread_mutex_lock(&p->lock);
	for (s = p->segs; s; s = s->next)
		if (b >= s->base && b < s->base + s->size)
			break;
	pp = s ? &s->spans : NULL;
	while (pp && *pp && s->base + (*pp)->off != b)
		pp = &(*pp)->next;
	if (!pp || !*pp) {
		rc = sm_fail(SM_ERR_INTERNAL, "%p is not a span of the staging pool of %s "
			     "(freed twice?)", ptr, p->be.what);
		goto out;
	}
	{
		struct pool_span *sp = *pp;

		*pp = sp->next;
		s->used -= sp->size;
		p->st.used -= sp->size;
		p->st.spans--;
		free(sp);
	}
	pool_trim(p);
out:
	pthread_mutex_unlock(&p->lock);
	return rc;
}

void sm_pool_get_stats(struct sm_pool *p, struct sm_pool_stats *out)
{
	pthread_mutex_lock(&p->lock);
	*out = p->st;
	pthread_mutex_unlock(&p->lock);
}
