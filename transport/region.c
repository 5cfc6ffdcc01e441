/* Registrations and how the sender learns about the receiver's.
 *
 * When the receiving end of a shared-memory connection registers GPU
 * memory, the allocation is exported, and announced on the connection's
 * Unix socket (cuMem memory: the fd rides along with SCM_RIGHTS) when the
 * first receive into it is posted, so the announcement always precedes
 * the first receive that names it and registering never waits for the
 * sender.  The receiver counts the messages it wrote in the shared header,
 * and the sender reads them whenever it moves data and the count moved,
 * so a withdrawn registration is unmapped promptly and the socket never
 * fills; a region is mapped on its first use. */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "internal.h"
#include "sock.h"

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
static void note_written(struct tp_comm *c, size_t n)
{
	c->ann_bytes += n;
	atomic_store_explicit(&c->ctrl->announced, c->ann_bytes / sizeof(struct wire_region),
			      memory_order_release);
}

/* Writes what the socket takes of the backlog now; the caller holds
 * ann_lock. */
static int backlog_push(struct tp_comm *c)
{
	while (c->aout_len) {
		ssize_t n = sm_send_some(c->fd, c->aout, c->aout_len, -1);

		if (n < 0)
			return comm_fail(c, SM_ERR_REMOTE, "announcing a registration: %s",
					 sm_last_error());
		if (n == 0)
			break;
		memmove(c->aout, c->aout + n, c->aout_len - (size_t)n);
		c->aout_len -= (size_t)n;
		note_written(c, (size_t)n);
	}
	atomic_store_explicit(&c->aout_waiting, c->aout_len != 0, memory_order_relaxed);
	return SM_OK;
}

/* Makes room for `n` more bytes in the backlog, up to BACKLOG_MAX: 0 when
 * there is room.  The caller holds ann_lock. */
static int backlog_reserve(struct tp_comm *c, size_t n)
{
	size_t cap;
	uint8_t *p;

	if (c->aout_len + n > BACKLOG_MAX)
		return -1;
	if (c->aout_len + n <= c->aout_cap)
		return 0;
	cap = c->aout_cap ? 2 * c->aout_cap : 64 * sizeof(struct wire_region);
	while (cap < c->aout_len + n)
		cap *= 2;
	p = realloc(c->aout, cap);
	if (!p)
		return -1;
	c->aout = p;
	c->aout_cap = cap;
	return 0;
}

/* Writes the region's message with its export fd, once the messages
 * before it are out.  A message the socket takes only in part has passed
 * its fd already; the rest waits in the backlog. */
static int announce_now(struct tp_comm *c, struct tp_region *r)
{
	size_t len = sizeof(r->ann_msg);
	ssize_t n;

	if (c->aout_len)
		return SM_OK;
	n = sm_send_some(c->fd, &r->ann_msg, len, r->ann_fd);
	if (n < 0)
		return comm_fail(c, SM_ERR_REMOTE, "announcing a registration: %s",
				 sm_last_error());
	if (n == 0)
		return SM_OK;
	r->ann_pending = 0;
	note_written(c, (size_t)n);
	if ((size_t)n == len)
		return SM_OK;
	if (backlog_reserve(c, len - (size_t)n))
		return comm_fail(c, SM_ERR_SYSTEM, "out of memory for a registration message");
	memcpy(c->aout, (const uint8_t *)&r->ann_msg + n, len - (size_t)n);
	c->aout_len = len - (size_t)n;
	return backlog_push(c);
}

