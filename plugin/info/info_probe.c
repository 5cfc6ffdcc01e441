/* Whether the GPUs can share memory the way the plugin does, tried for
 * real: a process per GPU (two on the GPU of a one-GPU host) exports a
 * small cuMem allocation (POSIX fd) and a small cuMemAlloc one (legacy
 * IPC handle) with symmem's own export code, hands them to every other
 * process over a Unix socket, and each imports the others' with symmem's
 * import code, lets its own GPU's copy engine read them and checks every
 * byte.  Between two GPUs that is peer access at work. */
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "info.h"
#include "symmem.h"

#define PROBE_BYTES ((size_t)2 << 20)
#define PROBE_SECONDS 60
#define KINDS 2			/* 0: cuMem POSIX fd, 1: legacy IPC */

/* What one process offers the others. */
struct offer {
	int pid;
	int ok[KINDS];
	char why[KINDS][200];
	struct sm_share_info info[KINDS];
};

/* What it found of the others', for the parent: by peer process. */
struct report {
	int result[INFO_MAX_GPUS][KINDS];	/* 1 worked, 0 failed, -1 not tried */
	char why[INFO_MAX_GPUS][KINDS][200];
};

struct probe {
	int self, nproc;
	int gpu[INFO_MAX_GPUS];		/* each process's GPU */
	int end[INFO_MAX_GPUS][INFO_MAX_GPUS];	/* [p][q]: p's socket to q */
	/* The child's own state: */
	const struct info_cu *cu;
	CUdeviceptr buf[KINDS];
	size_t size[KINDS];
	struct sm_export *exp[KINDS];
	int fd;				/* the cuMem export's, borrowed */
	struct offer mine;
	struct report rep;
};

static uint8_t probe_byte(size_t k, int seed)
{
	uint32_t x = (uint32_t)(k * 2654435761u) ^ (uint32_t)(seed * 40503 + 1);

	return (uint8_t)(x ^ (x >> 13) ^ (x >> 24));
}

static int seed_of(int proc, int kind)
{
	return proc * KINDS + kind + 1;
}

static int fill(struct probe *p, int kind, char *why, size_t len)
{
	uint8_t *host = malloc(p->size[kind]);
	CUresult rc;

	if (!host) {
		info_say(why, len, "out of memory");
		return -1;
	}
	for (size_t k = 0; k < p->size[kind]; k++)
		host[k] = probe_byte(k, seed_of(p->self, kind));
	rc = p->cu->htod(p->buf[kind], host, p->size[kind]);
	free(host);
	return rc == CUDA_SUCCESS ? 0 : info_cu_fail(rc, "cuMemcpyHtoD", why, len);
}

/* A cuMem allocation on this process's GPU that others may import. */
static int alloc_cumem(struct probe *p, char *why, size_t len)
{
	const struct sm_cuda_api *api = sm_cu();
	int gpu = p->gpu[p->self];
	CUmemAllocationProp prop;
	CUmemGenericAllocationHandle h;
	CUmemAccessDesc access;
	size_t gran = 0;
	CUresult rc;

	memset(&prop, 0, sizeof(prop));
	prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
	prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	prop.location.id = gpu;
	prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
	rc = api->mem_get_allocation_granularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
	if (rc != CUDA_SUCCESS)
		return info_cu_fail(rc, "cuMemGetAllocationGranularity", why, len);
	p->size[0] = gran ? (PROBE_BYTES + gran - 1) / gran * gran : PROBE_BYTES;
	rc = api->mem_create(&h, p->size[0], &prop, 0);
	if (rc != CUDA_SUCCESS)
		return info_cu_fail(rc, "cuMemCreate with a POSIX-fd handle type", why, len);
	memset(&access, 0, sizeof(access));
	access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	access.location.id = gpu;
	access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
	if (sm_cumem_map(h, p->size[0], 0, &access, 1, "a probe allocation", &p->buf[0])) {
		api->mem_release(h);
		info_say(why, len, "%s", sm_last_error());
		return -1;
	}
	api->mem_release(h);
	return 0;
}

static int alloc_legacy(struct probe *p, char *why, size_t len)
{
	CUresult rc = sm_cu()->mem_alloc(&p->buf[1], PROBE_BYTES);

	if (rc != CUDA_SUCCESS)
		return info_cu_fail(rc, "cuMemAlloc", why, len);
	p->size[1] = PROBE_BYTES;
	return 0;
}

