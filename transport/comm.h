/* The connection every backend builds on: identity, sticky failure, the
 * request queue, statistics, timers and the backend's ops; and the
 * registration every backend's registrations start with.
 *
 * A backend's comm is a struct of its own whose first member is a
 * struct tp_comm (struct shm_comm in shm.h, tcp_comm in tcp.h, ib_comm in
 * ib.h); comm_new allocates ops->comm_size bytes, and only the backend's
 * files turn a tp_comm back into theirs (TP_CONTAINER).  Generic code
 * reaches a backend through its ops alone; backend.h says which ops a kind
 * of connection has. */
#ifndef SYMMEM_TRANSPORT_COMM_H
#define SYMMEM_TRANSPORT_COMM_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "smfree.h"
#include "symmem.h"
#include "transport.h"
#include "wire.h"

/* How long a connection waits for one of its copies, unless
 * NCCL_SYMMEM_COPY_TIMEOUT says otherwise (c->copy_limit_ns): a close gives
 * up copies still queued after it (tp_close, bounce_close), and a copy not
 * landed that long fails the connection: into the peer's buffer, out of
 * the staging pool, or through a TCP bounce slot.  Only a stuck GPU, driver
 * or copy helper takes that long; the failure beats a hang. */
#define COPY_LIMIT_NS (60ull * 1000 * 1000 * 1000)

/* The struct of type `type` whose member `member` ptr points at. */
#define TP_CONTAINER(ptr, type, member) \
	((type *)(void *)((char *)(uintptr_t)(ptr) - offsetof(type, member)))

static inline uint64_t min_u64(uint64_t a, uint64_t b)
{
	return a < b ? a : b;
}

enum req_kind {
	REQ_FREE = 0,
	REQ_SEND,
	REQ_RECV,
};

/* Room for a backend's part of a request (TP_REQ_PART). */
#define TP_REQ_PART_BYTES 256

/* A request: what every backend and the generic code read, then the
 * backend's own part, which only its files read (shm.h's struct
 * shm_req, tcp.h's tcp_req, ib.h's ib_req), as a comm and a registration
 * are a base and the backend's part.  comm_req_alloc zeroes it all. */
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
	int src_dev;		/* send: the source is GPU memory */
	int dst_dev;		/* receive: the destination is GPU memory */
	int wire_done;		/* receive: every byte arrived (off the wire, or the sender's
				 * copy landed), only this side's copies remain */
	uint64_t t_post;	/* when it was posted, for the statistics */
	uint64_t t_wait;	/* send: how long isend waited for the receive */
	uint64_t t_landed;	/* when the sender saw the bytes land (0 = unknown) */
	uint64_t t_seen;	/* receive: when this side saw that */
	_Alignas(16) unsigned char part[TP_REQ_PART_BYTES];
};

/* The backend's part of request r, as type `type` (a backend's files
 * only: its header checks that the part fits).  Requests live in the
 * comm comm_new allocates, so the bytes have no declared type of their
 * own to clash with the part's. */
#define TP_REQ_PART(r, type) ((type *)(void *)(uintptr_t)(r)->part)

/* A registration as its owner sees it; a backend's registration starts
 * with one (ops->region_size bytes in all). */
struct tp_region {
	struct tp_comm *comm;
	uint64_t comm_serial;		/* comm->serial when registered */
	const struct tp_ops *ops;	/* comm's: released also after comm closed */
	uintptr_t base;
	size_t size;
	int mem;			/* enum tp_mem */
};

/* How one request moved, as its backend tells it (ops->req_note): for
 * the once-per-path line and the statistics. */
struct tp_req_note {
	int path;		/* enum comm_path */
	int skip;		/* nothing moved that is worth a line (an empty copy) */
	int direct;		/* in place, by copy engine */
	int helper;		/* ... issued by the copy helper */
	int pooled;		/* through the staging pool */
};

/* What a kind of connection does.  Optional entries are NULL. */
struct tp_ops {
	const char *name;		/* as NCCL_SYMMEM_BACKEND names it */
	const char *title;		/* in messages: "the connection uses TCP" */
	int kind;			/* enum tp_backend */
	size_t comm_size;		/* its comm, starting with struct tp_comm */
	size_t region_size;		/* its registration, starting with struct tp_region */

