/* What the plugin and its copy helper (symmem-copyd) share: the control
 * messages on their socket pair and the request ring in shared memory.
 * Internal to smfree/.
 *
 * Why a helper process at all: while a CUDA graph that contains host nodes
 * (NCCL puts one in every captured operation that uses a net plugin) has
 * about 28 launches queued, the next cuGraphLaunch blocks inside the driver
 * holding a process-wide lock, and every other CUDA call of the process
 * waits for it (measured: bench/results/copy-helper.md).  If that call is
 * the progress thread's cuMemcpyAsync, the queued graphs can never finish:
 * deadlock.  The helper has its own driver instance, so the plugin's
 * progress thread makes no CUDA call for a copy; it writes a request into
 * the ring and polls its state word. */
#ifndef SYMMEM_SMFREE_COPYD_PROTO_H
#define SYMMEM_SMFREE_COPYD_PROTO_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "symmem.h"

#define CD_MAGIC 0x44504f43u		/* "COPD" */
#define CD_VERSION 12		/* 11: landing words; 12: watch words */
#define CD_SLOTS 1024			/* requests in flight per helper */
#define CD_CTRL_FD 3			/* the helper's end of the socket pair */

enum cd_op {
	CD_HELLO = 1,	/* ring memfd attached; the helper opens its GPU */
	CD_ADD,		/* map an exported allocation (fd attached for cuMem) */
	CD_DEL,		/* forget one (no reply) */
};

struct cd_msg {
	uint32_t magic;
	uint32_t op;
	uint32_t id;			/* CD_DEL: the range */
	int32_t owner_pid;		/* CD_ADD: the exporting process */
	uint32_t nstreams;		/* CD_HELLO */
	uint32_t version;		/* CD_HELLO */
	uint32_t depth;			/* CD_HELLO: copies queued per stream at most */
	uint64_t merge_max;		/* CD_HELLO: largest merged copy (0 = no merging) */
	uint32_t batch;			/* CD_HELLO: copies per copy-engine call at most */
	uint32_t flags;			/* CD_HELLO: CD_LANDING_WORDS */
	uint64_t phase_ns;		/* CD_HELLO: time per destination GPU (0 = off) */
	char pci_bus_id[32];		/* CD_HELLO: the client's GPU */
	struct sm_share_info info;	/* CD_ADD */
};

struct cd_reply {
	uint32_t magic;
	int32_t status;			/* enum sm_status */
	uint32_t id;			/* CD_ADD: the range's name in requests */
	uint32_t pad;
	char msg[192];
};

/* Plugins and helpers of other builds meet (a helper found through
 * NCCL_SYMMEM_COPY_HELPER_PATH): they tell each other apart by the hello's
 * version, read at this offset, and by the reply, read whole.  Neither may
 * move. */
_Static_assert(offsetof(struct cd_msg, version) == 20, "hello version stays at byte 20");
_Static_assert(sizeof(struct cd_reply) == 208, "reply keeps its size");

/* The hello's flags. */
#define CD_LANDING_WORDS 0x1u	/* report landings by stream writes (below) */

enum cd_slot_state {
	CD_FREE = 0,	/* the client may fill it */
	CD_POSTED,	/* filled; the helper queues the copy */
	CD_DONE,	/* landed; the client sets it free */
	CD_FAILED,	/* not copied; the reason is in err */
	CD_QUEUED,	/* on stream `stream`: landed once landed[stream] reaches `ticket` */
};

/* Landing words.  An event says a copy landed only to whoever queries
 * it: the helper, a turn of its loop later, after which the client sees
 * the slot done on its next test.  Instead each copy-engine call is
 * followed on its stream by a cuStreamWriteValue32 of the call's ticket
 * into landed[stream], a word of the ring (host memory the helper
 * registered with the driver), so the client sees the landing itself,
 * with no driver call on either side.  The write's default memory barrier
 * orders it after the copy's bytes.
 *
 * Watch words.  The sender's client learns of a landing from its landing
 * word, but the receiving process learned of it only once the sender's
 * next test() passed it on.  A request may also name a watch word: 4
 * bytes at watch_off of host mapping watch_id (the connection's control
 * page, which the receiver polls), into which the helper has the stream
 * write watch_val after the copy, in the same batch of memory operations
 * as the landing word.  A failed copy writes none.  Only with landing
 * words and where the driver has batch memory operations; otherwise the
 * helper ignores the watch and the receiver waits for the sender. */

