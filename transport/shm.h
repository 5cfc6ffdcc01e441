/* The shared-memory backend (one host): a byte ring in a shared segment,
 * and copy-engine copies straight into the receiver's exported GPU
 * buffers.  For its own files (shm*.c) and the backend registry only. */
#ifndef SYMMEM_TRANSPORT_SHM_H
#define SYMMEM_TRANSPORT_SHM_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/types.h>

#include "comm.h"
#include "helper.h"

#define SHM_MAGIC 0x4d485353u		/* "SSHM" */
#define SHM_VERSION 6
#define REGION_MAGIC 0x4e474552u	/* "REGN" */
#define REGION_HOST 0x1u		/* the registration is host memory */

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
	/* Sender: 1 when message i went through the ring although its
	 * receive named a registration (a host-to-host message: the CPU
	 * copies it faster than a copy engine would). */
	uint8_t send_ring[TP_MAX_REQUESTS];
	/* Sender: when it saw message i's copy land (CLOCK_MONOTONIC ns, one
	 * clock for every process of the host), for the receiver's statistics. */
	uint64_t land_ns[TP_MAX_REQUESTS];
	/* Receiver: registration messages wholly written to the Unix socket,
	 * so the sender reads the socket only when one waits there. */
	_Alignas(64) _Atomic uint64_t announced;
	/* Written by the sender's copy helper through the GPU: message i + 1
	 * once message i landed in place (shm_watch.c). */
	_Alignas(64) _Atomic uint32_t watch[TP_MAX_REQUESTS];
};

#define SHM_RING_OFFSET 4096
_Static_assert(sizeof(struct shm_ctrl) <= SHM_RING_OFFSET, "shm_ctrl fits its page");

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
	uint32_t flags;			/* REGION_HOST */
	struct sm_share_info info;
};

/* A registration on a shared-memory connection. */
struct shm_region {
	struct tp_region reg;
	/* A sender's buffer in its copy helper; on the receiver, exp and
	 * offset are the export announced to the sender, and hid names the
	 * buffer for copies out of its shadow. */
	struct helper_range own;
	uint32_t id;			/* exported: the peer's name for it, else 0 */
	/* Receiver: the message that names the export to the sender.  It is
	 * written when the first receive into the region is posted
	 * (announce_recv_ready), not at registration, so registering never
	 * waits for a sender that is not reading (CUDA graph capture
	 * registers buffers long before any data moves). */
	struct wire_region ann_msg;
	int ann_fd;			/* the export's fd (owned by exp), or -1 */
	int ann_pending;		/* ann_msg not yet written; under ann_lock */
	uint64_t ann_wait_since;	/* when the current wait for room began, or 0 */
	/* Receiver, shadowed by the staging pool (shm_shadow.c). */
	uint8_t *shadow;		/* the piece the sender writes, or NULL */
	struct sm_pool *pool;		/* its pool, one reference per shadow */
	struct sm_export *shadow_exp;	/* the piece's segment, for the copy helper */
	uint64_t shadow_off;		/* the piece's offset in that segment */
	uint32_t shadow_hid;		/* the helper's name for the segment, or 0 */
	struct sm_export *dst_exp;	/* this buffer, for the copy helper (own.hid) */
	uint64_t dst_off;		/* base's offset in its allocation */
};

/* An allocation of the peer's as the sender sees it, shared by every
 * registration the peer announced in it. */
struct remote_alloc {
	struct sm_share_info info;
	int fd;				/* until imported */
	struct sm_mapping *map;		/* imported on first use, when no helper copies */
	uint32_t hid;			/* the copy helper's name for it, or 0 */
	int host;			/* host memory (REGION_HOST) */
	int helper_tried;		/* hid stays 0: the helper could not map it */
	unsigned refs;			/* registrations in it */
	/* Asked for by a send, done by the next progress step (remote_setup):
	 * a send only looks these up. */
	int want_map;			/* map it in this process */
	int want_helper;		/* ask the copy helper to map it */
	int helper_pending;		/* asked; the answer is still to come */
	struct smf_range_req add;	/* ... that request */
	uint64_t add_t0;		/* ... sent then */
};

/* A peer's exported registration as the sender sees it. */
struct remote_region {
	uint32_t id;
	struct remote_alloc *alloc;
	int dying;			/* withdrawn; kept for the sends still copying into it */
};

