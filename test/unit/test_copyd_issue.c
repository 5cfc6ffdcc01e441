/* The copy helper (smfree/copyd.c) when a copy-engine call fails after
 * part of it is already on a stream: a short copy from host staging sent
 * ahead of a batch call that fails, or a copy whose event cannot be
 * recorded.  Its requests may end, and a mapping the client dropped may
 * go, only once that copy stopped running.
 *
 * The helper's GPU calls cannot run here, so the driver table is a fake
 * engine: a copy queued on a stream runs for `copy_ns` of wall-clock time
 * (or forever), and the stream, its events and cuStreamSynchronize all
 * answer by that clock.  Everything else is the helper's own code
 * (copyd.c included whole, its other files linked), and its mappings are
 * real memfd host staging mapped by range_add().  (scripts/gpu_check.sh runs the helper on GPUs.) */
#define main copyd_main
#include "copyd.c"
#undef main

#include <setjmp.h>
#include <stdarg.h>
#include <sys/socket.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "fd_util.h"
#include "touch_hook.h"

#define MIB (1ull << 20)
#define MS (1000ull * 1000)
#define NEVER UINT64_MAX

/* ---- the fake engine ---- */

struct fake_copy {
	CUdeviceptr src, dst;
	size_t len;
	uint64_t lands_ns;
};

struct fake_reg {
	void *p;
	size_t size;
};

static struct {
	struct fake_copy copy[64];
	int ncopies;
	struct fake_reg reg[16];
	int nregs;
	uint64_t copy_ns;	/* how long a queued copy runs; NEVER: it never lands */
	int fail_batch;		/* cuMemcpyBatchAsync fails */
	int fail_copy;		/* cuMemcpyAsync fails */
	int fail_event;		/* cuEventRecord fails */
	int fail_query;		/* cuEventQuery reports a failed copy once it landed */
	int unregistered;	/* cuMemHostUnregister calls */
	int fail_write;		/* cuStreamWriteValue32 fails */
	int stream_error;	/* copies fail on the engine: no write after them lands */
	int event_calls;	/* cuEventRecord and cuEventQuery calls */
	struct {		/* stream writes queued: they land with the copies before */
		_Atomic uint32_t *word;
		uint32_t value;
		uint64_t lands_ns;
	} write[128];
	int nwrites;
	int freed_under_copy;	/* ... of memory a copy still running reads or writes */
	int batch_mem_ops;	/* cuStreamBatchMemOp calls */
	int fail_batch_mem_op;	/* ... which fail */
} eng;

static int running(const struct fake_copy *c)
{
	return c->lands_ns == NEVER || sm_now_ns() < c->lands_ns;
}

/* Copies still running; the test has one stream, so its events too. */
static int copies_running(void)
{
	int n = 0;

	for (int i = 0; i < eng.ncopies; i++)
		n += running(&eng.copy[i]);
	return n;
}

static CUresult queue(CUdeviceptr dst, CUdeviceptr src, size_t len)
{
	struct fake_copy *c = &eng.copy[eng.ncopies++];

	assert_true(eng.ncopies <= 64);
	c->src = src;
	c->dst = dst;
	c->len = len;
	c->lands_ns = eng.copy_ns == NEVER ? NEVER : sm_now_ns() + eng.copy_ns;
	return CUDA_SUCCESS;
}

static CUresult f_error_string(CUresult rc, const char **s)
{
	(void)rc;
	*s = "fake failure";
	return CUDA_SUCCESS;
}

static CUresult f_memcpy(CUdeviceptr dst, CUdeviceptr src, size_t len, CUstream st)
{
	(void)st;
	return eng.fail_copy ? CUDA_ERROR_INVALID_VALUE : queue(dst, src, len);
}

static CUresult f_memcpy_2d(const CUDA_MEMCPY2D *c, CUstream st)
{
	(void)st;
	return queue(c->dstDevice, c->srcDevice, c->WidthInBytes * c->Height);
}

static CUresult f_memcpy_batch(CUdeviceptr *dst, CUdeviceptr *src, size_t *len, size_t n,
			       CUmemcpyAttributes *attr, size_t *idx, size_t nattr, CUstream st)
{
	(void)attr;
	(void)idx;
	(void)nattr;
	(void)st;
	if (eng.fail_batch)
		return CUDA_ERROR_INVALID_VALUE;
	for (size_t i = 0; i < n; i++)
		queue(dst[i], src[i], len[i]);
	return CUDA_SUCCESS;
}

static CUresult f_event_record(CUevent e, CUstream st)
{
	(void)e;
	(void)st;
	eng.event_calls++;
	return eng.fail_event ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}

static CUresult f_event_query(CUevent e)
{
	(void)e;
	eng.event_calls++;
	if (copies_running())
		return CUDA_ERROR_NOT_READY;
	return eng.fail_query ? CUDA_ERROR_LAUNCH_FAILED : CUDA_SUCCESS;
}

/* The GPU's side of the landing words: the writes whose copies landed,
 * unless the copies failed. */
static void apply_writes(void)
{
	uint64_t now = sm_now_ns();

	for (int i = 0; i < eng.nwrites; i++)
		if (!eng.stream_error && eng.write[i].lands_ns != NEVER &&
		    now >= eng.write[i].lands_ns)
			atomic_store(eng.write[i].word, eng.write[i].value);
}

static CUresult f_write_value(CUstream st, CUdeviceptr addr, cuuint32_t value, unsigned flags)
{
	uint64_t lands = sm_now_ns();

	(void)st;
	assert_int_equal(flags, CU_STREAM_WRITE_VALUE_DEFAULT);	/* ordered after the copy */
	if (eng.fail_write)
		return CUDA_ERROR_INVALID_VALUE;
	for (int i = 0; i < eng.ncopies; i++)
		if (eng.copy[i].lands_ns > lands)
			lands = eng.copy[i].lands_ns;
	assert_true(eng.nwrites < 128);
	eng.write[eng.nwrites].word = (_Atomic uint32_t *)(uintptr_t)addr;
	eng.write[eng.nwrites].value = value;
	eng.write[eng.nwrites++].lands_ns = lands;
	return CUDA_SUCCESS;
}

