/* Receives through the staging pool.
 *
 * A GPU receive buffer the sender cannot be given (its memory cannot be
 * exported, or NCCL_ZERO_COPY=0) gets a shadow: a piece of this GPU's
 * staging pool as large as the registration.  The piece's segment is what
 * the sender maps (once per segment and peer process), the sender's copy
 * engine writes each message into the piece at the buffer's offset, and
 * the receiver copies it on with this GPU's copy engine before the receive
 * completes: two copies instead of one, but no host bounce.  The second
 * copy runs in the copy helper when it can map both the piece and the
 * buffer, else in this process.  That second copy is within one GPU, and
 * the driver runs such copies on the GPU's SMs, behind NCCL's kernel
 * (bench/results/hop.md): the one same-GPU copy of a job with one GPU
 * per rank, taken only where zero-copy cannot be. */
#include <stdio.h>
#include <unistd.h>

#include "shm.h"

/* Drops what the copy helper was told about a shadow and its buffer. */
static void shadow_forget_helper(struct shm_region *r, struct smf_engine *ce)
{
	if (r->shadow_hid)
		smf_range_del(ce, r->shadow_hid);
	r->shadow_hid = 0;
	sm_export_put(r->shadow_exp);
	r->shadow_exp = NULL;
	sm_export_put(r->dst_exp);
	r->dst_exp = NULL;
	/* r->own.hid is set only when both ranges made it. */
}

int shadow_open(struct shm_comm *s, struct shm_region *r, const char *why)
{
	struct tp_comm *c = &s->comm;
	struct sm_pool_piece piece;
	int rc;

	if (!c->ce)
		return sm_fail(SM_ERR_USAGE, "GPU receive buffer %p needs the staging pool (%s) but "
			       "this process has no copy engine", (void *)r->reg.base, why);
	rc = sm_pool_gpu_get(&s->pool_cfg, &r->pool);
	if (!rc)
		rc = sm_pool_alloc(r->pool, r->reg.size, &piece);
	if (rc) {
		rc = sm_fail(rc, "GPU receive buffer %p (%zu bytes) cannot be given to the sender "
			     "(%s) and the staging pool cannot shadow it: %s", (void *)r->reg.base,
			     r->reg.size, why, sm_last_error());
		sm_pool_gpu_put(r->pool);
		r->pool = NULL;
		return rc;
	}
	r->shadow = piece.ptr;
	if (c->verbose)
		sm_info("receiving connection %p: buffer %p (%zu bytes) is shadowed by staging-pool "
			"piece %p: %s", (void *)c, (void *)r->reg.base, r->reg.size, (void *)r->shadow,
			why);
	if (!smf_engine_helper_pid(c->ce))
		return SM_OK;
	if (helper_export(c, r->shadow, r->reg.size, &r->shadow_exp, &r->shadow_off,
			  &r->shadow_hid) ||
	    helper_export(c, (void *)r->reg.base, r->reg.size, &r->dst_exp, &r->dst_off,
			  &r->own.hid)) {
		sm_info("copies out of staging-pool piece %p into %p run in NCCL's process: %s",
			(void *)r->shadow, (void *)r->reg.base, sm_last_error());
		shadow_forget_helper(r, c->ce);
		return SM_OK;
	}
	r->own.ce = c->ce;
	smf_engine_hold(r->own.ce);
	return SM_OK;
}

void shadow_close(struct shm_region *r)
{
	if (!r->shadow)
		return;
	shadow_forget_helper(r, r->own.ce);
	if (sm_pool_free(r->pool, r->shadow))
		sm_warn("%s", sm_last_error());
	sm_pool_gpu_put(r->pool);
	r->pool = NULL;
	r->shadow = NULL;
}

void shadow_recv_post(struct tp_req *q, const struct shm_region *r)
{
	struct shm_req *sq = shm_req_of(q);
	uint64_t at = (uintptr_t)q->buf - r->reg.base;

	sq->shadow = r->shadow + at;
	sq->src_hid = r->shadow_hid;
	sq->src_off = r->shadow_off + at;
	sq->dst_hid = r->own.hid;
	sq->dst_off = r->dst_off + at;
}

int shadow_copy_out(struct tp_comm *c, struct tp_req *q, int *landed)
{
	struct shm_req *sq = shm_req_of(q);
	int rc, started = 0;

	*landed = 0;
	if (!sq->out_started) {
		if (sq->src_hid && sq->dst_hid)
			rc = smf_copy_start_ranges(c->ce, sq->dst_hid, sq->dst_off, sq->src_hid,
						   sq->src_off, q->msg_size, &sq->copy, &started);
		else
			rc = smf_copy_start(c->ce, q->buf, sq->shadow, q->msg_size, &sq->copy, &started);
		if (rc)
			return comm_fail(c, rc, "copying message %llu out of the staging pool: %s",
					 (unsigned long long)q->seq, sm_last_error());
		if (!started)	/* no copy slot free: the next progress call retries */
			return comm_copy_overdue(c, q->t_seen, q->msg_size, "out of the staging "
						 "pool, waiting for a free copy slot,");
		sq->out_started = 1;
		sq->by_helper = sq->copy.helper;
	}
	rc = smf_copy_test(c->ce, &sq->copy, landed);
	if (rc)
		return comm_fail(c, rc, "%s", sm_last_error());
	return *landed ? SM_OK : comm_copy_overdue(c, q->t_seen, q->msg_size,
						   "out of the staging pool");
}
