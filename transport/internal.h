/* Structures shared by the files of transport/; nothing outside the folder
 * includes this. */
#ifndef SYMMEM_TRANSPORT_INTERNAL_H
#define SYMMEM_TRANSPORT_INTERNAL_H

#include <stdatomic.h>
#include <pthread.h>
#include <stdint.h>

#include "smfree.h"
#include "symmem.h"
#include "transport.h"

#define SHM_MAGIC 0x4d485353u		/* "SSHM" */
#define SHM_VERSION 4
#define WIRE_MAGIC 0x45524957u		/* "WIRE" */
#define WIRE_VERSION 7		/* 7: both ends prove the token, never send it */
#define REGION_MAGIC 0x4e474552u	/* "REGN" */

/* How long a connection waits for one of its copies, unless
 * NCCL_SYMMEM_COPY_TIMEOUT says otherwise (c->copy_limit_ns): a close gives
 * up copies still queued after it (tp_close, bounce_close), and a copy not
 * landed that long fails the connection: into the peer's buffer, out of
 * the staging pool, or through a TCP bounce slot.  Only a stuck GPU, driver
 * or copy helper takes that long; the failure beats a hang. */
#define COPY_LIMIT_NS (60ull * 1000 * 1000 * 1000)

/* The TCP receiver's read-ahead (c->rx): a header and a small payload in
 * one read; larger payloads go straight to their buffers. */
#define TCP_RX_BYTES 4096

static inline uint64_t min_u64(uint64_t a, uint64_t b)
{
	return a < b ? a : b;
}

/* The shared segment of one shared-memory connection.  Each side writes
 * only its own cache line of counters; the sender writes send_size[] and
 * the ring, the receiver recv_size[].  Slot i % 32 belongs to message i:
 * a slot cannot be reused before its message completed on both sides,
 * because each side holds at most 32 requests and both complete in order.
 * A receive into an exported GPU registration names it in recv_region[]
 * (0 = the byte ring) and recv_offset[]; the sender's copy engine writes
 * such a message in place and counts it in send_done once it landed. */
struct shm_ctrl {
	uint32_t magic;
	uint32_t version;
	uint64_t ring_size;
	uint64_t seg_size;
	_Alignas(64) _Atomic uint64_t recv_posted;	/* receiver */
	_Atomic uint64_t data_read;			/* receiver */
	_Alignas(64) _Atomic uint64_t send_posted;	/* sender */
	_Atomic uint64_t data_written;			/* sender */
	_Atomic uint64_t send_done;			/* sender */
	_Alignas(64) uint64_t recv_size[TP_MAX_REQUESTS];
	uint64_t recv_offset[TP_MAX_REQUESTS];
	uint32_t recv_region[TP_MAX_REQUESTS];
	_Alignas(64) uint64_t send_size[TP_MAX_REQUESTS];
	/* Sender: when it saw message i's copy land (CLOCK_MONOTONIC ns, one
	 * clock for every process of the host), for the receiver's statistics. */
	uint64_t land_ns[TP_MAX_REQUESTS];
	/* Receiver: registration messages wholly written to the Unix socket,
	 * so the sender reads the socket only when one waits there. */
	_Alignas(64) _Atomic uint64_t announced;
};

#define SHM_RING_OFFSET 4096
_Static_assert(sizeof(struct shm_ctrl) <= SHM_RING_OFFSET, "shm_ctrl fits its page");

/* An ibverbs end of a connection (ib.c), in the hello and the reply: its
 * queue pair's address and, from the sender, where the receiver writes
 * the receives it posts. */
struct wire_ib {
	uint32_t qpn;
	uint32_t psn;
	uint8_t gid[16];
	uint16_t lid;
	uint8_t mtu;			/* enum ibv_mtu */
	uint8_t link_layer;		/* IBV_LINK_LAYER_* */
	uint32_t fifo_rkey;
	uint64_t fifo_addr;
};

/* Connection setup, four messages before data moves: the connector's
 * hello (a fresh nonce), the listener's challenge (its nonce and its
 * proof of the token over both), the connector's setup (its proof, then
 * what its data path needs; on one host the ring's memfd rides along),
 * the listener's reply.  Neither end sends anything derived from the
 * token before the other sent a fresh nonce, and the connector sends its
 * proof and ring only to a listener that proved itself (auth.c). */