/* A batch of memory operations: its writes, in order, as single ones. */
static CUresult f_batch_mem_op(CUstream st, unsigned n, CUstreamBatchMemOpParams *op,
			       unsigned flags)
{
	assert_int_equal(flags, 0);
	eng.batch_mem_ops++;
	if (eng.fail_batch_mem_op)
		return CUDA_ERROR_NOT_SUPPORTED;
	for (unsigned i = 0; i < n; i++) {
		CUresult rc;

		assert_int_equal(op[i].operation, CU_STREAM_MEM_OP_WRITE_VALUE_32);
		rc = f_write_value(st, op[i].writeValue.address, op[i].writeValue.value,
				   op[i].writeValue.flags);
		if (rc != CUDA_SUCCESS)
			return rc;
	}
	return CUDA_SUCCESS;
}

static CUresult f_stream_query(CUstream st)
{
	(void)st;
	apply_writes();
	if (copies_running())
		return CUDA_ERROR_NOT_READY;
	return eng.stream_error ? CUDA_ERROR_LAUNCH_FAILED : CUDA_SUCCESS;
}

/* Blocks as the driver's does: only until the copies land. */
static CUresult f_stream_synchronize(CUstream st)
{
	(void)st;
	for (int i = 0; i < eng.ncopies; i++) {
		if (eng.copy[i].lands_ns == NEVER)
			return CUDA_ERROR_LAUNCH_TIMEOUT;	/* rather than hang the test */
		while (running(&eng.copy[i]))
			usleep(100);
	}
	return CUDA_SUCCESS;
}

static CUresult f_host_register(void *p, size_t size, unsigned int flags)
{
	(void)flags;
	assert_true(eng.nregs < 16);
	eng.reg[eng.nregs++] = (struct fake_reg){ p, size };
	return CUDA_SUCCESS;
}

/* Unified addressing: host staging has the same address on the GPU. */
static CUresult f_host_device_pointer(CUdeviceptr *dp, void *p, unsigned int flags)
{
	(void)flags;
	*dp = (CUdeviceptr)p;
	return CUDA_SUCCESS;
}

static int inside(CUdeviceptr a, size_t len, const struct fake_reg *r)
{
	CUdeviceptr base = (CUdeviceptr)r->p;

	return a < base + r->size && a + len > base;
}

static CUresult f_host_unregister(void *p)
{
	eng.unregistered++;
	for (int i = 0; i < eng.nregs; i++) {
		if (eng.reg[i].p != p)
			continue;
		for (int c = 0; c < eng.ncopies; c++)
			if (running(&eng.copy[c]) &&
			    (inside(eng.copy[c].src, eng.copy[c].len, &eng.reg[i]) ||
			     inside(eng.copy[c].dst, eng.copy[c].len, &eng.reg[i])))
				eng.freed_under_copy++;
		eng.reg[i] = eng.reg[--eng.nregs];
		return CUDA_SUCCESS;
	}
	fail_msg("cuMemHostUnregister of %p, never registered", p);
	return CUDA_ERROR_INVALID_VALUE;
}

static const struct sm_cuda_api fake = {
	.get_error_string = f_error_string,
	.memcpy_async = f_memcpy,
	.memcpy_2d_async = f_memcpy_2d,
	.memcpy_batch_async = f_memcpy_batch,
	.event_record = f_event_record,
	.event_query = f_event_query,
	.stream_query = f_stream_query,
	.stream_synchronize = f_stream_synchronize,
	.mem_host_register = f_host_register,
	.mem_host_get_device_pointer = f_host_device_pointer,
	.mem_host_unregister = f_host_unregister,
	.stream_write_value32 = f_write_value,
	.stream_batch_mem_op = f_batch_mem_op,
};

/* ---- the helper, as serve() would have set it up ---- */

static struct copyd d;
static struct cd_ring ring;
static uint64_t next_seq;	/* the client's next message number */

static int setup(void **state)
{
	(void)state;
	memset(&eng, 0, sizeof(eng));
	eng.copy_ns = 20 * MS;
	memset(&ring, 0, sizeof(ring));
	next_seq = 0;
	memset(&d, 0, sizeof(d));
	d.cu = &fake;
	d.ring = &ring;
	d.nstreams = 1;
	d.depth = 4;
	d.batch = 16;
	d.gpu = -1;
	cd_queue_init(&d.queue, 64 * MIB);
	return 0;
}

/* What the helper does at exit, once the engine is idle: every mapping
 * goes, those kept busy for good included. */
static int teardown(void **state)
{
	(void)state;
	for (int i = 0; i < eng.ncopies; i++)
		eng.copy[i].lands_ns = 0;
	drain_and_unmap(&d);
	assert_int_equal(eng.nregs, 0);
	return 0;
}

/* A mapping as CD_ADD makes it: `size` bytes of memfd host staging.  With
 * `gpu` the helper takes it for GPU memory (the fake engine copies either),
 * so that a short copy into it goes as a 2D copy ahead of a batch call. */
static uint32_t add_range(uint64_t size, int gpu)
{
	struct cd_msg m;
	uint32_t id;
	void *map;
	int fd;

	assert_int_equal(sm_memfd_map("test-copyd", size, 4096, &fd, &map), SM_OK);
	munmap(map, 4096);
	memset(&m, 0, sizeof(m));
	m.magic = CD_MAGIC;
	m.op = CD_ADD;
	m.info.kind = SM_SHARE_HOST_FD;
	m.info.alloc_size = size;
	assert_int_equal(range_add(&d, &m, fd, &id), SM_OK);	/* closes fd */
	if (gpu)
		range_find(&d, id)->in_host = 0;
	return id;
}

/* A request as the client posts it; returns its slot. */
static unsigned post(uint32_t src, uint64_t src_off, uint32_t dst, uint64_t dst_off, uint64_t len)
{
	struct cd_slot *s = &ring.slot[next_seq % CD_SLOTS];

	s->src_id = src;
	s->dst_id = dst;
	s->src_off = src_off;
	s->dst_off = dst_off;
	s->len = len;
	s->seq = next_seq;
	atomic_store_explicit(&s->state, CD_POSTED, memory_order_release);
	return (unsigned)(next_seq++ % CD_SLOTS);
}

/* Posts one 64 KiB copy from the start of `staging` to the start of `gpu`
 * (long enough for a plain copy, not a 2D one) and has the helper take
 * it: its slot. */
