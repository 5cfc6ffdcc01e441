/* transport/ on its own: the handle codec, and connection setup and data
 * movement through real sockets and shared memory in one process. */
#include <sched.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "comm.h"	/* the malformed-announcement test writes raw bytes */
#include "ib.h"
#include "listen.h"	/* CAND_GRACE_NS */
#include "shm.h"
#include "tcp.h"
#include "smfree.h"
#include "symmem.h"
#include "transport.h"
#include "tp_pair.h"
#include "fd_util.h"

static void test_handle_roundtrip(void **state)
{
	struct tp_handle_info in, out;
	uint8_t h[TP_HANDLE_SIZE];

	(void)state;
	sample_handle_info(&in);
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
	assert_int_equal(out.offered, 0);
	in.offered = 1;
	for (int i = 0; i < 16; i++)
		in.offer[i] = (uint8_t)(0xf0 + i);
	tp_handle_encode(&in, h);
	assert_int_equal(tp_handle_decode(h, &out), SM_OK);
	assert_int_equal(out.offered, 1);
	assert_memory_equal(out.offer, in.offer, 16);
	assert_int_equal(out.no_tcp, 0);

	/* A listener without TCP: no family, port or address. */
	sample_handle_info(&in);
	in.no_tcp = 1;
	in.family = 0;
	in.port = 0;
	memset(in.addr, 0, sizeof(in.addr));
	tp_handle_encode(&in, h);
	assert_int_equal(tp_handle_decode(h, &out), SM_OK);
	assert_int_equal(out.no_tcp, 1);
	assert_int_equal(out.port, 0);
}