#define WIRE_NONCE 16
#define WIRE_MAC 32

struct wire_hello {
	uint32_t magic;
	uint16_t version;
	uint16_t backend;		/* TP_BACKEND_SHM, _TCP or _IB */
	uint32_t pid;			/* for log lines only: the peer says it */
	uint32_t flags;			/* WIRE_IB_REQUIRED */
	uint8_t nonce[WIRE_NONCE];
};
_Static_assert(sizeof(struct wire_hello) == 32, "the proofs hash the hello as sent");

/* NCCL_SYMMEM_BACKEND=ib on the sender's side: no TCP in its place. */
#define WIRE_IB_REQUIRED 0x1u

/* status != 0: a refusal before anyone proved anything (reason says
 * why, unauthenticated); no nonce or proof then. */
struct wire_challenge {
	uint32_t magic;
	int32_t status;
	uint8_t nonce[WIRE_NONCE];
	uint8_t proof[WIRE_MAC];	/* wire_proof(token, listener, hello, nonce) */
	char reason[128];
};

struct wire_setup {
	uint32_t magic;
	uint32_t pad;
	uint8_t proof[WIRE_MAC];	/* wire_proof(token, connector, hello, nonce) */
	uint64_t seg_size;		/* SHM: size of the passed segment */
	struct wire_ib ib;		/* TP_BACKEND_IB only */
};

/* The listener's answer. */
struct wire_reply {
	uint32_t magic;
	int32_t status;			/* 0 or an enum sm_status */
	char reason[256];
	int32_t backend;		/* what the listener settled on: IB, or TCP when
					 * its port cannot reach the connector's */
	uint32_t flags;			/* WIRE_IB_REQUIRED */
	struct wire_ib ib;		/* TP_BACKEND_IB only */
};

/* ibverbs: the connector's last word on the socket before data moves,
 * once its probe write was answered (or not). */
enum wire_verdict {
	VERDICT_IB = 'R',		/* both queue pairs ready, ports reach each other */
	VERDICT_TCP = 'T',		/* they do not: go on over this socket */
	VERDICT_FAIL = 'X',		/* they do not and ibverbs was required */
};

/* Receiver to sender on the Unix socket: a GPU registration to map (with
 * its fd, for cuMem memory) or one to forget. */
enum region_op {
	REGION_ADD = 1,
	REGION_DEL = 2,
};

struct wire_region {
	uint32_t magic;
	uint32_t op;
	uint32_t id;
	uint32_t pad;
	struct sm_share_info info;
};

/* A registration as its owner sees it. */
struct tp_region {
	struct tp_comm *comm;
	uint64_t comm_serial;		/* comm->serial when registered */
	uintptr_t base;
	size_t size;
	int mem;			/* enum tp_mem */
	uint32_t id;			/* exported: the peer's name for it, else 0 */
	uint64_t offset;		/* base's offset in the exported allocation */
	struct sm_export *exp;
	/* Receiver of a shared-memory connection: the message that names
	 * the export to the sender.  It is written when the first receive
	 * into the region is posted (region_announce), not at registration,
	 * so registering never waits for a sender that is not reading (CUDA
	 * graph capture registers buffers long before any data moves). */
	struct wire_region ann_msg;
	int ann_fd;			/* the export's fd (owned by exp), or -1 */
	int ann_pending;		/* ann_msg not yet written; under ann_lock */
	uint64_t ann_wait_since;	/* when the current wait for room began, or 0 */
	struct smf_engine *ce;		/* hid != 0: the engine holding it */
	uint32_t hid;			/* the copy helper's name for it, or 0 */
	/* Receiver, shadowed by the staging pool (shadow.c). */
	uint8_t *shadow;		/* the piece the sender writes, or NULL */
	struct sm_pool *pool;		/* its pool, one reference per shadow */
	struct sm_export *shadow_exp;	/* the piece's segment, for the copy helper */
	uint64_t shadow_off;		/* the piece's offset in that segment */
	uint32_t shadow_hid;		/* the helper's name for the segment, or 0 */
	struct sm_export *dst_exp;	/* this buffer, for the copy helper (hid) */
	uint64_t dst_off;		/* base's offset in its allocation */
	/* ibverbs: the memory region, and the device it holds open */
	void *ib_mr;
	struct ib_dev *ib_dev;
};