static unsigned take_one(uint32_t staging, uint32_t gpu)
{
	unsigned c = post(staging, 0, gpu, 0, 64 << 10);

	assert_int_equal(take(&d, sm_now_ns()), 1);
	return c;
}

static int state(unsigned slot)
{
	return atomic_load_explicit(&ring.slot[slot].state, memory_order_acquire);
}

/* A batch call of a short copy from host staging (sent ahead as its own 2D
 * copy) and a GPU-to-GPU copy fails; the client had dropped the staging.
 * The requests end, and the staging is unregistered, only once the 2D
 * copy stopped reading it. */
static void test_batch_fails_after_short_copy(void **state_)
{
	uint32_t staging = add_range(1 * MIB, 0), gpu_a = add_range(64 * MIB, 1),
		 gpu_b = add_range(64 * MIB, 1);
	unsigned a, b;

	(void)state_;
	a = post(staging, 0, gpu_a, 0, 4096);
	b = post(gpu_b, 0, gpu_a, 32 * MIB, 1 * MIB);
	assert_int_equal(take(&d, sm_now_ns()), 2);
	range_del(&d, staging);		/* NCCL deregisters before closing after an abort */
	assert_non_null(range_find(&d, staging));	/* busy: only marked */
	eng.fail_batch = 1;
	issue(&d);

	assert_int_equal(eng.ncopies, 1);	/* the 2D copy went ahead */
	assert_int_equal(state(a), CD_FAILED);
	assert_int_equal(state(b), CD_FAILED);
	assert_non_null(strstr(ring.slot[a].err, "cuMemcpyBatchAsync"));
	assert_int_equal(copies_running(), 0);	/* ended only after it landed */
	assert_int_equal(eng.unregistered, 1);	/* the dropped staging went ... */
	assert_int_equal(eng.freed_under_copy, 0);	/* ... after its copy */
	assert_null(range_find(&d, staging));
	assert_int_equal(range_find(&d, gpu_a)->busy, 0);
	assert_int_equal(range_find(&d, gpu_b)->busy, 0);
}

/* A copy is queued but its event cannot be recorded: nothing would ever
 * wait for it, so the helper waits for its stream before the request
 * fails and the dropped staging goes. */
static void test_event_fails_after_copy(void **state_)
{
	uint32_t staging = add_range(1 * MIB, 0), gpu = add_range(64 * MIB, 1);
	unsigned c;

	(void)state_;
	c = take_one(staging, gpu);
	range_del(&d, staging);
	eng.fail_event = 1;
	issue(&d);

	assert_int_equal(eng.ncopies, 1);
	assert_int_equal(state(c), CD_FAILED);
	assert_int_equal(copies_running(), 0);
	assert_int_equal(eng.unregistered, 1);
	assert_int_equal(eng.freed_under_copy, 0);
	assert_null(range_find(&d, staging));
	assert_non_null(strstr(ring.slot[c].err, "cuEventRecord"));
}

/* The queued copy never lands: the helper waits a bounded time, then
 * fails the request but keeps the mappings it names (held for good)
 * rather than unmap them under the copy. */
static void test_copy_never_lands_keeps_mappings(void **state_)
{
	uint32_t staging = add_range(1 * MIB, 0), gpu = add_range(64 * MIB, 1);
	uint64_t t0, took;
	unsigned c;

	(void)state_;
	eng.copy_ns = NEVER;
	c = take_one(staging, gpu);
	range_del(&d, staging);
	eng.fail_event = 1;
	t0 = sm_now_ns();
	issue(&d);
	took = sm_now_ns() - t0;

	assert_int_equal(state(c), CD_FAILED);
	assert_int_equal(eng.unregistered, 0);
	assert_int_equal(eng.freed_under_copy, 0);
	assert_non_null(range_find(&d, staging));
	assert_true(range_find(&d, staging)->busy > 0);
	assert_true(took >= FAILED_DRAIN_NS);
	assert_true(took < FAILED_DRAIN_NS + 2000 * MS);
	assert_non_null(strstr(ring.slot[c].err, "mappings kept"));
	/* A later drop of the destination only marks it too. */
	range_del(&d, gpu);
	assert_int_equal(eng.unregistered, 0);
	/* The helper still serves: a new request naming live mappings lands. */
	eng.fail_event = 0;
	eng.copy_ns = 20 * MS;
	c = post(add_range(1 * MIB, 0), 0, add_range(1 * MIB, 1), 0, 64 << 10);
	assert_int_equal(take(&d, sm_now_ns()), 1);
	assert_int_equal(issue(&d), 1);
}

/* A call that failed before anything of it was queued costs no wait and
 * keeps nothing, though an older copy still runs on the same stream. */
static void test_failed_call_with_nothing_queued(void **state_)
{
	uint32_t staging = add_range(1 * MIB, 0), other = add_range(1 * MIB, 0),
		 gpu = add_range(64 * MIB, 1);
	uint64_t t0;
	unsigned x, y;

	(void)state_;
	d.batch = 1;		/* one call per copy */
	eng.copy_ns = NEVER;
	x = post(other, 0, gpu, 0, 64 << 10);
	assert_int_equal(take(&d, sm_now_ns()), 1);
	assert_int_equal(issue(&d), 1);		/* queued, never lands */
	y = post(staging, 0, gpu, 1 * MIB, 64 << 10);
	assert_int_equal(take(&d, sm_now_ns()), 1);
	range_del(&d, staging);
	eng.fail_copy = 1;
	t0 = sm_now_ns();
	issue(&d);

	assert_true(sm_now_ns() - t0 < FAILED_DRAIN_NS / 2);
	assert_int_equal(state(y), CD_FAILED);
	assert_int_equal(state(x), CD_POSTED);	/* still running */
	assert_int_equal(eng.unregistered, 1);
	assert_int_equal(eng.freed_under_copy, 0);
	assert_null(range_find(&d, staging));
}

/* Lets queued copies run until they landed, then has the helper end them. */
static void land_all(void)
{
	while (copies_running())
		usleep(1000);
	apply_writes();
	complete(&d, &(int){ 0 });
}

/* Requests that name no mapping, or bytes outside the one they name, fail
 * at once with the reason; one that fits a mapping exactly is taken.  None
 * of the failed ones holds a mapping or a slot. */