/* Allocates, fills and exports one kind, as the plugin's regMr does. */
static void offer(struct probe *p, int kind)
{
	char *why = p->mine.why[kind];
	size_t len = sizeof(p->mine.why[kind]);
	uint64_t offset;
	int fd = -1;

	if ((kind == 0 ? alloc_cumem(p, why, len) : alloc_legacy(p, why, len)) ||
	    fill(p, kind, why, len))
		return;
	if (sm_export_get((void *)(uintptr_t)p->buf[kind], p->size[kind], &p->exp[kind],
			  &p->mine.info[kind], &offset, &fd)) {
		info_say(why, len, "export: %s", sm_last_error());
		return;
	}
	if (kind == 0)
		p->fd = fd;
	p->mine.ok[kind] = 1;
}

/* Maps a peer's export, copies it into this GPU and checks every byte:
 * a copy engine between two GPUs, the GPU's SMs within one. */
static int take(struct probe *p, int peer, const struct offer *o, int kind, int fd, char *why,
		size_t len)
{
	size_t size = o->info[kind].alloc_size;
	struct sm_mapping *m = NULL;
	CUdeviceptr local = 0;
	uint8_t *host = NULL;
	CUresult rc;
	int ret = -1;

	if (sm_import_get(o->pid, &o->info[kind], fd, &m)) {
		info_say(why, len, "import: %s", sm_last_error());
		return -1;
	}
	host = malloc(size);
	rc = sm_cu()->mem_alloc(&local, size);
	if (!host || rc != CUDA_SUCCESS) {
		info_say(why, len, "no room for the copy of %zu bytes", size);
		goto out;
	}
	rc = p->cu->dtod(local, (CUdeviceptr)(uintptr_t)sm_mapping_base(m), size);
	if (rc != CUDA_SUCCESS) {
		info_cu_fail(rc, "copy out of the imported allocation (cuMemcpyDtoD)", why, len);
		goto out;
	}
	rc = p->cu->dtoh(host, local, size);
	if (rc != CUDA_SUCCESS) {
		info_cu_fail(rc, "cuMemcpyDtoH", why, len);
		goto out;
	}
	for (size_t k = 0; k < size; k++) {
		if (host[k] != probe_byte(k, seed_of(peer, kind))) {
			info_say(why, len, "byte %zu of the imported allocation reads 0x%02x, "
				 "the exporter wrote 0x%02x", k, host[k],
				 probe_byte(k, seed_of(peer, kind)));
			goto out;
		}
	}
	ret = 0;
out:
	if (local)
		sm_cu()->mem_free(local);
	free(host);
	sm_import_put(m);
	return ret;
}

static void take_all(struct probe *p, int peer, const struct offer *o, int fd)
{
	for (int kind = 0; kind < KINDS; kind++) {
		char *why = p->rep.why[peer][kind];
		size_t len = sizeof(p->rep.why[peer][kind]);

		if (!o->ok[kind]) {
			info_say(why, len, "export in GPU %d's process: %s", p->gpu[peer],
				 o->why[kind]);
			p->rep.result[peer][kind] = 0;
			continue;
		}
		p->rep.result[peer][kind] =
			take(p, peer, o, kind, kind == 0 ? fd : -1, why, len) == 0;
		if (kind == 0)
			fd = -1;	/* consumed */
	}
	if (fd >= 0)
		close(fd);
}

/* Every other process in turn: offers out, offers in, and a last word so
 * that no export goes before every peer has tried it. */
static void exchange(struct probe *p, uint64_t deadline)
{
	char done = 'd';

	for (int q = 0; q < p->nproc; q++)
		if (q != p->self &&
		    proc_send_fd(p->end[p->self][q], &p->mine, sizeof(p->mine),
				 p->mine.ok[0] ? p->fd : -1, deadline))
			info_say(p->rep.why[q][0], sizeof(p->rep.why[q][0]), "socket to it failed");
	for (int q = 0; q < p->nproc; q++) {
		struct offer o;
		int fd = -1;

		if (q == p->self)
			continue;
		if (proc_recv_fd(p->end[p->self][q], &o, sizeof(o), &fd, deadline)) {
			info_say(p->rep.why[q][0], sizeof(p->rep.why[q][0]), "GPU %d's process did "
				 "not answer", p->gpu[q]);
			memcpy(p->rep.why[q][1], p->rep.why[q][0], sizeof(p->rep.why[q][1]));
			p->rep.result[q][0] = p->rep.result[q][1] = 0;
			continue;
		}
		take_all(p, q, &o, fd);
	}
	for (int q = 0; q < p->nproc; q++)
		if (q != p->self)
			proc_send_fd(p->end[p->self][q], &done, 1, -1, deadline);
	for (int q = 0; q < p->nproc; q++)
		if (q != p->self)
			proc_recv_fd(p->end[p->self][q], &done, 1, &(int){ -1 }, deadline);
}