/* An allocation of the peer's as the sender sees it, shared by every
 * registration the peer announced in it. */
struct remote_alloc {
	struct sm_share_info info;
	int fd;				/* until imported */
	struct sm_mapping *map;		/* imported on first use, when no helper copies */
	uint32_t hid;			/* the copy helper's name for it, or 0 */
	int helper_tried;		/* hid stays 0: the helper could not map it */
	unsigned refs;			/* registrations in it */
};

/* A peer's exported registration as the sender sees it. */
struct remote_region {
	uint32_t id;
	struct remote_alloc *alloc;
	int dying;			/* withdrawn; kept for the sends still copying into it */
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
	int src_dev;		/* send: the source is GPU memory */
	int dst_dev;		/* receive: the destination is GPU memory */
	int direct;		/* the copy engine moves it in place (no ring) */
	int by_helper;		/* ... in the copy helper process */
	uint64_t t_post;	/* when it was posted, for the statistics */
	uint64_t t_wait;	/* send: how long isend waited for the receive */
	uint64_t t_landed;	/* when the sender saw the bytes land (0 = unknown) */
	uint64_t t_seen;	/* receive: when this side saw that */
	struct smf_copy copy;	/* send, direct: the copy in flight */
	uint32_t region;	/* send, direct: the peer's registration it copies into */
	uint64_t stage_end;	/* send: its span in host staging ends here (0 = none) */
	/* receive into a shadowed registration: the piece to copy on from */
	uint8_t *shadow;
	uint32_t src_hid, dst_hid;	/* the copy helper's names, 0 = copy in process */
	uint64_t src_off, dst_off;
	int out_started;	/* the copy out of the piece is in flight (copy) */
	int landed_seen;	/* receive: the sender's copy was seen landed (statistics) */
	/* TCP, GPU memory through the bounce slots (tcp_bounce.c) */
	uint64_t staged;	/* send: bytes whose copy into a slot started */
	uint64_t landed;	/* receive: bytes copied up from the slots */
	int wire_done;		/* receive: every byte arrived (off the wire, or the sender's
				 * copy landed), only this side's copies remain */
	/* ibverbs (ib.c) */
	void *ib_mr;		/* registered for this request alone (no registration) */
	uint32_t ib_lkey;	/* send: the source's key */
	uint32_t ib_rkey;	/* send: the receive buffer's key and address */
	uint64_t ib_raddr;
	unsigned ib_wrs;	/* send: work requests posted, not yet completed */
};

struct tp_ops {
	const char *name;
	int (*isend)(struct tp_comm *c, struct tp_req **out, const void *data, size_t size,
		     const struct tp_region *reg);
	int (*irecv)(struct tp_comm *c, struct tp_req *r, const struct tp_region *reg);
	int (*progress)(struct tp_comm *c, int *progressed);
	/* Optional: the last step of comm_setup, on NCCL's service thread. */
	int (*setup)(struct tp_comm *c);
	void (*close)(struct tp_comm *c);
	/* Both sides' counters in one line, for the stall report. */
	void (*describe)(const struct tp_comm *c, char *buf, size_t len);
};

