/* The copy helper's own share of a hop: the real symmem-copyd, started as
 * the plugin starts it, driven through copy_helper.h over the driver of
 * test/fakedriver/, whose copies and stream writes happen at once in the
 * calling thread.  What is left is the helper's software: the client's
 * post, the helper taking the request, planning and queueing the call,
 * the landing word, and the client's test().  No GPU is timed here.
 *
 *   ping    one 8-byte copy at a time, posted and tested until it landed:
 *           median, p10 and p90 from post to seen landed;
 *   stream  IN_FLIGHT copies kept posted (the bench_hop stream's 16
 *           connections x 8): copies per second; from the helper's stop
 *           line its work per copy, its copy-engine calls per copy and
 *           their time (here the fake driver's memmove), and the
 *           difference: the helper's own work per copy.
 *
 * Two threads spin (this one and the helper), so the numbers mean
 * something with two free cores and nothing under load: CI runs it only as
 * a check that every copy lands with the right bytes.
 *
 *   SYMMEM_COPYD=.../symmem-copyd LD_LIBRARY_PATH=<fake driver dir> \
 *       bench_helper_cpu [-n copies] [-s bytes,...] [--landing 0|1]
 * Output: one JSON object per line. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "copy_helper.h"
#include "helper_stop.h"
#include "hop.h"
#include "symmem.h"

#define IN_FLIGHT 128
#define MAX_SIZES 8
#define ARENA (64ull << 20)
#define WAIT_NS (10ull * 1000 * 1000 * 1000)

struct side {
	int fd;
	uint8_t *p;
	uint32_t id;
};

static struct helper_stop stop;

static void sink(int warn, const char *msg)
{
	if (warn)
		fprintf(stderr, "WARN %s\n", msg);
	else
		helper_stop_read(&stop, msg);
}

static int side_open(struct smf_helper *h, struct side *s, const char *name)
{
	struct sm_share_info info;
	void *map;

	if (sm_memfd_map(name, ARENA, ARENA, &s->fd, &map))
		return -1;
	s->p = map;
	memset(&info, 0, sizeof(info));
	info.kind = SM_SHARE_HOST_FD;
	info.alloc_size = ARENA;
	info.alloc_id = (uint64_t)s->fd;
	return smf_helper_add(h, getpid(), &info, s->fd, &s->id);
}

static void side_close(struct side *s)
{
	if (!s->p)
		return;
	munmap(s->p, ARENA);
	close(s->fd);
}

/* Posts copy i (len bytes at slot i % IN_FLIGHT of each arena). */
static int post(struct smf_helper *h, struct side *src, struct side *dst, uint64_t i,
		size_t len, uint64_t *seq)
{
	uint64_t off = (i % IN_FLIGHT) * len, limit = sm_now_ns() + WAIT_NS;
	int started = 0;

	memset(src->p + off, (int)(i * 7 + 1), len);
	while (!started) {
		if (smf_helper_post(h, dst->id, off, src->id, off, len, seq, &started))
			return -1;
		if (!started && sm_now_ns() > limit)
			return -1;
	}
	return 0;
}

static int wait_landed(struct smf_helper *h, uint64_t seq)
{
	uint64_t limit = sm_now_ns() + WAIT_NS;
	int done = 0;

	while (!done) {
		if (smf_helper_test(h, seq, &done))
			return -1;
		if (!done && sm_now_ns() > limit)
			return -1;
	}
	return 0;
}

static int check(const struct side *dst, uint64_t i, size_t len)
{
	const uint8_t *p = dst->p + (i % IN_FLIGHT) * len;

	for (size_t k = 0; k < len; k++)
		if (p[k] != (uint8_t)(i * 7 + 1))
			return -1;
	return 0;
}

static int ping(struct smf_helper *h, struct side *src, struct side *dst, int n)
{
	double *t = calloc((size_t)n, sizeof(*t)), p10, p50, p90;
	int bad = 0, rc = -1, warm = n / 10;
	uint64_t seq;

	if (!t)
		return -1;
	for (int i = 0; i < n; i++) {
		uint64_t t0 = sm_now_ns();

		if (post(h, src, dst, (uint64_t)i, 8, &seq) || wait_landed(h, seq))
			goto out;
		t[i] = (double)(sm_now_ns() - t0) / 1e3;
		bad += check(dst, (uint64_t)i, 8) != 0;
	}
	hop_percentiles(t + warm, n - warm, &p10, &p50, &p90);
	printf("{\"mode\": \"ping\", \"bytes\": 8, \"median_us\": %.3f, \"p10_us\": %.3f, "
	       "\"p90_us\": %.3f, \"copies\": %d, \"bad\": %d}\n", p50, p10, p90, n, bad);
	rc = bad ? -1 : 0;
out:
	free(t);
	return rc;
}

