/* GPU buffers over TCP: a few pinned host slots between the copy engine
 * and the socket, so that copies and socket writes overlap.
 *
 * A send copies its GPU bytes into the slots as soon as it is posted (one
 * cuMemcpyAsync per slot, tested by event) and the socket drains the
 * oldest slot once its copy landed; a receive fills a slot from the socket
 * and copies it up while the next slot fills.  Slots are used in posting
 * order, so the oldest slot always holds the next bytes of the message at
 * the socket.  Before this the bounce was one synchronous copy per 4 MiB
 * through pageable memory, and the socket waited for every copy.
 *
 * Where the process has a copy helper, the slots are a shared memfd the
 * helper maps too, and copies between them and a GPU buffer the helper
 * knows run there: a copy issued from NCCL's progress thread waits for a
 * driver lock that cuGraphLaunch holds while CUDA-graph replays queue up,
 * and those replays wait for this very copy (200 replays queued over TCP
 * hung; bench/results/tcp.md).  The helper issues short receive copies as
 * 2D copies, which do not wait for NCCL's kernel's time slice
 * (CD_SMALL_HOST). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "tcp.h"
#include "sock.h"
#include "symmem.h"

/* Four 1 MiB slots: NCCL's steps between hosts are 512 KiB (2 MiB with the
 * plugin's intra-host NCCL_BUFFSIZE), and 4 MiB per connection is what the
 * synchronous bounce used. */
#define SLOTS 4
#define SLOT_BYTES (1ull << 20)
#define BOUNCE_BYTES (SLOTS * SLOT_BYTES)

enum slot_state {
	SLOT_FILLING = 0,	/* receive: taking bytes from the socket, or holding
				 * them while no engine event is free */
	SLOT_COPYING,		/* its copy is in flight */
	SLOT_LANDED,		/* its copy landed, its events are back in the pool */
};

struct slot {
	struct tp_req *req;
	int state;		/* enum slot_state */
	uint64_t len;		/* bytes it holds (receive: read so far) */
	uint64_t sent;		/* send: bytes of it on the wire */
	uint64_t dst_off;	/* receive: where in req->buf it goes */
	uint64_t start_ns;	/* when its copy started, or (receive) it became
				 * complete and waits for an engine event */
	struct smf_copy copy;
};

struct tcp_bounce {
	uint8_t *mem;		/* BOUNCE_BYTES */
	uint32_t hid;		/* the copy helper's name for mem (a shared memfd), or 0 */
	int pinned;		/* registered with the driver ... */
	CUcontext ctx;		/* ... in this context */
	unsigned head, count;	/* slots in use, oldest first */
	struct slot slot[SLOTS];
	struct tcp_bounce *parked_next;
};

/* Bounce buffers a close could not free (a copy may still read or write
 * them, or the driver would not unpin them): kept for the life of the
 * process, listed so that they stay reachable, which is what they are,
 * parked rather than lost (LeakSanitizer reports them otherwise). */
static struct tcp_bounce *parked;
static pthread_mutex_t parked_lock = PTHREAD_MUTEX_INITIALIZER;

static void park(struct tcp_bounce *b)
{
	pthread_mutex_lock(&parked_lock);
	b->parked_next = parked;
	parked = b;
	pthread_mutex_unlock(&parked_lock);
}

static uint8_t *slot_mem(const struct tcp_bounce *b, const struct slot *s)
{
	return b->mem + (uint64_t)(s - b->slot) * SLOT_BYTES;
}

static struct slot *slot_at(struct tcp_bounce *b, unsigned i)
{
	return &b->slot[(b->head + i) % SLOTS];
}

static struct slot *oldest(struct tcp_bounce *b)
{
	return b->count ? slot_at(b, 0) : NULL;
}

static struct slot *newest(struct tcp_bounce *b)
{
	return b->count ? slot_at(b, b->count - 1) : NULL;
}

static struct slot *slot_take(struct tcp_bounce *b, struct tp_req *r)
{
	struct slot *s;