	/* Setup asks the kinds for a connection in this order, highest
	 * first (backend.c), so that the fastest kind both ends accept
	 * carries it. */
	int priority;
	/* Carried on the Unix socket (peers of this host only), not TCP. */
	int local;
	/* The connector: *picked = 1 if this kind carries a connection to
	 * the listener of `info`, holding in *held what connect_open gets
	 * (put lets go); an error (sm_fail) fails the connect: a kind opt
	 * requires that cannot be had. */
	int (*pick)(const struct tp_options *opt, const struct tp_handle_info *info, int *picked,
		    void **held);
	/* Optional, the listener: 1 if it takes this kind beyond what its
	 * sockets carry, holding in *held what accept_open gets while it
	 * listens, and writing what a connector needs (into its handle). */
	int (*offer)(const struct tp_options *opt, void **held, uint8_t offer[TP_OFFER_BYTES]);
	void (*put)(void *held);

	/* Optional: right after comm_new zeroed the comm. */
	void (*init)(struct tp_comm *c);
	/* Optional: comm_setup's backend part (its options, and whether
	 * the copy engine is taken now, later or never), on NCCL's service
	 * thread; engine_ready runs once the engine is taken. */
	int (*setup)(struct tp_comm *c, const struct tp_options *opt);
	int (*engine_ready)(struct tp_comm *c);
	/* Optional: the connector's part of the setup message (*memfd: a
	 * descriptor to pass with it, kept by the caller), from what pick()
	 * held. */
	int (*connect_open)(struct tp_comm *c, const struct tp_options *opt, void *held,
			    struct wire_setup *setup, int *memfd);
	/* Optional: the listener's side, from the connector's setup (and
	 * memfd, or -1) and what offer() held, to its part of the reply.
	 * Setting reply->backend to TP_BACKEND_AUTO asks the caller to go
	 * on as the plain kind (backend_plain), which the reply tells the
	 * connector. */
	int (*accept_open)(struct tp_comm *c, const struct tp_options *opt, void *held,
			   const struct wire_hello *hello, const struct wire_setup *setup, int memfd,
			   struct wire_reply *reply);
	/* Optional: the connector's last step once the reply came, called
	 * until *verdict is set (enum wire_verdict); the listener then waits
	 * for that byte.  A kind without it ends setup at the reply. */
	int (*connect_join)(struct tp_comm *c, const struct tp_options *opt,
			    const struct wire_reply *reply, char *verdict);
	/* Optional: the path between the two ends, for messages. */
	void (*route)(const struct tp_comm *c, char *buf, size_t len);

	int (*isend)(struct tp_comm *c, struct tp_req **out, const void *data, size_t size,
		     const struct tp_region *reg);
	/* Optional: whether a receive into reg may be posted yet (*ready). */
	int (*recv_ready)(struct tp_comm *c, struct tp_region *reg, int *ready);
	int (*irecv)(struct tp_comm *c, struct tp_req *r, const struct tp_region *reg);
	int (*progress)(struct tp_comm *c, int *progressed);
	/* Optional: 1 while this side's own copies may still complete
	 * receives, so a hung-up peer does not fail them yet. */
	int (*pending)(const struct tp_comm *c);
	void (*close)(struct tp_comm *c);
	/* Both sides' counters in one line, for the stall report. */
	void (*describe)(const struct tp_comm *c, char *buf, size_t len);
	/* Optional: the peer's registrations held (leak checks). */
	int (*remote_count)(const struct tp_comm *c);

	/* Optional, each: how request r moves (without it: through the
	 * backend's own buffers, PATH_RING); its copy in words for the stall
	 * report (buf left empty: none); and at close, waiting until `limit`
	 * for a copy r still has queued, 1 when it failed or did not land
	 * (its target must then stay mapped). */
	void (*req_note)(const struct tp_req *r, struct tp_req_note *n);
	void (*req_describe)(const struct tp_comm *c, const struct tp_req *r, char *buf,
			     size_t len);
	int (*req_close_wait)(struct tp_comm *c, struct tp_req *r, uint64_t limit);