int region_announce(struct tp_comm *c, struct tp_region *r, int *ready)
{
	uint64_t now;
	int rc;

	*ready = 0;
	pthread_mutex_lock(&c->ann_lock);
	rc = backlog_push(c);
	if (!rc && r->ann_pending)
		rc = announce_now(c, r);
	/* Whole on the socket (with whatever preceded it) before a receive
	 * names it: the sender looks a region up when it sees the receive. */
	if (!rc && !r->ann_pending && !c->aout_len)
		*ready = 1;
	pthread_mutex_unlock(&c->ann_lock);
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

int region_withdraw(struct tp_comm *c, struct tp_region *r)
{
	struct wire_region msg;
	int rc = SM_OK;

	memset(&msg, 0, sizeof(msg));
	msg.magic = REGION_MAGIC;
	msg.op = REGION_DEL;
	msg.id = r->id;
	pthread_mutex_lock(&c->ann_lock);
	if (r->ann_pending) {
		/* Never announced: the sender has nothing to forget. */
		r->ann_pending = 0;
	} else if (!backlog_reserve(c, sizeof(msg))) {
		memcpy(c->aout + c->aout_len, &msg, sizeof(msg));
		c->aout_len += sizeof(msg);
		rc = backlog_push(c);
	} else if (!c->aout_dropped++) {
		sm_info("the sender has not read %zu bytes of registration messages; further "
			"deregistrations reach it when the connection closes", c->aout_len);
	}
	pthread_mutex_unlock(&c->ann_lock);
	return rc;
}

void region_push_backlog(struct tp_comm *c)
{
	if (!atomic_load_explicit(&c->aout_waiting, memory_order_relaxed))
		return;
	/* NCCL's service thread may be writing an announcement: it pushes
	 * the backlog itself, so this data-path call never waits for it. */
	if (pthread_mutex_trylock(&c->ann_lock) != 0)
		return;
	backlog_push(c);
	pthread_mutex_unlock(&c->ann_lock);
}

/* Exports the allocation holding [ptr, ptr + r->size) (NCCL's buffer, or
 * its staging-pool piece) and readies the message that tells the sender
 * about it; the first receive into the region writes it (region_announce). */
static int prepare_announcement(struct tp_comm *c, struct tp_region *r, const void *ptr)
{
	struct wire_region *msg = &r->ann_msg;
	int rc;

	memset(msg, 0, sizeof(*msg));
	msg->magic = REGION_MAGIC;
	msg->op = REGION_ADD;
	msg->id = r->id;
	r->ann_fd = -1;
	rc = sm_export_get(ptr, r->size, &r->exp, &msg->info, &r->offset, &r->ann_fd);
	if (rc)
		return rc;
	pthread_mutex_lock(&c->ann_lock);
	r->ann_pending = 1;
	pthread_mutex_unlock(&c->ann_lock);
	return SM_OK;
}

/* A receive buffer the sender cannot be given (not exportable, or
 * NCCL_ZERO_COPY=0) is shadowed by a staging-pool piece: the sender
 * writes the piece and the receiver copies each message on. */
static int receiver_announce(struct tp_comm *c, struct tp_region *r)
{
	char why[256];
	int rc;

	if (c->zero_copy) {
		rc = prepare_announcement(c, r, (void *)r->base);
		if (!rc || c->failed)
			return rc;
		snprintf(why, sizeof(why), "%s", sm_last_error());
	} else {
		snprintf(why, sizeof(why), "NCCL_ZERO_COPY=0");
	}
	rc = shadow_open(c, r, why);
	if (rc)
		return rc;
	rc = prepare_announcement(c, r, r->shadow);
	if (rc)
		shadow_close(r);
	return rc;
}

/* NCCL_SM_FREE_VERBOSE: where each allocation the helper maps sits in its
 * owner, so the spacing of NCCL's per-channel buffers can be read off, and
 * how long NCCL's thread waited for the helper's answer (`ns`): the helper
 * maps the allocation first, so a peer's new buffer costs its first send
 * that much. */
static void log_range(const struct tp_comm *c, const char *what, int owner,
		      const struct sm_share_info *info, uint32_t hid, uint64_t ns)
{
	if (c->verbose && hid)
		sm_info("copy helper range %u: %s of pid %d at %#llx, %llu bytes, answered in "
			"%.0f us", hid, what, owner, (unsigned long long)info->addr,
			(unsigned long long)info->alloc_size, (double)ns / 1e3);
}

int region_to_own_helper(struct tp_comm *c, const void *ptr, size_t size, struct sm_export **exp,
			 uint64_t *offset, uint32_t *hid)
{
	struct sm_share_info info;
	uint64_t t0 = 0;
	int fd = -1, rc;

	*hid = 0;
	*exp = NULL;
	rc = sm_export_get(ptr, size, exp, &info, offset, &fd);
	if (!rc) {
		t0 = sm_now_ns();
		rc = smf_range_add(c->ce, getpid(), &info, fd, hid);
	}
	if (!rc)
		log_range(c, c->is_send ? "send buffer" : "receive buffer", getpid(), &info, *hid,
			  sm_now_ns() - t0);
	if (rc && *exp) {
		sm_export_put(*exp);
		*exp = NULL;
	}
	return rc;
}

/* NCCL registers buffers the helper cannot map on every connection (on
 * 4 x H200, 512 KiB ones in memory without a shareable handle: the size of
 * its LL buffers, which the default NCCL_PROTO=^LL leaves unused), about 40
 * per rank: one line per process says so, NCCL_SM_FREE_VERBOSE=1 shows
 * each. */
static atomic_int in_process_logged;

static int log_in_process(const struct tp_comm *c)
{
	return c->verbose || !atomic_exchange(&in_process_logged, 1);
}

static const char *more_with_verbose(const struct tp_comm *c)
{
	return c->verbose ? "" : " (further buffers that stay are logged with NCCL_SM_FREE_VERBOSE=1)";
}

/* A buffer this process's copy engine reads or writes is exported to its
 * own copy helper, so copies need no CUDA call here: a sender's buffer on
 * one host, either side's GPU buffer over TCP (the bounce slots).  Memory
 * that cannot be exported (a stream-ordered pool, cuMem without a
 * shareable handle, cudaHostAlloc memory) is still fine: its copies run in
 * this process. */
static void own_buffer_to_helper(struct tp_comm *c, struct tp_region *r)
{
	if (region_to_own_helper(c, (void *)r->base, r->size, &r->exp, &r->offset, &r->hid)) {
		if (log_in_process(c))
			sm_info("%s buffer %p (%zu bytes) stays with in-process copies: %s%s",
				c->is_send ? "send" : "receive", (void *)r->base, r->size,
				sm_last_error(), more_with_verbose(c));
		return;
	}
	r->ce = c->ce;
	smf_engine_hold(r->ce);
}

/* Everything a registration holds, also one that failed half way. */
static void region_release(struct tp_region *r)
{
	sm_export_put(r->exp);
	r->exp = NULL;
	if (r->hid)
		smf_range_del(r->ce, r->hid);
	r->hid = 0;
	/* After every export of the piece is gone: a trimmed segment's
	 * address may come back for a new one. */
	shadow_close(r);
	smf_engine_put(r->ce);
	r->ce = NULL;
	ib_region_release(r);
}

/* tp_register, and with `dmabuf_fd` >= 0 NCCL's DMA-BUF of the memory. */
static int region_register(struct tp_comm *c, void *data, size_t size, int mem, int dmabuf_fd,
			   uint64_t dmabuf_offset, struct tp_region **out)
{
	struct tp_region *r;
	int rc = SM_OK;

	*out = NULL;
	if (c->failed)
		return comm_broken(c);
	if (mem != TP_MEM_HOST && mem != TP_MEM_CUDA)
		return sm_fail(SM_ERR_INVALID, "unknown memory type %d", mem);
	if (mem == TP_MEM_CUDA && c->ops != &tp_ib_ops) {
		rc = comm_gpu_ready(c);
		if (rc)
			return rc;
	}
	r = calloc(1, sizeof(*r));
	if (!r)
		return sm_fail(SM_ERR_SYSTEM, "out of memory registering %zu bytes", size);
	r->comm = c;
	r->comm_serial = c->serial;
	r->base = (uintptr_t)data;
	r->size = size;
	r->mem = mem;
	/* GPU memory is written by the peer's copy engine, in place or into
	 * its staging-pool shadow; anything else arrives through the ring
	 * (host bounce). */
	if (mem == TP_MEM_CUDA && !c->is_send && c->ops == &tp_shm_ops && !c->no_direct) {
		r->id = ++c->next_region;
		rc = receiver_announce(c, r);
	}
	/* Host buffers too: NCCL's LL buffers live in host memory, and when it
	 * allocates them with cuMem (NCCL_CUMEM_HOST_ENABLE) they export like
	 * GPU memory, so even those copies leave this process. */
	if (c->is_send && c->ops == &tp_shm_ops && smf_engine_helper_pid(c->ce))
		own_buffer_to_helper(c, r);
	/* Over TCP the copies run between the buffer and this side's bounce
	 * slots, on either side. */
	if (mem == TP_MEM_CUDA && c->ops == &tp_tcp_ops && smf_engine_helper_pid(c->ce))
		own_buffer_to_helper(c, r);
	if (c->ops == &tp_ib_ops)
		rc = ib_region_register(c, r, dmabuf_fd, dmabuf_offset);
	if (rc) {
		region_release(r);
		free(r);
		return rc;
	}
	*out = r;
	return SM_OK;
}

int tp_register(struct tp_comm *c, void *data, size_t size, int mem, struct tp_region **out)
{
	return region_register(c, data, size, mem, -1, 0, out);
}

int tp_register_dmabuf(struct tp_comm *c, void *data, size_t size, int fd, uint64_t offset,
		       struct tp_region **out)
{
	return region_register(c, data, size, TP_MEM_CUDA, fd, offset, out);
}

void tp_deregister(struct tp_comm *c, struct tp_region *r)
{
	if (!r)
		return;
	/* An announced registration (id != 0) is forgotten by the peer too;
	 * best effort: after a failure, or once the connection is closed
	 * (c == NULL), the sender unmaps at its own close.  Only through the
	 * comm it was announced on: after an abort NCCL may deregister once
	 * that comm is closed and another sits at its address, whose peer
	 * would drop a live registration of the same id. */
	if (c && c->serial != r->comm_serial)
		c = NULL;
	if (r->id && r->exp && c && !c->failed)
		region_withdraw(c, r);
	region_release(r);
	free(r);
}

int tp_region_covers(const struct tp_region *r, const void *data, size_t size)
{
	uintptr_t p = (uintptr_t)data;

	return p >= r->base && size <= r->size && p - r->base <= r->size - size;
}

/* The receiver's registrations the sender keeps on one connection at
 * most.  Each may hold the descriptor of the receiver's export until it is
 * mapped; NCCL registers a few buffers per connection (more with
 * ncclCommRegister), so a peer past this is broken or hostile.  The limit
 * is also a quarter of RLIMIT_NOFILE's soft limit at most (256 at the
 * common 1024): one connection never takes the process's last descriptors,
 * whatever its peer announces. */
#define REMOTE_MAX 4096u

static unsigned remote_limit(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY ||
	    rl.rlim_cur / 4 >= REMOTE_MAX)
		return REMOTE_MAX;
	return rl.rlim_cur < 4 ? 1 : (unsigned)(rl.rlim_cur / 4);
}