	if (b->count == SLOTS)
		return NULL;
	s = slot_at(b, b->count);
	memset(s, 0, sizeof(*s));
	s->req = r;
	b->count++;
	return s;
}

/* Gives back the slot slot_take() just gave, unused. */
static void slot_untake(struct tcp_bounce *b)
{
	b->count--;
}

static void slot_release(struct tcp_bounce *b)
{
	b->head = (b->head + 1) % SLOTS;
	b->count--;
}

/* Receive: the slot holds all it will (full, or the message's end). */
static int slot_complete(const struct slot *s)
{
	return s->len == SLOT_BYTES || s->dst_off + s->len == s->req->msg_size;
}

/* One end of a slot's copy: the helper's name and offset (hid 0: not
 * known there) and the address in this process. */
struct side {
	uint32_t hid;
	uint64_t off;
	uint8_t *ptr;
};

static struct side slot_side(const struct tcp_bounce *b, const struct slot *s)
{
	uint8_t *p = slot_mem(b, s);

	return (struct side){ .hid = b->hid, .off = (uint64_t)(p - b->mem), .ptr = p };
}

/* `at` bytes into a message whose buffer the helper names (hid, off). */
static struct side msg_side(uint32_t hid, uint64_t off, uint8_t *buf, uint64_t at)
{
	return (struct side){ .hid = hid, .off = off + at, .ptr = buf + at };
}

/* Starts a slot's copy, in the copy helper when it knows both ends, else
 * in this process: *started = 0 when no engine event is free. */
static int slot_copy(struct tp_comm *c, struct slot *s, struct side dst, struct side src,
		     int *started)
{
	int rc;

	if (dst.hid && src.hid)
		rc = smf_copy_start_ranges(c->ce, dst.hid, dst.off, src.hid, src.off, s->len,
					   &s->copy, started);
	else
		rc = smf_copy_start(c->ce, dst.ptr, src.ptr, s->len, &s->copy, started);
	if (rc)
		return comm_fail(c, rc, "%s", sm_last_error());
	if (*started) {
		s->state = SLOT_COPYING;
		s->start_ns = sm_now_ns();
		c->stats.slot_copies++;
		c->stats.slot_local += !(dst.hid && src.hid);
	}
	return SM_OK;
}

void bounce_name(const struct tp_region *reg, const void *ptr, uint32_t *hid, uint64_t *off)
{
	const struct tcp_region *r = reg ? tcp_region_of(reg) : NULL;

	*hid = 0;
	*off = 0;
	if (!r || !r->own.hid)
		return;
	*hid = r->own.hid;
	*off = r->own.offset + ((uintptr_t)ptr - reg->base);
}

/* Tests every slot in flight, not only the oldest: a landed copy gives its
 * events back to the pool that every connection of the GPU shares at once,
 * so no slot waits for an event another slot of its own holds.  A copy in
 * flight, or a complete slot still waiting for an event, fails the
 * connection after the copy limit (NCCL_SYMMEM_COPY_TIMEOUT). */
static int slots_test(struct tp_comm *c)
{
	struct tcp_comm *t = tcp_of(c);
	struct tcp_bounce *b = t->bounce;

	for (unsigned i = 0; i < b->count; i++) {
		struct slot *s = slot_at(b, i);
		int done = 0, rc;

		if (s->state == SLOT_COPYING) {
			rc = smf_copy_test(c->ce, &s->copy, &done);
			if (rc)
				return comm_fail(c, rc, "%s", sm_last_error());
			if (done) {
				s->state = SLOT_LANDED;
				continue;
			}
		} else if (s->state != SLOT_FILLING || !s->start_ns) {
			continue;	/* landed, or still taking bytes */
		}
		rc = comm_copy_overdue(c, s->start_ns, s->len,
				       s->state == SLOT_COPYING ?
				       "between GPU memory and the TCP bounce buffer" :
				       "between GPU memory and the TCP bounce buffer, waiting for a "
				       "free copy slot,");
		if (rc)
			return rc;
	}
	return SM_OK;
}

