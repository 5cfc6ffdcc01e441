/* A net plugin for tests only: it stands in for a vendor's plugin (an
 * RDMA or EFA one) behind NCCL_SYMMEM_INNER_NET, and moves bytes over TCP
 * loopback.  Built once per table version (STANDIN_VERSION 8..12; 0
 * exports only a v7 symbol, which the plugin must refuse).
 *
 * Like a vendor plugin it has an 80-byte handle, keeps its connect state
 * in the handle between non-blocking connect calls (a copy handed back
 * loses it, which connect reports as an error), and takes several
 * receives per irecv, matched by tag.  So that tests can tell which
 * plugin carried which bytes, each connection appends one line to the
 * file $INNER_STANDIN_LOG at close ("send tag=T dev=D messages=N
 * bytes=B ..."), and init, finalize, setNetAttr and makeVDevice one each.
 *
 * Test knobs: INNER_STANDIN_TAG (names the process in the log),
 * INNER_STANDIN_FAIL_INIT=1, INNER_STANDIN_DEVICES=n (default 2),
 * INNER_STANDIN_OFFLOAD=1 (a device-offload device),
 * INNER_STANDIN_HANDLE_BYTES=n (default 80: its listen writes that many),
 * INNER_STANDIN_STATE_SPILL=1 (connect keeps part of its state past byte
 * 80), INNER_STANDIN_CONNECT_NEVER=1 (connect never finishes),
 * INNER_STANDIN_HANG_ON_DEAD=1 (a peer that is gone is waited for, as
 * aws-ofi-nccl does: its requests neither complete nor fail, and close
 * waits for them), INNER_STANDIN_GPU=1 (offers NCCL_PTR_CUDA and moves GPU
 * bytes itself through host memory: standin_gpu.h; without it only host
 * memory), INNER_STANDIN_DMABUF=1 (with it, NCCL_PTR_DMABUF too: NCCL then
 * registers through regMrDmaBuf).  The close line counts the messages
 * that moved GPU bytes (gpu=N). */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "nccl_abi.h"
#include "standin_gpu.h"

#ifndef STANDIN_VERSION
#define STANDIN_VERSION 12
#endif

#define EXPORT __attribute__((visibility("default")))
#define MAX_DEVS 16
#define MAX_RECVS 4
#define MAX_REQS (NCCL_NET_MAX_REQUESTS * MAX_RECVS)
#define HANDLE_MAGIC 0x4e494453u	/* "SDIN" */
#define END_MAGIC 0x4d444e45u		/* "ENDM" */
#define STATE_MAGIC 0x5354415445ull	/* "STATE" */
#define COMM_MAGIC 0x636f6d6du
#define MR_MAGIC 0x6d72u

/* ---- the handle ------------------------------------------------------ */

/* Bytes [0, 56) as a vendor's endpoint would use them; the connect state
 * sits just before the end marker that closes the handle. */
struct handle_head {
	uint32_t magic;
	uint32_t size;			/* the handle's length: 80 unless told */
	struct sockaddr_in addr;	/* 16 bytes */
	uint64_t listen_id;
	char endpoint[24];		/* a name, never empty */
};

/* Packed: it lives at whatever offset the handle leaves it (byte 60 of
 * 80), as a vendor plugin's state does. */
struct __attribute__((packed)) connect_state {
	uint32_t stage;			/* 0: not started; 1: TCP connect issued */
	int32_t fd;
	uint64_t cookie;		/* STATE_MAGIC: this process wrote it */
};

static size_t handle_bytes(void)
{
	const char *v = getenv("INNER_STANDIN_HANDLE_BYTES");
	long n = v ? strtol(v, NULL, 10) : 80;

	return n >= 64 && n <= NCCL_NET_HANDLE_MAXSIZE ? (size_t)n : 80;
}

static struct connect_state *state_in(void *handle, size_t size)
{
	/* Spilled: the state's last 8 bytes land past byte 80. */
	size_t off = getenv("INNER_STANDIN_STATE_SPILL") ? 72 :
		     size - 4 - sizeof(struct connect_state);

	return (struct connect_state *)((uint8_t *)handle + off);
}

/* ---- the log ---------------------------------------------------------- */

static void log_line(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void log_line(const char *fmt, ...)
{
	const char *path = getenv("INNER_STANDIN_LOG");
	const char *tag = getenv("INNER_STANDIN_TAG");
	char buf[512];
	va_list ap;
	int n, fd;

	if (!path)
		return;
	n = snprintf(buf, sizeof(buf), "%s ", tag ? tag : "-");
	va_start(ap, fmt);
	n += vsnprintf(buf + n, sizeof(buf) - (size_t)n, fmt, ap);
	va_end(ap);
	if (n >= (int)sizeof(buf) - 1)
		n = (int)sizeof(buf) - 2;
	buf[n++] = '\n';
	fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0)
		return;
	/* One write of a short line under O_APPEND: lines never interleave. */
	if (write(fd, buf, (size_t)n) != n)
		n = -1;
	close(fd);
}

