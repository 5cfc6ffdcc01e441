/* Watch words: the receiver sees a message land without waiting for the
 * sender.  A direct send's copy is written by the sender's copy helper;
 * the sender learns of its landing from the helper's landing word, and
 * the receiver used to learn of it only once the sender's next progress
 * step counted it in send_done: one more pass of NCCL's proxy on the
 * other side.  Here the helper also has the stream write the message's
 * number + 1 into watch[slot] of the connection's control page, which
 * the receiver polls (smfree/copyd_proto.h, watch words).
 *
 * The connector has its helper map its control page (the segment's
 * first page) when it opens the connection: one request and its answer,
 * tens of microseconds, as the connection's other setup with the helper.
 * Where the helper does not map it, or writes no watch words, receives
 * complete by send_done as before.  A word holds a whole message number,
 * so a stale or missing write can only make the receiver wait for
 * send_done, never end a receive early. */
#include <stddef.h>
#include <string.h>
#include <unistd.h>

#include "shm.h"

/* Sender, connector: the control page of `memfd` (borrowed) into the
 * copy helper, where it reports landings by stream writes (without
 * landing words it writes no watch words either).  Refused or failed,
 * this connection has no watch words; the connection itself goes on. */
void watch_open(struct shm_comm *s, int memfd)
{
	struct sm_share_info info;
	uint32_t id = 0;

	if (!s->comm.ce || !s->comm.engine_opt.landing || smf_engine_helper_pid(s->comm.ce) <= 0)
		return;
	memset(&info, 0, sizeof(info));
	info.kind = SM_SHARE_HOST_FD;
	info.alloc_size = SHM_RING_OFFSET;
	if (smf_range_add(s->comm.ce, getpid(), &info, memfd, &id) || !id) {
		if (s->comm.verbose)
			sm_info("receives on this connection wait for the sender to see each "
				"landing: the copy helper did not map its page (%s)",
				sm_last_error());
		return;
	}
	s->watch_id = id;
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
	smf_range_del(s->comm.ce, s->watch_id);
	s->watch_id = 0;
}
