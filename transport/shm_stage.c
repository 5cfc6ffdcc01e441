/* Host staging for the copy helper.  A send from host memory the helper
 * cannot map (NCCL's LL buffers come from cudaHostAlloc: no fd, no IPC
 * handle) is first copied by the CPU into this connection's staging area,
 * a memfd the helper maps; the helper's copy engine then moves it into the
 * receiver's GPU buffer.  Without it such a send would need a CUDA call on
 * NCCL's progress thread, which can block for as long as a cuGraphLaunch
 * waits inside the driver (smfree/copyd_proto.h).
 *
 * The area is a shared memfd, or with NCCL_CUMEM_HOST_ENABLE=1 host memory
 * from the CUDA driver (cuMem, pinned on the GPU's NUMA node).
 *
 * The area is a byte ring: sends complete in order, so each send holds one
 * contiguous span and frees it, in order, when its copy has landed. */
#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "shm.h"

/* Spans start on cache lines. */
#define SPAN_ALIGN 64

/* NCCL_CUMEM_HOST_ENABLE=1: host memory from the driver, which the
 * helper maps as a cuMem import like any GPU buffer. */
static int open_cumem(struct shm_comm *s, struct sm_share_info *info, int *fd, uint8_t **buf)
{
	int rc = sm_host_cumem_alloc(s->ring_size, &s->hs_cumem);

	if (rc)
		return rc;
	info->kind = SM_SHARE_POSIX_FD;
	info->alloc_id = s->hs_cumem.alloc_id;
	info->alloc_size = s->hs_cumem.size;
	info->addr = (uint64_t)(uintptr_t)s->hs_cumem.ptr;
	*fd = s->hs_cumem.fd;
	s->hs_cumem.fd = -1;	/* closed below, like the memfd */
	*buf = s->hs_cumem.ptr;
	return SM_OK;
}

static void free_area(struct shm_comm *s, uint8_t *buf)
{
	if (s->hs_cumem.ptr)
		sm_host_cumem_free(&s->hs_cumem);
	else
		munmap(buf, s->ring_size);
}

static int stage_open(struct shm_comm *s)
{
	struct sm_share_info info;
	uint8_t *buf = NULL;
	int fd = -1, rc = -1;

	s->stage_tried = 1;
	memset(&info, 0, sizeof(info));
	if (s->cumem_host) {
		rc = open_cumem(s, &info, &fd, &buf);
		if (rc)
			sm_info("host staging in cuMem host memory unavailable "
				"(NCCL_CUMEM_HOST_ENABLE=1), a shared memfd instead: %s",
				sm_last_error());
	}
	if (rc) {
		memset(&info, 0, sizeof(info));
		rc = host_memfd_open("symmem-stage", s->ring_size, &info, &fd, &buf);
		if (rc)
			return rc;
	}
	rc = smf_range_add(s->comm.ce, getpid(), &info, fd, &s->hs_id);
	close(fd);	/* the helper holds its own copy */
	if (rc || !s->hs_id) {
		free_area(s, buf);
		return rc ? rc : sm_fail(SM_ERR_INTERNAL, "no copy helper for host staging");
	}
	s->hs_buf = buf;
	if (s->comm.verbose)
		sm_info("host staging for the copy helper: %llu bytes of %s",
			(unsigned long long)s->ring_size,
			s->hs_cumem.ptr ? "cuMem host memory" : "shared memfd memory");
	return SM_OK;
}

int stage_span(uint64_t head, uint64_t tail, uint64_t size, uint64_t n, uint64_t *off,
	       uint64_t *end)
{
	/* Every span, an empty message's too, takes room: its end must move
	 * past the previous one, since 0 means "nothing reserved". */
	uint64_t need = n ? (n + SPAN_ALIGN - 1) & ~(uint64_t)(SPAN_ALIGN - 1) : SPAN_ALIGN;
	uint64_t pos = head % size, pad = 0;

	if (need > size)
		return 0;
	if (pos + need > size)
		pad = size - pos;	/* a span never wraps: skip to the start */
	/* With nothing in flight the skipped bytes hold nothing either, so any
	 * span up to the area's size fits; counting them as used would refuse
	 * a span larger than the free part for ever, since no landing can
	 * move the tail. */
	if (head != tail && head + pad + need - tail > size)
		return 0;		/* full until earlier sends land */
	*off = (pos + pad) % size;
	*end = head + pad + need;
	return 1;
}

int stage_put(struct shm_comm *s, const void *src, size_t n, uint64_t *off, uint64_t *end)
{
	*end = 0;
	if (!s->hs_buf || !stage_span(s->hs_head, s->hs_tail, s->ring_size, n, off, end))
		return SM_OK;
	memcpy(s->hs_buf + *off, src, n);
	s->hs_head = *end;
	return SM_OK;
}

void stage_setup(struct shm_comm *s)
{
	s->want_stage = 0;
	if (!s->hs_buf && !s->stage_tried && stage_open(s))
		sm_info("host staging for the copy helper unavailable, sends from host "
			"buffers copy in this process: %s", sm_last_error());
}

void stage_unput(struct shm_comm *s, uint64_t end, uint64_t before)
{
	if (end && s->hs_head == end)
		s->hs_head = before;
}

void stage_done(struct shm_comm *s, uint64_t end)
{
	if (end)
		s->hs_tail = end;
}

void stage_close(struct shm_comm *s)
{
	/* A copy the close gave up on may still read the area: like the
	 * targets of such copies (tp_close), it stays. */
	if (!s->hs_buf || s->comm.keep_mappings)
		return;
	smf_range_del(s->comm.ce, s->hs_id);
	free_area(s, s->hs_buf);
	s->hs_buf = NULL;
	s->hs_id = 0;
}