static void test_requests_outside_mappings_fail(void **state_)
{
	uint32_t staging = add_range(1 * MIB, 0), gpu = add_range(64 * MIB, 1);
	unsigned bad[6], fit;

	(void)state_;
	bad[0] = post(staging, 0, 999, 0, 4096);			/* no such mapping */
	bad[1] = post(0, 0, gpu, 0, 4096);				/* id 0 names none */
	bad[2] = post(staging, 4096, gpu, 0, 1 * MIB);			/* runs past the end */
	bad[3] = post(staging, 2 * MIB, gpu, 0, 4096);			/* starts past the end */
	bad[4] = post(staging, 4096, gpu, 4096, UINT64_MAX - 4095);	/* off + len wraps to 0 */
	bad[5] = post(staging, 0, gpu, 64 * MIB + 1, 0);		/* empty, past the end */
	fit = post(staging, 0, gpu, 63 * MIB, 1 * MIB);			/* to the last byte */
	assert_int_equal(take(&d, sm_now_ns()), 7);
	for (int i = 0; i < 6; i++) {
		assert_int_equal(state(bad[i]), CD_FAILED);
		assert_non_null(strstr(ring.slot[bad[i]].err, "unknown mapping or runs past one"));
		assert_int_equal(d.held[bad[i]], 0);
	}
	assert_int_equal(state(fit), CD_POSTED);
	assert_int_equal(range_find(&d, staging)->busy, 1);
	assert_int_equal(range_find(&d, gpu)->busy, 1);
	assert_int_equal(issue(&d), 1);
	land_all();
	assert_int_equal(state(fit), CD_DONE);
	assert_int_equal(range_find(&d, staging)->busy, 0);
	assert_int_equal(range_find(&d, gpu)->busy, 0);
}

/* A copy lands: its request ends done, its mappings are free again, and
 * its slot can be taken anew, also once the ring went round.  Until it
 * lands it stays posted. */
static void test_landed_copy_ends_and_ring_goes_round(void **state_)
{
	uint32_t staging = add_range(1 * MIB, 0), gpu = add_range(64 * MIB, 1);
	unsigned c;

	(void)state_;
	c = take_one(staging, gpu);
	assert_int_equal(issue(&d), 1);
	assert_int_equal(complete(&d, &(int){ 0 }), 1);	/* still running */
	assert_int_equal(state(c), CD_POSTED);
	land_all();
	assert_int_equal(state(c), CD_DONE);
	assert_int_equal(range_find(&d, staging)->busy, 0);
	/* A whole ring more of requests (these fail at once): the last one
	 * reuses the ended copy's slot. */
	for (int i = 0; i < CD_SLOTS; i++)
		post(staging, 2 * MIB, gpu, 0, 4096);
	assert_int_equal(take(&d, sm_now_ns()), CD_SLOTS);
	assert_int_equal(state(c), CD_FAILED);
}

/* The engine reports a copy failed: its request fails with the reason. */
static void test_failed_copy_fails_request(void **state_)
{
	uint32_t staging = add_range(1 * MIB, 0), gpu = add_range(64 * MIB, 1);
	unsigned c;

	(void)state_;
	c = take_one(staging, gpu);
	assert_int_equal(issue(&d), 1);
	eng.fail_query = 1;
	land_all();
	assert_int_equal(state(c), CD_FAILED);
	assert_non_null(strstr(ring.slot[c].err, "failed copy"));
	assert_int_equal(range_find(&d, staging)->busy, 0);
	assert_int_equal(range_find(&d, gpu)->busy, 0);
}

/* The client drops both mappings of a copy still running: they stay
 * until it landed (each drop counted once), new requests naming them fail
 * at once, and they go when it lands. */
static void test_dropped_mappings_wait_for_copy(void **state_)
{
	uint32_t staging = add_range(1 * MIB, 0), gpu = add_range(64 * MIB, 1);
	unsigned c, late;

	(void)state_;
	c = take_one(staging, gpu);
	assert_int_equal(issue(&d), 1);
	range_del(&d, staging);
	range_del(&d, gpu);
	range_del(&d, gpu);		/* dropped twice: still one drop */
	assert_int_equal(ring.stats.dropped_busy, 2);
	assert_non_null(range_find(&d, staging));
	assert_non_null(range_find(&d, gpu));
	late = post(staging, 4096, gpu, 4096, 4096);
	assert_int_equal(take(&d, sm_now_ns()), 1);
	assert_int_equal(state(late), CD_FAILED);
	assert_int_equal(range_find(&d, staging)->busy, 1);
	assert_int_equal(range_find(&d, gpu)->busy, 1);
	land_all();
	assert_int_equal(state(c), CD_DONE);
	assert_int_equal(eng.freed_under_copy, 0);
	assert_null(range_find(&d, staging));
	assert_null(range_find(&d, gpu));
	assert_int_equal(eng.unregistered, 2);
}

/* A slot whose number is not the next one, or which is not posted, is
 * not taken (the client has not filled it yet, or wrote it wrong). */
static void test_only_next_message_taken(void **state_)
{
	uint32_t staging = add_range(1 * MIB, 0), gpu = add_range(64 * MIB, 1);
	struct cd_slot *s = &ring.slot[0];

	(void)state_;
	post(staging, 0, gpu, 0, 4096);
	s->seq = CD_SLOTS;		/* a ring ahead */
	assert_int_equal(take(&d, sm_now_ns()), 0);
	s->seq = 0;
	atomic_store(&s->state, CD_FREE);
	assert_int_equal(take(&d, sm_now_ns()), 0);
	atomic_store(&s->state, CD_POSTED);
	assert_int_equal(take(&d, sm_now_ns()), 1);
	assert_int_equal(range_find(&d, staging)->busy, 1);
}

/* A client that posts into a slot the helper still holds (the oldest
 * request, not ended yet, though every later one has) is not served: the
 * helper takes at most a ring of requests past the oldest it holds. */