static struct remote_region *remote_find(struct tp_comm *c, uint32_t id)
{
	for (unsigned i = 0; i < c->nremote; i++)
		if (c->remote[i].id == id)
			return &c->remote[i];
	return NULL;
}

/* Registrations of one allocation come with the same description (the
 * receiver exports each allocation once): they share one descriptor, one
 * mapping and one copy-helper range here. */
static struct remote_alloc *alloc_find(struct tp_comm *c, const struct sm_share_info *info)
{
	for (unsigned i = 0; i < c->nremote; i++)
		if (!memcmp(&c->remote[i].alloc->info, info, sizeof(*info)))
			return c->remote[i].alloc;
	return NULL;
}

static void alloc_put(struct tp_comm *c, struct remote_alloc *a)
{
	if (--a->refs)
		return;
	/* Leaked on purpose after copies into them were given up
	 * (tp_close): a late copy must find its target still mapped. */
	if (a->hid && !c->keep_mappings)
		smf_range_del(c->ce, a->hid);
	if (a->fd >= 0)
		close(a->fd);
	if (!c->keep_mappings)
		sm_import_put(a->map);
	free(a);
}

static void remote_drop(struct tp_comm *c, struct remote_region *rr)
{
	alloc_put(c, rr->alloc);
	if (rr->dying)
		c->remote_dying--;
	*rr = c->remote[--c->nremote];
}