/* ---- devices ---------------------------------------------------------- */

static int nphys, nvirt;
static ncclNetVDeviceProps_v12_t vdevs[MAX_DEVS];
static char names[MAX_DEVS][16], paths[MAX_DEVS][64];

static ncclResult_t s_init(void **ctx, uint64_t commId, ncclNetCommConfig_v11_t *config,
			   ncclDebugLogger_t log, ncclProfilerCallback_t prof)
{
	const char *n = getenv("INNER_STANDIN_DEVICES");

	(void)log;
	(void)prof;
	if (ctx)
		*ctx = NULL;
	if (getenv("INNER_STANDIN_FAIL_INIT"))
		return ncclSystemError;
	nphys = n ? atoi(n) : 2;
	if (nphys < 0 || nphys > MAX_DEVS / 2)
		nphys = 2;
	for (int d = 0; d < MAX_DEVS; d++) {
		snprintf(names[d], sizeof(names[d]), "standin%d", d);
		snprintf(paths[d], sizeof(paths[d]), "/sys/devices/pci0000:00/0000:00:1%x.0", d);
	}
	log_line("init version=%d comm=%llx tc=%d", STANDIN_VERSION, (unsigned long long)commId,
		 config ? config->trafficClass : -2);
	if (ctx)
		*ctx = malloc(1);	/* a context of its own, freed at finalize */
	return ncclSuccess;
}

static ncclResult_t s_devices(int *ndev)
{
	*ndev = nphys + nvirt;
	return ncclSuccess;
}

static ncclResult_t s_get_properties(int dev, ncclNetProperties_v12_t *p)
{
	if (dev < 0 || dev >= nphys + nvirt)
		return ncclInvalidArgument;
	memset(p, 0, sizeof(*p));
	p->name = names[dev];
	p->pciPath = paths[dev];
	p->guid = 0x5354414e00000000ull | (uint64_t)dev;
	p->ptrSupport = NCCL_PTR_HOST;
	if (standin_gpu_on())
		p->ptrSupport |= NCCL_PTR_CUDA |
				 (getenv("INNER_STANDIN_DMABUF") ? NCCL_PTR_DMABUF : 0);
	p->regIsGlobal = 1;
	p->forceFlush = 1;
	p->speed = 200000;
	p->port = dev + 1;
	p->latency = 0;
	p->maxComms = 4096;
	p->maxRecvs = MAX_RECVS;
	p->netDeviceType = getenv("INNER_STANDIN_OFFLOAD") ? NCCL_NET_DEVICE_UNPACK :
							      NCCL_NET_DEVICE_HOST;
	p->netDeviceVersion = getenv("INNER_STANDIN_OFFLOAD") ? 0x7 : 0;
	if (dev < nphys) {
		p->vProps.ndevs = 1;
		p->vProps.devs[0] = dev;
	} else {
		p->vProps = vdevs[dev - nphys];
	}
	p->maxP2pBytes = 4ull << 30;
	p->maxCollBytes = 2ull << 30;
	p->maxMultiRequestSize = 2;
	p->railId = (int16_t)dev;
	p->planeId = 7;
	return ncclSuccess;
}

static ncclResult_t s_make_vdevice(int *d, ncclNetVDeviceProps_v12_t *props)
{
	if (props->ndevs < 2 || nphys + nvirt >= MAX_DEVS)
		return ncclInvalidArgument;
	vdevs[nvirt] = *props;
	*d = nphys + nvirt++;
	log_line("vdevice d=%d ndevs=%d", *d, props->ndevs);
	return ncclSuccess;
}

static ncclResult_t s_set_net_attr(void *ctx, ncclNetAttr_v11_t *attr)
{
	(void)ctx;
	log_line("attr op=0x%x", attr ? attr->op : 0);
	return ncclSuccess;
}

static ncclResult_t s_finalize(void *ctx)
{
	free(ctx);
	log_line("finalize");
	return ncclSuccess;
}

/* ---- connections ------------------------------------------------------ */

struct listen_comm {
	int fd;
	int dev;
	uint64_t id;
	int cand;			/* accepted, hello not read yet */
	uint64_t hello;
	size_t got;
};

struct mr {
	uint32_t magic;
	void *data;
	size_t size;
	int type;
};

struct comm;

struct req {
	struct comm *comm;
	int used;
	int kind;			/* 0 send, 1 recv, 2 flush */
	int done;
	int n;
	uint8_t *buf[MAX_RECVS];
	size_t cap[MAX_RECVS];
	int tag[MAX_RECVS];
	size_t got[MAX_RECVS];
	int filled[MAX_RECVS];
	int nfilled;
	/* GPU buffers: where the bytes go (receives), and the host memory
	 * they pass through (sends and receives); NULL for host buffers. */
	uint8_t *dev[MAX_RECVS];
	uint8_t *stage[MAX_RECVS];
	uint64_t seq;			/* posting order */
};

