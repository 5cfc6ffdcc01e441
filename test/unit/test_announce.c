/* How a receiver's GPU registrations reach the sender of a shared-memory
 * connection: announced by the first receive into them, never by the
 * registration itself, so registering never waits for a sender that is
 * not reading its socket (CUDA graph capture registers buffers long
 * before any data moves).  A receive whose announcement cannot be written
 * yet is retried, as NCCL retries irecv, and one that waits past the
 * announcement limit fails its connection instead of hanging.  On the
 * sender's side, registrations in one allocation share what it holds for
 * them, an announcement no receiver of ours writes fails the connection,
 * and so does one past the most it keeps, on one connection or over all
 * of them.  Real sockets and shared memory, one process (a forked sender
 * with few descriptors for the last two); the copy engine and the GPU
 * exports are stand-ins (engine_standin.c, export_standin.c). */
#include <fcntl.h>
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "engine_standin.h"
#include "shm.h"
#include "symmem.h"
#include "transport.h"
#include "tp_pair.h"
#include "fd_util.h"

#define NREG 4096
#define SIZE 4096
#define DEADLINE_S 20.0

/* A pair whose sender holds src in "GPU" memory (registered as sreg). */
struct pair {
	struct tp_pair c;
	struct tp_region *sreg;
	uint8_t src[SIZE];
};

static void pair_open_in_place(struct pair *p, int host_in_place)
{
	const struct tp_pair_opts gpu_shm = { .backend = TP_BACKEND_SHM, .gpu = 1,
					      .host_in_place = host_in_place };

	standin_engine_reset(1);
	standin_engine.helper = 1;
	memset(p, 0, sizeof(*p));
	for (size_t i = 0; i < SIZE; i++)
		p->src[i] = (uint8_t)(i * 7 + 3);
	tp_pair_open(&p->c, &gpu_shm);
	assert_int_equal(tp_register(p->c.s, p->src, SIZE, TP_MEM_CUDA, &p->sreg), SM_OK);
}

static void pair_open(struct pair *p)
{
	pair_open_in_place(p, 0);
}

static void pair_close(struct pair *p)
{
	tp_deregister(p->c.s, p->sreg);
	tp_pair_close(&p->c);
}

/* Fills the receiver's socket, made small first, while the sender does
 * not read: announcements of registrations (legacy IPC handles, no
 * descriptor) written and counted as the receiver writes its own, then
 * the withdrawal of the first, which waits in the backlog. */
static void fill_socket(struct tp_comm *r)
{
	static uint32_t next_id = 100000;
	uint32_t first = next_id;
	struct wire_region msg;
	struct shm_region fake;
	int small = 1;
	ssize_t n;

	assert_int_equal(setsockopt(r->fd, SOL_SOCKET, SO_SNDBUF, &small, sizeof(small)), 0);
	memset(&msg, 0, sizeof(msg));
	msg.magic = REGION_MAGIC;
	msg.op = REGION_ADD;
	msg.info.kind = SM_SHARE_LEGACY_IPC;
	msg.info.alloc_size = SIZE;
	for (msg.id = next_id; (n = sm_send_some(r->fd, &msg, sizeof(msg), -1)) > 0; msg.id++) {
		assert_int_equal(n, (ssize_t)sizeof(msg));
		shm_of(r)->ann_bytes += sizeof(msg);
		atomic_store(&shm_of(r)->ctrl->announced, shm_of(r)->ann_bytes / sizeof(msg));
	}
	assert_int_equal(n, 0);
	assert_true(msg.id > first);
	next_id = msg.id;
	memset(&fake, 0, sizeof(fake));
	fake.id = first;
	assert_int_equal(announce_withdraw(r, &fake), SM_OK);
	assert_true(shm_of(r)->aout_len > 0);
}

/* Posts a receive of `dst` (registration `reg`) and sends src into it,
 * retrying both as NCCL's proxy does; checks every byte landed. */
static void move_once(struct pair *p, uint8_t *dst, struct tp_region *reg)
{
	double end = now() + DEADLINE_S;
	struct tp_req *sr = NULL, *rr = NULL;

	memset(dst, 0xee, SIZE);
	while (!rr && now() < end) {
		assert_int_equal(tp_irecv(p->c.r, dst, SIZE, reg, &rr), SM_OK);
		if (!rr)	/* the sender reads announcements when it tries to send */
			assert_int_equal(tp_isend(p->c.s, p->src, SIZE, p->sreg, &sr), SM_OK);
	}
	assert_non_null(rr);
	sr = isend_when_posted(p->c.s, p->src, SIZE, p->sreg, end);
	assert_int_equal(complete_both(sr, rr, end), SIZE);
	assert_memory_equal(dst, p->src, SIZE);
}

/* Thousands of registrations while the sender moves nothing (more than
 * the socket holds were they announced) return at once and write
 * nothing; the one a receive uses is announced then, and the data lands
 * in it; withdrawing the others sends nothing either. */
