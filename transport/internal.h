/* Structures shared by the files of transport/; nothing outside the folder
 * includes this. */
#ifndef SYMMEM_TRANSPORT_INTERNAL_H
#define SYMMEM_TRANSPORT_INTERNAL_H

#include <stdatomic.h>
#include <stdint.h>

#include "transport.h"

#define SHM_MAGIC 0x4d485353u		/* "SSHM" */
#define SHM_VERSION 1
#define WIRE_MAGIC 0x45524957u		/* "WIRE" */
#define WIRE_VERSION 1

/* The shared segment of one shared-memory connection.  Each side writes
 * only its own cache line of counters; the sender writes send_size[] and
 * the ring, the receiver recv_size[].  Slot i % 32 belongs to message i:
 * a slot cannot be reused before its message completed on both sides,
 * because each side holds at most 32 requests and both complete in order. */
struct shm_ctrl {
	uint32_t magic;
	uint32_t version;
	uint64_t ring_size;
	uint64_t seg_size;
	_Alignas(64) _Atomic uint64_t recv_posted;	/* receiver */
	_Atomic uint64_t data_read;			/* receiver */
	_Alignas(64) _Atomic uint64_t send_posted;	/* sender */
	_Atomic uint64_t data_written;			/* sender */
	_Alignas(64) uint64_t recv_size[TP_MAX_REQUESTS];
	_Alignas(64) uint64_t send_size[TP_MAX_REQUESTS];
};

#define SHM_RING_OFFSET 4096
_Static_assert(sizeof(struct shm_ctrl) <= SHM_RING_OFFSET, "shm_ctrl fits its page");

/* First message on a new connection, connector to listener. */
struct wire_hello {
	uint32_t magic;
	uint16_t version;
	uint16_t backend;		/* TP_BACKEND_SHM or TP_BACKEND_TCP */
	uint8_t token[16];
	uint64_t seg_size;		/* SHM: size of the passed segment */
	uint32_t uid;
	uint32_t pid;
};

/* The listener's answer. */
struct wire_reply {
	uint32_t magic;
	int32_t status;			/* 0 or an enum sm_status */
	char reason[120];
};

enum req_kind {
	REQ_FREE = 0,
	REQ_SEND,
	REQ_RECV,
};

struct tp_req {
	struct tp_comm *comm;
	int kind;
	int done;
	uint64_t seq;		/* message number on this connection */
	uint8_t *buf;
	uint64_t size;		/* send: bytes to send; recv: capacity */
	uint64_t msg_size;	/* recv: what the sender sent, once known */
	int have_size;
	uint64_t moved;		/* bytes copied or put on the wire so far */
	uint8_t hdr[8];		/* TCP: the size header, sent or received */
	size_t hdr_done;
};

struct tp_ops {
	const char *name;
	int (*isend)(struct tp_comm *c, struct tp_req **out, const void *data, size_t size);
	int (*irecv)(struct tp_comm *c, struct tp_req *r);
	int (*progress)(struct tp_comm *c, int *progressed);
	void (*close)(struct tp_comm *c);
};

struct tp_comm {
	int is_send;
	const struct tp_ops *ops;
	int fd;			/* SHM: the Unix control socket; TCP: the data socket */
	int failed;		/* sticky sm_status once the connection broke */
	char failmsg[256];
	uint64_t posted;	/* messages posted locally */
	uint64_t next_check_ns;	/* next liveness check while idle */

	struct tp_req reqs[TP_MAX_REQUESTS];
	struct tp_req *queue[TP_MAX_REQUESTS];	/* in flight, posting order */
	unsigned q_head, q_count;

	/* SHM */
	struct shm_ctrl *ctrl;
	uint8_t *ring;
	uint64_t seg_size;	/* kept locally: the peer can write the header */
	uint64_t ring_size;
	uint64_t chunk;
	uint64_t data_pos;	/* bytes this side wrote (sender) or read (receiver) */

	/* TCP */
	uint64_t peer_posted;		/* sender: receives announced by the peer */
	uint64_t peer_size[TP_MAX_REQUESTS];
	uint8_t in[16];			/* sender: partial announcement */
	size_t in_len;
	uint8_t out[TP_MAX_REQUESTS * 16];	/* receiver: announcements not yet sent */
	size_t out_len;
};

extern const struct tp_ops tp_shm_ops;
extern const struct tp_ops tp_tcp_ops;

/* comm.c */
struct tp_comm *comm_new(int is_send, const struct tp_ops *ops, int fd);
struct tp_req *comm_req_alloc(struct tp_comm *c, int kind);
struct tp_req *comm_head(struct tp_comm *c);
void comm_pop(struct tp_comm *c);
int comm_fail(struct tp_comm *c, int status, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
uint64_t comm_now_ns(void);

/* shm.c */
int shm_segment_create(uint64_t ring_size, int *memfd, uint64_t *seg_size);
int shm_comm_attach(struct tp_comm *c, int memfd, uint64_t seg_size, uint64_t chunk);

#endif