static void test_held_slot_not_taken_again(void **state_)
{
	uint32_t staging = add_range(1 * MIB, 0), gpu = add_range(64 * MIB, 1);
	unsigned first;

	(void)state_;
	first = post(staging, 0, gpu, 0, 4096);
	for (int i = 1; i < CD_SLOTS; i++)
		post(staging, 2 * MIB, gpu, 0, 4096);	/* fail at once */
	assert_int_equal(take(&d, sm_now_ns()), CD_SLOTS);
	assert_int_equal(complete(&d, &(int){ 0 }), 0);
	assert_int_equal(post(staging, 4096, gpu, 4096, 4096), first);	/* over it */
	assert_int_equal(take(&d, sm_now_ns()), 0);
	assert_int_equal(range_find(&d, staging)->busy, 1);
}

/* At most `depth` calls wait on a stream, and the copies go round the
 * streams: with two streams of depth 1, two of three copies are queued and
 * the third waits for room. */
static void test_depth_and_streams(void **state_)
{
	uint32_t a = add_range(1 * MIB, 0), b = add_range(1 * MIB, 0), gpu = add_range(64 * MIB, 1);

	(void)state_;
	eng.copy_ns = NEVER;
	d.nstreams = 2;
	d.depth = 1;
	d.batch = 1;
	post(a, 0, gpu, 0, 64 << 10);
	post(b, 0, gpu, 1 * MIB, 64 << 10);
	post(a, 1 * MIB - 4096, gpu, 8 * MIB, 4096);
	assert_int_equal(take(&d, sm_now_ns()), 3);
	assert_int_equal(issue(&d), 2);
	assert_int_equal(d.fifo_n[0], 1);
	assert_int_equal(d.fifo_n[1], 1);
	assert_int_equal(d.queue.n, 1);		/* waits for room */
	assert_int_equal(eng.ncopies, 2);
}

/* At exit the mappings go only once the copies still running landed. */
static void test_exit_waits_for_copies(void **state_)
{
	uint32_t staging = add_range(1 * MIB, 0), gpu = add_range(64 * MIB, 1);

	(void)state_;
	eng.copy_ns = 30 * MS;
	post(staging, 0, gpu, 0, 64 << 10);
	assert_int_equal(take(&d, sm_now_ns()), 1);
	assert_int_equal(issue(&d), 1);
	drain_and_unmap(&d);
	assert_int_equal(eng.unregistered, 2);
	assert_int_equal(eng.freed_under_copy, 0);
}

/* ---- a client that writes its ring behind the helper's back ---- */

static struct cd_slot *rewritten;

/* Moves the request's destination past the end of its 64 MiB mapping. */
static void move_destination_out(void *arg)
{
	(void)arg;
	rewritten->dst_off = 64 * MIB;
}

/* The client rewrites a request right after the helper first read its
 * destination (the touch hook acts then, every time): the helper copies
 * what it checked, inside the mapping, not what the slot says by the time
 * it queues the copy, which would lie outside it. */
static void test_request_rewritten_after_read(void **state_)
{
	uint32_t staging = add_range(1 * MIB, 0), gpu = add_range(64 * MIB, 1);
	CUdeviceptr base = range_find(&d, gpu)->host_dev;
	unsigned c = post(staging, 0, gpu, 0, 64 << 10);
	int taken;

	(void)state_;
	rewritten = &ring.slot[c];
	if (touch_hook_arm(&rewritten->dst_off, sizeof(rewritten->dst_off), move_destination_out,
			   NULL))
		skip();
	taken = take(&d, sm_now_ns());
	assert_true(touch_hook_disarm());
	assert_int_equal(taken, 1);
	assert_int_equal(issue(&d), 1);
	assert_int_equal(eng.ncopies, 1);
	assert_true(eng.copy[0].dst == base);
	land_all();
	assert_int_equal(state(c), CD_DONE);
}

/* The engine's rate, which plans the phases, comes from the helper's own
 * counts: statistics the client scribbled over in the ring (a rate near
 * zero would put the next copy's start past the end of time) change
 * nothing. */
static void test_engine_rate_ignores_ring_stats(void **state_)
{
	(void)state_;
	ring.stats.busy_ns = UINT64_MAX;
	ring.stats.bytes = 1;
	assert_true(engine_rate(&d) == 0.3);	/* no measurement yet: the guess */
	d.busy_ns = 2 * ENGINE_RATE_SETTLE_NS;
	d.moved = ENGINE_RATE_SETTLE_NS;
	ring.stats.busy_ns = 1;
	ring.stats.bytes = UINT64_MAX;
	assert_true(engine_rate(&d) == 0.5);
}

/* ---- control messages, over a real socket pair ---- */

static int client_sock = -1;

static int setup_ctrl(void **state)
{
	int sv[2];

	setup(state);
	assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv), 0);
	client_sock = sv[0];
	d.ctrl = sv[1];
	return 0;
}

static int teardown_ctrl(void **state)
{
	close(client_sock);
	close(d.ctrl);
	return teardown(state);
}

/* Sends `m` with `fd` (closed here) and has the helper handle it;
 * returns what control() did. */
static int send_ctrl(const struct cd_msg *m, int fd)
{
	assert_int_equal(sm_send_some(client_sock, m, sizeof(*m), fd), (ssize_t)sizeof(*m));
	if (fd >= 0)
		close(fd);
	return control(&d);
}

static void take_answer(struct cd_reply *r)
{
	assert_int_equal(recv(client_sock, r, sizeof(*r), MSG_DONTWAIT), (ssize_t)sizeof(*r));
	assert_int_equal(r->magic, CD_MAGIC);
}

static void no_answer(void)
{
	struct cd_reply r;

	assert_int_equal(recv(client_sock, &r, sizeof(r), MSG_DONTWAIT), -1);
	assert_int_equal(errno, EAGAIN);
}

static struct cd_msg host_add(uint64_t size)
{
	struct cd_msg m;

	memset(&m, 0, sizeof(m));
	m.magic = CD_MAGIC;
	m.op = CD_ADD;
	m.info.kind = SM_SHARE_HOST_FD;
	m.info.alloc_size = size;
	return m;
}

static int host_fd(uint64_t size)
{
	void *map;
	int fd;

	assert_int_equal(sm_memfd_map("test-copyd", size, 4096, &fd, &map), SM_OK);
	munmap(map, 4096);
	return fd;
}

/* A mapping asked for over the socket is answered with its name, which
 * requests then use; the descriptor that came with it is not kept.  A
 * drop has no answer and the name is gone. */