static void test_register_many_while_sender_idle(void **state)
{
	static uint8_t bufs[NREG][SIZE];
	static struct tp_region *regs[NREG];
	struct pair p;
	double t0;

	(void)state;
	pair_open(&p);
	t0 = now();
	for (int i = 0; i < NREG; i++)
		assert_int_equal(tp_register(p.c.r, bufs[i], SIZE, TP_MEM_CUDA, &regs[i]), SM_OK);
	assert_true(now() - t0 < 2.0);
	assert_int_equal(p.c.r->failed, 0);
	assert_int_equal(unread(p.c.s->fd), 0);
	assert_int_equal(shm_of(p.c.r)->aout_len, 0);

	move_once(&p, bufs[NREG - 7], regs[NREG - 7]);
	assert_int_equal(tp_remote_region_count(p.c.s), 1);
	/* Its second receive writes nothing more. */
	move_once(&p, bufs[NREG - 7], regs[NREG - 7]);
	assert_int_equal(unread(p.c.s->fd), 0);

	for (int i = 0; i < NREG; i++)
		tp_deregister(p.c.r, regs[i]);
	assert_int_equal(p.c.r->failed, 0);
	/* One withdrawal: the announced one's. */
	assert_int_equal(unread(p.c.s->fd), (int)sizeof(struct wire_region));
	pair_close(&p);
}

/* Fills the receiver's socket, then registers `dst`: its first receive
 * is not posted (NCCL retries it), and the connection stays up. */
static struct tp_region *register_while_full(struct pair *p, uint8_t *dst)
{
	struct tp_region *reg;
	struct tp_req *rr = (struct tp_req *)1;

	fill_socket(p->c.r);
	assert_int_equal(tp_register(p->c.r, dst, SIZE, TP_MEM_CUDA, &reg), SM_OK);
	assert_int_equal(tp_irecv(p->c.r, dst, SIZE, reg, &rr), SM_OK);
	assert_null(rr);
	assert_int_equal(p->c.r->failed, 0);
	return reg;
}

/* A receive into a new registration while the socket is full is not
 * posted (NCCL retries it); once the sender reads, the announcement goes
 * out whole and the data lands. */
static void test_receive_waits_for_room(void **state)
{
	static uint8_t dst[SIZE];
	struct tp_region *reg;
	struct pair p;

	(void)state;
	pair_open(&p);
	reg = register_while_full(&p, dst);
	move_once(&p, dst, reg);
	assert_int_equal(shm_of(p.c.r)->aout_len, 0);
	assert_int_equal(p.c.s->failed, 0);
	tp_deregister(p.c.r, reg);
	pair_close(&p);
}

/* A sender that never reads again: the receive is refused until the
 * announcement limit (10 s) has passed, then the connection fails with
 * an error saying why, instead of NCCL retrying for ever. */
static void test_receive_gives_up_on_a_sender_that_never_reads(void **state)
{
	static uint8_t dst[SIZE];
	struct tp_region *reg;
	struct tp_req *rr = NULL;
	struct pair p;
	double t0, end;
	int rc = SM_OK;

	(void)state;
	pair_open(&p);
	fill_socket(p.c.r);
	assert_int_equal(tp_register(p.c.r, dst, SIZE, TP_MEM_CUDA, &reg), SM_OK);
	t0 = now();
	end = t0 + DEADLINE_S;
	while (rc == SM_OK && now() < end) {
		rc = tp_irecv(p.c.r, dst, SIZE, reg, &rr);
		assert_null(rr);
	}
	assert_int_equal(rc, SM_ERR_REMOTE);
	assert_true(now() - t0 > 9.5);
	assert_non_null(strstr(sm_last_error(), "did not read a registration announcement"));
	tp_deregister(p.c.r, reg);
	pair_close(&p);
}

/* Receive slot i % 32 serves message i: a plain host receive 32
 * messages after one into a registration (the same slot) goes through the
 * ring, into the host buffer, and the registration is left alone. */
static void test_ring_receive_after_direct_in_slot(void **state)
{
	static uint8_t dst[SIZE], host[SIZE];
	struct tp_region *reg;
	struct tp_req *sr, *rr;
	struct pair p;

	(void)state;
	pair_open(&p);
	assert_int_equal(tp_register(p.c.r, dst, SIZE, TP_MEM_CUDA, &reg), SM_OK);
	move_once(&p, dst, reg);
	memset(dst, 0xee, SIZE);
	for (int m = 1; m <= TP_MAX_REQUESTS; m++) {
		double end = now() + 5;

		memset(host, 0, SIZE);
		assert_int_equal(tp_irecv(p.c.r, host, SIZE, NULL, &rr), SM_OK);
		sr = isend_when_posted(p.c.s, p.src, SIZE, NULL, end);
		assert_int_equal(complete_both(sr, rr, end), SIZE);
		assert_memory_equal(host, p.src, SIZE);
	}
	assert_int_equal(dst[0], 0xee);
	assert_int_equal(dst[SIZE - 1], 0xee);
	tp_deregister(p.c.r, reg);
	pair_close(&p);
}

