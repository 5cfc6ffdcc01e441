/* The copy helper's requests from its client (copyd.h): the control
 * socket's messages, hello and the mappings it adds and drops, each with
 * its reply.  The ring's copy requests are copyd_engine.c's. */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "copyd.h"

static int reply(struct copyd *d, int status, uint32_t id, const char *msg)
{
	struct cd_reply r;

	memset(&r, 0, sizeof(r));
	r.magic = CD_MAGIC;
	r.status = status;
	r.id = id;
	snprintf(r.msg, sizeof(r.msg), "%s", msg ? msg : "");
	return sm_send_some(d->ctrl, &r, sizeof(r), -1) == (ssize_t)sizeof(r) ? 0 : -1;
}

/* The GPU a mapping lives on, as a bus place; -1 for host memory, when
 * nobody can say, or when there are no phases to use it for.  The
 * exporter's bus id comes first: for a legacy IPC import (registered
 * cudaMalloc buffers) the driver names the importing context's GPU, not
 * the one the memory is on, and such copies went unscheduled (4 x H200,
 * registered cudaMalloc alltoall at 1 GiB: 0.57 of native without the
 * phases, 0.62 with them; bench/results/coalesce.md). */
static int range_gpu(struct copyd *d, const struct range *r, const char *bus_id)
{
	CUdevice dev;
	int ordinal = -1;

	if (d->gpu < 0 || r->in_host)
		return -1;
	if (bus_id[0] && d->cu->device_get_by_pci_bus_id(&dev, bus_id) == CUDA_SUCCESS)
		ordinal = (int)dev;
	else if (d->cu->pointer_get_attribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
					      (CUdeviceptr)sm_mapping_base(r->map)) != CUDA_SUCCESS)
		return -1;
	if (ordinal < 0 || ordinal >= d->ngpus)
		return -1;
	return d->place[ordinal];
}

/* ranges[] stays in the order of its ids (each new one is the highest,
 * range_free() closes the gap in order), so a request's three lookups are
 * binary searches: a host has a mapping per peer allocation and a control
 * page per connection, hundreds in a large job. */
struct range *range_find(struct copyd *d, uint32_t id)
{
	unsigned lo = 0, hi = d->nranges;

