/* Registrations on a shared-memory connection, and how the sender learns
 * about the receiver's.
 *
 * When the receiving end registers GPU memory, the allocation is exported,
 * and announced on the connection's Unix socket (cuMem memory: the fd
 * rides along with SCM_RIGHTS) when the first receive into it is posted,
 * so the announcement always precedes the first receive that names it and
 * registering never waits for the sender.  The receiver counts the
 * messages it wrote in the shared header (the sender reads them whenever
 * it moves data and the count moved: shm_remote.c), so a withdrawn
 * registration is unmapped promptly and the socket never fills.  A
 * sender's buffers go to its copy helper. */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shm.h"

/* The socket is non-blocking; the sender reads it whenever it tries to
 * send and ctrl->announced says a message waits, so a receive waits for
 * room for its announcement this long only when the sender is stuck. */
#define ANNOUNCE_TIMEOUT_MS 10000
/* Withdrawals kept while the socket is full: past this many bytes (about
 * 29000 messages of 144 bytes) further ones are dropped, and the sender
 * unmaps those registrations only when the connection closes. */
#define BACKLOG_MAX (4u << 20)

/* Counts bytes of messages that reached the socket, and publishes how
 * many messages are whole there (every message has the same size). */
static void note_written(struct shm_comm *s, size_t n)
{
	s->ann_bytes += n;
	atomic_store_explicit(&s->ctrl->announced, s->ann_bytes / sizeof(struct wire_region),
			      memory_order_release);
}

/* Writes what the socket takes of the backlog now; the caller holds
 * ann_lock. */
static int backlog_push(struct shm_comm *s)
{
	struct tp_comm *c = &s->comm;

	while (s->aout_len) {
		ssize_t n = sm_send_some(c->fd, s->aout, s->aout_len, -1);

		if (n < 0)
			return comm_fail(c, SM_ERR_REMOTE, "announcing a registration: %s",
					 sm_last_error());
		if (n == 0)
			break;
		memmove(s->aout, s->aout + n, s->aout_len - (size_t)n);
		s->aout_len -= (size_t)n;
		note_written(s, (size_t)n);
	}
	atomic_store_explicit(&s->aout_waiting, s->aout_len != 0, memory_order_relaxed);
	return SM_OK;
}

/* Makes room for `n` more bytes in the backlog, up to BACKLOG_MAX: 0 when
 * there is room.  The caller holds ann_lock. */
static int backlog_reserve(struct shm_comm *s, size_t n)
{
	size_t cap;
	uint8_t *p;

	if (s->aout_len + n > BACKLOG_MAX)
		return -1;
	if (s->aout_len + n <= s->aout_cap)
		return 0;
	cap = s->aout_cap ? 2 * s->aout_cap : 64 * sizeof(struct wire_region);
	while (cap < s->aout_len + n)
		cap *= 2;
	p = realloc(s->aout, cap);
	if (!p)
		return -1;
	s->aout = p;
	s->aout_cap = cap;
	return 0;
}

/* Writes the region's message with its export fd, once the messages
 * before it are out.  A message the socket takes only in part has passed
 * its fd already; the rest waits in the backlog. */
static int announce_now(struct shm_comm *s, struct shm_region *r)
{
	struct tp_comm *c = &s->comm;
	size_t len = sizeof(r->ann_msg);
	ssize_t n;

	if (s->aout_len)
		return SM_OK;
	n = sm_send_some(c->fd, &r->ann_msg, len, r->ann_fd);
	if (n < 0)
		return comm_fail(c, SM_ERR_REMOTE, "announcing a registration: %s",
				 sm_last_error());
	if (n == 0)
		return SM_OK;
	r->ann_pending = 0;
	note_written(s, (size_t)n);
	if ((size_t)n == len)
		return SM_OK;
	if (backlog_reserve(s, len - (size_t)n))
		return comm_fail(c, SM_ERR_SYSTEM, "out of memory for a registration message");
	memcpy(s->aout, (const uint8_t *)&r->ann_msg + n, len - (size_t)n);
	s->aout_len = len - (size_t)n;
	return backlog_push(s);
}

