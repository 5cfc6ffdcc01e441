/* transport/ on its own: the handle codec, and connection setup and data
 * movement through real sockets and shared memory in one process. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
#include <arpa/inet.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "symmem.h"
#include "transport.h"

static struct tp_options options(int backend, uint64_t ring, uint64_t chunk)
{
	struct tp_options o = {
		.backend = backend,
		.ring_size = ring,
		.chunk_size = chunk,
		.connect_timeout = 10,
		.ifname = "",
	};
	return o;
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void sample_info(struct tp_handle_info *info)
{
	memset(info, 0, sizeof(*info));
	info->host_id = 0x1122334455667788ull;
	for (int i = 0; i < 16; i++)
		info->token[i] = (uint8_t)(i * 7 + 1);
	info->dev = 3;
	info->pid = 4242;
	strcpy(info->uds_name, "symmem-0123456789abcdef");
	info->family = AF_INET;
	info->port = 40000;
	info->addr[0] = 127;
	info->addr[3] = 1;
}

static void test_handle_roundtrip(void **state)
{
	struct tp_handle_info in, out;
	uint8_t h[TP_HANDLE_SIZE];

	(void)state;
	sample_info(&in);
	tp_handle_encode(&in, h);
	assert_int_equal(tp_handle_decode(h, &out), SM_OK);
	assert_int_equal(out.host_id, in.host_id);
	assert_memory_equal(out.token, in.token, 16);
	assert_int_equal(out.dev, 3);
	assert_int_equal(out.pid, 4242);
	assert_string_equal(out.uds_name, in.uds_name);
	assert_int_equal(out.family, AF_INET);
	assert_int_equal(out.port, 40000);
	assert_memory_equal(out.addr, in.addr, 16);
}

static void test_handle_every_bit_flip_rejected(void **state)
{
	struct tp_handle_info in, out;
	uint8_t h[TP_HANDLE_SIZE], bad[TP_HANDLE_SIZE];

	(void)state;
	sample_info(&in);
	tp_handle_encode(&in, h);
	for (int byte = 0; byte < TP_HANDLE_SIZE; byte++) {
		for (int bit = 0; bit < 8; bit++) {
			memcpy(bad, h, sizeof(bad));
			bad[byte] ^= (uint8_t)(1u << bit);
			assert_int_equal(tp_handle_decode(bad, &out), SM_ERR_INVALID);
		}
	}
	assert_int_equal(tp_handle_decode(NULL, &out), SM_ERR_INVALID);
}

/* Fields that pass the checksum but make no sense are refused too: the
 * encoder is as good as the peer that ran it. */
static void test_handle_bad_fields(void **state)
{
	struct tp_handle_info in, out;
	uint8_t h[TP_HANDLE_SIZE];

	(void)state;
	sample_info(&in);
	in.family = AF_UNIX;
	tp_handle_encode(&in, h);
	assert_int_equal(tp_handle_decode(h, &out), SM_ERR_INVALID);
	assert_non_null(strstr(sm_last_error(), "family"));

	sample_info(&in);
	in.port = 0;
	tp_handle_encode(&in, h);
	assert_int_equal(tp_handle_decode(h, &out), SM_ERR_INVALID);

	sample_info(&in);
	in.dev = -1;
	tp_handle_encode(&in, h);
	assert_int_equal(tp_handle_decode(h, &out), SM_ERR_INVALID);

	sample_info(&in);
	in.uds_name[0] = '\0';
	tp_handle_encode(&in, h);
	assert_int_equal(tp_handle_decode(h, &out), SM_ERR_INVALID);
}

static void test_host_id_stable(void **state)
{
	(void)state;
	assert_true(tp_host_id() != 0);
	assert_int_equal(tp_host_id(), tp_host_id());
}