struct shm_comm {
	struct tp_comm comm;
	/* the ring */
	struct shm_ctrl *ctrl;
	uint8_t *ring;
	uint64_t seg_size;	/* kept locally: the peer can write the header */
	uint64_t ring_size;
	uint64_t chunk;
	uint64_t data_pos;	/* bytes this side wrote (sender) or read (receiver) */
	/* receiver: GPU registrations */
	uint32_t next_region;	/* last id handed out */
	int no_direct;		/* GPU registrations are not exported */
	int zero_copy;		/* 0 = every GPU registration is shadowed */
	int host_in_place;	/* exportable host receive buffers are announced */
	struct sm_pool_config pool_cfg;
	struct sm_pool *pool;	/* this GPU's staging pool, held while open */
	/* sender: the peer's registrations (shm_remote.c) */
	struct remote_region *remote;
	unsigned nremote, remote_cap;
	unsigned remote_dying;	/* entries of remote[] that are dying */
	uint8_t rin[sizeof(struct wire_region)];	/* partial message */
	size_t rin_len;
	int rin_fd;
	uint64_t ann_read;	/* registration messages read (ctrl->announced) */
	/* Setup a send asked the next progress step for (remote_setup). */
	int want_drain;		/* a receive names a registration not read yet */
	int drained_for_miss;	/* ... and the socket was read since: a miss now fails */
	int setup_wanted;	/* some remote_alloc wants mapping */
	unsigned helper_pending;	/* remote_allocs waiting for the helper's answer */
	int want_stage;		/* open host staging */
	/* Receiver: registration messages for the socket (shm_announce.c).
	 * Withdrawals (and the rest of an announcement the socket took only
	 * in part) wait here while the socket is full (the sender reads it
	 * only when it moves data), so deregMr never blocks on an idle
	 * sender; NCCL's service thread writes them, its progress thread
	 * pushes them on. */
	pthread_mutex_t ann_lock;
	uint8_t *aout;
	size_t aout_len, aout_cap;
	_Atomic int aout_waiting;	/* aout_len != 0, read without the lock */
	uint64_t ann_bytes;	/* bytes of messages written to the socket */
	int aout_dropped;	/* withdrawals dropped at the backlog's cap */
	/* sender: host staging the copy helper maps (shm_stage.c) */
	uint8_t *hs_buf;
	uint32_t hs_id;		/* its name in the helper */
	uint64_t hs_head, hs_tail;	/* bytes reserved / released, ever */
	int stage_tried;
	int cumem_host;		/* staging from the driver (cuMem host memory), not a memfd */
	struct sm_host_cumem hs_cumem;	/* ... that memory, when it is */
	/* sender: the control page in the copy helper, for watch words
	 * (shm_watch.c) */
	uint32_t watch_id;	/* the helper's name for the page, or 0 */
};

/* The shared-memory part of a request (comm.h's tp_req). */
struct shm_req {
	int direct;		/* the copy engine moves it in place (no ring) */
	int by_helper;		/* ... in the copy helper process */
	struct smf_copy copy;	/* send, direct: the copy in flight */
	uint32_t region;	/* send, direct: the peer's registration it copies into */
	uint64_t stage_end;	/* send: its span in host staging ends here (0 = none) */
	/* receive into a shadowed registration: the piece to copy on from */
	uint8_t *shadow;
	uint32_t src_hid, dst_hid;	/* the copy helper's names, 0 = copy in process */
	uint64_t src_off, dst_off;
	int out_started;	/* the copy out of the piece is in flight (copy) */
	int landed_seen;	/* receive: the sender's copy was seen landed (statistics) */
};
_Static_assert(sizeof(struct shm_req) <= TP_REQ_PART_BYTES, "TP_REQ_PART_BYTES");

static inline struct shm_req *shm_req_of(const struct tp_req *r)
{
	return TP_REQ_PART(r, struct shm_req);
}

static inline struct shm_comm *shm_of(const struct tp_comm *c)
{
	return TP_CONTAINER(c, struct shm_comm, comm);
}

static inline struct shm_region *shm_region_of(const struct tp_region *r)
{
	return TP_CONTAINER(r, struct shm_region, reg);
}

extern const struct tp_ops tp_shm_ops;

/* shm_conn.c: the segment a connector makes and passes, and attaching
 * to it (the fd may come from a confused or hostile peer: checked). */
int shm_segment_create(uint64_t ring_size, int *memfd, uint64_t *seg_size);
int shm_comm_attach(struct shm_comm *s, int memfd, uint64_t seg_size, uint64_t chunk);

/* shm.c: the data path. */
int shm_isend(struct tp_comm *c, struct tp_req **out, const void *data, size_t size,
	      const struct tp_region *reg);
int shm_irecv(struct tp_comm *c, struct tp_req *r, const struct tp_region *reg);
int shm_progress(struct tp_comm *c, int *progressed);
/* The request ops (tp_ops): its path, its copy in words, its close wait. */
void shm_req_note(const struct tp_req *r, struct tp_req_note *n);
void shm_req_describe(const struct tp_comm *c, const struct tp_req *r, char *buf, size_t len);
int shm_req_close_wait(struct tp_comm *c, struct tp_req *r, uint64_t limit);

/* shm_announce.c, receiver: registrations and their announcements. */
int shm_region_register(struct tp_comm *c, struct tp_region *reg, int dmabuf_fd,
			uint64_t dmabuf_offset);
