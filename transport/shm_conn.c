/* A shared-memory connection's life: the ring segment the connector makes
 * and passes to the listener with its setup, attaching to it, options,
 * close, and the backend's ops. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "shm.h"

int shm_segment_create(uint64_t ring_size, int *memfd, uint64_t *seg_size)
{
	uint64_t size = SHM_RING_OFFSET + ring_size;
	struct shm_ctrl *ctrl;
	void *map;
	int fd, rc;

	rc = sm_memfd_map("symmem-ring", size, SHM_RING_OFFSET, &fd, &map);
	if (rc)
		return rc;
	ctrl = map;
	ctrl->magic = SHM_MAGIC;
	ctrl->version = SHM_VERSION;
	ctrl->ring_size = ring_size;
	ctrl->seg_size = size;
	munmap(ctrl, SHM_RING_OFFSET);
	*memfd = fd;
	*seg_size = size;
	return SM_OK;
}

/* Maps a segment and checks that its header tells the truth about it: the
 * fd may come from a confused or hostile peer. */
int shm_comm_attach(struct shm_comm *s, int memfd, uint64_t seg_size, uint64_t chunk)
{
	struct shm_ctrl *ctrl;
	void *p;
	int rc;

	if (seg_size <= SHM_RING_OFFSET)
		return sm_fail(SM_ERR_REMOTE, "peer announced a %llu-byte ring segment",
			       (unsigned long long)seg_size);
	rc = sm_memfd_check(memfd, seg_size, 1, "the peer's ring segment");
	if (rc == SM_ERR_INVALID)
		return sm_fail(SM_ERR_REMOTE, "%s", sm_last_error());
	if (rc)
		return rc;
	p = mmap(NULL, seg_size, PROT_READ | PROT_WRITE, MAP_SHARED, memfd, 0);
	if (p == MAP_FAILED)
		return sm_fail(SM_ERR_SYSTEM, "mmap of a %llu-byte ring segment: %s",
			       (unsigned long long)seg_size, strerror(errno));
	ctrl = p;
	if (ctrl->magic != SHM_MAGIC || ctrl->version != SHM_VERSION ||
	    ctrl->seg_size != seg_size || ctrl->ring_size != seg_size - SHM_RING_OFFSET) {
		munmap(p, seg_size);
		return sm_fail(SM_ERR_REMOTE, "ring segment header is not valid");
	}
	s->ctrl = ctrl;
	s->seg_size = seg_size;
	s->ring = (uint8_t *)p + SHM_RING_OFFSET;
	/* From the size checked, not the header again: the peer can have
	 * rewritten it since. */
	s->ring_size = seg_size - SHM_RING_OFFSET;
	s->chunk = min_u64(chunk, s->ring_size);
	return SM_OK;
}

static void shm_init(struct tp_comm *c)
{
	struct shm_comm *s = shm_of(c);

	s->rin_fd = -1;
	pthread_mutex_init(&s->ann_lock, NULL);
}

/* Copies go in place from the start, so the engine is taken at setup.  A
 * receiving connection holds its GPU's staging pool, so the pool
 * (preallocated with NCCL_CUMEM_PREALLOC) lives as long as any connection
 * that may need it, and no longer. */
static int shm_setup(struct tp_comm *c, const struct tp_options *opt)
{
	struct shm_comm *s = shm_of(c);
	int rc;

	s->no_direct = opt->no_direct;
	s->zero_copy = opt->zero_copy;
	s->host_in_place = opt->host_in_place;
	s->cumem_host = opt->cumem_host;
	s->pool_cfg = opt->pool;
	if (!opt->gpu)
		return SM_OK;
	rc = comm_take_engine(c);
	if (rc)
		return rc;
	if (c->is_send || s->no_direct)
		return SM_OK;
	rc = sm_pool_gpu_get(&s->pool_cfg, &s->pool);
	if (rc)
		return sm_fail(rc, "opening the staging pool: %s", sm_last_error());
	return SM_OK;
}

