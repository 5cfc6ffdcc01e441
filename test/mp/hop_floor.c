/* The floors a copy-engine hop is held against: the bare driver in one
 * process, the same host->GPU then GPU->host copy per round as the
 * plugin's ping-pong makes, known when it is issued:
 *   event     cuMemcpyAsync, cuEventRecord, cuEventQuery until done;
 *   write     cuMemcpyAsync, cuStreamWriteValue32 of a host word the CPU
 *             polls;
 *   write2d   the same, with a host->GPU copy shorter than 32 KiB issued
 *             as the copy helper issues it: a 2D copy of two rows
 *             (CD_SMALL_HOST), which a copy engine takes at once beside
 *             another process's kernel; tells what that form costs idle;
 *   preposted the stream already waits (cuStreamWaitValue32) on a host
 *             word before the copy and its write: the CPU only sets the
 *             word.  No driver call on the clock, but the copy's
 *             addresses and length are fixed before the message exists.
 * Each round's one-way time is half its round trip; every message is
 * checked off the clock. */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "harness.h"
#include "hop.h"

enum { EVENT, WRITE, WRITE2D, PREPOSTED, NFLOORS };
static const char *const floor_name[NFLOORS] = { "event", "write", "write2d", "preposted" };

/* The copy helper's bound for short host->GPU copies (smfree/copyd_proto.h). */
#define SMALL_HOST (32u << 10)

struct floor {
	const struct sm_cuda_api *cu;
	CUstream st;
	CUevent ev;
	struct hop_buf host, dev;
	_Atomic uint32_t *word;		/* [0] the GPU writes, [1] the CPU sets */
	CUdeviceptr word_dev;
	uint32_t k;
};

static double now_us(void)
{
	return harness_now() * 1e6;
}

static int wait_word(struct floor *f, uint32_t want)
{
	double limit = harness_now() + 10;

	while ((int32_t)(atomic_load_explicit(&f->word[0], memory_order_acquire) - want) < 0)
		if (harness_now() > limit)
			return -1;
	return 0;
}

static int wait_event(struct floor *f)
{
	CUresult rc;

	while ((rc = f->cu->event_query(f->ev)) == CUDA_ERROR_NOT_READY)
		;
	return rc == CUDA_SUCCESS ? 0 : -1;
}

/* A host->GPU copy of an even length as two rows of a 2D copy. */
static CUresult copy_rows(struct floor *f, CUdeviceptr dst, CUdeviceptr src, size_t n)
{
	CUDA_MEMCPY2D c;

	memset(&c, 0, sizeof(c));
	c.srcMemoryType = CU_MEMORYTYPE_UNIFIED;
	c.srcDevice = src;
	c.srcPitch = n / 2;
	c.dstMemoryType = CU_MEMORYTYPE_UNIFIED;
	c.dstDevice = dst;
	c.dstPitch = n / 2;
	c.WidthInBytes = n / 2;
	c.Height = 2;
	return f->cu->memcpy_2d_async(&c, f->st);
}

/* One copy and how its landing is seen, issued now; `to_dev`: the
 * host->GPU half of the round. */
static int issue(struct floor *f, int how, CUdeviceptr dst, CUdeviceptr src, size_t n,
		 int to_dev)
{
	CUresult crc;

	if (how == WRITE2D && to_dev && n < SMALL_HOST && n % 2 == 0)
		crc = copy_rows(f, dst, src, n);
	else
		crc = f->cu->memcpy_async(dst, src, n, f->st);
	if (crc)
		return -1;
	if (how == EVENT)
		return f->cu->event_record(f->ev, f->st) || wait_event(f) ? -1 : 0;
	f->k++;
	if (f->cu->stream_write_value32(f->st, f->word_dev, f->k, CU_STREAM_WRITE_VALUE_DEFAULT))
		return -1;
	return wait_word(f, f->k);
}

/* Both copies of a round queued behind waits on word[1]. */
static int prepost(struct floor *f, size_t n, uint32_t gate)
{
	const struct sm_cuda_api *cu = f->cu;
	CUdeviceptr host = (CUdeviceptr)(uintptr_t)f->host.ptr;
	CUdeviceptr dev = (CUdeviceptr)(uintptr_t)f->dev.ptr;
	CUdeviceptr gate_dev = f->word_dev + sizeof(uint32_t);

	return cu->stream_wait_value32(f->st, gate_dev, gate, CU_STREAM_WAIT_VALUE_GEQ) ||
	       cu->memcpy_async(dev, host, n, f->st) ||
	       cu->stream_write_value32(f->st, f->word_dev, gate, 0) ||
	       cu->stream_wait_value32(f->st, gate_dev, gate + 1, CU_STREAM_WAIT_VALUE_GEQ) ||
	       cu->memcpy_async(host + n, dev, n, f->st) ||
	       cu->stream_write_value32(f->st, f->word_dev, gate + 1, 0) ? -1 : 0;
}

