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

#include "internal.h"

/* Spans start on cache lines. */
#define SPAN_ALIGN 64

int host_memfd_open(const char *name, uint64_t size, struct sm_share_info *info, int *fd,
		    uint8_t **buf)
{
	void *p;
	int rc = sm_memfd_map(name, size, size, fd, &p);

	if (rc)
		return rc;
	info->kind = SM_SHARE_HOST_FD;
	info->alloc_size = size;
	*buf = p;
	return SM_OK;
}

/* NCCL_CUMEM_HOST_ENABLE=1: host memory from the driver, which the
 * helper maps as a cuMem import like any GPU buffer. */
static int open_cumem(struct tp_comm *c, struct sm_share_info *info, int *fd, uint8_t **buf)
{
	int rc = sm_host_cumem_alloc(c->ring_size, &c->hs_cumem);

	if (rc)
		return rc;
	info->kind = SM_SHARE_POSIX_FD;
	info->alloc_id = c->hs_cumem.alloc_id;
	info->alloc_size = c->hs_cumem.size;
	info->addr = (uint64_t)(uintptr_t)c->hs_cumem.ptr;
	*fd = c->hs_cumem.fd;
	c->hs_cumem.fd = -1;	/* closed below, like the memfd */
	*buf = c->hs_cumem.ptr;
	return SM_OK;
}

static void free_area(struct tp_comm *c, uint8_t *buf)
{
	if (c->hs_cumem.ptr)
		sm_host_cumem_free(&c->hs_cumem);
	else
		munmap(buf, c->ring_size);
}

static int stage_open(struct tp_comm *c)
{
	struct sm_share_info info;
	uint8_t *buf = NULL;
	int fd = -1, rc = -1;

	c->stage_tried = 1;
	memset(&info, 0, sizeof(info));
	if (c->cumem_host) {
		rc = open_cumem(c, &info, &fd, &buf);
		if (rc)
			sm_info("host staging in cuMem host memory unavailable "
				"(NCCL_CUMEM_HOST_ENABLE=1), a shared memfd instead: %s",
				sm_last_error());
	}
	if (rc) {
		memset(&info, 0, sizeof(info));
		rc = host_memfd_open("symmem-stage", c->ring_size, &info, &fd, &buf);
		if (rc)
			return rc;
	}
	rc = smf_range_add(c->ce, getpid(), &info, fd, &c->hs_id);
	close(fd);	/* the helper holds its own copy */
	if (rc || !c->hs_id) {
		free_area(c, buf);
		return rc ? rc : sm_fail(SM_ERR_INTERNAL, "no copy helper for host staging");
	}
	c->hs_buf = buf;
	if (c->verbose)
		sm_info("host staging for the copy helper: %llu bytes of %s",
			(unsigned long long)c->ring_size,
			c->hs_cumem.ptr ? "cuMem host memory" : "shared memfd memory");
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

int stage_put(struct tp_comm *c, const void *src, size_t n, uint64_t *off, uint64_t *end)
{
	*end = 0;
	if (!c->hs_buf && !c->stage_tried && stage_open(c))
		sm_info("host staging for the copy helper unavailable, sends from host "
			"buffers copy in this process: %s", sm_last_error());
	if (!c->hs_buf || !stage_span(c->hs_head, c->hs_tail, c->ring_size, n, off, end))
		return SM_OK;
	memcpy(c->hs_buf + *off, src, n);
	c->hs_head = *end;
	return SM_OK;
}

void stage_unput(struct tp_comm *c, uint64_t end, uint64_t before)
{
	if (end && c->hs_head == end)
		c->hs_head = before;
}

void stage_done(struct tp_comm *c, uint64_t end)
{
	if (end)
		c->hs_tail = end;
}

void stage_close(struct tp_comm *c)
{
	/* A copy the close gave up on may still read the area: like the
	 * targets of such copies (tp_close), it stays. */
	if (!c->hs_buf || c->keep_mappings)
		return;
	smf_range_del(c->ce, c->hs_id);
	free_area(c, c->hs_buf);
	c->hs_buf = NULL;
	c->hs_id = 0;
}
