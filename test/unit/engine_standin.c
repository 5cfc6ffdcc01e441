/* The copy engine's interface (smfree.h) without a GPU: see
 * engine_standin.h. */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "engine_standin.h"
#include "smfree.h"
#include "symmem.h"

struct standin_engine standin_engine;

struct pending {
	struct pending *next;	/* in the list of copies not landed */
	void *dst;
	const void *src;
	size_t n;
	int tests_left;
	int nth;		/* started n-th */
	_Atomic uint32_t *watch;	/* written val when it lands, or NULL */
	uint32_t val;
};

/* Copies started and not yet landed: a connection that gives up a copy
 * it takes for stuck never tests it again, so the next reset lets go of
 * it, as a driver would once the engine came back. */
static struct pending *unlanded;

static void unlanded_drop(struct pending *p)
{
	for (struct pending **pp = &unlanded; *pp; pp = &(*pp)->next)
		if (*pp == p) {
			*pp = p->next;
			return;
		}
}

/* A range the stand-in helper knows; id 0 = free entry. */
struct range {
	uint32_t id;
	uint8_t *addr;
	uint64_t size;
	int host;		/* a host memfd, mapped here */
};

#define MAX_RANGES 64

static struct range ranges[MAX_RANGES];
static uint32_t next_range;
static int engine_token;
static unsigned rand_state;

static int held(const struct pending *p)
{
	const char *dst = p->dst, *lo = standin_engine.hold_dst;

	if (p->nth == standin_engine.hold_nth)
		return 1;
	return lo && dst >= lo && dst < lo + standin_engine.hold_len;
}

static int next_rand(void)
{
	return rand_r(&rand_state);
}

void standin_engine_reset(unsigned seed)
{
	while (unlanded) {
		struct pending *p = unlanded;

		unlanded = p->next;
		free(p);
	}
	memset(&standin_engine, 0, sizeof(standin_engine));
	standin_engine.pool = 1 << 20;
	rand_state = seed;
}

int smf_engine_get(const struct smf_engine_options *o, struct smf_engine **out)
{
	(void)o;
	*out = (struct smf_engine *)&engine_token;
	standin_engine.refs++;
	return SM_OK;
}

void smf_engine_hold(struct smf_engine *e)
{
	(void)e;
	standin_engine.refs++;
}

void smf_engine_put(struct smf_engine *e)
{
	if (e)
		standin_engine.refs--;
}

int smf_engine_helper_pid(const struct smf_engine *e)
{
	(void)e;
	return standin_engine.helper ? (int)getpid() : 0;
}

int smf_range_add(struct smf_engine *e, int owner_pid, const struct sm_share_info *info, int fd,
		  uint32_t *id)
{
	struct range *r = NULL;

	(void)e;
	(void)owner_pid;
	*id = 0;
	if (!standin_engine.helper)
		return SM_OK;
	for (int i = 0; i < MAX_RANGES && !r; i++)
		if (!ranges[i].id)
			r = &ranges[i];
	if (!r)
		return sm_fail(SM_ERR_INTERNAL, "the stand-in helper holds %d ranges", MAX_RANGES);
	r->host = info->kind == SM_SHARE_HOST_FD;
	r->size = info->alloc_size;
	if (r->host) {
		void *p = mmap(NULL, r->size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);

		if (p == MAP_FAILED)
			return sm_fail(SM_ERR_SYSTEM, "stand-in helper: mapping a host range failed");
		r->addr = p;
	} else {
		r->addr = (uint8_t *)(uintptr_t)info->addr;
	}
	r->id = ++next_range;
	*id = r->id;
	standin_engine.ranges++;
	return SM_OK;
}

/* The stand-in helper answers at once: the mapping is made at the start
 * and handed out at the first test. */
int smf_range_add_start(struct smf_engine *e, int owner_pid, const struct sm_share_info *info,
			int fd, struct smf_range_req *req, int *posted)
{
	uint32_t id;
	int rc = smf_range_add(e, owner_pid, info, fd, &id);

	*posted = 1;
	req->ticket = rc ? 0 : id;
	return rc;
}

int smf_range_add_test(struct smf_engine *e, struct smf_range_req *req, int *done, uint32_t *id)
{
	(void)e;
	*done = 1;
	*id = (uint32_t)req->ticket;
	return SM_OK;
}

void smf_range_add_cancel(struct smf_engine *e, struct smf_range_req *req)
{
	smf_range_del(e, (uint32_t)req->ticket);
}

static struct range *range_find(uint32_t id)
{
	for (int i = 0; i < MAX_RANGES; i++)
		if (id && ranges[i].id == id)
			return &ranges[i];
	return NULL;
}

void smf_range_del(struct smf_engine *e, uint32_t id)
{
	struct range *r = range_find(id);

	(void)e;
	if (!r)
		return;
	if (r->host)
		munmap(r->addr, r->size);
	memset(r, 0, sizeof(*r));
	standin_engine.ranges--;
}