/* Connector: the ring, passed with the setup message. */
static int shm_connect_open(struct tp_comm *c, const struct tp_options *opt, void *held,
			    struct wire_setup *setup, int *memfd)
{
	int rc;

	(void)held;
	rc = shm_segment_create(opt->ring_size, memfd, &setup->seg_size);
	if (!rc)
		rc = shm_comm_attach(shm_of(c), *memfd, setup->seg_size, opt->chunk_size);
	if (!rc && c->is_send)
		watch_open(shm_of(c), *memfd);
	return rc;
}

/* Listener: the connector's ring. */
static int shm_accept_open(struct tp_comm *c, const struct tp_options *opt, void *held,
			   const struct wire_hello *hello, const struct wire_setup *setup,
			   int memfd, struct wire_reply *reply)
{
	(void)held;
	(void)hello;
	(void)reply;
	if (memfd < 0)
		return sm_fail(SM_ERR_REMOTE, "connector sent no ring segment");
	return shm_comm_attach(shm_of(c), memfd, setup->seg_size, opt->chunk_size);
}

static void shm_describe(const struct tp_comm *c, char *buf, size_t len)
{
	const struct shm_ctrl *ctrl = shm_of(c)->ctrl;

	if (!ctrl)
		return;
	snprintf(buf, len, "shared counters: receives posted %llu, sends posted %llu, "
		 "sends landed %llu, ring bytes written %llu, read %llu",
		 (unsigned long long)atomic_load(&ctrl->recv_posted),
		 (unsigned long long)atomic_load(&ctrl->send_posted),
		 (unsigned long long)atomic_load(&ctrl->send_done),
		 (unsigned long long)atomic_load(&ctrl->data_written),
		 (unsigned long long)atomic_load(&ctrl->data_read));
}

static void shm_close(struct tp_comm *c)
{
	struct shm_comm *s = shm_of(c);

	stage_close(s);
	watch_close(s);
	remote_close_all(s);
	announce_close(s);
	if (s->ctrl)
		munmap(s->ctrl, s->seg_size);
	s->ctrl = NULL;
	sm_pool_gpu_put(s->pool);
	s->pool = NULL;
	pthread_mutex_destroy(&s->ann_lock);
}

/* Setup asks this kind first: a listener of this host (the same kernel
 * and namespaces) is reached through the ring, unless another kind was
 * named; NCCL_SYMMEM_BACKEND=shm and another host fail at once. */
static int shm_pick(const struct tp_options *opt, const struct tp_handle_info *info,
		    int *picked, void **held)
{
	int same_host = info->host_id == tp_host_id();

	*picked = 0;
	*held = NULL;
	/* Named, TCP and ibverbs serve one host too (RDMA loopback). */
	if (opt->backend != TP_BACKEND_AUTO && opt->backend != TP_BACKEND_SHM)
		return SM_OK;
	if (!same_host && opt->backend == TP_BACKEND_SHM)
		return sm_fail(SM_ERR_USAGE, "NCCL_SYMMEM_BACKEND=shm, but the peer runs on another "
			       "host (or in another network or PID namespace)");
	*picked = same_host;
	return SM_OK;
}

const struct tp_ops tp_shm_ops = {
	.name = "shm",
	.title = "shared memory",
	.kind = TP_BACKEND_SHM,
	.comm_size = sizeof(struct shm_comm),
	.region_size = sizeof(struct shm_region),
	.priority = 30,
	.local = 1,
	.pick = shm_pick,
	.init = shm_init,
	.setup = shm_setup,
	.connect_open = shm_connect_open,
	.accept_open = shm_accept_open,
	.isend = shm_isend,
	.recv_ready = announce_recv_ready,
	.irecv = shm_irecv,
	.progress = shm_progress,
	.close = shm_close,
	.describe = shm_describe,
	.remote_count = remote_count,
	.req_note = shm_req_note,
	.req_describe = shm_req_describe,
	.req_close_wait = shm_req_close_wait,
	.region_register = shm_region_register,
	.region_withdraw = shm_region_withdraw,
	.region_release = shm_region_release,
};