/* A receive into part of a registration lands at its own offset in it,
 * and nothing around it is written. */
static void test_receive_inside_registration(void **state)
{
	static uint8_t buf[3 * SIZE];
	struct tp_region *reg;
	struct pair p;

	(void)state;
	pair_open(&p);
	memset(buf, 0xee, sizeof(buf));
	assert_int_equal(tp_register(p.c.r, buf, sizeof(buf), TP_MEM_CUDA, &reg), SM_OK);
	move_once(&p, buf + SIZE, reg);
	for (size_t i = 0; i < SIZE; i++) {
		assert_int_equal(buf[i], 0xee);
		assert_int_equal(buf[2 * SIZE + i], 0xee);
	}
	tp_deregister(p.c.r, reg);
	pair_close(&p);
}

/* Where a receive's bytes go in its registration is written by the
 * receiver into memory it shares with the sender.  An offset past the
 * registration's allocation (also one that would wrap the sum), or one
 * that leaves too little room, fails the sender with a remote error
 * before any copy starts. */
static void test_receive_offset_outside_registration(void **state)
{
	const uint64_t bad[] = { SIZE + 4096, 1ull << 63, SIZE - 100 };
	static uint8_t dst[SIZE];

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct tp_req *sr = NULL, *rr = NULL;
		struct tp_region *reg;
		double end = now() + 5;
		struct pair p;
		int rc = SM_OK;

		pair_open(&p);
		assert_int_equal(tp_register(p.c.r, dst, SIZE, TP_MEM_CUDA, &reg), SM_OK);
		assert_int_equal(tp_irecv(p.c.r, dst, SIZE, reg, &rr), SM_OK);
		assert_non_null(rr);
		shm_of(p.c.r)->ctrl->recv_offset[0] = bad[i];
		while (!sr && rc == SM_OK && now() < end)
			rc = tp_isend(p.c.s, p.src, SIZE, p.sreg, &sr);
		assert_null(sr);
		assert_int_equal(rc, SM_ERR_REMOTE);
		assert_non_null(strstr(sm_last_error(), "cannot hold"));
		assert_int_equal(standin_engine.starts, 0);
		tp_deregister(p.c.r, reg);
		pair_close(&p);
	}
}

/* The time the sender saw a copy land is the peer's word, for the
 * receiver's statistics only: one in the future counts as no wait, not
 * as the longest. */
static void test_landing_time_from_the_future(void **state)
{
	static uint8_t dst[SIZE];
	struct tp_req *sr, *rr = NULL;
	struct tp_region *reg;
	struct tp_stats st;
	double end = now() + 5;
	struct pair p;

	(void)state;
	pair_open(&p);
	assert_int_equal(tp_register(p.c.r, dst, SIZE, TP_MEM_CUDA, &reg), SM_OK);
	assert_int_equal(tp_irecv(p.c.r, dst, SIZE, reg, &rr), SM_OK);
	assert_non_null(rr);
	sr = isend_when_posted(p.c.s, p.src, SIZE, p.sreg, end);
	wait_done(sr, end);
	shm_of(p.c.r)->ctrl->land_ns[0] = sm_now_ns() + 10ull * 1000 * 1000 * 1000;
	wait_done(rr, end);
	assert_memory_equal(dst, p.src, SIZE);
	tp_get_stats(p.c.r, &st);
	assert_int_equal(st.stage[TP_STAGE_NOTICE].n[0], 1);
	assert_int_equal(st.stage[TP_STAGE_NOTICE].n[SM_HIST_BUCKETS - 1], 0);
	tp_deregister(p.c.r, reg);
	pair_close(&p);
}

/* NCCL may deregister a registration after its connection closed, while
 * another connection has announced a registration of the same number:
 * deregistering the old one through the new connection withdraws nothing
 * from that connection's sender, whose receives go on landing in place. */
static void test_stale_deregistration_leaves_new_comm_alone(void **state)
{
	static uint8_t d1[SIZE], d2[SIZE];
	struct tp_region *reg1, *reg2;
	struct pair a, b;

	(void)state;
	pair_open(&a);
	assert_int_equal(tp_register(a.c.r, d1, SIZE, TP_MEM_CUDA, &reg1), SM_OK);
	move_once(&a, d1, reg1);
	pair_close(&a);
	pair_open(&b);
	assert_int_equal(tp_register(b.c.r, d2, SIZE, TP_MEM_CUDA, &reg2), SM_OK);
	assert_int_equal(shm_region_of(reg2)->id, shm_region_of(reg1)->id);
	move_once(&b, d2, reg2);
	tp_deregister(b.c.r, reg1);
	move_once(&b, d2, reg2);
	assert_int_equal(tp_remote_region_count(b.c.s), 1);
	assert_int_equal(b.c.s->failed, 0);
	tp_deregister(b.c.r, reg2);
	pair_close(&b);
}

