/* symmem-copyd: the copy helper the plugin starts, one per GPU and process.
 *
 * It owns a CUDA context of its own process, maps what the plugin asks it
 * to (the plugin's own registered buffers and the peers' exports), and
 * turns the requests in the shared ring into copy-engine calls (requests
 * that continue each other merged into one copy, copies that do not
 * sharing one batch call: copyd_merge.c), each followed by an event it
 * polls.  Why it exists: copyd_proto.h.
 *
 *   symmem-copyd <client pid>        (the control socket is fd 3)
 *
 * It exits when the client does, releasing every mapping with its context:
 * on the socket's hang-up, or, if a forked child of the client still holds
 * the socket, when it finds itself re-parented.  (Not the parent-death
 * signal: that follows the thread that started the helper, and NCCL's
 * threads come and go with communicators while the helper serves them all.) */
#include <dirent.h>
#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <unistd.h>

#include "copyd_proto.h"
#include "symmem.h"

/* After this long without work the loop sleeps between polls instead of
 * spinning; the first request after a quiet spell waits at most one sleep. */
#define SPIN_NS (50ull * 1000 * 1000)
#define IDLE_SLEEP_NS 50000
/* For this long after work the loop spins in user space; then it yields. */
#define PAUSE_SPIN_NS (2ull * 1000 * 1000)
/* GPUs of one host the phases can order. */
#define MAX_GPUS 64
/* Busy time after which the measured engine rate replaces the guess. */
#define ENGINE_RATE_SETTLE_NS (1000ull * 1000)
/* How often it looks whether its client still lives. */
#define PARENT_CHECK_NS (200ull * 1000 * 1000)
/* At exit, how long queued copies may take to finish before the helper
 * leaves its mappings to the end of the process; below the client's 5 s
 * before it kills a helper that does not exit. */
#define EXIT_DRAIN_NS (4000ull * 1000 * 1000)
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
	CUdeviceptr landed_dev;		/* the ring's landed[] as the GPU sees it */
	uint32_t ticket[16];		/* per stream: the last call's ticket */
	uint32_t lead_ticket[CD_SLOTS];	/* a queued lead's ticket on its stream */
	uint64_t next_query[16];	/* per stream: when a stalled one is asked next */
	uint8_t held[CD_SLOTS];		/* taken from the ring, not yet ended */
	uint64_t queued_at[CD_SLOTS];	/* a lead's copy queued at (ns) */
	uint64_t copy_len[CD_SLOTS];	/* a queued lead's copy's bytes */
	uint32_t slot_src[CD_SLOTS], slot_dst[CD_SLOTS];	/* a held request's mappings */
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

/* Inherited descriptors (NCCL's sockets among them) would keep the
 * client's peers from seeing a hang-up; keep only stdio and the socket. */
static void close_inherited(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *de;

	if (!d)
		return;
	while ((de = readdir(d)) != NULL) {
		int fd = atoi(de->d_name);

		if (fd > CD_CTRL_FD && fd != dirfd(d))
			close(fd);
	}
	closedir(d);
}

static void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield");
#endif
}

static int reply(struct copyd *d, int status, uint32_t id, const char *msg)
{
	struct cd_reply r;

	memset(&r, 0, sizeof(r));
	r.magic = CD_MAGIC;
	r.status = status;
	r.id = id;
	snprintf(r.msg, sizeof(r.msg), "%s", msg ? msg : "");
	return sm_send_some(d->ctrl, &r, sizeof(r), -1) == (ssize_t)sizeof(r) ? 0 : -1;
}

/* Orders this host's GPUs by PCI bus id, once, at hello: every helper
 * gives a GPU the same place, whatever ordinals its process sees.  Leaves
 * d->gpu at -1 (no phases) when the driver will not say. */
static void order_gpus(struct copyd *d, CUdevice own)
{
	char id[MAX_GPUS][32], mine[32];
	int n = sm_cuda_load()->device_count;

	d->gpu = -1;
	if (n > MAX_GPUS || d->cu->device_get_pci_bus_id(mine, sizeof(mine), own) != CUDA_SUCCESS)
		return;
	for (int i = 0; i < n; i++) {
		CUdevice dev;

		if (d->cu->device_get(&dev, i) != CUDA_SUCCESS ||
		    d->cu->device_get_pci_bus_id(id[i], sizeof(id[i]), dev) != CUDA_SUCCESS)
			return;
	}
	for (int i = 0; i < n; i++) {
		d->place[i] = 0;
		for (int j = 0; j < n; j++)
			d->place[i] += strcasecmp(id[j], id[i]) < 0;
		if (strcasecmp(id[i], mine) == 0)
			d->gpu = d->place[i];
	}
	d->ngpus = n;
	if (d->gpu >= 0)
		d->used = 1ull << d->gpu;
}

/* The GPU a mapping lives on, as a bus place; -1 for host memory, when
 * nobody can say, or when there are no phases to use it for.  The
 * exporter's bus id comes first: for a legacy IPC import (registered
 * cudaMalloc buffers) the driver names the importing context's GPU, not
 * the one the memory is on, and such copies went unscheduled (4 x H200,
 * registered cudaMalloc alltoall at 1 GiB: 0.57 of native without the
 * phases, 0.62 with them; bench/results/coalesce.md). */
static int range_gpu(struct copyd *d, const struct range *r, const char *bus_id)
{
	CUdevice dev;
	int ordinal = -1;

	if (d->gpu < 0 || r->in_host)
		return -1;
	if (bus_id[0] && d->cu->device_get_by_pci_bus_id(&dev, bus_id) == CUDA_SUCCESS)
		ordinal = (int)dev;
	else if (d->cu->pointer_get_attribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
					      (CUdeviceptr)sm_mapping_base(r->map)) != CUDA_SUCCESS)
		return -1;
	if (ordinal < 0 || ordinal >= d->ngpus)
		return -1;
	return d->place[ordinal];
}