/* One copy: `len` bytes from src range + offset to dst range + offset.
 * Message `seq` lives in slot seq % CD_SLOTS; the helper takes slots in
 * seq order (and may merge requests into one copy and end them in any
 * order), the client frees them in any order and reuses a slot only once
 * it is free. */
struct cd_slot {
	_Atomic uint32_t state;
	uint32_t src_id;
	uint32_t dst_id;
	uint32_t stream;		/* CD_QUEUED: the stream its copy runs on ... */
	uint32_t ticket;		/* ... and the call's ticket there */
	uint32_t watch_id;		/* 0, or the host mapping of a watch word ... */
	uint64_t seq;
	uint64_t src_off;
	uint64_t dst_off;
	uint64_t len;
	uint64_t post_ns;		/* when the client posted it (statistics) */
	uint32_t watch_off;		/* ... its offset there (4-aligned) ... */
	uint32_t watch_val;		/* ... and the value written once the copy landed */
	char err[80];
};

/* Written by the helper only, read by the client once the helper has
 * exited: where a connection's time went (copy engine busy or idle). */
struct cd_stats {
	uint64_t copies;		/* requests */
	uint64_t issued;		/* copies queued: fewer when requests merge */
	uint64_t bytes;
	uint64_t busy_ns;		/* some copy queued and not yet seen landed */
	uint64_t landed_ns;		/* summed over copies: queued -> seen landed */
	uint64_t queue_ns;		/* summed over copies: posted -> queued on a stream
					 * (taking it, waiting for room, the driver calls) */
	uint64_t copy_call_ns;		/* summed over copy-engine calls: cuMemcpyAsync */
	uint64_t event_call_ns;		/* ... and cuEventRecord after it */
	uint64_t call_max_ns;		/* the longest copy call with its cuEventRecord */
	uint64_t landed_max_ns;		/* the longest queued -> seen landed */
	uint64_t turn_max_ns;		/* the longest turn of the loop with a copy in flight
					 * (a driver call that blocked, or the helper not
					 * scheduled) */
	uint64_t phased_bytes;		/* queued while phases were on ... */
	uint64_t in_phase_bytes;	/* ... of them, to the GPU of the phase they ran in */
	uint64_t waiting_max;		/* most copies ever waiting for a stream */
	uint64_t strided;		/* copies queued as 2D copies (strided members) */
	uint64_t small_2d;		/* short host-to-GPU copies queued as 2D copies */
	uint64_t batches;		/* copy-engine calls that were batch calls ... */
	uint64_t batched;		/* ... and the copies they carried */
	uint64_t dropped_busy;		/* mappings dropped while requests named them */
	uint64_t maps;			/* mappings made (CD_ADD answered with a name) ... */
	uint64_t map_ns;		/* ... their time summed, import to answer ... */
	uint64_t map_max_ns;		/* ... and the longest: the client waits that long */
	uint64_t work_ns;		/* turns of the loop that took, queued or ended a copy:
					 * the helper's CPU time per copy, spinning left out */
	uint64_t landing_words;		/* 1: landings reported by stream writes */
	uint64_t watch_refused;		/* 1: the driver refused a batch of memory
					 * operations, so watch words stopped */
	struct sm_hist take_hist;	/* per request: posted -> taken from the ring */
	struct sm_hist queue_hist;	/* per request: posted -> queued */
	struct sm_hist landed_hist;	/* per request: queued -> seen landed */
};