/* Whether a send still queued copies into the peer's registration `id`. */
static int remote_busy(const struct tp_comm *c, uint32_t id)
{
	for (unsigned i = 0; i < c->q_count; i++) {
		const struct tp_req *r = c->queue[(c->q_head + i) % TP_MAX_REQUESTS];

		if (r->direct && r->region == id)
			return 1;
	}
	return 0;
}

/* The peer withdrew `rr` (after an abort NCCL deregisters with receives
 * in flight).  A queued send may still be copying into it: in this
 * process, unmapping it now would let that copy fault and poison the
 * CUDA context every later copy needs (the copy helper defers its unmap
 * for the same reason, copyd.c).  Such a registration is only marked and
 * goes when the last of those sends lands (region_landed) or at close,
 * which waits for their copies or keeps the mapping. */
static void remote_withdrawn(struct tp_comm *c, struct remote_region *rr)
{
	if (!remote_busy(c, rr->id)) {
		remote_drop(c, rr);
		return;
	}
	rr->dying = 1;
	c->remote_dying++;
}

void region_landed(struct tp_comm *c, uint32_t id)
{
	struct remote_region *rr;

	if (!c->remote_dying)
		return;
	rr = remote_find(c, id);
	if (rr && rr->dying && !remote_busy(c, id))
		remote_drop(c, rr);
}