	while (lo < hi) {
		unsigned mid = lo + (hi - lo) / 2;

		if (d->ranges[mid].id == id)
			return &d->ranges[mid];
		if (d->ranges[mid].id < id)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

/* Shared host memory (the plugin's staging for host sources): mapped
 * here and registered with the driver so the copy engine can read it. */
static int map_host(struct copyd *d, struct range *r, int fd, uint64_t size)
{
	CUresult crc;
	void *p;
	int rc;

	if (fd < 0)
		return sm_fail(SM_ERR_INVALID, "host memory without its descriptor");
	rc = sm_memfd_check(fd, size, 0, "host staging");
	p = rc ? MAP_FAILED : mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (rc)
		return rc;
	if (p == MAP_FAILED)
		return sm_fail(SM_ERR_SYSTEM, "mapping %llu bytes of host staging: %s",
			       (unsigned long long)size, strerror(errno));
	crc = d->cu->mem_host_register(p, size, CU_MEMHOSTREGISTER_PORTABLE |
				       CU_MEMHOSTREGISTER_DEVICEMAP);
	if (crc != CUDA_SUCCESS) {
		munmap(p, size);
		return sm_cuda_fail(crc, "cuMemHostRegister of %llu bytes of host staging",
				    (unsigned long long)size);
	}
	crc = d->cu->mem_host_get_device_pointer(&r->host_dev, p, 0);
	if (crc != CUDA_SUCCESS) {
		d->cu->mem_host_unregister(p);
		munmap(p, size);
		return sm_cuda_fail(crc, "cuMemHostGetDevicePointer");
	}
	r->host = p;
	return SM_OK;
}

/* A cuMem import of host memory (the plugin's staging with
 * NCCL_CUMEM_HOST_ENABLE=1, or NCCL's own cuMem host buffers) maps like
 * GPU memory; only its allocation's location tells it apart.  Legacy IPC
 * imports have no cuMem handle and are GPU memory. */
static int import_in_host(struct copyd *d, const struct range *r)
{
	CUmemGenericAllocationHandle h;
	CUmemAllocationProp prop;
	CUresult rc;

	if (d->cu->mem_retain_allocation_handle(&h, sm_mapping_base(r->map)) != CUDA_SUCCESS)
		return 0;
	memset(&prop, 0, sizeof(prop));
	rc = d->cu->mem_get_allocation_properties(&prop, h);
	d->cu->mem_release(h);
	return rc == CUDA_SUCCESS && prop.location.type != CU_MEM_LOCATION_TYPE_DEVICE &&
	       prop.location.type != CU_MEM_LOCATION_TYPE_INVALID;
}

int range_add(struct copyd *d, const struct cd_msg *m, int fd, uint32_t *id)
{
	char bus_id[sizeof(m->info.bus_id)];
	struct range *r;
	int rc;

	/* The helper exports nothing.  Named as the owner, its own pid would
	 * make import.c take a legacy IPC address and size on trust (CUDA
	 * opens no process's own handles), so the client could point copies
	 * anywhere in the helper. */
	if (m->owner_pid == (int32_t)getpid()) {
		if (fd >= 0)
			close(fd);
		return sm_fail(SM_ERR_INVALID, "a mapping request names the copy helper itself "
			       "(pid %d) as the exporting process: refusing it", (int)m->owner_pid);
	}
	/* Names never wrap: ranges[] is kept in their order (range_find()). */
	if (d->next_id == UINT32_MAX) {
		if (fd >= 0)
			close(fd);
		return sm_fail(SM_ERR_INVALID, "the copy helper has named %u mappings, the most "
			       "it names in its life", UINT32_MAX);
	}
	if (d->nranges == d->cap) {
		unsigned cap = d->cap ? 2 * d->cap : 64;
		struct range *n = realloc(d->ranges, cap * sizeof(*n));

		if (!n) {
			if (fd >= 0)
				close(fd);
			return sm_fail(SM_ERR_SYSTEM, "out of memory for mappings");
		}
		d->ranges = n;
		d->cap = cap;
	}
	r = &d->ranges[d->nranges];
	memset(r, 0, sizeof(*r));
	if (m->info.kind == SM_SHARE_HOST_FD)
		rc = map_host(d, r, fd, m->info.alloc_size);
	else
		rc = sm_import_get(m->owner_pid, &m->info, fd, &r->map);	/* consumes fd */
	if (rc)
		return rc;
	r->id = ++d->next_id;
	r->size = m->info.alloc_size;
	r->in_host = r->host || import_in_host(d, r);
	memcpy(bus_id, m->info.bus_id, sizeof(bus_id));
	bus_id[sizeof(bus_id) - 1] = '\0';	/* the client's bytes */
	r->gpu = range_gpu(d, r, bus_id);
	d->nranges++;
	*id = r->id;
	return SM_OK;
}

void range_free(struct copyd *d, struct range *r)
{
	if (r->host) {
		d->cu->mem_host_unregister(r->host);
		munmap(r->host, r->size);
	} else {
		sm_import_put(r->map);
	}
	d->nranges--;
	memmove(r, r + 1, (size_t)(&d->ranges[d->nranges] - r) * sizeof(*r));
}

/* The client may drop a mapping while copies that name it still wait here
 * or run (NCCL deregisters before closing after an abort): unmapping it
 * then would let a queued copy resolve to nothing and a running one fault,
 * which poisons this context for every later copy.  So it goes when its
 * last request ends; new requests naming it fail at once. */
void range_del(struct copyd *d, uint32_t id)
{
	struct range *r = range_find(d, id);

	if (!r || r->dying)
		return;
	if (r->busy) {
		r->dying = 1;
		d->ring->stats.dropped_busy++;
		return;
	}
	range_free(d, r);
}

void range_unhold(struct copyd *d, uint32_t id)
{
	struct range *r = range_find(d, id);

	if (r && r->busy && --r->busy == 0 && r->dying)
		range_free(d, r);
}

/* Every protocol version keeps magic, op and version where they are. */
#define HELLO_VERSION_END (offsetof(struct cd_msg, version) + sizeof(uint32_t))

/* One control message other than a mapping after hello; fd, if one came
 * with it, stays the caller's to close.  Returns -1 when the client is
 * gone or must go. */
static int request(struct copyd *d, const struct cd_msg *m, ssize_t n, int fd)
{
	int rc;

	if (n != (ssize_t)sizeof(*m) && n >= (ssize_t)HELLO_VERSION_END && m->magic == CD_MAGIC &&
	    m->op == CD_HELLO) {
		/* A plugin of another build (NCCL_SYMMEM_COPY_HELPER_PATH
		 * naming a newer build's helper, say): its hello has another
		 * size.  Name both versions so its WARN says why, then leave. */
		rc = sm_fail(SM_ERR_INVALID, "plugin speaks helper protocol %u (a %zd-byte hello), "
			     "helper %u (%zu bytes): plugin and helper come from different builds",
			     m->version, n, CD_VERSION, sizeof(*m));
		reply(d, rc, 0, sm_last_error());
		return -1;
	}
	if (n != (ssize_t)sizeof(*m) || m->magic != CD_MAGIC)
		return -1;	/* hang-up or garbage: the client is not one of ours */
	switch (m->op) {
	case CD_HELLO:
		rc = d->ring ? sm_fail(SM_ERR_INVALID, "second hello") : open_gpu(d, m, fd);
		if (reply(d, rc, 0, rc ? sm_last_error() : NULL))
			return -1;
		/* A GPU that would not open leaves a context, streams and
		 * events half made: leave, as the client stops us anyway. */
		return rc == SM_ERR_CUDA ? -1 : 0;
	case CD_ADD:
		rc = sm_fail(SM_ERR_INVALID, "mapping before hello");
		return reply(d, rc, 0, sm_last_error());
	case CD_DEL:
		range_del(d, m->id);
		return 0;
	default:
		return reply(d, SM_ERR_INVALID, 0, "unknown request");
	}
}

/* The client's progress thread waits for a mapping's answer (the first
 * copy into a peer's new buffer): how long they take says what that
 * first copy costs NCCL. */
static void count_map(struct cd_stats *s, uint64_t ns)
{
	s->maps++;
	s->map_ns += ns;
	if (ns > s->map_max_ns)
		s->map_max_ns = ns;
}

/* One control message; returns -1 when the client is gone. */
int control(struct copyd *d)
{
	struct cd_msg m;
	uint32_t id = 0;
	int fd = -1, rc;
	ssize_t n = sm_recv_some(d->ctrl, &m, sizeof(m), &fd);

	if (n == 0)
		return 0;
	if (n == (ssize_t)sizeof(m) && m.magic == CD_MAGIC && m.op == CD_ADD && d->ring) {
		uint64_t t0 = sm_now_ns();

		rc = range_add(d, &m, fd, &id);		/* consumes fd */
		if (!rc)
			count_map(&d->ring->stats, sm_now_ns() - t0);
		return reply(d, rc, id, rc ? sm_last_error() : NULL);
	}
	rc = request(d, &m, n, fd);
	if (fd >= 0)
		close(fd);
	return rc;
}