/* The key copies are scheduled by: the destination GPU's bus place + 1;
 * 0 for this GPU, host memory or unknown. */
static uint32_t dest_key(const struct copyd *d, const struct range *r)
{
	if (d->gpu < 0 || r->gpu < 0 || r->gpu == d->gpu)
		return 0;
	return (uint32_t)r->gpu + 1;
}

/* Which destination goes first at time t.  With four GPUs, engines that
 * each take their copies in the order NCCL posted them write into one GPU
 * at the same time while another gets nothing, and every writer slows to a
 * share of that GPU's links: a probe with each GPU in its own order moved
 * 230 GB/s per GPU, the same copies in step (all to the next GPU, then all
 * to the one after) 360 (bench/results/alltoall-4gpu.md).  The helpers of
 * a host share CLOCK_MONOTONIC, so each takes first the GPU
 * cd_phase_target() names for phase t / phase_ns: every GPU writes to a
 * different one.  When no copy to it waits, the oldest goes (no engine
 * idles for the schedule).
 *
 * The phases count this GPU and the GPUs it has written to, not every GPU
 * the helper sees: a helper started without CUDA_VISIBLE_DEVICES sees the
 * whole host, and a job on part of it would otherwise get phases for GPUs
 * nobody writes to.  The helpers of an alltoall write to the same set, so
 * they agree; while they learn it they disagree for a moment, and the
 * schedule then only reorders, it never holds a copy back. */
static uint32_t phase_at(const struct copyd *d, uint64_t t)
{
	int target;

	if (d->gpu < 0 || !d->phase_ns)
		return 0;
	target = cd_phase_target(d->used, d->gpu, t / d->phase_ns);
	return target < 0 ? 0 : (uint32_t)target + 1;
}

/* Whether this helper's last CD_DEST_WINDOW requests went to at most one
 * other GPU.  Then there is nothing to order (a ring collective: every GPU
 * writes to the next one only), and cutting its copies at phase ends only
 * costs calls: 4-GPU broadcast went 0.91-0.92 -> 0.96 of native at 1 GiB,
 * send/recv 0.83-0.85 -> 0.93 (bench/results/batch.md). */
static int one_destination(const struct copyd *d)
{
	/* order_gpus() keeps ngpus within MAX_GPUS: keys 1..ngpus. */
	return cd_one_destination(d->key_seen, d->ngpus + 1, d->taken, CD_DEST_WINDOW);
}

/* Bytes per ns the engine moves while it has work, as measured so far;
 * a guess below what H200s do one way (about 0.36) until there is data. */
static double engine_rate(const struct copyd *d)
{
	if (d->busy_ns < ENGINE_RATE_SETTLE_NS || !d->moved)
		return 0.3;
	return (double)d->moved / (double)d->busy_ns;
}

/* The request ring the client shares: a memfd of our layout.  Checked
 * before anything is made on the GPU, and mapped only whole (a shorter
 * file would fault on first touch). */
static int map_ring(int ringfd, struct cd_ring **out)
{
	struct cd_ring *ring;
	void *p;
	int rc;

	*out = NULL;
	if (ringfd < 0)
		return sm_fail(SM_ERR_INVALID, "hello without its request ring");
	rc = sm_memfd_check(ringfd, sizeof(struct cd_ring), 0, "request ring");
	if (rc)
		return rc;
	p = mmap(NULL, sizeof(struct cd_ring), PROT_READ | PROT_WRITE, MAP_SHARED, ringfd, 0);
	if (p == MAP_FAILED)
		return sm_fail(SM_ERR_SYSTEM, "mapping the request ring: %s", strerror(errno));
	ring = p;
	if (ring->magic != CD_MAGIC || ring->nslots != CD_SLOTS) {
		munmap(p, sizeof(struct cd_ring));
		return sm_fail(SM_ERR_INVALID, "request ring has the wrong layout");
	}
	*out = ring;
	return SM_OK;
}

/* The client's GPU: its primary context, the streams and the events.
 * On failure the helper is stopped by its client, and its exit frees what
 * was made. */
static int open_cuda(struct copyd *d, const struct cd_msg *m)
{
	CUcontext ctx;
	CUdevice dev;
	CUresult crc;

	d->cu = sm_cu();
	if (!d->cu)
		return sm_fail(SM_ERR_CUDA, "no CUDA driver: %s", sm_cuda_load()->reason);
	if (!d->cu->memcpy_batch_async)
		d->batch = 1;
	crc = d->cu->device_get_by_pci_bus_id(&dev, m->pci_bus_id);
	if (crc != CUDA_SUCCESS)
		return sm_cuda_fail(crc, "cuDeviceGetByPCIBusId(%.31s)", m->pci_bus_id);
	crc = d->cu->primary_ctx_retain(&ctx, dev);
	if (crc == CUDA_SUCCESS)
		crc = d->cu->ctx_set_current(ctx);
	if (crc != CUDA_SUCCESS)
		return sm_cuda_fail(crc, "opening a context on GPU %.31s", m->pci_bus_id);
	order_gpus(d, dev);
	for (; d->nstreams < (int)m->nstreams; d->nstreams++) {
		crc = d->cu->stream_create(&d->stream[d->nstreams], CU_STREAM_NON_BLOCKING);
		if (crc != CUDA_SUCCESS)
			return sm_cuda_fail(crc, "cuStreamCreate");
	}
	for (int i = 0; i < CD_SLOTS; i++) {
		crc = d->cu->event_create(&d->ev[i], CU_EVENT_DISABLE_TIMING);
		if (crc != CUDA_SUCCESS)
			return sm_cuda_fail(crc, "cuEventCreate");
	}
	return SM_OK;
}

