/* The sender's view of the receiver's registrations on a shared-memory
 * connection: the messages the receiver announces them with
 * (shm_region.c) read off the Unix socket, each peer allocation kept
 * once, mapped here or in the copy helper on its first use, and let go
 * when withdrawn and no queued copy still writes into it. */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "shm.h"

/* The receiver's registrations the sender keeps on one connection at
 * most.  Each may hold the descriptor of the receiver's export until it is
 * mapped; NCCL registers a few buffers per connection (more with
 * ncclCommRegister), so a peer past this is broken or hostile.  The limit
 * is also a quarter of RLIMIT_NOFILE's soft limit at most (256 at the
 * common 1024): one connection never takes the process's last descriptors,
 * whatever its peer announces. */
#define REMOTE_MAX 4096u

/* The same over every connection of this process: a few peers, each under
 * the cap above, could still take its descriptors together.  Half of
 * RLIMIT_NOFILE's soft limit at most, so NCCL and the application keep
 * the other half. */
#define REMOTE_PROCESS_MAX (16 * REMOTE_MAX)

static atomic_uint remote_total;	/* registrations kept, all connections */

/* A quarter (per connection) or a half (per process) of RLIMIT_NOFILE's
 * soft limit, at most `max`. */
static unsigned nofile_share(unsigned div, unsigned max)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY ||
	    rl.rlim_cur / div >= max)
		return max;
	return rl.rlim_cur < div ? 1 : (unsigned)(rl.rlim_cur / div);
}

static unsigned remote_limit(void)
{
	return nofile_share(4, REMOTE_MAX);
}

static unsigned process_limit(void)
{
	return nofile_share(2, REMOTE_PROCESS_MAX);
}

static struct remote_region *remote_find(struct shm_comm *s, uint32_t id)
{
	for (unsigned i = 0; i < s->nremote; i++)
		if (s->remote[i].id == id)
			return &s->remote[i];
	return NULL;
}

/* Registrations of one allocation come with the same description (the
 * receiver exports each allocation once): they share one descriptor, one
 * mapping and one copy-helper range here. */
static struct remote_alloc *alloc_find(struct shm_comm *s, const struct sm_share_info *info)
{
	for (unsigned i = 0; i < s->nremote; i++)
		if (!memcmp(&s->remote[i].alloc->info, info, sizeof(*info)))
			return s->remote[i].alloc;
	return NULL;
}

static void alloc_put(struct shm_comm *s, struct remote_alloc *a)
{
	if (--a->refs)
		return;
	if (a->helper_pending) {
		smf_range_add_cancel(s->comm.ce, &a->add);
		s->helper_pending--;
	}
	/* Leaked on purpose after copies into them were given up
	 * (tp_close): a late copy must find its target still mapped. */
	if (a->hid && !s->comm.keep_mappings)
		smf_range_del(s->comm.ce, a->hid);
	if (a->fd >= 0)
		close(a->fd);
	if (!s->comm.keep_mappings)
		sm_import_put(a->map);
	free(a);
}

static void remote_drop(struct shm_comm *s, struct remote_region *rr)
{
	atomic_fetch_sub(&remote_total, 1);
	alloc_put(s, rr->alloc);
	if (rr->dying)
		s->remote_dying--;
	*rr = s->remote[--s->nremote];
}

/* Whether a send still queued copies into the peer's registration `id`. */
static int remote_busy(const struct shm_comm *s, uint32_t id)
{
	for (unsigned i = 0; i < s->comm.q_count; i++) {
		const struct tp_req *r = s->comm.queue[(s->comm.q_head + i) % TP_MAX_REQUESTS];

		if (shm_req_of(r)->direct && shm_req_of(r)->region == id)
			return 1;
	}
	return 0;
}

/* The peer withdrew `rr` (after an abort NCCL deregisters with receives
 * in flight).  A queued send may still be copying into it: in this
 * process, unmapping it now would let that copy fault and poison the
 * CUDA context every later copy needs (the copy helper defers its unmap
 * for the same reason, copyd.c).  Such a registration is only marked and
 * goes when the last of those sends lands (remote_landed) or at close,
 * which waits for their copies or keeps the mapping. */
