/* The TCP backend (between hosts, or when forced): messages over the
 * connection's own socket, GPU buffers through pinned bounce slots.  For
 * its own files (tcp*.c) and the backend registry only. */
#ifndef SYMMEM_TRANSPORT_TCP_H
#define SYMMEM_TRANSPORT_TCP_H

#include <stdint.h>
#include <sys/types.h>

#include "comm.h"
#include "helper.h"

/* The TCP receiver's read-ahead (tcp_rx.c): a header and a small payload
 * in one read; larger payloads go straight to their buffers. */
#define TCP_RX_BYTES 4096

struct tcp_bounce;

struct tcp_comm {
	struct tp_comm comm;
	/* sender */
	uint64_t peer_posted;		/* receives announced by the peer */
	uint64_t peer_size[TP_MAX_REQUESTS];
	uint8_t in[TP_MAX_REQUESTS * 16];	/* announcements read, not parsed */
	size_t in_len;
	/* receiver */
	uint8_t out[TP_MAX_REQUESTS * 16];	/* announcements not yet sent */
	size_t out_len;
	/* Bytes read off the socket ahead of the message that owns them. */
	uint8_t rx[TCP_RX_BYTES];
	size_t rx_head, rx_len;
	/* GPU buffers: pinned slots (tcp_bounce.c).  Set once, on NCCL's
	 * service thread, while the progress thread may be reading it. */
	_Atomic(struct tcp_bounce *) bounce;
};

/* A registration: GPU buffers the copy helper maps copy there. */
struct tcp_region {
	struct tp_region reg;
	struct helper_range own;
};

/* The TCP part of a request (comm.h's tp_req). */
struct tcp_req {
	uint8_t hdr[8];		/* the size header, sent or received */
	size_t hdr_done;
	/* GPU memory through the bounce slots (tcp_bounce.c) */
	uint32_t src_hid, dst_hid;	/* the copy helper's names, 0 = copy in process */
	uint64_t src_off, dst_off;
	uint64_t staged;	/* send: bytes whose copy into a slot started */
	uint64_t landed;	/* receive: bytes copied up from the slots */
};
_Static_assert(sizeof(struct tcp_req) <= TP_REQ_PART_BYTES, "TP_REQ_PART_BYTES");

static inline struct tcp_req *tcp_req_of(const struct tp_req *r)
{
	return TP_REQ_PART(r, struct tcp_req);
}

static inline struct tcp_comm *tcp_of(const struct tp_comm *c)
{
	return TP_CONTAINER(c, struct tcp_comm, comm);
}

static inline struct tcp_region *tcp_region_of(const struct tp_region *r)
{
	return TP_CONTAINER(r, struct tcp_region, reg);
}

extern const struct tp_ops tp_tcp_ops;

/* tcp_rx.c: the receiver's reads, through its read-ahead: like
 * sm_recv_some (bytes read, 0 when none are waiting, -1 with the error set
 * once the peer hung up and nothing is left); reads of TCP_RX_BYTES or
 * more bypass it while it is empty. */
ssize_t tcp_recv(struct tp_comm *c, void *dst, size_t len);
/* tcp.c, sender: takes the receiver's announcements (16 bytes each:
 * message number, capacity) from buf, whole ones only; *used says how
 * many bytes they were.  A peer's bytes, checked: out of order or too
 * far ahead fails the connection (SM_ERR_REMOTE). */
int tcp_parse_posts(struct tp_comm *c, const uint8_t *buf, size_t len, size_t *used);

/* tcp_bounce.c: GPU buffers over TCP through pinned host slots.
 * bounce_open pins them (once the engine is taken), bounce_close waits for
 * their copies; bounce_send_poll starts and collects the sender's copies
 * (every progress call), bounce_send puts the head send's bytes on the
 * wire, bounce_recv takes the head receive's bytes off it, and bounce_land
 * completes receives whose copies landed. */
int bounce_open(struct tp_comm *c);
void bounce_close(struct tp_comm *c);
int bounce_send_poll(struct tp_comm *c);
int bounce_send(struct tp_comm *c, struct tp_req *r, int *progressed);
int bounce_recv(struct tp_comm *c, struct tp_req *r, int *progressed);
int bounce_land(struct tp_comm *c, int *progressed);
/* The copy helper's name for `ptr` in registration reg (*hid = 0 when
 * the helper does not know it), for the slots' copies. */
void bounce_name(const struct tp_region *reg, const void *ptr, uint32_t *hid, uint64_t *off);
/* Slots in use: copies that may still complete earlier receives. */
int bounce_pending(const struct tp_comm *c);
void bounce_describe(const struct tp_comm *c, char *buf, size_t len);

#endif
