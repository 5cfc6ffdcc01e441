/* The copy helper (smfree/copyd.c): its control messages (hello, map,
 * unmap, and anything else a client sends on its socket) and the copy
 * requests in the shared ring.  The helper trusts nothing its client
 * writes: it must refuse what does not add up, never copy outside what it
 * mapped, and leave when the client hangs up.
 *
 * The helper's own loop, serve(), runs on a thread of this process (the
 * file is included whole and its other files linked, as its unit test
 * does) against the fake driver of test/fakedriver/, loaded as
 * libcuda.so.1 in its strict mode: one GPU whose copy engine aborts on a
 * copy outside the host memory registered with it.
 * The target is the client.  Input: operations until it ends, each an
 * opcode byte (modulo OP_COUNT) and its fields. */
#define main copyd_main
#include "copyd.c"
#undef main

#include <pthread.h>
#include <sys/socket.h>

#include "fuzz.h"

enum op {
	OP_HELLO,	/* u8 flags, u32 streams, depth, batch, u64 merge_max, u32 version */
	OP_ADD,		/* u8 flags, u32 kind, u32 size, u64 claimed size: a mapping */
	OP_DEL,		/* u8 which: forget a mapping */
	OP_RAW,		/* u16 length, bytes: any message */
	OP_POST,	/* u8 src, u8 dst, u64 src_off, u64 dst_off, u32 len: a request */
	OP_WAIT,	/* until the helper ended every request (bounded), then free them */
	OP_REWRITE,	/* u16 slot, u8 field, u64 value: change a posted request (its
			 * mappings, offsets, length or watch word) */
	OP_COUNT
};

#define HELLO_RING 1u		/* hello: pass the ring */
#define HELLO_BAD_RING 2u	/* ... one of the wrong layout */
#define HELLO_VERSION 4u	/* ... with the input's version */
#define ADD_NO_FD 1u		/* mapping: no descriptor */
#define ADD_CLAIM 2u		/* ... claiming the input's size, not the memfd's */
#define ADD_HELPER_PID 4u	/* ... exported by the helper's process, it says */

#define REPLY_WAIT_MS 1000
#define WAIT_NS (200ull * 1000 * 1000)
#define MAX_IDS 16
#define MAP_MAX (1u << 20)

static struct copyd helper;	/* large (per-slot tables): not on the stack */
static _Atomic int helper_gone;

struct client {
	int fd;
	int ringfd;
	struct cd_ring *ring;
	uint32_t ids[MAX_IDS];
	int nids;
	uint64_t seq;		/* next request's number */
	int served;		/* a hello was answered yes: requests are taken */
};

static void *serve_thread(void *arg)
{
	(void)arg;
	serve(&helper);
	atomic_store(&helper_gone, 1);
	return NULL;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	fz_quiet();
	/* Before the driver is opened, which reads its mode once: without
	 * strict mode a copy outside the helper's mappings goes unnoticed. */
	setenv("FAKE_CUDA_MODE", "strict", 1);
	/* Without the fake driver every hello fails and nothing else runs. */
	if (!sm_cu()) {
		fprintf(stderr, "fuzz_copyd: the fake libcuda.so.1 does not serve: %s\n",
			sm_cuda_load()->reason);
		abort();
	}
	return 0;
}

/* Waits for one reply (the helper answers hello and mappings); a mapping's
 * name is kept for requests.  Returns the reply's status, or -1. */
static int take_reply(struct client *c)
{
	struct cd_reply r;
	int ready = 0;

	/* In slices: a helper that left has not closed its end yet. */
	for (int ms = 0; ms < REPLY_WAIT_MS && !ready && !atomic_load(&helper_gone); ms++)
		ready = sm_wait_fd(c->fd, POLLIN, 1) > 0;
	if (!ready || recv(c->fd, &r, sizeof(r), MSG_DONTWAIT) != (ssize_t)sizeof(r))
		return -1;
	if (r.status == SM_OK && r.id && c->nids < MAX_IDS)
		c->ids[c->nids++] = r.id;
	return r.status;
}

static void send_msg(struct client *c, const void *m, size_t len, int fd)
{
	fz_send(c->fd, m, len, fd);
}

static void hello(struct client *c, struct fz_in *in)
{
	unsigned flags = fz_u8(in);
	struct cd_msg m;

	memset(&m, 0, sizeof(m));
	m.magic = CD_MAGIC;
	m.op = CD_HELLO;
	m.nstreams = fz_u32(in);
	m.depth = fz_u32(in);
	m.batch = fz_u32(in);
	m.merge_max = fz_u64(in);
	m.version = fz_u32(in);
	if (!(flags & HELLO_VERSION))
		m.version = CD_VERSION;
	snprintf(m.pci_bus_id, sizeof(m.pci_bus_id), "0000:00:00.0");	/* the fake driver's GPU */
	c->ring->magic = flags & HELLO_BAD_RING ? 0 : CD_MAGIC;
	send_msg(c, &m, sizeof(m), flags & HELLO_RING ? c->ringfd : -1);
	if (take_reply(c) == SM_OK)
		c->served = 1;
}

static void add(struct client *c, struct fz_in *in)
{
	unsigned flags = fz_u8(in);
	struct cd_msg m;
	uint64_t claim;
	int fd, status;

	memset(&m, 0, sizeof(m));
	m.magic = CD_MAGIC;
	m.op = CD_ADD;
	/* A real client is the helper's parent, another process; the helper
	 * runs in this one, so its own pid names the helper (refused: with
	 * it, import.c would take a legacy IPC address and size on trust). */
	m.owner_pid = (int32_t)(flags & ADD_HELPER_PID ? getpid() : getppid());
	m.info.kind = fz_u32(in) % 4;
	m.info.alloc_size = fz_u32(in) % MAP_MAX;
	claim = fz_u64(in);
	fd = flags & ADD_NO_FD ? -1 : fz_memfd(m.info.alloc_size);
	if (flags & ADD_CLAIM)
		m.info.alloc_size = claim;
	send_msg(c, &m, sizeof(m), fd);
	if (fd >= 0)
		close(fd);	/* the helper holds its own */
	status = take_reply(c);
	if (flags & ADD_HELPER_PID)
		FZ_CHECK(status != SM_OK);
}