static void remote_withdrawn(struct shm_comm *s, struct remote_region *rr)
{
	if (!remote_busy(s, rr->id)) {
		remote_drop(s, rr);
		return;
	}
	rr->dying = 1;
	s->remote_dying++;
}

void remote_landed(struct shm_comm *s, uint32_t id)
{
	struct remote_region *rr;

	if (!s->remote_dying)
		return;
	rr = remote_find(s, id);
	if (rr && rr->dying && !remote_busy(s, id))
		remote_drop(s, rr);
}

/* What a receiver of ours announces: cuMem exports with their descriptor,
 * legacy IPC handles without one, never an empty allocation.  A process
 * out of descriptors receives an announcement without its descriptor too
 * (the kernel drops what it cannot install), hence the hint. */
static int check_add(struct shm_comm *s, const struct wire_region *msg, int fd)
{
	const struct sm_share_info *info = &msg->info;

	if (info->kind != SM_SHARE_POSIX_FD && info->kind != SM_SHARE_LEGACY_IPC)
		return comm_fail(&s->comm, SM_ERR_REMOTE, "peer announced registration %u of unknown "
				 "kind %u", msg->id, info->kind);
	if (info->kind == SM_SHARE_POSIX_FD && fd < 0)
		return comm_fail(&s->comm, SM_ERR_REMOTE, "peer announced registration %u without its "
				 "descriptor (or this process is out of descriptors: RLIMIT_NOFILE)",
				 msg->id);
	if (info->kind == SM_SHARE_LEGACY_IPC && fd >= 0)
		return comm_fail(&s->comm, SM_ERR_REMOTE, "peer announced registration %u, a legacy IPC "
				 "handle, with a descriptor", msg->id);
	if (info->alloc_size == 0)
		return comm_fail(&s->comm, SM_ERR_REMOTE, "peer announced registration %u of an empty "
				 "allocation", msg->id);
	if (msg->flags & ~REGION_HOST)
		return comm_fail(&s->comm, SM_ERR_REMOTE, "peer announced registration %u with unknown "
				 "flags 0x%x", msg->id, msg->flags & ~REGION_HOST);
	if (remote_find(s, msg->id))
		return comm_fail(&s->comm, SM_ERR_REMOTE, "peer announced registration %u twice", msg->id);
	if (s->nremote >= remote_limit())
		return comm_fail(&s->comm, SM_ERR_REMOTE, "peer announced more than %u registrations on "
				 "one connection, the most the sender keeps (the lower of %u and a "
				 "quarter of RLIMIT_NOFILE)", remote_limit(), REMOTE_MAX);
	return SM_OK;
}

/* Takes `fd` (the peer's export, or -1): kept with the registration's
 * allocation, or closed when the announcement is refused or the
 * allocation is known already, since an export fd left open would pin the
 * peer's GPU memory until this process exits. */
static int remote_add(struct shm_comm *s, const struct wire_region *msg, int fd)
{
	struct remote_alloc *a;
	struct remote_region *rr;
	int rc;

	rc = check_add(s, msg, fd);
	if (rc)
		goto refuse;
	/* Counted first: connections on other threads add too. */
	if (atomic_fetch_add(&remote_total, 1) >= process_limit()) {
		rc = comm_fail(&s->comm, SM_ERR_REMOTE, "peers announced more than %u registrations "
			       "to this process, the most it keeps over all its connections (the "
			       "lower of %u and half of RLIMIT_NOFILE); refusing registration %u",
			       process_limit(), REMOTE_PROCESS_MAX, msg->id);
		goto uncount;
	}
	if (s->nremote == s->remote_cap) {
		unsigned cap = s->remote_cap ? 2 * s->remote_cap : 8;
		struct remote_region *n = realloc(s->remote, cap * sizeof(*n));

		if (!n)
			goto no_memory;
		s->remote = n;
		s->remote_cap = cap;
	}
	a = alloc_find(s, &msg->info);
	if (a) {
		if (fd >= 0)
			close(fd);
	} else {
		a = calloc(1, sizeof(*a));
		if (!a)
			goto no_memory;
		a->info = msg->info;
		a->fd = fd;
		a->host = (msg->flags & REGION_HOST) != 0;
	}
	a->refs++;
	rr = &s->remote[s->nremote++];
	memset(rr, 0, sizeof(*rr));
	rr->id = msg->id;
	rr->alloc = a;
	return SM_OK;
no_memory:
	rc = comm_fail(&s->comm, SM_ERR_SYSTEM, "out of memory for peer registrations");
uncount:
	atomic_fetch_sub(&remote_total, 1);
refuse:
	if (fd >= 0)
		close(fd);
	return rc;
}