/* Landing words: the ring registered with the driver so that the streams
 * can write its landed[] words.  Where the driver has no stream memory
 * operations or will not register the ring, copies report through events
 * as before; the stop line says which (stats.landing_words). */
static void open_landing(struct copyd *d, struct cd_ring *ring)
{
	CUdeviceptr dev;

	if (!d->cu->stream_write_value32)
		return;
	if (d->cu->mem_host_register(ring, sizeof(*ring), CU_MEMHOSTREGISTER_PORTABLE |
				     CU_MEMHOSTREGISTER_DEVICEMAP) != CUDA_SUCCESS)
		return;
	if (d->cu->mem_host_get_device_pointer(&dev, ring, 0) != CUDA_SUCCESS) {
		d->cu->mem_host_unregister(ring);
		return;
	}
	d->landed_dev = dev + offsetof(struct cd_ring, landed);
	d->landing = 1;
	ring->stats.landing_words = 1;
}

/* The hello: the client's parameters, its ring, its GPU.  d->ring is set
 * only once all of them are good, so nothing else is served before. */
static int open_gpu(struct copyd *d, const struct cd_msg *m, int ringfd)
{
	struct cd_ring *ring;
	int rc;

	if (m->version != CD_VERSION)
		return sm_fail(SM_ERR_INVALID, "plugin speaks helper protocol %u, helper %u",
			       m->version, CD_VERSION);
	if (m->nstreams < 1 || m->nstreams > 16)
		return sm_fail(SM_ERR_INVALID, "%u streams asked for", m->nstreams);
	if (m->depth < 1 || m->depth > CD_SLOTS)
		return sm_fail(SM_ERR_INVALID, "%u copies per stream asked for", m->depth);
	if (m->batch < 1 || m->batch > CD_BATCH_MAX)
		return sm_fail(SM_ERR_INVALID, "%u copies per call asked for", m->batch);
	rc = map_ring(ringfd, &ring);
	if (rc)
		return rc;
	d->depth = (int)m->depth;
	d->batch = m->batch;
	d->phase_ns = m->phase_ns;
	cd_queue_init(&d->queue, m->merge_max);
	rc = open_cuda(d, m);
	if (rc) {
		munmap(ring, sizeof(*ring));
		return rc;
	}
	if (m->flags & CD_LANDING_WORDS)
		open_landing(d, ring);
	d->ring = ring;
	return SM_OK;
}

static struct range *range_find(struct copyd *d, uint32_t id)
{
	for (unsigned i = 0; i < d->nranges; i++)
		if (d->ranges[i].id == id)
			return &d->ranges[i];
	return NULL;
}

/* Shared host memory (the plugin's staging for host sources): mapped
 * here and registered with the driver so the copy engine can read it. */
static int map_host(struct copyd *d, struct range *r, int fd, uint64_t size)
{
	CUresult crc;
	void *p;
	int rc;

	if (fd < 0)
		return sm_fail(SM_ERR_INVALID, "host memory without its descriptor");
	rc = sm_memfd_check(fd, size, 0, "host staging");
	p = rc ? MAP_FAILED : mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (rc)
		return rc;
	if (p == MAP_FAILED)
		return sm_fail(SM_ERR_SYSTEM, "mapping %llu bytes of host staging: %s",
			       (unsigned long long)size, strerror(errno));
	crc = d->cu->mem_host_register(p, size, CU_MEMHOSTREGISTER_PORTABLE |
				       CU_MEMHOSTREGISTER_DEVICEMAP);
	if (crc != CUDA_SUCCESS) {
		munmap(p, size);
		return sm_cuda_fail(crc, "cuMemHostRegister of %llu bytes of host staging",
				    (unsigned long long)size);
	}
	crc = d->cu->mem_host_get_device_pointer(&r->host_dev, p, 0);
	if (crc != CUDA_SUCCESS) {
		d->cu->mem_host_unregister(p);
		munmap(p, size);
		return sm_cuda_fail(crc, "cuMemHostGetDevicePointer");
	}
	r->host = p;
	return SM_OK;
}

/* A cuMem import of host memory (the plugin's staging with
 * NCCL_CUMEM_HOST_ENABLE=1, or NCCL's own cuMem host buffers) maps like
 * GPU memory; only its allocation's location tells it apart.  Legacy IPC
 * imports have no cuMem handle and are GPU memory. */
static int import_in_host(struct copyd *d, const struct range *r)
{
	CUmemGenericAllocationHandle h;
	CUmemAllocationProp prop;
	CUresult rc;

	if (d->cu->mem_retain_allocation_handle(&h, sm_mapping_base(r->map)) != CUDA_SUCCESS)
		return 0;
	memset(&prop, 0, sizeof(prop));
	rc = d->cu->mem_get_allocation_properties(&prop, h);
	d->cu->mem_release(h);
	return rc == CUDA_SUCCESS && prop.location.type != CU_MEM_LOCATION_TYPE_DEVICE &&
	       prop.location.type != CU_MEM_LOCATION_TYPE_INVALID;
}