struct frame_hdr {
	int32_t tag;
	uint32_t pad;
	uint64_t size;
};

struct comm {
	uint32_t magic;
	int fd;
	int is_send;
	int dev;
	uint64_t seq;
	struct req reqs[MAX_REQS];
	/* sending: the oldest unfinished send and how far it is */
	size_t sent;			/* of header + payload */
	/* receiving: the frame being read */
	struct frame_hdr hdr;
	size_t hdr_got;
	struct req *into;
	int slot;
	uint64_t isend_calls;
	uint64_t messages, bytes, regs, deregs, dmabufs, flushes, hints, consumed, devmrs, gpu;
	int bad;			/* a wire or matching error: every call fails */
};

/* Connects started in this process: a stage-0 handle whose listener is in
 * it was handed back without the state this plugin keeps there. */
static pthread_mutex_t started_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t started[256];
static int nstarted;

static int was_started(uint64_t id)
{
	int yes = 0;

	pthread_mutex_lock(&started_lock);
	for (int i = 0; i < nstarted; i++)
		yes |= started[i] == id;
	if (!yes && nstarted < 256)
		started[nstarted++] = id;
	pthread_mutex_unlock(&started_lock);
	return yes;
}

static uint64_t next_id(void)
{
	static uint64_t counter;

	return ((uint64_t)getpid() << 32) ^ ((uint64_t)time(NULL) << 12) ^
	       __atomic_add_fetch(&counter, 1, __ATOMIC_RELAXED);
}

static ncclResult_t s_listen(void *ctx, int dev, void *handle, void **listenComm)
{
	size_t size = handle_bytes();
	struct handle_head *h = handle;
	struct listen_comm *l;
	socklen_t len = sizeof(h->addr);
	uint32_t end = END_MAGIC;

	(void)ctx;
	*listenComm = NULL;
	l = calloc(1, sizeof(*l));
	if (!l)
		return ncclSystemError;
	l->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	l->cand = -1;
	memset(h, 0, sizeof(*h));
	h->addr.sin_family = AF_INET;
	h->addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (l->fd < 0 || bind(l->fd, (struct sockaddr *)&h->addr, sizeof(h->addr)) ||
	    listen(l->fd, 16) || getsockname(l->fd, (struct sockaddr *)&h->addr, &len)) {
		if (l->fd >= 0)
			close(l->fd);
		free(l);
		return ncclSystemError;
	}
	l->dev = dev;
	l->id = next_id();
	h->magic = HANDLE_MAGIC;
	h->size = (uint32_t)size;
	h->listen_id = l->id;
	snprintf(h->endpoint, sizeof(h->endpoint), "standin:%u", ntohs(h->addr.sin_port));
	memcpy((uint8_t *)handle + size - 4, &end, 4);
	log_line("listen dev=%d", dev);
	*listenComm = l;
	return ncclSuccess;
}

static struct comm *comm_new(int fd, int is_send, int dev)
{
	struct comm *c = calloc(1, sizeof(*c));
	int one = 1;

	if (!c)
		return NULL;
	c->magic = COMM_MAGIC;
	c->fd = fd;
	c->is_send = is_send;
	c->dev = dev;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return c;
}

static ncclResult_t s_connect(void *ctx, int dev, void *handle, void **sendComm,
			      ncclNetDeviceHandle_v11_t **sendDevComm)
{
	struct handle_head *h = handle;
	struct connect_state *st;
	uint32_t end;
	int err = 0;
	socklen_t len = sizeof(err);
	struct pollfd pfd;
	struct comm *c;

	(void)ctx;
	(void)sendDevComm;
	*sendComm = NULL;
	if (h->magic != HANDLE_MAGIC || h->size < 64 || h->size > NCCL_NET_HANDLE_MAXSIZE)
		return ncclInvalidArgument;
	memcpy(&end, (uint8_t *)handle + h->size - 4, 4);
	if (end != END_MAGIC)
		return ncclInvalidArgument;	/* not all of its bytes came */
	st = state_in(handle, h->size);
	if (st->stage == 0) {
		if (was_started(h->listen_id)) {
			fprintf(stderr, "standin: connect state lost between calls (the handle "
					"was not handed back)\n");
			return ncclInternalError;
		}
		st->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		if (st->fd < 0)
			return ncclSystemError;
		if (connect(st->fd, (struct sockaddr *)&h->addr, sizeof(h->addr)) &&
		    errno != EINPROGRESS) {
			close(st->fd);
			return ncclRemoteError;
		}
		st->stage = 1;
		st->cookie = STATE_MAGIC;
		return ncclSuccess;	/* always at least one more call */
	}
	if (st->stage != 1 || st->cookie != STATE_MAGIC)
		return ncclInternalError;
	if (getenv("INNER_STANDIN_CONNECT_NEVER"))
		return ncclSuccess;
	pfd.fd = st->fd;
	pfd.events = POLLOUT;
	if (poll(&pfd, 1, 0) == 0)
		return ncclSuccess;
	if (getsockopt(st->fd, SOL_SOCKET, SO_ERROR, &err, &len) || err)
		return ncclRemoteError;
	/* 8 bytes on a fresh socket: never short. */
	if (send(st->fd, &h->listen_id, 8, MSG_NOSIGNAL) != 8)
		return ncclRemoteError;
	c = comm_new(st->fd, 1, dev);
	if (!c)
		return ncclSystemError;
	st->stage = 2;
	*sendComm = c;
	return ncclSuccess;
}