/* One round: host -> GPU, then GPU -> host into the second half of the
 * host buffer.  Returns the one-way time in us, or -1; *h2g is the
 * host -> GPU part. */
static double round_trip(struct floor *f, int how, size_t n, uint64_t msg, double *h2g)
{
	CUdeviceptr host = (CUdeviceptr)(uintptr_t)f->host.ptr;
	CUdeviceptr dev = (CUdeviceptr)(uintptr_t)f->dev.ptr;
	struct hop_buf back = f->host;	/* where the message comes back to */
	double t0, tm, t1;

	back.ptr += n;
	if (hop_buf_fill(&f->host, n, 1, n, msg) || hop_buf_poison(&back, n))
		return -1;
	if (how == PREPOSTED) {
		uint32_t gate = f->k + 1;

		f->k += 2;
		if (prepost(f, n, gate))
			return -1;
		usleep(50);	/* the stream waits on the GPU now */
		t0 = now_us();
		atomic_store_explicit(&f->word[1], gate, memory_order_release);
		if (wait_word(f, gate))
			return -1;
		tm = now_us();
		atomic_store_explicit(&f->word[1], gate + 1, memory_order_release);
		if (wait_word(f, gate + 1))
			return -1;
		t1 = now_us();
	} else {
		t0 = now_us();
		if (issue(f, how, dev, host, n, 1))
			return -1;
		tm = now_us();
		if (issue(f, how, host + n, dev, n, 0))
			return -1;
		t1 = now_us();
	}
	if (hop_buf_check(&back, n, 1, n, msg) != 0)
		return -1;
	*h2g = tm - t0;
	return (t1 - t0) / 2;
}

/* With peer >= 0 the "host" buffer is on GPU `peer`. */
static int floor_open(struct floor *f, size_t max, int peer)
{
	const struct sm_cuda_api *cu = sm_cu();
	int device = 0;
	void *page;

	memset(f, 0, sizeof(*f));
	f->cu = cu;
	if (!cu || !cu->stream_write_value32 || !cu->memcpy_2d_async ||
	    sm_ctx_enter(0, &device, NULL))
		return -1;
	if (hop_buf_alloc_on(&f->host, peer >= 0, 2 * max, peer >= 0 ? peer : device, device) ||
	    hop_buf_alloc_on(&f->dev, 1, max, device, peer))
		return -1;
	page = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (page == MAP_FAILED)
		return -1;
	f->word = page;
	if (cu->mem_host_register(page, 4096, CU_MEMHOSTREGISTER_DEVICEMAP) ||
	    cu->mem_host_get_device_pointer(&f->word_dev, page, 0))
		return -1;
	return cu->stream_create(&f->st, CU_STREAM_NON_BLOCKING) ||
	       cu->event_create(&f->ev, CU_EVENT_DISABLE_TIMING) ? -1 : 0;
}

static void floor_close(struct floor *f)
{
	if (f->st)
		f->cu->stream_synchronize(f->st);
	if (f->word) {
		f->cu->mem_host_unregister((void *)f->word);
		munmap((void *)f->word, 4096);
	}
	hop_buf_free(&f->host);
	hop_buf_free(&f->dev);
}

/* A copy within the GPU needs its SMs (field-2026.md): timed beside the
 * kernel it shows that the kernel holds every SM, idle it is a few us. */
static int witness(FILE *out, const char *tag, struct floor *f)
{
	CUdeviceptr dev = (CUdeviceptr)(uintptr_t)f->dev.ptr;
	double t0 = harness_now();

	if (f->cu->memcpy_async(dev + 64, dev, 8, f->st) || f->cu->event_record(f->ev, f->st) ||
	    wait_event(f))
		return -1;
	fprintf(out, "{\"mode\": \"witness\", \"who\": \"floor\", %s, \"d2d_8b_us\": %.1f}\n", tag,
		(harness_now() - t0) * 1e6);
	return 0;
}