static int range_add(struct copyd *d, const struct cd_msg *m, int fd, uint32_t *id)
{
	char bus_id[sizeof(m->info.bus_id)];
	struct range *r;
	int rc;

	/* The helper exports nothing.  Named as the owner, its own pid would
	 * make import.c take a legacy IPC address and size on trust (CUDA
	 * opens no process's own handles), so the client could point copies
	 * anywhere in the helper. */
	if (m->owner_pid == (int32_t)getpid()) {
		if (fd >= 0)
			close(fd);
		return sm_fail(SM_ERR_INVALID, "a mapping request names the copy helper itself "
			       "(pid %d) as the exporting process: refusing it", (int)m->owner_pid);
	}
	if (d->nranges == d->cap) {
		unsigned cap = d->cap ? 2 * d->cap : 64;
		struct range *n = realloc(d->ranges, cap * sizeof(*n));

		if (!n) {
			if (fd >= 0)
				close(fd);
			return sm_fail(SM_ERR_SYSTEM, "out of memory for mappings");
		}
		d->ranges = n;
		d->cap = cap;
	}
	r = &d->ranges[d->nranges];
	memset(r, 0, sizeof(*r));
	if (m->info.kind == SM_SHARE_HOST_FD)
		rc = map_host(d, r, fd, m->info.alloc_size);
	else
		rc = sm_import_get(m->owner_pid, &m->info, fd, &r->map);	/* consumes fd */
	if (rc)
		return rc;
	r->id = ++d->next_id;
	r->size = m->info.alloc_size;
	r->in_host = r->host || import_in_host(d, r);
	memcpy(bus_id, m->info.bus_id, sizeof(bus_id));
	bus_id[sizeof(bus_id) - 1] = '\0';	/* the client's bytes */
	r->gpu = range_gpu(d, r, bus_id);
	d->nranges++;
	*id = r->id;
	return SM_OK;
}

static void range_free(struct copyd *d, struct range *r)
{
	if (r->host) {
		d->cu->mem_host_unregister(r->host);
		munmap(r->host, r->size);
	} else {
		sm_import_put(r->map);
	}
	*r = d->ranges[--d->nranges];
}

/* The client may drop a mapping while copies that name it still wait here
 * or run (NCCL deregisters before closing after an abort): unmapping it
 * then would let a queued copy resolve to nothing and a running one fault,
 * which poisons this context for every later copy.  So it goes when its
 * last request ends; new requests naming it fail at once. */
static void range_del(struct copyd *d, uint32_t id)
{
	struct range *r = range_find(d, id);

	if (!r || r->dying)
		return;
	if (r->busy) {
		r->dying = 1;
		d->ring->stats.dropped_busy++;
		return;
	}
	range_free(d, r);
}

static void range_unhold(struct copyd *d, uint32_t id)
{
	struct range *r = range_find(d, id);

	if (r && r->busy && --r->busy == 0 && r->dying)
		range_free(d, r);
}

/* Every protocol version keeps magic, op and version where they are. */
#define HELLO_VERSION_END (offsetof(struct cd_msg, version) + sizeof(uint32_t))

/* One control message other than a mapping after hello; fd, if one came
 * with it, stays the caller's to close.  Returns -1 when the client is
 * gone or must go. */
static int request(struct copyd *d, const struct cd_msg *m, ssize_t n, int fd)
{
	int rc;

	if (n != (ssize_t)sizeof(*m) && n >= (ssize_t)HELLO_VERSION_END && m->magic == CD_MAGIC &&
	    m->op == CD_HELLO) {
		/* A plugin of another build (NCCL_SYMMEM_COPY_HELPER_PATH
		 * naming a newer build's helper, say): its hello has another
		 * size.  Name both versions so its WARN says why, then leave. */
		rc = sm_fail(SM_ERR_INVALID, "plugin speaks helper protocol %u (a %zd-byte hello), "
			     "helper %u (%zu bytes): plugin and helper come from different builds",
			     m->version, n, CD_VERSION, sizeof(*m));
		reply(d, rc, 0, sm_last_error());
		return -1;
	}
	if (n != (ssize_t)sizeof(*m) || m->magic != CD_MAGIC)
		return -1;	/* hang-up or garbage: the client is not one of ours */
	switch (m->op) {
	case CD_HELLO:
		rc = d->ring ? sm_fail(SM_ERR_INVALID, "second hello") : open_gpu(d, m, fd);
		if (reply(d, rc, 0, rc ? sm_last_error() : NULL))
			return -1;
		/* A GPU that would not open leaves a context, streams and
		 * events half made: leave, as the client stops us anyway. */
		return rc == SM_ERR_CUDA ? -1 : 0;
	case CD_ADD:
		rc = sm_fail(SM_ERR_INVALID, "mapping before hello");
		return reply(d, rc, 0, sm_last_error());
	case CD_DEL:
		range_del(d, m->id);
		return 0;
	default:
		return reply(d, SM_ERR_INVALID, 0, "unknown request");
	}
}

/* The client's progress thread waits for a mapping's answer (the first
 * copy into a peer's new buffer): how long they take says what that
 * first copy costs NCCL. */
static void count_map(struct cd_stats *s, uint64_t ns)
{
	s->maps++;
	s->map_ns += ns;
	if (ns > s->map_max_ns)
		s->map_max_ns = ns;
}

/* One control message; returns -1 when the client is gone. */
static int control(struct copyd *d)
{
	struct cd_msg m;
	uint32_t id = 0;
	int fd = -1, rc;
	ssize_t n = sm_recv_some(d->ctrl, &m, sizeof(m), &fd);

	if (n == 0)
		return 0;
	if (n == (ssize_t)sizeof(m) && m.magic == CD_MAGIC && m.op == CD_ADD && d->ring) {
		uint64_t t0 = sm_now_ns();

		rc = range_add(d, &m, fd, &id);		/* consumes fd */
		if (!rc)
			count_map(&d->ring->stats, sm_now_ns() - t0);
		return reply(d, rc, id, rc ? sm_last_error() : NULL);
	}
	rc = request(d, &m, n, fd);
	if (fd >= 0)
		close(fd);
	return rc;
}