static uint32_t pick_id(const struct client *c, uint8_t which)
{
	return which < c->nids ? c->ids[which] : which;
}

static void del(struct client *c, struct fz_in *in)
{
	struct cd_msg m;

	memset(&m, 0, sizeof(m));
	m.magic = CD_MAGIC;
	m.op = CD_DEL;
	m.id = pick_id(c, fz_u8(in));
	send_msg(c, &m, sizeof(m), -1);
}

static void raw(struct client *c, struct fz_in *in)
{
	uint8_t m[sizeof(struct cd_msg) + 16];
	size_t len = fz_take(in, m, fz_u16(in) % sizeof(m));

	send_msg(c, m, len, -1);
}

static void post(struct client *c, struct fz_in *in)
{
	struct cd_slot *s = &c->ring->slot[c->seq % CD_SLOTS];
	uint32_t src = pick_id(c, fz_u8(in)), dst = pick_id(c, fz_u8(in));
	uint64_t src_off = fz_u64(in), dst_off = fz_u64(in);
	uint32_t len = fz_u32(in);

	if (atomic_load(&s->state) != CD_FREE)
		return;
	s->src_id = src;
	s->dst_id = dst;
	s->src_off = src_off;
	s->dst_off = dst_off;
	s->len = len;
	s->seq = c->seq++;
	atomic_store_explicit(&s->state, CD_POSTED, memory_order_release);
}

/* The client frees what ended; requests the helper never ended (it left,
 * or took longer than the bound) stay as they are. */
static void wait_all(struct client *c)
{
	uint64_t end = sm_now_ns() + WAIT_NS;
	int busy = 1;

	while (busy && c->served && !atomic_load(&helper_gone) && sm_now_ns() < end) {
		busy = 0;
		for (int i = 0; i < CD_SLOTS; i++)
			busy |= atomic_load(&c->ring->slot[i].state) == CD_POSTED;
		if (busy)
			sched_yield();
	}
	for (int i = 0; i < CD_SLOTS; i++) {
		uint32_t st = atomic_load(&c->ring->slot[i].state);

		if (st == CD_DONE || st == CD_FAILED)
			atomic_store(&c->ring->slot[i].state, CD_FREE);
	}
}

/* A hostile client changes a request it posted, whenever it likes. */
static void rewrite(struct client *c, struct fz_in *in)
{
	struct cd_slot *s = &c->ring->slot[fz_u16(in) % CD_SLOTS];
	unsigned field = fz_u8(in);
	uint64_t v = fz_u64(in);

	switch (field % 8) {
	case 0:
		s->src_id = (uint32_t)v;
		break;
	case 1:
		s->dst_id = (uint32_t)v;
		break;
	case 2:
		s->src_off = v;
		break;
	case 3:
		s->dst_off = v;
		break;
	case 4:
		s->len = v;
		break;
	case 5:		/* a watch word: the mapping it names ... */
		s->watch_id = (uint32_t)v;
		break;
	case 6:		/* ... where in it ... */
		s->watch_off = (uint32_t)v;
		break;
	default:	/* ... and what the GPU writes there */
		s->watch_val = (uint32_t)v;
		break;
	}
}

static void step(struct client *c, struct fz_in *in)
{
	switch (fz_u8(in) % OP_COUNT) {
	case OP_HELLO:
		hello(c, in);
		break;
	case OP_ADD:
		add(c, in);
		break;
	case OP_DEL:
		del(c, in);
		break;
	case OP_RAW:
		raw(c, in);
		break;
	case OP_POST:
		post(c, in);
		break;
	case OP_WAIT:
		wait_all(c);
		break;
	default:
		rewrite(c, in);
		break;
	}
}

static int open_ring(struct client *c)
{
	void *map;

	if (sm_memfd_map("symmem-fuzz-ring", sizeof(struct cd_ring), sizeof(struct cd_ring),
			 &c->ringfd, &map))
		return -1;
	c->ring = map;
	memset(c->ring, 0, sizeof(*c->ring));
	c->ring->magic = CD_MAGIC;
	c->ring->nslots = CD_SLOTS;
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fz_in in = { data, size };
	struct client c;
	pthread_t t;
	int sv[2], fds = fz_fd_count();

	memset(&c, 0, sizeof(c));
	if (open_ring(&c))
		return 0;
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0)
		goto close_ring;
	c.fd = sv[0];
	memset(&helper, 0, sizeof(helper));
	helper.ctrl = sv[1];
	helper.client = getppid();	/* serve() leaves once re-parented */
	atomic_store(&helper_gone, 0);
	FZ_CHECK(pthread_create(&t, NULL, serve_thread, NULL) == 0);
	while (in.n && !atomic_load(&helper_gone))
		step(&c, &in);
	close(c.fd);		/* the hang-up: the helper must leave */
	pthread_join(t, NULL);
	drain_and_unmap(&helper);
	if (helper.ring)
		munmap(helper.ring, sizeof(*helper.ring));
	close(helper.ctrl);
close_ring:
	munmap(c.ring, sizeof(*c.ring));
	close(c.ringfd);
	FZ_CHECK(fz_fd_count() == fds);
	return 0;
}
