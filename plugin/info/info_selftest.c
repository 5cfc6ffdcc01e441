/* symmem-info --selftest: bytes through the plugin's own net table on
 * every path it can take here, two processes per path (info_xfer.c):
 * host memory through shared memory, host memory over TCP loopback, and
 * GPU memory between every pair of GPUs by copy engines.  GPU pairs that
 * share no GPU run at once (a round-robin schedule), so that 8 GPUs take
 * 7 rounds, not 28.  A path that cannot run here is listed as skipped,
 * with the reason. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "info.h"

#define HOST_MSG ((size_t)1 << 20)
#define GPU_MSG ((size_t)32 << 20)
#define MSGS 8
#define PATH_SECONDS 120
#define MAX_PATHS (2 + INFO_MAX_GPUS * (INFO_MAX_GPUS - 1) / 2)

struct path {
	char name[32];
	char what[160];
	const char *backend;
	int gpu[2];
	size_t msg;
	const char *skip;	/* why it cannot run here, NULL */
	char skip_buf[INFO_WHY];
	/* While it runs: */
	struct xfer_args args[2];
	pid_t pid[2];
	int rd[2];
	struct xfer_result r[2];
	int ok;
};

static struct path paths[MAX_PATHS];
static int npaths;

static struct path *add(const char *name, const char *backend, int a, int b, size_t msg)
{
	struct path *p = &paths[npaths++];

	memset(p, 0, sizeof(*p));
	info_say(p->name, sizeof(p->name), "%s", name);
	p->backend = backend;
	p->gpu[0] = a;
	p->gpu[1] = b;
	p->msg = msg;
	p->pid[0] = p->pid[1] = -1;
	return p;
}

/* Why GPU paths cannot run here, NULL when they can. */
static const char *gpu_skip(const struct info_sim *s, const struct info_gpus *g)
{
	if (!g->loaded)
		return g->why;
	if (g->shown < 1)
		return "no GPU visible";
	if (!s->cfg.dma_enable)
		return "NCCL_DMA_ENABLE=0: the plugin moves host memory only";
	return NULL;
}

static void plan(const struct info_sim *s, const struct info_gpus *g)
{
	const char *skip = gpu_skip(s, g);
	struct path *p;

	npaths = 0;
	p = add("host", "shm", -1, -1, HOST_MSG);
	info_say(p->what, sizeof(p->what), "host memory, shared memory between two processes");
	p = add("tcp", "tcp", -1, -1, HOST_MSG);
	info_say(p->what, sizeof(p->what), "host memory, TCP loopback (NCCL_SYMMEM_BACKEND=tcp)");
	if (skip) {
		p = add("gpu", "shm", -1, -1, GPU_MSG);
		info_say(p->what, sizeof(p->what), "GPU memory between GPUs, copy engines");
		info_say(p->skip_buf, sizeof(p->skip_buf), "%s", skip);
		p->skip = p->skip_buf;
		return;
	}
	for (int k = 0; k < info_pair_count(g); k++) {
		char name[32];
		int a, b;

		info_pair_at(g, k, &a, &b);
		info_say(name, sizeof(name), "gpu%d-gpu%d", a, b);
		p = add(name, "shm", a, b, GPU_MSG);
		/* Within one GPU the driver moves the bytes with its SMs, not a
		 * copy engine (bench/results/hop.md): a correctness check. */
		if (a == b)
			info_say(p->what, sizeof(p->what), "GPU memory (cuMemAlloc) within GPU %d, "
				 "two processes (the GPU's own SMs move it: a check of the "
				 "mappings, not of copy engines)", a);
		else
			info_say(p->what, sizeof(p->what), "GPU memory (cuMemAlloc) from GPU %d to "
				 "GPU %d and back, copy engines", a, b);
	}
}

static void start(struct path *p, const char *lib)
{
	int sv[2];

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv)) {
		info_say(p->r[0].why, sizeof(p->r[0].why), "no socket pair for the two processes");
		return;
	}
	for (int i = 0; i < 2; i++) {
		struct xfer_args *a = &p->args[i];

		a->lib = lib;
		a->path = p->name;
		a->backend = p->backend;
		a->ctl = sv[i];
		a->other = sv[!i];
		a->side = i;
		a->gpu = p->gpu[i];
		a->msg = p->msg;
		a->nmsg = MSGS;
		p->pid[i] = proc_start(xfer_side, a, &p->rd[i]);
	}
	close(sv[0]);
	close(sv[1]);
}

