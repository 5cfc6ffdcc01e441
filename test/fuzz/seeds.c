/* Writes the fuzz targets' seed corpus (test/fuzz/corpus/<target>/):
 * small valid and nearly valid inputs, built from the real structures and
 * encoders, so they follow the wire formats as they are.  Run after a
 * format changes, and commit what it writes:
 *
 *   meson compile -C build-fuzz fuzz_seeds
 *   build-fuzz/test/fuzz/fuzz_seeds test/fuzz/corpus
 *
 * Each input's layout is described at the top of its target's file. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include "copyd_proto.h"
#include "fuzz.h"
#include "comm.h"
#include "ib.h"
#include "shm.h"
#include "tcp.h"
#include "wire.h"

struct seed {
	uint8_t b[4096];
	size_t n;
};

static const char *out_dir;

static void put(struct seed *s, const void *p, size_t n)
{
	if (s->n + n > sizeof(s->b)) {
		fprintf(stderr, "fuzz_seeds: a seed outgrew %zu bytes\n", sizeof(s->b));
		exit(1);
	}
	memcpy(s->b + s->n, p, n);
	s->n += n;
}

static void u8(struct seed *s, uint8_t v)
{
	put(s, &v, 1);
}

static void u16(struct seed *s, uint16_t v)
{
	put(s, &v, 2);
}

static void u32(struct seed *s, uint32_t v)
{
	put(s, &v, 4);
}

static void u64(struct seed *s, uint64_t v)
{
	put(s, &v, 8);
}

static void text(struct seed *s, const char *t)
{
	put(s, t, strlen(t));
}

/* Writes the seed and starts the next one empty. */
static void save(struct seed *s, const char *target, const char *name)
{
	char path[4096];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", out_dir, target);
	if (mkdir(path, 0755) != 0 && errno != EEXIST) {
		perror(path);
		exit(1);
	}
	snprintf(path, sizeof(path), "%s/%s/%s", out_dir, target, name);
	f = fopen(path, "wb");
	if (!f || fwrite(s->b, 1, s->n, f) != s->n || fclose(f) != 0) {
		perror(path);
		exit(1);
	}
	s->n = 0;
}

/* ---- handle: mode byte, 128 bytes ---- */

static struct tp_handle_info sample_info(void)
{
	struct tp_handle_info info = {
		.host_id = 0x1122334455667788ull,
		.dev = 1,
		.pid = 4242,
		.uds_name = "symmem-0011223344556677",
		.family = AF_INET,
		.port = 40000,
		.addr = { 10, 0, 0, 1 },
	};

	memcpy(info.token, "TOKEN-GOES-HERE!", 16);
	return info;
}

static void handle_seed(struct seed *s, const struct tp_handle_info *info, uint8_t mode,
			size_t poke_at, uint8_t poke, const char *name)
{
	uint8_t h[TP_HANDLE_SIZE];

	tp_handle_encode(info, h);
	if (poke_at < sizeof(h))
		h[poke_at] = poke;
	u8(s, mode);
	put(s, h, sizeof(h));
	save(s, "handle", name);
}

static void handle_seeds(struct seed *s)
{
	struct tp_handle_info info = sample_info();

	handle_seed(s, &info, 0, SIZE_MAX, 0, "inet");
	info.family = AF_INET6;
	memset(info.addr, 0, 16);
	info.addr[15] = 1;
	handle_seed(s, &info, 0, SIZE_MAX, 0, "inet6");
	info = sample_info();
	info.offered = 1;
	memset(info.offer, 0xfe, 16);
	handle_seed(s, &info, 0, SIZE_MAX, 0, "rdma");
	info = sample_info();
	info.family = 7;
	handle_seed(s, &info, 0, SIZE_MAX, 0, "bad-family");
	info.family = AF_INET;
	info.port = 0;
	handle_seed(s, &info, 0, SIZE_MAX, 0, "port-0");
	/* Mode 1: the target fixes the checksum after these pokes. */
	info = sample_info();
	handle_seed(s, &info, 1, 120, 1, "tail-data");
	handle_seed(s, &info, 1, 40 + 31, 'x', "name-unterminated");
	handle_seed(s, &info, 1, 100, 7, "address-without-offer");
	handle_seed(s, &info, 1, 5, 9, "version-9");
	handle_seed(s, &info, 0, 20, 0, "checksum-wrong");
}

