/* The data path between hosts: messages over the TCP control connection.
 *
 * The receiver announces each posted receive (message number and capacity,
 * 16 bytes) so the sender can refuse an oversized send before any payload
 * moves; the sender answers with an 8-byte size header and the payload.
 * Everything is non-blocking and resumes where a short write or read
 * stopped.  A host payload leaves in the same call as its header, and the
 * receiver reads ahead (tcp_rx.c), so a small message costs one system call
 * on each side (loopback ping-pong of 8 bytes: about 20 -> 15 us one way,
 * test/mp/bench_pingpong).  GPU buffers go through pinned host slots,
 * copied by the copy engine while the socket moves the slot before
 * (tcp_bounce.c). */
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "tcp.h"
#include "sock.h"
#include "symmem.h"

/* GPU memory needs the bounce slots (tcp_bounce.c), which exist wherever
 * the connection has a copy engine. */
static int bounce_ready(struct tp_comm *c)
{
	struct tcp_comm *t = tcp_of(c);
	int rc = comm_engine(c);

	if (rc || t->bounce)
		return rc;
	return comm_fail(c, SM_ERR_INTERNAL, "GPU memory on a TCP connection without a "
			 "bounce buffer");
}

int tcp_parse_posts(struct tp_comm *c, const uint8_t *buf, size_t len, size_t *used)
{
	struct tcp_comm *t = tcp_of(c);

	for (*used = 0; len - *used >= 16; *used += 16) {
		uint64_t seq, size;

		memcpy(&seq, buf + *used, 8);
		memcpy(&size, buf + *used + 8, 8);
		if (seq != t->peer_posted)
			return comm_fail(c, SM_ERR_REMOTE,
					 "receiving peer announced message %llu, expected %llu",
					 (unsigned long long)seq, (unsigned long long)t->peer_posted);
		/* An honest receiver holds at most TP_MAX_REQUESTS receives, and
		 * each completes only after its send was posted here; one
		 * further ahead would overwrite a capacity still needed. */
		if (seq - c->posted >= TP_MAX_REQUESTS)
			return comm_fail(c, SM_ERR_REMOTE,
					 "receiving peer announced message %llu with %llu sent: more "
					 "than %d receives ahead", (unsigned long long)seq,
					 (unsigned long long)c->posted, TP_MAX_REQUESTS);
		t->peer_size[seq % TP_MAX_REQUESTS] = size;
		t->peer_posted++;
	}
	return SM_OK;
}

/* Sender: collect the receiver's announcements, as many as one read
 * brings.  A hang-up is only an error once an announcement is missing,
 * which the caller decides. */
static int tcp_read_posts(struct tp_comm *c, int *eof)
{
	struct tcp_comm *t = tcp_of(c);
	ssize_t n = sm_recv_some(c->fd, t->in + t->in_len, sizeof(t->in) - t->in_len, NULL);
	size_t used;
	int rc;

	*eof = n < 0;
	if (n <= 0)
		return SM_OK;
	t->in_len += (size_t)n;
	rc = tcp_parse_posts(c, t->in, t->in_len, &used);
	if (rc)
		return rc;
	memmove(t->in, t->in + used, t->in_len - used);
	t->in_len -= used;
	return SM_OK;
}

static int tcp_isend(struct tp_comm *c, struct tp_req **out, const void *data, size_t size,
		     const struct tp_region *reg)
{
	struct tcp_comm *t = tcp_of(c);
	uint64_t capacity, sz = size;
	struct tp_req *r;
	struct tcp_req *q;
	int rc, eof;

	/* The announcement may have come with an earlier one: no read. */
	eof = 0;
	rc = t->peer_posted > c->posted ? SM_OK : tcp_read_posts(c, &eof);
	if (rc)
		return rc;
	if (t->peer_posted <= c->posted && eof)
		return comm_fail(c, SM_ERR_REMOTE, "receiving peer: %s", sm_last_error());
	if (t->peer_posted <= c->posted)
		return SM_OK;
	capacity = t->peer_size[c->posted % TP_MAX_REQUESTS];
	if (size > capacity) {
		/* The receiver must fail too.  Between messages the header
		 * alone tells it why; in the middle of one it would be read as
		 * payload, so there the end of the stream tells it instead. */
		if (!comm_head(c))
			sm_send_some(c->fd, &sz, 8, -1);
		shutdown(c->fd, SHUT_WR);
		return comm_fail(c, SM_ERR_USAGE,
				 "send of %zu bytes into a posted receive of %llu bytes (message %llu)",
				 size, (unsigned long long)capacity, (unsigned long long)c->posted);
	}
	r = comm_req_alloc(c, REQ_SEND);
	q = tcp_req_of(r);
	r->buf = (uint8_t *)data;
	r->size = size;
	bounce_name(reg, data, &q->src_hid, &q->src_off);
	memcpy(q->hdr, &sz, 8);
	c->posted++;
	*out = r;
	return SM_OK;
}

