/* Connection pairs for the transport tests (tp_pair.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "symmem.h"
#include "tp_pair.h"

struct tp_options options(int backend, uint64_t ring, uint64_t chunk)
{
	struct tp_options o = {
		.backend = backend,
		.ring_size = ring,
		.chunk_size = chunk,
		.connect_timeout = 10,
		.ifname = "",
		.zero_copy = 1,		/* NCCL_ZERO_COPY's default */
	};
	return o;
}

void sample_handle_info(struct tp_handle_info *info)
{
	memset(info, 0, sizeof(*info));
	info->host_id = 0x1122334455667788ull;
	for (int i = 0; i < 16; i++)
		info->token[i] = (uint8_t)(i * 7 + 1);
	info->dev = 3;
	info->pid = 4242;
	strcpy(info->uds_name, "symmem-00ff10ab9c3d7e01");
	info->family = AF_INET;
	info->port = 40000;
	info->addr[0] = 127;
	info->addr[3] = 1;
}

double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int drive_pair(const struct tp_options *o, struct tp_listener *l, const uint8_t *h,
		      struct tp_comm **s, struct tp_comm **r)
{
	double end = now() + 10;
	int rc = SM_OK;

	*s = *r = NULL;
	while ((!*s || !*r) && now() < end && !rc) {
		if (!*s)
			rc = tp_connect(o, h, s);
		if (!*r && !rc)
			rc = tp_accept(l, r);
	}
	return rc ? rc : (*s && *r ? SM_OK : SM_ERR_INTERNAL);
}

int make_pair(const struct tp_options *o, struct tp_comm **s, struct tp_comm **r)
{
	uint8_t h[TP_HANDLE_SIZE];
	struct tp_listener *l;
	int rc;

	rc = tp_listen(o, 0, h, &l);
	if (rc)
		return rc;
	rc = drive_pair(o, l, h, s, r);
	tp_close_listener(l);
	return rc;
}

void tp_pair_open(struct tp_pair *p, const struct tp_pair_opts *opts)
{
	struct tp_options o = options(opts->backend, 1 << 20, 65536);

	o.gpu = opts->gpu;
	o.zero_copy = !opts->staged;
	o.host_in_place = opts->host_in_place;
	o.landing = opts->landing;
	o.copy_timeout = opts->copy_limit_s;
	/* Room for every staged receive of a test, given back when idle. */
	if (opts->gpu)
		o.pool = (struct sm_pool_config){ .growth = 2.0, .max = 64u << 20,
						  .trim = 64u << 20 };
	if (make_pair(&o, &p->s, &p->r))
		fail_msg("%s", sm_last_error());
}

void tp_pair_close(struct tp_pair *p)
{
	tp_close(p->s);
	tp_close(p->r);
	p->s = p->r = NULL;
}

/* One thread drives both ends: tests each request until both are done,
 * failing past `end`.  Returns the bytes the receive reports. */
size_t complete_both(struct tp_req *sr, struct tp_req *rr, double end)
{
	size_t got = 0;

	for (int done_s = 0, done_r = 0; !done_s || !done_r;) {
		int rs = done_s ? SM_OK : tp_test(sr, &done_s, NULL);
		int rr_rc = rs || done_r ? SM_OK : tp_test(rr, &done_r, &got);

		if (rs || rr_rc)
			print_message("%s failed: %s\n", rs ? "send" : "receive", sm_last_error());
		assert_int_equal(rs, SM_OK);
		assert_int_equal(rr_rc, SM_OK);
		assert_true(now() < end);
	}
	return got;
}

size_t wait_done(struct tp_req *r, double end)
{
	size_t got = 0;
	int done = 0;

	while (!done && now() < end)
		assert_int_equal(tp_test(r, &done, &got), SM_OK);
	assert_true(done);
	return got;
}

int wait_failure(struct tp_req *r, double end)
{
	int done = 0, rc = SM_OK;

	while (rc == SM_OK && !done && now() < end)
		rc = tp_test(r, &done, NULL);
	assert_false(done);
	return rc;
}

struct tp_req *isend_when_posted(struct tp_comm *s, const void *src, size_t size,
				 const struct tp_region *reg, double end)
{
	struct tp_req *sr = NULL;

	while (!sr && now() < end)
		assert_int_equal(tp_isend(s, src, size, reg, &sr), SM_OK);
	assert_non_null(sr);
	return sr;
}


struct tp_options ib_options(const char *hca)
{
	struct tp_options o = options(TP_BACKEND_IB, 1 << 20, 65536);

	o.ib = 2;
	o.ib_hca = hca;
	o.ib_gid_index = -1;
	o.ib_timeout = -1;
	o.ib_retry = -1;
	return o;
}

/* Automatic backend choice for a peer posed on another host (host_id
 * changed in the handle), with ibverbs allowed on the devices `hca`
 * selects: the listener's offer in the handle must be `offers_ib`, and
 * both ends must get backend `want`. */
void auto_between_hosts(const char *hca, int offers_ib, const char *want)
{
	struct tp_options o = ib_options(hca);
	struct tp_handle_info info;
	uint8_t h[TP_HANDLE_SIZE];
	struct tp_listener *l;
	struct tp_comm *s, *r;

	o.backend = TP_BACKEND_AUTO;
	o.ib = 1;
	assert_int_equal(tp_listen(&o, 0, h, &l), SM_OK);
	assert_int_equal(tp_handle_decode(h, &info), SM_OK);
	assert_int_equal(info.offered, offers_ib);
	info.host_id ^= 0xffff;
	tp_handle_encode(&info, h);
	assert_int_equal(drive_pair(&o, l, h, &s, &r), SM_OK);
	assert_string_equal(tp_comm_backend(s), want);
	assert_string_equal(tp_comm_backend(r), want);
	tp_close_listener(l);
	tp_close(s);
	tp_close(r);
}

pid_t fork_connector(const struct tp_options *o, const uint8_t *h, const char *msg,
		     double seconds)
{
	pid_t pid = fork();

	assert_true(pid >= 0);
	if (pid == 0) {
		char buf[64];
		struct tp_comm *s = NULL;
		struct tp_req *r = NULL;
		double end = now() + seconds;
		int rc = SM_OK, done = 0;

		snprintf(buf, sizeof(buf), "%s", msg);
		close_range(3, ~0u, 0);	/* no other child's pipe held open */
		while (!s && rc == SM_OK && now() < end) {
			rc = tp_connect(o, h, &s);
			if (!s && rc == SM_OK)
				usleep(200);
		}
		if (!s) {
			fprintf(stderr, "# connector: %s\n", rc ? sm_last_error() : "timed out");
			_exit(1);
		}
		while (!r && now() < end && tp_isend(s, buf, sizeof(buf), NULL, &r) == SM_OK)
			usleep(200);
		while (r && !done && now() < end && tp_test(r, &done, NULL) == SM_OK)
			usleep(200);
		tp_close(s);
		_exit(done ? 0 : 2);
	}
	return pid;
}