/* ---- config: NAME=VALUE lines ---- */

static void config_seeds(struct seed *s)
{
	text(s, "NCCL_PASS_SM=1\nNCCL_CUMEM_POOL_SIZE=64MiB\nNCCL_SYMMEM_BACKEND=tcp\n"
		"NCCL_SM_FREE_VERBOSE=1\n");
	save(s, "config", "pass-sm");
	text(s, "NCCL_SYMMEM_CHUNK_SIZE=2MB\nNCCL_CUMEM_MAX_SIZE=4GB\nNCCL_CUMEM_POOL_SIZE=64K\n"
		"NCCL_SYMMEM_HOST_RING_SIZE=4096\nNCCL_CUMEM_GROWTH_FACTOR=1.5\n"
		"NCCL_CUMEM_TRIM_THRESHOLD=1GiB\nNCCL_SYMMEM_SPLIT_SIZE=0\n");
	save(s, "config", "sizes");
	text(s, "NCCL_IB_HCA=^=mlx5_0:1,mlx5_1\nNCCL_SOCKET_IFNAME=^docker,lo\nNCCL_IB_TIMEOUT=22\n"
		"NCCL_IB_SL=3\nNCCL_IB_TC=106\nNCCL_IB_GID_INDEX=3\nNCCL_SYMMEM_BACKEND=ib\n");
	save(s, "config", "rdma");
	text(s, "NCCL_MIN_NCHANNELS=4\nNCCL_MAX_CTAS=8\nNCCL_MIN_CTAS=2\nNCCL_PROTO=LL128,Simple\n"
		"NCCL_NET_PLUGIN_REF_COUNT=0x2\nNCCL_P2P_DISABLE=1\nNCCL_SYMMEM_PASS_SM_CHANNELS=16\n");
	save(s, "config", "channels");
	text(s, "CUDA_VISIBLE_DEVICES=0,GPU-8a3c,2\nNCCL_SYMMEM_COPY_HELPER_PATH=/usr/libexec/x\n"
		"NCCL_SYMMEM_CONNECT_TIMEOUT=2.5\nNCCL_SYMMEM_STALL_REPORT=0\n"
		"NCCL_SYMMEM_COPY_TIMEOUT=1e-3\nNCCL_SYMMEM_LL_MAX=1MiB\nNCCL_SYMMEM_LL128_CHUNK=512K\n");
	save(s, "config", "helper");
	text(s, "NCCL_CUMEM_POOL_SIZE=12XB\n");
	save(s, "config", "bad-size");
	text(s, "NCCL_SYMMEM_STREAMS=99999999999999999999999\nNCCL_SYMMEM_PHASE_US=-9\n"
		"NCCL_CUMEM_MAX_SIZE=99999999999999999999TiB\nNCCL_MIN_NCHANNELS=-0x7fffffff\n");
	save(s, "config", "huge-numbers");
	text(s, "NCCL_CUMEM_MAX_SIZE=1M\nNCCL_CUMEM_POOL_SIZE=2M\n");
	save(s, "config", "pool-above-cap");
}

/* ---- hello: flags, [u32 ring, 64-byte header], hello, setup, bytes ---- */

/* fuzz_hello.c's flags. */
enum { H_TCP = 1, H_SEGMENT = 2, H_UNSEALED = 4, H_WRONG_PROOF = 8, H_EARLY_FD = 16, H_RAW = 32,
       H_WRONG_TICKET = 64 };

static void hello_msg(struct seed *s, int backend, uint16_t version)
{
	struct wire_hello h;

	memset(&h, 0, sizeof(h));
	h.magic = WIRE_MAGIC;
	h.version = version;
	h.backend = (uint16_t)backend;
	h.pid = 4242;
	memcpy(h.nonce, "nonce-of-a-seed!", WIRE_NONCE);
	put(s, &h, sizeof(h));
}