/* Sends from a host buffer the copy helper cannot map go through the
 * connection's host staging: many more messages than the staging holds
 * at once all land (each gives its room back once its copy landed), and
 * the staging goes with the connection. */
/* One message from `src` (registered as `sreg`) into `dst`, which is
 * zeroed first and checked after. */
static void send_one(struct pair *p, uint8_t *dst, struct tp_region *reg, const uint8_t *src,
		     const struct tp_region *sreg)
{
	double end = now() + 5;
	struct tp_req *sr = NULL, *rr = NULL;

	memset(dst, 0, SIZE);
	assert_int_equal(tp_irecv(p->c.r, dst, SIZE, reg, &rr), SM_OK);
	assert_non_null(rr);
	sr = isend_when_posted(p->c.s, src, SIZE, sreg, end);
	assert_int_equal(complete_both(sr, rr, end), SIZE);
	assert_memory_equal(dst, src, SIZE);
}

static void test_host_sends_through_staging(void **state)
{
	static uint8_t dst[SIZE], host[SIZE];
	struct tp_region *reg, *hreg;
	struct tp_stats st;
	struct pair p;

	(void)state;
	pair_open(&p);
	standin_engine.helper = 0;	/* registered while the helper cannot map it */
	assert_int_equal(tp_register(p.c.s, host, SIZE, TP_MEM_HOST, &hreg), SM_OK);
	standin_engine.helper = 1;
	assert_int_equal(tp_register(p.c.r, dst, SIZE, TP_MEM_CUDA, &reg), SM_OK);
	for (int m = 0; m < 3 * (1 << 20) / SIZE; m++) {
		memset(host, m + 1, SIZE);
		send_one(&p, dst, reg, host, hreg);
	}
	tp_get_stats(p.c.s, &st);
	assert_int_equal(st.direct, 3 * (1 << 20) / SIZE);
	assert_true(mappings_named("symmem-stage") > 0);	/* here and in the helper */
	tp_deregister(p.c.r, reg);
	tp_deregister(p.c.s, hreg);
	pair_close(&p);
	assert_int_equal(mappings_named("symmem-stage"), 0);
	assert_int_equal(standin_engine.ranges, 0);
}

static struct {
	int in_place, ring;
} paths_said;

static void keep_receive_path(int warn, const char *msg)
{
	if (warn || !strstr(msg, "receiving connection"))
		return;
	paths_said.in_place += strstr(msg, "is the first moved in place") != NULL;
	paths_said.ring += strstr(msg, "is the first moved through the connection's host") != NULL;
}

/* With NCCL_SYMMEM_HOST_IN_PLACE a receive into exportable host memory
 * (as NCCL's cuMem host buffers are) is announced like GPU memory: a GPU
 * sender's copy engine writes it in place, where by default the sender
 * copies through the ring.  A host sender into the same registration
 * keeps the ring, which the CPU copies faster, and says so per message;
 * both kinds alternate through every slot so that each reads the other's
 * leftovers.  `in_place` 0: every message takes the ring. */
static void host_receive(int in_place)
{
	static uint8_t dst[SIZE], host[SIZE];
	struct tp_region *reg, *hreg;
	struct tp_stats st;
	struct pair p;
	int from_gpu = 0;

	pair_open_in_place(&p, in_place);
	/* NCCL_SM_FREE_VERBOSE: the receiver names each path as it was taken. */
	p.c.r->verbose = 1;
	memset(&paths_said, 0, sizeof(paths_said));
	sm_set_log_sink(keep_receive_path);
	assert_int_equal(tp_register(p.c.s, host, SIZE, TP_MEM_HOST, &hreg), SM_OK);
	assert_int_equal(tp_register(p.c.r, dst, SIZE, TP_MEM_HOST, &reg), SM_OK);
	for (int m = 0; m < 3 * TP_MAX_REQUESTS; m++) {
		int gpu = m % 3 != 1;

		memset(host, m + 1, SIZE);
		send_one(&p, dst, reg, gpu ? p.src : host, gpu ? p.sreg : hreg);
		from_gpu += gpu;
	}
	tp_get_stats(p.c.s, &st);
	assert_int_equal(st.direct, in_place ? from_gpu : 0);
	sm_set_log_sink(NULL);
	assert_int_equal(paths_said.in_place, in_place);
	assert_int_equal(paths_said.ring, 1);
	tp_deregister(p.c.r, reg);
	tp_deregister(p.c.s, hreg);
	pair_close(&p);
	assert_int_equal(standin_engine.ranges, 0);
}

