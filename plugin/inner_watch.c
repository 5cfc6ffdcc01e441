/* What a connection through the inner net plugin that waits is watched
 * for, as this plugin's own connections are (transport/comm.c): a wait
 * without progress past NCCL_SYMMEM_STALL_REPORT is reported, and a peer
 * process that died fails the connection, since the inner plugin may
 * wait for it forever.  Both are looked at only while a test finds its
 * request not done, and the socket at most every LIVE_CHECK_NS, so a
 * connection that moves pays one clock read per test. */
#include "inner_internal.h"
#include "log.h"
#include "symmem.h"

/* A dead peer is seen within this and the kernel's hang-up. */
#define LIVE_CHECK_NS (100ull * 1000 * 1000)

static const char *host_of(const struct inner_comm *c)
{
	return c->live.host[0] ? c->live.host : "an unknown host";
}

/* One WARN per peer: every channel's connection to it says the same
 * text (the log keeps one a minute); each connection's own line is INFO. */
static void note_stall(struct inner_comm *c, uint64_t now)
{
	double s = (double)(now - c->wait_since_ns) / 1e9;

	if (!c->stall_ns || c->stall_reported || now - c->wait_since_ns < c->stall_ns)
		return;
	c->stall_reported = 1;
	LOG_WARN("NET/symmem: connections through inner net plugin %s to peer process %d on %s "
		 "made no progress for %.3g s, still waiting (NCCL_SYMMEM_STALL_REPORT; INFO "
		 "lines give each one's state)", inner_describe(), c->live.pid, host_of(c),
		 (double)c->stall_ns / 1e9);
	LOG_INFO("NET/symmem %s comm %p through inner net plugin %s to peer process %d on %s "
		 "made no progress for %.3g s, still waiting; %d requests in flight, %llu "
		 "messages done", c->is_send ? "send" : "receive", c->nccl, inner_describe(),
		 c->live.pid, host_of(c), s, c->inflight, (unsigned long long)c->messages);
}

ncclResult_t inner_watch_dead(struct inner_comm *c)
{
	if (c->dead++)
		return ncclRemoteError;
	LOG_WARN("NET/symmem: peer process %d on %s is gone (its liveness connection hung up "
		 "without closing): failing its connections through inner net plugin %s, which "
		 "would wait for it forever", c->live.pid, host_of(c), inner_describe());
	return ncclRemoteError;
}

/* The liveness connection's setup, one step: 0, or -1 when the peer
 * hung up on it (the listener's side turns strangers away instead). */
static int setup_step(struct inner_comm *c)
{
	int rc;

	if (c->dial) {
		rc = live_dial_step(c->dial, &c->live);
		if (rc == 0)
			return 0;
		live_dial_free(c->dial);
		c->dial = NULL;
		return rc < 0 ? -1 : 0;
	}
	if (c->lis && live_accept(c->lis, c->token, &c->live) != 0) {
		live_close_listener(c->lis);
		c->lis = NULL;
	}
	return 0;
}

void inner_watch_close(struct inner_comm *c)
{
	/* One more step, so that a listener answers a connector that came,
	 * and the bye reaches the peer whichever end got that far. */
	if (c->dial || c->lis)
		(void)setup_step(c);
	live_dial_bye(c->dial);
	live_close(&c->live, 1);
	inner_watch_free(c);
}

void inner_watch_free(struct inner_comm *c)
{
	live_dial_free(c->dial);
	c->dial = NULL;
	live_close_listener(c->lis);
	c->lis = NULL;
}

ncclResult_t inner_watch_wait(struct inner_comm *c)
{
	uint64_t now = sm_now_ns();

	if (!c->wait_since_ns)
		c->wait_since_ns = now;
	if (now - c->checked_ns >= LIVE_CHECK_NS && (c->dial || c->lis || c->live.fd >= 0)) {
		c->checked_ns = now;
		if (setup_step(c))
			return inner_watch_dead(c);
		switch (live_check(&c->live)) {
		case LIVE_GONE:
			return inner_watch_dead(c);
		case LIVE_CLOSED:
			/* Its comm closed in order: what is left is the inner
			 * plugin's to finish, and the hang-up that follows is no
			 * death. */
			live_close(&c->live, 0);
			break;
		default:
			break;
		}
	}
	note_stall(c, now);
	return ncclSuccess;
}

void inner_watch_progress(struct inner_comm *c)
{
	c->wait_since_ns = 0;
	c->stall_reported = 0;
}

int inner_watch_dead_at_close(struct inner_comm *c)
{
	if (!c->dead && c->inflight > 0 && ((c->dial && setup_step(c)) ||
					     live_check(&c->live) == LIVE_GONE))
		c->dead = 1;
	return c->dead && c->inflight > 0;
}