/* A write that fails means the sender hung up: nothing more will come
 * for the receives not yet announced, but earlier ones may still have
 * their bytes in the socket (host memory) or their copies in flight (GPU
 * memory).  Failing here would fail those too; the header read
 * (tcp_progress_recv) and comm_check_peer fail the first receive that
 * really lacks its bytes. */
static void tcp_flush_posts(struct tp_comm *c)
{
	struct tcp_comm *t = tcp_of(c);
	ssize_t n;

	if (!t->out_len)
		return;
	n = sm_send_some(c->fd, t->out, t->out_len, -1);
	if (n < 0) {
		t->out_len = 0;
		return;
	}
	memmove(t->out, t->out + n, t->out_len - (size_t)n);
	t->out_len -= (size_t)n;
}

/* Receiver: announcements wholly written to the socket. */
static uint64_t posts_sent(const struct tp_comm *c)
{
	const struct tcp_comm *t = tcp_of(c);

	return (c->posted * 16 - t->out_len) / 16;
}

static int tcp_irecv(struct tp_comm *c, struct tp_req *r, const struct tp_region *reg)
{
	struct tcp_comm *t = tcp_of(c);
	struct tcp_req *q = tcp_req_of(r);
	uint64_t size = r->size;

	bounce_name(reg, r->buf, &q->dst_hid, &q->dst_off);
	/* Only receives not yet complete have announcements waiting here
	 * (tcp_progress_recv fails a message that outran its own), and at
	 * most TP_MAX_REQUESTS are posted: they always fit. */
	if (t->out_len + 16 > sizeof(t->out))
		return comm_fail(c, SM_ERR_INTERNAL, "%zu bytes of TCP announcements waiting",
				 t->out_len);
	memcpy(t->out + t->out_len, &r->seq, 8);
	memcpy(t->out + t->out_len + 8, &size, 8);
	t->out_len += 16;
	tcp_flush_posts(c);
	return SM_OK;
}

/* Receiver: the head message's size header arrived.  The sender sends a
 * message only once it read the message's announcement; a header that
 * comes earlier is a peer that does not read them, and waiting
 * announcements would pile up without bound while it goes on. */
static int tcp_take_header(struct tp_comm *c, struct tp_req *r)
{
	uint64_t size;

	if (posts_sent(c) <= r->seq)
		return comm_fail(c, SM_ERR_REMOTE, "sending peer sent message %llu before it was "
				 "announced (it does not read the announcements)",
				 (unsigned long long)r->seq);
	memcpy(&size, tcp_req_of(r)->hdr, 8);
	return comm_recv_size(c, r, size);
}

static int tcp_progress_send(struct tp_comm *c, int *progressed)
{
	struct tcp_comm *t = tcp_of(c);
	struct tp_req *r;
	ssize_t n;

	if (t->bounce) {
		int rc = bounce_send_poll(c);

		if (rc)
			return rc;
	}

	while ((r = comm_head(c)) != NULL) {
		struct tcp_req *q = tcp_req_of(r);

		if (q->hdr_done < 8) {
			/* A host payload goes with its header: one call, and
			 * for a small message one segment the receiver takes
			 * in one read.  A GPU payload follows from the slots. */
			size_t hlen = 8 - q->hdr_done, h;

			n = sm_send_two(c->fd, q->hdr + q->hdr_done, hlen, r->buf,
					r->src_dev ? 0 : r->size);
			if (n < 0)
				return comm_fail(c, SM_ERR_REMOTE, "receiving peer: %s", sm_last_error());
			h = (size_t)n < hlen ? (size_t)n : hlen;
			q->hdr_done += h;
			r->moved += (uint64_t)n - h;
			if (q->hdr_done < 8)
				break;
			*progressed = 1;
		}
		if (r->src_dev) {
			int rc = bounce_ready(c);

			if (!rc)
				rc = bounce_send(c, r, progressed);

			if (rc)
				return rc;
			if (r->moved < r->size)
				break;
		} else if (r->moved < r->size) {
			n = sm_send_some(c->fd, r->buf + r->moved, r->size - r->moved, -1);
			if (n < 0)
				return comm_fail(c, SM_ERR_REMOTE, "receiving peer: %s", sm_last_error());
			r->moved += (uint64_t)n;
			if (n)
				*progressed = 1;
			if (r->moved < r->size)
				break;
		}
		r->done = 1;
		comm_pop(c);
		*progressed = 1;
	}
	return SM_OK;
}