static void finish(struct path *p, uint64_t deadline)
{
	for (int i = 0; i < 2; i++) {
		int got;

		if (p->pid[i] < 0) {
			if (!p->r[i].why[0])
				info_say(p->r[i].why, sizeof(p->r[i].why), "cannot start its "
					 "process");
			continue;
		}
		got = proc_read(p->rd[i], &p->r[i], sizeof(p->r[i]), deadline) == 0;
		close(p->rd[i]);
		if (proc_reap(p->pid[i], deadline) < 0 && !got)
			info_say(p->r[i].why, sizeof(p->r[i].why), "its process died or did not "
				 "end within %d s", PATH_SECONDS);
		else if (!got)
			info_say(p->r[i].why, sizeof(p->r[i].why), "its process ended without a "
				 "report");
	}
	p->ok = p->r[0].ok && p->r[1].ok;
}

/* The paths of one round run at once. */
static void run_round(const int *idx, int n, const char *lib)
{
	uint64_t deadline = proc_deadline(PATH_SECONDS);

	for (int i = 0; i < n; i++)
		start(&paths[idx[i]], lib);
	for (int i = 0; i < n; i++)
		finish(&paths[idx[i]], deadline);
}

static int path_of(int a, int b)
{
	for (int i = 0; i < npaths; i++)
		if (paths[i].gpu[0] == a && paths[i].gpu[1] == b)
			return i;
	return -1;
}

/* The circle method: player m-1 stays, the others turn one place per
 * round; a pair with the stand-in player (odd GPU counts) sits out. */
static void run_gpu_rounds(const struct info_gpus *g, const char *lib)
{
	int n = g->shown, m = n % 2 ? n + 1 : n, idx[INFO_MAX_GPUS];

	if (n == 1) {
		idx[0] = path_of(0, 0);
		run_round(idx, 1, lib);
		return;
	}
	for (int r = 0; r < m - 1; r++) {
		int k = 0;

		for (int i = 0; i < m / 2; i++) {
			int a = i == 0 ? m - 1 : (r + i) % (m - 1);
			int b = i == 0 ? r : (r - i + m - 1) % (m - 1);
			int lo = a < b ? a : b, hi = a < b ? b : a;

			if (hi < n && path_of(lo, hi) >= 0)
				idx[k++] = path_of(lo, hi);
		}
		run_round(idx, k, lib);
	}
}

/* The side that failed first: the other one only saw it go. */
static const char *why_failed(const struct path *p)
{
	for (int i = 0; i < 2; i++)
		if (!p->r[i].ok && p->r[i].why[0] && strncmp(p->r[i].why, "the other side", 14))
			return p->r[i].why;
	return p->r[0].why[0] ? p->r[0].why : p->r[1].why;
}

static void emit(struct out *o, const struct path *p)
{
	const char *result = p->skip ? "skipped" : p->ok ? "passed" : "failed";

	out_item(o);
	out_str(o, "path", p->name);
	out_str(o, "what", p->what);
	out_str(o, "result", result);
	out_num(o, "latency_us", p->ok ? p->r[0].lat_us : NAN);
	out_num(o, "gbps_a_to_b", p->ok ? p->r[1].gbps : NAN);
	out_num(o, "gbps_b_to_a", p->ok ? p->r[0].gbps : NAN);
	out_int(o, "message_bytes", (long long)p->msg);
	out_int(o, "messages", MSGS);
	out_str(o, "why", p->skip ? p->skip : p->ok ? NULL : why_failed(p));
	out_item_end(o);
}

int info_selftest(struct out *o, const struct info_sim *s, const struct info_libs *l,
		  const struct info_gpus *g)
{
	int passed = 0, failed = 0, skipped = 0;

	out_obj(o, "selftest");
	out_str(o, "net_plugin", l->net.path[0] ? l->net.path : NULL);
	out_str(o, "build", l->net.build[0] ? l->net.build : NULL);
	if (!l->net.path[0]) {
		out_str(o, "why", l->net.how);
		out_obj_end(o);
		return INFO_NOT_USABLE;
	}
	plan(s, g);
	/* One at a time: on a small host two would share the cores. */
	run_round((int[]){ 0 }, 1, l->net.path);
	run_round((int[]){ 1 }, 1, l->net.path);
	if (!paths[2].skip)
		run_gpu_rounds(g, l->net.path);
	out_list(o, "paths");
	for (int i = 0; i < npaths; i++) {
		emit(o, &paths[i]);
		skipped += paths[i].skip != NULL;
		passed += !paths[i].skip && paths[i].ok;
		failed += !paths[i].skip && !paths[i].ok;
	}
	out_list_end(o);
	out_int(o, "passed", passed);
	out_int(o, "failed", failed);
	out_int(o, "skipped", skipped);
	out_obj_end(o);
	return failed ? INFO_NOT_USABLE : INFO_USABLE;
}
