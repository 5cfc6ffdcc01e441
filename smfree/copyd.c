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
 * threads come and go with communicators while the helper serves them all.)
 *
 * This file is its lifecycle: start, the GPU opened at hello, the loop,
 * exit.  The control socket is copyd_intake.c's, the copies
 * copyd_engine.c's; copyd.h is what they share. */
#include <dirent.h>
#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <unistd.h>

#include "copyd.h"

/* After this long without work the loop sleeps between polls instead of
 * spinning; the first request after a quiet spell waits at most one sleep. */
#define SPIN_NS (50ull * 1000 * 1000)
#define IDLE_SLEEP_NS 50000
/* For this long after work the loop spins in user space; then it yields. */
#define PAUSE_SPIN_NS (2ull * 1000 * 1000)
/* How often it looks whether its client still lives. */
#define PARENT_CHECK_NS (200ull * 1000 * 1000)
/* At exit, how long queued copies may take to finish before the helper
 * leaves its mappings to the end of the process; below the client's 5 s
 * before it kills a helper that does not exit. */
#define EXIT_DRAIN_NS (4000ull * 1000 * 1000)

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
	d->watching = d->cu->stream_batch_mem_op != NULL;
	ring->stats.landing_words = 1;
}

/* The hello: the client's parameters, its ring, its GPU.  d->ring is set
 * only once all of them are good, so nothing else is served before. */
int open_gpu(struct copyd *d, const struct cd_msg *m, int ringfd)
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