int announce_recv_ready(struct tp_comm *c, struct tp_region *reg, int *ready)
{
	struct shm_comm *s = shm_of(c);
	struct shm_region *r = shm_region_of(reg);
	uint64_t now;
	int rc;

	*ready = 1;
	if (!r->id)
		return SM_OK;	/* not exported: nothing to announce */
	*ready = 0;
	pthread_mutex_lock(&s->ann_lock);
	rc = backlog_push(s);
	if (!rc && r->ann_pending)
		rc = announce_now(s, r);
	/* Whole on the socket (with whatever preceded it) before a receive
	 * names it: the sender looks a region up when it sees the receive. */
	if (!rc && !r->ann_pending && !s->aout_len)
		*ready = 1;
	pthread_mutex_unlock(&s->ann_lock);
	if (rc)
		return rc;
	if (*ready) {
		/* A later wait (other messages ahead of a receive, long after)
		 * counts from its own start. */
		r->ann_wait_since = 0;
		return SM_OK;
	}
	/* The sender reads the socket whenever it tries to send, so only a
	 * sender that stopped sending leaves it full this long. */
	now = sm_now_ns();
	if (!r->ann_wait_since)
		r->ann_wait_since = now;
	if (now - r->ann_wait_since < ANNOUNCE_TIMEOUT_MS * 1000000ull)
		return SM_OK;
	return comm_fail(c, SM_ERR_REMOTE, "sender did not read a registration announcement "
			 "within %d s", ANNOUNCE_TIMEOUT_MS / 1000);
}

int announce_withdraw(struct tp_comm *c, struct shm_region *r)
{
	struct shm_comm *s = shm_of(c);
	struct wire_region msg;
	int rc = SM_OK;

	memset(&msg, 0, sizeof(msg));
	msg.magic = REGION_MAGIC;
	msg.op = REGION_DEL;
	msg.id = r->id;
	pthread_mutex_lock(&s->ann_lock);
	if (r->ann_pending) {
		/* Never announced: the sender has nothing to forget. */
		r->ann_pending = 0;
	} else if (!backlog_reserve(s, sizeof(msg))) {
		memcpy(s->aout + s->aout_len, &msg, sizeof(msg));
		s->aout_len += sizeof(msg);
		rc = backlog_push(s);
	} else if (!s->aout_dropped++) {
		sm_info("the sender has not read %zu bytes of registration messages; further "
			"deregistrations reach it when the connection closes", s->aout_len);
	}
	pthread_mutex_unlock(&s->ann_lock);
	return rc;
}

void announce_push_backlog(struct shm_comm *s)
{
	if (!atomic_load_explicit(&s->aout_waiting, memory_order_relaxed))
		return;
	/* NCCL's service thread may be writing an announcement: it pushes
	 * the backlog itself, so this data-path call never waits for it. */
	if (pthread_mutex_trylock(&s->ann_lock) != 0)
		return;
	backlog_push(s);
	pthread_mutex_unlock(&s->ann_lock);
}

/* Exports the allocation holding [ptr, ptr + r->size) (NCCL's buffer, or
 * its staging-pool piece) and readies the message that tells the sender
 * about it; the first receive into the region writes it (announce_recv_ready). */
static int prepare_announcement(struct shm_comm *s, struct shm_region *r, const void *ptr)
{
	struct wire_region *msg = &r->ann_msg;
	int rc;

	memset(msg, 0, sizeof(*msg));
	msg->magic = REGION_MAGIC;
	msg->op = REGION_ADD;
	msg->id = r->id;
	msg->flags = r->reg.mem == TP_MEM_HOST ? REGION_HOST : 0;	/* never shadowed */
	r->ann_fd = -1;
	rc = sm_export_get(ptr, r->reg.size, &r->own.exp, &msg->info, &r->own.offset, &r->ann_fd);
	if (rc)
		return rc;
	pthread_mutex_lock(&s->ann_lock);
	r->ann_pending = 1;
	pthread_mutex_unlock(&s->ann_lock);
	return SM_OK;
}