/* A withdrawal names a registration the receiver announced and has not
 * withdrawn yet; the receiver never sends another. */
static int remote_del(struct shm_comm *s, const struct wire_region *msg, int fd)
{
	struct remote_region *rr = remote_find(s, msg->id);

	if (fd >= 0)
		close(fd);
	if (!rr || rr->dying)
		return comm_fail(&s->comm, SM_ERR_REMOTE, "peer withdrew registration %u, which it never "
				 "announced or already withdrew", msg->id);
	remote_withdrawn(s, rr);
	return SM_OK;
}

static int handle_message(struct shm_comm *s, const struct wire_region *msg, int fd)
{
	if (msg->magic != REGION_MAGIC || (msg->op != REGION_ADD && msg->op != REGION_DEL) ||
	    msg->id == 0) {
		if (fd >= 0)
			close(fd);
		return comm_fail(&s->comm, SM_ERR_REMOTE, "malformed registration message from the peer");
	}
	if (msg->op == REGION_ADD)
		return remote_add(s, msg, fd);
	return remote_del(s, msg, fd);
}

/* Reads every complete announcement waiting on the socket. */
int remote_drain(struct shm_comm *s)
{
	struct wire_region msg;

	for (;;) {
		int fd = -1, rc;
		ssize_t n = sm_recv_some(s->comm.fd, s->rin + s->rin_len, sizeof(s->rin) - s->rin_len,
					   &fd);

		/* A receiver that closed after its last whole message: its
		 * receives posted before are still served, and the liveness
		 * check fails the first send it never posted a receive for. */
		if (n < 0 && s->rin_len == 0)
			return SM_OK;
		if (n < 0)
			return comm_fail(&s->comm, SM_ERR_REMOTE, "receiving peer: %s", sm_last_error());
		if (fd >= 0) {
			if (s->rin_fd >= 0)
				close(s->rin_fd);
			s->rin_fd = fd;
		}
		if (n == 0)
			return SM_OK;
		s->rin_len += (size_t)n;
		if (s->rin_len < sizeof(s->rin))
			continue;
		/* Copied out: rin is a byte buffer, not aligned for the struct. */
		memcpy(&msg, s->rin, sizeof(msg));
		rc = handle_message(s, &msg, s->rin_fd);
		s->rin_len = 0;
		s->rin_fd = -1;
		s->ann_read++;
		if (rc)
			return rc;
	}
}

static int remote_poll(struct shm_comm *s)
{
	if (atomic_load_explicit(&s->ctrl->announced, memory_order_acquire) == s->ann_read)
		return SM_OK;
	return remote_drain(s);
}

int remote_lookup(struct shm_comm *s, uint32_t id, struct remote_alloc **out, int *later)
{
	struct remote_region *rr = remote_find(s, id);

	*out = NULL;
	*later = 0;
	if (!rr && !s->drained_for_miss) {
		/* Announced before the receive was posted, so on the socket:
		 * the step reads it, and a miss after that read fails. */
		s->want_drain = 1;
		s->comm.step_wanted = 1;
		*later = 1;
		return SM_OK;
	}
	s->drained_for_miss = 0;
	/* Withdrawn: kept only for the copies already queued into it. */
	if (rr && !rr->dying)
		*out = rr->alloc;
	return SM_OK;
}

static enum remote_state ask(struct shm_comm *s, int *want)
{
	*want = 1;
	s->setup_wanted = 1;
	s->comm.step_wanted = 1;
	return REMOTE_ASK;
}

enum remote_state remote_helper_state(struct shm_comm *s, struct remote_alloc *a)
{
	if (a->hid || !smf_engine_helper_pid(s->comm.ce))
		return REMOTE_READY;
	if (a->helper_pending) {
		/* Only a progress step reads the answer, and a send connection
		 * with nothing in flight gets no test() that would run one. */
		s->comm.step_wanted = 1;
		return REMOTE_WAIT;
	}
	if (a->helper_tried)
		return REMOTE_READY;
	if (a->info.kind == SM_SHARE_POSIX_FD && a->fd < 0) {
		a->helper_tried = 1;	/* already imported here, fd consumed */
		return REMOTE_READY;
	}
	return ask(s, &a->want_helper);
}