static void slot_fail(struct cd_slot *s, const char *why)
{
	snprintf(s->err, sizeof(s->err), "%s", why);
	atomic_store_explicit(&s->state, CD_FAILED, memory_order_release);
}

/* The mapping one side of a request names, if [off, off + len) lies
 * inside it; NULL otherwise. */
static struct range *covering(struct copyd *d, uint32_t id, uint64_t off, uint64_t len)
{
	struct range *r = range_find(d, id);

	return r && off <= r->size && len <= r->size - off ? r : NULL;
}

/* Resolves one side of a request to this process's address. */
static int locate(struct copyd *d, uint32_t id, uint64_t off, uint64_t len, CUdeviceptr *p)
{
	struct range *r = covering(d, id, off, len);

	if (!r)
		return -1;
	*p = (r->host ? r->host_dev : (CUdeviceptr)sm_mapping_base(r->map)) + off;
	return 0;
}

/* Copies the request in slot i out of the ring, reading each field once,
 * and returns its message number.  The client can write the slot at any
 * time: the helper checks this copy and uses only it, so a request
 * rewritten after the check cannot send a copy outside its mappings. */
static uint64_t read_request(const struct cd_slot *s, unsigned i, struct cd_pending *w,
			     uint64_t *post_ns)
{
	const volatile struct cd_slot *v = s;

	memset(w, 0, sizeof(*w));
	w->slot = i;
	w->src_id = v->src_id;
	w->dst_id = v->dst_id;
	w->src_off = v->src_off;
	w->dst_off = v->dst_off;
	w->len = v->len;
	*post_ns = v->post_ns;
	return v->seq;
}

/* Takes every newly posted request, in order, into the waiting copies;
 * returns how many.  `now`: this turn's clock, for the statistics (the
 * loop takes microseconds). */
static int take(struct copyd *d, uint64_t now)
{
	int n = 0;

	while (d->tail - d->oldest < CD_SLOTS) {
		unsigned i = d->tail % CD_SLOTS;
		struct cd_slot *s = &d->ring->slot[i];
		struct cd_pending w;
		struct range *dst, *src;
		uint64_t post_ns;

		if (atomic_load_explicit(&s->state, memory_order_acquire) != CD_POSTED ||
		    read_request(s, i, &w, &post_ns) != d->tail)
			break;
		d->tail++;
		n++;
		if (post_ns)
			sm_hist_add(&d->ring->stats.take_hist, now > post_ns ? now - post_ns : 0);
		d->posted_at[i] = post_ns;
		dst = covering(d, w.dst_id, w.dst_off, w.len);
		src = covering(d, w.src_id, w.src_off, w.len);
		if (!dst || !src || dst->dying || src->dying) {
			slot_fail(s, "copy names an unknown mapping or runs past one");
			continue;
		}
		src->busy++;
		dst->busy++;
		d->slot_src[i] = src->id;
		d->slot_dst[i] = dst->id;
		w.dst_key = dest_key(d, dst);	/* <= ngpus <= MAX_GPUS */
		d->key_seen[w.dst_key] = ++d->taken;
		if (w.dst_key)
			d->used |= 1ull << dst->gpu;
		cd_queue_add(&d->queue, &w);
		d->held[i] = 1;
		if (d->queue.n > d->ring->stats.waiting_max)
			d->ring->stats.waiting_max = d->queue.n;
	}
	return n;
}

/* Ends every request of the copy led by slot `lead`; with `keep_ranges`
 * its mappings stay held for good (end_failed()). */
static void finish(struct copyd *d, unsigned lead, CUresult crc, uint64_t now, int keep_ranges)
{
	for (unsigned m = lead; m != CD_SLOTS; m = d->queue.next[m]) {
		struct cd_slot *s = &d->ring->slot[m];

		d->held[m] = 0;
		d->ring->stats.landed_ns += now - d->queued_at[lead];
		if (now - d->queued_at[lead] > d->ring->stats.landed_max_ns)
			d->ring->stats.landed_max_ns = now - d->queued_at[lead];
		sm_hist_add(&d->ring->stats.landed_hist, now - d->queued_at[lead]);
		if (!keep_ranges) {
			range_unhold(d, d->slot_src[m]);
			range_unhold(d, d->slot_dst[m]);
		}
		if (crc != CUDA_SUCCESS)
			slot_fail(s, sm_last_error());
		else
			atomic_store_explicit(&s->state, CD_DONE, memory_order_release);
	}
}

/* A copy's first source and destination bytes in this process.  take()
 * checked every member, so the whole copy lies inside both mappings. */
static void locate_group(struct copyd *d, const struct cd_group *g, CUdeviceptr *src,
			 CUdeviceptr *dst)
{
	*src = 0;
	*dst = 0;
	locate(d, g->src_id, g->src_off, cd_group_src_span(g), src);
	locate(d, g->dst_id, g->dst_off, cd_group_dst_span(g), dst);
}

/* A copy of back-to-back bytes from host memory short enough to wait for
 * the GPU's time slice as a plain copy (CD_SMALL_HOST). */
static int small_from_host(struct copyd *d, const struct cd_group *g)
{
	const struct range *src, *dst;

	/* Most copies are long: they cost no range lookup here. */
	if (g->len >= CD_SMALL_HOST || (g->width && g->members > 1) || !cd_small_rows(g->len))
		return 0;
	src = range_find(d, g->src_id);
	dst = range_find(d, g->dst_id);
	return src && src->in_host && dst && !dst->in_host;
}