/* The proof is the target's unless H_WRONG_PROOF: then these bytes. */
static void setup_msg(struct seed *s, uint32_t magic, uint64_t seg_size, int ib)
{
	struct wire_setup w;

	memset(&w, 0, sizeof(w));
	w.magic = magic;
	memset(w.proof, 'p', sizeof(w.proof));
	w.seg_size = seg_size;
	if (ib) {
		struct ib_wire e = { .qpn = 0x123, .psn = 0x456, .lid = 1,
				     .mtu = 5,		/* IBV_MTU_4096 */
				     .link_layer = 2,	/* IBV_LINK_LAYER_ETHERNET */
				     .fifo_rkey = 0x789, .fifo_addr = 0x7f0000001000ull };

		memset(e.gid, 0xfe, sizeof(e.gid));
		memcpy(w.part, &e, sizeof(e));
	}
	put(s, &w, sizeof(w));
}

static void segment(struct seed *s, uint32_t ring, uint64_t ring_in_header)
{
	uint8_t head[64];
	struct shm_ctrl c;

	memset(&c, 0, sizeof(c));
	c.magic = SHM_MAGIC;
	c.version = SHM_VERSION;
	c.ring_size = ring_in_header;
	c.seg_size = SHM_RING_OFFSET + ring_in_header;
	memset(head, 0, sizeof(head));
	memcpy(head, &c, offsetof(struct shm_ctrl, recv_posted) < sizeof(head) ?
	       offsetof(struct shm_ctrl, recv_posted) : sizeof(head));
	u32(s, ring);
	put(s, head, sizeof(head));
}

/* A connector of this host: its segment, hello and setup. */
static void hello_unix(struct seed *s, uint8_t flags, uint32_t ring, uint64_t ring_in_header,
		       uint64_t seg_size)
{
	u8(s, H_SEGMENT | flags);
	segment(s, ring, ring_in_header);
	hello_msg(s, TP_BACKEND_SHM, WIRE_VERSION);
	setup_msg(s, WIRE_MAGIC, seg_size, 0);
}

static void hello_seeds(struct seed *s)
{
	const uint32_t ring = 64 << 10;

	hello_unix(s, 0, ring, ring, SHM_RING_OFFSET + ring);
	save(s, "hello", "unix");
	hello_unix(s, H_WRONG_PROOF, ring, ring, SHM_RING_OFFSET + ring);
	save(s, "hello", "wrong-proof");
	hello_unix(s, H_WRONG_TICKET, ring, ring, SHM_RING_OFFSET + ring);
	save(s, "hello", "wrong-ticket");
	u8(s, H_TCP | H_WRONG_TICKET);
	hello_msg(s, TP_BACKEND_TCP, WIRE_VERSION);
	setup_msg(s, WIRE_MAGIC, 0, 0);
	save(s, "hello", "tcp-wrong-ticket");
	hello_unix(s, H_EARLY_FD, ring, ring, SHM_RING_OFFSET + ring);
	save(s, "hello", "ring-with-hello");
	hello_unix(s, H_UNSEALED, ring, ring, SHM_RING_OFFSET + ring);
	save(s, "hello", "unsealed");
	hello_unix(s, 0, ring, 1ull << 30, SHM_RING_OFFSET + ring);
	save(s, "hello", "header-lies");
	hello_unix(s, 0, ring, 2 * ring, SHM_RING_OFFSET + 2 * ring);
	save(s, "hello", "seg-size-past-the-end");
	hello_unix(s, 0, ring, ring, SHM_RING_OFFSET + ring / 2);
	save(s, "hello", "seg-size-short");
	hello_unix(s, 0, 0, 0, SHM_RING_OFFSET);
	save(s, "hello", "empty-ring");
	hello_unix(s, 0, ring, ring, SHM_RING_OFFSET + ring);
	text(s, "and then some");
	save(s, "hello", "bytes-after-setup");
	u8(s, 0);
	hello_msg(s, TP_BACKEND_SHM, WIRE_VERSION);
	setup_msg(s, WIRE_MAGIC, SHM_RING_OFFSET + ring, 0);
	save(s, "hello", "no-segment");
	u8(s, H_SEGMENT);
	segment(s, ring, ring);
	hello_msg(s, TP_BACKEND_SHM, WIRE_VERSION);
	setup_msg(s, 0, SHM_RING_OFFSET + ring, 0);
	save(s, "hello", "setup-bad-magic");
	u8(s, H_SEGMENT);
	segment(s, ring, ring);
	hello_msg(s, TP_BACKEND_SHM, WIRE_VERSION - 1);
	save(s, "hello", "older-version");
	u8(s, 0);
	hello_msg(s, TP_BACKEND_TCP, WIRE_VERSION);
	save(s, "hello", "unix-asks-tcp");
	u8(s, H_TCP);
	hello_msg(s, TP_BACKEND_TCP, WIRE_VERSION);
	setup_msg(s, WIRE_MAGIC, 0, 0);
	save(s, "hello", "tcp");
	u8(s, H_TCP);
	hello_msg(s, TP_BACKEND_IB, WIRE_VERSION);
	setup_msg(s, WIRE_MAGIC, 0, 1);
	save(s, "hello", "tcp-asks-rdma");
	u8(s, H_TCP);
	hello_msg(s, TP_BACKEND_SHM, WIRE_VERSION);
	save(s, "hello", "tcp-asks-shm");
	u8(s, H_RAW);
	text(s, "GET / HTTP/1.0\r\n\r\n");
	save(s, "hello", "stranger");
	u8(s, H_RAW | H_SEGMENT);
	segment(s, ring, ring);
	u32(s, WIRE_MAGIC);
	u16(s, WIRE_VERSION);
	save(s, "hello", "half-a-hello");
	/* Version 7's whole hello: 32 bytes, no ticket. */
	u8(s, H_RAW);
	u32(s, WIRE_MAGIC);
	u16(s, 7);
	u16(s, TP_BACKEND_SHM);
	u32(s, 4242);
	u32(s, 0);
	text(s, "nonce-of-a-seed!");
	save(s, "hello", "version-7");
}