/* The slots as a shared memfd the copy helper maps; b->mem stays NULL
 * (plain memory instead) when the helper will not take it. */
static void slots_to_helper(struct tp_comm *c, struct tcp_bounce *b)
{
	struct sm_share_info info;
	uint8_t *mem;
	int fd, rc;

	memset(&info, 0, sizeof(info));
	rc = host_memfd_open("symmem-tcp-bounce", BOUNCE_BYTES, &info, &fd, &mem);
	if (!rc) {
		rc = smf_range_add(c->ce, getpid(), &info, fd, &b->hid);
		close(fd);	/* the helper holds its own */
		if (!rc && b->hid) {
			b->mem = mem;
			if (c->verbose)
				sm_info("TCP connection %p: the copy helper maps its bounce slots "
					"(range %u)", (void *)c, b->hid);
			return;
		}
		munmap(mem, BOUNCE_BYTES);
		b->hid = 0;
	}
	sm_info("TCP connection %p: the copy helper cannot map its bounce slots, their copies "
		"run in NCCL's process: %s", (void *)c, rc ? sm_last_error() : "no name given");
}

/* Called where connections are set up (NCCL's service thread): pinning
 * memory there cannot stall NCCL's progress thread.  The slots are pinned
 * here too, for copies the helper cannot make (a GPU buffer it cannot
 * map).  Memory the driver will not pin still works, only slower (its
 * copies are synchronous). */
int bounce_open(struct tp_comm *c)
{
	struct tcp_comm *t = tcp_of(c);
	const struct sm_cuda_api *cu = sm_cu();
	struct tcp_bounce *b = calloc(1, sizeof(*b));
	CUresult crc = CUDA_ERROR_NOT_INITIALIZED;

	if (!b)
		return sm_fail(SM_ERR_SYSTEM, "out of memory for a TCP bounce buffer");
	if (smf_engine_helper_pid(c->ce))
		slots_to_helper(c, b);
	if (!b->mem && posix_memalign((void **)&b->mem, 4096, BOUNCE_BYTES)) {
		free(b);
		return sm_fail(SM_ERR_SYSTEM, "out of memory for a %llu-byte TCP bounce buffer",
			       BOUNCE_BYTES);
	}
	if (cu && cu->ctx_get_current(&b->ctx) == CUDA_SUCCESS && b->ctx)
		crc = cu->mem_host_register(b->mem, BOUNCE_BYTES,
					    CU_MEMHOSTREGISTER_PORTABLE);
	b->pinned = crc == CUDA_SUCCESS;
	if (!b->pinned)
		sm_info("TCP connection %p: the driver would not pin its bounce buffer (error %d); "
			"its GPU copies %s", (void *)c, (int)crc,
			b->hid ? "outside the copy helper run from pageable memory" :
			"run from pageable memory");
	t->bounce = b;
	return SM_OK;
}

/* Unpins in the context that pinned: closes come from whichever thread
 * NCCL closes on.  Memory still pinned is never freed (a later allocation
 * at the same address could not be pinned again). */
static int bounce_unpin(struct tcp_bounce *b)
{
	const struct sm_cuda_api *cu = sm_cu();
	CUcontext prev = NULL;
	CUresult crc;

	if (!b->pinned)
		return 0;
	cu->ctx_get_current(&prev);
	cu->ctx_set_current(b->ctx);
	crc = cu->mem_host_unregister(b->mem);
	cu->ctx_set_current(prev);
	if (crc == CUDA_SUCCESS)
		return 0;
	sm_warn("closing a TCP connection: the driver would not unpin its %llu-byte bounce "
		"buffer (error %d); it stays allocated", BOUNCE_BYTES, (int)crc);
	return -1;
}

/* Waits for the slots' copies under one deadline.  A copy that did not
 * land may still read or write the slots, so they are then kept, never
 * freed or unpinned. */