static ncclResult_t s_accept(void *listenComm, void **recvComm,
			     ncclNetDeviceHandle_v11_t **recvDevComm)
{
	struct listen_comm *l = listenComm;
	struct comm *c;
	ssize_t n;

	(void)recvDevComm;
	*recvComm = NULL;
	if (l->cand < 0) {
		l->cand = accept4(l->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (l->cand < 0)
			return errno == EAGAIN || errno == EWOULDBLOCK ? ncclSuccess : ncclSystemError;
		l->got = 0;
	}
	n = recv(l->cand, (uint8_t *)&l->hello + l->got, 8 - l->got, 0);
	if (n > 0)
		l->got += (size_t)n;
	else if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK))
		return ncclRemoteError;
	if (l->got < 8)
		return ncclSuccess;
	if (l->hello != l->id)
		return ncclRemoteError;
	c = comm_new(l->cand, 0, l->dev);
	if (!c)
		return ncclSystemError;
	l->cand = -1;
	*recvComm = c;
	return ncclSuccess;
}

static ncclResult_t s_close_listen(void *listenComm)
{
	struct listen_comm *l = listenComm;

	if (l->cand >= 0)
		close(l->cand);
	close(l->fd);
	free(l);
	return ncclSuccess;
}

/* ---- memory ------------------------------------------------------------ */

static ncclResult_t reg(struct comm *c, void *data, size_t size, int type, void **mhandle)
{
	struct mr *m;

	if (c->magic != COMM_MAGIC)
		return ncclInternalError;
	m = calloc(1, sizeof(*m));
	if (!m)
		return ncclSystemError;
	m->magic = MR_MAGIC;
	m->data = data;
	m->size = size;
	m->type = type;
	c->regs++;
	*mhandle = m;
	return ncclSuccess;
}

static ncclResult_t s_reg_mr(void *comm, void *data, size_t size, int type, void **mhandle)
{
	return reg(comm, data, size, type, mhandle);
}

static ncclResult_t s_reg_mr_dma_buf(void *comm, void *data, size_t size, int type,
				     uint64_t offset, int fd, void **mhandle)
{
	struct comm *c = comm;

	/* The file must still be open during the call, as NCCL's is. */
	if (fcntl(fd, F_GETFD) < 0 || offset > size)
		return ncclInvalidArgument;
	c->dmabufs++;
	return reg(c, data, size, type, mhandle);
}

static ncclResult_t s_dereg_mr(void *comm, void *mhandle)
{
	struct comm *c = comm;
	struct mr *m = mhandle;

	if (c->magic != COMM_MAGIC || !m || m->magic != MR_MAGIC)
		return ncclInternalError;
	m->magic = 0;
	free(m);
	c->deregs++;
	return ncclSuccess;
}

static ncclResult_t s_get_device_mr(void *comm, void *mhandle, void **dptr_mhandle)
{
	struct comm *c = comm;

	c->devmrs++;
	*dptr_mhandle = mhandle;
	return ncclSuccess;
}

/* GPU memory, which goes through host memory here.  Without
 * INNER_STANDIN_GPU a CUDA registration is taken for host memory, as
 * the tests without a GPU register host buffers with that type. */
static int gpu_mr(const struct mr *m)
{
	return m->type == NCCL_PTR_CUDA && standin_gpu_on();
}

static int covers(const struct mr *m, const void *data, size_t size)
{
	const uint8_t *p = data, *b = m->data;

	return m && m->magic == MR_MAGIC && p >= b && p + size <= b + m->size;
}

/* ---- data path --------------------------------------------------------- */

static void stages_free(struct req *r)
{
	for (int i = 0; i < MAX_RECVS; i++) {
		free(r->stage[i]);
		r->stage[i] = NULL;
	}
}

static struct req *req_new(struct comm *c, int kind)
{
	for (int i = 0; i < MAX_REQS; i++) {
		struct req *r = &c->reqs[i];

		if (!r->used) {
			stages_free(r);
			memset(r, 0, sizeof(*r));
			r->comm = c;
			r->used = 1;
			r->kind = kind;
			r->seq = c->seq++;
			return r;
		}
	}
	return NULL;
}

/* The oldest unfinished request of `kind` (FIFO, as NCCL posts them). */
static struct req *oldest(struct comm *c, int kind)
{
	struct req *best = NULL;