/* ---- reply: flags, challenge, reply bytes ---- */

/* fuzz_reply.c's flags. */
enum { R_TCP = 1, R_WRONG_PROOF = 2, R_RAW = 4 };

/* The proof is the target's unless R_WRONG_PROOF: then these bytes. */
static void challenge_msg(struct seed *s, uint32_t magic, int32_t status, char fill)
{
	struct wire_challenge c;

	memset(&c, 0, sizeof(c));
	c.magic = magic;
	c.status = status;
	memcpy(c.nonce, "a listener nonce", WIRE_NONCE);
	memset(c.proof, 'p', sizeof(c.proof));
	memset(c.reason, fill, fill ? sizeof(c.reason) : 0);
	put(s, &c, sizeof(c));
}

static void reply_msg(struct seed *s, uint32_t magic, int32_t status, int32_t backend, char fill)
{
	struct wire_reply r;

	memset(&r, 0, sizeof(r));
	r.magic = magic;
	r.status = status;
	r.backend = backend;
	memset(r.reason, fill, fill ? sizeof(r.reason) : 0);
	put(s, &r, sizeof(r));
}

static void reply_seeds(struct seed *s)
{
	u8(s, 0);
	challenge_msg(s, WIRE_MAGIC, SM_OK, 0);
	reply_msg(s, WIRE_MAGIC, SM_OK, TP_BACKEND_SHM, 0);
	save(s, "reply", "unix");
	u8(s, R_TCP);
	challenge_msg(s, WIRE_MAGIC, SM_OK, 0);
	reply_msg(s, WIRE_MAGIC, SM_OK, TP_BACKEND_TCP, 0);
	save(s, "reply", "tcp");
	u8(s, R_TCP);
	challenge_msg(s, WIRE_MAGIC, SM_OK, 0);
	reply_msg(s, WIRE_MAGIC, SM_OK, TP_BACKEND_IB, 0);
	save(s, "reply", "tcp-answered-rdma");
	u8(s, 0);
	challenge_msg(s, WIRE_MAGIC, SM_OK, 0);
	reply_msg(s, WIRE_MAGIC, SM_ERR_INVALID, TP_BACKEND_SHM, 'r');
	save(s, "reply", "refused-unterminated");
	u8(s, R_TCP);
	challenge_msg(s, WIRE_MAGIC, SM_OK, 0);
	reply_msg(s, 0, SM_OK, TP_BACKEND_TCP, 0);
	save(s, "reply", "reply-bad-magic");
	u8(s, 0);
	challenge_msg(s, WIRE_MAGIC, SM_OK, 0);
	u32(s, WIRE_MAGIC);
	save(s, "reply", "reply-short");
	u8(s, R_WRONG_PROOF);
	challenge_msg(s, WIRE_MAGIC, SM_OK, 0);
	reply_msg(s, WIRE_MAGIC, SM_OK, TP_BACKEND_SHM, 0);
	save(s, "reply", "wrong-proof");
	u8(s, 0);
	challenge_msg(s, WIRE_MAGIC, SM_ERR_INVALID, 'c');
	save(s, "reply", "challenge-refused-unterminated");
	u8(s, R_TCP);
	challenge_msg(s, 0, SM_OK, 0);
	save(s, "reply", "challenge-bad-magic");
	u8(s, R_RAW);
	u32(s, WIRE_MAGIC);
	save(s, "reply", "short");
}