/* Lands p: its bytes, then its watch word, as the helper's stream does. */
static void land(struct pending *p)
{
	memcpy(p->dst, p->src, p->n);
	if (p->watch) {
		atomic_store_explicit(p->watch, p->val, memory_order_release);
		standin_engine.watches++;
		p->watch = NULL;
	}
}

int smf_copy_start_ranges(struct smf_engine *e, uint32_t dst_id, uint64_t dst_off,
			  uint32_t src_id, uint64_t src_off, size_t n, struct smf_copy *op,
			  int *started)
{
	return smf_copy_start_watched(e, dst_id, dst_off, src_id, src_off, n, NULL, op, started);
}

int smf_copy_start_watched(struct smf_engine *e, uint32_t dst_id, uint64_t dst_off,
			   uint32_t src_id, uint64_t src_off, size_t n,
			   const struct smf_watch *w, struct smf_copy *op, int *started)
{
	struct range *d = range_find(dst_id), *s = range_find(src_id), *wr = NULL;
	struct pending *p;
	int rc;

	*started = 0;
	if (!d || !s)
		return sm_fail(SM_ERR_INTERNAL, "stand-in helper: no range %u", d ? src_id : dst_id);
	if (w) {
		wr = range_find(w->id);
		/* The real helper fails such a request (copyd_engine.c). */
		if (!wr || !wr->host || w->off % 4 || wr->size < 4 || w->off > wr->size - 4)
			return sm_fail(SM_ERR_INVALID, "stand-in helper: watch word at %u of "
				       "range %u", w->off, w->id);
	}
	/* The real helper refuses these too (copyd.c). */
	if (dst_off > d->size || n > d->size - dst_off || src_off > s->size ||
	    n > s->size - src_off)
		return sm_fail(SM_ERR_INVALID, "stand-in helper: %zu bytes at %llu / %llu outside "
			       "ranges of %llu / %llu bytes", n, (unsigned long long)dst_off,
			       (unsigned long long)src_off, (unsigned long long)d->size,
			       (unsigned long long)s->size);
	rc = smf_copy_start(e, d->addr + dst_off, s->addr + src_off, n, op, started);
	if (rc || !*started)
		return rc;
	standin_engine.range_starts++;
	p = op->nev ? op->ev[0] : NULL;
	if (p && wr) {
		p->watch = (_Atomic uint32_t *)(void *)(wr->addr + w->off);
		p->val = w->val;
		if (standin_engine.watch_at_once)
			land(p);
	}
	return SM_OK;
}

int smf_copy_start(struct smf_engine *e, void *dst, const void *src, size_t n,
		   struct smf_copy *op, int *started)
{
	struct pending *p;

	(void)e;
	memset(op, 0, sizeof(*op));
	*started = 1;
	if (n == 0)
		return SM_OK;
	if (standin_engine.out >= standin_engine.pool ||
	    next_rand() % 100 < standin_engine.refuse_pct) {
		*started = 0;
		return SM_OK;
	}
	p = malloc(sizeof(*p));
	if (!p)
		return sm_fail(SM_ERR_SYSTEM, "out of memory");
	p->dst = dst;
	p->src = src;
	p->n = n;
	p->watch = NULL;
	p->tests_left = standin_engine.lag ? next_rand() % (standin_engine.lag + 1) : 0;
	op->nev = 1;
	op->ev[0] = p;
	p->next = unlanded;
	unlanded = p;
	standin_engine.out++;
	p->nth = ++standin_engine.starts;
	return SM_OK;
}

int smf_copy_test(struct smf_engine *e, struct smf_copy *op, int *done)
{
	struct pending *p = op->nev ? op->ev[0] : NULL;

	(void)e;
	*done = 0;
	if (p && (held(p) || p->tests_left-- > 0))
		return SM_OK;
	if (p) {
		land(p);
		unlanded_drop(p);
		free(p);
		op->nev = 0;
		standin_engine.out--;
	}
	*done = 1;
	return SM_OK;
}

void smf_copy_describe(const struct smf_engine *e, const struct smf_copy *op, char *buf,
		       size_t len)
{
	(void)e;
	snprintf(buf, len, "stand-in copy, %d event(s)", op->nev);
}

int smf_copy_wait_until(struct smf_engine *e, struct smf_copy *op, uint64_t limit_ns)
{
	int done = 0;

	while (smf_copy_test(e, op, &done) == SM_OK && !done) {
		if (sm_now_ns() > limit_ns)
			return sm_fail(SM_ERR_CUDA, "a stand-in copy did not land in time");
	}
	return SM_OK;
}

int smf_copy_sync(struct smf_engine *e, void *dst, const void *src, size_t n, uint64_t limit_ns)
{
	(void)e;
	(void)limit_ns;
	memcpy(dst, src, n);
	return SM_OK;
}