struct tp_comm {
	uint64_t serial;	/* unique in the process: a freed comm's address may
				 * come back for a new one, its serial never does */
	int is_send;
	const struct tp_ops *ops;
	int fd;			/* SHM: the Unix control socket; TCP: the data socket */
	/* Sticky sm_status once the connection broke.  Registration runs on
	 * NCCL's service thread while the progress thread moves data, and
	 * either may fail the connection: the first failure claims
	 * `fail_claimed`, writes `failmsg`, then publishes `failed`, so a
	 * reader that sees `failed` sees its whole message. */
	_Atomic int failed;
	int keep_mappings;	/* a close gave up copies: never unmap their targets */
	atomic_flag fail_claimed;
	char failmsg[256];
	uint64_t posted;	/* messages posted locally */
	uint64_t try_ns;	/* sender: first isend try of the next message, or 0 */
	uint64_t start_try_ns;	/* sender: first refused copy start of the next message, or 0 */
	uint64_t overdue_seen_ns;	/* the latest comm_copy_overdue() call, or 0 */
	uint64_t overdue_from_ns;	/* no wait counts time before this (a gap in NCCL's calls) */
	unsigned overdue_gaps;	/* gaps in a row: NCCL asking slowly, not held up once */
	uint64_t next_check_ns;	/* next liveness check while idle */
	uint64_t stall_ns;	/* report a wait this long (0 = never) */
	uint64_t copy_limit_ns;	/* a copy not landed this long fails the connection */
	uint64_t wait_since_ns;	/* start of the current wait without progress */
	int stall_reported;
	uint64_t trace_ns;	/* NCCL_SYMMEM_TRACE_US: log longer waits (0 = off) */
	uint64_t last_call_ns;	/* NCCL's last isend try, irecv or test here (trace.c) */
	int verbose;		/* NCCL_SM_FREE_VERBOSE: note each path once */
	unsigned paths_seen;	/* enum comm_path bits */
	struct tp_stats stats;

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
	int peer_pid;
	uint32_t next_region;	/* receiver: last id handed out */
	int no_direct;		/* receiver: GPU registrations are not exported */
	int zero_copy;		/* receiver: 0 = every GPU registration is shadowed */
	struct sm_pool_config pool_cfg;
	struct sm_pool *pool;	/* receiver: this GPU's staging pool, held while open */
	struct remote_region *remote;	/* sender: the peer's registrations */
	unsigned nremote, remote_cap;
	unsigned remote_dying;	/* sender: entries of remote[] that are dying */
	uint8_t rin[sizeof(struct wire_region)];	/* sender: partial message */
	size_t rin_len;
	int rin_fd;
	uint64_t ann_read;	/* sender: registration messages read (ctrl->announced) */
	/* Receiver: registration messages for the socket.  Withdrawals (and
	 * the rest of an announcement the socket took only in part) wait
	 * here while the socket is full (the sender reads it only when it
	 * moves data), so deregMr never blocks on an idle sender; NCCL's
	 * service thread writes them, its progress thread pushes them on. */
	pthread_mutex_t ann_lock;
	uint8_t *aout;
	size_t aout_len, aout_cap;
	_Atomic int aout_waiting;	/* aout_len != 0, read without the lock */
	uint64_t ann_bytes;	/* bytes of messages written to the socket */
	int aout_dropped;	/* withdrawals dropped at the backlog's cap */
	struct smf_engine *ce;	/* this GPU's shared copy engine, or NULL */
	uint8_t *hs_buf;	/* sender: host staging the copy helper maps (stage.c) */
	uint32_t hs_id;		/* its name in the helper */
	uint64_t hs_head, hs_tail;	/* bytes reserved / released, ever */
	int stage_tried;
	int cumem_host;		/* staging from the driver (cuMem host memory), not a memfd */
	struct sm_host_cumem hs_cumem;	/* ... that memory, when it is */

	/* TCP */
	uint64_t peer_posted;		/* sender: receives announced by the peer */
	uint64_t peer_size[TP_MAX_REQUESTS];
	uint8_t in[TP_MAX_REQUESTS * 16];	/* sender: announcements read, not parsed */
	size_t in_len;
	uint8_t out[TP_MAX_REQUESTS * 16];	/* receiver: announcements not yet sent */
	size_t out_len;
	/* Receiver: bytes read off the socket ahead of the message that owns
	 * them.  One read takes a small message's header and payload (and
	 * whatever follows) where two exact reads cost two system calls. */
	uint8_t rx[TCP_RX_BYTES];
	size_t rx_head, rx_len;
	/* GPU buffers: pinned slots (tcp_bounce.c).  Set once, on NCCL's
	 * service thread, while the progress thread may be reading it. */
	_Atomic(struct tcp_bounce *) bounce;
	/* TCP: the copy engine (with its helper) and the slots wait for the
	 * first GPU registration, which a job staging NCCL's buffers in host
	 * memory never makes (comm_gpu_ready). */
	int engine_later;
	struct smf_engine_options engine_opt;

	/* ibverbs: the queue pair and what goes with it (ib.c) */
	struct ib_conn *ib;
};

extern const struct tp_ops tp_shm_ops;
extern const struct tp_ops tp_tcp_ops;
extern const struct tp_ops tp_ib_ops;

/* How a message moved, for NCCL_SM_FREE_VERBOSE's once-per-connection
 * line (comm_note_path). */