	for (int i = 0; i < MAX_REQS; i++) {
		struct req *r = &c->reqs[i];

		if (r->used && !r->done && r->kind == kind && (!best || r->seq < best->seq))
			best = r;
	}
	return best;
}

/* The socket failed or the peer hung up. */
static void went_bad(struct comm *c)
{
	if (!getenv("INNER_STANDIN_HANG_ON_DEAD"))
		c->bad = 1;
}

static void progress_send(struct comm *c)
{
	struct req *r;

	while ((r = oldest(c, 0))) {
		struct frame_hdr h = { .tag = r->tag[0], .size = r->cap[0] };
		size_t total = sizeof(h) + r->cap[0];
		ssize_t n;

		if (c->sent < sizeof(h))
			n = send(c->fd, (uint8_t *)&h + c->sent, sizeof(h) - c->sent,
				 MSG_NOSIGNAL | MSG_DONTWAIT);
		else
			n = send(c->fd, r->buf[0] + (c->sent - sizeof(h)), total - c->sent,
				 MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n < 0) {
			if (errno != EAGAIN && errno != EWOULDBLOCK)
				went_bad(c);
			return;
		}
		c->sent += (size_t)n;
		if (c->sent < total)
			continue;
		c->sent = 0;
		r->done = 1;
		stages_free(r);
		c->messages++;
		c->bytes += r->cap[0];
	}
}

/* The posted receive a frame with `tag` goes to: the oldest one with an
 * unfilled buffer of that tag. */
static int match(struct comm *c, int tag)
{
	struct req *best = NULL;
	int slot = -1;

	for (int i = 0; i < MAX_REQS; i++) {
		struct req *r = &c->reqs[i];

		if (!r->used || r->done || r->kind != 1 || (best && r->seq > best->seq))
			continue;
		for (int k = 0; k < r->n; k++) {
			if (!r->filled[k] && r->tag[k] == tag) {
				best = r;
				slot = k;
				break;
			}
		}
	}
	c->into = best;
	c->slot = slot;
	return best ? 0 : -1;
}

static void progress_recv(struct comm *c)
{
	for (;;) {
		ssize_t n;

		if (!oldest(c, 1))
			return;		/* nothing posted: leave the bytes in the socket */
		if (c->hdr_got < sizeof(c->hdr)) {
			n = recv(c->fd, (uint8_t *)&c->hdr + c->hdr_got, sizeof(c->hdr) - c->hdr_got,
				 MSG_DONTWAIT);
			if (n <= 0) {
				if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK))
					went_bad(c);
				return;
			}
			c->hdr_got += (size_t)n;
			if (c->hdr_got < sizeof(c->hdr))
				return;
			if (match(c, c->hdr.tag) || c->hdr.size > c->into->cap[c->slot]) {
				fprintf(stderr, "standin: a frame of %llu bytes with tag %d fits no "
						"posted receive\n", (unsigned long long)c->hdr.size,
					c->hdr.tag);
				c->bad = 1;
				return;
			}
		}
		if (c->into->got[c->slot] < c->hdr.size) {
			n = recv(c->fd, c->into->buf[c->slot] + c->into->got[c->slot],
				 c->hdr.size - c->into->got[c->slot], MSG_DONTWAIT);
			if (n <= 0) {
				if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK))
					went_bad(c);
				return;
			}
			c->into->got[c->slot] += (size_t)n;
			if (c->into->got[c->slot] < c->hdr.size)
				continue;
		}
		if (c->into->dev[c->slot] &&
		    standin_gpu_to_device(c->into->dev[c->slot], c->into->buf[c->slot],
					  c->hdr.size)) {
			c->bad = 1;
			return;
		}
		c->into->filled[c->slot] = 1;
		c->bytes += c->hdr.size;
		c->hdr_got = 0;
		if (++c->into->nfilled == c->into->n) {
			c->into->done = 1;
			c->messages++;
		}
	}
}

static ncclResult_t s_isend(void *sendComm, void *data, size_t size, int tag, void *mhandle,
			    void *phandle, void **request)
{
	struct comm *c = sendComm;
	struct req *r;

	(void)phandle;
	*request = NULL;
	if (c->magic != COMM_MAGIC || !c->is_send || c->bad)
		return ncclInternalError;
	if (!covers(mhandle, data, size))
		return ncclInvalidArgument;	/* a wrong or missing mhandle */
	/* Every other call is "not yet", as a plugin waiting for credit. */
	if (c->isend_calls++ % 2 == 0)
		return ncclSuccess;
	r = req_new(c, 0);
	if (!r)
		return ncclInternalError;
	r->n = 1;
	r->buf[0] = data;
	r->cap[0] = size;
	r->tag[0] = tag;
	if (gpu_mr(mhandle) && size) {
		r->stage[0] = malloc(size);
		if (!r->stage[0] || standin_gpu_to_host(r->stage[0], data, size)) {
			r->used = 0;
			return ncclSystemError;
		}
		r->buf[0] = r->stage[0];
		c->gpu++;
	}
	*request = r;
	progress_send(c);
	return ncclSuccess;
}