static void test_host_receive_in_place_or_ring(void **state)
{
	(void)state;
	host_receive(1);
}

static void test_host_receive_by_default_through_the_ring(void **state)
{
	(void)state;
	host_receive(0);
}

/* A region whose first receive once waited for room, and whose later
 * receive, long after, finds other messages waiting again: the 10 s limit
 * counts from the start of this wait, not the first one, so the
 * connection goes on.  Before, the first wait's clock was kept and the
 * later receive failed a healthy connection at once. */
static void test_second_wait_counts_from_its_own_start(void **state)
{
	static uint8_t dst[SIZE];
	struct tp_region *reg;
	struct tp_req *rr = (struct tp_req *)1;
	struct pair p;

	(void)state;
	pair_open(&p);
	reg = register_while_full(&p, dst);	/* the first wait starts its clock */
	move_once(&p, dst, reg);
	sleep(11);			/* past ANNOUNCE_TIMEOUT_MS since then */
	move_once(&p, dst, reg);
	fill_socket(p.c.r);
	assert_int_equal(tp_irecv(p.c.r, dst, SIZE, reg, &rr), SM_OK);
	assert_null(rr);		/* waits again, and is not failed */
	assert_int_equal(p.c.r->failed, 0);
	move_once(&p, dst, reg);
	assert_int_equal(p.c.s->failed, 0);
	tp_deregister(p.c.r, reg);
	pair_close(&p);
}

/* ---- what a receiver's process may write on the socket ---- */

/* A registration message for `id` describing `info`, with the n
 * descriptors fds[] attached (n = 0: none). */
static void send_region_flags(struct tp_comm *r, uint32_t op, uint32_t id,
			      const struct sm_share_info *info, const int *fds, int n,
			      uint32_t flags)
{
	struct wire_region msg;

	memset(&msg, 0, sizeof(msg));
	msg.magic = REGION_MAGIC;
	msg.op = op;
	msg.id = id;
	msg.flags = flags;
	if (info)
		msg.info = *info;
	if (n)
		assert_int_equal(send_with_fds(r->fd, &msg, sizeof(msg), fds, n),
				 (ssize_t)sizeof(msg));
	else
		assert_int_equal(write(r->fd, &msg, sizeof(msg)), (ssize_t)sizeof(msg));
}

static void send_region(struct tp_comm *r, uint32_t op, uint32_t id,
			const struct sm_share_info *info, const int *fds, int n)
{
	send_region_flags(r, op, id, info, fds, n, 0);
}

/* A cuMem export of `size` bytes at `addr` (which the stand-in helper
 * copies into as it is), allocation `alloc`. */
static struct sm_share_info cumem_info(uint64_t alloc, void *addr, uint64_t size)
{
	struct sm_share_info info;

	memset(&info, 0, sizeof(info));
	info.kind = SM_SHARE_POSIX_FD;
	info.alloc_id = alloc;
	info.alloc_size = size;
	info.addr = (uint64_t)(uintptr_t)addr;
	return info;
}

/* A receive into registration `id` (announced by hand) at `dst`, which
 * lies `off` bytes into the announced allocation. */
static void move_into(struct pair *p, uint32_t id, uint8_t *dst, uint64_t off)
{
	double end = now() + DEADLINE_S;
	struct tp_req *sr, *rr = NULL;
	struct shm_region fake;

	memset(&fake, 0, sizeof(fake));
	fake.reg.comm = p->c.r;
	fake.reg.comm_serial = p->c.r->serial;
	fake.reg.base = (uintptr_t)dst;
	fake.reg.size = SIZE;
	fake.reg.mem = TP_MEM_CUDA;
	fake.id = id;
	fake.own.offset = off;
	memset(dst, 0xee, SIZE);
	assert_int_equal(tp_irecv(p->c.r, dst, SIZE, &fake.reg, &rr), SM_OK);
	assert_non_null(rr);
	sr = isend_when_posted(p->c.s, p->src, SIZE, p->sreg, end);
	assert_int_equal(complete_both(sr, rr, end), SIZE);
	assert_memory_equal(dst, p->src, SIZE);
}

/* Registrations in one allocation come with the same description and
 * each with a copy of its descriptor: the sender keeps one descriptor and
 * gives its copy helper one mapping for all of them, and lets both go
 * with the last withdrawal. */