enum comm_path {
	PATH_RING = 0,		/* through the shared-memory ring or TCP */
	PATH_HELPER,		/* copy engine, in place, from the copy helper */
	PATH_STAGED,		/* the same, from host staging (host source) */
	PATH_IN_PROCESS,	/* copy engine, in place, from NCCL's process */
	PATH_IN_PLACE,		/* receive: the sender's copy engine writes it in place */
	PATH_POOL,		/* receive: written into the staging pool, copied on here */
	PATH_COUNT
};

/* comm.c */
struct tp_comm *comm_new(int is_send, const struct tp_ops *ops, int fd);
struct tp_req *comm_req_alloc(struct tp_comm *c, int kind);
struct tp_req *comm_head(struct tp_comm *c);
void comm_pop(struct tp_comm *c);
/* The connection's copy engine, taken at setup; an error when there is
 * none (the GPU path is off for this process). */
int comm_engine(struct tp_comm *c);
/* Applies the options every connection shares (stall report) and, with
 * opt->gpu, takes this GPU's copy engine: setup runs on NCCL's service
 * thread, where making streams cannot block NCCL's kernels.  A TCP
 * connection takes it later, in comm_gpu_ready. */
int comm_setup(struct tp_comm *c, const struct tp_options *opt);
/* An ibverbs connection whose ports cannot reach each other goes on as a
 * TCP one over the socket that set it up; both ends switch. */
int comm_fall_back_to_tcp(struct tp_comm *c, const struct tp_options *opt);
/* Before a GPU registration (NCCL's service thread): takes the engine a
 * TCP connection left for later; nothing otherwise. */
int comm_gpu_ready(struct tp_comm *c);
/* Receive r learns the sender's size: one larger than the posted receive
 * fails the connection (the sender fails it too). */
int comm_recv_size(struct tp_comm *c, struct tp_req *r, uint64_t size);
/* Called when a wait (for request r, or for an announcement when NULL)
 * made no progress.  Returns SM_OK while the peer is alive; once its
 * socket is hung up, runs the backend once more: a receiver goes on while
 * that still moves what the peer sent before, else the connection fails. */