	/* Optional: the backend's part of tp_register (NCCL's DMA-BUF
	 * `dmabuf_fd` at `dmabuf_offset`, or -1); region_release undoes it,
	 * also half done and after the comm closed; region_withdraw tells a
	 * live peer the registration is gone, before the release. */
	int (*region_register)(struct tp_comm *c, struct tp_region *r, int dmabuf_fd,
			       uint64_t dmabuf_offset);
	void (*region_withdraw)(struct tp_comm *c, struct tp_region *r);
	void (*region_release)(struct tp_region *r);
};

struct tp_comm {
	/* identity */
	uint64_t serial;	/* unique in the process: a freed comm's address may
				 * come back for a new one, its serial never does */
	int is_send;
	const struct tp_ops *ops;
	int fd;			/* the control socket (liveness); TCP: also the data */
	int peer_pid;		/* for messages (the kernel's word on one host) */
	/* Sticky sm_status once the connection broke.  Registration runs on
	 * NCCL's service thread while the progress thread moves data, and
	 * either may fail the connection: the first failure claims
	 * `fail_claimed`, writes `failmsg`, then publishes `failed`, so a
	 * reader that sees `failed` sees its whole message. */
	_Atomic int failed;
	int keep_mappings;	/* a close gave up copies: never unmap their targets */
	atomic_flag fail_claimed;
	char failmsg[256];
	/* timers */
	uint64_t try_ns;	/* sender: first isend try of the next message, or 0 */
	/* Sender: the backend's isend took no send because setup it looked up
	 * is still to do (a peer's registration to read, map or name to the
	 * copy helper); tp_isend runs a progress step, which does it, and
	 * lets the backend look once more. */
	int step_wanted;
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
	/* statistics */
	int verbose;		/* NCCL_SM_FREE_VERBOSE: note each path once */
	unsigned paths_seen;	/* enum comm_path bits */
	struct tp_stats stats;
	/* requests */
	uint64_t posted;	/* messages posted locally */
	struct tp_req reqs[TP_MAX_REQUESTS];
	struct tp_req *queue[TP_MAX_REQUESTS];	/* in flight, posting order */
	unsigned q_head, q_count;
	/* the copy engine (backends with GPU copies: comm_take_engine) */
	struct smf_engine *ce;	/* this GPU's shared copy engine, or NULL */
	int engine_later;	/* taken at the first GPU registration (comm_gpu_ready) */
	struct smf_engine_options engine_opt;
};

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

/* The oldest request in flight, or NULL; comm_pop drops it. */
static inline struct tp_req *comm_head(struct tp_comm *c)
{
	return c->q_count ? c->queue[c->q_head] : NULL;
}

static inline void comm_pop(struct tp_comm *c)
{
	c->q_head = (c->q_head + 1) % TP_MAX_REQUESTS;
	c->q_count--;
}

/* comm.c: a zeroed comm of ops->comm_size bytes, NULL out of memory. */
struct tp_comm *comm_new(int is_send, const struct tp_ops *ops, int fd);
struct tp_req *comm_req_alloc(struct tp_comm *c, int kind);
/* The connection's copy engine, taken at setup; an error when there is
 * none (the GPU path is off for this process). */
int comm_engine(struct tp_comm *c);
/* Applies the options every connection shares (stall report, copy limit,
 * trace) and the copy engine's, then the backend's setup, which takes
 * the engine now (comm_take_engine), leaves it for later (engine_later:
 * comm_gpu_ready takes it) or never takes it.  Setup runs on NCCL's
 * service thread, where making streams cannot block NCCL's kernels. */
int comm_setup(struct tp_comm *c, const struct tp_options *opt);
/* This GPU's shared copy engine, then the backend's engine_ready. */
int comm_take_engine(struct tp_comm *c);
/* Before a GPU registration (NCCL's service thread): takes the engine a
 * connection left for later; nothing otherwise. */
int comm_gpu_ready(struct tp_comm *c);
/* Receive r learns the sender's size: one larger than the posted receive
 * fails the connection (the sender fails it too). */
int comm_recv_size(struct tp_comm *c, struct tp_req *r, uint64_t size);
/* Called when a wait (for request r, or for an announcement when NULL)
 * made no progress.  Returns SM_OK while the peer is alive; once its
 * socket is hung up, runs the backend once more: a receiver goes on while
 * that still moves what the peer sent before, else the connection fails. */
int comm_check_peer(struct tp_comm *c, struct tp_req *r);
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

#endif