static void test_allocation_shared_by_registrations(void **state)
{
	static uint8_t buf[3 * SIZE];
	struct sm_share_info info = cumem_info(42, buf, sizeof(buf));
	struct pair p;
	int rd, wr, fds, ranges;

	(void)state;
	pair_open(&p);
	assert_int_equal(make_pipes(&rd, &wr, 1), 0);
	fds = open_fds();
	for (uint32_t id = 5; id <= 7; id++)
		send_region(p.c.r, REGION_ADD, id, &info, &wr, 1);
	close(wr);
	assert_int_equal(remote_drain(shm_of(p.c.s)), SM_OK);
	assert_int_equal(tp_remote_region_count(p.c.s), 3);
	assert_int_equal(open_fds(), fds);	/* ours closed, one kept there */
	ranges = standin_engine.ranges;
	move_into(&p, 5, buf, 0);
	move_into(&p, 6, buf + SIZE, SIZE);
	move_into(&p, 7, buf + 2 * SIZE, 2 * SIZE);
	assert_int_equal(standin_engine.ranges, ranges + 1);
	send_region(p.c.r, REGION_DEL, 5, NULL, NULL, 0);
	send_region(p.c.r, REGION_DEL, 6, NULL, NULL, 0);
	assert_int_equal(remote_drain(shm_of(p.c.s)), SM_OK);
	assert_false(writers_gone(rd, 100));
	assert_int_equal(standin_engine.ranges, ranges + 1);
	move_into(&p, 7, buf + 2 * SIZE, 2 * SIZE);
	send_region(p.c.r, REGION_DEL, 7, NULL, NULL, 0);
	assert_int_equal(remote_drain(shm_of(p.c.s)), SM_OK);
	assert_int_equal(tp_remote_region_count(p.c.s), 0);
	assert_true(writers_gone(rd, 1000));
	assert_int_equal(standin_engine.ranges, ranges);
	assert_int_equal(p.c.s->failed, 0);
	close(rd);
	pair_close(&p);
}

/* Announcements no receiver of ours writes, each on a fresh connection:
 * the sender fails the connection with a remote error naming what is
 * wrong, closes every descriptor that came with it, and stays failed. */
static void test_bogus_announcements(void **state)
{
	static uint8_t buf[SIZE];
	static const struct {
		uint32_t kind;
		uint64_t size;
		int fd;			/* a descriptor comes with it */
		uint32_t del;		/* then a withdrawal of this id (0: none) */
		const char *why;
		uint32_t flags;
	} cases[] = {
		{ 0, SIZE, 1, 0, "of unknown kind 0", 0 },
		{ SM_SHARE_HOST_FD, SIZE, 1, 0, "of unknown kind 3", 0 },
		{ SM_SHARE_POSIX_FD, SIZE, 0, 0, "without its descriptor", 0 },
		{ SM_SHARE_LEGACY_IPC, SIZE, 1, 0, "legacy IPC handle, with a descriptor", 0 },
		{ SM_SHARE_POSIX_FD, 0, 1, 0, "of an empty allocation", 0 },
		{ SM_SHARE_POSIX_FD, SIZE, 1, 9, "withdrew registration 9, which it never", 0 },
		{ SM_SHARE_POSIX_FD, SIZE, 1, 5, "withdrew registration 5, which it never "
						 "announced or already withdrew", 0 },
		{ SM_SHARE_POSIX_FD, SIZE, 1, 0, "with unknown flags 0x6", REGION_HOST | 6 },
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct sm_share_info info = cumem_info(1, buf, cases[i].size);
		struct tp_req *sr = NULL;
		struct pair p;
		int rd, wr;

		pair_open(&p);
		info.kind = cases[i].kind;
		assert_int_equal(make_pipes(&rd, &wr, 1), 0);
		send_region_flags(p.c.r, REGION_ADD, 5, &info, &wr, cases[i].fd, cases[i].flags);
		close(wr);
		if (cases[i].del == 5)		/* withdrawn twice */
			send_region(p.c.r, REGION_DEL, 5, NULL, NULL, 0);
		if (cases[i].del)
			send_region(p.c.r, REGION_DEL, cases[i].del, NULL, NULL, 0);
		assert_int_equal(remote_drain(shm_of(p.c.s)), SM_ERR_REMOTE);
		if (!strstr(sm_last_error(), cases[i].why))
			fail_msg("case %zu: %s", i, sm_last_error());
		assert_int_equal(tp_isend(p.c.s, p.src, SIZE, p.sreg, &sr), SM_ERR_REMOTE);
		assert_null(sr);
		if (!cases[i].del)		/* refused: nothing kept */
			assert_true(writers_gone(rd, 1000));
		pair_close(&p);
		assert_true(writers_gone(rd, 1000));
		close(rd);
	}
}

/* An announcement with more than one descriptor: the first is the
 * export's, the others are closed when it is read, and the connection
 * goes on. */
