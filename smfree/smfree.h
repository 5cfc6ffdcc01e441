/* smfree: the SM-saving side of the product.  The copy engine that moves
 * GPU bytes without a kernel (streams, events, splitting), and the channel
 * policy the tuner applies.
 *
 * Owns: the copy engine per GPU, the copy helper process and the plugin's
 * side of it, the tuner's channel and protocol policy.  Must not touch:
 * NCCL's structs, environment variables, connections (transport/),
 * plugin/. */
#ifndef SYMMEM_SMFREE_H
#define SYMMEM_SMFREE_H

#include <stddef.h>
#include <stdint.h>

#include "symmem.h"

struct smfree_policy {
	int pass_sm;		/* NCCL_PASS_SM */
	int channels;		/* NCCL_SYMMEM_PASS_SM_CHANNELS */
	uint64_t ll128_chunk;	/* LL128 while a rank's share per channel is this or less, 0 = never */
	int ring_channels;	/* channels NCCL opens for a ring (config_ring_channels()) */
	uint64_t ll_max;	/* between hosts: all_reduce and broadcast above this leave LL,
				 * 0 = never */
	int ring_register;	/* the net plugin registers user buffers on rings
				 * (config_coll_register()); 0: registered collectives
				 * run on NCCL's buffers, like unregistered ones */
};

/* Collective kinds as the tuner sees them (same numbering as ncclFunc_t). */
enum smfree_coll {
	SMFREE_BROADCAST = 0,
	SMFREE_REDUCE,
	SMFREE_ALLGATHER,
	SMFREE_REDUCESCATTER,
	SMFREE_ALLREDUCE,
};

/* Bytes of a collective per channel NCCL should open for the copy engine.
 * Every channel's steps are copies of their own, each with a fixed cost of
 * a few us on the engine, so from 256 KiB to 16 MiB one channel per MiB
 * is faster than NCCL's 32 for most collectives (4 x H200: 1 MiB
 * all_reduce 0.045 -> 0.127 of native, 4 MiB 0.10 -> 0.23;
 * bench/results/small-channels.md).  The plugin's NCCL
 * defaults (plugin/config/config_nccl_defaults.c, NCCL_THREAD_THRESHOLDS) and
 * the NCCL_PASS_SM cap below both follow it. */
#define SMFREE_CHANNEL_BYTES (1u << 20)

/* The channels NCCL runs large collectives on through the plugin unless
 * the user bounds them: its NCCL_MIN_NCHANNELS default
 * (plugin/config/config_nccl_defaults.c; test_config checks that they agree). */
#define SMFREE_RING_CHANNELS 32

/* Channel count the tuner should ask NCCL for, or 0 to keep NCCL's own. */
int smfree_channels(const struct smfree_policy *p, int coll, size_t bytes, size_t nranks,
		    size_t nnodes);

/* Whether a collective whose ring NCCL would run with Simple should run
 * with LL128 instead (1) or keep NCCL's choice (0): all_gather,
 * reduce_scatter and all_reduce whose share per rank and channel is at
 * most p->ll128_chunk.  `bytes` is the whole buffer, `regbuf` whether NCCL
 * can send from the user's registered buffers (then Simple goes zero-copy
 * and stays, where p->ring_register).  The algorithm is never changed. */
int smfree_ring_ll128(const struct smfree_policy *p, int coll, size_t bytes, size_t nranks,
		      int regbuf);

/* Whether an all_reduce or broadcast across nodes that NCCL's model would
 * run with LL should take Simple of the same algorithm instead (1): one
 * larger than p->ll_max bytes (`bytes` is the whole buffer). */
int smfree_leave_ll(const struct smfree_policy *p, int coll, size_t bytes, size_t nnodes);

/* The copy engine of one GPU context, shared by every connection of this
 * process on that GPU, made in smf_engine_get() (call it where NCCL sets
 * connections up, never from the progress thread: making streams there
 * can block behind NCCL's running kernel).
 *
 * Copies between two mappings the copy helper knows (smf_range_add) go to
 * the helper process (symmem-copyd), which runs them on its own streams:
 * posting and testing them makes no CUDA call in this process, so a
 * cuGraphLaunch blocked inside the driver cannot stall NCCL's progress
 * thread.  Other copies (host memory, buffers that cannot be exported, no
 * helper) run in this process: one cuMemcpyAsync, or one per stream for
 * large copies, each followed by an event the host polls.  Either way no
 * kernel and no SM.  Every function here is safe from several threads. */
#define SMF_MAX_STREAMS 16

struct smf_engine;

struct smf_engine_options {
	int nstreams;		/* 1..SMF_MAX_STREAMS */
	uint64_t split_min;	/* in-process copies this large are cut per stream (0 = never) */
	const char *helper;	/* path of symmem-copyd, NULL = copies stay in-process */
	int copy_depth;		/* helper: copies queued per stream at most */
	uint64_t merge_max;	/* helper: largest copy merged from consecutive requests */
	int batch;		/* helper: copies per copy-engine call at most */
	uint64_t phase_ns;	/* helper: time per destination GPU, 0 = NCCL's order */
	int all_gpus;		/* helper: started without CUDA_VISIBLE_DEVICES */
	int landing;		/* helper: landings seen in a word the GPU writes, not an event */
};