/* What a receiver of ours announces: cuMem exports with their descriptor,
 * legacy IPC handles without one, never an empty allocation.  A process
 * out of descriptors receives an announcement without its descriptor too
 * (the kernel drops what it cannot install), hence the hint. */
static int check_add(struct tp_comm *c, const struct wire_region *msg, int fd)
{
	const struct sm_share_info *info = &msg->info;

	if (info->kind != SM_SHARE_POSIX_FD && info->kind != SM_SHARE_LEGACY_IPC)
		return comm_fail(c, SM_ERR_REMOTE, "peer announced registration %u of unknown "
				 "kind %u", msg->id, info->kind);
	if (info->kind == SM_SHARE_POSIX_FD && fd < 0)
		return comm_fail(c, SM_ERR_REMOTE, "peer announced registration %u without its "
				 "descriptor (or this process is out of descriptors: RLIMIT_NOFILE)",
				 msg->id);
	if (info->kind == SM_SHARE_LEGACY_IPC && fd >= 0)
		return comm_fail(c, SM_ERR_REMOTE, "peer announced registration %u, a legacy IPC "
				 "handle, with a descriptor", msg->id);
	if (info->alloc_size == 0)
		return comm_fail(c, SM_ERR_REMOTE, "peer announced registration %u of an empty "
				 "allocation", msg->id);
	if (remote_find(c, msg->id))
		return comm_fail(c, SM_ERR_REMOTE, "peer announced registration %u twice", msg->id);
	if (c->nremote >= remote_limit())
		return comm_fail(c, SM_ERR_REMOTE, "peer announced more than %u registrations on "
				 "one connection, the most the sender keeps (the lower of %u and a "
				 "quarter of RLIMIT_NOFILE)", remote_limit(), REMOTE_MAX);
	return SM_OK;
}

/* Takes `fd` (the peer's export, or -1): kept with the registration's
 * allocation, or closed when the announcement is refused or the
 * allocation is known already, since an export fd left open would pin the
 * peer's GPU memory until this process exits. */
static int remote_add(struct tp_comm *c, const struct wire_region *msg, int fd)
{
	struct remote_alloc *a;
	struct remote_region *rr;
	int rc;

	rc = check_add(c, msg, fd);
	if (rc)
		goto refuse;
	if (c->nremote == c->remote_cap) {
		unsigned cap = c->remote_cap ? 2 * c->remote_cap : 8;
		struct remote_region *n = realloc(c->remote, cap * sizeof(*n));

		if (!n)
			goto no_memory;
		c->remote = n;
		c->remote_cap = cap;
	}
	a = alloc_find(c, &msg->info);
	if (a) {
		if (fd >= 0)
			close(fd);
	} else {
		a = calloc(1, sizeof(*a));
		if (!a)
			goto no_memory;
		a->info = msg->info;
		a->fd = fd;
	}
	a->refs++;
	rr = &c->remote[c->nremote++];
	memset(rr, 0, sizeof(*rr));
	rr->id = msg->id;
	rr->alloc = a;
	return SM_OK;
no_memory:
	rc = comm_fail(c, SM_ERR_SYSTEM, "out of memory for peer registrations");
refuse:
	if (fd >= 0)
		close(fd);
	return rc;
}

/* A withdrawal names a registration the receiver announced and has not
 * withdrawn yet; the receiver never sends another. */
static int remote_del(struct tp_comm *c, const struct wire_region *msg, int fd)
{
	struct remote_region *rr = remote_find(c, msg->id);

	if (fd >= 0)
		close(fd);
	if (!rr || rr->dying)
		return comm_fail(c, SM_ERR_REMOTE, "peer withdrew registration %u, which it never "
				 "announced or already withdrew", msg->id);
	remote_withdrawn(c, rr);
	return SM_OK;
}