static ncclResult_t s_irecv(void *recvComm, int n, void **data, size_t *sizes, int *tags,
			    void **mhandles, void **phandles, void **request)
{
	struct comm *c = recvComm;
	struct req *r;

	(void)phandles;
	c->hints += *request == (void *)NCCL_NET_OPTIONAL_RECV_COMPLETION;
	*request = NULL;
	if (c->magic != COMM_MAGIC || c->is_send || c->bad || n < 1 || n > MAX_RECVS)
		return ncclInternalError;
	for (int i = 0; i < n; i++)
		if (!mhandles || !covers(mhandles[i], data[i], sizes[i]))
			return ncclInvalidArgument;
	r = req_new(c, 1);
	if (!r)
		return ncclInternalError;
	r->n = n;
	for (int i = 0; i < n; i++) {
		r->buf[i] = data[i];
		r->cap[i] = sizes[i];
		r->tag[i] = tags[i];
		if (!gpu_mr(mhandles[i]) || !sizes[i])
			continue;
		r->stage[i] = malloc(sizes[i]);
		if (!r->stage[i]) {
			r->used = 0;
			return ncclSystemError;
		}
		r->dev[i] = data[i];
		r->buf[i] = r->stage[i];
		c->gpu++;
	}
	*request = r;
	return ncclSuccess;
}

static ncclResult_t s_iflush(void *recvComm, int n, void **data, int *sizes, void **mhandles,
			     void **request)
{
	struct comm *c = recvComm;
	struct req *r;

	(void)data;
	(void)sizes;
	(void)mhandles;
	*request = NULL;
	if (c->magic != COMM_MAGIC || c->is_send || n < 1)
		return ncclInternalError;
	r = req_new(c, 2);
	if (!r)
		return ncclInternalError;
	r->done = 1;	/* loopback TCP: visible at once */
	c->flushes++;
	*request = r;
	return ncclSuccess;
}

static ncclResult_t s_test(void *request, int *done, int *sizes)
{
	struct req *r = request;
	struct comm *c = r->comm;

	*done = 0;
	if (!r->used || c->magic != COMM_MAGIC)
		return ncclInternalError;
	if (c->is_send)
		progress_send(c);
	else
		progress_recv(c);
	if (c->bad)
		return ncclRemoteError;
	if (!r->done)
		return ncclSuccess;
	*done = 1;
	if (r->kind == 1 && sizes)
		for (int i = 0; i < r->n; i++)
			sizes[i] = (int)r->got[i];
	/* A receive stays until irecvConsumed names it (this plugin has one). */
	if (r->kind != 1)
		r->used = 0;
	return ncclSuccess;
}

static ncclResult_t s_irecv_consumed(void *recvComm, int n, void *request)
{
	struct comm *c = recvComm;
	struct req *r = request;

	if (c->magic != COMM_MAGIC || !r || r->comm != c || !r->used || !r->done || r->kind != 1 ||
	    r->n != n)
		return ncclInternalError;
	r->used = 0;
	c->consumed++;
	return ncclSuccess;
}

static ncclResult_t close_comm(struct comm *c)
{
	int held = 0;

	if (!c || c->magic != COMM_MAGIC)
		return ncclInternalError;
	/* A plugin that drains its requests before it closes. */
	while (getenv("INNER_STANDIN_HANG_ON_DEAD") && (oldest(c, 0) || oldest(c, 1))) {
		if (c->is_send)
			progress_send(c);
		else
			progress_recv(c);
		usleep(1000);
	}
	for (int i = 0; i < MAX_REQS; i++)
		held += c->reqs[i].used;
	log_line("%s dev=%d messages=%llu bytes=%llu regs=%llu deregs=%llu dmabufs=%llu "
		 "flushes=%llu hints=%llu consumed=%llu devmrs=%llu held=%d gpu=%llu",
		 c->is_send ? "send" : "recv", c->dev, (unsigned long long)c->messages,
		 (unsigned long long)c->bytes, (unsigned long long)c->regs,
		 (unsigned long long)c->deregs, (unsigned long long)c->dmabufs,
		 (unsigned long long)c->flushes, (unsigned long long)c->hints,
		 (unsigned long long)c->consumed, (unsigned long long)c->devmrs, held,
		 (unsigned long long)c->gpu);
	for (int i = 0; i < MAX_REQS; i++)
		stages_free(&c->reqs[i]);
	close(c->fd);
	c->magic = 0;
	free(c);
	return ncclSuccess;
}

static ncclResult_t s_close_send(void *sendComm)
{
	return close_comm(sendComm);
}

static ncclResult_t s_close_recv(void *recvComm)
{
	return close_comm(recvComm);
}

/* ---- the table, in the version this build exports ---------------------- */