void shm_region_release(struct tp_region *reg);
/* Before publishing a receive into `reg`: writes its announcement if that
 * is still to do.  *ready is 1 once it is wholly on the socket; 0 means
 * retry later (NCCL retries irecv), until ANNOUNCE_TIMEOUT_MS without the
 * sender reading fails the connection. */
int announce_recv_ready(struct tp_comm *c, struct tp_region *reg, int *ready);
/* Tells the sender the registration is gone (never waits; nothing when
 * it was never announced). */
int announce_withdraw(struct tp_comm *c, struct shm_region *r);
void shm_region_withdraw(struct tp_comm *c, struct tp_region *reg);
/* Pushes withdrawals waiting for room on to the socket, without waiting;
 * a no-op (one atomic load) when none waits. */
void announce_push_backlog(struct shm_comm *s);
void announce_close(struct shm_comm *s);

/* shm_remote.c, sender: the peer's registrations.
 *
 * A send only looks them up (no system call); what is still to do for
 * one is asked of the next progress step, which tp_isend runs at once
 * when a send asks (tp_comm.step_wanted), and NCCL's test() runs anyway.
 *
 * remote_lookup: the allocation holding registration `id`, or *out = NULL
 * with *later = 1 (the socket must be read first: ask a step), or with
 * *later = 0 when the peer never announced it (the socket was read since
 * the receive naming it was posted) or withdrew it. */
int remote_lookup(struct shm_comm *s, uint32_t id, struct remote_alloc **out, int *later);
/* Whether the send may copy through the copy helper (*ready = 1 with a->hid
 * set or never to be: copy in this process) or must wait (*ready = 0: a step
 * asks the helper, or its answer is still to come). */
enum remote_state {
	REMOTE_READY = 0,
	REMOTE_ASK,		/* asked the next step: tp_isend runs it and looks again */
	REMOTE_WAIT,		/* the copy helper's answer is due: NCCL retries */
	REMOTE_RING,		/* host to host: the message goes through the ring */
};
enum remote_state remote_helper_state(struct shm_comm *s, struct remote_alloc *a);
/* REMOTE_READY once mapped here. */
enum remote_state remote_map_state(struct shm_comm *s, struct remote_alloc *a);
/* The sender's progress step: reads the announcements waiting (a load,
 * no system call, when none does), then does the mapping sends asked for
 * and collects the copy helper's answers.  *progressed when it did any. */
int remote_setup(struct shm_comm *s, int *progressed);
/* Reads every complete registration message waiting on the socket. */
int remote_drain(struct shm_comm *s);
/* A direct send into registration `id` landed (and left the queue); a
 * withdrawn registration goes once no queued send copies into it. */
void remote_landed(struct shm_comm *s, uint32_t id);
void remote_close_all(struct shm_comm *s);
int remote_count(const struct tp_comm *c);

/* shm_shadow.c: receives through the staging pool.  shadow_open gives r
 * a pool piece (`why`: the reason, for messages) and, when the copy
 * helper can map both, names it and the buffer there; shadow_close undoes
 * it all and is a no-op for a region without a shadow. */
int shadow_open(struct shm_comm *s, struct shm_region *r, const char *why);
void shadow_close(struct shm_region *r);
/* Receive q into shadowed registration r: where its bytes will land. */
void shadow_recv_post(struct tp_req *q, const struct shm_region *r);
/* Once the sender's copy landed: starts the copy on (once) and tests it. */
int shadow_copy_out(struct tp_comm *c, struct tp_req *q, int *landed);

/* shm_watch.c: watch words.  The connector has its helper map the
 * control page (watch_open); watch_for gives a send's copy the word for
 * message `seq`, NULL without the page; watch_landed is the receiver's
 * test. */
void watch_open(struct shm_comm *s, int memfd);
const struct smf_watch *watch_for(const struct shm_comm *s, uint64_t seq, struct smf_watch *w);
int watch_landed(const struct shm_ctrl *ctrl, uint64_t seq);
void watch_close(struct shm_comm *s);

/* shm_stage.c: host staging for sends from memory the copy helper cannot
 * map.  stage_put copies `n` bytes in and gives the span's offset; *end =
 * 0 when there is no staging or no room yet.  Spans are released in order. */
int stage_put(struct shm_comm *s, const void *src, size_t n, uint64_t *off, uint64_t *end);
/* Opens the staging a send asked for (want_stage), in a progress step;
 * without it sends from host buffers copy in this process. */
void stage_setup(struct shm_comm *s);
/* Takes back the last put (its copy could not be posted); `before` is the
 * reservation counter it started from. */
void stage_unput(struct shm_comm *s, uint64_t end, uint64_t before);
/* The ring arithmetic alone: where an n-byte span goes given the counters
 * (bytes ever reserved / released) of a `size`-byte area; 0 = no room. */
int stage_span(uint64_t head, uint64_t tail, uint64_t size, uint64_t n, uint64_t *off,
	       uint64_t *end);
void stage_done(struct shm_comm *s, uint64_t end);
void stage_close(struct shm_comm *s);

#endif
