/* What the copy helper's files share (symmem-copyd, smfree/copyd*.c):
 * its state and the calls between its jobs.  copyd.c starts it, opens the
 * GPU at hello, runs the loop and exits; copyd_intake.c serves the control
 * socket (mappings added and dropped); copyd_engine.c turns the ring's
 * requests into copy-engine calls.  Private to the helper: the plugin
 * speaks to it through copyd_proto.h only. */
#ifndef SYMMEM_SMFREE_COPYD_H
#define SYMMEM_SMFREE_COPYD_H

#include <stdint.h>
#include <sys/types.h>

#include "copyd_proto.h"
#include "symmem.h"

/* GPUs of one host the phases can order. */
#define MAX_GPUS 64
/* Busy time after which the measured engine rate replaces the guess. */
#define ENGINE_RATE_SETTLE_NS (1000ull * 1000)
/* How long a failed copy-engine call's stream may take to run what the
 * call left queued before its requests end (end_failed()).  The stream
 * holds `depth` calls at most, milliseconds of copies; the whole loop
 * waits meanwhile, so this stays far below the client's copy timeout
 * (NCCL_SYMMEM_COPY_TIMEOUT, 60 s by default). */
#define FAILED_DRAIN_NS (1000ull * 1000 * 1000)
/* With landing words, how long a stream's oldest copy may go unlanded
 * before the stream is asked whether it failed (a failed copy writes no
 * ticket), and how often it is asked after that. */
#define STALL_QUERY_NS (1000ull * 1000)

struct range {
	uint32_t id;
	int gpu;			/* its GPU's place in the host's bus order, or -1 */
	uint64_t size;
	struct sm_mapping *map;		/* GPU memory (or cuMem host memory) */
	uint8_t *host;			/* SM_SHARE_HOST_FD: mapped and host-registered here */
	CUdeviceptr host_dev;		/* ... and its address for the copy engine */
	int in_host;			/* its bytes are host memory: the above, or a
					 * cuMem import of host memory */
	unsigned busy;			/* requests taken that name it, not yet ended */
	int dying;			/* the client dropped it: unmapped once not busy */
};

struct copyd {
	const struct sm_cuda_api *cu;
	pid_t client;
	int ctrl;
	struct cd_ring *ring;
	int nstreams;
	CUstream stream[16];
	int next_stream;		/* the stream the next copy goes to */
	int depth;			/* copy-engine calls queued per stream at most */
	unsigned batch;			/* copies per call at most (1: no batch calls) */
	CUevent ev[CD_SLOTS];		/* a copy's event is its lead slot's */
	int landing;			/* landing words (copyd_proto.h), else events */
	int watching;			/* ... and watch words (batch memory operations) */
	CUdeviceptr landed_dev;		/* the ring's landed[] as the GPU sees it */
	uint32_t ticket[16];		/* per stream: the last call's ticket */
	uint32_t lead_ticket[CD_SLOTS];	/* a queued lead's ticket on its stream */
	uint64_t next_query[16];	/* per stream: when a stalled one is asked next */
	uint8_t held[CD_SLOTS];		/* taken from the ring, not yet ended */
	uint64_t queued_at[CD_SLOTS];	/* a lead's copy queued at (ns) */
	uint64_t copy_len[CD_SLOTS];	/* a queued lead's copy's bytes */
	uint32_t slot_src[CD_SLOTS], slot_dst[CD_SLOTS];	/* a held request's mappings */
	uint32_t slot_watch[CD_SLOTS];	/* ... its watch word's mapping, 0 = none ... */
	CUdeviceptr watch_dev[CD_SLOTS];	/* ... the word as the GPU sees it ... */
	uint32_t watch_val[CD_SLOTS];	/* ... and what is written there */
	uint64_t posted_at[CD_SLOTS];	/* a held request's post time, as taken */
	uint64_t inflight_bytes;	/* queued on streams, not yet seen landed */
	/* The engine's busy time and the bytes it moved, for its rate: kept
	 * here, since the ring's statistics are the client's to write too. */
	uint64_t busy_ns, moved;
	struct cd_queue queue;		/* taken, not yet queued: as copies */
	unsigned fifo[16][CD_SLOTS];	/* per stream: leads of queued copies */
	int fifo_head[16], fifo_n[16];
	uint64_t tail;			/* next message number to take */
	uint64_t oldest;		/* oldest message possibly still held */
	int gpu, ngpus;			/* this GPU's place in the host's bus order, of how many */
	int place[MAX_GPUS];		/* a device ordinal's place in that order */
	uint64_t used;			/* bit per place: this GPU, those written to (the phases) */
	uint64_t phase_ns;		/* how long one destination goes first, 0 = never */
	uint64_t taken;			/* requests taken from the ring so far */
	uint64_t key_seen[MAX_GPUS + 1];	/* by dst_key: the number of the last one to it */
	struct range *ranges;
	unsigned nranges, cap;
	uint32_t next_id;
};

/* ---- copyd.c: the GPU opened at hello ---------------------------------- */

int open_gpu(struct copyd *d, const struct cd_msg *m, int ringfd);

/* ---- copyd_intake.c: the control socket and the mappings --------------- */

struct range *range_find(struct copyd *d, uint32_t id);
int range_add(struct copyd *d, const struct cd_msg *m, int fd, uint32_t *id);
void range_free(struct copyd *d, struct range *r);
void range_del(struct copyd *d, uint32_t id);
void range_unhold(struct copyd *d, uint32_t id);
int control(struct copyd *d);

/* ---- copyd_engine.c: the engine loop ----------------------------------- */

double engine_rate(const struct copyd *d);
int take(struct copyd *d, uint64_t now);
int issue(struct copyd *d);
int complete(struct copyd *d, int *ended);

#endif