#if STANDIN_VERSION == 12
EXPORT ncclNet_v12_t ncclNetPlugin_v12 = {
	.name = "standin",
	.init = s_init,
	.devices = s_devices,
	.getProperties = s_get_properties,
	.listen = s_listen,
	.connect = s_connect,
	.accept = s_accept,
	.regMr = s_reg_mr,
	.regMrDmaBuf = s_reg_mr_dma_buf,
	.deregMr = s_dereg_mr,
	.isend = s_isend,
	.irecv = s_irecv,
	.iflush = s_iflush,
	.test = s_test,
	.closeSend = s_close_send,
	.closeRecv = s_close_recv,
	.closeListen = s_close_listen,
	.getDeviceMr = s_get_device_mr,
	.irecvConsumed = s_irecv_consumed,
	.makeVDevice = s_make_vdevice,
	.finalize = s_finalize,
	.setNetAttr = s_set_net_attr,
};
#elif STANDIN_VERSION >= 8
/* The fields v8's layout has; the later ones add to them. */
#define PROPS_V8(o, p)                                                                            \
	do {                                                                                      \
		(o)->name = (p)->name;                                                            \
		(o)->pciPath = (p)->pciPath;                                                      \
		(o)->guid = (p)->guid;                                                            \
		(o)->ptrSupport = (p)->ptrSupport;                                                \
		(o)->regIsGlobal = (p)->regIsGlobal;                                              \
		(o)->speed = (p)->speed;                                                          \
		(o)->port = (p)->port;                                                            \
		(o)->latency = (p)->latency;                                                      \
		(o)->maxComms = (p)->maxComms;                                                    \
		(o)->maxRecvs = (p)->maxRecvs;                                                    \
		(o)->netDeviceType = (p)->netDeviceType;                                          \
		(o)->netDeviceVersion = (p)->netDeviceVersion;                                    \
	} while (0)

static void props_v11(int dev, const ncclNetProperties_v12_t *p, ncclNetProperties_v11_t *o)
{
	(void)dev;
	memset(o, 0, sizeof(*o));
	PROPS_V8(o, p);
	o->forceFlush = p->forceFlush;
	o->vProps.ndevs = p->vProps.ndevs;
	memcpy(o->vProps.devs, p->vProps.devs, sizeof(o->vProps.devs));
	o->maxP2pBytes = p->maxP2pBytes;
	o->maxCollBytes = p->maxCollBytes;
	o->maxMultiRequestSize = p->maxMultiRequestSize;
}

static ncclResult_t v11_get_properties(int dev, ncclNetProperties_v11_t *props)
{
	ncclNetProperties_v12_t p;
	ncclResult_t rc = s_get_properties(dev, &p);

	if (rc == ncclSuccess)
		props_v11(dev, &p, props);
	return rc;
}

static ncclResult_t v11_make_vdevice(int *d, ncclNetVDeviceProps_v11_t *props)
{
	ncclNetVDeviceProps_v12_t p = { .ndevs = props->ndevs };

	memcpy(p.devs, props->devs, sizeof(props->devs));
	return s_make_vdevice(d, &p);
}

#if STANDIN_VERSION == 11
EXPORT ncclNet_v11_t ncclNetPlugin_v11 = {
	.name = "standin",
	.init = s_init,
	.devices = s_devices,
	.getProperties = v11_get_properties,
	.listen = s_listen,
	.connect = s_connect,
	.accept = s_accept,
	.regMr = s_reg_mr,
	.regMrDmaBuf = s_reg_mr_dma_buf,
	.deregMr = s_dereg_mr,
	.isend = s_isend,
	.irecv = s_irecv,
	.iflush = s_iflush,
	.test = s_test,
	.closeSend = s_close_send,
	.closeRecv = s_close_recv,
	.closeListen = s_close_listen,
	.getDeviceMr = s_get_device_mr,
	.irecvConsumed = s_irecv_consumed,
	.makeVDevice = v11_make_vdevice,
	.finalize = s_finalize,
	.setNetAttr = s_set_net_attr,
};
#else
/* v10 and older: init once, no context, and (v10) the traffic class at
 * every connect. */
static ncclResult_t v10_init(ncclDebugLogger_t log, ncclProfilerCallback_t prof)
{
	return s_init(NULL, 0, NULL, log, prof);
}

static ncclResult_t v9_init(ncclDebugLogger_t log)
{
	return s_init(NULL, 0, NULL, log, NULL);
}

static ncclResult_t v10_get_properties(int dev, ncclNetProperties_v10_t *props)
{
	ncclNetProperties_v11_t p;
	ncclResult_t rc = v11_get_properties(dev, &p);

	if (rc == ncclSuccess)
		memcpy(props, &p, sizeof(*props));	/* v10 is v11's prefix */
	return rc;
}

static ncclResult_t v9_listen(int dev, void *handle, void **listenComm)
{
	return s_listen(NULL, dev, handle, listenComm);
}