static CUresult copy_2d(struct copyd *d, CUdeviceptr dst, uint64_t dpitch, CUdeviceptr src,
			uint64_t spitch, uint64_t width, uint64_t rows, CUstream st)
{
	CUDA_MEMCPY2D c;

	memset(&c, 0, sizeof(c));
	/* Unified addressing: the driver tells GPU memory from the mapped
	 * host staging it also copies from. */
	c.srcMemoryType = CU_MEMORYTYPE_UNIFIED;
	c.srcDevice = src;
	c.srcPitch = spitch;
	c.dstMemoryType = CU_MEMORYTYPE_UNIFIED;
	c.dstDevice = dst;
	c.dstPitch = dpitch;
	c.WidthInBytes = width;
	c.Height = rows;
	return d->cu->memcpy_2d_async(&c, st);
}

/* Queues a copy small_from_host() chose as a 2D copy of equal rows. */
static CUresult queue_small(struct copyd *d, const struct cd_group *g, CUstream st)
{
	uint64_t rows = cd_small_rows(g->len), width = g->len / rows;
	CUdeviceptr src, dst;

	locate_group(d, g, &src, &dst);
	d->ring->stats.small_2d++;
	return copy_2d(d, dst, width, src, width, width, rows, st);
}

/* Queues one copy: a plain one for back-to-back members, a 2D one for
 * evenly spaced rows or a short copy from host memory. */
static CUresult queue_copy(struct copyd *d, const struct cd_group *g, CUstream st)
{
	CUdeviceptr src, dst;

	if (small_from_host(d, g))
		return queue_small(d, g, st);
	locate_group(d, g, &src, &dst);
	if (!g->width || g->members == 1)
		return d->cu->memcpy_async(dst, src, g->len, st);
	d->ring->stats.strided++;
	return copy_2d(d, dst, g->dpitch, src, g->spitch, g->width, (uint64_t)g->members, st);
}

/* Queues n > 1 copies as one batch call, 2D ones as their rows.  The
 * copies of a call run in any order: they never overlap (NCCL's steps in
 * flight are distinct bytes).  *queued is set once some of them are on
 * the stream (a short copy from host memory goes ahead on its own), which
 * a failure later in the call does not take back. */
static CUresult queue_batch(struct copyd *d, const struct cd_group *g, int n, CUstream st,
			    int *queued)
{
	CUdeviceptr src[CD_BATCH_MAX], dst[CD_BATCH_MAX];
	size_t len[CD_BATCH_MAX], first = 0;
	CUmemcpyAttributes attr;
	size_t count = 0;

	for (int i = 0; i < n; i++)
		count += cd_group_copies(&g[i]);
	if (count > CD_BATCH_MAX)
		return CUDA_ERROR_INVALID_VALUE;	/* cd_queue_take_batch keeps to it */
	count = 0;
	for (int i = 0; i < n; i++) {
		CUdeviceptr s, t;
		unsigned rows = cd_group_copies(&g[i]);
		CUresult crc;

		/* In a batch call it would wait for the time slice too; on the
		 * same stream it is still covered by the call's event. */
		if (small_from_host(d, &g[i])) {
			crc = queue_small(d, &g[i], st);
			if (crc != CUDA_SUCCESS)
				return crc;
			*queued = 1;
			continue;
		}

		locate_group(d, &g[i], &s, &t);
		for (unsigned r = 0; r < rows; r++) {
			src[count] = s + r * g[i].spitch;
			dst[count] = t + r * g[i].dpitch;
			len[count] = g[i].width ? g[i].width : g[i].len;
			count++;
		}
	}
	if (!count)
		return CUDA_SUCCESS;
	memset(&attr, 0, sizeof(attr));
	attr.srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_STREAM;
	d->ring->stats.batches++;
	d->ring->stats.batched += count;
	return d->cu->memcpy_batch_async(dst, src, len, count, &attr, &first, 1, st);
}

/* 1 once nothing queued on stream `st` runs any more; 0 if it still does
 * after FAILED_DRAIN_NS, or the stream reports an error instead (its work
 * may or may not have stopped). */
static int stream_drained(struct copyd *d, CUstream st)
{
	uint64_t limit = sm_now_ns() + FAILED_DRAIN_NS;
	CUresult crc;

	while ((crc = d->cu->stream_query(st)) == CUDA_ERROR_NOT_READY) {
		if (sm_now_ns() > limit)
			return 0;
		usleep(100);
	}
	return crc == CUDA_SUCCESS;
}

/* Ends the requests of a call that failed (sm_last_error() says how).
 * With `on_stream`, part of it may be queued on stream `st` all the same:
 * short copies sent ahead of a batch call that failed, or a copy whose
 * event could not be recorded.  Nothing would ever wait for that work
 * (no event, no place in fifo[]), so the requests end only once the
 * stream ran it: else the client reuses their buffers, and finish() frees
 * dying ranges (range_del()), while the copy still moves bytes.  A stream
 * still busy after the bound leaves the requests failed and their ranges
 * held for good: mappings kept to the end of the process beat a copy
 * faulting on an unmapped one. */
static void end_failed(struct copyd *d, unsigned lead, CUresult crc, int st, int on_stream)
{
	char why[256];
	int keep = 0;

	if (on_stream && !stream_drained(d, d->stream[st])) {
		/* First: the slot's message has room for 80 bytes. */
		snprintf(why, sizeof(why), "%s", sm_last_error());
		sm_fail(SM_ERR_CUDA, "still queued after %.0f s, mappings kept: %s",
			(double)FAILED_DRAIN_NS / 1e9, why);
		keep = 1;
	}
	finish(d, lead, crc, sm_now_ns(), keep);
}

/* When the copy queued now will start, and which destination goes first
 * then.  The streams hold up to depth copies each (tens of MiB), so a copy
 * chosen by the phase of the moment it is queued would run in a later
 * phase, and helpers with more queued would run out of step with the
 * others.  *max_len: the bytes the call may carry (cd_call_limit): what
 * fits in the rest of that phase, so a copy does not run on into the next
 * one, within the merge size and the phases' call size. */