/* ---- region: operations (fuzz_region.c) ---- */

enum { R_BYTES, R_BYTES_FD, R_RECV, R_SEND, R_TEST, R_ANNOUNCED };

static void region_msg(struct seed *s, uint32_t op, uint32_t id, uint32_t kind, uint64_t size,
		       int with_fd)
{
	struct wire_region m;

	memset(&m, 0, sizeof(m));
	m.magic = REGION_MAGIC;
	m.op = op;
	m.id = id;
	m.info.kind = kind;
	m.info.alloc_size = size;
	m.info.alloc_id = id;
	u8(s, with_fd ? R_BYTES_FD : R_BYTES);
	if (with_fd)
		u32(s, (uint32_t)size);
	u16(s, sizeof(m));
	put(s, &m, sizeof(m));
}

static void region_recv(struct seed *s, uint32_t id, uint64_t offset, uint32_t size)
{
	u8(s, R_RECV);
	u32(s, id);
	u64(s, offset);
	u32(s, size);
}

static void region_send(struct seed *s, uint32_t size)
{
	u8(s, R_SEND);
	u32(s, size);
	u8(s, R_TEST);
}

static void region_seeds(struct seed *s)
{
	const uint32_t size = 64 << 10;

	region_msg(s, REGION_ADD, 1, SM_SHARE_POSIX_FD, size, 1);
	region_recv(s, 1, 4096, 8192);
	region_send(s, 8192);
	region_msg(s, REGION_DEL, 1, 0, 0, 0);
	region_recv(s, 0, 0, 100);
	region_send(s, 100);
	save(s, "region", "add-send-withdraw");
	region_msg(s, REGION_ADD, 1, SM_SHARE_POSIX_FD, size, 1);
	region_recv(s, 1, size - 100, 8192);
	region_send(s, 8192);
	save(s, "region", "past-the-end");
	region_recv(s, 7, 0, 64);
	region_send(s, 64);
	save(s, "region", "never-announced");
	region_msg(s, REGION_ADD, 2, SM_SHARE_POSIX_FD, size, 1);
	region_msg(s, REGION_ADD, 2, SM_SHARE_POSIX_FD, size, 1);
	region_send(s, 10);
	save(s, "region", "twice");
	region_msg(s, REGION_ADD, 3, SM_SHARE_POSIX_FD, 1u << 20, 1);
	region_recv(s, 3, 0, 4096);
	region_msg(s, REGION_DEL, 3, 0, 0, 0);
	region_send(s, 4096);
	save(s, "region", "withdrawn-before-send");
	region_msg(s, REGION_ADD, 4, SM_SHARE_LEGACY_IPC, size, 0);
	region_recv(s, 4, 0, 4096);
	region_send(s, 4096);
	save(s, "region", "legacy-ipc");
	region_recv(s, 0, 0, 1000);
	region_send(s, 1000);
	u8(s, R_ANNOUNCED);
	u32(s, 1000);
	region_send(s, 10);
	save(s, "region", "ring-then-lying-count");
}