struct cd_ring {
	uint32_t magic;
	uint32_t nslots;
	/* Written by the GPU (landing words); a line of their own. */
	_Alignas(64) _Atomic uint32_t landed[16];
	struct cd_stats stats;
	struct cd_slot slot[CD_SLOTS];
};

/* A request the helper has taken from the ring. */
struct cd_pending {
	uint32_t slot;
	uint32_t src_id;
	uint32_t dst_id;
	uint32_t dst_key;		/* the destination GPU's bus place + 1 (0: this GPU, host
					 * memory or unknown) */
	uint64_t src_off;
	uint64_t dst_off;
	uint64_t len;
};

/* Most requests one copy may carry. */
#define CD_MERGE_MAX 64

/* One copy to queue: requests that continue each other, first to last
 * (the queue's next[] links them by slot, CD_SLOTS ends the chain).
 * Either the members lie back to back on both sides (width 0, one plain
 * copy of len bytes), or they are equal rows of `width` bytes spaced
 * spitch apart in the source and dpitch apart in the destination (one 2D
 * copy): NCCL's shared send/recv buffers give the peers of a channel
 * alternate slots, so one connection's steps are evenly spaced, not
 * adjacent. */
struct cd_group {
	uint32_t lead, last;
	uint32_t src_id, dst_id;
	uint32_t dst_key;
	uint64_t src_off, dst_off;
	uint64_t len;			/* bytes in all members */
	uint64_t width;			/* strided: each member's bytes; 0: back to back */
	uint64_t spitch, dpitch;	/* strided: one member's start to the next's */
	int members;
};

/* Widest spacing a strided copy may start with, in members.  NCCL's
 * shared pool holds 16 slots per channel; the connections of a channel
 * to n peers take every n-th slot (net.cc: slot * nsubs + sub), and the
 * next channel's slots start 16 on.  8 covers up to 8 peers per channel
 * and keeps a row from reaching into another channel's slots. */
#define CD_STRIDE_MAX 8
/* Widest pitch a 2D copy may have (the driver's limit on H100/H200,
 * CU_DEVICE_ATTRIBUTE_MAX_PITCH, is 2^31 - 1). */
#define CD_PITCH_MAX (1ull << 30)

/* The bytes a copy spans from its first byte, in the source and in the
 * destination (len for back-to-back members). */
uint64_t cd_group_src_span(const struct cd_group *g);
uint64_t cd_group_dst_span(const struct cd_group *g);

/* copyd_merge.c: the waiting requests as copies, oldest copy first. */
struct cd_queue {
	struct cd_group group[CD_SLOTS];
	unsigned head, n;
	uint32_t next[CD_SLOTS];	/* member chains; valid until the slot is reused */
	uint64_t mlen[CD_SLOTS];	/* each member's bytes, by slot */
	uint64_t merge_max;		/* 0: every request its own copy */
};

void cd_queue_init(struct cd_queue *q, uint64_t merge_max);
/* Joins r to the waiting copy it continues exactly (same mappings, the
 * next bytes on both sides, or the next row of a strided copy) while that
 * copy stays within merge_max bytes and CD_MERGE_MAX requests, else makes
 * it a new copy. */
void cd_queue_add(struct cd_queue *q, const struct cd_pending *r);
/* The oldest of the first CD_PICK_WINDOW waiting copies whose dst_key is
 * `key`, else the oldest, as a position (0 = oldest); -1 when none waits.
 * Copies with one key keep their order. */
#define CD_PICK_WINDOW CD_SLOTS
int cd_queue_pick_key(const struct cd_queue *q, uint32_t key);
/* The copy at position k (0 = oldest), NULL past the last. */
const struct cd_group *cd_queue_at(const struct cd_queue *q, int k);
/* Removes the copy at position k; the others keep their order. */
void cd_queue_remove(struct cd_queue *q, int k);
/* Takes the front of the copy at position k into *out: its first members
 * while they add up to at most max_len bytes, at least one.  The rest
 * stays waiting at position k; a copy taken whole leaves the queue.
 * Returns -1 (and takes nothing) for a position that holds no copy. */