int comm_check_peer(struct tp_comm *c, struct tp_req *r);
int connect_awaiting_reply(void);
/* Repeats a broken connection's sticky failure as the current error. */
int comm_broken(const struct tp_comm *c);
int comm_fail(struct tp_comm *c, int status, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* A copy of `bytes` (`what`: where it goes) waiting since `since` without
 * landing, or without a free copy slot to start: fails the connection
 * once past the copy limit, else SM_OK.  A long gap between two calls on
 * the connection starts every one of its waits again. */
int comm_copy_overdue(struct tp_comm *c, uint64_t since, uint64_t bytes, const char *what);
/* How long a close waits for its queued copies: the copy limit, or not at
 * all once a copy of this process was overdue. */
uint64_t comm_close_deadline(const struct tp_comm *c);

/* NCCL_SYMMEM_TRACE_US (trace.c): a pause in NCCL's calls on a
 * connection with messages in flight, and a message slower than the
 * limit, each logged as one line with a host-wide clock. */
void trace_call(struct tp_comm *c);
void trace_done(const struct tp_comm *c, const struct tp_req *r);

/* region.c: the allocation holding the peer's registration `id`, read
 * off the socket if need be; *out = NULL when the peer never announced it
 * or withdrew it. */
int region_lookup(struct tp_comm *c, uint32_t id, struct remote_alloc **out);
int region_map(struct tp_comm *c, struct remote_alloc *a);
/* Makes the peer's allocation known to the copy helper if there is one;
 * a->hid stays 0 when it cannot be (the copy then runs in this process). */
void region_to_helper(struct tp_comm *c, struct remote_alloc *a);
int region_drain(struct tp_comm *c);
/* Sender: a direct send into registration `id` landed (and left the
 * queue); a withdrawn registration goes once no queued send copies
 * into it. */
void region_landed(struct tp_comm *c, uint32_t id);
/* Sender: reads the peer's registration messages when ctrl->announced
 * says some wait (a load, no system call, when none does). */
int region_poll(struct tp_comm *c);
/* Receiver: pushes withdrawals waiting for room on to the socket, without
 * waiting; a no-op (one atomic load) when none waits. */
void region_push_backlog(struct tp_comm *c);
/* Receiver: tells the sender the registration is gone (never waits;
 * nothing when it was never announced). */
int region_withdraw(struct tp_comm *c, struct tp_region *r);
/* Receiver, before publishing a receive into `r`: writes its announcement
 * if that is still to do.  *ready is 1 once it is wholly on the socket;
 * 0 means retry later (NCCL retries irecv), until ANNOUNCE_TIMEOUT_MS
 * without the sender reading fails the connection. */
int region_announce(struct tp_comm *c, struct tp_region *r, int *ready);
void region_close_all(struct tp_comm *c);

/* region.c: exports [ptr, ptr + size) to this process's copy helper;
 * *hid = 0 and an error when either step fails (nothing is kept). */
int region_to_own_helper(struct tp_comm *c, const void *ptr, size_t size, struct sm_export **exp,
			 uint64_t *offset, uint32_t *hid);

/* shadow.c: receives through the staging pool.  shadow_open gives r a
 * pool piece (`why`: the reason, for messages) and, when the copy helper
 * can map both, names it and the buffer there; shadow_close undoes it all
 * and is a no-op for a region without a shadow. */
int shadow_open(struct tp_comm *c, struct tp_region *r, const char *why);
void shadow_close(struct tp_region *r);
/* Receive q into shadowed registration r: where its bytes will land. */
void shadow_recv_post(struct tp_req *q, const struct tp_region *r);
/* Once the sender's copy landed: starts the copy on (once) and tests it. */
int shadow_copy_out(struct tp_comm *c, struct tp_req *q, int *landed);

/* stage.c: a shared memfd of `size` bytes mapped here, described for the
 * copy helper (which maps it and registers it with the driver). */
int host_memfd_open(const char *name, uint64_t size, struct sm_share_info *info, int *fd,
		    uint8_t **buf);

/* stage.c: host staging for sends from memory the copy helper cannot map.
 * stage_put copies `n` bytes in and gives the span's offset; *end = 0 when
 * there is no staging or no room yet.  Spans are released in order. */
int stage_put(struct tp_comm *c, const void *src, size_t n, uint64_t *off, uint64_t *end);
/* Takes back the last put (its copy could not be posted); `before` is the
 * reservation counter it started from. */
void stage_unput(struct tp_comm *c, uint64_t end, uint64_t before);
/* The ring arithmetic alone: where an n-byte span goes given the counters
 * (bytes ever reserved / released) of a `size`-byte area; 0 = no room. */
int stage_span(uint64_t head, uint64_t tail, uint64_t size, uint64_t n, uint64_t *off,
	       uint64_t *end);
void stage_done(struct tp_comm *c, uint64_t end);
void stage_close(struct tp_comm *c);

/* tcp.c: the receiver's reads, through c->rx: like sm_recv_some (bytes
 * read, 0 when none are waiting, -1 with the error set once the peer hung
 * up and nothing is left), reads of TCP_RX_BYTES or more bypass it while
 * it is empty. */
ssize_t tcp_recv(struct tp_comm *c, void *dst, size_t len);
/* tcp.c, sender: takes the receiver's announcements (16 bytes each:
 * message number, capacity) from buf, whole ones only; *used says how
 * many bytes they were.  A peer's bytes, checked: out of order or too
 * far ahead fails the connection (SM_ERR_REMOTE). */
int tcp_parse_posts(struct tp_comm *c, const uint8_t *buf, size_t len, size_t *used);

/* tcp_bounce.c: GPU buffers over TCP through pinned host slots.
 * bounce_open pins them (setup), bounce_close waits for their copies;
 * bounce_send_poll starts and collects the sender's copies (every progress
 * call), bounce_send puts the head send's bytes on the wire, bounce_recv
 * takes the head receive's bytes off it, and bounce_land completes
 * receives whose copies landed. */
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

/* rdma.c: dlsym's object pointer into a function pointer of `size` bytes. */
int tp_ibv_symbol(void *lib, const char *name, void *fn, size_t size);

/* ib_dev.c: the RDMA device for the plugin's device `which` (its GPU at
 * sysfs path gpu_pci, or NULL), among those NCCL_IB_HCA `spec` selects,
 * opened once per process and held until the last put; gid_index < 0
 * picks the port's GID.  A connector passes the listener's port address
 * `peer_gid` (else NULL): when the closest device is on another network,
 * a selected one on the listener's is taken instead (rails). */
struct ib_dev;
int ib_dev_get(const char *spec, int which, const char *gpu_pci, int gid_index,
	       const uint8_t *peer_gid, struct ib_dev **out);
void ib_dev_put(struct ib_dev *d);
/* gid_net.c: an all-zero GID (no address), an IPv4-mapped one (::ffff:a.b.c.d). */
int tp_gid_zero(const uint8_t g[16]);
int tp_gid_ipv4(const uint8_t g[16]);
/* The device's port address (zero on an InfiniBand port without a GID). */
void ib_dev_gid(const struct ib_dev *d, uint8_t gid[16]);

/* ib.c: the ibverbs data path.  ib_conn_open makes c's queue pair on
 * `dev` (the caller's, from ib_usable: the comm takes a reference of its
 * own) and describes it in *mine; ib_conn_connect joins it to the peer's.
 * Both run during setup, on NCCL's service thread. */
int ib_conn_open(struct tp_comm *c, const struct tp_options *opt, struct ib_dev *dev,
		 struct wire_ib *mine);
int ib_conn_connect(struct tp_comm *c, const struct wire_ib *peer);
/* Both ports, for messages about the path between them. */
void ib_conn_route(const struct tp_comm *c, char *buf, size_t len);
/* The two ports cannot reach each other (sm_last_error() says how that
 * showed): with ibverbs `required`, fails saying so; else WARNs that the
 * connection goes on over TCP and returns SM_OK for the caller to switch
 * (comm_fall_back_to_tcp). */
int ib_conn_unreachable(const struct tp_comm *c, int required);
/* Connector: a zero-byte write the peer's port must acknowledge, posted
 * once both queue pairs are ready; ib_conn_probe_done polls for it (give
 * up after ib_probe_wait_ns). */
int ib_conn_probe(struct tp_comm *c);
int ib_conn_probe_done(struct tp_comm *c, int *done);
uint64_t ib_probe_wait_ns(const struct tp_comm *c);
/* What ib_probe_wait_ns gives at NCCL_IB_TIMEOUT `timeout` (1..31): two
 * retry intervals of 4.096 us x 2^timeout, 2 s at least (the connect
 * deadline still caps the whole setup). */
uint64_t ib_probe_wait_for(int timeout);
/* 1 if this process can open the RDMA device for opt (the listener's
 * offer in the handle), which *held then holds open until ib_dev_put:
 * a listener keeps it, so its connections do not open it again.  A
 * connector passes the listener's port address (ib_dev_get), a listener
 * NULL. */
int ib_usable(const struct tp_options *opt, const uint8_t *peer_gid, struct ib_dev **held);
/* Registers r's memory with c's device: host memory, or GPU memory through
 * DMA-BUF where the device takes it (NCCL's `dmabuf_fd` at `dmabuf_offset`,
 * or with -1 one asked of the driver), refused where it does not;
 * ib_region_release undoes it, also after c closed. */
int ib_region_register(struct tp_comm *c, struct tp_region *r, int dmabuf_fd,
		       uint64_t dmabuf_offset);
void ib_region_release(struct tp_region *r);

/* auth.c: SHA-256 (FIPS 180-4) and HMAC-SHA-256 (RFC 2104) over the
 * concatenation of `nparts` pieces, for the setup proofs. */
#define SHA256_BYTES 32
struct sha256 {
	uint32_t h[8];
	uint64_t len;
	uint8_t buf[64];
};
void sha256_init(struct sha256 *c);
void sha256_update(struct sha256 *c, const void *data, size_t n);
void sha256_final(struct sha256 *c, uint8_t out[SHA256_BYTES]);
void hmac_sha256(const uint8_t *key, size_t klen, const void *const *parts, const size_t *lens,
		 int nparts, uint8_t out[SHA256_BYTES]);
/* One end's proof that it holds `token`, over the hello and the
 * listener's nonce; by_listener picks whose (they differ). */
void wire_proof(const uint8_t token[16], int by_listener, const struct wire_hello *hello,
		const uint8_t listener_nonce[WIRE_NONCE], uint8_t out[WIRE_MAC]);
/* 1 if two proofs match, in time that does not depend on where they differ. */
int wire_mac_equal(const uint8_t *a, const uint8_t *b);

/* shm.c */
int shm_segment_create(uint64_t ring_size, int *memfd, uint64_t *seg_size);
int shm_comm_attach(struct tp_comm *c, int memfd, uint64_t seg_size, uint64_t chunk);

#endif