static uint32_t plan(const struct copyd *d, uint64_t *max_len)
{
	double rate = engine_rate(d);
	uint64_t now = sm_now_ns();
	uint64_t start = now + (uint64_t)((double)d->inflight_bytes / rate);
	uint32_t key = one_destination(d) ? 0 : phase_at(d, start);
	uint64_t room = UINT64_MAX;

	if (key)
		room = (uint64_t)(rate * (double)(d->phase_ns - start % d->phase_ns));
	*max_len = cd_call_limit(key, room, d->queue.merge_max);
	return key;
}

/* What tells that the copy just queued on stream `st` landed: the
 * call's ticket written into landed[st] after it, or its lead's event. */
static CUresult mark_landing(struct copyd *d, unsigned lead, int st, const char **call)
{
	uint32_t t;
	CUresult crc;

	if (!d->landing) {
		*call = "cuEventRecord after a copy";
		return d->cu->event_record(d->ev[lead], d->stream[st]);
	}
	*call = "cuStreamWriteValue32 after a copy";
	t = d->ticket[st] + 1;
	if (t == 0)
		t = 1;	/* 0 is the word's value before any write */
	crc = d->cu->stream_write_value32(d->stream[st], d->landed_dev + (CUdeviceptr)st * 4, t,
					  CU_STREAM_WRITE_VALUE_DEFAULT);
	if (crc != CUDA_SUCCESS)
		return crc;
	d->ticket[st] = t;
	d->lead_ticket[lead] = t;
	/* The client may now watch the word itself (copy_helper.c). */
	for (unsigned m = lead; m != CD_SLOTS; m = d->queue.next[m]) {
		struct cd_slot *s = &d->ring->slot[m];

		s->stream = (uint32_t)st;
		s->ticket = t;
		atomic_store_explicit(&s->state, CD_QUEUED, memory_order_release);
	}
	return CUDA_SUCCESS;
}

/* Queues waiting copies on streams with room: per call the oldest to the
 * destination of the phase it will run in (else the oldest), with more
 * copies in the same batch call while they fit the call's limits.  Only
 * `depth` calls wait on a stream, so while the engine is busy the rest
 * wait here, where later requests can still join them.  Returns how many
 * calls it queued. */
static int issue(struct copyd *d)
{
	struct cd_group g[CD_BATCH_MAX];
	uint64_t max_len, bytes;
	uint32_t key;
	int queued = 0, n, members;

	while (d->queue.n && d->fifo_n[d->next_stream] < d->depth) {
		int st = d->next_stream, on_stream = 0;
		const char *call;
		unsigned lead;
		uint64_t t0, t1;
		CUresult crc;

		key = plan(d, &max_len);
		n = cd_queue_take_batch(&d->queue, key, max_len, d->batch, g);
		lead = g[0].lead;
		d->next_stream = (st + 1) % d->nstreams;
		t0 = sm_now_ns();
		crc = n == 1 ? queue_copy(d, &g[0], d->stream[st]) :
		      queue_batch(d, g, n, d->stream[st], &on_stream);
		t1 = sm_now_ns();
		call = n > 1 ? "cuMemcpyBatchAsync" :
		       g[0].width && g[0].members > 1 ? "cuMemcpy2DAsync" : "cuMemcpyAsync";
		if (crc == CUDA_SUCCESS) {
			on_stream = 1;
			crc = mark_landing(d, lead, st, &call);
		}
		d->queued_at[lead] = sm_now_ns();
		d->ring->stats.copy_call_ns += t1 - t0;
		d->ring->stats.event_call_ns += d->queued_at[lead] - t1;
		if (d->queued_at[lead] - t0 > d->ring->stats.call_max_ns)
			d->ring->stats.call_max_ns = d->queued_at[lead] - t0;
		bytes = 0;
		members = 0;
		for (int i = 0; i < n; i++) {
			bytes += g[i].len;
			members += g[i].members;
		}
		if (crc != CUDA_SUCCESS) {
			sm_cuda_fail(crc, "%s of %llu bytes", call, (unsigned long long)bytes);
			end_failed(d, lead, crc, st, on_stream);
			continue;
		}
		for (unsigned m = lead; m != CD_SLOTS; m = d->queue.next[m]) {
			uint64_t posted = d->posted_at[m];

			if (!posted || posted > d->queued_at[lead])
				continue;	/* a clock it got wrong: only a statistic */
			d->ring->stats.queue_ns += d->queued_at[lead] - posted;
			sm_hist_add(&d->ring->stats.queue_hist, d->queued_at[lead] - posted);
		}
		d->fifo[st][(d->fifo_head[st] + d->fifo_n[st]) % CD_SLOTS] = lead;
		d->fifo_n[st]++;
		d->copy_len[lead] = bytes;
		d->inflight_bytes += bytes;
		d->moved += bytes;
		d->ring->stats.copies += (uint64_t)members;
		d->ring->stats.bytes += bytes;
		d->ring->stats.issued++;
		if (key) {
			d->ring->stats.phased_bytes += bytes;
			for (int i = 0; i < n; i++)
				if (g[i].dst_key == key)
					d->ring->stats.in_phase_bytes += g[i].len;
		}
		queued++;
	}
	return queued;
}

/* Whether stream st's oldest copy (led by `lead`) landed, as an event
 * query would answer: its ticket in landed[st] is the answer, read from
 * host memory.  A failed copy writes no ticket, so a copy long unlanded
 * has its stream asked now and then; an idle stream has run everything
 * queued on it, the write too. */