int cd_queue_take(struct cd_queue *q, int k, uint64_t max_len, struct cd_group *out);

/* Most copies one batch call carries (each row of a 2D copy counts). */
#define CD_BATCH_MAX 64
/* The copies of one copy-engine call: the one cd_queue_pick_key(key)
 * names, cut to max_len bytes as cd_queue_take does, then more, each
 * picked the same way, while a first member still fits in what is left of
 * max_len and their copies (rows, for 2D ones) stay within max_copies.
 * The taken copies' member chains are linked into one, first to last, so
 * ending the call walks every request from out[0].lead.  Returns how many
 * copies it took into out[] (0 when none waits). */
int cd_queue_take_batch(struct cd_queue *q, uint32_t key, uint64_t max_len, unsigned max_copies,
			struct cd_group *out);
/* How many of the requests a helper took last say whether it writes to
 * one GPU only.  Counted in requests, not time: a registered alltoall's
 * 16 MiB requests came in runs to one peer at a time, and a 1.2 ms window
 * saw one destination for half of its bytes, which then went out of phase
 * (4-GPU registered alltoall 0.87 -> 0.74 of native, bench/results/merge64.md).  64 is
 * more than one iteration of it (48 requests) and more than the copies
 * that wait at once (46). */
#define CD_DEST_WINDOW 64
/* Whether at most one destination key (1..nkeys-1) had a request among
 * the last `window` taken; seen_seq[k] is the number of the last request
 * taken to key k (requests count from 1; 0: never), seq that of the
 * newest.  The phases have nothing to order then. */
int cd_one_destination(const uint64_t *seen_seq, int nkeys, uint64_t seq, uint64_t window);
/* The GPU a helper writes to first in phase number `turn`.  `used` holds
 * the bus places (bit p: place p) of the GPUs the phases count, `own`
 * among them; with n of them, the answer is the GPU 1 + turn % (n - 1)
 * places after own, counting around the set in bus order.  For any one
 * turn every GPU of the set gets a different answer, so if each helper
 * writes to its answer, no GPU is written by two.  Returns that place, or
 * -1 with fewer than 3 GPUs (nothing to order) or own outside the set. */
int cd_phase_target(uint64_t used, int own, uint64_t turn);
/* The most bytes one copy-engine call of a phase carries.  With several
 * destinations in turn, shorter calls follow the phases more closely: a
 * 4-GPU 256 MiB alltoall took 6-7 % less time than with 64 MiB calls
 * (1015/1036 -> 945/967 us, registered 854 -> 793 us), 1 GiB the same
 * (bench/results/registration.md, section 4).  A helper writing to
 * one destination (ring collectives, send/recv) keeps the merge size. */
#define CD_PHASE_CALL_MAX (16ull << 20)
/* The byte limit of the next copy-engine call: what fits in the rest of
 * the phase (phase_room), at most merge_max (0: no merging, no limit) and,
 * while a phase orders the destinations (key != 0), CD_PHASE_CALL_MAX. */
uint64_t cd_call_limit(uint32_t key, uint64_t phase_room, uint64_t merge_max);
/* The copies a group adds to a batch call: its rows, or 1. */
unsigned cd_group_copies(const struct cd_group *g);

/* While another process's kernel holds the GPU (NCCL's, always, while it
 * waits for the bytes), a host-to-GPU copy of 16 KiB or less waits about
 * 2.39 ms for a time slice, as a plain, batched or one-row 2D copy; a 2D
 * copy of two or more rows runs at once (8 us), and so does everything
 * from 32 KiB on (probes kinds-sizes and kinds-small, 2 x H200).  Such
 * copies go as 2D copies of cd_small_rows(len) rows. */
#define CD_SMALL_HOST (32ull << 10)
/* The fewest rows, at least two, that split len bytes evenly (2 for any
 * even length; len itself, rows of one byte, for a prime); 0 for len < 2. */
uint64_t cd_small_rows(uint64_t len);

#endif