static ncclResult_t v10_connect(int dev, ncclNetCommConfig_v11_t *config, void *handle,
				void **sendComm, ncclNetDeviceHandle_v11_t **sendDevComm)
{
	ncclResult_t rc;

	if (!config)
		return ncclInternalError;
	rc = s_connect(NULL, dev, handle, sendComm, sendDevComm);
	if (*sendComm)
		log_line("connect tc=%d", config->trafficClass);
	return rc;
}

static ncclResult_t v9_connect(int dev, void *handle, void **sendComm,
			       ncclNetDeviceHandle_v11_t **sendDevComm)
{
	return s_connect(NULL, dev, handle, sendComm, sendDevComm);
}

static ncclResult_t v9_isend(void *sendComm, void *data, size_t size, int tag, void *mhandle,
			     void **request)
{
	return s_isend(sendComm, data, size, tag, mhandle, NULL, request);
}

static ncclResult_t v9_irecv(void *recvComm, int n, void **data, size_t *sizes, int *tags,
			     void **mhandles, void **request)
{
	return s_irecv(recvComm, n, data, sizes, tags, mhandles, NULL, request);
}

#if STANDIN_VERSION == 10
EXPORT ncclNet_v10_t ncclNetPlugin_v10 = {
	.name = "standin",
	.init = v10_init,
	.devices = s_devices,
	.getProperties = v10_get_properties,
	.listen = v9_listen,
	.connect = v10_connect,
	.accept = s_accept,
	.regMr = s_reg_mr,
	.regMrDmaBuf = s_reg_mr_dma_buf,
	.deregMr = s_dereg_mr,
	.isend = s_isend,
	.irecv = s_irecv,
	.iflush = s_iflush,
	.test = s_test,
	.closeSend = s_close_send,
	.closeRecv = s_close_recv,
	.closeListen = s_close_listen,
	.getDeviceMr = s_get_device_mr,
	.irecvConsumed = s_irecv_consumed,
	.makeVDevice = v11_make_vdevice,
};
#elif STANDIN_VERSION == 9
EXPORT ncclNet_v9_t ncclNetPlugin_v9 = {
	.name = "standin",
	.init = v9_init,
	.devices = s_devices,
	.getProperties = v10_get_properties,
	.listen = v9_listen,
	.connect = v9_connect,
	.accept = s_accept,
	.regMr = s_reg_mr,
	.regMrDmaBuf = s_reg_mr_dma_buf,
	.deregMr = s_dereg_mr,
	.isend = v9_isend,
	.irecv = v9_irecv,
	.iflush = s_iflush,
	.test = s_test,
	.closeSend = s_close_send,
	.closeRecv = s_close_recv,
	.closeListen = s_close_listen,
	.getDeviceMr = s_get_device_mr,
	.irecvConsumed = s_irecv_consumed,
	.makeVDevice = v11_make_vdevice,
};
#else
static ncclResult_t v8_get_properties(int dev, ncclNetProperties_v8_t *props)
{
	ncclNetProperties_v11_t p;
	ncclResult_t rc = v11_get_properties(dev, &p);

	if (rc != ncclSuccess)
		return rc;
	memset(props, 0, sizeof(*props));
	PROPS_V8(props, &p);
	return rc;
}

static ncclResult_t v8_isend(void *sendComm, void *data, int size, int tag, void *mhandle,
			     void **request)
{
	if (size < 0)
		return ncclInternalError;
	return s_isend(sendComm, data, (size_t)size, tag, mhandle, NULL, request);
}

static ncclResult_t v8_irecv(void *recvComm, int n, void **data, int *sizes, int *tags,
			     void **mhandles, void **request)
{
	size_t s[MAX_RECVS];

	if (n < 1 || n > MAX_RECVS)
		return ncclInternalError;
	for (int i = 0; i < n; i++)
		s[i] = sizes[i] < 0 ? 0 : (size_t)sizes[i];
	return s_irecv(recvComm, n, data, s, tags, mhandles, NULL, request);
}

EXPORT ncclNet_v8_t ncclNetPlugin_v8 = {
	.name = "standin",
	.init = v9_init,
	.devices = s_devices,
	.getProperties = v8_get_properties,
	.listen = v9_listen,
	.connect = v9_connect,
	.accept = s_accept,
	.regMr = s_reg_mr,
	.regMrDmaBuf = s_reg_mr_dma_buf,
	.deregMr = s_dereg_mr,
	.isend = v8_isend,
	.irecv = v8_irecv,
	.iflush = s_iflush,
	.test = s_test,
	.closeSend = s_close_send,
	.closeRecv = s_close_recv,
	.closeListen = s_close_listen,
	.getDeviceMr = s_get_device_mr,
	.irecvConsumed = s_irecv_consumed,
};
#endif
#endif
#else
/* No usable table: only a v7 symbol, which NCCL 2.28 would still take but
 * this plugin does not. */
EXPORT const char ncclNetPlugin_v7[] = "standin v7";
#endif