static void test_announcement_with_extra_descriptors(void **state)
{
	static uint8_t buf[SIZE];
	struct sm_share_info info = cumem_info(1, buf, SIZE);
	int rd[3], wr[3];
	struct pair p;

	(void)state;
	pair_open(&p);
	assert_int_equal(make_pipes(rd, wr, 3), 0);
	send_region(p.c.r, REGION_ADD, 5, &info, wr, 3);
	for (int i = 0; i < 3; i++)
		close(wr[i]);
	assert_int_equal(remote_drain(shm_of(p.c.s)), SM_OK);
	assert_false(writers_gone(rd[0], 100));
	assert_true(writers_gone(rd[1], 1000));
	assert_true(writers_gone(rd[2], 1000));
	move_into(&p, 5, buf, 0);
	assert_int_equal(p.c.s->failed, 0);
	pair_close(&p);
	assert_true(writers_gone(rd[0], 1000));
	for (int i = 0; i < 3; i++)
		close(rd[i]);
}

/* ---- a receiver announcing without end ---- */

#define LOW_NOFILE 64			/* the sender's descriptors: at most 16 registrations */
#define FLOOD 200			/* announcements, each with a descriptor of its own */

struct flood_result {
	int rc;
	char msg[256];
	unsigned kept;			/* registrations the sender kept */
	int held;			/* descriptors it held more than before, at the failure */
	int can_open;			/* it could still open a file then */
	int after_close;		/* descriptors more than before, once it closed */
};

/* Open descriptors below the limit, counted without opening one. */
static int fds_below(int limit)
{
	int n = 0;

	for (int fd = 0; fd < limit; fd++)
		n += fcntl(fd, F_GETFD) >= 0;
	return n;
}

/* The sender, a forked child with a low descriptor limit, reads until
 * the connection fails or the receiver stops; no cmocka here: the parent
 * checks what it reports. */
static void flood_sender(struct tp_comm *s, int out)
{
	struct rlimit rl;
	struct flood_result res;
	double end = now() + DEADLINE_S;
	int base, fd;

	memset(&res, 0, sizeof(res));
	if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
		_exit(2);
	rl.rlim_cur = LOW_NOFILE;
	if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
		_exit(2);
	base = fds_below(1024);
	while ((res.rc = remote_drain(shm_of(s))) == SM_OK && now() < end)
		usleep(100);
	snprintf(res.msg, sizeof(res.msg), "%s", sm_last_error());
	res.kept = shm_of(s)->nremote;
	res.held = fds_below(1024) - base;
	fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	res.can_open = fd >= 0;
	if (fd >= 0)
		close(fd);
	tp_close(s);
	res.after_close = fds_below(1024) - base;
	_exit(write(out, &res, sizeof(res)) == (ssize_t)sizeof(res) ? 0 : 2);
}

/* A receiver that announces registrations without end, each with a
 * descriptor of a new allocation: a sender with 64 descriptors (a quarter:
 * 16 registrations) fails the connection at the 17th with one remote
 * error naming the limit, never runs out of descriptors, and gives back
 * every one it took when it closes. */
static void test_announcements_past_the_limit(void **state)
{
	static uint8_t buf[SIZE];
	struct flood_result res;
	const struct tp_pair_opts shm = { .backend = TP_BACKEND_SHM };
	struct tp_pair p;
	int out[2], status;
	uint32_t id = 1;
	pid_t pid;

	(void)state;
	standin_engine_reset(1);
	tp_pair_open(&p, &shm);
	assert_int_equal(pipe(out), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		close(out[0]);
		flood_sender(p.s, out[1]);
	}
	close(out[1]);
	while (id <= FLOOD) {
		struct pollfd pf[2] = { { .fd = p.r->fd, .events = POLLOUT },
					{ .fd = out[0], .events = POLLIN } };
		struct sm_share_info info = cumem_info(id, buf, SIZE);
		int fd;

		assert_true(poll(pf, 2, 10000) > 0);
		if (pf[1].revents)
			break;		/* the sender gave up */
		fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
		assert_true(fd >= 0);
		send_region(p.r, REGION_ADD, id++, &info, &fd, 1);
		close(fd);
	}
	assert_int_equal(read(out[0], &res, sizeof(res)), (ssize_t)sizeof(res));
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	if (res.rc != SM_ERR_REMOTE)
		fail_msg("the sender kept %u registrations: %d %s", res.kept, res.rc, res.msg);
	assert_non_null(strstr(res.msg, "more than 16 registrations on one connection"));
	assert_int_equal(res.kept, LOW_NOFILE / 4);
	assert_true(res.held <= LOW_NOFILE / 4);
	assert_true(res.can_open);
	assert_int_equal(res.after_close, -1);	/* its socket went too */
	close(out[0]);
	tp_pair_close(&p);
}

/* ---- several receivers, each under the limit ---- */

#define PEERS 4
/* Each receiver stays one under a connection's limit (16 at 64). */
#define EACH (LOW_NOFILE / 4 - 1)

struct spread_result {
	int rc[PEERS];
	char msg[PEERS][256];
	unsigned kept;			/* registrations kept, all connections */
	int held;			/* descriptors held more than before, at the end */
	int can_open;			/* it could still open a file then */
	int after_close;		/* descriptors more than before, once it closed all */
};