static int tcp_progress_recv(struct tp_comm *c, int *progressed)
{
	struct tcp_comm *t = tcp_of(c);
	struct tp_req *r;
	ssize_t n;
	int rc;

	tcp_flush_posts(c);
	if (t->bounce) {
		rc = bounce_land(c, progressed);
		if (rc)
			return rc;
	}
	while ((r = comm_head(c)) != NULL) {
		struct tcp_req *q = tcp_req_of(r);

		if (!r->have_size) {
			n = tcp_recv(c, q->hdr + q->hdr_done, 8 - q->hdr_done);
			/* A sender that hung up after its last message leaves
			 * earlier receives their copies: this one fails once
			 * they landed, or once tested (comm_check_peer). */
			if (n < 0 && !q->hdr_done && bounce_pending(c))
				break;
			if (n < 0)
				return comm_fail(c, SM_ERR_REMOTE, "sending peer: %s", sm_last_error());
			q->hdr_done += (size_t)n;
			if (q->hdr_done < 8)
				break;
			rc = tcp_take_header(c, r);
			if (rc)
				return rc;
			*progressed = 1;
		}
		if (r->dst_dev) {
			rc = bounce_ready(c);
			if (!rc)
				rc = bounce_recv(c, r, progressed);
			if (rc)
				return rc;
			if (r->moved < r->msg_size)
				break;
			/* Off the wire; done once its last slot landed. */
			r->wire_done = 1;
			r->done = q->landed == r->msg_size;
			comm_pop(c);
			*progressed = 1;
			continue;
		} else if (r->moved < r->msg_size) {
			n = tcp_recv(c, r->buf + r->moved, min_u64(r->msg_size - r->moved, 1ull << 30));
			if (n < 0)
				return comm_fail(c, SM_ERR_REMOTE, "sending peer: %s", sm_last_error());
			r->moved += (uint64_t)n;
			if (n)
				*progressed = 1;
			if (r->moved < r->msg_size)
				break;
		}
		r->done = 1;
		comm_pop(c);
		*progressed = 1;
	}
	return SM_OK;
}

static int tcp_progress(struct tp_comm *c, int *progressed)
{
	return c->is_send ? tcp_progress_send(c, progressed) : tcp_progress_recv(c, progressed);
}

/* Over TCP the engine only serves GPU buffers, through the bounce slots,
 * and a job between hosts gives the plugin host buffers unless GPUDirect
 * is asked for (NCCL_NET_GDR_LEVEL): no copy helper, CUDA context or
 * pinned slots until a GPU registration (comm_gpu_ready). */
static int tcp_setup(struct tp_comm *c, const struct tp_options *opt)
{
	c->engine_later = opt->gpu;
	return SM_OK;
}

/* Connections with a copy engine may carry GPU memory: their bounce
 * slots are pinned here, on NCCL's service thread. */
static int tcp_engine_ready(struct tp_comm *c)
{
	return c->ce ? bounce_open(c) : SM_OK;
}

static void tcp_close(struct tp_comm *c)
{
	bounce_close(c);
}

/* The copies run between a GPU buffer and this side's bounce slots, on
 * either side: in the copy helper where it maps the buffer. */
static int tcp_region_register(struct tp_comm *c, struct tp_region *reg, int dmabuf_fd,
			       uint64_t dmabuf_offset)
{
	(void)dmabuf_fd;
	(void)dmabuf_offset;
	if (reg->mem == TP_MEM_CUDA && smf_engine_helper_pid(c->ce))
		helper_own_buffer(c, reg, &tcp_region_of(reg)->own);
	return SM_OK;
}

static void tcp_region_release(struct tp_region *reg)
{
	struct tcp_region *r = tcp_region_of(reg);

	helper_range_drop(&r->own);
	smf_engine_put(r->own.ce);
	r->own.ce = NULL;
}

static void tcp_describe(const struct tp_comm *c, char *buf, size_t len)
{
	const struct tcp_comm *t = tcp_of(c);
	char slots[96];

	bounce_describe(c, slots, sizeof(slots));
	if (c->is_send)
		snprintf(buf, len, "receives announced by the peer %llu; %s",
			 (unsigned long long)t->peer_posted, slots);
	else
		snprintf(buf, len, "%zu announcement bytes not yet sent; %s", t->out_len, slots);
}

/* Setup asks this kind last: any listener with a TCP port will do. */
static int tcp_pick(const struct tp_options *opt, const struct tp_handle_info *info,
		    int *picked, void **held)
{
	int rc = tp_handle_tcp(info, opt, "TCP");

	*picked = rc == SM_OK;
	*held = NULL;
	return rc;
}

const struct tp_ops tp_tcp_ops = {
	.name = "tcp",
	.title = "TCP",
	.kind = TP_BACKEND_TCP,
	.comm_size = sizeof(struct tcp_comm),
	.region_size = sizeof(struct tcp_region),
	.priority = 10,
	.pick = tcp_pick,
	.setup = tcp_setup,
	.engine_ready = tcp_engine_ready,
	.isend = tcp_isend,
	.irecv = tcp_irecv,
	.progress = tcp_progress,
	.pending = bounce_pending,
	.close = tcp_close,
	.describe = tcp_describe,
	.region_register = tcp_region_register,
	.region_release = tcp_region_release,
};