enum remote_state remote_map_state(struct shm_comm *s, struct remote_alloc *a)
{
	return a->map ? REMOTE_READY : ask(s, &a->want_map);
}

static int remote_map(struct shm_comm *s, struct remote_alloc *a)
{
	int rc;

	a->want_map = 0;
	if (a->map)
		return SM_OK;
	rc = sm_import_get(s->comm.peer_pid, &a->info, a->fd, &a->map);
	a->fd = -1;		/* consumed either way */
	if (rc)
		return comm_fail(&s->comm, rc, "mapping the receiver's GPU buffer: %s", sm_last_error());
	return SM_OK;
}

/* The copy helper could not map `a`: its copies run in this process. */
static void helper_refused(struct shm_comm *s, const struct remote_alloc *a)
{
	if (helper_log_in_process(&s->comm))
		sm_info("receiver's buffer (allocation %#llx, %llu bytes) stays with in-process "
			"copies: %s%s", (unsigned long long)a->info.addr,
			(unsigned long long)a->info.alloc_size, sm_last_error(),
			helper_more_with_verbose(&s->comm));
}

/* Asks the helper to map `a` without waiting for its answer (a mapping
 * takes it tens of microseconds, and NCCL's progress thread serves every
 * connection); a socket that takes no request now leaves it for the next
 * step. */
static void helper_ask(struct shm_comm *s, struct remote_alloc *a)
{
	int posted = 0;

	a->add_t0 = sm_now_ns();
	if (smf_range_add_start(s->comm.ce, s->comm.peer_pid, &a->info, a->fd, &a->add, &posted)) {
		a->want_helper = 0;
		a->helper_tried = 1;
		helper_refused(s, a);
		return;
	}
	if (!posted)
		return;
	a->want_helper = 0;
	a->helper_tried = 1;
	a->helper_pending = 1;
	s->helper_pending++;
}

/* The helper's answer for `a`, if it came. */
static void helper_collect(struct shm_comm *s, struct remote_alloc *a, int *progressed)
{
	uint32_t hid = 0;
	int done = 0, rc;

	rc = smf_range_add_test(s->comm.ce, &a->add, &done, &hid);
	if (!done)
		return;
	a->helper_pending = 0;
	s->helper_pending--;
	*progressed = 1;
	if (rc) {
		helper_refused(s, a);
		return;
	}
	a->hid = hid;
	helper_log_range(&s->comm, "receive buffer", s->comm.peer_pid, &a->info, a->hid,
			 sm_now_ns() - a->add_t0);
}

/* One allocation's setup, once (several registrations share it). */
static int alloc_setup(struct shm_comm *s, struct remote_alloc *a, int *progressed)
{
	if (a->want_helper)
		helper_ask(s, a);
	if (a->helper_pending)
		helper_collect(s, a, progressed);
	if (!a->want_map)
		return SM_OK;
	*progressed = 1;
	return remote_map(s, a);
}

int remote_setup(struct shm_comm *s, int *progressed)
{
	int want = s->setup_wanted, rc;

	if (s->want_drain) {
		s->want_drain = 0;
		s->drained_for_miss = 1;
		*progressed = 1;
		rc = remote_drain(s);
	} else {
		rc = remote_poll(s);
	}
	if (rc || (!want && !s->helper_pending))
		return rc;
	s->setup_wanted = 0;
	for (unsigned i = 0; i < s->nremote; i++) {
		rc = alloc_setup(s, s->remote[i].alloc, progressed);
		if (rc)
			return rc;
	}
	if (s->want_stage) {
		stage_setup(s);
		*progressed = 1;
	}
	return SM_OK;
}

void remote_close_all(struct shm_comm *s)
{
	while (s->nremote > 0)
		remote_drop(s, &s->remote[s->nremote - 1]);
	free(s->remote);
	s->remote = NULL;
	s->remote_cap = 0;
	if (s->rin_fd >= 0)
		close(s->rin_fd);
	s->rin_fd = -1;
}

int remote_count(const struct tp_comm *c)
{
	return (int)shm_of(c)->nremote;
}