static void test_handle_every_bit_flip_rejected(void **state)
{
	struct tp_handle_info in, out;
	uint8_t h[TP_HANDLE_SIZE], bad[TP_HANDLE_SIZE];

	(void)state;
	sample_handle_info(&in);
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

/* A handle edited by hand gets a checksum that fits again (the CRC-32 of
 * bytes 0-111, at 112: handle.c's layout), to reach the field checks. */
static void reseal(uint8_t *h)
{
	uint32_t crc = 0xffffffffu;

	for (int i = 0; i < 112; i++) {
		crc ^= h[i];
		for (int k = 0; k < 8; k++)
			crc = (crc >> 1) ^ (0xedb88320u & -(crc & 1));
	}
	crc = ~crc;
	memcpy(h + 112, &crc, 4);
}

/* Fields that pass the checksum but make no sense are refused too: the
 * encoder is as good as the peer that ran it. */
static void test_handle_bad_fields(void **state)
{
	struct tp_handle_info in, out;
	uint8_t h[TP_HANDLE_SIZE];

	(void)state;
	sample_handle_info(&in);
	in.family = AF_UNIX;
	tp_handle_encode(&in, h);
	assert_int_equal(tp_handle_decode(h, &out), SM_ERR_INVALID);
	assert_non_null(strstr(sm_last_error(), "family"));

	sample_handle_info(&in);
	in.port = 0;
	tp_handle_encode(&in, h);
	assert_int_equal(tp_handle_decode(h, &out), SM_ERR_INVALID);

	sample_handle_info(&in);
	in.dev = -1;
	tp_handle_encode(&in, h);
	assert_int_equal(tp_handle_decode(h, &out), SM_ERR_INVALID);

	sample_handle_info(&in);
	in.uds_name[0] = '\0';
	tp_handle_encode(&in, h);
	assert_int_equal(tp_handle_decode(h, &out), SM_ERR_INVALID);

	/* The encoder leaves an address without an offer out; a handle that
	 * carries one anyway (the CRC made to fit) is refused. */
	sample_handle_info(&in);
	in.offered = 1;
	in.offer[15] = 7;
	tp_handle_encode(&in, h);
	assert_int_equal(tp_handle_decode(h, &out), SM_OK);
	in.offered = 0;
	tp_handle_encode(&in, h);
	assert_int_equal(tp_handle_decode(h, &out), SM_OK);
	assert_int_equal(out.offer[15], 0);
	h[92] = 0;			/* the flags: no HANDLE_OFFER */
	h[96 + 15] = 7;			/* the address */
	reseal(h);
	assert_int_equal(tp_handle_decode(h, &out), SM_ERR_INVALID);
	assert_non_null(strstr(sm_last_error(), "RDMA address"));

	/* "No TCP" with a TCP address anyway. */
	sample_handle_info(&in);
	in.no_tcp = 1;
	tp_handle_encode(&in, h);
	assert_int_equal(tp_handle_decode(h, &out), SM_ERR_INVALID);
	assert_non_null(strstr(sm_last_error(), "says it has none"));
}

/* SHA-256 (FIPS 180-4's examples, a million 'a's fed in pieces, and
 * lengths around the padding's edges) and HMAC-SHA-256 (RFC 4231 cases
 * 1, 2 and 6, the last with a key longer than a block), the proofs'
 * keyed hash. */
static void expect_digest(const uint8_t *d, const char *want)
{
	char got[2 * SHA256_BYTES + 1];

	for (int i = 0; i < SHA256_BYTES; i++)
		snprintf(got + 2 * i, 3, "%02x", d[i]);
	assert_string_equal(got, want);
}

static void expect_sha256(const void *data, size_t n, const char *want)
{
	uint8_t d[SHA256_BYTES];
	struct sha256 c;

	sha256_init(&c);
	sha256_update(&c, data, n);
	sha256_final(&c, d);
	expect_digest(d, want);
	sha256_init(&c);		/* the same in pieces of 7 */
	for (size_t off = 0; off < n; off += 7)
		sha256_update(&c, (const uint8_t *)data + off, n - off < 7 ? n - off : 7);
	sha256_final(&c, d);
	expect_digest(d, want);
}

static void test_sha256_known_answers(void **state)
{
	static const struct {
		size_t len;
		const char *want;
	} edges[] = {
		{ 55, "16fa57a0a3423a715d594516339f36189d6b5f93754a9714fef202616a9fabfe" },
		{ 56, "c37b44e5f1b18554b36966f4f8e08bfbf3164c4b6c10374d12d89850892073c5" },
		{ 63, "bbba992d2c85af960fb2987a1fd05e0aa82a3db3c740dd8982a9e273b75e36a3" },
		{ 64, "66bd4633ed6f71c4ecfa4763bf7ba1c8ec7612de9aa6c0578a7b675207c71e0b" },
		{ 119, "a3ed307b730fa77c07531300c6e4a282330011d4d4caf6bb7b63ae05950f4b66" },
	};
	uint8_t buf[1000], d[SHA256_BYTES];
	struct sha256 c;

	(void)state;
	expect_sha256("", 0, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
	expect_sha256("abc", 3, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
	expect_sha256("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq", 56,
		      "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
	for (size_t i = 0; i < sizeof(buf); i++)
		buf[i] = (uint8_t)(i * 7 + 1);
	for (size_t i = 0; i < sizeof(edges) / sizeof(edges[0]); i++)
		expect_sha256(buf, edges[i].len, edges[i].want);
	memset(buf, 'a', sizeof(buf));
	sha256_init(&c);
	for (int i = 0; i < 1000; i++)
		sha256_update(&c, buf, sizeof(buf));
	sha256_final(&c, d);
	expect_digest(d, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

static void test_hmac_known_answers(void **state)
{
	static const char hi[] = "Hi There", jefe[] = "what do ya want for nothing?",
			  big[] = "Test Using Larger Than Block-Size Key - Hash Key First";
	uint8_t key[131], d[SHA256_BYTES];
	const void *parts[2];
	size_t lens[2];

	(void)state;
	memset(key, 0x0b, 20);
	parts[0] = hi;
	lens[0] = strlen(hi);
	hmac_sha256(key, 20, parts, lens, 1, d);
	expect_digest(d, "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
	parts[0] = jefe;		/* in two pieces */
	lens[0] = 10;
	parts[1] = jefe + 10;
	lens[1] = strlen(jefe) - 10;
	hmac_sha256((const uint8_t *)"Jefe", 4, parts, lens, 2, d);
	expect_digest(d, "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
	memset(key, 0xaa, sizeof(key));
	parts[0] = big;
	lens[0] = strlen(big);
	hmac_sha256(key, sizeof(key), parts, lens, 1, d);
	expect_digest(d, "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
}

/* RDMA port addresses on one network or not (rails): IPv4 GIDs under the
 * local interface's netmask, others by their 64-bit prefix. */
static void v4_gid(uint8_t g[16], int a, int b, int c, int d)
{
	memset(g, 0, 16);
	g[10] = g[11] = 0xff;
	g[12] = (uint8_t)a;
	g[13] = (uint8_t)b;
	g[14] = (uint8_t)c;
	g[15] = (uint8_t)d;
}

static void test_gid_networks(void **state)
{
	uint8_t a[16], b[16], zero[16] = { 0 };
	static const uint8_t lo4[4] = { 127, 0, 0, 1 }, none4[4] = { 192, 0, 2, 77 };

	(void)state;
	/* The rule itself. */
	v4_gid(a, 10, 1, 2, 3);
	v4_gid(b, 10, 1, 2, 200);
	assert_int_equal(tp_gid_net_match(a, b, 96 + 24), 1);
	assert_int_equal(tp_gid_net_match(a, b, 96 + 25), 0);	/* .3 and .200 split at /25 */
	v4_gid(b, 10, 1, 3, 3);
	assert_int_equal(tp_gid_net_match(a, b, 96 + 24), 0);
	assert_int_equal(tp_gid_net_match(a, b, 96 + 16), 1);
	assert_int_equal(tp_gid_net_match(a, b, 96 + 23), 1);	/* 2 and 3 share 7 bits */
	assert_int_equal(tp_gid_net_match(a, zero, 64), -1);
	assert_int_equal(tp_gid_net_match(a, b, 129), -1);
	assert_int_equal(tp_gid_net_match(a, b, -1), -1);

	/* The loopback interface holds 127.0.0.1 (/8 everywhere Linux runs). */
	assert_int_equal(tp_ipv4_prefix_len(lo4), 8);
	assert_int_equal(tp_ipv4_prefix_len(none4), -1);
	v4_gid(a, 127, 0, 0, 1);
	v4_gid(b, 127, 9, 9, 9);
	assert_int_equal(tp_gid_same_net(a, b), 1);
	v4_gid(b, 10, 9, 9, 9);
	assert_int_equal(tp_gid_same_net(a, b), 0);
	/* An address no interface here holds: the mask is unknown. */
	v4_gid(a, 192, 0, 2, 77);
	assert_int_equal(tp_gid_same_net(a, b), -1);

	/* InfiniBand / IPv6: the subnet prefix.  fe80::/64 on both (one
	 * default subnet) counts as one network. */
	memset(a, 0, 16);
	memset(b, 0, 16);
	a[0] = b[0] = 0xfe;
	a[1] = b[1] = 0x80;
	a[15] = 1;
	b[15] = 2;
	assert_int_equal(tp_gid_same_net(a, b), 1);
	b[7] = 5;
	assert_int_equal(tp_gid_same_net(a, b), 0);
	/* An IPv4 GID against an IPv6 one, or a missing address: cannot tell. */
	v4_gid(b, 127, 0, 0, 1);
	assert_int_equal(tp_gid_same_net(a, b), -1);
	assert_int_equal(tp_gid_same_net(zero, b), -1);
	assert_int_equal(tp_gid_same_net(b, zero), -1);
}

static void test_host_id_stable(void **state)
{
	(void)state;
	assert_true(tp_host_id() != 0);
	assert_int_equal(tp_host_id(), tp_host_id());
}

/* A tiny ring and odd sizes: every message wraps around the ring end. */
static void ring_wraps(int backend)
{
	struct tp_options o = options(backend, 64 * 1024, 4096);
	uint8_t *src = malloc(300000), *dst = malloc(300000);
	struct tp_comm *s, *r;

	assert_int_equal(make_pair(&o, &s, &r), SM_OK);
	for (int m = 0; m < 60; m++) {
		size_t size = (size_t)(m * 4999 + 13) % 300000;
		struct tp_req *sr, *rr;
		double end = now() + 10;

		for (size_t i = 0; i < size; i++)
			src[i] = (uint8_t)(i * 31 + (size_t)m + 1);
		memset(dst, 0, size);
		assert_int_equal(tp_irecv(r, dst, 300000, NULL, &rr), SM_OK);
		sr = isend_when_posted(s, src, size, NULL, end);
		assert_int_equal(complete_both(sr, rr, end), size);
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

/* Messages of exactly the ring's size, each read in one piece: the
 * receiver gives the room of every message back as it reads it, so the
 * next one fits (kept back, both ends waited for each other for ever).
 * Closing both ends unmaps the ring. */
static void test_ring_sized_messages(void **state)
{
	struct tp_options o = options(TP_BACKEND_SHM, 65536, 65536);
	uint8_t *src = malloc(65536), *dst = malloc(65536);
	int rings = mappings_named("symmem-ring");
	struct tp_comm *s, *r;

	(void)state;
	assert_non_null(src);
	assert_non_null(dst);
	assert_int_equal(make_pair(&o, &s, &r), SM_OK);
	assert_int_equal(mappings_named("symmem-ring"), rings + 2);
	for (int m = 0; m < 4; m++) {
		double end = now() + 5;
		struct tp_req *sr, *rr;

		memset(src, m + 1, 65536);
		assert_int_equal(tp_irecv(r, dst, 65536, NULL, &rr), SM_OK);
		sr = isend_when_posted(s, src, 65536, NULL, end);
		assert_int_equal(complete_both(sr, rr, end), 65536);
		assert_memory_equal(src, dst, 65536);
	}
	tp_close(s);
	tp_close(r);
	assert_int_equal(mappings_named("symmem-ring"), rings);
	free(src);
	free(dst);
}

struct spin_recv {
	struct tp_req *rr;
	int rc;
};

static void *spin_recv(void *arg)
{
	struct spin_recv *sp = arg;
	double end = now() + 10;
	int done = 0;

	while (!done && !sp->rc && now() < end)
		sp->rc = tp_test(sp->rr, &done, NULL);
	if (!done && !sp->rc)
		sp->rc = SM_ERR_INTERNAL;
	return NULL;
}

/* One call on a sending connection moves at most one ring's worth of a
 * large message, even while the receiver (another thread here, another
 * process under NCCL) keeps freeing room: NCCL's progress thread gets
 * back to its other connections. */
static void test_send_call_moves_one_ring_at_most(void **state)
{
	enum { RING = 65536, BIG = 16 << 20 };
	struct tp_options o = options(TP_BACKEND_SHM, RING, 4096);
	uint8_t *src = malloc(BIG), *dst = malloc(BIG);
	struct spin_recv sp = { 0 };
	struct tp_comm *s, *r;
	struct tp_req *sr;
	double end = now() + 10;
	pthread_t t;
	int done = 0;

	(void)state;
	assert_non_null(src);
	assert_non_null(dst);
	for (size_t i = 0; i < BIG; i++)
		src[i] = (uint8_t)(i * 13 + 5);
	assert_int_equal(make_pair(&o, &s, &r), SM_OK);
	assert_int_equal(tp_irecv(r, dst, BIG, NULL, &sp.rr), SM_OK);
	assert_int_equal(pthread_create(&t, NULL, spin_recv, &sp), 0);
	sr = isend_when_posted(s, src, BIG, NULL, end);
	assert_true(sr->moved <= RING);
	for (uint64_t before = sr->moved; !done && now() < end; before = sr->moved) {
		assert_int_equal(tp_test(sr, &done, NULL), SM_OK);
		assert_true(sr->moved - before <= RING);
	}
	assert_true(done);
	assert_int_equal(pthread_join(t, NULL), 0);
	assert_int_equal(sp.rc, SM_OK);
	assert_memory_equal(src, dst, BIG);
	tp_close(s);
	tp_close(r);
	free(src);
	free(dst);
}

/* Medians come from 1 us buckets; the last bucket catches the rest. */
static void test_stage_median(void **state)
{
	struct sm_hist h;

	(void)state;
	memset(&h, 0, sizeof(h));
	assert_true(sm_hist_median(&h) < 0);
	sm_hist_add(&h, 2500);		/* 2.5 us */
	assert_true(sm_hist_median(&h) == 2.5);
	sm_hist_add(&h, 7100);
	sm_hist_add(&h, 7900);
	assert_true(sm_hist_median(&h) == 7.5);
	for (int i = 0; i < 4; i++)
		sm_hist_add(&h, 5000000);	/* 5 ms */
	assert_true(sm_hist_median(&h) >= SM_HIST_BUCKETS);
}

/* A send tried before the receiver posted counts the wait from its first
 * try; one whose receive was already posted waits nothing. */
static void recv_wait(int backend)
{
	struct tp_options o = options(backend, 64 * 1024, 4096);
	uint8_t src[64], dst[64];
	struct tp_comm *s, *r;
	struct tp_req *sr = NULL, *rr;
	struct tp_stats st;
	double end;

	memset(src, 0x5a, sizeof(src));
	assert_int_equal(make_pair(&o, &s, &r), SM_OK);
	for (int m = 0; m < 2; m++) {
		sr = NULL;
		end = now() + 10;
		if (m == 0) {
			assert_int_equal(tp_isend(s, src, sizeof(src), NULL, &sr), SM_OK);
			assert_null(sr);	/* nothing posted yet */
			usleep(3000);
		}
		assert_int_equal(tp_irecv(r, dst, sizeof(dst), NULL, &rr), SM_OK);
		sr = isend_when_posted(s, src, sizeof(src), NULL, end);
		assert_int_equal(complete_both(sr, rr, end), sizeof(dst));
	}
	tp_get_stats(s, &st);
	/* One wait of >= 3 ms (the last bucket), one of none (bucket 0). */
	assert_int_equal(st.stage[TP_STAGE_RECV_WAIT].n[SM_HIST_BUCKETS - 1], 1);
	assert_int_equal(st.stage[TP_STAGE_RECV_WAIT].n[0], 1);
	tp_close(s);
	tp_close(r);
}

static void test_recv_wait_shm(void **state)
{
	(void)state;
	recv_wait(TP_BACKEND_SHM);
}

static void test_recv_wait_tcp(void **state)
{
	(void)state;
	recv_wait(TP_BACKEND_TCP);
}

/* The edge of a posted receive over shared memory: a send of exactly its
 * size is taken; one byte more fails the send with SM_ERR_USAGE, and the
 * receiver too (told, not left waiting), with nothing written past the
 * receive. */
static void test_shm_send_one_byte_too_many(void **state)
{
	struct tp_options o = options(TP_BACKEND_SHM, 65536, 4096);
	uint8_t src[65], dst[65];
	struct tp_comm *s, *r;
	struct tp_req *sr = NULL, *rr;
	double end = now() + 10;
	int rc = SM_OK;

	(void)state;
	memset(src, 0x11, sizeof(src));
	memset(dst, 0, sizeof(dst));
	assert_int_equal(make_pair(&o, &s, &r), SM_OK);
	assert_int_equal(tp_irecv(r, dst, 64, NULL, &rr), SM_OK);
	sr = isend_when_posted(s, src, 64, NULL, end);
	assert_int_equal(complete_both(sr, rr, end), 64);
	memset(dst, 0, sizeof(dst));
	assert_int_equal(tp_irecv(r, dst, 64, NULL, &rr), SM_OK);
	sr = NULL;
	while (!sr && rc == SM_OK && now() < end)
		rc = tp_isend(s, src, 65, NULL, &sr);
	assert_int_equal(rc, SM_ERR_USAGE);
	assert_null(sr);
	assert_int_equal(wait_failure(rr, end), SM_ERR_USAGE);
	assert_int_equal(dst[64], 0);
	tp_close(s);
	tp_close(r);
}

/* TCP: a send larger than its receive, posted while the previous message
 * is part-way out, fails both ends.  Its header must not land inside the
 * previous message's payload (the receiver would take it for data and
 * wait for the rest for ever): the receiver fails within seconds. */
static void test_tcp_oversized_send_mid_message(void **state)
{
	enum { BIG = 64 << 20 };
	struct tp_options o = options(TP_BACKEND_TCP, 1 << 20, 65536);
	uint8_t *big = malloc(BIG), *out = malloc(BIG), small[128] = { 1 }, tiny[16];
	struct tp_comm *s, *r;
	struct tp_req *s0, *s1 = NULL, *r0, *r1;
	int done = 0;

	(void)state;
	assert_non_null(big);
	assert_non_null(out);
	memset(big, 0x5a, BIG);
	assert_int_equal(make_pair(&o, &s, &r), SM_OK);
	assert_int_equal(tp_irecv(r, out, BIG, NULL, &r0), SM_OK);
	assert_int_equal(tp_irecv(r, tiny, sizeof(tiny), NULL, &r1), SM_OK);
	s0 = isend_when_posted(s, big, BIG, NULL, now() + 5);
	/* The socket fills, the receiver reads a little, the sender goes on:
	 * message 0 is part-way out. */
	for (int i = 0; i < 4; i++) {
		assert_int_equal(tp_test(s0, &done, NULL), SM_OK);
		assert_int_equal(tp_test(r0, &done, NULL), SM_OK);
	}
	assert_int_equal(tp_test(s0, &done, NULL), SM_OK);
	assert_int_equal(done, 0);
	assert_int_equal(tp_isend(s, small, sizeof(small), NULL, &s1), SM_ERR_USAGE);
	assert_null(s1);
	assert_int_equal(wait_failure(r0, now() + 5), SM_ERR_REMOTE);
	tp_close(s);
	tp_close(r);
	free(big);
	free(out);
}

/* TCP, host memory: the sender sends message 0 whole and closes (its
 * last message).  The receiver posts two more receives before it tests
 * receive 0 (NCCL posts ahead): the first announcement reaches the closed
 * socket and brings back its reset, the second cannot be written.  That
 * failed write must not fail receive 0, whose bytes are in the socket;
 * receive 1, whose bytes never come, fails instead. */
static void test_tcp_host_receive_outlives_sender(void **state)
{
	struct tp_options o = options(TP_BACKEND_TCP, 1 << 20, 65536);
	uint8_t src[64], dst[64], d1[64], d2[64];
	struct tp_comm *s, *r;
	struct tp_req *sr, *r0, *r1, *r2;
	struct pollfd p;
	int done = 0;
	double end = now() + 5;

	(void)state;
	memset(src, 0x5a, sizeof(src));
	memset(dst, 0, sizeof(dst));
	assert_int_equal(make_pair(&o, &s, &r), SM_OK);
	assert_int_equal(tp_irecv(r, dst, sizeof(dst), NULL, &r0), SM_OK);
	sr = isend_when_posted(s, src, sizeof(src), NULL, end);
	wait_done(sr, end);
	tp_close(s);
	assert_int_equal(tp_irecv(r, d1, sizeof(d1), NULL, &r1), SM_OK);
	/* The reset for that announcement arrived: the next write fails. */
	p = (struct pollfd){ .fd = r->fd };
	assert_int_equal(poll(&p, 1, 2000), 1);
	assert_true(p.revents & POLLERR);
	assert_int_equal(tp_irecv(r, d2, sizeof(d2), NULL, &r2), SM_OK);
	done = 0;
	assert_int_equal(tp_test(r0, &done, NULL), SM_OK);
	assert_true(done);
	assert_memory_equal(dst, src, sizeof(src));
	assert_int_equal(wait_failure(r1, end), SM_ERR_REMOTE);
	tp_close(r);
}

/* Puts a fresh loopback TCP connection in the place of c's socket and
 * returns its other end, for the test to play a hostile peer on.  The
 * test's end gets its receive buffer before it connects: set later, Linux
 * keeps the window it offered, and unread 16-byte segments exhaust the
 * buffer before the window closes, which stalls the connection. */
static int take_over_socket(struct tp_comm *c, int rcvbuf, int sndbuf)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(a);
	int l = socket(AF_INET, SOCK_STREAM, 0), peer = socket(AF_INET, SOCK_STREAM, 0), mine;
	int one = 1;

	assert_true(l >= 0 && peer >= 0);
	assert_int_equal(bind(l, (struct sockaddr *)&a, len), 0);
	assert_int_equal(listen(l, 1), 0);
	assert_int_equal(getsockname(l, (struct sockaddr *)&a, &len), 0);
	assert_int_equal(setsockopt(peer, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf)), 0);
	assert_int_equal(connect(peer, (struct sockaddr *)&a, len), 0);
	mine = accept(l, NULL, NULL);
	assert_true(mine >= 0);
	assert_int_equal(setsockopt(mine, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)), 0);
	assert_int_equal(setsockopt(mine, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof(sndbuf)), 0);
	assert_int_equal(dup2(mine, c->fd), c->fd);
	close(mine);
	close(l);
	return peer;
}

/* TCP, host memory: the sender's send is done, its bytes wait in the
 * socket, and it closes.  NCCL's test() looks at the socket after a pass
 * that found nothing to read (comm_check_peer); one that finds the
 * hang-up there must not fail the receive while bytes sent before it are
 * still to be read.  A message cut short still fails, at its end. */
static void test_tcp_bytes_outlive_hangup(void **state)
{
	enum { SIZE = 32 << 10 };
	struct tp_options o = options(TP_BACKEND_TCP, 1 << 20, 65536);
	uint8_t *src = malloc(SIZE), *dst = malloc(SIZE);
	const uint64_t header = SIZE;
	uint8_t ann[16];
	struct tp_comm *s, *r;
	struct tp_req *sr, *rr;
	struct pollfd p = { .events = POLLRDHUP };

	(void)state;
	assert_non_null(src);
	assert_non_null(dst);
	for (size_t i = 0; i < SIZE; i++)
		src[i] = (uint8_t)(i * 7 + 1);
	memset(dst, 0, SIZE);
	assert_int_equal(make_pair(&o, &s, &r), SM_OK);
	assert_int_equal(tp_irecv(r, dst, SIZE, NULL, &rr), SM_OK);
	sr = isend_when_posted(s, src, SIZE, NULL, now() + 5);
	wait_done(sr, now() + 5);
	tp_close(s);
	p.fd = r->fd;
	assert_int_equal(poll(&p, 1, 2000), 1);
	assert_int_equal(comm_check_peer(r, rr), SM_OK);
	assert_int_equal(wait_done(rr, now() + 5), SIZE);
	assert_memory_equal(dst, src, SIZE);
	tp_close(r);

	/* A header for SIZE bytes, half of them, then the hang-up (after
	 * reading the announcement: a close with unread bytes resets). */
	assert_int_equal(make_pair(&o, &s, &r), SM_OK);
	assert_int_equal(tp_irecv(r, dst, SIZE, NULL, &rr), SM_OK);
	p = (struct pollfd){ .fd = s->fd, .events = POLLIN };
	assert_int_equal(poll(&p, 1, 2000), 1);
	assert_int_equal(read(s->fd, ann, sizeof(ann)), (ssize_t)sizeof(ann));
	assert_int_equal(write(s->fd, &header, sizeof(header)), (ssize_t)sizeof(header));
	assert_int_equal(write(s->fd, src, SIZE / 2), SIZE / 2);
	tp_close(s);
	p = (struct pollfd){ .fd = r->fd, .events = POLLRDHUP };
	assert_int_equal(poll(&p, 1, 2000), 1);
	assert_int_equal(wait_failure(rr, now() + 5), SM_ERR_REMOTE);
	assert_non_null(strstr(sm_last_error(), "closed"));
	tp_close(r);
	free(src);
	free(dst);
}

/* TCP: a peer that sends empty messages without reading their
 * announcements (anyone holding the handle's token can).  Once the socket
 * is full the announcements wait in the receiver's connection; the
 * receiver must fail that connection with a remote error rather than
 * queue them without bound, and other connections go on. */
static void test_tcp_unread_announcements(void **state)
{
	struct tp_options o = options(TP_BACKEND_TCP, 1 << 20, 65536);
	const uint64_t header = 0;
	struct tp_comm *s, *r, *s2, *r2;
	struct tp_req *rr = NULL, *sr;
	uint8_t src[64], dst[64];
	int rc = SM_OK, peer, done;
	double end = now() + 20;
	uint64_t m;

	(void)state;
	assert_int_equal(make_pair(&o, &s, &r), SM_OK);
	tp_close(s);
	/* Full after some thousand announcements. */
	peer = take_over_socket(r, 16384, 4096);
	for (m = 0; rc == SM_OK && now() < end; m++) {
		rc = tp_irecv(r, dst, sizeof(dst), NULL, &rr);
		if (rc)
			break;
		assert_int_equal(write(peer, &header, sizeof(header)), (ssize_t)sizeof(header));
		for (done = 0; rc == SM_OK && !done && now() < end;)
			rc = tp_test(rr, &done, NULL);
	}
	assert_int_equal(rc, SM_ERR_REMOTE);
	assert_non_null(strstr(sm_last_error(), "does not read the announcements"));
	tp_close(r);
	close(peer);

	assert_int_equal(make_pair(&o, &s2, &r2), SM_OK);
	memset(src, 0x3c, sizeof(src));
	assert_int_equal(tp_irecv(r2, dst, sizeof(dst), NULL, &rr), SM_OK);
	sr = isend_when_posted(s2, src, sizeof(src), NULL, now() + 5);
	assert_int_equal(complete_both(sr, rr, now() + 5), sizeof(src));
	assert_memory_equal(dst, src, sizeof(src));
	tp_close(s2);
	tp_close(r2);
}

/* The sender's parser of announcements (what a fuzz target can drive):
 * whole ones only, in order, and never more receives ahead than a
 * receiver can hold, which would overwrite a capacity still needed. */
static void test_tcp_parse_posts(void **state)
{
	struct tp_options o = options(TP_BACKEND_TCP, 1 << 20, 65536);
	uint8_t buf[(TP_MAX_REQUESTS + 1) * 16 + 5];
	struct tp_comm *s, *r;
	size_t used = 1;

	(void)state;
	for (uint64_t i = 0; i <= TP_MAX_REQUESTS; i++) {
		uint64_t cap = 100 + i;

		memcpy(buf + i * 16, &i, 8);
		memcpy(buf + i * 16 + 8, &cap, 8);
	}
	assert_int_equal(make_pair(&o, &s, &r), SM_OK);
	assert_int_equal(tcp_parse_posts(s, buf, 15, &used), SM_OK);
	assert_int_equal(used, 0);
	assert_int_equal(tcp_parse_posts(s, buf, TP_MAX_REQUESTS * 16 + 5, &used), SM_OK);
	assert_int_equal(used, TP_MAX_REQUESTS * 16);
	assert_int_equal(tcp_of(s)->peer_posted, TP_MAX_REQUESTS);
	assert_int_equal(tcp_of(s)->peer_size[0], 100);
	/* Message 32 with nothing sent yet: one too far ahead. */
	assert_int_equal(tcp_parse_posts(s, buf + TP_MAX_REQUESTS * 16, 16, &used),
			 SM_ERR_REMOTE);
	assert_non_null(strstr(sm_last_error(), "receives ahead"));
	assert_int_equal(tcp_of(s)->peer_size[0], 100);
	tp_close(s);
	tp_close(r);

	assert_int_equal(make_pair(&o, &s, &r), SM_OK);
	assert_int_equal(tcp_parse_posts(s, buf + 16, 16, &used), SM_ERR_REMOTE);
	assert_non_null(strstr(sm_last_error(), "announced message 1, expected 0"));
	tp_close(s);
	tp_close(r);
}

/* NCCL_IB_HCA as NCCL reads it: prefixes by default, '=' for exact names,
 * '^' to exclude, ':port' ignored for the choice of device (an excluded
 * port leaves its device in); and the same list syntax for
 * NCCL_SOCKET_IFNAME. */
static void test_hca_selection(void **state)
{
	(void)state;
	assert_true(tp_hca_selected("", "mlx5_0"));
	assert_true(tp_hca_selected(NULL, "mlx5_0"));
	assert_true(tp_hca_selected("mlx5", "mlx5_0"));
	assert_true(tp_hca_selected("mlx5", "mlx5_10"));
	assert_false(tp_hca_selected("mlx5", "bnxt_re0"));
	assert_true(tp_hca_selected("mlx5_1:1", "mlx5_1"));
	assert_true(tp_hca_selected("mlx5_1:1", "mlx5_10"));	/* a prefix, as in NCCL */
	assert_false(tp_hca_selected("=mlx5_1:1", "mlx5_10"));
	assert_true(tp_hca_selected("=mlx5_1:1,mlx5_3", "mlx5_1"));
	assert_true(tp_hca_selected("=mlx5_1,mlx5_3", "mlx5_3"));
	assert_false(tp_hca_selected("=mlx5_1,mlx5_3", "mlx5_30"));
	assert_false(tp_hca_selected("^mlx5_1", "mlx5_1"));
	assert_true(tp_hca_selected("^mlx5_1", "mlx5_0"));
	assert_false(tp_hca_selected("^mlx5", "mlx5_0"));
	assert_true(tp_hca_selected("^=mlx5_1", "mlx5_10"));
	/* An excluded port leaves the device in, less that port. */
	assert_true(tp_hca_selected("^=mlx5_1:2", "mlx5_1"));
	assert_false(tp_hca_selected("^mlx5_0:1,mlx5_1", "mlx5_1"));
	assert_true(tp_hca_selected("^mlx5_0:1,mlx5_1", "mlx5_0"));
	assert_false(tp_hca_selected(":1", "mlx5_0"));		/* an empty name matches nothing */
	/* NCCL_SOCKET_IFNAME: the same syntax, but ':' is part of a name. */
	assert_true(tp_namelist_selects("eth", "eth0", 0));
	assert_true(tp_namelist_selects("=eth0:1", "eth0:1", 0));
	assert_false(tp_namelist_selects("=eth0:1", "eth0", 0));
	assert_false(tp_namelist_selects("^lo,docker", "docker0", 0));
	assert_true(tp_namelist_selects("^lo,docker", "ens5", 0));
	assert_false(tp_namelist_selects("", "eth0", 0));
}

/* The device list comes from the real libibverbs when there is one; on a
 * host without RDMA devices (CI, this project's GPU hosts) it says why
 * and selects nothing, and every answer is a well-formed list. */
static void test_rdma_devices_listed(void **state)
{
	char found[256], selected[256], why[96];
	int n;

	(void)state;
	n = tp_rdma_devices("", found, sizeof(found), selected, sizeof(selected), why,
			    sizeof(why));
	assert_true(n >= 0);
	if (found[0] == '\0') {
		assert_int_equal(n, 0);
		assert_true(why[0] != '\0');
		assert_string_equal(selected, "");
	} else {
		assert_string_equal(selected, found);	/* unset: all of them */
	}
	n = tp_rdma_devices("=no_such_device", found, sizeof(found), selected, sizeof(selected),
			    why, sizeof(why));
	assert_int_equal(n, 0);
	assert_string_equal(selected, "");
}

/* A connect that NCCL abandons (never calls again) is freed by the next
 * connect once its deadline has passed; one still in time is kept. */
static void test_abandoned_connect_freed(void **state)
{
	struct tp_options o = options(TP_BACKEND_SHM, 1 << 20, 65536);
	uint8_t h1[TP_HANDLE_SIZE], h2[TP_HANDLE_SIZE];
	struct tp_listener *l1, *l2;
	struct tp_comm *s = NULL, *r = NULL;

	(void)state;
	o.connect_timeout = 0.5;
	assert_int_equal(tp_listen(&o, 0, h1, &l1), SM_OK);
	assert_int_equal(tp_pending_connects(), 0);
	assert_int_equal(tp_connect(&o, h1, &s), SM_OK);	/* nobody accepts: pending */
	assert_null(s);
	assert_int_equal(tp_pending_connects(), 1);

	/* Another connection while the first is still in time: it stays. */
	assert_int_equal(make_pair(&o, &s, &r), SM_OK);
	assert_int_equal(tp_pending_connects(), 1);
	tp_close(s);
	tp_close(r);

	/* Past its deadline, the next connect of any handle frees it. */
	usleep(600 * 1000);
	assert_int_equal(tp_listen(&o, 0, h2, &l2), SM_OK);
	assert_int_equal(drive_pair(&o, l2, h2, &s, &r), SM_OK);
	assert_int_equal(tp_pending_connects(), 0);
	tp_close(s);
	tp_close(r);
	tp_close_listener(l1);
	tp_close_listener(l2);
}

static void send_payload(struct tp_comm *s, struct tp_comm *r, char *dst, size_t cap);

/* tp_connect_abandon frees exactly its owner's unfinished connects
 * (NCCL's finalize of that context), with their sockets and rings. */
static void test_connect_abandon_by_owner(void **state)
{
	struct tp_options o = options(TP_BACKEND_SHM, 1 << 20, 65536);
	uint8_t h[TP_HANDLE_SIZE];
	struct tp_listener *l;
	struct tp_comm *s = NULL;
	int mine, other, fds;

	(void)state;
	assert_int_equal(tp_listen(&o, 0, h, &l), SM_OK);
	fds = open_fds();
	o.owner = &mine;
	assert_int_equal(tp_connect(&o, h, &s), SM_OK);	/* nobody accepts: pending */
	assert_null(s);
	assert_int_equal(tp_pending_connects(), 1);
	assert_true(open_fds() > fds);
	assert_int_equal(tp_connect_abandon(NULL), 0);
	assert_int_equal(tp_connect_abandon(&other), 0);
	assert_int_equal(tp_pending_connects(), 1);
	assert_int_equal(tp_connect_abandon(&mine), 1);
	assert_int_equal(tp_pending_connects(), 0);
	assert_int_equal(open_fds(), fds);
	tp_close_listener(l);
}

/* NCCL_SOCKET_IFNAME that selects no interface: listen fails naming the
 * variable (peers on other hosts would otherwise be told 127.0.0.1) and
 * leaves nothing open; one that names loopback gets loopback. */
static void test_ifname_selects_nothing(void **state)
{
	struct tp_options o = options(TP_BACKEND_TCP, 1 << 20, 65536);
	struct tp_handle_info info;
	uint8_t h[TP_HANDLE_SIZE], lo[4] = { 127, 0, 0, 1 };
	struct tp_listener *l = NULL;
	int fds = open_fds();

	(void)state;
	o.ifname = "nonexistent9";
	assert_int_equal(tp_listen(&o, 0, h, &l), SM_ERR_USAGE);
	assert_null(l);
	assert_non_null(strstr(sm_last_error(), "NCCL_SOCKET_IFNAME=nonexistent9 selects no"));
	assert_int_equal(open_fds(), fds);

	o.ifname = "=lo";
	assert_int_equal(tp_listen(&o, 0, h, &l), SM_OK);
	assert_int_equal(tp_handle_decode(h, &info), SM_OK);
	assert_int_equal(info.family, AF_INET);
	assert_memory_equal(info.addr, lo, 4);
	tp_close_listener(l);
	assert_int_equal(open_fds(), fds);
}

/* Connects to a handle whose listener is gone, calling tp_connect until
 * it fails; returns the seconds it took, how many calls said "not yet" and
 * the error.  Nothing may be left open or pending afterwards. */
static double connect_to_gone_listener(int backend, int fault_tolerance, double timeout,
				       int *waits, int *rc)
{
	struct tp_options o = options(backend, 1 << 20, 65536);
	uint8_t h[TP_HANDLE_SIZE];
	struct tp_listener *l;
	struct tp_comm *c = NULL;
	int fds = open_fds();
	double t0, took;

	o.connect_timeout = timeout;
	o.fault_tolerance = fault_tolerance;
	assert_int_equal(tp_listen(&o, 0, h, &l), SM_OK);
	tp_close_listener(l);
	*waits = 0;
	t0 = now();
	while ((*rc = tp_connect(&o, h, &c)) == SM_OK) {
		assert_null(c);
		(*waits)++;
		assert_true(now() - t0 < 10);
		usleep(2000);
	}
	took = now() - t0;
	assert_int_equal(tp_pending_connects(), 0);
	assert_int_equal(open_fds(), fds);
	return took;
}

/* Without NCCL_ENABLE_FAULT_TOLERANCE a listener that cannot be reached is
 * an error on the first call, on both backends. */
static void test_unreachable_fails_at_once(void **state)
{
	int backends[] = { TP_BACKEND_SHM, TP_BACKEND_TCP };

	(void)state;
	for (int i = 0; i < 2; i++) {
		int waits, rc;
		double took = connect_to_gone_listener(backends[i], 0, 2, &waits, &rc);

		assert_int_equal(rc, SM_ERR_REMOTE);
		assert_true(waits <= 1);	/* TCP may need one call to see the refusal */
		assert_true(took < 0.5);
		assert_null(strstr(sm_last_error(), "retries"));
	}
}

/* With it, the connect keeps trying (fresh socket, growing pause) and
 * gives up at the connect deadline, not a pause before it, with one error
 * that says so. */
static void test_unreachable_retried_until_deadline(void **state)
{
	int backends[] = { TP_BACKEND_SHM, TP_BACKEND_TCP };

	(void)state;
	for (int i = 0; i < 2; i++) {
		int waits, rc;
		double took = connect_to_gone_listener(backends[i], 1, 0.4, &waits, &rc);

		assert_int_equal(rc, SM_ERR_REMOTE);
		assert_true(waits > 10);
		assert_true(took >= 0.4);
		assert_true(took < 2.0);
		assert_non_null(strstr(sm_last_error(), "retries"));
		assert_non_null(strstr(sm_last_error(), "NCCL_ENABLE_FAULT_TOLERANCE=1"));
	}
}

/* A listener that is there is reached as before with it on. */
static void test_fault_tolerance_normal_connect(void **state)
{
	struct tp_options o = options(TP_BACKEND_AUTO, 1 << 20, 65536);
	struct tp_comm *s, *r;
	char dst[64] = { 0 };

	(void)state;
	o.fault_tolerance = 1;
	assert_int_equal(make_pair(&o, &s, &r), SM_OK);
	send_payload(s, r, dst, sizeof(dst));
	tp_close(s);
	tp_close(r);
}

/* A connection to listener `l`'s socket, as anyone on the host may make. */
static int stranger_connect(const uint8_t *h)
{
	struct tp_handle_info info;
	struct sockaddr_un sa;
	int fd;

	assert_int_equal(tp_handle_decode(h, &info), SM_OK);
	fd = socket(AF_UNIX, SOCK_STREAM, 0);
	memset(&sa, 0, sizeof(sa));
	sa.sun_family = AF_UNIX;
	memcpy(sa.sun_path + 1, info.uds_name, strlen(info.uds_name));
	assert_int_equal(connect(fd, (struct sockaddr *)&sa,
				 (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 +
					     strlen(info.uds_name))), 0);
	return fd;
}

/* Accepts on `l` until the stranger on `fd` is answered and hung up on. */
static void stranger_turned_away(struct tp_listener *l, int fd)
{
	struct tp_comm *r = NULL;
	uint8_t reply[256];
	double end = now() + 5;
	ssize_t n = 0;

	while (now() < end) {
		assert_int_equal(tp_accept(l, &r), SM_OK);
		assert_null(r);
		n = recv(fd, reply, sizeof(reply), MSG_DONTWAIT);
		if (n >= 0)
			break;
	}
	assert_true(n > 0);	/* told why, then hung up on */
}

/* A copy of segment `fd` (`size` bytes: its header, then zeros) in a new
 * memfd, sealed against shrinking or not. */
static int segment_copy(int fd, uint64_t size, int sealed)
{
	void *from = mmap(NULL, SHM_RING_OFFSET, PROT_READ, MAP_SHARED, fd, 0);
	int out = memfd_create("seg-test", MFD_CLOEXEC | MFD_ALLOW_SEALING);

	assert_true(from != MAP_FAILED);
	assert_true(out >= 0);
	assert_int_equal(ftruncate(out, (off_t)size), 0);
	assert_int_equal(pwrite(out, from, SHM_RING_OFFSET, 0), SHM_RING_OFFSET);
	if (sealed)
		assert_int_equal(fcntl(out, F_ADD_SEALS, F_SEAL_SHRINK), 0);
	munmap(from, SHM_RING_OFFSET);
	return out;
}

/* The peer's ring segment is mapped only when it is what the peer said:
 * its size, a valid header, and sealed against shrinking (a segment the
 * peer could shrink after the check would fault NCCL's process on its
 * next touch).  Each refusal is SM_ERR_REMOTE with the reason; the
 * plugin's own segments pass. */
static void test_peer_segment_checked(void **state)
{
	struct shm_comm c;
	uint64_t size;
	int fd, bad;

	(void)state;
	assert_int_equal(shm_segment_create(65536, &fd, &size), SM_OK);
	memset(&c, 0, sizeof(c));
	assert_int_equal(shm_comm_attach(&c, fd, size, 4096), SM_OK);
	assert_int_equal(c.ring_size, 65536);
	munmap(c.ctrl, size);

	memset(&c, 0, sizeof(c));
	assert_int_equal(shm_comm_attach(&c, fd, size + 4096, 4096), SM_ERR_REMOTE);
	assert_non_null(strstr(sm_last_error(), "bytes, not"));
	assert_int_equal(shm_comm_attach(&c, fd, size - 4096, 4096), SM_ERR_REMOTE);
	assert_non_null(strstr(sm_last_error(), "bytes, not"));	/* larger than announced */
	assert_int_equal(shm_comm_attach(&c, fd, SHM_RING_OFFSET, 4096), SM_ERR_REMOTE);
	assert_null(c.ctrl);

	bad = segment_copy(fd, size, 0);
	assert_int_equal(shm_comm_attach(&c, bad, size, 4096), SM_ERR_REMOTE);
	assert_non_null(strstr(sm_last_error(), "not sealed against shrinking"));
	close(bad);

	bad = segment_copy(fd, size, 1);	/* sealed: only the header is checked now */
	assert_int_equal(shm_comm_attach(&c, bad, size, 4096), SM_OK);
	munmap(c.ctrl, size);
	assert_int_equal(pwrite(bad, "x", 1, 0), 1);	/* a wrong magic */
	memset(&c, 0, sizeof(c));
	assert_int_equal(shm_comm_attach(&c, bad, size, 4096), SM_ERR_REMOTE);
	assert_non_null(strstr(sm_last_error(), "header is not valid"));
	assert_null(c.ctrl);
	close(bad);
	close(fd);
}

/* A sealed memfd of `size` bytes whose header says what a peer chose. */
static int forged_segment(uint64_t size, uint32_t version, uint64_t ring_size, uint64_t seg_size)
{
	uint32_t magic = SHM_MAGIC;
	int fd = memfd_create("seg-forged", MFD_CLOEXEC | MFD_ALLOW_SEALING);

	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, (off_t)size), 0);
	assert_int_equal(pwrite(fd, &magic, 4, offsetof(struct shm_ctrl, magic)), 4);
	assert_int_equal(pwrite(fd, &version, 4, offsetof(struct shm_ctrl, version)), 4);
	assert_int_equal(pwrite(fd, &ring_size, 8, offsetof(struct shm_ctrl, ring_size)), 8);
	assert_int_equal(pwrite(fd, &seg_size, 8, offsetof(struct shm_ctrl, seg_size)), 8);
	assert_int_equal(fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK), 0);
	return fd;
}

/* Mappings of forged segments in this process. */
static int forged_mappings(void)
{
	FILE *f = fopen("/proc/self/maps", "r");
	char line[512];
	int n = 0;

	assert_non_null(f);
	while (fgets(line, sizeof(line), f))
		if (strstr(line, "seg-forged"))
			n++;
	fclose(f);
	return n;
}

/* A segment that is sealed and of the announced size, but whose header
 * lies: another version, a ring size that is not the segment's (every
 * offset into the ring derives from it), a wrong segment size, or no ring
 * at all (a segment of the header alone, whose ring size 0 is "right").
 * Each is SM_ERR_REMOTE, and nothing of it stays mapped; the forger itself
 * is right, since its honest segment is taken. */
static void test_peer_segment_header_forged(void **state)
{
	const uint64_t size = SHM_RING_OFFSET + 65536;
	const struct {
		uint64_t size, ring, seg;
		uint32_t version;
	} bad[] = {
		{ size, 65536, size, SHM_VERSION + 1 },
		{ size, 2 * 65536, size, SHM_VERSION },
		{ size, 4096, size, SHM_VERSION },
		{ size, 65536, size + 4096, SHM_VERSION },
		{ SHM_RING_OFFSET, 0, SHM_RING_OFFSET, SHM_VERSION },
	};
	struct shm_comm c;
	int fd;

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		fd = forged_segment(bad[i].size, bad[i].version, bad[i].ring, bad[i].seg);
		memset(&c, 0, sizeof(c));
		assert_int_equal(shm_comm_attach(&c, fd, bad[i].size, 4096), SM_ERR_REMOTE);
		assert_null(c.ctrl);
		assert_int_equal(forged_mappings(), 0);
		close(fd);
	}
	fd = forged_segment(size, SHM_VERSION, 65536, size);
	memset(&c, 0, sizeof(c));
	assert_int_equal(shm_comm_attach(&c, fd, size, 4096), SM_OK);
	assert_int_equal(c.ring_size, 65536);
	assert_int_equal(forged_mappings(), 1);
	munmap(c.ctrl, size);
	close(fd);
}

/* The ring's counters sit in memory the peer writes.  A receiver that
 * claims to have read bytes never written, or a sender that claims to
 * have written more than the ring holds, fails the other end with a
 * remote error, instead of it overwriting unread bytes or delivering
 * whatever the ring held. */
static void test_corrupt_ring_counters(void **state)
{
	struct tp_options o = options(TP_BACKEND_SHM, 65536, 4096);
	char src[64] = "counted", dst[64] = { 0 };
	struct tp_comm *s, *r;
	struct tp_req *sr = NULL, *rr;
	int done = 0, rc;

	(void)state;
	assert_int_equal(make_pair(&o, &s, &r), SM_OK);
	assert_int_equal(tp_irecv(r, dst, sizeof(dst), NULL, &rr), SM_OK);
	atomic_store(&shm_of(r)->ctrl->data_read, 1ull << 40);
	rc = tp_isend(s, src, sizeof(src), NULL, &sr);
	if (rc == SM_OK && sr)
		rc = tp_test(sr, &done, NULL);
	assert_int_equal(rc, SM_ERR_REMOTE);
	assert_false(done);
	assert_non_null(strstr(sm_last_error(), "corrupted the ring counters"));
	tp_close(s);
	tp_close(r);

	assert_int_equal(make_pair(&o, &s, &r), SM_OK);
	assert_int_equal(tp_irecv(r, dst, sizeof(dst), NULL, &rr), SM_OK);
	sr = isend_when_posted(s, src, sizeof(src), NULL, now() + 10);
	atomic_store(&shm_of(s)->ctrl->data_written, 1ull << 40);
	assert_int_equal(tp_test(rr, &done, NULL), SM_ERR_REMOTE);
	assert_false(done);
	assert_non_null(strstr(sm_last_error(), "corrupted the ring counters"));
	assert_string_equal(dst, "");
	tp_close(s);
	tp_close(r);
}

/* A stranger who knows the socket name but not the token is refused, and
 * the real connector still gets through afterwards. */
static void test_stranger_refused(void **state)
{
	struct tp_options o = options(TP_BACKEND_AUTO, 1 << 20, 65536);
	uint8_t h[TP_HANDLE_SIZE], junk[256];
	struct tp_listener *l;
	struct tp_comm *s = NULL, *r = NULL;
	int fd;

	(void)state;
	assert_int_equal(tp_listen(&o, 0, h, &l), SM_OK);
	fd = stranger_connect(h);
	memset(junk, 0x42, sizeof(junk));
	assert_int_equal(write(fd, junk, sizeof(junk)), sizeof(junk));
	stranger_turned_away(l, fd);
	close(fd);

	assert_int_equal(drive_pair(&o, l, h, &s, &r), SM_OK);
	assert_string_equal(tp_comm_backend(s), "shm");
	tp_close_listener(l);
	tp_close(s);
	tp_close(r);
}

/* A stranger who attaches descriptors to its hello leaves none of them
 * open in the listening process (the hello and its descriptor are read
 * before the token is checked; a second descriptor stayed open for good). */
static void test_stranger_fds_closed(void **state)
{
	struct tp_options o = options(TP_BACKEND_AUTO, 1 << 20, 65536);
	uint8_t h[TP_HANDLE_SIZE], junk[256];
	struct tp_listener *l;
	int fd, rd[3], wr[3];

	(void)state;
	assert_int_equal(tp_listen(&o, 0, h, &l), SM_OK);
	assert_int_equal(make_pipes(rd, wr, 3), 0);
	fd = stranger_connect(h);
	memset(junk, 0x42, sizeof(junk));
	assert_int_equal(send_with_fds(fd, junk, sizeof(junk), wr, 3), sizeof(junk));
	for (int i = 0; i < 3; i++)
		close(wr[i]);
	stranger_turned_away(l, fd);
	close(fd);
	for (int i = 0; i < 3; i++) {
		assert_true(writers_gone(rd[i], 5000));
		close(rd[i]);
	}
	tp_close_listener(l);
}

/* Accepts on `l` until `len` bytes of the listener's answer to the
 * stranger on `fd` are in `buf` (5 s at most). */
static void accept_until_answered(struct tp_listener *l, int fd, void *buf, size_t len)
{
	struct tp_comm *r = NULL;
	double end = now() + 5;
	size_t got = 0;

	while (got < len && now() < end) {
		ssize_t n;

		assert_int_equal(tp_accept(l, &r), SM_OK);
		assert_null(r);
		n = recv(fd, (uint8_t *)buf + got, len - got, MSG_DONTWAIT);
		assert_true(n != 0);
		if (n > 0)
			got += (size_t)n;
	}
	assert_int_equal(got, len);
}

/* A peer whose hello carries a good ticket (a copy of a connector's
 * hello; made here with the token) but that cannot answer the challenge:
 * the challenge it gets holds nothing of the token (and the listener's
 * proof is right), the listener's own proof sent back is refused with a
 * reason (the two ends' proofs differ), the descriptor it attached is
 * closed, and the real connector gets through afterwards. */
static void test_stranger_without_proof_refused(void **state)
{
	struct tp_options o = options(TP_BACKEND_AUTO, 1 << 20, 65536);
	struct tp_handle_info info;
	struct wire_hello hello = { .magic = WIRE_MAGIC, .version = WIRE_VERSION,
				    .backend = TP_BACKEND_SHM };
	struct wire_challenge chal;
	struct wire_setup setup = { .magic = WIRE_MAGIC };
	struct wire_reply reply;
	uint8_t h[TP_HANDLE_SIZE], want[WIRE_MAC];
	struct tp_listener *l;
	struct tp_comm *s, *r;
	int fd, rd, wr;

	(void)state;
	assert_int_equal(tp_listen(&o, 0, h, &l), SM_OK);
	assert_int_equal(tp_handle_decode(h, &info), SM_OK);
	fd = stranger_connect(h);
	hello.pid = (uint32_t)getpid();
	assert_int_equal(getrandom(hello.nonce, sizeof(hello.nonce), 0), sizeof(hello.nonce));
	wire_ticket(info.token, &hello, hello.ticket);
	assert_int_equal(write(fd, &hello, sizeof(hello)), sizeof(hello));
	accept_until_answered(l, fd, &chal, sizeof(chal));
	assert_int_equal(chal.status, SM_OK);
	assert_null(memmem(&chal, sizeof(chal), info.token, sizeof(info.token)));
	wire_proof(info.token, 1, &hello, chal.nonce, want);
	assert_memory_equal(chal.proof, want, WIRE_MAC);

	memcpy(setup.proof, chal.proof, WIRE_MAC);
	assert_int_equal(make_pipes(&rd, &wr, 1), 0);
	assert_int_equal(send_with_fds(fd, &setup, sizeof(setup), &wr, 1), sizeof(setup));
	close(wr);
	accept_until_answered(l, fd, &reply, sizeof(reply));
	assert_int_not_equal(reply.status, SM_OK);
	assert_non_null(strstr(reply.reason, "did not prove"));
	assert_true(writers_gone(rd, 5000));
	close(rd);
	close(fd);

	assert_int_equal(drive_pair(&o, l, h, &s, &r), SM_OK);
	assert_string_equal(tp_comm_backend(s), "shm");
	tp_close_listener(l);
	tp_close(s);
	tp_close(r);
}

/* Writes `len` bytes of `hello` as a new stranger and returns the
 * listener's answer, a whole challenge. */
static int hello_answered(struct tp_listener *l, const uint8_t *h, const struct wire_hello *hello,
			  size_t len, struct wire_challenge *chal)
{
	int fd = stranger_connect(h);

	assert_int_equal(write(fd, hello, len), (ssize_t)len);
	accept_until_answered(l, fd, chal, sizeof(*chal));
	return fd;
}

/* A hello is answered with a challenge only when its ticket shows the
 * token: a stranger's well-formed hello is refused at once with a reason
 * (no nonce, no proof), a copy of a good one the second time, and an
 * older connector's shorter hello with the version it lacks, not waited
 * on for bytes that never come.  The real connector gets through after. */
static void test_hello_without_ticket_refused(void **state)
{
	struct tp_options o = options(TP_BACKEND_AUTO, 1 << 20, 65536);
	struct wire_hello hello = { .magic = WIRE_MAGIC, .version = WIRE_VERSION,
				    .backend = TP_BACKEND_SHM };
	static const uint8_t zero[WIRE_NONCE + WIRE_MAC];
	struct wire_challenge chal;
	struct tp_handle_info info;
	uint8_t h[TP_HANDLE_SIZE];
	struct tp_listener *l;
	struct tp_comm *s, *r;
	int fd, copy, fds = open_fds();

	(void)state;
	assert_int_equal(tp_listen(&o, 0, h, &l), SM_OK);
	assert_int_equal(tp_handle_decode(h, &info), SM_OK);
	hello.pid = (uint32_t)getpid();
	assert_int_equal(getrandom(hello.nonce, sizeof(hello.nonce), 0), sizeof(hello.nonce));

	fd = hello_answered(l, h, &hello, sizeof(hello), &chal);
	assert_int_not_equal(chal.status, SM_OK);
	assert_memory_equal(chal.nonce, zero, sizeof(zero));	/* nonce and proof */
	assert_non_null(strstr(chal.reason, "did not prove it holds the connection token"));
	close(fd);

	wire_ticket(info.token, &hello, hello.ticket);
	fd = hello_answered(l, h, &hello, sizeof(hello), &chal);
	assert_int_equal(chal.status, SM_OK);
	copy = hello_answered(l, h, &hello, sizeof(hello), &chal);
	assert_int_not_equal(chal.status, SM_OK);
	assert_non_null(strstr(chal.reason, "seen before"));
	close(copy);
	close(fd);

	hello.version = WIRE_VERSION - 1;
	fd = hello_answered(l, h, &hello, 32, &chal);	/* version 7's whole hello */
	assert_int_not_equal(chal.status, SM_OK);
	assert_non_null(strstr(chal.reason, "mixed plugin versions"));
	close(fd);

	assert_int_equal(drive_pair(&o, l, h, &s, &r), SM_OK);
	tp_close_listener(l);
	tp_close(s);
	tp_close(r);
	assert_int_equal(open_fds(), fds);
}

/* A connector the listener drops before its setup was read (four
 * newcomers from its own address whose hellos show the token, once its
 * grace is over: the per-peer cap pushes it out) dials again by itself
 * and gets through within the deadline. */
static void test_dropped_connector_dials_again(void **state)
{
	struct tp_options o = options(TP_BACKEND_TCP, 1 << 20, 65536);
	struct tp_handle_info info;
	struct sockaddr_in sa = { .sin_family = AF_INET };
	uint8_t h[TP_HANDLE_SIZE];
	struct tp_listener *l;
	struct tp_comm *s = NULL, *r = NULL;
	int crowd[4], fds = open_fds();

	(void)state;
	assert_int_equal(tp_listen(&o, 0, h, &l), SM_OK);
	assert_int_equal(tp_handle_decode(h, &info), SM_OK);
	assert_int_equal(info.family, AF_INET);	/* this machine's first interface, or lo */
	assert_int_equal(tp_connect(&o, h, &s), SM_OK);	/* dials, and says hello */
	assert_null(s);
	usleep(20 * 1000);
	assert_int_equal(tp_accept(l, &r), SM_OK);	/* takes it, challenges it */
	assert_null(r);
	usleep(CAND_GRACE_NS / 1000 + 20 * 1000);
	sa.sin_port = htons(info.port);
	memcpy(&sa.sin_addr, info.addr, 4);
	for (int i = 0; i < 4; i++) {
		struct wire_hello hello = { .magic = WIRE_MAGIC, .version = WIRE_VERSION,
					    .backend = TP_BACKEND_TCP };

		assert_int_equal(getrandom(hello.nonce, sizeof(hello.nonce), 0), WIRE_NONCE);
		wire_ticket(info.token, &hello, hello.ticket);
		crowd[i] = socket(AF_INET, SOCK_STREAM, 0);
		assert_int_equal(connect(crowd[i], (struct sockaddr *)&sa, sizeof(sa)), 0);
		assert_int_equal(write(crowd[i], &hello, sizeof(hello)), sizeof(hello));
	}
	usleep(20 * 1000);
	assert_int_equal(tp_accept(l, &r), SM_OK);	/* takes the four, drops the first */
	assert_null(r);
	assert_int_equal(drive_pair(&o, l, h, &s, &r), SM_OK);
	assert_string_equal(tp_comm_backend(s), "tcp");
	for (int i = 0; i < 4; i++)
		close(crowd[i]);
	tp_close_listener(l);
	tp_close(s);
	tp_close(r);
	assert_int_equal(open_fds(), fds);
}

/* A listener of a handle of this host's, named symmem-NAME-PID, that
 * takes connections but does not answer them: the test accepts and hangs
 * up itself.  Its handle goes into h. */
static int bare_listener(const char *name, uint8_t *h)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct tp_handle_info info;
	int lfd;

	memset(&info, 0, sizeof(info));
	info.host_id = tp_host_id();
	info.pid = (int)getpid();
	info.no_tcp = 1;
	snprintf(info.uds_name, sizeof(info.uds_name), "symmem-%s-%d", name, info.pid);
	assert_int_equal(getrandom(info.token, 16, 0), 16);
	tp_handle_encode(&info, h);
	lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0);
	memcpy(sa.sun_path + 1, info.uds_name, strlen(info.uds_name));
	assert_int_equal(bind(lfd, (struct sockaddr *)&sa, (socklen_t)(offsetof(struct
			 sockaddr_un, sun_path) + 1 + strlen(info.uds_name))), 0);
	assert_int_equal(listen(lfd, 16), 0);
	return lfd;
}

/* A "listener" that hangs up on every connection before proving
 * anything (a raw socket of this process under the handle's name, so the
 * pid check passes): the connector dials again and again, then fails at
 * its deadline with one error that says so, leaving nothing open. */
static void test_listener_hanging_up_bounded(void **state)
{
	struct tp_options o = options(TP_BACKEND_SHM, 1 << 20, 65536);
	uint8_t h[TP_HANDLE_SIZE];
	struct tp_comm *s = NULL;
	int fds = open_fds(), lfd, c, rc = SM_OK, hung_up = 0;
	double t0;

	(void)state;
	o.connect_timeout = 0.5;
	lfd = bare_listener("hangup", h);
	t0 = now();
	while (rc == SM_OK && now() - t0 < 5) {
		rc = tp_connect(&o, h, &s);
		assert_null(s);
		while ((c = accept(lfd, NULL, NULL)) >= 0) {
			close(c);
			hung_up++;
		}
		usleep(1000);
	}
	assert_int_equal(rc, SM_ERR_REMOTE);
	assert_true(now() - t0 >= 0.5);
	assert_true(now() - t0 < 1.5);
	assert_true(hung_up > 2);
	assert_non_null(strstr(sm_last_error(), "times before proving the token"));
	close(lfd);
	assert_int_equal(tp_pending_connects(), 0);
	assert_int_equal(open_fds(), fds);
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* A listener that hangs up on every dial, as a flooded one turns a
 * newcomer away: on one host the connector dials again after a pause of
 * a few ms every time (8 at most), not one that grows to a second, and
 * fails at its deadline as before. */
static void test_redial_pause_stays_short(void **state)
{
	struct tp_options o = options(TP_BACKEND_SHM, 1 << 20, 65536);
	uint8_t h[TP_HANDLE_SIZE];
	struct tp_comm *s = NULL;
	int fds = open_fds(), lfd, c, rc = SM_OK, hung_up = 0;
	double t0, last = 0, gaps[4096], p90;
	int ngaps = 0;

	(void)state;
	o.connect_timeout = 1;
	lfd = bare_listener("redial", h);
	t0 = now();
	while (rc == SM_OK && now() - t0 < 5) {
		rc = tp_connect(&o, h, &s);
		assert_null(s);
		while ((c = accept(lfd, NULL, NULL)) >= 0) {
			if (hung_up++ && ngaps < 4096)
				gaps[ngaps++] = now() - last;
			last = now();
			close(c);
		}
		usleep(500);
	}
	/* The 90th percentile: a loaded host may not run this test for a
	 * moment, but a pause that grows would show in most of them. */
	qsort(gaps, (size_t)ngaps, sizeof(gaps[0]), cmp_double);
	p90 = ngaps ? gaps[ngaps * 9 / 10] : 1;
	print_message("# %d dials in %.2f s, pauses: 90th percentile %.1f ms, longest %.1f ms\n",
		      hung_up, now() - t0, p90 * 1e3, ngaps ? gaps[ngaps - 1] * 1e3 : 0);
	assert_int_equal(rc, SM_ERR_REMOTE);
	assert_non_null(strstr(sm_last_error(), "times before proving the token"));
	assert_true(hung_up > 50);
	assert_true(p90 < 0.05);	/* 8 ms, and room for a loaded host */
	close(lfd);
	assert_int_equal(tp_pending_connects(), 0);
	assert_int_equal(open_fds(), fds);
}

/* NCCL_SYMMEM_BACKEND=shm refuses other hosts, so its listener opens no
 * TCP port and its handle says so: a connector elsewhere, or told to use
 * TCP, fails at once saying why, and one of this host pairs as ever.
 * Other backends still listen on TCP. */
static void test_shm_listener_opens_no_tcp(void **state)
{
	struct tp_options o = options(TP_BACKEND_SHM, 1 << 20, 65536);
	struct tp_options tcp = options(TP_BACKEND_TCP, 1 << 20, 65536);
	struct tp_options any = options(TP_BACKEND_AUTO, 1 << 20, 65536);
	struct tp_handle_info info;
	uint8_t h[TP_HANDLE_SIZE], far[TP_HANDLE_SIZE];
	struct tp_listener *l;
	struct tp_comm *s = NULL, *r = NULL;
	int fds = open_fds();

	(void)state;
	assert_int_equal(tp_listen(&o, 0, h, &l), SM_OK);
	assert_int_equal(open_fds(), fds + 1);	/* the Unix socket alone */
	assert_int_equal(tp_handle_decode(h, &info), SM_OK);
	assert_true(info.no_tcp);
	assert_int_equal(info.port, 0);
	assert_int_equal(tp_connect(&tcp, h, &s), SM_ERR_USAGE);
	assert_non_null(strstr(sm_last_error(), "own host only"));
	info.host_id ^= 0xffff;
	tp_handle_encode(&info, far);
	assert_int_equal(tp_connect(&any, far, &s), SM_ERR_USAGE);
	assert_non_null(strstr(sm_last_error(), "own host only"));
	assert_null(s);
	assert_int_equal(tp_pending_connects(), 0);
	assert_int_equal(drive_pair(&o, l, h, &s, &r), SM_OK);
	assert_string_equal(tp_comm_backend(s), "shm");
	tp_close(s);
	tp_close(r);
	tp_close_listener(l);
	assert_int_equal(open_fds(), fds);

	assert_int_equal(tp_listen(&any, 0, h, &l), SM_OK);
	assert_int_equal(open_fds(), fds + 2);
	assert_int_equal(tp_handle_decode(h, &info), SM_OK);
	assert_false(info.no_tcp);
	tp_close_listener(l);
}

/* sm_recv_some keeps the first descriptor of a message and closes the
 * others the kernel installed. */
static void test_recv_keeps_one_fd(void **state)
{
	int sv[2], rd[3], wr[3], got = -1;
	char buf[4] = "abc";

	(void)state;
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	assert_int_equal(make_pipes(rd, wr, 3), 0);
	assert_int_equal(send_with_fds(sv[0], buf, sizeof(buf), wr, 3), sizeof(buf));
	for (int i = 0; i < 3; i++)
		close(wr[i]);
	memset(buf, 0, sizeof(buf));
	assert_int_equal(sm_recv_some(sv[1], buf, sizeof(buf), &got), sizeof(buf));
	assert_string_equal(buf, "abc");
	assert_true(got >= 0);
	assert_false(writers_gone(rd[0], 100));	/* ours now */
	assert_true(writers_gone(rd[1], 1000));
	assert_true(writers_gone(rd[2], 1000));
	close(got);
	assert_true(writers_gone(rd[0], 1000));
	for (int i = 0; i < 3; i++)
		close(rd[i]);
	close(sv[0]);
	close(sv[1]);
}

/* Another process that binds the name of a listener that is gone (here a
 * forked child, so a different pid) gets no connection ring: the connect
 * fails naming the pid that holds the socket, and no fd ever reaches the
 * impostor. */
static void test_impostor_listener_gets_no_ring(void **state)
{
	struct tp_options o = options(TP_BACKEND_SHM, 1 << 20, 65536);
	struct tp_handle_info info;
	uint8_t h[TP_HANDLE_SIZE];
	struct tp_listener *l;
	struct tp_comm *s = NULL;
	int ready[2], result[2], status, got = -1, rc = SM_OK;
	char go;
	double end;
	pid_t pid;

	(void)state;
	assert_int_equal(tp_listen(&o, 0, h, &l), SM_OK);
	assert_int_equal(tp_handle_decode(h, &info), SM_OK);
	tp_close_listener(l);
	assert_int_equal(pipe(ready), 0);
	assert_int_equal(pipe(result), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct sockaddr_un sa;
		int fd = socket(AF_UNIX, SOCK_STREAM, 0), c, fds = 0;
		char cbuf[CMSG_SPACE(sizeof(int))], data[256];
		struct iovec iov = { .iov_base = data, .iov_len = sizeof(data) };
		struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1,
				     .msg_control = cbuf, .msg_controllen = sizeof(cbuf) };
		struct pollfd pfd;

		memset(&sa, 0, sizeof(sa));
		sa.sun_family = AF_UNIX;
		memcpy(sa.sun_path + 1, info.uds_name, strlen(info.uds_name));
		if (bind(fd, (struct sockaddr *)&sa, (socklen_t)(offsetof(struct sockaddr_un,
			 sun_path) + 1 + strlen(info.uds_name))) != 0 || listen(fd, 4) != 0)
			_exit(2);
		if (write(ready[1], "r", 1) != 1)
			_exit(2);
		pfd = (struct pollfd){ .fd = fd, .events = POLLIN };
		if (poll(&pfd, 1, 5000) == 1 && (c = accept(fd, NULL, NULL)) >= 0) {
			pfd = (struct pollfd){ .fd = c, .events = POLLIN };
			if (poll(&pfd, 1, 2000) == 1 && recvmsg(c, &mh, 0) > 0 &&
			    CMSG_FIRSTHDR(&mh))
				fds = 1;
		}
		_exit(write(result[1], &fds, sizeof(fds)) == sizeof(fds) ? 0 : 2);
	}
	assert_int_equal(read(ready[0], &go, 1), 1);
	end = now() + 5;
	while (!s && rc == SM_OK && now() < end)
		rc = tp_connect(&o, h, &s);
	assert_null(s);
	assert_int_equal(rc, SM_ERR_REMOTE);
	assert_non_null(strstr(sm_last_error(), "held by pid"));
	assert_int_equal(read(result[0], &got, sizeof(got)), sizeof(got));
	assert_int_equal(got, 0);		/* no fd reached it */
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	close(ready[0]);
	close(ready[1]);
	close(result[0]);
	close(result[1]);
}

static void test_shm_backend_refuses_other_host(void **state)
{
	struct tp_options o = options(TP_BACKEND_SHM, 1 << 20, 65536);
	struct tp_handle_info info;
	uint8_t h[TP_HANDLE_SIZE];
	struct tp_comm *s = NULL;

	(void)state;
	sample_handle_info(&info);
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

static void test_register_bad_type(void **state)
{
	struct tp_options o = options(TP_BACKEND_SHM, 1 << 20, 65536);
	struct tp_comm *s, *r;
	struct tp_region *reg = (struct tp_region *)1;
	char buf[64];

	(void)state;
	assert_int_equal(make_pair(&o, &s, &r), SM_OK);
	assert_int_equal(tp_register(r, buf, sizeof(buf), 7, &reg), SM_ERR_INVALID);
	assert_null(reg);
	assert_non_null(strstr(sm_last_error(), "memory type 7"));
	tp_close(s);
	tp_close(r);
}

/* One 8-byte host message from s into dst (a plain receive), both ends
 * driven to completion and the bytes checked: the connection still works. */
static void send_payload(struct tp_comm *s, struct tp_comm *r, char *dst, size_t cap)
{
	static const char src[] = "payload";
	struct tp_req *sr = NULL, *rr;

	assert_int_equal(tp_irecv(r, dst, cap, NULL, &rr), SM_OK);
	assert_int_equal(tp_isend(s, src, sizeof(src), NULL, &sr), SM_OK);
	assert_non_null(sr);
	assert_int_equal(complete_both(sr, rr, now() + 10), sizeof(src));
	assert_string_equal(dst, src);
}

/* A GPU registration on the receiving side that can be neither exported
 * nor shadowed: one error containing `must` (and not `must_not`), nothing
 * announced, and the connection keeps working. */
static void gpu_registration_refused(int zero_copy, const char *must, const char *must_not)
{
	struct tp_options o = options(TP_BACKEND_SHM, 1 << 20, 65536);
	char dst[100] = { 0 };
	struct tp_region *reg = (struct tp_region *)1;
	struct tp_comm *s, *r;

	o.zero_copy = zero_copy;
	assert_int_equal(make_pair(&o, &s, &r), SM_OK);
	assert_int_equal(tp_register(r, dst, sizeof(dst), TP_MEM_CUDA, &reg), SM_ERR_USAGE);
	assert_null(reg);
	assert_non_null(strstr(sm_last_error(), "staging pool"));
	assert_non_null(strstr(sm_last_error(), must));
	if (must_not)
		assert_null(strstr(sm_last_error(), must_not));
	send_payload(s, r, dst, sizeof(dst));
	assert_int_equal(tp_remote_region_count(s), 0);
	tp_close(s);
	tp_close(r);
}

/* Host memory registered as GPU memory cannot be exported, and without a
 * copy engine no staging pool can shadow it: the error names both. */
static void test_register_unexportable(void **state)
{
	(void)state;
	gpu_registration_refused(1, "CUDA", NULL);
}

/* NCCL_ZERO_COPY=0 sends every GPU receive through the staging pool
 * without trying an export: the refusal names the variable, no CUDA error. */
static void test_register_zero_copy_off(void **state)
{
	(void)state;
	gpu_registration_refused(0, "NCCL_ZERO_COPY=0", "CUDA error");
}

/* NCCL_DIRECT_PATH=0: GPU registrations are not exported (no driver call,
 * so it works here without one), nothing is announced to the sender, and
 * host traffic on the connection is unaffected. */
static void test_register_no_direct_path(void **state)
{
	struct tp_options o = options(TP_BACKEND_SHM, 1 << 20, 65536);
	char dst[100] = { 0 };
	struct tp_region *reg = NULL;
	struct tp_comm *s, *r;

	(void)state;
	o.no_direct = 1;
	assert_int_equal(make_pair(&o, &s, &r), SM_OK);
	assert_int_equal(tp_register(r, dst, sizeof(dst), TP_MEM_CUDA, &reg), SM_OK);
	assert_non_null(reg);
	send_payload(s, r, dst, sizeof(dst));
	assert_int_equal(tp_remote_region_count(s), 0);
	tp_deregister(r, reg);
	tp_close(s);
	tp_close(r);
}

/* A buffer outside the registration it names is refused before anything
 * moves; the connection is not broken by it. */
static void test_buffer_outside_region(void **state)
{
	struct tp_options o = options(TP_BACKEND_SHM, 1 << 20, 65536);
	char buf[256];
	struct tp_region *reg;
	struct tp_comm *s, *r;
	struct tp_req *req;

	(void)state;
	assert_int_equal(make_pair(&o, &s, &r), SM_OK);
	assert_int_equal(tp_register(s, buf, 128, TP_MEM_HOST, &reg), SM_OK);
	assert_int_equal(tp_isend(s, buf + 64, 128, reg, &req), SM_ERR_INTERNAL);
	assert_null(req);
	assert_non_null(strstr(sm_last_error(), "outside"));
	assert_int_equal(tp_irecv(r, buf + 128, 128, reg, &req), SM_ERR_INTERNAL);
	assert_int_equal(tp_irecv(r, buf + 128, 128, NULL, &req), SM_OK);
	tp_deregister(s, reg);
	tp_close(s);
	tp_close(r);
}

/* Posts a receive on `r` that names registration `id` (a stand-in the
 * test never registered) and checks that the sender then fails with a
 * remote error whose message holds `why`, and again on the next call
 * (sticky); closes both ends. */
static void expect_named_receive_fails(struct tp_comm *s, struct tp_comm *r, uint32_t id,
				       const char *why)
{
	struct shm_region fake = { 0 };
	char buf[64] = "x";
	struct tp_req *sr, *rr;

	fake.reg.comm = r;
	fake.reg.comm_serial = r->serial;
	fake.reg.base = (uintptr_t)buf;
	fake.reg.size = sizeof(buf);
	fake.reg.mem = TP_MEM_HOST;
	fake.id = id;
	assert_int_equal(tp_irecv(r, buf, sizeof(buf), &fake.reg, &rr), SM_OK);
	for (int i = 0; i < 2; i++) {
		assert_int_equal(tp_isend(s, buf, 8, NULL, &sr), SM_ERR_REMOTE);
		assert_null(sr);
		assert_non_null(strstr(sm_last_error(), why));
	}
	tp_close(s);
	tp_close(r);
}

/* A receive names a registration the peer never announced (the
 * announcement is on the socket before any receive can name it): the
 * sender fails the connection with a remote error instead of waiting
 * forever, and keeps saying so. */
static void test_unannounced_region_fails(void **state)
{
	struct tp_options o = options(TP_BACKEND_SHM, 1 << 20, 65536);
	struct tp_comm *s, *r;

	(void)state;
	assert_int_equal(make_pair(&o, &s, &r), SM_OK);
	expect_named_receive_fails(s, r, 9, "registration 9, which it never announced");
}

/* NCCL_SYMMEM_TRACE_US: a receive NCCL stops testing for longer than the
 * limit, then completes late, gives one pause line and one slow-message
 * line; the prompt send gives none; a send that waited that long for its
 * receive gives one line; with tracing off nothing is logged. */
static char trace_text[4096];
static int trace_lines;

static void trace_sink(int warn, const char *msg)
{
	if (warn || strncmp(msg, "trace ", 6) != 0)
		return;
	trace_lines++;
	strncat(trace_text, msg, sizeof(trace_text) - strlen(trace_text) - 2);
	strcat(trace_text, "\n");
}

/* One 8-byte message with a 200 ms gap: either the receive is posted and
 * tested, then NCCL looks away before the send comes (late_send), or the
 * sender tries for 200 ms before the receive is posted.  The callers' limit
 * is 100 ms: far below the gap, far above what the rest takes even on a
 * loaded machine. */
static int traced_gap(uint64_t trace_ns, int late_send)
{
	struct tp_options o = options(TP_BACKEND_SHM, 1 << 20, 65536);
	char src[8] = "gap", dst[8] = { 0 };
	struct tp_req *sr = NULL, *rr;
	struct tp_comm *s, *r;
	double end = now() + 10, post_at;
	int done = 0;

	o.trace_ns = trace_ns;
	trace_lines = 0;
	trace_text[0] = '\0';
	sm_set_log_sink(trace_sink);
	assert_int_equal(make_pair(&o, &s, &r), SM_OK);
	if (late_send) {
		assert_int_equal(tp_irecv(r, dst, sizeof(dst), NULL, &rr), SM_OK);
		assert_int_equal(tp_test(rr, &done, NULL), SM_OK);
		usleep(200 * 1000);
	} else {
		post_at = now() + 0.2;
		while (now() < post_at) {
			assert_int_equal(tp_isend(s, src, sizeof(src), NULL, &sr), SM_OK);
			assert_null(sr);
			usleep(1000);
		}
		assert_int_equal(tp_irecv(r, dst, sizeof(dst), NULL, &rr), SM_OK);
	}
	sr = isend_when_posted(s, src, sizeof(src), NULL, end);
	assert_int_equal(complete_both(sr, rr, end), sizeof(src));
	assert_string_equal(dst, "gap");
	sm_set_log_sink(NULL);
	tp_close(s);
	tp_close(r);
	return trace_lines;
}

static void test_trace_lines(void **state)
{
	(void)state;
	assert_int_equal(traced_gap(100 * 1000 * 1000, 1), 2);
	assert_non_null(strstr(trace_text, "receiving connection"));
	assert_non_null(strstr(trace_text, "NCCL made no call here for"));
	assert_non_null(strstr(trace_text, "with 1 message(s) in flight, oldest 0"));
	assert_non_null(strstr(trace_text, "message 0, 8 bytes, irecv at "));
	assert_non_null(strstr(trace_text, "us from irecv to done\n"));
	assert_null(strstr(trace_text, "sending connection"));
	assert_int_equal(traced_gap(0, 1), 0);

	/* A send that waited for its receive: one line, from the sender. */
	assert_int_equal(traced_gap(100 * 1000 * 1000, 0), 1);
	assert_non_null(strstr(trace_text, "sending connection"));
	assert_non_null(strstr(trace_text, "us waiting for the receive"));
	assert_int_equal(traced_gap(0, 0), 0);
}

/* The stall report: warnings the transport sends through the log sink. */
static char stall_line[512], stall_info[512];
static int stall_warns;

static void stall_sink(int warn, const char *msg)
{
	if (!warn) {
		if (strstr(msg, "made no progress"))
			snprintf(stall_info, sizeof(stall_info), "%s", msg);
		return;
	}
	stall_warns++;
	snprintf(stall_line, sizeof(stall_line), "%s", msg);
}

/* Both ends wait on each other for longer than the stall period: each says
 * so once, with its counters, and keeps waiting (no error); progress
 * re-arms the report. */
static void test_stall_reported_once(void **state)
{
	struct tp_options o = options(TP_BACKEND_SHM, 1 << 20, 65536);
	char src[64] = "stalled", dst[64] = { 0 }, want[128], *first_warn;
	struct tp_comm *s, *r;
	struct tp_req *sr = NULL, *rr;
	size_t got = 0;
	int done = 0;
	double end;

	(void)state;
	o.stall_report = 0.2;
	sm_set_log_sink(stall_sink);
	stall_warns = 0;
	assert_int_equal(make_pair(&o, &s, &r), SM_OK);

	/* A sender with no posted receive. */
	end = now() + 0.6;
	while (now() < end) {
		assert_int_equal(tp_isend(s, src, 8, NULL, &sr), SM_OK);
		assert_null(sr);
		usleep(1000);
	}
	/* The WARN names the peer and reads the same for every connection to
	 * it (the plugin's log shows it once); the INFO line has the state. */
	assert_int_equal(stall_warns, 1);
	snprintf(want, sizeof(want), "connections to peer process %d made no progress for 0.2 s",
		 (int)getpid());
	assert_non_null(strstr(stall_line, want));
	assert_non_null(strstr(stall_info, "sending connection (shm) to peer process"));
	assert_non_null(strstr(stall_info, "oldest in flight: none;"));
	assert_non_null(strstr(stall_info, "receives posted 0"));
	first_warn = strdup(stall_line);

	/* A receiver whose sender never sends. */
	assert_int_equal(tp_irecv(r, dst, sizeof(dst), NULL, &rr), SM_OK);
	end = now() + 0.6;
	while (now() < end) {
		assert_int_equal(tp_test(rr, &done, &got), SM_OK);
		assert_false(done);
		usleep(1000);
	}
	assert_int_equal(stall_warns, 2);
	assert_string_equal(stall_line, first_warn);
	assert_non_null(strstr(stall_info, "receiving connection (shm)"));
	assert_non_null(strstr(stall_info, "oldest in flight: message 0 (0 of 64 bytes moved);"));
	free(first_warn);

	/* The waits were only reported: both requests still complete. */
	end = now() + 10;
	sr = isend_when_posted(s, src, 8, NULL, end);
	assert_int_equal(wait_done(rr, end), 8);
	assert_string_equal(dst, "stalled");
	wait_done(sr, end);
	sm_set_log_sink(NULL);
	tp_close(s);
	tp_close(r);
}

/* Garbage where a registration announcement belongs: the sender fails the
 * connection with a remote error instead of trusting it. */
static void test_malformed_announcement(void **state)
{
	struct tp_options o = options(TP_BACKEND_SHM, 1 << 20, 65536);
	uint8_t junk[sizeof(struct wire_region)];
	struct tp_comm *s, *r;

	(void)state;
	assert_int_equal(make_pair(&o, &s, &r), SM_OK);
	memset(junk, 0x5a, sizeof(junk));
	assert_int_equal(write(r->fd, junk, sizeof(junk)), (ssize_t)sizeof(junk));
	expect_named_receive_fails(s, r, 3, "malformed registration");
}

/* A registration announced twice: the connection fails with a remote
 * error, and the export fd that came with the second announcement is
 * closed, not kept: an open export pins the peer's memory. */
static void test_duplicate_announcement(void **state)
{
	struct tp_options o = options(TP_BACKEND_SHM, 1 << 20, 65536);
	struct wire_region msg;
	struct tp_comm *s, *r;
	int fds = open_fds();

	(void)state;
	assert_int_equal(make_pair(&o, &s, &r), SM_OK);
	memset(&msg, 0, sizeof(msg));
	msg.magic = REGION_MAGIC;
	msg.op = REGION_ADD;
	msg.id = 7;
	msg.info.kind = SM_SHARE_POSIX_FD;
	msg.info.alloc_size = 4096;
	for (int i = 0; i < 2; i++) {
		int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);

		assert_true(fd >= 0);
		assert_int_equal(sm_send_some(r->fd, &msg, sizeof(msg), fd), (ssize_t)sizeof(msg));
		close(fd);
	}
	expect_named_receive_fails(s, r, 3, "announced registration 7 twice");
	assert_int_equal(open_fds(), fds);
}

/* A registration message with `fd` attached (-1: none), as the
 * receiver's process may write it: an announcement describes a cuMem
 * export when it comes with a descriptor, else a legacy IPC handle. */
static void send_region_msg(struct tp_comm *r, uint32_t magic, uint32_t op, uint32_t id, int fd)
{
	struct wire_region msg;

	memset(&msg, 0, sizeof(msg));
	msg.magic = magic;
	msg.op = op;
	msg.id = id;
	msg.info.kind = fd >= 0 ? SM_SHARE_POSIX_FD : SM_SHARE_LEGACY_IPC;
	msg.info.alloc_size = 4096;
	if (fd < 0)
		assert_int_equal(write(r->fd, &msg, sizeof(msg)), (ssize_t)sizeof(msg));
	else
		assert_int_equal(send_with_fds(r->fd, &msg, sizeof(msg), &fd, 1),
				 (ssize_t)sizeof(msg));
}

/* Well-framed registration messages with a field no receiver writes:
 * registration 0 (a receive's "no registration"), an unknown operation,
 * a wrong magic.  Each fails the connection as malformed, and the
 * descriptor that came with it is closed, not kept. */
static void test_announcement_bad_fields(void **state)
{
	const uint32_t bad[][3] = {
		{ REGION_MAGIC, REGION_ADD, 0 },
		{ REGION_MAGIC, REGION_DEL + 1, 5 },
		{ REGION_MAGIC + 1, REGION_ADD, 5 },
	};
	struct tp_options o = options(TP_BACKEND_SHM, 1 << 20, 65536);
	struct tp_comm *s, *r;
	int rd, wr;

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(make_pair(&o, &s, &r), SM_OK);
		assert_int_equal(make_pipes(&rd, &wr, 1), 0);
		send_region_msg(r, bad[i][0], bad[i][1], bad[i][2], wr);
		close(wr);
		expect_named_receive_fails(s, r, 3, "malformed registration");
		assert_true(writers_gone(rd, 1000));
		close(rd);
	}
}

/* A withdrawal carries no descriptor; one that comes with one anyway has
 * it closed when read, and the connection goes on. */
static void test_withdrawal_fd_closed(void **state)
{
	struct tp_options o = options(TP_BACKEND_SHM, 1 << 20, 65536);
	struct tp_comm *s, *r;
	char dst[64];
	int rd, wr;

	(void)state;
	assert_int_equal(make_pair(&o, &s, &r), SM_OK);
	assert_int_equal(make_pipes(&rd, &wr, 1), 0);
	send_region_msg(r, REGION_MAGIC, REGION_ADD, 5, -1);
	send_region_msg(r, REGION_MAGIC, REGION_DEL, 5, wr);
	close(wr);
	assert_int_equal(remote_drain(shm_of(s)), SM_OK);
	assert_true(writers_gone(rd, 1000));
	send_payload(s, r, dst, sizeof(dst));
	assert_int_equal(s->failed, 0);
	close(rd);
	tp_close(s);
	tp_close(r);
}

/* A message read in two parts, each with a descriptor: the one that came
 * first is closed, the last is the registration's and goes when the
 * connection closes; so does the descriptor of a message the connection
 * closes part-way through. */
static void test_announcement_fds_in_parts(void **state)
{
	struct tp_options o = options(TP_BACKEND_SHM, 1 << 20, 65536);
	struct wire_region msg;
	struct tp_comm *s, *r;
	int rd[3], wr[3];

	(void)state;
	assert_int_equal(make_pair(&o, &s, &r), SM_OK);
	assert_int_equal(make_pipes(rd, wr, 3), 0);
	memset(&msg, 0, sizeof(msg));
	msg.magic = REGION_MAGIC;
	msg.op = REGION_ADD;
	msg.id = 7;
	msg.info.kind = SM_SHARE_POSIX_FD;
	msg.info.alloc_size = 4096;
	assert_int_equal(send_with_fds(r->fd, &msg, 10, &wr[0], 1), 10);
	assert_int_equal(remote_drain(shm_of(s)), SM_OK);
	assert_int_equal(send_with_fds(r->fd, (uint8_t *)&msg + 10, sizeof(msg) - 10, &wr[1], 1),
			 (ssize_t)(sizeof(msg) - 10));
	assert_int_equal(remote_drain(shm_of(s)), SM_OK);
	assert_int_equal(tp_remote_region_count(s), 1);
	msg.id = 8;
	assert_int_equal(send_with_fds(r->fd, &msg, 10, &wr[2], 1), 10);
	assert_int_equal(remote_drain(shm_of(s)), SM_OK);
	for (int i = 0; i < 3; i++)
		close(wr[i]);
	assert_true(writers_gone(rd[0], 1000));
	assert_false(writers_gone(rd[1], 100));
	assert_false(writers_gone(rd[2], 100));
	tp_close(s);
	tp_close(r);
	assert_true(writers_gone(rd[1], 1000));
	assert_true(writers_gone(rd[2], 1000));
	for (int i = 0; i < 3; i++)
		close(rd[i]);
}

/* The descriptor of one announcement is never taken for the next
 * message's: registration 6, announced without one, must not close what
 * registration 5's number names by then when it is withdrawn. */
static void test_announcement_fd_not_reused(void **state)
{
	struct tp_options o = options(TP_BACKEND_SHM, 1 << 20, 65536);
	struct tp_comm *s, *r;
	int rd, wr, n = -1, mine;

	(void)state;
	assert_int_equal(make_pair(&o, &s, &r), SM_OK);
	assert_int_equal(make_pipes(&rd, &wr, 1), 0);
	send_region_msg(r, REGION_MAGIC, REGION_ADD, 5, wr);
	send_region_msg(r, REGION_MAGIC, REGION_ADD, 6, -1);
	assert_int_equal(remote_drain(shm_of(s)), SM_OK);
	assert_int_equal(tp_remote_region_count(s), 2);
	for (unsigned i = 0; i < shm_of(s)->nremote; i++)
		if (shm_of(s)->remote[i].id == 5)
			n = shm_of(s)->remote[i].alloc->fd;
	assert_true(n >= 0);
	send_region_msg(r, REGION_MAGIC, REGION_DEL, 5, -1);
	assert_int_equal(remote_drain(shm_of(s)), SM_OK);
	/* The number is free now; this process opens something else there. */
	mine = open("/dev/null", O_RDONLY | O_CLOEXEC);
	assert_true(mine >= 0);
	assert_int_equal(dup2(mine, n), n);
	send_region_msg(r, REGION_MAGIC, REGION_DEL, 6, -1);
	assert_int_equal(remote_drain(shm_of(s)), SM_OK);
	assert_int_equal(tp_remote_region_count(s), 0);
	assert_true(fcntl(n, F_GETFD) >= 0);
	assert_int_equal(s->failed, 0);
	close(n);
	close(mine);
	close(wr);
	close(rd);
	tp_close(s);
	tp_close(r);
}

/* Withdraws registration `id` as if it had been announced. */
static int withdraw_id(struct tp_comm *c, uint32_t id)
{
	struct shm_region reg;

	memset(&reg, 0, sizeof(reg));
	reg.id = id;
	return announce_withdraw(c, &reg);
}

/* An announcement of registration `id` (a legacy IPC handle, no
 * descriptor) counted as the receiver counts its own, and read by the
 * sender. */
static void announce_id(struct tp_comm *s, struct tp_comm *r, uint32_t id)
{
	send_region_msg(r, REGION_MAGIC, REGION_ADD, id, -1);
	shm_of(r)->ann_bytes += sizeof(struct wire_region);
	atomic_store(&shm_of(r)->ctrl->announced, shm_of(r)->ann_bytes / sizeof(struct wire_region));
	assert_int_equal(remote_drain(shm_of(s)), SM_OK);
}

/* Withdrawn registrations reach a sender that only moves data: more
 * deregistrations while it is idle than the Unix socket holds (made small
 * here) neither block the receiver nor fail the connection, and once data
 * moves the sender reads them all, dropping the peer's mappings and the
 * export fd, without a receive naming a new registration. */
static void test_withdrawals_reach_the_sender(void **state)
{
	struct tp_options o = options(TP_BACKEND_SHM, 1 << 20, 65536);
	struct tp_comm *s, *r;
	char dst[64];
	double start, end;
	int fds, fd, small = 1;

	(void)state;
	assert_int_equal(make_pair(&o, &s, &r), SM_OK);
	fds = open_fds();
	fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	send_region_msg(r, REGION_MAGIC, REGION_ADD, 7, fd);
	close(fd);
	send_payload(s, r, dst, sizeof(dst));
	for (uint32_t id = 1000; id < 1064; id++)
		announce_id(s, r, id);
	assert_int_equal(tp_remote_region_count(s), 65);
	assert_int_equal(setsockopt(r->fd, SOL_SOCKET, SO_SNDBUF, &small, sizeof(small)), 0);
	start = now();
	assert_int_equal(withdraw_id(r, 7), SM_OK);
	for (uint32_t id = 1000; id < 1064; id++)
		assert_int_equal(withdraw_id(r, id), SM_OK);
	assert_true(now() - start < 1);
	assert_int_equal(r->failed, 0);
	assert_true(shm_of(r)->aout_len > 0);		/* more than the socket holds */
	end = now() + 10;
	while ((unread(s->fd) > 0 || shm_of(r)->aout_len > 0) && now() < end)
		send_payload(s, r, dst, sizeof(dst));
	assert_int_equal(unread(s->fd), 0);
	assert_int_equal(shm_of(r)->aout_len, 0);
	assert_int_equal(tp_remote_region_count(s), 0);
	assert_int_equal(open_fds(), fds);	/* the export fd went with it */
	assert_int_equal(s->failed, 0);
	assert_int_equal(r->failed, 0);
	tp_close(s);
	tp_close(r);
}

static int backlog_notes;

static void backlog_sink(int warn, const char *msg)
{
	if (!warn && strstr(msg, "further deregistrations reach it when the connection closes"))
		backlog_notes++;
}

/* A sender that reads nothing while its receiver deregisters without
 * end: the withdrawals waiting for room stop near the backlog's cap
 * (4 MiB; later ones reach the sender only at close), which is said once,
 * and neither end fails.  (So many withdrawals of registrations the
 * sender really holds would take more than it keeps: these name none, and
 * the sender is not made to read them.) */
static void test_withdrawal_backlog_capped(void **state)
{
	const size_t cap = 4u << 20, msg = sizeof(struct wire_region);
	struct tp_options o = options(TP_BACKEND_SHM, 1 << 20, 65536);
	struct tp_comm *s, *r;

	(void)state;
	assert_int_equal(make_pair(&o, &s, &r), SM_OK);
	backlog_notes = 0;
	sm_set_log_sink(backlog_sink);
	for (uint32_t id = 1000; id < 1000 + 3 * cap / msg; id++)
		assert_int_equal(withdraw_id(r, id), SM_OK);
	sm_set_log_sink(NULL);
	/* Full to the cap, whole messages only, and not past it. */
	assert_true(shm_of(r)->aout_len > cap - msg);
	assert_true(shm_of(r)->aout_len <= cap);
	assert_int_equal(backlog_notes, 1);
	assert_int_equal(r->failed, 0);
	assert_int_equal(s->failed, 0);
	tp_close(s);
	tp_close(r);
}

/* The host identity a process in namespace `flag` (CLONE_NEWNET, or
 * CLONE_NEWPID for its child) computes, or 0 when this machine does not
 * let the test make the namespace (no privilege, or a seccomp filter). */
static uint64_t host_id_in_new_namespace(int flag)
{
	uint64_t id = 0;
	int p[2], status;
	pid_t pid;

	assert_int_equal(pipe(p), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		pid_t inner;

		close(p[0]);
		if (unshare(flag) != 0)
			_exit(0);
		/* A new PID namespace holds the children made after it. */
		inner = flag == CLONE_NEWPID ? fork() : 0;
		if (inner == 0) {
			id = tp_host_id_read();
			if (write(p[1], &id, sizeof(id)) != (ssize_t)sizeof(id))
				_exit(1);
			_exit(0);
		}
		_exit(inner > 0 && waitpid(inner, &status, 0) == inner && WIFEXITED(status) ?
		      WEXITSTATUS(status) : 1);
	}
	close(p[1]);
	if (read(p[0], &id, sizeof(id)) != (ssize_t)sizeof(id))
		id = 0;
	close(p[0]);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	return id;
}

/* Processes in another network namespace (the listener's abstract socket
 * is not there) or PID namespace (pids name other processes) are not on
 * "this host" for the shared-memory path; the identity is stable and the
 * same for a plain child. */
static void test_host_id_namespaces(void **state)
{
	uint64_t here = tp_host_id(), net, pidns;

	(void)state;
	assert_true(here != 0);
	assert_true(tp_host_id_read() == here);
	net = host_id_in_new_namespace(CLONE_NEWNET);
	pidns = host_id_in_new_namespace(CLONE_NEWPID);
	if (!net && !pidns)
		skip();		/* namespaces cannot be made here */
	if (net)
		assert_true(net != here);
	if (pidns)
		assert_true(pidns != here);
}

/* A registration outlives its comm (NCCL may deregister after closing,
 * after an abort), and a new comm may sit at the closed one's address.
 * Simulated exactly: the registration's comm pointer is made to name the
 * new comm.  It is still refused there, deregistering it through the new
 * comm leaves that connection alone, and the connection keeps working. */
static void test_region_of_closed_comm(void **state)
{
	struct tp_options o = options(TP_BACKEND_SHM, 1 << 20, 65536);
	char buf[64] = "stale", dst[64] = { 0 };
	struct tp_comm *s, *r, *s2, *r2;
	struct tp_region *reg;
	struct tp_req *req;

	(void)state;
	assert_int_equal(make_pair(&o, &s, &r), SM_OK);
	assert_int_equal(tp_register(s, buf, sizeof(buf), TP_MEM_HOST, &reg), SM_OK);
	tp_close(s);
	tp_close(r);
	assert_int_equal(make_pair(&o, &s2, &r2), SM_OK);
	reg->comm = s2;		/* as if s2 had been allocated where s was */
	assert_int_equal(tp_isend(s2, buf, 8, reg, &req), SM_ERR_INTERNAL);
	assert_null(req);
	assert_non_null(strstr(sm_last_error(), "registered on another connection"));
	tp_deregister(s2, reg);
	assert_int_equal(s2->failed, 0);
	send_payload(s2, r2, dst, sizeof(dst));
	tp_close(s2);
	tp_close(r2);
}

/* Without a usable driver the copy engine does not open, and says why. */
static void test_copy_engine_needs_driver(void **state)
{
	struct smf_engine_options two = { .nstreams = 2 }, none = { .nstreams = 0 };
	struct smf_engine *e = (struct smf_engine *)1;

	(void)state;
	if (sm_cu()) {
		skip();		/* a driver exists: covered by the GPU runs */
	}
	assert_int_equal(smf_engine_get(&two, &e), SM_ERR_CUDA);
	assert_null(e);
	assert_non_null(strstr(sm_last_error(), "CUDA"));
	assert_int_equal(smf_engine_get(&none, &e), SM_ERR_INTERNAL);
	assert_int_equal(smf_engine_count(), 0);
}

/* A process that advertises GPU buffers takes the copy engine while the
 * connection is set up; without a driver that setup fails on both ends
 * with the reason, instead of failing later on NCCL's progress thread. */
static void test_gpu_setup_needs_engine(void **state)
{
	struct tp_options o = options(TP_BACKEND_SHM, 1 << 20, 65536);
	uint8_t h[TP_HANDLE_SIZE];
	struct tp_listener *l;
	struct tp_comm *s = NULL, *r = NULL;
	double end;
	int rc_s = SM_OK, rc_r = SM_OK;

	(void)state;
	if (sm_cu()) {
		skip();		/* a driver exists: covered by the GPU runs */
	}
	o.gpu = 1;
	o.copy_streams = 2;
	assert_int_equal(tp_listen(&o, 0, h, &l), SM_OK);
	end = now() + 10;
	while (rc_s == SM_OK && !s && now() < end)
		rc_s = tp_connect(&o, h, &s);
	assert_int_equal(rc_s, SM_ERR_CUDA);
	assert_null(s);
	assert_non_null(strstr(sm_last_error(), "copy engine"));

	/* A host-only connector still gets through to the same listener's
	 * accept, which needs the engine too and refuses. */
	o.gpu = 0;
	while ((!s || !r) && rc_r == SM_OK && now() < end) {
		if (!s)
			assert_int_equal(tp_connect(&o, h, &s), SM_OK);
		rc_r = tp_accept(l, &r);
	}
	tp_close_listener(l);
	tp_close(s);
	assert_null(r);
	assert_int_equal(smf_engine_count(), 0);
}

/* Forced ibverbs with no device it may use (NCCL_IB_HCA selects none)
 * fails the connect with the reason; automatic falls back to TCP.
 * test_ib.c moves data over a real device. */
static void test_ib_forced_without_device(void **state)
{
	struct tp_options o = ib_options("=no_such_hca");
	struct tp_comm *s, *r;

	(void)state;
	assert_int_equal(make_pair(&o, &s, &r), SM_ERR_USAGE);
	assert_non_null(strstr(sm_last_error(), "NCCL_SYMMEM_BACKEND=ib"));
}

/* The connector's probe write waits two retry intervals of NCCL_IB_TIMEOUT
 * (4.096 us x 2^n each, the time one lost packet costs), 2 s at least: at
 * NCCL's 20 that is 8.59 s, not the floor. */
static void test_ib_probe_wait(void **state)
{
	(void)state;
	assert_int_equal(ib_probe_wait_for(20), 2 * 4096ull * (1ull << 20));
	assert_true(ib_probe_wait_for(20) > 8500000000ull);
	assert_int_equal(ib_probe_wait_for(22), 2 * 4096ull * (1ull << 22));
	assert_int_equal(ib_probe_wait_for(31), 2 * 4096ull * (1ull << 31));
	/* Two intervals first pass 2 s at 18 (2.15 s). */
	assert_int_equal(ib_probe_wait_for(18), 2 * 4096ull * (1ull << 18));
	assert_int_equal(ib_probe_wait_for(17), 2000000000ull);
	assert_int_equal(ib_probe_wait_for(1), 2000000000ull);
}

/* The RDMA device closest to a GPU on the PCI tree; equally close ones
 * and unknown places shared out by the plugin's device number. */
/* NCCL_IB_HCA's ":port": the port an inclusion list names for a device;
 * none in an exclusion list or for a device it names without one. */
static void test_hca_port(void **state)
{
	(void)state;
	assert_int_equal(tp_namelist_port("mlx5_0:2,mlx5_1", "mlx5_0"), 2);
	assert_int_equal(tp_namelist_port("mlx5_0:2,mlx5_1", "mlx5_1"), 0);
	assert_int_equal(tp_namelist_port("mlx5:1", "mlx5_3"), 1);	/* a prefix */
	assert_int_equal(tp_namelist_port("=mlx5:1", "mlx5_3"), 0);	/* exact: no */
	assert_int_equal(tp_namelist_port("=mlx5_3:1", "mlx5_3"), 1);
	assert_int_equal(tp_namelist_port("^mlx5_0:1", "mlx5_0"), 0);
	assert_int_equal(tp_namelist_port("", "mlx5_0"), 0);
	/* Exclusion lists leave out ports: one named, or all of a device. */
	assert_true(tp_namelist_port_excluded("^mlx5_0:1", "mlx5_0", 1));
	assert_false(tp_namelist_port_excluded("^mlx5_0:1", "mlx5_0", 2));
	assert_true(tp_namelist_port_excluded("^mlx5_0:1,mlx5_0:2", "mlx5_0", 2));
	assert_true(tp_namelist_port_excluded("^mlx5_0", "mlx5_0", 2));
	assert_true(tp_namelist_port_excluded("^mlx5:2", "mlx5_3", 2));	/* a prefix */
	assert_false(tp_namelist_port_excluded("^=mlx5:2", "mlx5_3", 2));
	assert_false(tp_namelist_port_excluded("^mlx5_1:1", "mlx5_0", 1));
	assert_false(tp_namelist_port_excluded("mlx5_0:1", "mlx5_0", 1));	/* inclusion */
	assert_false(tp_namelist_port_excluded("", "mlx5_0", 1));
	assert_false(tp_namelist_port_excluded(NULL, "mlx5_0", 1));
}

static void test_nic_closest(void **state)
{
	const char *gpu = "/sys/devices/pci0000:10/0000:10:01.0/0000:11:00.0/0000:12:00.0";
	const char *nics[] = {
		"/sys/devices/pci0000:00/0000:00:02.0/0000:01:00.0",
		"/sys/devices/pci0000:10/0000:10:01.0/0000:11:00.0/0000:13:00.0",	/* same switch */
		"/sys/devices/pci0000:10/0000:10:03.0/0000:14:00.0",	/* same root port's bus */
		NULL,	/* a software device: no PCI place */
	};
	const char *twins[] = {
		"/sys/devices/pci0000:10/0000:10:01.0/0000:11:00.0/0000:15:00.0",
		"/sys/devices/pci0000:10/0000:10:01.0/0000:11:00.0/0000:16:00.0",
	};
	/* A common prefix of characters is not a common component. */
	const char *prefix[] = { "/sys/devices/pci0000:1", "/sys/devices/pci0000:10/x" };

	(void)state;
	for (int which = 0; which < 4; which++)
		assert_int_equal(tp_nic_closest(gpu, nics, 4, which), 1);
	assert_int_equal(tp_nic_closest(gpu, twins, 2, 0), 0);
	assert_int_equal(tp_nic_closest(gpu, twins, 2, 1), 1);
	assert_int_equal(tp_nic_closest(gpu, twins, 2, 2), 0);
	assert_int_equal(tp_nic_closest(gpu, prefix, 2, 0), 1);
	assert_int_equal(tp_nic_closest("", nics, 4, 6), 2);	/* unknown: in turn */
	assert_int_equal(tp_nic_closest(NULL, nics, 4, 3), 3);
	assert_int_equal(tp_nic_closest(gpu, nics, 0, 0), -1);
}

static void test_ib_auto_falls_back_to_tcp(void **state)
{
	(void)state;
	auto_between_hosts("=no_such_hca", 0, "tcp");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_handle_roundtrip),
		cmocka_unit_test(test_handle_every_bit_flip_rejected),
		cmocka_unit_test(test_handle_bad_fields),
		cmocka_unit_test(test_sha256_known_answers),
		cmocka_unit_test(test_hmac_known_answers),
		cmocka_unit_test(test_gid_networks),
		cmocka_unit_test(test_host_id_stable),
		cmocka_unit_test(test_ring_wraps_shm),
		cmocka_unit_test(test_ring_wraps_tcp),
		cmocka_unit_test(test_ring_sized_messages),
		cmocka_unit_test(test_send_call_moves_one_ring_at_most),
		cmocka_unit_test(test_stage_median),
		cmocka_unit_test(test_hca_selection),
		cmocka_unit_test(test_rdma_devices_listed),
		cmocka_unit_test(test_recv_wait_shm),
		cmocka_unit_test(test_recv_wait_tcp),
		cmocka_unit_test(test_shm_send_one_byte_too_many),
		cmocka_unit_test(test_tcp_oversized_send_mid_message),
		cmocka_unit_test(test_tcp_host_receive_outlives_sender),
		cmocka_unit_test(test_tcp_bytes_outlive_hangup),
		cmocka_unit_test(test_tcp_unread_announcements),
		cmocka_unit_test(test_tcp_parse_posts),
		cmocka_unit_test(test_peer_segment_checked),
		cmocka_unit_test(test_peer_segment_header_forged),
		cmocka_unit_test(test_corrupt_ring_counters),
		cmocka_unit_test(test_stranger_refused),
		cmocka_unit_test(test_stranger_fds_closed),
		cmocka_unit_test(test_stranger_without_proof_refused),
		cmocka_unit_test(test_hello_without_ticket_refused),
		cmocka_unit_test(test_dropped_connector_dials_again),
		cmocka_unit_test(test_listener_hanging_up_bounded),
		cmocka_unit_test(test_redial_pause_stays_short),
		cmocka_unit_test(test_shm_listener_opens_no_tcp),
		cmocka_unit_test(test_recv_keeps_one_fd),
		cmocka_unit_test(test_impostor_listener_gets_no_ring),
		cmocka_unit_test(test_unreachable_fails_at_once),
		cmocka_unit_test(test_unreachable_retried_until_deadline),
		cmocka_unit_test(test_fault_tolerance_normal_connect),
		cmocka_unit_test(test_abandoned_connect_freed),
		cmocka_unit_test(test_shm_backend_refuses_other_host),
		cmocka_unit_test(test_other_host_uses_tcp),
		cmocka_unit_test(test_register_bad_type),
		cmocka_unit_test(test_register_unexportable),
		cmocka_unit_test(test_register_zero_copy_off),
		cmocka_unit_test(test_register_no_direct_path),
		cmocka_unit_test(test_buffer_outside_region),
		cmocka_unit_test(test_unannounced_region_fails),
		cmocka_unit_test(test_duplicate_announcement),
		cmocka_unit_test(test_announcement_bad_fields),
		cmocka_unit_test(test_withdrawal_fd_closed),
		cmocka_unit_test(test_announcement_fds_in_parts),
		cmocka_unit_test(test_announcement_fd_not_reused),
		cmocka_unit_test(test_withdrawals_reach_the_sender),
		cmocka_unit_test(test_withdrawal_backlog_capped),
		cmocka_unit_test(test_connect_abandon_by_owner),
		cmocka_unit_test(test_ifname_selects_nothing),
		cmocka_unit_test(test_host_id_namespaces),
		cmocka_unit_test(test_region_of_closed_comm),
		cmocka_unit_test(test_malformed_announcement),
		cmocka_unit_test(test_stall_reported_once),
		cmocka_unit_test(test_trace_lines),
		cmocka_unit_test(test_copy_engine_needs_driver),
		cmocka_unit_test(test_gpu_setup_needs_engine),
		cmocka_unit_test(test_ib_forced_without_device),
		cmocka_unit_test(test_ib_probe_wait),
		cmocka_unit_test(test_ib_auto_falls_back_to_tcp),
		cmocka_unit_test(test_nic_closest),
		cmocka_unit_test(test_hca_port),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