static void test_add_answers_name_and_del_drops(void **state_)
{
	struct cd_msg m = host_add(1 * MIB);
	struct cd_reply r;
	int fds = open_fds();
	uint32_t first;

	(void)state_;
	assert_int_equal(send_ctrl(&m, host_fd(1 * MIB)), 0);
	take_answer(&r);
	assert_int_equal(r.status, SM_OK);
	assert_int_not_equal(r.id, 0);
	assert_non_null(range_find(&d, r.id));
	assert_int_equal(ring.stats.maps, 1);
	first = r.id;
	assert_int_equal(send_ctrl(&m, host_fd(1 * MIB)), 0);
	take_answer(&r);
	assert_int_equal(r.status, SM_OK);
	assert_int_not_equal(r.id, first);
	assert_non_null(range_find(&d, r.id));
	assert_int_equal(open_fds(), fds);

	memset(&m, 0, sizeof(m));
	m.magic = CD_MAGIC;
	m.op = CD_DEL;
	m.id = first;
	assert_int_equal(send_ctrl(&m, -1), 0);
	no_answer();
	assert_null(range_find(&d, first));
	assert_int_equal(eng.unregistered, 1);
	assert_int_equal(open_fds(), fds);
}

/* Host staging shorter than the size the client claims, or without its
 * descriptor, is refused with the reason; nothing is mapped or kept, and
 * the helper goes on serving. */
static void test_bad_host_staging_refused(void **state_)
{
	struct cd_msg m = host_add(2 * MIB);
	struct cd_reply r;
	int fds = open_fds();

	(void)state_;
	assert_int_equal(send_ctrl(&m, host_fd(1 * MIB)), 0);
	take_answer(&r);
	assert_int_equal(r.status, SM_ERR_INVALID);
	assert_int_equal(r.id, 0);
	assert_non_null(strstr(r.msg, "host staging"));
	assert_int_equal(send_ctrl(&m, -1), 0);
	take_answer(&r);
	assert_int_equal(r.status, SM_ERR_INVALID);
	assert_non_null(strstr(r.msg, "host memory without its descriptor"));
	assert_int_equal(d.nranges, 0);
	assert_int_equal(eng.nregs, 0);
	assert_int_equal(open_fds(), fds);
	m = host_add(1 * MIB);
	assert_int_equal(send_ctrl(&m, host_fd(1 * MIB)), 0);
	take_answer(&r);
	assert_int_equal(r.status, SM_OK);
}

/* A mapping said to come from the helper's own process is refused with
 * the reason before anything is imported: import.c would take a legacy
 * IPC export of its own process at the address and size it names.  The
 * descriptor of one that came with it is not kept. */
static void test_own_pid_as_owner_refused(void **state_)
{
	struct cd_msg m = host_add(1 * MIB);
	struct cd_reply r;
	int fds = open_fds();

	(void)state_;
	m.owner_pid = (int32_t)getpid();
	m.info.kind = SM_SHARE_LEGACY_IPC;
	m.info.addr = 0x1000;
	assert_int_equal(send_ctrl(&m, -1), 0);
	take_answer(&r);
	assert_int_equal(r.status, SM_ERR_INVALID);
	assert_int_equal(r.id, 0);
	assert_non_null(strstr(r.msg, "names the copy helper itself"));
	m = host_add(1 * MIB);
	m.owner_pid = (int32_t)getpid();
	assert_int_equal(send_ctrl(&m, host_fd(1 * MIB)), 0);
	take_answer(&r);
	assert_int_equal(r.status, SM_ERR_INVALID);
	assert_int_equal(d.nranges, 0);
	assert_int_equal(eng.nregs, 0);
	assert_int_equal(open_fds(), fds);
}

/* A second hello is refused and changes nothing; a wake-up with nothing
 * to read does not end the helper. */
static void test_second_hello_refused(void **state_)
{
	struct cd_msg m;
	struct cd_reply r;

	(void)state_;
	assert_int_equal(control(&d), 0);
	memset(&m, 0, sizeof(m));
	m.magic = CD_MAGIC;
	m.op = CD_HELLO;
	m.version = CD_VERSION;
	m.nstreams = 2;
	m.depth = 2;
	m.batch = 1;
	assert_int_equal(send_ctrl(&m, -1), 0);
	take_answer(&r);
	assert_int_equal(r.status, SM_ERR_INVALID);
	assert_non_null(strstr(r.msg, "second hello"));
	assert_ptr_equal(d.ring, &ring);
	assert_int_equal(d.nstreams, 1);
}
/* Landing words on, as open_landing() leaves them. */
static void use_landing_words(void)
{
	ring.magic = CD_MAGIC;
	ring.nslots = CD_SLOTS;
	open_landing(&d, &ring);
	assert_int_equal(d.landing, 1);
	assert_int_equal(ring.stats.landing_words, 1);
	assert_true(d.landed_dev == (CUdeviceptr)(uintptr_t)&ring.landed[0]);
}

/* With landing words a queued copy's request says where to watch (its
 * stream and the call's ticket), the word reaches the ticket only once
 * the copy landed, and the helper then ends the request itself; no event
 * is recorded or queried on the way. */
static void test_landing_word_reports_copy(void **state_)
{
	uint32_t staging = add_range(1 * MIB, 0), gpu = add_range(64 * MIB, 1);
	unsigned a, b;

	(void)state_;
	use_landing_words();
	a = take_one(staging, gpu);
	assert_int_equal(issue(&d), 1);
	b = take_one(staging, gpu);
	assert_int_equal(issue(&d), 1);
	assert_int_equal(state(a), CD_QUEUED);
	assert_int_equal(ring.slot[a].stream, 0);
	assert_int_equal(ring.slot[a].ticket, 1);
	assert_int_equal(ring.slot[b].ticket, 2);
	apply_writes();
	assert_int_equal(atomic_load(&ring.landed[0]), 0);	/* not landed: not written */
	assert_int_equal(complete(&d, &(int){ 0 }), 2);
	assert_int_equal(state(a), CD_QUEUED);
	land_all();
	assert_int_equal(atomic_load(&ring.landed[0]), 2);
	assert_int_equal(state(a), CD_DONE);
	assert_int_equal(state(b), CD_DONE);
	assert_int_equal(range_find(&d, gpu)->busy, 0);
	assert_int_equal(eng.event_calls, 0);
}