struct smf_copy {
	int helper;		/* the helper runs it: seq names it */
	uint64_t seq;
	int nev;
	void *ev[SMF_MAX_STREAMS];	/* CUevent, kept opaque here */
};

/* The engine of the calling thread's current context (made on first use
 * with `o`; later callers share it).  A helper that cannot start is one
 * WARN; copies then run in this process. */
int smf_engine_get(const struct smf_engine_options *o, struct smf_engine **out);
/* Another reference, for a registration that may outlive its connection. */
void smf_engine_hold(struct smf_engine *e);
/* Drops a reference; the last one waits for queued copies and frees all. */
void smf_engine_put(struct smf_engine *e);
/* Live engines in this process (leak checks). */
int smf_engine_count(void);
/* The helper's pid, or 0 when copies run in this process. */
int smf_engine_helper_pid(const struct smf_engine *e);

/* Makes an export (of this process or a peer: `owner_pid`) known to the
 * helper; `fd` is borrowed (-1 for IPC handles).  *id = 0 without a
 * helper, which is not an error. */
int smf_range_add(struct smf_engine *e, int owner_pid, const struct sm_share_info *info, int fd,
		  uint32_t *id);
void smf_range_del(struct smf_engine *e, uint32_t id);

/* smf_range_add without waiting for the helper's answer, for NCCL's
 * progress thread (a mapping takes the helper tens of microseconds, and
 * a helper stuck in the driver up to its request time).  start sends the
 * request (`fd` borrowed, passed before it returns); *posted = 0 (SM_OK)
 * means try again later.  test gives *done = 1 with *id, or with the
 * error smf_range_add would have returned.  cancel forgets a started one
 * whose owner goes away (the mapping it brings is dropped). */
struct smf_range_req {
	uint64_t ticket;
};
int smf_range_add_start(struct smf_engine *e, int owner_pid, const struct sm_share_info *info,
			int fd, struct smf_range_req *req, int *posted);
int smf_range_add_test(struct smf_engine *e, struct smf_range_req *req, int *done, uint32_t *id);
void smf_range_add_cancel(struct smf_engine *e, struct smf_range_req *req);

/* Queues a copy.  *started = 0 (and SM_OK) when every event of the pool is
 * in flight: nothing was queued, try again later. */
int smf_copy_start(struct smf_engine *e, void *dst, const void *src, size_t n,
		   struct smf_copy *op, int *started);
/* The same between two helper mappings, by name and offset. */
int smf_copy_start_ranges(struct smf_engine *e, uint32_t dst_id, uint64_t dst_off,
			  uint32_t src_id, uint64_t src_off, size_t n, struct smf_copy *op,
			  int *started);
/* A word the helper writes `val` into once the copy landed, for another
 * process to poll: 4 bytes at `off` of helper mapping `id`, host memory
 * (smfree/copyd_proto.h, watch words).  Written only where the helper
 * reports landings by stream writes; a watcher must also accept the
 * landing the copy's own test reports. */
struct smf_watch {
	uint32_t id;
	uint32_t off;
	uint32_t val;
};
/* smf_copy_start_ranges with a watch word (NULL: none). */
int smf_copy_start_watched(struct smf_engine *e, uint32_t dst_id, uint64_t dst_off,
			   uint32_t src_id, uint64_t src_off, size_t n,
			   const struct smf_watch *w, struct smf_copy *op, int *started);
/* *done = 1 once every piece landed; the events then go back to the pool. */
int smf_copy_test(struct smf_engine *e, struct smf_copy *op, int *done);
/* One line on a copy still in flight, for stall reports. */
void smf_copy_describe(const struct smf_engine *e, const struct smf_copy *op, char *buf,
		       size_t len);
/* Waits (bounded: 60 s) until a started copy landed; past the bound, or
 * when the driver reports the copy failed, its events go back to the pool
 * and an error is returned. */
int smf_copy_wait(struct smf_engine *e, struct smf_copy *op);
/* The same with the caller's deadline (sm_now_ns() clock), so that one
 * bound covers several copies. */
int smf_copy_wait_until(struct smf_engine *e, struct smf_copy *op, uint64_t limit_ns);
/* A copy that has fully landed when it returns (bounded: `limit_ns` from
 * the call, for starting and landing together), between any
 * two addresses the driver knows (one side may be a plain host buffer).  It
 * runs on the engine's non-blocking streams: cuMemcpy would use the legacy
 * stream, which waits for every blocking stream of the context, NCCL's
 * kernel included, and a pageable-to-device cuMemcpy may return before the
 * data reached the GPU. */
int smf_copy_sync(struct smf_engine *e, void *dst, const void *src, size_t n, uint64_t limit_ns);

#endif