static int handle_message(struct tp_comm *c, const struct wire_region *msg, int fd)
{
	if (msg->magic != REGION_MAGIC || (msg->op != REGION_ADD && msg->op != REGION_DEL) ||
	    msg->id == 0) {
		if (fd >= 0)
			close(fd);
		return comm_fail(c, SM_ERR_REMOTE, "malformed registration message from the peer");
	}
	if (msg->op == REGION_ADD)
		return remote_add(c, msg, fd);
	return remote_del(c, msg, fd);
}

/* Reads every complete announcement waiting on the socket. */
int region_drain(struct tp_comm *c)
{
	struct wire_region msg;

	for (;;) {
		int fd = -1, rc;
		ssize_t n = sm_recv_some(c->fd, c->rin + c->rin_len, sizeof(c->rin) - c->rin_len,
					   &fd);

		/* A receiver that closed after its last whole message: its
		 * receives posted before are still served, and the liveness
		 * check fails the first send it never posted a receive for. */
		if (n < 0 && c->rin_len == 0)
			return SM_OK;
		if (n < 0)
			return comm_fail(c, SM_ERR_REMOTE, "receiving peer: %s", sm_last_error());
		if (fd >= 0) {
			if (c->rin_fd >= 0)
				close(c->rin_fd);
			c->rin_fd = fd;
		}
		if (n == 0)
			return SM_OK;
		c->rin_len += (size_t)n;
		if (c->rin_len < sizeof(c->rin))
			continue;
		/* Copied out: rin is a byte buffer, not aligned for the struct. */
		memcpy(&msg, c->rin, sizeof(msg));
		rc = handle_message(c, &msg, c->rin_fd);
		c->rin_len = 0;
		c->rin_fd = -1;
		c->ann_read++;
		if (rc)
			return rc;
	}
}

int region_poll(struct tp_comm *c)
{
	if (atomic_load_explicit(&c->ctrl->announced, memory_order_acquire) == c->ann_read)
		return SM_OK;
	return region_drain(c);
}

int region_lookup(struct tp_comm *c, uint32_t id, struct remote_alloc **out)
{
	struct remote_region *rr;
	int rc;

	*out = NULL;
	rr = remote_find(c, id);
	if (!rr) {
		rc = region_drain(c);
		if (rc)
			return rc;
		rr = remote_find(c, id);
	}
	/* Withdrawn: kept only for the copies already queued into it. */
	if (rr && !rr->dying)
		*out = rr->alloc;
	return SM_OK;
}

int region_map(struct tp_comm *c, struct remote_alloc *a)
{
	int rc;

	if (a->map)
		return SM_OK;
	rc = sm_import_get(c->peer_pid, &a->info, a->fd, &a->map);
	a->fd = -1;		/* consumed either way */
	if (rc)
		return comm_fail(c, rc, "mapping the receiver's GPU buffer: %s", sm_last_error());
	return SM_OK;
}

void region_to_helper(struct tp_comm *c, struct remote_alloc *a)
{
	uint64_t t0;

	if (a->hid || a->helper_tried || !smf_engine_helper_pid(c->ce))
		return;
	a->helper_tried = 1;
	if (a->info.kind == SM_SHARE_POSIX_FD && a->fd < 0)
		return;		/* already imported here, fd consumed */
	t0 = sm_now_ns();
	if (!smf_range_add(c->ce, c->peer_pid, &a->info, a->fd, &a->hid)) {
		log_range(c, "receive buffer", c->peer_pid, &a->info, a->hid, sm_now_ns() - t0);
		return;
	}
	if (log_in_process(c))
		sm_info("receiver's buffer (allocation %#llx, %llu bytes) stays with in-process "
			"copies: %s%s", (unsigned long long)a->info.addr,
			(unsigned long long)a->info.alloc_size, sm_last_error(), more_with_verbose(c));
}

void region_close_all(struct tp_comm *c)
{
	while (c->nremote > 0)
		remote_drop(c, &c->remote[c->nremote - 1]);
	free(c->remote);
	c->remote = NULL;
	c->remote_cap = 0;
	if (c->rin_fd >= 0)
		close(c->rin_fd);
	c->rin_fd = -1;
	free(c->aout);
	c->aout = NULL;
	c->aout_len = c->aout_cap = 0;
}

int tp_remote_region_count(const struct tp_comm *c)
{
	return (int)c->nremote;
}