void bounce_close(struct tp_comm *c)
{
	struct tcp_comm *t = tcp_of(c);
	struct tcp_bounce *b = t->bounce;
	uint64_t limit = comm_close_deadline(c);
	unsigned stuck = 0;

	if (!b)
		return;
	t->bounce = NULL;
	for (unsigned i = 0; i < b->count; i++) {
		struct slot *s = slot_at(b, i);

		if (s->state == SLOT_COPYING && smf_copy_wait_until(c->ce, &s->copy, limit))
			stuck++;
	}
	if (stuck) {
		sm_warn("closing a TCP connection: %u bounce copy(ies) failed or did not land "
			"within %g s (none once a copy was overdue); its %llu-byte bounce buffer "
			"stays allocated", stuck,
			c->copy_limit_ns / 1e9, BOUNCE_BYTES);
		park(b);
		return;
	}
	/* The helper lets go first: its copies have landed. */
	if (b->hid)
		smf_range_del(c->ce, b->hid);
	if (bounce_unpin(b)) {
		park(b);
		return;
	}
	if (b->hid)
		munmap(b->mem, BOUNCE_BYTES);
	else
		free(b->mem);
	free(b);
}

/* Local work only: a slot still filling waits on the peer, not on us. */
int bounce_pending(const struct tp_comm *c)
{
	const struct tcp_comm *t = tcp_of(c);
	struct tcp_bounce *b = t->bounce;

	if (!b)
		return 0;
	for (unsigned i = 0; i < b->count; i++) {
		struct slot *s = slot_at(b, i);

		if (s->state != SLOT_FILLING || slot_complete(s))
			return 1;
	}
	return 0;
}

/* Sender: starts copies of the queued GPU sends into free slots, in
 * posting order, as far as slots and the engine's events allow. */
static int send_fill(struct tp_comm *c)
{
	struct tcp_comm *t = tcp_of(c);
	struct tcp_bounce *b = t->bounce;

	for (unsigned i = 0; i < c->q_count && b->count < SLOTS; i++) {
		struct tp_req *r = c->queue[(c->q_head + i) % TP_MAX_REQUESTS];
		struct tcp_req *q = tcp_req_of(r);

		while (r->src_dev && q->staged < r->size && b->count < SLOTS) {
			struct slot *s = slot_take(b, r);
			int started = 0, rc;

			s->len = min_u64(SLOT_BYTES, r->size - q->staged);
			rc = slot_copy(c, s, slot_side(b, s),
				       msg_side(q->src_hid, q->src_off, r->buf, q->staged), &started);
			if (rc || !started) {
				slot_untake(b);
				return rc;	/* none free: the next call tries again */
			}
			q->staged += s->len;
		}
	}
	return SM_OK;
}

/* Sender, on every progress call whatever the head message is: starts
 * what copies it can and collects landed ones, whose events other slots
 * and connections may be waiting for. */
int bounce_send_poll(struct tp_comm *c)
{
	int rc = send_fill(c);

	return rc ? rc : slots_test(c);
}

/* Sender: puts the head message's bytes on the wire from its slots, after
 * bounce_send_poll.  r->moved counts bytes written to the socket. */
int bounce_send(struct tp_comm *c, struct tp_req *r, int *progressed)
{
	struct tcp_comm *t = tcp_of(c);
	struct tcp_bounce *b = t->bounce;
	int rc = SM_OK;

	while (!rc && r->moved < r->size) {
		struct slot *s = oldest(b);
		ssize_t n;

		if (!s || s->state != SLOT_LANDED)
			break;	/* its copy has not started or not landed yet */
		if (s->req != r)
			return comm_fail(c, SM_ERR_INTERNAL, "TCP bounce slot holds message %llu, "
					 "expected %llu", (unsigned long long)s->req->seq,
					 (unsigned long long)r->seq);
		n = sm_send_some(c->fd, slot_mem(b, s) + s->sent, s->len - s->sent, -1);
		if (n < 0)
			return comm_fail(c, SM_ERR_REMOTE, "receiving peer: %s", sm_last_error());
		if (n == 0)
			break;
		s->sent += (uint64_t)n;
		r->moved += (uint64_t)n;
		*progressed = 1;
		if (s->sent == s->len) {
			slot_release(b);
			rc = send_fill(c);
		}
	}
	return rc;
}