/* Drives connect and accept from this thread until both ends exist. */
static int drive_pair(const struct tp_options *o, struct tp_listener *l, const uint8_t *h,
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

static int make_pair(const struct tp_options *o, struct tp_comm **s, struct tp_comm **r)
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

/* A tiny ring and odd sizes: every message wraps around the ring end. */
static void ring_wraps(int backend)
{
	struct tp_options o = options(backend, 64 * 1024, 4096);
	uint8_t *src = malloc(300000), *dst = malloc(300000);
	struct tp_comm *s, *r;

	assert_int_equal(make_pair(&o, &s, &r), SM_OK);
	for (int m = 0; m < 60; m++) {
		size_t size = (size_t)(m * 4999 + 13) % 300000, got = 0;
		struct tp_req *sr = NULL, *rr;
		double end = now() + 10;

		for (size_t i = 0; i < size; i++)
			src[i] = (uint8_t)(i * 31 + (size_t)m + 1);
		memset(dst, 0, size);
		assert_int_equal(tp_irecv(r, dst, 300000, NULL, &rr), SM_OK);
		while (!sr && now() < end)
			assert_int_equal(tp_isend(s, src, size, NULL, &sr), SM_OK);
		assert_non_null(sr);
		/* One thread drives both: alternate until both are done. */
		for (int done_s = 0, done_r = 0; !done_s || !done_r;) {
			if (!done_s)
				assert_int_equal(tp_test(sr, &done_s, NULL), SM_OK);
			if (!done_r)
				assert_int_equal(tp_test(rr, &done_r, &got), SM_OK);
			assert_true(now() < end);
		}
		assert_int_equal(got, size);
		assert_memory_equal(src, dst, size);
	}
	tp_close(s);
	tp_close(r);
	free(src);
	free(dst);
}

static void test_ring_wraps_shm(void **state)
{
	(void)state;
	ring_wraps(TP_BACKEND_SHM);
}

static void test_ring_wraps_tcp(void **state)
{
	(void)state;
	ring_wraps(TP_BACKEND_TCP);
}

/* A stranger who knows the socket name but not the token is refused, and
 * the real connector still gets through afterwards. */
static void test_stranger_refused(void **state)
{
	struct tp_options o = options(TP_BACKEND_AUTO, 1 << 20, 65536);
	struct tp_handle_info info;
	uint8_t h[TP_HANDLE_SIZE], junk[64], reply[128];
	struct tp_listener *l;
	struct tp_comm *s = NULL, *r = NULL;
	struct sockaddr_un sa;
	double end;
	int fd;
	ssize_t n = 0;

	(void)state;
	assert_int_equal(tp_listen(&o, 0, h, &l), SM_OK);
	assert_int_equal(tp_handle_decode(h, &info), SM_OK);
	fd = socket(AF_UNIX, SOCK_STREAM, 0);
	memset(&sa, 0, sizeof(sa));
	sa.sun_family = AF_UNIX;
	memcpy(sa.sun_path + 1, info.uds_name, strlen(info.uds_name));
	assert_int_equal(connect(fd, (struct sockaddr *)&sa,
				 (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 +
					     strlen(info.uds_name))), 0);
	memset(junk, 0x42, sizeof(junk));
	assert_int_equal(write(fd, junk, sizeof(junk)), sizeof(junk));
	end = now() + 5;
	while (now() < end) {
		assert_int_equal(tp_accept(l, &r), SM_OK);
		assert_null(r);
		n = recv(fd, reply, sizeof(reply), MSG_DONTWAIT);
		if (n >= 0)
			break;
	}
	assert_true(n > 0);	/* told why, then hung up on */
	close(fd);

	assert_int_equal(drive_pair(&o, l, h, &s, &r), SM_OK);
	assert_string_equal(tp_comm_backend(s), "shm");
	tp_close_listener(l);
	tp_close(s);
	tp_close(r);
}

static void test_shm_backend_refuses_other_host(void **state)
{
	struct tp_options o = options(TP_BACKEND_SHM, 1 << 20, 65536);
	struct tp_handle_info info;
	uint8_t h[TP_HANDLE_SIZE];
	struct tp_comm *s = NULL;

	(void)state;
	sample_info(&info);
	info.host_id = tp_host_id() + 1;
	tp_handle_encode(&info, h);
	assert_int_equal(tp_connect(&o, h, &s), SM_ERR_USAGE);
	assert_null(s);
	assert_non_null(strstr(sm_last_error(), "another host"));
}

/* Another host (as the handle says) means the TCP path, not shared memory. */
static void test_other_host_uses_tcp(void **state)
{
	struct tp_options o = options(TP_BACKEND_AUTO, 1 << 20, 65536);
	struct tp_handle_info info;
	uint8_t h[TP_HANDLE_SIZE];
	struct tp_listener *l;
	struct tp_comm *s, *r;

	(void)state;
	assert_int_equal(tp_listen(&o, 0, h, &l), SM_OK);
	assert_int_equal(tp_handle_decode(h, &info), SM_OK);
	info.host_id ^= 0xffff;
	tp_handle_encode(&info, h);
	assert_int_equal(drive_pair(&o, l, h, &s, &r), SM_OK);
	assert_string_equal(tp_comm_backend(s), "tcp");
	assert_string_equal(tp_comm_backend(r), "tcp");
	tp_close_listener(l);
	tp_close(s);
	tp_close(r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_handle_roundtrip),
		cmocka_unit_test(test_handle_every_bit_flip_rejected),
		cmocka_unit_test(test_handle_bad_fields),
		cmocka_unit_test(test_host_id_stable),
		cmocka_unit_test(test_ring_wraps_shm),
		cmocka_unit_test(test_ring_wraps_tcp),
		cmocka_unit_test(test_stranger_refused),
		cmocka_unit_test(test_shm_backend_refuses_other_host),
		cmocka_unit_test(test_other_host_uses_tcp),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