/* A copy the engine fails writes no ticket: the stream is asked once the
 * copy is a millisecond overdue, and the request fails with the reason. */
static void test_landing_word_failed_copy(void **state_)
{
	uint32_t staging = add_range(1 * MIB, 0), gpu = add_range(64 * MIB, 1);
	uint64_t t0 = sm_now_ns();
	unsigned c;
	int ended = 0;

	(void)state_;
	eng.copy_ns = 0;
	eng.stream_error = 1;
	use_landing_words();
	c = take_one(staging, gpu);
	assert_int_equal(issue(&d), 1);
	while (state(c) == CD_QUEUED && sm_now_ns() - t0 < 1000 * MS)
		complete(&d, &ended);
	assert_int_equal(state(c), CD_FAILED);
	assert_int_equal(ended, 1);
	assert_true(sm_now_ns() - t0 >= STALL_QUERY_NS);
	assert_true(sm_now_ns() - t0 < 500 * MS);
	assert_non_null(strstr(ring.slot[c].err, "failed copy"));
	assert_int_equal(range_find(&d, gpu)->busy, 0);
}

/* The write after a copy cannot be queued: the copy is on the stream all
 * the same, so the request fails only once the stream ran it, as when an
 * event cannot be recorded. */
static void test_landing_write_fails(void **state_)
{
	uint32_t staging = add_range(1 * MIB, 0), gpu = add_range(64 * MIB, 1);
	unsigned c;

	(void)state_;
	use_landing_words();
	eng.fail_write = 1;
	c = take_one(staging, gpu);
	issue(&d);
	assert_int_equal(state(c), CD_FAILED);
	assert_non_null(strstr(ring.slot[c].err, "cuStreamWriteValue32"));
	assert_int_equal(copies_running(), 0);	/* ended only after it landed */
	assert_int_equal(range_find(&d, gpu)->busy, 0);
}


/* A request with a watch word: its slot's fields set, then posted. */
static unsigned post_watched(uint32_t src, uint32_t dst, uint64_t len, uint32_t page,
			     uint32_t off, uint32_t val)
{
	struct cd_slot *s = &ring.slot[next_seq % CD_SLOTS];

	s->watch_id = page;
	s->watch_off = off;
	s->watch_val = val;
	return post(src, 0, dst, 0, len);
}

static _Atomic uint32_t *word_at(uint32_t page, uint32_t off)
{
	return (_Atomic uint32_t *)(void *)(range_find(&d, page)->host + off);
}

/* A watch word is written after its copy, in one batch of memory
 * operations with the landing word, and only once the copy landed; the
 * mapping it lies in is held meanwhile. */
static void test_watch_word_written_after_copy(void **state_)
{
	uint32_t staging = add_range(1 * MIB, 0), gpu = add_range(64 * MIB, 1),
		 page = add_range(4096, 0);
	unsigned a;

	(void)state_;
	use_landing_words();
	assert_int_equal(d.watching, 1);
	a = post_watched(staging, gpu, 64 << 10, page, 8, 77);
	assert_int_equal(take(&d, sm_now_ns()), 1);
	assert_int_equal(range_find(&d, page)->busy, 1);
	assert_int_equal(issue(&d), 1);
	assert_int_equal(eng.batch_mem_ops, 1);
	apply_writes();
	assert_int_equal(atomic_load(word_at(page, 8)), 0);	/* not landed: not written */
	land_all();
	assert_int_equal(atomic_load(word_at(page, 8)), 77);
	assert_int_equal(atomic_load(&ring.landed[0]), 1);
	assert_int_equal(state(a), CD_DONE);
	assert_int_equal(range_find(&d, page)->busy, 0);
}

/* A watch word outside the host memory mapped here (an unknown mapping,
 * past the end, not 4-aligned) fails its request at once, holding
 * nothing; a good one beside them is written. */
static void test_watch_word_outside_host_memory_fails(void **state_)
{
	uint32_t staging = add_range(1 * MIB, 0), gpu = add_range(64 * MIB, 1),
		 page = add_range(4096, 0);
	unsigned bad[3], good;

	(void)state_;
	use_landing_words();
	bad[0] = post_watched(staging, gpu, 4096, 9999, 8, 1);
	bad[1] = post_watched(staging, gpu, 4096, page, 4094, 2);
	bad[2] = post_watched(staging, gpu, 4096, page, 2, 3);
	good = post_watched(staging, gpu, 4096, page, 4092, 4);
	assert_int_equal(take(&d, sm_now_ns()), 4);
	for (int i = 0; i < 3; i++) {
		assert_int_equal(state(bad[i]), CD_FAILED);
		assert_non_null(strstr(ring.slot[bad[i]].err, "watch word outside"));
	}
	assert_int_equal(range_find(&d, staging)->busy, 1);
	assert_int_equal(range_find(&d, gpu)->busy, 1);
	issue(&d);
	land_all();
	assert_int_equal(state(good), CD_DONE);
	assert_int_equal(atomic_load(word_at(page, 4092)), 4);
	assert_int_equal(range_find(&d, page)->busy, 0);
	assert_int_equal(range_find(&d, staging)->busy, 0);
}

/* Without landing words the helper writes no watch word: the receiver
 * then waits for the sender, as it always did. */
static void test_watch_word_ignored_with_events(void **state_)
{
	uint32_t staging = add_range(1 * MIB, 0), gpu = add_range(64 * MIB, 1),
		 page = add_range(4096, 0);
	unsigned a;

	(void)state_;
	a = post_watched(staging, gpu, 64 << 10, page, 8, 77);
	assert_int_equal(take(&d, sm_now_ns()), 1);
	assert_int_equal(issue(&d), 1);
	while (copies_running())
		usleep(1000);
	complete(&d, &(int){ 0 });
	assert_int_equal(state(a), CD_DONE);
	assert_int_equal(atomic_load(word_at(page, 8)), 0);
	assert_int_equal(eng.batch_mem_ops, 0);
	assert_int_equal(range_find(&d, page)->busy, 0);
}

/* Mappings are found by name after others went from the middle, a new
 * one among them too, and the helper refuses to name one past the last
 * name rather than reuse a name. */
