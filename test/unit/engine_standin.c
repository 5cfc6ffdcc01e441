/* The copy engine's interface (smfree.h) without a GPU: see
 * engine_standin.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine_standin.h"
#include "smfree.h"
#include "symmem.h"

struct standin_engine standin_engine;

struct pending {
	void *dst;
	const void *src;
	size_t n;
	int tests_left;
	int nth;		/* started n-th */
};

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
	memset(&standin_engine, 0, sizeof(standin_engine));
	standin_engine.pool = 1 << 20;
	rand_state = seed;
}

int smf_engine_get(const struct smf_engine_options *o, struct smf_engine **out)
{
	(void)o;
	*out = (struct smf_engine *)&engine_token;
	return SM_OK;
}

void smf_engine_hold(struct smf_engine *e)
{
	(void)e;
}

void smf_engine_put(struct smf_engine *e)
{
	(void)e;
}

int smf_engine_helper_pid(const struct smf_engine *e)
{
	(void)e;
	return 0;
}

int smf_range_add(struct smf_engine *e, int owner_pid, const struct sm_share_info *info, int fd,
		  uint32_t *id)
{
	(void)e;
	(void)owner_pid;
	(void)info;
	(void)fd;
	*id = 0;
	return SM_OK;
}

void smf_range_del(struct smf_engine *e, uint32_t id)
{
	(void)e;
	(void)id;
}

int smf_copy_start_ranges(struct smf_engine *e, uint32_t dst_id, uint64_t dst_off,
			  uint32_t src_id, uint64_t src_off, size_t n, struct smf_copy *op,
			  int *started)
{
	(void)e;
	(void)dst_id;
	(void)dst_off;
	(void)src_id;
	(void)src_off;
	(void)n;
	(void)op;
	*started = 0;
	return sm_fail(SM_ERR_INTERNAL, "the stand-in engine has no copy helper");
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
	p->tests_left = standin_engine.lag ? next_rand() % (standin_engine.lag + 1) : 0;
	op->nev = 1;
	op->ev[0] = p;
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
		memcpy(p->dst, p->src, p->n);
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

int smf_copy_sync(struct smf_engine *e, void *dst, const void *src, size_t n)
{
	(void)e;
	memcpy(dst, src, n);
	return SM_OK;
}