static CUresult landed(struct copyd *d, int st, unsigned lead, uint64_t now)
{
	uint32_t seen = atomic_load_explicit(&d->ring->landed[st], memory_order_acquire);
	CUresult crc;

	if ((int32_t)(seen - d->lead_ticket[lead]) >= 0)
		return CUDA_SUCCESS;
	if (now - d->queued_at[lead] < STALL_QUERY_NS || now < d->next_query[st])
		return CUDA_ERROR_NOT_READY;
	d->next_query[st] = now + STALL_QUERY_NS;
	crc = d->cu->stream_query(d->stream[st]);
	return crc;
}

/* Ends the requests whose copies landed; a stream's copies land in order,
 * so only the oldest of each is asked about.  Returns how many copies are
 * still queued. */
static int complete(struct copyd *d, int *ended)
{
	uint64_t now = sm_now_ns();
	int inflight = 0;

	for (int st = 0; st < d->nstreams; st++) {
		while (d->fifo_n[st] > 0) {
			unsigned lead = d->fifo[st][d->fifo_head[st]];
			CUresult crc = d->landing ? landed(d, st, lead, now) :
				       d->cu->event_query(d->ev[lead]);

			if (crc == CUDA_ERROR_NOT_READY)
				break;
			if (crc != CUDA_SUCCESS)
				sm_cuda_fail(crc, "the copy engine reported a failed copy");
			finish(d, lead, crc, now, 0);
			(*ended)++;
			d->inflight_bytes -= d->copy_len[lead];
			d->fifo_head[st] = (d->fifo_head[st] + 1) % CD_SLOTS;
			d->fifo_n[st]--;
		}
		inflight += d->fifo_n[st];
	}
	while (d->oldest < d->tail && !d->held[d->oldest % CD_SLOTS])
		d->oldest++;
	return inflight;
}

static void serve(struct copyd *d)
{
	uint64_t last_work = sm_now_ns(), next_parent_check = 0, turn = last_work;
	unsigned spins = 0;
	int was_busy = 0;

	for (;;) {
		int worked = 0, inflight = 0;
		uint64_t now = sm_now_ns();	/* a vDSO clock read: cheap */

		if (now > next_parent_check) {
			if (getppid() != d->client)
				return;		/* the client is gone */
			next_parent_check = now + PARENT_CHECK_NS;
		}
		/* Busy time: turns that began with a copy in flight. */
		if (was_busy) {
			d->busy_ns += now - turn;
			d->ring->stats.busy_ns += now - turn;
			if (now - turn > d->ring->stats.turn_max_ns)
				d->ring->stats.turn_max_ns = now - turn;
		}
		turn = now;

		if (d->ring) {
			int ended = 0;

			worked = take(d, now);
			worked += issue(d);
			/* Waiting copies mean every stream is full. */
			inflight = complete(d, &ended) + (int)d->queue.n;
			if (worked || ended)
				d->ring->stats.work_ns += sm_now_ns() - now;
		}
		was_busy = inflight > 0;
		if (worked || inflight)
			last_work = sm_now_ns();
		/* The socket is checked every 256 turns while busy, at once
		 * when idle: a poll per turn would add a syscall per copy. */
		if (!worked && !inflight && sm_now_ns() - last_work > SPIN_NS) {
			struct pollfd p = { .fd = d->ctrl, .events = POLLIN };
			struct timespec ts = { 0, IDLE_SLEEP_NS };

			if (ppoll(&p, 1, &ts, NULL) > 0 && control(d) < 0)
				return;
		} else if ((++spins & 255) == 0 || !d->ring) {
			struct pollfd p = { .fd = d->ctrl, .events = POLLIN };

			if (poll(&p, 1, d->ring ? 0 : 1000) > 0 && control(d) < 0)
				return;
		} else if (!worked && !inflight) {
			/* Right after work the next request is usually microseconds
			 * away (NCCL's next step): spin without entering the kernel.
			 * Later, yield the core to whoever shares it. */
			if (sm_now_ns() - last_work < PAUSE_SPIN_NS)
				cpu_relax();
			else
				sched_yield();
		}
	}
}

/* At exit: queued copies finish before the mappings go.  Once every
 * stream is idle no copy can name a range, so ranges still counted busy
 * (copies whose end the loop never saw, when it stopped right after the
 * client went) go too; range_del() would only mark them dying, and a loop
 * over it would never end.  An engine still busy after EXIT_DRAIN_NS
 * leaves the mappings to the end of the process. */
static void drain_and_unmap(struct copyd *d)
{
	uint64_t limit = sm_now_ns() + EXIT_DRAIN_NS;

	for (int i = 0; i < d->nstreams; i++) {
		while (d->cu->stream_query(d->stream[i]) == CUDA_ERROR_NOT_READY) {
			if (sm_now_ns() > limit)
				return;
			usleep(100);
		}
	}
	while (d->nranges)
		range_free(d, &d->ranges[d->nranges - 1]);
	free(d->ranges);
	d->ranges = NULL;
	if (d->landing)
		d->cu->mem_host_unregister(d->ring);
}

int main(int argc, char **argv)
{
	static struct copyd d;	/* large (per-slot tables): not on the stack */

	memset(&d, 0, sizeof(d));
	d.ctrl = CD_CTRL_FD;
	if (argc != 2) {
		fprintf(stderr, "usage: %s <client pid> (started by libnccl-net-symmem)\n", argv[0]);
		return 2;
	}
	d.client = (pid_t)strtol(argv[1], NULL, 10);
	if (getppid() != d.client)
		return 1;	/* started by someone else, or the client is already gone */
	close_inherited();
	serve(&d);
	drain_and_unmap(&d);
	return 0;
}