static int stream(struct smf_helper *h, struct side *src, struct side *dst, int n, size_t len)
{
	uint64_t seq[IN_FLIGHT], t0;
	int bad = 0;

	t0 = sm_now_ns();
	for (int i = 0; i < n + IN_FLIGHT; i++) {
		int k = i % IN_FLIGHT;

		if (i >= IN_FLIGHT) {
			if (wait_landed(h, seq[k]))
				return -1;
			bad += check(dst, (uint64_t)(i - IN_FLIGHT), len) != 0;
		}
		if (i < n && post(h, src, dst, (uint64_t)i, len, &seq[k]))
			return -1;
	}
	printf("{\"mode\": \"stream\", \"bytes\": %zu, \"in_flight\": %d, \"copies\": %d, "
	       "\"copies_per_s\": %.0f, \"bad\": %d",
	       len, IN_FLIGHT, n, (double)n * 1e9 / (double)(sm_now_ns() - t0), bad);
	return bad ? -1 : 0;
}

static int parse_sizes(const char *arg, size_t *sizes, int *n)
{
	char *end;

	for (*n = 0; *arg && *n < MAX_SIZES; arg = *end ? end + 1 : end) {
		sizes[(*n)++] = strtoull(arg, &end, 10);
		if (end == arg || sizes[*n - 1] == 0 || sizes[*n - 1] * IN_FLIGHT > ARENA)
			return -1;
	}
	return *n ? 0 : -1;
}

/* One helper per stream size, so each stop line holds one pattern. */
static int run_stream(const struct smf_helper_params *p, int n, size_t len)
{
	struct side src = { .fd = -1 }, dst = { .fd = -1 };
	struct smf_helper *h = NULL;
	int rc = -1;

	if (smf_helper_start(getenv("SYMMEM_COPYD"), "0000:00:00.0", p, &h) ||
	    side_open(h, &src, "bench-src") || side_open(h, &dst, "bench-dst"))
		goto out;
	helper_stop_reset(&stop);
	rc = len ? stream(h, &src, &dst, n, len) : ping(h, &src, &dst, n);
	smf_helper_stop(h);
	h = NULL;
	if (len && !rc)
		printf(", \"helper_work_us_per_copy\": %.3f, \"calls_per_copy\": %.3f, "
		       "\"driver_us_per_call\": %.2f, \"helper_own_us_per_copy\": %.3f}\n",
		       stop.work_us, stop.calls_per_copy, stop.driver_us_per_call,
		       helper_stop_own_us(&stop));
out:
	smf_helper_stop(h);
	side_close(&src);
	side_close(&dst);
	return rc;
}

int main(int argc, char **argv)
{
	struct smf_helper_params p = { .nstreams = 1, .depth = 2, .merge_max = 64 << 20,
				       .batch = 16, .landing = 1 };
	size_t sizes[MAX_SIZES] = { 8, 65536 };
	int nsizes = 2, n = 20000;

	for (int i = 1; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "-n"))
			n = atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "-s") && !parse_sizes(argv[i + 1], sizes, &nsizes))
			continue;
		else if (!strcmp(argv[i], "--landing"))
			p.landing = atoi(argv[i + 1]);
		else
			n = -1;
	}
	if (n < 10 || argc % 2 == 0 || !getenv("SYMMEM_COPYD")) {
		fprintf(stderr, "usage: SYMMEM_COPYD=... %s [-n copies >= 10] [-s bytes,...] "
			"[--landing 0|1]\n", argv[0]);
		return 2;
	}
	sm_set_log_sink(sink);
	if (run_stream(&p, n, 0))
		goto fail;
	for (int i = 0; i < nsizes; i++)
		if (run_stream(&p, n, sizes[i]))
			goto fail;
	return 0;
fail:
	fprintf(stderr, "bench_helper_cpu: %s\n", sm_last_error());
	return 1;
}
