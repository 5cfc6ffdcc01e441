/* Watch words: the receiver sees a message land without waiting for the
 * sender.  A direct send's copy is written by the sender's copy helper;
 * the sender learns of its landing from the helper's landing word, and
 * the receiver used to learn of it only once the sender's next progress
 * step counted it in send_done: one more pass of NCCL's proxy on the
 * other side.  Here the helper also has the stream write the message's
 * number + 1 into watch[slot] of the connection's control page, which
 * the receiver polls (smfree/copyd_proto.h, watch words).
 *
 * The sender asks its helper to map its control page (the segment's
 * first page) when it opens the connection, without waiting, and takes
 * the answer in a later progress step; until then, or where the helper
 * writes no watch words, receives complete by send_done as before.  A
 * word holds a whole message number, so a stale or missing write can only
 * make the receiver wait for send_done, never end a receive early. */
#include <stddef.h>
#include <string.h>
#include <unistd.h>

#include "shm.h"

/* Sender, connector: asks the helper to map the control page of `memfd`
 * (borrowed: passed before this returns).  Nothing else waits for it, so
 * a helper that cannot take the request now leaves this connection
 * without watch words. */
void watch_open(struct shm_comm *s, int memfd)
{
	struct sm_share_info info;
	int posted = 0;

	if (!s->comm.ce || smf_engine_helper_pid(s->comm.ce) <= 0)
		return;
	memset(&info, 0, sizeof(info));
	info.kind = SM_SHARE_HOST_FD;
	info.alloc_size = SHM_RING_OFFSET;
	if (smf_range_add_start(s->comm.ce, getpid(), &info, memfd, &s->watch_add, &posted) ||
	    !posted) {
		if (s->comm.verbose)
			sm_info("receives on this connection wait for the sender to see each "
				"landing: the copy helper did not take its page (%s)",
				posted ? sm_last_error() : "busy");
		return;
	}
	s->watch_pending = 1;
}

/* Sender's progress step: the helper's answer, once it came. */
void watch_collect(struct shm_comm *s)
{
	uint32_t id = 0;
	int done = 0, rc;

	rc = smf_range_add_test(s->comm.ce, &s->watch_add, &done, &id);
	if (!done)
		return;
	s->watch_pending = 0;
	if (!rc) {
		s->watch_id = id;
		return;
	}
	if (s->comm.verbose)
		sm_info("receives on this connection wait for the sender to see each landing: %s",
			sm_last_error());
}

/* Sender: the watch word for message `seq`, once the helper maps the
 * page; NULL before. */
const struct smf_watch *watch_for(const struct shm_comm *s, uint64_t seq, struct smf_watch *w)
{
	if (!s->watch_id)
		return NULL;
	w->id = s->watch_id;
	w->off = (uint32_t)offsetof(struct shm_ctrl, watch[seq % TP_MAX_REQUESTS]);
	w->val = (uint32_t)(seq + 1);
	return w;
}

/* Receiver: whether message `seq`'s copy wrote its watch word. */
int watch_landed(const struct shm_ctrl *ctrl, uint64_t seq)
{
	return atomic_load_explicit(&ctrl->watch[seq % TP_MAX_REQUESTS], memory_order_acquire) ==
	       (uint32_t)(seq + 1);
}

void watch_close(struct shm_comm *s)
{
	if (s->watch_pending)
		smf_range_add_cancel(s->comm.ce, &s->watch_add);
	else if (s->watch_id)
		smf_range_del(s->comm.ce, s->watch_id);
	s->watch_pending = 0;
	s->watch_id = 0;
}