/* ---- tcp: flags, operations (fuzz_tcp.c) ---- */

enum { T_BYTES, T_POST, T_TEST, T_READ };

static void tcp_bytes(struct seed *s, const void *p, uint16_t n)
{
	u8(s, T_BYTES);
	u16(s, n);
	put(s, p, n);
}

static void tcp_header(struct seed *s, uint64_t size, uint16_t payload)
{
	uint8_t b[8 + 256];

	memcpy(b, &size, 8);
	memset(b + 8, 0xab, payload);
	tcp_bytes(s, b, (uint16_t)(8 + payload));
}

static void tcp_announce(struct seed *s, uint64_t seq, uint64_t capacity)
{
	uint64_t a[2] = { seq, capacity };

	tcp_bytes(s, a, sizeof(a));
}

static void tcp_post(struct seed *s, uint32_t size)
{
	u8(s, T_POST);
	u32(s, size);
}

static void tcp_seeds(struct seed *s)
{
	u8(s, 1);		/* the target plays the sender */
	tcp_post(s, 100);
	u8(s, T_READ);
	tcp_header(s, 100, 100);
	u8(s, T_TEST);
	tcp_post(s, 0);
	tcp_header(s, 0, 0);
	u8(s, T_TEST);
	u8(s, T_READ);
	save(s, "tcp", "sender");
	u8(s, 1);
	tcp_post(s, 10);
	tcp_header(s, 1000, 10);
	u8(s, T_TEST);
	save(s, "tcp", "sender-oversized");
	u8(s, 1);
	tcp_post(s, 200);
	tcp_header(s, 200, 50);
	u8(s, T_TEST);
	save(s, "tcp", "sender-short");
	/* More receives announced and done than the honest end holds at
	 * once, none of their announcements read until the end: the
	 * target's model must keep every capacity still unread. */
	u8(s, 1);
	for (uint32_t i = 0; i < 2 * TP_MAX_REQUESTS; i++) {
		tcp_post(s, 100 + i);
		tcp_header(s, 0, 0);
		u8(s, T_TEST);
	}
	u8(s, T_READ);
	save(s, "tcp", "sender-announcements-unread");
	u8(s, 0);		/* the target plays the receiver */
	tcp_announce(s, 0, 100);
	tcp_post(s, 100);
	u8(s, T_TEST);
	u8(s, T_READ);
	tcp_announce(s, 1, 0);
	tcp_post(s, 0);
	u8(s, T_TEST);
	save(s, "tcp", "receiver");
	u8(s, 0);
	tcp_announce(s, 5, 100);
	tcp_post(s, 10);
	save(s, "tcp", "receiver-out-of-order");
	u8(s, 0);
	tcp_announce(s, 0, 10);
	tcp_post(s, 100);
	u8(s, T_TEST);
	save(s, "tcp", "receiver-too-small");
}

/* ---- copyd: operations (fuzz_copyd.c) ---- */

enum { C_HELLO, C_ADD, C_DEL, C_RAW, C_POST, C_WAIT, C_REWRITE };

static void copyd_hello(struct seed *s, uint8_t flags, uint32_t streams, uint32_t depth,
			uint32_t batch)
{
	u8(s, C_HELLO);
	u8(s, flags);
	u32(s, streams);
	u32(s, depth);
	u32(s, batch);
	u64(s, 1 << 20);	/* merge_max */
	u32(s, CD_VERSION);
}

static void copyd_add(struct seed *s, uint8_t flags, uint32_t kind, uint32_t size, uint64_t claim)
{
	u8(s, C_ADD);
	u8(s, flags);
	u32(s, kind);
	u32(s, size);
	u64(s, claim);
}

static void copyd_post(struct seed *s, uint8_t src, uint8_t dst, uint64_t src_off,
		       uint64_t dst_off, uint32_t len)
{
	u8(s, C_POST);
	u8(s, src);
	u8(s, dst);
	u64(s, src_off);
	u64(s, dst_off);
	u32(s, len);
}