static int probe_child(void *arg, int wr)
{
	struct probe *p = arg;
	uint64_t deadline = proc_deadline(PROBE_SECONDS);
	char why[200] = "";

	for (int a = 0; a < p->nproc; a++)
		for (int b = 0; b < p->nproc; b++)
			if (a != p->self && a != b)
				close(p->end[a][b]);
	for (int q = 0; q < INFO_MAX_GPUS; q++)
		p->rep.result[q][0] = p->rep.result[q][1] = -1;
	p->mine.pid = (int)getpid();
	p->fd = -1;
	p->cu = info_cu(why, sizeof(why));
	if (!p->cu || sm_ctx_enter(p->gpu[p->self], NULL, NULL)) {
		for (int kind = 0; kind < KINDS; kind++)
			info_say(p->mine.why[kind], sizeof(p->mine.why[kind]), "%s",
				 why[0] ? why : sm_last_error());
	} else {
		offer(p, 0);
		offer(p, 1);
	}
	exchange(p, deadline);
	for (int kind = 0; kind < KINDS; kind++) {
		sm_export_put(p->exp[kind]);
		if (p->buf[kind] && kind == 0)
			sm_cumem_unmap(p->buf[0], p->size[0]);
		else if (p->buf[kind])
			sm_cu()->mem_free(p->buf[1]);
	}
	return proc_write(wr, &p->rep, sizeof(p->rep)) ? 1 : 0;
}

/* Folds process `self`'s findings into pair[from][to]; a failure wins
 * over a success where two processes share a GPU. */
static void merge(struct info_gpus *g, const struct probe *p, int self, const struct report *r)
{
	for (int q = 0; q < p->nproc; q++) {
		struct info_pair *pair = &g->pair[p->gpu[q]][p->gpu[self]];

		if (q == self)
			continue;
		for (int kind = 0; kind < KINDS; kind++) {
			int *res = kind ? &pair->ipc : &pair->cumem;
			char *why = kind ? pair->ipc_why : pair->cumem_why;
			size_t len = kind ? sizeof(pair->ipc_why) : sizeof(pair->cumem_why);

			if (r->result[q][kind] < 0 || *res == 0)
				continue;
			*res = r->result[q][kind];
			if (*res == 0)
				info_say(why, len, "%s", r->why[q][kind]);
		}
	}
}

static int make_sockets(struct probe *p)
{
	for (int a = 0; a < p->nproc; a++) {
		for (int b = a + 1; b < p->nproc; b++) {
			int sv[2];

			if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv))
				return -1;
			p->end[a][b] = sv[0];
			p->end[b][a] = sv[1];
		}
	}
	return 0;
}

static void close_sockets(struct probe *p)
{
	for (int a = 0; a < p->nproc; a++)
		for (int b = 0; b < p->nproc; b++)
			if (a != b && p->end[a][b] >= 0)
				close(p->end[a][b]);
}

void info_gpus_probe(struct info_gpus *g)
{
	static struct probe p;	/* large: not on the stack */
	static struct report rep;
	pid_t pid[INFO_MAX_GPUS];
	int rd[INFO_MAX_GPUS];
	uint64_t deadline;

	if (!g->loaded || g->shown < 1) {
		info_say(g->probe_why, sizeof(g->probe_why), "no GPU to try");
		return;
	}
	memset(&p, 0, sizeof(p));
	memset(p.end, -1, sizeof(p.end));
	p.nproc = g->shown == 1 ? 2 : g->shown;
	for (int i = 0; i < p.nproc; i++)
		p.gpu[i] = g->shown == 1 ? 0 : i;
	if (make_sockets(&p)) {
		close_sockets(&p);
		info_say(g->probe_why, sizeof(g->probe_why), "no sockets for the tries");
		return;
	}
	for (int i = 0; i < p.nproc; i++) {
		p.self = i;
		pid[i] = proc_start(probe_child, &p, &rd[i]);
	}
	close_sockets(&p);
	deadline = proc_deadline(PROBE_SECONDS + 30);
	for (int i = 0; i < p.nproc; i++) {
		int ok;

		if (pid[i] < 0) {
			info_say(g->probe_why, sizeof(g->probe_why), "cannot start the tries' "
				 "processes");
			continue;
		}
		ok = proc_read(rd[i], &rep, sizeof(rep), deadline) == 0;
		close(rd[i]);
		/* A whole report counts: past a deadline that a hung process
		 * used up, one that answered may be killed before its exit. */
		proc_reap(pid[i], deadline);
		if (!ok)
			info_say(g->probe_why, sizeof(g->probe_why), "GPU %d's process failed or "
				 "did not answer within %d s", p.gpu[i], PROBE_SECONDS + 30);
		else
			merge(g, &p, i, &rep);
	}
}