/* A receive buffer the sender cannot be given (not exportable, or
 * NCCL_ZERO_COPY=0) is shadowed by a staging-pool piece: the sender
 * writes the piece and the receiver copies each message on. */
static int receiver_announce(struct shm_comm *s, struct shm_region *r)
{
	char why[256];
	int rc;

	if (s->zero_copy) {
		rc = prepare_announcement(s, r, (void *)r->reg.base);
		if (!rc || s->comm.failed)
			return rc;
		snprintf(why, sizeof(why), "%s", sm_last_error());
	} else {
		snprintf(why, sizeof(why), "NCCL_ZERO_COPY=0");
	}
	rc = shadow_open(s, r, why);
	if (rc)
		return rc;
	rc = prepare_announcement(s, r, r->shadow);
	if (rc)
		shadow_close(r);
	return rc;
}

/* With NCCL_SYMMEM_HOST_IN_PLACE, host memory the driver can export
 * (cuMem host pages, as NCCL makes its host buffers) is announced too, so
 * that a GPU sender's copy engine writes it in place instead of the
 * sender copying through the ring with a driver call on NCCL's progress
 * thread; a host sender still uses the ring (shm_isend).  Off by default:
 * NCCL pairs host receive buffers (LL) with host senders, and each
 * announcement holds a descriptor on both sides.  Other host memory
 * simply stays on the ring: nothing to say about it. */
static int receiver_announce_host(struct shm_comm *s, struct shm_region *r)
{
	r->id = ++s->next_region;
	if (!prepare_announcement(s, r, (void *)r->reg.base))
		return SM_OK;
	if (s->comm.verbose)
		sm_info("receiving connection %p: host buffer %p (%zu bytes) is not exportable, "
			"messages into it come through the ring: %s", (void *)&s->comm,
			(void *)r->reg.base, r->reg.size, sm_last_error());
	r->id = 0;
	return SM_OK;
}

/* GPU memory is written by the peer's copy engine, in place or into its
 * staging-pool shadow; exportable host memory in place
 * (receiver_announce_host); anything else arrives through the ring (host
 * bounce).  A sender's buffers, host ones too, go to its copy helper:
 * NCCL's LL buffers live in host memory, and when it allocates them with
 * cuMem (NCCL_CUMEM_HOST_ENABLE) they export like GPU memory, so even
 * those copies leave this process. */
int shm_region_register(struct tp_comm *c, struct tp_region *reg, int dmabuf_fd,
			uint64_t dmabuf_offset)
{
	struct shm_comm *s = shm_of(c);
	struct shm_region *r = shm_region_of(reg);

	(void)dmabuf_fd;
	(void)dmabuf_offset;
	if (reg->mem == TP_MEM_CUDA && !c->is_send && !s->no_direct) {
		r->id = ++s->next_region;
		return receiver_announce(s, r);
	}
	if (reg->mem == TP_MEM_HOST && !c->is_send && !s->no_direct && s->zero_copy &&
	    s->host_in_place)
		return receiver_announce_host(s, r);
	if (c->is_send && smf_engine_helper_pid(c->ce))
		helper_own_buffer(c, reg, &r->own);
	return SM_OK;
}

/* An announced registration (id != 0) is forgotten by the peer too. */
void shm_region_withdraw(struct tp_comm *c, struct tp_region *reg)
{
	struct shm_region *r = shm_region_of(reg);

	if (r->id && r->own.exp)
		announce_withdraw(c, r);
}

/* Everything a registration holds, also one that failed half way. */
void shm_region_release(struct tp_region *reg)
{
	struct shm_region *r = shm_region_of(reg);

	helper_range_drop(&r->own);
	/* After every export of the piece is gone: a trimmed segment's
	 * address may come back for a new one. */
	shadow_close(r);
	smf_engine_put(r->own.ce);
	r->own.ce = NULL;
}

void announce_close(struct shm_comm *s)
{
	free(s->aout);
	s->aout = NULL;
	s->aout_len = s->aout_cap = 0;
}
