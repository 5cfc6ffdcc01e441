/* NCCL's traffic hints per thread, and a ring connection's staging
 * allocation (conn_hints.h says why). */
#include "conn_hints.h"

#include <stddef.h>

/* ncclFunc_t's collectives: Broadcast, Reduce, AllGather, ReduceScatter,
 * AllReduce (0-4).  Send/recv-type operations are 5 and up. */
#define COLLECTIVE_OPS 0x1fu
#define OP_UNDEFINED 0xffffffffu

/* The last hint this thread was given, and whether it is still unused
 * (0 once a connection took it). */
static _Thread_local uint32_t hint_op;
static _Thread_local int hint_set;

void hints_note(uint32_t op)
{
	hint_op = op;
	hint_set = 1;
}

enum conn_kind hints_take(void)
{
	uint32_t op = hint_op;
	int set = hint_set;

	hint_set = 0;
	if (!set || op == 0)
		return CONN_UNHINTED;
	if (op == OP_UNDEFINED || (op & COLLECTIVE_OPS))
		return CONN_RING;
	return CONN_P2P;
}

const char *conn_kind_name(enum conn_kind kind)
{
	switch (kind) {
	case CONN_P2P:
		return "send/recv";
	case CONN_RING:
		return "ring/tree";
	default:
		return "unhinted";
	}
}

static _Thread_local const void *setup_comm;

void conn_setup_begin(const void *comm)
{
	setup_comm = comm;
}

void conn_setup_end(void)
{
	setup_comm = NULL;
}

int conn_in_setup(const void *comm)
{
	return comm && comm == setup_comm;
}

int staging_is_user_buffer(struct staging_alloc *s, int in_setup, uintptr_t lo, uintptr_t hi)
{
	if (!s->hi) {
		s->lo = lo;
		s->hi = hi;
		return 0;
	}
	if (lo == s->lo && hi == s->hi)
		return 0;
	return !in_setup;
}

int conn_may_decline(const struct reg_case *r)
{
	return r->kind == CONN_RING && r->p2p_off && !r->keep_rings;
}

int conn_declines(struct staging_alloc *s, const struct reg_case *r)
{
	if (!conn_may_decline(r))
		return 0;
	return staging_is_user_buffer(s, r->in_setup, r->lo, r->hi);
}