/* The sender of PEERS connections, a forked child with a low descriptor
 * limit: reads each until it fails or its receiver has sent all. */
static void spread_sender(struct tp_pair *p, int out)
{
	struct spread_result res;
	struct rlimit rl;
	double end = now() + DEADLINE_S;
	int base, fd, busy = 1;

	memset(&res, 0, sizeof(res));
	if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
		_exit(2);
	rl.rlim_cur = LOW_NOFILE;
	if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
		_exit(2);
	base = fds_below(1024);
	while (busy && now() < end) {
		busy = 0;
		for (int i = 0; i < PEERS; i++) {
			if (res.rc[i] == SM_OK)
				res.rc[i] = remote_drain(shm_of(p[i].s));
			if (res.rc[i] != SM_OK && !res.msg[i][0])
				snprintf(res.msg[i], sizeof(res.msg[i]), "%s", sm_last_error());
			busy += res.rc[i] == SM_OK && shm_of(p[i].s)->nremote < EACH;
		}
		usleep(100);
	}
	for (int i = 0; i < PEERS; i++)
		res.kept += shm_of(p[i].s)->nremote;
	res.held = fds_below(1024) - base;
	fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	res.can_open = fd >= 0;
	if (fd >= 0)
		close(fd);
	for (int i = 0; i < PEERS; i++)
		tp_close(p[i].s);
	res.after_close = fds_below(1024) - base;
	_exit(write(out, &res, sizeof(res)) == (ssize_t)sizeof(res) ? 0 : 2);
}

/* Four receivers, each announcing one registration fewer than a
 * connection keeps, each with a descriptor of its own: together more
 * than the sender's descriptors.  The sender keeps half of its limit
 * (32 of 64) over all connections, fails the one that would take more
 * with one error naming that limit, can still open a file, and gives
 * back every descriptor when it closes. */
static void test_announcements_over_connections(void **state)
{
	static uint8_t buf[SIZE];
	const struct tp_pair_opts shm = { .backend = TP_BACKEND_SHM };
	struct spread_result res;
	struct tp_pair p[PEERS];
	int out[2], status, failed = 0;
	pid_t pid;

	(void)state;
	standin_engine_reset(1);
	for (int i = 0; i < PEERS; i++)
		tp_pair_open(&p[i], &shm);
	assert_int_equal(pipe(out), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		close(out[0]);
		spread_sender(p, out[1]);
	}
	close(out[1]);
	for (uint32_t id = 1; id <= EACH; id++) {
		for (int i = 0; i < PEERS; i++) {
			struct sm_share_info info = cumem_info(1000 * (uint64_t)i + id, buf, SIZE);
			int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);

			assert_true(fd >= 0);
			send_region(p[i].r, REGION_ADD, id, &info, &fd, 1);
			close(fd);
		}
	}
	assert_int_equal(read(out[0], &res, sizeof(res)), (ssize_t)sizeof(res));
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	for (int i = 0; i < PEERS; i++) {
		if (res.rc[i] == SM_OK)
			continue;
		print_message("# connection %d: %s\n", i, res.msg[i]);
		assert_int_equal(res.rc[i], SM_ERR_REMOTE);
		assert_non_null(strstr(res.msg[i], "more than 32 registrations to this process, the "
					       "most it keeps over all its connections"));
		failed++;
	}
	assert_true(failed >= 1);
	assert_true(res.kept <= LOW_NOFILE / 2);
	assert_true(res.held <= LOW_NOFILE / 2);
	assert_true(res.can_open);
	assert_int_equal(res.after_close, -PEERS);	/* their sockets went too */
	close(out[0]);
	for (int i = 0; i < PEERS; i++)
		tp_pair_close(&p[i]);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_register_many_while_sender_idle),
		cmocka_unit_test(test_receive_waits_for_room),
		cmocka_unit_test(test_receive_gives_up_on_a_sender_that_never_reads),
		cmocka_unit_test(test_second_wait_counts_from_its_own_start),
		cmocka_unit_test(test_ring_receive_after_direct_in_slot),
		cmocka_unit_test(test_receive_inside_registration),
		cmocka_unit_test(test_receive_offset_outside_registration),
		cmocka_unit_test(test_landing_time_from_the_future),
		cmocka_unit_test(test_stale_deregistration_leaves_new_comm_alone),
		cmocka_unit_test(test_host_sends_through_staging),
		cmocka_unit_test(test_host_receive_in_place_or_ring),
		cmocka_unit_test(test_host_receive_by_default_through_the_ring),
		cmocka_unit_test(test_allocation_shared_by_registrations),
		cmocka_unit_test(test_bogus_announcements),
		cmocka_unit_test(test_announcement_with_extra_descriptors),
		cmocka_unit_test(test_announcements_past_the_limit),
		cmocka_unit_test(test_announcements_over_connections),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