static void copyd_seeds(struct seed *s)
{
	const uint32_t size = 64 << 10;

	copyd_hello(s, 1, 2, 4, 8);
	copyd_add(s, 0, SM_SHARE_HOST_FD, size, 0);
	copyd_add(s, 0, SM_SHARE_HOST_FD, size, 0);
	copyd_post(s, 0, 1, 0, 4096, 8192);
	copyd_post(s, 0, 1, 8192, 12288, 8192);
	copyd_post(s, 1, 0, 100, 200, 300);
	u8(s, C_WAIT);
	save(s, "copyd", "copies");
	copyd_hello(s, 1, 1, 1, 1);
	copyd_add(s, 0, SM_SHARE_HOST_FD, size, 0);
	copyd_add(s, 0, SM_SHARE_HOST_FD, size, 0);
	copyd_post(s, 0, 1, 0, size - 100, 8192);
	u8(s, C_WAIT);
	save(s, "copyd", "past-the-end");
	copyd_add(s, 0, SM_SHARE_HOST_FD, size, 0);
	copyd_hello(s, 1, 2, 4, 8);
	save(s, "copyd", "map-before-hello");
	copyd_hello(s, 1, 0, 4, 8);
	copyd_hello(s, 2 | 1, 2, 4, 8);
	copyd_hello(s, 4 | 1, 2, 4, 8);
	save(s, "copyd", "bad-hellos");
	copyd_hello(s, 1, 2, 4, 8);
	copyd_add(s, 0, SM_SHARE_HOST_FD, size, 0);
	copyd_add(s, 2, SM_SHARE_HOST_FD, 4096, 1 << 20);
	copyd_add(s, 1, SM_SHARE_HOST_FD, size, 0);
	copyd_add(s, 0, SM_SHARE_POSIX_FD, size, 0);
	copyd_add(s, 0, SM_SHARE_LEGACY_IPC, size, 0);
	save(s, "copyd", "maps-refused");
	copyd_hello(s, 1, 2, 4, 8);
	copyd_add(s, 0, SM_SHARE_HOST_FD, size, 0);
	copyd_add(s, 0, SM_SHARE_HOST_FD, size, 0);
	copyd_post(s, 0, 1, 0, 0, size);
	u8(s, C_DEL);
	u8(s, 0);
	u8(s, C_WAIT);
	copyd_post(s, 0, 1, 0, 0, 10);
	u8(s, C_WAIT);
	save(s, "copyd", "unmap-busy");
	copyd_hello(s, 1, 2, 4, 8);
	copyd_add(s, 0, SM_SHARE_HOST_FD, size, 0);
	copyd_add(s, 0, SM_SHARE_HOST_FD, size, 0);
	copyd_post(s, 0, 1, 0, 0, 4096);
	u8(s, C_REWRITE);
	u16(s, 0);
	u8(s, 4);		/* len */
	u64(s, 1ull << 40);
	u8(s, C_WAIT);
	save(s, "copyd", "rewrite");
	copyd_hello(s, 1, 2, 4, 8);
	copyd_add(s, 4, SM_SHARE_LEGACY_IPC, size, 0);
	copyd_add(s, 4, SM_SHARE_HOST_FD, size, 0);
	copyd_add(s, 0, SM_SHARE_HOST_FD, size, 0);
	copyd_post(s, 0, 1, 0, 0, 4096);
	u8(s, C_WAIT);
	save(s, "copyd", "helper-as-owner");
	u8(s, C_RAW);
	u16(s, 24);
	u32(s, CD_MAGIC);
	u32(s, CD_HELLO);
	u32(s, 0);
	u32(s, 0);
	u32(s, 1);
	u32(s, CD_VERSION + 1);
	save(s, "copyd", "short-hello");
}

int main(int argc, char **argv)
{
	struct seed *s = calloc(1, sizeof(*s));

	if (argc != 2 || !s) {
		fprintf(stderr, "usage: %s <corpus directory>\n", argv[0]);
		return 2;
	}
	out_dir = argv[1];
	handle_seeds(s);
	config_seeds(s);
	hello_seeds(s);
	reply_seeds(s);
	region_seeds(s);
	tcp_seeds(s);
	copyd_seeds(s);
	free(s);
	return 0;
}