int hop_floors(FILE *out, const char *tag, const size_t *sizes, int nsizes, int rounds,
	       int peer)
{
	struct floor f;
	double *t = calloc((size_t)rounds, sizeof(*t));
	double *h = calloc((size_t)rounds, sizeof(*h));
	double *g = calloc((size_t)rounds, sizeof(*g));
	size_t max = 0;
	int rc = -1;

	for (int i = 0; i < nsizes; i++)
		max = sizes[i] > max ? sizes[i] : max;
	if (!t || !h || !g || floor_open(&f, max, peer))
		goto out;
	for (int i = 0; i < nsizes; i++) {
		fprintf(out, "{\"mode\": \"pingpong\", \"who\": \"floor\", %s, \"bytes\": %zu",
			tag, sizes[i]);
		for (int how = 0; how < NFLOORS; how++) {
			double p10, p50, p90, h50, g50;

			for (int w = 0; w < rounds / 10; w++)	/* warm-up */
				if (round_trip(&f, how, sizes[i], (uint64_t)w, &h[0]) < 0)
					goto out;
			for (int r = 0; r < rounds; r++) {
				t[r] = round_trip(&f, how, sizes[i], (uint64_t)r + 7, &h[r]);
				if (t[r] < 0) {
					fprintf(stderr, "floor %s, %zu bytes, round %d failed or "
						"arrived wrong\n", floor_name[how], sizes[i], r);
					goto out;
				}
			}
			for (int r = 0; r < rounds; r++)
				g[r] = 2 * t[r] - h[r];	/* the GPU -> host part */
			hop_percentiles(h, rounds, NULL, &h50, NULL);
			hop_percentiles(g, rounds, NULL, &g50, NULL);
			hop_percentiles(t, rounds, &p10, &p50, &p90);
			fprintf(out, ", \"floor_%s_us\": %.2f, \"floor_%s_p10\": %.2f, "
				"\"floor_%s_p90\": %.2f, \"floor_%s_h2g_us\": %.2f, "
				"\"floor_%s_g2h_us\": %.2f", floor_name[how], p50, floor_name[how], p10,
				floor_name[how], p90, floor_name[how], h50, floor_name[how], g50);
		}
		fprintf(out, ", \"checked\": %d}\n", rounds * NFLOORS);
		fflush(out);
	}
	rc = witness(out, tag, &f);
out:
	floor_close(&f);
	free(t);
	free(h);
	free(g);
	return rc;
}

/* `count` copies of `size` back to back on one stream, one event after
 * the last: the engine's rate with nothing between the copies. */
int hop_floor_stream(FILE *out, const char *tag, size_t size, int count, int peer)
{
	struct hop_buf back;
	struct floor f;
	int rc = -1;

	if (floor_open(&f, size, peer))
		goto out;
	back = f.host;
	back.ptr += size;
	for (int dir = 0; dir < 2; dir++) {
		CUdeviceptr host = (CUdeviceptr)(uintptr_t)f.host.ptr;
		CUdeviceptr dev = (CUdeviceptr)(uintptr_t)f.dev.ptr;
		double t0, t1;

		if (hop_buf_fill(&f.host, size, 1, size, 3))
			goto out;
		for (int pass = 0; pass < 2; pass++) {	/* the first warms up */
			t0 = harness_now();
			for (int i = 0; i < count; i++)
				if (dir ? f.cu->memcpy_async(host + size, dev, size, f.st) :
					  f.cu->memcpy_async(dev, host, size, f.st))
					goto out;
			if (f.cu->event_record(f.ev, f.st) || wait_event(&f))
				goto out;
			t1 = harness_now();
		}
		if (dir && hop_buf_check(&back, size, 1, size, 3) != 0)
			goto out;
		fprintf(out, "{\"mode\": \"stream\", \"who\": \"floor\", %s, \"dir\": \"%s\", "
			"\"bytes\": %zu, \"copies\": %d, \"floor_copies_per_s\": %.0f, "
			"\"floor_gbps\": %.2f}\n", tag,
			peer >= 0 ? (dir ? "b-to-a" : "a-to-b") : (dir ? "gpu-to-host" : "host-to-gpu"), size,
			count, count / (t1 - t0), (double)size * count / (t1 - t0) / 1e9);
		fflush(out);
	}
	rc = 0;
out:
	floor_close(&f);
	return rc;
}
