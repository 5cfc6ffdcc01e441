/* NCCL_SYMMEM_TRACE_US: where a slow message spent its time.
 *
 * A stall in a pipeline of four processes shows up everywhere at once;
 * only lines with one clock (CLOCK_MONOTONIC is host-wide) say who waited
 * for whom.  Two kinds of line:
 *   - NCCL's progress thread did not call into a connection that had
 *     messages in flight for longer than the limit (and 1 ms at least):
 *     the time went to NCCL (its proxy thread, its kernel) or to the
 *     scheduler, not to us;
 *   - a message took longer than the limit from post to done, or its
 *     isend waited that long for the peer's receive: its stages say
 *     whether it waited for the receive, for the copy, or for this side
 *     to look. */
#include <stdio.h>

#include "comm.h"

/* NCCL's progress thread visits its other connections between two calls
 * here: pauses shorter than this are its normal loop, whatever the limit
 * for messages. */
#define PAUSE_FLOOR_NS (1000ull * 1000)

static double ms(uint64_t ns)
{
	return (double)ns / 1e6;
}

static double us(uint64_t ns)
{
	return (double)ns / 1e3;
}

void trace_call(struct tp_comm *c)
{
	uint64_t last = c->last_call_ns, now;

	if (!c->trace_ns)
		return;		/* off: not even a clock read per call */
	now = sm_now_ns();
	c->last_call_ns = now;
	if (!last || !c->q_count || now - last <= c->trace_ns || now - last <= PAUSE_FLOOR_NS)
		return;
	sm_info("trace %.3f ms: %s connection %p (peer pid %d): NCCL made no call here for "
		"%.0f us with %u message(s) in flight, oldest %llu", ms(now),
		c->is_send ? "sending" : "receiving", (void *)c, c->peer_pid, us(now - last),
		c->q_count, (unsigned long long)comm_head(c)->seq);
}

void trace_done(const struct tp_comm *c, const struct tp_req *r)
{
	char landed[96] = "";
	uint64_t now;

	if (!c->trace_ns)
		return;
	now = sm_now_ns();
	if (now - r->t_post <= c->trace_ns && r->t_wait <= c->trace_ns)
		return;
	/* Only copies in place have a landing time (not the host ring). */
	if (r->kind == REQ_SEND && r->t_landed >= r->t_post)
		snprintf(landed, sizeof(landed), "; copy landed %.0f us after isend",
			 us(r->t_landed - r->t_post));
	if (r->kind == REQ_RECV && r->t_landed >= r->t_post && r->t_seen >= r->t_landed)
		snprintf(landed, sizeof(landed), "; the sender saw it land %.0f us after irecv, "
			 "this side %.0f us after that", us(r->t_landed - r->t_post),
			 us(r->t_seen - r->t_landed));
	if (r->kind == REQ_SEND)
		sm_info("trace %.3f ms: sending connection %p (peer pid %d) message %llu, %llu "
			"bytes, isend at %.3f ms: %.0f us from isend to done, after %.0f us "
			"waiting for the receive%s", ms(now), (const void *)c, c->peer_pid,
			(unsigned long long)r->seq, (unsigned long long)r->size, ms(r->t_post),
			us(now - r->t_post), us(r->t_wait), landed);
	else
		sm_info("trace %.3f ms: receiving connection %p (peer pid %d) message %llu, %llu "
			"bytes, irecv at %.3f ms: %.0f us from irecv to done%s", ms(now),
			(const void *)c, c->peer_pid, (unsigned long long)r->seq,
			(unsigned long long)r->msg_size, ms(r->t_post), us(now - r->t_post), landed);
}