static void test_ranges_found_after_drops(void **state_)
{
	uint32_t id[6];
	struct cd_msg m;
	uint32_t last;
	void *map;
	int fd;

	(void)state_;
	for (int i = 0; i < 5; i++)
		id[i] = add_range(4096, 0);
	range_del(&d, id[1]);
	range_del(&d, id[3]);
	id[5] = add_range(4096, 0);
	for (int i = 0; i < 6; i++) {
		struct range *r = range_find(&d, id[i]);

		if (i == 1 || i == 3) {
			assert_null(r);
			continue;
		}
		assert_non_null(r);
		assert_int_equal(r->id, id[i]);
	}
	assert_null(range_find(&d, 0));
	assert_null(range_find(&d, id[5] + 1));
	d.next_id = UINT32_MAX - 1;
	last = add_range(4096, 0);
	assert_int_equal(last, UINT32_MAX);
	assert_non_null(range_find(&d, last));
	assert_int_equal(sm_memfd_map("test-copyd", 4096, 4096, &fd, &map), SM_OK);
	munmap(map, 4096);
	memset(&m, 0, sizeof(m));
	m.magic = CD_MAGIC;
	m.op = CD_ADD;
	m.info.kind = SM_SHARE_HOST_FD;
	m.info.alloc_size = 4096;
	assert_int_equal(range_add(&d, &m, fd, &last), SM_ERR_INVALID);	/* closes fd */
	assert_non_null(strstr(sm_last_error(), "the most it names"));
	assert_int_equal(d.nranges, 5);
}

/* A driver that refuses a batch of memory operations stops the watch
 * words for good, and nothing else: the copy's landing word is written
 * alone, its request ends, and later requests make no batch call. */
static void test_watch_words_stop_when_batch_refused(void **state_)
{
	uint32_t staging = add_range(1 * MIB, 0), gpu = add_range(64 * MIB, 1),
		 page = add_range(4096, 0);
	unsigned a, b;

	(void)state_;
	use_landing_words();
	eng.fail_batch_mem_op = 1;
	a = post_watched(staging, gpu, 64 << 10, page, 8, 77);
	assert_int_equal(take(&d, sm_now_ns()), 1);
	assert_int_equal(issue(&d), 1);
	assert_int_equal(eng.batch_mem_ops, 1);
	assert_int_equal(d.watching, 0);
	assert_int_equal(ring.stats.watch_refused, 1);
	land_all();
	assert_int_equal(state(a), CD_DONE);
	assert_int_equal(atomic_load(word_at(page, 8)), 0);
	b = post_watched(staging, gpu, 64 << 10, page, 8, 78);
	assert_int_equal(take(&d, sm_now_ns()), 1);
	assert_int_equal(issue(&d), 1);
	land_all();
	assert_int_equal(state(b), CD_DONE);
	assert_int_equal(eng.batch_mem_ops, 1);
	assert_int_equal(atomic_load(word_at(page, 8)), 0);
	assert_int_equal(range_find(&d, page)->busy, 0);
}

/* One call carrying more watched requests than a batch of memory
 * operations takes (70 merged 4 KiB copies): every word is written, in
 * two batches, the landing word in the last. */
static void test_many_watch_words_in_one_call(void **state_)
{
	uint32_t staging = add_range(1 * MIB, 0), gpu = add_range(64 * MIB, 1),
		 page = add_range(4096, 0);
	unsigned slot[70];

	(void)state_;
	use_landing_words();
	for (unsigned i = 0; i < 70; i++) {
		struct cd_slot *s = &ring.slot[next_seq % CD_SLOTS];

		s->watch_id = page;
		s->watch_off = 4 * i;
		s->watch_val = i + 1;
		slot[i] = post(staging, 4096 * i, gpu, 4096 * i, 4096);
	}
	assert_int_equal(take(&d, sm_now_ns()), 70);
	assert_int_equal(issue(&d), 1);
	assert_int_equal(eng.batch_mem_ops, 2);
	land_all();
	for (unsigned i = 0; i < 70; i++) {
		assert_int_equal(state(slot[i]), CD_DONE);
		assert_int_equal(atomic_load(word_at(page, 4 * i)), i + 1);
	}
	assert_int_equal(atomic_load(&ring.landed[0]), 1);
	assert_int_equal(range_find(&d, page)->busy, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_batch_fails_after_short_copy, setup, teardown),
		cmocka_unit_test_setup_teardown(test_event_fails_after_copy, setup, teardown),
		cmocka_unit_test_setup_teardown(test_copy_never_lands_keeps_mappings, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_failed_call_with_nothing_queued, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_requests_outside_mappings_fail, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_landed_copy_ends_and_ring_goes_round, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_failed_copy_fails_request, setup, teardown),
		cmocka_unit_test_setup_teardown(test_landing_word_reports_copy, setup, teardown),
		cmocka_unit_test_setup_teardown(test_landing_word_failed_copy, setup, teardown),
		cmocka_unit_test_setup_teardown(test_landing_write_fails, setup, teardown),
		cmocka_unit_test_setup_teardown(test_dropped_mappings_wait_for_copy, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_only_next_message_taken, setup, teardown),
		cmocka_unit_test_setup_teardown(test_held_slot_not_taken_again, setup, teardown),
		cmocka_unit_test_setup_teardown(test_depth_and_streams, setup, teardown),
		cmocka_unit_test_setup_teardown(test_exit_waits_for_copies, setup, teardown),
		cmocka_unit_test_setup_teardown(test_request_rewritten_after_read, setup, teardown),
		cmocka_unit_test_setup_teardown(test_ranges_found_after_drops, setup, teardown),
		cmocka_unit_test_setup_teardown(test_watch_word_written_after_copy, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_watch_word_outside_host_memory_fails, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_many_watch_words_in_one_call, setup, teardown),
		cmocka_unit_test_setup_teardown(test_watch_words_stop_when_batch_refused, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_watch_word_ignored_with_events, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_engine_rate_ignores_ring_stats, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_add_answers_name_and_del_drops, setup_ctrl,
						teardown_ctrl),
		cmocka_unit_test_setup_teardown(test_bad_host_staging_refused, setup_ctrl,
						teardown_ctrl),
		cmocka_unit_test_setup_teardown(test_second_hello_refused, setup_ctrl,
						teardown_ctrl),
		cmocka_unit_test_setup_teardown(test_own_pid_as_owner_refused, setup_ctrl,
						teardown_ctrl),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