/* Receiver: starts the copy of a slot that holds all it will, up into its
 * message; one that finds no event is timed from then (slots_test). */
static int recv_flush(struct tp_comm *c, struct slot *s, int *started)
{
	struct tcp_comm *t = tcp_of(c);
	const struct tcp_req *q = tcp_req_of(s->req);
	struct side dst = msg_side(q->dst_hid, q->dst_off, s->req->buf, s->dst_off);
	int rc = slot_copy(c, s, dst, slot_side(t->bounce, s), started);

	if (!rc && !*started && !s->start_ns)
		s->start_ns = sm_now_ns();
	return rc;
}

/* Receiver: reads the head message's payload into slots and copies each
 * up once it is full or holds the message's last byte.  A slot whose copy
 * found no free event is retried before any later slot is filled, so
 * copies start in slot order.  r->moved counts bytes taken off the wire;
 * its part's `landed` those copied up. */
int bounce_recv(struct tp_comm *c, struct tp_req *r, int *progressed)
{
	struct tcp_comm *t = tcp_of(c);
	struct tcp_bounce *b = t->bounce;

	while (r->moved < r->msg_size) {
		struct slot *s = newest(b);
		uint64_t want;
		ssize_t n;
		int started;

		if (s && s->state == SLOT_FILLING && slot_complete(s)) {
			int rc = recv_flush(c, s, &started);

			if (rc || !started)
				return rc;
		}
		if (s && s->state == SLOT_FILLING && s->req != r)
			return comm_fail(c, SM_ERR_INTERNAL, "TCP bounce slot of message %llu still "
					 "filling at message %llu", (unsigned long long)s->req->seq,
					 (unsigned long long)r->seq);
		if (!s || s->state != SLOT_FILLING) {
			s = slot_take(b, r);
			if (!s)
				break;	/* every slot is on its way up */
			s->dst_off = r->moved;
		}
		want = min_u64(SLOT_BYTES - s->len, r->msg_size - r->moved);
		n = tcp_recv(c, slot_mem(b, s) + s->len, want);
		if (n < 0)
			return comm_fail(c, SM_ERR_REMOTE, "sending peer: %s", sm_last_error());
		if (n == 0) {
			if (!s->len)
				slot_untake(b);
			break;
		}
		s->len += (uint64_t)n;
		r->moved += (uint64_t)n;
		*progressed = 1;
		if (slot_complete(s)) {
			int rc = recv_flush(c, s, &started);

			if (rc || !started)
				return rc;	/* none free: retried first next time */
		}
	}
	return SM_OK;
}

/* Receiver: collects landed copies, retries a copy that found no free
 * event, and completes messages whose last bytes landed, in order. */
int bounce_land(struct tp_comm *c, int *progressed)
{
	struct tcp_comm *t = tcp_of(c);
	struct tcp_bounce *b = t->bounce;
	struct slot *s = newest(b);
	int started, rc;

	rc = slots_test(c);
	if (!rc && s && s->state == SLOT_FILLING && slot_complete(s))
		rc = recv_flush(c, s, &started);
	while (!rc && (s = oldest(b)) != NULL && s->state == SLOT_LANDED) {
		struct tp_req *r = s->req;
		struct tcp_req *q = tcp_req_of(r);

		q->landed += s->len;
		slot_release(b);
		*progressed = 1;
		if (r->wire_done && q->landed == r->msg_size)
			r->done = 1;
	}
	return rc;
}

void bounce_describe(const struct tp_comm *c, char *buf, size_t len)
{
	const struct tcp_comm *t = tcp_of(c);
	struct tcp_bounce *b = t->bounce;
	unsigned copying = 0;

	if (!b) {
		snprintf(buf, len, "no bounce buffer");
		return;
	}
	for (unsigned i = 0; i < b->count; i++)
		copying += slot_at(b, i)->state == SLOT_COPYING;
	snprintf(buf, len, "bounce slots in use %u of %u (%u copying)", b->count, SLOTS, copying);
}
